"""Votes with who cast them and on which prompt, as Battles arrays: the input of agreement reports.

Which annotators are LLM judges and which model family a judge or model belongs to are decided here
once, for ``arena agreement`` and for the agreement section of a published snapshot alike.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from leaderboard.battles import Battles
from leaderboard.composite.agreement import AgreementReport, agreement_report, agreement_statistics
from leaderboard.composite.model import CompositeData
from leaderboard.data import OUTCOME_STRINGS, Outcome, parse_outcome
from votes.files.columns import read_agreement_columns
from votes.files.convert import read_battle_records
from votes.files.records import InputError, Message
from votes.names import JUDGE_LABEL, KNOWN_FAMILIES, is_judge
from votes.reads.filters import VoteFilter, filter_votes
from votes.tables import annotator_t, battle_t, model_t, output_t, prompt_t, vote_t

__all__ = [
    "AgreementInput",
    "agreement_from_store",
    "agreement_input_from_file",
    "agreement_input_from_store",
    "agreement_of",
    "annotated_battles",
    "composite_input",
    "family_of",
    "is_judge",
    "judge_model",
    "judge_votes",
    "judges_counted",
    "source_aware_filter",
]


def family_of(name: str) -> int | None:
    """Index of the first known model family whose pattern the (judge's or model's) name matches."""
    judged = JUDGE_LABEL.match(name)
    bare = (judged.group("model") if judged else name).lower()
    for index, (pattern, _names) in enumerate(KNOWN_FAMILIES):
        if re.search(pattern, bare):
            return index
    return None


def agreement_from_store(conn: Connection, vote_filter: VoteFilter | None = None) -> AgreementReport | None:
    """The agreement report of the stored votes that ``vote_filter`` selects, every annotator's (humans
    and judges: the filter's own choice of annotators is ignored), with the figures of
    :func:`~leaderboard.composite.agreement.agreement_statistics`; None when no judge voted there."""
    read = agreement_input_from_store(conn, vote_filter)
    if len(read.battles) == 0 or not any(is_judge(label) for label in read.labels):
        return None
    return agreement_of(read, judges_counted(conn, vote_filter or VoteFilter()))


def agreement_of(read: AgreementInput, judges_in_board: tuple[str, ...] = ()) -> AgreementReport:
    """The whole agreement report (groups, judges and statistics) of one :class:`AgreementInput`."""
    report = agreement_report(read.battles, read.labels, is_judge=is_judge, family_of=family_of)
    stats = agreement_statistics(read.battles, read.labels, slices=read.slices, longer_left=read.longer_left)
    return replace(report, judges_in_board=judges_in_board, stats=stats)


def judges_counted(conn: Connection, vote_filter: VoteFilter) -> tuple[str, ...]:
    """Labels of the LLM judges whose votes ``vote_filter`` lets into a board: none by default for the
    judges of ``arena judge``, but judges imported from a battles file (``llm-<model>``) count unless the
    filter names its annotators; a snapshot says so rather than mix them in silently."""
    stmt = (
        select(annotator_t.c.label)
        .select_from(vote_t)
        .join(battle_t, battle_t.c.id == vote_t.c.battle_id)
        .join(annotator_t, annotator_t.c.id == vote_t.c.annotator_id)
        .distinct()
    )
    labels = conn.execute(filter_votes(stmt, vote_filter, battle_joined=True)).scalars()
    return tuple(sorted(str(label) for label in labels if label is not None and is_judge(label)))


def judge_votes(conn: Connection, battles: Battles) -> Battles | None:
    """The LLM judges' votes among ``battles`` (whose ``annotator`` holds stored annotator ids), coded
    0, 1, ... by label order with the labels as ``annotator_names``; None when fewer than two judges
    voted there. Only the judges' rows of the annotator table are read (never one row per human)."""
    if battles.annotator is None:
        return None
    stmt = select(annotator_t.c.id, annotator_t.c.label).where(
        annotator_t.c.label.like("judge:%") | annotator_t.c.label.like("llm-%")
    )
    found = {int(i): str(label) for i, label in conn.execute(stmt).all() if label and is_judge(label)}
    ids = np.array(sorted(found), dtype=np.int64)
    keep = np.isin(battles.annotator, ids)
    present = np.unique(battles.annotator[keep])
    if present.size < 2:
        return None
    labels = sorted(found[int(i)] for i in present)
    code = {i: labels.index(found[int(i)]) for i in present.tolist()}
    part = battles.take(np.flatnonzero(keep))
    if part.annotator is None:  # taken from votes that carry annotators
        raise ValueError("judge votes need each vote's annotator")
    recoded = np.array([code[i] for i in part.annotator.tolist()], dtype=np.int64)
    return replace(part, annotator=recoded, annotator_names=tuple(labels))


