"""The calibration report's static-task sections: "Task families" (witness checks read from
out_arctgi__witness_checks, low agreement, much harder than the source, diversity outliers) and "ARC-AGI-2
calibration" (the reproduction table), on a database that holds no ARC-AGI-3 study."""

from __future__ import annotations

import html
import re
from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.config import load_config
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.transforms.build import build

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "static"


def _report(db: Path, out: Path) -> str:
    res = CliRunner().invoke(app, ["report", "calibration", "--db", str(db), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return html.unescape((out / "calibration.html").read_text())


def _headings(text: str) -> list[str]:
    return re.findall(r"<h2[^>]*>(.*?)</h2>", text)


def test_static_sections_and_witness_checks(tmp_path: Path):
    db = tmp_path / "s.duckdb"
    with Workspace(db) as ws:
        ingest_paths(ws, [FIX], run_id="t", workers=1)
        build(ws, load_config(), figures=False)
    text = _report(db, tmp_path / "r1")
    heads = _headings(text)
    for h in ("Task families", "Families with low agreement", "Families much harder than their source task",
              "Diversity outliers", "ARC-AGI-2 calibration", "ARC-AGI-2 calibration: published figures and this log"):
        assert h in heads
    assert heads.index("Task families") < heads.index("ARC-AGI-2 calibration")
    assert "witnesses not checked yet: run arcstudy check-witnesses" in text
    # the fixture's hard, low-agreement family and its duplicate-task family are named
    assert "task13e47133: answer agreement 0.33" in text
    assert "task13e47133: 0.17 solved within 2 against 0.91 for 13e47133" in text
    assert "ARC-AGI-1-Train/task00576224: duplicate_tasks" in text
    figs = tmp_path / "r1" / "figures" / "calibration"
    assert (figs / "families_vs_source.png").is_file() and (figs / "arc2_pairs_by_solvers.png").is_file()
    assert {"Families against their source task", "ARC-AGI-2 test pairs by solvers"} <= set(heads)
    repro = pl.read_csv(tmp_path / "r1" / "calibration__arc2_reproduction.csv")
    assert set(repro["claim_id"]) >= {"kept_tasks_two_solvers", "average_test_taker_score", "seconds_per_task"}

    # witness results written by check-witnesses (here by hand, in its table) replace the note
    with Workspace(db) as ws:
        ws.insert_frame("out_arctgi__witness_checks", pl.DataFrame({
            "file_id": ["0" * 64] * 2, "task_id": ["TgiA1", "TgiB1"], "family_id": ["ARC-AGI-1-Train/task00576224",
                                                                                "task13e47133"],
            "status": ["pass", "mismatch"], "reason": [None, "test[0] output differs in 3 cells"],
            "n_pairs": [2, 2], "n_match": [2, 1], "seconds": [0.1, 0.2]}))
    text = _report(db, tmp_path / "r2")
    assert "witnesses not checked yet" not in text
    assert "Witness failures" in _headings(text)
    assert "task13e47133 / TgiB1: mismatch (test[0] output differs in 3 cells)" in text
    assert "TgiA1: pass" not in text
