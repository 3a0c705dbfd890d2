"""Votes each pairing policy needs to reach a precise, correct board, in seeded simulations.

Truth: ``--models`` ratings drawn like a real board (normal, sd ``--spread`` Elo); outcomes from Davidson's
model with a tie propensity giving 15% ties over uniform pairs and a left-side bonus of ``--left-bonus``
Elo; sides by a fair coin. Two settings:

fixed     every model from the start, no votes yet.
arrivals  ``--incumbents`` models already have ``--history`` uniform votes among themselves when the
          others arrive at once; votes are counted from their arrival.

Each policy draws ``--batch`` votes from the pair probabilities of the current fit (the live site refreshes
its weights periodically the same way); they are cast ``--check`` at a time, the plain Bradley-Terry fit
(ties half a win) refreshed by Newton steps from the previous one after each, and the targets checked:
(a) mean 95% half-width <= 15 Elo (model-based intervals), (b) Kendall tau with the truth >= 0.95, (c)
every neighbour pair in the true order whose gap is >= 20 Elo separated (right sign, 95% interval of the
gap excludes 0). Prints the votes needed per policy and target (mean and standard error over seeds), the
saving against uniform per seed (mean and paired standard error), the one-sided 95% upper bound of the
loss on (b) and (c) (Student t over the seeds' paired savings: "not worse than uniform by more than
this"), and a JSON line naming the best policy: never worse than uniform on (b) and (c) within the paired
s.e., then the largest saving on (a). On arrival it also prints the votes until every new model is within
``--new-width`` Elo and the smallest share of those votes any incumbent got (over its uniform share), and
for both settings the largest saving on (a) any design could have with the true ratings known
(:func:`width_bound`, :func:`arrivals_bound`).

Noise control: every policy sees the same truth, the same history and common random numbers (the k-th vote
on a pair reads the k-th draws of that pair's stream), so the per-seed differences are paired. The fixed
board starts every policy from no votes at all, the same state. ``--policies`` also takes greedy variants
with another floor, ``CRITERION-greedy@FLOOR``.

    python scripts/bench_pairing.py --seeds 10
    python scripts/bench_pairing.py --quick
    python scripts/bench_pairing.py --seeds 6 --policies uniform,width-greedy,blend-greedy@0.3
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import emit_json_line, machine_info, print_table  # noqa: E402

from arena.voting.pairing import PairingPolicy, pair_weights  # noqa: E402
from leaderboard.bt.newton import solve_bt_batch  # noqa: E402
from leaderboard.design.pairing import (  # noqa: E402
    CRITERIA,
    DEFAULT_FLOOR,
    ELO_PER_NAT,
    PRIOR_PRECISION,
    Criterion,
    PairDesign,
    design_probabilities,
    fisher_information,
    optimal_shares,
    pair_gains,
    pair_probabilities,
    rating_covariance,
)

FloatArray = npt.NDArray[np.float64]
TARGETS = ("width", "tau", "separation")
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Config:
    models: int
    spread: float
    tie_share: float
    left_bonus: float
    batch: int
    max_votes: int
    floor: float
    incumbents: int
    history: int
    check: int = 50
    width: float = 15.0
    tau: float = 0.95
    gap: float = 20.0
    new_width: float = 25.0


def davidson_nu(truth: FloatArray, tie_share: float) -> float:
    """The Davidson tie propensity giving ``tie_share`` ties on average over uniformly drawn pairs."""
    lo, hi = np.triu_indices(len(truth), k=1)
    h = 0.5 * (truth[lo] - truth[hi]) / ELO_PER_NAT
    base = np.exp(h) + np.exp(-h)
    a, b = 0.0, 10.0
    for _ in range(60):
        nu = 0.5 * (a + b)
        if float(np.mean(nu / (base + nu))) < tie_share:
            a = nu
        else:
            b = nu
    return 0.5 * (a + b)


class Board:
    """Votes so far (per pair: count and score of the lower index), the fit and its covariance."""

    #: Pre-drawn uniforms per pair and vote, in blocks of this many votes per pair.
    BLOCK = 64

    def __init__(
        self, design: PairDesign, truth: FloatArray, nu: float, left_bonus: float, stream_seed: int
    ) -> None:
        self.design = design
        # Common random numbers: the k-th vote on a pair reads the k-th uniforms of that pair's stream,
        # whatever the policy, so two policies that ask about the same pair get the same answers and
        # their difference in votes needed reflects the pairs they chose, not the luck of the draws.
        self._stream = np.random.default_rng(stream_seed)
        self._side = np.empty((len(design), 0))
        self._outcome = np.empty((len(design), 0))
        self.truth_nat = truth / ELO_PER_NAT
        self.nu = nu
        self.bonus = left_bonus / ELO_PER_NAT
        self.n = np.zeros(len(design))
        self.s = np.zeros(len(design))
        self.theta = np.zeros(design.n_models)
        self.cov = rating_covariance(np.zeros((design.n_models, design.n_models)))
        self.info = np.zeros((design.n_models, design.n_models))

    def _draws(self, pairs: npt.NDArray[np.int64]) -> tuple[FloatArray, FloatArray]:
        """The side and outcome uniforms of each vote in ``pairs`` (in order), from the pairs' streams."""
        order = np.argsort(pairs, kind="stable")
        sorted_pairs = pairs[order]
        first = np.searchsorted(sorted_pairs, sorted_pairs, side="left")
        rank = np.empty(len(pairs), dtype=np.int64)
        rank[order] = np.arange(len(pairs)) - first
        k = self.n[pairs].astype(np.int64) + rank
        while k.size and int(k.max()) >= self._side.shape[1]:
            # Whole blocks for every pair, drawn in the same order under every policy.
            shape = (len(self.design), self.BLOCK)
            self._side = np.hstack([self._side, self._stream.random(shape)])
            self._outcome = np.hstack([self._outcome, self._stream.random(shape)])
        return self._side[pairs, k], self._outcome[pairs, k]

    def vote(self, pairs: npt.NDArray[np.int64]) -> None:
        """Votes on ``pairs`` (indices into the design), sides by a fair coin, Davidson outcomes."""
        side, draw = self._draws(pairs)
        lo_left = side < 0.5
        diff = self.truth_nat[self.design.lo[pairs]] - self.truth_nat[self.design.hi[pairs]]
        u = np.where(lo_left, diff + self.bonus, -diff + self.bonus)  # left minus right
        h = 0.5 * u
        denom = np.exp(h) + np.exp(-h) + self.nu
        p_left, p_tie = np.exp(h) / denom, self.nu / denom
        left_score = np.where(draw < p_left, 1.0, np.where(draw < p_left + p_tie, 0.5, 0.0))
        lo_score = np.where(lo_left, left_score, 1.0 - left_score)
        np.add.at(self.n, pairs, 1.0)
        np.add.at(self.s, pairs, lo_score)

    def refit(self, steps: int = 3) -> None:
        """A few Newton steps on the plain BT likelihood (with the weak prior) from the last fit."""
        d = self.design
        theta, _, _ = solve_bt_batch(
            d.lo,
            d.hi,
            self.n,
            self.s,
            n_models=d.n_models,
            theta0=self.theta,
            ridge=PRIOR_PRECISION,
            tol=1e-6,
            max_iter=steps,
        )
        self.theta = theta[0]
        self.info = fisher_information(d, self.theta, self.n)
        self.cov = rating_covariance(self.info)

    def met(self, cfg: Config, truth: FloatArray) -> dict[str, bool]:
        sd = np.sqrt(np.maximum(np.diag(self.cov), 0.0)) * ELO_PER_NAT
        rating = self.theta * ELO_PER_NAT
        m = len(truth)
        iu = np.triu_indices(m, k=1)
        tau = float(np.mean(np.sign(rating[iu[0]] - rating[iu[1]]) * np.sign(truth[iu[0]] - truth[iu[1]])))
        order = np.argsort(-truth)
        upper, lower = order[:-1], order[1:]
        wide = truth[upper] - truth[lower] >= cfg.gap
        var = self.cov[upper, upper] + self.cov[lower, lower] - 2.0 * self.cov[upper, lower]
        gap_fit = rating[upper] - rating[lower]
        separated = gap_fit > Z95 * np.sqrt(np.maximum(var, 0.0)) * ELO_PER_NAT
        return {
            "width": bool(Z95 * sd.mean() <= cfg.width),
            "tau": tau >= cfg.tau,
            "separation": bool(np.all(separated[wide])),
        }


