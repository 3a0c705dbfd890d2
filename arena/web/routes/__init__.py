"""The site's HTTP routes, one ``router`` per module, all included by :func:`arena.app.create_app`.

:mod:`~arena.web.routes.pages` (the vote pages and the live board, HTML), :mod:`~arena.web.routes.api` (the
same vote flow as JSON), :mod:`~arena.web.routes.snapshots` (published leaderboards, HTML and JSON, read
only), :mod:`~arena.web.routes.admin` and :mod:`~arena.web.routes.review` (the admin API behind the admin
token); :mod:`~arena.web.routes.deps` holds what they share (state, sessions, rate limits). Handlers validate,
call :mod:`arena.voting.service`, :mod:`votes` or :mod:`leaderboard`, and render; they never import the app
factory.
"""
