"""k-attempt accuracy, Figure 5 / Figure 6 tables and Table 2 counts on a tiny study with hand-computed answers.

The study (training split, tasks T1-T4, participants P1-P5; sN = solved at attempt N, f = failed three times,
u = unfinished, no terminal row):

    P1: T1 s1, T2 s2, T4 s1                 P4: T1 s2, T2 s1, T3 f
    P2: T1 s3, T2 f, T3 u, T4 s1            P5: T3 f, T4 s1 (plus a tutorial task, task_number 0)
    P3: T1 f, T3 f

Per task (participants who finished it; solvers within k = 1, 2, 3):
    T1: 4; 1, 2, 3     T2: 3; 1, 2, 2     T3: 3; 0, 0, 0 (P2's unfinished trace does not count)     T4: 3; 3, 3, 3
Task-averaged accuracy: k=1 (1/4 + 1/3 + 0 + 1) / 4 = 19/48; k=2 (1/2 + 2/3 + 0 + 1) / 4 = 13/24;
k=3 (3/4 + 2/3 + 0 + 1) / 4 = 29/48.
"""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from pipeline.harc import accuracy, graphs

EVENT_SCHEMA = {"participant_id": pl.String, "task_id": pl.String, "action_number": pl.Int64,
                "exp_name": pl.String, "task_split": pl.String, "task_number": pl.Int64,
                "attempt_number": pl.Int64, "action": pl.String, "occurred_at": pl.Datetime("us"),
                "is_solved": pl.Boolean, "test_output_grid": pl.String, "is_tutorial": pl.Boolean,
                "is_complete": pl.Boolean}
T0 = dt.datetime(2023, 8, 3, 10, 0, 0)


def frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=EVENT_SCHEMA, orient="row")


def ev(participant: str, task: str, n: int, action: str, attempt: int = 1, *, t: float | None = None,
       grid: str = "|0|", solved: bool = False, split: str = "training", number: int = 1, exp: str = "expv2",
       complete: bool = True) -> dict:
    """One core_harc__actions row with the columns the analyses read."""
    return {"participant_id": participant, "task_id": task, "action_number": n, "exp_name": exp,
            "task_split": split, "task_number": number, "attempt_number": attempt, "action": action,
            "occurred_at": T0 + dt.timedelta(seconds=10 * n if t is None else t), "is_solved": solved,
            "test_output_grid": grid, "is_tutorial": number == 0, "is_complete": complete}


def task_events(participant: str, task: str, outcome: int | str, *, number: int = 1, split: str = "training",
                exp: str = "expv2", complete: bool = True) -> list[dict]:
    """Events of one participant-task: `outcome` is the solving attempt (1-3), "f" (three wrong submissions,
    then the attempt-4 closing description) or "u" (unfinished: no submission, no terminal row)."""
    kw = dict(split=split, number=number, exp=exp, complete=complete)
    rows = [ev(participant, task, 1, "reset_grid", 1, grid="|000|000|000|", **kw)]
    if outcome == "u":
        return rows + [ev(participant, task, 2, "edit", 1, grid="|1|", **kw)]
    solved_at = None if outcome == "f" else int(outcome)
    n = 1
    for attempt in range(1, (solved_at or 3) + 1):
        correct = attempt == solved_at
        grid = "|9|" if correct else f"|{attempt}|"
        n += 1
        rows.append(ev(participant, task, n, "edit", attempt, grid=grid, **kw))
        if attempt == 1:
            n += 1
            rows.append(ev(participant, task, n, "write_first_description", 1, grid=grid, **kw))
        n += 1
        rows.append(ev(participant, task, n, "submit", attempt, grid=grid, solved=correct, **kw))
    n += 1
    if solved_at:
        rows.append(ev(participant, task, n, "no_last_description", solved_at, grid="|9|", solved=True, **kw))
    else:
        rows.append(ev(participant, task, n, "write_last_description", 4, grid="|3|", **kw))
    return rows


PLAN = {
    "P1": [("T1", 1), ("T2", 2), ("T4", 1)],
    "P2": [("T1", 3), ("T2", "f"), ("T3", "u"), ("T4", 1)],
    "P3": [("T1", "f"), ("T3", "f")],
    "P4": [("T1", 2), ("T2", 1), ("T3", "f")],
    "P5": [("T3", "f"), ("T4", 1)],
}


