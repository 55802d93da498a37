"""`arcstudy ingest .` from the folder that holds the database: the database file, its run manifests and the
other folders the commands write beside it were read as input on every run and quarantined ("format not
recognised", the database's raw bytes stored), exit 3. They are outputs: left out, and said."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from pipeline.cli import app

SAMPLE = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "fixtures" / \
    "an53_scripted-win.frames.jsonl"


def test_the_database_and_its_folders_are_not_input(tmp_path, monkeypatch):
    shutil.copy(SAMPLE, tmp_path / SAMPLE.name)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    first = runner.invoke(app, ["--plain", "ingest", ".", "--db", "study.duckdb"])
    assert first.exit_code == 0, first.output
    assert (tmp_path / "study.runs").is_dir()  # the first run's manifest, beside the database
    (tmp_path / "study.reports").mkdir()
    (tmp_path / "study.reports" / "calibration.html").write_text("<html></html>")
    again = runner.invoke(app, ["--plain", "ingest", ".", "--db", "study.duckdb"])
    assert again.exit_code == 0, again.output
    assert "of the database study.duckdb itself" in " ".join(again.output.split())
    assert "1 file: 0 loaded, 0 replaced, 1 skipped" in again.output
