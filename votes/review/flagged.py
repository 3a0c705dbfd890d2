"""Who a board leaves out or down-weights, and why: the flagged annotators with votes in it.

A published board counts flagged annotators' votes as its filter says
(:class:`votes.reads.filters.VoteFilter`: left out by default, down-weighted with ``flagged_weight``, weighed
by every annotator's honest weight with ``robust``). :func:`flagged_report` lists the flagged annotators whose
votes the filter would otherwise select, each under a pseudonymous id (``annotator:<id>``, as the snapshot's
agreement report names annotators without a label; never a label, an e-mail or an address) with one reason:
the review's own words, the onboarding quiz's, or "flagged by a maintainer" (a maintainer's free-text reason
may name anyone and stays in the admin pages). With the report goes the gold summary: how many gold votes, by
how many annotators, the share right, and how many golds are retired.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.engine import Connection

from votes.reads.filters import VoteFilter, filter_votes
from votes.review.voters import AUTO_FLAG_PREFIX
from votes.tables import annotator_t, goldbattle_t, goldvote_t, vote_t
from votes.voting.gold_votes import QUIZ_FLAG_REASON

__all__ = ["flagged_report", "public_reason"]

_MAINTAINER = "flagged by a maintainer"


def public_reason(flag_reason: str | None) -> str:
    """The reason a snapshot shows for a flag: the review's or the quiz's words, else a maintainer's flag."""
    if flag_reason and flag_reason.startswith(AUTO_FLAG_PREFIX):
        return "review: " + flag_reason[len(AUTO_FLAG_PREFIX) :]
    if flag_reason and flag_reason.startswith(QUIZ_FLAG_REASON):
        return flag_reason
    return _MAINTAINER


def _mode(vote_filter: VoteFilter) -> str:
    if vote_filter.robust:
        return "robust"
    if not vote_filter.exclude_flagged:
        return "include"
    return "down-weight" if vote_filter.down_weighted else "exclude"


def flagged_report(conn: Connection, vote_filter: VoteFilter) -> dict[str, Any]:
    """The board's flagged annotators (see the module): ``mode`` (exclude, down-weight, robust or
    include), ``n_annotators``, ``annotators`` (id, reason, votes, and the weight each vote had unless
    excluded, in id order) and ``gold`` (None without gold votes)."""
    mode = _mode(vote_filter)
    unflagged = replace(vote_filter, exclude_flagged=False, robust=False, flagged_weight=None)
    flagged_ids = select(annotator_t.c.id).where(annotator_t.c.flagged.is_(True))
    stmt = filter_votes(
        select(vote_t.c.annotator_id, func.count())
        .select_from(vote_t)
        .where(vote_t.c.annotator_id.in_(flagged_ids)),
        unflagged,
    ).group_by(vote_t.c.annotator_id)
    counts = {int(a): int(n) for a, n in conn.execute(stmt).all()}
    annotators: list[dict[str, Any]] = []
    if counts and mode != "include":
        info = conn.execute(
            select(annotator_t.c.id, annotator_t.c.flag_reason, annotator_t.c.honest_weight).where(
                annotator_t.c.id.in_(sorted(counts))
            )
        ).all()
        for annotator_id, reason, honest in sorted(info):
            entry: dict[str, Any] = {
                "id": f"annotator:{annotator_id}",
                "reason": public_reason(reason),
                "n_votes": counts[int(annotator_id)],
            }
            honest = 1.0 if honest is None else float(honest)
            if mode == "down-weight" and vote_filter.flagged_weight is not None:
                entry["weight"] = min(honest, vote_filter.flagged_weight)
            elif mode == "robust":
                entry["weight"] = honest
            annotators.append(entry)
    right = func.sum(case((goldvote_t.c.correct.is_(True), 1), else_=0))
    n_gold, n_right, n_people = conn.execute(
        select(func.count(), right, func.count(goldvote_t.c.annotator_id.distinct())).select_from(goldvote_t)
    ).one()
    gold = None
    if n_gold:
        retired = select(func.count()).select_from(goldbattle_t).where(goldbattle_t.c.retired.is_(True))
        gold = {
            "n_votes": int(n_gold),
            "n_annotators": int(n_people),
            "accuracy": int(n_right) / int(n_gold),
            "n_retired": int(conn.execute(retired).scalar_one()),
        }
    return {"mode": mode, "n_annotators": len(annotators), "annotators": annotators, "gold": gold}
