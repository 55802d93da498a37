"""`arcstudy replay-harc`, `harc-analyses` and `harc-graph` end to end: data.csv written from engine.harc.Editor
sessions (and the worked example of harc-editor.md §7 verbatim), ingested through `arcstudy ingest`, replayed
with rows corrupted in known ways, then analysed.

Participants (evaluation, one data.csv):
- A: task 1 (scripted) ends on |12|21|, task 2 is the worked example (16 rows, PREV = |12|21|): consistent, the
  worked example with its previous grid taken from A's task 1.
- B: two scripted tasks (copy + recolour, solved at once; resize + flood fill + undo, solved at attempt 2):
  consistent.
- C: B's script with the grid of row 6 (an edit) changed in one cell: divergent at action 6 (grid).
- D: B's script with row 8's edit moved onto a cell that already has the colour: divergent at action 8
  (action: the page logs no such row).
- E: B's script without row 3 (the colour change before the first edit): divergent at action 4 (grid), with
  the action_number gap noted (V7).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from engine.harc import Editor
from pipeline.cli import app
from pipeline.core.workspace import Workspace
from pipeline.harc.build import ANALYSIS_TABLES
from pipeline.harc.figures import FIGURE_NAMES
from schemas import TABLES
from tests.fixtures import harc as fx
from tests.unit.test_harc_replay import WORKED_CSV

TASK1, TASK2, PREV_TASK, WORKED_TASK = "aa000001", "aa000002", "aa000003", "x0000000"
ARC = {
    TASK1: {"train": [{"input": [[1, 2]], "output": [[2, 1]]}], "test": [{"input": [[1, 2], [3, 4]],
                                                                          "output": [[2, 1], [4, 3]]}]},
    TASK2: {"train": [{"input": [[6]], "output": [[6, 6], [6, 6]]}], "test": [{"input": [[5]],
                                                                              "output": [[5, 5], [5, 5]]}]},
    PREV_TASK: {"train": [{"input": [[2]], "output": [[2, 1], [1, 2]]}], "test": [{"input": [[1]],
                                                                                  "output": [[1, 2], [2, 1]]}]},
}


def pid(name: str) -> str:
    return hashlib.md5(name.encode()).hexdigest()


def grid_of(task: str, which: str) -> str:
    return "|" + "|".join("".join(map(str, r)) for r in ARC[task]["test"][0][which]) + "|"


def script_b(ed: Editor) -> tuple[list[dict], list[dict]]:
    """B's two tasks; returns the logged rows of each."""
    answer1, answer2 = grid_of(TASK1, "output"), grid_of(TASK2, "output")
    ed.load_task(grid_of(TASK1, "input"))
    ed.copy_from_input()                                    # 2  |12|34|
    for symbol, cell in ((2, (0, 0)), (1, (0, 1)), (4, (1, 0)), (3, (1, 1))):
        ed.palette_click(symbol)                            # 3, 5, 7, 9
        ed.edit(*cell)                                      # 4, 6, 8, 10
    ed.press_submit(answer1)
    ed.send_first_description(answer1)                      # 11 write_first_description, 12 submit (correct)
    ed.end_task(final_description=False)                    # 13 no_last_description
    first = list(ed.log)
    ed.load_task(grid_of(TASK2, "input"))
    ed.change_height(2)
    ed.change_width(2)
    ed.change_tool("floodfill")
    ed.palette_click(5)
    ed.floodfill(0, 0)                                      # |55|55|
    ed.undo()                                               # |00|00|
    ed.press_submit(answer2)
    ed.send_first_description(answer2)                      # wrong
    ed.floodfill(0, 0)
    ed.press_submit(answer2)                                # correct at attempt 2
    ed.end_task(final_description=True)
    return first, ed.log[len(first):]


