"""Gold and repeat battles: the checks served in place of the next battle, drawn from memory.

A gold (its right vote known, :mod:`votes.voting.gold_items`) is served during the onboarding quiz and
then now and then, never twice to one annotator; a repeat shows an annotator one of their own counted
battles again, sides swapped, at least :data:`REPEAT_GAP` votes later (:mod:`votes.voting.repeat_votes`).
:func:`draw_gold` and :func:`draw_repeat` choose them from what
:class:`arena.voting.pairing_service.PairingService` keeps in memory, called under its lock: every random
draw is made in the order it always was, so pairing's stream is unchanged.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arena.voting.histories import AnnotatorHistory, ShownVote
from arena.voting.pairing import Choice
from votes.models import Output
from votes.voting.battles import CatalogRow
from votes.voting.gold_items import GoldItem, gold_sides

if TYPE_CHECKING:
    from arena.settings import Settings

__all__ = ["REPEAT_GAP", "GoldChoice", "RepeatChoice", "draw_gold", "draw_repeat"]

#: A repeat shows again a battle the annotator voted on at least this many of their counted votes ago, so
#: that they judge the answers afresh rather than recall their click.
REPEAT_GAP = 20


@dataclass(frozen=True)
class GoldChoice:
    """A gold to serve, sides drawn: the answers as shown, the models a reveal names, the right winner."""

    gold_id: int
    prompt_id: int
    answer_a: Output
    answer_b: Output
    model_a_id: int
    model_b_id: int
    expected: str  # "model_a", "model_b" or "tie"
    quiz: int  # the onboarding quiz's length while this gold is part of it, else 0
    pair_probability: float


@dataclass(frozen=True)
class RepeatChoice:
    """A repeat to serve: the vote repeated and its battle, sides swapped
    (:mod:`votes.voting.repeat_votes`)."""

    original_vote_id: int
    choice: Choice


def draw_gold(
    history: AnnotatorHistory,
    golds: Sequence[GoldItem],
    answers: Mapping[int, tuple[Output, Output]],
    model_ids: Collection[int],
    settings: Settings,
    rng: random.Random,
) -> GoldChoice | None:
    """A gold instead of the next battle, or None: during the onboarding quiz (``gold_quiz`` golds before a
    first counted vote) always when one is left, else with probability ``gold_rate``. Never a gold this
    annotator was served before (``history``, marked served here). ``answers`` are each gold's two answers,
    ``model_ids`` the catalog's models a reveal may name."""
    if len(history.golds) >= len(golds):  # none left: no draw, pairing's stream unchanged
        return None
    in_quiz = history.n_votes == 0 and len(history.golds) < settings.gold_quiz
    if not in_quiz and (settings.gold_rate <= 0 or rng.random() >= settings.gold_rate):
        return None
    models = sorted(model_ids)
    gold = _fresh_gold(history, golds, rng)
    if gold is None:
        return None
    named = gold_sides(gold, models, rng)
    if named is None:
        return None
    model_a, model_b = named
    answer_a, answer_b = answers[gold.gold_id]
    expected = gold.expected_winner(right_on_left=True)
    if rng.random() < 0.5:
        answer_a, answer_b, model_a, model_b = answer_b, answer_a, model_b, model_a
        expected = gold.expected_winner(right_on_left=False)
    history.golds.add(gold.gold_id)
    n_pairs = max(1, len(models) * (len(models) - 1) // 2)
    return GoldChoice(
        gold_id=gold.gold_id,
        prompt_id=gold.prompt_id,
        answer_a=answer_a,
        answer_b=answer_b,
        model_a_id=model_a,
        model_b_id=model_b,
        expected=expected,
        quiz=settings.gold_quiz if in_quiz else 0,
        pair_probability=1.0 / n_pairs,
    )


def _fresh_gold(history: AnnotatorHistory, golds: Sequence[GoldItem], rng: random.Random) -> GoldItem | None:
    """A gold this annotator was not served, uniformly: a few random draws, then a scan (few left)."""
    for _ in range(8):
        gold = golds[rng.randrange(len(golds))]
        if gold.gold_id not in history.golds:
            return gold
    fresh = [g for g in golds if g.gold_id not in history.golds]
    return rng.choice(fresh) if fresh else None


def draw_repeat(
    history: AnnotatorHistory, rate: float, n_models: int, rng: random.Random
) -> RepeatChoice | None:
    """One of the annotator's own counted battles again, sides swapped, instead of the next battle, or None:
    with probability ``rate`` once a vote at least :data:`REPEAT_GAP` of their counted votes old was not
    repeated yet (``history``, marked repeated here). ``n_models``: the catalog's models, for the pair's
    probability."""
    n_old = len(history.voted) - REPEAT_GAP + 1  # votes at least REPEAT_GAP votes ago
    if n_old <= 0 or len(history.repeated) >= n_old:  # none: no draw, pairing's stream unchanged
        return None
    if rate <= 0 or rng.random() >= rate:
        return None
    original = _fresh_repeat(history, n_old, rng)
    if original is None:
        return None
    vote_id, prompt_id, model_a, model_b, out_a, out_b = original
    history.repeated.add(vote_id)
    n_pairs = max(1, n_models * (n_models - 1) // 2)
    choice = Choice(
        prompt_id=prompt_id,
        output_a=CatalogRow(prompt_id=prompt_id, output_id=out_b, model_id=model_b),
        output_b=CatalogRow(prompt_id=prompt_id, output_id=out_a, model_id=model_a),
        pair_probability=1.0 / n_pairs,
    )
    return RepeatChoice(original_vote_id=vote_id, choice=choice)


def _fresh_repeat(history: AnnotatorHistory, n_old: int, rng: random.Random) -> ShownVote | None:
    """A vote among the first ``n_old`` not yet repeated, uniformly: a few draws, then a scan."""
    for _ in range(8):
        shown = history.voted[rng.randrange(n_old)]
        if shown[0] not in history.repeated:
            return shown
    fresh = [v for v in history.voted[:n_old] if v[0] not in history.repeated]
    return rng.choice(fresh) if fresh else None
