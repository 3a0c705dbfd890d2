"""`python -m arena.cli`: the `arena` command without its console script."""

from arena.cli.main import main

if __name__ == "__main__":
    main()
