"""H-ARC and ARC task files a hostile or careless source could hand over, beyond the malformed corpus of
test_ingest_harc.py: each bad record is quarantined with its location and a reason a person can act on, the
good records of the same file still land, and the run's exit code is 3."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace
from tests.fixtures import harc as fx

EXIT_REJECTED = 3
DEEP = "[" * 100_000 + "]" * 100_000


def ingest(path: Path, db: Path):
    return CliRunner().invoke(app, ["--plain", "ingest", str(path), "--db", str(db), "--workers", "1"])


def quarantine(db: Path) -> list[tuple]:
    with Workspace(db, read_only=True) as ws:
        return ws.read("SELECT source_location, check_name, reason FROM quarantine ORDER BY source_location").rows()


def count(db: Path, table: str) -> int:
    with Workspace(db, read_only=True) as ws:
        return ws.read(f"SELECT count(*) AS n FROM {table}")["n"][0]


def test_a_data_row_with_json_nested_too_deeply_is_quarantined_and_the_other_rows_land(tmp_path):
    rows = fx.data_rows()
    rows[2] = {**rows[2], "selected_data": DEEP}
    path = fx.write_data(tmp_path / "data.csv", rows)
    res = ingest(path, tmp_path / "db.duckdb")
    assert res.exit_code == EXIT_REJECTED, res.output
    assert "Traceback" not in res.output
    got = quarantine(tmp_path / "db.duckdb")
    assert [(loc, check) for loc, check, _ in got] == [("row 3", "invalid_json")], got
    assert "nested too deeply" in got[0][2]
    assert count(tmp_path / "db.duckdb", "core_harc__actions") == len(rows) - 1


def test_a_task_file_nested_too_deeply_says_so(tmp_path):
    path = tmp_path / "0a1b2c3d.json"
    path.write_text('{"train": ' + DEEP + ', "test": []}', encoding="utf-8")
    res = ingest(path, tmp_path / "db.duckdb")
    assert res.exit_code == EXIT_REJECTED, res.output
    got = quarantine(tmp_path / "db.duckdb")
    assert len(got) == 1 and got[0][0] == "file" and got[0][1] == "invalid_json", got
    assert "nested too deeply" in got[0][2]


def test_a_tgi_field_nested_too_deeply_is_quarantined_and_the_other_rows_land(tmp_path):
    rows = fx.tgi_rows(tmp_path / "EXECUTED")
    rows[1] = {**rows[1], "task_variables": DEEP}
    path = fx.write_tgi(tmp_path / "task0b148d64.csv", rows)
    res = ingest(path, tmp_path / "db.duckdb")
    assert res.exit_code == EXIT_REJECTED, res.output
    got = quarantine(tmp_path / "db.duckdb")
    assert [(loc, check) for loc, check, _ in got] == [("row 2", "invalid_json")], got
    assert "nested too deeply" in got[0][2]
    assert count(tmp_path / "db.duckdb", "core_arctgi__tasks") == len(rows) - 1
    assert not (tmp_path / "EXECUTED").exists()


def test_a_task_collection_with_a_bad_entry_keeps_its_good_tasks(tmp_path):
    good = {"train": [{"input": [[1]], "output": [[2]]}], "test": [{"input": [[1]]}]}
    path = fx.write_task(tmp_path / "training_challenges.json",
                         {"0000000a": good, "0000000b": 5, "0000000c": {"train": None}})
    res = ingest(path, tmp_path / "db.duckdb")
    assert res.exit_code == EXIT_REJECTED, res.output
    got = quarantine(tmp_path / "db.duckdb")
    assert [(loc, check) for loc, check, _ in got] == [("task 0000000b", "task_structure"),
                                                       ("task 0000000c", "task_structure")], got
    assert "not a JSON object" in got[0][2] and "missing test" in got[1][2]
    assert count(tmp_path / "db.duckdb", "core_arc__tasks") == 1


def test_a_task_without_its_test_list_is_named_as_such(tmp_path):
    path = fx.write_task(tmp_path / "0a1b2c3d.json", {"train": [{"input": [[1]], "output": [[2]]}]})
    res = ingest(path, tmp_path / "db.duckdb")
    assert res.exit_code == EXIT_REJECTED, res.output
    got = quarantine(tmp_path / "db.duckdb")
    assert [(loc, check) for loc, check, _ in got] == [("file", "task_structure")], got
    assert "missing test" in got[0][2]


def test_a_file_with_bare_cr_line_ends_is_refused_with_a_reason_that_says_so(tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(fx.csv_text(fx.data_rows(), fx.DATA_COLUMNS).replace("\r\n", "\n").replace("\n", "\r").encode())
    res = ingest(path, tmp_path / "db.duckdb")
    assert res.exit_code == EXIT_REJECTED, res.output
    got = quarantine(tmp_path / "db.duckdb")
    assert len(got) == 1 and got[0][0] == "file", got
    assert "bare CR" in got[0][2] and "LF" in got[0][2], got


def test_harc_graph_never_writes_outside_its_folder_for_a_task_id_that_is_a_path(tmp_path):
    rows = []
    for row in fx.data_rows():  # the release names tasks by file; here one name climbs out of the folder
        if row["task_name"] == "007bbfb7.json":
            row = {**row, "task_name": "../../pwn.json",
                   "joint_id_task": row["joint_id_task"].replace("007bbfb7", "../../pwn")}
        rows.append(row)
    db = tmp_path / "db.duckdb"
    ingest(fx.write_data(tmp_path / "in" / "data.csv", rows), db)
    out = tmp_path / "a" / "b"
    res = CliRunner().invoke(app, ["--plain", "harc-graph", "../../pwn", "--db", str(db), "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "plain" in res.output
    assert not list(tmp_path.rglob("pwn*"))


def test_harc_report_on_a_split_without_any_analysable_task(tmp_path):
    # summary_data.csv names a task nobody has events for: its split gets accuracy rows with no mean
    files = tmp_path / "in"
    fx.write_data(files / "data.csv", fx.data_rows())
    fx.write_task(files / "007bbfb7.json", fx.TASK_007)
    summary = fx.summary_rows()
    summary.append({**summary[0], "task_name": "abcdef12.json",
                    "joint_id_task": summary[0]["hashed_id"] + "_abcdef12.json"})
    fx.write_summary(files / "summary_data.csv", summary)
    db = tmp_path / "db.duckdb"
    assert ingest(files, db).exit_code == 0
    runner = CliRunner()
    res = runner.invoke(app, ["--plain", "harc-analyses", "--db", str(db), "--simulations", "10"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["--plain", "report", "harc", "--db", str(db), "--out", str(tmp_path / "reports")])
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    assert (tmp_path / "reports" / "harc.html").is_file()


@pytest.mark.parametrize("parser", ["polars", "csv module"])
def test_rows_holding_nul_bytes_are_quarantined_and_the_other_rows_land(tmp_path, parser):
    rows = fx.data_rows()
    rows[1] = {**rows[1], "exp_name": "\x00" + rows[1]["exp_name"]}
    rows[3] = {**rows[3], "first_written_solution": "ab\x00cd"}
    path = fx.write_data(tmp_path / "data.csv", rows)
    if parser == "csv module":  # a row with a surplus field makes polars give the file to Python's csv module
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join([*lines[:6], lines[6].rstrip("\n") + ",surplus\n", *lines[7:]]))
    res = ingest(path, tmp_path / "db.duckdb")
    assert res.exit_code == EXIT_REJECTED, res.output
    got = [(loc, check) for loc, check, _ in quarantine(tmp_path / "db.duckdb") if check == "nul_byte"]
    assert parser == "polars" or any(check == "field_count" for _, check, _ in quarantine(tmp_path / "db.duckdb"))
    assert got == [("row 2", "nul_byte"), ("row 4", "nul_byte")]
    with Workspace(tmp_path / "db.duckdb", read_only=True) as ws:
        names = ws.read("SELECT exp_name FROM core_harc__actions")["exp_name"].to_list()
    assert names and not any("\x00" in (n or "") for n in names)
    assert count(tmp_path / "db.duckdb", "core_harc__actions") == len(rows) - 2 - (parser == "csv module")


@pytest.mark.parametrize("slice_rows", [1, 2, 8192])
def test_every_reject_of_a_file_lands_in_quarantine_whatever_the_slices_it_is_written_in(tmp_path, monkeypatch,
                                                                                         slice_rows):
    """The quarantine of a file is written a slice at a time (a file can have 100k rejects with their rows), and a
    check's rejects are made a slice of its failing rows at a time (a flood holds one slice's reasons)."""
    from pipeline.ingest import commit, harc_csv

    monkeypatch.setattr(commit, "QUARANTINE_SLICE_ROWS", slice_rows)
    monkeypatch.setattr(harc_csv, "REJECT_SLICE_ROWS", slice_rows)
    rows = fx.data_rows()
    for i in (1, 3, 4):
        rows[i] = {**rows[i], "attempt_number": "seven"}
    path = fx.write_data(tmp_path / "data.csv", rows)
    res = ingest(path, tmp_path / "db.duckdb")
    assert res.exit_code == EXIT_REJECTED, res.output
    got = quarantine(tmp_path / "db.duckdb")
    assert [(loc, check) for loc, check, _ in got] == [(f"row {i + 1}", "not_an_integer") for i in (1, 3, 4)], got
    assert count(tmp_path / "db.duckdb", "core_harc__actions") == len(rows) - 3
