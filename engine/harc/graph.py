"""Visited-state graph of H-ARC traces (H-ARC paper, Figure 1).

Nodes are the distinct output grids participants visited (keyed by grid string, as recorded in
``test_output_grid``); edges are the observed transitions between consecutive rows of a trace, with
counts. A node is marked as a start state (first row of a trace: the task-start reset grid), and with
the number of correct and incorrect ``submit`` rows made from it. Everything is built from the logged
rows alone (no replay), in the order given, so the function is pure and works on any subset of
traces of one task.

Counting: a trace's unique visited states are the distinct grids among all its rows, start included;
the task's count is the number of distinct grids over all its traces (the node count).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .grid import GridFormatError, format_grid, is_grid_string, parse_grid

SKIPPED_ACTIONS = frozenset(
    {
        "submit_tutorial",
        "write_first_tutorial_description",
        "write_last_tutorial_description",
        "submit_feedback",
    }
)


@dataclass
class StateNode:
    grid: str
    height: int
    width: int
    n_visits: int = 0  # rows whose grid is this state
    trace_ids: set[str] = field(default_factory=set)
    n_starts: int = 0
    n_correct_submissions: int = 0
    n_incorrect_submissions: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "grid": self.grid,
            "height": self.height,
            "width": self.width,
            "n_visits": self.n_visits,
            "n_traces": len(self.trace_ids),
            "is_start": self.n_starts > 0,
            "n_starts": self.n_starts,
            "is_correct_submission": self.n_correct_submissions > 0,
            "n_correct_submissions": self.n_correct_submissions,
            "is_incorrect_submission": self.n_incorrect_submissions > 0,
            "n_incorrect_submissions": self.n_incorrect_submissions,
        }


@dataclass
class StateEdge:
    source: str
    target: str
    count: int = 0
    trace_ids: set[str] = field(default_factory=set)
    actions: Counter = field(default_factory=Counter)  # action names that made this transition

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "count": self.count,
            "n_traces": len(self.trace_ids),
            "actions": dict(sorted(self.actions.items())),
        }


@dataclass
class StateGraph:
    task_name: str | None
    nodes: dict[str, StateNode]
    edges: dict[tuple[str, str], StateEdge]
    unique_states_per_trace: dict[str, int]

    @property
    def n_unique_states(self) -> int:
        return len(self.nodes)

    @property
    def n_traces(self) -> int:
        return len(self.unique_states_per_trace)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable export; nodes and edges in first-visit order."""
        return {
            "task_name": self.task_name,
            "n_traces": self.n_traces,
            "n_unique_states": self.n_unique_states,
            "unique_states_per_trace": dict(self.unique_states_per_trace),
            "nodes": [node.to_dict() for node in self.nodes.values()],
            "edges": [edge.to_dict() for edge in self.edges.values()],
        }


def build_state_graph(
    traces: Iterable[Sequence[Mapping[str, Any]]],
    *,
    include_self_loops: bool = False,
) -> StateGraph:
    """Build the visited-state graph of one task from one or more traces (each a sequence of rows).

    Rows need ``test_output_grid`` and ``action``; ``solved`` marks submissions; ``joint_id_task`` (else
    the trace's position) identifies the trace; ``task_name``, when present, must be the same everywhere.
    Grid-neutral rows (colour or tool changes, selections, ...) add an edge only with
    ``include_self_loops``. Raises ValueError on a malformed grid or mixed tasks.
    """
    nodes: dict[str, StateNode] = {}
    edges: dict[tuple[str, str], StateEdge] = {}
    per_trace: dict[str, int] = {}
    task_names: set[str] = set()
    well_formed: set[str] = set()  # grid strings already validated: a trace revisits its grids many times

    for position, rows in enumerate(traces):
        trace_id = _trace_id(rows, position)
        if trace_id in per_trace:
            raise ValueError(f"trace {trace_id!r} given twice")
        visited: set[str] = set()
        previous: str | None = None
        for row_index, row in enumerate(rows):
            action = row.get("action")
            if action in SKIPPED_ACTIONS:
                continue
            task_name = row.get("task_name")
            if task_name is not None:
                task_names.add(str(task_name))
            grid = row.get("test_output_grid")
            if type(grid) is not str or grid not in well_formed:
                grid = _grid_key(row, trace_id, row_index)
                well_formed.add(grid)
            node = nodes.get(grid)
            if node is None:
                height, width = grid.count("|") - 1, grid.index("|", 1) - 1
                node = nodes[grid] = StateNode(grid, height, width)
            node.n_visits += 1
            node.trace_ids.add(trace_id)
            visited.add(grid)
            if previous is None:
                node.n_starts += 1
            elif previous != grid or include_self_loops:
                edge = edges.get((previous, grid))
                if edge is None:
                    edge = edges[(previous, grid)] = StateEdge(previous, grid)
                edge.count += 1
                edge.trace_ids.add(trace_id)
                edge.actions[str(action)] += 1
            if action == "submit":
                if _truthy(row.get("solved")):
                    node.n_correct_submissions += 1
                else:
                    node.n_incorrect_submissions += 1
            previous = grid
        per_trace[trace_id] = len(visited)
        if len(task_names) > 1:
            raise ValueError(f"traces of different tasks in one graph: {sorted(task_names)}")

    return StateGraph(
        task_name=next(iter(task_names)) if task_names else None,
        nodes=nodes,
        edges=edges,
        unique_states_per_trace=per_trace,
    )


def _trace_id(rows: Sequence[Mapping[str, Any]], position: int) -> str:
    for row in rows:
        value = row.get("joint_id_task")
        if value is not None:
            return str(value)
    return f"trace_{position}"


def _grid_key(row: Mapping[str, Any], trace_id: str, row_index: int) -> str:
    """The row's grid string, validated; a well-formed grid string is its own canonical form."""
    text = row.get("test_output_grid")
    if is_grid_string(text):
        return text
    try:
        return format_grid(parse_grid(text))
    except GridFormatError as exc:
        raise ValueError(f"trace {trace_id!r} row {row_index}: malformed test_output_grid: {exc}") from exc


def _truthy(value: Any) -> bool:
    if value is None or (isinstance(value, float) and value != value):  # null / NaN
        return False
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)
