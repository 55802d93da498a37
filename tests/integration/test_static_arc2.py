"""ARC-AGI-2 human testing logs: detection by columns, quarantine of rows that cannot be true, the unusual rows
that land, and the calibration tables of `build` against plain-Python computations on the fixture."""

from __future__ import annotations

import csv
import itertools
import math
import statistics
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.config import load_config
from pipeline.core.workspace import Workspace
from pipeline.ingest import detect, ingest_paths
from pipeline.transforms.build import build

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "static"
LOG = FIX / "arc2_attempts_mixed.csv"
AUDIT = FIX / "audit_arc2_layout.csv"
TGI = FIX / "tgi"
# rows of the fixture that cannot be true (1-based data rows) and why
IMPOSSIBLE = {10: "negative_time", 11: "missing_value", 12: "more_correct_than_submissions", 13: "missing_value",
              14: "not_an_integer", 15: "negative_time"}


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _good_rows() -> list[dict]:
    return [r for i, r in enumerate(_rows(LOG), start=1) if i not in IMPOSSIBLE]


def _certainly_within_2(submissions: int, correct: int) -> bool:
    """Every order of the attempt's correct and wrong submissions has a correct one among its first two."""
    orders = itertools.permutations([True] * correct + [False] * (submissions - correct))
    return correct >= 1 and all(any(order[:2]) for order in orders)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("arc2") / "arc2.duckdb"
    with Workspace(path) as ws:
        ingest_paths(ws, [LOG, AUDIT, TGI], run_id="test", workers=1)
        build(ws, load_config(), figures=False)
    return path


def _read(db: Path, sql: str) -> pl.DataFrame:
    with Workspace(db, read_only=True) as ws:
        return ws.read(sql)


def test_layout_is_detected_by_its_columns_in_any_order(tmp_path: Path):
    rows = _rows(LOG)
    cols = list(reversed(rows[0].keys()))
    path = tmp_path / "renamed_attempts.txt"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows[:3])
    fmt, evidence = detect(path)
    assert fmt is not None and fmt.name == "arc2-attempts" and "correct_submissions" in evidence


def test_impossible_rows_are_quarantined_with_reasons_and_unusual_rows_land(db: Path):
    q = _read(db, "SELECT source_location, check_name, reason FROM quarantine ORDER BY source_location")
    got = {int(loc.split()[1]): check for loc, check, _ in q.iter_rows()}
    assert got == IMPOSSIBLE
    reasons = " ".join(q["reason"])
    assert "negative" in reasons and "more correct submissions than submissions" in reasons
    core = _read(db, f"SELECT * FROM core_arc2__attempts WHERE file_id = (SELECT file_id FROM raw_ingest__files "
                     f"WHERE file_name = '{LOG.name}') ORDER BY row_number")
    assert core["row_number"].to_list() == [i for i in range(1, len(_rows(LOG)) + 1) if i not in IMPOSSIBLE]
    flags = dict(zip(core["row_number"], core["flags"].to_list(), strict=True))
    assert flags[4] == ["zero_submissions"] and flags[5] == ["multiple_correct"]
    # the raw layer keeps every row, the impossible ones included, as written
    raw = _read(db, f"SELECT row_json FROM raw_arc2__csv_rows r JOIN raw_ingest__files f USING (file_id) "
                    f"WHERE f.file_name = '{LOG.name}' ORDER BY row_number")
    assert raw.height == len(_rows(LOG)) and '"submissions":"1.5"' in raw["row_json"][13]


