"""What the fits and exports read from the store, aggregated in SQL where it pays.

:func:`load_pair_counts` runs ``GROUP BY model_a, model_b, winner`` in the database, so its cost follows
the number of model pairs, not the number of votes. :func:`votes_sha256` hashes the canonical exported
rows, so the hash of the votes behind a backup (and behind snapshots made before :mod:`votes.reads.ledger`)
can be checked against an export file (``sha256sum votes.jsonl``) or recomputed from one
(:func:`votes.files.records.rows_sha256`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from sqlalchemy import Select, and_, case, func, literal, or_, select, true
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from leaderboard.battles import Battles
from leaderboard.data import PairCounts, parse_outcome
from votes.bulk import column_chunks
from votes.dialects import Dialect, dialect_of
from votes.files.records import rows_sha256
from votes.reads.packed import (
    OUTCOME_WORDS,
    FetchedTexts,
    RowsNeeded,
    packed_cells,
    packed_chunks,
    packed_texts,
    time_micro,
)
from votes.tables import annotator_t, battle_t, generation_t, model_t, output_t, prompt_t, vote_t

__all__ = [
    "StoredChunk",
    "VoteFilter",
    "has_weights_or_sides",
    "JUDGE_KIND",
    "count_flagged_annotators",
    "filter_votes",
    "counted_vote_condition",
    "first_sight_condition",
    "iter_catalog_rows",
    "iter_vote_rows",
    "iter_vote_texts",
    "load_battles",
    "load_pair_counts",
    "packed_scan",
    "pair_counts_statement",
    "robust_weight",
    "votes_name_annotators",
    "votes_sha256",
]


class StoredChunk(NamedTuple):
    """What :func:`load_battles` hands its ``each_chunk``: a chunk of votes, in vote-id order, as stored.

    The model and annotator ids as arrays (annotator -1 for none); the outcome, time, weight (the vote's
    own, whatever weighting the filter asks) and side as the driver gave them; ``micro`` the times in
    microseconds since the epoch as :func:`seconds_array` read them (None where it read them one by one).
    A chunk SQLite handed packed (:mod:`votes.reads.packed`) has its stored time texts as rows of bytes,
    its weights (all 1) as floats and its sides as booleans, in arrays.
    """

    model_a: npt.NDArray[np.int64]
    model_b: npt.NDArray[np.int64]
    annotator: npt.NDArray[np.int64]
    winner: Sequence[Any] | npt.NDArray[np.object_]
    time: Sequence[Any] | npt.NDArray[np.uint8]
    micro: npt.NDArray[np.int64] | None
    weight: Sequence[Any] | npt.NDArray[np.float64]
    sided: Sequence[Any] | npt.NDArray[np.bool_]


_STREAM = 2000
_CHUNK = 100_000
#: Each outcome code's stored word, to hand a packed chunk's outcomes over as stored.
_OUTCOME_WORDS = np.array(OUTCOME_WORDS, dtype=object)


@dataclass(frozen=True)
class VoteFilter:
    """Which votes a fit or export uses; ``since <= created_at < until`` for the vote times.

    ``language`` matches the battle's own language, or the prompt's when the battle has none.
    ``anony_only`` keeps votes cast before the names were shown: every site and live vote, and imported
    battles marked ``anony``. ``first_sight`` keeps votes on answers the annotator had never seen revealed.
    ``models`` keeps votes between two listed models; ``exclude_models`` drops votes involving one.
    """

    category: str | None = None
    language: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    exclude_flagged: bool = False
    # Whose votes: None = everyone but LLM judges (``arena judge`` votes never mix into a board
    # silently); otherwise annotator labels (e.g. ``("judge:gpt-4o",)``), or ``("all",)`` for every vote.
    annotators: tuple[str, ...] | None = None
    # Where the battles came from: "site" (pre-generated), "live" (the annotator's own prompt), "import".
    source: str | None = None
    anony_only: bool = False
    models: tuple[str, ...] | None = None
    exclude_models: tuple[str, ...] = ()
    # Only votes where neither shown answer had been revealed to the annotator before (see
    # :func:`first_sight_condition`).
    first_sight: bool = False
    # The robust fit: no flagged annotator is left out; each vote's weight is multiplied by its
    # annotator's stored ``honest_weight`` (the voter review's evidence; votes without an annotator
    # count 1) in the cells aggregate (:func:`pair_counts_statement`) and the per-vote read.
    robust: bool = False
    # Only votes with an annotator on a battle with a prompt, whoever cast them, judges included: what a
    # source-aware fit (the composite) reads (:func:`votes.reads.annotated.source_aware_filter`), so a board's
    # counts and ledger hash cover exactly the votes it fits.
    source_aware: bool = False
    # With ``exclude_flagged``: flagged annotators' votes are down-weighted instead of left out, each
    # weighing the smaller of its annotator's stored ``honest_weight`` and this factor (so a flag always
    # costs weight, and a review's lower posterior costs more); other votes count as usual.
    flagged_weight: float | None = None

    def __post_init__(self) -> None:
        if self.flagged_weight is not None and not 0.0 <= self.flagged_weight <= 1.0:
            raise ValueError("flagged_weight must be between 0 and 1")

    @property
    def down_weighted(self) -> bool:
        """Flagged annotators' votes are in the board with less weight (not left out)."""
        return self.exclude_flagged and self.flagged_weight is not None and not self.robust


