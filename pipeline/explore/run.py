"""Explore a game's levels and write what was found: the work behind ``arcstudy explore``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class LevelRangeError(ValueError):
    """A level number the game does not have."""


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
    command: str,
    progress: bool = True,
) -> tuple[list[dict[str, Any]], list[Path]]:
    """Explore the levels; return the summary rows and the files written.

    With ``out_dir``, writes DIR/<game_id>/level_<n>/graph.json, graph.graphml and (``figures``) the figure,
    then DIR/<game_id>/summary.json and a run manifest recording ``command``. A level outside the game's
    range raises LevelRangeError before anything is explored.
    """
    from pipeline.core.console import out
    from pipeline.core.manifest import RunManifest

    from . import Session, games_dir_or_default, resolve
    from .analysis import analyse
    from .export import write_figure, write_graphml, write_json
    from .graph import explore_level

    env_dir = games_dir_or_default(environments)
    info = resolve(game, env_dir)
    session = Session(info, identity=identity)
    session.start(0)
    chosen = levels or list(range(1, session.n_levels + 1))
    for level in chosen:
        if not 1 <= level <= session.n_levels:
            raise LevelRangeError(f"{info.game_id} has levels 1..{session.n_levels}; got {level}")
    manifest = RunManifest(command=command,
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
        manifest.finish(0)
        written.append(manifest.write_json(out_dir / info.game_id))
    return rows, written