def script_a_task1(ed: Editor) -> list[dict]:
    answer = grid_of(PREV_TASK, "output")
    ed.load_task(grid_of(PREV_TASK, "input"))
    ed.change_height(2)
    ed.change_width(2)
    for symbol, cells in ((1, [(0, 0), (1, 1)]), (2, [(0, 1), (1, 0)])):
        ed.palette_click(symbol)
        for cell in cells:
            ed.edit(*cell)
    ed.press_submit(answer)
    ed.send_first_description(answer)
    ed.end_task(final_description=False)
    return list(ed.log)


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, list | tuple):
        return json.dumps(value)
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def csv_rows(log: list[dict], participant: str, task: str, number: int, start: datetime) -> list[dict[str, str]]:
    """Editor rows as data.csv rows (the release's text conventions: True/False, floats for x/y)."""
    rows = []
    for i, r in enumerate(log):
        row = {k: _text(v) for k, v in r.items()}
        for k in ("action_x", "action_y"):
            row[k] = "" if r[k] is None else f"{float(r[k]):.1f}"
        row.update({"exp_name": "expv6_1", "task_type": "evaluation", "hashed_id": participant,
                    "joint_id_task": f"{participant}_{task}.json", "task_name": f"{task}.json",
                    "task_number": str(number), "is_tutorial": "False", "done": "False",
                    "time": (start + timedelta(seconds=3 * i)).strftime("%Y-%m-%dT%H:%M:%S.000000"),
                    "withdraw": "False", "complete": "True"})
        rows.append(row)
    return rows


def worked_rows(participant: str) -> list[dict[str, str]]:
    rows = []
    for raw in csv.DictReader(io.StringIO(WORKED_CSV)):
        raw = {k: ("True" if v == "true" else "False" if v == "false" else v) for k, v in raw.items()}
        rows.append(raw | {"exp_name": "expv6_1", "task_type": "evaluation", "hashed_id": participant,
                           "joint_id_task": f"{participant}_{WORKED_TASK}.json", "task_name": f"{WORKED_TASK}.json",
                           "task_number": "2", "is_tutorial": "False", "done": "False", "withdraw": "False",
                           "complete": "True"})
    return rows


def study_rows() -> list[dict[str, str]]:
    t0 = datetime(2024, 3, 5, 9, 0, 0)
    a, b, c, d, e = (pid(x) for x in "ABCDE")
    rows = csv_rows(script_a_task1(Editor()), a, PREV_TASK, 1, t0) + worked_rows(a)
    b1, b2 = script_b(Editor())
    rows += csv_rows(b1, b, TASK1, 1, t0) + csv_rows(b2, b, TASK2, 2, t0 + timedelta(hours=1))
    c1 = csv_rows(b1, c, TASK1, 1, t0)
    assert c1[5]["action"] == "edit" and c1[5]["test_output_grid"] == "|21|34|"
    c1[5]["test_output_grid"] = "|21|35|"
    rows += c1 + csv_rows(b2, c, TASK2, 2, t0 + timedelta(hours=1))
    d1 = csv_rows(b1, d, TASK1, 1, t0)
    assert (d1[7]["action"], d1[7]["action_x"], d1[7]["action_y"], d1[7]["selected_symbol"]) == ("edit", "1.0", "0.0", "4")
    d1[7]["action_y"] = "1.0"  # (1, 1) already holds 4
    rows += d1 + csv_rows(b2, d, TASK2, 2, t0 + timedelta(hours=1))
    e1 = csv_rows(b1, e, TASK1, 1, t0)
    assert e1[2]["action"] == "change_color"
    rows += e1[:2] + e1[3:] + csv_rows(b2, e, TASK2, 2, t0 + timedelta(hours=1))
    return rows


def write_files(folder: Path) -> Path:
    fx.write_data(folder / "data.csv", study_rows())
    fx.write_task(folder / "challenges.json", ARC)
    return folder


def invoke(*args: str):
    return CliRunner().invoke(app, ["--plain", *args])


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    root = tmp_path_factory.mktemp("harc_replay")
    db = root / "study.duckdb"
    res = invoke("ingest", str(write_files(root / "files")), "--db", str(db))
    assert res.exit_code == 0, res.output
    res = invoke("replay-harc", "--db", str(db))
    with Workspace(db, read_only=True) as ws:
        checks = ws.read("SELECT * FROM out_harc__trace_checks ORDER BY participant_id, task_number")
        runs = ws.read("SELECT command, exit_code, manifest_json FROM runs WHERE command LIKE 'arcstudy replay-harc%'")
    return db, res, checks, runs