#: Annotator kind of the LLM judges of ``arena judge`` (labels ``judge:<endpoint>``).
JUDGE_KIND = "judge"


def _connection(db: Session | Connection) -> Connection:
    return db.connection() if isinstance(db, Session) else db


def filter_votes(
    stmt: Select[Any], filters: VoteFilter | None, *, battle_joined: bool = False
) -> Select[Any]:
    """Apply a filter to a statement that selects from Vote (and, when ``battle_joined``, joins Battle).

    Only the category, language, source and anonymity filters need the battle (and its prompt); the
    rest read the vote row.
    """
    f = filters or VoteFilter()
    needs_battle = (
        f.category is not None
        or f.language is not None
        or f.source is not None
        or f.anony_only
        or f.first_sight
        or f.source_aware
    )
    if needs_battle and not battle_joined:
        stmt = stmt.join(battle_t, vote_t.c.battle_id == battle_t.c.id)
    if f.source is not None:
        stmt = stmt.where(battle_t.c.source == f.source)
    if f.source_aware:
        stmt = stmt.where(vote_t.c.annotator_id.is_not(None), battle_t.c.prompt_id.is_not(None))
    if f.anony_only:  # the site shows names only after the vote; an imported battle says so itself
        stmt = stmt.where(
            or_(battle_t.c.source.in_(("site", "live")), battle_t.c.extra["anony"].as_boolean() == true())
        )
    if f.first_sight:
        stmt = stmt.where(first_sight_condition())
    if f.models is not None:
        listed = select(model_t.c.id).where(model_t.c.name.in_(f.models))
        stmt = stmt.where(vote_t.c.model_a_id.in_(listed), vote_t.c.model_b_id.in_(listed))
    if f.exclude_models:
        banned = select(model_t.c.id).where(model_t.c.name.in_(f.exclude_models))
        stmt = stmt.where(vote_t.c.model_a_id.not_in(banned), vote_t.c.model_b_id.not_in(banned))
    if f.category is not None or f.language is not None:
        stmt = stmt.outerjoin(prompt_t, battle_t.c.prompt_id == prompt_t.c.id)
    if f.category is not None:
        stmt = stmt.where(prompt_t.c.category == f.category)
    if f.language is not None:
        stmt = stmt.where(
            or_(
                battle_t.c.language == f.language,
                and_(battle_t.c.language.is_(None), prompt_t.c.language == f.language),
            )
        )
    if f.since is not None:
        stmt = stmt.where(vote_t.c.created_at >= f.since)
    if f.until is not None:
        stmt = stmt.where(vote_t.c.created_at < f.until)
    # robust, or flagged_weight: down-weighted, not left out
    cut_flagged = f.exclude_flagged and not f.robust and f.flagged_weight is None
    if f.annotators is None:  # one small NOT IN, so the fit still reads only ix_vote_cells
        stmt = stmt.where(_excluding(flagged=cut_flagged, judges=True))
    else:
        if cut_flagged:
            stmt = stmt.where(_excluding(flagged=True, judges=False))
        if "all" not in f.annotators:
            chosen = select(annotator_t.c.id).where(annotator_t.c.label.in_(f.annotators))
            stmt = stmt.where(vote_t.c.annotator_id.in_(chosen))
    return stmt


def _excluding(*, flagged: bool, judges: bool) -> ColumnElement[bool]:
    """Votes without an annotator, or whose annotator is not flagged (``flagged``) and not an LLM judge
    (``judges``)."""
    conditions: list[ColumnElement[bool]] = []
    if flagged:
        conditions.append(annotator_t.c.flagged.is_(True))
    if judges:
        conditions.append(annotator_t.c.kind == JUDGE_KIND)
    ids = select(annotator_t.c.id).where(or_(*conditions))
    return or_(vote_t.c.annotator_id.is_(None), vote_t.c.annotator_id.not_in(ids))


