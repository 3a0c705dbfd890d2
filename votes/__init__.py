"""Arena's storage: the tables, the vote transaction with its live Elo, imports and exports, fit inputs.

Imports :mod:`leaderboard` (the math) and SQLModel, never :mod:`arena`. Entry points, by job:

- engines and schema: :func:`votes.db.make_engine`, :func:`votes.migrate.upgrade_database`;
- votes in flight and their transaction: :func:`votes.battles.issue_battle`,
  :func:`votes.recording.record_votes`, and the writers of :mod:`votes.writer`
  (:class:`~votes.writer.GroupCommitWriter`, :func:`~votes.writer.serve_vote_writer`,
  :class:`~votes.writer.RemoteVoteWriter`);
- what the site reads: :func:`votes.views.live_standings`, :func:`votes.views.load_pairing_catalog`,
  :func:`votes.views.get_battle_view`, and :mod:`votes.annotators`;
- live ratings against the vote log: :func:`votes.ratings.replay_live_ratings`,
  :func:`votes.ratings.rebuild_live_ratings`;
- files in and out: :func:`votes.io.import_file`, :func:`votes.io.export_votes`,
  :func:`votes.io.export_catalog`;
- fit inputs: :func:`votes.queries.load_pair_counts`, :func:`votes.queries.load_battles`,
  :func:`votes.sources.load_battles_file`, :func:`votes.sources.battles_from_store`;
- published snapshots: :mod:`votes.snapshots`; admin reviews: :mod:`votes.review`; demo data:
  :func:`votes.demo.load_demo`.
"""
