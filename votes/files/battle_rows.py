"""Battle rows validated: the Chatbot Arena columns plus ``weight``, ``sided`` and ``category``.

:func:`parse_battles` checks every field of every row (conversations included) before anything touches
a database or a fit, and names the file, row and reason of the first problem (or, when asked, lists
every refused row). :class:`BattleRecord` is one validated row; its :meth:`~BattleRecord.row` is the
canonical export form.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from leaderboard.data import OUTCOME_STRINGS
from votes.files.fields import RowFields, text_cells
from votes.files.records import FileFormat, InputError, Message, Refusal, RowError, check_columns

__all__ = ["SELF_BATTLE", "BattleRecord", "parse_battles"]

#: The reason given for a battle of a model against itself (it says nothing about ratings).
SELF_BATTLE = "cannot battle itself"
_WINNERS = tuple(OUTCOME_STRINGS.values())


@dataclass(frozen=True, slots=True)
class BattleRecord:
    """One validated battle row; ``where`` says where it came from for error messages."""

    where: str
    model_a: str
    model_b: str
    winner: str
    question_id: str | None = None
    judge: str | None = None
    conversation_a: tuple[Message, ...] | None = None
    conversation_b: tuple[Message, ...] | None = None
    turn: int | None = None
    anony: bool | None = None
    language: str | None = None
    tstamp: float | None = None
    weight: float = 1.0
    sided: bool = True
    category: str | None = None

    def row(self) -> dict[str, Any]:
        """The canonical export row (the Chatbot Arena columns in a fixed order, then ``weight`` and
        ``sided`` when they differ from 1 and true)."""
        return {
            "question_id": self.question_id,
            "model_a": self.model_a,
            "model_b": self.model_b,
            "winner": self.winner,
            "judge": self.judge,
            "conversation_a": None if self.conversation_a is None else [dict(m) for m in self.conversation_a],
            "conversation_b": None if self.conversation_b is None else [dict(m) for m in self.conversation_b],
            "turn": self.turn,
            "anony": self.anony,
            "language": self.language,
            "tstamp": self.tstamp,
            **({} if self.weight == 1.0 else {"weight": self.weight}),
            **({} if self.sided else {"sided": False}),
        }


def _user_turns(conversation: Sequence[Message]) -> list[str]:
    return [m["content"] for m in conversation if m["role"] == "user"]


def parse_battles(
    path: Path,
    fmt: FileFormat,
    rows: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    refused: list[Refusal] | None = None,
    allow_self_battles: bool = False,
) -> list[BattleRecord]:
    """Validate battle rows; the first problem raises :class:`InputError` naming its row.

    With a ``refused`` list, a bad row is appended to it (location and reason) and left out instead.
    ``allow_self_battles`` keeps battles of a model against itself, for a reader that filters first and
    then refuses the self-battles among the battles it selected.
    Besides the Chatbot Arena columns a row may carry ``weight`` (a positive number, 1 by default),
    ``sided`` (false when ``model_a`` was not necessarily shown first) and ``category``.
    """
    rows = list(rows)
    check_columns(path, fmt, rows, "battles")
    as_text = text_cells(fmt)
    records: list[BattleRecord] = []
    for where, raw in rows:
        try:
            fields = RowFields(path, where, raw, text_cells=as_text)
            records.append(_parse_battle(fields, allow_self_battles=allow_self_battles))
        except InputError as exc:
            if refused is None:
                raise RowError(path, where, exc.reason) from None
            refused.append(Refusal(where, exc.reason))
    return records


def _parse_battle(r: RowFields, *, allow_self_battles: bool) -> BattleRecord:
    raw = r.raw
    model_a = cast(str, r.model("model_a", required=True))
    model_b = cast(str, r.model("model_b", required=True))
    winner = raw.get("winner")
    if winner is None:
        raise r.fail("missing field 'winner'")
    if winner not in _WINNERS:
        allowed = ", ".join(repr(w) for w in _WINNERS)
        raise r.fail(f"unknown winner {winner!r}; expected one of {allowed}")
    if model_a == model_b:
        if not allow_self_battles:
            raise r.fail(f"model {model_a!r} {SELF_BATTLE}")
    conv_a = r.messages("conversation_a")
    conv_b = r.messages("conversation_b")
    if (conv_a is None) != (conv_b is None):
        raise r.fail("conversation_a and conversation_b must be given together")
    if conv_a is not None:
        users = _user_turns(conv_a)
        if not users:
            raise r.fail("conversation_a has no user message")
        if users != _user_turns(conv_b):
            raise r.fail("conversation_a and conversation_b ask different user messages")
    weight = r.number("weight")
    if weight is not None and not weight > 0:
        raise r.fail(f"'weight' must be positive, got {weight!r}")
    sided = r.boolean("sided")
    category = raw.get("category")
    if isinstance(category, str):
        r.check_encodable("'category'", category)
    return BattleRecord(
        where=r.where,
        model_a=model_a,
        model_b=model_b,
        winner=cast(str, winner),
        question_id=r.identifier("question_id"),
        judge=r.string("judge"),
        conversation_a=conv_a,
        conversation_b=conv_b,
        turn=r.integer("turn"),
        anony=r.boolean("anony"),
        language=r.string("language", max_length=50),
        tstamp=r.tstamp(),
        weight=1.0 if weight is None else weight,
        sided=True if sided is None else sided,
        category=category if isinstance(category, str) and category else None,
    )
