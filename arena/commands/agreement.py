"""`arena agreement`: how humans and LLM judges agree on the comparisons they share, and how judges lean."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from arena.commands import DatabaseUrlOption, open_store, settings_for

__all__ = ["agreement_command", "family_of", "is_judge", "register"]

#: Annotator labels that name an LLM judge: ``judge:<model>`` (arena judge) or ``llm-<model>`` (imports).
_JUDGE = re.compile(r"^(judge:|llm-)(?P<model>.+)$")


def is_judge(label: str) -> bool:
    return _JUDGE.match(label) is not None


def family_of(name: str) -> int | None:
    """Index of the first known model family whose pattern the (judge's or model's) name matches."""
    from votes.leaks import KNOWN_FAMILIES

    judged = _JUDGE.match(name)
    bare = (judged.group("model") if judged else name).lower()
    for index, (pattern, _names) in enumerate(KNOWN_FAMILIES):
        if re.search(pattern, bare):
            return index
    return None


@dataclass(frozen=True)
class JudgeRow:
    """One judge's line of the report."""

    judge: str
    n_votes: int
    n_swapped: int
    position_consistency: float
    first_win_rate: float
    position_elo: float
    own_family: list[str]
    self_reference: str
    n_self: int
    own_score_judge: float
    own_score_reference: float
    self_preference: float


def _fmt(value: float, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def agreement_command(
    as_json: Annotated[bool, typer.Option("--json", help="The report as one JSON object.")] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Pairwise agreement (with and without ties, Cohen's kappa) between every two annotator groups
    (humans pooled, each judge alone), and per judge: position consistency, first-position win rate,
    the `bt-position` position term, and self-preference against the humans (or the other judges)."""
    from leaderboard.agreement import (
        pair_agreement,
        position_report,
        self_preference,
        verdict_table,
        vote_scores,
    )
    from leaderboard.battles import Battles
    from votes.annotated import annotated_battles

    engine = open_store(settings_for(database_url))
    try:
        with engine.connect() as conn:
            battles, labels = annotated_battles(conn)
    finally:
        engine.dispose()
    if len(battles) == 0:
        typer.echo("no votes with an annotator and a prompt")
        raise typer.Exit(1)
    judges = [i for i, label in enumerate(labels) if is_judge(label)]
    humans = [i for i, label in enumerate(labels) if not is_judge(label)]
    # Humans are pooled into one group (-1): few vote twice on the same comparison.
    assert battles.annotator is not None  # nosec B101 # type narrowing
    group = np.where(np.isin(battles.annotator, humans), -1, battles.annotator)
    pooled = Battles(
        models=battles.models,
        model_a=battles.model_a,
        model_b=battles.model_b,
        outcome=battles.outcome,
        annotator=group,
        prompt=battles.prompt,
    )
    scores = vote_scores(pooled)
    table = verdict_table(scores)
    names = {-1: "humans", **{i: labels[i] for i in judges}}
    columns = ([-1] if humans else []) + judges
    pairs = [
        pair_agreement(table, x, y, (names[x], names[y]))
        for k, x in enumerate(columns)
        for y in columns[k + 1 :]
    ]
    per_judge = []
    for j in judges:
        position = position_report(pooled, scores, j)
        family = family_of(labels[j])
        own = [m for m, name in enumerate(battles.models) if family is not None and family_of(name) == family]
        reference = [-1] if humans else [k for k in judges if k != j]
        n_self, judge_score, ref_score = self_preference(table, j, own, reference)
        per_judge.append(
            JudgeRow(
                judge=labels[j],
                n_votes=int((group == j).sum()),
                n_swapped=position.n_swapped,
                position_consistency=position.consistency,
                first_win_rate=position.first_win_rate,
                position_elo=position.position_elo,
                own_family=[battles.models[m] for m in own],
                self_reference="humans" if humans else "other judges",
                n_self=n_self,
                own_score_judge=judge_score,
                own_score_reference=ref_score,
                self_preference=judge_score - ref_score,
            )
        )
    if as_json:
        report = {"agreement": [asdict(p) for p in pairs], "judges": [asdict(r) for r in per_judge]}
        typer.echo(json.dumps(report, sort_keys=True, default=float))
        return
    console = Console(width=160)
    t = Table(title="Agreement on shared comparisons (verdict = sign of the mean over both orders)")
    for col in ("first", "second", "n", "agree w/ ties", "kappa w/ ties", "n w/o", "agree w/o", "kappa w/o"):
        t.add_column(col)
    for p in pairs:
        t.add_row(
            p.first, p.second, str(p.n_with_ties), _fmt(p.agreement_with_ties), _fmt(p.kappa_with_ties),
            str(p.n_without_ties), _fmt(p.agreement_without_ties), _fmt(p.kappa_without_ties),
        )  # fmt: skip
    console.print(t)
    t = Table(title="Judges: position and self-preference")
    for col in ("judge", "votes", "swapped", "consistency", "first wins", "position (Elo)", "own family",
                "n", "own score", "reference", "self-pref"):  # fmt: skip
        t.add_column(col)
    for r in per_judge:
        t.add_row(
            r.judge, str(r.n_votes), str(r.n_swapped), _fmt(r.position_consistency), _fmt(r.first_win_rate),
            _fmt(r.position_elo, 1), ",".join(r.own_family) or "-", str(r.n_self), _fmt(r.own_score_judge),
            f"{_fmt(r.own_score_reference)} ({r.self_reference})", _fmt(r.self_preference),
        )  # fmt: skip
    console.print(t)


def register(app: typer.Typer) -> None:
    app.command("agreement")(agreement_command)
