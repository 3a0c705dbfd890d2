"""Seeded synthetic battles from known ratings: tests, coverage studies, model comparison, benchmarks."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.special import ndtr

from leaderboard.battles import Battles
from leaderboard.bt.newton import solve_bt_batch
from leaderboard.bt.probit import PROBIT_NATS, probit_proba
from leaderboard.data import Outcome
from leaderboard.design.pairing import (
    ELO_PER_NAT,
    PRIOR_PRECISION,
    Criterion,
    PairDesign,
    design_probabilities,
    fisher_information,
    pair_gains,
    pair_probabilities,
    rating_covariance,
)

__all__ = ["simulate_adaptive_battles", "simulate_battles"]

FloatArray = npt.NDArray[np.float64]


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
    n_annotators: int = 0,
    annotator_sd: float = 0.0,
    annotator_position_sd: float = 0.0,
    n_prompts: int = 0,
    prompt_sd: float = 0.0,
    prompt_tie_sd: float = 0.0,
    annotator_discrimination: npt.ArrayLike | None = None,
) -> Battles:
    """Draw votes from the Bradley-Terry family with ratings ``true_rating``.

    A vote's pair is drawn first (sides at random), then its outcome from Davidson's model (1970) with
    a left-side advantage and style effects: with ``u = (r_left - r_right + position) ln(base) / scale
    + x . style ln(base) / scale`` and ``h = u / 2``, the left side wins with ``e^h / D``, ties with
    ``nu / D`` and loses with ``e^-h / D``, ``D = e^h + e^-h + nu`` (``nu = 0``: plain Bradley-Terry).
    With ``link="probit"`` the outcome comes from Thurstone-Mosteller on the same ``u`` instead, with
    Glenn-David ties when ``tau > 0`` (:mod:`leaderboard.bt.probit`).

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
    n_annotators, annotator_sd, annotator_position_sd : int, float, float
        Votes come from ``n_annotators`` annotators drawn uniformly (0: no annotator ids); each has its
        own taste, a normal offset of sd ``annotator_sd`` points on every model's rating, and its own side
        bias, a normal offset of sd ``annotator_position_sd`` points on ``position``. The population
        averages of both are 0, so ``true_rating`` and ``position`` stay the conditional targets.
    n_prompts, prompt_sd, prompt_tie_sd : int, float, float
        Votes are on ``n_prompts`` prompts drawn uniformly (0: no prompt ids); each has its own
        difficulty, a normal offset of sd ``prompt_sd`` points on every model's rating, and its own tie
        propensity, ``nu`` times a log-normal factor of log-sd ``prompt_tie_sd``.
    annotator_discrimination : array (n_annotators,), optional
        Each annotator's discrimination ``a_k > 0``: its votes' rating difference and side term are
        multiplied by ``a_k`` (the rater-ability model of :mod:`leaderboard.quality.rater_ability`; 1 is an
        annotator like the model's, below 1 a noisier one).

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
    side = np.full(n_votes, float(position))
    annotator = prompt = None
    vote_nu: float | npt.NDArray[np.float64] = nu
    if n_annotators > 0:
        annotator = rng.integers(0, n_annotators, n_votes).astype(np.int64)
        taste = rng.normal(0.0, annotator_sd, (n_annotators, m))
        r_a = r_a + taste[annotator, a]
        r_b = r_b + taste[annotator, b]
        side = side + rng.normal(0.0, annotator_position_sd, n_annotators)[annotator]
    if n_prompts > 0:
        prompt = rng.integers(0, n_prompts, n_votes).astype(np.int64)
        difficulty = rng.normal(0.0, prompt_sd, (n_prompts, m))
        r_a = r_a + difficulty[prompt, a]
        r_b = r_b + difficulty[prompt, b]
        vote_nu = nu * np.exp(rng.normal(0.0, prompt_tie_sd, n_prompts))[prompt]
    u = (r_a - r_b + side) * nat_per_point
    if annotator_discrimination is not None:
        disc = np.asarray(annotator_discrimination, dtype=np.float64)
        if annotator is None or disc.shape != (n_annotators,) or np.any(disc <= 0):
            raise ValueError("annotator_discrimination needs one positive value per annotator")
        u = u * disc[annotator]
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
        denom = np.exp(h) + np.exp(-h) + vote_nu
        p_left, p_tie = np.exp(h) / denom, vote_nu / denom
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
        annotator=annotator,
        prompt=prompt,
        features=features,
        feature_names=tuple(f"x{k}" for k in range(n_features)),
    )


