"""Arena's storage: the tables, the vote transaction with its live Elo, imports and exports, fit inputs.

Imports :mod:`leaderboard` (the math) and SQLModel, never :mod:`arena`. Entry points, by job:

- engines and schema: :func:`votes.db.make_engine`, :func:`votes.migrate.upgrade_database`;
- votes in flight and their transaction: :func:`votes.voting.battles.issue_battle`,
  :func:`votes.voting.recording.record_votes`, and the writers of :mod:`votes.voting.writer`
  (:class:`~votes.voting.writer.GroupCommitWriter`, :func:`~votes.voting.writer.serve_vote_writer`,
  :class:`~votes.voting.writer.RemoteVoteWriter`);
- what the site reads: :func:`votes.voting.views.live_standings`,
  :func:`votes.voting.views.load_pairing_catalog`,
  :func:`votes.voting.views.get_battle_view`, and :mod:`votes.voting.annotators`;
- live ratings against the vote log: :func:`votes.voting.ratings.replay_live_ratings`,
  :func:`votes.voting.ratings.rebuild_live_ratings`;
- files in and out: :func:`votes.imports.files.import_file`, :func:`votes.reads.exports.export_votes`,
  :func:`votes.reads.exports.export_catalog`;
- fit inputs: :func:`votes.reads.cells.load_pair_counts`, :func:`votes.reads.scans.load_battles`,
  :func:`votes.reads.sources.load_battles_file`, :func:`votes.reads.sources.battles_from_store`;
- published snapshots: :mod:`votes.reads.snapshots`; admin reviews: :mod:`votes.review.voters`; demo data:
  :func:`votes.imports.demo.load_demo`.
"""
