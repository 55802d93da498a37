"""Visited-state graphs of H-ARC tasks (H-ARC paper Figure 1) and the state counts of its Table 2.

Built with engine.harc.build_state_graph from the logged rows of every non-tutorial trace of a task, finished
or not (a withdrawal mid-task still visited its states): nodes are distinct output grids, edges observed
transitions between two different grids, starts / correct / incorrect submissions marked. A task's
n_unique_states is the node count; a split's is the sum over its tasks (grids are not shared across tasks).

`graph_document` adds a layout for the figure: x = the earliest step at which any participant first reached the
node (steps count grid changes since the task start), y = the node's distance to the correct output (share of
differing cells when the size matches, 1 otherwise), or, when the correct output is unknown, the node's rank
among the nodes of its step.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import polars as pl

from engine.harc import GRAPH_SKIPPED_ACTIONS, MAX_SIDE, StateGraph, build_state_graph, is_grid_string
from pipeline.harc.accuracy import PT, analysis_actions, is_sorted_by, release_frame
from pipeline.harc.errors import grid_shape, normalized_edit_distance

GRAPH_COLUMNS = ("participant_id", "task_id", "task_split", "action_number", "action", "is_solved",
                 "test_output_grid")
NODE_KINDS = ("start", "visited", "incorrect", "correct")
# Bars around rows of digits that all have one width w (1 to MAX_SIDE): with at most MAX_SIDE + 1 bars, a sufficient
# condition for engine.harc.is_grid_string, which polars checks at C speed and without the GIL (all_grid_strings).
_SAME_WIDTH_ROWS = "^\\|(?:" + "|".join(f"(?:[0-9]{{{w}}}\\|)+" for w in range(1, MAX_SIDE + 1)) + ")$"


def task_traces(actions: pl.DataFrame) -> Iterator[tuple[str, str, list[list[dict[str, Any]]]]]:
    """(task_id, task_split, traces) per task in task_id order; each trace a list of rows in action_number
    order with the keys build_state_graph reads. Rows become dicts one task at a time (memory stays flat)."""
    ordered = analysis_actions(actions).select(GRAPH_COLUMNS).sort("task_id", "participant_id", "action_number")
    rows = ordered.select(pl.format("{}_{}", pl.col("participant_id"), pl.col("task_id")).alias("joint_id_task"),
                          pl.col("task_id").alias("task_name"), "action", pl.col("is_solved").alias("solved"),
                          "test_output_grid")
    traces = ordered.group_by("task_id", "participant_id", maintain_order=True).agg(
        pl.col("task_split").first(), pl.len().alias("n_rows"))
    tasks, splits, lengths = (traces[c].to_list() for c in ("task_id", "task_split", "n_rows"))
    row_start = trace = 0
    while trace < len(tasks):  # traces are grouped by task: one task's rows are contiguous
        task, end = tasks[trace], trace
        while end < len(tasks) and tasks[end] == task:
            end += 1
        task_rows = rows.slice(row_start, sum(lengths[trace:end])).to_dicts()
        offset, task_traces_ = 0, []
        for n in lengths[trace:end]:
            task_traces_.append(task_rows[offset:offset + n])
            offset += n
        yield task, splits[trace], task_traces_
        row_start += offset
        trace = end


def graph_row(task_id: str, split: str, graph: StateGraph, n_rows: int) -> dict[str, Any]:
    per_trace = list(graph.unique_states_per_trace.values())
    return {
        "task_id": task_id, "task_split": split, "n_traces": graph.n_traces,
        "n_unique_states": graph.n_unique_states, "n_state_transitions": len(graph.edges),
        "n_correct_states": sum(1 for n in graph.nodes.values() if n.n_correct_submissions),
        "n_incorrect_states": sum(1 for n in graph.nodes.values() if n.n_incorrect_submissions),
        "mean_unique_states_per_trace": sum(per_trace) / len(per_trace) if per_trace else None,
        "n_action_rows": n_rows,
    }


def state_graph_table(actions: pl.DataFrame, progress=None) -> pl.DataFrame:
    """out_harc__task_state_graphs rows (without release_generation), one per task.

    The counts of engine.harc.build_state_graph over task_traces (graph_row), computed set-wise on the whole
    frame: nodes are a task's distinct grids, edges its distinct (previous grid, grid) pairs of consecutive
    non-skipped rows of a trace with different grids, correct / incorrect states the grids of submit rows with
    is_solved true / not true. A malformed grid raises as build_state_graph does (the engine path runs then).
    `progress` is accepted for the callers' sake; the computation is one step."""
    skipped = pl.col("action").is_in(list(GRAPH_SKIPPED_ACTIONS)).fill_null(False)
    grids = analysis_actions(actions.select("test_output_grid", "action", "is_tutorial", "task_number")).filter(
        ~skipped)["test_output_grid"].unique()
    if not all_grid_strings(grids):
        return _state_graph_table_by_engine(actions, progress)  # raises on the malformed grid
    # Grids as categories: every step below then moves 4-byte codes, never copies of the grid strings.
    rows = (analysis_actions(actions.select(*GRAPH_COLUMNS, "is_tutorial", "task_number")
                             .with_columns(pl.col("test_output_grid").cast(pl.Categorical)))
            .select(GRAPH_COLUMNS))
    # Only each trace's rows need to be in action order (for the previous grid); events loaded sorted by
    # participant, task and action (build.load_actions) are, so they are not sorted again.
    if not is_sorted_by(rows, ("participant_id", "task_id", "action_number")):
        rows = rows.sort("task_id", "participant_id", "action_number")
    rows = rows.with_columns(skipped.alias("skipped"))
    kept = rows.filter(~pl.col("skipped")).with_columns(
        pl.col("test_output_grid").shift(1).over("task_id", "participant_id").alias("previous"))
    grid, submit = pl.col("test_output_grid"), pl.col("action") == "submit"
    per_task = kept.group_by("task_id").agg(
        grid.n_unique().alias("n_unique_states"),
        pl.struct("previous", "test_output_grid").filter(pl.col("previous").is_not_null()
                                                         & (pl.col("previous") != grid))
        .n_unique().alias("n_state_transitions"),
        grid.filter(submit & pl.col("is_solved").fill_null(False)).n_unique().alias("n_correct_states"),
        grid.filter(submit & ~pl.col("is_solved").fill_null(False)).n_unique().alias("n_incorrect_states"))
    per_trace = rows.group_by("task_id", "participant_id").agg(
        pl.col("task_split").first(), pl.len().alias("n_rows"),
        grid.filter(~pl.col("skipped")).n_unique().alias("n_states"))
    per_trace_task = per_trace.group_by("task_id").agg(
        pl.len().alias("n_traces"), pl.col("n_rows").sum().alias("n_action_rows"),
        (pl.col("n_states").sum() / pl.len()).alias("mean_unique_states_per_trace"))
    splits = rows.group_by("task_id", maintain_order=True).agg(pl.col("task_split").first())
    table = (splits.join(per_trace_task, on="task_id", how="left").join(per_task, on="task_id", how="left")
             .with_columns(pl.col("n_unique_states", "n_state_transitions", "n_correct_states",
                                  "n_incorrect_states").fill_null(0))
             .sort("task_id"))
    return release_frame("out_harc__task_state_graphs", table)


