"""Seeded synthetic battles from known ratings: tests, coverage studies, model comparison, benchmarks."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.special import ndtr

from leaderboard.battles import Battles
from leaderboard.data import Outcome
from leaderboard.probit import PROBIT_NATS, probit_proba

__all__ = ["simulate_battles"]


def simulate_battles(
    true_rating: npt.ArrayLike,
    n_votes: int,
    *,
    random_state: int | np.random.Generator | None = 0,
    tie_rate: float = 0.0,
    bothbad_share: float = 0.3,
    pair_skew: float = 0.0,
    position: float = 0.0,
    nu: float = 0.0,
    change_at: float | None = None,
    ratings_after: npt.ArrayLike | None = None,
    style: npt.ArrayLike | None = None,
    n_features: int = 0,
    scale: float = 400.0,
    base: float = 10.0,
    link: Literal["logit", "probit"] = "logit",
    tau: float = 0.0,
) -> Battles:
    """Draw votes from the Bradley-Terry family with ratings ``true_rating``.

    A vote's pair is drawn first (sides at random), then its outcome from Davidson's model (1970) with
    a left-side advantage and style effects: with ``u = (r_left - r_right + position) ln(base) / scale
    + x . style ln(base) / scale`` and ``h = u / 2``, the left side wins with ``e^h / D``, ties with
    ``nu / D`` and loses with ``e^-h / D``, ``D = e^h + e^-h + nu`` (``nu = 0``: plain Bradley-Terry).
    With ``link="probit"`` the outcome comes from Thurstone-Mosteller on the same ``u`` instead, with
    Glenn-David ties when ``tau > 0`` (:mod:`leaderboard.probit`).

    Parameters
    ----------
    true_rating : array, shape (M,)
        Ratings in points of ``scale`` (``rating = scale * log_base(strength) + const``).
    n_votes : int
    random_state : seed or Generator
    tie_rate : float
        Chance a vote is declared a tie before the draw above (``bothbad_share`` of them both-bad).
        Such ties shrink the expected score towards 1/2, so with ``tie_rate > 0`` the BT fit no longer
        targets ``true_rating`` exactly; coverage studies use 0.
    pair_skew : float
        0 draws pairs uniformly; larger values make pair frequencies log-normal with this sigma.
    position : left-side advantage in rating points
    nu : Davidson tie propensity (0: no ties from the model)
    change_at, ratings_after : optional
        From time ``change_at`` (times are uniform on [0, 1), sorted) the true ratings are
        ``ratings_after`` (models that were updated).
    style : array (n_features,), optional
        True style coefficients in rating points per unit covariate; covariates are standard normal.
    n_features : int
        Number of style covariates drawn (``features`` of the result).
    scale, base : the rating scale
    link : ``logit`` (Bradley-Terry, Davidson ties) or ``probit`` (Thurstone-Mosteller)
    tau : Glenn-David tie threshold in probit units (probit link; 0: no ties from the model)

    Returns
    -------
    Battles
        With ``time`` and, when ``n_features``, ``features``; models are named ``model-000``, ...
    """
    rng = np.random.default_rng(random_state)
    r = np.asarray(true_rating, dtype=np.float64)
    m = len(r)
    ii, jj = np.triu_indices(m, k=1)
    weight = np.ones(len(ii)) if pair_skew <= 0 else rng.lognormal(0.0, pair_skew, size=len(ii))
    pair = rng.choice(len(ii), size=n_votes, p=weight / weight.sum())
    flip = rng.random(n_votes) < 0.5
    a = np.where(flip, jj[pair], ii[pair]).astype(np.int64)
    b = np.where(flip, ii[pair], jj[pair]).astype(np.int64)
    time = np.sort(rng.random(n_votes))
    r_a, r_b = r[a], r[b]
    if change_at is not None and ratings_after is not None:
        later = time >= change_at
        after = np.asarray(ratings_after, dtype=np.float64)
        r_a = np.where(later, after[a], r_a)
        r_b = np.where(later, after[b], r_b)
    nat_per_point = math.log(base) / scale
    u = (r_a - r_b + position) * nat_per_point
    features = None
    if n_features:
        features = rng.standard_normal((n_votes, n_features))
        if style is not None:
            u = u + features @ (np.asarray(style, dtype=np.float64) * nat_per_point)
    if link == "probit":
        if tau > 0:
            proba = probit_proba(u, math.log(tau))
            p_left, p_tie = proba[:, 0], proba[:, 1]
        else:
            p_left, p_tie = ndtr(u / PROBIT_NATS), np.zeros(n_votes)
    else:
        h = 0.5 * u
        denom = np.exp(h) + np.exp(-h) + nu
        p_left, p_tie = np.exp(h) / denom, nu / denom
    draw = rng.random(n_votes)
    outcome = np.where(
        draw < p_left, Outcome.MODEL_A, np.where(draw < p_left + p_tie, Outcome.TIE, Outcome.MODEL_B)
    ).astype(np.int8)
    if tie_rate > 0:
        tie = rng.random(n_votes) < tie_rate
        bad = rng.random(n_votes) < bothbad_share
        outcome = np.where(tie, np.where(bad, Outcome.BOTHBAD, Outcome.TIE), outcome).astype(np.int8)
    return Battles(
        models=tuple(f"model-{k:03d}" for k in range(m)),
        model_a=a,
        model_b=b,
        outcome=outcome,
        time=time,
        features=features,
        feature_names=tuple(f"x{k}" for k in range(n_features)),
    )
