"""Arena's web and command-line room: the voting site, its JSON and admin APIs, and the `arena` command.

Entry points: :func:`arena.app.create_app` builds the FastAPI site from :class:`arena.settings.Settings`
(``arena.app:create_app_from_env`` is the uvicorn factory); ``arena.cli.main:app`` is the `arena` command
(serve, import, export, demo, recompute, publish, snapshots, evaluate, annotators, leaks, vote-writer),
and ``arena.cli.main:main`` the console script that runs it and exits without tearing the interpreter down.
Inside: :mod:`arena.voting.service` issues battles and records votes, :mod:`arena.voting.pairing_service` and
:mod:`arena.voting.pairing` choose them, :mod:`arena.security` signs sessions and tokens,
:mod:`arena.web.middleware` wraps every request, :mod:`arena.publish.snapshots` turns votes into published
snapshots. It imports :mod:`votes` and :mod:`leaderboard`; neither imports it.
"""
