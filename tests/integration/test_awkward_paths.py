"""Paths that cannot be stored as text, or resolved, are that file's failure, never the run's:

- a file name with bytes that are not UTF-8 (Python holds them as lone surrogates, which DuckDB, polars and
  Parquet refuse) inside a folder given to `ingest` or `score`: that file is rejected under its name shown with
  \\xNN, and the other files land (it once crashed both commands, and the good files were lost);
- such a name given as an argument (an input, --out, --db): a usage error that says so, before anything is
  written (it once crashed, leaving a database file or an empty dataset folder behind);
- a symlink loop inside a folder given to `ingest`: unreadable, said, the rest loads (it crashed the run).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT.parent / "shared" / "samples" / "arc-agi-3" / "fixtures"
GOOD = SAMPLES / "ck17_scripted-win.noframes.jsonl"
OTHER = SAMPLES / "an53_scripted-lose.noframes.jsonl"
GAMES = ROOT.parent / "shared" / "conformance" / "environment_files"

pytestmark = pytest.mark.skipif(sys.platform == "darwin", reason="macOS file systems refuse names that are not "
                                                                  "UTF-8, so the case cannot arise there")


def cli(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "ARCSTUDY_DB"} | {"PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", *args], cwd=cwd, env=environ,
                          capture_output=True, timeout=300)


def folder_with_a_bad_name(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.jsonl").write_bytes(GOOD.read_bytes())
    with open(os.fsencode(folder) + b"/z\xff.jsonl", "wb") as fh:
        fh.write(OTHER.read_bytes())
    return folder


def test_ingest_rejects_only_the_file_whose_name_is_not_utf8(tmp_path):
    folder = folder_with_a_bad_name(tmp_path)
    res = cli("ingest", str(folder), "--db", str(tmp_path / "s.duckdb"), "--workers", "1", cwd=tmp_path)
    text = (res.stdout + res.stderr).decode()
    assert res.returncode == 3, text
    assert "Traceback" not in text and "z\\xff.jsonl" in text and "not UTF-8" in text
    import duckdb

    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    assert con.execute("SELECT file_name FROM raw_ingest__files").fetchall() == [("good.jsonl",)]
    assert con.execute("SELECT file_path, check_name FROM quarantine").fetchall() == [
        (str(folder / "z\\xff.jsonl"), "bad_file_name")]


def test_score_reports_the_file_whose_name_is_not_utf8_and_scores_the_rest(tmp_path):
    folder = folder_with_a_bad_name(tmp_path)
    res = cli("score", str(folder), "--games", str(GAMES), "--out", str(tmp_path / "o"), cwd=tmp_path)
    text = (res.stdout + res.stderr).decode()
    assert res.returncode == 3, text
    assert "Traceback" not in text and "z\\xff.jsonl: bad_file_name" in text
    assert (tmp_path / "o" / "replay_checks.csv").read_text().count("ck17") >= 1


@pytest.mark.parametrize("verb", ["ingest-db", "score-out", "export-out", "score-input"])
def test_an_argument_that_is_not_utf8_is_a_usage_error_and_nothing_is_written(tmp_path, verb):
    bad = os.fsencode(tmp_path) + b"/x\xff"
    args = {"ingest-db": ["ingest", str(GOOD), "--db", bad + b".duckdb"],
            "score-out": ["score", str(GOOD), "--games", str(GAMES), "--out", bad],
            "export-out": ["export-transitions", str(GOOD), "--games", str(GAMES), "--out", bad],
            "score-input": ["score", bad + b".jsonl", "--games", str(GAMES), "--out", str(tmp_path / "o")]}[verb]
    before = set(os.listdir(os.fsencode(tmp_path)))
    res = cli(*args, cwd=tmp_path)
    text = (res.stdout + res.stderr).decode()
    assert res.returncode == 2, text
    assert "Traceback" not in text and "x\\xff" in text and "is not UTF-8 text" in text
    assert set(os.listdir(os.fsencode(tmp_path))) == before


def test_a_symlink_loop_in_a_folder_is_unreadable_and_the_rest_is_ingested(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.jsonl").write_bytes(GOOD.read_bytes())
    (folder / "a.jsonl").symlink_to("b.jsonl")
    (folder / "b.jsonl").symlink_to("a.jsonl")
    res = cli("ingest", str(folder), "--db", str(tmp_path / "s.duckdb"), "--workers", "1", cwd=tmp_path)
    text = (res.stdout + res.stderr).decode()
    assert res.returncode == 3, text
    assert "Traceback" not in text and "symbolic links" in text
    import duckdb

    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    assert con.execute("SELECT file_name FROM raw_ingest__files").fetchall() == [("good.jsonl",)]
    assert sorted(con.execute("SELECT file_path, check_name FROM quarantine").fetchall()) == [
        (str(folder / "a.jsonl"), "unreadable"), (str(folder / "b.jsonl"), "unreadable")]
