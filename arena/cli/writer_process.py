"""Entry point of the vote writer process that `arena serve --workers N` starts.

`python -m arena.cli.writer_process --socket PATH` is `arena vote-writer --ignore-interrupt --socket PATH`.

Ctrl-C in a terminal reaches the whole process group. The writer must outlive the workers' last requests
and be stopped by `arena serve` itself (SIGTERM), so it ignores SIGINT before anything else: importing the
command line takes long enough for a Ctrl-C to land in the middle of it.
"""

import signal
import sys

signal.signal(signal.SIGINT, signal.SIG_IGN)

from arena.cli.main import app  # noqa: E402 - after the signal disposition, on purpose

if __name__ == "__main__":
    app(["vote-writer", "--ignore-interrupt", *sys.argv[1:]])