def test_pair_calibration_matches_an_independent_computation(db: Path):
    groups: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for r in _good_rows():
        groups[(r["task_ID"], int(r["test_index"]))].append(r)
    pairs = _read(db, "SELECT * FROM out_arc2__pair_calibration ORDER BY task_id, test_index")
    assert [(t, i) for t, i in pairs.select("task_id", "test_index").iter_rows()] == sorted(groups)
    for row in pairs.iter_rows(named=True):
        rs = groups[(row["task_id"], row["test_index"])]
        people = {r["session_ID"] for r in rs}
        assert len(people) == len(rs)  # one row per session in this fixture: a session's rows are one unit
        solved = [int(r["correct_submissions"]) >= 1 for r in rs]
        within = [_certainly_within_2(int(r["submissions"]), int(r["correct_submissions"])) for r in rs]
        assert row["n_attempts"] == len(rs)
        assert row["n_sessions"] == len(people)
        assert row["n_solved"] == sum(solved) and row["n_solved_within_2"] == sum(within)
        assert row["meets_two_solver_rule"] == (sum(within) >= 2)
        assert row["median_duration_s"] == pytest.approx(statistics.median(float(r["duration_seconds"]) for r in rs))
        # Wilson score interval over the sessions, written out
        n, p, z = len(people), sum(solved) / len(people), 1.959963984540054
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        assert row["solve_rate_ci_low"] == pytest.approx(max(0.0, centre - half), abs=1e-9)
        assert row["solve_rate_ci_high"] == pytest.approx(min(1.0, centre + half), abs=1e-9)
    # 00576224 pair 0: three solvers, but one needed 3 submissions
    first = pairs.row(0, named=True)
    assert (first["n_solved"], first["n_solved_within_2"]) == (3, 2)


def test_audit_rows_of_arctgi_tasks_stay_out_of_the_calibration(db: Path):
    ids = set(_read(db, "SELECT task_id FROM out_arc2__pair_calibration")["task_id"])
    assert ids == {"00576224", "13e47133"}
    assert _read(db, "SELECT sum(n_attempts) AS n FROM out_arc2__pair_calibration")["n"][0] == len(_good_rows())


def test_session_accuracy_and_its_mean(db: Path):
    per: dict[str, dict[tuple, bool]] = defaultdict(dict)
    for r in _good_rows():
        ok = _certainly_within_2(int(r["submissions"]), int(r["correct_submissions"]))
        key = (r["task_ID"], r["test_index"])
        per[r["session_ID"]][key] = per[r["session_ID"]].get(key, False) or ok
    sessions = _read(db, "SELECT * FROM out_arc2__session_accuracy ORDER BY session_id")
    expected = {s: sum(v.values()) / len(v) for s, v in per.items()}
    assert dict(zip(sessions["session_id"], sessions["session_score"], strict=True)) == pytest.approx(expected)
    repro = _read(db, "SELECT * FROM out_arc2__reproduction")
    score = repro.filter(pl.col("claim_id") == "average_test_taker_score").row(0, named=True)
    assert score["measured_value"] == pytest.approx(statistics.mean(expected.values()))
    assert score["claimed_value"] == 0.6 and score["reproduction_status"] == "cannot_check"
    assert "public" in score["explanation"]


def test_task_rule_needs_every_pair(tmp_path: Path):
    # task ffffffff: pair 0 solved within 2 by two sessions, pair 1 by only one -> the task fails the rule
    path = tmp_path / "one_task.csv"
    rows = [["ffffffff", "Public Eval", 0, "a", 0, 100, 1, 1], ["ffffffff", "Public Eval", 0, "b", 0, 200, 2, 1],
            ["ffffffff", "Public Eval", 1, "a", 100, 50, 1, 1], ["ffffffff", "Public Eval", 1, "b", 200, 60, 3, 1]]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["task_ID", "task_set", "test_index", "session_ID", "start_time_seconds", "duration_seconds",
                    "submissions", "correct_submissions"])
        w.writerows(rows)
    db = tmp_path / "one.duckdb"
    with Workspace(db) as ws:
        ingest_paths(ws, [path], run_id="t", workers=1)
        build(ws, load_config(), figures=False)
        task = ws.read("SELECT * FROM out_arc2__task_calibration").row(0, named=True)
        durations = ws.read("SELECT * FROM out_arc2__set_durations WHERE task_set = 'all'").row(0, named=True)
        repro = ws.read("SELECT * FROM out_arc2__reproduction WHERE claim_id = 'kept_tasks_two_solvers'")
    assert (task["n_test_pairs"], task["n_pairs_meeting_rule"], task["meets_two_solver_rule"]) == (2, 1, False)
    # per session x task: a = 100 + 50, b = 200 + 60
    assert task["median_task_duration_s"] == pytest.approx(statistics.median([150, 260]))
    assert durations["median_task_duration_s"] == pytest.approx(205)
    assert repro["reproduction_status"][0] == "not_reproduced" and repro["measured_value"][0] == 0.0


