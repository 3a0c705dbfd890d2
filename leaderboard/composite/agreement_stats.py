"""Chance-corrected agreement coefficients with 95% bootstrap intervals, for
:mod:`leaderboard.composite.agreement`.

Every vote is a label on an *item* (one prompt and turn with one unordered model pair), in three classes
ordered ``-1 < 0 < +1``: the second model of the pair in name order wins, tie (both bad included), the
first model wins. Every multi-rater figure here is a function of the item-by-class count table, so a
bootstrap over items is a multinomial draw over the table's distinct rows (exact, and fast at any size).

Libraries compute the point estimates where they have the statistic: Krippendorff's alpha by the
``krippendorff`` package (``value_counts``, nominal and interval), Cohen's kappa by ``statsmodels``
(``cohens_kappa``), Fleiss' kappa by ``statsmodels`` (``fleiss_kappa``) when every item has the same number
of votes, else by Fleiss' formula with each item's pair share (the usual generalisation). Gwet's AC1 is
computed here (Gwet 2008, eq. for several raters): ``irrCAC`` pins old pandas and scipy releases and cannot
live beside ours. The bootstrap recomputes the same statistics from sums of item features, vectorised
(tests check they equal the libraries' values).

Agreement rates are pair shares within an item, each item weighing one: *exact* (three classes), *without
ties* (only pairs of two decisive votes), *ties as half* (a tie against a decisive vote scores 0.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import krippendorff
import numpy as np
import numpy.typing as npt
from scipy.special import ndtr, ndtri

__all__ = [
    "BOOTSTRAP_SAMPLES",
    "MULTI_RATER",
    "Interval",
    "cohen_kappa",
    "cohen_kappa_interval",
    "item_counts",
    "multi_rater",
    "rate_interval",
    "rate_intervals",
]

#: Bootstrap resamples behind every interval.
BOOTSTRAP_SAMPLES = 1000
#: The multi-rater figures :func:`multi_rater` returns, in order.
MULTI_RATER = (
    "agreement_exact",
    "agreement_without_ties",
    "agreement_ties_half",
    "fleiss_kappa",
    "krippendorff_alpha_nominal",
    "krippendorff_alpha_interval",
    "gwet_ac1",
)
_VALUES = np.array([-1.0, 0.0, 1.0])
_NAN = float("nan")


@dataclass(frozen=True)
class Interval:
    """A figure, its 95% bootstrap interval (BCa for the coefficients, percentile for shares) and the
    number of items behind it."""

    value: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict[str, float | int | None]:
        def plain(v: float) -> float | None:
            return None if np.isnan(v) else round(float(v), 6)

        return {"value": plain(self.value), "low": plain(self.low), "high": plain(self.high), "n": self.n}


def item_counts(item: npt.ArrayLike, label: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The item-by-class count table (``-1, 0, +1`` columns) of votes ``label`` on items ``item``
    (any hashable ids; rows in the order of the sorted unique ids)."""
    _, index = np.unique(np.asarray(item), return_inverse=True)
    lab = np.asarray(label, dtype=np.int64)
    if lab.size and (lab.min() < -1 or lab.max() > 1):
        raise ValueError("labels must be -1, 0 or +1")
    n_items = int(index.max()) + 1 if index.size else 0
    flat = np.bincount(index.ravel() * 3 + lab + 1, minlength=n_items * 3)
    return flat.reshape(n_items, 3).astype(np.int64)


