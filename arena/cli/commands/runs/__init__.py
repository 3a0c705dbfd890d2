"""What the commands that fit, judge or generate do once they run, with their libraries imported at the top.

A command module of :mod:`arena.cli.commands` holds a command's options and help: `arena recompute --help`
imports it and nothing heavier. When the command runs, its function imports its run from here once (the
fitting stack, the LLM client), and the run does the work: reading votes from a file
(:mod:`~arena.cli.commands.runs.from_file`) or the store (:mod:`~arena.cli.commands.runs.from_store`), the
one fit request of the options (:mod:`~arena.cli.commands.runs.fit_request`), the fit, and the board on the
console (:mod:`~arena.cli.commands.runs.board_report`).
"""
