"""`arena agreement` at work: how annotators (humans and LLM judges alike) agree, with 95% intervals, on the
store or on a battles file, and how judges lean; the report printed as tables or JSON.

The command's options and help are :mod:`arena.cli.commands.agreement`'s; its function imports this module
when it runs, so the agreement statistics (the fitting stack) and the store's reads are imported here, at
the top.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape  # labels and model names come from imported files: no markup of theirs
from rich.table import Table

from arena.cli.options import settings_for
from arena.cli.store import open_store
from leaderboard.composite.agreement import AgreementReport
from leaderboard.composite.agreement_stats import Interval
from votes.files.records import InputError
from votes.reads.annotated import (
    agreement_input_from_file,
    agreement_input_from_store,
    agreement_of,
    judges_counted,
)
from votes.reads.filters import VoteFilter
from votes.voting.repeat_votes import SelfAgreement, overall_self_agreement

__all__ = ["run_agreement", "why_empty"]

#: Annotators listed in the text output (the JSON lists all).
_SHOWN = 40
_RATES = ("agreement_exact", "agreement_without_ties", "agreement_ties_half", "vs_majority", "prefer_first",
          "prefer_longer")  # fmt: skip
_COEFFICIENTS = ("fleiss_kappa", "krippendorff_alpha_nominal", "krippendorff_alpha_interval", "gwet_ac1")


def _fmt(value: float, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def _ci(v: Interval) -> str:
    return "-" if math.isnan(v.value) else f"{v.value:.3f} [{_fmt(v.low)}, {_fmt(v.high)}]"


def run_agreement(
    *,
    from_file: Path | None,
    as_json: bool,
    database_url: str | None,
) -> None:
    """What `arena agreement` does with its options (its command: :mod:`arena.cli.commands.agreement`)."""
    if from_file is not None:
        try:
            read = agreement_input_from_file(from_file)
        except InputError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        judges: tuple[str, ...] = ()
        self_agreement: SelfAgreement | None = None
    else:
        engine = open_store(settings_for(database_url))
        try:
            with engine.connect() as conn:
                read = agreement_input_from_store(conn)
                judges = judges_counted(conn, VoteFilter())
                self_agreement = overall_self_agreement(conn)
        finally:
            engine.dispose()
    if len(read.battles) == 0:
        typer.echo(
            "no votes with an annotator and a prompt: agreement compares annotators on the same prompt and "
            "model pair; import battles with a judge and a question_id (or conversations), or collect votes "
            "on the site first",
            err=True,
        )
        raise typer.Exit(1)
    report = agreement_of(read, judges)
    if as_json:
        doc = report.as_dict()
        if self_agreement is not None:
            doc["self_agreement"] = self_agreement.as_dict()
        typer.echo(json.dumps(doc, sort_keys=True, allow_nan=False))
        return
    _print(report)
    for line in why_empty(report):
        typer.echo(line)
    if self_agreement is not None:
        s = self_agreement
        typer.echo(
            f"Self-agreement on repeat battles: {s.n_agreed} of {s.n_repeat} "
            f"({s.share:.3f} [{s.low:.3f}, {s.high:.3f}], 95% Wilson)"
            if s.n_repeat
            else "Self-agreement on repeat battles: no repeat votes yet."
        )


def _print(report: AgreementReport) -> None:
    console = Console(width=200)
    if report.stats is None:
        return
    for title, names in (("Agreement rates", _RATES), ("Chance-corrected agreement", _COEFFICIENTS)):
        t = Table(title=f"{title} (95% bootstrap intervals over items)")
        for col in ("slice", "votes", "annotators", *names):
            t.add_column(col)
        for g in report.stats.groups:
            t.add_row(
                escape(g.group), str(g.n_votes), str(g.n_annotators), *(_ci(g.figures[n]) for n in names)
            )
        console.print(t)
    people = sorted(report.stats.annotators, key=lambda a: -a.n_votes)
    t = Table(title=f"Annotators (most votes first, {min(_SHOWN, len(people))} of {len(people)})")
    for col in ("annotator", "votes", "vs majority", "prefer first", "prefer longer"):
        t.add_column(col)
    for a in people[:_SHOWN]:
        t.add_row(
            escape(a.annotator), str(a.n_votes), _ci(a.vs_majority), _ci(a.prefer_first), _ci(a.prefer_longer)
        )
    console.print(t)
    if report.pairs:
        t = Table(
            title="Agreement on shared comparisons by group (verdict: sign of the mean over both orders)"
        )
        for col in (
            "first",
            "second",
            "n",
            "agree w/ ties",
            "kappa w/ ties",
            "n w/o",
            "agree w/o",
            "kappa w/o",
        ):
            t.add_column(col)
        for p in report.pairs:
            t.add_row(
                escape(p.first), escape(p.second), str(p.n_with_ties), _fmt(p.agreement_with_ties),
                f"{_fmt(p.kappa_with_ties)} [{_fmt(p.kappa_with_ties_low)}, {_fmt(p.kappa_with_ties_high)}]",
                str(p.n_without_ties), _fmt(p.agreement_without_ties),
                f"{_fmt(p.kappa_without_ties)} [{_fmt(p.kappa_without_ties_low)}, "
                f"{_fmt(p.kappa_without_ties_high)}]",
            )  # fmt: skip
        console.print(t)
    if report.judges:
        t = Table(title="Judges: position and self-preference")
        for col in ("judge", "votes", "swapped", "consistency", "first wins", "position (Elo)", "own family",
                    "n", "own score", "reference", "self-pref"):  # fmt: skip
            t.add_column(col)
        for r in report.judges:
            t.add_row(
                escape(r.judge), str(r.n_votes), str(r.n_swapped), _fmt(r.position_consistency),
                _fmt(r.first_win_rate), _fmt(r.position_elo, 1), escape(",".join(r.own_family)) or "-",
                str(r.n_self), _fmt(r.own_score_judge),
                f"{_fmt(r.own_score_reference)} ({r.self_reference})", _fmt(r.self_preference),
            )  # fmt: skip
        console.print(t)


def why_empty(report: AgreementReport) -> list[str]:
    """Why the tables show a count of 0 or no figure ('-') where they do, and what would fill them: a
    table of zeros said nothing about the reason (two groups that never judged the same comparison, a
    judge that never saw both orders, a judge without models of its family in the votes)."""
    lines: list[str] = []
    for p in report.pairs:
        both = f"{p.first} and {p.second}"
        if p.n_with_ties == 0:
            lines.append(
                f"{both}: n 0, no comparison judged by both (the same prompt and the same two models); "
                "judge what the others voted on (`arena judge` over the catalog's prompts and models) or "
                "import their votes with shared question_ids"
            )
        elif p.n_without_ties == 0:
            lines.append(f"{both}: n w/o 0, every comparison both judged has a tie from one of them")
    for r in report.judges:
        if r.n_swapped == 0:
            lines.append(
                f"{r.judge}: consistency -, no comparison judged in both orders (`arena judge` judges "
                "each pair both ways)"
            )
        if math.isnan(r.position_elo):
            lines.append(
                f"{r.judge}: position -, its votes leave models unconnected, or one only won or only lost"
            )
        if not r.own_family:
            lines.append(
                f"{r.judge}: self-preference -, no model of its family among the votes (the family is told "
                "from the judge's name)"
            )
        elif r.n_self == 0:
            lines.append(
                f"{r.judge}: self-preference n 0, {r.self_reference} judged none of the comparisons of its "
                f"family's models ({', '.join(r.own_family)}) that it judged"
            )
    if report.stats is not None:
        alone = [a.annotator for a in report.stats.annotators if math.isnan(a.vs_majority.value)]
        if alone:
            named = ", ".join(alone[:3]) + (f" and {len(alone) - 3} more" if len(alone) > 3 else "")
            lines.append(f"vs majority -: {named} judged no comparison that another annotator judged too")
    if lines:
        lines.insert(0, "Why some figures are 0 or missing (-):")
    return lines
