"""Battles and votes in flight: the issued battle, the vote request and its result, and how they serialise.

A battle is issued without touching the database: everything about it travels in a signed battle token
(see ``arena.security``) and is written, together with its vote, in one transaction
(:mod:`votes.voting.recording`). The three records here have one dictionary form each (``to_dict`` /
``from_dict``, JSON-ready: times as ISO 8601 text), used by the battle token and by the vote writer's wire
format alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from leaderboard.data import Outcome, parse_outcome
from votes.models import utcnow

__all__ = [
    "MAX_REQUEST_ID",
    "AlreadyVotedError",
    "RepeatJudgementError",
    "CatalogRow",
    "IssuedBattle",
    "VoteError",
    "VoteRequest",
    "VoteResult",
    "issue_battle",
]


#: Longest request id a vote carries (the web side accepts a client's X-Request-ID up to this length).
MAX_REQUEST_ID = 64


class VoteError(Exception):
    """A vote that cannot be recorded; the message is meant for the annotator."""


class RepeatJudgementError(VoteError):
    """This annotator already judged this prompt for this pair of models (through another token)."""

    def __init__(self) -> None:
        super().__init__(
            "You have already judged these two answers to this prompt; each pair is judged once per person."
        )


class AlreadyVotedError(VoteError):
    """The battle already has a (different) vote: a battle token buys exactly one vote."""

    def __init__(self, battle_id: int) -> None:
        super().__init__("This battle has already been voted on; a battle takes one vote only.")
        self.battle_id = battle_id


@dataclass(frozen=True)
class CatalogRow:
    """One answer the pairing policy may show: its prompt, its output and the model that wrote it."""

    prompt_id: int
    output_id: int
    model_id: int


@dataclass(frozen=True)
class IssuedBattle:
    """Everything about an issued battle; it lives in the signed token until its vote writes it."""

    token_id: str
    annotator_id: int
    prompt_id: int
    output_a_id: int
    output_b_id: int
    model_a_id: int
    model_b_id: int
    issued_at: datetime
    pair_probability: float | None
    # "site" (pre-generated answers) or "live" (answers generated for the annotator's own prompt); a gold
    # battle says "site" too, inside and outside its (encrypted) token.
    source: str = "site"
    # A gold battle: "<gold id>:<right winner as shown>" (see votes.voting.gold_votes); None for any other.
    # Always in the token, so that a gold's token is no longer than another's.
    gold: str | None = None
    # A repeat battle (:mod:`votes.voting.repeat_votes`): the id of the annotator's own earlier vote it
    # repeats, sides swapped; None for any other. Always in the token, like ``gold``.
    repeat: int | None = None

    @property
    def counted(self) -> bool:
        """Whether its vote can count: a gold's and a repeat's are stored apart, never in a fit."""
        return self.gold is None and self.repeat is None

    def to_dict(self) -> dict[str, Any]:
        # Written out: dataclasses.asdict deep-copies every value and cost 5% of a worker's CPU.
        return {
            "token_id": self.token_id,
            "annotator_id": self.annotator_id,
            "prompt_id": self.prompt_id,
            "output_a_id": self.output_a_id,
            "output_b_id": self.output_b_id,
            "model_a_id": self.model_a_id,
            "model_b_id": self.model_b_id,
            "issued_at": self.issued_at.isoformat(),
            "pair_probability": self.pair_probability,
            "source": self.source,
            "gold": self.gold,
            "repeat": self.repeat,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IssuedBattle:
        """Read :meth:`to_dict`'s form back; raises ``KeyError``, ``TypeError`` or ``ValueError``."""
        probability = data["pair_probability"]
        return cls(
            token_id=str(data["token_id"]),
            annotator_id=int(data["annotator_id"]),
            prompt_id=int(data["prompt_id"]),
            output_a_id=int(data["output_a_id"]),
            output_b_id=int(data["output_b_id"]),
            model_a_id=int(data["model_a_id"]),
            model_b_id=int(data["model_b_id"]),
            issued_at=datetime.fromisoformat(data["issued_at"]),
            pair_probability=None if probability is None else float(probability),
            source=str(data.get("source", "site")),
            gold=None if data.get("gold") is None else str(data["gold"]),
            repeat=None if data.get("repeat") is None else int(data["repeat"]),
        )


