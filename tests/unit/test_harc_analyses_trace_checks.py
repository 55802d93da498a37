"""Trace checks on core_harc__actions-shaped frames: previous-grid chaining, the worked example (harc-editor.md
§7), a corrupted row, a row the engine cannot apply, undo into an unknown previous grid; and the visited-state
graph table and its figure layout."""

from __future__ import annotations

import csv
import io

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.harc import build_state_graph, is_grid_string
from pipeline.harc import graphs, trace_checks
from tests.unit.test_harc_replay import PREV, WORKED_CSV

CORE_OF = {v: k for k, v in trace_checks.ENGINE_COLUMNS.items()}  # CSV name -> core column


def core_rows(csv_text: str, participant: str = "p1", task: str = "x0000000", number: int = 2) -> pl.DataFrame:
    """CSV rows of the worked example as they land in core_harc__actions."""
    rows = []
    for raw in csv.DictReader(io.StringIO(csv_text)):
        row = {}
        for key, value in raw.items():
            if key == "time" or key not in CORE_OF:  # columns the replay does not read
                continue
            col = CORE_OF[key]
            value = value or None
            if col in ("action_number", "attempt_number", "selected_symbol", "test_output_height",
                       "test_output_width", "test_input_height", "test_input_width"):
                value = int(value)
            elif col in ("action_row", "action_col"):
                value = None if value is None else int(float(value))
            elif col == "is_solved":
                value = value == "true"
            row[col] = value
        rows.append(row | {"release_generation": "osf-current", "participant_id": participant, "task_id": task,
                           "task_split": "evaluation", "task_number": number, "is_tutorial": False,
                           "flags": ["incomplete_participant"] if row["action_number"] == 1 else []})
    return pl.DataFrame(rows, schema_overrides={"action_row": pl.Int64, "action_col": pl.Int64,
                                                "select_loc": pl.String, "flags": pl.List(pl.String)})


def check(df: pl.DataFrame, previous: dict | None = None, **kwargs) -> dict:
    previous = previous if previous is not None else {("osf-current", "p1", "x0000000"): (PREV, "previous_task")}
    jobs = trace_checks.build_jobs(df, previous)
    return trace_checks.check_traces(jobs, **kwargs).row(0, named=True)


def test_previous_grids_chain_by_task_number():
    last = pl.DataFrame({
        "release_generation": "osf-current", "participant_id": ["a", "a", "a", "a", "b", "b"],
        "task_id": ["tut", "t1", "t2", "t4", "u1", "u1b"], "task_number": [0, 1, 2, 4, 1, 1],
        "last_grid": ["|62|", "|12|21|", "|5|", "|7|", "|1|", "|2|"]})
    prev = trace_checks.previous_grids(last)
    assert prev[("osf-current", "a", "t1")] == ("|62|", "tutorial_task")
    assert prev[("osf-current", "a", "t2")] == ("|12|21|", "previous_task")
    assert prev[("osf-current", "a", "t4")] == (None, "unknown")  # task 3 is missing: never the wrong grid
    assert prev[("osf-current", "a", "tut")] == (None, "unknown")
    assert prev[("osf-current", "b", "u1")] == (None, "unknown")  # two tasks at position 1: ambiguous
    assert trace_checks.last_grids_of(pl.DataFrame({
        "release_generation": "r", "participant_id": "a", "task_id": "t", "task_number": 1,
        "action_number": [2, 1], "test_output_grid": ["|2|", "|1|"]}))["last_grid"].to_list() == ["|2|"]


def test_worked_example_is_consistent():
    row = check(core_rows(WORKED_CSV))
    assert (row["replay_status"], row["n_trace_rows"], row["n_rows_replayed"]) == ("consistent", 16, 16)
    assert row["divergence_action_number"] is None and row["reason"] is None
    assert (row["previous_grid_source"], row["n_adopted_rows"], row["n_mismatch_notes"]) == ("previous_task", 0, 0)
    assert row["flags"] == ["incomplete_participant"]


def test_corrupted_grid_is_the_first_divergence():
    df = core_rows(WORKED_CSV).with_columns(
        pl.when(pl.col("action_number") == 8).then(pl.lit("|8800|8800|8001|")).otherwise(pl.col("test_output_grid"))
        .alias("test_output_grid"))
    row = check(df)
    assert (row["replay_status"], row["divergence_action_number"], row["divergence_action"],
            row["divergence_kind"]) == ("divergent", 8, "floodfill", "grid")
    assert (row["recorded_grid"], row["replayed_grid"]) == ("|8800|8800|8001|", "|8800|8800|8000|")
    assert (row["recorded_height"], row["recorded_width"], row["replayed_height"], row["replayed_width"]) == (3, 4, 3, 4)
    assert row["reason"] == "1 cell differs; first at (2, 3): row logs 1, replay has 0"
    assert row["n_rows_replayed"] == 8


