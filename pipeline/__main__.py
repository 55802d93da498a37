"""The `arcstudy` program (the console script, and `python -m pipeline`): work that can start before the app's
imports (pipeline/commands/early.py), then the app (pipeline/cli.py)."""

import sys


def main() -> None:
    import errno

    from pipeline.commands.early import interruption, start_early_work, stop_on_sigterm, too_many_open_files

    try:
        stop_on_sigterm()
        start_early_work(sys.argv[1:])
        from pipeline.cli import app
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM while the app is imported: nothing has started yet
        words, code = interruption()
        sys.stderr.write(f"error: {words} before the command started; nothing was done\n")
        sys.exit(code)
    except OSError as err:  # `ulimit -n` too small to import the app: each import opens its module's file
        if err.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        sys.stderr.write(f"error: {too_many_open_files(err.errno)}\n")
        sys.exit(1)
    app()


if __name__ == "__main__":
    main()