def first_sight_condition() -> ColumnElement[bool]:
    """The vote (joined to its battle) is its annotator's first sight of both shown answers.

    A vote reveals the names behind both answers of its battle; each answer in the catalog can come back
    in a later battle, where the annotator then knows who wrote it. So a vote is first-sight when no
    earlier vote (earlier in commit order, the vote id: the reveal follows the vote's commit) of the same
    annotator, or cast from the same address hash (a fresh cookie does not make a voter forget), was on
    a battle that showed either of its outputs. Votes without an annotator or address, and battles
    without stored outputs (live answers, most imports), cannot be linked to an earlier reveal and count
    as first-sight. Two correlated ``NOT EXISTS``, over the battle's annotator index and the vote's
    address index.
    """
    earlier_battle = battle_t.alias("revealed_battle")
    earlier_vote = vote_t.alias("revealed_vote")
    shown = (battle_t.c.output_a_id, battle_t.c.output_b_id)
    revealed = (
        select(earlier_vote.c.id)
        .select_from(earlier_battle.join(earlier_vote, earlier_vote.c.battle_id == earlier_battle.c.id))
        .where(
            earlier_battle.c.annotator_id == vote_t.c.annotator_id,
            earlier_vote.c.annotator_id == vote_t.c.annotator_id,
            earlier_vote.c.id < vote_t.c.id,
            or_(earlier_battle.c.output_a_id.in_(shown), earlier_battle.c.output_b_id.in_(shown)),
        )
        .correlate(vote_t, battle_t)
    )
    revealed_here = (
        select(earlier_vote.c.id)
        .select_from(earlier_vote.join(earlier_battle, earlier_vote.c.battle_id == earlier_battle.c.id))
        .where(
            earlier_vote.c.address_hash == vote_t.c.address_hash,
            earlier_vote.c.id < vote_t.c.id,
            or_(earlier_battle.c.output_a_id.in_(shown), earlier_battle.c.output_b_id.in_(shown)),
        )
        .correlate(vote_t, battle_t)
    )
    return and_(~revealed.exists(), or_(vote_t.c.address_hash.is_(None), ~revealed_here.exists()))


def counted_vote_condition() -> ColumnElement[bool]:
    """The vote's annotator is not flagged nor an LLM judge (votes without an annotator count), on the
    vote row alone: the live standings are human-only.

    A small uncorrelated ``NOT IN (SELECT id FROM annotator WHERE ...)``: evaluated once, so the
    aggregate still reads only the covering index ``ix_vote_cells``.
    """
    return _excluding(flagged=True, judges=True)


#: The annotator table as the robust fit joins it (an alias: the filters use the table in subqueries).
robust_annotator = annotator_t.alias("robust_annotator")


def robust_weight() -> ColumnElement[Any]:
    """A vote's weight in the robust fit: its own weight times its annotator's ``honest_weight`` (1 for a
    vote without an annotator); the statement must select from :func:`_robust_join`."""
    return vote_t.c.weight * func.coalesce(robust_annotator.c.honest_weight, 1.0)


def _robust_join() -> Any:
    return vote_t.outerjoin(robust_annotator, vote_t.c.annotator_id == robust_annotator.c.id)


def flagged_down_weight(factor: float) -> ColumnElement[Any]:
    """A vote's weight when flagged annotators are down-weighted (``VoteFilter.flagged_weight``): a
    flagged annotator's vote weighs the smaller of their ``honest_weight`` and ``factor``; the statement
    must select from :func:`_robust_join`."""
    honest = func.coalesce(robust_annotator.c.honest_weight, 1.0)
    cap = literal(float(factor))
    flagged_share = case((honest < cap, honest), else_=cap)
    return vote_t.c.weight * case((robust_annotator.c.flagged.is_(True), flagged_share), else_=1.0)


def _weight(f: VoteFilter) -> tuple[ColumnElement[Any], Any]:
    """The vote weight column the filter asks for, and what to select it from."""
    if f.robust:
        return robust_weight(), _robust_join()
    if f.down_weighted and f.flagged_weight is not None:
        return flagged_down_weight(f.flagged_weight), _robust_join()
    return vote_t.c.weight, vote_t


def _filter_kwargs(
    filters: VoteFilter | None,
    category: str | None,
    language: str | None,
    since: datetime | None,
    until: datetime | None,
    exclude_flagged: bool,
) -> VoteFilter:
    if filters is not None:
        return filters
    return VoteFilter(category, language, since, until, exclude_flagged)


