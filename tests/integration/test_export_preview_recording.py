"""A 2025 preview recording (formats.md A.4: `score` and `win_score` instead of `levels_completed` and
`win_levels`; "map ... `win_score`->`win_levels` (null when absent, never 0)") exported as transitions keeps its
`win_levels`: the rows took `levels_completed` from the line's `score` but left `win_levels` null."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from pipeline.cli import app

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SAMPLE = SHARED / "samples" / "arc-agi-3" / "fixtures" / "an53_scripted-win.frames.jsonl"
GAMES = SHARED / "conformance" / "environment_files"
NAMES = ["RESET"] + [f"ACTION{i}" for i in range(1, 8)]


def test_a_preview_recordings_win_score_is_its_rows_win_levels(tmp_path: Path):
    lines = []
    for raw in SAMPLE.read_text().splitlines():
        obj = json.loads(raw)
        data = obj["data"]
        data["score"], data["win_score"] = data.pop("levels_completed"), data.pop("win_levels")
        data["action_input"]["id"] = NAMES.index(data["action_input"]["id"])
        lines.append(obj)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "an53-preview.jsonl").write_text("".join(json.dumps(o) + "\n" for o in lines))
    result = CliRunner().invoke(app, ["--plain", "export-transitions", str(tmp_path / "in"), "--games", str(GAMES),
                                      "--out", str(tmp_path / "t")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = pl.read_parquet(tmp_path / "t" / "data" / "*.parquet").sort("play_id", "step")
    said = [o["data"]["win_score"] for o in lines]
    assert rows.height == len(lines) and rows["verified"].all()
    assert rows["win_levels"].to_list() == said and None not in said