def test_corrupted_size_is_a_size_divergence():
    df = core_rows(WORKED_CSV).with_columns(
        pl.when(pl.col("action_number") == 3).then(5).otherwise(pl.col("test_output_width")).alias("test_output_width"))
    row = check(df)
    assert (row["divergence_action_number"], row["divergence_kind"], row["recorded_width"], row["replayed_width"]) \
        == (3, "size", 5, 4)


def test_unknown_action_is_not_replayable():
    df = core_rows(WORKED_CSV).with_columns(
        pl.when(pl.col("action_number") == 4).then(pl.lit("paint")).otherwise(pl.col("action")).alias("action"))
    row = check(df)
    assert (row["replay_status"], row["divergence_action_number"], row["divergence_action"]) \
        == ("not_replayable", 4, "paint")
    assert row["reason"] == "row 3: unknown action 'paint'"
    assert row["divergence_kind"] is None


def test_undo_into_an_unknown_previous_grid_is_adopted_and_noted():
    text = WORKED_CSV.splitlines()
    header, first = text[0], text[1]
    undo = first.replace("1,2024", "2,2024", 1).replace("reset_grid", "undo").replace("|000|000|000|,3,3,|000",
                                                                                       "|12|21|,3,3,|000", 1)
    df = core_rows("\n".join([header, first, undo]) + "\n")
    row = check(df, previous={})
    assert (row["replay_status"], row["n_adopted_rows"], row["previous_grid_source"]) == ("consistent", 1, "unknown")
    assert "Q3" in row["note_codes"]
    assert check(df)["n_adopted_rows"] == 0  # with the previous task's grid it is verified instead


def test_strict_replay_turns_secondary_mismatches_into_state_divergences():
    df = core_rows(WORKED_CSV).with_columns(
        pl.when(pl.col("action_number") == 3).then(pl.lit("floodfill")).otherwise(pl.col("selected_tool"))
        .alias("selected_tool"))
    assert check(df)["replay_status"] == "consistent"
    assert check(df)["n_mismatch_notes"] >= 1
    strict = check(df, strict=True)
    assert (strict["replay_status"], strict["divergence_kind"], strict["divergence_action_number"]) \
        == ("divergent", "state", 3)


def test_summary_counts_every_status():
    checks = pl.DataFrame({"replay_status": ["consistent", "consistent", "divergent"]})
    assert trace_checks.summarize(checks) == {"consistent": 2, "divergent": 1, "not_replayable": 0}


# ------------------------------------------------------------------------------------------------ graphs

Z, A, B, C = "|00|", "|10|", "|11|", "|12|"


def graph_actions() -> pl.DataFrame:
    """Task G: p1 goes Z -> A -> B (wrong submit) -> C (correct submit); p2 goes Z -> A -> C (correct)."""
    def r(p, n, action, grid, solved=False):
        return {"participant_id": p, "task_id": "G", "task_split": "training", "action_number": n, "action": action,
                "is_solved": solved, "test_output_grid": grid, "is_tutorial": False, "task_number": 1}
    return pl.DataFrame([
        r("p1", 1, "reset_grid", Z), r("p1", 2, "edit", A), r("p1", 3, "change_color", A), r("p1", 4, "edit", B),
        r("p1", 5, "submit", B), r("p1", 6, "edit", C), r("p1", 7, "submit", C, True),
        r("p2", 1, "reset_grid", Z), r("p2", 2, "edit", A), r("p2", 3, "edit", C), r("p2", 4, "submit", C, True)])


def test_state_graph_table():
    row = graphs.state_graph_table(graph_actions()).row(0, named=True)
    assert (row["n_traces"], row["n_unique_states"], row["n_state_transitions"]) == (2, 4, 4)  # Z-A, A-B, B-C, A-C
    assert (row["n_correct_states"], row["n_incorrect_states"], row["n_action_rows"]) == (1, 1, 11)
    assert row["mean_unique_states_per_trace"] == pytest.approx((4 + 3) / 2)