def _model_names(conn: Connection, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    stmt = select(model_t.c.id, model_t.c.name).where(model_t.c.id.in_(sorted(ids)))
    return {int(i): str(n) for i, n in conn.execute(stmt)}


class _Scan(NamedTuple):
    """The columns :func:`load_battles` reads, and the votes (joined as the filter needs) they come from."""

    columns: list[ColumnElement[Any]]
    votes: Any  # the FROM clause: the votes, joined
    own_weight: int  # the position of the vote's own weight among the columns (the board's when equal)


def _scan(conn: Connection, f: VoteFilter, who: bool) -> _Scan:
    weight, votes = _weight(f)
    columns: list[ColumnElement[Any]] = [
        vote_t.c.id.label("id"),
        vote_t.c.model_a_id.label("model_a"),
        vote_t.c.model_b_id.label("model_b"),
        vote_t.c.winner.label("winner"),
        _vote_time(conn).label("time"),
        weight.label("weight"),
        vote_t.c.sided.label("sided"),
    ]
    if who:
        columns += [
            func.coalesce(vote_t.c.annotator_id, -1).label("annotator"),
            func.coalesce(battle_t.c.prompt_id, -1).label("prompt"),
        ]
        # the battle is joined only for who: the plain read stays on the vote rows
        votes = votes.join(battle_t, vote_t.c.battle_id == battle_t.c.id)
    # the vote's own weight, what the ledger holds, when the filter weighs votes otherwise
    own_weight = len(columns) if weight is not vote_t.c.weight else 5
    if own_weight != 5:
        columns.append(vote_t.c.weight.label("own_weight"))
    return _Scan(columns, votes, own_weight)


def _packed_statement(f: VoteFilter, scan: _Scan, who: bool) -> Select[Any]:
    """The statement of SQLite's packed read (:func:`votes.reads.packed.packed_chunks`) of ``scan``."""
    columns = scan.columns
    if scan.own_weight == 5:
        columns = [*columns, vote_t.c.weight.label("own_weight")]
    return filter_votes(select(*columns).select_from(scan.votes), f, battle_joined=who)


def packed_scan(conn: Connection, filters: VoteFilter, *, who: bool = False) -> FetchedTexts | None:
    """The texts of the scan :func:`load_battles` runs on SQLite for ``filters`` and ``who``, not
    fetched yet: what a thread fetches ahead (:meth:`~votes.reads.packed.FetchedTexts.fetch`) and
    ``load_battles(..., fetched=...)`` then parses. None on another database (read row by row)."""
    if not dialect_of(conn).packs_scans:
        return None
    selected = _packed_statement(filters, _scan(conn, filters, who), who)
    return FetchedTexts((filters, who), packed_texts(conn, selected, who=who, size=_CHUNK))


def load_battles(
    db: Session | Connection,
    *,
    category: str | None = None,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    exclude_flagged: bool = False,
    filters: VoteFilter | None = None,
    who: bool = False,
    each_chunk: Callable[[StoredChunk], None] | None = None,
    fetched: FetchedTexts | None = None,
) -> Battles:
    """Every selected vote as arrays, in vote-id order (for Elo replays, time weights, held-out splits).

    Models are the ones that appear in the selection, sorted by name. With ``who`` each vote also
    carries its annotator id and its battle's prompt id (-1 where there is none), what clustered
    intervals resample; the battle is then joined, so the plain read stays on the vote rows.
    ``each_chunk`` (with ``who``) sees each chunk as stored (:class:`StoredChunk`), so what else needs
    the same votes (the ledger's digest) does not read them again. ``fetched`` is the texts of this
    very read fetched ahead on the same connection (:func:`packed_scan`), used when its key is this
    read's filter and ``who`` and it was not read before; otherwise the read is run here.
    """
    if each_chunk is not None and not who:
        raise ValueError("each_chunk reads the votes' annotators: ask for who")
    conn = _connection(db)
    f = _filter_kwargs(filters, category, language, since, until, exclude_flagged)
    scan = _scan(conn, f, who)
    columns, votes, own_weight = scan
    base = select(*columns).select_from(votes)

    def rows(span: tuple[int, int] | None = None) -> Select[Any]:
        """The votes row by row: all of them, or those with ids in ``(after, last]``."""
        stmt = base if span is None else base.where(vote_t.c.id > span[0], vote_t.c.id <= span[1])
        return filter_votes(stmt.order_by(vote_t.c.id), f, battle_joined=who)

    # Streamed in chunks straight into arrays: memory follows the arrays, not 10M Python row tuples.
    ids: list[npt.NDArray[np.int64]] = []
    a_ids: list[npt.NDArray[np.int64]] = []
    b_ids: list[npt.NDArray[np.int64]] = []
    outcomes: list[npt.NDArray[np.int8]] = []
    times: list[npt.NDArray[np.float64]] = []
    weights: list[npt.NDArray[np.float64]] = []
    sides: list[npt.NDArray[np.bool_]] = []
    annotators: list[npt.NDArray[np.int64]] = []
    prompts: list[npt.NDArray[np.int64]] = []
    codes: dict[str, int] = {}

    def read_rows(stmt: Select[Any]) -> None:
        for columns_read in column_chunks(conn, stmt, size=_CHUNK):
            winners = columns_read[3]
            for w in set(winners) - codes.keys():
                codes[w] = int(parse_outcome(w))
            ids.append(np.array(columns_read[0], dtype=np.int64))
            a_ids.append(np.array(columns_read[1], dtype=np.int64))
            b_ids.append(np.array(columns_read[2], dtype=np.int64))
            outcomes.append(np.fromiter(map(codes.__getitem__, winners), dtype=np.int8, count=len(winners)))
            micro = _micro_array(columns_read[4])
            times.append(_seconds_one_by_one(columns_read[4]) if micro is None else micro / 1e6)
            weights.append(np.array(columns_read[5], dtype=np.float64))
            sides.append(np.array(columns_read[6], dtype=bool))
            if who:
                annotators.append(np.array(columns_read[7], dtype=np.int64))
                prompts.append(np.array(columns_read[8], dtype=np.int64))
            if each_chunk is not None:
                each_chunk(
                    StoredChunk(
                        a_ids[-1],
                        b_ids[-1],
                        annotators[-1],
                        winners,
                        columns_read[4],
                        micro,
                        columns_read[own_weight],
                        columns_read[6],
                    )
                )

    if not dialect_of(conn).packs_scans:
        read_rows(rows())
    else:  # SQLite hands chunks of votes packed in a few texts (votes.reads.packed)
        selected = _packed_statement(f, scan, who)
        ahead = fetched if fetched is not None and fetched.key == (f, who) and not fetched.used else None
        for packed in packed_chunks(conn, selected, who=who, size=_CHUNK, fetched=ahead):
            micro = None if isinstance(packed, RowsNeeded) else time_micro(packed.time_chars)
            if isinstance(packed, RowsNeeded):
                read_rows(rows((packed.after, packed.last)))
                continue
            if micro is None:  # a time numpy does not read: the chunk's rows are parsed one by one
                read_rows(rows((int(packed.vote_id[0]) - 1, int(packed.vote_id[-1]))))
                continue
            ids.append(packed.vote_id)
            a_ids.append(packed.model_a)
            b_ids.append(packed.model_b)
            outcomes.append(packed.outcome)
            times.append(micro / 1e6)
            # every weight is 1 (read packed): a read-only view of one 1, made an array only if needed
            weights.append(np.broadcast_to(np.float64(1.0), len(packed.vote_id)))
            sides.append(packed.sided)
            if packed.annotator is not None and packed.prompt is not None:
                annotators.append(packed.annotator)
                prompts.append(packed.prompt)
            if each_chunk is not None:
                each_chunk(
                    StoredChunk(
                        packed.model_a,
                        packed.model_b,
                        annotators[-1],
                        _OUTCOME_WORDS[packed.outcome],
                        packed.time_chars,
                        micro,
                        weights[-1],
                        packed.sided,
                    )
                )
    # Each column's chunks are let go as soon as the column is joined: the votes are held twice one
    # column at a time, not all of them at once (what bounds a 10M-vote read's peak).
    model_a_id = _concat(a_ids, np.int64)
    model_b_id = _concat(b_ids, np.int64)
    present = np.union1d(np.unique(model_a_id), np.unique(model_b_id))
    names = _model_names(conn, set(present.tolist()))
    models = tuple(sorted(names.values()))
    lookup = np.zeros(max(names, default=0) + 1, dtype=np.int64)
    for model_id, name in names.items():
        lookup[model_id] = models.index(name)
    model_a = lookup[model_a_id]
    del model_a_id
    model_b = lookup[model_b_id]
    del model_b_id
    weighed_one = all(bool(np.all(part == 1.0)) for part in weights)
    vote_weight = None if weighed_one else _concat(weights, np.float64)
    weights.clear()
    sided = _concat(sides, np.bool_)
    return Battles(
        models=models,
        vote_id=_concat(ids, np.int64),
        model_a=model_a,
        model_b=model_b,
        outcome=_concat(outcomes, np.int8),
        time=_concat(times, np.float64),
        weight=vote_weight,
        sided=None if np.all(sided) else sided,
        annotator=_concat(annotators, np.int64) if who else None,
        prompt=_concat(prompts, np.int64) if who else None,
    )


def iter_vote_texts(
    db: Session | Connection,
    *,
    category: str | None = None,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    exclude_flagged: bool = False,
    filters: VoteFilter | None = None,
) -> Iterator[tuple[int, str | None, str | None, int | None, int | None]]:
    """``(vote_id, text_a, text_b, tokens_a, tokens_b)`` of the selected votes, row for row with
    :func:`load_battles`.

    For style covariates from the store: one streamed query, the answers' texts joined on the battle's
    outputs; a text is None when the battle has no such output (imported votes without conversations).
    ``tokens_*`` is the answer's completion-token count as its generating server reported it (generation
    provenance), None for answers generated elsewhere or by a server that did not say.
    """
    conn = _connection(db)
    f = _filter_kwargs(filters, category, language, since, until, exclude_flagged)
    output_a, output_b = output_t.alias("output_a"), output_t.alias("output_b")
    made_a, made_b = generation_t.alias("generation_a"), generation_t.alias("generation_b")
    stmt = filter_votes(
        select(
            vote_t.c.id,
            output_a.c.text,
            output_b.c.text,
            made_a.c.completion_tokens,
            made_b.c.completion_tokens,
        )
        .select_from(vote_t)
        .join(battle_t, vote_t.c.battle_id == battle_t.c.id)
        .outerjoin(output_a, battle_t.c.output_a_id == output_a.c.id)
        .outerjoin(output_b, battle_t.c.output_b_id == output_b.c.id)
        .outerjoin(made_a, made_a.c.output_id == battle_t.c.output_a_id)
        .outerjoin(made_b, made_b.c.output_id == battle_t.c.output_b_id)
        .order_by(vote_t.c.id),
        f,
        battle_joined=True,
    )
    rows = conn.execute(stmt, execution_options={"yield_per": _STREAM})
    for vote_id, text_a, text_b, tokens_a, tokens_b in rows:
        yield (
            int(vote_id),
            text_a,
            text_b,
            None if tokens_a is None else int(tokens_a),
            None if tokens_b is None else int(tokens_b),
        )


def _vote_time(conn: Connection) -> ColumnElement[Any]:
    """The vote time column as read fast: SQLite's stored text as is (parsed by :func:`_seconds`)."""
    return dialect_of(conn).stored_time(vote_t.c.created_at)


def _seconds(value: datetime | str) -> float:
    """Seconds since the epoch of a stored vote time, exactly ``created_at.timestamp()``.

    SQLite stores UTC as ``YYYY-MM-DD HH:MM:SS.ffffff`` text; ``datetime.fromisoformat`` reads it several
    times faster than the ORM type's regular expression, to the same datetime.
    """
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).timestamp()


