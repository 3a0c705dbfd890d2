"""Import and export on both backends: real data, round trips, bad rows, idempotency, bulk writes."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from leaderboard.online.elo import EloConfig, replay_elo
from tests.factories import clear, conversation, live_ratings, row_counts, write_jsonl
from tests.real_data import VICUNA_CATALOG, VICUNA_JUDGES
from votes.files.battle_rows import parse_battles
from votes.files.reading import read_rows
from votes.files.records import FORMATS, InputError, rows_sha256
from votes.imports.demo import load_demo
from votes.imports.files import import_file
from votes.reads.exports import export_catalog, export_votes, iter_vote_rows

BATTLE = {"question_id": "q1", "model_a": "alpha", "model_b": "beta", "winner": "model_a", "judge": "j1"}


def conversation_battles() -> list[dict[str, object]]:
    """Battles with conversations (one multi-turn), optional fields, and a tie of each kind."""
    return [
        {
            "question_id": "c1",
            "model_a": "alpha",
            "model_b": "beta",
            "winner": "model_b",
            "judge": "arena-user-1",
            "conversation_a": conversation("Name a prime.", "7 is prime."),
            "conversation_b": conversation("Name a prime.", "2, the only even prime."),
            "turn": 1,
            "anony": True,
            "language": "English",
            "tstamp": 1700000000.125,
        },
        {
            "model_a": "gamma",
            "model_b": "alpha",
            "winner": "tie (bothbad)",
            "conversation_a": conversation("Hi", "Hello!", "Capital of France?", "Lyon."),
            "conversation_b": conversation("Hi", "Hey.", "Capital of France?", "Marseille."),
            "turn": 2,
            "anony": False,
            "language": "English",
            "tstamp": 1700000100.5,
        },
        {"question_id": "c1", "model_a": "beta", "model_b": "gamma", "winner": "tie", "tstamp": 1700000200.0},
        {"model_a": "beta", "model_b": "alpha", "winner": "model_a", "language": "Deutsch", "tstamp": 1.7e9},
    ]


# ----------------------------------------------------------------------------------------- real data


def test_real_vicuna_data_imports_completely_and_idempotently(store: Engine, tmp_path: Path) -> None:
    catalog = import_file(store, VICUNA_CATALOG)
    assert (catalog.kind, catalog.n_prompts_added, catalog.n_outputs_added, catalog.n_models_added) == (
        "catalog",
        80,
        400,
        5,
    )
    battles = import_file(store, VICUNA_JUDGES)
    assert (battles.kind, battles.n_added) == ("battles", 6560)
    counts = row_counts(store)
    assert counts["vote"] == 6560 and counts["annotator"] == 4  # one annotator per LLM judge
    again = import_file(store, VICUNA_JUDGES)
    assert again.n_added == 0 and row_counts(store) == counts
    assert import_file(store, VICUNA_CATALOG).n_added == 0

    with store.connect() as conn:
        rows = list(iter_vote_rows(conn))
    winners = [r["winner"] for r in rows]
    assert (winners.count("model_a"), winners.count("model_b"), winners.count("tie")) == (3337, 2461, 762)
    # Battles link to the catalog's prompts, so exports name the question.
    assert all(r["question_id"].startswith("vicuna-") for r in rows)

    # Live ratings = a replay of the votes in vote-id order.
    replay = replay_elo(
        [r["model_a"] for r in rows], [r["model_b"] for r in rows], winners, config=EloConfig()
    )
    live = live_ratings(store)
    assert set(live) == set(replay.models)
    for i, name in enumerate(replay.models):
        assert live[name][0] == pytest.approx(replay.rating[i], abs=1e-9)
        assert live[name][1] == replay.games[i]


# --------------------------------------------------------------------------------------- round trips


def test_export_import_export_is_byte_identical(fresh_engine: Callable[[], Engine], tmp_path: Path) -> None:
    first, second = fresh_engine(), fresh_engine()
    load_demo(first, n_votes=300, seed=3)
    import_file(first, write_jsonl(tmp_path / "conversations.jsonl", conversation_battles()))
    assert row_counts(first)["vote"] == 304
    for fmt in FORMATS:
        clear(second)
        assert set(row_counts(second).values()) == {0}
        for what, export in (("catalog", export_catalog), ("votes", export_votes)):
            export(first, tmp_path / f"{what}-1.{fmt}", fmt=fmt)
        for what in ("catalog", "votes"):
            import_file(second, tmp_path / f"{what}-1.{fmt}")
        for what, export in (("catalog", export_catalog), ("votes", export_votes)):
            export(second, tmp_path / f"{what}-2.{fmt}", fmt=fmt)
            original = (tmp_path / f"{what}-1.{fmt}").read_bytes()
            assert original == (tmp_path / f"{what}-2.{fmt}").read_bytes(), f"{what} {fmt} export changed"


def test_votes_hash_is_the_same_for_the_database_and_its_export(store: Engine, tmp_path: Path) -> None:
    load_demo(store, n_votes=200, seed=1)
    import_file(store, write_jsonl(tmp_path / "c.jsonl", conversation_battles()))
    from votes.reads.exports import votes_sha256

    with store.connect() as conn:
        digest = votes_sha256(conn)
    export_votes(store, tmp_path / "v.jsonl", fmt="jsonl")
    assert hashlib.sha256((tmp_path / "v.jsonl").read_bytes()).hexdigest() == digest
    for fmt in ("csv", "parquet"):
        export_votes(store, tmp_path / f"v.{fmt}", fmt=fmt)
        file_format, rows = read_rows(tmp_path / f"v.{fmt}")
        records = parse_battles(tmp_path / f"v.{fmt}", file_format, rows)
        assert rows_sha256(r.row() for r in records) == digest


def test_conversations_become_prompts_and_outputs(store: Engine, tmp_path: Path) -> None:
    report = import_file(store, write_jsonl(tmp_path / "c.jsonl", conversation_battles()))
    # c1 (question_id) and one hashed multi-turn prompt; four distinct answers + none for the bare rows.
    assert (report.n_added, report.n_prompts_added, report.n_outputs_added) == (4, 2, 4)
    with store.connect() as conn:
        rows = list(iter_vote_rows(conn))
    assert rows[0]["conversation_a"] == conversation("Name a prime.", "7 is prime.")
    assert rows[1]["question_id"].startswith("conv-") and rows[1]["turn"] == 2
    assert rows[2]["question_id"] == "c1" and rows[2]["conversation_a"] is None  # no answer stored for beta
    assert rows[3]["language"] == "Deutsch" and rows[3]["question_id"] is None


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet", "jsonl.gz"])
def test_chatbot_arena_formats_are_read(store: Engine, tmp_path: Path, fmt: str) -> None:
    rows = [dict(BATTLE, tstamp=1.0 + i, model_b=f"m{i}") for i in range(5)]
    path = tmp_path / f"b.{fmt}"
    if fmt == "json":
        path.write_text(json.dumps(rows))
    elif fmt == "csv":
        path.write_text(
            "model_a,model_b,winner,tstamp\n" + "".join(f"alpha,m{i},tie,{i}\n" for i in range(5))
        )
    elif fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    assert import_file(store, path).n_added == 5
    # Content decides when the name does not: a JSON array in a .txt file.
    odd = tmp_path / "battles.txt"
    odd.write_text(json.dumps([dict(BATTLE, judge="other")]))
    assert import_file(store, odd).format == "json"


def test_identical_rows_are_distinct_votes_and_reimport_adds_nothing(store: Engine, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "dup.jsonl", [BATTLE, BATTLE, BATTLE])
    assert import_file(store, path).n_added == 3
    assert import_file(store, path).n_added == 0
    longer = write_jsonl(tmp_path / "dup4.jsonl", [BATTLE] * 4)
    assert import_file(store, longer).n_added == 1  # only the fourth occurrence is new


# ------------------------------------------------------------------------------------------ bad input

BAD_ROWS = {
    "unknown winner": ('{"model_a": "a", "model_b": "b", "winner": "draw"}', "unknown winner 'draw'"),
    "battling itself": ('{"model_a": "a", "model_b": "a", "winner": "tie"}', "cannot battle itself"),
    "invalid json": ('{"model_a": "a", "model_b": "b", "winner": ', "invalid JSON"),
    "wrong type": ('{"model_a": "a", "model_b": 7, "winner": "tie"}', "'model_b' must be a string"),
    "missing field": ('{"model_a": "a", "winner": "tie"}', "missing field 'model_b'"),
    "bad tstamp": ('{"model_a": "a", "model_b": "b", "winner": "tie", "tstamp": "noon"}', "must be a number"),
    "bad turn": ('{"model_a": "a", "model_b": "b", "winner": "tie", "turn": 1.5}', "must be an integer"),
    "one conversation": (
        '{"model_a": "a", "model_b": "b", "winner": "tie", '
        '"conversation_a": [{"role": "user", "content": "x"}]}',
        "must be given together",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_one_bad_row_names_its_line_and_changes_nothing(store: Engine, tmp_path: Path, case: str) -> None:
    load_demo(store, n_votes=50, seed=0)
    before, ratings = row_counts(store), live_ratings(store)
    line, reason = BAD_ROWS[case]
    good = [json.dumps(dict(BATTLE, tstamp=float(i))) for i in range(6)]
    path = write_jsonl(tmp_path / "mixed.jsonl", [*good[:4], line, *good[4:]])
    with pytest.raises(InputError) as info:
        import_file(store, path)
    assert info.value.where == "line 5" and reason in info.value.reason
    assert str(path) in str(info.value)
    assert row_counts(store) == before and live_ratings(store) == ratings


def test_csv_missing_column_and_bad_cells(store: Engine, tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("model_a,model_b\nx,y\n")
    with pytest.raises(InputError, match="missing column 'winner'"):
        import_file(store, path, kind="battles")
    path.write_text("model_a,model_b,winner,anony\nx,y,tie,true\nx,y,tie,maybe\n")
    with pytest.raises(InputError, match=r"line 3: 'anony' must be true or false"):
        import_file(store, path)
    assert row_counts(store)["vote"] == 0


def test_conflicting_answer_rolls_back_everything(store: Engine, tmp_path: Path) -> None:
    import_file(store, write_jsonl(tmp_path / "c.jsonl", conversation_battles()[:1]))
    before = row_counts(store)
    clash = dict(conversation_battles()[0], tstamp=5.0)
    clash["conversation_b"] = conversation("Name a prime.", "9 is prime.")
    fresh = dict(BATTLE, model_a="new-model", tstamp=4.0)
    with pytest.raises(InputError, match="line 2: model 'beta' already has a different answer"):
        import_file(store, write_jsonl(tmp_path / "clash.jsonl", [fresh, clash]))
    assert row_counts(store) == before  # new-model and its vote were rolled back too


def test_catalog_conflicts_and_bare_prompts(store: Engine, tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {
            "prompt_id": "p1",
            "prompt": "Say hi",
            "category": "chat",
            "language": "en",
            "model": "m",
            "output": "hi",
        },
        {"prompt_id": "p2", "prompt": [{"role": "user", "content": "Q?"}], "model": None, "output": None},
    ]
    report = import_file(store, write_jsonl(tmp_path / "cat.jsonl", rows))
    assert (report.n_prompts_added, report.n_outputs_added) == (2, 1)
    changed = [dict(rows[0], output="hello")]
    with pytest.raises(InputError, match="line 1: model 'm' already has a different answer to prompt 'p1'"):
        import_file(store, write_jsonl(tmp_path / "cat2.jsonl", changed))
    inconsistent = [rows[0], dict(rows[0], prompt="Say bye", model="n")]
    with pytest.raises(InputError, match="line 2: prompt 'p1' differs from its first appearance"):
        import_file(store, write_jsonl(tmp_path / "cat3.jsonl", inconsistent))


# ------------------------------------------------------------------------------------------ bulk path


def test_import_is_bulk_not_one_statement_per_row(store: Engine, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    names = [f"m{i}" for i in range(12)]
    rows = []
    for i in range(5000):
        a, b = rng.choice(12, 2, replace=False)
        rows.append(
            {
                "model_a": names[a],
                "model_b": names[b],
                "winner": "model_a",
                "judge": f"j{i % 40}",
                "tstamp": i * 1.0,
            }
        )
    path = write_jsonl(tmp_path / "many.jsonl", rows)
    statements: list[str] = []

    @event.listens_for(store, "before_cursor_execute")
    def count(*args: object) -> None:
        statements.append(str(args[2]))

    assert import_file(store, path).n_added == 5000
    # SQLite executemany is one call; PostgreSQL batches ~1000 rows per INSERT. Either way a few dozen.
    assert len(statements) < 60, len(statements)


@pytest.mark.slow
def test_100k_battles_import_in_seconds(store: Engine, tmp_path: Path) -> None:
    import time

    from scripts.bench_import import write_battles

    path = tmp_path / "big.jsonl"
    write_battles(path, 100_000)
    started = time.perf_counter()
    assert import_file(store, path).n_added == 100_000
    assert time.perf_counter() - started < 60
