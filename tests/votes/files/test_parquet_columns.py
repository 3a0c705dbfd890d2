"""Parquet battles read with their text columns coded (never spelled out row by row): the fast path
gives the same battles as the row-by-row path, across row groups with their own codes and with nulls,
and a bad value among the codes still goes to the careful path, which names its row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from votes.files.columns import _fast, read_battles
from votes.files.records import InputError
from votes.files.selection import BattleFilter

ROWS: dict[str, list[object]] = {
    "model_a": ["b", "a", "c", "a", "d", "c", "b"],
    "model_b": ["a", "c", "b", "d", "c", "a", "d"],
    "winner": ["model_a", "tie", "model_b", "tie (bothbad)", "model_a", "model_b", "tie"],
    "language": ["English", None, "German", "English", None, "German", "English"],
    "judge": [None, "j2", "j1", None, "j1", "j2", None],
    "question_id": ["q1", "", "q2", "q1", None, "q3", "q2"],
}


def _write(path: Path, rows: dict[str, list[object]]) -> Path:
    pq.write_table(pa.table(rows), path, row_group_size=3)  # three row groups, each with its own codes
    return path


@pytest.mark.parametrize("language", [None, "English"])
def test_coded_parquet_columns_give_the_careful_paths_battles(tmp_path: Path, language: str | None) -> None:
    path = _write(tmp_path / "battles.parquet", ROWS)
    chosen = BattleFilter(language=language)
    fast = _fast(path, "", chosen)
    assert fast is not None  # the columnar path read it
    careful = read_battles(path, filters=chosen, skip_invalid=True).battles  # row by row
    got = fast.battles
    assert got.models == careful.models
    assert got.annotator_names == careful.annotator_names
    for name in ("model_a", "model_b", "outcome", "annotator", "prompt"):
        np.testing.assert_array_equal(getattr(got, name), getattr(careful, name), err_msg=name)
    assert len(got) == (7 if language is None else 3)


def test_an_empty_name_among_the_codes_is_refused_with_its_row(tmp_path: Path) -> None:
    rows = {**ROWS, "model_b": [*ROWS["model_b"][:5], "", "d"]}
    path = _write(tmp_path / "battles.parquet", rows)
    assert _fast(path, "", BattleFilter()) is None
    with pytest.raises(InputError, match="row 6|model_b"):
        read_battles(path)