def seconds_array(values: Sequence[datetime | str]) -> npt.NDArray[np.float64]:
    """:func:`_seconds` of each stored vote time, as one array. SQLite's text is parsed by numpy at once
    (microseconds since the epoch divided by a million: the same float as ``timestamp()``); a value numpy
    does not read exactly (a stored offset, a datetime from PostgreSQL) sends the chunk through
    :func:`_seconds` value by value."""
    micro = _micro_array(values)
    return _seconds_one_by_one(values) if micro is None else micro / 1e6


def _micro_array(values: Sequence[datetime | str]) -> npt.NDArray[np.int64] | None:
    """SQLite's stored times in microseconds since the epoch, parsed by numpy at once; None when a value
    is not text numpy reads exactly."""
    if values and all(type(v) is str for v in values):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                micro: npt.NDArray[np.int64] = np.array(values, dtype="datetime64[us]").astype(np.int64)
            return micro
        except (ValueError, Warning):
            pass
    return None


def _seconds_one_by_one(values: Sequence[datetime | str]) -> npt.NDArray[np.float64]:
    return np.fromiter(map(_seconds, values), dtype=np.float64, count=len(values))


def _concat(parts: list[Any], dtype: type[Any]) -> Any:
    """The chunks joined into one array; the list is emptied, so the chunks can be freed."""
    joined = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
    parts.clear()
    return joined


