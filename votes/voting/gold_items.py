"""Gold battles as items: added from a JSONL file, derived from the catalog's own answers, listed, loaded.

A maintainer's file says for each gold what is right; :func:`add_gold_file` checks every line first and
writes nothing unless all are good (each bad line is reported as ``file: line N: reason``). A team without
a file gets golds from its catalog (:func:`derive_golds`): an answer against a corrupted copy of itself
(cut short, its sentences shuffled, or the same model's answer to another prompt), or the same answer on
both sides. Both paths are idempotent: each gold has a content key, and adding it again adds nothing.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from leaderboard.data import OUTCOME_STRINGS, Outcome
from votes.models import GoldBattle, Model, Output, Prompt

__all__ = [
    "GOLD_KINDS",
    "GoldFileError",
    "GoldItem",
    "GoldSpec",
    "add_gold_file",
    "add_golds",
    "derive_golds",
    "gold_answers",
    "gold_sides",
    "load_gold_items",
    "load_prompts",
    "parse_gold_file",
]

GOLD_KINDS = ("objective", "degraded", "identical")
#: A gold's right answer (``GoldBattle.right``): its first text, or a tie between two identical texts,
#: stored as the tie's winner string.
RIGHT_FIRST = "a"
RIGHT_TIE = OUTCOME_STRINGS[Outcome.TIE]
DERIVED_DETAILS = ("truncated", "shuffled", "other-prompt", "identical")
MAX_TEXT_CHARS = 50_000
MAX_LINE_BYTES = 4 * MAX_TEXT_CHARS + 4096
MAX_ROWS = 100_000
# A gold's prompt not in the catalog is added with these (so it looks like the catalog's own prompts).
_PROMPT_EXTRA = ("detail", "category", "language")
_FIELDS = {
    "objective": ({"kind", "prompt", "right", "wrong"}, {"model_right", "model_wrong", *_PROMPT_EXTRA}),
    "degraded": ({"kind", "prompt", "right", "wrong"}, {"model_right", "model_wrong", *_PROMPT_EXTRA}),
    "identical": ({"kind", "prompt", "text"}, {"model", *_PROMPT_EXTRA}),
}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class GoldFileError(ValueError):
    """A gold file with bad lines; ``problems`` holds one ``file: line N: reason`` each."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True)
class GoldSpec:
    """One gold before it is stored: ``text_a`` right (or both the same, right a tie)."""

    kind: str
    detail: str | None
    prompt: str
    text_a: str
    text_b: str
    right: str
    model_a: str | None = None
    model_b: str | None = None
    category: str | None = None
    language: str | None = None

    def key(self) -> str:
        content = [self.kind, self.detail, self.prompt, self.text_a, self.text_b, self.right]
        content += [self.model_a, self.model_b, self.category, self.language]
        return hashlib.sha256(json.dumps(content, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class GoldItem:
    """A servable gold as the pairing service keeps it in memory."""

    gold_id: int
    prompt_id: int
    text_a: str
    text_b: str
    right: str
    model_a_id: int | None
    model_b_id: int | None

    def expected_winner(self, *, right_on_left: bool) -> str:
        """The winner string a vote on this gold must give: a tie for a tie, else the side its right text
        is shown on."""
        if self.right == RIGHT_TIE:
            return OUTCOME_STRINGS[Outcome.TIE]
        return OUTCOME_STRINGS[Outcome.MODEL_A if right_on_left else Outcome.MODEL_B]


def _text(row: dict[str, Any], field: str) -> str:
    value = row[field]
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{field!r} must be non-empty text")
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"{field!r} is longer than {MAX_TEXT_CHARS} characters")
    return value


def _optional_name(row: dict[str, Any], field: str, models: set[str]) -> str | None:
    value = row.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or value not in models:
        raise ValueError(f"{field!r} must name a catalog model")
    return value


def _spec(row: Any, models: set[str]) -> GoldSpec:
    if not isinstance(row, dict):
        raise ValueError("a line must be a JSON object")
    kind = row.get("kind")
    if kind not in _FIELDS:
        raise ValueError(f"'kind' must be one of {', '.join(GOLD_KINDS)}")
    required, optional = _FIELDS[kind]
    missing = sorted(required - row.keys())
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    unknown = sorted(row.keys() - required - optional)
    if unknown:
        raise ValueError(f"unknown field {', '.join(unknown)}")
    detail = row.get("detail")
    if detail is not None and (not isinstance(detail, str) or not 0 < len(detail) <= 40):
        raise ValueError("'detail' must be text of at most 40 characters")
    prompt = _text(row, "prompt")
    extra: dict[str, str | None] = {}
    for field, most in (("category", 100), ("language", 50)):
        value = row.get(field)
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= most):
            raise ValueError(f"{field!r} must be text of at most {most} characters")
        extra[field] = value
    if kind == "identical":
        text = _text(row, "text")
        model = _optional_name(row, "model", models)
        return GoldSpec(kind, detail, prompt, text, text, RIGHT_TIE, model, model, **extra)
    right, wrong = _text(row, "right"), _text(row, "wrong")
    if right == wrong:
        raise ValueError("'right' and 'wrong' are the same text (use kind identical)")
    return GoldSpec(
        kind,
        detail,
        prompt,
        right,
        wrong,
        RIGHT_FIRST,
        _optional_name(row, "model_right", models),
        _optional_name(row, "model_wrong", models),
        **extra,
    )


