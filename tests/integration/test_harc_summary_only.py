"""`arcstudy harc-analyses` and `replay-harc` on an H-ARC release without data.csv: summary_data.csv and
incorrect_submissions.csv (the release's exact column layouts, formats.md §D.3-D.4) and ARC task JSON only.

Expected values are recomputed here from the CSV rows and the task JSON with plain Python, not with the
pipeline's functions. A second study checks that the summary files give the same accuracy and error tables as
data.csv itself: the summary and incorrect submissions are derived from the event log of test_harc_pipeline
with the simulator's get_summary (an implementation on the CSV text, separate from pipeline/harc/).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace
from pipeline.harc.build import ANALYSIS_TABLES
from pipeline.harc.published import FACTS
from pipeline.simulate.harc import get_summary, incorrect_submissions
from schemas import TABLES
from tests.fixtures import harc as fx
from tests.integration import test_harc_pipeline as events_study

ERROR_COLUMNS = ["task_name", "task_type", "test_output_grid", "count"]
ARC = {
    "aa000011": {"train": [{"input": [[1, 0], [0, 1]], "output": [[0, 1], [1, 0]]}],
                 "test": [{"input": [[1, 1], [0, 0]], "output": [[0, 0], [1, 1]]}]},
    "aa000012": {"train": [{"input": [[3]], "output": [[3, 3]]}], "test": [{"input": [[4]], "output": [[4, 4]]}]},
    "bb000021": {"train": [{"input": [[5, 0, 0]], "output": [[0, 0, 5]]}],
                 "test": [{"input": [[6, 0, 0]], "output": [[0, 0, 6]]}]},
    "bb000022": {"train": [{"input": [[7, 7], [0, 7]], "output": [[7]]}],
                 "test": [{"input": [[8, 8], [8, 0]], "output": [[8]]}]},
    # bb000023 has no task file: its answer is the grid of a correct submission
}
P1, P2, P3, P4 = ("1" * 32, "2" * 32, "3" * 32, "4" * 32)
# (participant, split, exp_name, complete, task, task_number, [(solved, grid) per attempt])
PLAN = [
    (P1, "training", "expv2", True, "aa000099", 0, [(True, "|1|")]),  # tutorial: left out everywhere
    (P1, "training", "expv2", True, "aa000011", 1, [(True, "|00|11|")]),
    (P1, "training", "expv2", True, "aa000012", 2, [(False, "|4|"), (True, "|44|")]),
    (P2, "training", "expv3", False, "aa000012", 1, [(False, "|43|"), (False, "|43|"), (False, "|34|")]),
    (P2, "training", "expv3", False, "aa000011", 2, [(True, "|00|11|")]),
    (P3, "evaluation", "expv4", True, "bb000021", 1, [(True, "|006|")]),
    (P3, "evaluation", "expv4", True, "bb000022", 2, [(False, "|88|80|"), (False, "|9|"), (True, "|8|")]),
    (P3, "evaluation", "expv4", True, "bb000023", 3, [(True, "|12|")]),
    (P4, "evaluation", "expv4", False, "bb000021", 1, [(False, "|600|"), (True, "|006|")]),
    (P4, "evaluation", "expv4", False, "bb000022", 2, [(True, "|9|")]),  # `solved` disagrees with the answer
    (P4, "evaluation", "expv4", False, "bb000023", 3, [(False, "|21|"), (False, "|11|"), (False, "|22|")]),
]


def invoke(*args: str):
    return CliRunner().invoke(app, ["--plain", *args])


def text(res) -> str:
    """The output with the console's line wrapping undone."""
    return " ".join(res.output.split())


def grid_string(grid: list[list[int]]) -> str:
    return "|" + "|".join("".join(map(str, row)) for row in grid) + "|"


def summary_csv_rows() -> list[dict[str, str]]:
    rows = []
    for participant, split, exp, complete, task, number, attempts in PLAN:
        for attempt, (solved, grid) in enumerate(attempts, start=1):
            rows.append({"exp_name": exp, "task_type": split, "hashed_id": participant,
                         "joint_id_task": f"{participant}_{task}.json", "task_name": f"{task}.json",
                         "task_number": str(number), "attempt_number": str(attempt),
                         "num_actions": str(5 * attempt), "solved": str(solved), "test_output_grid": grid,
                         "first_written_solution": "a rule", "last_written_solution": "" if solved else "another",
                         "complete": str(complete)})
    return rows


