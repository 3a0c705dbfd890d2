"""Which two answers to show next.

The policy picks an unordered model pair with a known probability (logged with the battle), then a prompt
both models answered that this annotator has not judged for that pair, then the sides by a fair coin.

Policies
--------
uniform   every eligible pair equally likely.
balanced  weight ``1 / (n + 1) ** power`` where ``n`` is the pair's vote count: few-vote pairs first.
active    balanced weight times ``4 p (1 - p)``, ``p`` the live-Elo expected score: close pairs, which
          tell the most about the ranking, are shown more often.
optimal   the model-based design (:func:`leaderboard.design.pairing.design_probabilities`): the pairs whose
next
          votes shrink the mean interval width most, from the live ratings and the pair vote counts,
          with a uniform floor so every pair keeps a positive probability. It needs fewer votes than
          the others for the same precision (``scripts/bench_pairing.py``). The default.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from leaderboard.design.pairing import DEFAULT_FLOOR, PairDesign, design_probabilities
from leaderboard.online.table import RATERS
from votes.voting.battles import CatalogRow

__all__ = [
    "Choice",
    "PairingCatalog",
    "PairingPolicy",
    "choose_battle",
    "choose_pair",
    "optimal_design",
    "pair_weights",
]

PairingPolicy = Literal["uniform", "balanced", "active", "optimal"]
Pair = tuple[int, int]


@dataclass(frozen=True)
class PairingCatalog:
    """Answers indexed for pairing: per prompt its outputs by model (every sampled answer, in sample
    order), per pair the prompts they share."""

    outputs: Mapping[int, Mapping[int, tuple[int, ...]]]  # prompt_id -> {model_id: output ids}
    shared: Mapping[Pair, tuple[int, ...]] = field(default_factory=dict)  # (lo, hi) -> prompt ids

    @classmethod
    def from_rows(cls, rows: Sequence[CatalogRow]) -> PairingCatalog:
        samples: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        for row in rows:
            samples[row.prompt_id][row.model_id].append(row.output_id)
        outputs = {p: {m: tuple(o) for m, o in by_model.items()} for p, by_model in samples.items()}
        shared: dict[Pair, list[int]] = defaultdict(list)
        for prompt_id, by_model in sorted(outputs.items()):
            models = sorted(by_model)
            for i, lo in enumerate(models):
                for hi in models[i + 1 :]:
                    shared[(lo, hi)].append(prompt_id)
        return cls(outputs=outputs, shared={k: tuple(v) for k, v in shared.items()})

    @property
    def model_ids(self) -> set[int]:
        return {m for pair in self.shared for m in pair}


@dataclass(frozen=True)
class Choice:
    prompt_id: int
    output_a: CatalogRow
    output_b: CatalogRow
    pair_probability: float


def pair_weights(
    pairs: Sequence[Pair],
    *,
    policy: PairingPolicy,
    counts: Mapping[Pair, int],
    power: float = 1.0,
    ratings: Mapping[int, float] | None = None,
    scale: float = 400.0,
    design: Mapping[Pair, float] | None = None,
) -> list[float]:
    """Unnormalised selection weight of each pair under ``policy``.

    ``optimal`` reads the pair probabilities of ``design`` (:func:`optimal_design`); a pair it does not
    know (a model added since it was computed) gets the design's largest weight, so a newcomer is
    explored at once; without a design the draw is uniform.
    """
    if policy == "optimal":
        if not design:
            return [1.0] * len(pairs)
        top = max(design.values())
        return [design.get(p, top) for p in pairs]
    if policy == "uniform":
        return [1.0] * len(pairs)
    weights = [1.0 / (counts.get(p, 0) + 1) ** power for p in pairs]
    if policy == "active":
        ratings = ratings or {}
        for i, (lo, hi) in enumerate(pairs):
            diff = ratings.get(lo, 0.0) - ratings.get(hi, 0.0)
            p = 1.0 / (1.0 + 10.0 ** (-diff / scale))
            weights[i] *= max(4.0 * p * (1.0 - p), 1e-6)
    return weights


def choose_pair(
    pairs: Sequence[Pair],
    *,
    policy: PairingPolicy,
    counts: Mapping[Pair, int],
    rng: random.Random,
    power: float = 1.0,
    ratings: Mapping[int, float] | None = None,
    design: Mapping[Pair, float] | None = None,
) -> tuple[Pair, float]:
    """One of ``pairs`` drawn with the policy's weights, and the probability it had (``pairs`` not empty)."""
    weights = pair_weights(pairs, policy=policy, counts=counts, power=power, ratings=ratings, design=design)
    (index,) = rng.choices(range(len(pairs)), weights=weights)
    return pairs[index], weights[index] / sum(weights)


