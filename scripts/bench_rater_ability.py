"""Benchmark the rater-ability fit against the unweighted davidson-position fit on the same votes.

Annotators draw their discrimination from a log-normal (log-sd ``--spread``); both fits run side by side
in this process on a seeded train/test split. Printed: each fit's wall seconds (median over
``--repeats``) and their ratio, the Newton trust-region iterations, how well the fitted discriminations
follow the true ones (correlation of the logs), and both models' held-out log-loss with their difference.

    .venv/bin/python scripts/bench_rater_ability.py --votes 1000000 --models 50 --annotators 2000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Literal

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _bench_common import emit_json_line, machine_info, print_table  # noqa: E402

from leaderboard import BTSpec, fit_bt, predict_proba, simulate_battles  # noqa: E402
from leaderboard.evaluation.calibration import vote_log_losses  # noqa: E402
from leaderboard.evaluation.held_out import split_battles  # noqa: E402
from leaderboard.quality.rater_ability import fit_rater_ability, rater_ability_proba  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--votes", type=int, default=100_000)
    parser.add_argument("--models", type=int, default=30)
    parser.add_argument("--annotators", type=int, default=500)
    parser.add_argument("--spread", type=float, default=0.4, help="log-sd of the true discriminations")
    parser.add_argument(
        "--side-spread", type=float, default=0.0, help="sd (Elo) of each annotator's own side bias"
    )
    parser.add_argument(
        "--position-sd",
        default="none",
        help="the fit's per-annotator position offsets: none, estimate, or a fixed prior sd in nats",
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if (
        min(args.votes, args.models - 1, args.annotators, args.repeats) < 1
        or min(args.spread, args.side_spread) < 0
    ):
        parser.error("sizes must be positive (and --models at least 2), spreads not negative")
    position_sd: float | Literal["estimate"] | None
    if args.position_sd in ("none", "estimate"):
        position_sd = None if args.position_sd == "none" else "estimate"
    else:
        try:
            position_sd = float(args.position_sd)
        except ValueError:
            parser.error("--position-sd must be none, estimate or a number")
    rng = np.random.default_rng(args.seed)
    truth = rng.normal(1000, 150, args.models)
    disc = np.exp(rng.normal(0.0, args.spread, args.annotators))
    sim = simulate_battles(
        truth,
        args.votes,
        random_state=args.seed + 1,
        position=30,
        nu=0.4,
        n_annotators=args.annotators,
        annotator_discrimination=disc,
        annotator_position_sd=args.side_spread,
    )
    train, test = split_battles(sim, test_fraction=0.2, random_state=args.seed)
    spec = BTSpec(position="common", ties="davidson")
    plain_s: list[float] = []
    rater_s: list[float] = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        plain = fit_bt(train.counts(), spec=spec)
        plain_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        fit = fit_rater_ability(train, standard_errors=False, position_sd=position_sd)
        rater_s.append(time.perf_counter() - start)
    fitted = np.log(fit.discrimination)
    true_log = np.log(disc[fit.annotators])
    corr = float(np.corrcoef(fitted, true_log)[0, 1]) if fitted.size > 1 else float("nan")
    loss_plain = float(vote_log_losses(predict_proba(plain, test.model_a, test.model_b), test.outcome).mean())
    loss_rater = float(vote_log_losses(rater_ability_proba(fit, test), test.outcome).mean())
    figures = {
        "votes": args.votes,
        "models": args.models,
        "annotators": args.annotators,
        "davidson_position_s": statistics.median(plain_s),
        "rater_ability_s": statistics.median(rater_s),
        "ratio": statistics.median(rater_s) / statistics.median(plain_s),
        "iterations": fit.n_iter,
        "position_sd": args.position_sd,
        "fitted_position_sd": fit.position_sd,
        "log_discrimination_corr": corr,
        "test_log_loss_davidson_position": loss_plain,
        "test_log_loss_rater_ability": loss_rater,
        "log_loss_gain": loss_plain - loss_rater,
        **machine_info(),
    }
    print_table(
        ["fit", "seconds", "held-out log-loss"],
        [
            ["davidson-position", round(figures["davidson_position_s"], 3), round(loss_plain, 5)],
            ["rater-ability", round(figures["rater_ability_s"], 3), round(loss_rater, 5)],
        ],
    )
    print(
        f"ratio {figures['ratio']:.1f}x, {fit.n_iter} Newton iterations, "
        f"corr(log a fitted, true) {corr:.3f}, load {figures['load_avg_1m']}"
    )
    emit_json_line(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
