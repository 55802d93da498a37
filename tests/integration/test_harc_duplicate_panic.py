"""A conflicting duplicate key in an H-ARC data.csv of simulated (real-shaped) rows is quarantined, not a crash:
polars 2.1 panicked ("assertion failed: i < self.len()", in its string views) when the rule's reason was built
on the filtered rows of a frame made of several chunks, and the ingest ended with a traceback."""

from __future__ import annotations

import csv

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.simulate.harc import StudyDesign, simulate_harc_study

TINY = StudyDesign("tiny", n_training=3, n_training_ten=1, n_evaluation=3, n_incomplete_training=1,
                   n_incomplete_evaluation=1, n_tasks_training=12, n_tasks_evaluation=12)


def test_a_row_repeating_the_action_id_before_it_is_a_duplicate_action_not_a_crash(tmp_path):
    simulate_harc_study(tmp_path / "sim", scale=TINY, seed=7, workers=1, arc_tgi=False, generation="current")
    (source,) = (tmp_path / "sim").rglob("data.csv")
    with open(source, newline="") as fh:
        rows = list(csv.reader(fh))[:201]
    at = rows[0].index("action_id")
    assert rows[101][at] != rows[100][at]
    rows[101][at] = rows[100][at]  # same participant and task, other contents: a conflict
    path = tmp_path / "in" / "data.csv"
    path.parent.mkdir()
    with open(path, "w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    with Workspace(tmp_path / "ws.duckdb") as ws:
        ws.ensure_tables()
        report = ingest_paths(ws, [path], run_id="dup", workers=1)
        assert [f.status for f in report.files] == ["loaded"]
        got = ws.read("SELECT source_location, check_name FROM quarantine ORDER BY source_location").rows()
        assert got == [("row 100", "duplicate_action"), ("row 101", "duplicate_action")]
        assert ws.read("SELECT count(*) AS n FROM core_harc__actions")["n"][0] == 198
