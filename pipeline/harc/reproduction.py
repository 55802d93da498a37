"""out_harc__reproduction: each published H-ARC count (published.FACTS) beside what the ingested files give.

An observed value is null when the file it needs is absent (then needs_file names it); counts are 0 when the
file is present but has no row of the split. is_match compares within the fact's tolerance (the rounding of a
published percentage) and is null without an observed value.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.harc.published import ARC_TASKS, DATA_CSV, FACTS, SUMMARY_CSV

SCHEMA = {"metric": pl.String, "task_split": pl.String, "metric_description": pl.String,
          "published_value": pl.Float64, "observed_value": pl.Float64, "is_match": pl.Boolean,
          "observed_from": pl.String, "needs_file": pl.String}


def _label_disagreements(summary: pl.DataFrame, truth: pl.DataFrame) -> tuple[int, int]:
    """(rows whose is_solved differs from grid == the task file's test output, rows with such an answer)."""
    answers = truth.filter(pl.col("answer_grid").is_not_null()).select("task_id", "answer_grid")
    judged = summary.join(answers, on="task_id", how="inner")
    differs = judged.filter(pl.col("is_solved") != (pl.col("test_output_grid") == pl.col("answer_grid")))
    return differs.height, judged.height


def reproduction_table(*, split_accuracy: pl.DataFrame | None, summary: pl.DataFrame | None, summary_source: str,
                       truth: pl.DataFrame, actions: pl.DataFrame | None = None) -> pl.DataFrame:
    """Rows of out_harc__reproduction (without release_generation).

    `split_accuracy`: accuracy.split_accuracy (None when not computed); `summary`: the get_summary rows the
    accuracy came from (task_id, task_split, attempt_number as given, is_solved, test_output_grid), None when
    absent, with `summary_source` naming its file; `truth`: errors.task_truth; `actions`: the release's event
    rows (participant_id, task_split), None without data.csv."""
    k3 = ({} if split_accuracy is None else
          {r["task_split"]: r for r in split_accuracy.filter(pl.col("max_attempts") == 3).iter_rows(named=True)})
    splits = {f.task_split for f in FACTS}
    events_by_split = {s: None if actions is None else actions.filter(pl.col("task_split") == s) for s in splits}
    summary_by_split = {s: None if summary is None else summary.filter(pl.col("task_split") == s) for s in splits}
    rows: list[dict[str, Any]] = []
    for fact in FACTS:
        split = fact.task_split
        observed: float | None = None
        source: str | None = None
        needs: str | None = None
        events, rows_of_split = events_by_split[split], summary_by_split[split]
        if fact.metric in ("n_participants", "n_action_rows"):
            if events is None:
                needs = DATA_CSV
            else:
                source = DATA_CSV
                observed = (events["participant_id"].n_unique() if fact.metric == "n_participants"
                            else events.height)
        elif fact.metric in ("n_attempts", "max_attempt_number"):
            if rows_of_split is None:
                needs = SUMMARY_CSV
            else:
                source = summary_source
                observed = (rows_of_split.height if fact.metric == "n_attempts"
                            else rows_of_split["attempt_number"].max())
        elif fact.metric in ("mean_task_accuracy_3", "n_tasks", "n_tasks_solved_by_any"):
            if split_accuracy is None:
                needs = SUMMARY_CSV
            else:
                source = summary_source
                column = "mean_task_accuracy" if fact.metric == "mean_task_accuracy_3" else fact.metric
                observed = k3.get(split, {}).get(column, None if column == "mean_task_accuracy" else 0)
        elif fact.metric == "n_solved_label_disagreements":
            if rows_of_split is None:
                needs = SUMMARY_CSV
            else:
                n_differ, n_judged = _label_disagreements(rows_of_split, truth)
                if n_judged == 0 and rows_of_split.height:
                    needs = ARC_TASKS
                else:
                    observed = n_differ
                    source = (f"{summary_source} + {ARC_TASKS} ({n_judged:,} of {rows_of_split.height:,} rows "
                              "have a test output)")
        else:  # a fact without a rule here is a programming error, not missing data
            raise ValueError(f"no observation rule for published metric {fact.metric!r}")
        value = None if observed is None else float(observed)
        rows.append({"metric": fact.metric, "task_split": split, "metric_description": fact.description,
                     "published_value": float(fact.published), "observed_value": value,
                     "is_match": None if value is None else abs(value - fact.published) <= fact.tolerance + 1e-9,
                     "observed_from": source, "needs_file": needs})
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")