def test_cli_exit_code_says_rows_were_rejected(tmp_path: Path):
    from typer.testing import CliRunner

    from pipeline.cli import app

    res = CliRunner().invoke(app, ["ingest", str(LOG), "--db", str(tmp_path / "c.duckdb")])
    assert res.exit_code == 3, res.output
    assert "arc2-attempts" in res.output and f"{len(IMPOSSIBLE)} records quarantined" in res.output


def test_odd_files_and_rows(tmp_path: Path):
    header = "task_ID,task_set,test_index,session_ID,start_time_seconds,duration_seconds,submissions,correct_submissions"
    (tmp_path / "odd.csv").write_text(header + "\n00576224,Public Eval,0,s1,0,1,1\n00576224,Public Eval,0,s2,0,nan,1,1\n"
                                      "00576224,Public Eval,0,s3,,,1,1\n")
    (tmp_path / "missing.csv").write_text(header.rsplit(",", 1)[0] + "\n00576224,Public Eval,0,s1,0,1,1\n")
    with Workspace(tmp_path / "o.duckdb") as ws:
        report = ingest_paths(ws, [tmp_path / "odd.csv", tmp_path / "missing.csv"], run_id="t", workers=1)
        q = ws.read("SELECT file_path, source_location, check_name, reason FROM quarantine ORDER BY 1, 2")
        core = ws.read("SELECT row_number, attempt_duration_s, flags FROM core_arc2__attempts")
    status = {f.path.name: f.status for f in report.files}
    assert status == {"odd.csv": "loaded", "missing.csv": "rejected"}
    rows = {(Path(p).name, loc): (check, reason) for p, loc, check, reason in q.iter_rows()}
    assert rows[("odd.csv", "row 1")][0] == "field_count" and "correct_submissions" in rows[("odd.csv", "row 1")][1]
    assert rows[("odd.csv", "row 2")][0] == "not_a_number"
    assert rows[("missing.csv", "file")][0] == "header_unknown" and "missing correct_submissions" in \
        rows[("missing.csv", "file")][1]
    # empty times land: the row counts, its time does not
    assert core.rows() == [(3, None, ["no_duration"])]


def test_a_count_past_64_bits_is_out_of_range_not_not_an_integer(tmp_path: Path):
    """It was rejected as `not_an_integer` ("expected a whole number"), which it is."""
    header = "task_ID,task_set,test_index,session_ID,start_time_seconds,duration_seconds,submissions,correct_submissions"
    (tmp_path / "big.csv").write_text(header + "\n00576224,Public Eval,0,s1,0,1,99999999999999999999,1\n"
                                      "00576224,Public Eval,0,s2,0,1,1.5,1\n")
    with Workspace(tmp_path / "b.duckdb") as ws:
        ingest_paths(ws, [tmp_path / "big.csv"], run_id="t", workers=1)
        q = ws.read("SELECT source_location, check_name, reason FROM quarantine ORDER BY 1")
    assert q.rows() == [
        ("row 1", "out_of_range", "submissions is '99999999999999999999', outside -2**63..2**63-1 (the 64-bit "
         "integers)"),
        ("row 2", "not_an_integer", "submissions is '1.5', expected a whole number")]


