"""Coverage of 95% intervals on simulated boards, with votes independent or clustered by annotator or prompt.

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
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from leaderboard import (
    BTSpec,
    bootstrap_ratings,
    cluster_cells,
    fit_bt,
    sandwich_intervals,
    simulate_battles,
)

SPEC = BTSpec(position="common", ties="davidson")
POSITION = 50.0
NU = 0.5
PARAMS = ("ratings", "position", "tie")
KINDS = ("bootstrap", "bootstrap+cluster", "sandwich", "sandwich+cluster")


@dataclass(frozen=True)
class Scenario:
    name: str
    cluster: str
    options: dict[str, Any]


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
    }


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", type=int, default=3, help="boards per scenario (100 for the study)")
    parser.add_argument("--scenario", choices=("all", "independent", "annotator", "prompt"), default="all")
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
    names = list(chosen) if args.scenario == "all" else [args.scenario]
    start = time.perf_counter()
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