def all_grid_strings(values: pl.Series) -> bool:
    """Whether every value is a grid string, as engine.harc.is_grid_string decides: polars clears the values that
    surely are (_SAME_WIDTH_ROWS), the engine judges the others (none, in events that passed ingest). A study
    has some 370,000 distinct grids: one is_grid_string call each took about half a second, holding the GIL."""
    surely = (values.str.contains(_SAME_WIDTH_ROWS)
              & (values.str.count_matches("|", literal=True) <= MAX_SIDE + 1)).fill_null(False)
    rest = values.filter(~surely)
    return rest.null_count() == 0 and all(is_grid_string(g) for g in rest.to_list())


def _state_graph_table_by_engine(actions: pl.DataFrame, progress=None) -> pl.DataFrame:
    """state_graph_table through engine.harc.build_state_graph, task by task (the reference the set-wise
    computation is tested against; used when a grid is malformed, to raise the engine's error)."""
    n_tasks = analysis_actions(actions)["task_id"].n_unique()
    items = task_traces(actions)
    if progress:
        items = progress(items, "state graphs", n_tasks)
    rows = []
    for task_id, split, traces in items:
        graph = build_state_graph(traces)
        rows.append(graph_row(task_id, split, graph, sum(len(t) for t in traces)))
    return release_frame("out_harc__task_state_graphs", rows)


