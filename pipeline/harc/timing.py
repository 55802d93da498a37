"""Time measures of H-ARC participant-tasks (study-protocol.md §4, "Time").

Times are the participant's local clock at 1-second resolution; only differences within a task are used, in
action_number order. A task whose clock goes back between two consecutive events (flag time_not_monotonic)
gets no time measures at all (null), because any of them could be off by the clock change.

Per finished participant-task:

- task_duration_s: last event minus first event (the task-start reset_grid is the first event);
- time_per_attempt_s: task_duration_s / n_attempts_used, the paper's "time per task normalised by attempts";
- time_to_first_action_s: the gap between the task-start reset_grid row and the next event (the participant's
  first logged action of any kind);
- thinking_time_s (solved tasks only): the sum of inter-event gaps of at least `threshold_s` (5 s) over the
  events up to and including the correct submit, leaving out every gap that *ends* on a writing or submission
  row (write_first_description, submit, write_last_description, no_last_description, write_description). The
  first Submit click is not logged (it opens the description box), so the gap before write_first_description
  holds the writing time, and the submit row follows it in the same second; gaps after a wrong submit are
  kept (feedback, then thinking). thinking_time_per_attempt_s divides by solved_at_attempt.

Training vs evaluation comparisons are pooled-variance t-tests over participant-tasks (pipeline/harc/stats.py).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.harc import stats
from pipeline.harc.accuracy import PT, analysis_actions
from schemas.vocabulary import HARC_SPLITS, HARC_TERMINAL_ACTIONS

THINKING_THRESHOLD_S = 5.0
WRITING_ACTIONS = ("write_first_description", "submit", *HARC_TERMINAL_ACTIONS)
MEASURES = ("task_duration_s", "time_per_attempt_s", "time_to_first_action_s", "thinking_time_s",
            "thinking_time_per_attempt_s")
TESTED = (
    ("time_per_attempt_s", "time per task normalised by attempts (seconds)"),
    ("time_to_first_action_s", "time from the task-start reset to the first action (seconds)"),
    ("thinking_time_per_attempt_s", "thinking time (gaps >= threshold, writing excluded) per attempt on "
                                    "solved tasks (seconds)"),
)


def task_times(actions: pl.DataFrame, outcomes: pl.DataFrame,
               threshold_s: float = THINKING_THRESHOLD_S) -> pl.DataFrame:
    """participant_id, task_id and the five measures for every row of `outcomes` (finished participant-tasks
    with n_attempts_used and solved_at_attempt)."""
    rows = (analysis_actions(actions).join(outcomes.select(PT), on=list(PT), how="semi")
            .select(*PT, "action_number", "action", "occurred_at", "is_solved")
            .sort(*PT, "action_number")
            .with_columns((pl.col("occurred_at") - pl.col("occurred_at").shift(1)).over(list(PT))
                          .dt.total_seconds().cast(pl.Float64).alias("gap_s"),
                          pl.int_range(pl.len()).over(list(PT)).alias("position")))
    correct = (rows.filter((pl.col("action") == "submit") & pl.col("is_solved"))
               .group_by(PT).agg(pl.col("action_number").min().alias("correct_submit")))
    rows = rows.join(correct, on=list(PT), how="left")
    thinking_gap = (pl.col("gap_s") >= threshold_s) & ~pl.col("action").is_in(WRITING_ACTIONS) \
        & (pl.col("action_number") <= pl.col("correct_submit"))
    per_task = rows.group_by(PT).agg(
        (pl.col("gap_s") < 0).any().alias("clock_back"),
        pl.col("gap_s").sum().alias("task_duration_s"),
        pl.col("gap_s").filter((pl.col("position") == 1) & (pl.col("action").first() == "reset_grid"))
        .first().alias("time_to_first_action_s"),
        pl.col("gap_s").filter(thinking_gap).sum().alias("thinking_time_s"),
        pl.col("correct_submit").first().is_not_null().alias("has_correct_submit"),
    )
    ok = ~pl.col("clock_back")
    return (outcomes.select(*PT, "n_attempts_used", "solved_at_attempt")
            .join(per_task, on=list(PT), how="left")
            .with_columns(pl.when(ok).then(pl.col("task_duration_s")).alias("task_duration_s"),
                          pl.when(ok).then(pl.col("time_to_first_action_s")).alias("time_to_first_action_s"),
                          pl.when(ok & pl.col("has_correct_submit") & pl.col("solved_at_attempt").is_not_null())
                          .then(pl.col("thinking_time_s")).alias("thinking_time_s"))
            .with_columns((pl.col("task_duration_s") / pl.col("n_attempts_used")).alias("time_per_attempt_s"),
                          (pl.col("thinking_time_s") / pl.col("solved_at_attempt"))
                          .alias("thinking_time_per_attempt_s"))
            .select(*PT, *MEASURES)
            .sort(*PT))


def time_summary(outcomes: pl.DataFrame) -> pl.DataFrame:
    """Per split and measure: n, mean, median, sample SD, quartiles (seconds) of the non-null values."""
    frames = []
    for measure in MEASURES:
        v = pl.col(measure).drop_nulls()
        frames.append(outcomes.group_by("task_split").agg(
            pl.lit(measure).alias("time_measure"), v.len().cast(pl.Int64).alias("n_values"),
            v.mean().alias("mean_s"), v.median().alias("median_s"), v.std().alias("sd_s"),
            v.quantile(0.25, "linear").alias("p25_s"), v.quantile(0.75, "linear").alias("p75_s")))
    return pl.concat(frames).sort("task_split", "time_measure")


def _split_t_test(test_id: str, description: str, frame: pl.DataFrame, column: str,
                  confidence: float) -> dict[str, Any]:
    """Training vs evaluation t-test (group_1 = training) of one column's non-null values."""
    training, evaluation = HARC_SPLITS
    values = {s: frame.filter(pl.col("task_split") == s)[column].drop_nulls().to_list() for s in HARC_SPLITS}
    return stats.t_test(test_id, description, training, evaluation, values[training], values[evaluation],
                        confidence)


def time_tests(outcomes: pl.DataFrame, confidence: float = stats.CONFIDENCE) -> list[dict[str, Any]]:
    """Training vs evaluation t-tests (group_1 = training) for each tested measure."""
    return [_split_t_test(f"{measure}:training_vs_evaluation",
                          f"training vs evaluation participant-tasks: {words}", outcomes, measure, confidence)
            for measure, words in TESTED]


def answer_size_test(errors: pl.DataFrame, confidence: float = stats.CONFIDENCE) -> dict[str, Any]:
    """Training vs evaluation t-test on the correct output's size in cells, over tasks with a known answer."""
    cells = errors.filter(pl.col("answer_height").is_not_null()).with_columns(
        (pl.col("answer_height") * pl.col("answer_width")).alias("cells"))
    return _split_t_test("answer_cells:training_vs_evaluation",
                         "training vs evaluation tasks: cells of the correct output (height x width)", cells,
                         "cells", confidence)
