"""Battles as arrays: the one per-vote form that files, the database, simulations and benchmarks share.

One entry per vote, in arrival (commit) order: integer-coded models and outcomes, and whatever else a
source knows (vote time, vote id, annotator and prompt ids, a weight, style covariates).
:meth:`Battles.counts` aggregates them into the :class:`~leaderboard.data.PairCounts` every fit uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from leaderboard.data import OUTCOME_STRINGS, Outcome, PairCounts, aggregate_codes

__all__ = ["Battles", "sparse_models", "split_components"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_T = TypeVar("_T", bound=np.generic)

_LABELS = np.array([OUTCOME_STRINGS[Outcome(i)] for i in range(4)], dtype=object)


@dataclass(frozen=True)
class Battles:
    """One row per vote, in arrival order; ``model_a``/``model_b`` index into ``models``.

    Attributes
    ----------
    models : tuple of str
    model_a, model_b : int64 arrays, left and right model of each vote
    outcome : int8 array of :class:`~leaderboard.data.Outcome` codes
    time : float array, optional
        Vote time (seconds since the epoch, or any increasing number).
    vote_id, annotator, prompt : int64 arrays, optional
        Ids of the vote, of who voted and of the prompt, where the source has them.
    weight : float array, optional
        Per-vote weight (``None``: every vote counts 1).
    features : float array (n_votes, n_features), optional
        Style covariates, left minus right (see :mod:`leaderboard.style.features`).
    feature_names : names of the covariate columns
    feature_notes : how the covariates were measured (per feature name: unit, sources), for the metadata
    annotator_names : names of the annotator codes (``annotator_names[k]`` voted the votes with
        ``annotator == k``), where the source names them; empty otherwise
    sided : bool array, optional
        Whether each vote knows which answer was on the left (``None``: every vote does). A vote with
        an unknown side (a source that shuffled the display order without recording it) never informs
        the left-side advantage.
    """

    models: tuple[str, ...]
    model_a: IntArray
    model_b: IntArray
    outcome: npt.NDArray[np.int8]
    time: FloatArray | None = None
    vote_id: IntArray | None = None
    annotator: IntArray | None = None
    prompt: IntArray | None = None
    weight: FloatArray | None = None
    features: FloatArray | None = None
    feature_names: tuple[str, ...] = ()
    sided: npt.NDArray[np.bool_] | None = None
    feature_notes: Mapping[str, Any] = field(default_factory=dict)
    annotator_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "model_a", np.asarray(self.model_a, dtype=np.int64))
        object.__setattr__(self, "model_b", np.asarray(self.model_b, dtype=np.int64))
        object.__setattr__(self, "outcome", np.asarray(self.outcome, dtype=np.int8))
        n = self.model_a.shape[0]
        columns = (self.model_b, self.outcome, self.time, self.vote_id, self.annotator, self.prompt)
        if any(c is not None and c.shape[0] != n for c in (*columns, self.weight, self.features, self.sided)):
            raise ValueError("every column of Battles needs one entry per vote")

    def __len__(self) -> int:
        return int(self.model_a.shape[0])

    @property
    def n_votes(self) -> int:
        return len(self)

    def take(self, index: npt.ArrayLike) -> Battles:
        """The votes at ``index`` (an index or boolean array), every column alike."""
        idx = np.asarray(index)
        return replace(
            self,
            model_a=self.model_a[idx],
            model_b=self.model_b[idx],
            outcome=self.outcome[idx],
            time=_pick(self.time, idx),
            vote_id=_pick(self.vote_id, idx),
            annotator=_pick(self.annotator, idx),
            prompt=_pick(self.prompt, idx),
            weight=_pick(self.weight, idx),
            features=_pick(self.features, idx),
            sided=_pick(self.sided, idx),
        )

    def narrow(self, index: npt.ArrayLike) -> Battles:
        """The votes at ``index`` (as :meth:`take`) coded against the models they name alone, in the
        order ``models`` has them: what a read of just those votes gives (a board of part of the votes)."""
        part = self.take(index)
        m = len(self.models)
        named = np.flatnonzero(
            np.bincount(part.model_a, minlength=m) + np.bincount(part.model_b, minlength=m)
        )
        if named.size == m:
            return part
        recode = np.full(m, -1, dtype=np.int64)
        recode[named] = np.arange(named.size)
        return replace(
            part,
            models=tuple(self.models[i] for i in named),
            model_a=recode[part.model_a],
            model_b=recode[part.model_b],
        )

    def times(self) -> FloatArray:
        """Vote times, or the arrival order when no time was recorded."""
        if self.time is not None:
            return self.time
        order: FloatArray = np.arange(len(self), dtype=np.float64)
        return order

    def counts(self, *, bucket_seconds: float | None = None) -> PairCounts:
        """Aggregate into cells (weighted when ``weight`` is set; split by time bucket when asked)."""
        return aggregate_codes(
            self.model_a,
            self.model_b,
            self.outcome,
            models=self.models,
            weight=self.weight,
            time=None if bucket_seconds is None else self.times(),
            bucket_seconds=bucket_seconds,
            sided=self.sided,
        )

    def winner_strings(self) -> npt.NDArray[np.object_]:
        """Outcomes as Chatbot Arena winner strings (``model_a``, ``model_b``, ``tie``, ``tie (bothbad)``)."""
        out: npt.NDArray[np.object_] = _LABELS[self.outcome]
        return out


def split_components(battles: Battles) -> list[Battles]:
    """The battles of each part of the comparison graph (models never compared across parts), largest
    first (most models, then most votes), each coded against its own models.

    Ratings from different parts share no scale: a file holding two arenas that never met gives one
    board per part, or the largest part alone.
    """
    m = len(battles.models)
    # the graph from the pairs that met, not from every vote: ten million votes are a few thousand edges
    pair = battles.model_a * m
    pair += battles.model_b
    met = np.flatnonzero(np.bincount(pair, minlength=m * m)) if m * m <= 50_000_000 else np.unique(pair)
    del pair
    from scipy.sparse import csgraph, csr_matrix  # scipy's graph code: only here; the site imports us

    graph = csr_matrix((np.ones(met.size), (met // m, met % m)), shape=(m, m))
    n_labels, labels = csgraph.connected_components(graph, directed=False)
    if n_labels == 1 and len(battles):
        return [battles]  # one part holding every model: the battles as they are (taking all would copy)
    vote_label = labels[battles.model_a]
    parts: list[Battles] = []
    for label in np.unique(labels):
        rows = np.flatnonzero(vote_label == label)
        if rows.size:  # a part's models are the ones its votes name
            parts.append(battles.narrow(rows))
    parts.sort(key=lambda p: (-len(p.models), -len(p)))
    return parts


def _pick(column: npt.NDArray[_T] | None, index: npt.NDArray[np.generic]) -> npt.NDArray[_T] | None:
    return None if column is None else column[index]


def sparse_models(
    models: Sequence[str],
    model_a: npt.ArrayLike,
    model_b: npt.ArrayLike,
    votes: npt.ArrayLike,
    min_votes: float,
) -> dict[str, int]:
    """The models with fewer than ``min_votes`` votes, each with the votes it had when it fell short, in
    the order they were found (fewest first). ``model_a``, ``model_b`` and ``votes`` are cells or single
    votes (index into ``models``; the votes of each). Leaving a model out takes its votes from its
    opponents, so the count is redone until every model left has ``min_votes``: a board that lists only
    models it has measured."""
    a = np.asarray(model_a, dtype=np.int64)
    b = np.asarray(model_b, dtype=np.int64)
    weight = np.asarray(votes, dtype=np.float64)
    m = len(models)
    left_off: dict[str, int] = {}
    out = np.zeros(m, dtype=bool)
    keep = np.ones(a.shape[0], dtype=bool)
    while True:
        per_model = np.bincount(a[keep], weight[keep], m) + np.bincount(b[keep], weight[keep], m)
        named = (np.bincount(a, minlength=m) + np.bincount(b, minlength=m)) > 0
        short = np.flatnonzero(named & ~out & (per_model < min_votes))
        if short.size == 0:
            return left_off
        for k in sorted(short.tolist(), key=lambda k: (per_model[k], models[k])):
            left_off[models[k]] = int(round(per_model[k]))
        out[short] = True
        keep &= ~(out[a] | out[b])
