"""Stored votes read for a fit: the parts of the stored votes' comparison graph, and what `arena recompute`
reads from the store for each part.

Only a command that reads the store imports this module (`arena publish`, and `arena recompute` without a
file), so the database stack and the board's reads (:mod:`arena.publish.board_reads`) are imported at its
top. The filter options become a filter on the store in
:meth:`arena.cli.commands.battle_files.VoteSelection.store_filter`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import typer
from sqlalchemy.engine import Engine

from arena.cli.commands.runs.from_file import refuse_or_name_parts
from arena.cli.options import settings_for
from arena.cli.store import open_store
from arena.publish.board_reads import (
    StoredVotes,
    filters_metadata,
    load_board_votes,
    load_model_info,
    stored_components,
)
from leaderboard.bt.request import FitRequest
from leaderboard.data import PairCounts
from votes.reads.annotated import source_aware_filter
from votes.reads.filters import VoteFilter, check_propensities

__all__ = ["StoredPart", "pick_stored_components", "read_stored_parts", "stored_filters"]


class StoredPart(NamedTuple):
    """A part of the stored votes' comparison graph to fit: its number (None when the graph is
    connected), its filter (the part's models), and, for a connected graph, the votes' counts as the
    check read them (None for a part)."""

    number: int | None
    filter: VoteFilter
    counts: PairCounts | None


def pick_stored_components(
    engine: Engine, vote_filter: VoteFilter, *, largest: bool, each: bool
) -> list[StoredPart]:
    """The parts of the stored votes' comparison graph to fit; an error (exit 1) naming the parts when
    the graph is in parts and neither ``largest`` nor ``each`` is asked. Prints what was chosen.
    ``--ipw`` on votes without a logged pair probability is a usage error on that option."""
    if vote_filter.ipw:
        with engine.connect() as conn:
            try:
                check_propensities(conn, vote_filter)
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--ipw") from None
    parts, counts = stored_components(engine, vote_filter)
    if len(parts) <= 1:
        return [StoredPart(None, vote_filter, counts)]
    sizes = "; ".join(f"{k}: {len(p)} models ({', '.join(p[:4])})" for k, p in enumerate(parts, 1))
    refuse_or_name_parts("the database", len(parts), sizes, largest=largest, each=each)
    chosen = parts[:1] if largest else parts
    return [StoredPart(k, replace(vote_filter, models=p), None) for k, p in enumerate(chosen, 1)]


def read_stored_parts(
    out_dir: Path,
    vote_filter: VoteFilter,
    request: FitRequest,
    database_url: str | None,
    *,
    largest: bool,
    each: bool,
) -> tuple[dict[str, dict[str, Any]], list[tuple[Path, StoredVotes]]]:
    """What `arena recompute` reads from the store: each model's metadata, and each part of the graph to
    fit with its folder (``component-<k>`` under ``out_dir`` when there are several) and its votes as
    :func:`arena.publish.board_reads.load_board_votes` reads them for ``request``. No stored vote with
    answer texts (``--style``) or ids to cluster by is a usage error on that option."""
    engine = open_store(settings_for(database_url))
    try:
        model_info = load_model_info(engine)
        chosen = pick_stored_components(engine, vote_filter, largest=largest, each=each)
        read = []
        for number, part_filter, _ in chosen:
            stored = load_board_votes(engine, part_filter, request)
            folder = out_dir / f"component-{number}" if len(chosen) > 1 else out_dir
            read.append((folder, stored))
    except ValueError as exc:  # no stored vote has answer texts, votes without ids to cluster by
        hint = "--style" if request.style else "--cluster"
        raise typer.BadParameter(str(exc), param_hint=hint) from None
    finally:
        engine.dispose()
    return model_info, read


def stored_filters(vote_filter: VoteFilter, request: FitRequest) -> dict[str, Any]:
    """The filters of a board from the store as its metadata records them: a source-aware board counts and
    hashes every annotator's votes it fits, judges included."""
    return filters_metadata(source_aware_filter(vote_filter) if request.by_source else vote_filter)