def parse_gold_file(path: Path, *, model_names: set[str]) -> list[GoldSpec]:
    """Every gold of a JSONL file, or :class:`GoldFileError` listing every bad line (bounded in size)."""
    specs: list[GoldSpec] = []
    problems: list[str] = []
    with path.open("rb") as handle:
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), start=1):
            where = f"{path}: line {number}"
            if number > MAX_ROWS:
                problems.append(f"{where}: more than {MAX_ROWS} lines")
                break
            if len(raw) > MAX_LINE_BYTES:
                problems.append(f"{where}: longer than {MAX_LINE_BYTES} bytes")
                while raw and not raw.endswith(b"\n"):  # skip the rest of the long line
                    raw = handle.readline(MAX_LINE_BYTES + 1)
                continue
            if not raw.strip():
                continue
            try:
                specs.append(_spec(json.loads(raw.decode("utf-8")), model_names))
            except UnicodeDecodeError:
                problems.append(f"{where}: not UTF-8")
            except json.JSONDecodeError as exc:
                problems.append(f"{where}: not JSON ({exc.msg})")
            except ValueError as exc:
                problems.append(f"{where}: {exc}")
    if problems:
        raise GoldFileError(problems)
    if not specs:
        raise GoldFileError([f"{path}: no gold in the file"])
    return specs


def _prompt_id(session: Session, spec: GoldSpec) -> int:
    """The catalog prompt with this text, or a new prompt row (a prompt without answers is never paired)."""
    text = spec.prompt
    found = session.exec(select(Prompt.id).where(Prompt.text == text).order_by(col(Prompt.id))).first()
    if found is not None:
        return int(found)
    digest = hashlib.sha256(text.encode()).hexdigest()[:40]
    prompt = Prompt(
        text=text, source="gold", external_id=f"gold:{digest}", category=spec.category, language=spec.language
    )
    session.add(prompt)
    session.flush()
    assert prompt.id is not None  # nosec B101 # type narrowing
    return prompt.id


def add_golds(
    session: Session,
    specs: Sequence[GoldSpec],
    *,
    source: str,
    prompt_ids: Sequence[int | None] | None = None,
    output_ids: Sequence[int | None] | None = None,
) -> int:
    """Store the golds not stored yet (by content key); the caller commits. Returns how many were new."""
    keys = [s.key() for s in specs]
    known = set(session.exec(select(GoldBattle.source_key).where(col(GoldBattle.source_key).in_(keys))))
    model_ids = {str(n): int(i) for i, n in session.execute(sa_select(col(Model.id), col(Model.name))).all()}
    added = 0
    for i, (spec, key) in enumerate(zip(specs, keys, strict=True)):
        if key in known:
            continue
        known.add(key)
        given = prompt_ids[i] if prompt_ids is not None else None
        session.add(
            GoldBattle(
                kind=spec.kind,
                detail=spec.detail,
                prompt_id=given if given is not None else _prompt_id(session, spec),
                text_a=spec.text_a,
                text_b=spec.text_b,
                right=spec.right,
                model_a_id=model_ids.get(spec.model_a) if spec.model_a else None,
                model_b_id=model_ids.get(spec.model_b) if spec.model_b else None,
                output_id=output_ids[i] if output_ids is not None else None,
                source=source,
                source_key=key,
            )
        )
        added += 1
    session.flush()
    return added


def add_gold_file(session: Session, path: Path) -> int:
    """Check the whole file, then store its new golds (the caller commits); raises :class:`GoldFileError`."""
    names = {str(n) for n in session.exec(select(Model.name))}
    return add_golds(session, parse_gold_file(path, model_names=names), source="file")


def truncate(text: str, rng: random.Random) -> str | None:
    """The first 30-50% of the words (None when the answer is too short to lose something clearly)."""
    words = text.split(" ")
    if len(words) < 24:
        return None
    return " ".join(words[: int(len(words) * rng.uniform(0.3, 0.5))])


def shuffle_sentences(text: str, rng: random.Random) -> str | None:
    """The sentences in another order (None with fewer than three sentences)."""
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s]
    if len(sentences) < 3:
        return None
    order = list(range(len(sentences)))
    while order == sorted(order):
        rng.shuffle(order)
    return " ".join(sentences[i] for i in order)