def test_graph_document_layout():
    (_, split, traces), = list(graphs.task_traces(graph_actions()))
    doc = graphs.graph_document(build_state_graph(traces), traces, task_split=split, answer=C,
                                answer_source="arc_task_file")
    nodes = {n["grid"]: n for n in doc["nodes"]}
    assert {g: n["kind"] for g, n in nodes.items()} == {Z: "start", A: "visited", B: "incorrect", C: "correct"}
    # first-visit step: grid changes since the start; C is reached at step 3 by p1 and step 2 by p2
    assert {g: n["first_visit_step"] for g, n in nodes.items()} == {Z: 0, A: 1, B: 2, C: 2}
    assert {g: n["layout_y"] for g, n in nodes.items()} == {Z: 1.0, A: 0.5, B: 0.5, C: 0.0}
    assert {(e["source_id"], e["target_id"]) for e in doc["edges"]} == {(0, 1), (1, 2), (2, 3), (1, 3)}
    unknown = graphs.graph_document(build_state_graph(traces), traces, task_split=split, answer=None,
                                    answer_source=None)
    assert {n["grid"]: n["layout_y"] for n in unknown["nodes"]} == {Z: 0, A: 0, B: 0, C: 1}
    assert graphs.graph_chart(doc).to_dict()["layer"]  # edges and nodes layers


def test_state_graph_table_matches_the_engine_graphs_task_by_task():
    """The set-wise table equals build_state_graph + graph_row per task on a random study with revisited grids,
    self-loops, skipped (tutorial/feedback) rows, null is_solved and a trace of skipped rows only."""
    import random

    rng = random.Random(3)
    grids = ["|00|", "|10|", "|11|", "|12|", "|1|", "|222|222|"]
    rows = []
    for task in ("T1", "T2", "T3"):
        for p in range(rng.randint(1, 6)):
            for n in range(1, rng.randint(2, 12)):
                action = rng.choice(["edit", "edit", "submit", "change_color", "undo", "submit_feedback",
                                     "write_first_tutorial_description"])
                rows.append({"participant_id": f"p{p}", "task_id": task, "task_split": "training",
                             "action_number": n, "action": action,
                             "is_solved": rng.choice([True, False, None]), "test_output_grid": rng.choice(grids),
                             "is_tutorial": False, "task_number": 1})
    rows += [{"participant_id": "only_skipped", "task_id": "T1", "task_split": "training", "action_number": 1,
              "action": "submit_feedback", "is_solved": None, "test_output_grid": None, "is_tutorial": False,
              "task_number": 1}]
    actions = pl.DataFrame(rows, schema_overrides={"is_solved": pl.Boolean})
    assert graphs.state_graph_table(actions).equals(graphs._state_graph_table_by_engine(actions))


def test_state_graph_table_raises_on_a_malformed_grid_as_the_engine_does():
    bad = graph_actions().with_columns(pl.when(pl.col("action_number") == 3).then(pl.lit("|1|22|"))
                                       .otherwise(pl.col("test_output_grid")).alias("test_output_grid"))
    with pytest.raises(ValueError, match="malformed test_output_grid"):
        graphs.state_graph_table(bad)


def test_check_actions_does_not_depend_on_row_order_or_chunking():
    df = pl.concat([core_rows(WORKED_CSV, participant=p, number=n) for p, n in (("p1", 2), ("p2", 1), ("p3", 3))])
    previous = {("osf-current", "p1", "x0000000"): (PREV, "previous_task")}
    in_order = trace_checks.check_actions(df, previous)
    shuffled = trace_checks.check_actions(df.sample(fraction=1.0, shuffle=True, seed=1), previous, rows_per_chunk=7)
    assert in_order.equals(shuffled) and in_order.height == 3
    assert in_order.equals(trace_checks.check_traces(trace_checks.build_jobs(df, previous)))
    traces_reversed = pl.concat([df.filter(pl.col("participant_id") == p) for p in ("p3", "p1", "p2")])
    assert trace_checks.check_actions(traces_reversed, previous, rows_per_chunk=7).equals(in_order)
    from pipeline.core.executor import SerialExecutor

    opened = SerialExecutor()  # an executor the caller opened (build.run_trace_checks opens a cluster early)
    assert trace_checks.check_actions(df, previous, executor=opened, rows_per_chunk=7).equals(in_order)


