"""Simulate the published attacks on an arena's votes and measure the voter review that defends against them.

The honest crowd: ``--honest`` annotators with heavy-tailed activity (log-normal battles seen), each with
a personal taste for every model (normal, sd ``--taste-sd`` Elo), a personal side bias (normal, sd
``--side-sd`` Elo, around a crowd-wide left advantage), ties at a common rate, and a personal skip rate
(beta, mean 0.15) that does not depend on what is shown. About 4% of them share a network with a few
others (a campus, a household). Each scenario adds one attack, sized to move the target by about one
rank (a model in the lower half; one rank is the gap to the model above it):

* ``sybil``: many fresh accounts behind a few networks, each voting for the target when a 95%-accurate
  detector says it is on screen and skipping every other battle (target-only voting, as in Min et al.,
  2025, "Improving your model ranking on Chatbot Arena by vote rigging");
* ``omnipresent``: accounts that vote on every battle, for the target, against the three models just
  above it, and like the crowd otherwise (the omnipresent rigging of the same paper);
* ``deanon``: voters like the crowd except that they recognise the target's answers 90% of the time and
  then vote for it (Huang et al., 2025, "Exploring and mitigating adversarial manipulation of
  voting-based leaderboards");
* ``left_bots`` and ``random_bots``: accounts that always pick the left answer, or an outcome at random.

The defence is :func:`leaderboard.quality.voter_review.review_voters`, the procedure ``arena annotators``
runs: test every annotator and every address group, refit without the flagged, test again; the published
board is the fit without the flagged votes, the robust board the fit with every vote weighted by its
annotator's posterior probability of being honest. Printed per scenario (means over seeds; the worst seed
where a target is a bound): the target's move against the model above it with the defence off, on and
robust, the share of the move cut, the attackers caught, the honest annotators with >= 20 votes flagged,
and how far the honest crowd's own board moves when the falsely flagged honest votes are left out. The
last line is one JSON document.

    .venv/bin/python scripts/sim_manipulation.py --seeds 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leaderboard.data import Outcome  # noqa: E402
from leaderboard.quality.annotators import FlagRule  # noqa: E402
from leaderboard.quality.voter_review import fit_ratings, review_voters  # noqa: E402

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

SCENARIOS = ("honest", "sybil", "omnipresent", "deanon", "left_bots", "random_bots")
TARGETED = ("sybil", "omnipresent", "deanon")
NATS_PER_ELO = np.log(10.0) / 400.0
TIE_RATE = 0.15
CROWD_LEFT_ELO = 15.0
DETECTOR_ACCURACY = 0.95
RECOGNITION = 0.90


@dataclass
class Votes:
    annotator: IntArray
    model_a: IntArray
    model_b: IntArray
    outcome: IntArray
    address: IntArray
    skipped: tuple[IntArray, IntArray, IntArray]
    attacker: npt.NDArray[np.bool_]  # per annotator id


@dataclass
class Population:
    """Annotators' personal parameters, indexed by annotator id."""

    taste: FloatArray  # (n, models) Elo
    side: FloatArray  # Elo
    skip: FloatArray  # probability of skipping a battle


def _pairs(rng: np.random.Generator, n: int, n_models: int) -> tuple[IntArray, IntArray]:
    a = rng.integers(0, n_models, n)
    b = (a + rng.integers(1, n_models, n)) % n_models
    return a.astype(np.int64), b.astype(np.int64)


def _honest_outcomes(
    rng: np.random.Generator, who: IntArray, a: IntArray, b: IntArray, truth: FloatArray, pop: Population
) -> IntArray:
    diff = truth[a] + pop.taste[who, a] - truth[b] - pop.taste[who, b] + CROWD_LEFT_ELO + pop.side[who]
    p_left = (1.0 - TIE_RATE) / (1.0 + np.exp(-diff * NATS_PER_ELO))
    draw = rng.random(who.size)
    out = np.where(
        draw < p_left, Outcome.MODEL_A, np.where(draw < 1.0 - TIE_RATE, Outcome.MODEL_B, Outcome.TIE)
    )
    return out.astype(np.int64)


