"""ARC-TGI family transforms on hand-made frames: objects are 4-connected, agreement with unequal raters, the
much-harder flag needs a clear gap, and clashing generator names are told apart only where a prefix exists."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.ingest.harc_arc import TGI_INSTANCE
from pipeline.transforms.arctgi import agreement, families, family_audits, grid_stats, task_aliases
from schemas.validate import empty_frame


def test_objects_are_four_connected_per_colour():
    colours, objects = grid_stats([
        "|10|01|",      # two diagonal 1s: two objects (diagonals do not connect)
        "|11|11|",      # one block
        "|12|21|",      # four single cells of two colours
        "|000|000|",    # background only
        "|101|111|",    # a U of one colour: one object
    ])
    assert objects.tolist() == [2, 1, 4, 0, 1]
    assert colours.tolist() == [2, 1, 2, 1, 2]


def test_agreement_with_unequal_raters():
    units = pl.DataFrame({
        "task_id": ["a", "a", "a", "b", "b"],
        "rater_id": ["p1", "p2", "p3", "p1", "p2"],
        "first_submission": ["|1|", "|1|", "|2|", "|3|", "|4|"],
    })
    share, min_raters, kappa, n_tasks = agreement(units)
    assert share == pytest.approx((2 / 3 + 1 / 2) / 2) and (min_raters, n_tasks) == (2, 2)
    # kappa over the first 2 raters of each task (p1, p2): a -> |1|,|1|; b -> |3|,|4|
    # P_i = 1, 0 -> mean 0.5; p_j = 2/4, 1/4, 1/4 -> P_e = 0.375; kappa = (0.5 - 0.375) / 0.625
    assert kappa == pytest.approx(0.2)
    one = units.filter(pl.col("rater_id") == "p1")
    assert agreement(one)[2] is None  # one rater per task: no kappa


def _fam(task_ids: list[str], gen: str = "task0a1b2c3d") -> pl.DataFrame:
    return pl.DataFrame({"file_id": ["f"] * len(task_ids), "task_id": task_ids, "generator_name": [gen] * len(task_ids),
                         "family_prefix": [None] * len(task_ids), "family_id": [gen] * len(task_ids),
                         "source_task_id": [gen.removeprefix("task")] * len(task_ids)},
                        schema_overrides={"family_prefix": pl.String})


def _arc2(task: str, n: int, n_within: int, prefix: str) -> pl.DataFrame:
    """n sessions with one row each on test pair 0 of `task`: the first n_within solved with 1 submission, the others
    submitted 1 wrong grid."""
    return pl.DataFrame({"task_id": [task] * n, "test_index": [0] * n, "session_id": [f"{prefix}{i}" for i in range(n)],
                         "start_offset_s": [0.0] * n, "n_attempt_submissions": [1] * n,
                         "n_correct_submissions": [int(i < n_within) for i in range(n)],
                         "is_solved": [i < n_within for i in range(n)],
                         "is_solved_within_2": [i < n_within for i in range(n)],
                         "attempt_duration_s": [10.0] * n})


@pytest.mark.parametrize(("n_family", "k_family", "flagged"), [(20, 2, True), (4, 2, False)])
def test_much_harder_needs_a_gap_and_separate_intervals(n_family, k_family, flagged):
    # source 0a1b2c3d: 19 of 20 within 2; family: k of n. Both gaps exceed 0.25; only the large audit is clear.
    attempts = pl.concat([_arc2("0a1b2c3d", 20, 19, "s"), _arc2("gen1", n_family, k_family, "a")])
    harc = empty_frame("core_harc__attempts")
    out = family_audits(_fam(["gen1"]), attempts, harc, 0.95).row(0, named=True)
    assert out["source_human_data"] == "arc-agi-2" and out["source_n_attempts"] == 20
    assert out["source_solve_rate_within_2"] - out["solve_rate_within_2"] >= 0.25
    assert out["is_much_harder_than_source"] is flagged


def test_clashing_names_are_told_apart_only_with_a_prefix():
    tasks = pl.DataFrame({
        "file_id": ["f1", "f1", "f2", "f3"], "task_id": ["t1", "t2", "t3", "t4"], "row_number": [1, 2, 1, 1],
        "generator_name": ["task00576224", "task11111111", "task00576224", "task00576224"],
        "family_prefix": ["ARC-AGI-1-Train", "ARC-AGI-1-Train", "ARC-AGI-2-Eval", None],
        # four different task instances
        **{c: [f"{c} {t}" for t in ("t1", "t2", "t3", "t4")] for c in TGI_INSTANCE if c != "generator_name"}})
    fam = families(tasks)
    assert dict(zip(fam["task_id"], fam["family_id"], strict=True)) == {
        "t1": "ARC-AGI-1-Train/task00576224", "t2": "task11111111", "t3": "ARC-AGI-2-Eval/task00576224",
        "t4": "task00576224"}
    assert fam.filter(pl.col("task_id") == "t3").select("benchmark", "benchmark_split").row(0) == ("ARC-AGI-2", "eval")
    # t4's file names no folder and its name is used by two folders: which generator made it cannot be known
    assert dict(zip(fam["task_id"], fam["folder_unknown"], strict=True)) == {
        "t1": False, "t2": False, "t3": False, "t4": True}


def _tgi_rows(rows: list[tuple[str, str, int, str, str | None, str]]) -> pl.DataFrame:
    """core_arctgi__tasks-shaped rows: (file_id, task_id, row_number, generator_name, family_prefix, instance); rows
    with the same instance letter have identical code, task, chains and variables."""
    return pl.DataFrame([{"file_id": f, "task_id": t, "row_number": r, "generator_name": g, "family_prefix": p,
                          **{c: f"{c} of {inst}" for c in TGI_INSTANCE if c != "generator_name"}}
                         for f, t, r, g, p, inst in rows], schema_overrides={"family_prefix": pl.String})


def test_all_csv_repeating_the_folder_csvs_counts_each_task_once_under_its_folder():
    """The dataset generator's all.csv repeats every row of the per-folder CSVs under new task ids: a repeat is
    the folder copy's task (kept whatever the file order), and only all.csv rows no folder file holds stay
    without a folder, flagged where their generator name is used by two folders."""
    tasks = _tgi_rows([
        ("f1", "a1", 1, "task0962bcdd", "ARC-AGI-1-Train", "A"), ("f1", "a2", 2, "task0962bcdd", "ARC-AGI-1-Train", "B"),
        ("f1", "a3", 3, "task0962bcdd", "ARC-AGI-1-Train", "A"),  # the generator made A twice: two tasks
        ("f2", "b1", 1, "task0962bcdd", "ARC-AGI-2-Train", "C"),
        # all.csv: its file_id sorts first, its rows repeat A, B, C, A under new ids, then tasks of its own
        ("f0", "x1", 1, "task0962bcdd", None, "A"), ("f0", "x2", 2, "task0962bcdd", None, "B"),
        ("f0", "x3", 3, "task0962bcdd", None, "C"), ("f0", "x4", 4, "task0962bcdd", None, "D"),
        ("f0", "x5", 5, "task11111111", None, "E"), ("f0", "x6", 6, "task0962bcdd", None, "A"),
        ("f0", "x7", 7, "task0962bcdd", None, "A"),  # a third A: no folder file holds a third, its folder unknown
    ])
    fam = families(tasks).sort("task_id")
    assert fam.select("task_id", "file_id", "family_id", "folder_unknown").rows() == [
        ("a1", "f1", "ARC-AGI-1-Train/task0962bcdd", False), ("a2", "f1", "ARC-AGI-1-Train/task0962bcdd", False),
        ("a3", "f1", "ARC-AGI-1-Train/task0962bcdd", False), ("b1", "f2", "ARC-AGI-2-Train/task0962bcdd", False),
        ("x4", "f0", "task0962bcdd", True), ("x5", "f0", "task11111111", False),
        ("x7", "f0", "task0962bcdd", True)]
    # same generator name but a different instance is not a repeat; a different generator with equal content is not
    other = _tgi_rows([("f1", "a1", 1, "task0962bcdd", "ARC-AGI-1-Train", "A"),
                       ("f0", "y1", 1, "task0a938d79", None, "A")])
    assert sorted(families(other)["task_id"]) == ["a1", "y1"]


def _events(rows: list[tuple]) -> pl.DataFrame:
    """core_harc__actions-shaped rows: (participant, task, attempt, action_number, action, second, solved, grid)."""
    from datetime import datetime, timedelta

    t0 = datetime(2024, 5, 1, 10, 0, 0)
    return pl.DataFrame([{"release_generation": "osf-current", "participant_id": p, "task_id": t, "attempt_number": a,
                          "action_number": n, "action": act, "occurred_at": t0 + timedelta(seconds=s),
                          "is_solved": solved, "test_output_grid": g} for p, t, a, n, act, s, solved, g in rows])


def test_a_task_id_another_export_gives_to_a_different_task_is_its_own_task():
    """Only identical content makes two rows one task: an export that reuses a trusted export's task ids for
    tasks of its own (and whose file_id sorts first) replaced the trusted tasks, which then had no witness check
    of their own and took the other export's verdicts."""
    tasks = _tgi_rows([
        ("trusted", "t1", 1, "task11111111", "ARC-AGI-1-Train", "A"),
        ("trusted", "t2", 2, "task11111111", "ARC-AGI-1-Train", "B"),
        ("0-other", "t1", 1, "task11111111", "ARC-AGI-1-Train", "X"),  # same ids, other tasks
        ("0-other", "t2", 2, "task11111111", "ARC-AGI-1-Train", "B"),  # same id and content: one task
    ])
    fam = families(tasks)
    assert sorted(fam.select("file_id", "task_id").rows()) == [("0-other", "t1"), ("0-other", "t2"),
                                                               ("trusted", "t1")]


