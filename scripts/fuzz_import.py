"""Fuzz the importers: a malformed file gets a clear error (``InputError``) and changes nothing.

Two engines:

* ``hypothesis`` (default): structured fuzzing. Files are built from rows that are almost right (real
  column names, plausible and hostile values: wrong types, NaN, NUL bytes, lone surrogates, huge numbers,
  unknown winners, a model battling itself, broken conversations) and written as JSONL, JSON, CSV, gzip or
  raw bytes, sometimes truncated. Every import must either succeed (and then be idempotent: a second
  import adds nothing) or raise ``InputError`` with a message and leave every table byte-for-byte as before.
* ``atheris`` (``--engine atheris``, when ``pip install atheris`` worked): coverage-guided byte fuzzing of
  the same property, for a time budget.

    .venv/bin/python scripts/fuzz_import.py --examples 3000 --backend sqlite
    .venv/bin/python scripts/fuzz_import.py --engine atheris --seconds 120

The test suite (tests/votes/imports/test_fuzz_import.py) runs the hypothesis engine for a few hundred
examples on SQLite and PostgreSQL. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import importlib
import io
import json
import os
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import select, text  # noqa: E402
from sqlalchemy.engine import Engine  # noqa: E402
from sqlmodel import SQLModel  # noqa: E402

import votes.files.records as records  # noqa: E402
import votes.imports.files as vio  # noqa: E402
import votes.models  # noqa: E402, F401  (registers the tables)
from leaderboard.data import OUTCOME_STRINGS  # noqa: E402
from votes.db import make_engine  # noqa: E402

# Looked up through the modules at call time, so the atheris engine can reload them instrumented.
InputError = records.InputError
import_file = vio.import_file

BATTLE_KEYS = (
    "model_a",
    "model_b",
    "winner",
    "question_id",
    "judge",
    "conversation_a",
    "conversation_b",
    "turn",
    "anony",
    "language",
    "tstamp",
)
CATALOG_KEYS = ("prompt_id", "prompt", "category", "language", "model", "output")
MODELS = ("gpt4", "claude", "vicuna-13b", "bard")
WINNERS = tuple(OUTCOME_STRINGS.values())
EXTENSIONS = (".jsonl", ".json", ".csv", ".jsonl.gz", ".csv.gz", ".parquet", ".txt", "")

# Text that has broken importers elsewhere: NUL, lone surrogates, bidi controls, very long strings.
nasty_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", " ", "\x00", "a\x00b", "\ud800", "\u202e", "null", "NaN", "[{", "{}", "1e999"]),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
    st.builds(lambda n: "x" * n, st.sampled_from([199, 200, 201, 5000])),
)
json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    nasty_text,
)
json_value = st.recursive(
    json_scalar,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(nasty_text, children, max_size=3),
    max_leaves=8,
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "", "system"]) | nasty_text, "content": nasty_text}
)
conversation = st.one_of(st.lists(message, min_size=0, max_size=3), json_value)


def _plausible(key: str) -> st.SearchStrategy[Any]:
    if key in ("model_a", "model_b", "model", "judge"):
        return st.sampled_from(MODELS)
    if key == "winner":
        return st.sampled_from(WINNERS)
    if key in ("question_id", "prompt_id"):
        return st.sampled_from(["q1", "q2", "q3"]) | st.integers(0, 5)
    if key in ("conversation_a", "conversation_b"):
        return conversation
    if key == "turn":
        return st.integers(1, 3)
    if key == "anony":
        return st.booleans()
    if key == "tstamp":
        return st.floats(1.6e9, 1.8e9)
    if key == "language":
        return st.sampled_from(["en", "de"])
    return st.sampled_from(["hello", "What is 2+2?", "4"])


@st.composite
def rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A few rows of one kind, each key plausible or hostile, some keys missing, some extra."""
    keys = draw(st.sampled_from([BATTLE_KEYS, CATALOG_KEYS]))
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 4))):
        row: dict[str, Any] = {}
        for key in keys:
            choice = draw(st.integers(0, 9))
            if choice == 0:
                continue  # missing
            row[key] = draw(json_value) if choice == 1 else draw(_plausible(key))
        if draw(st.integers(0, 9)) == 0:
            row[draw(nasty_text)] = draw(json_value)
        out.append(row)
    return out


def _encode(rows_: list[dict[str, Any]], fmt: str) -> bytes:
    if fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in rows_).encode("utf-8", "surrogatepass")
    if fmt == "json":
        return json.dumps(rows_).encode("utf-8", "surrogatepass")
    buffer = io.StringIO()
    header = sorted({k for r in rows_ for k in r}) or ["model_a"]
    writer = csv.writer(buffer)
    writer.writerow(header)
    for r in rows_:
        writer.writerow(["" if r.get(k) is None else str(r.get(k)) for k in header])
    return buffer.getvalue().encode("utf-8", "surrogatepass")


@st.composite
def files(draw: st.DrawFn) -> tuple[str, bytes]:
    """(file name suffix, content): encoded rows, sometimes damaged, or plain random bytes."""
    ext = draw(st.sampled_from(EXTENSIONS))
    if draw(st.integers(0, 5)) == 0:
        return ext, draw(st.binary(max_size=200))
    fmt = draw(st.sampled_from(["jsonl", "json", "csv"]))
    data = _encode(draw(rows()), fmt)
    damage = draw(st.integers(0, 5))
    if damage == 0 and data:
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif damage == 1:
        data = data + draw(st.binary(min_size=1, max_size=10))
    if ext.endswith(".gz") and draw(st.booleans()):
        data = gzip.compress(data, mtime=0)
    return ext, data


# ------------------------------------------------------------------------------------ the property