def incorrect_csv_rows(summary: list[dict[str, str]]) -> list[dict[str, str]]:
    """As the release derives it (pipeline/simulate/harc.py): the summary's wrong grids per task, counted."""
    counts = Counter((r["task_name"], r["task_type"], r["test_output_grid"]) for r in summary
                     if r["solved"] == "False")
    return [{"task_name": t, "task_type": s, "test_output_grid": g, "count": str(n)}
            for (t, s, g), n in sorted(counts.items())]


def write_release(folder: Path, *, summary: bool = True, incorrect: bool = True) -> Path:
    rows = summary_csv_rows()
    folder.mkdir(parents=True)
    if summary:
        (folder / "summary_data.csv").write_text(fx.csv_text(rows, fx.SUMMARY_COLUMNS), encoding="utf-8")
    if incorrect:
        (folder / "incorrect_submissions.csv").write_text(fx.csv_text(incorrect_csv_rows(rows), ERROR_COLUMNS),
                                                          encoding="utf-8")
    fx.write_task(folder / "challenges.json", ARC)
    return folder


def ingest_and_analyse(root: Path, folder: Path, *extra: str):
    db = root / "study.duckdb"
    res = invoke("ingest", str(folder), "--db", str(db))
    assert res.exit_code == 0, res.output
    res = invoke("harc-analyses", "--db", str(db), "--out", str(root / "out"), "--simulations", "20", *extra)
    tables = {}
    if db.exists():
        with Workspace(db, read_only=True) as ws:
            tables = {name: ws.read(f"SELECT * FROM {name}") for name in ANALYSIS_TABLES}
    return db, res, tables


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = tmp_path_factory.mktemp("harc_summary_only")
    return (root, *ingest_and_analyse(root, write_release(root / "files")))


# ------------------------------------------------------------------------------- expected, by hand from the CSV
def finished_tasks() -> list[tuple]:
    return [p for p in PLAN if p[5] > 0]


def solved_at(attempts: list[tuple[bool, str]]) -> int | None:
    return next((i for i, (solved, _) in enumerate(attempts, start=1) if solved), None)


def expected_task_accuracy() -> dict[tuple[str, int], float]:
    by_task: dict[str, list[int | None]] = defaultdict(list)
    for *_, task, _, attempts in finished_tasks():
        by_task[task].append(solved_at(attempts))
    return {(task, k): sum(1 for s in at if s is not None and s <= k) / len(at)
            for task, at in by_task.items() for k in (1, 2, 3)}


def answer_of(task: str) -> str:
    if task in ARC:
        return grid_string(ARC[task]["test"][0]["output"])
    return next(a[solved_at(a) - 1][1] for p, *_, t, _, a in sorted(finished_tasks()) if t == task and solved_at(a))


def size(grid: str) -> tuple[int, int]:
    pieces = grid.strip("|").split("|")
    return len(pieces), len(pieces[0])


def hamming_share(grid: str, answer: str) -> float:
    a, b = grid.replace("|", ""), answer.replace("|", "")
    return sum(x != y for x, y in zip(a, b, strict=True)) / len(a)


def is_copy(task: str, grid: str) -> bool:
    arc = ARC[task]
    shown = [p["input"] for p in arc["train"]] + [p["output"] for p in arc["train"]] + [arc["test"][0]["input"]]
    return grid in {grid_string(g) for g in shown}


def wrong_submissions() -> list[tuple[str, str, str]]:
    """(split, task, grid) once per wrong attempt = once per count of incorrect_submissions.csv."""
    return [(split, task, grid) for _, split, _, _, task, _, attempts in finished_tasks()
            for solved, grid in attempts if not solved]


# ------------------------------------------------------------------------------------------------------- tests
def test_exits_0_and_names_what_it_skipped(analysed):
    root, _, res, tables = analysed
    assert res.exit_code == 0, res.output
    for analysis in ("timing", "first actions", "visited-state graphs", "Table 2 descriptives", "per-submit rows",
                     "accuracy bounds"):
        assert f"skipped {analysis}: needs data.csv (the event log)" in text(res), analysis
    assert "skipped errors" not in text(res) and "skipped copy errors" not in text(res)
    manifest = json.loads((root / "out" / "manifest.json").read_text())
    assert manifest["notes"]["inputs"] == "summary files"
    skipped = {s["analysis"]: s["needs"] for s in manifest["notes"]["skipped_analyses"]}
    assert skipped["timing"] == "data.csv (the event log)" and "errors" not in skipped
    for name in ("out_harc__task_outcomes", "out_harc__time_summary", "out_harc__first_actions",
                 "out_harc__task_state_graphs", "out_harc__split_descriptives", "out_harc__submissions",
                 "out_harc__accuracy_bounds"):
        assert tables[name].height == 0, name


