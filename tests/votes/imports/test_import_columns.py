"""Parquet battles imported as columns give the very rows the row-by-row path gives: the same battles,
votes, models, judges, prompt and answer links, times and import keys (so either path, or an older
version, sees the other's rows as already imported); a bad row in a late batch is still named and
leaves nothing; a self-battle is refused by row or, with ``skip_invalid``, listed."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.engine import Engine

import votes.imports.files as votes_io
from votes.files.battle_rows import parse_battles
from votes.files.convert import ImportReport
from votes.files.records import InputError
from votes.files.selection import BattleFilter
from votes.imports.clean_columns import clean_batch, clean_digests, iso_times
from votes.imports.files import import_file
from votes.imports.staging import row_digest

NAMES = ["gpt-4", " claude-2 ", "llama-2-70b", "vicun\u0303a-13b", "model/x"]  # to strip, to compose (NFC)


def _some(i: int, none_every: int, empty_every: int, value: str) -> str | None:
    """None every ``none_every`` rows, an empty string every ``empty_every``, else ``value``."""
    if i % none_every == 0:
        return None
    return "" if i % empty_every == 0 else value


def _weight(i: int) -> float | None:
    return None if i % 10 == 0 else (1.0 if i % 2 else 0.25 * (1 + i % 5))


def _rich_table(n: int, seed: int = 0) -> pa.Table:
    """Battles with every optional column, nulls, empty strings, repeated rows and weights."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(NAMES), n)
    b = (a + rng.integers(1, len(NAMES), n)) % len(NAMES)
    table = pa.table(
        {
            "model_a": pa.array([NAMES[i] for i in a]),
            "model_b": pa.array([NAMES[i] for i in b]),
            "winner": pa.array(
                np.array(["model_a", "model_b", "tie", "tie (bothbad)"], dtype=object)[rng.integers(0, 4, n)]
            ),
            "question_id": pa.array(
                [None if i % 7 == 0 else ("" if i % 11 == 0 else f"q{i % 5}") for i in range(n)]
            ),
            "judge": pa.array(
                [None if i % 3 == 0 else ("" if i % 5 == 0 else f"judge-{i % 4}") for i in range(n)]
            ),
            "turn": pa.array([None if i % 4 == 0 else i % 3 for i in range(n)], pa.int64()),
            "anony": pa.array([None if i % 6 == 0 else bool(i % 2) for i in range(n)]),
            "language": pa.array(
                [None if i % 9 == 0 else ("English" if i % 2 else "Deutsch") for i in range(n)]
            ),
            "tstamp": pa.array([None if i % 8 == 0 else 1.7e9 + (i // 3) * 0.1234567 for i in range(n)]),
            "weight": pa.array(
                [None if i % 10 == 0 else (1.0 if i % 2 else 0.25 * (1 + i % 5)) for i in range(n)]
            ),
            "sided": pa.array([None if i % 12 == 0 else bool(i % 3) for i in range(n)]),
            "category": pa.array(["coding" if i % 2 else None for i in range(n)]),
        }
    )
    return pa.concat_tables([table, table.slice(0, n // 4)])  # repeated rows: occurrence numbers


def _careful_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch through the row-by-row path (what a file the columns cannot take gets)."""
    monkeypatch.setattr(votes_io, "clean_batch", lambda table, text_cells=False: None)


def _tables(engine: Engine) -> dict[str, list[Any]]:
    """What an import writes, without the clock (a battle without time is stamped with the import's)."""
    queries = {
        "battle": "SELECT id, prompt_id, output_a_id, output_b_id, model_a_id, model_b_id, annotator_id,"
        " source, import_key, language, extra FROM battle ORDER BY id",
        "vote": "SELECT id, battle_id, winner, model_a_id, model_b_id, annotator_id, weight, sided FROM vote"
        " ORDER BY id",
        "timed": "SELECT b.id, b.issued_at, v.created_at FROM battle b JOIN vote v ON v.battle_id = b.id"
        " WHERE b.extra IS NULL OR b.id > 0 ORDER BY b.id",
        "model": "SELECT id, name FROM model ORDER BY id",
        "annotator": "SELECT id, kind, label FROM annotator ORDER BY id",
    }
    with engine.connect() as conn:
        out = {name: [tuple(r) for r in conn.execute(text(q))] for name, q in queries.items()}
    return out


def _timed(rows: list[Any], stamped: set[int]) -> list[Any]:
    return [r for r in rows if r[0] not in stamped]


def _as_columns(monkeypatch: pytest.MonkeyPatch, store: Engine, path: Path) -> ImportReport:
    """Import ``path`` and check that every batch went as columns."""
    taken: list[bool] = []

    def spy(batch: pa.RecordBatch, text_cells: bool = False) -> Any:
        taken.append((found := clean_batch(batch, text_cells=text_cells)) is not None)
        return found

    with monkeypatch.context() as m:
        m.setattr(votes_io, "clean_batch", spy)
        report = import_file(store, path)
    assert taken and all(taken)
    return report


@pytest.fixture
def two_stores(fresh_engine: Callable[[], Engine]) -> Iterator[tuple[Engine, Engine]]:
    yield fresh_engine(), fresh_engine()


def test_columns_and_rows_write_the_same_battles(
    two_stores: tuple[Engine, Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast_store, careful_store = two_stores
    path = tmp_path / "battles.parquet"
    table = _rich_table(600)
    pq.write_table(table, path, row_group_size=250)
    fast = _as_columns(monkeypatch, fast_store, path)
    with monkeypatch.context() as m:
        _careful_only(m)
        careful = import_file(careful_store, path)
    assert (fast.n_rows, fast.n_added, fast.n_skipped) == (careful.n_rows, careful.n_added, careful.n_skipped)
    assert fast.n_added == 600 + 150  # the repeated rows are battles of their own (occurrence numbers)
    got, want = _tables(fast_store), _tables(careful_store)
    no_time = {i + 1 for i, t in enumerate(table.column("tstamp").to_pylist()) if t is None}
    for name in ("battle", "vote", "model", "annotator"):
        assert got[name] == want[name], name
    assert _timed(got["timed"], no_time) == _timed(want["timed"], no_time)
    # and each path's rows are the other's: importing again either way adds nothing
    assert import_file(careful_store, path).n_added == 0
    with monkeypatch.context() as m:
        _careful_only(m)
        assert import_file(fast_store, path).n_added == 0


def test_question_ids_link_to_stored_prompts_and_answers_as_rows_do(
    two_stores: tuple[Engine, Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = tmp_path / "catalog.jsonl"
    catalog.write_text(
        "\n".join(
            f'{{"prompt_id": "q{i}", "prompt": "question {i}", "model": "gpt-4", "output": "answer {i}"}}'
            for i in range(3)
        )
        + "\n",
        encoding="utf-8",
    )
    path = tmp_path / "battles.parquet"
    numbered = (
        _rich_table(200)
        .drop_columns(["question_id"])
        .append_column("question_id", pa.array([i % 6 for i in range(250)], pa.int64()))
    )
    pq.write_table(_rich_table(200), path)
    numbered_path = tmp_path / "numbered.parquet"
    pq.write_table(numbered, numbered_path)
    results = []
    for store, careful in zip(two_stores, (False, True), strict=True):
        import_file(store, catalog, kind="catalog")
        with monkeypatch.context() as m:
            if careful:
                _careful_only(m)
            import_file(store, path)
            import_file(store, numbered_path)
        results.append(_tables(store))
    fast, careful_tables = results
    assert fast["battle"] == careful_tables["battle"]
    linked = [r for r in fast["battle"] if r[2] is not None]
    assert linked, "some battles link to the catalog's answers"


def test_filters_keep_the_same_battles(
    two_stores: tuple[Engine, Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "battles.parquet"
    pq.write_table(_rich_table(300), path, row_group_size=100)
    chosen = BattleFilter(language="English", anony_only=True, exclude_models=("model/x",))
    fast = import_file(two_stores[0], path, filters=chosen)
    with monkeypatch.context() as m:
        _careful_only(m)
        careful = import_file(two_stores[1], path, filters=chosen)
    assert (fast.n_added, fast.n_filtered) == (careful.n_added, careful.n_filtered)
    assert 0 < fast.n_added < 375
    assert _tables(two_stores[0])["vote"] == _tables(two_stores[1])["vote"]


def _plain(n: int) -> dict[str, list[Any]]:
    return {
        "model_a": [NAMES[i % 3] for i in range(n)],
        "model_b": [NAMES[3 + i % 2] for i in range(n)],
        "winner": ["model_a"] * n,
        "tstamp": [1.7e9 + i for i in range(n)],
    }


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("winner", "bogus", "unknown winner"),
        ("model_b", "", "'model_b' must not be empty"),
        ("model_b", "same model, spaced", "cannot battle itself"),
        ("tstamp", -5.0, "'tstamp' must be seconds since 1970"),
    ],
)
def test_a_bad_row_in_a_late_batch_is_named_and_leaves_nothing(
    store: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, column: str, value: Any, reason: str
) -> None:
    monkeypatch.setattr(votes_io, "BATCH_ROWS", 500)
    rows = _plain(1_400)
    if value == "same model, spaced":
        value = f" {rows['model_a'][1_234]} "  # the same name once stripped
    rows[column][1_234] = value  # in the third batch of 500 rows
    path = tmp_path / "battles.parquet"
    pq.write_table(pa.table(rows), path)
    with pytest.raises(InputError, match="row 1235") as caught:
        import_file(store, path)
    assert reason in str(caught.value)
    with store.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM battle")).scalar_one() == 0
        assert conn.execute(text("SELECT count(*) FROM model")).scalar_one() == 0


def test_skip_invalid_lists_the_bad_rows_and_imports_the_rest(
    store: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(votes_io, "BATCH_ROWS", 500)
    rows = _plain(1_200)
    rows["model_b"][1_100] = rows["model_a"][1_100]  # a self-battle in the third batch
    rows["winner"][7] = "nobody"
    path = tmp_path / "battles.parquet"
    pq.write_table(pa.table(rows), path)
    report = import_file(store, path, skip_invalid=True)
    assert [r.where for r in report.refused] == ["row 8", "row 1101"]
    assert report.n_added == 1_200 - 2


def test_a_column_of_another_type_goes_to_the_careful_path(tmp_path: Path) -> None:
    table = pa.table({**_plain(5), "turn": pa.array([1.0, 2.0, None, 1.0, 2.0])})  # floats: not turns
    assert clean_batch(table) is None
    table = pa.table({**_plain(5), "anony": pa.array(["yes"] * 5)})
    assert clean_batch(table) is None
    assert clean_batch(pa.table(_plain(5))) is not None


def _careful_records(table: pa.Table) -> list[Any]:
    rows = [
        (f"row {i}", {k: v for k, v in rec.items() if v is not None})
        for i, rec in enumerate(table.to_pylist(), start=1)
    ]
    return parse_battles(Path("battles.parquet"), "parquet", rows)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(NAMES),
            st.sampled_from(NAMES),
            st.sampled_from(["model_a", "model_b", "tie", "tie (bothbad)"]),
            st.one_of(st.none(), st.floats(0.0, 253_402_300_799.0, allow_nan=False)),
            st.one_of(st.none(), st.floats(1e-9, 1e9, allow_nan=False)),
            st.one_of(st.none(), st.text(max_size=6)),
            st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_digests_and_values_match_the_row_path(rows: list[tuple[Any, ...]]) -> None:
    rows = [r for r in rows if r[0].strip() != r[1].strip()]
    if not rows:
        return
    columns = list(zip(*rows, strict=True))
    table = pa.table(
        {
            "model_a": pa.array(columns[0], pa.string()),
            "model_b": pa.array(columns[1], pa.string()),
            "winner": pa.array(columns[2], pa.string()),
            "tstamp": pa.array(columns[3], pa.float64()),
            "weight": pa.array(columns[4], pa.float64()),
            "judge": pa.array(columns[5], pa.string()),
            "turn": pa.array(columns[6], pa.int64()),
        }
    )
    batch = clean_batch(table)
    judges_ok = all(j is None or ("\x00" not in j) for j in columns[5])
    if batch is None:
        assert not judges_ok  # only a NUL in a judge's name sends these rows to the careful path
        return
    records = _careful_records(table)
    assert clean_digests(batch) == [row_digest(r) for r in records]
    assert batch.judge.tolist() == [r.judge for r in records]
    assert batch.weight.tolist() == [r.weight for r in records]
    now = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    want = [
        (datetime.fromtimestamp(r.tstamp, UTC) if r.tstamp is not None else now)
        .replace(tzinfo=None)
        .isoformat(sep=" ", timespec="microseconds")
        for r in records
    ]
    assert iso_times(batch.tstamp, now) == want


def test_times_round_to_the_microsecond_as_datetime_does() -> None:
    rng = np.random.default_rng(3)
    stamps = np.concatenate(
        [
            rng.uniform(0.0, 253_402_300_799.0, 20_000),
            1.7e9 + rng.integers(0, 10**6, 20_000) * 1e-6 + 0.5e-6,  # halves: to even
            np.array([0.0, 0.9999995, 1.0000005, 0.5e-6, 1.5e-6, 2.5e-6, 253_402_300_799.0]),
        ]
    )
    want = [
        datetime.fromtimestamp(t, UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
        for t in stamps.tolist()
    ]
    assert iso_times(stamps, datetime.now(UTC)) == want
    assert not any(math.isnan(t) for t in stamps)


def _cell(value: Any, i: int) -> str:
    """A value as a CSV cell, flags and numbers spelled the ways files spell them."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return [["false", "False", "0", " FALSE "], ["true", "True", "1", "TRUE"]][value][i % 4]
    if isinstance(value, float):
        return repr(value) if i % 3 else f"{value:.17e}"  # also in exponent form
    return str(value)


def _json_file(path: Path, table: pa.Table, fmt: str) -> Path:
    rows = table.to_pylist()
    if fmt == "csv":
        with path.open("w", encoding="utf-8", newline="") as handle:
            out = csv.writer(handle)
            out.writerow(table.column_names)
            out.writerows([_cell(r[c], i) for c in table.column_names] for i, r in enumerate(rows))
        return path
    if fmt == "json":
        path.write_text(json.dumps(rows), encoding="utf-8")
    else:  # each line without its missing values: the rows' keys differ (the first row's are not all)
        lines = (json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in rows)
        path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_json_rows_checked_as_columns_write_the_same_battles(
    two_stores: tuple[Engine, Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    monkeypatch.setattr(votes_io, "BATCH_ROWS", 200)
    path = _json_file(tmp_path / f"battles.{fmt}", _rich_table(500), fmt)
    fast = _as_columns(monkeypatch, two_stores[0], path)
    with monkeypatch.context() as m:
        _careful_only(m)
        careful = import_file(two_stores[1], path)
    assert fast.n_added == careful.n_added == 625
    got, want = _tables(two_stores[0]), _tables(two_stores[1])
    for name in ("battle", "vote", "model", "annotator"):
        assert got[name] == want[name], name


def test_a_bad_json_line_is_named_and_rows_pyarrow_cannot_hold_go_row_by_row(
    store: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(votes_io, "BATCH_ROWS", 100)
    rows = [dict(zip(_plain(300), values, strict=True)) for values in zip(*_plain(300).values(), strict=True)]
    rows[150]["question_id"] = 7  # text and numbers in one column: that batch goes row by row, and passes
    rows[250]["winner"] = "nobody"
    path = tmp_path / "battles.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 251") as caught:
        import_file(store, path)
    assert "unknown winner" in str(caught.value)
    rows[250]["winner"] = "tie"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    assert import_file(store, path).n_added == 300


@pytest.mark.parametrize(
    ("cell", "reason"),
    [("maybe", "'anony' must be true or false"), ("1.5", "'turn' must be an integer"), ("nan", "finite")],
)
def test_a_bad_csv_cell_is_named_by_line_and_good_batches_go_as_columns(
    store: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cell: str, reason: str
) -> None:
    """CSV cells are converted as the row path converts them; one it refuses sends its batch to the
    row path, which names the line (the header is line 1); the file imports once the cell is fixed."""
    monkeypatch.setattr(votes_io, "BATCH_ROWS", 100)
    n, bad = 300, 250
    column = {"maybe": "anony", "1.5": "turn", "nan": "tstamp"}[cell]
    plain = _plain(n)
    table = pa.table({**plain, "anony": [True] * n, "turn": [1] * n})

    def write(value: str) -> Path:
        path = _json_file(tmp_path / "battles.csv", table, "csv")
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        cells = lines[bad + 1].rstrip("\r\n").split(",")
        cells[table.column_names.index(column)] = value
        lines[bad + 1] = ",".join(cells) + "\r\n"
        path.write_text("".join(lines), encoding="utf-8")
        return path

    with pytest.raises(InputError, match=f"line {bad + 2}") as caught:
        import_file(store, write(cell))
    assert reason in str(caught.value)
    good = {"anony": "true", "turn": "1", "tstamp": repr(plain["tstamp"][bad])}[column]
    report = _as_columns(monkeypatch, store, write(good))
    assert report.n_added == n