def votes_name_annotators(db: Session | Connection) -> bool:
    """Whether any stored vote names an annotator, whatever a filter selects: when none does, no board
    can be clustered by annotator (one index scan, stopped at the first such vote)."""
    conn = _connection(db)
    found = conn.execute(select(vote_t.c.id).where(vote_t.c.annotator_id >= 0).limit(1)).first()
    return found is not None


def load_pair_counts(
    db: Session | Connection,
    *,
    category: str | None = None,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    exclude_flagged: bool = False,
    filters: VoteFilter | None = None,
) -> PairCounts:
    """Selected votes aggregated in SQL by (model_a, model_b, winner): one row per cell, not per vote.

    Weighted votes make ``count`` the summed weights (``votes`` the vote numbers); votes without a known
    side go to cells of their own (``sided`` false), as :func:`leaderboard.data.aggregate_codes` does.
    """
    conn = _connection(db)
    f = _filter_kwargs(filters, category, language, since, until, exclude_flagged)
    dialect = dialect_of(conn)
    stmt = pair_counts_statement(f, dialect=dialect)
    # SQLite hands whole-number cells packed in a few texts (votes.reads.packed); else a row per cell
    packed = packed_cells(conn, stmt) if dialect.packs_scans else None
    if packed is not None:
        a_ids, b_ids, outcome = packed.model_a, packed.model_b, packed.outcome
        votes = weight = packed.votes.astype(np.float64)
        votes_unsided = weight_unsided = packed.unsided.astype(np.float64)
    else:
        rows = conn.execute(stmt).all()
        a_ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        b_ids = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
        outcome = np.fromiter((parse_outcome(r[2]) for r in rows), dtype=np.int8, count=len(rows))
        votes = np.fromiter((r[3] for r in rows), dtype=np.float64, count=len(rows))
        weight = np.fromiter((r[4] for r in rows), dtype=np.float64, count=len(rows))
        votes_unsided = np.fromiter((r[5] for r in rows), dtype=np.float64, count=len(rows))
        weight_unsided = np.fromiter((r[6] for r in rows), dtype=np.float64, count=len(rows))
    n = len(a_ids)
    names = _model_names(conn, set(np.union1d(a_ids, b_ids).tolist()))
    models = tuple(sorted(names.values()))
    lookup = np.zeros(max(names, default=0) + 1, dtype=np.int64)
    for model_id, name in names.items():
        lookup[model_id] = models.index(name)
    model_a, model_b = lookup[a_ids], lookup[b_ids]
    sided: npt.NDArray[np.bool_] | None = None
    if np.any(votes_unsided > 0):
        # Each (model_a, model_b, outcome) row splits into its sided and its side-less cell.
        model_a, model_b, outcome = (np.concatenate([x, x]) for x in (model_a, model_b, outcome))
        votes = np.concatenate([votes - votes_unsided, votes_unsided])
        weight = np.concatenate([weight - weight_unsided, weight_unsided])
        sided = np.concatenate([np.ones(n, dtype=bool), np.zeros(n, dtype=bool)])
        present = votes > 0
        model_a, model_b, outcome = model_a[present], model_b[present], outcome[present]
        votes, weight, sided = votes[present], weight[present], sided[present]
    # The cells are unique already; put them in the (model_a, model_b, outcome, sided) order of
    # aggregate_codes.
    order = np.lexsort((sided if sided is not None else outcome, outcome, model_b, model_a))
    weighted = not np.array_equal(weight, votes)
    return PairCounts(
        models=models,
        model_a=model_a[order],
        model_b=model_b[order],
        outcome=outcome[order],
        count=(weight if weighted else votes)[order],
        votes=votes[order] if weighted else None,
        sided=None if sided is None else sided[order],
    )


