"""Coverage of 95% intervals on simulated boards: votes independent, clustered, or weighted unequally.

Three scenarios, each a Davidson model with a left-side advantage (``davidson-position``):

- ``independent``: every vote independent (annotator ids present, but annotators share one taste);
- ``annotator``: 200 annotators, each with their own model preferences and their own side bias;
- ``prompt``: 400 prompts, each with its own difficulty (offsets on the models) and tie propensity.

Each board is fitted once and given four kinds of interval: the i.i.d. bootstrap and sandwich, and the
cluster bootstrap and cluster-robust sandwich (clustered by annotator in the first two scenarios, by prompt
in the third). With tastes that vary between annotators or prompts, the fitted model is a population
average, not the conditional ratings the simulator draws from (a logistic model's attenuation), so the
target each interval should cover is the fit on a very large sample with fresh clusters (``--target-votes``
votes), made once per scenario. The ratings are the same on every board; coverage pools (model, board)
pairs. Prints a table and one JSON line; exits 1 when ``--check`` is given and a clustered interval
misses the 93-97% band.

    .venv/bin/python scripts/coverage_sim.py --boards 100 --rounds 300

Weighted scenarios (``--scenario weighted`` runs them all): votes whose weights differ within a cell, so
an interval that takes every vote of a cell at the cell's mean weight is too narrow.

- ``ipw-bt`` and ``ipw``: pairs drawn by the shipped pairing policy
  (:func:`leaderboard.design.pairing.design_probabilities`: greedy batches of 200, uniform floor
  ``DEFAULT_FLOOR``, refreshed every 200 votes from the votes so far), each vote weighted by its inverse
  propensity ``1 / (n_pairs p)``; plain Bradley-Terry (``bt``) on votes without ties or side effect, and
  ``davidson-position`` on votes with both. The model holds, so the target is the truth.
- ``soft``: half of the decisive verdicts are soft labels as AlpacaEval writes them (one judgment, two
  rows: a win of each side weighted ``y`` and ``1 - y``, ``y`` a Beta draw whose mean is the model's
  chance of that side winning), on 400 prompts; ``davidson-position``, target the truth. The two rows of
  one judgment are negatively correlated, so intervals that treat them as independent votes err wide;
  clustering by prompt sums them.
- ``honest``: 200 annotators, a quarter of them noisy (discrimination 0.1-0.6, the honest weight
  ``--robust`` gives them), plain ``bt``; the target is the weighted fit of two million votes.
- ``time``: ``honest`` with a half-life of five days over ten days of votes (cells by day; no
  ``--cluster``, which refuses time buckets).

``--before`` adds the old intervals (every vote of a cell at the cell's mean weight) for comparison.
Coverage pools (parameter, board) intervals; its Monte-Carlo standard error ``sqrt(p (1 - p) / n)``
treats them as independent (the ratings of one board are not quite).

    .venv/bin/python scripts/coverage_sim.py --scenario weighted --boards 1000 --rounds 200 \
        --models 8 --votes 3000 --jobs 1
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from _weighted_votes import DAY, NU, POSITION, honest_battles, shipped_policy_battles, soft_label_battles

from leaderboard import (
    BTSpec,
    bootstrap_ratings,
    cluster_cells,
    fit_bt,
    sandwich_intervals,
    simulate_battles,
)
from leaderboard.battles import Battles
from leaderboard.bt.clusters import Clusters
from leaderboard.data import PairCounts

SPEC = BTSpec(position="common", ties="davidson")
PLAIN = BTSpec()
PARAMS = ("ratings", "position", "tie")
KINDS = ("bootstrap", "bootstrap+cluster", "sandwich", "sandwich+cluster")
WEIGHTED = ("ipw-bt", "ipw", "soft", "honest", "time")


@dataclass(frozen=True)
class Scenario:
    name: str
    cluster: str
    options: dict[str, Any]
    spec: BTSpec = SPEC
    weights: str = ""


def scenarios(scale: float) -> dict[str, Scenario]:
    return {
        "independent": Scenario("independent", "annotator", {"n_annotators": 200}),
        "annotator": Scenario(
            "annotator",
            "annotator",
            {"n_annotators": 200, "annotator_sd": 80.0 * scale, "annotator_position_sd": 100.0 * scale},
        ),
        "prompt": Scenario(
            "prompt", "prompt", {"n_prompts": 400, "prompt_sd": 100.0 * scale, "prompt_tie_sd": 1.0 * scale}
        ),
        "ipw-bt": Scenario("ipw-bt", "annotator", {"n_annotators": 200}, PLAIN, "ipw"),
        "ipw": Scenario(
            "ipw", "annotator", {"n_annotators": 200, "nu": NU, "position": POSITION}, SPEC, "ipw"
        ),
        "soft": Scenario("soft", "prompt", {"n_annotators": 200, "n_prompts": 400}, SPEC, "soft"),
        "honest": Scenario("honest", "annotator", {}, PLAIN, "honest"),
        "time": Scenario("time", "", {}, BTSpec(half_life=5 * DAY), "time"),
    }


def draw_votes(scenario: Scenario, truth: np.ndarray, n_votes: int, rng: np.random.Generator) -> Battles:
    if scenario.weights == "ipw":
        return shipped_policy_battles(
            truth,
            n_votes,
            rng,
            nu=scenario.options.get("nu", 0.0),
            position=scenario.options.get("position", 0.0),
            n_annotators=scenario.options["n_annotators"],
        )
    if scenario.weights == "soft":
        return soft_label_battles(truth, n_votes, rng, scenario.options)
    return honest_battles(truth, n_votes, rng)


def counts_of(scenario: Scenario, votes: Battles) -> PairCounts:
    return votes.counts(bucket_seconds=DAY if scenario.weights == "time" else None)


def weighted_target(truth: np.ndarray, scenario: Scenario, n_votes: int, seed: int) -> np.ndarray:
    """The parameters the weighted fit estimates: the truth where the model holds (``ipw``, ``soft``),
    else the weighted fit of ``n_votes`` votes (more annotators of the same mix)."""
    if scenario.weights in ("ipw", "soft"):
        rating = truth - truth.mean() + 1000.0
        return np.concatenate([rating, [POSITION, NU]]) if scenario.spec == SPEC else rating
    rng = np.random.default_rng(seed)
    votes = honest_battles(truth, n_votes, rng, copies=max(1, n_votes // 20_000))
    return fit_bt(counts_of(scenario, votes), spec=scenario.spec).rating


def mean_weight(counts: PairCounts, clusters: Clusters | None) -> tuple[PairCounts, Clusters | None]:
    """The same votes as the intervals saw them before: every vote of a cell at the cell's mean weight."""
    old = replace(counts, weight_sq=None)
    return old, None if clusters is None else replace(clusters, weighted=None)


