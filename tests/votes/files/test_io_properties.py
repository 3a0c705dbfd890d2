"""Property tests (hypothesis): any valid rows survive every format and the store; any one corrupted
row is refused with its location, and the store is left as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import Engine

from leaderboard.data import OUTCOME_STRINGS
from tests.factories import clear, row_counts
from votes.files.battle_rows import parse_battles
from votes.files.catalog_records import parse_catalog
from votes.files.reading import read_rows
from votes.files.records import FORMATS, InputError
from votes.files.writers import write_rows
from votes.imports.files import import_file
from votes.names import model_name
from votes.reads.exports import export_catalog, export_votes

PROPERTY_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Text that CSV and JSON both carry faithfully; "" is the CSV spelling of a missing value, so names and
# answers are non-empty, and a string prompt must not look like a JSON conversation.
text = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=30,
)
name = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=12,
)


def _stored_form(value: str) -> bool:
    try:
        return model_name(value) == value
    except ValueError:
        return False


# Model names as every door stores them (votes.names): no control, format or surrogate characters.
model_names = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cc", "Cf", "Cs", "Co"]), min_size=1, max_size=12
).filter(_stored_form)
plain_prompt = text.filter(lambda s: not s.lstrip().startswith("[{"))
messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "system"]),
            "content": st.text(st.characters(exclude_characters="\x00"), max_size=20),
        }
    ),
    min_size=1,
    max_size=3,
)


@st.composite
def battle_rows(draw: st.DrawFn) -> dict[str, Any]:
    model_a, model_b = draw(st.lists(model_names, min_size=2, max_size=2, unique=True))
    row: dict[str, Any] = {
        "question_id": draw(st.none() | name),
        "model_a": model_a,
        "model_b": model_b,
        "winner": draw(st.sampled_from(list(OUTCOME_STRINGS.values()))),
        "judge": draw(st.none() | name),
        "conversation_a": None,
        "conversation_b": None,
        "turn": draw(st.none() | st.integers(-(2**40), 2**40)),
        "anony": draw(st.none() | st.booleans()),
        "language": draw(st.none() | name),
        "tstamp": draw(st.none() | st.floats(0, 4e9, allow_nan=False)),
    }
    if draw(st.booleans()):
        question = draw(text)
        row["conversation_a"] = [
            {"role": "user", "content": question},
            {"role": "assistant", "content": draw(text)},
        ]
        row["conversation_b"] = [
            {"role": "user", "content": question},
            {"role": "assistant", "content": draw(text)},
        ]
    return row


@st.composite
def catalog_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    prompts = draw(st.lists(name, min_size=1, max_size=4, unique=True))
    models = draw(st.lists(model_names, min_size=1, max_size=3, unique=True))
    rows = []
    for pid in prompts:
        prompt = draw(plain_prompt | messages.filter(lambda m: any(x["role"] == "user" for x in m)))
        meta = {"category": draw(st.none() | name), "language": draw(st.none() | name)}
        chosen = draw(st.lists(st.sampled_from(models), unique=True, max_size=len(models)))
        if not chosen:
            rows.append({"prompt_id": pid, "prompt": prompt, **meta, "model": None, "output": None})
        for model in chosen:
            rows.append({"prompt_id": pid, "prompt": prompt, **meta, "model": model, "output": draw(text)})
    return rows


@PROPERTY_SETTINGS
@given(rows=st.lists(battle_rows(), max_size=8), fmt=st.sampled_from(FORMATS))
def test_battle_rows_survive_every_format(tmp_path: Path, rows: list[dict[str, Any]], fmt: str) -> None:
    path = tmp_path / f"b.{fmt}"
    write_rows(rows, path, kind="battles", fmt=fmt)  # type: ignore[arg-type]
    file_format, raw = read_rows(path)
    assert file_format == fmt
    assert [r.row() for r in parse_battles(path, file_format, raw)] == rows


@PROPERTY_SETTINGS
@given(rows=catalog_rows(), fmt=st.sampled_from(FORMATS))
def test_catalog_rows_survive_every_format(tmp_path: Path, rows: list[dict[str, Any]], fmt: str) -> None:
    path = tmp_path / f"c.{fmt}"
    write_rows(rows, path, kind="catalog", fmt=fmt)  # type: ignore[arg-type]
    file_format, raw = read_rows(path)
    assert [r.row() for r in parse_catalog(path, file_format, raw)] == rows


@PROPERTY_SETTINGS
@given(rows=st.lists(battle_rows(), min_size=1, max_size=6), fmt=st.sampled_from(FORMATS))
def test_store_round_trip_is_byte_identical(
    engine: Engine, tmp_path: Path, rows: list[dict[str, Any]], fmt: str
) -> None:
    """File -> store -> export -> empty store -> export: the two exports are the same bytes."""
    # Answers must agree per (prompt, model) within one file, as the importer (rightly) demands.
    seen: dict[tuple[Any, str], Any] = {}
    for row in rows:
        if row["conversation_a"] is not None:
            row["question_id"] = None
            for side in ("a", "b"):
                key = (json.dumps(row["conversation_a"][0]), row[f"model_{side}"])
                row[f"conversation_{side}"] = seen.setdefault(key, row[f"conversation_{side}"])
    clear(engine)
    source = tmp_path / f"source.{fmt}"
    write_rows(rows, source, kind="battles", fmt=fmt)  # type: ignore[arg-type]
    import_file(engine, source)
    exports = []
    for generation in range(2):
        out = tmp_path / f"votes-{generation}.{fmt}"
        cat = tmp_path / f"catalog-{generation}.{fmt}"
        export_votes(engine, out, fmt=fmt)  # type: ignore[arg-type]
        export_catalog(engine, cat, fmt=fmt)  # type: ignore[arg-type]
        exports.append((out.read_bytes(), cat.read_bytes()))
        clear(engine)
        import_file(engine, cat)
        import_file(engine, out)
    assert exports[0] == exports[1]


CORRUPTIONS: dict[str, tuple[Any, str]] = {
    "winner": ("draw", "unknown winner"),
    "model_b": (None, "missing field 'model_b'"),
    "model_a": (12, "must be a string"),
    "tstamp": ("yesterday", "must be a number"),
    "anony": ("yes", "must be true or false"),
    "turn": (True, "must be an integer"),
    "conversation_a": ([{"role": "user"}], "needs a string 'role' and a string 'content'"),
}


@PROPERTY_SETTINGS
@given(
    rows=st.lists(battle_rows(), min_size=1, max_size=6),
    position=st.integers(0, 6),
    field=st.sampled_from(sorted(CORRUPTIONS) + ["self", "json"]),
)
def test_one_malformed_row_is_refused_with_its_line(
    engine: Engine, tmp_path: Path, rows: list[dict[str, Any]], position: int, field: str
) -> None:
    clear(engine)
    for i, row in enumerate(rows):  # distinct, consistent valid rows
        row.update(conversation_a=None, conversation_b=None, tstamp=float(i))
    import_file(engine, _jsonl(tmp_path / "seed.jsonl", rows[:1]))
    before = row_counts(engine)
    position = min(position, len(rows))
    bad: dict[str, Any] = dict(rows[0])
    if field == "self":
        bad["model_b"], reason = bad["model_a"], "cannot battle itself"
        line = json.dumps(bad)
    elif field == "json":
        line, reason = json.dumps(bad)[:-1], "invalid JSON"
    else:
        value, reason = CORRUPTIONS[field]
        bad[field] = value
        line = json.dumps({k: v for k, v in bad.items() if v is not None or k != field})
    lines = [json.dumps(r) for r in rows]
    lines.insert(position, line)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        import_file(engine, path)
    assert info.value.where == f"line {position + 1}"
    assert reason in info.value.reason
    assert row_counts(engine) == before


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