def pair_counts_statement(filters: VoteFilter | None = None, *, dialect: Dialect) -> Select[Any]:
    """The ``GROUP BY model_a, model_b, winner`` behind :func:`load_pair_counts`, for ``dialect``'s planner.

    Grouped on the vote's own copies of the battle facts: unfiltered, or excluding flagged annotators,
    it is one scan of the covering index ``ix_vote_cells`` in the index's order (no join, no sort).
    Category, language and anonymity filters join the battle and prompt; time filters read the vote rows.
    Columns: the three keys, the number of votes, their summed weight, and the number and summed weight
    of the votes without a known side.
    """
    f = filters or VoteFilter()
    keys: list[ColumnElement[Any]] = [vote_t.c.model_a_id, vote_t.c.model_b_id, vote_t.c.winner]
    unsided = vote_t.c.sided.is_(False)
    weight, votes = _weight(f)
    stmt = select(
        *keys,
        func.count(),
        func.sum(weight),
        func.sum(case((unsided, 1), else_=0)),
        func.sum(case((unsided, weight), else_=0.0)),
    ).select_from(votes)
    if f.since is not None or f.until is not None:
        # Left alone, SQLite walks ix_vote_cells for its order and fetches every vote row at random to
        # test its time (10M votes, half selected: 34 s). Grouping by ``+column`` (SQLite's documented
        # way to keep a term off an index) lets it take the time index's range and sort instead (6.5 s).
        keys = [dialect.unindexed(k) for k in keys]
    return filter_votes(stmt, f).group_by(*keys)