def trace_unique_states(actions: pl.DataFrame) -> pl.DataFrame:
    """participant_id, task_id, n_unique_states: distinct logged grids of each trace."""
    return (analysis_actions(actions).group_by(PT)
            .agg(pl.col("test_output_grid").n_unique().cast(pl.Int64).alias("n_unique_states")))


def split_descriptives(graphs: pl.DataFrame, summary: pl.DataFrame, outcomes: pl.DataFrame,
                       actions: pl.DataFrame) -> pl.DataFrame:
    """Table 2 per split: participants (any non-tutorial event), tasks, finished participant-tasks, attempts
    (get_summary rows), unique visited states (sum over tasks), action rows, mean attempts to solution."""
    events = analysis_actions(actions).group_by("task_split").agg(
        pl.col("participant_id").n_unique().cast(pl.Int64).alias("n_participants"),
        pl.col("task_id").n_unique().cast(pl.Int64).alias("n_tasks"),
        pl.len().cast(pl.Int64).alias("n_action_rows"))
    states = graphs.group_by("task_split").agg(pl.col("n_unique_states").sum().cast(pl.Int64))
    attempts = summary.group_by("task_split").agg(pl.len().cast(pl.Int64).alias("n_task_attempts"))
    finished = outcomes.group_by("task_split").agg(
        pl.len().cast(pl.Int64).alias("n_participant_tasks"),
        pl.col("solved_at_attempt").drop_nulls().mean().alias("mean_attempts_to_solution"))
    return (events.join(states, on="task_split", how="left").join(attempts, on="task_split", how="left")
            .join(finished, on="task_split", how="left")
            .with_columns(pl.col("n_unique_states", "n_task_attempts", "n_participant_tasks").fill_null(0))
            .select("task_split", "n_participants", "n_tasks", "n_participant_tasks", "n_task_attempts",
                    "n_unique_states", "n_action_rows", "mean_attempts_to_solution")
            .sort("task_split"))


def first_visit_steps(traces: list[list[dict[str, Any]]]) -> dict[str, int]:
    """Earliest step (grid changes since the trace start) at which any trace first reached each grid."""
    steps: dict[str, int] = {}
    for rows in traces:
        step, previous, seen = 0, None, set()
        for row in rows:
            grid = row["test_output_grid"]
            if previous is not None and grid != previous:
                step += 1
            if grid not in seen:
                seen.add(grid)
                steps[grid] = min(steps.get(grid, step), step)
            previous = grid
    return steps


def node_kind(node: dict[str, Any]) -> str:
    if node["is_correct_submission"]:
        return "correct"
    if node["is_incorrect_submission"]:
        return "incorrect"
    return "start" if node["is_start"] else "visited"