def study() -> pl.DataFrame:
    rows = []
    for participant, tasks in PLAN.items():
        for number, (task, outcome) in enumerate(tasks, 1):
            rows += task_events(participant, task, outcome, number=number)
    rows += task_events("P5", "TUT", 1, number=0)  # the tutorial: never counted
    return frame(rows)


@pytest.fixture(scope="module")
def computed():
    actions = study()
    summary = accuracy.summary_attempts(actions)
    outcomes = accuracy.participant_task_outcomes(summary)
    people = accuracy.participants(actions, outcomes)
    task_acc = accuracy.task_accuracy(outcomes)
    participant_acc = accuracy.participant_accuracy(outcomes, people)
    return actions, summary, outcomes, people, task_acc, participant_acc


def test_get_summary_keeps_finished_tasks_and_recodes_attempt_four(computed):
    _, summary, outcomes, *_ = computed
    # attempts: P1 1+2+1, P2 3+3+1, P3 3+3, P4 2+1+3, P5 3+1 = 27 (attempt-4 rows folded into attempt 3)
    assert summary.height == 27
    assert summary["attempt_number"].max() == 3
    p3 = summary.filter((pl.col("participant_id") == "P3") & (pl.col("task_id") == "T1"))
    # attempt 3's representative row is the closing description (highest action_number)
    assert p3.select("attempt_number", "action_number", "is_solved").rows() == [(1, 4, False), (2, 6, False),
                                                                              (3, 9, False)]
    assert ("P2", "T3") not in set(outcomes.select("participant_id", "task_id").rows())
    assert "TUT" not in outcomes["task_id"].to_list()
    got = {(p, t): s for p, t, s in outcomes.select("participant_id", "task_id", "solved_at_attempt").rows()}
    expected = {(p, t): (None if o == "f" else o) for p, ts in PLAN.items() for t, o in ts if o != "u"}
    assert got == expected


def test_k_attempt_accuracy_per_task(computed):
    *_, task_acc, _ = computed
    got = {(t, k): (n, s) for t, k, n, s in task_acc.select("task_id", "max_attempts", "n_participants",
                                                             "n_solvers").rows()}
    assert got == {("T1", 1): (4, 1), ("T1", 2): (4, 2), ("T1", 3): (4, 3),
                   ("T2", 1): (3, 1), ("T2", 2): (3, 2), ("T2", 3): (3, 2),
                   ("T3", 1): (3, 0), ("T3", 2): (3, 0), ("T3", 3): (3, 0),
                   ("T4", 1): (3, 3), ("T4", 2): (3, 3), ("T4", 3): (3, 3)}


def test_split_accuracy_is_task_averaged(computed):
    *_, task_acc, participant_acc = computed
    split = accuracy.split_accuracy(task_acc, participant_acc)
    rows = {r["max_attempts"]: r for r in split.iter_rows(named=True)}
    assert rows[1]["mean_task_accuracy"] == pytest.approx(19 / 48)
    assert rows[2]["mean_task_accuracy"] == pytest.approx(13 / 24)
    assert rows[3]["mean_task_accuracy"] == pytest.approx(29 / 48)
    for k in (1, 2, 3):
        r = rows[k]
        assert (r["n_tasks"], r["n_tasks_solved_by_any"], r["n_tasks_solved_by_all"], r["n_tasks_solved_by_none"]) \
            == (4, 3, 1, 1)
        assert r["n_participants"] == r["n_participants_finished"] == 5
    # k=3: P1 3/3 (all), P2 2/3, P3 0/2 (none), P4 2/3, P5 1/2
    assert rows[3]["share_participants_all_solved"] == pytest.approx(1 / 5)
    assert rows[3]["share_participants_none_solved"] == pytest.approx(1 / 5)
    assert rows[3]["mean_participant_solve_share"] == pytest.approx((1 + 2 / 3 + 0 + 2 / 3 + 1 / 2) / 5)
    # k=1: P1 2/3, P2 1/3, P3 0, P4 1/3, P5 1/2: nobody solved everything
    assert rows[1]["share_participants_all_solved"] == 0
    assert rows[1]["mean_participant_solve_share"] == pytest.approx((2 / 3 + 1 / 3 + 0 + 1 / 3 + 1 / 2) / 5)