def test_solved_within_2_is_exactly_what_the_counts_prove():
    """The rule against every order the counts allow: solved within 2 exactly when no order puts the correct
    submissions past the second."""
    from pipeline.ingest.arc2 import solved_within_2

    grid = pl.DataFrame([(n, c) for n in range(7) for c in range(n + 1)], schema=["n", "c"], orient="row")
    got = grid.select(solved_within_2(pl.col("n"), pl.col("c")).alias("w"))["w"].to_list()
    assert got == [_certainly_within_2(n, c) for n, c in grid.iter_rows()]
    assert dict(zip(grid.iter_rows(), got, strict=True))[(3, 2)] is True
    assert dict(zip(grid.iter_rows(), got, strict=True))[(3, 1)] is False


# A hand-made log. Per row, solved within 2 worked out by hand: the counts prove it when the row has a correct
# submission and at most 2 submissions or at most one wrong one; 3 submissions with 1 correct cannot be known.
HAND_LOG = [
    # task, set, pair, session, start, duration, submissions, correct, within 2
    ("aaaa0001", "Public Eval", 0, "s1", 0, 100, 1, 1, True),
    ("aaaa0001", "Public Eval", 0, "s2", 10, 200, 3, 1, False),   # the correct one may have been the 3rd
    ("aaaa0001", "Public Eval", 0, "s3", 0, 50, 0, 0, False),
    ("aaaa0001", "Public Eval", 0, "s4", 5, 400, 4, 3, True),     # one wrong: one of the first two was correct
    ("aaaa0001", "Public Eval", 1, "s1", 100, 60, 3, 2, True),    # one wrong
    ("aaaa0001", "Public Eval", 1, "s2", 210, 30, 2, 1, True),
    ("aaaa0001", "Public Eval", 1, "s3", 50, 70, 5, 2, False),    # three wrong: may all have come first
    ("bbbb0002", "Public Train", 0, "s1", 160, 90, 1, 0, False),
    ("bbbb0002", "Public Train", 0, "s2", 240, 80, 3, 3, True),
    ("bbbb0002", "Public Train", 0, "s3", 120, 40, 2, 1, True),
]


def test_rows_with_three_submissions_and_one_wrong_count_as_solved_within_2(tmp_path: Path):
    path = tmp_path / "hand.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["task_ID", "task_set", "test_index", "session_ID", "start_time_seconds", "duration_seconds",
                    "submissions", "correct_submissions"])
        w.writerows(r[:-1] for r in HAND_LOG)
    with Workspace(tmp_path / "h.duckdb") as ws:
        ingest_paths(ws, [path], run_id="t", workers=1)
        build(ws, load_config(), figures=False)
        rows = ws.read("SELECT is_solved_within_2 FROM core_arc2__attempts ORDER BY row_number")
        pairs = ws.read("SELECT task_id, test_index, n_solved, n_solved_within_2, meets_two_solver_rule "
                        "FROM out_arc2__pair_calibration ORDER BY task_id, test_index")
        tasks = ws.read("SELECT task_id, n_pairs_meeting_rule, meets_two_solver_rule FROM out_arc2__task_calibration "
                        "ORDER BY task_id")
        sessions = ws.read("SELECT session_id, n_pairs_attempted, n_pairs_solved_within_2 "
                           "FROM out_arc2__session_accuracy ORDER BY session_id")
        repro = ws.read("SELECT claim_id, measured_value, reproduction_status FROM out_arc2__reproduction")
    assert rows["is_solved_within_2"].to_list() == [r[-1] for r in HAND_LOG]
    # aaaa0001/0: s1, s4 within 2 (s2 solved, not provably within 2); aaaa0001/1: s1, s2; bbbb0002/0: s2, s3
    assert pairs.rows() == [("aaaa0001", 0, 3, 2, True), ("aaaa0001", 1, 3, 2, True), ("bbbb0002", 0, 2, 2, True)]
    assert tasks.rows() == [("aaaa0001", 2, True), ("bbbb0002", 1, True)]
    # s1: a/0, a/1 of a/0, a/1, b/0; s2: a/1, b/0 of three; s3: b/0 of three; s4: a/0 of one
    assert sessions.rows() == [("s1", 3, 2), ("s2", 3, 2), ("s3", 3, 1), ("s4", 1, 1)]
    claims = {c: (v, st) for c, v, st in repro.iter_rows()}
    assert claims["kept_tasks_two_solvers"] == (1.0, "reproduced")
    assert claims["average_test_taker_score"][0] == pytest.approx((2 / 3 + 2 / 3 + 1 / 3 + 1) / 4)


