"""The fit options recompute and publish share, their values as one :class:`FitOptions`, and the parsing of
the two that are not plain values.

Each option is spelled once here (so `arena recompute --help` and `arena publish --help` say the same);
a command hands their values on as one :class:`FitOptions`, which
:func:`arena.cli.commands.runs.fit_request.fit_request` turns into the one
:class:`~leaderboard.bt.request.FitRequest` the command hands whole to publishing and the math. This module
imports no fitting library: the commands' help reads it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

__all__ = [
    "AnchorOpt",
    "BootstrapOpt",
    "BothBadOpt",
    "ClusterOpt",
    "FamilyOpt",
    "FitOptions",
    "HalfLifeOpt",
    "IntervalOpt",
    "LevelOpt",
    "MethodOpt",
    "PriorOpt",
    "RectifyOpt",
    "SeedOpt",
    "StyleOpt",
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


@dataclass(frozen=True, kw_only=True)
class FitOptions:
    """The values of the fit options above as the command line gave them (not yet checked): what recompute
    and publish hand on to :func:`arena.cli.commands.runs.fit_request.fit_request`."""

    method: str
    bootstrap: int
    seed: int
    anchor: str | None
    level: float
    interval: str
    half_life: float | None
    prior: float | None
    both_bad: str
    style: str | None
    family: list[str] | None
    rectify: str | None
    cluster: str


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
