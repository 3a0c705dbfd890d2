"""Ten million votes in the store: aggregate them for a fit (SQL GROUP BY vs reading rows), replay live Elo.

Usage::

    python scripts/bench_scale.py                                  # 10M votes, SQLite file in a temp dir
    python scripts/bench_scale.py --votes 1000000
    python scripts/bench_scale.py --url postgresql://postgres@127.0.0.1:5432/bench_scale --votes 2000000

The database is filled with seeded synthetic battles (the generator of ``bench_fit.py``) by bulk
inserts straight through the driver -- ``executemany`` with ``synchronous=OFF`` on SQLite, ``COPY`` on
PostgreSQL -- because filling it is the fixture, not the figure. The figures are then measured through the
project's own functions, each in a fresh subprocess so that its peak memory (``ru_maxrss``) is its own:

* ``group-by``: :func:`votes.reads.cells.load_pair_counts` (``GROUP BY model_a, model_b, winner`` in SQL,
  on the vote's own model columns: one scan of the covering index ``ix_vote_cells``);
* ``group-by-counted``: the same without flagged annotators' votes (``exclude_flagged``, the published
  board's default), through ``NOT IN (SELECT id FROM annotator WHERE flagged)`` on the same index;
* ``group-by-since``: the same restricted to the last half of the votes (``since``), the slower path of
  time-filtered slices, which has to read the vote rows;
* ``rows``: :func:`votes.reads.scans.load_battles` (every vote row into arrays, streamed in chunks) and then
  :func:`leaderboard.data.aggregate_codes`, the way a fit would aggregate without SQL;
* ``elo-replay``: :func:`votes.voting.ratings.rebuild_live_ratings`, one transaction that streams every
counted
  vote in commit order through the Elo replay into the live ratings;
* ``sha256``: :func:`votes.reads.exports.votes_sha256` over all votes, the canonical JSONL export streamed
  through sha256 (what backups record, and what snapshots recorded before the ledger);
* ``ledger``: :func:`votes.reads.ledger.ledger_sha256` over all votes, the hash publishing records (lines
  formatted by the database, hashed in blocks); the table's last line is its speed-up over ``sha256``.

Votes are spread over ``--annotators`` annotators, of which ``--flagged`` are flagged. On PostgreSQL the
load ends with ``VACUUM ANALYZE`` (what autovacuum does for a settled table) so the visibility map allows
index-only scans. The query plan of the ``GROUP BY`` is printed.

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
    remove_sqlite_store,
    synthetic_battles,
)

from leaderboard.data import OUTCOME_STRINGS, Outcome  # noqa: E402

MEASUREMENTS = ("group-by", "group-by-counted", "group-by-since", "rows", "elo-replay", "sha256", "ledger")
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


def fill_database(
    url: str, n_votes: int, n_models: int, seed: int, *, n_annotators: int = 1000, n_flagged: int = 10
) -> dict[str, Any]:
    """Create the schema and bulk-load ``n_votes`` battles with their votes; returns what it did."""
    from sqlalchemy import insert, text
    from sqlmodel import SQLModel

    from votes.db import is_sqlite, make_engine
    from votes.tables import annotator_t, battle_t, model_t, vote_t

    battles = synthetic_battles(n_votes, n_models, random_state=seed)
    annotator = np.random.default_rng(seed + 1).integers(1, n_annotators + 1, n_votes)
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
        conn.execute(
            insert(annotator_t),
            [
                {
                    "id": i,
                    "kind": "anonymous",
                    "flagged": i <= n_flagged,
                    "created_at": datetime(2024, 1, 1, tzinfo=UTC),
                }
                for i in range(1, n_annotators + 1)
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
                a_ids = (battles.model_a[start:stop] + 1).tolist()
                b_ids = (battles.model_b[start:stop] + 1).tolist()
                who = annotator[start:stop].tolist()
                cur.executemany(
                    "INSERT INTO battle (id, model_a_id, model_b_id, annotator_id, issued_at, source)"
                    " VALUES (?, ?, ?, ?, ?, 'site')",
                    list(zip(ids, a_ids, b_ids, who, ts, strict=True)),
                )
                cur.executemany(
                    "INSERT INTO vote (id, battle_id, model_a_id, model_b_id, annotator_id, winner,"
                    " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    list(
                        zip(
                            ids,
                            ids,
                            a_ids,
                            b_ids,
                            who,
                            winners[battles.outcome[start:stop]].tolist(),
                            ts,
                            strict=True,
                        )
                    ),
                )
            cur.execute("COMMIT")
            cur.execute("ANALYZE")
            cur.close()
        else:
            pg = raw.driver_connection
            assert pg is not None
            with pg.cursor() as cur:
                for table, columns in (
                    ("battle", "id, model_a_id, model_b_id, annotator_id, issued_at, source"),
                    ("vote", "id, battle_id, model_a_id, model_b_id, annotator_id, winner, created_at"),
                ):
                    with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                        for start in range(0, n_votes, CHUNK):
                            stop = min(start + CHUNK, n_votes)
                            copy.write(_tsv(table, battles, annotator, winners, start, stop, n_votes))
            pg.commit()
            with pg.cursor() as cur:
                for table in ("model", "annotator", "battle", "vote"):
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
    if not is_sqlite(url):
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    seconds = time.perf_counter() - t0
    with engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM vote")).scalar_one()
    engine.dispose()
    return {"load_s": seconds, "rows": int(count), "cells_expected": battles.counts().n_cells}


def _tsv(
    table: str,
    battles: Any,
    annotator: np.ndarray[Any, Any],
    winners: np.ndarray[Any, Any],
    start: int,
    stop: int,
    n_votes: int,
) -> bytes:
    ids = np.arange(start + 1, stop + 1).astype(str)
    ts = _timestamps(start, stop, n_votes).astype(object) + "+00"
    a_ids = (battles.model_a[start:stop] + 1).astype(str)
    b_ids = (battles.model_b[start:stop] + 1).astype(str)
    who = annotator[start:stop].astype(str)
    if table == "battle":
        cols = [ids, a_ids, b_ids, who, ts]
        lines = ["\t".join(row) + "\tsite\n" for row in zip(*(c.tolist() for c in cols), strict=True)]
    else:
        cols = [ids, ids, a_ids, b_ids, who, winners[battles.outcome[start:stop]], ts]
        lines = ["\t".join(row) + "\n" for row in zip(*(np.asarray(c).tolist() for c in cols), strict=True)]
    buf = io.StringIO()
    buf.writelines(lines)
    return buf.getvalue().encode()


def _plan(conn: Any, stmt: Any) -> str:
    """The database's plan for ``stmt`` (EXPLAIN QUERY PLAN on SQLite, EXPLAIN on PostgreSQL)."""
    sql = str(stmt.compile(conn, compile_kwargs={"literal_binds": True}))
    if conn.dialect.name == "sqlite":
        return " / ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
    return " / ".join(str(r[0]).strip() for r in conn.exec_driver_sql("EXPLAIN " + sql))


