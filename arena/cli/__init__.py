"""`arena`, the command line: the console script, its registry of commands, and the commands."""