def test_harc_events_give_units_times_and_first_submissions():
    actions = _events([
        ("p1", "gen1", 1, 1, "edit", 0, False, "|0|"), ("p1", "gen1", 1, 2, "submit", 30, False, "|2|"),
        ("p1", "gen1", 2, 3, "submit", 50, True, "|1|"), ("p1", "gen1", 2, 4, "write_last_description", 70, True, "|1|"),
        ("p2", "gen1", 1, 1, "edit", 0, False, "|0|"), ("p2", "gen1", 1, 2, "submit", 20, False, "|2|"),
        ("p2", "gen1", 2, 3, "submit", 40, False, "|3|"), ("p2", "gen1", 3, 4, "submit", 90, True, "|1|"),
        ("p3", "gen1", 1, 1, "edit", 0, False, "|0|"),  # never submitted: no unit
    ])
    out = family_audits(_fam(["gen1"]), empty_frame("core_arc2__attempts"), empty_frame("core_harc__attempts"),
                        0.95, actions).row(0, named=True)
    assert (out["n_attempts"], out["n_solved"], out["n_solved_within_2"]) == (2, 2, 1)
    assert out["median_solved_duration_s"] == pytest.approx((70 + 90) / 2)
    # first submissions |2| and |2|: full agreement, one category (kappa undefined)
    assert out["answer_agreement"] == 1.0 and out["min_raters_per_task"] == 2 and out["fleiss_kappa"] is None