def graph_document(graph: StateGraph, traces: list[list[dict[str, Any]]], *, task_split: str | None,
                   answer: str | None, answer_source: str | None) -> dict[str, Any]:
    """The graph as JSON (engine export plus node ids, kinds and the figure layout)."""
    doc = graph.to_dict()
    steps = first_visit_steps(traces)
    ids = {node["grid"]: i for i, node in enumerate(doc["nodes"])}
    for node in doc["nodes"]:
        node["node_id"] = ids[node["grid"]]
        node["kind"] = node_kind(node)
        node["first_visit_step"] = steps.get(node["grid"], 0)
        if answer is None:
            node["distance_to_answer"] = None
        else:
            distance = normalized_edit_distance(node["grid"], answer)
            node["distance_to_answer"] = 1.0 if distance is None else distance
    if answer is None:  # spread the nodes of a step by first-visit order
        rank: dict[int, int] = {}
        for node in doc["nodes"]:
            node["layout_y"] = rank.get(node["first_visit_step"], 0)
            rank[node["first_visit_step"]] = node["layout_y"] + 1
    else:
        for node in doc["nodes"]:
            node["layout_y"] = node["distance_to_answer"]
    for edge in doc["edges"]:
        edge["source_id"] = ids[edge["source"]]
        edge["target_id"] = ids[edge["target"]]
    doc.update(task_split=task_split, answer_grid=answer, answer_source=answer_source,
               answer_size=None if answer is None else list(grid_shape(answer)),
               layout={"x": "first_visit_step: earliest step (grid changes since the task start) at which any "
                            "participant reached the grid",
                       "y": "layout_y: distance_to_answer (share of differing cells, 1 when the size differs)"
                            if answer is not None else
                            "layout_y: rank among the grids first reached at the same step (answer unknown)"})
    return doc


def graph_chart(doc: dict[str, Any]):
    """Altair figure of a graph document: edges as lines, nodes coloured by kind, sized by traces."""
    from pipeline.core.figures import alt

    nodes = pl.DataFrame([{k: n[k] for k in ("node_id", "grid", "kind", "first_visit_step", "layout_y",
                                             "n_traces", "n_visits")} for n in doc["nodes"]],
                         schema={"node_id": pl.Int64, "grid": pl.String, "kind": pl.String,
                                 "first_visit_step": pl.Int64, "layout_y": pl.Float64, "n_traces": pl.Int64,
                                 "n_visits": pl.Int64})
    pos = {r["node_id"]: (r["first_visit_step"], r["layout_y"]) for r in nodes.iter_rows(named=True)}
    edges = pl.DataFrame([{"x": pos[e["source_id"]][0], "y": pos[e["source_id"]][1], "x2": pos[e["target_id"]][0],
                           "y2": pos[e["target_id"]][1], "count": e["count"]} for e in doc["edges"]],
                         schema={"x": pl.Int64, "y": pl.Float64, "x2": pl.Int64, "y2": pl.Float64,
                                 "count": pl.Int64})
    y_title = "distance to the correct output" if doc.get("answer_grid") else "order within step"
    x = alt.X("first_visit_step:Q", title="first-visit step (grid changes)")
    y = alt.Y("layout_y:Q", title=y_title)
    node_layer = alt.Chart(nodes).mark_circle(opacity=0.85, stroke="black", strokeWidth=0.3).encode(
        x=x, y=y, size=alt.Size("n_traces:Q", title="traces", scale=alt.Scale(range=[20, 400])),
        color=alt.Color("kind:N", scale=alt.Scale(domain=list(NODE_KINDS),
                                                  range=["#1f77b4", "#c7c7c7", "#d62728", "#2ca02c"])),
        order=alt.Order("kind:N"), tooltip=["grid:N", "kind:N", "n_traces:Q", "n_visits:Q", "first_visit_step:Q"])
    layers = [node_layer]
    if edges.height:
        edge_layer = alt.Chart(edges).mark_rule(color="gray").encode(
            x=alt.X("x:Q", title="first-visit step (grid changes)"), y=alt.Y("y:Q", title=y_title), x2="x2:Q",
            y2="y2:Q", opacity=alt.Opacity("count:Q", scale=alt.Scale(range=[0.15, 0.8]), legend=None))
        layers.insert(0, edge_layer)
    title = f"Visited states of task {doc['task_name']} ({doc['n_unique_states']} states, {doc['n_traces']} traces)"
    return alt.layer(*layers).properties(width=520, height=320, title=title)
