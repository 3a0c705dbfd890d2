"""Where the composite's parameters sit: the free vector's blocks, which sources learn which terms, the
weak priors and the deviations' Jacobian.

The free vector ``x`` holds the ratings (model 0 at 0), then per source with a learned term its log
discrimination, position, log tie parameter and self-preference, then each deviating judge's block of
per-model deviations. Which sources learn a term depends on the votes (a term needs votes that can tell
it: a position needs sided votes seen in both orders, a tie parameter needs ties, a self-preference a
family) and on :class:`~leaderboard.composite.model.CompositeOptions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from leaderboard.composite.model import CompositeData, CompositeOptions, confounded_positions

__all__ = ["ParameterLayout", "carry_start", "make_layout", "pinned_dims"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ParameterLayout:
    """Where each block of parameters sits in the free vector ``x``."""

    n_models: int
    n_sources: int
    learn_a: IntArray  # source indices with a learned discrimination
    learn_pos: IntArray
    learn_nu: IntArray
    learn_sp: IntArray
    learn_dev: IntArray  # judges with per-model deviations (a block of n_models each)
    prior: FloatArray  # per free parameter, the prior's precision (0: none)
    random: FloatArray  # the part of ``prior`` that is a random effect's (the deviations), else 0
    centre: FloatArray  # per free parameter, the prior's mean (0 but in a bootstrap round)
    # per free parameter, the deviations' Jacobian: the log posterior has ``- view_dims @ x``, non-zero
    # only at the log discriminations of judges with deviations (:func:`pinned_dims`)
    view_dims: FloatArray = field(default_factory=lambda: np.zeros(0))

    @property
    def sizes(self) -> tuple[int, int, int, int, int, int]:
        return (
            self.n_models - 1,
            len(self.learn_a),
            len(self.learn_pos),
            len(self.learn_nu),
            len(self.learn_sp),
            len(self.learn_dev) * self.n_models,
        )

    def deviation(self, x: FloatArray) -> FloatArray:
        """The judges' deviations, sources by models (0 for the humans and judges without)."""
        out = np.zeros((self.n_sources, self.n_models))
        start = int(np.sum(self.sizes[:5]))
        out[self.learn_dev] = x[start:].reshape(len(self.learn_dev), self.n_models)
        return out

    def deviation_block(self, s: int) -> IntArray:
        """The columns of judge ``s``'s deviations in ``x``."""
        rank = int(np.flatnonzero(self.learn_dev == s)[0])
        start = int(np.sum(self.sizes[:5])) + rank * self.n_models
        return np.arange(start, start + self.n_models, dtype=np.int64)

    @property
    def n_params(self) -> int:
        return sum(self.sizes)

    def split(self, x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        """Full per-model and per-source arrays from the free vector (model 0 at 0 before centring)."""
        cuts = np.cumsum(self.sizes)
        theta = np.concatenate([[0.0], x[: cuts[0]]])
        log_a = np.zeros(self.n_sources)
        log_a[self.learn_a] = x[cuts[0] : cuts[1]]
        pos = np.zeros(self.n_sources)
        pos[self.learn_pos] = x[cuts[1] : cuts[2]]
        log_nu = np.full(self.n_sources, -np.inf)
        log_nu[self.learn_nu] = x[cuts[2] : cuts[3]]
        sp = np.zeros(self.n_sources)
        sp[self.learn_sp] = x[cuts[3] : cuts[4]]
        return theta, log_a, pos, log_nu, sp


def make_layout(
    data: CompositeData,
    options: CompositeOptions,
    deviation_sd: FloatArray | None = None,
    *,
    loose: bool = False,
) -> ParameterLayout:
    """The free parameters; ``deviation_sd`` per source (natural-log units, 0: no deviations) gives the
    judges with deviations and their prior's spread (``None``: none). ``loose``: the fit that measures
    the deviations' spread, which sets the view's scale by the prior alone (no Jacobian,
    :func:`pinned_dims`)."""
    s = len(data.sources)
    present = np.unique(np.asarray(data.source))
    judges = present[present > 0]
    has_family = np.array([j for j in judges if data.family.get(int(j)) is not None], dtype=np.int64)
    tied = np.unique(np.asarray(data.source)[np.asarray(data.tie, dtype=bool)])
    sided = (
        np.ones(len(data.source), dtype=bool) if data.sided is None else np.asarray(data.sided, dtype=bool)
    )
    with_side = np.unique(np.asarray(data.source)[sided])
    if options.position:
        fixed = confounded_positions(data)
        with_side = np.array([k for k in with_side if int(k) not in fixed], dtype=np.int64)
    learn_a = judges.astype(np.int64) if options.discrimination else np.zeros(0, np.int64)
    learn_pos = with_side.astype(np.int64) if options.position else np.zeros(0, np.int64)
    learn_nu = tied.astype(np.int64) if options.ties else np.zeros(0, np.int64)
    learn_sp = has_family if options.self_preference else np.zeros(0, np.int64)
    sd = np.zeros(s) if deviation_sd is None or not options.deviations else np.asarray(deviation_sd, float)
    learn_dev = np.array([j for j in judges if sd[int(j)] > 0], dtype=np.int64)
    random = np.repeat(sd[learn_dev] ** -2.0, len(data.models)) if len(learn_dev) else np.zeros(0)
    unit = options.scale / np.log(options.base)
    elo = 0.0 if options.prior_sd_elo is None else (unit / options.prior_sd_elo) ** 2
    log_a = 0.0 if options.prior_sd_log_discrimination is None else options.prior_sd_log_discrimination**-2
    prior = np.concatenate(
        [
            np.zeros(len(data.models) - 1),
            np.full(len(learn_a), log_a),
            np.full(len(learn_pos), elo),
            np.zeros(len(learn_nu)),
            np.full(len(learn_sp), elo),
            random,
        ]
    )
    dims = np.zeros(len(prior))
    if not loose and len(learn_dev) and len(learn_a):
        dims[len(data.models) - 1 : len(data.models) - 1 + len(learn_a)] = pinned_dims(
            data, options, learn_a, learn_dev, learn_sp
        )
    return ParameterLayout(
        n_models=len(data.models),
        n_sources=s,
        learn_a=learn_a,
        learn_pos=learn_pos,
        learn_nu=learn_nu,
        learn_sp=learn_sp,
        learn_dev=learn_dev,
        prior=prior,
        random=np.concatenate([np.zeros(len(prior) - len(random)), random]),
        centre=np.zeros(len(prior)),
        view_dims=dims,
    )


def pinned_dims(
    data: CompositeData, options: CompositeOptions, learn_a: IntArray, learn_dev: IntArray, learn_sp: IntArray
) -> FloatArray:
    """Per learned discrimination, the number ``k_s`` of a judge's deviation directions its verdicts pin.

    The deviations' prior is a density on ``delta``, but thousands of verdicts pin the judge's view
    ``w = a_s (theta + delta)`` (``k_s`` dimensions: the models it saw, less the common shift and, with
    a self-preference, the family direction the self-preference absorbs). Integrating the deviations out
    in those coordinates brings the Jacobian ``|d delta / d w| = a_s^-k_s``, so the log posterior gets
    ``-k_s log a_s``. Without it the joint mode shrinks every judge's view (and with it the ratings, which
    it pins) towards a smaller scale: shrinking ``theta`` and ``delta`` together lowers the prior's
    penalty ``|delta|^2 / 2 tau^2`` at first order, which the human votes alone resist; the mode then sets
    ``(theta + delta) . delta = 0`` where the model has ``k_s tau^2``. The ratings came out compressed by
    about 2% per judge (a panel of three: the extreme models' intervals covered far less than 95%,
    ``scripts/composite_sim.py``)."""
    src = np.asarray(data.source)
    a = np.asarray(data.model_a)
    b = np.asarray(data.model_b)
    dev = set(learn_dev.tolist())
    sp_ = set(learn_sp.tolist()) if options.self_preference else set()
    out = np.zeros(len(learn_a))
    for i, s in enumerate(learn_a.tolist()):
        if s not in dev:
            continue
        rows = src == s
        seen = np.unique(np.concatenate([a[rows], b[rows]]))
        k = len(seen) - 1
        family = data.family.get(s)
        if family is not None and s in sp_ and data.model_family:
            members = sum(data.model_family[m] == family for m in seen.tolist())
            k -= int(0 < members < len(seen))
        out[i] = max(k, 0)
    return out


def carry_start(start: tuple[FloatArray, ParameterLayout], lay: ParameterLayout) -> FloatArray:
    """A start for ``lay`` from a fit under another layout with the same terms but fewer or more judges
    with deviations (the loose fit that measured their spread)."""
    x, old = start
    shared = int(np.sum(lay.sizes[:5]))
    out = np.zeros(lay.n_params)
    out[:shared] = x[:shared]
    for s in lay.learn_dev:
        if int(s) in set(old.learn_dev.tolist()):
            out[lay.deviation_block(int(s))] = x[old.deviation_block(int(s))]
    return out
