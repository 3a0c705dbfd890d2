"""The probit link of the Bradley-Terry engine: Thurstone-Mosteller and its Glenn-David tie extension.

Thurstone's case V (Mosteller, 1951) draws each model's performance from a normal distribution around its
strength; the left model wins when its draw is higher, so ``P(left wins) = Phi(z)`` with ``z`` the
strength difference in units of the standard deviation of the difference. Glenn and David (1960) add
ties: the vote is a tie when the difference of the draws lies within a threshold ``tau > 0``, so

    P(left wins) = Phi(z - tau),   P(right wins) = Phi(-z - tau),   P(tie) = Phi(z + tau) - Phi(z - tau).

Without ``tau`` a tie scores half a win and half a loss, as in plain Bradley-Terry.

Rating scale. The engine's linear predictor ``u`` is in natural-log units for both links, so ratings,
priors and position terms are read the same way. The probit link sets ``z = u / PROBIT_NATS`` with
``PROBIT_NATS = ln(10) / sqrt(2)``: on the Elo scale (``rating = 400 log10(strength) + 1000``) one probit
unit is ``200 sqrt(2) = 282.8`` rating points, Elo's own normal model in which each performance has a
standard deviation of 200 points (one class interval). At an even match the two curves then rise almost
alike (0.00141 against the logistic's 0.00144 per rating point); the normal curve has thinner tails, so in
a wide mismatch it gives the favourite more than the logistic does.

The functions return per-row log-likelihoods and their first and second derivatives with respect to
``u`` and ``t = log tau``; :class:`leaderboard.bt.cells.Objective` sums them over the cells.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy.special import log_ndtr, ndtr, ndtri

__all__ = ["PROBIT_NATS", "RowTerms", "probit_proba", "probit_row_terms", "tau_for_tie_rate"]

FloatArray = npt.NDArray[np.float64]
RowTerms = tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]

#: Natural-log units per probit unit: 200 sqrt(2) Elo points at scale 400, base 10.
PROBIT_NATS = math.log(10.0) / math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _log_pdf(w: FloatArray) -> FloatArray:
    out: FloatArray = -0.5 * w * w - _LOG_SQRT_2PI
    return out


def _mills(w: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``log Phi(w)``, ``lambda = phi(w) / Phi(w)`` and ``d lambda / dw = -lambda (w + lambda)``."""
    log_cdf = log_ndtr(w)
    lam = np.exp(_log_pdf(w) - log_cdf)
    return log_cdf, lam, -lam * (w + lam)


def _tie_terms(z: FloatArray, tau: FloatArray) -> tuple[FloatArray, ...]:
    """``log(Phi(z + tau) - Phi(z - tau))`` and its derivatives in ``z`` and ``tau``.

    The probability is even in ``z``; it is computed at ``-|z|``, where both arguments sit in the lower
    tail and ``log_ndtr`` keeps its precision, and the odd derivatives take the sign back.
    """
    sign = np.where(z >= 0, 1.0, -1.0)
    zn = -np.abs(z)
    hi, lo = zn + tau, zn - tau
    log_hi = log_ndtr(hi)
    log_p = log_hi + np.log1p(-np.exp(log_ndtr(lo) - log_hi))
    r_hi = np.exp(_log_pdf(hi) - log_p)  # phi(hi) / P
    r_lo = np.exp(_log_pdf(lo) - log_p)
    l_z = r_hi - r_lo
    l_tau = r_hi + r_lo
    same = -hi * r_hi + lo * r_lo
    cross = -hi * r_hi - lo * r_lo
    return log_p, -sign * l_z, l_tau, same - l_z**2, -sign * (cross - l_z * l_tau), same - l_tau**2


def probit_row_terms(u: FloatArray, sign: FloatArray, is_tie: FloatArray, t: float | None) -> RowTerms:
    """Per-row log-likelihood of the probit link and its derivatives.

    Parameters
    ----------
    u : array
        Linear predictor of each row (natural-log units; ``z = u / PROBIT_NATS``).
    sign : array
        +1 for a left win, -1 for a right win, 0 for a tie.
    is_tie : array
        1 for a tie, else 0.
    t : float or None
        ``log tau`` of the Glenn-David threshold; None for Thurstone-Mosteller with half-win ties.

    Returns
    -------
    (ll, l_u, l_t, l_uu, l_ut, l_tt) : arrays
        The log-likelihood of each row and its derivatives in ``u`` and ``t`` (zeros in ``t`` without a
        threshold).
    """
    c = PROBIT_NATS
    z = u / c
    zeros = np.zeros_like(z)
    if t is None:
        log_p, lam_p, dlam_p = _mills(z)
        log_m, lam_m, dlam_m = _mills(-z)
        win, loss = sign > 0, sign < 0
        half = 0.5 * is_tie
        ll = np.where(win, log_p, 0.0) + np.where(loss, log_m, 0.0) + half * (log_p + log_m)
        l_z = np.where(win, lam_p, 0.0) - np.where(loss, lam_m, 0.0) + half * (lam_p - lam_m)
        l_zz = np.where(win, dlam_p, 0.0) + np.where(loss, dlam_m, 0.0) + half * (dlam_p + dlam_m)
        return ll, l_z / c, zeros, l_zz / c**2, zeros, zeros
    tau = math.exp(t)
    taus = np.full_like(z, tau)
    log_l, lam_l, dlam_l = _mills(z - tau)
    log_r, lam_r, dlam_r = _mills(-z - tau)
    log_t, tz, tt, tzz, tzt, ttt = _tie_terms(z, taus)
    win, loss, tie = sign > 0, sign < 0, is_tie > 0
    ll = np.select([win, loss, tie], [log_l, log_r, log_t], 0.0)
    l_z = np.select([win, loss, tie], [lam_l, -lam_r, tz], 0.0)
    l_tau = np.select([win, loss, tie], [-lam_l, -lam_r, tt], 0.0)
    l_zz = np.select([win, loss, tie], [dlam_l, dlam_r, tzz], 0.0)
    l_ztau = np.select([win, loss, tie], [-dlam_l, dlam_r, tzt], 0.0)
    l_tautau = np.select([win, loss, tie], [dlam_l, dlam_r, ttt], 0.0)
    return (
        ll,
        l_z / c,
        tau * l_tau,
        l_zz / c**2,
        tau * l_ztau / c,
        tau**2 * l_tautau + tau * l_tau,
    )


def probit_proba(u: FloatArray, log_tau: float) -> FloatArray:
    """Glenn-David forecasts ``[P(left wins), P(tie), P(right wins)]`` for linear predictors ``u``.

    Parameters
    ----------
    u : array, shape (n,)
        Linear predictor in natural-log units (``z = u / PROBIT_NATS``).
    log_tau : float
        Logarithm of the tie threshold ``tau`` (probit units).

    Returns
    -------
    array, shape (n, 3)
    """
    z = np.asarray(u, dtype=np.float64) / PROBIT_NATS
    tau = math.exp(log_tau)
    left = ndtr(z - tau)
    right = ndtr(-z - tau)
    tie = np.exp(_tie_terms(z, np.full_like(z, tau))[0])
    return np.column_stack([left, tie, right])


def tau_for_tie_rate(tie_rate: float) -> float:
    """The threshold ``tau`` at which two equal models tie with probability ``tie_rate``:
    ``Phi(tau) - Phi(-tau) = tie_rate`` (a start for the fit)."""
    rate = min(max(tie_rate, 1e-3), 0.999)
    return float(ndtri(0.5 + 0.5 * rate))
