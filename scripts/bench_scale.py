"""Ten million votes in the store: aggregate them for a fit (SQL GROUP BY vs reading rows), replay live Elo.

Usage::

    python scripts/bench_scale.py                                  # 10M votes, SQLite file in a temp dir
    python scripts/bench_scale.py --votes 1000000
    python scripts/bench_scale.py --url postgresql://postgres@127.0.0.1:5432/bench_scale --votes 2000000

The database is filled with seeded synthetic battles (the generator of ``bench_fit.py``) by bulk
inserts straight through the driver -- ``executemany`` with ``synchronous=OFF`` on SQLite, ``COPY`` on
PostgreSQL -- because filling it is the fixture, not the figure. The figures are then measured through the
project's own functions, each in a fresh subprocess so that its peak memory (``ru_maxrss``) is its own:

* ``group-by``: :func:`votes.queries.load_pair_counts` (``GROUP BY model_a, model_b, winner`` in SQL);
* ``rows``: :func:`votes.queries.load_battles` (every vote row into arrays) and then
  :func:`leaderboard.data.aggregate_codes`, the way a fit would aggregate without SQL;
* ``elo-replay``: :func:`votes.ratings.rebuild_live_ratings`, one transaction that replays every vote in
  commit order into the live ratings.

A PostgreSQL URL names a database this script may drop and recreate. The last line is a JSON object.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _bench_common import (  # noqa: E402
    current_rss_mb,
    emit_json_line,
    machine_info,
    peak_rss_mb,
    print_table,
    synthetic_battles,
)

from leaderboard.data import OUTCOME_STRINGS, Outcome  # noqa: E402

MEASUREMENTS = ("group-by", "rows", "elo-replay")
CHUNK = 500_000
START = np.datetime64("2024-01-01T00:00:00", "us")


def _timestamps(start: int, stop: int, n_votes: int) -> np.ndarray[Any, np.dtype[np.str_]]:
    """Vote times spread over a year, increasing with the vote id, in SQLAlchemy's text format."""
    year_us = 365 * 24 * 3600 * 1_000_000
    offsets = (np.arange(start, stop, dtype=np.int64) * (year_us // max(n_votes, 1))).astype(
        "timedelta64[us]"
    )
    text = np.datetime_as_string(START + offsets, unit="us")
    out: np.ndarray[Any, np.dtype[np.str_]] = np.char.replace(text, "T", " ")
    return out


def fill_database(url: str, n_votes: int, n_models: int, seed: int) -> dict[str, Any]:
    """Create the schema and bulk-load ``n_votes`` battles with their votes; returns what it did."""
    from sqlalchemy import insert, text
    from sqlmodel import SQLModel

    from votes.db import is_sqlite, make_engine
    from votes.tables import battle_t, model_t, vote_t

    battles = synthetic_battles(n_votes, n_models, random_state=seed)
    engine = make_engine(url)
    SQLModel.metadata.create_all(engine)
    t0 = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(
            insert(model_t),
            [
                {"id": i + 1, "name": name, "active": True, "created_at": datetime(2024, 1, 1, tzinfo=UTC)}
                for i, name in enumerate(battles.models)
            ],
        )
    winners = np.array([OUTCOME_STRINGS[Outcome(i)] for i in range(4)], dtype=object)
    # Secondary indexes are dropped for the load and built once afterwards (much faster than row by row).
    indexes = [ix for t in (battle_t, vote_t) for ix in t.indexes]
    with engine.begin() as conn:
        for ix in indexes:
            ix.drop(conn)
    raw = engine.raw_connection()
    try:
        if is_sqlite(url):
            cur = raw.cursor()
            # The fixture's load need not be durable; the measurements reopen with the store's settings.
            cur.execute("PRAGMA synchronous=OFF")
            cur.execute("BEGIN")
            for start in range(0, n_votes, CHUNK):
                stop = min(start + CHUNK, n_votes)
                ids = range(start + 1, stop + 1)
                ts = _timestamps(start, stop, n_votes).tolist()
                cur.executemany(
                    "INSERT INTO battle (id, model_a_id, model_b_id, issued_at, source)"
                    " VALUES (?, ?, ?, ?, 'site')",
                    list(
                        zip(
                            ids,
                            (battles.model_a[start:stop] + 1).tolist(),
                            (battles.model_b[start:stop] + 1).tolist(),
                            ts,
                            strict=True,
                        )
                    ),
                )
                cur.executemany(
                    "INSERT INTO vote (id, battle_id, winner, created_at) VALUES (?, ?, ?, ?)",
                    list(zip(ids, ids, winners[battles.outcome[start:stop]].tolist(), ts, strict=True)),
                )
            cur.execute("COMMIT")
            cur.execute("ANALYZE")
            cur.close()
        else:
            pg = raw.driver_connection
            assert pg is not None
            with pg.cursor() as cur:
                for table, columns in (
                    ("battle", "id, model_a_id, model_b_id, issued_at, source"),
                    ("vote", "id, battle_id, winner, created_at"),
                ):
                    with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                        for start in range(0, n_votes, CHUNK):
                            stop = min(start + CHUNK, n_votes)
                            copy.write(_tsv(table, battles, winners, start, stop, n_votes))
            pg.commit()
            with pg.cursor() as cur:
                for table in ("model", "battle", "vote"):
                    cur.execute(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT max(id) FROM {table}))"
                    )
                cur.execute("ANALYZE")
            pg.commit()
    finally:
        raw.close()
    with engine.begin() as conn:
        for ix in indexes:
            ix.create(conn)
        conn.exec_driver_sql("ANALYZE")
    seconds = time.perf_counter() - t0
    with engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM vote")).scalar_one()
    engine.dispose()
    return {"load_s": seconds, "rows": int(count), "cells_expected": battles.aggregate().n_cells}


