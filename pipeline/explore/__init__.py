"""State-space explorer: breadth-first state graphs of game levels and what they say (study-protocol §2).

    from pipeline.explore import explore, optimal_actions
    result = explore("pv63", level=2)              # graph + metrics of level 2 (1-based)
    result.metrics.optimal_actions, result.metrics.random_win_upper
    optimal_actions("pv63-<version>", 2)           # shortest winning path length, or None

Games are found, loaded and run by ``engine`` (``engine.loader``, ``engine.GameEnv``); ``discover`` and
``resolve`` are ``engine.loader``'s search restricted to games whose code can be loaded.

Modules: ``session`` (one level at a time over ``engine.GameEnv``, node identity),
``graph`` (BFS construction, click targets), ``analysis`` (metrics, absorbing Markov chain),
``export`` (JSON, GraphML, figure), ``run`` (levels explored and written, for ``arcstudy explore``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from engine.loader import GameInfo, GameNotFoundError, find_games, resolve_game
from pipeline.core.textfiles import read_text_document

from .analysis import GraphMetrics, analyse
from .graph import CLICK_RULES, DEFAULT_MAX_NODES, StateGraph, explore_level
from .session import IDENTITIES, Session

__all__ = [
    "CLICK_RULES",
    "DEFAULT_MAX_NODES",
    "IDENTITIES",
    "ExploreResult",
    "GameInfo",
    "GameNotFoundError",
    "GraphMetrics",
    "Session",
    "StateGraph",
    "analyse",
    "discover",
    "explore",
    "explore_level",
    "games_dir_or_default",
    "optimal_actions",
    "optimal_provider",
    "resolve",
]

def discover(environments_dir: Path | str) -> list[GameInfo]:
    """Every loadable game under ``environments_dir`` (``metadata.json`` at any depth)."""
    return find_games(environments_dir, loadable=True)


def resolve(game: str, environments_dir: Path | str) -> GameInfo:
    """``game`` is a full id (``pv63-1a2b3c4d``) or a code (``pv63``: latest ``date_downloaded``);
    ``GameNotFoundError`` says why if it is missing or its code cannot be loaded."""
    return resolve_game(game, environments_dir, loadable=True)


@dataclass
class ExploreResult:
    graph: StateGraph
    metrics: GraphMetrics


def games_dir_or_default(environments_dir: Path | str | None) -> Path:
    """The folder the user named, else the games shipped with arcstudy."""
    if environments_dir is not None:
        return Path(environments_dir)
    from games import GAMES_DIR

    return GAMES_DIR


def explore(
    game: str,
    level: int = 1,
    *,
    environments_dir: Path | str | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
    max_seconds: float | None = None,
    click_rule: str = "objects",
    include_undo: bool = False,
    identity: str = "frame",
    budget: int | None = None,
    session: Session | None = None,
) -> ExploreResult:
    """Explore level ``level`` (1-based) of ``game`` and analyse the graph."""
    session = session or Session(resolve(game, games_dir_or_default(environments_dir)), identity=identity)
    graph = explore_level(session, level - 1, max_nodes=max_nodes, max_seconds=max_seconds,
                          click_rule=click_rule, include_undo=include_undo)
    return ExploreResult(graph, analyse(graph, budget=budget))


def _shipped_optimum(info: GameInfo, level: int) -> int | None:
    """The optimum recorded in ``solutions/levels.json`` when the game was published, if any: a positive integer
    under this game id and level. A game folder comes from outside: any other content (not JSON, nested too
    deeply, other shapes or values) is no recorded optimum, and the level is explored instead."""
    path = info.directory / "solutions" / "levels.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(read_text_document(path)[0])  # a byte-order mark is not content
    except (OSError, ValueError, RecursionError):  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        return None
    if not isinstance(data, dict) or data.get("game_id") != info.game_id or not isinstance(data.get("levels"), list):
        return None
    for row in data["levels"]:
        if isinstance(row, dict) and row.get("level") == level:
            optimum = row.get("optimal_actions")
            if type(optimum) is int and optimum > 0:
                return optimum
    return None


@lru_cache(maxsize=512)
def _optimal_cached(game_id: str, level: int, environments_dir: str, max_nodes: int,
                    max_seconds: float | None, use_shipped: bool) -> int | None:
    info = resolve(game_id, environments_dir)
    if use_shipped:
        shipped = _shipped_optimum(info, level)
        if shipped is not None:
            return shipped
    # the game's code runs in the sandbox (pipeline.core.game_code), never in this process
    from .confined import explore_level_in_sandbox, levels_in_sandbox

    n_levels = levels_in_sandbox(info, "frame")
    if not 1 <= level <= n_levels:
        return None
    _graph, metrics = explore_level_in_sandbox(info, level, identity=None, budget=None, want_graph=False,
                                               options={"max_nodes": max_nodes, "max_seconds": max_seconds})
    return metrics.optimal_actions


def optimal_actions(
    game_id: str,
    level: int,
    environments_dir: Path | str | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
    max_seconds: float | None = 120.0,
    *,
    use_shipped: bool = True,
) -> int | None:
    """Fewest actions that win level ``level`` (1-based, like ``level_index``) from its start.

    ``None`` when the game or level is unknown or no win was found within the budget (a win that is
    found is always optimal: BFS order). Games published by arcstudy carry the explorer's optimum in
    ``solutions/levels.json``; it is used when the game id matches (``use_shipped=False`` explores).
    Results are cached per process.
    """
    try:
        return _optimal_cached(game_id, int(level), str(games_dir_or_default(environments_dir)), int(max_nodes),
                               max_seconds, use_shipped)
    except GameNotFoundError:
        return None


def optimal_provider(game_id: str, level_index: int) -> int | None:
    """``reference_points.optimal_provider = "pipeline.explore:optimal_provider"`` (our games/ folder)."""
    return optimal_actions(game_id, level_index)
