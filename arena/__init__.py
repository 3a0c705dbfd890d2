"""Arena's web and command-line package: the voting site, its JSON and admin APIs, and the `arena` command.

It imports :mod:`votes` (storage) and :mod:`leaderboard` (the math); neither imports it. Its rooms, from
the top (each imports only the rooms below it; ``pyproject.toml``'s import contracts hold them so):

- :mod:`arena.cli`: the `arena` command (:func:`arena.cli.main.main`, the console script) and its commands
  in :mod:`arena.cli.commands`, each imported only when it runs (what the heavier ones do, with the fitting
  stack or the LLM client, in :mod:`arena.cli.commands.runs`, imported only when they run, not for `--help`);
- :mod:`arena.app`: ``create_app(settings)``, the site wired from its pieces
  (``arena.app:create_app_from_env`` is the uvicorn factory);
- :mod:`arena.web`: middleware, request limits, connection caps, rendering and the routes;
- :mod:`arena.voting`: which two answers next, issuing battles and recording votes, live battles, the
  app's shared state;
- :mod:`arena.publish`: votes to a published snapshot; :mod:`arena.llm`: OpenAI-compatible endpoints,
  generating answers and judging them;
- below them all: :mod:`arena.settings` (the one reader of the environment), :mod:`arena.security`,
  :mod:`arena.signin`, :mod:`arena.logs`, :mod:`arena.metrics`.

The commands (``arena --help`` lists them with their help; ``tests/arena/cli/test_cli_registry.py`` checks
that this list is the registry's):

- data in and out: ``import``, ``export``, ``convert``, ``demo``, ``db``;
- the site: ``serve``, ``vote-writer``;
- boards: ``recompute``, ``publish``, ``snapshots``, ``evaluate``;
- review: ``annotators``, ``gold``, ``leaks``, ``agreement``;
- operations: ``backup``, ``restore``;
- models and LLM judges: ``models``, ``generate``, ``judge``, ``costs``.
"""
