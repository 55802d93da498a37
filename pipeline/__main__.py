"""The `arcstudy` program (the console script, and `python -m pipeline`): work that can start before the app's
imports (pipeline/commands/early.py), then the app (pipeline/cli.py)."""

import sys


def main() -> None:
    from pipeline.commands.early import start_early_work

    start_early_work(sys.argv[1:])
    from pipeline.cli import app

    app()


if __name__ == "__main__":
    main()