VALID_BATTLES = (
    '{"question_id": "q1", "model_a": "gpt4", "model_b": "claude", "winner": "model_a"}\n'
    '{"question_id": "q2", "model_a": "claude", "model_b": "bard", "winner": "tie"}\n'
)
VALID_CATALOG = (
    '{"prompt_id": "q1", "prompt": "hello", "category": "generic", "language": "en", '
    '"model": "gpt4", "output": "hi there"}\n'
)


def seed_database(engine: Engine, folder: Path) -> None:
    """A little real content, so a bad file can conflict with what is stored."""
    for name, content in (("seed-catalog.jsonl", VALID_CATALOG), ("seed-battles.jsonl", VALID_BATTLES)):
        path = folder / name
        path.write_text(content, encoding="utf-8")
        import_file(engine, path)


def database_digest(engine: Engine) -> str:
    """sha256 over every row of every table, in primary-key order."""
    digest = hashlib.sha256()
    with engine.connect() as conn:
        for table in SQLModel.metadata.sorted_tables:
            digest.update(table.name.encode())
            for row in conn.execute(select(table).order_by(*table.primary_key.columns)):
                digest.update(repr(tuple(row)).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


class Outcome:
    """Counts of what the importer did with the fuzzed files."""

    def __init__(self) -> None:
        self.accepted = 0
        self.rejected = 0
        self.messages: set[str] = set()


def check_file(engine: Engine, folder: Path, ext: str, data: bytes, outcome: Outcome) -> None:
    """The property: success (then idempotent) or InputError with a message and no change at all."""
    path = folder / f"fuzz{ext}"
    path.write_bytes(data)
    before = database_digest(engine)
    try:
        vio.import_file(engine, path)
    except records.InputError as exc:
        message = str(exc)
        assert message.strip(), "InputError without a message"
        after = database_digest(engine)
        assert after == before, f"a rejected file changed the database: {message}"
        outcome.rejected += 1
        # Group messages by their wording: drop quoted names, numbers and details in brackets.
        outcome.messages.add(re.sub(r"'[^']*'|\d+|\(.*", "_", exc.reason).strip()[:60])
        return
    outcome.accepted += 1
    middle = database_digest(engine)
    again = vio.import_file(engine, path)
    assert again.n_added == 0, "importing the same file twice added rows"
    assert database_digest(engine) == middle, "a repeated import changed the database"


PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@contextmanager
def fresh_engine(backend: str, folder: Path, pg_admin_url: str) -> Iterator[Engine]:
    """An engine on a new, empty database (a SQLite file, or a PostgreSQL database dropped afterwards)."""
    if backend == "sqlite":
        engine = make_engine(f"sqlite:///{folder}/fuzz.db")
        SQLModel.metadata.create_all(engine)
        try:
            yield engine
        finally:
            engine.dispose()
        return
    admin = make_engine(pg_admin_url)
    name = f"arena_fuzz_{uuid.uuid4().hex[:12]}"
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))  # nosec B608 - a generated name, not input
    engine = make_engine(admin.url.set(database=name).render_as_string(hide_password=False))
    try:
        SQLModel.metadata.create_all(engine)
        yield engine
    finally:
        engine.dispose()
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))  # nosec B608
        admin.dispose()


def run_hypothesis(engine: Engine, folder: Path, examples: int, seed: int) -> Outcome:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed

    outcome = Outcome()

    @hseed(seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(files())
    def prop(file: tuple[str, bytes]) -> None:
        check_file(engine, folder, file[0], file[1], outcome)

    prop()
    return outcome


def run_atheris(engine: Engine, folder: Path, seconds: float, report: Callable[[Outcome], None]) -> None:
    """Coverage-guided fuzzing of the same property; libFuzzer ends the process, so report and exit here."""
    import atheris  # type: ignore[import-not-found,import-untyped,unused-ignore]

    outcome = Outcome()
    deadline = time.monotonic() + seconds

    def one_input(data: bytes) -> None:
        if time.monotonic() > deadline:
            report(outcome)
            sys.stdout.flush()
            os._exit(0)
        fdp = atheris.FuzzedDataProvider(data)
        ext = EXTENSIONS[fdp.ConsumeIntInRange(0, len(EXTENSIONS) - 1)]
        check_file(engine, folder, ext, fdp.ConsumeBytes(fdp.remaining_bytes()), outcome)

    global records, vio  # noqa: PLW0603 - swap in the instrumented modules
    with atheris.instrument_imports(include=["votes"]):
        records = importlib.reload(records)
        vio = importlib.reload(vio)
    atheris.Setup([sys.argv[0], "-rss_limit_mb=4096", "-max_len=4096"], one_input)
    atheris.Fuzz()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["hypothesis", "atheris"], default="hypothesis")
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument(
        "--pg-admin-url", default=PG_ADMIN_URL, help="PostgreSQL server where a scratch database is made"
    )
    parser.add_argument("--examples", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=60.0, help="atheris time budget")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    started = time.perf_counter()

    def report(outcome: Outcome) -> None:
        total = outcome.accepted + outcome.rejected
        print(f"{total} files: {outcome.accepted} imported, {outcome.rejected} rejected with InputError")
        print(f"{len(outcome.messages)} kinds of error message, for example:")
        for message in sorted(outcome.messages)[:30]:
            print("   ", message)
        summary = {
            "engine": args.engine,
            "backend": args.backend,
            "files": total,
            "accepted": outcome.accepted,
            "rejected": outcome.rejected,
            "failures": 0,
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(json.dumps(summary))

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with fresh_engine(args.backend, folder, args.pg_admin_url) as engine:
            seed_database(engine, folder)
            if args.engine == "atheris":
                run_atheris(engine, folder, args.seconds, report)
            else:
                report(run_hypothesis(engine, folder, args.examples, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
