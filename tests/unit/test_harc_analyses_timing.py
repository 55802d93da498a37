"""Time measures (thinking time in particular) and the training vs evaluation t-test, by hand.

Task S (solved at attempt 2), events with their clock (seconds from the task start) and the gap before each:

    n  action                    t    gap   thinking?
    1  reset_grid                0     -
    2  change_height            12    12    yes (>= 5 s)
    3  edit                     14     2    no (< 5 s)
    4  edit                     20     6    yes
    5  write_first_description  80    60    no: ends on a writing row (the description was being typed)
    6  submit (wrong)           80     0    no
    7  edit (attempt 2)         95    15    yes: thinking after the feedback
    8  submit (correct)        100     5    no: ends on a submission row
    9  no_last_description     130    30    no: after the correct submit

thinking_time_s = 12 + 6 + 15 = 33, per attempt 33 / 2 = 16.5; duration 130 s, per attempt 65 s; time to the
first action 12 s.
"""

from __future__ import annotations

import math

import polars as pl
import pytest
from scipy import stats as scipy_stats

from pipeline.harc import accuracy, stats, timing
from tests.unit.test_harc_analyses_accuracy import ev, frame

SOLVED = [(1, "reset_grid", 1, 0, False), (2, "change_height", 1, 12, False), (3, "edit", 1, 14, False),
          (4, "edit", 1, 20, False), (5, "write_first_description", 1, 80, False), (6, "submit", 1, 80, False),
          (7, "edit", 2, 95, False), (8, "submit", 2, 100, True), (9, "no_last_description", 2, 130, True)]
# Unsolved: three wrong submissions; no thinking time.
UNSOLVED = [(1, "reset_grid", 1, 0, False), (2, "edit", 1, 30, False), (3, "write_first_description", 1, 90, False),
            (4, "submit", 1, 90, False), (5, "submit", 2, 99, False), (6, "submit", 3, 120, False),
            (7, "write_last_description", 4, 150, False)]
# Solved at once, but the participant's clock went back an hour at event 3: no time measures at all.
CLOCK_BACK = [(1, "reset_grid", 1, 0, False), (2, "edit", 1, 10, False), (3, "write_first_description", 1, -3600, False),
              (4, "submit", 1, -3600, True), (5, "no_last_description", 1, -3599, True)]


def events(participant: str, task: str, spec: list[tuple]) -> list[dict]:
    return [ev(participant, task, n, action, attempt, t=t, solved=solved) for n, action, attempt, t, solved in spec]


@pytest.fixture(scope="module")
def times() -> dict[str, dict]:
    actions = frame(events("P", "S", SOLVED) + events("P", "U", UNSOLVED) + events("P", "C", CLOCK_BACK))
    outcomes = accuracy.participant_task_outcomes(accuracy.summary_attempts(actions))
    table = timing.task_times(actions, outcomes)
    return {r["task_id"]: r for r in table.iter_rows(named=True)}


def test_thinking_time_by_hand(times):
    s = times["S"]
    assert s["thinking_time_s"] == 33
    assert s["thinking_time_per_attempt_s"] == 16.5
    assert (s["task_duration_s"], s["time_per_attempt_s"], s["time_to_first_action_s"]) == (130, 65, 12)


def test_unsolved_tasks_have_no_thinking_time(times):
    u = times["U"]
    assert u["thinking_time_s"] is None and u["thinking_time_per_attempt_s"] is None
    assert (u["task_duration_s"], u["time_per_attempt_s"], u["time_to_first_action_s"]) == (150, 50, 30)


def test_a_clock_that_goes_back_voids_every_measure(times):
    assert all(times["C"][m] is None for m in timing.MEASURES)


def test_threshold_is_a_parameter():
    actions = frame(events("P", "S", SOLVED))
    outcomes = accuracy.participant_task_outcomes(accuracy.summary_attempts(actions))
    # with a 13 s threshold only the 15 s gap counts
    assert timing.task_times(actions, outcomes, threshold_s=13)["thinking_time_s"].to_list() == [15]


def test_pooled_t_test_by_hand():
    # training 1, 2, 3, 4 (mean 2.5, var 5/3); evaluation 2, 3, 4, 5, 6 (mean 4, var 5/2)
    row = stats.t_test("m", "d", "training", "evaluation", [1, 2, 3, 4], [2, 3, 4, 5, 6])
    pooled = (3 * 5 / 3 + 4 * 5 / 2) / 7  # 15/7
    se = math.sqrt(pooled * (1 / 4 + 1 / 5))
    t = (2.5 - 4) / se
    assert row["statistic"] == pytest.approx(t) == pytest.approx(-1.527525, abs=1e-6)
    assert row["degrees_of_freedom"] == 7
    assert row["p_value"] == pytest.approx(2 * scipy_stats.t.sf(abs(t), 7))
    assert row["effect_size"] == pytest.approx(-1.5 / math.sqrt(pooled)) == pytest.approx(-1.024695, abs=1e-6)
    crit = scipy_stats.t.ppf(0.975, 7)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((-1.5 - crit * se, -1.5 + crit * se))
    assert (row["n_1"], row["n_2"], row["mean_1"], row["mean_2"]) == (4, 5, 2.5, 4)


def test_time_tests_compare_training_with_evaluation():
    outcomes = pl.DataFrame({
        "task_split": ["training"] * 4 + ["evaluation"] * 5,
        "time_per_attempt_s": [1.0, 2, 3, 4, 2, 3, 4, 5, 6],
        "time_to_first_action_s": [None, 1.0, 1, 1, 2, 2, 2, 2, 2],
        "thinking_time_per_attempt_s": [None] * 9,
    }, schema_overrides={"thinking_time_per_attempt_s": pl.Float64})
    rows = {r["test_id"]: r for r in timing.time_tests(outcomes)}
    assert rows["time_per_attempt_s:training_vs_evaluation"]["statistic"] == pytest.approx(-1.527525, abs=1e-6)
    # no variance in either group: counts and means, but no statistic
    first = rows["time_to_first_action_s:training_vs_evaluation"]
    assert (first["n_1"], first["n_2"], first["statistic"]) == (3, 5, None)
    assert rows["thinking_time_per_attempt_s:training_vs_evaluation"]["n_1"] == 0


def test_time_summary():
    outcomes = pl.DataFrame({"task_split": "training", **{m: [10.0, 20.0, 60.0] for m in timing.MEASURES}})
    row = timing.time_summary(outcomes).filter(pl.col("time_measure") == "thinking_time_s").row(0, named=True)
    assert (row["n_values"], row["mean_s"], row["median_s"], row["p25_s"], row["p75_s"]) == (3, 30, 20, 15, 40)
    assert row["sd_s"] == pytest.approx(math.sqrt(((20 ** 2) + (10 ** 2) + (30 ** 2)) / 2))
