"""Does the composite fit narrow the human-scale intervals without biasing the board? A simulation.

Three scenarios, each ``--replicates`` seeded boards: 20 models with ratings spread like a real board,
2,000 human votes, judge verdicts on 40,000 battles that include the human ones. A judge is steeper than
the humans, prefers the left answer (about 40 Elo) and its own three-model family (+80 Elo):

- ``single``: one judge (judge-human agreement without ties about 0.72);
- ``panel``: three judges of different steepness, bias and family;
- ``useless``: one judge whose verdicts are coin flips.

Unlike the composite's model, each judge sees every model's strength off the human rating by its own
deviation (``--deviation-elo``), and each battle has its own effect seen alike by humans and judges
(``--battle-elo``); both 0 make the composite's model true. The truth is what the human-only fit
estimates (:func:`human_target`).

Each board gets five fits: human votes only (the reference width), the composite
(:func:`leaderboard.composite.fit.fit_composite`, battle-clustered sandwich, each judge's deviations a random
effect with its spread ``tau`` estimated), the old composite without deviations, a pooled fit that treats
every judge verdict as one more independent human vote, and PPI++ (:mod:`leaderboard.composite.ppi`, what
``--rectify ppi`` publishes). Printed per scenario: the judge-human agreement on the shared battles (the
first judge's and the panel majority's), coverage of the truth by the 95% intervals, mean width relative
to human-only, the self-preferred family's mean rating error (composite and pooled), PPI++'s coverage,
width and lambda, the human-only coverage, the learned judge discrimination and position against the
generating ones, the old composite's coverage and width, and the mean estimated ``tau`` (Elo) over the
judges. The last line is one JSON document.

    .venv/bin/python scripts/composite_sim.py --replicates 200
    .venv/bin/python scripts/composite_sim.py --quick
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from leaderboard.composite.fit import fit_composite
from leaderboard.composite.model import CompositeData, CompositeOptions
from leaderboard.composite.ppi import fit_ppi, ppi_battles

FloatArray = npt.NDArray[np.float64]
UNIT = 400 / np.log(10)  # rating points per natural-log unit
N_MODELS = 20
SPREAD_ELO = 200.0  # standard deviation of the true ratings
FAMILY = (0, 1, 2)
OFF = CompositeOptions(
    discrimination=False, position=False, ties=False, self_preference=False, deviations=False
)


@dataclass(frozen=True)
class Judge:
    """A simulated judge. ``deviation_elo`` is the spread of its own taste: each board draws, per model,
    a deviation of that standard deviation from the human rating, which the judge sees instead (a judge
    that agreed with the humans on every model's strength would flatter the composite, which assumes
    exactly that)."""

    discrimination: float
    position_elo: float
    self_preference_elo: float
    family: tuple[int, ...]
    useless: bool = False
    deviation_elo: float = 0.0


BATTLE_ELO = 100.0  # a battle's own effect (prompt and answers), shared by humans and judges
DEVIATION_ELO = 50.0  # a judge's rating of a model off the human one by this much (correlation ~0.97)
SCENARIOS: dict[str, tuple[Judge, ...]] = {
    "single": (Judge(3.0, 40.0, 80.0, FAMILY, deviation_elo=DEVIATION_ELO),),
    "panel": (
        Judge(2.0, 40.0, 80.0, FAMILY, deviation_elo=DEVIATION_ELO),
        Judge(1.6, -25.0, 60.0, (3, 4, 5), deviation_elo=DEVIATION_ELO),
        Judge(2.5, 30.0, 0.0, (), deviation_elo=DEVIATION_ELO),
    ),
    "useless": (Judge(1.0, 0.0, 0.0, (), useless=True),),
}


def human_target(theta: FloatArray, battle_elo: float) -> FloatArray:
    """The ratings a human-only fit converges to (rating points, mean 1000): with a battle effect of
    spread ``battle_elo`` the humans' win chance on a pair is ``E sigmoid(theta_a - theta_b + e)``, which
    is not exactly Bradley-Terry in ``theta`` (it is flatter), so the target is the Bradley-Terry fit to
    those chances on every ordered pair (the sim draws pairs uniformly), by Gauss-Hermite quadrature."""
    if battle_elo <= 0:
        out: FloatArray = 1000 + UNIT * (theta - theta.mean())
        return out
    nodes, weights = np.polynomial.hermite_e.hermegauss(40)
    a, b = np.nonzero(~np.eye(N_MODELS, dtype=bool))
    diff = theta[a] - theta[b]
    chance = (1 / (1 + np.exp(-(diff[:, None] + nodes[None, :] * battle_elo / UNIT)))) @ weights
    chance /= weights.sum()
    fit = fit_composite(
        CompositeData(
            models=tuple(f"m{i}" for i in range(N_MODELS)),
            sources=("humans",),
            model_a=a.astype(np.int64),
            model_b=b.astype(np.int64),
            source=np.zeros(len(a), np.int64),
            score=chance,
            tie=np.zeros(len(a), dtype=bool),
        ),
        OFF,
        with_cov=False,
    )
    return fit.rating


def board(
    rng: np.random.Generator, judges: tuple[Judge, ...], n_human: int, n_judged: int, battle_elo: float
) -> tuple[CompositeData, FloatArray]:
    """One simulated board: human votes on the first ``n_human`` battles, every judge on all of them.
    Each battle has its own effect (spread ``battle_elo``: this prompt and these two answers favour one
    side), seen alike by the humans and the judges; that is what a judge's verdict can tell about the
    human vote on the same battle beyond the two models' ratings."""
    theta = rng.normal(0, SPREAD_ELO / UNIT, N_MODELS)
    a = rng.integers(0, N_MODELS, n_judged)
    b = (a + rng.integers(1, N_MODELS, n_judged)) % N_MODELS
    effect = rng.normal(0, battle_elo / UNIT, n_judged) if battle_elo > 0 else np.zeros(n_judged)
    rows_a, rows_b, rows_s, rows_y, rows_battle = (
        [a[:n_human]],
        [b[:n_human]],
        [np.zeros(n_human, np.int64)],
        [],
        [],
    )
    human_u = theta[a[:n_human]] - theta[b[:n_human]] + effect[:n_human]
    rows_y.append((rng.random(n_human) < 1 / (1 + np.exp(-human_u))).astype(float))
    rows_battle.append(np.arange(n_human))
    family: dict[int, str] = {}
    model_family: list[str | None] = [None] * N_MODELS
    for j, judge in enumerate(judges, start=1):
        member = np.isin(np.arange(N_MODELS), judge.family).astype(float)
        seen = theta + rng.normal(0, judge.deviation_elo / UNIT, N_MODELS)
        if judge.family:
            family[j] = f"family{j}"
            for k in judge.family:
                model_family[k] = f"family{j}"
        u = (
            seen[a]
            - seen[b]
            + effect
            + (judge.position_elo + judge.self_preference_elo * (member[a] - member[b])) / UNIT
        )
        p = np.full(n_judged, 0.5) if judge.useless else 1 / (1 + np.exp(-judge.discrimination * u))
        rows_a.append(a)
        rows_b.append(b)
        rows_s.append(np.full(n_judged, j, np.int64))
        rows_y.append((rng.random(n_judged) < p).astype(float))
        rows_battle.append(np.arange(n_judged))
    # one family per judge; the panel's families are disjoint
    return CompositeData(
        models=tuple(f"m{i}" for i in range(N_MODELS)),
        sources=("humans", *(f"judge:{j}" for j in range(1, len(judges) + 1))),
        model_a=np.concatenate(rows_a),
        model_b=np.concatenate(rows_b),
        source=np.concatenate(rows_s),
        score=np.concatenate(rows_y),
        tie=np.zeros(sum(len(r) for r in rows_a), dtype=bool),
        battle=np.concatenate(rows_battle),
        family=family,
        model_family=model_family,
    ), theta