def derive_golds(session: Session, *, count: int, rng: random.Random) -> int:
    """Derive up to ``count`` new golds from single-turn catalog answers, the four kinds in turn; the caller
    commits. Returns how many were new (fewer when the catalog has too few suitable answers)."""
    if count < 1:
        raise ValueError("count must be at least 1")
    stmt = (
        sa_select(
            col(Output.id), col(Output.prompt_id), col(Output.model_id), col(Output.text), col(Prompt.text)
        )
        .add_columns(col(Model.name), col(Output.conversation), col(Prompt.conversation))
        .join(Prompt, col(Prompt.id) == col(Output.prompt_id))
        .join(Model, col(Model.id) == col(Output.model_id))
        .order_by(col(Output.id))
        .limit(max(200, 20 * count))
    )
    # Multi-turn answers are left out (a JSON null is not SQL NULL, so they are told apart here).
    rows = [tuple(r[:6]) for r in session.execute(stmt).all() if not r[6] and not r[7]]
    if not rows:
        return 0
    rng.shuffle(rows)
    by_model: dict[int, list[Any]] = {}
    for row in rows:
        by_model.setdefault(int(row[2]), []).append(row)
    specs: list[GoldSpec] = []
    prompt_ids: list[int | None] = []
    output_ids: list[int | None] = []
    for attempt, (output_id, prompt_id, model_id, text, prompt, model) in enumerate(rows):
        if len(specs) >= count:
            break
        detail = DERIVED_DETAILS[attempt % len(DERIVED_DETAILS)]  # the kinds in turn, over the answers
        wrong: str | None
        wrong_model = model
        if detail == "truncated":
            wrong = truncate(text, rng)
        elif detail == "shuffled":
            wrong = shuffle_sentences(text, rng)
        elif detail == "other-prompt":
            others = [r for r in by_model[int(model_id)] if r[1] != prompt_id and r[3] != text]
            wrong = rng.choice(others)[3] if others else None
        else:
            wrong = text
        if wrong is None:
            continue
        kind = "identical" if detail == "identical" else "degraded"
        right = RIGHT_TIE if kind == "identical" else RIGHT_FIRST
        specs.append(GoldSpec(kind, detail, prompt, text, wrong, right, model, wrong_model))
        prompt_ids.append(int(prompt_id))
        output_ids.append(int(output_id))
    return add_golds(session, specs, source="derived", prompt_ids=prompt_ids, output_ids=output_ids)


def load_gold_items(session: Session) -> list[GoldItem]:
    """Every gold that may be served (not retired), in id order."""
    stmt = (
        sa_select(
            col(GoldBattle.id), col(GoldBattle.prompt_id), col(GoldBattle.text_a), col(GoldBattle.text_b)
        )
        .add_columns(col(GoldBattle.right), col(GoldBattle.model_a_id), col(GoldBattle.model_b_id))
        .where(col(GoldBattle.retired).is_(False))
        .order_by(col(GoldBattle.id))
    )
    rows = session.execute(stmt).all()
    return [GoldItem(int(i), int(p), a, b, r, ma, mb) for i, p, a, b, r, ma, mb in rows]


def load_prompts(session: Session, prompt_ids: set[int]) -> list[Prompt]:
    """These prompts, detached from the session (for a cache)."""
    if not prompt_ids:
        return []
    prompts = list(session.exec(select(Prompt).where(col(Prompt.id).in_(sorted(prompt_ids)))).all())
    for prompt in prompts:
        session.expunge(prompt)
    return prompts


def gold_answers(gold: GoldItem) -> tuple[Output, Output]:
    """A gold's two texts as answers to show (never saved; the reveal's names come from the battle)."""
    return (
        Output(prompt_id=gold.prompt_id, model_id=0, text=gold.text_a),
        Output(prompt_id=gold.prompt_id, model_id=0, text=gold.text_b),
    )


def gold_sides(gold: GoldItem, model_ids: Sequence[int], rng: random.Random) -> tuple[int, int] | None:
    """The two models a gold's reveal names, as (right or first text, other text); None when the catalog
    has too few models.

    A live battle always names two different models, so a reveal naming one model twice would mark the
    battle as a gold. A gold file's named models are shown as given; a file gold without names shows two
    catalog models drawn at random. A derived gold is made from one model's answer (the intact text is
    that model's, the other a corruption of it or that model's answer elsewhere): its reveal names that
    model on the intact answer's side, truthfully, and another catalog model, drawn at random, on the
    other side. That name is the one untruth the annotator is told; it does no harm we can see: the vote
    counts nowhere, later battles are blind (a name cannot steer a vote), and the model named is never
    credited or blamed in any rating for it.
    """
    first, second = gold.model_a_id, gold.model_b_id
    if first is not None and second is not None and first != second:
        return int(first), int(second)
    named = first if first is not None else second
    others = [m for m in model_ids if m != named]
    if named is not None:
        if not others:
            return None
        other = int(rng.choice(others))
        return (int(named), other) if first is not None else (other, int(named))
    if len(model_ids) < 2:
        return None
    a, b = rng.sample(list(model_ids), 2)
    return int(a), int(b)


def count_golds(session: Session) -> int:
    return int(session.exec(select(func.count(col(GoldBattle.id)))).one())