def by_trace(checks: pl.DataFrame) -> dict[tuple[str, str], dict]:
    names = {pid(x): x for x in "ABCDE"}
    return {(names[r["participant_id"]], r["task_id"]): r for r in checks.iter_rows(named=True)}


def test_replay_reports_every_trace_and_exits_0(replayed):
    _, res, checks, runs = replayed
    assert res.exit_code == 0, res.output
    assert "10 traces replayed: 7 consistent, 3 divergent, 0 not replayable" in res.output
    assert checks.height == 10
    assert runs["exit_code"].to_list() == [0]
    manifest = json.loads(runs["manifest_json"][0])
    assert manifest["notes"]["counts"] == {"consistent": 7, "divergent": 3, "not_replayable": 0}
    assert any(k.endswith("#out_harc__trace_checks") for k in manifest["outputs"])


def test_worked_example_replays_exactly_after_ingest(replayed):
    *_, checks, _ = replayed
    worked = by_trace(checks)[("A", WORKED_TASK)]
    assert (worked["replay_status"], worked["n_trace_rows"], worked["n_rows_replayed"]) == ("consistent", 16, 16)
    assert (worked["previous_grid_source"], worked["n_adopted_rows"], worked["n_mismatch_notes"]) \
        == ("previous_task", 0, 0)
    assert by_trace(checks)[("A", PREV_TASK)]["replay_status"] == "consistent"


def test_editor_sessions_are_consistent(replayed):
    *_, checks, _ = replayed
    traces = by_trace(checks)
    for key in (("B", TASK1), ("B", TASK2), ("C", TASK2), ("D", TASK2), ("E", TASK2)):
        assert traces[key]["replay_status"] == "consistent", traces[key]
        assert traces[key]["n_mismatch_notes"] == 0  # answers from the ARC file re-judge every submit
    assert traces[("B", TASK2)]["previous_grid_source"] == "previous_task"
    assert traces[("B", TASK1)]["previous_grid_source"] == "unknown"  # no tutorial rows in this release


def test_changed_cell_is_the_first_divergence(replayed):
    *_, checks, _ = replayed
    c = by_trace(checks)[("C", TASK1)]
    assert (c["replay_status"], c["divergence_action_number"], c["divergence_action"], c["divergence_kind"]) \
        == ("divergent", 6, "edit", "grid")
    assert (c["recorded_grid"], c["replayed_grid"]) == ("|21|35|", "|21|34|")
    assert c["reason"] == "1 cell differs; first at (1, 1): row logs 5, replay has 4"
    assert (c["recorded_height"], c["recorded_width"], c["replayed_height"], c["replayed_width"]) == (2, 2, 2, 2)


def test_edit_onto_a_cell_of_that_colour_is_an_impossible_row(replayed):
    *_, checks, _ = replayed
    d = by_trace(checks)[("D", TASK1)]
    assert (d["divergence_action_number"], d["divergence_kind"]) == (8, "action")
    assert "already has colour 4" in d["reason"]
    assert d["recorded_grid"] == "|21|44|"


def test_dropped_colour_change_diverges_at_the_next_edit(replayed):
    *_, checks, _ = replayed
    e = by_trace(checks)[("E", TASK1)]
    assert (e["divergence_action_number"], e["divergence_kind"], e["recorded_grid"], e["replayed_grid"]) \
        == (4, "grid", "|22|34|", "|02|34|")
    assert "V7" in e["note_codes"]  # action_number jumps from 2 to 4


def test_strict_exits_3_and_workers_do_not_change_the_table(replayed, tmp_path):
    db, _, checks, _ = replayed
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    res = invoke("replay-harc", "--db", str(copy), "--workers", "2", "--strict")
    assert res.exit_code == 3, res.output
    with Workspace(copy, read_only=True) as ws:
        again = ws.read("SELECT * FROM out_harc__trace_checks ORDER BY participant_id, task_number")
    assert again.equals(checks)


