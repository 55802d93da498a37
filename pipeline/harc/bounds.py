"""Pessimistic and optimistic bounds on task-averaged accuracy under incomplete data (study-protocol.md §4).

The H-ARC procedure: "for each participant who completed k < 5 tasks, sample 5 - k random tasks from the split
and assume failure (pessimistic) or success (optimistic); repeat 1,000 times, imputing the missing data, and
average the resulting mean task success rates."

As implemented, per split and per k (1, 2, 3 attempts):

- a participant's assignment is n_tasks_expected tasks (10 for expv0/expv1, else 5); one who finished fewer
  (tasks with a terminal description row; withdrawals and unfinished tasks alike) gets
  m = n_tasks_expected - n_tasks_finished imputed participant-tasks;
- the m tasks are drawn uniformly *without replacement* from the split's task pool (every task of the split
  that appears in the events) minus the tasks the participant finished: nobody was given the same task twice.
  If fewer candidates than m remain, all of them are taken;
- an imputed participant-task is a failure (pessimistic) or a success within k attempts (optimistic);
- in each simulation every task's solve rate is recomputed from observed plus imputed participant-tasks and
  averaged over the tasks that then have any participant-task; the bound is the mean of that average over
  the simulations, reported with its standard deviation, 2.5/97.5 percentiles, minimum and maximum;
- the same draws serve both bounds and every k of a split (they differ only in the imputed outcome), so the
  optimistic bound is never below the pessimistic one within a simulation.

Randomness: numpy's PCG64, seeded with (seed, split index in sorted order); participants are visited in sorted
order and each draws one (n_simulations x n_tasks) block of uniform keys, the m smallest keys of the allowed
tasks picking its tasks. Same inputs and seed, same numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from pipeline.harc.accuracy import MAX_ATTEMPTS, release_frame

DEFAULT_SIMULATIONS = 1000
DEFAULT_SEED = 0


def imputation_counts(task_ids: list[str], people: pl.DataFrame, finished: dict[str, set[str]],
                      n_simulations: int, rng: np.random.Generator) -> np.ndarray:
    """(n_simulations x n_tasks) counts of imputed participant-tasks per task and simulation.

    `people`: participant_id, n_tasks_expected, n_tasks_finished (one split); `finished`: participant ->
    finished task ids.
    """
    index = {t: i for i, t in enumerate(task_ids)}
    # A count is at most the number of participants: summed in the narrowest type that holds it (the adds
    # run over the whole block once per participant), returned as int64.
    narrow = np.int16 if people.height < np.iinfo(np.int16).max else np.int64
    counts = np.zeros((n_simulations, len(task_ids)), dtype=narrow)
    for r in people.sort("participant_id").iter_rows(named=True):
        missing = r["n_tasks_expected"] - r["n_tasks_finished"]
        if missing <= 0:
            continue
        excluded = [index[t] for t in finished.get(r["participant_id"], ()) if t in index]
        n_allowed = len(task_ids) - len(excluded)
        m = min(missing, n_allowed)
        if m <= 0:
            continue
        keys = rng.random((n_simulations, len(task_ids)))
        keys[:, excluded] = np.inf
        # The m smallest keys of each simulation are those up to its m-th smallest (keys are continuous: no
        # ties); excluded tasks (inf) never qualify since m <= n_allowed. A mask add, no index arrays.
        kth = np.partition(keys, m - 1, axis=1)[:, m - 1:m]
        counts += keys <= kth
    return counts.astype(np.int64)


def bound_statistics(values: np.ndarray) -> dict[str, float]:
    return {
        "bound_estimate": float(values.mean()),
        "bound_sd": float(values.std(ddof=1)) if values.size > 1 else 0.0,
        "bound_p025": float(np.percentile(values, 2.5)),
        "bound_p975": float(np.percentile(values, 97.5)),
        "bound_min": float(values.min()),
        "bound_max": float(values.max()),
    }


def simulated_accuracies(n_participants: np.ndarray, n_solvers: np.ndarray, imputed: np.ndarray,
                         optimistic: bool) -> np.ndarray:
    """Mean task accuracy per simulation: per task (observed + imputed solvers) / (observed + imputed
    participants), averaged over tasks with any participant-task."""
    total = n_participants[None, :] + imputed
    solved = n_solvers[None, :] + (imputed if optimistic else 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(total > 0, solved / np.where(total > 0, total, 1), np.nan)
    return np.nanmean(rates, axis=1)


def accuracy_bounds(task_acc: pl.DataFrame, people: pl.DataFrame, outcomes: pl.DataFrame,
                    task_pool: pl.DataFrame, *, n_simulations: int = DEFAULT_SIMULATIONS,
                    seed: int = DEFAULT_SEED) -> pl.DataFrame:
    """out_harc__accuracy_bounds rows (without release_generation).

    `task_acc`: accuracy.task_accuracy; `people`: accuracy.participants; `outcomes`: finished participant-tasks
    (participant_id, task_id); `task_pool`: task_id, task_split of every task seen in the events.
    """
    if n_simulations < 1:
        raise ValueError("n_simulations must be at least 1")
    finished: dict[str, set[str]] = {}
    for participant, task in outcomes.select("participant_id", "task_id").iter_rows():
        finished.setdefault(participant, set()).add(task)
    rows: list[dict[str, Any]] = []
    for split_index, split in enumerate(sorted(task_pool["task_split"].unique().to_list())):
        task_ids = sorted(task_pool.filter(pl.col("task_split") == split)["task_id"].unique().to_list())
        split_people = people.filter(pl.col("task_split") == split)
        rng = np.random.default_rng([seed, split_index])
        imputed = imputation_counts(task_ids, split_people, finished, n_simulations, rng)
        missing = (split_people["n_tasks_expected"] - split_people["n_tasks_finished"]).clip(lower_bound=0)
        n_imputed_participants = int((missing > 0).sum())
        n_imputed_tasks = int(imputed[0].sum()) if n_simulations else 0
        for k in MAX_ATTEMPTS:
            acc = task_acc.filter((pl.col("task_split") == split) & (pl.col("max_attempts") == k))
            by_task = dict(zip(acc["task_id"].to_list(), zip(acc["n_participants"].to_list(),
                                                             acc["n_solvers"].to_list(), strict=True),
                               strict=True))
            n_part = np.array([by_task.get(t, (0, 0))[0] for t in task_ids], dtype=np.float64)
            n_solv = np.array([by_task.get(t, (0, 0))[1] for t in task_ids], dtype=np.float64)
            observed = acc["solve_rate"].mean() if acc.height else None
            for kind in ("pessimistic", "optimistic"):
                values = simulated_accuracies(n_part, n_solv, imputed, kind == "optimistic")
                rows.append({"task_split": split, "max_attempts": k, "bound_kind": kind,
                             "mean_task_accuracy": observed, **bound_statistics(values),
                             "n_simulations": n_simulations, "random_seed": seed,
                             "n_imputed_participants": n_imputed_participants,
                             "n_imputed_tasks": n_imputed_tasks})
    return release_frame("out_harc__accuracy_bounds", rows)
