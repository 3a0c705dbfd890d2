"""Hostile values in an imported file: each gives ``file: line N: reason`` and writes nothing, and a gzip
bomb is refused after a bounded amount of decompression.

Each case once crashed the importer with a traceback (an OverflowError writing a timestamp, a
RecursionError in the JSON parser, a UnicodeEncodeError hashing a name) or took memory in proportion to
the expanded size.
"""

from __future__ import annotations

import gzip
import time
import tracemalloc
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from tests.factories import row_counts, write_jsonl
from votes.files.columns import read_battles
from votes.files.reading import read_rows
from votes.files.records import InputError
from votes.imports.files import import_file

GOOD = '{"model_a": "alpha", "model_b": "beta", "winner": "model_a", "tstamp": 1700000000}'


def _refused(store: Engine, path: Path, line: int, reason: str) -> InputError:
    """Import ``path``: it must fail on ``line`` with ``reason`` in the message and leave no row behind."""
    with pytest.raises(InputError) as info:
        import_file(store, path)
    message = str(info.value)
    assert message.startswith(f"{path}: line {line}: "), message
    assert reason in message, message
    assert sum(row_counts(store).values()) == 0
    return info.value


@pytest.mark.parametrize("tstamp", ["1e20", "-1e13", "-1"])
def test_a_timestamp_out_of_range_names_its_line(store: Engine, tmp_path: Path, tstamp: str) -> None:
    bad = f'{{"model_a": "alpha", "model_b": "beta", "winner": "tie", "tstamp": {tstamp}}}'
    path = write_jsonl(tmp_path / "battles.jsonl", [GOOD, bad])
    _refused(store, path, 2, "'tstamp' must be seconds since 1970")


def test_a_timestamp_out_of_range_is_refused_by_the_columnar_reader_too(tmp_path: Path) -> None:
    bad = '{"model_a": "alpha", "model_b": "beta", "winner": "tie", "tstamp": 1e20}'
    path = write_jsonl(tmp_path / "battles.jsonl", [GOOD, bad])
    with pytest.raises(InputError, match=r"line 2: 'tstamp' must be seconds since 1970"):
        read_battles(path)


@pytest.mark.parametrize("field", ["turn", "tstamp", "question_id"])
def test_an_integer_of_400_digits_names_its_line(store: Engine, tmp_path: Path, field: str) -> None:
    huge = "9" * 400
    bad = f'{{"model_a": "alpha", "model_b": "beta", "winner": "tie", "{field}": {huge}}}'
    path = write_jsonl(tmp_path / "battles.jsonl", [GOOD, GOOD, bad])
    _refused(store, path, 3, f"'{field}' is out of range")


def test_an_integer_beyond_the_parser_digit_limit_names_its_line(store: Engine, tmp_path: Path) -> None:
    bad = '{"model_a": "alpha", "model_b": "beta", "winner": "tie", "turn": ' + "7" * 5000 + "}"
    path = write_jsonl(tmp_path / "battles.jsonl", [bad])
    _refused(store, path, 1, "invalid JSON")


def test_json_nested_200000_deep_names_its_line(store: Engine, tmp_path: Path) -> None:
    depth = 200_000
    bad = (
        '{"model_a": "alpha", "model_b": "beta", "winner": "tie", "judge": ' + "[" * depth + "]" * depth + "}"
    )
    path = write_jsonl(tmp_path / "battles.jsonl", [GOOD, bad])
    _refused(store, path, 2, "invalid JSON (nested too deeply")
    with pytest.raises(InputError, match=r"line 2: invalid JSON \(nested too deeply"):
        read_battles(path)


def test_json_nested_deep_inside_a_csv_conversation_cell_names_its_row(tmp_path: Path) -> None:
    from votes.files.battle_rows import parse_battles

    deep = "[" * 50_000 + "]" * 50_000  # under the CSV field limit, far beyond the parser's depth
    path = tmp_path / "battles.csv"
    path.write_text('model_a,model_b,winner,conversation_a,conversation_b\nalpha,beta,tie,"' + deep + '",x\n')
    fmt, rows = read_rows(path)
    with pytest.raises(InputError, match=r"line 2: 'conversation_a' is not valid JSON \(nested too deeply"):
        parse_battles(path, fmt, rows)


@pytest.mark.parametrize("where", ["model_a", "judge", "content"])
def test_a_lone_surrogate_names_its_line(store: Engine, tmp_path: Path, where: str) -> None:
    name = "alpha\\ud800x"
    if where == "content":
        conv = '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "%s"}]'
        bad = (
            '{"model_a": "alpha", "model_b": "beta", "winner": "tie", '
            f'"conversation_a": {conv % name}, "conversation_b": {conv % "fine"}}}'
        )
        reason = "'conversation_a' message 1 contains a lone surrogate (U+D800)"
    else:
        fields = {"model_a": '"alpha"', "model_b": '"beta"', "judge": '"j"'}
        fields[where] = f'"{name}"'
        bad = "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + ', "winner": "tie"}'
        # a model name goes through votes.names, which words it its own way; the row and character named
        reason = "(U+D800)" if where == "model_a" else f"'{where}' contains a lone surrogate (U+D800)"
    path = write_jsonl(tmp_path / "battles.jsonl", [GOOD, bad])
    _refused(store, path, 2, reason)


def _gzip_bomb(path: Path, expanded: int) -> Path:
    """A gzip file of ``expanded`` bytes of JSONL whitespace, written in steps (a few hundred KB on disk)."""
    step = b" " * (1 << 20)
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write((GOOD + "\n").encode())
        for _ in range(expanded // len(step)):
            fh.write(step)
    return path


def test_a_gzip_bomb_is_refused_quickly_in_bounded_memory(store: Engine, tmp_path: Path) -> None:
    bomb = _gzip_bomb(tmp_path / "bomb.jsonl.gz", 256 << 20)
    assert bomb.stat().st_size < 2 << 20
    cap = 4 << 20
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(InputError, match=r"expands to more than 4,194,304 bytes when decompressed"):
            import_file(store, bomb, max_expanded=cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 10.0
    assert peak < 32 << 20, f"{peak / 2**20:.0f} MiB traced while refusing a 256 MiB bomb with a 4 MiB cap"
    assert sum(row_counts(store).values()) == 0
    with pytest.raises(InputError, match="expands to more than"):
        read_battles(bomb, max_expanded=cap)


def test_a_gzip_file_under_the_cap_imports(store: Engine, tmp_path: Path) -> None:
    path = tmp_path / "battles.jsonl.gz"
    path.write_bytes(gzip.compress((GOOD + "\n").encode() * 3))
    report = import_file(store, path, max_expanded=1 << 20)
    assert report.n_added == 3  # identical rows are one battle per occurrence


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("m" * 201, "'model_a': a model name is longer than 200 characters"),
        ("a\x00b", "'model_a': model name contains a control character"),
        ("", "'model_a' must not be empty"),
        (7, "'model_a' must be a string, got a number"),
    ],
)
def test_the_columnar_reader_refuses_what_the_row_checks_refuse(
    tmp_path: Path, value: object, reason: str
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "battles.parquet"
    first = 9 if isinstance(value, int) else "x"
    pq.write_table(
        pa.table({"model_a": [first, value], "model_b": ["y", "y"], "winner": ["tie", "tie"]}), path
    )
    where = "row 1" if isinstance(value, int) else "row 2"
    with pytest.raises(InputError, match=f"{where}: {reason}"):
        read_battles(path)
