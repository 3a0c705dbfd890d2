"""Arena's web and command-line room: the voting site, its JSON and admin APIs, and the `arena` command.

Entry points: :func:`arena.app.create_app` builds the FastAPI site from :class:`arena.settings.Settings`
(``arena.app:create_app_from_env`` is the uvicorn factory); ``arena.cli:app`` is the `arena` command
(serve, import, export, demo, recompute, publish, snapshots, evaluate, annotators, leaks, vote-writer),
and ``arena.cli:main`` the console script that runs it and exits without tearing the interpreter down.
Inside: :mod:`arena.voting` issues battles and records votes, :mod:`arena.pairing_service` and
:mod:`arena.pairing` choose them, :mod:`arena.security` signs sessions and tokens, :mod:`arena.middleware`
wraps every request, :mod:`arena.publishing` turns votes into published snapshots. It imports
:mod:`votes` and :mod:`leaderboard`; neither imports it.
"""