def _labels(fam: pl.DataFrame) -> dict[str, tuple]:
    return {t: (f, b, s, u) for t, f, b, s, u in fam.select("task_id", "family_id", "benchmark", "benchmark_split",
                                                            "folder_unknown").iter_rows()}


def test_a_task_of_unknown_folder_joins_a_known_family_only_when_its_name_can_mean_no_other():
    """A per-folder CSV of one ARC-AGI-2-Train generator and individual_files.csv (no folder) holding tasks of a name
    two repository folders use: the known tasks keep their folder's family and label, the others stay apart, named
    by the bare name, unlabelled and flagged. A name only one folder uses and only one known folder has: its tasks
    of unknown folder join that family."""
    tasks = _tgi_rows([
        ("f2", "k1", 1, "task0962bcdd", "ARC-AGI-2-Train", "A"), ("f2", "k2", 2, "task0962bcdd", "ARC-AGI-2-Train", "B"),
        ("f9", "u1", 1, "task0962bcdd", None, "C"), ("f9", "u2", 2, "task0962bcdd", None, "D"),
        ("f9", "u3", 3, "task0962bcdd", None, "A"),  # a copy of k1: content tells, it is k1
        ("f2", "k3", 3, "task22222222", "ARC-AGI-2-Train", "E"), ("f9", "u4", 4, "task22222222", None, "F"),
        ("f1", "k4", 1, "task33333333", "ARC-AGI-1-Train", "G"), ("f2", "k5", 4, "task33333333", "ARC-AGI-2-Train", "H"),
        ("f9", "u5", 5, "task33333333", None, "I"),  # two known folders: cannot join either
        ("f9", "u6", 6, "task44444444", None, "J"),  # no known folder, a name no other folder uses: its own family
    ])
    got = _labels(families(tasks))
    assert got == {
        "k1": ("ARC-AGI-2-Train/task0962bcdd", "ARC-AGI-2", "train", False),
        "k2": ("ARC-AGI-2-Train/task0962bcdd", "ARC-AGI-2", "train", False),
        "u1": ("task0962bcdd", None, None, True), "u2": ("task0962bcdd", None, None, True),
        "k3": ("task22222222", "ARC-AGI-2", "train", False), "u4": ("task22222222", "ARC-AGI-2", "train", False),
        "k4": ("ARC-AGI-1-Train/task33333333", "ARC-AGI-1", "train", False),
        "k5": ("ARC-AGI-2-Train/task33333333", "ARC-AGI-2", "train", False),
        "u5": ("task33333333", None, None, True),
        "u6": ("task44444444", None, None, False)}


