"""Errors in H-ARC submissions (study-protocol.md §4, "Errors").

A *submission* is a `submit` row of a finished participant-task (every evaluated Submit click, including the
pre-2023-12-01 repeats of the previous grid and a second submit in the second after a solve); its
correctness is the row's `is_solved` (the page's judgement, logged after judging).

- Correct output ("answer"): test[0].output of the ARC task file (core_arc__task_pairs, pair_split `test`,
  pair_index 0), else the grid of any correct submission of the task (then answer_source says so); unknown
  when neither exists.
- Grid-dimension errors: an incorrect submission whose height and width differ from the answer's;
  share_incorrect_size_correct is the share of incorrect submissions (with a known answer) of the right size.
- Normalised edit distance: for a grid of the answer's size, the share of cells that differ (Hamming distance
  over the cell count); undefined (null) for other sizes, as in the paper.
- Copy errors: an incorrect submission equal to any train input, any train output, or the (first) test input
  of the ARC task file; unknown (null) without the task file.
- Error divergence per task: distinct incorrect grids / all submissions of the task, so a task where errors
  are rare or all alike scores low and one where every error is new scores high. Its Pearson correlation
  with the task's 3-attempt solve rate is in out_harc__statistical_tests (per split).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from pipeline.harc import stats
from pipeline.harc.accuracy import PT, analysis_actions
from schemas.validate import empty_frame


def grid_shape(grid: str) -> tuple[int, int]:
    """(height, width) of a well-formed grid string."""
    return grid.count("|") - 1, grid.index("|", 1) - 1


def normalized_edit_distance(grid: str, answer: str) -> float | None:
    """Share of cells that differ from the answer; None when the sizes differ."""
    if grid_shape(grid) != grid_shape(answer):
        return None
    cells, truth = grid.replace("|", ""), answer.replace("|", "")
    if len(cells) != len(truth):
        raise ValueError(f"grids of one size with {len(cells)} and {len(truth)} cells: malformed grid string")
    # The cells compared as one array each rather than character by character in Python (every submission).
    differing = np.count_nonzero(np.frombuffer(cells.encode("utf-32-le"), dtype=np.uint32)
                                 != np.frombuffer(truth.encode("utf-32-le"), dtype=np.uint32))
    return int(differing) / len(cells)


def task_truth(pairs: pl.DataFrame) -> pl.DataFrame:
    """One row per task_id from core_arc__task_pairs rows: answer_grid (test[0].output), test_input_grid
    (test[0].input), train_input_grids, train_output_grids (lists of distinct grids). When several files hold the
    same task, their train grids are pooled and test[0] comes from the smallest file_id that has one."""
    if pairs.height == 0:
        return pl.DataFrame(schema={"task_id": pl.String, "answer_grid": pl.String, "test_input_grid": pl.String,
                                    "train_input_grids": pl.List(pl.String),
                                    "train_output_grids": pl.List(pl.String)})
    test = (pairs.filter((pl.col("pair_split") == "test") & (pl.col("pair_index") == 0))
            .sort("task_id", "file_id")
            .group_by("task_id", maintain_order=True)
            .agg(pl.col("output_grid").drop_nulls().first().alias("answer_grid"),
                 pl.col("input_grid").first().alias("test_input_grid")))
    train = (pairs.filter(pl.col("pair_split") == "train").group_by("task_id")
             .agg(pl.col("input_grid").unique().sort().alias("train_input_grids"),
                  pl.col("output_grid").drop_nulls().unique().sort().alias("train_output_grids")))
    tasks = pairs.select("task_id").unique()
    return (tasks.join(test, on="task_id", how="left").join(train, on="task_id", how="left")
            .with_columns(pl.col("train_input_grids", "train_output_grids").fill_null(pl.lit([], pl.List(pl.String))))
            .sort("task_id"))


def answers(truth: pl.DataFrame, subs_or_summary: pl.DataFrame) -> pl.DataFrame:
    """task_id, answer_grid, answer_source for every task of `subs_or_summary` (rows with task_id, is_solved,
    test_output_grid): the ARC file's answer, else the first correct grid (in participant order)."""
    from_file = truth.filter(pl.col("answer_grid").is_not_null()).select(
        "task_id", "answer_grid", pl.lit("arc_task_file").alias("answer_source"))
    from_subs = (subs_or_summary.filter(pl.col("is_solved")).sort(*PT)
                 .group_by("task_id", maintain_order=True).agg(pl.col("test_output_grid").first().alias("answer_grid"))
                 .join(from_file, on="task_id", how="anti")
                 .with_columns(pl.lit("correct_submission").alias("answer_source")))
    return pl.concat([from_file, from_subs]).sort("task_id")


