"""`arcstudy explore`: the state graph of game levels (pipeline.explore.run does the work)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

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

CLICK_RULE_NAMES = ("objects", "cells", "pixels", "engine")  # graph.CLICK_RULES, without importing the engine here
IDENTITY_NAMES = ("frame", "engine")


def explore_command(
    ctx: typer.Context,
    game: Annotated[str, typer.Argument(help="Game id (pv63-1a2b3c4d) or code (pv63: latest version).")],
    level: Annotated[list[int] | None, typer.Option("--level", "-l", help="Level number, 1-based (repeatable); "
                                                    "default: every level.")] = None,
    max_nodes: Annotated[int, typer.Option("--max-nodes", min=1, help="Stop after this many states per level.")] = 200_000,
    max_seconds: Annotated[float | None, typer.Option("--max-seconds", min=0.001, help="Stop a level after this long.")] = None,
    environments: Annotated[Path | None, typer.Option("--environments", help="Directory searched for "
                                                      "metadata.json (default: arcstudy's games/). The game's "
                                                      "Python code is run (in the sandbox, docs/security.md).")
                            ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the per-level summaries as JSON on stdout.")] = False,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Write graph.json, graph.graphml and the figure per "
                                                 "level, summary.json and manifest.json under DIR/<game_id>/.")] = None,
    click_rule: Annotated[str, typer.Option("--clicks", help="Click targets per state: objects, cells, pixels "
                                            "or engine (see pipeline/explore/graph.py).")] = "objects",
    budget: Annotated[int | None, typer.Option("--budget", min=0, help="Also compute P(random policy wins within N "
                                               "actions).")] = None,
    include_undo: Annotated[bool, typer.Option("--include-undo", help="Follow ACTION7 too (approximate: the "
                                               "state key does not hold undo history).")] = False,
    identity: Annotated[str, typer.Option("--identity", help="Node identity: frame (frame + hidden state, "
                                          "default) or engine (every game attribute).")] = "frame",
    no_figure: Annotated[bool, typer.Option("--no-figure", help="With --out, skip the figure.")] = False,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
) -> None:
    """Breadth-first state graph of each level: size, merges, depth, cycles, optimal path, random-win odds.

    Reads: the game file and metadata.json under --environments (default: games/). Writes: nothing
    unless --out DIR (then DIR/<game_id>/level_<n>/graph.json, graph.graphml, figure.png/.svg/.vl.json,
    plus DIR/<game_id>/summary.json and manifest.json); --json prints the summaries to stdout.
    Levels are explored on --workers processes, one level each (without it: all usable cores from
    --max-nodes 10,000 on, else serially), or on the cluster at --scheduler; results do not depend on it.
    The game's Python code is run, in the sandbox (docs/security.md). Exit code 3 if the game raised an
    exception while being explored (see `errors`; the graph is still written) or its code was stopped in the
    sandbox (time, memory, exit, crash, a result of the wrong shape), 2 on bad options.
    """
    from rich.table import Table

    from engine.loader import GameNotFoundError
    from pipeline.core.console import out
    from pipeline.core.game_code import announce
    from pipeline.explore import games_dir_or_default
    from pipeline.explore.run import GameStartError, GameStoppedError, LevelRangeError, run_explore

    if click_rule not in CLICK_RULE_NAMES:
        out.error(f"--clicks must be one of {', '.join(CLICK_RULE_NAMES)}")
        raise typer.Exit(EXIT_USAGE)
    if identity not in IDENTITY_NAMES:
        out.error(f"--identity must be one of {', '.join(IDENTITY_NAMES)}")
        raise typer.Exit(EXIT_USAGE)
    if max_nodes < 1:
        out.error("--max-nodes must be at least 1")
        raise typer.Exit(EXIT_USAGE)
    if out_dir is not None:  # before the levels are explored, not after
        make_out_dir(out_dir)
    announce([games_dir_or_default(environments)])
    try:
        with out_write_errors_said(out_dir):
            rows, written = run_explore(game, levels=level, environments=environments, max_nodes=max_nodes,
                                    max_seconds=max_seconds, click_rule=click_rule, budget=budget,
                                        include_undo=include_undo, identity=identity, out_dir=out_dir,
                                        figures=not no_figure, command=command_line(ctx),
                                        progress=not json_out, workers=workers, scheduler=scheduler)
    except LevelRangeError as err:
        out.error(str(err))
        raise typer.Exit(EXIT_USAGE) from err
    except (GameNotFoundError, GameStartError) as err:
        out.error(str(err))
        raise typer.Exit(EXIT_ERROR) from err
    except GameStoppedError as err:  # the game's code ended abnormally in the sandbox: its failure, named
        out.error(str(err))
        raise typer.Exit(EXIT_REJECTED) from err
    code = EXIT_REJECTED if any(r["errors"] for r in rows) else EXIT_OK  # the game's failure, named below
    if json_out:
        out.result(json.dumps(rows, default=str))
    else:
        table = Table(title=f"state graphs of {game}")
        for col in ("level", "states", "edges", "complete", "depth", "merge", "cycles", "optimal",
                    "P(random wins)", "lose", "states/s"):
            table.add_column(col, justify="right")
        for r in rows:
            p = (f"{r['random_win_upper']:.3g}" if r["random_win_exact"]
                 else f"[{r['random_win_lower']:.3g}, {r['random_win_upper']:.3g}]")
            table.add_row(str(r["level"]), f"{r['nodes']:,}", f"{r['edges']:,}",
                          "yes" if r["complete"] else f"no ({r['stop_reason']})", str(r["max_depth"]),
                          f"{r['merge_density']:.2f}", "yes" if r["has_cycles"] else "no",
                          "-" if r["optimal_actions"] is None else str(r["optimal_actions"]), p,
                          str(r["lose_nodes"]), f"{r['nodes_per_s']:,.0f}")
        out.console.print(table)
        for r in rows:
            for err in r["errors"][:3]:
                out.error(f"{game} level {r['level']}: the game raised {err['error']} after {len(err['path'])} "
                          "actions")
        if written:
            out.info(f"wrote {len(written)} files under {out_dir}")
    raise typer.Exit(code)