def _features(counts: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Per-item features whose sums give every multi-rater figure (items with fewer than 2 votes: zero).

    Columns: pairable item, exact pair share, ties-as-half share, item with a decisive pair, decisive pair
    share, then votes per class (K), class shares (K), and coincidences ``c_j c_k / (m - 1)`` of every two
    classes ``j < k``. The tie columns assume the three classes ``-1, 0, +1`` (zero otherwise).
    """
    c = counts.astype(np.float64)
    k = c.shape[1]
    m = c.sum(axis=1)
    ok = m >= 2
    pairs = np.where(ok, m * (m - 1), 1.0)
    agree = (c * (c - 1)).sum(axis=1)
    if k == 3:
        half = 2 * c[:, 1] * (c[:, 0] + c[:, 2])
        d = c[:, 0] + c[:, 2]
        has_dec = ok & (d >= 2)
        dec_agree = c[:, 0] * (c[:, 0] - 1) + c[:, 2] * (c[:, 2] - 1)
        dec_share = np.where(has_dec, dec_agree / np.where(has_dec, d * (d - 1), 1.0), 0.0)
    else:
        half, has_dec, dec_share = np.zeros_like(m), np.zeros_like(ok), np.zeros_like(m)
    scale = np.where(ok, 1.0 / np.where(ok, m - 1, 1.0), 0.0)
    j_idx, k_idx = np.triu_indices(k, 1)
    cols = np.concatenate(
        [
            np.stack(
                [
                    ok.astype(np.float64),
                    np.where(ok, agree / pairs, 0.0),
                    np.where(ok, (agree + 0.5 * half) / pairs, 0.0),
                    has_dec.astype(np.float64),
                    dec_share,
                ],
                axis=1,
            ),
            c * ok[:, None],
            c / np.where(ok, m, 1.0)[:, None] * ok[:, None],
            c[:, j_idx] * c[:, k_idx] * scale[:, None],
        ],
        axis=1,
    )
    return cols


def _from_sums(s: npt.NDArray[np.float64], values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The :data:`MULTI_RATER` figures from feature sums (rows: bootstrap replicates)."""
    k = len(values)
    j_idx, k_idx = np.triu_indices(k, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_items, n_dec = s[:, 0], s[:, 3]
        p_o = s[:, 1] / n_items
        n_c = s[:, 5 : 5 + k]
        total = n_c.sum(axis=1)
        p_e = ((n_c / total[:, None]) ** 2).sum(axis=1)
        fleiss = (p_o - p_e) / (1 - p_e)
        observed = s[:, 5 + 2 * k :]
        expected = n_c[:, j_idx] * n_c[:, k_idx]
        squared = (values[j_idx] - values[k_idx]) ** 2
        nominal = 1 - (total - 1) * observed.sum(axis=1) / expected.sum(axis=1)
        interval = 1 - (total - 1) * (observed @ squared) / (expected @ squared)
        pi = s[:, 5 + k : 5 + 2 * k] / n_items[:, None]
        p_e_gwet = (pi * (1 - pi)).sum(axis=1) / (k - 1)
        ac1 = (p_o - p_e_gwet) / (1 - p_e_gwet)
        no_ties = s[:, 4] / n_dec if k == 3 else np.full_like(p_o, np.nan)
        half = s[:, 2] / n_items if k == 3 else np.full_like(p_o, np.nan)
        out = np.stack([p_o, no_ties, half, fleiss, nominal, interval, ac1], axis=1)
    return out


def _percentiles(
    replicates: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """2.5th and 97.5th percentiles of each column, ignoring replicates where the figure is undefined."""
    finite = np.where(np.isfinite(replicates), replicates, np.nan)
    clean = ~np.isnan(finite).any(axis=0)
    low = np.full(replicates.shape[1], np.nan)
    high = np.full(replicates.shape[1], np.nan)
    if clean.any():
        low[clean], high[clean] = np.percentile(finite[:, clean], [2.5, 97.5], axis=0)
    for k in np.flatnonzero(~clean):
        column = finite[:, k][~np.isnan(finite[:, k])]
        if column.size:
            low[k], high[k] = np.percentile(column, [2.5, 97.5])
    return low, high


def _bca(
    point: npt.NDArray[np.float64],
    replicates: npt.NDArray[np.float64],
    jackknife: npt.NDArray[np.float64],
    freq: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Bias-corrected and accelerated 95% limits (Efron 1987) of each column of ``replicates``.

    ``jackknife`` holds the figures with one item of each distinct row left out, ``freq`` how many items
    share that row: the acceleration comes from them. Plain percentiles where a figure is undefined.
    """
    low, high = _percentiles(replicates)
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in range(replicates.shape[1]):
            column = replicates[:, k][np.isfinite(replicates[:, k])]
            jack = jackknife[:, k]
            if column.size < 10 or not np.isfinite(point[k]) or not np.all(np.isfinite(jack)):
                continue
            share = (np.sum(column < point[k]) + 0.5 * np.sum(column == point[k])) / column.size
            if not 0 < share < 1:
                continue
            z0 = ndtri(share)
            dev = float(np.sum(freq * jack) / np.sum(freq)) - jack
            spread = float(np.sum(freq * dev**2))
            accel = float(np.sum(freq * dev**3)) / (6 * spread**1.5) if spread > 0 else 0.0
            z = ndtri(np.array([0.025, 0.975]))
            adjusted = ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z)))
            if np.all(np.isfinite(adjusted)):
                low[k], high[k] = np.percentile(column, 100 * adjusted)
    return low, high


def _multinomial(
    rng: np.random.Generator, n: npt.NDArray[np.int64], pvals: npt.NDArray[np.float64], samples: int
) -> npt.NDArray[np.float64]:
    """``samples`` multinomial draws for each row (``n[g]`` trials over ``pvals[g]``): shape (samples,
    groups, categories), by conditional binomials, one vectorised call per category."""
    groups, width = pvals.shape
    out = np.zeros((samples, groups, width))
    left = np.broadcast_to(n.astype(np.int64), (samples, groups)).copy()
    rest = np.ones(groups)
    for k in range(width - 1):
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.clip(np.where(rest > 0, pvals[:, k] / rest, 0.0), 0.0, 1.0)
        taken = rng.binomial(left, np.broadcast_to(p, (samples, groups)))
        out[:, :, k] = taken
        left -= taken
        rest = rest - pvals[:, k]
    out[:, :, width - 1] = left
    return out


def _resample(freq: npt.NDArray[np.int64], samples: int, seed: int) -> npt.NDArray[np.float64]:
    """Multinomial counts of each distinct row in ``samples`` resamples of all rows with replacement."""
    total = int(freq.sum())
    rng = np.random.default_rng(seed)
    return rng.multinomial(total, freq / total, size=samples).astype(np.float64)


def multi_rater(
    counts: npt.ArrayLike,
    *,
    values: npt.ArrayLike | None = None,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
) -> dict[str, Interval]:
    """The :data:`MULTI_RATER` figures of an item-by-class table, each with its bootstrap interval.

    ``values`` are the classes' places on the interval scale (default ``-1, 0, +1``, the table's columns
    left to right); the tie figures need exactly those three classes (NaN otherwise).
    """
    counts = np.asarray(counts, dtype=np.int64)
    scale = _VALUES if values is None else np.asarray(values, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[1] != len(scale) or len(scale) < 2:
        raise ValueError("counts need one column per class value")
    pairable = counts[counts.sum(axis=1) >= 2]
    n = len(pairable)
    if n == 0:
        return {name: Interval(_NAN, _NAN, _NAN, 0) for name in MULTI_RATER}
    rows, freq = np.unique(pairable, axis=0, return_counts=True)
    feats = _features(rows)
    point = _from_sums((freq.astype(np.float64) @ feats)[None, :], scale)[0]
    point[3] = _fleiss_point(pairable, point[3])
    point[4] = _kripp_point(rows, freq, scale, "nominal", point[4])
    point[5] = _kripp_point(rows, freq, scale, "interval", point[5])
    sums = freq.astype(np.float64) @ feats
    jackknife = _from_sums(sums[None, :] - feats, scale)  # one item of each distinct row left out
    low, high = _bca(point, _from_sums(_resample(freq, samples, seed) @ feats, scale), jackknife, freq)
    n_dec = int(freq @ (feats[:, 3]))
    return {
        name: Interval(float(point[k]), float(low[k]), float(high[k]), n_dec if k == 1 else n)
        for k, name in enumerate(MULTI_RATER)
    }


def _fleiss_point(pairable: npt.NDArray[np.int64], ours: float) -> float:
    sizes = pairable.sum(axis=1)
    if np.isnan(ours) or sizes.min() != sizes.max():
        return ours  # unequal numbers of votes per item: statsmodels assumes equal ones
    from statsmodels.stats.inter_rater import fleiss_kappa  # statsmodels (0.7 s): only for this point

    return float(fleiss_kappa(pairable, method="fleiss"))


def _kripp_point(
    rows: npt.NDArray[np.int64],
    freq: npt.NDArray[np.int64],
    scale: npt.NDArray[np.float64],
    level: Literal["nominal", "interval"],
    ours: float,
) -> float:
    if np.isnan(ours):
        return ours
    table = np.repeat(rows, freq, axis=0)
    return float(krippendorff.alpha(value_counts=table, value_domain=scale, level_of_measurement=level))


def _kappa_of_tables(tables: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Cohen's kappa of each ``k x k`` agreement table (last two axes: first rater, second rater)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        total = tables.sum(axis=(-2, -1))
        p = tables / total[..., None, None]
        p_o = np.trace(p, axis1=-2, axis2=-1)
        p_e = (p.sum(axis=-1) * p.sum(axis=-2)).sum(axis=-1)
        kappa: npt.NDArray[np.float64] = np.where(p_e < 1, (p_o - p_e) / (1 - p_e), np.nan)
    return kappa


def cohen_kappa(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Cohen's kappa of two raters' labels on the same items: ``(p_o - p_e) / (1 - p_e)`` (Cohen, 1960),
    by ``statsmodels``. NaN for no items and when ``p_e == 1`` (both always gave one same label)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        raise ValueError("both raters need a label for every item")
    if x.size == 0:
        return _NAN
    labels, index = np.unique(np.concatenate([x, y]), return_inverse=True)
    k = len(labels)
    table = np.bincount(index[: x.size] * k + index[x.size :], minlength=k * k).reshape(k, k)
    if np.isnan(_kappa_of_tables(table.astype(np.float64))):
        return _NAN
    from statsmodels.stats.inter_rater import cohens_kappa  # statsmodels (0.7 s): only for this point

    return float(cohens_kappa(table, return_results=False))


def cohen_kappa_interval(
    x: npt.ArrayLike, y: npt.ArrayLike, *, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> Interval:
    """:func:`cohen_kappa` with a bootstrap interval over the items (labels ``-1, 0, +1``)."""
    x, y = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
    value = cohen_kappa(x, y)
    if x.size == 0:
        return Interval(_NAN, _NAN, _NAN, 0)
    cells = np.bincount((x + 1) * 3 + (y + 1), minlength=9)
    used = np.flatnonzero(cells)
    draws = np.zeros((samples, 9))
    draws[:, used] = _resample(cells[used], samples, seed)
    table = cells.astype(np.float64)
    jackknife = np.stack([_kappa_of_tables((table - np.eye(9)[j]).reshape(3, 3)) for j in used])[:, None]
    replicates = _kappa_of_tables(draws.reshape(samples, 3, 3))[:, None]
    low, high = _bca(np.array([value]), replicates, jackknife, cells[used])
    return Interval(value, float(low[0]), float(high[0]), int(x.size))


def rate_interval(
    item: npt.ArrayLike, hits: npt.ArrayLike, *, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> Interval:
    """A share (mean of ``hits``, each in [0, 1]) with a bootstrap interval over ``item`` (votes on one
    item are resampled together)."""
    hit = np.asarray(hits, dtype=np.float64)
    return rate_intervals(np.zeros(hit.size, dtype=np.int64), item, hit, 1, samples=samples, seed=seed)[0]


def rate_intervals(
    group: npt.ArrayLike,
    item: npt.ArrayLike,
    hits: npt.ArrayLike,
    n_groups: int,
    *,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
) -> list[Interval]:
    """:func:`rate_interval` of each group ``0 .. n_groups - 1`` at once (a bootstrap over each group's
    own items, all groups drawn in one vectorised multinomial)."""
    grp = np.asarray(group, dtype=np.int64)
    hit = np.asarray(hits, dtype=np.float64)
    nan = Interval(_NAN, _NAN, _NAN, 0)
    if hit.size == 0:
        return [nan] * n_groups
    item_index = np.unique(np.asarray(item), return_inverse=True)[1].ravel().astype(np.int64)
    _, cell = np.unique(grp * (int(item_index.max()) + 1) + item_index, return_inverse=True)
    cell = cell.ravel()
    sums = np.bincount(cell, weights=hit)
    sizes = np.bincount(cell).astype(np.float64)
    cell_group = np.zeros(len(sums), dtype=np.int64)
    cell_group[cell] = grp
    # distinct (group, sum, size) patterns and how many items of the group have each
    patterns, freq = np.unique(np.stack([cell_group, sums, sizes], axis=1), axis=0, return_counts=True)
    p_group = patterns[:, 0].astype(np.int64)
    slot = np.arange(len(patterns)) - np.searchsorted(p_group, p_group)
    width = int(slot.max()) + 1
    f = np.zeros((n_groups, width))
    f[p_group, slot] = freq
    s_tab, n_tab = np.zeros((n_groups, width)), np.zeros((n_groups, width))
    s_tab[p_group, slot], n_tab[p_group, slot] = patterns[:, 1], patterns[:, 2]
    n_items = f.sum(axis=1)
    has = n_items > 0
    pvals = np.where(has[:, None], f / np.where(has, n_items, 1.0)[:, None], 1.0 / width)
    rng = np.random.default_rng(seed)
    draws = _multinomial(rng, n_items.astype(np.int64), pvals, samples)
    with np.errstate(divide="ignore", invalid="ignore"):
        replicates = (draws * s_tab).sum(axis=2) / (draws * n_tab).sum(axis=2)
        point = (f * s_tab).sum(axis=1) / (f * n_tab).sum(axis=1)
    low, high = _percentiles(replicates)
    return [
        Interval(float(point[g]), float(low[g]), float(high[g]), int(n_items[g])) if has[g] else nan
        for g in range(n_groups)
    ]
