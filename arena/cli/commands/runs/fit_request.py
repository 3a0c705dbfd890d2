"""The one fit request of recompute's and publish's options: checked before any vote is read, a bad value
reported on its option.

:func:`fit_request` turns the values of the options :mod:`arena.cli.commands.fit_options` spells (one
:class:`~arena.cli.commands.fit_options.FitOptions`) into the :class:`~leaderboard.bt.request.FitRequest`
the command hands whole to publishing and the math.
"""

from __future__ import annotations

import typer

from arena.cli.commands.board_output import err
from arena.cli.commands.fit_options import FitOptions, parse_anchor, parse_families
from leaderboard.bt.request import FitRequest, FitRequestError, ModelOptions
from leaderboard.style.board import expand_style

__all__ = ["REQUEST_OPTIONS", "fit_request"]


#: The command-line option of each field of a fit request, for the usage error of a bad value.
REQUEST_OPTIONS = {
    "anchor": "--anchor",
    "cluster": "--cluster",
    "families": "--family",
    "level": "--level",
    "n_rounds": "--bootstrap",
    "rectify": "--rectify",
}


def fit_request(options: FitOptions) -> FitRequest:
    """The one :class:`~leaderboard.bt.request.FitRequest` of recompute's and publish's options, checked
    before any vote is read: a bad value is a usage error on its option. An unknown method or interval,
    or a model option the method refuses, is the one-line error (exit status 2) the fit gives it."""
    if options.both_bad not in ("tie", "exclude"):
        raise typer.BadParameter("expected tie or exclude", param_hint="--both-bad")
    groups = tuple(g.strip() for g in (options.style or "").split(",") if g.strip())
    if groups:
        try:
            expand_style(groups)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--style") from None
    try:
        return FitRequest(
            method=options.method,
            n_rounds=options.bootstrap,
            level=options.level,
            interval=options.interval,
            anchor=parse_anchor(options.anchor),
            random_state=options.seed,
            cluster=options.cluster,
            model=ModelOptions(
                half_life=None if options.half_life is None else options.half_life * 86_400.0,
                prior=options.prior,
                both_bad="exclude" if options.both_bad == "exclude" else "tie",
            ),
            style=groups,
            families=parse_families(options.family),
            rectify=options.rectify or "",
        )
    except FitRequestError as exc:
        if exc.option not in REQUEST_OPTIONS:  # the method, its interval or model options
            err.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from None
        raise typer.BadParameter(str(exc), param_hint=REQUEST_OPTIONS[exc.option]) from None