def _population(rng: np.random.Generator, n: int, n_models: int, args: argparse.Namespace) -> Population:
    return Population(
        taste=rng.normal(0.0, args.taste_sd, (n, n_models)),
        side=rng.normal(0.0, args.side_sd, n),
        skip=rng.beta(1.5, 8.5, n),
    )


def simulate(rng: np.random.Generator, scenario: str, args: argparse.Namespace, truth: FloatArray) -> Votes:
    """Battles shown to the honest crowd and to one scenario's attackers; the skipped ones kept apart."""
    m = truth.size
    target = args.target
    rivals = np.arange(target - 3, target)
    sizes = {
        "honest": (0, 0),
        "sybil": (args.sybils, args.sybil_seen),
        "omnipresent": (args.riggers, args.rigger_seen),
        "deanon": (args.deanon, args.deanon_seen),
        "left_bots": (args.bots, 0),
        "random_bots": (args.bots, 0),
    }
    n_bad, seen_each = sizes[scenario]
    bad_seen = (
        rng.integers(args.bot_min, args.bot_max + 1, n_bad)
        if "bots" in scenario
        else np.full(n_bad, seen_each)
    )
    # Honest activity: heavy-tailed battles seen, scaled so the whole board has about --votes votes.
    activity = rng.lognormal(0.0, args.activity_sigma, args.honest)
    honest_budget = max(args.votes - _expected_attack_votes(scenario, int(bad_seen.sum()), m), args.honest)
    honest_seen = np.maximum(1, np.round(activity / activity.sum() * honest_budget / 0.85)).astype(np.int64)
    seen = np.concatenate([honest_seen, bad_seen]).astype(np.int64)
    n_people = seen.size
    attacker = np.arange(n_people) >= args.honest
    pop = _population(rng, n_people, m, args)
    who = np.repeat(np.arange(n_people), seen)
    a, b = _pairs(rng, who.size, m)
    outcome = _honest_outcomes(rng, who, a, b, truth, pop)
    voted = rng.random(who.size) >= pop.skip[who]

    # Networks: honest annotators mostly alone; a few share one with 1-5 others.
    address = np.arange(n_people, dtype=np.int64)
    shared = np.flatnonzero(rng.random(args.honest) < 0.04)
    address[shared] = n_people + rng.integers(0, max(1, shared.size // 3), shared.size)

    bad_vote = attacker[who]
    has_target = (a == target) | (b == target)
    if scenario == "sybil":
        fires = np.where(
            has_target, rng.random(who.size) < DETECTOR_ACCURACY, rng.random(who.size) > DETECTOR_ACCURACY
        )
        # A false alarm names a side at random; a true one names the target's side.
        left_named = np.where(has_target, a == target, rng.random(who.size) < 0.5)
        voted = np.where(bad_vote, fires, voted)
        outcome = np.where(bad_vote, np.where(left_named, Outcome.MODEL_A, Outcome.MODEL_B), outcome)
        address[attacker] = 2 * n_people + rng.integers(0, args.sybil_networks, int(attacker.sum()))
    elif scenario == "omnipresent":
        voted = np.where(bad_vote, True, voted)
        rival_a, rival_b = np.isin(a, rivals), np.isin(b, rivals)
        rigged = np.where(
            a == target,
            Outcome.MODEL_A,
            np.where(
                b == target,
                Outcome.MODEL_B,
                np.where(
                    rival_a & ~rival_b,
                    Outcome.MODEL_B,
                    np.where(rival_b & ~rival_a, Outcome.MODEL_A, outcome),
                ),
            ),
        )
        outcome = np.where(bad_vote, rigged, outcome)
    elif scenario == "deanon":
        recognised = has_target & (rng.random(who.size) < RECOGNITION)
        forced = np.where(a == target, Outcome.MODEL_A, Outcome.MODEL_B)
        outcome = np.where(bad_vote & recognised, forced, outcome)
    elif scenario == "left_bots":
        voted = np.where(bad_vote, True, voted)
        outcome = np.where(bad_vote, Outcome.MODEL_A, outcome)
    elif scenario == "random_bots":
        voted = np.where(bad_vote, True, voted)
        outcome = np.where(bad_vote, rng.integers(0, 3, who.size), outcome)
    outcome = outcome.astype(np.int64)
    return Votes(
        annotator=who[voted],
        model_a=a[voted],
        model_b=b[voted],
        outcome=outcome[voted],
        address=address[who[voted]],
        skipped=(who[~voted], a[~voted], b[~voted]),
        attacker=attacker,
    )


def _expected_attack_votes(scenario: str, seen: int, n_models: int) -> int:
    if scenario == "sybil":
        p_target = 2.0 / n_models
        return int(seen * (p_target * DETECTOR_ACCURACY + (1 - p_target) * (1 - DETECTOR_ACCURACY)))
    if scenario == "deanon":
        return int(seen * 0.85)
    return seen


def _gap(r: FloatArray, target: int) -> float:
    """The target's rating minus that of the model one rank above it in the truth."""
    return float(r[target] - r[target - 1])


def _centre(r: FloatArray) -> FloatArray:
    centred: FloatArray = r - r.mean()
    return centred


def run_once(args: argparse.Namespace, scenario: str, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    m = args.models
    truth = np.linspace(1000.0 + args.spacing * (m - 1) / 2, 1000.0 - args.spacing * (m - 1) / 2, m)
    v = simulate(rng, scenario, args, truth)
    rule = FlagRule(alpha=args.alpha, min_votes=args.min_votes)
    review = review_voters(
        v.annotator, v.model_a, v.model_b, v.outcome, m, skipped=v.skipped, address=v.address, rule=rule
    )
    ids = review.stats.annotators
    flagged_ids = set(ids[review.flagged].tolist())
    weight_of = np.ones(v.attacker.size)
    weight_of[ids] = review.weights
    honest_vote = ~v.attacker[v.annotator]
    flagged_vote = np.isin(v.annotator, list(flagged_ids))

    def fit(keep: npt.NDArray[np.bool_], weight: FloatArray | None = None) -> FloatArray:
        w = None if weight is None else weight[keep]
        return fit_ratings(v.model_a[keep], v.model_b[keep], v.outcome[keep], m, weight=w)

    everything = np.ones(v.annotator.size, dtype=bool)
    r_honest = fit(honest_vote)
    r_off = fit(everything)
    r_on = fit(~flagged_vote)
    r_robust = fit(everything, weight_of[v.annotator])
    r_honest_published = fit(honest_vote & ~flagged_vote)

    n_votes = np.bincount(v.annotator, minlength=v.attacker.size)
    honest_ids = np.flatnonzero(~v.attacker)
    tested = honest_ids[n_votes[honest_ids] >= args.min_votes]
    flagged = np.zeros(v.attacker.size, dtype=bool)
    flagged[list(flagged_ids)] = True
    bad_ids = np.flatnonzero(v.attacker)
    out = {
        "votes": float(v.annotator.size),
        "attack_votes": float((~honest_vote).sum()),
        "attackers": float(bad_ids.size),
        "honest_tested": float(tested.size),
        "honest_flagged_rate": float(flagged[tested].mean()) if tested.size else 0.0,
        "honest_flagged_any": float(flagged[honest_ids].mean()),
        "attackers_caught": float(flagged[bad_ids].mean()) if bad_ids.size else float("nan"),
        "attack_votes_removed": float(flagged_vote[~honest_vote].mean())
        if (~honest_vote).any()
        else float("nan"),
        "rank_gap": float(args.spacing),
        "shift_off": _gap(r_off, args.target) - _gap(r_honest, args.target),
        "shift_on": _gap(r_on, args.target) - _gap(r_honest, args.target),
        "shift_robust": _gap(r_robust, args.target) - _gap(r_honest, args.target),
        # The honest crowd's board with the falsely flagged honest votes left out, against all of them.
        "honest_board_move": float(np.max(np.abs(_centre(r_honest_published) - _centre(r_honest)))),
        "robust_board_move": (
            float(np.max(np.abs(_centre(r_robust) - _centre(r_honest))))
            if scenario == "honest"
            else float("nan")
        ),
    }
    if scenario != "honest":
        off = abs(out["shift_off"])
        out["cut_on"] = 1.0 - abs(out["shift_on"]) / off if off > 0 else float("nan")
        out["cut_robust"] = 1.0 - abs(out["shift_robust"]) / off if off > 0 else float("nan")
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--spacing", type=float, default=30.0, help="Elo between neighbouring models")
    parser.add_argument("--target", type=int, default=8, help="index of the target (0 is the best)")
    parser.add_argument("--votes", type=int, default=30_000, help="votes on the board, attack included")
    parser.add_argument("--honest", type=int, default=2_000, help="honest annotators")
    parser.add_argument("--activity-sigma", type=float, default=1.3, help="log-sd of honest activity")
    parser.add_argument("--taste-sd", type=float, default=70.0)
    parser.add_argument("--side-sd", type=float, default=40.0)
    parser.add_argument("--sybils", type=int, default=60)
    parser.add_argument("--sybil-seen", type=int, default=40, help="battles each sybil is shown")
    parser.add_argument("--sybil-networks", type=int, default=6)
    parser.add_argument("--riggers", type=int, default=7)
    parser.add_argument("--rigger-seen", type=int, default=200)
    parser.add_argument("--deanon", type=int, default=10)
    parser.add_argument("--deanon-seen", type=int, default=250)
    parser.add_argument("--bots", type=int, default=30)
    parser.add_argument("--bot-min", type=int, default=60, help="fewest votes of a bot")
    parser.add_argument("--bot-max", type=int, default=200, help="most votes of a bot")
    parser.add_argument("--alpha", type=float, default=FlagRule().alpha)
    parser.add_argument("--min-votes", type=int, default=FlagRule().min_votes)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    args = parser.parse_args(argv)
    if not 3 <= args.target < args.models:
        parser.error("--target must leave three models above it")
    unknown = set(args.scenarios.split(",")) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {sorted(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    table: dict[str, dict[str, float]] = {}
    print(
        f"{args.seeds} seed(s); {args.models} models {args.spacing:g} Elo apart, target #{args.target + 1}; "
        f"~{args.votes} votes; {args.honest} honest annotators (taste sd {args.taste_sd:g}, side sd "
        f"{args.side_sd:g} Elo)"
    )
    header = (
        f"{'scenario':>12} {'attackers':>9} {'att.votes':>9} {'ranks off':>9} {'shift off':>9} "
        f"{'on':>6} {'robust':>6} {'cut':>5} {'cut rob':>7} {'caught':>6} {'honest fl.':>10} "
        f"{'honest board':>12}"
    )
    print(header)
    for scenario in args.scenarios.split(","):
        runs = [run_once(args, scenario, args.seed + i) for i in range(args.seeds)]
        row = {key: float(np.mean([r[key] for r in runs])) for key in runs[0]}
        row["honest_flagged_rate_max"] = max(r["honest_flagged_rate"] for r in runs)
        row["honest_board_move_max"] = max(r["honest_board_move"] for r in runs)
        if scenario != "honest":
            row["attackers_caught_min"] = min(r["attackers_caught"] for r in runs)
            row["cut_on_min"] = min(r["cut_on"] for r in runs)
            row["cut_robust_min"] = min(r["cut_robust"] for r in runs)
        table[scenario] = row
        cut = f"{row['cut_on_min']:5.2f}" if scenario in TARGETED else f"{'-':>5}"
        cut_r = f"{row['cut_robust_min']:7.2f}" if scenario in TARGETED else f"{'-':>7}"
        print(
            f"{scenario:>12} {row['attackers']:9.0f} {row['attack_votes']:9.0f} "
            f"{row['shift_off'] / args.spacing:9.2f} {row['shift_off']:+9.1f} {row['shift_on']:+6.1f} "
            f"{row['shift_robust']:+6.1f} {cut} {cut_r} "
            f"{row.get('attackers_caught_min', float('nan')):6.2f} {row['honest_flagged_rate_max']:10.4f} "
            f"{row['honest_board_move_max']:12.2f}"
        )
    print(
        "shift: the target's move against the model above it (Elo, mean over seeds); cut, caught, honest "
        "flagged (share of honest annotators with >= "
        f"{args.min_votes} votes) and honest board (largest move of any model, Elo): worst seed"
    )
    print(f"wall {time.perf_counter() - started:.1f} s")
    clean = {
        s: {k: (None if np.isnan(x) else round(x, 4)) for k, x in row.items()} for s, row in table.items()
    }
    print(json.dumps({"seeds": args.seeds, "scenarios": clean}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
