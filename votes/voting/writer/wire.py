"""The vote writer's line protocol: who the writer is, and votes and their answers as JSON lines.

A worker must never send its votes to a writer of another database or another Elo configuration: the
writer says who it is first (:func:`writer_identity`), and the worker compares. Votes travel in the one
dictionary form of :class:`~votes.voting.battles.VoteRequest` (with the id of the web request that carried the
vote, which the writer logs with its commit), answers in that of :class:`~votes.voting.battles.VoteResult` or
as a typed error.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import Future
from dataclasses import asdict
from typing import Any

from sqlalchemy.engine import Engine

from leaderboard.online.elo import EloConfig
from votes.dialects import dialect_of
from votes.voting.battles import AlreadyVotedError, VoteError, VoteResult
from votes.voting.live import LiveConfig, rater_identity

__all__ = [
    "MAX_LINE",
    "PROTOCOL",
    "VoteWriterError",
    "database_fingerprint",
    "encode_line",
    "outcome_to_wire",
    "settle",
    "writer_identity",
]

#: Version of the line protocol; a worker refuses a writer that speaks another.
PROTOCOL = 1
#: Longest line either side accepts (a vote is a few hundred bytes).
MAX_LINE = 64 * 1024


class VoteWriterError(RuntimeError):
    """The writer process failed to record a vote for a reason other than the vote itself."""


def database_fingerprint(engine: Engine) -> str:
    """A hash naming the database (password left out; a SQLite file by its absolute path)."""
    url = engine.url
    file = dialect_of(engine).database_file(url)
    if file is not None:
        url = url.set(database=os.path.abspath(file))
    rendered = url.render_as_string(hide_password=True)
    return hashlib.sha256(rendered.encode()).hexdigest()[:16]


def writer_identity(engine: Engine, config: LiveConfig) -> dict[str, Any]:
    """What a writer says first and what a worker expects to hear: the database and the live rater.

    The plain Elo is named by its parameters (as before); another online rater by its identity.
    """
    if not isinstance(config, EloConfig):
        rater = rater_identity(config)
        return {"protocol": PROTOCOL, "database": database_fingerprint(engine), "rater": rater}
    elo = asdict(config)
    elo["provisional"] = [list(p) for p in config.provisional]
    return {"protocol": PROTOCOL, "database": database_fingerprint(engine), "elo": elo}


def outcome_to_wire(future: Future[VoteResult]) -> dict[str, Any]:
    exc = future.exception()
    if exc is None:
        return {"result": future.result().to_dict()}
    if isinstance(exc, AlreadyVotedError):
        return {"error": {"kind": "already_voted", "message": str(exc), "battle_id": exc.battle_id}}
    if isinstance(exc, VoteError):
        return {"error": {"kind": "vote", "message": str(exc)}}
    if isinstance(exc, ValueError):  # a request the store refuses outright
        return {"error": {"kind": "value", "message": str(exc)}}
    return {"error": {"kind": "internal", "message": f"{type(exc).__name__}: {exc}"}}


def settle(future: Future[VoteResult], answer: dict[str, Any]) -> None:
    if future.done():
        return
    if "result" in answer:
        future.set_result(VoteResult.from_dict(answer["result"]))
        return
    error = answer.get("error") or {}
    kind, message = error.get("kind"), str(error.get("message", "vote writer error"))
    if kind == "already_voted":
        future.set_exception(AlreadyVotedError(int(error["battle_id"])))
    elif kind == "vote":
        future.set_exception(VoteError(message))
    elif kind == "value":
        future.set_exception(ValueError(message))
    else:
        future.set_exception(VoteWriterError(message))


def encode_line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"
