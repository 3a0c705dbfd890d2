"""Recompute: counts and a fit request to a snapshot folder, the one path every board takes to its files.

``arena recompute`` (offline, from a file or the database), ``arena publish`` and the admin API all write
through :func:`recompute_snapshot`, so an export recomputed offline gives the same data files, byte for
byte, as the snapshot published from the database with the same request and seed. What the folder's
metadata says of the request is :func:`options_metadata`.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arena.publish.board_fit import (
    FittedBoard,
    Progress,
    board_fragility,
    board_judge_positions,
    fit_board,
    fit_by_source,
    fit_style_board,
)
from arena.publish.drawing import PlotDrawing
from leaderboard.battles import Battles
from leaderboard.bt.clusters import Clusters
from leaderboard.bt.compute import compute_leaderboard
from leaderboard.bt.coverage import describe_intervals
from leaderboard.bt.fit import BTFit
from leaderboard.bt.request import FitRequest
from leaderboard.composite.agreement import AGREEMENT_CSV, AGREEMENT_JSON, AgreementReport
from leaderboard.data import PairCounts
from leaderboard.result import Leaderboard
from leaderboard.snapshot.dataset_card import CARD_FILE, MODELS_FILE, dataset_card, models_csv
from leaderboard.snapshot.files import DATA_FILES, PACKAGE, counts_sha256, dump_json, package_version
from leaderboard.snapshot.folder import SnapshotManifest, slice_label, write_snapshot
from leaderboard.style.board import expand_style, style_board_files
from votes.names import is_judge

if TYPE_CHECKING:  # the database stack is imported where it is used: a recompute from a file needs none
    from votes.reads.annotated import AgreementInput

__all__ = ["SliceSpec", "options_metadata", "recompute_snapshot", "voters_record"]


def options_metadata(request: FitRequest, clusters: Clusters | None) -> dict[str, Any]:
    """The ``options`` of a snapshot's metadata: how its board was fitted, with the clusters used (their
    label under ``cluster``; none, no entry). What a default board's metadata has always said is kept as
    it was, so its snapshot id does not change: the model options under ``extra``, and style, clusters,
    families and rectification only when there are any."""
    anchor = request.anchor
    described: dict[str, Any] = {
        "method": request.method,
        "n_rounds": request.n_rounds,
        "level": request.level,
        "interval": request.interval,
        "anchor": None if anchor is None else {"model": anchor[0], "rating": anchor[1]},
        "random_state": request.random_state,
        "extra": request.model.describe(),
    }
    if request.style:
        described["style"] = list(request.style)
    if clusters is not None:
        described["cluster"] = clusters.label
    if request.families:
        described["families"] = dict(sorted(request.families.items()))
    if request.rectify:
        described["rectify"] = request.rectify
    return described


def voters_record(
    n_votes: float, judges: Battles | None, agreement: AgreementReport | None, source: str
) -> dict[str, Any]:
    """Who cast a board's votes, as far as the reads know (``metadata.json`` -> ``voters``, and the dataset
    card): how many are LLM-judge verdicts (annotators labelled ``judge:<model>`` or ``llm-<model>``) and
    how many human votes; None where the reads cannot tell."""
    total = int(round(n_votes))
    if judges is not None and judges.annotator is not None and judges.annotator_names:
        labels = judges.annotator_names
        flagged = [a >= 0 and is_judge(labels[a]) for a in judges.annotator.tolist()]
        named = sorted({labels[a] for a, j in zip(judges.annotator.tolist(), flagged, strict=True) if j})
        n_judge = int(sum(flagged))
        return {"llm_judge_verdicts": n_judge, "human_votes": total - n_judge, "llm_judges": named}
    if agreement is not None and agreement.judges_in_board:
        return {
            "llm_judge_verdicts": None,
            "human_votes": None,
            "llm_judges": list(agreement.judges_in_board),
        }
    if source == "database":  # every stored vote names its annotator: none of these is a judge
        return {"llm_judge_verdicts": 0, "human_votes": total, "llm_judges": []}
    return {"llm_judge_verdicts": None, "human_votes": None, "llm_judges": []}


@dataclass(frozen=True)
class SliceSpec:
    """A category/language board; both None is the overall board."""

    category: str | None = None
    language: str | None = None

    @property
    def label(self) -> str:
        return slice_label(category=self.category, language=self.language)


def recompute_snapshot(
    counts: PairCounts,
    out_dir: Path | str,
    *,
    request: FitRequest,
    votes_digest: str | None,
    spec: SliceSpec = SliceSpec(),  # noqa: B008 - frozen, so a shared default is safe
    filters: Mapping[str, Any] | None = None,
    source: str = "database",
    progress: Progress | None = None,
    created_at: datetime | None = None,
    plots: bool = True,
    battles: Battles | None = None,
    model_info: Mapping[str, Mapping[str, Any]] | None = None,
    clusters: Clusters | None = None,
    agreement: AgreementReport | None = None,
    availability: Mapping[str, Mapping[str, Any]] | None = None,
    weekly_shares: Mapping[str, Mapping[str, float]] | None = None,
    by_source: AgreementInput | None = None,
    judges: Battles | None = None,
    clustering: Mapping[str, Any] | None = None,
    pairing_weights: Mapping[str, Mapping[str, float]] | None = None,
    flagged_annotators: Mapping[str, Any] | None = None,
    fitted: FittedBoard | None = None,
    notes: Mapping[str, Any] | None = None,
) -> tuple[Leaderboard, SnapshotManifest]:
    """Fit ``counts`` and write the snapshot folder; the data files depend on counts and request only.

    ``fitted`` is the board of these very ``counts`` fitted already with ``request`` (and its figures
    being drawn into ``out_dir`` when ``plots``): it is used instead of fitting again.

    With ``request.style`` the same votes, one row per vote with their style covariates (``battles``),
    give a second, style-controlled board: its files sit beside the default board's, its covariates'
    coefficients and intervals in ``metadata.json`` under ``style_control``.

    With ``agreement`` (the votes include LLM judges'), the agreement report of the same votes, every
    annotator's, goes into ``metadata.json`` under ``agreement`` and into ``agreement.csv`` (the pairwise
    table) and ``agreement.json`` (the whole report). The board itself still counts only the votes in
    ``counts``: a judge's votes reach it only when the filter asked for them.

    Every snapshot also carries ``models.csv`` (the metadata ``model_info`` knows about each model) and a
    dataset card, ``README.md``, so the folder loads with ``datasets.load_dataset`` and pushes to a hub.

    With ``availability`` (per model, live generations and failures), the board's models' entries go into
    ``metadata.json`` under ``availability``: the fairness ledger's third column. ``weekly_shares`` (per
    week, each model's share of the battles) goes under ``battle_share_by_week``: the ledger's history.

    With ``judges`` (the board's votes by LLM judges, annotators coded with their names), each judge's
    position term goes under ``judge_position`` (:func:`~arena.publish.board_fit.board_judge_positions`);
    ``clustering`` (what :func:`leaderboard.bt.clusters.clustering_record` says about the clusters asked
    for and used) goes under ``clustering``. Both are metadata only: the data files, and so the snapshot
    id, do not change. Every snapshot says what its intervals are under ``intervals``
    (:func:`leaderboard.bt.coverage.describe_intervals`: level, method, unit, marginal, fit, ranks).

    ``pairing_weights`` (per UTC day, each model's share under the pairing policy then in force, from
    :mod:`votes.voting.pairing_weights`) goes under ``sampling_weights_by_day`` (the board's models only):
    what the live site was giving over time, beside the share the policy would give next.

    ``flagged_annotators`` (:func:`votes.review.flagged.flagged_report`: the flagged annotators left out or
    down-weighted, each under a pseudonymous id with one reason, and the gold summary) goes under
    ``flagged_annotators``; the board pages show its count.

    ``notes`` are more keys for ``metadata.json`` about how the board was made (the models a category
    board leaves off, :mod:`arena.publish.slice_reads`; the other boards of the publish): metadata only.

    A source-aware method (``composite``) fits ``by_source``, every vote with who cast it (humans and
    judges, whatever the filter's annotators), instead of ``counts``; its sources, learned per-source
    terms, effective number of human votes and each judge's worth go under ``composite``.
    """
    if request.style:
        expand_style(request.style)  # the style board's names: an unknown one fails before any fit
    if counts.n_cells == 0:
        raise ValueError(f"no votes to fit for the {spec.label} board")
    if request.style and (battles is None or battles.features is None):
        raise ValueError("style control needs the votes with their answer texts")
    added: dict[str, Any] = {}
    point_fit: BTFit | None = None
    with ExitStack() as stack:
        # The figures need only the board and are drawn on another core while the rest is computed: by
        # the child publishing started while it read the votes (``fitted``), or by one started here
        # before the fit, drawing those of the point ratings while the bootstrap runs.
        drawing = early = fitted.drawing if fitted is not None else None
        if plots and drawing is None:
            preview = None
            if fitted is None and request.interval == "bootstrap" and not request.by_source:
                preview = partial(compute_leaderboard, counts, replace(request, interval="none", n_rounds=0))
            drawing = PlotDrawing(out_dir, None, counts, preview=preview)
        if drawing is not None:
            stack.callback(drawing.cancel)  # joined already unless the snapshot failed: then it stops
        if fitted is not None:
            if fitted.counts is not counts or request.by_source:
                raise ValueError("a board fitted beforehand must be fitted on the counts given, by counts")
            board, point_fit = fitted.board, fitted.point_fit
        elif request.by_source:
            if by_source is None:
                raise ValueError(f"method {request.method!r} needs the votes with who cast them")
            if request.style:
                raise ValueError(f"method {request.method!r} has no style-controlled board")
            board, added["composite"] = fit_by_source(by_source, request)
        else:
            # one bootstrap thread while the child draws: a second would only take turns with it on its core
            threads = 1 if drawing is not None and drawing.forked else None
            board, point_fit = fit_board(
                counts, request, progress=progress, clusters=clusters, n_jobs=threads
            )
        if drawing is not None and drawing is not early:
            drawing.draw(board)
        if not request.by_source:
            added["fragility"] = board_fragility(counts, request, point_fit)
        # what the intervals are: level, method, unit, marginal, fit, and what the rank range is
        added["intervals"] = describe_intervals(board, request, clusters, clustering)
        if clustering is not None:
            added["clustering"] = dict(clustering)
        if flagged_annotators is not None:
            added["flagged_annotators"] = dict(flagged_annotators)
        added.update(notes or {})
        if judges is not None:
            added["judge_position"] = board_judge_positions(judges)
        if availability is not None:
            added["availability"] = {m: dict(availability[m]) for m in board.models if m in availability}
        if weekly_shares is not None:
            added["battle_share_by_week"] = {week: dict(shares) for week, shares in weekly_shares.items()}
        if pairing_weights:
            added["sampling_weights_by_day"] = {
                day: {m: s for m, s in shares.items() if m in board.models}
                for day, shares in pairing_weights.items()
            }
        files: dict[str, bytes] = {}
        if request.style and battles is not None:
            styled = fit_style_board(battles, board, request)
            added["style_control"] = styled.describe()
            files = style_board_files(styled)
        if agreement is not None:
            added["agreement"] = agreement.as_dict()
            files[AGREEMENT_CSV] = agreement.csv_bytes()
            files[AGREEMENT_JSON] = dump_json(agreement.as_dict())
        files[MODELS_FILE] = models_csv([board.models[i] for i in board.order()], model_info or {})
        added["voters"] = voters_record(counts.n_votes, judges, agreement, source)
        card = {
            "slice": spec.label,
            "n_models": len(board.models),
            "n_votes": int(counts.n_votes) if float(counts.n_votes).is_integer() else counts.n_votes,
            "method": board.method,
            "interval": board.interval,
            "seed": request.random_state,
            "votes_sha256": votes_digest or counts_sha256(counts),
            "package": PACKAGE,
            "package_version": package_version(),
            "parameters": board.parameters,
            "voters": added["voters"],
            "intervals": added["intervals"],
        }
        files[CARD_FILE] = dataset_card(card, [*DATA_FILES, *files])
        manifest = write_snapshot(
            out_dir,
            board,
            counts,
            votes_sha256=votes_digest,
            created_at=created_at,
            category=spec.category,
            language=spec.language,
            plots=drawing if drawing is not None else False,
            extra_metadata={
                "filters": dict(filters or {}),
                "options": options_metadata(request, clusters),
                "source": source,
                # what votes_sha256 is the sha256 of: from the database the vote ledger (votes.reads.ledger),
                # from a file the file itself (snapshots made before the ledger carry no such field)
                "votes_hash": "ledger" if source == "database" else "file",
                **added,
            },
            extra_files=files,
        )
        return board, manifest
