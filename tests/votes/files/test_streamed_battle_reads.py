"""Battles files read as a stream: the digest hashed a chunk at a time is the file's sha256, the record
batches reduced to codes give the battles the careful row-by-row path gives (nulls, Parquet dictionaries,
several row groups and batches, every filter), and a bad row in a late batch is still named."""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from leaderboard.battles import Battles
from leaderboard.data import OUTCOME_STRINGS
from votes.files import columns
from votes.files.columns import _fast, read_battles
from votes.files.reading import input_sha256, read_input_bytes
from votes.files.records import InputError
from votes.files.selection import (
    BattleColumns,
    BattleFilter,
    CodedColumn,
    keep_mask,
    record_columns,
    select_battles,
)

_WINNERS = ["model_a", "model_b", "tie", "tie (bothbad)"]


def _rows(n: int, seed: int = 5) -> list[dict[str, Any]]:
    """Battles with every optional column, some values missing."""
    rng = np.random.default_rng(seed)
    names = ["zeta", "alpha", "Mike", "bravo-2", "ünïcode", "delta"]
    rows = []
    for i in range(n):
        a, b = rng.choice(len(names), 2, replace=False)
        row: dict[str, Any] = {
            "model_a": names[a],
            "model_b": names[b],
            "winner": _WINNERS[int(rng.integers(4))],
            "language": [None, "English", "German"][int(rng.integers(3))],
            "tstamp": 1.7e9 + i,
            "anony": [None, True, False][int(rng.integers(3))],
            "judge": [None, "j-b", "j-a"][int(rng.integers(3))],
            "weight": [None, 1.0, 0.5][int(rng.integers(3))],
            "sided": [None, True, False][int(rng.integers(3))],
            "question_id": [None, "", f"q{int(rng.integers(20))}"][int(rng.integers(3))],
        }
        rows.append(row)
    return rows


def _write(path: Path, rows: list[dict[str, Any]], *, row_group: int = 7) -> Path:
    """``rows`` as Parquet (row groups of ``row_group``: many, so batches end all over the file), JSONL or
    CSV by the suffix, gzipped for ``.gz``."""
    fmt = path.suffixes[0]
    if fmt == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group)
        return path
    if fmt == ".jsonl":
        text = "".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in rows)
    else:
        header = list(rows[0])
        lines = [",".join(header)]
        for r in rows:
            cells = [
                "" if r[k] is None else str(r[k]).lower() if isinstance(r[k], bool) else str(r[k])
                for k in header
            ]
            lines.append(",".join(cells))
        text = "\n".join(lines) + "\n"
    data = text.encode()
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    return path


def _same(got: Battles, want: Battles) -> None:
    assert got.models == want.models
    assert got.annotator_names == want.annotator_names
    for name in ("model_a", "model_b", "outcome", "time", "weight", "sided", "annotator", "prompt"):
        mine, theirs = getattr(got, name), getattr(want, name)
        assert (mine is None) == (theirs is None), name
        if mine is not None:
            np.testing.assert_array_equal(mine, theirs, err_msg=name)
            assert mine.dtype == theirs.dtype, name


@pytest.mark.parametrize(
    "name", ["plain.jsonl", "packed.jsonl.gz", "plain.csv", "packed.csv.gz", "plain.bin"]
)
def test_streamed_digest_is_the_sha256_of_the_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    data = b"".join(b'{"n": %d}\n' % i for i in range(300_000))  # several chunks of 1 MiB
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    assert input_sha256(path) == hashlib.sha256(data).hexdigest()
    assert input_sha256(path) == hashlib.sha256(read_input_bytes(path)).hexdigest()


def test_streamed_digest_refuses_what_the_whole_read_refuses(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b"\n" * (3 << 20)))
    with pytest.raises(InputError) as whole:
        read_input_bytes(bomb, max_expanded=1 << 20)
    with pytest.raises(InputError) as streamed:
        input_sha256(bomb, max_expanded=1 << 20)
    assert str(streamed.value) == str(whole.value)
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b"{}\n" * 1000)[:-12])
    with pytest.raises(InputError, match="not a valid gzip file"):
        input_sha256(broken)


