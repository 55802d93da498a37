"""A JSON document too large for any metadata.json, scorecard or study manifest is refused unparsed.

Parsed, JSON takes up to about 30 times its size in Python objects: a 225 MB card of 3M plays took 6 GB and three
minutes to ingest. A scorecard is kilobytes (a card of 100 games of 100 plays is about 2 MB), so a document over
`textfiles.MAX_JSON_DOCUMENT_BYTES` (made small here) is refused as `document_too_large`, with its size and what
to do, by ingest, `score FILE` and `score --compare`, and is never parsed; one under the limit is read as before.
The card is the toolkit's official tu93 card (samples/arc-agi-3/toolkit).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core import textfiles
from pipeline.core.workspace import Workspace
from pipeline.ingest import arc3_json, ingest_paths

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SIDECAR = json.loads((SHARED / "samples" / "arc-agi-3" / "toolkit" /
                      "tu93_explore_reset_solve_5levels.noframes.expected.json").read_text())
CARD = SIDECAR["card"]
ENV = SIDECAR["scored"]["environment"]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--plain", *args], catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture
def small_limit(monkeypatch) -> list[int]:
    """The limit at 3,000 bytes; the lengths of the documents parsed (json_document) are noted."""
    monkeypatch.setattr(textfiles, "MAX_JSON_DOCUMENT_BYTES", 3000)
    parsed, parse = [], arc3_json.json_document
    monkeypatch.setattr(arc3_json, "json_document", lambda text: parsed.append(len(text)) or parse(text))
    return parsed


def _cards(tmp_path: Path) -> tuple[Path, Path]:
    """A card wrapper under the limit, and one with the same card padded with many plays over it."""
    small = tmp_path / "small.json"
    small.write_text(json.dumps({"cards": {CARD["game_id"]: CARD}}))
    n = 200
    big_card = {**CARD, "total_plays": n, "guids": [CARD["guids"][0]] * n, "levels_completed": [0] * n,
                "states": ["NOT_FINISHED"] * n, "actions": [1] * n, "actions_by_level": [[]] * n, "resets": [0] * n,
                "total_actions": n}
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"cards": {CARD["game_id"]: big_card}}))
    assert small.stat().st_size < 3000 < big.stat().st_size
    return small, big


def test_ingest_refuses_a_scorecard_too_large_to_be_one_unparsed(tmp_path, small_limit):
    small, big = _cards(tmp_path)
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [small, big], run_id="r", workers=1)
        by_name = {Path(f.path).name: f.status for f in report.files}
        quarantine = ws.read("SELECT file_path, check_name, reason FROM quarantine").rows()
        plays = ws.read("SELECT count(*) FROM core_arc3__card_plays").item()
    assert by_name == {"small.json": "loaded", "big.json": "rejected"} and report.has_rejections
    assert [(Path(p).name, c) for p, c, _ in quarantine] == [("big.json", "document_too_large")]
    assert "not parsed" in quarantine[0][2] and "split it" in quarantine[0][2]
    assert plays == len(CARD["guids"])
    assert small_limit == [small.stat().st_size]  # the big document was never parsed


def test_score_and_compare_refuse_a_scorecard_too_large_to_be_one(tmp_path, small_limit):
    small, big = _cards(tmp_path)
    code, output = run("score", str(small), str(big), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 3, output
    assert any("big.json" in line and "not parsed" in line for line in output.splitlines()), output
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"card_id": "c", "score": ENV["score"], "environments": [ENV] * 20}))
    assert summary.stat().st_size > 3000
    code, output = run("score", str(small), "--out", str(tmp_path / "p"), "--no-figures", "--compare-with", str(summary))
    assert code != 0 and "not parsed" in output, output