def simulate_adaptive_battles(
    true_rating: npt.ArrayLike,
    n_votes: int,
    *,
    random_state: int | np.random.Generator | None = 0,
    criterion: Criterion = "width",
    floor: float = 0.1,
    power: float = 1.0,
    batch: int = 200,
    nu: float = 0.0,
    position: float = 0.0,
    shipped: bool = False,
) -> Battles:
    """Votes whose pairs an adaptive policy chose (:mod:`leaderboard.design.pairing`), with inverse
    propensities.

    Every ``batch`` votes the plain BT fit of the votes so far is refreshed and the pairs are drawn with
    :func:`~leaderboard.design.pairing.pair_probabilities` of the ``criterion``'s gains, or with
    ``shipped`` by the site's own policy, :func:`~leaderboard.design.pairing.design_probabilities` (the
    next ``batch`` votes allocated greedily, mixed with the ``floor``: far less smooth, so its inverse
    propensities spread far wider; ``power`` unused); outcomes as in
    :func:`simulate_battles` (Davidson ties ``nu``, left-side advantage ``position`` in Elo points, sides
    by a fair coin). ``weight`` is ``1 / (n_pairs * probability)`` of each vote's pair (1 under a uniform
    draw), the inverse-propensity weight the arena paper's estimator uses.
    """
    rng = np.random.default_rng(random_state)
    truth = np.asarray(true_rating, dtype=np.float64) / ELO_PER_NAT
    m = len(truth)
    design = PairDesign.of(m)
    n = np.zeros(len(design))
    s = np.zeros(len(design))
    theta = np.zeros(m)
    chunks: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], npt.NDArray[np.int8], FloatArray]] = []
    done = 0
    while done < n_votes:
        k = min(batch, n_votes - done)
        if shipped:
            probs = design_probabilities(theta, n, criterion=criterion, floor=floor, batch=batch)
        else:
            cov = rating_covariance(fisher_information(design, theta, n))
            gains = pair_gains(design, theta, cov, criterion=criterion)
            probs = pair_probabilities(gains, floor=floor, power=power)
        pairs = rng.choice(len(design), size=k, p=probs)
        lo_left = rng.random(k) < 0.5
        diff = truth[design.lo[pairs]] - truth[design.hi[pairs]]
        h = 0.5 * (np.where(lo_left, diff, -diff) + position / ELO_PER_NAT)
        denom = np.exp(h) + np.exp(-h) + nu
        draw = rng.random(k)
        p_left = np.exp(h) / denom
        outcome = np.where(
            draw < p_left, Outcome.MODEL_A, np.where(draw < p_left + nu / denom, Outcome.TIE, Outcome.MODEL_B)
        ).astype(np.int8)
        left_score = np.select([outcome == Outcome.MODEL_A, outcome == Outcome.TIE], [1.0, 0.5], 0.0)
        np.add.at(n, pairs, 1.0)
        np.add.at(s, pairs, np.where(lo_left, left_score, 1.0 - left_score))
        chunks.append((pairs, lo_left, outcome, 1.0 / (len(design) * probs[pairs])))
        done += k
        fitted, _, _ = solve_bt_batch(
            design.lo, design.hi, n, s, n_models=m, theta0=theta, ridge=PRIOR_PRECISION, tol=1e-6, max_iter=5
        )
        theta = fitted[0]
    pairs = np.concatenate([c[0] for c in chunks])
    lo_left = np.concatenate([c[1] for c in chunks])
    a = np.where(lo_left, design.lo[pairs], design.hi[pairs])
    b = np.where(lo_left, design.hi[pairs], design.lo[pairs])
    return Battles(
        models=tuple(f"model-{k:03d}" for k in range(m)),
        model_a=a,
        model_b=b,
        outcome=np.concatenate([c[2] for c in chunks]),
        time=np.arange(n_votes, dtype=np.float64),
        weight=np.concatenate([c[3] for c in chunks]),
    )