def choose_battle(
    catalog: PairingCatalog,
    *,
    policy: PairingPolicy,
    counts: Mapping[Pair, int],
    seen: Collection[tuple[int, int, int]],
    rng: random.Random,
    power: float = 1.0,
    ratings: Mapping[int, float] | None = None,
    seen_per_pair: Mapping[Pair, int] | None = None,
    design: Mapping[Pair, float] | None = None,
    revealed: Collection[int] = (),
    exhausted: set[Pair] | None = None,
) -> Choice | None:
    """Pick the next battle, or None when this annotator has judged every available pair and prompt.

    ``seen`` holds the (prompt, lower model, higher model) triples judged; ``seen_per_pair``, when given,
    must be the number of distinct triples per pair in ``seen`` (a caller keeping it saves the count).
    ``revealed`` holds the output ids whose models a vote already named to this annotator (or to their
    address): a battle showing one is offered only when no other unjudged battle is left (the drawn pair
    is redrawn among the pairs that still have one; then ``pair_probability`` is the draw's probability
    among those, and in the last resort among every pair with an unjudged prompt). When a model has
    several sampled answers to the prompt, one is drawn at random among those not revealed (among all
    when every one is).

    ``exhausted``, when given, is the caller's memory of pairs found with no unjudged prompt free of
    revealed answers; it is read and added to. Both ``seen`` and ``revealed`` only grow for one
    annotator and catalog, so a pair once exhausted stays so, and keeping the set spares each pick the
    redraws through them (without it, a voter who has seen most answers costs a scan of every pair's
    prompts per battle). The caller must start a new set when the catalog changes.
    """
    if seen_per_pair is None:
        per_pair: dict[Pair, int] = defaultdict(int)
        for _prompt, lo, hi in seen:
            per_pair[(lo, hi)] += 1
        seen_per_pair = per_pair
    pairs = [p for p, prompts in catalog.shared.items() if len(prompts) > seen_per_pair.get(p, 0)]
    if not pairs:
        return None
    known = exhausted if exhausted is not None else set()
    candidates = [p for p in pairs if p not in known]
    while candidates:
        (lo, hi), probability = choose_pair(
            candidates, policy=policy, counts=counts, rng=rng, power=power, ratings=ratings, design=design
        )
        prompts = [
            p
            for p in catalog.shared[(lo, hi)]
            if (p, lo, hi) not in seen and not _shows_revealed(catalog.outputs[p], lo, hi, revealed)
        ]
        if prompts:
            break
        # Judged out (seen holds prompts no longer in the catalog, so the count let it through: a judged
        # prompt and pair is never offered again; the store would refuse its vote), or every unjudged
        # prompt shows a revealed answer: remember it, try another pair.
        known.add((lo, hi))
        candidates.remove((lo, hi))
    else:
        # Every pair left shows a revealed answer: one of them, drawn among all with an unjudged prompt.
        while True:
            (lo, hi), probability = choose_pair(
                pairs, policy=policy, counts=counts, rng=rng, power=power, ratings=ratings, design=design
            )
            prompts = [p for p in catalog.shared[(lo, hi)] if (p, lo, hi) not in seen]
            if prompts:
                break
            pairs.remove((lo, hi))
            if not pairs:
                return None
    prompt_id = rng.choice(prompts)
    left, right = (lo, hi) if rng.random() < 0.5 else (hi, lo)
    by_model = catalog.outputs[prompt_id]
    return Choice(
        prompt_id=prompt_id,
        output_a=CatalogRow(
            prompt_id=prompt_id, output_id=_draw(by_model[left], revealed, rng), model_id=left
        ),
        output_b=CatalogRow(
            prompt_id=prompt_id, output_id=_draw(by_model[right], revealed, rng), model_id=right
        ),
        pair_probability=probability,
    )


def _draw(samples: tuple[int, ...], revealed: Collection[int], rng: random.Random) -> int:
    """One of a model's sampled answers: uniformly among those not revealed, or among all."""
    if len(samples) == 1:
        return samples[0]
    hidden = [o for o in samples if o not in revealed]
    return rng.choice(hidden or list(samples))


def _shows_revealed(
    by_model: Mapping[int, tuple[int, ...]], lo: int, hi: int, revealed: Collection[int]
) -> bool:
    """True when either model has no answer to this prompt left that was not revealed."""
    if not revealed:
        return False
    return all(o in revealed for o in by_model[lo]) or all(o in revealed for o in by_model[hi])


def optimal_design(
    model_ids: Collection[int],
    *,
    counts: Mapping[Pair, int],
    ratings: Mapping[int, float],
    system: str,
    floor: float = DEFAULT_FLOOR,
    batch: int = 200,
) -> dict[Pair, float]:
    """Probability of each pair of ``model_ids`` under the ``optimal`` policy, from the live ratings (read
    on the scale of ``system``, their rater's name in :data:`~leaderboard.online.table.RATERS`) and the
    vote counts per pair; empty with fewer than two models."""
    ids = sorted(set(model_ids))
    if len(ids) < 2:
        return {}
    points = np.array([ratings.get(m, np.nan) for m in ids], dtype=np.float64)
    known = np.isfinite(points)
    centre = float(points[known].mean()) if known.any() else 0.0
    theta = np.where(known, points - centre, 0.0) * RATERS[system].nats_per_point
    design = PairDesign.of(len(ids))
    votes = np.array(
        [counts.get((ids[i], ids[j]), 0) for i, j in zip(design.lo, design.hi, strict=True)], dtype=np.float64
    )
    probs = design_probabilities(theta, votes, floor=floor, batch=batch)
    return {(ids[i], ids[j]): float(p) for i, j, p in zip(design.lo, design.hi, probs, strict=True)}
