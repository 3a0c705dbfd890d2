"""The SOURCE_FORMATS table: battle files in the shapes people have, mapped to Chatbot Arena battle rows.

Each known shape is recognised from its columns (or named by the caller) and turned into rows of the
``clean_battle`` schema that :func:`votes.files.records.parse_battles` validates, plus two columns of our own:
``weight`` (how much the battle counts; 1 when absent) and ``sided`` (whether ``model_a`` really was the
answer shown first; true when absent). Rows keep their location (``line 7``, ``item 3``, ``row 2``), and a
row that produces two battles gives both the same location, so every message still names the input row.

:data:`SOURCE_FORMATS` holds one entry per shape: how its columns are recognised, the mapper of its rows
and the note of how it maps. Import, convert, recompute and evaluate read it (the ``--format`` choices, the
detection order, the notes); a new shape is one entry plus its mapper.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from votes.files.reading import load_json
from votes.files.records import InputError, Refusal

__all__ = [
    "CLEAN_BATTLE",
    "SOURCE_FORMATS",
    "STRONG_WEIGHT",
    "BattleFormat",
    "MappedRows",
    "RefusedRow",
    "SourceFormat",
    "detect_source_format",
    "map_catalog_rows",
    "map_source_rows",
]

#: A shape's name: a key of :data:`SOURCE_FORMATS`.
SourceFormat: TypeAlias = str
#: Weight of an arena-hard strong verdict (``A>>B``), as arena-hard's own scoring counts it.
STRONG_WEIGHT = 3.0

Row = tuple[str, dict[str, Any]]
#: A shape's mapper: one row (and the baseline model named on the command line) to its battles, in the
#: ``clean_battle`` schema; a row that does not map raises :class:`RefusedRow` with the reason.
Mapper = Callable[[Mapping[str, Any], str | None], list[dict[str, Any]]]


@dataclass
class MappedRows:
    """Battle rows in the ``clean_battle`` schema, what was refused, and a note of the mapping."""

    source_format: SourceFormat
    rows: list[Row]
    note: str
    refused: list[Refusal] = field(default_factory=list)


def detect_source_format(rows: Sequence[Row]) -> SourceFormat | None:
    """The shape of battle rows, from the columns of the first rows (None when none fits): the shapes of
    :data:`SOURCE_FORMATS` are tried from the most specific columns to the most generic."""
    seen: set[str] = set()
    for _, row in rows[:50]:
        seen.update(row)
    tried = sorted(SOURCE_FORMATS.items(), key=lambda item: item[1].generic)
    return next((name for name, shape in tried if shape.detect(seen)), None)


def hint_for(rows: Sequence[Row]) -> str:
    """What a file that fits no battle shape looks like, for the error message."""
    if not rows:
        return "it holds no rows (an empty file has no battles to fit)"
    seen: set[str] = set()
    for _, row in rows[:50]:
        seen.update(row)
    if {"uid", "prompt"} <= seen and "model" not in seen:
        return "this looks like arena-hard questions (uid, prompt): import them as a catalog"
    if {"uid", "model", "messages"} <= seen:
        return "this looks like arena-hard answers (uid, model, messages): import them as a catalog"
    missing = [c for c in ("model_a", "model_b", "winner") if c not in seen]
    if len(missing) < 3:
        return f"missing column {missing[0]!r} of Chatbot Arena battles"
    shown = ", ".join(sorted(seen)[:12])
    return f"no known battle columns (found: {shown}); see `arena import --help` for the formats read"


def map_source_rows(
    path: Path, rows: Sequence[Row], source_format: SourceFormat | None = None, *, baseline: str | None = None
) -> MappedRows:
    """Map rows of a known shape to ``clean_battle`` rows.

    Parameters
    ----------
    path : the file, for messages
    rows : ``(location, row)`` pairs from :func:`votes.files.reading.read_rows`
    source_format : the shape; detected from the columns when None
    baseline : arena-hard: the baseline model when the judgments do not name it in a ``baseline`` column

    Raises
    ------
    InputError
        When the shape cannot be told, naming what the file looks like.
    """
    fmt = source_format or detect_source_format(rows)
    if fmt is None:
        raise InputError(path, None, f"cannot tell which battle format this is: {hint_for(rows)}")
    shape = SOURCE_FORMATS[fmt]
    mapper = shape.mapper
    out: list[Row] = []
    refused: list[Refusal] = []
    for where, raw in rows:
        try:
            out.extend((where, r) for r in mapper(raw, baseline))
        except RefusedRow as exc:
            refused.append(Refusal(where, str(exc)))
    return MappedRows(fmt, out, shape.note, refused)


class RefusedRow(ValueError):
    """One row that does not map, raised by a shape's mapper with the reason (the row is then refused,
    or with ``skip_invalid`` listed)."""


def _keep(raw: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: raw[k] for k in keys if raw.get(k) is not None}


def _clean_battle(raw: Mapping[str, Any], _baseline: str | None) -> list[dict[str, Any]]:
    return [dict(raw)]


def _turns(value: Any, key: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = load_json(value)
        except json.JSONDecodeError:
            return [value]
    if isinstance(value, list) and all(isinstance(t, str) or t is None for t in value):
        return ["" if t is None else t for t in value]
    raise RefusedRow(f"{key!r} must be a JSON list of turns (strings)")


def _one_hot(raw: Mapping[str, Any]) -> str:
    flags = []
    for key, label in (("winner_model_a", "model_a"), ("winner_model_b", "model_b"), ("winner_tie", "tie")):
        value = raw.get(key, 0)
        if isinstance(value, str):
            value = value.strip().lower() in ("1", "true", "1.0")
        if value not in (0, 1, True, False):
            raise RefusedRow(f"{key!r} must be 0 or 1, got {value!r}")
        if value:
            flags.append(label)
    if len(flags) != 1:
        raise RefusedRow("exactly one of winner_model_a, winner_model_b, winner_tie must be 1")
    return flags[0]


def _hf_preference(raw: Mapping[str, Any], _baseline: str | None) -> list[dict[str, Any]]:
    row = _keep(
        raw, "question_id", "id", "model_a", "model_b", "judge", "language", "turn", "anony", "tstamp"
    )
    if "question_id" not in row and "id" in row:
        row["question_id"] = row["id"]
    row.pop("id", None)
    row["winner"] = raw["winner"] if raw.get("winner") is not None else _one_hot(raw)
    if (
        raw.get("prompt") is not None
        and raw.get("response_a") is not None
        and raw.get("response_b") is not None
    ):
        prompts = _turns(raw["prompt"], "prompt")
        for side, key in (("a", "response_a"), ("b", "response_b")):
            answers = _turns(raw[key], key)
            if len(answers) != len(prompts):
                raise RefusedRow(f"{key!r} has {len(answers)} turns, prompt has {len(prompts)}")
            conversation = []
            for user, assistant in zip(prompts, answers, strict=True):
                conversation += [
                    {"role": "user", "content": user},
                    {"role": "assistant", "content": assistant},
                ]
            row[f"conversation_{side}"] = conversation
    return [row]


_MT_WINNERS = {"model_1", "model_2", "tie"}


def _judge_name(value: Any) -> str | None:
    if isinstance(value, list | tuple):
        return "/".join(str(v) for v in value if v is not None) or None
    return None if value is None else str(value)


def _mt_bench(raw: Mapping[str, Any], _baseline: str | None) -> list[dict[str, Any]]:
    m1, m2 = raw.get("model_1"), raw.get("model_2")
    if not isinstance(m1, str) or not isinstance(m2, str):
        raise RefusedRow("'model_1' and 'model_2' must be strings")
    common = _keep(raw, "question_id", "turn", "tstamp")
    judge = _judge_name(raw.get("judge"))
    if judge is not None:
        common["judge"] = judge
    out = []
    for game, key, left, right in ((1, "g1_winner", m1, m2), (2, "g2_winner", m2, m1)):
        verdict = raw.get(key)
        if verdict not in _MT_WINNERS:
            raise RefusedRow(f"game {game}: {key!r} is {verdict!r}; expected model_1, model_2 or tie")
        winner = (
            "tie"
            if verdict == "tie"
            else ("model_a" if (m1 if verdict == "model_1" else m2) == left else "model_b")
        )
        out.append({**common, "model_a": left, "model_b": right, "winner": winner})
    return out


_HARD_SCORES: dict[str, tuple[str, float]] = {
    "A>>B": ("model_a", STRONG_WEIGHT),
    "A>B": ("model_a", 1.0),
    "A=B": ("tie", 1.0),
    "B>A": ("model_b", 1.0),
    "B>>A": ("model_b", STRONG_WEIGHT),
}


def _arena_hard(raw: Mapping[str, Any], baseline: str | None) -> list[dict[str, Any]]:
    model = raw.get("model")
    base = raw.get("baseline", baseline)
    if not isinstance(model, str) or not model:
        raise RefusedRow("'model' must be a non-empty string")
    if not isinstance(base, str) or not base:
        raise RefusedRow(
            "no baseline model: the judgments have no 'baseline' column; name it with --baseline"
        )
    games = raw.get("games")
    if isinstance(games, str):
        try:
            games = load_json(games)
        except json.JSONDecodeError:
            raise RefusedRow("'games' is not valid JSON") from None
    if not isinstance(games, list) or not games:
        raise RefusedRow("'games' must be a non-empty list")
    common = _keep(raw, "category", "tstamp")
    qid = raw.get("uid", raw.get("question_id"))
    if qid is not None:
        common["question_id"] = qid
    judge = _judge_name(raw.get("judge"))
    if judge is not None:
        common["judge"] = judge
    out = []
    for k, game in enumerate(games[:2], start=1):
        score = game.get("score") if isinstance(game, dict) else None
        if score not in _HARD_SCORES:
            raise RefusedRow(f"game {k}: score {score!r}; expected one of {', '.join(_HARD_SCORES)}")
        winner, weight = _HARD_SCORES[score]
        left, right = (base, model) if k == 1 else (model, base)
        out.append({**common, "model_a": left, "model_b": right, "winner": winner, "weight": weight})
    return out


def _preference(value: Any) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise RefusedRow(f"'preference' must be a number in [1, 2], got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1.0 <= float(value) <= 2.0:
        raise RefusedRow(f"'preference' must be a number in [1, 2], got {value!r}")
    return float(value)


def _alpaca_eval(raw: Mapping[str, Any], _baseline: str | None) -> list[dict[str, Any]]:
    g1, g2 = raw.get("generator_1"), raw.get("generator_2")
    if not isinstance(g1, str) or not isinstance(g2, str):
        raise RefusedRow("'generator_1' and 'generator_2' must be strings")
    p = _preference(raw.get("preference"))
    common: dict[str, Any] = {"model_a": g1, "model_b": g2, "sided": False}
    judge = raw.get("annotator")
    if isinstance(judge, str) and judge:
        common["judge"] = judge
    if isinstance(raw.get("instruction"), str) and isinstance(raw.get("output_1"), str):
        if isinstance(raw.get("output_2"), str):
            user = {"role": "user", "content": raw["instruction"]}
            common["conversation_a"] = [user, {"role": "assistant", "content": raw["output_1"]}]
            common["conversation_b"] = [user, {"role": "assistant", "content": raw["output_2"]}]
    out = []
    if p < 2.0:
        out.append({**common, "winner": "model_a", "weight": 2.0 - p})
    if p > 1.0:
        out.append({**common, "winner": "model_b", "weight": p - 1.0})
    return out


@dataclass(frozen=True)
class BattleFormat:
    """One shape of battle file.

    Attributes
    ----------
    detect : callable
        Whether the columns seen in a file's first rows are of this shape.
    mapper : callable
        One row to its battles in the ``clean_battle`` schema (:data:`Mapper`).
    note : str
        How the shape maps, told with the import's report.
    generic : int
        Detection order: shapes with columns of their own (0) are tried before those that share
        Chatbot Arena's (1), and the plain Chatbot Arena battles (2) last.
    """

    detect: Callable[[set[str]], bool]
    mapper: Mapper
    note: str
    generic: int = 0


#: The shape read as it is: Chatbot Arena battles, which the columnar readers take without a mapping.
CLEAN_BATTLE: SourceFormat = "clean-battle"

#: Every battle file shape by its name (the ``--format`` choices, in this order).
SOURCE_FORMATS: dict[SourceFormat, BattleFormat] = {
    # FastChat / Chatbot Arena battles, read as they are; side known.
    CLEAN_BATTLE: BattleFormat(
        detect=lambda seen: {"model_a", "model_b", "winner"} <= seen,
        mapper=_clean_battle,
        note="Chatbot Arena battles read as they are (model_a shown on the left)",
        generic=2,
    ),
    # Hugging Face arena preference sets: winner_model_a / winner_model_b / winner_tie one-hot columns (or
    # winner strings); prompt, response_a, response_b as JSON lists of turns become the two conversations;
    # side known (a is left).
    "hf-preference": BattleFormat(
        detect=lambda seen: (
            {"model_a", "model_b", "winner_model_a", "winner_model_b"} <= seen
            or {"model_a", "model_b", "response_a"} <= seen
        ),
        mapper=_hf_preference,
        note=(
            "Hugging Face preference set: winner from winner_model_a/winner_model_b/winner_tie (or winner), "
            "prompt + response_a/response_b turned into conversations; model_a shown on the left"
        ),
        generic=1,
    ),
    # FastChat llm_judge pairwise judgments: two games per row, game 1 with model_1 first, game 2 swapped
    # (g2_winner names the model as model_1/model_2); judge name kept; side known.
    "mt-bench-pairwise": BattleFormat(
        detect=lambda seen: {"model_1", "model_2", "g1_winner", "g2_winner"} <= seen,
        mapper=_mt_bench,
        note=(
            "MT-bench pairwise judgments: two battles per row, game 1 model_1 left, game 2 swapped "
            "(model_2 left); judge kept; 'error' verdicts refused"
        ),
    ),
    # arena-hard judgments: games with scores A>>B .. B>>A; game 1 shows the baseline as A, game 2 the
    # model; strong verdicts weigh STRONG_WEIGHT; side known.
    "arena-hard": BattleFormat(
        detect=lambda seen: {"games", "model"} <= seen,
        mapper=_arena_hard,
        note=(
            "arena-hard judgments: game 1 baseline left, game 2 model left; A>B a win, A>>B a win of weight "
            f"{STRONG_WEIGHT:g}, A=B a tie"
        ),
    ),
    # AlpacaEval annotations: preference in [1, 2] is a soft label, a win of output_1 weighted 2 - p and one
    # of output_2 weighted p - 1; the annotators shuffle the display order, so the side is unknown.
    "alpaca-eval": BattleFormat(
        detect=lambda seen: {"generator_1", "generator_2", "preference"} <= seen,
        mapper=_alpaca_eval,
        note=(
            "AlpacaEval annotations: preference p in [1, 2] as a win of output_1 weighted 2-p and one of "
            "output_2 weighted p-1; display order shuffled by the annotators, so the side is unknown"
        ),
    ),
}


def _answer_text(content: Any) -> str | None:
    if isinstance(content, dict):
        content = content.get("answer")
    return content if isinstance(content, str) else None


def map_catalog_rows(path: Path, rows: Sequence[Row]) -> tuple[list[Row], str]:
    """arena-hard questions (``uid``, ``category``, ``prompt``) and answers (``uid``, ``model``,
    ``messages`` with the user's prompt and the assistant's answer, itself text or ``{"answer": ...}``)
    as catalog rows, with a note; other catalogs are returned as they are, with an empty note.

    Raises
    ------
    InputError
        For an answer row without a user prompt or an assistant answer.
    """
    seen = {k for _, row in rows[:50] for k in row}
    if "uid" not in seen or "prompt_id" in seen:
        return list(rows), ""
    out: list[Row] = []
    if "messages" not in seen:
        for where, raw in rows:
            row = {"prompt_id": raw.get("uid"), "prompt": raw.get("prompt"), "category": raw.get("category")}
            out.append((where, {k: v for k, v in row.items() if v is not None}))
        return out, "arena-hard questions: uid as prompt_id, prompt and category kept"
    categories = _question_categories(path)
    for where, raw in rows:
        messages = raw.get("messages")
        if isinstance(messages, str):
            try:
                messages = load_json(messages)
            except json.JSONDecodeError:
                raise InputError(path, where, "'messages' is not valid JSON") from None
        if not isinstance(messages, list):
            raise InputError(path, where, "'messages' must be a list of {role, content}")
        users = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        answers = [
            _answer_text(m.get("content"))
            for m in messages
            if isinstance(m, dict) and m.get("role") == "assistant"
        ]
        if not users or not isinstance(users[0], str):
            raise InputError(path, where, "'messages' holds no user prompt")
        if not answers or answers[-1] is None:
            raise InputError(path, where, "'messages' holds no assistant answer")
        row = {
            "prompt_id": raw.get("uid"),
            "prompt": users[0],
            "model": raw.get("model"),
            "output": answers[-1],
        }
        category = raw.get("category", categories.get(str(raw.get("uid"))))
        if category is not None:
            row["category"] = category
        out.append((where, row))
    note = (
        "arena-hard answers: uid as prompt_id, the user message as prompt, the assistant's answer as output"
    )
    if categories:
        note += ", category from the question.jsonl beside them"
    return out, note


def _question_categories(answers: Path) -> dict[str, str]:
    """Categories by uid from arena-hard's ``question.jsonl``, found where arena-hard keeps it: next to
    the answers file or one folder up (``data/<bench>/question.jsonl`` beside ``model_answer/``)."""
    for folder in (answers.parent, answers.parent.parent):
        questions = folder / "question.jsonl"
        if questions.is_file() and questions != answers:
            out: dict[str, str] = {}
            for line in questions.read_text(encoding="utf-8").splitlines():
                try:
                    row = load_json(line) if line.strip() else None
                except json.JSONDecodeError:
                    continue
                if isinstance(row, dict) and isinstance(row.get("category"), str):
                    out[str(row.get("uid"))] = row["category"]
            return out
    return {}
