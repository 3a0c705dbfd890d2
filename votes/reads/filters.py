"""Which votes a fit or export reads: the filter (:class:`VoteFilter`), its conditions in SQL, and the
weight it gives each vote.

A filter is a frozen dataclass, so a read can be keyed by it (:func:`votes.reads.scans.packed_scan`);
:func:`filter_votes` turns it into ``WHERE`` clauses (and the joins they need) on any statement that
selects from ``vote``. The conditions that several reads share (:func:`counted_vote_condition` for the live
standings, :func:`first_sight_condition`) and the weighted variants of a vote's weight
(:func:`robust_weight`, :func:`flagged_down_weight`) are public for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, case, func, literal, or_, select, true
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from votes.tables import annotator_t, battle_t, model_t, prompt_t, vote_t

__all__ = [
    "JUDGE_KIND",
    "VoteFilter",
    "count_flagged_annotators",
    "counted_vote_condition",
    "filter_from",
    "check_propensities",
    "filter_votes",
    "first_sight_condition",
    "flagged_down_weight",
    "propensity_weight",
    "robust_annotator",
    "robust_weight",
    "unit_mean_scale",
    "weighted_votes",
]


@dataclass(frozen=True)
class VoteFilter:
    """Which votes a fit or export uses; ``since <= created_at < until`` for the vote times.

    ``language`` matches the battle's own language, or the prompt's when the battle has none.
    ``anony_only`` keeps votes cast before the names were shown: every site and live vote, and imported
    battles marked ``anony``. ``first_sight`` keeps votes on answers the annotator had never seen revealed.
    ``models`` keeps votes between two listed models; ``exclude_models`` drops votes involving one.
    """

    category: str | None = None
    language: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    exclude_flagged: bool = False
    # Whose votes: None = everyone but LLM judges (``arena judge`` votes never mix into a board
    # silently); otherwise annotator labels (e.g. ``("judge:gpt-4o",)``), or ``("all",)`` for every vote.
    annotators: tuple[str, ...] | None = None
    # Where the battles came from: "site" (pre-generated), "live" (the annotator's own prompt), "import".
    source: str | None = None
    anony_only: bool = False
    models: tuple[str, ...] | None = None
    exclude_models: tuple[str, ...] = ()
    # Only votes where neither shown answer had been revealed to the annotator before (see
    # :func:`first_sight_condition`).
    first_sight: bool = False
    # The robust fit: no flagged annotator is left out; each vote's weight is multiplied by its
    # annotator's stored ``honest_weight`` (the voter review's evidence; votes without an annotator
    # count 1) in the cells aggregate (:func:`pair_counts_statement`) and the per-vote read.
    robust: bool = False
    # Only votes with an annotator on a battle with a prompt, whoever cast them, judges included: what a
    # source-aware fit (the composite) reads (:func:`votes.reads.annotated.source_aware_filter`), so a board's
    # counts and ledger hash cover exactly the votes it fits.
    source_aware: bool = False
    # With ``exclude_flagged``: flagged annotators' votes are down-weighted instead of left out, each
    # weighing the smaller of its annotator's stored ``honest_weight`` and this factor (so a flag always
    # costs weight, and a review's lower posterior costs more); other votes count as usual.
    flagged_weight: float | None = None
    # Inverse-propensity weights: each vote's weight is divided by its battle's logged pair probability
    # (:func:`propensity_weight`), then all are scaled to mean 1 (:func:`unit_mean_scale`). Not needed for
    # consistency when the model holds (the pairs depend only on earlier votes); a guard against its
    # misspecification, paid for in precision. Every selected vote needs a logged probability
    # (:func:`check_propensities`).
    ipw: bool = False

    def __post_init__(self) -> None:
        if self.flagged_weight is not None and not 0.0 <= self.flagged_weight <= 1.0:
            raise ValueError("flagged_weight must be between 0 and 1")

    @property
    def down_weighted(self) -> bool:
        """Flagged annotators' votes are in the board with less weight (not left out)."""
        return self.exclude_flagged and self.flagged_weight is not None and not self.robust


#: Annotator kind of the LLM judges of ``arena judge`` (labels ``judge:<endpoint>``).
JUDGE_KIND = "judge"


def _connection(db: Session | Connection) -> Connection:
    return db.connection() if isinstance(db, Session) else db