def test_an_audit_row_naming_a_task_id_two_exports_give_to_different_tasks_counts_in_no_family():
    tasks = _tgi_rows([("f1", "SAME", 1, "task11111111", "ARC-AGI-1-Train", "A"),
                       ("f2", "SAME", 1, "task22222222", "ARC-AGI-2-Train", "B"),
                       ("f1", "own1", 2, "task11111111", "ARC-AGI-1-Train", "C"),
                       ("f3", "copy", 1, "task11111111", None, "C")])  # all.csv's copy of own1
    aliases = task_aliases(tasks)
    assert dict(zip(aliases["task_id"], aliases["is_ambiguous"], strict=True)) == {
        "SAME": True, "copy": False, "own1": False}
    attempts = pl.concat([_arc2("SAME", 1, 1, "p"), _arc2("own1", 1, 1, "q"), _arc2("copy", 1, 0, "r")])
    out = family_audits(families(tasks), attempts, empty_frame("core_harc__attempts"), 0.95, aliases=aliases)
    # SAME's row in neither family; own1 and its all.csv copy are one task of task11111111's family
    assert out.select("family_id", "n_tasks", "n_sessions", "n_attempts", "n_solved").rows() == [
        ("task11111111", 1, 2, 2, 1)]
    # without aliases, the families' own ids: an id two of them hold is left out as well
    fam = families(tasks.filter(pl.col("task_id") != "copy"))
    out = family_audits(fam, attempts, empty_frame("core_harc__attempts"), 0.95)
    assert out.select("family_id", "n_attempts").rows() == [("task11111111", 1)]


def test_a_task_id_both_exports_give_the_same_task_is_one_task_even_where_one_file_holds_it_twice():
    """Export f1 holds the same content X under t1 and t2 (the generator made it twice), and Y under t3; export f2
    holds t2 = X and t3 = Y. f2's t2 is f1's t2 (same id, same content), not f1's first X: t2 stands for one task,
    and its audit counts. Matched by the k-th equal row alone, f2's t2 was paired with f1's t1, and t2 was called
    an id given to different tasks."""
    tasks = _tgi_rows([("f1", "t1", 1, "task11111111", "ARC-AGI-1-Train", "X"),
                       ("f1", "t2", 2, "task11111111", "ARC-AGI-1-Train", "X"),
                       ("f1", "t3", 3, "task11111111", "ARC-AGI-1-Train", "Y"),
                       ("f2", "t2", 1, "task11111111", "ARC-AGI-1-Train", "X"),
                       ("f2", "t3", 2, "task11111111", "ARC-AGI-1-Train", "Y")])
    aliases = task_aliases(tasks)
    assert dict(zip(aliases["task_id"], aliases["is_ambiguous"], strict=True)) == {"t1": False, "t2": False,
                                                                                   "t3": False}
    attempts = pl.concat([_arc2("t2", 1, 1, "p"), _arc2("t3", 1, 1, "q")])
    out = family_audits(families(tasks), attempts, empty_frame("core_harc__attempts"), 0.95, aliases=aliases)
    assert out.select("family_id", "n_tasks", "n_attempts", "n_solved").rows()[0][2:] == (2, 2)