def test_a_packed_chunk_replays_as_the_frame_itself():
    """Chunks sent to worker processes travel packed (zstd Arrow IPC): the same rows come back."""
    df = pl.concat([core_rows(WORKED_CSV, participant=p, number=n) for p, n in (("p1", 2), ("p2", 1))])
    previous = {("osf-current", "p1", "x0000000"): (PREV, "previous_task")}
    packed = trace_checks.pack(df)
    assert isinstance(packed, bytes) and trace_checks.unpacked(packed).equals(df)
    assert trace_checks._check_slice((packed, previous, {}), False) == trace_checks._check_slice((df, previous, {}),
                                                                                                 False)


def test_in_trace_order_needs_contiguous_traces_with_increasing_action_numbers():
    df = pl.concat([core_rows(WORKED_CSV, participant=p) for p in ("p1", "p2")])
    assert trace_checks.in_trace_order(df)
    assert trace_checks.in_trace_order(pl.concat([df.slice(16), df.slice(0, 16)]))  # p2 first: still whole traces
    assert not trace_checks.in_trace_order(pl.concat([df.slice(0, 8), df.slice(16), df.slice(8, 8)]))  # p1 split
    assert not trace_checks.in_trace_order(pl.concat([df.slice(1, 15), df.slice(0, 1), df.slice(16)]))  # 1 after 16
    assert trace_checks.in_trace_order(df.clear())


def test_auto_replay_workers_parallel_only_on_large_inputs_with_idle_cores(monkeypatch):
    from pipeline.harc import build

    monkeypatch.setattr(build, "default_workers", lambda: 2)
    monkeypatch.setattr(build, "machine_load", lambda: 0.0)  # the tasks running now besides this one
    assert build.auto_replay_workers(build.AUTO_PARALLEL_ROWS - 1) == 1
    assert build.auto_replay_workers(build.AUTO_PARALLEL_ROWS) == 2
    monkeypatch.setattr(build, "machine_load", lambda: 1.0)  # one core already busy elsewhere
    assert build.auto_replay_workers(10 * build.AUTO_PARALLEL_ROWS) == 1
    monkeypatch.setattr(build, "machine_load", lambda: None)  # the system says nothing: taken as idle
    assert build.auto_replay_workers(10 * build.AUTO_PARALLEL_ROWS) == 2
    monkeypatch.setattr(build, "default_workers", lambda: 1)
    monkeypatch.setattr(build, "machine_load", lambda: 0.0)
    assert build.auto_replay_workers(10 * build.AUTO_PARALLEL_ROWS) == 1


def test_engine_rows_are_the_engine_columns_renamed_row_by_row():
    df = core_rows(WORKED_CSV)
    renamed = df.select([pl.col(core).alias(engine) for core, engine in trace_checks.ENGINE_COLUMNS.items()])
    rows = trace_checks.engine_rows(df)
    assert rows == renamed.to_dicts()
    assert all(list(row) == list(trace_checks.ENGINE_COLUMNS.values()) for row in rows)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(["x", "xy", "y"]), st.integers(0, 3)),
                max_size=12, unique=True), st.booleans())
def test_is_sorted_by_agrees_with_comparing_against_a_sort(keys, presort):
    from pipeline.harc.accuracy import is_sorted_by

    order = ["participant_id", "task_id", "action_number"]
    frame = pl.DataFrame(sorted(keys) if presort else keys, schema=order, orient="row")
    assert is_sorted_by(frame, order) == frame.equals(frame.sort(order))


_rows = st.lists(st.text("0123456789", min_size=0, max_size=32), min_size=0, max_size=33)
_near_grids = st.one_of(
    _rows.map(lambda rows: "|" + "|".join(rows) + "|"),  # uneven, empty, too many or too wide rows
    st.tuples(st.integers(1, 31), st.integers(1, 31), st.integers(0, 9)).map(  # even rows, up to one too many
        lambda hwd: "|" + "|".join([str(hwd[2]) * hwd[1]] * hwd[0]) + "|"),
    st.text("0123456789|x ", max_size=40),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_near_grids, min_size=1, max_size=8))
def test_all_grid_strings_decides_as_the_engine(values):
    """The polars pre-check never clears a value the engine rejects: the answer is the engine's, value by
    value and for a batch."""
    assert [graphs.all_grid_strings(pl.Series([v], dtype=pl.String)) for v in values] == \
        [is_grid_string(v) for v in values]
    assert graphs.all_grid_strings(pl.Series(values, dtype=pl.String)) == all(is_grid_string(v) for v in values)
    assert not graphs.all_grid_strings(pl.Series([*values, None], dtype=pl.String))
