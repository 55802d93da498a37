"""k-attempt accuracy, tasks solved by anyone / everyone / no one, Figure 5 and Figure 6 (H-ARC paper).

Everything starts from the authors' `get_summary` (formats.md §D.8), applied to core_harc__actions:

1. a participant-task is *finished* when its last event (highest attempt, then highest action_number) is
   `no_last_description`, `write_description` or `write_last_description`; unfinished tasks (withdrawals mid-task)
   and tutorial tasks are left out;
2. attempt 4 (the closing description after a third wrong submit) is recoded as 3;
3. per (participant, task, attempt) the event with the highest action_number stands for the attempt; its
   `is_solved` says whether the task was solved by then (`solved` is true from the correct submit onward).

A task is solved within k attempts when any of its attempts <= k is solved. Per task, solve_rate = solvers /
participants who finished it; per split, the accuracy is the mean of the task solve rates (task-averaged, as
in the paper), not the pooled share of participant-tasks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl

from schemas.validate import conform
from schemas.vocabulary import HARC_TERMINAL_ACTIONS

MAX_ATTEMPTS = (1, 2, 3)
PT = ("participant_id", "task_id")
# Experiments that assigned 10 tasks per participant (formats.md §D.2: expv0, expv1); every later one 5.
TEN_TASK_EXPERIMENTS = ("expv0", "expv1")
DEFAULT_TASKS_PER_PARTICIPANT = 5


def release_frame(table_name: str, rows: list[dict[str, Any]] | pl.DataFrame) -> pl.DataFrame:
    """One release's rows of an out_harc__* table, typed by schemas/: every column but release_generation,
    which `build.with_release` adds when the release is known."""
    return conform(table_name, rows, without=("release_generation",))


def accuracy_tables(outcomes: pl.DataFrame, people: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The k-attempt accuracy tables of finished participant-tasks (`outcomes`) and the participants
    (`people`), whether they came from the event log or from summary_data.csv."""
    task_acc = task_accuracy(outcomes)
    participant_acc = participant_accuracy(outcomes, people)
    return {"out_harc__task_accuracy": task_acc, "out_harc__participant_accuracy": participant_acc,
            "out_harc__split_accuracy": split_accuracy(task_acc, participant_acc),
            "out_harc__tasks_by_min_solvers": tasks_by_min_solvers(task_acc)}


def expected_tasks(exp_name: pl.Expr) -> pl.Expr:
    return pl.when(exp_name.is_in(TEN_TASK_EXPERIMENTS)).then(10).otherwise(DEFAULT_TASKS_PER_PARTICIPANT)


def _recoded_attempt() -> pl.Expr:
    return pl.when(pl.col("attempt_number") == 4).then(3).otherwise(pl.col("attempt_number"))


def analysis_actions(actions: pl.DataFrame) -> pl.DataFrame:
    """Events of non-tutorial participant-tasks."""
    return actions.filter(~pl.col("is_tutorial") & (pl.col("task_number") > 0))


def is_sorted_by(frame: pl.DataFrame, order: Iterable[str]) -> bool:
    """Whether `frame` is in ascending `order` with no null key: every row compared with the one before, in
    one pass (comparing with a sorted copy would sort). A null key counts as unsorted: the caller sorts."""
    order = list(order)
    not_before = pl.lit(True)  # built from the last key: row >= previous row, lexicographically
    for column in reversed(order):
        current, previous = pl.col(column), pl.col(column).shift(1)
        not_before = (current > previous) | ((current == previous) & not_before)
    checks = frame.select(pl.all_horizontal(pl.col(order).is_not_null().all()).alias("complete"),
                          not_before.slice(1).all().alias("ascending"))
    return frame.height < 2 or (checks["complete"][0] and checks["ascending"][0])


