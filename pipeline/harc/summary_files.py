"""The analyses that summary_data.csv and incorrect_submissions.csv allow without data.csv (the event log).

summary_data.csv is the authors' get_summary of data.csv (formats.md §D.8): one row per finished
participant-task-attempt with the attempt's grid and `solved`. It is exactly what accuracy.summary_attempts
computes from the events, so k-attempt accuracy per task and per participant, Figures 5 and 6, accuracy by
task position and the learning model come out the same from either file. Two differences:

- participants who finished no task have no summary row: out_harc__participant_accuracy lacks them (a caveat
  in the run's output; their share of tasks solved is undefined anyway) and the bounds, which impute their
  tasks, are skipped;
- incorrect_submissions.csv has one row per task x distinct wrong grid with its count and no participant, so
  the error analyses count each wrong grid `count` times and take the correct submissions from the summary
  (one per solved participant-task): grid-size errors, edit distance, copy errors (with the ARC task files)
  and error divergence = distinct wrong grids / (wrong + correct submissions).

Everything that needs the event rows (times, first grid changes, visited states, Table 2, per-submit rows) is
named in SKIPPED_WITHOUT_EVENTS with the file it needs.
"""

from __future__ import annotations

import polars as pl

from pipeline.harc.published import ARC_TASKS, DATA_CSV, INCORRECT_CSV

ATTEMPT_COLUMNS = ("participant_id", "task_id", "exp_name", "task_split", "task_number", "is_complete",
                   "attempt_number", "is_solved", "test_output_grid", "flags")
INCORRECT_COLUMNS = ("task_id", "task_split", "test_output_grid", "n_submissions")

# (analysis, the out tables it fills, the file it needs) for what data.csv alone gives.
SKIPPED_WITHOUT_EVENTS: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("accuracy bounds", ("out_harc__accuracy_bounds",), DATA_CSV,
     "the bounds impute the tasks of participants who finished fewer than assigned, and those who finished none "
     "have no summary_data.csv row"),
    ("timing", ("out_harc__task_outcomes", "out_harc__time_summary", "out_harc__statistical_tests (time t-tests)"),
     DATA_CSV, ""),
    ("first actions", ("out_harc__first_actions",), DATA_CSV, ""),
    ("visited-state graphs", ("out_harc__task_state_graphs",), DATA_CSV, ""),
    ("Table 2 descriptives", ("out_harc__split_descriptives",), DATA_CSV, ""),
    ("per-submit rows", ("out_harc__submissions",), DATA_CSV, ""),
)
SKIPPED_WITHOUT_INCORRECT = ("errors", ("out_harc__task_errors", "out_harc__error_summary",
                                        "out_harc__statistical_tests (error divergence, answer size)"),
                             INCORRECT_CSV, "")
SKIPPED_WITHOUT_TASK_FILES = ("copy errors", ("out_harc__error_summary (share_copy_*)",), ARC_TASKS, "")
PARTICIPANT_CAVEAT = ("per-participant accuracy: participants who finished no task have no summary_data.csv row, "
                      "so out_harc__participant_accuracy has rows only for those who finished one (data.csv has "
                      "the others)")


def summary_rows(attempts: pl.DataFrame) -> pl.DataFrame:
    """core_harc__attempts rows without the tutorial's, attempt numbers as the file gives them."""
    return (attempts.filter((pl.col("task_number") > 0) & ~pl.col("flags").list.contains("tutorial"))
            .drop("flags").sort("participant_id", "task_id", "attempt_number"))


def recoded(summary: pl.DataFrame) -> pl.DataFrame:
    """The frame accuracy.summary_attempts makes from events: attempt 4 (should a file have one) counted as 3."""
    return summary.with_columns(pl.when(pl.col("attempt_number") == 4).then(3).otherwise(pl.col("attempt_number"))
                                .alias("attempt_number"))


def summary_people_rows(summary: pl.DataFrame) -> pl.DataFrame:
    """The summary as the event-like frame accuracy.participants reads (every row a non-tutorial task's)."""
    return summary.with_columns(pl.lit(False).alias("is_tutorial"))


def pseudo_submissions(summary: pl.DataFrame, incorrect: pl.DataFrame) -> pl.DataFrame:
    """One row per submission the two files imply: each wrong grid of incorrect_submissions.csv `n_submissions`
    times, and the correct submission of every solved participant-task of the summary (task_id, task_split,
    is_solved, test_output_grid)."""
    wrong = (incorrect.select("task_id", "task_split", "test_output_grid",
                              pl.col("n_submissions").cast(pl.Int64))
             .sort("task_id", "test_output_grid")
             .with_columns(pl.int_ranges(0, pl.col("n_submissions")).alias("__copy"))
             .explode("__copy")
             .select("task_id", "task_split", pl.lit(False).alias("is_solved"), "test_output_grid"))
    correct = (summary.filter(pl.col("is_solved")).sort("participant_id", "task_id", "attempt_number")
               .group_by("participant_id", "task_id", maintain_order=True)
               .agg(pl.col("task_split", "test_output_grid").first())
               .select("task_id", "task_split", pl.lit(True).alias("is_solved"), "test_output_grid"))
    return pl.concat([wrong, correct]).sort("task_id", "is_solved", "test_output_grid")
