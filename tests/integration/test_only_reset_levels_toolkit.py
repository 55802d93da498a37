"""A toolkit recording made with ``ONLY_RESET_LEVELS=true`` (formats.md A.1: "that opening RESET is a level reset
(`full_reset` false)"; scoring.md §B.1: "every RESET except one after WIN is a level reset and counts 1") is
replayed with level-only resets, as it was played. It was replayed in the default mode, where make()'s RESET is a
full reset: the play was left out as divergent at its first line, and the game scored 0.

The file is made at test time from a shared fixture: the opening RESET as that mode writes it, and a RESET at the
start of level 3 (a level reset there: levels_completed stays 2), up to the WIN."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SAMPLE = SHARED / "samples" / "arc-agi-3" / "fixtures" / "tf62_scripted-win.frames.jsonl"
GAMES = SHARED / "conformance" / "environment_files"


def _only_reset_levels_recording(folder: Path, resets: int = 1) -> Path:
    lines = [json.loads(x) for x in SAMPLE.read_text().splitlines() if x.strip()]
    for line in lines:
        line["data"].pop("frame", None)  # the replay makes them
    assert lines[0]["data"]["action_input"]["id"] == "RESET" and lines[3]["data"]["levels_completed"] == 2
    lines[0]["data"]["full_reset"] = False
    reset = json.loads(json.dumps(lines[3]))
    reset["data"]["action_input"] = {"id": "RESET", "data": {}, "reasoning": None}
    reset["data"]["full_reset"] = False
    out = [*lines[:4], *[json.loads(json.dumps(reset)) for _ in range(resets)], *lines[4:14]]  # to the WIN (the
    # fixture's later resets are the default mode's)
    for k, line in enumerate(out):
        line["timestamp"] = f"2026-04-01T03:04:{k:02d}.000000+00:00"
    folder.mkdir(parents=True)
    path = folder / f"tf62-28e6852d-{lines[0]['data']['guid']}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in out))
    return path


def test_it_is_verified_and_counted_as_played(tmp_path: Path):
    path = _only_reset_levels_recording(tmp_path / "in")
    result = CliRunner().invoke(app, ["--plain", "score", str(path), "--games", str(GAMES), "--out",
                                      str(tmp_path / "out")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (card_path,) = (tmp_path / "out").glob("scorecard__*.json")
    card = json.loads(card_path.read_text())
    assert [c["status"] for c in card["verification"]["replay_checks"]] == ["verified"]
    [env] = card["environments"]
    [run] = env["runs"]
    # by hand: the fixture's 13 actions and its level costs [1, 2, 4, 2, 4], plus the level reset at level 3's
    # start, which counts 1 on that level
    assert (run["actions"], run["resets"], run["level_actions"]) == (14, 1, [1, 2, 5, 2, 4])


def test_ingest_marks_it_played_with_level_only_resets(tmp_path: Path):
    path = _only_reset_levels_recording(tmp_path / "in")
    ws = Workspace(tmp_path / "s.duckdb")
    ingest_paths(ws, [path], run_id="only-reset-levels", workers=1)
    [(flag,)] = ws.con.execute("SELECT is_only_reset_levels FROM core_arc3__plays").fetchall()
    assert flag is True


def test_two_level_resets_in_a_row_are_two_actions(tmp_path: Path):
    """In this mode the engine answers a RESET at a level's start with a level reset again (scoring.md §B.1: "every
    RESET except one after WIN is a level reset and counts 1"): the second of two identical RESET responses was
    taken for the recorder writing one response twice, left out, and the level charged one action less."""
    path = _only_reset_levels_recording(tmp_path / "in", resets=2)
    result = CliRunner().invoke(app, ["--plain", "score", str(path), "--games", str(GAMES), "--out",
                                      str(tmp_path / "out")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (card_path,) = (tmp_path / "out").glob("scorecard__*.json")
    [run] = json.loads(card_path.read_text())["environments"][0]["runs"]
    assert (run["actions"], run["resets"], run["level_actions"]) == (15, 2, [1, 2, 6, 2, 4])