def test_only_task_replaces_only_that_tasks_rows(replayed, tmp_path):
    db, _, checks, _ = replayed
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    with Workspace(copy) as ws:
        ws.con.execute("DELETE FROM out_harc__trace_checks WHERE task_id = ?", [TASK2])
    res = invoke("replay-harc", "--db", str(copy), "--only-task", TASK2)
    assert res.exit_code == 0, res.output
    assert "4 traces replayed: 4 consistent" in res.output
    with Workspace(copy, read_only=True) as ws:
        again = ws.read("SELECT * FROM out_harc__trace_checks ORDER BY participant_id, task_number")
    assert again.equals(checks)  # the previous grids still come from each participant's task 1
    res = invoke("replay-harc", "--db", str(copy), "--only-task", "nosuchtask")
    assert res.exit_code == 1 and "has no events" in res.output


def test_empty_database_is_an_error(replayed, tmp_path):
    db, *_ = replayed
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    with Workspace(copy) as ws:
        ws.con.execute("DELETE FROM core_harc__actions")
    for command in ("replay-harc", "harc-analyses"):
        res = invoke(command, "--db", str(copy))
        assert res.exit_code == 1 and "no H-ARC events" in res.output, res.output
    assert invoke("replay-harc", "--db", str(tmp_path / "missing.duckdb")).exit_code == 1


# ------------------------------------------------------------------------------------------ harc-analyses
#
# Finished participant-tasks (all evaluation, expv6_1: 5 tasks assigned): A's aa000003 (solved at 1; A's worked
# example has no terminal row), and for each of B-E aa000001 (solved at 1) and aa000002 (solved at 2).
# k-attempt accuracy: aa000001 1, 1, 1; aa000002 0, 1, 1; aa000003 1, 1, 1 -> k=1 2/3, k=2 and k=3 1.
# Bounds: the pool is the 4 tasks seen; A finished 1 (4 missing, only 3 candidates: all three imputed), B-E
# finished 2 (3 missing, 2 candidates: both imputed), so every simulation imputes the same tasks:
#   pessimistic k=3: aa000001 4/5, aa000002 4/5, aa000003 1/5, x0000000 0/5 -> 0.45; optimistic: all 5/5 -> 1.


@pytest.fixture(scope="module")
def analysed(replayed, tmp_path_factory):
    db, *_ = replayed
    out = tmp_path_factory.mktemp("harc_out")
    res = invoke("harc-analyses", "--db", str(db), "--out", str(out), "--simulations", "200", "--seed", "5")
    with Workspace(db, read_only=True) as ws:
        tables = {name: ws.read(f"SELECT * FROM {name}") for name in ANALYSIS_TABLES}
    return db, out, res, tables


def test_analyses_exit_0_and_print_the_headline(analysed):
    _, out, res, tables = analysed
    assert res.exit_code == 0, res.output
    assert "66.7%" in res.output and "[45.0%, 100.0%]" in res.output
    assert all(tables[n].height > 0 for n in ANALYSIS_TABLES)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seeds"] == {"bounds": 5}
    assert manifest["config"]["release_generation"] == "osf-current"
    assert sorted(p.name for p in (out / "figures").glob("*.png")) == sorted(f + ".png" for f in FIGURE_NAMES)


def test_figures_drawn_by_the_child_process_are_the_bytes_drawn_in_process(analysed, tmp_path):
    # harc-analyses draws its figures in a child interpreter (build.FigureProcess): the same write_figures on
    # the same tables, so the same files as drawing them here.
    from pipeline.harc.figures import write_figures

    _, out, _, tables = analysed
    written, skipped = write_figures(tmp_path, tables)
    assert sorted(written) == sorted(FIGURE_NAMES) and not skipped
    for paths in written.values():
        for path in paths.values():
            assert path.read_bytes() == (out / "figures" / path.name).read_bytes(), path.name