def finished_keys(actions: pl.DataFrame) -> pl.DataFrame:
    """(participant_id, task_id) of finished tasks: last event by (recoded attempt, action_number) is terminal."""
    last = (analysis_actions(actions)
            .with_columns(_recoded_attempt().alias("__attempt"))
            .sort(*PT, "__attempt", "action_number")
            .group_by(list(PT), maintain_order=True).agg(pl.col("action").last()))
    return last.filter(pl.col("action").is_in(HARC_TERMINAL_ACTIONS)).select(PT)


def summary_attempts(actions: pl.DataFrame) -> pl.DataFrame:
    """get_summary: one row per finished participant-task-attempt (attempt 4 recoded as 3) with the attempt's
    last event: participant_id, task_id, exp_name, task_split, task_number, is_complete, attempt_number,
    action_number (of that event), is_solved, test_output_grid."""
    rows = analysis_actions(actions).join(finished_keys(actions), on=list(PT), how="semi")
    return (rows.with_columns(_recoded_attempt().alias("attempt_number"))
            .sort(*PT, "attempt_number", "action_number")
            .group_by([*PT, "attempt_number"], maintain_order=True)
            .agg(pl.col("exp_name", "task_split", "task_number", "is_complete").first(),
                 pl.col("action_number", "is_solved", "test_output_grid").last())
            .select(*PT, "exp_name", "task_split", "task_number", "is_complete", "attempt_number", "action_number",
                    "is_solved", "test_output_grid"))


def participant_task_outcomes(summary: pl.DataFrame) -> pl.DataFrame:
    """One row per finished participant-task: n_attempts_used, solved_at_attempt (null when unsolved), is_solved."""
    return (summary.group_by(list(PT), maintain_order=True)
            .agg(pl.col("exp_name", "task_split", "task_number", "is_complete").first(),
                 pl.col("attempt_number").max().alias("n_attempts_used"),
                 pl.col("attempt_number").filter(pl.col("is_solved")).min().alias("solved_at_attempt"))
            .with_columns(pl.col("solved_at_attempt").is_not_null().alias("is_solved"))
            .sort(*PT))


def _solved_within(k: int) -> pl.Expr:
    return (pl.col("solved_at_attempt") <= k).fill_null(False)


def task_accuracy(outcomes: pl.DataFrame) -> pl.DataFrame:
    """Per task and k: n_participants (who finished it), n_solvers (within k attempts), solve_rate."""
    frames = []
    for k in MAX_ATTEMPTS:
        frames.append(outcomes.group_by("task_id").agg(
            pl.col("task_split").first(), pl.len().alias("n_participants"),
            _solved_within(k).sum().alias("n_solvers")).with_columns(pl.lit(k).alias("max_attempts")))
    return (pl.concat(frames)
            .with_columns((pl.col("n_solvers") / pl.col("n_participants")).alias("solve_rate"))
            .select("task_id", "max_attempts", "task_split", "n_participants", "n_solvers", "solve_rate")
            .sort("task_id", "max_attempts"))


def participants(actions: pl.DataFrame, outcomes: pl.DataFrame) -> pl.DataFrame:
    """One row per participant with any non-tutorial event: task_split, exp_name, is_complete,
    n_tasks_expected (by experiment), n_tasks_finished."""
    people = (analysis_actions(actions).group_by("participant_id")
              .agg(pl.col("task_split", "exp_name").first(), pl.col("is_complete").all()))
    finished = outcomes.group_by("participant_id").agg(pl.len().alias("n_tasks_finished"))
    return (people.join(finished, on="participant_id", how="left")
            .with_columns(pl.col("n_tasks_finished").fill_null(0).cast(pl.Int64),
                          expected_tasks(pl.col("exp_name")).cast(pl.Int64).alias("n_tasks_expected"))
            .sort("participant_id"))


