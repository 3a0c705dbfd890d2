"""The vote writers: in-process group commit, the shared writer process, and a worker's handle on it.

:class:`GroupCommitWriter` writes the votes that arrive together in one transaction;
:func:`serve_vote_writer` runs one as a process that several web workers share over a Unix socket
(:func:`run_vote_writer` is that process's life: signals, parent watch, engine);
:class:`RemoteVoteWriter` is a worker's handle on that process, falling back to its own writer.
All three answer a vote only after the transaction holding it has committed.
"""

from votes.voting.writer.group_commit import GroupCommitWriter, VoteWriter
from votes.voting.writer.remote import RemoteVoteWriter
from votes.voting.writer.service import run_vote_writer, serve_vote_writer
from votes.voting.writer.wire import PROTOCOL, VoteWriterError, database_fingerprint, writer_identity

__all__ = [
    "PROTOCOL",
    "GroupCommitWriter",
    "RemoteVoteWriter",
    "VoteWriter",
    "VoteWriterError",
    "database_fingerprint",
    "run_vote_writer",
    "serve_vote_writer",
    "writer_identity",
]
