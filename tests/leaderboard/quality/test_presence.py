"""Skip asymmetry per model: a voter who only votes when model X is on screen is found, for every X, and
honest voters drawn from the same pairing are not."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from leaderboard.quality.presence import presence_asymmetry

N_MODELS = 6


def _pairs(rng: np.random.Generator, n: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    a = rng.integers(0, N_MODELS, n)
    b = (a + rng.integers(1, N_MODELS, n)) % N_MODELS
    return a, b


Arrays = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]


def _population(
    rng: np.random.Generator, n_honest: int, votes_each: int, skipper_model: int | None
) -> Arrays:
    who: list[npt.NDArray[np.int64]] = []
    a: list[npt.NDArray[np.int64]] = []
    b: list[npt.NDArray[np.int64]] = []
    for g in range(n_honest):
        pa, pb = _pairs(rng, votes_each)
        who.append(np.full(votes_each, g, dtype=np.int64))
        a.append(pa)
        b.append(pb)
    if skipper_model is not None:
        # Offered the same battles as everyone, votes only on those showing the model, skips the rest.
        pa, pb = _pairs(rng, 20 * votes_each)
        keep = np.flatnonzero((pa == skipper_model) | (pb == skipper_model))[:votes_each]
        who.append(np.full(keep.size, n_honest, dtype=np.int64))
        a.append(pa[keep])
        b.append(pb[keep])
    return np.concatenate(who), np.concatenate(a), np.concatenate(b)


@pytest.mark.parametrize("model", range(N_MODELS))
def test_a_voter_who_votes_only_when_the_model_is_on_screen_is_found(model: int) -> None:
    rng = np.random.default_rng(100 + model)
    who, a, b = _population(rng, n_honest=30, votes_each=60, skipper_model=model)
    result = presence_asymmetry(who, a, b, N_MODELS, min_votes=20)
    skipper = int(np.flatnonzero(result.annotators == 30)[0])
    assert result.model[skipper] == model
    assert result.share[skipper] == 1.0  # every one of its votes shows the model
    assert result.expected[skipper] == pytest.approx(2 / N_MODELS, abs=0.05)
    assert result.qvalue[skipper] < 1e-6
    honest = np.delete(result.qvalue, skipper)
    assert (honest >= 0.01).all()


def test_honest_voters_are_not_found_and_small_samples_are_not_tested() -> None:
    found = 0
    for seed in range(20):
        who, a, b = _population(np.random.default_rng(seed), n_honest=25, votes_each=50, skipper_model=None)
        found += int((presence_asymmetry(who, a, b, N_MODELS, min_votes=20).qvalue < 0.01).sum())
    assert found <= 2  # 500 honest voters at a 1% false discovery rate within each run
    who, a, b = _population(np.random.default_rng(0), n_honest=3, votes_each=10, skipper_model=2)
    small = presence_asymmetry(who, a, b, N_MODELS, min_votes=20)
    assert (small.model == -1).all() and (small.qvalue == 1.0).all()