def test_figure_process_reports_a_failure_and_ends_unused(tmp_path):
    from pipeline.harc.build import FigureProcess

    unused = FigureProcess()
    unused.close()  # never given tables: the child ends on its empty stdin
    assert unused.proc.returncode == 0
    broken = FigureProcess()
    broken.draw(tmp_path, {})  # no tables at all: write_figures raises in the child
    with pytest.raises(RuntimeError, match="(?s)drawing the figures failed: .*KeyError"):
        broken.result()


def test_accuracy_tables(analysed):
    *_, tables = analysed
    acc = {(t, k): r for t, k, r in tables["out_harc__task_accuracy"].select(
        "task_id", "max_attempts", "solve_rate").rows()}
    assert acc == {(TASK1, 1): 1, (TASK1, 2): 1, (TASK1, 3): 1, (TASK2, 1): 0, (TASK2, 2): 1, (TASK2, 3): 1,
                   (PREV_TASK, 1): 1, (PREV_TASK, 2): 1, (PREV_TASK, 3): 1}
    split = {r["max_attempts"]: r for r in tables["out_harc__split_accuracy"].iter_rows(named=True)}
    assert split[1]["mean_task_accuracy"] == pytest.approx(2 / 3)
    assert split[3]["mean_task_accuracy"] == 1
    assert split[1]["share_participants_all_solved"] == pytest.approx(1 / 5)  # only A (1 of 1) at k = 1
    desc = tables["out_harc__split_descriptives"].row(0, named=True)
    assert (desc["n_participants"], desc["n_tasks"], desc["n_participant_tasks"], desc["n_task_attempts"]) \
        == (5, 4, 9, 13)
    assert desc["mean_attempts_to_solution"] == pytest.approx(13 / 9)


def test_bounds_by_hand(analysed):
    *_, tables = analysed
    k3 = {r["bound_kind"]: r for r in tables["out_harc__accuracy_bounds"].filter(pl.col("max_attempts") == 3)
          .iter_rows(named=True)}
    assert k3["pessimistic"]["bound_estimate"] == pytest.approx(0.45)
    assert k3["optimistic"]["bound_estimate"] == pytest.approx(1.0)
    assert k3["pessimistic"]["bound_sd"] == pytest.approx(0, abs=1e-12)
    assert (k3["pessimistic"]["n_imputed_participants"], k3["pessimistic"]["n_imputed_tasks"]) == (5, 11)
    assert (k3["pessimistic"]["n_simulations"], k3["pessimistic"]["random_seed"]) == (200, 5)


def test_errors_and_times(analysed):
    *_, tables = analysed
    errs = {r["task_id"]: r for r in tables["out_harc__task_errors"].iter_rows(named=True)}
    # aa000002: each of B-E submitted the empty 2x2 grid once, then the answer: 1 distinct error / 8 submissions
    assert (errs[TASK2]["n_submits"], errs[TASK2]["n_incorrect_submits"], errs[TASK2]["n_unique_incorrect_grids"]) \
        == (8, 4, 1)
    assert errs[TASK2]["error_divergence"] == pytest.approx(1 / 8)
    assert errs[TASK2]["mean_normalized_edit_distance"] == 1.0
    assert errs[TASK1]["error_divergence"] == 0
    summary = tables["out_harc__error_summary"].row(0, named=True)
    assert (summary["share_incorrect_size_correct"], summary["share_copy_errors"]) == (1.0, 0.0)
    outcomes = {(r["participant_id"], r["task_id"]): r for r in tables["out_harc__task_outcomes"].iter_rows(named=True)}
    b1, b2 = outcomes[(pid("B"), TASK1)], outcomes[(pid("B"), TASK2)]
    # rows are 3 s apart: task 1 has 13 rows (36 s, 1 attempt), task 2 12 rows (33 s, 2 attempts); no gap
    # reaches 5 s, so thinking time is 0
    assert (b1["task_duration_s"], b1["time_per_attempt_s"], b1["thinking_time_s"]) == (36, 36, 0)
    assert (b2["task_duration_s"], b2["time_per_attempt_s"], b2["n_attempts_used"]) == (33, 16.5, 2)
    assert (b1["first_change_action"], b2["first_change_action"]) == ("copy_from_input", "change_height")
    firsts = tables["out_harc__first_actions"].filter(pl.col("attempt_number") == 2)
    assert firsts.select("first_change_action", "n_first_changes").rows() == [("floodfill", 4)]


