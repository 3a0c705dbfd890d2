"""The fit options recompute and publish share, and the one fit request they build from them.

Each option is spelled once here (so `arena recompute --help` and `arena publish --help` say the same), and
:func:`fit_request` turns their values into the :class:`~leaderboard.bt.request.FitRequest` the command
hands whole to publishing and the math: checked before any vote is read, a bad value reported on its
option.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from arena.cli.commands.board_output import err

if TYPE_CHECKING:
    from leaderboard.bt.request import FitRequest

__all__ = [
    "AnchorOpt",
    "BootstrapOpt",
    "BothBadOpt",
    "ClusterOpt",
    "FamilyOpt",
    "HalfLifeOpt",
    "IntervalOpt",
    "LevelOpt",
    "MethodOpt",
    "PriorOpt",
    "RectifyOpt",
    "SeedOpt",
    "StyleOpt",
    "fit_request",
    "parse_anchor",
    "parse_families",
]

MethodOpt = Annotated[str, typer.Option("--method", help="bt, bt-position, davidson, davidson-position, ...")]
BootstrapOpt = Annotated[int, typer.Option("--bootstrap", min=0, help="Bootstrap rounds (0: no intervals).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed: same votes + same seed = same files.")]
AnchorOpt = Annotated[
    str | None, typer.Option("--anchor", metavar="MODEL=RATING", help="Pin one model's rating.")
]
LevelOpt = Annotated[float, typer.Option("--level", min=0.5, max=0.999, help="Interval level.")]
IntervalOpt = Annotated[str, typer.Option("--interval", help="bootstrap, sandwich or none.")]
HalfLifeOpt = Annotated[
    float | None, typer.Option("--half-life", help="Time weights: half-life in days (votes need times).")
]
PriorOpt = Annotated[
    float | None, typer.Option("--prior", help="Gaussian prior on ratings: standard deviation in Elo points.")
]
BothBadOpt = Annotated[str, typer.Option("--both-bad", help="'tie (bothbad)' votes: tie or exclude.")]
StyleOpt = Annotated[
    str | None,
    typer.Option(
        "--style",
        metavar="FEATURES",
        help="Also a style-controlled board, e.g. 'length,markdown' or 'length,markdown,citations' "
        "(features from the stored answers; length in tokens).",
    ),
]
ClusterOpt = Annotated[
    str,
    typer.Option(
        "--cluster",
        help="Votes are dependent within: annotator, prompt, annotator,prompt, none, or auto"
        " (annotator when the battles name at least 20 judges or annotators).",
    ),
]
FamilyOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--family",
        metavar="MODEL=FAMILY|FILE.toml",
        help="Model families for the composite's judge self-preference: MODEL=FAMILY (repeatable) or a TOML "
        'file of model = "family" lines (optionally under [families]). A judge takes its model\'s family.',
    ),
]
RectifyOpt = Annotated[
    str | None,
    typer.Option(
        "--rectify",
        help="ppi: with --method composite, human-scale ratings by PPI++ (judges' verdicts rectified by the "
        "human votes on the battles they share; --interval: its sandwich, or a bootstrap over battles).",
    ),
]


def parse_anchor(value: str | None) -> tuple[str, float] | None:
    """``MODEL=RATING`` -> (model, rating); the model name may itself contain ``=``."""
    if value is None:
        return None
    model, sep, rating = value.rpartition("=")
    try:
        return (model, float(rating)) if sep and model else _bad_anchor(value)
    except ValueError:
        return _bad_anchor(value)


def _bad_anchor(value: str) -> tuple[str, float]:
    raise typer.BadParameter(f"expected MODEL=RATING, got {value!r}", param_hint="--anchor")


#: Largest family file read, and the longest model or family name taken.
FAMILY_FILE_BYTES = 1 << 20
FAMILY_NAME_CHARS = 200


def _family_pair(model: str, family: str, where: str) -> tuple[str, str]:
    model, family = model.strip(), family.strip()
    if not model or not family or len(model) > FAMILY_NAME_CHARS or len(family) > FAMILY_NAME_CHARS:
        raise typer.BadParameter(
            f"{where}: expected a model and a family of 1 to {FAMILY_NAME_CHARS} characters",
            param_hint="--family",
        )
    if any(not c.isprintable() for c in model + family):
        raise typer.BadParameter(f"{where}: names must be printable", param_hint="--family")
    return model, family


def parse_families(values: list[str] | None) -> dict[str, str]:
    """``--family`` values -> {model: family}; each is ``MODEL=FAMILY`` or a ``.toml`` file of
    ``model = "family"`` (top level or under ``[families]``). A model given two families is an error."""
    found: dict[str, str] = {}

    def put(model: str, family: str, where: str) -> None:
        model, family = _family_pair(model, family, where)
        if found.setdefault(model, family) != family:
            raise typer.BadParameter(f"{where}: {model!r} has two families", param_hint="--family")

    for value in values or []:
        if value.lower().endswith(".toml"):
            path = Path(value)
            try:
                with path.open("rb") as fh:
                    raw = fh.read(FAMILY_FILE_BYTES + 1)
            except OSError as exc:
                raise typer.BadParameter(f"{path}: {exc.strerror}", param_hint="--family") from None
            if len(raw) > FAMILY_FILE_BYTES:
                raise typer.BadParameter(
                    f"{path}: larger than {FAMILY_FILE_BYTES} bytes", param_hint="--family"
                )
            try:
                table = tomllib.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise typer.BadParameter(f"{path}: {exc}", param_hint="--family") from None
            table = table.get("families", table) if isinstance(table.get("families"), dict) else table
            for model, family in table.items():
                if not isinstance(family, str):
                    raise typer.BadParameter(
                        f"{path}: {model!r} must map to a family name", param_hint="--family"
                    )
                put(model, family, str(path))
        else:
            model, sep, family = value.rpartition("=")
            if not sep:
                raise typer.BadParameter(
                    f"expected MODEL=FAMILY or a .toml file, got {value!r}", param_hint="--family"
                )
            put(model, family, repr(value))
    return found


#: The command-line option of each field of a fit request, for the usage error of a bad value.
REQUEST_OPTIONS = {
    "anchor": "--anchor",
    "cluster": "--cluster",
    "families": "--family",
    "level": "--level",
    "n_rounds": "--bootstrap",
    "rectify": "--rectify",
}


def fit_request(
    method: str,
    bootstrap: int,
    seed: int,
    anchor: str | None,
    level: float,
    interval: str,
    *,
    half_life: float | None = None,
    prior: float | None = None,
    both_bad: str = "tie",
    style: str | None = None,
    families: list[str] | None = None,
    rectify: str | None = None,
    cluster: str = "auto",
) -> FitRequest:
    """The one :class:`~leaderboard.bt.request.FitRequest` of recompute's and publish's options, checked
    before any vote is read: a bad value is a usage error on its option. An unknown method or interval,
    or a model option the method refuses, is the one-line error (exit status 2) the fit gives it."""
    from leaderboard.bt.request import FitRequest, FitRequestError, ModelOptions  # numpy: off --help
    from leaderboard.style.board import expand_style  # pandas: off --help

    if both_bad not in ("tie", "exclude"):
        raise typer.BadParameter("expected tie or exclude", param_hint="--both-bad")
    groups = tuple(g.strip() for g in (style or "").split(",") if g.strip())
    if groups:
        try:
            expand_style(groups)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--style") from None
    try:
        return FitRequest(
            method=method,
            n_rounds=bootstrap,
            level=level,
            interval=interval,
            anchor=parse_anchor(anchor),
            random_state=seed,
            cluster=cluster,
            model=ModelOptions(
                half_life=None if half_life is None else half_life * 86_400.0,
                prior=prior,
                both_bad="exclude" if both_bad == "exclude" else "tie",
            ),
            style=groups,
            families=parse_families(families),
            rectify=rectify or "",
        )
    except FitRequestError as exc:
        if exc.option not in REQUEST_OPTIONS:  # the method, its interval or model options
            err.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from None
        raise typer.BadParameter(str(exc), param_hint=REQUEST_OPTIONS[exc.option]) from None