def _target(truth: np.ndarray, scenario: Scenario, n_votes: int, seed: int) -> np.ndarray:
    """Ratings, position and tie parameter of the population: a fit on many votes and many clusters."""
    options = dict(scenario.options)
    growth = max(1, n_votes // 20_000)  # keep votes per cluster, multiply the clusters
    for key in ("n_annotators", "n_prompts"):
        if key in options:
            options[key] = int(options[key]) * growth
    sim = simulate_battles(truth, n_votes, random_state=seed, position=POSITION, nu=NU, **options)
    fit = fit_bt(sim.counts(), spec=SPEC)
    extra = fit.extras_of(fit.x)
    return np.concatenate([fit.rating, [extra["position_advantage_elo"], extra["tie_propensity_nu"]]])


def _bounds(result: Any) -> tuple[np.ndarray, np.ndarray]:
    extra = result.extra
    low = np.concatenate([result.ci_low, [extra["position_advantage_elo"][1], extra["tie_propensity_nu"][1]]])
    high = np.concatenate(
        [result.ci_high, [extra["position_advantage_elo"][2], extra["tie_propensity_nu"][2]]]
    )
    return low, high


def run_scenario(scenario: Scenario, args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    truth = np.linspace(1000 - args.spread, 1000 + args.spread, args.models)
    target = _target(truth, scenario, args.target_votes, args.seed + 10_000)
    m = args.models
    hits = {k: np.zeros(m + 2) for k in KINDS}
    widths = {k: np.zeros(m + 2) for k in KINDS}
    for board in range(args.boards):
        sim = simulate_battles(
            truth,
            args.votes,
            random_state=int(rng.integers(2**31)),
            position=POSITION,
            nu=NU,
            **scenario.options,
        )
        counts = sim.counts()
        clusters = cluster_cells(sim, counts, scenario.cluster)
        fit = fit_bt(counts, spec=SPEC)
        results = {
            "bootstrap": bootstrap_ratings(
                counts, fit=fit, n_rounds=args.rounds, random_state=board, n_jobs=args.jobs
            ),
            "bootstrap+cluster": bootstrap_ratings(
                counts, fit=fit, n_rounds=args.rounds, random_state=board, n_jobs=args.jobs, clusters=clusters
            ),
            "sandwich": sandwich_intervals(counts, fit=fit),
            "sandwich+cluster": sandwich_intervals(counts, fit=fit, clusters=clusters),
        }
        for kind, result in results.items():
            low, high = _bounds(result)
            hits[kind] += (low <= target) & (target <= high)
            widths[kind] += high - low
    out: dict[str, Any] = {"scenario": scenario.name, "cluster": scenario.cluster, "boards": args.boards}
    for kind in KINDS:
        rate = hits[kind] / args.boards
        width = widths[kind] / args.boards
        out[kind] = {
            "ratings": round(float(rate[:m].mean()), 4),
            "position": round(float(rate[m]), 4),
            "tie": round(float(rate[m + 1]), 4),
            "mean_rating_width": round(float(width[:m].mean()), 2),
            "position_width": round(float(width[m]), 2),
        }
    return out


def _weighted_bounds(result: Any, spec: BTSpec) -> tuple[np.ndarray, np.ndarray]:
    return _bounds(result) if spec == SPEC else (result.ci_low, result.ci_high)


def run_weighted(scenario: Scenario, args: argparse.Namespace) -> dict[str, Any]:
    """Coverage of each interval (and of the old mean-weight one with ``--before``) on weighted votes."""
    rng = np.random.default_rng(args.seed)
    truth = np.linspace(1000 - args.spread, 1000 + args.spread, args.models)
    target = weighted_target(truth, scenario, args.target_votes, args.seed + 10_000)
    if args.intervals:  # one position and one tie interval per board, ``models`` rating intervals
        per_board = 1 if len(target) > args.models else args.models
        args = argparse.Namespace(**{**vars(args), "boards": -(-args.intervals // per_board)})
    kinds = [k for k in KINDS if scenario.cluster or not k.endswith("cluster")]
    if args.sandwich_only:
        kinds = [k for k in kinds if k.startswith("sandwich")]
    labels = list(kinds) + ([f"{k} (mean weight)" for k in kinds] if args.before else [])
    unweighted = args.unweighted and scenario.weights == "ipw"
    if unweighted:  # the same votes fitted without their inverse propensities
        labels += [f"{k} (unweighted)" for k in kinds if k.startswith("sandwich")]
    hits = {k: np.zeros(len(target)) for k in labels}
    widths = {k: np.zeros(len(target)) for k in labels}
    squared_error = {"weighted": 0.0, "unweighted": 0.0}
    spreads = []
    for board in range(args.boards):
        votes = draw_votes(scenario, truth, args.votes, rng)
        assert votes.weight is not None
        spreads.append(float(votes.weight.max() / votes.weight.min()))
        counts = counts_of(scenario, votes)
        clusters = cluster_cells(votes, counts, scenario.cluster) if scenario.cluster else None
        variants = [("", counts, clusters)]
        if args.before:
            variants.append((" (mean weight)", *mean_weight(counts, clusters)))
        if unweighted:
            plain = replace(votes, weight=None)
            plain_counts = counts_of(scenario, plain)
            variants.append(
                (" (unweighted)", plain_counts, cluster_cells(plain, plain_counts, scenario.cluster))
            )
        for suffix, used, grouped in variants:
            fit = fit_bt(used, spec=scenario.spec)
            if suffix != " (mean weight)":
                error = fit.rating - target[: args.models]
                squared_error["unweighted" if suffix else "weighted"] += float(error @ error)
            results: dict[str, Any] = {"sandwich": sandwich_intervals(used, fit=fit)}
            if grouped is not None:
                results["sandwich+cluster"] = sandwich_intervals(used, fit=fit, clusters=grouped)
            if not args.sandwich_only and suffix != " (unweighted)":
                results["bootstrap"] = bootstrap_ratings(
                    used, fit=fit, n_rounds=args.rounds, random_state=board, n_jobs=args.jobs
                )
                if grouped is not None:
                    results["bootstrap+cluster"] = bootstrap_ratings(
                        used,
                        fit=fit,
                        n_rounds=args.rounds,
                        random_state=board,
                        n_jobs=args.jobs,
                        clusters=grouped,
                    )
            for kind, result in results.items():
                low, high = _weighted_bounds(result, scenario.spec)
                hits[kind + suffix] += (low <= target) & (target <= high)
                widths[kind + suffix] += high - low
    m = args.models
    out: dict[str, Any] = {
        "scenario": scenario.name,
        "cluster": scenario.cluster or "none",
        "boards": args.boards,
        "median_weight_ratio": round(float(np.median(spreads)), 1),
        "rating_rmse": {
            k: round(float(np.sqrt(v / (args.boards * m))), 2) for k, v in squared_error.items() if v
        },
    }
    for kind in labels:
        rate = hits[kind] / args.boards
        width = widths[kind] / args.boards
        entry: dict[str, Any] = {}
        parts = [("ratings", slice(0, m), args.boards * m)]
        if len(target) > m:
            parts += [("position", slice(m, m + 1), args.boards), ("tie", slice(m + 1, m + 2), args.boards)]
        for name, where, n in parts:
            p = float(rate[where].mean())
            entry[name] = {
                "coverage": round(p, 4),
                "mc_se": round(float(np.sqrt(p * (1.0 - p) / n)), 4),
                "intervals": n,
                "mean_width": round(float(width[where].mean()), 3),
            }
        out[kind] = entry
    return out


def print_weighted(rows: list[dict[str, Any]]) -> bool:
    """The weighted table; whether every interval of the fix (not the mean-weight ones) is in 93-97%."""
    print(f"{'scenario':<8} {'interval':<32} {'param':<9} {'coverage':>8} {'mc_se':>6} {'n':>6} {'width':>8}")
    ok = True
    for row in rows:
        for kind, entry in row.items():
            if not isinstance(entry, dict) or kind == "rating_rmse":
                continue
            for name, c in entry.items():
                print(
                    f"{row['scenario']:<8} {kind:<32} {name:<9} {c['coverage']:>8.3f} {c['mc_se']:>6.3f}"
                    f" {c['intervals']:>6d} {c['mean_width']:>8.2f}"
                )
                if "mean weight" not in kind:
                    ok = ok and 0.93 <= c["coverage"] <= 0.97
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", type=int, default=3, help="boards per scenario (100 for the study)")
    parser.add_argument(
        "--scenario",
        choices=("all", "independent", "annotator", "prompt", "weighted", *WEIGHTED),
        default="all",
        help="all: the three clustered ones; weighted: the five weighted ones",
    )
    parser.add_argument("--before", action="store_true", help="weighted: also the old mean-weight intervals")
    parser.add_argument(
        "--unweighted", action="store_true", help="ipw: also the same votes fitted without their weights"
    )
    parser.add_argument("--sandwich-only", action="store_true", help="weighted: no bootstrap (fast)")
    parser.add_argument(
        "--intervals",
        type=int,
        default=0,
        help="weighted: boards enough for this many intervals of every parameter (overrides --boards)",
    )
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--votes", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--spread", type=float, default=150.0, help="half range of the true ratings (Elo)")
    parser.add_argument("--effect-scale", type=float, default=1.0, help="multiplies every cluster effect")
    parser.add_argument("--target-votes", type=int, default=2_000_000)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="exit 1 unless clustered coverage is 93-97%%")
    args = parser.parse_args(argv)
    if args.boards < 1 or args.rounds < 1 or args.models < 2 or args.votes < 1:
        parser.error("--boards, --rounds, --votes must be positive and --models at least 2")
    chosen = scenarios(args.effect_scale)
    start = time.perf_counter()
    if args.scenario == "weighted" or args.scenario in WEIGHTED:
        names = list(WEIGHTED) if args.scenario == "weighted" else [args.scenario]
        weighted_rows = []
        for name in names:
            weighted_rows.append(run_weighted(chosen[name], args))
            print(json.dumps(weighted_rows[-1]), flush=True)
        in_band = print_weighted(weighted_rows)
        print(
            json.dumps(
                {
                    "rounds": args.rounds,
                    "models": args.models,
                    "votes": args.votes,
                    "boards": args.boards,
                    "in_93_97": in_band,
                    "seconds": round(time.perf_counter() - start, 1),
                }
            )
        )
        return 1 if args.check and not in_band else 0
    names = [n for n in chosen if n not in WEIGHTED] if args.scenario == "all" else [args.scenario]
    rows = [run_scenario(chosen[name], args) for name in names]
    print(f"{'scenario':<12} {'interval':<18} {'ratings':>8} {'position':>9} {'tie':>6}  width(r, pos)")
    ok = True
    for row in rows:
        for kind in KINDS:
            c = row[kind]
            print(
                f"{row['scenario']:<12} {kind:<18} {c['ratings']:>8.3f} {c['position']:>9.3f}"
                f" {c['tie']:>6.3f}  {c['mean_rating_width']:.1f}, {c['position_width']:.1f}"
            )
            if kind.endswith("cluster"):
                ok = ok and all(0.93 <= c[p] <= 0.97 for p in PARAMS)
    summary = {
        "boards": args.boards,
        "rounds": args.rounds,
        "models": args.models,
        "votes": args.votes,
        "scenarios": rows,
        "clustered_in_93_97": ok,
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(summary))
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    raise SystemExit(main())
