"""The commands of `arena`, one module a group; each is imported only when it runs (see
:mod:`arena.cli.main.main`). The heavier commands' work is in :mod:`arena.cli.commands.runs`, imported only
when they run, not for their `--help`."""