def worker(url: str, what: str) -> int:
    """Measure one thing on the filled database and print it as one JSON line."""
    from votes.db import make_engine
    from votes.dialects import dialect_of
    from votes.reads.cells import load_pair_counts, pair_counts_statement
    from votes.reads.exports import votes_sha256
    from votes.reads.filters import VoteFilter
    from votes.reads.scans import load_battles
    from votes.voting.ratings import rebuild_live_ratings

    engine = make_engine(url)
    with engine.connect() as conn:  # connect (and import the driver) before measuring
        conn.exec_driver_sql("SELECT 1")
        middle = conn.exec_driver_sql("SELECT created_at FROM vote WHERE id = (SELECT max(id) / 2 FROM vote)")
        since = middle.scalar_one()
    since = since if isinstance(since, datetime) else datetime.fromisoformat(str(since))
    since = since if since.tzinfo else since.replace(tzinfo=UTC)
    filters = {
        "group-by": VoteFilter(),
        "group-by-counted": VoteFilter(exclude_flagged=True),
        "group-by-since": VoteFilter(since=since),
    }
    rss_before = current_rss_mb()
    t0 = time.perf_counter()
    detail: dict[str, Any]
    if what in filters:
        with engine.connect() as conn:
            counts = load_pair_counts(conn, filters=filters[what])
        detail = {"cells": counts.n_cells, "votes": counts.n_votes}
    elif what == "rows":
        with engine.connect() as conn:
            counts = load_battles(conn).counts()
        detail = {"cells": counts.n_cells, "votes": counts.n_votes}
    elif what == "sha256":
        with engine.connect() as conn:
            digest = votes_sha256(conn)
        detail = {"sha256": digest}
    elif what == "ledger":
        from votes.reads.ledger import ledger_sha256

        with engine.connect() as conn:
            digest = ledger_sha256(conn)
        detail = {"sha256": digest}
    else:
        with engine.begin() as conn:
            standings = rebuild_live_ratings(conn)
        detail = {"games": int(np.sum(standings.games)) // 2}
    if what in filters:
        with engine.connect() as conn:
            detail["plan"] = _plan(conn, pair_counts_statement(filters[what], dialect=dialect_of(conn)))
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


def _measure(url: str, what: str, timeout: float, extra: list[str] | None = None) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", what, "--url", url, *(extra or [])]
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


def _count_votes(url: str) -> int:
    from sqlalchemy import text

    from votes.db import make_engine

    engine = make_engine(url)
    with engine.connect() as conn:
        n = int(conn.execute(text("SELECT count(*) FROM vote")).scalar_one())
    engine.dispose()
    return n


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
    parser.add_argument("--annotators", type=int, default=1000)
    parser.add_argument("--flagged", type=int, default=10, help="how many of the annotators are flagged")
    parser.add_argument("--url", help="database URL (default: a new SQLite file in a temporary folder)")
    parser.add_argument(
        "--only", default=",".join(MEASUREMENTS), help=f"comma list out of {', '.join(MEASUREMENTS)}"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per measurement")
    parser.add_argument(
        "--reuse", action="store_true", help="measure the database at --url as it is, without refilling it"
    )
    parser.add_argument("--worker", choices=(*MEASUREMENTS, "fill"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker == "fill":
        fill = fill_database(
            args.url, args.votes, args.models, args.seed, n_annotators=args.annotators, n_flagged=args.flagged
        )
        print(json.dumps(fill))
        return 0
    if args.worker:
        return worker(args.url, args.worker)
    if args.reuse and not args.url:
        parser.error("--reuse needs --url")

    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        url = args.url or f"sqlite:///{tmp}/scale.db"
        backend = "sqlite" if url.startswith("sqlite") else "postgresql"
        if args.reuse:
            fill = {"load_s": None, "rows": _count_votes(url), "cells_expected": None}
        else:
            if backend == "postgresql":
                _reset_postgres(url)
            elif args.url:
                remove_sqlite_store(Path(url.split("///", 1)[1]))
            print(f"filling {backend} with {args.votes:,} votes among {args.models} models ...", flush=True)
            # In its own process too: a child's ru_maxrss starts at its parent's resident size, so the
            # parent must stay small for the measurements' peaks to be their own.
            fill_args = ["--votes", str(args.votes), "--models", str(args.models), "--seed", str(args.seed)]
            fill_args += ["--annotators", str(args.annotators), "--flagged", str(args.flagged)]
            fill = _measure(url, "fill", args.timeout, fill_args)
            if "failed" in fill:
                print(f"fill failed: {fill['failed']}", file=sys.stderr)
                return 1
            print(f"  loaded {fill['rows']:,} votes in {fill['load_s']:.1f} s", flush=True)
        size_mb = Path(url.split("///", 1)[1]).stat().st_size / 2**20 if backend == "sqlite" else None
        results = {w: _measure(url, w, args.timeout) for w in wanted}

    rows = []
    for what, res in results.items():
        if "failed" in res:
            rows.append([what, None, None, None, res["failed"][:80]])
            continue
        if "cells" in res:
            note = f"{res['cells']:,} cells, {res['votes']:,.0f} votes"
        elif "sha256" in res:
            note = f"sha256 {res['sha256'][:16]}..."
        else:
            note = f"{res.get('games', 0):,} games"
        rows.append(
            [what, res["seconds"], res["peak_rss_mb"], res["peak_rss_mb"] - res["rss_before_mb"], note]
        )
    print()
    print_table(["measurement", "seconds", "peak MB", "+MB", "result"], rows)
    print(
        "\npeak MB: the measuring process's ru_maxrss; +MB: above its resident size before the measurement."
    )
    for what, res in results.items():
        if "plan" in res:
            print(f"plan {what}: {res['plan']}")

    def fig(what: str, key: str) -> Any:
        res = results.get(what, {})
        return res.get(key)

    json_s, ledger_s = fig("sha256", "seconds"), fig("ledger", "seconds")
    if json_s and ledger_s:
        print(f"ledger hash {json_s / ledger_s:.1f}x faster than the JSONL hash, measured side by side")

    ok = all("failed" not in r for r in results.values())
    consistent = (
        fig("group-by", "cells") == fig("rows", "cells") == (fill["cells_expected"] or fig("rows", "cells"))
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
            "groupby_counted_s": fig("group-by-counted", "seconds"),
            "groupby_counted_peak_mb": fig("group-by-counted", "peak_rss_mb"),
            "groupby_since_s": fig("group-by-since", "seconds"),
            "groupby_since_peak_mb": fig("group-by-since", "peak_rss_mb"),
            "elo_replay_s": fig("elo-replay", "seconds"),
            "elo_replay_peak_mb": fig("elo-replay", "peak_rss_mb"),
            "sha256_s": fig("sha256", "seconds"),
            "sha256_peak_mb": fig("sha256", "peak_rss_mb"),
            "ledger_s": ledger_s,
            "ledger_peak_mb": fig("ledger", "peak_rss_mb"),
            "annotators": args.annotators,
            "flagged": args.flagged,
            "cells_agree": consistent,
            "errors": {w: r["failed"] for w, r in results.items() if "failed" in r},
            "machine": machine_info(),
        }
    )
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