HEADER = ["task_ID", "task_set", "test_index", "session_ID", "start_time_seconds", "duration_seconds", "submissions",
          "correct_submissions"]


def _write(path: Path, rows: list[list]) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(HEADER)
        w.writerows(rows)
    return path


def test_two_solver_rule_needs_two_people_not_two_rows(tmp_path: Path):
    """One session solving a pair in two rows is one solver: the pair does not meet the rule, and a session whose
    correct grid came after two wrong ones (rows (2, 0) then (1, 1)) did not solve it within 2."""
    log = _write(tmp_path / "people.csv", [
        ["11111111", "Public Train", 0, "S1", 300, 400, 1, 0],
        ["11111111", "Public Train", 0, "S1", 700, 100, 1, 1],
        ["11111111", "Public Train", 0, "S1", 800, 100, 1, 1],
        ["33333333", "Public Eval", 0, "S1", 0, 100, 1, 1],
        ["33333333", "Public Eval", 0, "S2", 500, 100, 1, 1],   # S2's rows listed late, in reverse order
        ["33333333", "Public Eval", 0, "S3", 0, 100, 2, 0],
        ["33333333", "Public Eval", 0, "S3", 90, 100, 1, 1],
        ["33333333", "Public Eval", 0, "S2", 10, 100, 2, 0]])
    with Workspace(tmp_path / "p.duckdb") as ws:
        ingest_paths(ws, [log], run_id="t", workers=1)
        build(ws, load_config(), figures=False)
        pairs = ws.read("SELECT task_id, n_attempts, n_sessions, n_solved, n_solved_within_2, meets_two_solver_rule "
                        "FROM out_arc2__pair_calibration ORDER BY task_id")
        tasks = ws.read("SELECT task_id, n_solved, n_solved_within_2, meets_two_solver_rule "
                        "FROM out_arc2__task_calibration ORDER BY task_id")
        sessions = ws.read("SELECT session_id, n_pairs_solved_within_2 FROM out_arc2__session_accuracy ORDER BY 1")
        repro = ws.read("SELECT measured_value, reproduction_status, explanation FROM out_arc2__reproduction "
                        "WHERE claim_id = 'kept_tasks_two_solvers'").row(0, named=True)
    # 11111111: S1 alone (wrong, then right on the second submission); 33333333: S1 within 2, S2 and S3 solved on
    # their third submission
    assert pairs.rows() == [("11111111", 3, 1, 1, 1, False), ("33333333", 5, 3, 3, 1, False)]
    assert tasks.rows() == [("11111111", 1, 1, False), ("33333333", 3, 1, False)]
    assert sessions.rows() == [("S1", 2), ("S2", 0), ("S3", 0)]
    assert (repro["measured_value"], repro["reproduction_status"]) == (0.0, "not_reproduced")
    assert repro["explanation"].startswith("0 of 2 tasks")