Policy = Callable[[Board], FloatArray]


def model_policy(criterion: Criterion, floor: float, power: float) -> Policy:
    def probabilities(board: Board) -> FloatArray:
        gains = pair_gains(board.design, board.theta, board.cov, criterion=criterion)
        return pair_probabilities(gains, floor=floor, power=power)

    return probabilities


def greedy_policy(criterion: Criterion, floor: float, batch: int) -> Policy:
    """The live site's ``optimal`` policy (:func:`leaderboard.design.pairing.design_probabilities`, the code
    path of :func:`arena.voting.pairing.optimal_design`) on the current fit, with this criterion and floor."""

    def probabilities(board: Board) -> FloatArray:
        return design_probabilities(board.theta, board.n, criterion=criterion, floor=floor, batch=batch)

    return probabilities


def heuristic_policy(name: PairingPolicy) -> Policy:
    """The live site's existing policies (``arena.voting.pairing.pair_weights``) on the current fit's Elo."""

    def probabilities(board: Board) -> FloatArray:
        d = board.design
        pairs = list(zip(d.lo.tolist(), d.hi.tolist(), strict=True))
        counts = {pair: int(n) for pair, n in zip(pairs, board.n, strict=True) if n}
        ratings = dict(enumerate((board.theta * ELO_PER_NAT).tolist()))
        w: FloatArray = np.asarray(pair_weights(pairs, policy=name, counts=counts, ratings=ratings))
        return np.asarray(w / w.sum(), dtype=np.float64)

    return probabilities