def test_the_battles_digest_is_the_files_sha256(tmp_path: Path) -> None:
    for name in ("b.parquet", "b.jsonl.gz", "b.csv"):
        path = _write(tmp_path / name, _rows(40))
        read = read_battles(path)
        assert read.source_format == "clean-battle"
        assert read.digest == hashlib.sha256(read_input_bytes(path)).hexdigest()


_FILTERS = [
    BattleFilter(),
    BattleFilter(language="English"),
    BattleFilter(anony_only=True),
    BattleFilter(judge="j-a"),
    BattleFilter(models=("alpha", "zeta", "Mike", "delta")),
    BattleFilter(exclude_models=("bravo-2",)),
    BattleFilter(
        since=datetime.fromtimestamp(1.7e9 + 20, UTC), until=datetime.fromtimestamp(1.7e9 + 90, UTC)
    ),
]


@pytest.mark.parametrize("name", ["b.parquet", "b.parquet.gz", "b.jsonl", "b.jsonl.gz", "b.csv", "b.csv.gz"])
@pytest.mark.parametrize("chosen", _FILTERS, ids=range(len(_FILTERS)))
def test_batches_give_the_careful_paths_battles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, chosen: BattleFilter
) -> None:
    monkeypatch.setattr(columns, "_BATCH_ROWS", 5)  # batches across row groups of 7
    monkeypatch.setattr(columns, "_BLOCK_BYTES", 1 << 10)  # JSONL and CSV in blocks of a few rows
    path = tmp_path / name
    if name.endswith(".parquet.gz"):
        plain = _write(tmp_path / "plain.parquet", _rows(120))
        path.write_bytes(gzip.compress(plain.read_bytes()))
    else:
        _write(path, _rows(120))
    fast = _fast(path, "digest", chosen)
    assert fast is not None  # the batches were read
    careful = read_battles(path, filters=chosen, skip_invalid=True)  # row by row
    assert careful.refused == ()
    _same(fast.battles, careful.battles)
    assert fast.n_rows == careful.n_rows == 120


def _reference(rows: list[dict[str, Any]]) -> Battles:
    """The battles of ``rows``, every value spelled out: models sorted by name, judges and prompts in
    order of first appearance (an empty prompt id names none)."""
    a = np.array([r["model_a"] for r in rows], dtype=object)
    b = np.array([r["model_b"] for r in rows], dtype=object)
    codes, names = pd.factorize(np.concatenate([a, b]), sort=True)
    outcome = {label: int(code) for code, label in OUTCOME_STRINGS.items()}
    judges = pd.Series([r["judge"] for r in rows], dtype=object)
    questions = pd.Series([r["question_id"] or None for r in rows], dtype=object)
    judge_codes, judge_names = pd.factorize(judges, use_na_sentinel=True)
    return Battles(
        models=tuple(names),
        model_a=codes[: len(rows)],
        model_b=codes[len(rows) :],
        outcome=np.array([outcome[r["winner"]] for r in rows], dtype=np.int8),
        time=np.array([r["tstamp"] for r in rows], dtype=np.float64),
        weight=np.array([1.0 if r["weight"] is None else r["weight"] for r in rows]),
        sided=np.array([r["sided"] is not False for r in rows]),
        annotator=judge_codes.astype(np.int64),
        annotator_names=tuple(judge_names),
        prompt=pd.factorize(questions, use_na_sentinel=True)[0].astype(np.int64),
    )


def test_parquet_batches_give_the_spelled_out_battles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(columns, "_BATCH_ROWS", 4)
    rows = _rows(90, seed=11)
    path = _write(tmp_path / "b.parquet", rows)
    stored = pq.ParquetFile(path, read_dictionary=["model_a"]).schema_arrow.field("model_a").type
    assert pa.types.is_dictionary(stored)  # read as Parquet codes them
    fast = _fast(path, "digest", BattleFilter())
    assert fast is not None
    _same(fast.battles, _reference(rows))


def test_a_column_missing_from_the_file_holds_no_code_per_battle(tmp_path: Path) -> None:
    rows = [{k: r[k] for k in ("model_a", "model_b", "winner")} for r in _rows(30)]
    path = _write(tmp_path / "b.parquet", rows)
    fast = _fast(path, "digest", BattleFilter())
    assert fast is not None
    got = fast.battles
    assert got.time is None and got.weight is None and got.sided is None
    assert got.annotator is None and got.prompt is None
    column = CodedColumn.missing(10**9)  # a billion battles, no code stored for any
    assert column.codes.strides == (0,) and len(column) == 10**9


