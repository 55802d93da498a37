"""Explore a game's levels and write what was found: the work behind ``arcstudy explore``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.core.executor import default_workers
from pipeline.core.outputs import write_text

from .confined import explore_level_in_sandbox, levels_in_sandbox


class LevelRangeError(ValueError):
    """A level number the game does not have."""


class GameStartError(RuntimeError):
    """The game's own code raised while it was loaded, constructed or sent its opening RESET."""


class GameStoppedError(RuntimeError):
    """The game's code ended abnormally in the sandbox (time, memory, exit, crash): the message names the game,
    the level and the reason."""


def _summary_row(m: Any) -> dict[str, Any]:
    d = m.as_dict()
    d["level"] = m.level + 1  # 1-based for people and scripts, like level_index
    return d


# Without --workers, levels are explored on every usable core only when each may take long enough (this many
# states) for a local cluster's start (2-7 s) to pay off.
PARALLEL_MIN_NODES = 10_000


def _level_files(graph: Any, metrics: Any, level_dir: Path, figures: bool, budget: int | None) -> list[Path]:
    from .export import write_figure, write_graphml, write_json

    written = [write_json(graph, metrics, level_dir / "graph.json"), write_graphml(graph, level_dir / "graph.graphml")]
    if figures:
        written.extend(write_figure(graph, metrics, level_dir, "figure", horizon=budget or 10_000).values())
    return written


def _stopped(info: Any, level: int, err: Exception) -> str:
    from pipeline.core.game_code import SandboxFailure, describe_failure

    what = f"{info.game_id} ({info.source}) level {level}"
    if isinstance(err, SandboxFailure):
        return describe_failure(err, what)
    return f"{what}: its code raised {type(err).__name__}: {err}"


def explore_one_level(level: int, *, game_id: str, env_dir: Path, identity: str, max_nodes: int,
                      max_seconds: float | None, click_rule: str, include_undo: bool, budget: int | None,
                      out_dir: Path | None, figures: bool) -> tuple[dict[str, Any], list[Path]]:
    """One level explored on a fresh session (a worker's piece), the game in the sandbox: its summary row and
    the files written under `out_dir` (workers see the same paths, docs/cluster.md)."""
    from . import resolve

    info = resolve(game_id, env_dir)
    options = {"max_nodes": max_nodes, "max_seconds": max_seconds, "click_rule": click_rule,
               "include_undo": include_undo}
    from pipeline.core.game_code import GameCodeError, SandboxFailure

    try:
        graph, metrics = explore_level_in_sandbox(info, level, identity=identity, options=options, budget=budget,
                                             want_graph=out_dir is not None)
    except (SandboxFailure, GameCodeError) as err:
        raise GameStoppedError(_stopped(info, level, err)) from err
    written = ([] if out_dir is None else
               _level_files(graph, metrics, out_dir / info.game_id / f"level_{level}", figures, budget))
    return _summary_row(metrics), written


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
    workers: int | None = None,
    scheduler: str | None = None,
) -> tuple[list[dict[str, Any]], list[Path]]:
    """Explore the levels; return the summary rows and the files written.

    With ``out_dir``, writes DIR/<game_id>/level_<n>/graph.json, graph.graphml and (``figures``) the figure,
    then DIR/<game_id>/summary.json and a run manifest recording ``command``. A level outside the game's
    range raises LevelRangeError before anything is explored. Levels are explored on ``workers`` processes
    (None: every usable core when there are several levels of at least PARALLEL_MIN_NODES states, else 1) or
    on the Dask cluster at ``scheduler``; the rows come back in level order either way.
    """
    from pipeline.core.console import out
    from pipeline.core.game_code import GameCodeError, SandboxFailure, describe_failure
    from pipeline.core.manifest import RunManifest

    from . import games_dir_or_default, resolve

    env_dir = games_dir_or_default(environments)
    info = resolve(game, env_dir)
    try:  # the game's code runs in the sandbox (pipeline.core.game_code), never here
        n_levels = levels_in_sandbox(info, identity)
    except GameCodeError as err:  # the game's code, not the explorer: say where, without a traceback
        raise GameStartError(f"{info.game_id}: the game's code raised while loading or starting: "
                             f"{type(err).__name__}: {err}") from err
    except SandboxFailure as err:
        raise GameStoppedError(describe_failure(err, f"{info.game_id} ({info.source})")) from err
    chosen = levels or list(range(1, n_levels + 1))
    for level in chosen:
        if not 1 <= level <= n_levels:
            raise LevelRangeError(f"{info.game_id} has levels 1..{n_levels}; got {level}")
    manifest = RunManifest(command=command,
                           config={"game_id": info.game_id, "levels": chosen, "environments": str(env_dir),
                                   "max_nodes": max_nodes, "max_seconds": max_seconds, "click_rule": click_rule,
                                   "budget": budget, "include_undo": include_undo, "identity": identity,
                                   "workers": workers, "scheduler": scheduler})
    manifest.add_input(info.source)
    if workers is None and scheduler is None:
        workers = default_workers() if max_nodes >= PARALLEL_MIN_NODES else 1
    if len(chosen) > 1 and (scheduler is not None or workers > 1):
        rows, written = _explore_levels_parallel(chosen, info, env_dir, workers, scheduler, progress=progress,
                                                 identity=identity, max_nodes=max_nodes, max_seconds=max_seconds,
                                                 click_rule=click_rule, include_undo=include_undo, budget=budget,
                                                 out_dir=out_dir, figures=figures)
        return _finish(info, rows, written, manifest, out_dir)
    rows, written = [], []
    options = {"max_nodes": max_nodes, "max_seconds": max_seconds, "click_rule": click_rule,
               "include_undo": include_undo}
    for level in chosen:
        if progress:
            out.info(f"{info.game_id} level {level}: exploring (in the sandbox)")
        try:
            graph, metrics = explore_level_in_sandbox(info, level, identity=identity, options=options, budget=budget,
                                                 want_graph=out_dir is not None)
        except (SandboxFailure, GameCodeError) as err:
            raise GameStoppedError(_stopped(info, level, err)) from err
        if progress:
            out.info(f"{info.game_id} level {level}: {metrics.nodes:,} states, {metrics.stop_reason}")
        rows.append(_summary_row(metrics))
        if out_dir is not None:
            written.extend(_level_files(graph, metrics, out_dir / info.game_id / f"level_{level}", figures, budget))
    return _finish(info, rows, written, manifest, out_dir)