def filter_votes(
    stmt: Select[Any], filters: VoteFilter | None, *, battle_joined: bool = False
) -> Select[Any]:
    """Apply a filter to a statement that selects from Vote (and, when ``battle_joined``, joins Battle).

    Only the category, language, source and anonymity filters need the battle (and its prompt); the
    rest read the vote row.
    """
    f = filters or VoteFilter()
    needs_battle = (
        f.category is not None
        or f.language is not None
        or f.source is not None
        or f.anony_only
        or f.first_sight
        or f.source_aware
    )
    if needs_battle and not battle_joined:
        stmt = stmt.join(battle_t, vote_t.c.battle_id == battle_t.c.id)
    if f.source is not None:
        stmt = stmt.where(battle_t.c.source == f.source)
    if f.source_aware:
        stmt = stmt.where(vote_t.c.annotator_id.is_not(None), battle_t.c.prompt_id.is_not(None))
    if f.anony_only:  # the site shows names only after the vote; an imported battle says so itself
        stmt = stmt.where(
            or_(battle_t.c.source.in_(("site", "live")), battle_t.c.extra["anony"].as_boolean() == true())
        )
    if f.first_sight:
        stmt = stmt.where(first_sight_condition())
    if f.models is not None:
        listed = select(model_t.c.id).where(model_t.c.name.in_(f.models))
        stmt = stmt.where(vote_t.c.model_a_id.in_(listed), vote_t.c.model_b_id.in_(listed))
    if f.exclude_models:
        banned = select(model_t.c.id).where(model_t.c.name.in_(f.exclude_models))
        stmt = stmt.where(vote_t.c.model_a_id.not_in(banned), vote_t.c.model_b_id.not_in(banned))
    if f.category is not None or f.language is not None:
        stmt = stmt.outerjoin(prompt_t, battle_t.c.prompt_id == prompt_t.c.id)
    if f.category is not None:
        stmt = stmt.where(prompt_t.c.category == f.category)
    if f.language is not None:
        stmt = stmt.where(
            or_(
                battle_t.c.language == f.language,
                and_(battle_t.c.language.is_(None), prompt_t.c.language == f.language),
            )
        )
    if f.since is not None:
        stmt = stmt.where(vote_t.c.created_at >= f.since)
    if f.until is not None:
        stmt = stmt.where(vote_t.c.created_at < f.until)
    # robust, or flagged_weight: down-weighted, not left out
    cut_flagged = f.exclude_flagged and not f.robust and f.flagged_weight is None
    if f.annotators is None:  # one small NOT IN, so the fit still reads only ix_vote_cells
        stmt = stmt.where(_excluding(flagged=cut_flagged, judges=True))
    else:
        if cut_flagged:
            stmt = stmt.where(_excluding(flagged=True, judges=False))
        if "all" not in f.annotators:
            chosen = select(annotator_t.c.id).where(annotator_t.c.label.in_(f.annotators))
            stmt = stmt.where(vote_t.c.annotator_id.in_(chosen))
    return stmt


def _excluding(*, flagged: bool, judges: bool) -> ColumnElement[bool]:
    """Votes without an annotator, or whose annotator is not flagged (``flagged``) and not an LLM judge
    (``judges``)."""
    conditions: list[ColumnElement[bool]] = []
    if flagged:
        conditions.append(annotator_t.c.flagged.is_(True))
    if judges:
        conditions.append(annotator_t.c.kind == JUDGE_KIND)
    ids = select(annotator_t.c.id).where(or_(*conditions))
    return or_(vote_t.c.annotator_id.is_(None), vote_t.c.annotator_id.not_in(ids))


def first_sight_condition() -> ColumnElement[bool]:
    """The vote (joined to its battle) is its annotator's first sight of both shown answers.

    A vote reveals the names behind both answers of its battle; each answer in the catalog can come back
    in a later battle, where the annotator then knows who wrote it. So a vote is first-sight when no
    earlier vote (earlier in commit order, the vote id: the reveal follows the vote's commit) of the same
    annotator, or cast from the same address hash (a fresh cookie does not make a voter forget), was on
    a battle that showed either of its outputs. Votes without an annotator or address, and battles
    without stored outputs (live answers, most imports), cannot be linked to an earlier reveal and count
    as first-sight. Two correlated ``NOT EXISTS``, over the battle's annotator index and the vote's
    address index.
    """
    earlier_battle = battle_t.alias("revealed_battle")
    earlier_vote = vote_t.alias("revealed_vote")
    shown = (battle_t.c.output_a_id, battle_t.c.output_b_id)
    revealed = (
        select(earlier_vote.c.id)
        .select_from(earlier_battle.join(earlier_vote, earlier_vote.c.battle_id == earlier_battle.c.id))
        .where(
            earlier_battle.c.annotator_id == vote_t.c.annotator_id,
            earlier_vote.c.annotator_id == vote_t.c.annotator_id,
            earlier_vote.c.id < vote_t.c.id,
            or_(earlier_battle.c.output_a_id.in_(shown), earlier_battle.c.output_b_id.in_(shown)),
        )
        .correlate(vote_t, battle_t)
    )
    revealed_here = (
        select(earlier_vote.c.id)
        .select_from(earlier_vote.join(earlier_battle, earlier_vote.c.battle_id == earlier_battle.c.id))
        .where(
            earlier_vote.c.address_hash == vote_t.c.address_hash,
            earlier_vote.c.id < vote_t.c.id,
            or_(earlier_battle.c.output_a_id.in_(shown), earlier_battle.c.output_b_id.in_(shown)),
        )
        .correlate(vote_t, battle_t)
    )
    return and_(~revealed.exists(), or_(vote_t.c.address_hash.is_(None), ~revealed_here.exists()))