def iter_vote_rows(db: Session | Connection, filters: VoteFilter | None = None) -> Iterator[dict[str, Any]]:
    """Votes as canonical Chatbot Arena rows, in vote-id order (the export and hash format).

    ``judge`` is the annotator's label (an imported judge) or ``annotator-<id>`` for site annotators;
    ``tstamp`` is the vote time in seconds since the epoch. ``weight`` and ``sided`` are in a row only
    when they differ from 1 and true (as in :meth:`votes.files.battle_rows.BattleRecord.row`), so the hash of
    unweighted votes does not depend on them.
    """
    conn = _connection(db)
    model_a, model_b = model_t.alias("model_a"), model_t.alias("model_b")
    output_a, output_b = output_t.alias("output_a"), output_t.alias("output_b")
    prompt = prompt_t.alias("battle_prompt")  # not "prompt": filters join the table itself
    stmt = filter_votes(
        select(
            vote_t.c.winner,
            _vote_time(conn),
            model_a.c.name,
            model_b.c.name,
            annotator_t.c.id,
            annotator_t.c.label,
            prompt.c.external_id,
            output_a.c.conversation,
            output_b.c.conversation,
            battle_t.c.extra,
            battle_t.c.language,
            battle_t.c.source,
            vote_t.c.weight,
            vote_t.c.sided,
        )
        .select_from(vote_t)
        .join(battle_t, vote_t.c.battle_id == battle_t.c.id)
        .join(model_a, battle_t.c.model_a_id == model_a.c.id)
        .join(model_b, battle_t.c.model_b_id == model_b.c.id)
        .outerjoin(annotator_t, battle_t.c.annotator_id == annotator_t.c.id)
        .outerjoin(prompt, battle_t.c.prompt_id == prompt.c.id)
        .outerjoin(output_a, battle_t.c.output_a_id == output_a.c.id)
        .outerjoin(output_b, battle_t.c.output_b_id == output_b.c.id)
        .order_by(vote_t.c.id),
        filters,
        battle_joined=True,
    )
    result = conn.execute(stmt, execution_options={"yield_per": _STREAM})
    for row in result:
        winner, created_at, name_a, name_b, ann_id, label, qid, conv_a, conv_b, extra, lang, source = row[:12]
        weight, sided = float(row[12]), bool(row[13])
        extra = extra or {}
        judge = label if label is not None else (f"annotator-{ann_id}" if ann_id is not None else None)
        yield {
            "question_id": qid if qid is not None else extra.get("question_id"),
            "model_a": name_a,
            "model_b": name_b,
            "winner": winner,
            "judge": judge,
            # Conversations travel in pairs: a battle shows both answers or neither is exported.
            "conversation_a": conv_a if conv_b is not None else None,
            "conversation_b": conv_b if conv_a is not None else None,
            "turn": extra.get("turn"),
            "anony": extra.get("anony", True if source == "site" else None),
            "language": lang,
            "tstamp": _seconds(created_at),
            **({} if weight == 1.0 else {"weight": weight}),
            **({} if sided else {"sided": False}),
        }


def iter_catalog_rows(db: Session | Connection) -> Iterator[dict[str, Any]]:
    """Prompts and outputs as canonical catalog rows: prompt-id order, then sample, then output-id order
    (so a model's samples come in sample order, which is how an import numbers them).

    A prompt without outputs is one row with ``model`` and ``output`` left empty.
    """
    conn = _connection(db)
    stmt = (
        select(
            prompt_t.c.id,
            prompt_t.c.external_id,
            prompt_t.c.text,
            prompt_t.c.conversation,
            prompt_t.c.category,
            prompt_t.c.language,
            model_t.c.name,
            output_t.c.text,
        )
        .outerjoin(output_t, output_t.c.prompt_id == prompt_t.c.id)
        .outerjoin(model_t, output_t.c.model_id == model_t.c.id)
        .order_by(prompt_t.c.id, output_t.c.sample, output_t.c.id)
    )
    result = conn.execute(stmt, execution_options={"yield_per": _STREAM})
    for pid, ext, text, conversation, category, language, model, output in result:
        yield {
            "prompt_id": ext if ext is not None else f"prompt-{pid}",
            "prompt": conversation if conversation is not None else text,
            "category": category,
            "language": language,
            "model": model,
            "output": output,
        }


def votes_sha256(db: Session | Connection, filters: VoteFilter | None = None) -> str:
    """sha256 of the selected votes' canonical JSONL export (equal to ``sha256sum`` of that file)."""
    return rows_sha256(iter_vote_rows(db, filters))


def has_weights_or_sides(db: Session | Connection) -> bool:
    """Whether any stored vote has a weight other than 1 or an unknown side (exports then add the
    ``weight`` and ``sided`` columns)."""
    stmt = select(vote_t.c.id).where(or_(vote_t.c.weight != 1.0, vote_t.c.sided.is_(False))).limit(1)
    return _connection(db).execute(stmt).first() is not None


def count_flagged_annotators(db: Session | Connection) -> int:
    """How many annotators are flagged (their votes do not count)."""
    stmt = select(func.count()).select_from(annotator_t).where(annotator_t.c.flagged.is_(True))
    return int(_connection(db).execute(stmt).scalar_one())
