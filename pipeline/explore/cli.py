"""``arcstudy explore``: build and analyse the state graph of game levels."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


def _summary_row(m: Any) -> dict[str, Any]:
    d = m.as_dict()
    d["level"] = m.level + 1  # 1-based for people and scripts, like level_index
    return d


def run_explore(
    game: str,
    *,
    levels: list[int] | None,
    environments: Path | None,
    max_nodes: int,
    max_seconds: float | None,
    click_rule: str,
    budget: int | None,
    include_undo: bool,
    identity: str,
    out_dir: Path | None,
    figures: bool,
    progress: bool = True,
) -> tuple[list[dict[str, Any]], list[Path]]:
    """Explore the levels; return the summary rows and the files written."""
    from pipeline.core.console import out
    from pipeline.core.manifest import RunManifest

    from . import Session, _default_dir, resolve
    from .analysis import analyse
    from .export import write_figure, write_graphml, write_json
    from .graph import explore_level

    env_dir = _default_dir(environments)
    info = resolve(game, env_dir)
    session = Session(info, identity=identity)
    session.start(0)
    chosen = levels or list(range(1, session.n_levels + 1))
    for level in chosen:
        if not 1 <= level <= session.n_levels:
            raise typer.BadParameter(f"{info.game_id} has levels 1..{session.n_levels}; got {level}",
                                     param_hint="--level")
    manifest = RunManifest(command="arcstudy explore " + " ".join(sys.argv[2:]),
                           config={"game_id": info.game_id, "levels": chosen, "environments": str(env_dir),
                                   "max_nodes": max_nodes, "max_seconds": max_seconds, "click_rule": click_rule,
                                   "budget": budget, "include_undo": include_undo, "identity": identity})
    manifest.add_input(info.source)
    rows, written = [], []
    for level in chosen:
        if progress and not out.plain:
            with out.progress(f"{info.game_id} level {level}: states", max_nodes) as bar:
                def report(n: int, queued: int, bar: Any = bar) -> None:
                    if bar is not None:
                        bar.update(bar.task_ids[0], completed=min(n, max_nodes))
                graph = explore_level(session, level - 1, max_nodes=max_nodes, max_seconds=max_seconds,
                                      click_rule=click_rule, include_undo=include_undo, progress=report)
        else:
            graph = explore_level(session, level - 1, max_nodes=max_nodes, max_seconds=max_seconds,
                                  click_rule=click_rule, include_undo=include_undo)
            if progress:
                out.info(f"{info.game_id} level {level}: {graph.n_nodes:,} states, {graph.stop_reason}")
        metrics = analyse(graph, budget=budget)
        rows.append(_summary_row(metrics))
        if out_dir is not None:
            level_dir = out_dir / info.game_id / f"level_{level}"
            written.append(write_json(graph, metrics, level_dir / "graph.json"))
            written.append(write_graphml(graph, level_dir / "graph.graphml"))
            if figures:
                written.extend(write_figure(graph, metrics, level_dir, "figure",
                                            horizon=budget or 10_000).values())
    if out_dir is not None:
        summary = out_dir / info.game_id / "summary.json"
        summary.write_text(json.dumps({"game_id": info.game_id, "levels": rows}, indent=1, default=str) + "\n")
        written.append(summary)
        for path in written:
            manifest.add_output(path)
        manifest.finish(EXIT_OK)
        written.append(manifest.write_json(out_dir / info.game_id))
    return rows, written


CLICK_RULE_NAMES = ("objects", "cells", "pixels", "engine")  # graph.CLICK_RULES, without importing the engine here
IDENTITY_NAMES = ("frame", "engine")


def register(app: typer.Typer) -> None:
    @app.command("explore")
    def explore_command(
        game: Annotated[str, typer.Argument(help="Game id (pv63-1a2b3c4d) or code (pv63: latest version).")],
        level: Annotated[list[int] | None, typer.Option("--level", "-l", help="Level number, 1-based (repeatable); "
                                                        "default: every level.")] = None,
        max_nodes: Annotated[int, typer.Option("--max-nodes", help="Stop after this many states per level.")] = 200_000,
        max_seconds: Annotated[float | None, typer.Option("--max-seconds", help="Stop a level after this long.")] = None,
        environments: Annotated[Path | None, typer.Option("--environments", help="Directory searched for "
                                                          "metadata.json (default: arcstudy's games/).")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print the per-level summaries as JSON on stdout.")] = False,
        out_dir: Annotated[Path | None, typer.Option("--out", help="Write graph.json, graph.graphml and the figure per "
                                                     "level, summary.json and manifest.json under DIR/<game_id>/.")] = None,
        click_rule: Annotated[str, typer.Option("--clicks", help="Click targets per state: objects, cells, pixels "
                                                "or engine (see pipeline/explore/graph.py).")] = "objects",
        budget: Annotated[int | None, typer.Option("--budget", help="Also compute P(random policy wins within N "
                                                   "actions).")] = None,
        include_undo: Annotated[bool, typer.Option("--include-undo", help="Follow ACTION7 too (approximate: the "
                                                   "state key does not hold undo history).")] = False,
        identity: Annotated[str, typer.Option("--identity", help="Node identity: frame (frame + hidden state, "
                                              "default) or engine (every game attribute).")] = "frame",
        no_figure: Annotated[bool, typer.Option("--no-figure", help="With --out, skip the figure.")] = False,
    ) -> None:
        """Breadth-first state graph of each level: size, merges, depth, cycles, optimal path, random-win odds.

        Reads: the game file and metadata.json under --environments (default: games/). Writes: nothing
        unless --out DIR (then DIR/<game_id>/level_<n>/graph.json, graph.graphml, figure.png/.svg/.vl.json,
        plus DIR/<game_id>/summary.json and manifest.json); --json prints the summaries to stdout.
        Exit code 1 if the game raised an exception while being explored (see `errors`), 2 on bad options.
        """
        from rich.table import Table

        from engine.loader import GameNotFoundError
        from pipeline.core.console import out

        if click_rule not in CLICK_RULE_NAMES:
            out.error(f"--clicks must be one of {', '.join(CLICK_RULE_NAMES)}")
            raise typer.Exit(EXIT_USAGE)
        if identity not in IDENTITY_NAMES:
            out.error(f"--identity must be one of {', '.join(IDENTITY_NAMES)}")
            raise typer.Exit(EXIT_USAGE)
        if max_nodes < 1:
            out.error("--max-nodes must be at least 1")
            raise typer.Exit(EXIT_USAGE)
        try:
            rows, written = run_explore(game, levels=level, environments=environments, max_nodes=max_nodes,
                                        max_seconds=max_seconds, click_rule=click_rule, budget=budget,
                                        include_undo=include_undo, identity=identity, out_dir=out_dir,
                                        figures=not no_figure, progress=not json_out)
        except typer.BadParameter as err:
            out.error(str(err))
            raise typer.Exit(EXIT_USAGE) from err
        except GameNotFoundError as err:
            out.error(str(err))
            raise typer.Exit(EXIT_ERROR) from err
        code = EXIT_ERROR if any(r["errors"] for r in rows) else EXIT_OK
        if json_out:
            sys.stdout.write(json.dumps(rows, default=str) + "\n")
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
                    out.error(f"level {r['level']}: {err['error']} after {len(err['path'])} actions")
            if written:
                out.info(f"wrote {len(written)} files under {out_dir}")
        raise typer.Exit(code)