def annotated_battles(
    conn: Connection, vote_filter: VoteFilter | None = None
) -> tuple[Battles, tuple[str, ...]]:
    """Every vote with an annotator and a prompt, in vote-id order, and the annotators' labels.

    ``vote_filter`` narrows the votes (category, language, times, flagged annotators); its choice of
    annotators is ignored: every annotator's votes are read, LLM judges' included.

    ``Battles.annotator`` indexes into the returned labels (an annotator without a label is
    ``annotator:<id>``); ``Battles.prompt`` holds prompt ids. Models are sorted by name.
    """
    read = agreement_input_from_store(conn, vote_filter)
    return read.battles, read.labels


@dataclass(frozen=True)
class AgreementInput:
    """Votes for :func:`leaderboard.composite.agreement.agreement_statistics`: the battles (annotator and
    prompt set), the annotators' labels, per-vote slices (category, language) and which answer was longer."""

    battles: Battles
    labels: tuple[str, ...]
    slices: dict[str, npt.NDArray[np.object_]]
    longer_left: npt.NDArray[np.int64] | None


def _longer(left: list[int | None], right: list[int | None]) -> npt.NDArray[np.int64] | None:
    if not any(a is not None and b is not None for a, b in zip(left, right, strict=True)):
        return None
    return np.array(
        [0 if a is None or b is None else int(np.sign(a - b)) for a, b in zip(left, right, strict=True)],
        dtype=np.int64,
    )


def source_aware_filter(vote_filter: VoteFilter | None) -> VoteFilter:
    """The votes :func:`agreement_input_from_store` reads under ``vote_filter``: every annotator's
    (judges included, whatever the filter's annotators), with an annotator and a prompt. A source-aware
    board counts and hashes these, so its ``votes_sha256`` covers the judge verdicts it fits."""
    return replace(vote_filter or VoteFilter(), annotators=("all",), source_aware=True)


def agreement_input_from_store(conn: Connection, vote_filter: VoteFilter | None = None) -> AgreementInput:
    """:class:`AgreementInput` of the stored votes with an annotator and a prompt (see
    :func:`annotated_battles`); answer lengths from the battle's outputs."""
    a_model, b_model = model_t.alias("a_model"), model_t.alias("b_model")
    out_a, out_b = output_t.alias("out_a"), output_t.alias("out_b")
    # An alias of its own: a category or language filter joins the prompt table too.
    prompt = prompt_t.alias("agreement_prompt")
    stmt = (
        select(
            a_model.c.name,
            b_model.c.name,
            vote_t.c.winner,
            vote_t.c.annotator_id,
            annotator_t.c.label,
            battle_t.c.prompt_id,
            prompt.c.category,
            func.coalesce(battle_t.c.language, prompt.c.language),
            vote_t.c.model_a_id == battle_t.c.model_a_id,
            func.length(out_a.c.text),
            func.length(out_b.c.text),
        )
        .select_from(vote_t)
        .join(battle_t, battle_t.c.id == vote_t.c.battle_id)
        .join(annotator_t, annotator_t.c.id == vote_t.c.annotator_id)
        .join(a_model, a_model.c.id == vote_t.c.model_a_id)
        .join(b_model, b_model.c.id == vote_t.c.model_b_id)
        .outerjoin(prompt, prompt.c.id == battle_t.c.prompt_id)
        .outerjoin(out_a, out_a.c.id == battle_t.c.output_a_id)
        .outerjoin(out_b, out_b.c.id == battle_t.c.output_b_id)
        .where(battle_t.c.prompt_id.is_not(None))
        .order_by(vote_t.c.id)
    )
    if vote_filter is not None:
        stmt = filter_votes(stmt, source_aware_filter(vote_filter), battle_joined=True)
    rows = conn.execute(stmt).all()
    models = tuple(sorted({r[0] for r in rows} | {r[1] for r in rows}))
    model_index = {m: i for i, m in enumerate(models)}
    labels: dict[int, str] = {}
    for r in rows:
        labels.setdefault(r[3], r[4] or f"annotator:{r[3]}")
    order = sorted(labels, key=lambda k: labels[k])
    annotator_index = {k: i for i, k in enumerate(order)}
    battles = Battles(
        models=models,
        model_a=np.array([model_index[r[0]] for r in rows], dtype=np.int64),
        model_b=np.array([model_index[r[1]] for r in rows], dtype=np.int64),
        outcome=np.array([parse_outcome(r[2]) for r in rows], dtype=np.int8),
        annotator=np.array([annotator_index[r[3]] for r in rows], dtype=np.int64),
        prompt=np.array([r[5] for r in rows], dtype=np.int64),
    )
    left = [r[9] if r[8] else r[10] for r in rows]
    right = [r[10] if r[8] else r[9] for r in rows]
    slices = {
        "category": np.array([r[6] for r in rows], dtype=object),
        "language": np.array([r[7] for r in rows], dtype=object),
    }
    return AgreementInput(battles, tuple(labels[k] for k in order), slices, _longer(left, right))


def _answer_length(conversation: tuple[Message, ...] | None) -> int | None:
    if conversation is None:
        return None
    return sum(len(str(m.get("content", ""))) for m in conversation if m.get("role") == "assistant")