def test_task_and_split_accuracy_from_the_summary(analysed):
    *_, tables = analysed
    acc = {(t, k): r for t, k, r in tables["out_harc__task_accuracy"].select("task_id", "max_attempts",
                                                                              "solve_rate").rows()}
    assert acc == pytest.approx(expected_task_accuracy())
    assert "aa000099" not in {t for t, _ in acc}  # the tutorial row
    expected = expected_task_accuracy()
    for r in tables["out_harc__split_accuracy"].iter_rows(named=True):
        prefix = "aa" if r["task_split"] == "training" else "bb"
        rates = [v for (t, k), v in expected.items() if t.startswith(prefix) and k == r["max_attempts"]]
        assert r["mean_task_accuracy"] == pytest.approx(sum(rates) / len(rates))
        assert r["n_tasks"] == len(rates)


def test_participant_accuracy_from_the_summary(analysed):
    *_, tables = analysed
    got = {(p, k): (f, s) for p, k, f, s in tables["out_harc__participant_accuracy"].select(
        "participant_id", "max_attempts", "n_tasks_finished", "n_tasks_solved").rows()}
    expected = {}
    for person in (P1, P2, P3, P4):
        mine = [solved_at(a) for p, *_, a in finished_tasks() if p == person]
        for k in (1, 2, 3):
            expected[(person, k)] = (len(mine), sum(1 for s in mine if s is not None and s <= k))
    assert got == expected


def test_errors_from_incorrect_submissions(analysed):
    *_, tables = analysed
    wrong = wrong_submissions()
    solvers = Counter(task for *_, task, _, a in finished_tasks() if solved_at(a))
    errs = {r["task_id"]: r for r in tables["out_harc__task_errors"].iter_rows(named=True)}
    for task in {t for _, t, _ in wrong} | set(solvers):
        mine = [g for _, t, g in wrong if t == task]
        n_submits = len(mine) + solvers[task]
        row = errs[task]
        assert (row["n_submits"], row["n_incorrect_submits"], row["n_unique_incorrect_grids"]) \
            == (n_submits, len(mine), len(set(mine))), task
        assert row["error_divergence"] == pytest.approx(len(set(mine)) / n_submits)
        sized = [hamming_share(g, answer_of(task)) for g in mine if size(g) == size(answer_of(task))]
        assert row["mean_normalized_edit_distance"] == (pytest.approx(sum(sized) / len(sized)) if sized else None)
        assert row["answer_source"] == ("arc_task_file" if task in ARC else "correct_submission")
    summary = {r["task_split"]: r for r in tables["out_harc__error_summary"].iter_rows(named=True)}
    for split in ("training", "evaluation"):
        mine = [(t, g) for s, t, g in wrong if s == split]
        assert summary[split]["n_incorrect_submits"] == len(mine)
        assert summary[split]["share_incorrect_size_correct"] == pytest.approx(
            sum(size(g) == size(answer_of(t)) for t, g in mine) / len(mine))
        with_file = [(t, g) for t, g in mine if t in ARC]
        assert summary[split]["n_incorrect_with_task_file"] == len(with_file)
        assert summary[split]["share_copy_errors"] == pytest.approx(
            sum(is_copy(t, g) for t, g in with_file) / len(with_file))
    tests = set(tables["out_harc__statistical_tests"]["test_id"].to_list())
    assert tests == {"answer_cells:training_vs_evaluation", "error_divergence_vs_solve_rate:training",
                     "error_divergence_vs_solve_rate:evaluation"}  # the time t-tests need data.csv