def test_an_exact_repeated_row_is_quarantined_and_the_first_kept(tmp_path: Path):
    """Equal in every value (10 and 10.0 are one start time; an empty time equals an empty one): one attempt
    written twice. A session's other row on the same pair is another attempt and lands."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    log = _write(tmp_path / "repeats.csv", [
        ["22222222", "Public Eval", 0, "S2", 10, 200, 1, 1],
        ["22222222", "Public Eval", 0, "S2", "10.0", 200, 1, 1],   # row 1 again
        ["22222222", "Public Eval", 0, "S2", 300, 200, 1, 1],      # S2 again, later: another attempt
        ["22222222", "Public Eval", 0, "S3", "", 50, 2, 0],
        ["22222222", "Public Eval", 0, "S3", "", 50, 2, 0],        # row 4 again
        ["22222222", "Public Eval", 0, "S3", "", 50, 2, 0],        # row 4 again
        ["22222222", "Public Eval", 0, "S4", 0, 50, 1, 2]])        # cannot be true: not a copy of anything
    db = tmp_path / "r.duckdb"
    res = CliRunner().invoke(app, ["ingest", str(log), "--db", str(db), "--workers", "1"])
    assert res.exit_code == 3, res.output
    with Workspace(db, read_only=True) as ws:
        q = ws.read("SELECT source_location, check_name, reason FROM quarantine ORDER BY source_location")
        core = ws.read("SELECT row_number FROM core_arc2__attempts ORDER BY row_number")
        raw = ws.read("SELECT count(*) AS n FROM raw_arc2__csv_rows")
    assert [(loc, check) for loc, check, _ in q.iter_rows()] == [
        ("row 2", "duplicate_row"), ("row 5", "duplicate_row"), ("row 6", "duplicate_row"),
        ("row 7", "more_correct_than_submissions")]
    reasons = dict(zip(q["source_location"], q["reason"], strict=True))
    assert reasons["row 2"].startswith("exact copy of row 1 (session_ID=S2, task_ID=22222222, test_index=0")
    assert "the first copy was loaded" in reasons["row 2"]
    assert reasons["row 6"].startswith("exact copy of row 4 ") and "start_time_seconds=(empty)" in reasons["row 6"]
    assert core["row_number"].to_list() == [1, 3, 4]
    assert raw["n"][0] == 7  # the raw layer keeps every row as read


def _log_copies(folder: Path) -> list[Path]:
    """A log, then the same rows as a CRLF copy, as a BOM copy under another folder with a blank line at the end,
    and with its columns in another order and its numbers written otherwise."""
    rows = [["19bb5feb", "Public Eval", 0, "S1", 0, 100, 1, 1], ["19bb5feb", "Public Eval", 0, "S2", "", 100, 2, 0]]
    first = _write(folder / "log.csv", rows)
    text = first.read_text()
    assert "\r" not in text
    crlf = folder / "log_crlf.csv"
    crlf.write_bytes(text.replace("\n", "\r\n").encode())
    (folder / "other").mkdir()
    bom = folder / "other" / "log.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode() + b"\n")
    moved = folder / "reordered.csv"
    with open(moved, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(list(reversed(HEADER)))
        w.writerows([["1", "1", "100.0", "0.0", "S1", "0", "Public Eval", "19bb5feb"],
                     ["0", "2", "100", "", "S2", "0", "Public Eval", "19bb5feb"]])
    return [first, crlf, bom, moved]


@pytest.mark.parametrize("one_run", [True, False])
def test_a_copy_of_a_log_in_another_file_is_quarantined_naming_the_first(tmp_path: Path, one_run: bool):
    first, *copies = _log_copies(tmp_path)
    db = tmp_path / "c.duckdb"
    with Workspace(db) as ws:
        if one_run:  # small files: committed in one batch unless a row clashes
            report = ingest_paths(ws, [first, *copies], run_id="t", workers=1)
            statuses = [f.status for f in report.files]
        else:
            statuses = [f.status for p in [first, *copies]
                        for f in ingest_paths(ws, [p], run_id=f"t{p.stem}", workers=1).files]
        ingest_paths(ws, [first], run_id="again", workers=1, force=True)  # its own rows are no copies
        build(ws, load_config(), figures=False)
        core = ws.read("SELECT f.file_path, a.row_number FROM core_arc2__attempts a JOIN raw_ingest__files f "
                       "USING (file_id) ORDER BY 2")
        q = ws.read("SELECT file_path, source_location, check_name, reason FROM quarantine ORDER BY 1, 2")
        pair = ws.read("SELECT n_attempts, n_sessions, n_solved_within_2, meets_two_solver_rule "
                       "FROM out_arc2__pair_calibration").rows()
    assert statuses == ["loaded"] * 4
    assert core.rows() == [(str(first), 1), (str(first), 2)]
    assert pair == [(2, 2, 1, False)]
    assert sorted((Path(p).relative_to(tmp_path).as_posix(), loc) for p, loc, _, _ in q.iter_rows()) == sorted(
        (c.relative_to(tmp_path).as_posix(), f"row {r}") for c in copies for r in (1, 2))
    assert set(q["check_name"]) == {"duplicate_across_files"}
    for loc, reason in zip(q["source_location"], q["reason"], strict=True):
        assert reason.startswith("core_arc2__attempts already holds (session_id=")
        assert reason.endswith(f"from {first} {loc}")  # the first file, and its row


def test_cli_exit_code_says_a_copy_was_quarantined(tmp_path: Path):
    from typer.testing import CliRunner

    from pipeline.cli import app

    first, crlf, *_ = _log_copies(tmp_path)
    db = str(tmp_path / "e.duckdb")
    assert CliRunner().invoke(app, ["ingest", str(first), "--db", db]).exit_code == 0
    res = CliRunner().invoke(app, ["ingest", str(crlf), "--db", db])
    assert res.exit_code == 3 and "2 records quarantined" in res.output, res.output


def test_forgetting_the_first_file_says_which_copy_to_ingest_again(tmp_path: Path):
    """Once the file a copy's rows were quarantined against is forgotten, nothing holds those rows: forget names
    the copy and how to load it, and doing so loads them."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    first, crlf, *_ = _log_copies(tmp_path)
    db = str(tmp_path / "f.duckdb")
    assert CliRunner().invoke(app, ["ingest", str(first), str(crlf), "--db", db]).exit_code == 3
    res = CliRunner().invoke(app, ["--plain", "forget", str(first), "--db", db])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert f"{crlf}: 2 of its rows were quarantined as copies" in said and "`arcstudy ingest --force`" in said, said
    assert CliRunner().invoke(app, ["ingest", "--force", str(crlf), "--db", db]).exit_code == 0
    with Workspace(Path(db), read_only=True) as ws:
        assert ws.read("SELECT count(*) AS n FROM core_arc2__attempts")["n"][0] == 2


def test_a_copy_whose_rows_have_empty_times_is_still_a_copy(tmp_path: Path):
    """Empty values match empty ones, in one batch of small files and against the database."""
    rows = [["19bb5feb", "Public Eval", 0, "S9", "", "", 1, 1]]
    a, b, c = (_write(tmp_path / f"{n}.csv", rows) for n in ("a", "b", "c"))
    b.write_bytes(b.read_bytes() + b"\n")  # other bytes, same row
    c.write_bytes(b"\xef\xbb\xbf" + c.read_bytes())
    with Workspace(tmp_path / "n.duckdb") as ws:
        ingest_paths(ws, [a, b], run_id="one", workers=1)
        ingest_paths(ws, [c], run_id="two", workers=1)
        core = ws.read("SELECT f.file_name FROM core_arc2__attempts JOIN raw_ingest__files f USING (file_id)")
        q = ws.read("SELECT file_name, check_name FROM quarantine JOIN raw_ingest__files USING (file_id) ORDER BY 1")
    assert core["file_name"].to_list() == ["a.csv"]
    assert q.rows() == [("b.csv", "duplicate_across_files"), ("c.csv", "duplicate_across_files")]
