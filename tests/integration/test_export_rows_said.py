"""What a transitions dataset says of its rows.

A 2025 preview recording (formats.md A.4: `score` and `win_score` instead of `levels_completed` and `win_levels`;
"map ... `win_score`->`win_levels` (null when absent, never 0)") keeps its `win_levels`: the rows took
`levels_completed` from the line's `score` but left `win_levels` null. Rows the replay did not confirm are counted
and listed."""

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


def test_rows_the_replay_did_not_confirm_are_counted_and_listed_in_the_card(tmp_path: Path):
    """One pixel of one line changed, the replay matching again at the next step: the row keeps the file's frame
    with `verified` false, while the card said the engine confirmed every row ("all of them"), the plays not
    verified "None" and the command "0 unverified"."""
    lines = SAMPLE.read_text().splitlines()
    obj = json.loads(lines[9])
    obj["data"]["frame"][-1][5][5] = (obj["data"]["frame"][-1][5][5] + 1) % 16
    lines[9] = json.dumps(obj)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "an53-one-pixel.jsonl").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["--plain", "export-transitions", str(tmp_path / "in"), "--games", str(GAMES),
                                      "--out", str(tmp_path / "t")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = pl.read_parquet(tmp_path / "t" / "data" / "*.parquet")
    assert rows.height == len(lines) and (~rows["verified"]).sum() == 1
    assert "1 row(s) not confirmed by the replay" in result.output
    card = (tmp_path / "t" / "README.md").read_text()
    assert "(all of them)" not in card and "(not 1 row(s):" in card
    listed = card.split("## Rows whose frames the replay did not confirm")[1].split("## Left out")[0]
    [play_id] = rows.filter(~pl.col("verified"))["play_id"].to_list()
    assert f"| {play_id} |" in listed and "| 1 |" in listed
