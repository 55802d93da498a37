"""First grid change of each attempt (study-protocol.md §4: "about a third of first actions resize the output
grid").

Over a finished participant-task's events in action_number order, a *grid change* is an event whose
test_output_grid differs from the previous event's. The task-start reset_grid (the first event) is the starting
state, not a change. An attempt's first change is the first grid change among its events (attempt_number as
logged, 1-3; the attempt-4 rows after a third wrong submit are the closing description, not an attempt), so
attempt 2 starts from the grid submitted at attempt 1. An attempt with no change (e.g. an immediate
resubmission) gets `none`. Resizes are change_height and change_width; copy_from_input also sets the size, but
is reported under its own name.
"""

from __future__ import annotations

import polars as pl

from pipeline.harc.accuracy import PT, analysis_actions

RESIZE_ACTIONS = ("change_height", "change_width")
NO_CHANGE = "none"


def first_changes(actions: pl.DataFrame, outcomes: pl.DataFrame) -> pl.DataFrame:
    """participant_id, task_id, task_split, attempt_number, first_change_action for attempts 1 ..
    n_attempts_used of every finished participant-task (`outcomes`)."""
    rows = (analysis_actions(actions).join(outcomes.select(PT), on=list(PT), how="semi")
            .select(*PT, "action_number", "attempt_number", "action", "test_output_grid")
            .sort(*PT, "action_number")
            .with_columns((pl.col("test_output_grid") != pl.col("test_output_grid").shift(1).over(list(PT)))
                          .fill_null(False).alias("is_change")))
    firsts = (rows.filter(pl.col("is_change") & (pl.col("attempt_number") <= 3))
              .group_by(*PT, "attempt_number").agg(pl.col("action").first().alias("first_change_action")))
    attempts = (outcomes.select(*PT, "task_split", "n_attempts_used")
                .with_columns(pl.int_ranges(1, pl.col("n_attempts_used") + 1).alias("attempt_number"))
                .explode("attempt_number").drop("n_attempts_used")
                .with_columns(pl.col("attempt_number").cast(pl.Int64)))
    return (attempts.join(firsts, on=[*PT, "attempt_number"], how="left")
            .with_columns(pl.col("first_change_action").fill_null(NO_CHANGE))
            .sort(*PT, "attempt_number"))


def first_action_table(changes: pl.DataFrame) -> pl.DataFrame:
    """Per split, attempt_number and first_change_action: count and share of the split's attempts at that
    attempt_number."""
    counts = changes.group_by("task_split", "attempt_number", "first_change_action").agg(
        pl.len().cast(pl.Int64).alias("n_first_changes"))
    return (counts.with_columns((pl.col("n_first_changes") / pl.col("n_first_changes").sum()
                                 .over("task_split", "attempt_number")).alias("share_of_attempts"))
            .sort("task_split", "attempt_number", "first_change_action"))


def resize_share(changes: pl.DataFrame, attempt_number: int | None = 1) -> pl.DataFrame:
    """Per split: share of attempts (at one attempt_number, or all when None) whose first change is a resize."""
    sub = changes if attempt_number is None else changes.filter(pl.col("attempt_number") == attempt_number)
    return (sub.group_by("task_split")
            .agg(pl.col("first_change_action").is_in(RESIZE_ACTIONS).mean().alias("share_resize"),
                 pl.len().alias("n_attempts"))
            .sort("task_split"))
