"""The inlined replay loop is bit-identical to calling update_elo vote by vote, in one go or in chunks."""

from __future__ import annotations

import numpy as np
import pytest

from leaderboard.online.elo import EloConfig, EloStandings, replay_elo, replay_elo_indices, update_elo

CONFIGS = [
    EloConfig(),
    EloConfig(k=16.0, provisional=((5, 40.0), (20, 24.0))),
    EloConfig(k=8.0, davidson_nu=0.6),
    EloConfig(k=32.0, scale=173.7, base=np.e, initial=1500.0),
]


def _votes(seed: int, n: int = 3000, n_models: int = 9) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_models, n)
    b = (a + rng.integers(1, n_models, n)) % n_models
    return a, b, rng.integers(0, 4, n).astype(np.int8)


def _by_update_elo(
    a: np.ndarray, b: np.ndarray, o: np.ndarray, n_models: int, config: EloConfig
) -> list[float]:
    rating = [config.initial] * n_models
    games = [0] * n_models
    for i, j, code in zip(a.tolist(), b.tolist(), o.tolist(), strict=True):
        rating[i], rating[j] = update_elo(
            rating[i], rating[j], code, config=config, games_a=games[i], games_b=games[j]
        )
        games[i] += 1
        games[j] += 1
    return rating


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("seed", [0, 1])
def test_bit_identical_to_update_elo(config: EloConfig, seed: int) -> None:
    a, b, o = _votes(seed)
    names = tuple(f"m{i}" for i in range(9))
    fast = replay_elo_indices(a, b, o, models=names, config=config)
    assert fast.rating.tolist() == _by_update_elo(a, b, o, 9, config)  # exact float equality
    assert fast.games.tolist() == np.bincount(np.concatenate([a, b]), minlength=9).tolist()


@pytest.mark.parametrize("config", CONFIGS[:3])
def test_chunks_continue_exactly_and_leave_start_alone(config: EloConfig) -> None:
    a, b, o = _votes(7)
    names = tuple(f"m{i}" for i in range(9))
    whole = replay_elo_indices(a, b, o, models=names, config=config)
    state: EloStandings | None = None
    for lo in range(0, len(a), 701):
        before = None if state is None else (state.rating.copy(), state.games.copy())
        nxt = replay_elo_indices(
            a[lo : lo + 701], b[lo : lo + 701], o[lo : lo + 701], models=names, config=config, start=state
        )
        if state is not None and before is not None:
            assert np.array_equal(state.rating, before[0]) and np.array_equal(state.games, before[1])
        state = nxt
    assert state is not None
    assert state.rating.tolist() == whole.rating.tolist()
    assert state.games.tolist() == whole.games.tolist()


def test_replay_by_name_goes_through_the_same_loop() -> None:
    a, b, o = _votes(3, n=500, n_models=5)
    names = tuple(f"m{i}" for i in range(5))
    by_name = replay_elo([names[i] for i in a], [names[i] for i in b], o, models=names)
    assert by_name.rating.tolist() == _by_update_elo(a, b, o, 5, EloConfig())


def test_bad_inputs_raise() -> None:
    names = ("x", "y")
    with pytest.raises(ValueError, match="outcome code 4"):
        replay_elo_indices([0], [1], [4], models=names)
    with pytest.raises(ValueError, match="out of range"):
        replay_elo_indices([0], [2], [0], models=names)
    with pytest.raises(ValueError, match="same length"):
        replay_elo_indices([0, 1], [1], [0], models=names)
    start = replay_elo_indices([0], [1], [0], models=names)
    with pytest.raises(ValueError, match="other models"):
        replay_elo_indices([0], [1], [0], models=("y", "x"), start=start)
