"""ARC-AGI-2 solvers are sessions: a session's rows on one test pair are one unit, solved within 2 judged over its
submissions in start-time order (pipeline.transforms.arc2.session_pairs), against every order the rows allow."""

from __future__ import annotations

import itertools
import random

import polars as pl
import pytest

from pipeline.transforms.arc2 import pair_calibration, session_accuracy, session_pairs

COLS = {"task_id": pl.String, "test_index": pl.Int64, "session_id": pl.String, "task_set": pl.String,
        "start_offset_s": pl.Float64, "attempt_duration_s": pl.Float64, "n_attempt_submissions": pl.Int64,
        "n_correct_submissions": pl.Int64}


def _rows(rows: list[tuple]) -> pl.DataFrame:
    """(session, start, submissions, correct) rows on pair aaaa0001/0."""
    return pl.DataFrame([("aaaa0001", 0, s, "Public Eval", t, 10.0, n, c) for s, t, n, c in rows],
                        schema=COLS, orient="row")


def _certain_within_2(rows: list[tuple[float | None, int, int]]) -> bool:
    """Every order of the rows that their start times allow (an empty time: anywhere; equal times: either way)
    and every order of each row's submissions puts a correct one among the first two."""
    def allowed(order) -> bool:
        return all(not (a[0] is not None and b[0] is not None and a[0] > b[0])
                   for i, a in enumerate(order) for b in order[i + 1:])

    for order in itertools.permutations(rows):
        if not allowed(order):
            continue
        for inner in itertools.product(*[set(itertools.permutations([True] * c + [False] * (n - c)))
                                         for _, n, c in order]):
            if not any([x for seq in inner for x in seq][:2]):
                return False
    return True


@pytest.mark.parametrize(("rows", "within"), [
    ([(0, 2, 0), (100, 1, 1)], False),    # the correct grid was the third submission
    ([(100, 1, 1), (0, 2, 0)], False),    # the same, listed in another order: the times order them
    ([(0, 1, 0), (50, 1, 1)], True),      # wrong, then right: the second submission
    ([(0, 1, 0), (50, 2, 1)], False),     # one wrong before, one wrong in the row: maybe the third
    ([(0, 1, 1), (50, 5, 0)], True),      # solved first; what came after does not matter
    ([(0, 0, 0), (9, 0, 0), (50, 2, 1)], True),  # rows without submissions add none
    ([(None, 2, 0), (5, 1, 1)], False),   # the untimed wrong row may have come first
    ([(None, 1, 1), (5, 2, 0)], False),   # the untimed solved row may have come last
    ([(5, 1, 0), (5, 1, 1)], True),       # same second, either order: correct by the second submission
    ([(5, 2, 0), (5, 1, 1)], False),      # same second: the two wrong ones may have come first
    ([(0, 1, 0), (9, 1, 0), (20, 1, 1)], False),
])
def test_a_sessions_rows_are_judged_in_order(rows, within):
    assert _certain_within_2(rows) is within  # the worked example agrees with the oracle
    unit = session_pairs(_rows([("s1", *r) for r in rows])).row(0, named=True)
    assert (unit["n_rows"], unit["is_solved"], unit["is_solved_within_2"]) == (
        len(rows), any(c >= 1 for _, _, c in rows), within)


def test_session_pairs_match_every_order_the_times_allow():
    """Random sessions of 1-3 rows (times from a small set, some empty; up to 3 submissions a row)."""
    rng = random.Random(7)
    cases, rows = [], []
    for i in range(300):
        case = []
        for _ in range(rng.randint(1, 3)):
            n = rng.randint(0, 3)
            case.append((rng.choice([None, 0.0, 10.0, 10.0, 20.0]), n, rng.randint(0, n)))
        cases.append(case)
        rows += [(f"s{i:03d}", *r) for r in case]
    got = session_pairs(_rows(rows)).sort("session_id")
    assert got["is_solved_within_2"].to_list() == [_certain_within_2(c) for c in cases]
    assert got["is_solved"].to_list() == [any(r[2] >= 1 for r in c) for c in cases]


def test_one_person_is_one_solver_however_many_rows():
    # s1 solved the pair twice (two rows) and s2 once in two rows: 2 people, 3 solved rows
    rows = _rows([("s1", 0, 1, 1), ("s1", 60, 1, 1), ("s2", 0, 1, 0), ("s2", 30, 1, 1), ("s3", 0, 3, 0)])
    pair = pair_calibration(rows, 0.95).row(0, named=True)
    assert (pair["n_attempts"], pair["n_sessions"], pair["n_solved"], pair["n_solved_within_2"]) == (5, 3, 2, 2)
    assert pair["meets_two_solver_rule"] is True
    assert pair["attempt_solve_rate"] == pytest.approx(2 / 3) and pair["solve_rate_within_2"] == pytest.approx(2 / 3)
    alone = pair_calibration(rows.filter(pl.col("session_id") == "s1"), 0.95).row(0, named=True)
    assert (alone["n_solved"], alone["n_solved_within_2"], alone["meets_two_solver_rule"]) == (1, 1, False)
    # session accuracy: the pair once per session; s3 never solved it
    acc = session_accuracy(rows)
    assert acc.select("session_id", "n_pairs_attempted", "n_pairs_solved_within_2").rows() == [
        ("s1", 1, 1), ("s2", 1, 1), ("s3", 1, 0)]
    assert acc["total_duration_s"].to_list() == [20.0, 20.0, 10.0]