@dataclass(frozen=True)
class VoteRequest:
    """A vote on an issued battle, as handed to a vote writer."""

    battle: IssuedBattle
    winner: Outcome  # read once from the form or the API request; stored as its string
    client_hash: str | None = None
    address_hash: str | None = None
    # Scoped to the annotator by the caller, so two annotators can never collide on a key.
    idempotency_key: str | None = None
    voted_at: datetime | None = None
    # The id of the web request that carried the vote, so a writer process can log the commit under it.
    request_id: str | None = None

    def recorded(self, voted_at: datetime) -> dict[str, Any]:
        """What a vote row keeps of the request itself, whichever table it goes to: the annotator, the
        answer, when it came and how long after the battle was issued, and the client's marks."""
        return {
            "annotator_id": self.battle.annotator_id,
            "winner": self.winner.label,
            "created_at": voted_at,
            "seconds_to_vote": max(0.0, (voted_at - self.battle.issued_at).total_seconds()),
            "client_hash": self.client_hash,
            "address_hash": self.address_hash,
            "idempotency_key": self.idempotency_key,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "battle": self.battle.to_dict(),
            "winner": self.winner.label,
            "client_hash": self.client_hash,
            "address_hash": self.address_hash,
            "idempotency_key": self.idempotency_key,
            "voted_at": self.voted_at.isoformat() if self.voted_at else None,
            "request_id": self.request_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VoteRequest:
        """Read :meth:`to_dict`'s form back; raises ``KeyError``, ``TypeError`` or ``ValueError`` (an unknown
        winner included)."""
        voted_at = data.get("voted_at")
        request_id = data.get("request_id")
        if request_id is not None and (not isinstance(request_id, str) or len(request_id) > MAX_REQUEST_ID):
            raise ValueError(f"request_id must be text of at most {MAX_REQUEST_ID} characters")
        return cls(
            battle=IssuedBattle.from_dict(data["battle"]),
            winner=parse_outcome(str(data["winner"])),  # the writer process's door
            client_hash=data.get("client_hash"),
            address_hash=data.get("address_hash"),
            idempotency_key=data.get("idempotency_key"),
            voted_at=datetime.fromisoformat(voted_at) if voted_at else None,
            request_id=request_id,
        )


def _optional_float(value: float | None) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class VoteResult:
    """The answer to a vote: the names revealed and each side's live rating before and after."""

    vote_id: int
    battle_id: int
    winner: str
    model_a: str
    model_b: str
    rating_a_before: float
    rating_a_after: float
    rating_b_before: float
    rating_b_after: float
    # True when this answer repeats an earlier vote (a retry), which recorded nothing new.
    replayed: bool = False
    # Each side's deviation after the vote, for a live rater that has one (None for Elo).
    deviation_a: float | None = None
    deviation_b: float | None = None

    @classmethod
    def from_live_elo(
        cls,
        live_elo: dict[str, float] | None,
        *,
        vote_id: int,
        battle_id: int,
        winner: str,
        model_a: str,
        model_b: str,
        replayed: bool = False,
    ) -> VoteResult:
        """The result of a vote from its stored ``Vote.live_elo`` (NaN ratings where it has none)."""
        elo = live_elo or {}
        return cls(
            vote_id=int(vote_id),
            battle_id=int(battle_id),
            winner=winner,
            model_a=model_a,
            model_b=model_b,
            rating_a_before=float(elo.get("a_before", float("nan"))),
            rating_a_after=float(elo.get("a_after", float("nan"))),
            rating_b_before=float(elo.get("b_before", float("nan"))),
            rating_b_after=float(elo.get("b_after", float("nan"))),
            replayed=replayed,
            deviation_a=_optional_float(elo.get("a_deviation")),
            deviation_b=_optional_float(elo.get("b_deviation")),
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VoteResult:
        return cls(**data)


def issue_battle(
    *,
    token_id: str,
    annotator_id: int,
    prompt_id: int,
    output_a: CatalogRow,
    output_b: CatalogRow,
    pair_probability: float | None,
    issued_at: datetime | None = None,
    source: str = "site",
) -> IssuedBattle:
    """Describe a battle for a token; writes nothing (the vote writes the battle row)."""
    if output_a.model_id == output_b.model_id:
        raise ValueError("a battle needs two different models")
    if not (output_a.prompt_id == output_b.prompt_id == prompt_id):
        raise ValueError("both answers must belong to the battle's prompt")
    return IssuedBattle(
        token_id=token_id,
        annotator_id=annotator_id,
        prompt_id=prompt_id,
        output_a_id=output_a.output_id,
        output_b_id=output_b.output_id,
        model_a_id=output_a.model_id,
        model_b_id=output_b.model_id,
        issued_at=issued_at or utcnow(),
        pair_probability=pair_probability,
        source=source,
    )
