"""Style features of answers, for Bradley-Terry with style control.

Voters (human or LLM) reward long answers, Markdown decoration and cited sources regardless of substance.
Style control adds, for every battle, the normalised difference of a few style counts between the left and
the right answer as covariates of the fit; the model ratings are then the strengths *at equal style*, and
the covariates' coefficients say how much style alone moves a vote.

As the public arenas define them: length is the answer's length in tokens (the generating server's own
completion-token count where it was stored, else :func:`estimate_tokens`), and citations count the links and
numbered references an answer gives (the search arena's covariate).

Pure functions on strings and arrays; the fit is :func:`leaderboard.bt.fit.fit_bt` with covariates in its
spec.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "STYLE_FEATURES",
    "TOKEN_ESTIMATOR",
    "StyleDifferences",
    "count_citations",
    "count_style",
    "estimate_tokens",
    "normalise_differences",
    "style_differences",
]

#: Feature names, in column order.
STYLE_FEATURES: tuple[str, ...] = ("length", "headers", "lists", "bold", "citations")

#: How :func:`estimate_tokens` counts, as recorded in a snapshot's metadata.
TOKEN_ESTIMATOR = "regex-pieces-v1"  # nosec B105  # the name of a counting method, no secret

# Pieces a byte-pair tokenizer of a current chat model (about 100k merges) keeps whole or nearly so: an
# ideographic or kana character, a run of letters (split below when long), up to three digits, one
# punctuation or symbol character, a line break.
_PIECE = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
    r"|[^\W\d_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+"
    r"|\d{1,3}|[^\w\s]|_|\n"
)
#: A letter run longer than this many characters counts one token per this many (rare words split).
_LETTERS_PER_TOKEN = 6

_LINK = re.compile(r"\[[^\]\n]{1,500}\]\(\s*<?(?:https?://|www\.)[^)\s]{1,2000}\)", re.IGNORECASE)
_BARE_URL = re.compile(r"(?<![(<\w/])(?:https?://|www\.)[^\s<>()\[\]]{2,2000}", re.IGNORECASE)
# [1], [12], [1, 3] used as references (not a Markdown link's text, not a checkbox, not an index a[1])
_REFERENCE = re.compile(r"(?<![\w\]])\[(\d{1,3}(?:\s*[,\u2013-]\s*\d{1,3})*)\](?![(:])")

_HEADER = re.compile(r"^\s{0,3}#{1,6}\s+\S", re.MULTILINE)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S", re.MULTILINE)
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.DOTALL)
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def estimate_tokens(text: str) -> int:
    """A deterministic estimate of ``text``'s length in tokens, for answers whose true count is unknown.

    No tokenizer is bundled (their vocabularies are downloads), so the text is cut into the pieces a
    byte-pair tokenizer of a current chat model keeps whole: each ideographic, kana or hangul character,
    each run of letters (``ceil(n / 6)`` tokens for a run of ``n`` letters: common words are one token,
    rare long ones split), each group of up to three digits, each punctuation or symbol character, each
    line break. Spaces join the piece that follows. On English prose this lands near the usual four
    characters per token; its version is :data:`TOKEN_ESTIMATOR`.
    """
    total = 0
    for piece in _PIECE.findall(text):
        total += -(-len(piece) // _LETTERS_PER_TOKEN) if piece[0].isalpha() else 1
    return total


def count_citations(text: str) -> int:
    """Links and references an answer gives: Markdown links, bare URLs, and bracketed numbers such as
    ``[1]`` or ``[2, 3]`` (each number one reference). Code blocks are left out."""
    prose = _FENCE.sub("", text)
    links = len(_LINK.findall(prose))
    bare = len(_BARE_URL.findall(_LINK.sub("", prose)))
    numbers = sum(len(re.findall(r"\d{1,3}", group)) for group in _REFERENCE.findall(prose))
    return links + bare + numbers


def count_style(text: str, *, tokens: int | None = None) -> npt.NDArray[np.float64]:
    """Style counts of one answer: length in tokens, Markdown headers, list items, bold spans, citations.

    ``tokens`` is the answer's known completion-token count; without it the length is
    :func:`estimate_tokens`. Code blocks are dropped before counting Markdown marks (a ``# comment`` in
    Python is no header), but count towards the length.
    """
    prose = _FENCE.sub("", text)
    return np.array(
        [
            float(estimate_tokens(text) if tokens is None else tokens),
            float(len(_HEADER.findall(prose))),
            float(len(_LIST_ITEM.findall(prose))),
            float(len(_BOLD.findall(prose))),
            float(count_citations(text)),
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
    tokens_a: Sequence[int | None] | None = None,
    tokens_b: Sequence[int | None] | None = None,
    scale: npt.NDArray[np.float64] | None = None,
) -> StyleDifferences:
    """Style covariates for battles given by their two answer texts (left, right).

    Parameters
    ----------
    texts_a, texts_b : sequences of str
        The left and right answers of each battle.
    tokens_a, tokens_b : sequences of int or None, optional
        Known completion-token counts of the answers (None where unknown: estimated from the text).
    scale : array, optional
        Column divisors to reuse (from a training set); computed from these battles by default.

    Returns
    -------
    StyleDifferences
    """
    if len(texts_a) != len(texts_b):
        raise ValueError("texts_a and texts_b must have the same length")
    n_features = len(STYLE_FEATURES)
    known_a = [None] * len(texts_a) if tokens_a is None else list(tokens_a)
    known_b = [None] * len(texts_b) if tokens_b is None else list(tokens_b)
    if len(known_a) != len(texts_a) or len(known_b) != len(texts_b):
        raise ValueError("token counts must be given one per answer")
    counts_a = np.array([count_style(t, tokens=k) for t, k in zip(texts_a, known_a, strict=True)])
    counts_b = np.array([count_style(t, tokens=k) for t, k in zip(texts_b, known_b, strict=True)])
    counts_a, counts_b = counts_a.reshape(-1, n_features), counts_b.reshape(-1, n_features)
    values, used = normalise_differences(counts_a, counts_b, scale=scale)
    return StyleDifferences(names=STYLE_FEATURES, values=values, scale=used)