def counted_vote_condition() -> ColumnElement[bool]:
    """The vote's annotator is not flagged nor an LLM judge (votes without an annotator count), on the
    vote row alone: the live standings are human-only.

    A small uncorrelated ``NOT IN (SELECT id FROM annotator WHERE ...)``: evaluated once, so the
    aggregate still reads only the covering index ``ix_vote_cells``.
    """
    return _excluding(flagged=True, judges=True)


#: The annotator table as the robust fit joins it (an alias: the filters use the table in subqueries).
robust_annotator = annotator_t.alias("robust_annotator")


def robust_weight() -> ColumnElement[Any]:
    """A vote's weight in the robust fit: its own weight times its annotator's ``honest_weight`` (1 for a
    vote without an annotator); the statement must select from :func:`_robust_join`."""
    return vote_t.c.weight * func.coalesce(robust_annotator.c.honest_weight, 1.0)


def _robust_join() -> Any:
    return vote_t.outerjoin(robust_annotator, vote_t.c.annotator_id == robust_annotator.c.id)


def flagged_down_weight(factor: float) -> ColumnElement[Any]:
    """A vote's weight when flagged annotators are down-weighted (``VoteFilter.flagged_weight``): a
    flagged annotator's vote weighs the smaller of their ``honest_weight`` and ``factor``; the statement
    must select from :func:`_robust_join`."""
    honest = func.coalesce(robust_annotator.c.honest_weight, 1.0)
    cap = literal(float(factor))
    flagged_share = case((honest < cap, honest), else_=cap)
    return vote_t.c.weight * case((robust_annotator.c.flagged.is_(True), flagged_share), else_=1.0)


def _pair_probability() -> Any:
    """The logged pair probability of the vote's battle: a subquery on its own alias of the battle,
    correlated with the vote only, so it neither collides with nor binds to the filter's join of the
    battle."""
    logged = battle_t.alias("ipw_battle")
    return (
        select(logged.c.pair_probability)
        .where(logged.c.id == vote_t.c.battle_id)
        .correlate(vote_t)
        .scalar_subquery()
    )


def propensity_weight(weight: ColumnElement[Any]) -> ColumnElement[Any]:
    """``weight`` divided by the vote's logged pair probability: its inverse-propensity weight."""
    out: ColumnElement[Any] = weight / _pair_probability()
    return out


def weighted_votes(f: VoteFilter) -> tuple[ColumnElement[Any], Any]:
    """The vote weight column the filter asks for, and the votes (joined as it needs) to select it from."""
    if f.robust:
        weight, votes = robust_weight(), _robust_join()
    elif f.down_weighted and f.flagged_weight is not None:
        weight, votes = flagged_down_weight(f.flagged_weight), _robust_join()
    else:
        weight, votes = vote_t.c.weight, vote_t
    return (propensity_weight(weight) if f.ipw else weight), votes


def check_propensities(db: Session | Connection, f: VoteFilter) -> None:
    """With ``f.ipw``, refuse a selection with votes whose battle logged no positive pair probability
    (imported battles, judges' battles): their inverse-propensity weight does not exist."""
    if not f.ipw:
        return
    probability = _pair_probability()
    stmt = select(func.count()).select_from(vote_t)
    missing = filter_votes(stmt.where(or_(probability.is_(None), probability <= 0.0)), f)
    n = int(_connection(db).execute(missing).scalar_one())
    if n:
        raise ValueError(
            f"--ipw weighs each vote by its battle's logged pair probability, and {n} selected votes have"
            " none (imported or judged battles): select the site's (--source site or live) or drop --ipw"
        )


def unit_mean_scale(votes: float, weights: float) -> float:
    """The factor that makes inverse-propensity weights average 1 over the selected votes, so a board's
    battle counts stay on the scale of votes (the ratings and their intervals do not depend on it)."""
    return votes / weights if weights > 0 else 1.0


def filter_from(
    filters: VoteFilter | None,
    category: str | None,
    language: str | None,
    since: datetime | None,
    until: datetime | None,
    exclude_flagged: bool,
) -> VoteFilter:
    """``filters``, or the filter the older keyword arguments of a read spell."""
    if filters is not None:
        return filters
    return VoteFilter(category, language, since, until, exclude_flagged)


def count_flagged_annotators(db: Session | Connection) -> int:
    """How many annotators are flagged (their votes do not count)."""
    stmt = select(func.count()).select_from(annotator_t).where(annotator_t.c.flagged.is_(True))
    return int(_connection(db).execute(stmt).scalar_one())