def test_spelled_out_and_coded_columns_select_the_same_battles() -> None:
    rows = _rows(60)
    spelled = read_rows_as_columns(rows)
    assert isinstance(spelled.model_a, np.ndarray)  # rows give objects, as the import's batches do
    assert isinstance(spelled.model_b, np.ndarray)

    def code(column: Any) -> CodedColumn:
        return CodedColumn.of(column)

    coded = replace(
        spelled,
        model_a=code(spelled.model_a),
        winner=code(spelled.winner),
        language=code(spelled.language),
        anony=code(spelled.anony),
        judge=code(spelled.judge),
        question_id=code(spelled.question_id),
    )
    for chosen in _FILTERS:  # model_b left spelled out: the two sides are coded together
        np.testing.assert_array_equal(keep_mask(spelled, chosen), keep_mask(coded, chosen))
        _same(select_battles(coded, chosen)[0], select_battles(spelled, chosen)[0])
    _same(select_battles(spelled, BattleFilter())[0], _reference(rows))
    twin = spelled.model_b.copy()
    twin[0] = rows[0]["model_a"]
    self_battle = replace(coded, model_b=twin)
    np.testing.assert_array_equal(select_battles(self_battle, BattleFilter())[1], [0])


def read_rows_as_columns(rows: list[dict[str, Any]]) -> BattleColumns:
    from votes.files.battle_rows import BattleRecord

    records = [
        BattleRecord(
            where=f"row {i}",
            model_a=r["model_a"],
            model_b=r["model_b"],
            winner=r["winner"],
            question_id=r["question_id"] or None,
            language=r["language"],
            judge=r["judge"],
            anony=r["anony"],
            tstamp=r["tstamp"],
            weight=1.0 if r["weight"] is None else r["weight"],
            sided=r["sided"] is not False,
        )
        for i, r in enumerate(rows, 1)
    ]
    return record_columns(records)


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("winner", "model_c", "winner"),
        ("model_b", "", "model_b"),
        ("model_a", None, "model_a"),
        ("weight", -1.0, "weight"),
        ("tstamp", -5.0, "tstamp"),
    ],
)
@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".csv"])
def test_a_bad_row_late_in_a_large_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, column: str, value: object, reason: str, suffix: str
) -> None:
    monkeypatch.setattr(columns, "_BATCH_ROWS", 1000)
    monkeypatch.setattr(columns, "_BLOCK_BYTES", 1 << 16)
    rows = _rows(20_000)
    rows[19_990][column] = value
    path = _write(tmp_path / f"b{suffix}", rows, row_group=500)  # 40 row groups, the bad one the last
    try:
        fast = _fast(path, "digest", BattleFilter())
    except ValueError:  # an unknown winner among the selected battles, as read_battles expects
        fast = None
    assert fast is None  # the batches hand it to the careful path
    with pytest.raises(InputError) as caught:
        read_battles(path)
    where = "line 19991" if suffix == ".jsonl" else "line 19992" if suffix == ".csv" else "row 19991"
    assert caught.value.where == where
    assert reason in caught.value.reason


def test_a_file_rewritten_while_it_is_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "b.jsonl", _rows(30))

    def hash_then_rewrite(p: Path, max_expanded: int | None = None) -> str:
        digest = input_sha256(p, max_expanded)
        _write(p, _rows(31))
        return digest

    monkeypatch.setattr(columns, "input_sha256", hash_then_rewrite)
    with pytest.raises(InputError, match="changed while it was being read"):
        read_battles(path)


def test_codes_widen_when_later_batches_bring_more_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(columns, "_BATCH_ROWS", 50)
    rows = _rows(400)
    for i, row in enumerate(rows[200:], start=200):  # 200 new names after the first batches, coded in a byte
        row["model_a"], row["question_id"] = f"late-{i:03d}", f"late-q{i}"
    path = _write(tmp_path / "b.parquet", rows)
    fast = _fast(path, "digest", BattleFilter())
    assert fast is not None
    assert len(fast.battles.models) > 200
    _same(fast.battles, read_battles(path, skip_invalid=True).battles)
    _same(fast.battles, _reference(rows))
