"""`arcstudy qualify`: the qualification checks on one game or all (pipeline.qualify does the work)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from .common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    SchedulerOption,
    WorkersOption,
    command_line,
    make_out_dir,
    out_write_errors_said,
)


def qualify_command(
    ctx: typer.Context,
    game: Annotated[str, typer.Argument(help="Game id or code, or `all` for every game under --environments.")],
    regime: Annotated[str, typer.Option("--regime", help="quick (tests), standard (paper regime 1: 50,000 random "
                                        "steps), full (1,000,000 steps), or hash-seeds (only: replay the shipped "
                                        "recordings and a random walk under PYTHONHASHSEED 1, 2 and 3, failing "
                                        "when frames or outcomes depend on it).")] = "standard",
    out_dir: Annotated[Path | None, typer.Option("--out", help="Write DIR/<game_id>/qualification.json, "
                                                 "qualification.md and manifest.json.")] = None,
    environments: Annotated[Path | None, typer.Option("--environments", help="Directory searched for "
                                                      "metadata.json (default: arcstudy's games/). Its games' "
                                                      "Python code is run (in the sandbox, docs/security.md).")
                            ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random play and fuzz scripts.")] = 0,
    tutorial_levels: Annotated[int, typer.Option("--tutorial-levels", min=0, help="Leading levels treated as tutorials "
                                                 "(random wins allowed).")] = 1,
    recording: Annotated[list[Path] | None, typer.Option("--recording", help="Extra toolkit recordings to play "
                                                         "back (win*/lose* names must end in WIN/GAME_OVER).",
                                                         exists=True, dir_okay=False)] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the reports as JSON on stdout.")] = False,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
) -> None:
    """Qualify games: shipped recordings replay, every level winnable, random-win odds under 1 in 10,000
    (explorer), no accidental random wins, and a fuzz sweep with determinism and snapshot checks.

    Reads: the game files, metadata.json and solutions/*.jsonl under --environments (default: games/).
    Writes: with --out, DIR/<game_id>/qualification.json, qualification.md and manifest.json; a summary table
    (or JSON with --json) on stdout. With several games, each is qualified on one of --workers processes
    (default: all usable cores) or on the cluster at --scheduler; the reports do not depend on it.
    The games' Python code is run, in the sandbox (docs/security.md): a game whose code ends abnormally (time,
    memory, exit, crash) fails with the reason. Exit code 0 if every game passes, 1 if a check fails, 3 if a
    game's code was stopped in the sandbox, 2 on bad options.
    """
    from rich.table import Table

    from pipeline.core.console import out
    from pipeline.core.game_code import announce
    from pipeline.explore import GameNotFoundError, discover, games_dir_or_default, resolve
    from pipeline.qualify.checks import REGIMES, is_recording_of, recording_game
    from pipeline.qualify.run import qualify_game, qualify_games_on_workers

    if regime not in REGIMES:
        out.error(f"--regime must be one of {', '.join(REGIMES)}")
        raise typer.Exit(EXIT_USAGE)
    env_dir = games_dir_or_default(environments)
    try:
        infos = discover(env_dir) if game == "all" else [resolve(game, env_dir)]
    except GameNotFoundError as err:
        out.error(str(err))
        raise typer.Exit(EXIT_ERROR) from err
    if not infos:
        out.error(f"no games under {env_dir}")
        raise typer.Exit(EXIT_ERROR)
    if game == "all":  # latest version of each code only
        latest: dict[str, Any] = {}
        for info in infos:
            latest[info.short_id] = resolve(info.short_id, env_dir)
        infos = list(latest.values())
    for path in recording or []:  # an input that is no recording of these games is the input's fault (exit 2)
        try:
            named = recording_game(path)
        except (OSError, ValueError) as err:
            out.error(f"--recording {path}: {err}")
            raise typer.Exit(EXIT_USAGE) from err
        if not any(is_recording_of(named, info) for info in infos):
            out.error(f"--recording {path} is a recording of {named}, not of "
                      f"{', '.join(info.game_id for info in infos[:5])}{' ...' if len(infos) > 5 else ''}")
            raise typer.Exit(EXIT_USAGE)
    if out_dir is not None:  # before the games run, not after
        make_out_dir(out_dir)
    command = command_line(ctx)
    announce([env_dir])
    # absolute: they are read in the sandbox child, whose working folder is its scratch folder, and on workers
    options = {"seed": seed, "tutorial_levels": tutorial_levels,
               "recordings": None if recording is None else [p.absolute() for p in recording]}
    reports = []
    with out_write_errors_said(out_dir):
        if len(infos) > 1 and (scheduler is not None or workers is None or workers > 1):
            reports = qualify_games_on_workers(infos, env_dir, regime, options, out_dir=out_dir, command=command,
                                               workers=workers, scheduler=scheduler, quiet=json_out)
        for info in infos if not reports else ():
            def progress(message: str, info: Any = info) -> None:
                if not json_out:
                    out.info(f"{info.game_id}: {message}")
            report, written = qualify_game(info, regime, out_dir=out_dir, progress=progress, command=command,
                                           workers=workers, scheduler=scheduler, **options)
            reports.append(report)
            if written and not json_out:
                out.info(f"wrote {', '.join(str(p) for p in written)}")
    if json_out:
        out.result(json.dumps(reports, default=str))
    else:
        table = Table(title=f"qualification ({regime})")
        for col in ("game", "check", "status", "summary"):
            table.add_column(col)
        for report in reports:
            for c in report["checks"]:
                table.add_row(report["game_id"], c["name"], c["status"], c["summary"])
            table.add_row(report["game_id"], "VERDICT", report["verdict"].upper(), "", end_section=True)
        out.console.print(table)
    stopped = [r for r in reports if "stopped_in_sandbox" in r]
    for r in stopped:  # named on stderr too, whatever the output format
        out.error(f"{r['game_id']}: its code was stopped in the sandbox ({r['stopped_in_sandbox']['kind']}): "
                  f"{r['stopped_in_sandbox']['detail']}")
    if stopped:
        raise typer.Exit(EXIT_REJECTED)
    raise typer.Exit(EXIT_OK if all(r["verdict"] == "pass" for r in reports) else EXIT_ERROR)

