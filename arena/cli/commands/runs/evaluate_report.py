"""What `arena evaluate` reports: the comparison table, the verdict, the rows as JSON, the calibration plot.

:mod:`arena.cli.commands.runs.evaluate` scores the systems on held-out votes; this module lays the scores
out for the console (the best value of each score in bold, the verdict in one sentence, each annotator's
position term) and writes ``evaluate.json`` and the calibration plot of the best few systems.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from leaderboard.evaluation.held_out import MethodScore
    from leaderboard.evaluation.systems import Verdict

__all__ = [
    "N_PLOTTED",
    "annotator_positions_text",
    "left_out_text",
    "render_table",
    "row_dicts",
    "verdict_text",
    "write_out",
]

#: Systems drawn in the calibration plot: the best few by test log-loss (more would not be legible).
N_PLOTTED = 6


def _extras_text(row: MethodScore) -> str:
    parts = []
    for name, v in row.parameters_fitted.items():
        short = name.replace("position_advantage_elo", "left").replace("tie_propensity_nu", "nu")
        short = short.replace("tie_threshold_tau", "tau")
        short = short.replace("style_", "").replace("_elo", "")
        parts.append(f"{short} {v['value']:.3g} [{v['ci_low']:.3g}, {v['ci_high']:.3g}]")
    return "; ".join(parts)


def render_table(rows: list[MethodScore], *, title: str) -> Table:
    """The comparison table; the best value of each score is in bold."""
    table = Table(title=title)
    columns = ("system", "kind", "log-loss", "Brier", "accuracy", "AUC", "scale", "AIC", "BIC", "k")
    for column in (*columns, "fitted extras [95% CI]"):
        table.add_column(
            column, justify="left" if column in ("system", "kind", "fitted extras [95% CI]") else "right"
        )
    best = {
        "log_loss": min(r.log_loss for r in rows),
        "brier": min(r.brier for r in rows),
        "accuracy": max(r.accuracy for r in rows),
        "auc": max((r.auc for r in rows if math.isfinite(r.auc)), default=math.nan),
        "aic": min(r.aic for r in rows if r.kind == "batch"),
        "bic": min(r.bic for r in rows if r.kind == "batch"),
    }

    def cell(row: MethodScore, key: str, fmt: str) -> str:
        value = getattr(row, key)
        text = format(value, fmt)
        return f"[bold]{text}[/bold]" if value == best[key] else text

    for r in sorted(rows, key=lambda row: row.log_loss):
        table.add_row(
            r.method,
            r.kind,
            cell(r, "log_loss", ".4f"),
            cell(r, "brier", ".4f"),
            cell(r, "accuracy", ".4f"),
            cell(r, "auc", ".4f"),
            f"{r.fitted_scale:.0f}",
            cell(r, "aic", ".1f"),
            cell(r, "bic", ".1f"),
            str(r.n_params),
            _extras_text(r),
        )
    return table


def verdict_text(verdict: Verdict) -> str:
    """One sentence: which system forecasts best and by how much, with the paired interval."""
    return (
        (
            f"Best: {verdict.winner} (log-loss {verdict.winner_log_loss:.4f}); runner-up {verdict.runner_up} "
            f"({verdict.runner_up_log_loss:.4f}): {verdict.difference:.4f} nats per vote worse, "
            f"{verdict.level:.0%} paired bootstrap interval [{verdict.ci_low:.4f}, {verdict.ci_high:.4f}] "
            f"over {verdict.n_test} test votes."
        )
        + "".join(
            f"\n  vs {name}: {d:.4f} [{lo:.4f}, {hi:.4f}]"
            for name, (d, lo, hi) in verdict.margins.items()
            if name != verdict.runner_up
        )
        + (
            "\nThe winner is selected on these test votes (the lowest log-loss among all rows): its "
            "log-loss is the best of many on the same votes, optimistic for new ones, and the interval "
            "does not account for that choice."
        )
    )


def left_out_text(left_out: dict[str, str]) -> list[str]:
    """One line per reason: the rows the training votes cannot identify, left out of the table."""
    by_reason: dict[str, list[str]] = {}
    for name, why in left_out.items():
        by_reason.setdefault(why, []).append(name)
    return [f"Left out ({why}): {', '.join(names)}." for why, names in by_reason.items()]


def row_dicts(rows: list[MethodScore], verdict: Verdict, left_out: int) -> list[dict[str, object]]:
    """Each row as the JSON output has it: its scores, its rank by log-loss, the votes the style rows left
    out (``left_out``) and, on the winner's row, the verdict."""
    ranked = {r.method: k + 1 for k, r in enumerate(sorted(rows, key=lambda row: row.log_loss))}
    dicts: list[dict[str, object]] = []
    for r in rows:
        d = r.as_dict()
        d["rank_log_loss"] = ranked[r.method]
        if r.method.endswith("+style"):
            d["votes_without_texts"] = left_out
        if r.method == verdict.winner:
            d["verdict"] = verdict.as_dict()
        dicts.append(d)
    return dicts


def write_out(out: Path, dicts: list[dict[str, object]], rows: list[MethodScore], title: str) -> list[Path]:
    """The JSON table and the calibration plot of the best few systems, into ``out``."""
    from leaderboard.snapshot import plots, render  # matplotlib: loaded only when a figure is drawn

    out.mkdir(parents=True, exist_ok=True)
    table = out / "evaluate.json"
    table.write_text(json.dumps(dicts, indent=2) + "\n", encoding="utf-8")
    best = sorted(rows, key=lambda row: row.log_loss)[:N_PLOTTED]
    figure = plots.plot_calibration({r.method: r.calibration for r in best}, title=title)
    return [table, *render.save_figure(figure, out / "calibration")]


def annotator_positions_text(described: dict[str, object]) -> str:
    """The per-annotator position terms as lines: each estimate, shrunk with its interval, and the pooled
    random-effects mean whose interval admits the spread between annotators."""
    pooled = described["pooled"]
    judges = described["judges"]
    if not isinstance(pooled, dict) or not isinstance(judges, list):
        raise TypeError("annotator positions: a 'pooled' mapping and a 'judges' list expected")
    lines = [
        "Left-side advantage per annotator (Elo; own davidson-position fit, shrunk to the pooled mean):",
        *(
            f"  {j['judge']}: {j['estimate']:+.1f} (se {j['se']:.1f}, {j['votes']} votes); shrunk "
            f"{j['shrunk']:+.1f} [{j['ci_low']:+.1f}, {j['ci_high']:+.1f}]"
            for j in judges
        ),
        f"  pooled: {pooled['value']:+.1f} [{pooled['ci_low']:+.1f}, {pooled['ci_high']:+.1f}], "
        f"between-annotator sd {described['between_judge_sd']:.1f}",
    ]
    return "\n".join(lines)