def agreement_input_from_file(path: Path) -> AgreementInput:
    """:class:`AgreementInput` of a battles file in any shape ``arena import`` reads (see
    :func:`votes.files.columns.read_battles`; rows validated, a bad row raises
    :class:`~votes.files.records.InputError`).

    An item is the row's ``question_id`` and ``turn`` (or, without an id, its first user message); a
    row with neither is refused. A vote without a ``judge`` is one anonymous annotator of its own.
    """
    columns = read_agreement_columns(path)
    if columns is not None:
        return _input_from_columns(columns)
    records = read_battle_records(path)
    prompt_keys: dict[tuple[str, int], int] = {}
    annot: list[str] = []
    prompts: list[int] = []
    for n, rec in enumerate(records):
        key = rec.question_id
        if key is None and rec.conversation_a:
            first = next((m for m in rec.conversation_a if m.get("role") == "user"), None)
            key = None if first is None else "text:" + str(first.get("content", ""))
        if key is None:
            raise InputError(path, rec.where, "agreement needs a question_id or a conversation per battle")
        prompts.append(prompt_keys.setdefault((key, rec.turn or 1), len(prompt_keys)))
        annot.append(rec.judge if rec.judge is not None else f"anonymous:{n}")
    models = tuple(sorted({r.model_a for r in records} | {r.model_b for r in records}))
    model_index = {m: i for i, m in enumerate(models)}
    label_list = sorted(set(annot))
    label_index = {k: i for i, k in enumerate(label_list)}
    battles = Battles(
        models=models,
        model_a=np.array([model_index[r.model_a] for r in records], dtype=np.int64),
        model_b=np.array([model_index[r.model_b] for r in records], dtype=np.int64),
        outcome=np.array([parse_outcome(r.winner) for r in records], dtype=np.int8),
        annotator=np.array([label_index[a] for a in annot], dtype=np.int64),
        prompt=np.array(prompts, dtype=np.int64),
    )
    slices = {
        "category": np.array([r.category for r in records], dtype=object),
        "language": np.array([r.language for r in records], dtype=object),
    }
    left = [_answer_length(r.conversation_a) for r in records]
    right = [_answer_length(r.conversation_b) for r in records]
    return AgreementInput(battles, tuple(label_list), slices, _longer(left, right))


def _input_from_columns(cols: dict[str, npt.NDArray[np.object_]]) -> AgreementInput:
    """:class:`AgreementInput` of validated columns (see
    :func:`votes.files.columns.read_agreement_columns`)."""
    n = len(cols["winner"])
    turns = np.array(["1" if t is None else str(t) for t in cols["turn"]], dtype=object)
    _, prompt = np.unique(cols["question_id"].astype(str) + "\x00" + turns.astype(str), return_inverse=True)
    judge = cols["judge"]
    anonymous = np.array([j is None for j in judge])
    names = np.where(anonymous, np.char.add("anonymous:", np.arange(n).astype(str)).astype(object), judge)
    labels, annotator = np.unique(names.astype(str), return_inverse=True)
    models, sides = np.unique(
        np.concatenate([cols["model_a"], cols["model_b"]]).astype(str), return_inverse=True
    )
    winner = cols["winner"]
    outcome = np.select(
        [winner == OUTCOME_STRINGS[o] for o in (Outcome.MODEL_A, Outcome.MODEL_B, Outcome.TIE)],
        [int(Outcome.MODEL_A), int(Outcome.MODEL_B), int(Outcome.TIE)],
        int(Outcome.BOTHBAD),
    )
    battles = Battles(
        models=tuple(str(m) for m in models),
        model_a=sides[:n].astype(np.int64),
        model_b=sides[n:].astype(np.int64),
        outcome=outcome.astype(np.int8),
        annotator=annotator.ravel().astype(np.int64),
        prompt=prompt.ravel().astype(np.int64),
    )
    slices = {"category": cols["category"], "language": cols["language"]}
    return AgreementInput(battles, tuple(str(x) for x in labels), slices, None)


def judge_model(label: str) -> str | None:
    """The model an LLM judge's label names (``judge:gpt-4o`` -> ``gpt-4o``), None for a human."""
    judged = JUDGE_LABEL.match(label)
    return judged.group("model") if judged else None


def composite_input(read: AgreementInput, families: Mapping[str, str] | None = None) -> CompositeData:
    """The source-aware composite's input (:func:`leaderboard.composite.board.composite_data`) from votes
    with their annotators: every LLM judge (:func:`is_judge`) a source of its own, everyone else the
    human pool. ``families`` maps model names to families; a judge takes the family of the model it
    names, so its self-preference is learned for the models of that family."""
    from leaderboard.composite.board import composite_data  # scipy.optimize: only a composite board fits

    families = dict(families or {})
    judges = [label for label in read.labels if is_judge(label)]
    for label in judges:
        model = judge_model(label)
        if model is not None and model in families:
            families[label] = families[model]
    return composite_data(read.battles, read.labels, judges=judges, families=families)
