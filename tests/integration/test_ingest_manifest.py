"""The run manifest of `arcstudy ingest` names every input with its sha256: for a loaded or skipped file, the
content hash ingest took (its file_id, `FileReport.file_id`), without reading the file once more."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.manifest import sha256_file
from pipeline.core.workspace import Workspace
from tests.fixtures import harc as fx


def _inputs(db: Path) -> list[dict[str, str]]:
    with Workspace(db, read_only=True) as ws:
        runs = ws.read("SELECT manifest_json FROM runs ORDER BY started_at")["manifest_json"].to_list()
    return [json.loads(m)["inputs"] for m in runs]


def test_the_manifest_names_each_input_with_its_sha256_loaded_or_skipped(tmp_path):
    data = fx.write_data(tmp_path / "data" / "data.csv")
    task = fx.write_task(tmp_path / "tasks" / "t1.json",
                         {"train": [{"input": [[1]], "output": [[2]]}], "test": [{"input": [[3]], "output": [[4]]}]})
    db = tmp_path / "m.duckdb"
    for _ in range(2):  # loaded, then skipped (same content hash)
        result = CliRunner().invoke(app, ["--plain", "ingest", str(data), str(task), "--db", str(db)])
        assert result.exit_code == 0, result.output
    expected = {str(p.resolve()): sha256_file(p) for p in (data, task)}
    assert _inputs(db) == [expected, expected]
    with Workspace(db, read_only=True) as ws:
        file_ids = set(ws.read("SELECT file_id FROM raw_ingest__files")["file_id"].to_list())
    assert file_ids == set(expected.values())
