"""Does the composite fit narrow the human-scale intervals without biasing the board? A simulation.

Three scenarios, each ``--replicates`` seeded boards: 20 models with ratings spread like a real board,
2,000 human votes, judge verdicts on 40,000 battles that include the human ones. A judge is steeper than
the humans, prefers the left answer (about 40 Elo) and its own three-model family (+80 Elo):

- ``single``: one judge (judge-human agreement without ties about 0.72);
- ``panel``: three judges of different steepness, bias and family;
- ``useless``: one judge whose verdicts are coin flips.

Each board gets three fits: human votes only (the reference width), the composite
(:func:`leaderboard.composite.fit_composite`, battle-clustered sandwich), and a pooled fit that treats
every judge verdict as one more independent human vote. Printed per scenario: coverage of the true
ratings by the 95% intervals, mean width relative to human-only, the self-preferred family's mean rating
error (composite and pooled), the learned judge discrimination and position against the truth. The last
line is one JSON document.

    .venv/bin/python scripts/composite_sim.py --replicates 200
    .venv/bin/python scripts/composite_sim.py --quick
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from leaderboard.composite import CompositeData, CompositeOptions, fit_composite

FloatArray = npt.NDArray[np.float64]
UNIT = 400 / np.log(10)  # rating points per natural-log unit
N_MODELS = 20
SPREAD_ELO = 200.0  # standard deviation of the true ratings
FAMILY = (0, 1, 2)
OFF = CompositeOptions(discrimination=False, position=False, ties=False, self_preference=False)


@dataclass(frozen=True)
class Judge:
    discrimination: float
    position_elo: float
    self_preference_elo: float
    family: tuple[int, ...]
    useless: bool = False


SCENARIOS: dict[str, tuple[Judge, ...]] = {
    "single": (Judge(2.5, 40.0, 80.0, FAMILY),),
    "panel": (
        Judge(1.6, 40.0, 80.0, FAMILY),
        Judge(1.3, -25.0, 60.0, (3, 4, 5)),
        Judge(2.0, 30.0, 0.0, ()),
    ),
    "useless": (Judge(1.0, 0.0, 0.0, (), useless=True),),
}


def board(
    rng: np.random.Generator, judges: tuple[Judge, ...], n_human: int, n_judged: int
) -> tuple[CompositeData, FloatArray]:
    """One simulated board: human votes on the first ``n_human`` battles, every judge on all of them."""
    theta = rng.normal(0, SPREAD_ELO / UNIT, N_MODELS)
    a = rng.integers(0, N_MODELS, n_judged)
    b = (a + rng.integers(1, N_MODELS, n_judged)) % N_MODELS
    rows_a, rows_b, rows_s, rows_y, rows_battle = (
        [a[:n_human]],
        [b[:n_human]],
        [np.zeros(n_human, np.int64)],
        [],
        [],
    )
    rows_y.append(
        (rng.random(n_human) < 1 / (1 + np.exp(-(theta[a[:n_human]] - theta[b[:n_human]])))).astype(float)
    )
    rows_battle.append(np.arange(n_human))
    family: dict[int, str] = {}
    model_family: list[str | None] = [None] * N_MODELS
    for j, judge in enumerate(judges, start=1):
        member = np.isin(np.arange(N_MODELS), judge.family).astype(float)
        if judge.family:
            family[j] = f"family{j}"
            for k in judge.family:
                model_family[k] = f"family{j}"
        u = (
            theta[a]
            - theta[b]
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


def run(name: str, replicates: int, n_human: int, n_judged: int, seed: int) -> dict[str, Any]:
    judges = SCENARIOS[name]
    cover: list[float] = []
    pooled_cover: list[float] = []
    widths: list[float] = []
    fam_err: list[float] = []
    pooled_fam_err: list[float] = []
    disc_err: list[float] = []
    pos_err: list[float] = []
    agree: list[float] = []
    for r in range(replicates):
        rng = np.random.default_rng([seed, r, len(name)])
        data, theta = board(rng, judges, n_human, n_judged)
        truth = 1000 + UNIT * (theta - theta.mean())
        human = data.source == 0
        human_fit = fit_composite(_subset(data, human), CompositeOptions(position=False, ties=False))
        comp = fit_composite(data, CompositeOptions(ties=False))
        pooled_data = _subset(data, np.ones(len(data.source), dtype=np.bool_), battle=False)
        pooled = fit_composite(pooled_data, OFF)
        lo, hi = comp.intervals()
        cover.append(float(np.mean((lo <= truth) & (truth <= hi))))
        plo, phi = pooled.intervals()
        pooled_cover.append(float(np.mean((plo <= truth) & (truth <= phi))))
        hlo, hhi = human_fit.intervals()
        widths.append(float(np.mean(hi - lo) / np.mean(hhi - hlo)))
        fam = list(FAMILY)
        fam_err.append(float(np.mean(comp.rating[fam] - truth[fam])))
        pooled_fam_err.append(float(np.mean(pooled.rating[fam] - truth[fam])))
        first = data.source == 1
        agree.append(float(np.mean(data.score[first][:n_human] == data.score[human])))
        for j, judge in enumerate(judges, start=1):
            if not judge.useless:
                disc_err.append(float(comp.discrimination[j] - judge.discrimination))
                pos_err.append(float(comp.position[j] - judge.position_elo))
    return {
        "coverage": float(np.mean(cover)),
        "width_ratio": float(np.mean(widths)),
        "family_error_elo": float(abs(np.mean(fam_err))),
        "pooled_family_error_elo": float(abs(np.mean(pooled_fam_err))),
        "pooled_coverage": float(np.mean(pooled_cover)),
        "agreement": float(np.mean(agree)),
        "discrimination_error": float(np.max(np.abs(np.mean(np.array(disc_err).reshape(replicates, -1), 0))))
        if disc_err
        else None,
        "position_error_elo": float(np.max(np.abs(np.mean(np.array(pos_err).reshape(replicates, -1), 0))))
        if pos_err
        else None,
    }


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--human-votes", type=int, default=2000)
    parser.add_argument("--judged", type=int, default=40000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="5 replicates, 8,000 judged battles")
    args = parser.parse_args(argv)
    if args.quick:
        args.replicates, args.judged = 5, 8000
    if args.replicates < 1 or not 0 < args.human_votes <= args.judged:
        parser.error("need replicates >= 1 and 0 < human votes <= judged battles")
    results: dict[str, dict[str, Any]] = {}
    start = time.perf_counter()
    print(
        f"{'scenario':<9} {'agree':>6} {'cover':>6} {'width':>6} {'fam_err':>8} {'pooled_fam':>10} "
        f"{'pooled_cov':>10} {'disc_err':>8} {'pos_err':>8}"
    )
    for name in SCENARIOS:
        res = run(name, args.replicates, args.human_votes, args.judged, args.seed)
        results[name] = res
        print(
            f"{name:<9} {res['agreement']:>6.3f} {res['coverage']:>6.3f} {res['width_ratio']:>6.3f} "
            f"{res['family_error_elo']:>8.1f} {res['pooled_family_error_elo']:>10.1f} "
            f"{res['pooled_coverage']:>10.3f} {_fmt(res['discrimination_error']):>8} "
            f"{_fmt(res['position_error_elo']):>8}"
        )
    print(f"# {args.replicates} replicates per scenario, {time.perf_counter() - start:.0f} s")
    keys = ("coverage", "width_ratio", "family_error_elo", "pooled_coverage")
    print(json.dumps({"scenarios": {k: {key: v[key] for key in keys} for k, v in results.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
