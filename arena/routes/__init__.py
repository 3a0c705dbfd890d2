"""The site's HTTP routes, one ``router`` per module, all included by :func:`arena.app.create_app`.

:mod:`~arena.routes.pages` (the vote pages and the live board, HTML), :mod:`~arena.routes.api` (the same
vote flow as JSON), :mod:`~arena.routes.snapshots` (published leaderboards, HTML and JSON, read only),
:mod:`~arena.routes.admin` and :mod:`~arena.routes.review` (the admin API behind the admin token);
:mod:`~arena.routes.deps` holds what they share (state, sessions, rate limits). Handlers validate, call
:mod:`arena.voting`, :mod:`votes` or :mod:`leaderboard`, and render; they never import the app factory.
"""