def test_tests_without_a_training_split_are_empty_not_errors(analysed):
    *_, tables = analysed
    tests = tables["out_harc__statistical_tests"]
    t = tests.filter(pl.col("test_id") == "time_per_attempt_s:training_vs_evaluation").row(0, named=True)
    assert (t["n_1"], t["n_2"], t["statistic"]) == (0, 9, None)
    model = tables["out_harc__learning_model"]
    assert model["coefficient"].to_list() == [None, None]  # everybody solved everything: nothing to fit


def test_rerun_is_identical_and_other_releases_are_untouched(analysed, tmp_path):
    db, _, _, tables = analysed
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    res = invoke("harc-analyses", "--db", str(copy), "--out", str(tmp_path / "o"), "--simulations", "200",
                 "--seed", "5", "--no-figures")
    assert res.exit_code == 0, res.output
    with Workspace(copy, read_only=True) as ws:
        for name in ANALYSIS_TABLES:
            key = ", ".join(TABLES[name].primary_key)
            assert ws.read(f"SELECT * FROM {name} ORDER BY {key}").equals(
                tables[name].sort(list(TABLES[name].primary_key))), name
    res = invoke("harc-analyses", "--db", str(copy), "--release", "2024")
    assert res.exit_code == 1 and "not in the database" in res.output


def test_harc_graph_exports_json_and_figure(analysed, tmp_path):
    db, *_ = analysed
    res = invoke("harc-graph", TASK2, "--db", str(db), "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / f"{TASK2}.graph.json").read_text())
    kinds = {n["grid"]: n["kind"] for n in doc["nodes"]}
    assert kinds["|000|000|000|"] == "start" and kinds["|55|55|"] == "correct" and kinds["|00|00|"] == "incorrect"
    assert doc["answer_grid"] == "|55|55|" and doc["answer_source"] == "arc_task_file"
    assert doc["n_traces"] == 4
    assert {p.suffix for p in tmp_path.glob(f"{TASK2}_state_graph.*")} == {".png", ".svg", ".json"}
    assert invoke("harc-graph", "nosuchtask", "--db", str(db), "--out", str(tmp_path)).exit_code == 1


def test_load_actions_sorts_like_order_by_however_the_rows_are_stored(replayed, tmp_path):
    """load_actions sorts in polars only when needed; the frame equals DuckDB's ORDER BY in both cases."""
    from pipeline.harc.build import load_actions

    db, *_ = replayed
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    with Workspace(copy) as ws:
        release = ws.read("SELECT DISTINCT release_generation FROM core_harc__actions")["release_generation"][0]
        cols = "participant_id, task_id, action_number, action, test_output_grid"
        expected = ws.read(f"SELECT {cols} FROM core_harc__actions WHERE release_generation = ? "
                           "ORDER BY participant_id, task_id, action_number", [release])
        assert load_actions(ws, release, cols.split(", ")).equals(expected)
        # Stored in reverse order: the rows come back sorted all the same.
        ws.con.execute("CREATE TABLE _shuffled AS SELECT * FROM core_harc__actions ORDER BY action_number DESC, "
                       "participant_id DESC")
        ws.con.execute("DELETE FROM core_harc__actions")
        ws.con.execute("INSERT INTO core_harc__actions SELECT * FROM _shuffled")
        stored = ws.read(f"SELECT {cols} FROM core_harc__actions WHERE release_generation = ?", [release])
        assert not stored.equals(expected)
        assert load_actions(ws, release, cols.split(", ")).equals(expected)
        assert load_actions(ws, release, ["action", "test_output_grid"]).equals(
            expected.select("action", "test_output_grid"))
