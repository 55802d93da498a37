"""Copy errors, grid-dimension errors, normalised edit distance, error divergence and its correlation.

Task X (ARC file): train pairs |12| -> |21| and |3| -> |33|, test input |45|, correct output |55|.
Submissions of task X (one per participant-task, each then finished with a closing row):
    |12| copy of a train input        |21| copy of a train output      |45| copy of the test input
    |5|  wrong size                   |15| one cell off (twice, by two participants)      |55| correct
So 7 submissions, 6 incorrect, 5 distinct incorrect grids: error divergence 5/7; copy errors 3/6;
right size 5/6; edit distances of the right-sized incorrect grids 1, 1, 1/2, 1/2, 1/2 -> mean 0.7.
Task Y has no ARC file: its answer is the correct submission |7|; the wrong |8| has distance 1 and unknown copy
status.
"""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.harc import accuracy, errors, stats
from tests.unit.test_harc_analyses_accuracy import ev, frame

PAIRS = pl.DataFrame({
    "file_id": ["f1"] * 3, "task_id": ["X"] * 3, "pair_split": ["train", "train", "test"], "pair_index": [0, 1, 0],
    "input_grid": ["|12|", "|3|", "|45|"], "output_grid": ["|21|", "|33|", "|55|"],
})
X_SUBMISSIONS = [("A", "|12|"), ("B", "|21|"), ("C", "|45|"), ("D", "|5|"), ("E", "|15|"), ("F", "|15|"),
                 ("G", "|55|")]


def one_submission(participant: str, task: str, grid: str, correct: bool, split: str = "training") -> list[dict]:
    """reset, edit, description, one submit, then the closing row (no_last_description or the attempt-4 row
    after, as if, two more wrong submissions we do not need here)."""
    end = ("no_last_description", 1, True) if correct else ("write_last_description", 4, False)
    return [ev(participant, task, 1, "reset_grid", grid="|000|000|000|", split=split),
            ev(participant, task, 2, "edit", grid=grid, split=split),
            ev(participant, task, 3, "write_first_description", grid=grid, split=split),
            ev(participant, task, 4, "submit", grid=grid, solved=correct, split=split),
            ev(participant, task, 5, end[0], end[1], grid=grid, solved=end[2], split=split)]


@pytest.fixture(scope="module")
def result():
    rows = []
    for participant, grid in X_SUBMISSIONS:
        rows += one_submission(participant, "X", grid, grid == "|55|")
    rows += one_submission("A", "Y", "|7|", True) + one_submission("B", "Y", "|8|", False)
    actions = frame(rows)
    outcomes = accuracy.participant_task_outcomes(accuracy.summary_attempts(actions))
    truth = errors.task_truth(PAIRS)
    subs = errors.submissions(actions, outcomes.select(accuracy.PT), truth)
    task_acc = accuracy.task_accuracy(outcomes)
    task_errors = errors.task_errors(subs, task_acc, errors.answers(truth, subs))
    return subs, task_errors


def test_normalized_edit_distance():
    assert errors.normalized_edit_distance("|123|456|", "|123|450|") == pytest.approx(1 / 6)
    assert errors.normalized_edit_distance("|12|", "|12|") == 0
    assert errors.normalized_edit_distance("|12|", "|1|2|") is None  # 1x2 vs 2x1: sizes differ
    assert errors.grid_shape("|0800|0800|8000|") == (3, 4)


def test_copy_errors_sizes_and_distances(result):
    subs, _ = result
    x = {r["participant_id"]: r for r in subs.filter(pl.col("task_id") == "X").iter_rows(named=True)}
    flags = {p: (r["is_copy_of_train_input"], r["is_copy_of_train_output"], r["is_copy_of_test_input"],
                 r["is_copy_error"]) for p, r in x.items()}
    assert flags == {"A": (True, False, False, True), "B": (False, True, False, True),
                     "C": (False, False, True, True), "D": (False, False, False, False),
                     "E": (False, False, False, False), "F": (False, False, False, False),
                     "G": (False, False, False, None)}  # a correct grid is not an error at all
    assert {p: r["is_size_correct"] for p, r in x.items()} == {p: p != "D" for p in x}
    distances = {p: r["normalized_edit_distance"] for p, r in x.items()}
    assert distances == {"A": 1.0, "B": 1.0, "C": 0.5, "D": None, "E": 0.5, "F": 0.5, "G": 0.0}
    assert {r["answer_source"] for r in x.values()} == {"arc_task_file"}
    assert (x["D"]["grid_height"], x["D"]["grid_width"]) == (1, 1)


