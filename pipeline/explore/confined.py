"""Exploring a game in the sandbox: the game's code runs only in a confined child (pipeline.core.game_code), and
the state graph and its metrics come back as plain data (dataclasses of .graph and .analysis)."""

from __future__ import annotations

from typing import Any

from .analysis import GraphMetrics, analyse  # with .graph: the dataclasses that come back from the sandbox
from .graph import StateGraph, explore_level
from .session import Session

__all__ = ["explore_level_in_sandbox", "levels_in_sandbox"]


def _start_in_sandbox(arg: tuple) -> int:
    """In the sandbox: load and start the game; its number of levels."""
    info, identity = arg
    session = Session(info, identity=identity)
    session.start(0)
    return session.n_levels


def _level_in_sandbox(arg: tuple) -> tuple[Any, Any]:
    """In the sandbox: one level explored on a fresh session; (graph or None, metrics)."""
    info, level, identity, options, budget, want_graph = arg
    session = Session(info) if identity is None else Session(info, identity=identity)
    session.start(0)
    explored = explore_level(session, level - 1, **options)
    return (explored if want_graph else None), analyse(explored, budget=budget)


def explore_level_in_sandbox(info: Any, level: int, *, identity: str | None, options: dict[str, Any],
                             budget: int | None, want_graph: bool) -> tuple[Any, Any]:
    """Level `level` (1-based) explored on a fresh session in the game's sandbox (pipeline.core.game_code): the
    game's code runs there only. (graph if `want_graph` else None, metrics); `options`: `explore_level`'s.
    GameCodeError when the game raised, SandboxFailure when its code ended abnormally."""
    from pipeline.core.game_code import game_key, portable_info, run_game_code
    from pipeline.core.result_shape import expect, pair

    graph_ok = (lambda g: isinstance(g, StateGraph)) if want_graph else (lambda g: g is None)
    return expect(run_game_code(_level_in_sandbox, (portable_info(info), level, identity, options, budget,
                                                    want_graph), key=game_key(info), source=info.source),
                  pair(graph_ok, GraphMetrics), "(state graph or None, level metrics)")


def levels_in_sandbox(info: Any, identity: str | None) -> int:
    """The game's number of levels, from loading and starting it in its sandbox (raises as
    `explore_level_in_sandbox`)."""
    from pipeline.core.game_code import game_key, portable_info, run_game_code
    from pipeline.core.result_shape import expect, instance

    return expect(run_game_code(_start_in_sandbox, (portable_info(info), identity), key=game_key(info),
                                source=info.source), lambda n: instance(int)(n) and n >= 1, "a number of levels")