def submissions(actions: pl.DataFrame, finished: pl.DataFrame, truth: pl.DataFrame) -> pl.DataFrame:
    """out_harc__submissions rows (without release_generation)."""
    subs = (analysis_actions(actions).join(finished, on=list(PT), how="semi")
            .filter(pl.col("action") == "submit")
            .select(*PT, "action_number", "task_split", "attempt_number", "is_solved", "test_output_grid")
            .sort(*PT, "action_number"))
    return judge_submissions(subs, truth, answers(truth, subs))


# The columns judging adds, typed as out_harc__submissions declares them in schemas/.
JUDGED_SCHEMA = {name: dtype for name, dtype in empty_frame("out_harc__submissions").schema.items()
                 if name in ("answer_source", "grid_height", "grid_width", "is_size_correct",
                             "normalized_edit_distance", "is_copy_of_train_input", "is_copy_of_train_output",
                             "is_copy_of_test_input", "is_copy_error")}


def judge_submissions(subs: pl.DataFrame, truth: pl.DataFrame, known: pl.DataFrame) -> pl.DataFrame:
    """Every row of `subs` (task_id, is_solved, test_output_grid and any other columns, kept in front) with
    answer_source, the grid's size, its edit distance against the answer (`known`: answers()) and copy errors
    against the task file (`truth`: task_truth())."""
    files = truth.select("task_id", "test_input_grid", "train_input_grids", "train_output_grids")
    joined = subs.join(known, on="task_id", how="left").join(files, on="task_id", how="left")
    rows: list[dict[str, Any]] = []
    for r in joined.iter_rows(named=True):
        grid = r["test_output_grid"]
        height, width = grid_shape(grid)
        answer = r["answer_grid"]
        has_file = r["train_input_grids"] is not None
        wrong = not r["is_solved"]
        out = {k: r[k] for k in (*subs.columns, "answer_source")}
        out.update(grid_height=height, grid_width=width,
                   is_size_correct=None if answer is None else grid_shape(answer) == (height, width),
                   normalized_edit_distance=None if answer is None else normalized_edit_distance(grid, answer))
        if has_file:
            out.update(is_copy_of_train_input=grid in r["train_input_grids"],
                       is_copy_of_train_output=grid in r["train_output_grids"],
                       is_copy_of_test_input=r["test_input_grid"] is not None and grid == r["test_input_grid"])
            copied = out["is_copy_of_train_input"] or out["is_copy_of_train_output"] or out["is_copy_of_test_input"]
            out["is_copy_error"] = bool(copied) if wrong else None
        else:
            out.update(is_copy_of_train_input=None, is_copy_of_train_output=None, is_copy_of_test_input=None,
                       is_copy_error=None)
        rows.append(out)
    return pl.DataFrame(rows, schema=dict(subs.schema) | JUDGED_SCHEMA, orient="row")


