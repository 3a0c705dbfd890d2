"""What the voting site reads: live standings, the pairing catalog and vote counts, the reveal view."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import func
from sqlmodel import Session, col, select

from leaderboard.data import Outcome
from votes.catalog.roles import in_arena
from votes.models import Battle, GoldBattle, GoldVote, LiveRating, Model, Output, Prompt, RepeatVote, Vote
from votes.voting.battles import CatalogRow, VoteResult
from votes.voting.live_battles import catalog_prompt

__all__ = [
    "BattleView",
    "Standing",
    "arena_models",
    "arena_ratings",
    "get_battle_view",
    "live_standings",
    "load_pairing_catalog",
    "pair_vote_counts",
]


#: How the live board ranks: by rating, or by the conservative score ``rating - 2 deviations``.
RankBy = Literal["rating", "conservative"]

#: Deviations taken off the rating in the conservative score.
CONSERVATIVE_DEVIATIONS = 2.0


@dataclass(frozen=True)
class Standing:
    """One model's live rating as the site shows it (NaN rating and no time while unrated).

    ``deviation`` is the rater's uncertainty (None for Elo); ``provisional`` marks a model whose
    deviation is still large.
    """

    model: str
    rating: float
    games: int
    updated_at: datetime | None
    deviation: float | None = None
    provisional: bool = False

    @property
    def conservative(self) -> float:
        """``rating - 2 deviations``; the rating itself without a deviation."""
        if self.deviation is None:
            return self.rating
        return self.rating - CONSERVATIVE_DEVIATIONS * self.deviation


@dataclass(frozen=True)
class BattleView:
    """A recorded battle as the reveal page shows it."""

    battle_id: int
    annotator_id: int | None
    prompt: Prompt
    output_a: Output | None
    output_b: Output | None
    model_a: str
    model_b: str
    result: VoteResult | None


def live_standings(
    *,
    session: Session,
    rank_by: RankBy = "rating",
    provisional_above: float | None = None,
    provisional_games: int = 0,
) -> list[Standing]:
    """Live rating of every model in the arena (:func:`votes.catalog.roles.in_arena`: neither a judge only
    nor retired), best first; unrated models last, with a NaN rating.

    ``rank_by="conservative"`` ranks by ``rating - 2 deviations`` (the rating where there is no
    deviation); a model whose deviation exceeds ``provisional_above``, or with fewer than
    ``provisional_games`` games, is marked provisional.
    """
    stmt = (
        select(Model.name, LiveRating.rating, LiveRating.games)
        .add_columns(col(LiveRating.updated_at), col(LiveRating.deviation))
        .join(LiveRating, col(LiveRating.model_id) == col(Model.id), isouter=True)
        .where(in_arena())
        .order_by(col(Model.name))
    )
    rated: list[Standing] = []
    unrated: list[Standing] = []
    for name, rating, games, updated_at, deviation in session.execute(stmt).all():
        if rating is not None:
            dev = None if deviation is None else float(deviation)
            wide = dev is not None and provisional_above is not None and dev > provisional_above
            provisional = wide or int(games) < provisional_games
            rated.append(
                Standing(
                    model=name,
                    rating=float(rating),
                    games=int(games),
                    updated_at=updated_at,
                    deviation=dev,
                    provisional=provisional,
                )
            )
        else:
            unrated.append(Standing(model=name, rating=float("nan"), games=0, updated_at=None))
    if rank_by == "conservative":
        return sorted(rated, key=lambda s: (-s.conservative, s.model)) + unrated
    return sorted(rated, key=lambda s: (-s.rating, s.model)) + unrated


def load_pairing_catalog(*, session: Session) -> list[CatalogRow]:
    """Every (prompt, output, model) of a model in the arena (active, not a judge only); the pairing
    policy picks from these.

    Live prompts (an annotator's own, answered in a live battle) are not shown to anyone else.
    """
    stmt = (
        select(Output.prompt_id, Output.id, Output.model_id)
        .join(Model, col(Model.id) == col(Output.model_id))
        .join(Prompt, col(Prompt.id) == col(Output.prompt_id))
        .where(in_arena())
        .where(catalog_prompt(col(Prompt.source)))
        .order_by(col(Output.prompt_id), col(Output.model_id), col(Output.sample))
    )
    return [
        CatalogRow(prompt_id=p, output_id=o, model_id=m)
        for p, o, m in session.exec(stmt).all()
        if o is not None
    ]


def arena_models(*, session: Session) -> list[Model]:
    """The models in the arena (active contestants), by name: the home page's list."""
    return list(session.exec(select(Model).where(in_arena()).order_by(col(Model.name))).all())


def arena_ratings(*, session: Session) -> dict[int, float]:
    """The live rating of each rated model in the arena, by id: what pairing weighs pairs with (a judge or
    a retired model keeps its rating, not its place in the design)."""
    stmt = (
        select(LiveRating.model_id, LiveRating.rating)
        .join(Model, col(Model.id) == col(LiveRating.model_id))
        .where(in_arena())
    )
    return {int(m): float(r) for m, r in session.exec(stmt).all()}


def pair_vote_counts(*, session: Session) -> dict[tuple[int, int], int]:
    """Votes per unordered model pair (lower id first), aggregated in SQL from the votes' own copies of
    their battle's pair: the covering ``ix_vote_cells`` alone is read, no battle is joined."""
    stmt = select(Vote.model_a_id, Vote.model_b_id, func.count()).group_by(
        col(Vote.model_a_id), col(Vote.model_b_id)
    )
    counts: dict[tuple[int, int], int] = {}
    for a, b, n in session.exec(stmt).all():
        key = (min(a, b), max(a, b))
        counts[key] = counts.get(key, 0) + int(n)
    return counts


def _model_names(session: Session, model_ids: Sequence[int]) -> dict[int, str]:
    stmt = select(Model.id, Model.name).where(col(Model.id).in_(model_ids))
    return {int(m): n for m, n in session.exec(stmt).all() if m is not None}


def get_battle_view(*, session: Session, battle_id: int) -> BattleView | None:
    """A battle with its prompt, answers, model names and (once voted) its vote's result; None if unknown."""
    battle = session.get(Battle, battle_id)
    if battle is None or battle.prompt_id is None:
        return None
    prompt = session.get(Prompt, battle.prompt_id)
    if prompt is None:
        return None
    if battle.source == "gold":
        return _gold_battle_view(session, battle, prompt)
    # a repeat's vote is stored apart (:mod:`votes.voting.repeat_votes`); its battle row names its answers
    vote: Vote | RepeatVote | None
    if battle.source == "repeat":
        vote = session.exec(select(RepeatVote).where(RepeatVote.battle_id == battle_id)).first()
    else:
        vote = session.exec(select(Vote).where(Vote.battle_id == battle_id)).first()
    names = _model_names(session, [battle.model_a_id, battle.model_b_id])
    result = None
    if vote is not None:
        assert vote.id is not None  # nosec B101 # type narrowing
        result = VoteResult.from_live_elo(
            vote.live_elo,
            vote_id=vote.id,
            battle_id=battle_id,
            winner=vote.winner,
            model_a=names[battle.model_a_id],
            model_b=names[battle.model_b_id],
        )
    return BattleView(
        battle_id=battle_id,
        annotator_id=battle.annotator_id,
        prompt=prompt,
        output_a=session.get(Output, battle.output_a_id) if battle.output_a_id else None,
        output_b=session.get(Output, battle.output_b_id) if battle.output_b_id else None,
        model_a=names[battle.model_a_id],
        model_b=names[battle.model_b_id],
        result=result,
    )


def _gold_battle_view(session: Session, battle: Battle, prompt: Prompt) -> BattleView | None:
    """A voted gold battle as the reveal shows any battle: the texts as they were shown, the names given."""
    assert battle.id is not None  # nosec B101 # type narrowing
    row = session.exec(
        select(GoldVote, GoldBattle)
        .join(GoldBattle, col(GoldBattle.id) == col(GoldVote.gold_id))
        .where(GoldVote.battle_id == battle.id)
    ).first()
    if row is None:
        return None
    vote, gold = row
    assert vote.id is not None  # nosec B101 # type narrowing
    left, right = (
        (gold.text_b, gold.text_a) if vote.expected == Outcome.MODEL_B.label else (gold.text_a, gold.text_b)
    )
    names = _model_names(session, [battle.model_a_id, battle.model_b_id])
    result = VoteResult.from_live_elo(
        vote.live_elo,
        vote_id=vote.id,
        battle_id=battle.id,
        winner=vote.winner,
        model_a=names[battle.model_a_id],
        model_b=names[battle.model_b_id],
    )
    return BattleView(
        battle_id=battle.id,
        annotator_id=battle.annotator_id,
        prompt=prompt,
        output_a=Output(prompt_id=prompt.id or 0, model_id=battle.model_a_id, text=left),
        output_b=Output(prompt_id=prompt.id or 0, model_id=battle.model_b_id, text=right),
        model_a=names[battle.model_a_id],
        model_b=names[battle.model_b_id],
        result=result,
    )