def _subset(data: CompositeData, keep: npt.NDArray[np.bool_], battle: bool = True) -> CompositeData:
    return CompositeData(
        models=data.models,
        sources=data.sources,
        model_a=data.model_a[keep],
        model_b=data.model_b[keep],
        source=data.source[keep],
        score=data.score[keep],
        tie=data.tie[keep],
        battle=data.battle[keep] if battle and data.battle is not None else None,
        family=data.family,
        model_family=data.model_family,
    )


def _covered(low: FloatArray, high: FloatArray, truth: FloatArray) -> float:
    return float(np.mean((low <= truth) & (truth <= high)))


def replicate(
    name: str, r: int, n_human: int, n_judged: int, seed: int, battle_elo: float, deviation_elo: float
) -> dict[str, Any]:
    """One board of scenario ``name`` and its five fits: human-only, composite, old composite (no
    deviations), pooled and PPI++."""
    judges = tuple(
        judge if judge.useless else replace(judge, deviation_elo=deviation_elo) for judge in SCENARIOS[name]
    )
    rng = np.random.default_rng([seed, r, len(name)])
    data, theta = board(rng, judges, n_human, n_judged, battle_elo)
    truth = human_target(theta, battle_elo)
    human = data.source == 0
    human_fit = fit_composite(_subset(data, human), CompositeOptions(position=False, ties=False))
    comp = fit_composite(data, CompositeOptions(ties=False))
    old = fit_composite(data, CompositeOptions(ties=False, deviations=False))
    pooled = fit_composite(_subset(data, np.ones(len(data.source), dtype=np.bool_), battle=False), OFF)
    ppi = fit_ppi(ppi_battles(data))
    hlo, hhi = human_fit.intervals()
    human_width = float(np.mean(hhi - hlo))
    lo, hi = comp.intervals()
    plo, phi = ppi.intervals()
    fam = list(FAMILY)
    # judge-human agreement on the human battles (no ties here): the first judge, and the panel's majority
    first = data.score[data.source == 1][:n_human]
    verdicts = np.stack([data.score[data.source == j][:n_human] for j in range(1, len(judges) + 1)])
    majority = (verdicts.mean(axis=0) > 0.5).astype(float)
    out: dict[str, Any] = {
        "coverage": _covered(lo, hi, truth),
        "width_ratio": float(np.mean(hi - lo)) / human_width,
        "family_error_elo": float(np.mean(comp.rating[fam] - truth[fam])),
        "old_coverage": _covered(*old.intervals(), truth),
        "old_width_ratio": float(np.mean(np.diff(np.stack(old.intervals()), axis=0))) / human_width,
        "tau_elo": float(np.mean(comp.deviation_sd[1:])),
        "pooled_family_error_elo": float(np.mean(pooled.rating[fam] - truth[fam])),
        "pooled_coverage": _covered(*pooled.intervals(), truth),
        "ppi_coverage": _covered(plo, phi, truth),
        "ppi_width_ratio": float(np.mean(phi - plo)) / human_width,
        "ppi_lambda": ppi.lam,
        "human_coverage": _covered(hlo, hhi, truth),
        "agreement": float(np.mean(first == data.score[human])),
        "majority_agreement": float(np.mean(majority == data.score[human])),
        "discrimination_error": [
            float(comp.discrimination[j] - judge.discrimination)
            for j, judge in enumerate(judges, start=1)
            if not judge.useless
        ],
        "position_error_elo": [
            float(comp.position[j] - judge.position_elo)
            for j, judge in enumerate(judges, start=1)
            if not judge.useless
        ],
    }
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over replicates; the family error and the per-judge term errors as the absolute value of the
    mean (bias), the worst judge for the panel."""
    out: dict[str, Any] = {
        key: float(np.mean([row[key] for row in rows]))
        for key in rows[0]
        if key not in ("discrimination_error", "position_error_elo")
    }
    for key in ("family_error_elo", "pooled_family_error_elo"):
        out[key] = abs(out[key])
    for key in ("discrimination_error", "position_error_elo"):
        errors = np.array([row[key] for row in rows], dtype=float)
        out[key] = float(np.max(np.abs(errors.mean(axis=0)))) if errors.size else None
    return out


def _replicate_job(job: tuple[str, int, int, int, int, float, float]) -> dict[str, Any]:
    return replicate(*job)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--human-votes", type=int, default=2000)
    parser.add_argument("--judged", type=int, default=40000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--deviation-elo",
        type=float,
        default=DEVIATION_ELO,
        help="spread of each judge's own per-model deviations from the human ratings (0: the judges "
        "see the human ratings exactly)",
    )
    parser.add_argument(
        "--battle-elo",
        type=float,
        default=BATTLE_ELO,
        help="spread of a battle's own effect, seen alike by humans and judges (0: none)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes for the replicates")
    parser.add_argument("--quick", action="store_true", help="5 replicates, 8,000 judged battles")
    args = parser.parse_args(argv)
    if args.quick:
        args.replicates, args.judged = 5, 8000
    if args.replicates < 1 or not 0 < args.human_votes <= args.judged:
        parser.error("need replicates >= 1 and 0 < human votes <= judged battles")
    if args.jobs < 1:
        parser.error("need jobs >= 1")
    results: dict[str, dict[str, Any]] = {}
    start = time.perf_counter()
    print(
        f"{'scenario':<9} {'agree':>6} {'major':>6} {'cover':>6} {'width':>6} {'fam_err':>8} "
        f"{'pooled_fam':>10} {'pooled_cov':>10} {'ppi_cov':>8} {'ppi_width':>9} {'ppi_lam':>7} "
        f"{'human_cov':>9} {'disc_err':>8} {'pos_err':>8} {'old_cov':>7} {'old_wid':>7} {'tau':>5}"
    )
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for name in SCENARIOS:
            jobs = [
                (name, r, args.human_votes, args.judged, args.seed, args.battle_elo, args.deviation_elo)
                for r in range(args.replicates)
            ]
            rows = list(pool.map(_replicate_job, jobs)) if args.jobs > 1 else [replicate(*j) for j in jobs]
            res = summarise(rows)
            results[name] = res
            print(
                f"{name:<9} {res['agreement']:>6.3f} {res['majority_agreement']:>6.3f} "
                f"{res['coverage']:>6.3f} {res['width_ratio']:>6.3f} "
                f"{res['family_error_elo']:>8.1f} {res['pooled_family_error_elo']:>10.1f} "
                f"{res['pooled_coverage']:>10.3f} {res['ppi_coverage']:>8.3f} "
                f"{res['ppi_width_ratio']:>9.3f} {res['ppi_lambda']:>7.2f} {res['human_coverage']:>9.3f} "
                f"{_fmt(res['discrimination_error']):>8} {_fmt(res['position_error_elo']):>8} "
                f"{res['old_coverage']:>7.3f} {res['old_width_ratio']:>7.3f} {res['tau_elo']:>5.1f}",
                flush=True,
            )
    print(
        f"# judges' own deviations {args.deviation_elo:g} Elo, battle effects {args.battle_elo:g} Elo; "
        f"coverage of the human-only target"
    )
    print(f"# {args.replicates} replicates per scenario, {time.perf_counter() - start:.0f} s")
    keys = (
        "coverage",
        "width_ratio",
        "family_error_elo",
        "pooled_coverage",
        "ppi_coverage",
        "ppi_width_ratio",
        "old_coverage",
        "old_width_ratio",
        "tau_elo",
    )
    print(json.dumps({"scenarios": {k: {key: v[key] for key in keys} for k, v in results.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
