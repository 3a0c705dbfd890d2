"""Style features of answers, for Bradley-Terry with style control.

Voters (human or LLM) reward long answers and Markdown decoration regardless of substance. Style control
adds, for every battle, the normalised difference of a few style counts between the left and the right
answer as covariates of the fit; the model ratings are then the strengths *at equal style*, and the
covariates' coefficients say how much style alone moves a vote.

Pure functions on strings and arrays; the fit is :func:`leaderboard.bt.fit_bt` with covariates in its spec.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "STYLE_FEATURES",
    "StyleDifferences",
    "count_style",
    "normalise_differences",
    "style_differences",
]

#: Feature names, in column order.
STYLE_FEATURES: tuple[str, ...] = ("length", "headers", "lists", "bold")

_HEADER = re.compile(r"^\s{0,3}#{1,6}\s+\S", re.MULTILINE)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S", re.MULTILINE)
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.DOTALL)
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def count_style(text: str) -> npt.NDArray[np.float64]:
    """Style counts of one answer: characters, Markdown headers, list items, bold spans.

    Code blocks are dropped before counting Markdown marks (a ``# comment`` in Python is no header), but
    count towards the length.
    """
    prose = _FENCE.sub("", text)
    return np.array(
        [
            float(len(text)),
            float(len(_HEADER.findall(prose))),
            float(len(_LIST_ITEM.findall(prose))),
            float(len(_BOLD.findall(prose))),
        ]
    )


@dataclass(frozen=True)
class StyleDifferences:
    """Per-battle style covariates, left minus right, normalised.

    Attributes
    ----------
    names : feature names (columns)
    values : float array, shape (n_battles, n_features)
        ``(a - b) / (a + b)`` per feature (0 when both counts are 0), divided by ``scale``.
    scale : float array, shape (n_features,)
        The divisor used for each column; pass it back to normalise held-out battles alike.
    """

    names: tuple[str, ...]
    values: npt.NDArray[np.float64]
    scale: npt.NDArray[np.float64]


def normalise_differences(
    counts_a: npt.NDArray[np.float64],
    counts_b: npt.NDArray[np.float64],
    *,
    scale: npt.NDArray[np.float64] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Relative differences ``(a - b) / (a + b)`` divided by their standard deviation over battles.

    The differences are not centred: zero keeps meaning "both answers have the same style", so the
    ratings of the fit are the strengths at equal style. The relative form makes a 2,000 vs 1,000
    character battle count like a 200 vs 100 one.

    Parameters
    ----------
    counts_a, counts_b : arrays, shape (n_battles, n_features)
        Style counts of the left and right answers (see :func:`count_style`).
    scale : array, shape (n_features,), optional
        Column divisors from a training set; by default the columns' standard deviation (1 if zero).

    Returns
    -------
    values, scale : arrays
    """
    a = np.asarray(counts_a, dtype=np.float64)
    b = np.asarray(counts_b, dtype=np.float64)
    total = a + b
    diff = np.divide(a - b, total, out=np.zeros_like(total), where=total > 0)
    if scale is None:
        sd = diff.std(axis=0) if diff.shape[0] else np.ones(diff.shape[1])
        scale = np.where(sd > 0, sd, 1.0)
    return diff / scale, np.asarray(scale, dtype=np.float64)


def style_differences(
    texts_a: Sequence[str],
    texts_b: Sequence[str],
    *,
    scale: npt.NDArray[np.float64] | None = None,
) -> StyleDifferences:
    """Style covariates for battles given by their two answer texts (left, right).

    Parameters
    ----------
    texts_a, texts_b : sequences of str
        The left and right answers of each battle.
    scale : array, optional
        Column divisors to reuse (from a training set); computed from these battles by default.

    Returns
    -------
    StyleDifferences
    """
    if len(texts_a) != len(texts_b):
        raise ValueError("texts_a and texts_b must have the same length")
    n_features = len(STYLE_FEATURES)
    counts_a = np.array([count_style(t) for t in texts_a]).reshape(-1, n_features)
    counts_b = np.array([count_style(t) for t in texts_b]).reshape(-1, n_features)
    values, used = normalise_differences(counts_a, counts_b, scale=scale)
    return StyleDifferences(names=STYLE_FEATURES, values=values, scale=used)