def policies(floor: float, batch: int, extra: tuple[str, ...] = ()) -> dict[str, Policy]:
    """The policies by name; ``extra`` adds greedy variants named ``CRITERION-greedy@FLOOR`` (another
    uniform floor than ``floor``), e.g. ``blend-greedy@0.3``."""
    table = {
        "uniform": heuristic_policy("uniform"),
        "balanced": heuristic_policy("balanced"),
        "active": heuristic_policy("active"),
        "aopt": model_policy("aopt", floor, 1.0),
        "neighbour": model_policy("neighbour", floor, 1.0),
        "width": model_policy("width", floor, 1.0),
        "aopt-greedy": greedy_policy("aopt", floor, batch),
        "width-greedy": greedy_policy("width", floor, batch),
        "neighbour-greedy": greedy_policy("neighbour", floor, batch),
        "blend-greedy": greedy_policy("blend", floor, batch),
    }
    for name in extra:
        base, _, share = name.partition("@")
        criterion = base.removesuffix("-greedy")
        if not share or criterion not in CRITERIA or base != f"{criterion}-greedy":
            raise ValueError(f"unknown policy {name!r}: expected CRITERION-greedy@FLOOR")
        table[name] = greedy_policy(criterion, float(share), batch)
    return table


def start(cfg: Config, seed: int, setting: str) -> tuple[FloatArray, Board]:
    """The truth of ``seed`` and its board when the counting starts: empty on the fixed board; with the
    incumbents' uniform history (models ``0 .. incumbents - 1``), refitted, for arrivals."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(0.0, cfg.spread, cfg.models)
    nu = davidson_nu(truth, cfg.tie_share)
    design = PairDesign.of(cfg.models)
    board = Board(design, truth, nu, cfg.left_bonus, stream_seed=seed + 20_000)
    if setting == "arrivals":
        incumbents = PairDesign.of(cfg.incumbents)
        old = rng.choice(len(incumbents), size=cfg.history)
        # Incumbents are models 0..k-1: their pair's index in the full design.
        lo, hi = incumbents.lo[old], incumbents.hi[old]
        index = lo * cfg.models - lo * (lo + 1) // 2 + (hi - lo - 1)
        board.vote(index.astype(np.int64))
        board.refit(steps=25)
    return truth, board


#: What :func:`run` reports besides the targets: votes until every new model's half-width is at most
#: ``new_width`` Elo, and the smallest share of those votes any incumbent had, over its uniform share.
CATCH_UP = ("new", "old_share")


def run(cfg: Config, policy: Policy, seed: int, setting: str) -> dict[str, float]:
    """Votes until each target is first met (``max_votes`` when never): one board, one policy.

    The pairs of a batch are drawn at once from the policy's probabilities (so the draws do not depend on
    ``check``), then cast ``check`` at a time, the fit refreshed and the targets checked after each.
    """
    truth, board = start(cfg, seed, setting)
    design = board.design
    new = np.arange(cfg.incumbents if setting == "arrivals" else 0, cfg.models)
    old = np.arange(0, cfg.incumbents if setting == "arrivals" else 0)
    before = board.n.copy()
    vote_rng = np.random.default_rng(seed + 10_000)
    reached: dict[str, float] = {}
    votes = 0
    wanted = len(TARGETS) + (len(CATCH_UP) if len(old) else 0)
    while votes < cfg.max_votes and len(reached) < wanted:
        probs = policy(board)
        pairs = vote_rng.choice(len(design), size=cfg.batch, p=probs).astype(np.int64)
        for first in range(0, cfg.batch, cfg.check):
            board.vote(pairs[first : first + cfg.check])
            votes += len(pairs[first : first + cfg.check])
            board.refit()
            for name, ok in board.met(cfg, truth).items():
                if ok and name not in reached:
                    reached[name] = float(votes)
            if len(old) and "new" not in reached:
                sd = np.sqrt(np.maximum(np.diag(board.cov)[new], 0.0)) * ELO_PER_NAT
                if np.all(Z95 * sd <= cfg.new_width):
                    since = board.n - before
                    per_model = np.bincount(design.lo, since, cfg.models) + np.bincount(
                        design.hi, since, cfg.models
                    )
                    reached["new"] = float(votes)
                    reached["old_share"] = float(per_model[old].min() / votes / (2.0 / cfg.models))
    out = {name: reached.get(name, float(cfg.max_votes)) for name in TARGETS}
    if len(old):
        out["new"] = reached.get("new", float(cfg.max_votes))
        out["old_share"] = reached.get("old_share", float("nan"))
    return out


def width_bound(cfg: Config, seed: int) -> float:
    """Largest saving on (a) any design could have on the fixed board of ``seed`` against uniform.

    Method: the mean standard deviation of the model-based (plain Bradley-Terry Fisher) intervals after
    ``n`` votes with shares ``p`` is ``mean_sd(p) / sqrt(n)`` once the weak prior is negligible, so the
    votes any design needs for a half-width scale as ``mean_sd(p) ** 2``. Whatever a policy does, its
    votes make some realised shares ``p``, so none can need fewer votes than the shares minimising
    ``mean_sd`` (:func:`leaderboard.design.pairing.optimal_shares`, the global optimum of a convex problem) at
    the true strengths: the bound is ``1 - (mean_sd(optimal) / mean_sd(uniform)) ** 2``. What it leaves
    out (the bench checks the intervals at the fitted strengths, not the true ones, and stops at a noisy
    first crossing) moves both policies alike and is small next to the bound.
    """
    truth = np.random.default_rng(seed).normal(0.0, cfg.spread, cfg.models) / ELO_PER_NAT
    design = PairDesign.of(cfg.models)

    def mean_sd(shares: FloatArray) -> float:
        cov = rating_covariance(fisher_information(design, truth, 1e6 * shares))
        return float(np.sqrt(np.maximum(np.diag(cov), 0.0)).mean())

    uniform = np.full(len(design), 1.0 / len(design))
    return 1.0 - (mean_sd(optimal_shares(design, truth)) / mean_sd(uniform)) ** 2


def arrivals_bound(cfg: Config, seed: int) -> float:
    """Largest saving on (a) any design could have when the new models arrive, against uniform: the same
    argument as :func:`width_bound` with the incumbents' history as prior information ``H0``, where the
    votes no longer scale simply, so the votes needed are found by bisection on ``n``: the fewest ``n``
    whose optimal shares (:func:`leaderboard.design.pairing.optimal_shares` on ``H0 + n F(p)``) reach the mean
    half-width, against the ``n`` uniform shares need, both at the true strengths."""
    truth, board = start(cfg, seed, "arrivals")
    design, theta = board.design, truth / ELO_PER_NAT
    prior = fisher_information(design, theta, board.n)
    uniform = np.full(len(design), 1.0 / len(design))

    def half_width(n: float, shares: FloatArray) -> float:
        cov = rating_covariance(prior + fisher_information(design, theta, n * shares))
        return Z95 * float(np.sqrt(np.maximum(np.diag(cov), 0.0)).mean()) * ELO_PER_NAT

    def needed(shares_at: Callable[[float], FloatArray]) -> float:
        lo, hi = 0.0, float(cfg.max_votes)
        while hi - lo > 10.0:
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if half_width(mid, shares_at(mid)) <= cfg.width else (mid, hi)
        return hi

    def optimal(n: float) -> FloatArray:
        return optimal_shares(design, theta, scale=n, information=prior, iterations=200)

    return 1.0 - needed(optimal) / needed(lambda _: uniform)


def _se(x: FloatArray) -> float:
    """Standard error of the mean over seeds (0 for one seed)."""
    return float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds first-seed .. first-seed + seeds - 1 (to split a run)",
    )
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--spread", type=float, default=100.0, help="sd of the true ratings (Elo)")
    parser.add_argument("--tie-share", type=float, default=0.15)
    parser.add_argument("--left-bonus", type=float, default=15.0, help="left-side advantage (Elo)")
    parser.add_argument("--batch", type=int, default=500, help="votes between refreshes of the weights")
    parser.add_argument("--max-votes", type=int, default=400_000)
    parser.add_argument("--check", type=int, default=50, help="votes between checks of the targets")
    parser.add_argument(
        "--floor", type=float, default=DEFAULT_FLOOR, help="uniform exploration share (the site's default)"
    )
    parser.add_argument("--incumbents", type=int, default=35)
    parser.add_argument("--new-width", type=float, default=25.0, help="new models' catch-up half-width")
    parser.add_argument("--history", type=int, default=60_000, help="incumbents' votes before arrivals")
    parser.add_argument("--policies", default="", help="comma-separated subset (default: all)")
    parser.add_argument(
        "--settings", default="fixed,arrivals", help="comma-separated subset of fixed, arrivals"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke test: 12 models, 2 seeds")
    args = parser.parse_args(argv)
    cfg = Config(
        models=12 if args.quick else args.models,
        spread=args.spread,
        tie_share=args.tie_share,
        left_bonus=args.left_bonus,
        batch=200 if args.quick else args.batch,
        max_votes=20_000 if args.quick else args.max_votes,
        floor=args.floor,
        incumbents=8 if args.quick else args.incumbents,
        history=5_000 if args.quick else args.history,
        check=min(args.check, 200 if args.quick else args.batch),
        new_width=args.new_width,
        width=25.0 if args.quick else 15.0,
    )
    seeds = 2 if args.quick else args.seeds
    seed_range = range(args.first_seed, args.first_seed + seeds)
    wanted = [p for p in args.policies.split(",") if p]
    try:
        table = policies(cfg.floor, cfg.batch, tuple(p for p in wanted if "@" in p))
    except ValueError as exc:
        parser.error(str(exc))
    if wanted:
        unknown = sorted(set(wanted) - set(table))
        if unknown:
            parser.error(f"unknown policies: {', '.join(unknown)}")
        table = {k: v for k, v in table.items() if k in wanted}
    if "uniform" not in table:
        parser.error("uniform is the reference: keep it in --policies")
    start = time.perf_counter()
    results: dict[str, dict[str, FloatArray]] = {}
    catch_up: dict[str, FloatArray] = {}  # arrivals, per policy: votes to the new width, old share
    settings = [x for x in args.settings.split(",") if x]
    if not settings or set(settings) - {"fixed", "arrivals"}:
        parser.error("--settings takes fixed, arrivals or both")
    if cfg.check < 1 or cfg.batch % cfg.check:
        parser.error("--check must divide --batch")
    for setting in settings:
        results[setting] = {}
        for name, policy in table.items():
            runs = [run(cfg, policy, seed, setting) for seed in seed_range]
            results[setting][name] = np.array([[r[t] for t in TARGETS] for r in runs])
            if setting == "arrivals":
                catch_up[name] = np.array([[r[t] for t in CATCH_UP] for r in runs])
            print(f"# {setting} {name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    rows = []
    saved: dict[str, dict[str, dict[str, float]]] = {}
    worst: dict[str, dict[str, float]] = {}  # per setting and policy: min over (b), (c) of saving + s.e.
    # One-sided 95% bound of the loss against uniform (Student t over the seeds' paired savings).
    t95 = float(stats.t.ppf(0.95, seeds - 1)) if seeds > 1 else math.inf
    for setting, by_policy in results.items():
        uniform = by_policy["uniform"]
        saved[setting], worst[setting] = {}, {}
        for name, votes in by_policy.items():
            mean = votes.mean(axis=0)
            se = votes.std(axis=0, ddof=1) / math.sqrt(len(votes)) if len(votes) > 1 else np.zeros(3)
            # Saving per seed (same truth, same history, same vote streams), then its mean and paired
            # standard error: "never worse than uniform" reads as mean + s.e. >= 0.
            per_seed = 1.0 - votes / uniform
            saving = per_seed.mean(axis=0)
            paired_se = (
                per_seed.std(axis=0, ddof=1) / math.sqrt(len(votes)) if len(votes) > 1 else np.zeros(3)
            )
            saved[setting][name] = dict(zip(TARGETS, saving.round(4).tolist(), strict=True))
            worst[setting][name] = float(np.min((saving + paired_se)[1:]))
            loss = -(saving - t95 * paired_se)
            rows.append(
                [setting, name]
                + [f"{mu:,.0f} ± {s:,.0f}" for mu, s in zip(mean, se, strict=True)]
                + [f"{x:+.1%} ± {e:.1%}" for x, e in zip(saving, paired_se, strict=True)]
                + [f"{loss[1]:+.1%} / {loss[2]:+.1%}"]
            )
    print_table(
        ["setting", "policy", "votes (a) width", "votes (b) tau", "votes (c) separation"]
        + [f"saved {t}" for t in TARGETS]
        + ["95% loss bound (b) / (c)"],
        rows,
    )
    if catch_up:
        print_table(
            ["arrivals", f"votes until every new model is ± {cfg.new_width:g} Elo", "saved", "min old share"],
            [
                [
                    name,
                    f"{c[:, 0].mean():,.0f} ± {_se(c[:, 0]):,.0f}",
                    f"{np.mean(1.0 - c[:, 0] / catch_up['uniform'][:, 0]):+.1%}",
                    f"{np.nanmin(c[:, 1]):.2f} (mean {np.nanmean(c[:, 1]):.2f})",
                ]
                for name, c in catch_up.items()
            ],
        )
        print(
            "# min old share: the fewest votes any incumbent had while the new models caught up, over its "
            f"uniform share (2/{cfg.models}); worst seed and mean over seeds",
            flush=True,
        )
    candidates = [p for p in table if p not in ("uniform", "balanced", "active")] or list(table)
    # The best: never worse than uniform on (b) and (c) within the paired s.e. in either setting (when
    # none is, the least bad), then the largest saving on (a) over both settings.
    best = max(
        candidates,
        key=lambda p: (
            min(0.0, *(worst[s][p] for s in settings)),
            sum(saved[s][p]["width"] for s in settings),
        ),
    )
    if "fixed" in settings:
        bound = np.array([width_bound(cfg, seed) for seed in seed_range])
        print(
            f"# (a) on the fixed board: the best design with the truth known saves {bound.mean():.1%} "
            f"(seeds {bound.min():.1%} to {bound.max():.1%}) against uniform",
            flush=True,
        )
    if "arrivals" in settings:
        reach = np.array([arrivals_bound(cfg, seed) for seed in seed_range])
        print(
            f"# (a) on arrival: the best design with the truth known saves {reach.mean():.1%} "
            f"(seeds {reach.min():.1%} to {reach.max():.1%}) against uniform",
            flush=True,
        )
    print(
        f"# {seeds} seeds from {args.first_seed}, {cfg.models} models, batch {cfg.batch}, "
        f"check {cfg.check}, floor {cfg.floor}, "
        f"{time.perf_counter() - start:.0f} s, load {machine_info()['load_avg_1m']}",
        flush=True,
    )
    figures: dict[str, object] = {
        "policy": best,
        "votes_saved_vs_uniform": {setting: saved[setting][best] for setting in saved},
    }
    if catch_up:
        # The new models reaching the catch-up width under the best policy: votes saved against uniform
        # and the smallest share of those votes any incumbent got (over its uniform share), worst seed.
        mine, reference = catch_up[best], catch_up["uniform"]
        figures["new_models"] = {
            "width": cfg.new_width,
            "votes_saved": round(float(np.mean(1.0 - mine[:, 0] / reference[:, 0])), 4),
            "min_old_share": round(float(np.nanmin(mine[:, 1])), 3),
        }
    emit_json_line(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