def task_errors(subs: pl.DataFrame, task_acc: pl.DataFrame, known_answers: pl.DataFrame) -> pl.DataFrame:
    """Per task (every task with a finished participant-task): submissions, incorrect ones, distinct incorrect
    grids, error divergence, the 3-attempt solve rate, mean edit distance, the answer's source and size."""
    wrong = ~pl.col("is_solved")
    per_task = subs.group_by("task_id").agg(
        pl.len().alias("n_submits"),
        wrong.sum().alias("n_incorrect_submits"),
        pl.col("test_output_grid").filter(wrong).n_unique().alias("n_unique_incorrect_grids"),
        pl.col("normalized_edit_distance").filter(wrong).mean().alias("mean_normalized_edit_distance"),
    )
    acc = task_acc.filter(pl.col("max_attempts") == 3).select("task_id", "task_split", "solve_rate")
    sizes = known_answers.with_columns(
        (pl.col("answer_grid").str.count_matches("|", literal=True) - 1).cast(pl.Int64).alias("answer_height"),
        pl.col("answer_grid").str.split("|").list.get(1, null_on_oob=True).str.len_chars().cast(pl.Int64)
        .alias("answer_width"),
    ).select("task_id", "answer_source", "answer_height", "answer_width")
    return (acc.join(per_task, on="task_id", how="left").join(sizes, on="task_id", how="left")
            .with_columns(pl.col("n_submits", "n_incorrect_submits", "n_unique_incorrect_grids").fill_null(0)
                          .cast(pl.Int64))
            .with_columns(pl.when(pl.col("n_submits") > 0)
                          .then(pl.col("n_unique_incorrect_grids") / pl.col("n_submits")).alias("error_divergence"))
            .select("task_id", "task_split", "n_submits", "n_incorrect_submits", "n_unique_incorrect_grids",
                    "error_divergence", "solve_rate", "mean_normalized_edit_distance", "answer_source",
                    "answer_height", "answer_width")
            .sort("task_id"))


def error_summary(subs: pl.DataFrame) -> pl.DataFrame:
    """Per split: grid-dimension errors, mean edit distance and copy-error shares over incorrect submissions."""
    wrong = subs.filter(~pl.col("is_solved"))
    totals = subs.group_by("task_split").agg(pl.len().alias("n_submits"))
    with_file = pl.col("is_copy_error").is_not_null()
    shares = wrong.group_by("task_split").agg(
        pl.len().alias("n_incorrect_submits"),
        pl.col("is_size_correct").drop_nulls().mean().alias("share_incorrect_size_correct"),
        pl.col("normalized_edit_distance").drop_nulls().mean().alias("mean_normalized_edit_distance"),
        with_file.sum().alias("n_incorrect_with_task_file"),
        pl.col("is_copy_error").drop_nulls().mean().alias("share_copy_errors"),
        pl.col("is_copy_of_train_input").filter(with_file).mean().alias("share_copy_train_input"),
        pl.col("is_copy_of_train_output").filter(with_file).mean().alias("share_copy_train_output"),
        pl.col("is_copy_of_test_input").filter(with_file).mean().alias("share_copy_test_input"),
    )
    return (totals.join(shares, on="task_split", how="left")
            .with_columns(pl.col("n_incorrect_submits", "n_incorrect_with_task_file").fill_null(0).cast(pl.Int64))
            .select("task_split", "n_submits", "n_incorrect_submits", "share_incorrect_size_correct",
                    "mean_normalized_edit_distance", "n_incorrect_with_task_file", "share_copy_errors",
                    "share_copy_train_input", "share_copy_train_output", "share_copy_test_input")
            .sort("task_split"))


def divergence_correlations(errors: pl.DataFrame, confidence: float = stats.CONFIDENCE) -> list[dict[str, Any]]:
    """Per split, Pearson r between error_divergence and the 3-attempt solve rate over tasks with submissions."""
    rows = []
    for split in sorted(errors["task_split"].unique().to_list()):
        sub = errors.filter((pl.col("task_split") == split) & pl.col("error_divergence").is_not_null()
                            & pl.col("solve_rate").is_not_null())
        rows.append(stats.pearson(
            f"error_divergence_vs_solve_rate:{split}",
            f"Pearson correlation over {split} tasks of error divergence (distinct incorrect grids / "
            "submissions) with the task's 3-attempt solve rate",
            "error_divergence", "solve_rate",
            sub["error_divergence"].to_list(), sub["solve_rate"].to_list(), confidence))
    return rows
