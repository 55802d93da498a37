"""ARC-TGI families and audits where the files cannot say everything:

- a per-folder export (ARC-AGI-2-Train.csv) beside individual_files.csv (no folder) holding tasks of a generator
  name two repository folders use: the tasks of unknown folder made one family with the folder's tasks, labelled
  ARC-AGI-2/train though some were ARC-AGI-1's generator's; they now stay apart, unlabelled and flagged;
- two exports giving one task_id to different tasks: an audit row naming it was counted in both families; it now
  counts in neither, and ingest and build say so.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace

HEADER = ["task_id", "created_at", "generator_name", "input_reasoning_chain", "transformation_reasoning_chain",
          "task_variables", "code", "data"]
AUDIT_HEADER = ("task_ID,task_set,test_index,session_ID,start_time_seconds,duration_seconds,submissions,"
                "correct_submissions\n")


def _export(path: Path, rows: list[tuple[str, str, int]]) -> Path:
    """(task_id, generator_name, colour): one task per row, its grids of that colour."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(HEADER)
        for task_id, gen, v in rows:
            data = json.dumps({"train": [{"input": [[v]], "output": [[v]]}], "test": [{"input": [[v, v]], "output": [[v, v]]}]})
            w.writerow([task_id, "2026-11-29T10:00:00", gen, '["a"]', '["b"]', '{"rows": 1}',
                        "def transform_input(self, grid):\n    return grid\n", data])
    return path


def _run(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())


def test_tasks_of_unknown_folder_stay_apart_from_the_one_known_folder_of_a_shared_name(tmp_path: Path):
    known = _export(tmp_path / "ARC-AGI-2-Train.csv", [("k1", "task0962bcdd", 1), ("k2", "task0962bcdd", 2)])
    unknown = _export(tmp_path / "out" / "individual_files.csv",
                      [("u1", "task0962bcdd", 3), ("u2", "task0962bcdd", 4), ("u3", "task0962bcdd", 5)])
    db = tmp_path / "t.duckdb"
    _run("ingest", str(known), str(unknown), "--db", str(db), "--workers", "1")
    _run("build", "--db", str(db), "--no-figures")
    with Workspace(db, read_only=True) as ws:
        rows = ws.read("SELECT family_id, family_prefix, benchmark, benchmark_split, n_tasks, diversity_flags "
                       "FROM out_arctgi__family_diversity ORDER BY family_id").rows()
    assert rows == [("ARC-AGI-2-Train/task0962bcdd", "ARC-AGI-2-Train", "ARC-AGI-2", "train", 2, []),
                    ("task0962bcdd", None, None, None, 3, ["folder_unknown"])]


def test_an_audit_row_naming_an_id_two_exports_use_counts_in_no_family_and_is_said(tmp_path: Path):
    one = _export(tmp_path / "ARC-AGI-1" / "Train.csv", [("SAMEID", "task11111111", 1), ("own1", "task11111111", 3)])
    two = _export(tmp_path / "ARC-AGI-2" / "Train.csv", [("SAMEID", "task22222222", 2)])
    audit = tmp_path / "audit.csv"
    audit.write_text(AUDIT_HEADER + "SAMEID,ARC-TGI,0,P1,0,10,1,1\nown1,ARC-TGI,0,P2,0,10,1,1\n")
    db = tmp_path / "t.duckdb"
    said = _run("ingest", str(one), str(two), str(audit), "--db", str(db), "--workers", "1")
    assert f"ARC-TGI task id 'SAMEID' is given to different tasks by {one} and {two}" in said
    assert "counts in no family" in said
    built = _run("build", "--db", str(db), "--no-figures")
    assert ("ARC-TGI audits: 1 ARC-AGI-2-layout row names task ids that two exports give to different tasks"
            in built)
    assert f"SAMEID: {one}, {two}" in built
    with Workspace(db, read_only=True) as ws:
        rows = ws.read("SELECT family_id, n_tasks, n_sessions, n_attempts, n_solved FROM out_arctgi__family_audits "
                       "ORDER BY family_id").rows()
    assert rows == [("task11111111", 1, 1, 1, 1)]  # own1's row; SAMEID's in neither family
