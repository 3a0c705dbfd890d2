"""The commands of `arena`, one module a group; each is imported only when it runs (see
:mod:`arena.cli.main.main`)."""
