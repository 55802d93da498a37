"""`arcstudy ingest` of a whole folder written by `arcstudy simulate`: its SIMULATION.json and ground_truth/ (the
answers the pipeline is checked against) are left out and named, not refused; a look-alike folder that the
simulator did not write gets no such treatment."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace

SAMPLE = (Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "toolkit"
          / "bt11_win_gameover_levelreset.noframes.jsonl")


def study(root: Path, generator: str) -> Path:
    (root / "arc3" / "human").mkdir(parents=True)
    shutil.copy(SAMPLE, root / "arc3" / "human" / SAMPLE.name)
    (root / "ground_truth").mkdir()
    (root / "ground_truth" / "arc3_participants.csv").write_text("participant_id,session_id,is_low_effort\np1,s1,false\n")
    (root / "SIMULATION.json").write_text(json.dumps({"generator": generator, "seed": 0}))
    return root


def ingest(*args: str):
    return CliRunner().invoke(app, ["--plain", "ingest", *args], catch_exceptions=False)


def test_a_simulated_study_folder_ingests_without_its_ground_truth(tmp_path):
    root = study(tmp_path / "sim", "arcstudy simulate")
    db = tmp_path / "db.duckdb"
    result = ingest(str(root), "--db", str(db))
    assert result.exit_code == 0, result.output
    assert "left out 2 file(s) that `arcstudy simulate` wrote" in result.output
    with Workspace(db) as ws:
        assert ws.read("SELECT count(*) AS n FROM quarantine")["n"][0] == 0
        assert ws.read("SELECT file_path FROM raw_ingest__files")["file_path"].to_list() == [
            str(root / "arc3" / "human" / SAMPLE.name)]
    # a folder inside the study: the study's ground truth is still not data
    result = ingest(str(root / "ground_truth"), "--db", str(db))
    assert result.exit_code == 2 and "left out 1 file(s)" in result.output


def test_a_look_alike_folder_is_read_as_it_is(tmp_path):
    root = study(tmp_path / "other", "someone else's tool")
    result = ingest(str(root), "--db", str(tmp_path / "db.duckdb"))
    assert result.exit_code == 3  # its CSV and JSON are input like any other, and no format takes them
    assert "left out" not in result.output