def test_reproduction_table(analysed):
    _, _, res, tables = analysed
    rows = {(r["metric"], r["task_split"]): r for r in tables["out_harc__reproduction"].iter_rows(named=True)}
    assert set(rows) == {(f.metric, f.task_split) for f in FACTS}
    for fact in FACTS:
        assert rows[(fact.metric, fact.task_split)]["published_value"] == fact.published
    for split in ("training", "evaluation"):
        for metric in ("n_participants", "n_action_rows"):
            r = rows[(metric, split)]
            assert (r["observed_value"], r["is_match"], r["needs_file"]) == (None, None, "data.csv (the event log)")
        mine = [p for p in finished_tasks() if p[1] == split]
        assert rows[("n_attempts", split)]["observed_value"] == sum(len(p[6]) for p in mine)
        assert rows[("max_attempt_number", split)]["observed_value"] == max(len(p[6]) for p in mine)
        assert rows[("max_attempt_number", split)]["is_match"] is True
        tasks = {p[4] for p in mine}
        assert rows[("n_tasks", split)]["observed_value"] == len(tasks)
        assert rows[("n_tasks_solved_by_any", split)]["observed_value"] == len({p[4] for p in mine if solved_at(p[6])})
        k3 = [v for (t, k), v in expected_task_accuracy().items() if t in tasks and k == 3]
        assert rows[("mean_task_accuracy_3", split)]["observed_value"] == pytest.approx(sum(k3) / len(k3))
        assert rows[("n_attempts", split)]["is_match"] is False and rows[("n_attempts", split)]["needs_file"] is None
    disagree = [(t, g, s) for _, split, _, _, t, _, a in finished_tasks() for s, g in a
                if split == "evaluation" and t in ARC and s != (g == answer_of(t))]
    assert rows[("n_solved_label_disagreements", "evaluation")]["observed_value"] == len(disagree) == 1
    assert "n_solved_label_disagreements" in res.output and "published" in res.output


def test_replay_without_events_says_it_needs_data_csv(analysed):
    _, db, *_ = analysed
    res = invoke("replay-harc", "--db", str(db))
    assert res.exit_code == 1
    assert "replay-harc needs data.csv (the event log)" in text(res)
    assert res.output.startswith("error: ") and res.output.count("error") == 1  # one message, no traceback


def test_without_incorrect_submissions_the_errors_are_named(tmp_path):
    _, res, tables = ingest_and_analyse(tmp_path, write_release(tmp_path / "files", incorrect=False), "--no-figures")
    assert res.exit_code == 0, res.output
    assert "skipped errors: needs incorrect_submissions.csv" in text(res)
    assert tables["out_harc__task_errors"].height == 0 and tables["out_harc__task_accuracy"].height > 0


def test_incorrect_submissions_alone_compute_nothing(tmp_path):
    _, res, _ = ingest_and_analyse(tmp_path, write_release(tmp_path / "files", summary=False), "--no-figures")
    assert res.exit_code == 1 and "nothing to compute" in text(res) and "summary_data.csv" in text(res)


# ------------------------------------------------------------------------ the same study with and without data.csv
SAME_TABLES = ("out_harc__task_accuracy", "out_harc__split_accuracy", "out_harc__tasks_by_min_solvers",
               "out_harc__participant_accuracy", "out_harc__position_accuracy", "out_harc__learning_model",
               "out_harc__task_errors", "out_harc__error_summary")


def test_summary_files_give_the_event_logs_results(tmp_path):
    full = tmp_path / "full"
    events_study.write_files(full)
    data = pl.read_csv(full / "data.csv", infer_schema=False)
    summary = get_summary(data)
    files = tmp_path / "summary_only"
    files.mkdir()
    summary.write_csv(files / "summary_data.csv", line_terminator="\n")
    incorrect_submissions(summary, with_md5=False).write_csv(files / "incorrect_submissions.csv",
                                                             line_terminator="\n")
    fx.write_task(files / "challenges.json", events_study.ARC)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, res_full, with_events = ingest_and_analyse(tmp_path / "a", full, "--no-figures")
    _, res_summary, without = ingest_and_analyse(tmp_path / "b", files, "--no-figures")
    assert res_full.exit_code == 0 and res_summary.exit_code == 0, (res_full.output, res_summary.output)
    for name in SAME_TABLES:
        key = list(TABLES[name].primary_key)
        a, b = with_events[name].sort(key), without[name].sort(key)
        assert a.height > 0 and a.equals(b), name
    # with data.csv every observation is there; without it, the event counts name the file
    rep = {r["metric"]: r for r in with_events["out_harc__reproduction"]
           .filter(pl.col("task_split") == "evaluation").iter_rows(named=True)}
    assert rep["n_action_rows"]["observed_value"] == data.height and rep["n_participants"]["observed_value"] == 5
    assert rep["n_attempts"]["observed_value"] == summary.height


def test_harc_report_says_what_needs_data_csv(analysed, tmp_path):
    from pipeline.report.reports import write_reports

    _, db, _, tables = analysed
    written = write_reports(db, tmp_path, which=("harc",))
    page = " ".join(written["harc"].read_text().split())
    assert "Analysed without data.csv" in page and "Published counts beside this data" in page
    shown = pl.read_parquet(tmp_path / "harc__reproduction.parquet").drop("why_not_matching")  # the report's note
    assert shown.equals(tables["out_harc__reproduction"].drop("release_generation").sort("metric", "task_split"))
