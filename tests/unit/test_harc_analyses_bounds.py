"""Pessimistic / optimistic bounds on a case small enough to enumerate.

Split pool {A, B, C}; every participant was assigned 2 tasks:
    Q1 finished A (solved) and B (failed)      -> nothing imputed
    Q2 finished A (failed)                     -> 1 task imputed, drawn from {B, C}
    Q3 finished C (solved)                     -> 1 task imputed, drawn from {A, B}
Observed: A 1/2, B 0/1, C 1/1 -> mean 1/2.

The four equally likely draws (Q2's task, Q3's task) give, per task (solvers / participant-tasks):
                 pessimistic                          optimistic
    (B, A)   A 1/3, B 0/2, C 1   -> 4/9         A 2/3, B 1/2, C 1   -> 13/18
    (B, B)   A 1/2, B 0/3, C 1   -> 1/2         A 1/2, B 2/3, C 1   -> 13/18
    (C, A)   A 1/3, B 0/1, C 1/2 -> 5/18        A 2/3, B 0/1, C 1   -> 5/9
    (C, B)   A 1/2, B 0/2, C 1/2 -> 1/3         A 1/2, B 1/2, C 1   -> 2/3
Expected bounds: pessimistic (4/9 + 1/2 + 5/18 + 1/3) / 4 = 7/18, optimistic (13/18 + 13/18 + 5/9 + 2/3) / 4 = 2/3.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.harc import bounds

TASKS = ["A", "B", "C"]
PESSIMISTIC = {("B", "A"): 4 / 9, ("B", "B"): 1 / 2, ("C", "A"): 5 / 18, ("C", "B"): 1 / 3}
OPTIMISTIC = {("B", "A"): 13 / 18, ("B", "B"): 13 / 18, ("C", "A"): 5 / 9, ("C", "B"): 2 / 3}


def people() -> pl.DataFrame:
    return pl.DataFrame({"participant_id": ["Q1", "Q2", "Q3"], "task_split": "training",
                         "n_tasks_expected": [2, 2, 2], "n_tasks_finished": [2, 1, 1]})


def outcomes() -> pl.DataFrame:
    return pl.DataFrame({"participant_id": ["Q1", "Q1", "Q2", "Q3"], "task_id": ["A", "B", "A", "C"],
                         "task_split": "training", "solved_at_attempt": [1, None, None, 2]},
                        schema_overrides={"solved_at_attempt": pl.Int64})


def task_accuracy() -> pl.DataFrame:
    rows = []
    for k in (1, 2, 3):
        for task, n, solved_at in (("A", 2, [1]), ("B", 1, []), ("C", 1, [2])):
            solvers = sum(1 for s in solved_at if s <= k)
            rows.append({"task_id": task, "max_attempts": k, "task_split": "training", "n_participants": n,
                         "n_solvers": solvers, "solve_rate": solvers / n})
    return pl.DataFrame(rows)


def pool() -> pl.DataFrame:
    return pl.DataFrame({"task_id": TASKS, "task_split": "training"})


def finished() -> dict[str, set[str]]:
    return {"Q1": {"A", "B"}, "Q2": {"A"}, "Q3": {"C"}}


def test_draws_are_the_four_enumerated_cases_in_equal_shares():
    counts = bounds.imputation_counts(TASKS, people(), finished(), 4000, np.random.default_rng(1))
    assert counts.shape == (4000, 3)
    assert (counts.sum(axis=1) == 2).all()  # one task for Q2 and one for Q3 in every simulation
    patterns = {(1, 1, 0): ("B", "A"), (0, 2, 0): ("B", "B"), (1, 0, 1): ("C", "A"), (0, 1, 1): ("C", "B")}
    seen = [patterns[tuple(int(v) for v in row)] for row in counts]  # KeyError = an impossible draw
    shares = {case: seen.count(case) / len(seen) for case in patterns.values()}
    assert all(abs(share - 0.25) < 0.03 for share in shares.values()), shares


@pytest.mark.parametrize(("optimistic", "cases"), [(False, PESSIMISTIC), (True, OPTIMISTIC)])
def test_each_simulation_reproduces_its_enumerated_accuracy(optimistic, cases):
    n_part = np.array([2.0, 1.0, 1.0])
    n_solv = np.array([1.0, 0.0, 1.0])  # k = 3
    imputed = np.array([[1, 1, 0], [0, 2, 0], [1, 0, 1], [0, 1, 1]])
    values = bounds.simulated_accuracies(n_part, n_solv, imputed, optimistic)
    assert values.tolist() == pytest.approx([cases[("B", "A")], cases[("B", "B")], cases[("C", "A")],
                                             cases[("C", "B")]])


def test_bounds_converge_to_the_enumerated_expectation():
    table = bounds.accuracy_bounds(task_accuracy(), people(), outcomes(), pool(), n_simulations=4000, seed=7)
    k3 = {r["bound_kind"]: r for r in table.filter(pl.col("max_attempts") == 3).iter_rows(named=True)}
    pess, opt = k3["pessimistic"], k3["optimistic"]
    assert pess["mean_task_accuracy"] == opt["mean_task_accuracy"] == pytest.approx(1 / 2)
    # 4000 draws: the standard error of the mean is about 0.0013 (pessimistic) and 0.0010 (optimistic)
    assert pess["bound_estimate"] == pytest.approx(7 / 18, abs=0.006)
    assert opt["bound_estimate"] == pytest.approx(2 / 3, abs=0.006)
    assert (pess["bound_min"], pess["bound_max"]) == pytest.approx((5 / 18, 1 / 2))
    assert (opt["bound_min"], opt["bound_max"]) == pytest.approx((5 / 9, 13 / 18))
    assert (pess["n_imputed_participants"], pess["n_imputed_tasks"], pess["n_simulations"]) == (2, 2, 4000)
    # the population SD of the four pessimistic values
    values = np.array(list(PESSIMISTIC.values()))
    assert pess["bound_sd"] == pytest.approx(values.std(), abs=0.005)


def test_k1_uses_the_one_attempt_solvers():
    table = bounds.accuracy_bounds(task_accuracy(), people(), outcomes(), pool(), n_simulations=500, seed=3)
    k1 = {r["bound_kind"]: r for r in table.filter(pl.col("max_attempts") == 1).iter_rows(named=True)}
    # at k = 1 only Q1's A counts as solved (Q3 solved C at attempt 2): observed (1/2 + 0 + 0) / 3 = 1/6
    assert k1["pessimistic"]["mean_task_accuracy"] == pytest.approx(1 / 6)
    assert k1["optimistic"]["bound_estimate"] >= k1["pessimistic"]["bound_estimate"]


def test_seeded_and_reproducible():
    a = bounds.accuracy_bounds(task_accuracy(), people(), outcomes(), pool(), n_simulations=300, seed=11)
    b = bounds.accuracy_bounds(task_accuracy(), people(), outcomes(), pool(), n_simulations=300, seed=11)
    c = bounds.accuracy_bounds(task_accuracy(), people(), outcomes(), pool(), n_simulations=300, seed=12)
    assert a.equals(b)
    assert not a.equals(c)
    assert set(a["random_seed"].to_list()) == {11}


def test_no_missing_tasks_gives_the_observed_accuracy_with_no_spread():
    complete = people().with_columns(pl.col("n_tasks_finished").alias("n_tasks_expected"))
    table = bounds.accuracy_bounds(task_accuracy(), complete, outcomes(), pool(), n_simulations=50, seed=0)
    for r in table.filter(pl.col("max_attempts") == 3).iter_rows(named=True):
        assert r["bound_estimate"] == pytest.approx(1 / 2)
        assert r["bound_sd"] == 0 and r["n_imputed_participants"] == 0


def test_more_missing_than_candidates_takes_every_candidate():
    greedy = people().with_columns(pl.when(pl.col("participant_id") == "Q2").then(5)
                                   .otherwise(pl.col("n_tasks_expected")).alias("n_tasks_expected"))
    counts = bounds.imputation_counts(TASKS, greedy, finished(), 20, np.random.default_rng(0))
    # Q2 (finished A) gets both B and C in every simulation; Q3 one of A, B
    assert (counts[:, 1:].sum(axis=1) >= 2).all() and (counts[:, 2] >= 1).all()
    assert (counts.sum(axis=1) == 3).all()


def test_imputation_counts_pick_the_same_tasks_as_an_index_selection():
    """The mask selection (keys up to each simulation's m-th smallest) equals the explicit argpartition /
    argsort selection of the m smallest allowed keys, draw for draw, including m = every allowed task."""
    tasks = [f"t{i}" for i in range(12)]
    crowd = pl.DataFrame({"participant_id": [f"q{i}" for i in range(8)],
                          "n_tasks_expected": [5, 5, 10, 5, 12, 5, 5, 3], "n_tasks_finished": [0, 2, 3, 5, 4, 1, 4, 0]})
    done = {"q1": {"t0", "t1"}, "q2": {"t3", "t4", "t5"}, "q4": {"t0", "t1", "t2", "t3"}, "q5": {"t11"},
            "q6": {"t2", "t4", "t6", "t8"}}

    def by_index(rng: np.random.Generator) -> np.ndarray:
        counts = np.zeros((50, len(tasks)), dtype=np.int64)
        sims = np.arange(50)[:, None]
        for r in crowd.sort("participant_id").iter_rows(named=True):
            missing = r["n_tasks_expected"] - r["n_tasks_finished"]
            excluded = [tasks.index(t) for t in done.get(r["participant_id"], ())]
            m = min(missing, len(tasks) - len(excluded))
            if missing <= 0 or m <= 0:
                continue
            keys = rng.random((50, len(tasks)))
            keys[:, excluded] = np.inf
            chosen = (np.argsort(keys, axis=1) if m == len(tasks) - len(excluded)
                      else np.argpartition(keys, m - 1, axis=1))[:, :m]
            counts[sims, chosen] += 1
        return counts

    for seed in range(3):
        got = bounds.imputation_counts(tasks, crowd, done, 50, np.random.default_rng(seed))
        assert np.array_equal(got, by_index(np.random.default_rng(seed)))