def test_participant_accuracy_figure_6(computed):
    *_, participant_acc = computed
    k3 = participant_acc.filter(pl.col("max_attempts") == 3).sort("participant_id")
    assert k3.select("participant_id", "n_tasks_expected", "n_tasks_finished", "n_tasks_solved").rows() == [
        ("P1", 5, 3, 3), ("P2", 5, 3, 2), ("P3", 5, 2, 0), ("P4", 5, 3, 2), ("P5", 5, 2, 1)]
    assert k3["solve_share"].to_list() == pytest.approx([1, 2 / 3, 0, 2 / 3, 1 / 2])


def test_ten_task_experiments_expect_ten_tasks():
    actions = frame(task_events("Q", "T1", 1, exp="expv0") + task_events("R", "T1", 1, exp="expv1")
                    + task_events("S", "T1", 1, exp="expv3"))
    outcomes = accuracy.participant_task_outcomes(accuracy.summary_attempts(actions))
    people = accuracy.participants(actions, outcomes)
    assert people.select("participant_id", "n_tasks_expected").rows() == [("Q", 10), ("R", 10), ("S", 5)]


def test_tasks_by_min_solvers_figure_5(computed):
    *_, task_acc, _ = computed
    table = accuracy.tasks_by_min_solvers(task_acc).filter(pl.col("max_attempts") == 3)
    # solvers per task: T1 3, T2 2, T3 0, T4 3; the largest task has 4 participants
    assert table.select("min_solvers", "n_tasks_at_least").rows() == [(0, 4), (1, 3), (2, 3), (3, 2), (4, 0)]
    assert table["share_tasks_at_least"].to_list() == pytest.approx([1, 0.75, 0.75, 0.5, 0])
    assert set(table["n_tasks"].to_list()) == {4}


def test_table_2_descriptives(computed):
    actions, summary, outcomes, *_ = computed
    state = graphs.state_graph_table(actions)
    table = graphs.split_descriptives(state, summary, outcomes, actions).row(0, named=True)
    # events: 20 participant-tasks; P2's unfinished T3 has 2 rows, failed tasks 9, s1 5, s2 7, s3 9 rows
    n_rows = 2 + 9 * 5 + 5 * 5 + 7 * 2 + 9 * 1  # unfinished, 5 fails, 5 s1, 2 s2, 1 s3 (tutorial excluded)
    assert table["n_action_rows"] == n_rows == actions.filter(~pl.col("is_tutorial")).height
    assert (table["n_participants"], table["n_tasks"], table["n_participant_tasks"], table["n_task_attempts"]) \
        == (5, 4, 13, 27)
    # solved participant-tasks: attempts 1, 2, 1 | 3, 1 | 2, 1 | 1 -> 12 / 8
    assert table["mean_attempts_to_solution"] == pytest.approx(1.5)
    # unique grids per task: the zero start, |1|, |2|, |3| (wrong attempts) and |9| (correct) where used;
    # nobody solved T3 and T4 was solved at once by all
    per_task = dict(state.select("task_id", "n_unique_states").rows())
    assert per_task == {"T1": 5, "T2": 5, "T3": 4, "T4": 2}
    assert table["n_unique_states"] == 16


def test_a_participant_who_withdrew_during_a_first_task_counts_like_table_2(computed):
    """W edits T1 and withdraws: W is one of the split's participants (the paper's 783 training participants
    include the 90 who withdrew), as Table 2 counts them, but cannot enter the shares of participants who solved
    all or none of their tasks (W finished none)."""
    actions = pl.concat([study(), frame(task_events("W", "T1", "u"))])
    summary = accuracy.summary_attempts(actions)
    outcomes = accuracy.participant_task_outcomes(summary)
    people = accuracy.participants(actions, outcomes)
    split = accuracy.split_accuracy(accuracy.task_accuracy(outcomes), accuracy.participant_accuracy(outcomes, people))
    table_2 = graphs.split_descriptives(graphs.state_graph_table(actions), summary, outcomes, actions)
    assert table_2["n_participants"].to_list() == [6]
    assert split["n_participants"].to_list() == [6, 6, 6]
    assert split["n_participants_finished"].to_list() == [5, 5, 5]
    # the shares are those of the five participants who finished a task, exactly as without W
    before = accuracy.split_accuracy(*computed[-2:])
    shares = ["share_participants_all_solved", "share_participants_none_solved", "mean_participant_solve_share"]
    assert split.select(shares).rows() == before.select(shares).rows()
