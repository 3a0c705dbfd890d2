"""The tables. One file, so the whole data model reads at a glance.

Times are aware UTC datetimes (SQLModel stores them as UTC on both stores and hands them back in UTC), so
the same row exports identically from SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, UniqueConstraint, text, true
from sqlmodel import Field, SQLModel

from votes.dialects import partial_index
from votes.names import ModelRole

__all__ = [
    "Annotator",
    "Battle",
    "Generation",
    "GoldBattle",
    "GoldVote",
    "RepeatVote",
    "ImportCreated",
    "ImportRow",
    "ImportRun",
    "Judgment",
    "LiveRating",
    "LiveUsage",
    "PairingWeight",
    "Model",
    "ModelEndpoint",
    "Output",
    "Prompt",
    "Snapshot",
    "Vote",
    "utcnow",
]


def utcnow() -> datetime:
    """Aware UTC now, the one time convention of the store."""
    return datetime.now(UTC)


_CONTESTANT = ModelRole.CONTESTANT.value  # a new model answers in battles
#: ``battle``'s imported keys that are found by their text (see ``Battle.import_digest``).
_APART = "import_key IS NOT NULL AND import_digest IS NULL"


def _set(column: str) -> dict[str, Any]:
    """Index options that leave out the rows whose ``column`` is NULL (a partial index on both stores;
    an equality on the column still uses it)."""
    return partial_index(text(f"{column} IS NOT NULL"))


class ModelBase(SQLModel):
    name: str = Field(index=True, unique=True, max_length=200)
    organisation: str | None = Field(default=None, max_length=200)
    licence: str | None = Field(default=None, max_length=100)
    # Where to read about the model (http/https) and its knowledge cutoff (YYYY-MM[-DD]); see
    # votes.catalog.model_metadata, which validates both.
    link: str | None = Field(default=None, max_length=500)
    knowledge_cutoff: str | None = Field(default=None, max_length=10)
    # False once retired (`arena models remove`): off every page and out of pairing; answers and votes kept.
    active: bool = True
    # What the model does here (votes.names.ModelRole): answers in battles, only judges them (never paired,
    # never on a board), or both.
    role: str = Field(default=_CONTESTANT, max_length=20, sa_column_kwargs={"server_default": _CONTESTANT})
    # The operator's other names of the model, which the identity-leak filter also looks for in its answers.
    aliases: list[str] | None = Field(default=None, sa_column=Column(JSON))


class Model(ModelBase, table=True):
    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow)


class PromptBase(SQLModel):
    external_id: str | None = Field(default=None, index=True, unique=True, max_length=200)
    text: str
    # A multi-turn prompt keeps the whole user side of the conversation as [{role, content}, ...].
    conversation: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON))
    category: str | None = Field(default=None, index=True, max_length=100)
    language: str | None = Field(default=None, index=True, max_length=50)
    source: str | None = Field(default=None, max_length=200)


class Prompt(PromptBase, table=True):
    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow)


class Output(SQLModel, table=True):
    """One answer of a model to a prompt. A model may have several sampled answers to one prompt
    (``sample`` 0, 1, ...); a battle draws one of them, so a reveal names one sample, not every answer."""

    __table_args__ = (
        UniqueConstraint("prompt_id", "model_id", "sample", name="uq_output_prompt_model_sample"),
    )

    id: int | None = Field(default=None, primary_key=True)
    prompt_id: int = Field(foreign_key="prompt.id", index=True)
    model_id: int = Field(foreign_key="model.id", index=True)
    sample: int = Field(default=0, sa_column_kwargs={"server_default": text("0")})
    text: str
    # For multi-turn battles the full conversation (user and assistant turns) as [{role, content}, ...].
    conversation: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON))
    created_at: datetime = Field(default_factory=utcnow)


class Annotator(SQLModel, table=True):
    __table_args__ = (Index("ix_annotator_session_key", "session_key", unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    # "anonymous" (cookie session), "invited" (invite link), "account" (signed in with OpenID Connect),
    # or "import" (a judge named in a battles file).
    kind: str = Field(default="anonymous", max_length=20)
    label: str | None = Field(default=None, index=True, max_length=200)
    token_hash: str | None = Field(default=None, unique=True, max_length=64)
    # An anonymous visitor's annotator row is written at the first vote, keyed by a hash of the session
    # cookie's nonce, so that two first votes of one session find the same row; an account's by a keyed
    # hash of its issuer and subject ("oidc:..."), so one person is one row on every device.
    session_key: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(default_factory=utcnow)
    flagged: bool = Field(default=False, index=True)
    flag_reason: str | None = None
    # The voter review's probability that this annotator votes honestly (``arena annotators --apply``
    # writes it); the robust fit (``--robust``) weighs each vote by it instead of dropping flagged voters.
    honest_weight: float = Field(default=1.0, sa_column_kwargs={"server_default": "1.0"})


class Battle(SQLModel, table=True):
    """A pair shown to an annotator. `model_a` is the left side, `model_b` the right."""

    # No index on the model pair: votes carry their battle's pair (``ix_vote_cells``), and what counts
    # battles per pair counts those votes; a pair-ordered index here would only slow large imports.
    # The indexes of columns most battles leave empty (imported battles have no token, judgement key or,
    # often, prompt and annotator; live ones no import key) hold only the rows that set them: a million
    # imported battles would otherwise write a million entries to each, for nothing a query asks.
    __table_args__ = (
        Index("ix_battle_judgement_key", "judgement_key", unique=True, **_set("judgement_key")),
        Index("ix_battle_token_id", "token_id", unique=True, **_set("token_id")),
        Index("ix_battle_prompt_id", "prompt_id", **_set("prompt_id")),
        Index("ix_battle_annotator_id", "annotator_id", **_set("annotator_id")),
        # An imported battle's key, found by two integers (see ``import_digest``); a key whose digest's
        # first 64 bits another stored key holds is found by its text instead.
        Index("ix_battle_import_slot", "import_digest", "import_copy", unique=True, **_set("import_digest")),
        Index(
            "ix_battle_import_key_apart",
            "import_key",
            unique=True,
            **partial_index(text(_APART)),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    prompt_id: int | None = Field(default=None, foreign_key="prompt.id")
    output_a_id: int | None = Field(default=None, foreign_key="output.id")
    output_b_id: int | None = Field(default=None, foreign_key="output.id")
    model_a_id: int = Field(foreign_key="model.id")
    model_b_id: int = Field(foreign_key="model.id")
    annotator_id: int | None = Field(default=None, foreign_key="annotator.id")
    issued_at: datetime = Field(default_factory=utcnow)
    # Probability with which the pairing policy chose this (unordered) pair; None for imported battles.
    pair_probability: float | None = None
    # "site" for pre-generated battles issued here, "live" for live battles (the annotator's own prompt
    # answered on the spot), "import" for battles read from a file.
    source: str = Field(default="site", max_length=20)
    # Idempotent imports: a stable key per imported row (content hash + occurrence), unique when set.
    import_key: str | None = Field(default=None, max_length=80)
    # Site battles: the id of the signed battle token, unique, so a token can be used for one vote only.
    token_id: str | None = Field(default=None, max_length=64)
    # Site battles: "annotator:prompt:lower model:higher model", unique, so an annotator judges a prompt
    # for an unordered pair of models once, however many tokens they fetched (see votes.voting.recording).
    judgement_key: str | None = Field(default=None, max_length=100)
    # Language of the conversation when the battle says so (Chatbot Arena `language`); fits filter on it,
    # falling back to the prompt's language.
    language: str | None = Field(default=None, index=True, max_length=50)
    # Extra Chatbot Arena fields kept for faithful export (turn, anony, ...).
    extra: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    # The import key as two integers, its unique index (``ix_battle_import_slot``): the first 64 bits of
    # its digest (signed) and its occurrence number. A text key of 42 characters in a hash-ordered unique
    # index was the largest cost of a large import's writes; two integers compare in one step and take a
    # fifth of the pages. Two digests may share 64 bits: the later key then has no digest here and is
    # unique by its text (``ix_battle_import_key_apart``). See :mod:`votes.imports.keys`.
    import_digest: int | None = Field(default=None, sa_type=BigInteger)
    import_copy: int | None = None


class Vote(SQLModel, table=True):
    """A vote on a battle.

    ``model_a_id``, ``model_b_id`` and ``annotator_id`` copy the battle's immutable facts onto the vote
    (written by the same insert), so the fit's ``GROUP BY model_a, model_b, winner`` reads one covering
    index (``ix_vote_cells``) instead of joining 10M votes to their battles and sorting them.

    ``weight`` (how much the vote counts) and ``sided`` (whether ``model_a`` is known to have been shown
    first) come from imported battle files (soft labels, arena-hard's strong verdicts, AlpacaEval's
    shuffled order); a vote cast on the site counts 1 and is sided. Both are in the covering index, so the
    fit's aggregate still reads the index alone.
    """

    __table_args__ = (
        Index("ix_vote_cells", "model_a_id", "model_b_id", "winner", "annotator_id", "weight", "sided"),
        Index("ix_vote_address_hash", "address_hash", **_set("address_hash")),  # imported votes have none
    )

    id: int | None = Field(default=None, primary_key=True)
    battle_id: int = Field(foreign_key="battle.id", unique=True)
    model_a_id: int = Field(foreign_key="model.id")
    model_b_id: int = Field(foreign_key="model.id")
    annotator_id: int | None = Field(default=None, foreign_key="annotator.id")
    winner: str = Field(max_length=20)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    seconds_to_vote: float | None = None
    client_hash: str | None = Field(default=None, max_length=64)
    # A keyed hash of the client's network (an IPv4 address, an IPv6 /64), never the address itself: the
    # annotator review groups annotators by it.
    # Indexed: pairing reads the answers revealed to an address, so a fresh cookie does not see them again.
    address_hash: str | None = Field(default=None, max_length=32)
    idempotency_key: str | None = Field(default=None, unique=True, max_length=200)
    # Live Elo of both sides just before and after this vote ({"a_before", "a_after", "b_before",
    # "b_after"}), so a reveal or a retried submission shows exactly the first answer. None for imports.
    live_elo: dict[str, float] | None = Field(default=None, sa_column=Column(JSON))
    weight: float = Field(default=1.0, sa_column_kwargs={"server_default": text("1.0")})
    sided: bool = Field(default=True, sa_column_kwargs={"server_default": true()})


class LiveRating(SQLModel, table=True):
    """Live online rating; always equal to replaying all counted votes in commit (vote id) order.

    Elo rows hold rating and games only. Another online rater (:mod:`votes.voting.live`) also keeps its whole
    state (``state``), the deviation shown, its identity (``rater``) and, with a clock, the time of the
    model's last counted vote (``clock``, seconds since the epoch).
    """

    model_id: int = Field(foreign_key="model.id", primary_key=True)
    rating: float
    games: int = 0
    updated_at: datetime = Field(default_factory=utcnow)
    deviation: float | None = None
    state: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    clock: float | None = None
    rater: str | None = Field(default=None, max_length=200)


class Snapshot(SQLModel, table=True):
    """A published leaderboard. Rows are inserted once and never updated or deleted."""

    id: str = Field(primary_key=True, max_length=64)
    created_at: datetime = Field(default_factory=utcnow)
    method: str = Field(max_length=50)
    parameters: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    slice: str = Field(default="all", index=True, max_length=200)
    n_votes: int
    votes_sha256: str = Field(max_length=64)
    # {filename: sha256}
    files: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON))
    path: str


class ModelEndpoint(SQLModel, table=True):
    """Where a model's answers come from: an OpenAI-compatible endpoint registered under the model's name.

    The API key is never stored: ``api_key_env`` names the environment variable that holds it.
    ``params`` are the generation parameters (temperature, max_tokens, system_prompt, seed and any
    extra body fields).
    """

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=200)
    base_url: str = Field(max_length=500)
    served_model: str = Field(max_length=200)
    api_key_env: str | None = Field(default=None, max_length=200)
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    created_at: datetime = Field(default_factory=utcnow)


class Generation(SQLModel, table=True):
    """Provenance of an answer generated here: one row per generated output, written with it."""

    id: int | None = Field(default=None, primary_key=True)
    output_id: int = Field(foreign_key="output.id", unique=True)
    endpoint: str = Field(max_length=200)
    base_url: str = Field(max_length=500)
    served_model: str = Field(max_length=200)
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float
    finish_reason: str | None = Field(default=None, max_length=50)
    run_id: str = Field(index=True, max_length=64)
    created_at: datetime = Field(default_factory=utcnow)


class Judgment(SQLModel, table=True):
    """One LLM-judge verdict on two answers in one order (``output_a`` shown first).

    ``verdict`` is the template's label (``A>>B`` ... ``B>>A``, or ``A``/``B``/``tie``), None when the
    judge's text could not be parsed after the retries (then no vote is written). The raw text, the
    template's sha256 and the judge's parameters are kept so that every vote can be audited.
    """

    __table_args__ = (
        UniqueConstraint("judge", "template_sha256", "output_a_id", "output_b_id", name="uq_judgment_order"),
    )

    id: int | None = Field(default=None, primary_key=True)
    prompt_id: int = Field(foreign_key="prompt.id", index=True)
    output_a_id: int = Field(foreign_key="output.id")
    output_b_id: int = Field(foreign_key="output.id")
    judge: str = Field(index=True, max_length=200)
    template: str = Field(max_length=200)
    template_sha256: str = Field(max_length=64)
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    raw_text: str
    verdict: str | None = Field(default=None, max_length=20)
    n_votes: int = 0
    n_attempts: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float
    run_id: str = Field(index=True, max_length=64)
    created_at: datetime = Field(default_factory=utcnow)


class LiveUsage(SQLModel, table=True):
    """Live generations per model and UTC day: how many were asked, how many failed, tokens spent.

    The failures over the generations are the model's availability on the board; the day's tokens are
    checked against the per-endpoint daily budget before a live battle asks the model.
    """

    model_id: int = Field(foreign_key="model.id", primary_key=True)
    day: date = Field(primary_key=True)
    generations: int = 0
    failures: int = 0
    tokens: int = 0


class GoldBattle(SQLModel, table=True):
    """A battle whose right vote is known, served among live battles to measure each annotator.

    ``text_a`` is the right answer and ``text_b`` the wrong one (``right == "a"``), or both are the same
    text (``kind == "identical"``, ``right == "tie"``); sides are drawn at random when one is served.
    ``kind`` is "objective" (one answer correct, the other wrong), "degraded" (an answer against a
    corrupted copy of itself, ``detail`` says how: truncated, shuffled, other-prompt) or "identical".
    ``model_a_id`` and ``model_b_id`` are the catalog models a reveal names for ``text_a`` and ``text_b``
    (the model of the original answer for derived golds); a gold from a file may leave them empty, and the
    reveal then names two catalog models drawn when it is served. ``source_key`` (a content hash) makes
    adding the same file or deriving twice idempotent. A retired gold is never served again.
    """

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=20)
    detail: str | None = Field(default=None, max_length=40)
    prompt_id: int = Field(foreign_key="prompt.id", index=True)
    text_a: str
    text_b: str
    right: str = Field(max_length=10)
    model_a_id: int | None = Field(default=None, foreign_key="model.id")
    model_b_id: int | None = Field(default=None, foreign_key="model.id")
    output_id: int | None = Field(default=None, foreign_key="output.id")
    source: str = Field(max_length=20)
    source_key: str = Field(unique=True, max_length=64)
    retired: bool = Field(default=False, index=True)
    retired_reason: str | None = Field(default=None, max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class GoldVote(SQLModel, table=True):
    """A vote on a served gold: kept apart from :class:`Vote`, so no fit and no live rating ever reads it.

    Its battle row (``source == "gold"``) is written with it, so the reveal and the battle ids look like any
    other battle's. ``expected`` is the right winner as the sides were shown; ``correct`` whether the vote
    matched it (either tie is right on an identical gold). One vote per annotator and gold.
    """

    __table_args__ = (UniqueConstraint("annotator_id", "gold_id", name="uq_goldvote_annotator_gold"),)

    id: int | None = Field(default=None, primary_key=True)
    battle_id: int = Field(foreign_key="battle.id", unique=True)
    gold_id: int = Field(foreign_key="goldbattle.id", index=True)
    annotator_id: int = Field(foreign_key="annotator.id", index=True)
    winner: str = Field(max_length=20)
    expected: str = Field(max_length=20)
    correct: bool
    quiz: bool = False
    created_at: datetime = Field(default_factory=utcnow, index=True)
    seconds_to_vote: float | None = None
    client_hash: str | None = Field(default=None, max_length=64)
    address_hash: str | None = Field(default=None, max_length=32)
    idempotency_key: str | None = Field(default=None, unique=True, max_length=200)
    live_elo: dict[str, float] | None = Field(default=None, sa_column=Column(JSON))
    # The vote id the answer shows: reserved from the votes' ids, so a gold's id looks like any vote's.
    shown_vote_id: int | None = None


class RepeatVote(SQLModel, table=True):
    """A vote on a repeat battle: one of the annotator's own counted battles shown again, sides swapped.

    Kept apart from :class:`Vote` like :class:`GoldVote`, so no fit and no live rating ever reads it; its
    battle row (``source == "repeat"``) is written with it. ``original_vote_id`` is the vote repeated (each
    is repeated once), ``original_winner`` its winner as the sides were first shown, ``agreed`` whether
    both name the same model, or both a tie (either kind of tie: ties are one class).
    """

    id: int | None = Field(default=None, primary_key=True)
    battle_id: int = Field(foreign_key="battle.id", unique=True)
    original_vote_id: int = Field(foreign_key="vote.id", unique=True)
    annotator_id: int = Field(foreign_key="annotator.id", index=True)
    winner: str = Field(max_length=20)
    original_winner: str = Field(max_length=20)
    agreed: bool
    created_at: datetime = Field(default_factory=utcnow, index=True)
    seconds_to_vote: float | None = None
    client_hash: str | None = Field(default=None, max_length=64)
    address_hash: str | None = Field(default=None, max_length=32)
    idempotency_key: str | None = Field(default=None, unique=True, max_length=200)
    live_elo: dict[str, float] | None = Field(default=None, sa_column=Column(JSON))
    # The vote id the answer shows: reserved from the votes' ids, so a repeat's id looks like any vote's.
    shown_vote_id: int | None = None


class ImportRun(SQLModel, table=True):
    """One ``arena import`` of a battles file, written in short batches (see :mod:`votes.imports.runs`).

    ``state`` is "staging" while batches are validated and written aside, "merging" while staged rows
    move into ``battle`` and ``vote`` in short steps, "done" once every row is in. A run that is not
    done and whose ``heartbeat_at`` is old belongs to a dead process: the next import or publish removes
    every row it wrote.
    """

    id: int | None = Field(default=None, primary_key=True)
    path: str = Field(max_length=1000)
    state: str = Field(default="staging", max_length=20)
    started_at: datetime = Field(default_factory=utcnow)
    heartbeat_at: datetime = Field(default_factory=utcnow)


class ImportRow(SQLModel, table=True):
    """A validated battle of an import run, staged aside until the run merges it.

    ``digest`` is the hash of the canonical row; its occurrence number among the run's identical rows
    (``import_copy``: with the digest, the row's import key, written out only in ``battle``) is filled
    when the batch is staged; ``fresh`` says, once merged, whether the row added a battle (false: the key
    was already stored), so a rollback removes only what it added.
    ``digest`` has no index: the run counts repeated digests in memory (:mod:`votes.imports.digest_counts`).
    ``import_id`` names the run without a foreign key: the run's row is written before its rows and
    deleted after them, and PostgreSQL would check the key once per staged row (3 s of a million-row
    import's server time, beside the merge).
    """

    import_id: int = Field(primary_key=True)
    seq: int = Field(primary_key=True)
    digest: str = Field(max_length=40)
    # ``battle.import_digest`` and ``import_copy`` of the row's key (no digest: found by its text).
    import_digest: int | None = Field(default=None, sa_type=BigInteger)
    import_copy: int | None = None
    fresh: bool | None = None
    prompt_id: int | None = None
    output_a_id: int | None = None
    output_b_id: int | None = None
    model_a_id: int
    model_b_id: int
    annotator_id: int | None = None
    issued_at: datetime
    language: str | None = Field(default=None, max_length=50)
    extra: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    winner: str = Field(max_length=20)
    weight: float = 1.0
    sided: bool = True


class ImportCreated(SQLModel, table=True):
    """A row an import run created (or an output whose conversation it filled in) outside ``battle`` and
    ``vote``: what a rollback of the run removes (or empties) besides its battles."""

    import_id: int = Field(foreign_key="importrun.id", primary_key=True)
    kind: str = Field(max_length=20, primary_key=True)
    row_id: int = Field(primary_key=True)


class PairingWeight(SQLModel, table=True):
    """A model's share of the battles under the pairing policy in force, as recorded at ``recorded_at``.

    The fairness ledger's history: the live site writes a row per model when the policy's shares move or
    an interval passes, so a snapshot can publish the weights that were in force over time, not only the
    shares of the battles that resulted.
    """

    id: int | None = Field(default=None, primary_key=True)
    recorded_at: datetime = Field(default_factory=utcnow, index=True)
    model_id: int = Field(foreign_key="model.id", index=True)
    share: float
    policy: str = Field(max_length=20)
