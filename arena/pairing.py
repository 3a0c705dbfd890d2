"""Which two answers to show next.

The policy picks an unordered model pair with a known probability (logged with the battle), then a prompt
both models answered that this annotator has not judged for that pair, then the sides by a fair coin.

Policies
--------
uniform   every eligible pair equally likely.
balanced  weight ``1 / (n + 1) ** power`` where ``n`` is the pair's vote count: few-vote pairs first.
active    balanced weight times ``4 p (1 - p)``, ``p`` the live-Elo expected score: close pairs, which
          tell the most about the ranking, are shown more often.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from votes.battles import CatalogRow

__all__ = ["Choice", "PairingCatalog", "PairingPolicy", "choose_battle", "pair_weights"]

PairingPolicy = Literal["uniform", "balanced", "active"]
Pair = tuple[int, int]


@dataclass(frozen=True)
class PairingCatalog:
    """Answers indexed for pairing: per prompt its outputs by model, per pair the prompts they share."""

    outputs: Mapping[int, Mapping[int, int]]  # prompt_id -> {model_id: output_id}
    shared: Mapping[Pair, tuple[int, ...]] = field(default_factory=dict)  # (lo, hi) -> prompt ids

    @classmethod
    def from_rows(cls, rows: Sequence[CatalogRow]) -> PairingCatalog:
        outputs: dict[int, dict[int, int]] = defaultdict(dict)
        for row in rows:
            outputs[row.prompt_id][row.model_id] = row.output_id
        shared: dict[Pair, list[int]] = defaultdict(list)
        for prompt_id, by_model in sorted(outputs.items()):
            models = sorted(by_model)
            for i, lo in enumerate(models):
                for hi in models[i + 1 :]:
                    shared[(lo, hi)].append(prompt_id)
        return cls(outputs=dict(outputs), shared={k: tuple(v) for k, v in shared.items()})

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
) -> list[float]:
    """Unnormalised selection weight of each pair under ``policy``."""
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
) -> Choice | None:
    """Pick the next battle, or None when this annotator has judged every available pair and prompt.

    ``seen`` holds the (prompt, lower model, higher model) triples judged; ``seen_per_pair``, when given,
    must be the number of distinct triples per pair in ``seen`` (a caller keeping it saves the count).
    """
    if seen_per_pair is None:
        per_pair: dict[Pair, int] = defaultdict(int)
        for _prompt, lo, hi in seen:
            per_pair[(lo, hi)] += 1
        seen_per_pair = per_pair
    pairs = [p for p, prompts in catalog.shared.items() if len(prompts) > seen_per_pair.get(p, 0)]
    if not pairs:
        return None
    weights = pair_weights(pairs, policy=policy, counts=counts, power=power, ratings=ratings)
    total = sum(weights)
    (index,) = rng.choices(range(len(pairs)), weights=weights)
    lo, hi = pairs[index]
    prompts = [p for p in catalog.shared[(lo, hi)] if (p, lo, hi) not in seen]
    if not prompts:  # seen holds prompts no longer in the catalog; fall back to any shared prompt
        prompts = list(catalog.shared[(lo, hi)])
    prompt_id = rng.choice(prompts)
    left, right = (lo, hi) if rng.random() < 0.5 else (hi, lo)
    by_model = catalog.outputs[prompt_id]
    return Choice(
        prompt_id=prompt_id,
        output_a=CatalogRow(prompt_id=prompt_id, output_id=by_model[left], model_id=left),
        output_b=CatalogRow(prompt_id=prompt_id, output_id=by_model[right], model_id=right),
        pair_probability=weights[index] / total,
    )