def participant_accuracy(outcomes: pl.DataFrame, people: pl.DataFrame) -> pl.DataFrame:
    """Figure 6: per participant and k, tasks finished and solved, and the share solved (null when none
    finished)."""
    frames = []
    for k in MAX_ATTEMPTS:
        solved = outcomes.group_by("participant_id").agg(_solved_within(k).sum().alias("n_tasks_solved"))
        frames.append(people.join(solved, on="participant_id", how="left")
                      .with_columns(pl.col("n_tasks_solved").fill_null(0).cast(pl.Int64),
                                    pl.lit(k).alias("max_attempts")))
    return (pl.concat(frames)
            .with_columns(pl.when(pl.col("n_tasks_finished") > 0)
                          .then(pl.col("n_tasks_solved") / pl.col("n_tasks_finished")).alias("solve_share"))
            .select("participant_id", "max_attempts", "task_split", "exp_name", "is_complete", "n_tasks_expected",
                    "n_tasks_finished", "n_tasks_solved", "solve_share")
            .sort("participant_id", "max_attempts"))


def split_accuracy(task_acc: pl.DataFrame, participant_acc: pl.DataFrame) -> pl.DataFrame:
    """Per split and k: task-averaged accuracy, tasks solved by any / all / none; the split's participants
    (everyone with a non-tutorial event, as Table 2 counts them, so a participant who withdrew during a first
    task is counted); among those who finished at least one task (n_participants_finished), the share who solved
    all / none, and the mean per-participant share."""
    tasks = task_acc.group_by("task_split", "max_attempts").agg(
        pl.len().alias("n_tasks"),
        pl.col("solve_rate").mean().alias("mean_task_accuracy"),
        (pl.col("n_solvers") > 0).sum().alias("n_tasks_solved_by_any"),
        (pl.col("n_solvers") == pl.col("n_participants")).sum().alias("n_tasks_solved_by_all"),
        (pl.col("n_solvers") == 0).sum().alias("n_tasks_solved_by_none"),
    )
    finished = pl.col("n_tasks_finished") > 0
    people = participant_acc.group_by("task_split", "max_attempts").agg(
        pl.len().alias("n_participants"),
        finished.sum().alias("n_participants_finished"),
        (pl.col("n_tasks_solved") == pl.col("n_tasks_finished")).filter(finished).mean()
        .alias("share_participants_all_solved"),
        (pl.col("n_tasks_solved") == 0).filter(finished).mean().alias("share_participants_none_solved"),
        pl.col("solve_share").filter(finished).mean().alias("mean_participant_solve_share"),
    )
    return (tasks.join(people, on=["task_split", "max_attempts"], how="full", coalesce=True)
            .with_columns(pl.col("n_tasks", "n_tasks_solved_by_any", "n_tasks_solved_by_all",
                                 "n_tasks_solved_by_none", "n_participants", "n_participants_finished")
                          .fill_null(0).cast(pl.Int64))
            .sort("task_split", "max_attempts"))


def tasks_by_min_solvers(task_acc: pl.DataFrame) -> pl.DataFrame:
    """Figure 5: for N = 0 .. the largest n_participants of the split, the share of tasks with >= N solvers."""
    frames = []
    for (split, k), group in task_acc.group_by("task_split", "max_attempts", maintain_order=True):
        top = int(group["n_participants"].max() or 0)
        solvers = group["n_solvers"]
        n_tasks = group.height
        counts = [int((solvers >= n).sum()) for n in range(top + 1)]
        frames.append(pl.DataFrame({
            "task_split": split, "max_attempts": k, "min_solvers": list(range(top + 1)), "n_tasks": n_tasks,
            "n_tasks_at_least": counts, "share_tasks_at_least": [c / n_tasks for c in counts],
        }, schema_overrides={"max_attempts": pl.Int64, "min_solvers": pl.Int64, "n_tasks": pl.Int64,
                             "n_tasks_at_least": pl.Int64}))
    if not frames:
        return release_frame("out_harc__tasks_by_min_solvers", [])
    return pl.concat(frames).sort("task_split", "max_attempts", "min_solvers")
