"""Writing explored graphs: JSON (nodes, edges, summary), GraphML, and a figure.

* ``graph.json``: ``{"summary": {...metrics...}, "nodes": [...], "edges": [...]}``. Node ids are the
  first 16 hex digits of the state key; ``kind`` is normal / win / lose / error, ``frontier`` marks
  nodes discovered but not expanded. Edges carry the action id, click coordinates (or null) and
  the probability the uniform random policy gives them.
* ``graph.graphml``: the same graph for Gephi/yEd/networkx (node attributes depth, kind,
  frontier; edge attributes action, x, y, prob).
* ``figure`` (PNG + SVG + Vega-Lite JSON through ``pipeline.core.figures.save_figure``): states
  per BFS depth by kind, beside the probability that the random policy has won within N actions
  (lower and upper bound).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import numpy as np

from pipeline.core.outputs import write_text

from .analysis import GraphMetrics, transition_matrix
from .graph import NORMAL, StateGraph

__all__ = ["graph_to_dict", "write_json", "write_graphml", "write_figure", "win_curve"]


def _node_rows(graph: StateGraph) -> list[dict[str, Any]]:
    return [
        {"id": graph.node_id(i), "depth": graph.depth[i], "kind": graph.kind[i],
         "frontier": graph.kind[i] == NORMAL and not graph.expanded[i]}
        for i in range(graph.n_nodes)
    ]


def graph_to_dict(graph: StateGraph, metrics: GraphMetrics) -> dict[str, Any]:
    ids = [graph.node_id(i) for i in range(graph.n_nodes)]
    edges = [
        {"src": ids[graph.src[e]], "dst": ids[graph.dst[e]], "action": graph.action[e],
         "x": None if graph.click_x[e] < 0 else graph.click_x[e],
         "y": None if graph.click_y[e] < 0 else graph.click_y[e], "prob": graph.prob[e],
         **({"undo": True} if graph.is_undo[e] else {})}
        for e in range(graph.n_edges)
    ]
    return {"summary": metrics.as_dict(), "nodes": _node_rows(graph), "edges": edges}


def write_json(graph: StateGraph, metrics: GraphMetrics, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(graph_to_dict(graph, metrics), separators=(",", ":")) + "\n")
    return path


def write_graphml(graph: StateGraph, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    ids = [graph.node_id(i) for i in range(graph.n_nodes)]
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">',
        '<key id="depth" for="node" attr.name="depth" attr.type="int"/>',
        '<key id="kind" for="node" attr.name="kind" attr.type="string"/>',
        '<key id="frontier" for="node" attr.name="frontier" attr.type="boolean"/>',
        '<key id="action" for="edge" attr.name="action" attr.type="int"/>',
        '<key id="x" for="edge" attr.name="x" attr.type="int"/>',
        '<key id="y" for="edge" attr.name="y" attr.type="int"/>',
        '<key id="prob" for="edge" attr.name="prob" attr.type="double"/>',
        f'<graph id="{escape(graph.game_id)}-level-{graph.level + 1}" edgedefault="directed">',
    ]
    for row in _node_rows(graph):
        out.append(f'<node id="{row["id"]}"><data key="depth">{row["depth"]}</data>'
                   f'<data key="kind">{escape(row["kind"])}</data>'
                   f'<data key="frontier">{str(row["frontier"]).lower()}</data></node>')
    for e in range(graph.n_edges):
        xy = "" if graph.click_x[e] < 0 else (f'<data key="x">{graph.click_x[e]}</data>'
                                              f'<data key="y">{graph.click_y[e]}</data>')
        out.append(f'<edge source="{ids[graph.src[e]]}" target="{ids[graph.dst[e]]}">'
                   f'<data key="action">{graph.action[e]}</data>{xy}'
                   f'<data key="prob">{graph.prob[e]!r}</data></edge>')
    out += ["</graph>", "</graphml>"]
    write_text(path, "\n".join(out) + "\n")
    return path


def win_curve(graph: StateGraph, horizon: int, points: int = 60) -> list[dict[str, float]]:
    """P(random policy has won within N actions), lower and upper bound, at ~``points`` values of N."""
    from .analysis import _can_reach, _kinds

    P = transition_matrix(graph)
    win, frontier, transient, _ = _kinds(graph)
    marks = sorted({max(1, int(round(v))) for v in np.geomspace(1, max(1, horizon), points)})
    rows: list[dict[str, float]] = []
    curves = {}
    for bound, good in (("lower", win), ("upper", win | frontier)):
        live = transient & _can_reach(graph, good)
        if not live[0]:
            curves[bound] = {n: 0.0 for n in marks}
            continue
        idx = np.flatnonzero(live)
        Q = P[idx][:, idx].tocsr()
        b = np.asarray(P[idx][:, np.flatnonzero(good)].sum(axis=1)).ravel()
        start = int(np.searchsorted(idx, 0))
        p = np.zeros(idx.size)
        values = {}
        for n in range(1, marks[-1] + 1):
            p = Q @ p + b
            if n in marks:
                values[n] = float(min(1.0, p[start]))
        curves[bound] = values
    for n in marks:
        rows.append({"actions": n, "lower": curves["lower"][n], "upper": curves["upper"][n]})
    return rows


def write_figure(graph: StateGraph, metrics: GraphMetrics, out_dir: Path, name: str = "figure",
                 horizon: int = 10_000) -> dict[str, Path]:
    from pipeline.core.figures import alt, save_figure

    counts: dict[tuple[int, str], int] = {}
    for i in range(graph.n_nodes):
        kind = "frontier" if graph.kind[i] == NORMAL and not graph.expanded[i] else graph.kind[i]
        counts[(graph.depth[i], kind)] = counts.get((graph.depth[i], kind), 0) + 1
    depth_rows = [{"depth": d, "kind": k, "states": n} for (d, k), n in sorted(counts.items())]
    title = f"{graph.game_id} level {graph.level + 1}"
    bars = (
        alt.Chart(alt.Data(values=depth_rows), title=f"{title}: states by BFS depth")
        .mark_bar()
        .encode(x=alt.X("depth:O", title="actions from the level start"),
                y=alt.Y("states:Q", title="states"),
                color=alt.Color("kind:N", scale=alt.Scale(domain=["normal", "win", "lose", "frontier", "error"],
                                                          range=["#9aa5b1", "#2ca02c", "#d62728", "#ff7f0e", "#000000"])))
        .properties(width=360, height=220)
    )
    curve = win_curve(graph, horizon)
    long_rows = [{"actions": r["actions"], "bound": b, "p": max(r[b], 1e-18)} for r in curve for b in ("lower", "upper")]
    line = (
        alt.Chart(alt.Data(values=long_rows), title="random policy: P(won within N actions)")
        .mark_line(point=True)
        .encode(x=alt.X("actions:Q", scale=alt.Scale(type="log"), title="N (actions)"),
                y=alt.Y("p:Q", scale=alt.Scale(type="log"), title="probability (floored at 1e-18)"),
                strokeDash="bound:N", color=alt.value("#1f77b4"))
        .properties(width=300, height=220)
    )
    rule = alt.Chart(alt.Data(values=[{"p": 1e-4}])).mark_rule(color="#d62728").encode(y="p:Q")
    chart = alt.hconcat(bars, line + rule)
    return save_figure(chart, out_dir, name)
