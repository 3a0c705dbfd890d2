"""Each judge's own left-side advantage, shrunk towards the pooled one, and a pooled figure that admits
their spread.

A single position term fitted on every vote says how much the left answer gains on average, and its
interval only how precisely that average is known from the votes; when judges differ (one favours the
left by 300 points, another the right), the average describes no judge, and an interval that ignores the
spread looks far more certain than the data allow. Here every judge gets a separate fit of the model
(ratings, position and, with Davidson ties, tie propensity, from that judge's votes alone), with a sandwich
standard error; the estimates are combined as a normal random-effects model (DerSimonian and Laird 1986):
between-judge variance ``tau^2`` by the method of moments, the pooled mean weighted by
``1 / (se_i^2 + tau^2)`` with a Student-t interval on ``k - 1`` degrees of freedom (Hartung and Knapp 2001),
and each judge's estimate shrunk towards it by ``tau^2 / (tau^2 + se_i^2)`` (the empirical-Bayes
posterior mean, with its posterior standard deviation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from leaderboard.battles import Battles
from leaderboard.bt.fit import fit_bt
from leaderboard.bt.intervals import sandwich_intervals
from leaderboard.bt.spec import BTSpec

__all__ = ["JudgePositions", "between_variance", "judge_positions"]

_NAME = "position_advantage_elo"


@dataclass(frozen=True)
class JudgePositions:
    """Per judge: ``(label, votes, estimate, se, shrunk, shrunk_low, shrunk_high)``; the pooled mean with
    its interval, ``tau`` (between-judge sd, points) and the skipped judges with the reason."""

    judges: tuple[tuple[str, int, float, float, float, float, float], ...]
    pooled: tuple[float, float, float]
    tau: float
    level: float
    skipped: tuple[tuple[str, str], ...]

    def describe(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "pooled": dict(zip(("value", "ci_low", "ci_high"), self.pooled, strict=True)),
            "between_judge_sd": self.tau,
            "judges": [
                {
                    "judge": j[0],
                    "votes": j[1],
                    "estimate": j[2],
                    "se": j[3],
                    "shrunk": j[4],
                    "ci_low": j[5],
                    "ci_high": j[6],
                }
                for j in self.judges
            ],
            "skipped": [{"judge": s, "reason": r} for s, r in self.skipped],
        }


def between_variance(estimates: np.ndarray, variances: np.ndarray) -> tuple[float, float]:
    """DerSimonian and Laird's moment estimate of the between-group variance ``tau^2`` of ``estimates``,
    each with its own sampling variance (0 when the spread is no more than the sampling noise), and
    Cochran's ``Q`` p-value (chi-squared on ``k - 1`` degrees of freedom: how surprising the spread is
    if the groups share one value)."""
    k = len(estimates)
    if k < 2:
        return 0.0, 1.0
    w = 1.0 / np.asarray(variances, dtype=np.float64)
    y = np.asarray(estimates, dtype=np.float64)
    fixed = float(w @ y / w.sum())
    q = float(w @ (y - fixed) ** 2)
    tau2 = max(0.0, (q - (k - 1)) / float(w.sum() - (w**2).sum() / w.sum()))
    return tau2, float(sps.chi2.sf(q, k - 1))


def judge_positions(
    battles: Battles,
    labels: tuple[str, ...] | None = None,
    *,
    spec: BTSpec = BTSpec(position="common", ties="davidson"),  # noqa: B008 - frozen
    level: float = 0.95,
    min_votes: int = 50,
) -> JudgePositions:
    """Per-judge position terms (separate fits, shrunk) and their random-effects pooled mean.

    Parameters
    ----------
    battles : Battles with ``annotator`` ids (each judge's votes are fitted alone)
    labels : names of the annotator codes (``annotator-<k>`` when not given)
    spec : the model fitted per judge; it must have a common position term
    level : interval level
    min_votes : judges with fewer votes are skipped

    Raises
    ------
    ValueError
        No annotator ids, a spec without a common position, or fewer than two judges fitted.
    """
    if battles.annotator is None:
        raise ValueError("per-judge position terms need annotator ids")
    if spec.position != "common":
        raise ValueError("per-judge position terms need a spec with one common position term")
    z = float(sps.norm.ppf(0.5 + level / 2))
    names: list[str] = []
    votes: list[int] = []
    est: list[float] = []
    se: list[float] = []
    skipped: list[tuple[str, str]] = []
    for code in np.unique(battles.annotator[battles.annotator >= 0]):
        label = labels[code] if labels is not None and code < len(labels) else f"annotator-{code}"
        part = battles.take(battles.annotator == code)
        if len(part) < min_votes:
            skipped.append((label, f"{len(part)} votes, fewer than {min_votes}"))
            continue
        try:
            fit = fit_bt(part.counts(), spec=spec)
            value, low, high = sandwich_intervals(fit=fit, level=level).extra[_NAME]
        except (ValueError, RuntimeError) as exc:
            skipped.append((label, str(exc)))
            continue
        names.append(label)
        votes.append(len(part))
        est.append(value)
        se.append((high - low) / (2 * z))
    k = len(est)
    if k < 2:
        raise ValueError("need at least two judges with a fitted position term")
    y = np.asarray(est)
    v = np.asarray(se) ** 2
    tau2, _ = between_variance(y, v)
    w_re = 1.0 / (v + tau2)
    mu = float(w_re @ y / w_re.sum())
    # Hartung-Knapp: the spread of the estimates around mu scales the variance, t on k - 1 df
    hk = float(w_re @ (y - mu) ** 2) / ((k - 1) * float(w_re.sum()))
    half = float(sps.t.ppf(0.5 + level / 2, k - 1)) * math.sqrt(max(hk, 1.0 / float(w_re.sum()) / k))
    shrink = tau2 / (tau2 + v)
    shrunk = mu + shrink * (y - mu)
    post_sd = np.sqrt(shrink * v + (1 - shrink) ** 2 / float(w_re.sum()))
    judges = tuple(
        (names[i], votes[i], float(y[i]), float(se[i]), float(shrunk[i]),
         float(shrunk[i] - z * post_sd[i]), float(shrunk[i] + z * post_sd[i]))
        for i in range(k)
    )  # fmt: skip
    return JudgePositions(
        judges=judges,
        pooled=(mu, mu - half, mu + half),
        tau=math.sqrt(tau2),
        level=level,
        skipped=tuple(skipped),
    )
