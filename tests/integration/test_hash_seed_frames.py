"""Frames that depend on PYTHONHASHSEED (the lf52 case): a recording made under one hash seed and scored under
another is verified with a frame-only note and counted; an outcome divergence is still left out.

The fixture game hs01 (tests/fixtures/hashseed) lights eight lamps one per frame in the iteration order of a
set of strings. The seed is fixed when an interpreter starts, so recording and scoring run in child processes
(PYTHONHASHSEED=1 records; scoring replays the game in its sandbox, always under PYTHONHASHSEED=0).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
GAMES = REPO / "tests" / "fixtures" / "hashseed"
ACTIONS = (1, 2, 1, 3, 1, 3)  # ACTION1 animates (steps 1, 3, 5), ACTION3 completes a level, the last one wins
SLUG = "scorecard__arc-agi-3_2026-04.json"

RECORD = """
import sys
from engine.env import make
from engine.recording import RecordingWriter
env = make("hs01", environments_dir=sys.argv[1])
with RecordingWriter(sys.argv[2], include_frames=True) as writer:
    writer.write(env.reset())
    for action in sys.argv[3:]:
        writer.write(env.step(int(action)))
"""


def child(seed: int, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)


def record(seed: int, path: Path, actions=ACTIONS) -> list[dict]:
    done = child(seed, "-c", RECORD, str(GAMES), str(path), *map(str, actions))
    assert done.returncode == 0, done.stderr
    return [json.loads(line)["data"] for line in path.read_text().splitlines()]


def score(path: Path, tmp: Path) -> tuple[int, dict, dict]:
    out = tmp / "out"
    done = child(2, "-m", "pipeline.cli", "--plain", "score", str(path), "--games", str(GAMES),
                 "--db", str(tmp / "db.duckdb"), "--out", str(out), "--no-figures")
    assert done.returncode in (0, 3), done.stdout + done.stderr
    card = json.loads((out / SLUG).read_text())
    (row,) = list(csv.DictReader((out / "replay_checks.csv").open()))
    return done.returncode, card, row


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hs01")
    one, two = record(1, tmp / "seed1.jsonl"), record(2, tmp / "seed2.jsonl")
    return tmp, one, two


def test_the_fixture_animation_depends_on_the_seed_and_nothing_else(recordings):
    _, one, two = recordings
    fields = ("state", "levels_completed", "win_levels", "full_reset", "available_actions")
    assert [[d[k] for k in fields] for d in one] == [[d[k] for k in fields] for d in two]
    differ = [i for i, (a, b) in enumerate(zip(one, two, strict=True)) if a["frame"] != b["frame"]]
    assert differ == [1, 3, 5]  # the ACTION1 steps; their last frame (every lamp lit) agrees
    assert all(one[i]["frame"][-1] == two[i]["frame"][-1] for i in differ)


def test_frame_only_divergence_is_verified_with_a_note_and_scored(recordings, tmp_path):
    tmp, one, _ = recordings
    code, card, row = score(tmp / "seed1.jsonl", tmp_path)
    # the game's code replays in the sandbox, whose interpreter always has PYTHONHASHSEED=0 (pipeline.core.game_code)
    replayed = record(0, tmp_path / "seed0.jsonl")
    cells = sum(int((np.array(a["frame"]) != np.array(b["frame"])).sum()) for a, b in zip(one, replayed, strict=True))
    assert code == 0
    assert row["verification_status"] == "verified" and row["is_score_excluded"] == "false"
    assert (int(row["n_frame_only_steps"]), int(row["n_frame_only_cells"])) == (3, cells)
    assert row["replay_detail"] == (f"frames differ at 3 steps (step 1, line 2, step 3, line 4, step 5, line 6; "
                                    f"{cells:,} cells), reconverged at step 6")
    (check,) = card["verification"]["replay_checks"]
    assert check["status"] == "verified" and not check["excluded"] and "first_divergence" not in check
    assert check["frame_only_divergences"] == {
        "step_indices": [1, 3, 5], "reconverged_at_step": 6,
        "note": "frames differ at 3 steps (step 1, line 2, step 3, line 4, step 5, line 6), reconverged at step 6"}
    (environment,) = card["environments"]
    assert environment["score"] == 100.0  # the baseline's own action count: counted, at full marks


def test_an_outcome_divergence_is_still_left_out(recordings, tmp_path):
    tmp, one, _ = recordings
    lines = (tmp / "seed1.jsonl").read_text().splitlines()
    edited = json.loads(lines[3])
    edited["data"]["levels_completed"] = 1  # step 3 (an ACTION1) completed no level; say it did
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join([*lines[:3], json.dumps(edited), *lines[4:]]) + "\n")
    code, card, row = score(path, tmp_path)
    assert code == 3 and row["verification_status"] == "divergent" and row["is_score_excluded"] == "true"
    assert (row["divergence_field"], row["divergence_step_index"], row["divergence_got"]) == ("levels_completed",
                                                                                            "3", "0")
    assert row["n_frame_only_steps"] == "1" and "(earlier, frames differ at 1 step (step 1" in row["replay_detail"]
    (check,) = card["verification"]["replay_checks"]
    assert check["excluded"] and check["first_divergence"]["field"] == "levels_completed"


def test_frames_that_never_match_again_stay_divergent(tmp_path):
    path = record(1, tmp_path / "ends_animating.jsonl", ACTIONS[:-1])  # ends on an animation
    code, _, row = score(tmp_path / "ends_animating.jsonl", tmp_path)
    assert len(path) == 6 and code == 3 and row["verification_status"] == "divergent"
    assert (row["divergence_field"], row["divergence_step_index"]) == ("frame", "5")
    assert row["n_frame_only_steps"] == "2"  # steps 1 and 3 reconverged; step 5 did not


def recorded_here(tmp_path: Path, edit_step: int, cells: int) -> Path:
    """hs01 recorded under the hash seed arcstudy replays with when none is set (PYTHONHASHSEED=0: game code runs
    in a sandboxed interpreter, pipeline.core.game_code), with `cells` cells of the first frame of step
    `edit_step` repainted."""
    path = tmp_path / "edited_frame.jsonl"
    record(0, path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    frame = np.array(lines[edit_step]["data"]["frame"][0])
    frame.flat[:cells] = 15 - frame.flat[:cells]
    lines[edit_step]["data"]["frame"][0] = frame.tolist()
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_viewer_shows_the_frame_only_note(tmp_path):
    from pipeline.report import viewer as v
    from pipeline.scoring.plays import read_recording_files, recordings_from_tables
    from pipeline.scoring.verify import verify_recording

    path = recorded_here(tmp_path, 2, 5)  # step 2 (ACTION2): five cells repainted; step 3 matches again
    steps, plays, files, _ = read_recording_files([path])
    (rec,) = recordings_from_tables(steps, plays, files)
    (check,) = verify_recording(rec, [GAMES], from_file=True)
    assert (check.status, check.n_frame_only_steps, check.n_frame_only_cells) == ("verified", 1, 5)
    verification = v.verify_and_render(v.load_recording_source(path), [GAMES])
    assert verification.status == "verified" and verification.divergence is None
    assert verification.detail.endswith("every field matches; frames differ at 1 step (step 2, line 3; 5 cells), "
                                        "reconverged at step 3")


def test_frames_that_differ_up_to_an_outcome_divergence_are_where_it_began(tmp_path):
    from pipeline.scoring.plays import read_recording_files, recordings_from_tables
    from pipeline.scoring.verify import verify_recording

    path = recorded_here(tmp_path, 2, 5)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[3]["data"]["levels_completed"] = 1  # right after the repainted step: no matching frame in between
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    steps, plays, files, _ = read_recording_files([path])
    (rec,) = recordings_from_tables(steps, plays, files)
    (check,) = verify_recording(rec, [GAMES], from_file=True)
    d = check.divergence
    assert check.status == "divergent" and (d.step, d.field, d.cells_differing) == (2, "frame", 5)
    assert check.n_steps_replayed == 3 and check.n_frame_only_steps == 0
    assert "frames never matched again before line 4 (step 3, ACTION1): levels_completed" in check.detail