def _explore_levels_parallel(chosen: list[int], info: Any, env_dir: Path, workers: int | None,
                             scheduler: str | None, *, progress: bool, **options: Any
                             ) -> tuple[list[dict[str, Any]], list[Path]]:
    """Every level on its own worker; rows and files in level order, as the serial loop gives them."""
    from functools import partial

    from pipeline.core.console import out
    from pipeline.core.executor import open_executor

    done: dict[int, tuple[dict[str, Any], list[Path]]] = {}
    fn = partial(explore_one_level, game_id=info.game_id, env_dir=env_dir, **options)
    with open_executor(workers, scheduler, n_items=len(chosen)) as ex:
        description = f"{info.game_id}: exploring {len(chosen)} levels ({ex.n_workers} workers)"
        for key, value, error in ex.map_unordered(fn, [(i, level) for i, level in enumerate(chosen)],
                                                  progress=out.track if progress else None,
                                                  description=description):
            if error is not None:
                raise error
            done[key] = value
            if progress and out.plain:
                out.info(f"{info.game_id} level {chosen[key]}: {value[0]['nodes']:,} states, "
                         f"{value[0]['stop_reason']}")
    rows = [done[i][0] for i in range(len(chosen))]
    return rows, [path for i in range(len(chosen)) for path in done[i][1]]


def _finish(info: Any, rows: list[dict[str, Any]], written: list[Path], manifest: Any, out_dir: Path | None
            ) -> tuple[list[dict[str, Any]], list[Path]]:
    if out_dir is not None:
        summary = out_dir / info.game_id / "summary.json"
        write_text(summary, json.dumps({"game_id": info.game_id, "levels": rows}, indent=1, default=str) + "\n")
        written.append(summary)
        for path in written:
            manifest.add_output(path)
        manifest.finish(0)
        written.append(manifest.write_json(out_dir / info.game_id))
    return rows, written
