"""Metrics of an explored state graph and the random-policy win probability (absorbing Markov chain).

Structure metrics
-----------------
* ``nodes``, ``edges`` (one edge per action target tried, self-loops included), ``self_loops``.
* ``merge_density``: the share of state-changing edges that lead to an already discovered node,
  ``(E_moves - (N - 1)) / E_moves`` where ``E_moves`` counts non-self-loop edges and ``N - 1`` is the
  number of BFS-tree edges. 0 for a tree (every path reaches a distinct state), close to 1 when
  many trajectories merge.
* ``max_depth``: the largest BFS distance from the start.
* ``cycles``: strongly connected components over state-changing edges; ``has_cycles`` when some
  component has more than one node (self-loops are reported separately as ``self_loops``).
* ``complete``: the queue emptied before any budget was hit.

Optimal playthrough
-------------------
``optimal_actions`` is the BFS depth of the shallowest win node, with the action sequence. BFS order
makes it exact whenever a win was found, even in a partial exploration; ``None`` when no win was
found (then, if the graph is complete, the level is unwinnable from its start).

Random-policy win probability
-----------------------------
The uniform random policy picks each available action id with equal probability and, for a click,
a uniformly random display pixel (graph.py gives every edge that probability). Win nodes absorb
with value 1, lose nodes (GAME_OVER) with value 0, error nodes with 0. For the other nodes
``p = P p`` restricted to the transient nodes that can still reach a win; nodes that cannot
(dead ends, including closed non-winning cycles) have ``p = 0``. We solve
``(I - Q) p = b`` with a sparse LU factorisation, where ``Q`` holds transitions among those nodes
and ``b`` the one-step probability of winning.

When the exploration is incomplete, frontier nodes (discovered, never expanded) are unknown: the
**lower bound** gives them value 0 and the **upper bound** value 1 (every unexplored continuation
wins immediately). Both are exact bounds for the true probability of the random policy on the full
graph, and they coincide when the graph is complete.

Within a budget of ``N`` actions, ``p_N = Q p_{N-1} + b`` (dynamic programming over steps, from
``p_0 = 0``) gives the probability of winning in at most ``N`` actions, with the same bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import spsolve

from .graph import ERROR, LOSE, NORMAL, WIN, StateGraph, Target

__all__ = ["GraphMetrics", "analyse", "random_win_probability", "random_win_within", "transition_matrix"]


@dataclass
class GraphMetrics:
    game_id: str
    level: int
    nodes: int
    edges: int
    self_loops: int
    merge_density: float
    max_depth: int
    has_cycles: bool
    cyclic_components: int
    nodes_in_cycles: int
    complete: bool
    stop_reason: str
    win_nodes: int
    lose_nodes: int
    error_nodes: int
    frontier_nodes: int
    dead_end_nodes: int
    optimal_actions: int | None
    optimal_path: list[dict[str, int]] | None
    random_win_lower: float
    random_win_upper: float
    random_win_exact: bool
    budget_actions: int | None
    random_win_within_lower: float | None
    random_win_within_upper: float | None
    click_rule: str
    include_undo: bool
    elapsed_s: float
    steps: int
    nodes_per_s: float
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def random_win(self) -> float:
        """The exact probability when the graph is complete, else the upper bound."""
        return self.random_win_upper

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def transition_matrix(graph: StateGraph, *, use_undo: bool = True) -> sp.csr_matrix:
    """Row-stochastic (for expanded nodes) sparse matrix of the random policy; parallel edges summed."""
    n = graph.n_nodes
    src = np.asarray(graph.src, dtype=np.int64)
    dst = np.asarray(graph.dst, dtype=np.int64)
    prob = np.asarray(graph.prob, dtype=np.float64)
    if not use_undo and graph.is_undo:
        keep = ~np.asarray(graph.is_undo, dtype=bool)
        src, dst, prob = src[keep], dst[keep], prob[keep]
    return sp.csr_matrix((prob, (src, dst)), shape=(n, n))


def _kinds(graph: StateGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    kind = np.asarray(graph.kind)
    expanded = np.asarray(graph.expanded, dtype=bool)
    win = kind == WIN
    frontier = (kind == NORMAL) & ~expanded
    transient = (kind == NORMAL) & expanded
    return win, frontier, transient, kind


def _can_reach(graph: StateGraph, targets: np.ndarray) -> np.ndarray:
    """Nodes with a directed path to any node in ``targets`` (reverse BFS)."""
    n = graph.n_nodes
    src = np.asarray(graph.src, dtype=np.int64)
    dst = np.asarray(graph.dst, dtype=np.int64)
    rev = sp.csr_matrix((np.ones(src.size, dtype=np.int8), (dst, src)), shape=(n, n))
    seen = targets.copy()
    front = np.flatnonzero(targets)
    while front.size:
        nxt = rev[front].indices
        nxt = np.unique(nxt[~seen[nxt]])
        seen[nxt] = True
        front = nxt
    return seen


def _absorbing(graph: StateGraph, P: sp.csr_matrix, frontier_value: float) -> np.ndarray:
    win, frontier, transient, _ = _kinds(graph)
    good = win | (frontier if frontier_value > 0 else np.zeros_like(win))
    value = np.zeros(graph.n_nodes)
    value[good] = 1.0
    live = transient & _can_reach(graph, good)
    idx = np.flatnonzero(live)
    if idx.size == 0:
        return value
    Q = P[idx][:, idx]
    b = np.asarray(P[idx][:, np.flatnonzero(good)].sum(axis=1)).ravel()
    A = sp.identity(idx.size, format="csc") - Q.tocsc()
    sol = spsolve(A, b) if idx.size > 1 else np.array([b[0] / A.toarray()[0, 0]])
    value[idx] = np.clip(np.asarray(sol).ravel(), 0.0, 1.0)
    return value


def random_win_probability(graph: StateGraph, P: sp.csr_matrix | None = None) -> tuple[float, float]:
    """(lower, upper) probability that the uniform random policy eventually wins from the start."""
    if graph.kind[0] == WIN:
        return 1.0, 1.0
    if graph.kind[0] in (LOSE, ERROR):
        return 0.0, 0.0
    P = transition_matrix(graph) if P is None else P
    lower = float(_absorbing(graph, P, 0.0)[0])
    _, frontier, _, _ = _kinds(graph)
    upper = float(_absorbing(graph, P, 1.0)[0]) if frontier.any() else lower
    return lower, upper


def random_win_within(graph: StateGraph, budget: int, P: sp.csr_matrix | None = None) -> tuple[float, float]:
    """(lower, upper) probability of a win within ``budget`` actions (DP over steps)."""
    if graph.kind[0] == WIN:
        return 1.0, 1.0
    if graph.kind[0] in (LOSE, ERROR) or budget <= 0:
        return 0.0, 0.0
    P = transition_matrix(graph) if P is None else P
    win, frontier, transient, _ = _kinds(graph)
    out = []
    for frontier_value in (0.0, 1.0):
        if frontier_value and not frontier.any():
            out.append(out[0])
            break
        good = win | frontier if frontier_value else win
        live = transient & _can_reach(graph, good)
        idx = np.flatnonzero(live)
        if idx.size == 0 or not live[0]:
            out.append(0.0)
            continue
        Q = P[idx][:, idx].tocsr()
        b = np.asarray(P[idx][:, np.flatnonzero(good)].sum(axis=1)).ravel()
        start = int(np.searchsorted(idx, 0))
        p = np.zeros(idx.size)
        for _ in range(budget):
            nxt = Q @ p + b
            if np.array_equal(nxt, p):
                break
            p = nxt
        out.append(float(min(1.0, p[start])))
    return out[0], out[1]


def structure(graph: StateGraph) -> dict[str, Any]:
    n = graph.n_nodes
    src = np.asarray(graph.src, dtype=np.int64)
    dst = np.asarray(graph.dst, dtype=np.int64)
    moves = src != dst
    n_moves = int(moves.sum())
    merge = (n_moves - (n - 1 - sum(1 for k in graph.kind if k == ERROR))) / n_moves if n_moves else 0.0
    adj = sp.csr_matrix((np.ones(n_moves, dtype=np.int8), (src[moves], dst[moves])), shape=(n, n))
    n_comp, labels = connected_components(adj, directed=True, connection="strong")
    sizes = np.bincount(labels, minlength=n_comp)
    cyclic = sizes > 1
    return {
        "self_loops": int((~moves).sum()),
        "merge_density": max(0.0, float(merge)),
        "max_depth": int(max(graph.depth)) if graph.depth else 0,
        "has_cycles": bool(cyclic.any()),
        "cyclic_components": int(cyclic.sum()),
        "nodes_in_cycles": int(sizes[cyclic].sum()),
    }


def optimal_path(graph: StateGraph) -> tuple[int | None, list[Target] | None]:
    wins = [i for i, k in enumerate(graph.kind) if k == WIN]
    if not wins:
        return None, None
    best = min(wins, key=lambda i: (graph.depth[i], i))
    return graph.depth[best], graph.path_to(best)


def analyse(graph: StateGraph, budget: int | None = None) -> GraphMetrics:
    P = transition_matrix(graph)
    win, frontier, transient, kind = _kinds(graph)
    reach = _can_reach(graph, win | frontier)
    lower, upper = random_win_probability(graph, P)
    within = random_win_within(graph, budget, P) if budget else (None, None)
    opt, path = optimal_path(graph)
    s = structure(graph)
    return GraphMetrics(
        game_id=graph.game_id,
        level=graph.level,
        nodes=graph.n_nodes,
        edges=graph.n_edges,
        self_loops=s["self_loops"],
        merge_density=s["merge_density"],
        max_depth=s["max_depth"],
        has_cycles=s["has_cycles"],
        cyclic_components=s["cyclic_components"],
        nodes_in_cycles=s["nodes_in_cycles"],
        complete=graph.complete,
        stop_reason=graph.stop_reason,
        win_nodes=int(win.sum()),
        lose_nodes=int((kind == LOSE).sum()),
        error_nodes=int((kind == ERROR).sum()),
        frontier_nodes=int(frontier.sum()),
        dead_end_nodes=int((transient & ~reach).sum()),
        optimal_actions=opt,
        optimal_path=[t.as_dict() for t in path] if path is not None else None,
        random_win_lower=lower,
        random_win_upper=upper,
        random_win_exact=not bool(frontier.any()),
        budget_actions=budget,
        random_win_within_lower=within[0],
        random_win_within_upper=within[1],
        click_rule=graph.click_rule,
        include_undo=graph.include_undo,
        elapsed_s=graph.elapsed_s,
        steps=graph.n_steps,
        nodes_per_s=graph.n_nodes / graph.elapsed_s if graph.elapsed_s > 0 else 0.0,
        errors=graph.errors,
    )