def _tsv(
    table: str, battles: Any, winners: np.ndarray[Any, Any], start: int, stop: int, n_votes: int
) -> bytes:
    ids = np.arange(start + 1, stop + 1).astype(str)
    ts = _timestamps(start, stop, n_votes).astype(object) + "+00"
    if table == "battle":
        cols = [
            ids,
            (battles.model_a[start:stop] + 1).astype(str),
            (battles.model_b[start:stop] + 1).astype(str),
            ts,
        ]
        lines = ["\t".join(row) + "\tsite\n" for row in zip(*(c.tolist() for c in cols), strict=True)]
    else:
        cols = [ids, ids, winners[battles.outcome[start:stop]], ts]
        lines = ["\t".join(row) + "\n" for row in zip(*(np.asarray(c).tolist() for c in cols), strict=True)]
    buf = io.StringIO()
    buf.writelines(lines)
    return buf.getvalue().encode()


def worker(url: str, what: str) -> int:
    """Measure one thing on the filled database and print it as one JSON line."""
    from leaderboard.data import aggregate_codes
    from votes.db import make_engine
    from votes.queries import load_battles, load_pair_counts
    from votes.ratings import rebuild_live_ratings

    engine = make_engine(url)
    with engine.connect() as conn:  # connect (and import the driver) before measuring
        conn.exec_driver_sql("SELECT 1")
    rss_before = current_rss_mb()
    t0 = time.perf_counter()
    if what == "group-by":
        with engine.connect() as conn:
            counts = load_pair_counts(conn)
        detail: dict[str, Any] = {"cells": counts.n_cells, "votes": counts.n_votes}
    elif what == "rows":
        with engine.connect() as conn:
            arrays = load_battles(conn)
        counts = aggregate_codes(arrays.model_a, arrays.model_b, arrays.outcome, models=arrays.models)
        detail = {"cells": counts.n_cells, "votes": counts.n_votes}
    else:
        with engine.begin() as conn:
            standings = rebuild_live_ratings(conn)
        detail = {"games": int(np.sum(standings.games)) // 2}
    seconds = time.perf_counter() - t0
    engine.dispose()
    print(
        json.dumps(
            {
                "what": what,
                "seconds": seconds,
                "peak_rss_mb": peak_rss_mb(),
                "rss_before_mb": rss_before,
                **detail,
            }
        )
    )
    return 0


def _measure(url: str, what: str, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", what, "--url", url]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"what": what, "failed": f"timed out after {timeout:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"what": what, "failed": f"exit {proc.returncode}: " + " / ".join(tail)}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _reset_postgres(url: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from votes.db import make_engine, normalise_url

    target = make_url(normalise_url(url))
    admin = make_engine(target.set(database="postgres").render_as_string(hide_password=False))
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{target.database}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{target.database}"'))
    admin.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=10_000_000)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--url", help="database URL (default: a new SQLite file in a temporary folder)")
    parser.add_argument(
        "--only", default=",".join(MEASUREMENTS), help=f"comma list out of {', '.join(MEASUREMENTS)}"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per measurement")
    parser.add_argument("--worker", choices=MEASUREMENTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.url, args.worker)

    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        url = args.url or f"sqlite:///{tmp}/scale.db"
        backend = "sqlite" if url.startswith("sqlite") else "postgresql"
        if backend == "postgresql":
            _reset_postgres(url)
        elif args.url:
            path = Path(url.split("///", 1)[1])
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        print(f"filling {backend} with {args.votes:,} votes among {args.models} models ...", flush=True)
        fill = fill_database(url, args.votes, args.models, args.seed)
        size_mb = Path(url.split("///", 1)[1]).stat().st_size / 2**20 if backend == "sqlite" else None
        print(f"  loaded {fill['rows']:,} votes in {fill['load_s']:.1f} s", flush=True)
        results = {w: _measure(url, w, args.timeout) for w in wanted}

    rows = []
    for what, res in results.items():
        if "failed" in res:
            rows.append([what, None, None, None, res["failed"][:80]])
            continue
        note = f"{res['cells']:,} cells" if "cells" in res else f"{res.get('games', 0):,} games"
        rows.append(
            [what, res["seconds"], res["peak_rss_mb"], res["peak_rss_mb"] - res["rss_before_mb"], note]
        )
    print()
    print_table(["measurement", "seconds", "peak MB", "+MB", "result"], rows)
    print(
        "\npeak MB: the measuring process's ru_maxrss; +MB: above its resident size before the measurement."
    )

    def fig(what: str, key: str) -> Any:
        res = results.get(what, {})
        return res.get(key)

    ok = all("failed" not in r for r in results.values())
    consistent = (
        fig("group-by", "cells") == fig("rows", "cells") == fill["cells_expected"]
        if {"group-by", "rows"} <= set(results)
        else None
    )
    emit_json_line(
        {
            "benchmark": "scale",
            "backend": backend,
            "votes": fill["rows"],
            "models": args.models,
            "load_s": fill["load_s"],
            "db_size_mb": size_mb,
            "groupby_s": fig("group-by", "seconds"),
            "groupby_peak_mb": fig("group-by", "peak_rss_mb"),
            "rows_s": fig("rows", "seconds"),
            "rows_peak_mb": fig("rows", "peak_rss_mb"),
            "elo_replay_s": fig("elo-replay", "seconds"),
            "elo_replay_peak_mb": fig("elo-replay", "peak_rss_mb"),
            "cells_agree": consistent,
            "errors": {w: r["failed"] for w, r in results.items() if "failed" in r},
            "machine": machine_info(),
        }
    )
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