def test_answer_from_a_correct_submission_without_the_task_file(result):
    subs, task_errors = result
    y = {r["participant_id"]: r for r in subs.filter(pl.col("task_id") == "Y").iter_rows(named=True)}
    assert {r["answer_source"] for r in y.values()} == {"correct_submission"}
    assert y["B"]["normalized_edit_distance"] == 1.0 and y["B"]["is_size_correct"] is True
    assert y["B"]["is_copy_error"] is None and y["B"]["is_copy_of_test_input"] is None
    row = task_errors.filter(pl.col("task_id") == "Y").row(0, named=True)
    assert (row["answer_height"], row["answer_width"], row["error_divergence"]) == (1, 1, 0.5)


def test_error_divergence_per_task(result):
    _, task_errors = result
    x = task_errors.filter(pl.col("task_id") == "X").row(0, named=True)
    assert (x["n_submits"], x["n_incorrect_submits"], x["n_unique_incorrect_grids"]) == (7, 6, 5)
    assert x["error_divergence"] == pytest.approx(5 / 7)
    assert x["solve_rate"] == pytest.approx(1 / 7)
    assert x["mean_normalized_edit_distance"] == pytest.approx(0.7)
    assert (x["answer_height"], x["answer_width"]) == (1, 2)


def test_error_summary_shares(result):
    subs, _ = result
    summary = errors.error_summary(subs).row(0, named=True)
    # X's 6 incorrect plus Y's |8|: 7 incorrect of 9 submissions; Y has no task file
    assert (summary["n_submits"], summary["n_incorrect_submits"], summary["n_incorrect_with_task_file"]) == (9, 7, 6)
    assert summary["share_incorrect_size_correct"] == pytest.approx(6 / 7)
    assert summary["share_copy_errors"] == pytest.approx(3 / 6)
    assert summary["share_copy_train_input"] == pytest.approx(1 / 6)
    assert summary["share_copy_train_output"] == pytest.approx(1 / 6)
    assert summary["share_copy_test_input"] == pytest.approx(1 / 6)
    assert summary["mean_normalized_edit_distance"] == pytest.approx((1 + 1 + 0.5 + 0.5 + 0.5 + 1) / 6)


def test_divergence_correlation_by_hand():
    # x = 0.1..0.4, y = 0.9, 0.7, 0.8, 0.2: sum dxdy = -0.1, sum dx2 = 0.05, sum dy2 = 0.29
    table = pl.DataFrame({"task_split": "training", "error_divergence": [0.1, 0.2, 0.3, 0.4],
                          "solve_rate": [0.9, 0.7, 0.8, 0.2]})
    (row,) = errors.divergence_correlations(table)
    r = -0.1 / math.sqrt(0.05 * 0.29)
    assert row["statistic"] == pytest.approx(r) == pytest.approx(-0.830455, abs=1e-6)
    assert row["degrees_of_freedom"] == 2 and row["n_1"] == row["n_2"] == 4
    assert row["p_value"] == pytest.approx(1 - abs(r))  # with 2 degrees of freedom, p = 1 - |r|
    z, half = math.atanh(r), 1.959964 / math.sqrt(4 - 3)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((math.tanh(z - half), math.tanh(z + half)), abs=1e-5)
    assert row["test_id"] == "error_divergence_vs_solve_rate:training" and row["effect_size"] == row["statistic"]


def test_too_few_tasks_for_a_correlation_gives_null_statistics():
    row = stats.pearson("t", "d", "x", "y", [0.1, 0.2], [0.3, 0.1])
    assert row["statistic"] is None and row["n_1"] == 2 and row["mean_1"] == pytest.approx(0.15)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.data())
def test_normalized_edit_distance_is_the_share_of_differing_cells(height, width, data):
    cells = st.lists(st.lists(st.integers(0, 9), min_size=width, max_size=width), min_size=height, max_size=height)
    grid, answer = data.draw(cells), data.draw(cells)
    text = lambda g: "|" + "|".join("".join(map(str, row)) for row in g) + "|"  # noqa: E731
    differing = sum(a != b for row_a, row_b in zip(grid, answer, strict=True)
                    for a, b in zip(row_a, row_b, strict=True))
    assert errors.normalized_edit_distance(text(grid), text(answer)) == differing / (height * width)
