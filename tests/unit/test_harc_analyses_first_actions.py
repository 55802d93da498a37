"""First grid change per attempt, accuracy by position and the learning GEE, by hand."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from pipeline.harc import accuracy, first_actions, learning
from tests.unit.test_harc_analyses_accuracy import ev, frame

Z = "|000|000|000|"


def first_change_study() -> pl.DataFrame:
    # P: attempt 1 starts with a tool change (no grid change) then a resize; attempt 2 edits; attempt 3
    # resubmits the same grid (pre-block), so it changes nothing; a stray edit at attempt 4 is not an attempt.
    p = [(1, "reset_grid", 1, Z), (2, "change_tool", 1, Z), (3, "change_height", 1, "|000|000|"),
         (4, "edit", 1, "|100|000|"), (5, "write_first_description", 1, "|100|000|"), (6, "submit", 1, "|100|000|"),
         (7, "edit", 2, "|110|000|"), (8, "submit", 2, "|110|000|"), (9, "submit", 3, "|110|000|"),
         (10, "edit", 4, "|111|000|"), (11, "write_last_description", 4, "|111|000|")]
    # Q: copies the input first and solves at once.
    q = [(1, "reset_grid", 1, Z), (2, "copy_from_input", 1, "|12|"), (3, "write_first_description", 1, "|12|"),
         (4, "submit", 1, "|12|"), (5, "no_last_description", 1, "|12|")]
    rows = [ev("P", "T", n, a, att, grid=g) for n, a, att, g in p]
    rows += [ev("Q", "T", n, a, att, grid=g, solved=n >= 4) for n, a, att, g in q]
    return frame(rows)


def test_first_change_of_each_attempt():
    actions = first_change_study()
    outcomes = accuracy.participant_task_outcomes(accuracy.summary_attempts(actions))
    changes = first_actions.first_changes(actions, outcomes)
    assert changes.select("participant_id", "attempt_number", "first_change_action").rows() == [
        ("P", 1, "change_height"), ("P", 2, "edit"), ("P", 3, "none"), ("Q", 1, "copy_from_input")]
    table = first_actions.first_action_table(changes)
    assert table.select("attempt_number", "first_change_action", "n_first_changes", "share_of_attempts").rows() == [
        (1, "change_height", 1, 0.5), (1, "copy_from_input", 1, 0.5), (2, "edit", 1, 1.0), (3, "none", 1, 1.0)]
    assert first_actions.resize_share(changes)["share_resize"].to_list() == [0.5]


def learning_outcomes() -> pl.DataFrame:
    # four participants, two positions: position 1 solved by 1 of 4, position 2 by 3 of 4
    solved = {("P1", 1): True, ("P1", 2): True, ("P2", 1): False, ("P2", 2): True,
              ("P3", 1): False, ("P3", 2): True, ("P4", 1): False, ("P4", 2): False}
    return pl.DataFrame([{"participant_id": p, "task_id": f"T{n}{p}", "task_split": "training", "task_number": n,
                          "is_solved": s} for (p, n), s in solved.items()])


def test_position_accuracy():
    table = learning.position_accuracy(learning_outcomes())
    assert table.select("task_number", "n_participants", "n_solvers", "solve_rate").rows() == [
        (1, 4, 1, 0.25), (2, 4, 3, 0.75)]


def test_gee_on_a_saturated_design_matches_the_hand_solution():
    # Two positions make the logit model saturated: the fit reproduces the observed shares, so
    # slope = logit(3/4) - logit(1/4) = ln 9 and intercept = logit(1/4) - slope = -ln 27.
    # Robust variance of the slope (delta method with cluster sums): residuals e = y - p, p q = 3/16 at both
    # positions; per participant (e1 - e2) / (3/16) = +-8/3; variance = 4 (8/3)^2 / 4^2 = 16/9 -> SE 4/3.
    table = learning.learning_model(learning_outcomes())
    rows = {r["model_term"]: r for r in table.iter_rows(named=True)}
    slope, intercept = rows["task_number"], rows["Intercept"]
    assert slope["coefficient"] == pytest.approx(math.log(9), abs=1e-6)
    assert intercept["coefficient"] == pytest.approx(-math.log(27), abs=1e-6)
    assert slope["odds_ratio"] == pytest.approx(9, abs=1e-5)
    assert slope["std_error"] == pytest.approx(4 / 3, abs=1e-6)
    assert slope["z_value"] == pytest.approx(math.log(9) / (4 / 3), abs=1e-6)
    assert slope["p_value"] == pytest.approx(math.erfc(abs(slope["z_value"]) / math.sqrt(2)), abs=1e-9)
    assert (slope["ci_low"], slope["ci_high"]) == pytest.approx(
        (math.log(9) - 1.959964 * 4 / 3, math.log(9) + 1.959964 * 4 / 3), abs=1e-5)
    assert (slope["n_observations"], slope["n_groups"], slope["model_kind"]) == (8, 4, learning.MODEL_KIND)


def test_no_variation_gives_null_estimates_not_an_error():
    constant = learning_outcomes().with_columns(pl.lit(True).alias("is_solved"))
    table = learning.learning_model(constant)
    assert table["coefficient"].to_list() == [None, None]
    assert table["n_observations"].to_list() == [8, 8]
    assert learning.fit_gee(np.array([1, 0]), np.array([1, 2]), np.array(["a", "a"])) is None
