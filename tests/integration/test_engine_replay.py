"""Replaying the toolkit's recordings of the fixture games reproduces them; corrupted copies report
the right first divergence."""

import json
from pathlib import Path

import pytest

import engine
from engine.recording import read_recording
from engine.replay import compare_frames, replay

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
GAMES_DIR = SHARED / "conformance" / "environment_files"
FIXTURES = SHARED / "samples" / "arc-agi-3" / "fixtures"
RECORDINGS = sorted(FIXTURES.glob("*.jsonl"))


def test_every_fixture_recording_is_covered():
    assert len(RECORDINGS) == 16


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_recording_replays_exactly(path):
    expected = json.loads(path.with_name(path.stem + ".expected.json").read_text(encoding="utf-8"))
    report = replay(path, GAMES_DIR, only_reset_levels=expected["only_reset_levels"])
    assert report.ok, report.divergence.describe()
    assert report.steps_replayed == expected["line_count"]
    last = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])["data"]
    assert (report.final_state, report.final_levels_completed) == (last["state"], last["levels_completed"])
    if expected["frames_included"]:
        recording = read_recording(path)
        assert report.frames_compared == sum(len(line.data["frame"]) for line in recording.frame_lines) > 0


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("removed_line", [10, 30, 50])
def test_removed_action_is_caught_at_that_line(tmp_path, removed_line):
    # Every mz41 action shortens the on-screen move budget bar, so the frame recorded at the line
    # that now follows the removed one cannot match: the divergence is at the removed line number.
    lines = (FIXTURES / "mz41_scripted-win.frames.jsonl").read_text(encoding="utf-8").splitlines()
    corrupted = write_lines(tmp_path / "cut.jsonl", lines[: removed_line - 1] + lines[removed_line:])
    report = replay(corrupted, GAMES_DIR)
    divergence = report.divergence
    assert divergence is not None and divergence.line == removed_line and divergence.step == removed_line - 1
    assert divergence.field == "frame" and divergence.frame_index == 0 and divergence.cells_differing > 0
    x0, x1, y0, y1 = divergence.bbox
    assert 0 <= x0 <= x1 < 64 and 0 <= y0 <= y1 < 64 and y0 == 0  # the budget bar is on row 0
    assert f"line {removed_line}" in divergence.describe()


def test_removed_action_without_frames_diverges_later(tmp_path):
    lines = (FIXTURES / "mz41_scripted-lose.noframes.jsonl").read_text(encoding="utf-8").splitlines()
    report = replay(write_lines(tmp_path / "cut.jsonl", lines[:59] + lines[60:]), GAMES_DIR)
    divergence = report.divergence
    assert divergence is not None and divergence.line >= 60
    assert divergence.field in ("state", "levels_completed", "win_levels", "full_reset", "available_actions")
    assert report.steps_replayed == divergence.step + 1


@pytest.mark.parametrize(("field", "value"), [("state", "GAME_OVER"), ("levels_completed", 3), ("full_reset", True)])
def test_changed_field_is_reported_at_its_line(tmp_path, field, value):
    lines = (FIXTURES / "ck17_scripted-lose.frames.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[6])
    original = record["data"][field]
    record["data"][field] = value
    corrupted = write_lines(tmp_path / "edit.jsonl", lines[:6] + [json.dumps(record)] + lines[7:])
    divergence = replay(corrupted, GAMES_DIR).divergence
    assert (divergence.line, divergence.field, divergence.expected, divergence.got) == (7, field, value, original)


def test_changed_pixel_is_located(tmp_path):
    lines = (FIXTURES / "tf62_scripted-win.frames.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[3])
    grid = record["data"]["frame"][-1]
    grid[40][7] = (grid[40][7] + 1) % 16
    grid[42][9] = (grid[42][9] + 1) % 16
    corrupted = write_lines(tmp_path / "pixel.jsonl", lines[:3] + [json.dumps(record)] + lines[4:])
    divergence = replay(corrupted, GAMES_DIR).divergence
    assert divergence.line == 4 and divergence.field == "frame"
    assert divergence.frame_index == len(record["data"]["frame"]) - 1
    assert divergence.cells_differing == 2 and divergence.bbox == (7, 9, 40, 42)


def test_level_only_resets_change_the_outcome():
    # The scripted-lose recordings contain RESETs right after a level change, which the default
    # rule turns into full resets; replayed with level-only resets they must diverge.
    path = FIXTURES / "ud74_scripted-lose.frames.jsonl"
    assert replay(path, GAMES_DIR).ok
    report = replay(path, GAMES_DIR, only_reset_levels=True)
    assert not report.ok and report.divergence.field in ("full_reset", "levels_completed", "frame", "state")


def test_replay_with_level_only_resets_reproduces_such_a_recording(tmp_path):
    env = engine.make("tf62", GAMES_DIR, only_reset_levels=True, guid="g")
    from engine.recording import RecordingWriter

    path = tmp_path / "levels.jsonl"
    with RecordingWriter(path) as writer:
        writer.write(env.reset())
        for action in (1, 0, 1, 2, 0, 0, 3):
            writer.write(env.step(action))
    assert replay(path, GAMES_DIR, only_reset_levels=True).ok
    assert not replay(path, GAMES_DIR).ok


def test_compare_frames_helper():
    assert compare_frames([[1, 2], [3, 4]], [[1, 2], [3, 4]]) == (0, None)
    assert compare_frames([[1, 2], [3, 4]], [[1, 0], [0, 4]]) == (2, (0, 1, 0, 1))
