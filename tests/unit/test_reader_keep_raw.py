"""`read_recording_file(..., keep_raw_json=False)` (the transitions export's read) skips only the lines' compact
text: every issue, quarantine reason, step, effect, play and flag is the same as the full read's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.recordings.lines import LineError, parse_line
from pipeline.recordings.reader import RecordingRejected, read_recording_file

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT.parent / "shared" / "samples" / "arc-agi-3"  # as the other tests find the shared samples
LONE_SURROGATE = ROOT / "tests" / "fixtures" / "integrity" / "lone_surrogate.recording.jsonl"
WIN = ROOT / "games" / "bg41" / "a6ea70d5" / "solutions" / "win.jsonl"


def _flawed(tmp_path: Path) -> Path:
    """A shipped game's recording with one line of every kind the reader quarantines or flags."""
    lines = [x for x in WIN.read_text().splitlines() if x.strip()]
    objs = [json.loads(x) for x in lines]
    bad_click = json.loads(lines[3])
    bad_click["data"]["action_input"] = {"id": "ACTION6", "data": {"x": 99, "y": 1}}
    backwards = json.loads(lines[5])
    backwards["timestamp"] = "2000-01-01T00:00:00+00:00"
    nan = lines[6].replace('"levels_completed": 0', '"levels_completed": NaN', 1)
    out = [lines[0], lines[1], lines[1],  # a duplicated write
           lines[2], json.dumps(bad_click), '{"data": ', lines[4], json.dumps(backwards), nan,
           json.dumps({"timestamp": objs[7]["timestamp"], "data": {"mystery": 1}}), *lines[7:],
           "\ufffd\ufffd not json"]
    path = tmp_path / "bg41-a6ea70d5-2b0e9a3c-6a4e-4f4e-9a39-2f0d0f7b5a11.jsonl"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def _facts(parsed):
    return dict(issues=[(i.location, i.check, i.reason, i.column, i.value) for i in parsed.issues],
                steps=[(ln.number, ln.action_id, ln.data, ln.n_frames, ln.hashes, ln.sha) for ln in parsed.steps],
                effects=parsed.effects, play_index=parsed.play_index, flags=parsed.flags, variant=parsed.variant,
                game_id=parsed.game_id, guid=parsed.guid, sha=parsed.file_sha256,
                lost=parsed.is_action_ids_lost, cards=parsed.card_slots)


@pytest.mark.parametrize("which", ["flawed", "lone_surrogate", "human", "frames", "benchmarking"])
def test_the_lean_read_finds_what_the_full_read_finds(tmp_path, which):
    path = {"flawed": lambda: _flawed(tmp_path), "lone_surrogate": lambda: LONE_SURROGATE,
            "human": lambda: SAMPLES / "human" / "lp85" / "4706abe4-58a9-41e9-9a91-9927b5cc2d8e.recording.jsonl",
            "frames": lambda: SAMPLES / "toolkit" / "bt33_click_three_levels.frames.jsonl",
            "benchmarking": lambda: SAMPLES / "benchmarking" / ("ls20-9607627b.conversationrollingwindow.gpt-5.4-"
                                                                "openrouter.anim7.222f30a3-f3f6-48ee-b02c-583dea272051"
                                                                ".recording.jsonl")}[which]()
    full = read_recording_file(path, want_frames=True)
    lean = read_recording_file(path, want_frames=True, keep_raw_json=False)
    assert _facts(lean) == _facts(full)
    assert all(ln.raw_json == "" for ln in lean.lines) and all(ln.raw_json for ln in full.lines)
    for a, b in zip(full.steps, lean.steps, strict=True):
        assert (a.frames is None) == (b.frames is None)
        if a.frames is not None:
            assert (a.frames == b.frames).all()
    if which == "flawed":  # the flaws were seen (the test would prove nothing without them)
        checks = {i.check for i in full.issues}
        assert {"duplicate_step", "bad_click", "invalid_json", "time_goes_backwards", "unknown_record"} <= checks


def test_a_file_refused_by_the_full_read_is_refused_alike(tmp_path):
    path = tmp_path / "bg41-a6ea70d5-2b0e9a3c-6a4e-4f4e-9a39-2f0d0f7b5a12.jsonl"
    path.write_text('{"data": \n{"timestamp": "x", "data": {"mystery": 1}}\n', encoding="utf-8")
    with pytest.raises(RecordingRejected) as full:
        read_recording_file(path)
    with pytest.raises(RecordingRejected) as lean:
        read_recording_file(path, keep_raw_json=False)
    assert (lean.value.check, lean.value.reason) == (full.value.check, full.value.reason)


@pytest.mark.parametrize(("available", "valid"), [
    ([], True), ([0, 1, 2, 3, 4, 5, 6, 7], True), ([6], True), ([8], False), ([-1, 2], False), ([True], False),
    ([1, False], False), ([1.0], False), (["1"], False), ([None], False), ([2, 2.5], False), ([[1]], False),
    ({"1": 1}, False), ("all", False)])
def test_available_actions_must_be_a_list_of_action_ids(available, valid):
    line = json.dumps({"timestamp": "2026-01-01T00:00:00+00:00", "data": {
        "game_id": "bg41-a6ea70d5", "state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 7,
        "action_input": {"id": 1, "data": {}}, "available_actions": available}}).encode()
    if valid:
        assert parse_line(1, line, want_frames=False).data["available_actions"] == available
    else:
        with pytest.raises(LineError) as err:
            parse_line(1, line, want_frames=False)
        assert err.value.check == "bad_available_actions"


def test_the_lean_read_shares_the_repeated_data_of_frame_lines_as_the_full_read_does(tmp_path):
    """`score` and `recover-actions` read without the compact text too: frame lines whose `data` is the same JSON
    still hold one object between them, as in the full read (a 1M-step recording: `score` took 2.28 GB before it
    skipped the text, 1.84 GB now that the lean read shares the data too)."""
    lines = [x for x in WIN.read_text().splitlines() if x.strip()]
    path = tmp_path / "bg41-a6ea70d5-2b0e9a3c-6a4e-4f4e-9a39-2f0d0f7b5a11.jsonl"
    path.write_text("\n".join([*lines, *lines[1:]]) + "\n", encoding="utf-8")  # the play twice: equal data repeat
    full = read_recording_file(path, want_frames=True)
    lean = read_recording_file(path, want_frames=True, keep_raw_json=False)
    objects = {which: len({id(ln.data) for ln in parsed.lines if ln.kind == "frame"})
               for which, parsed in (("full", full), ("lean", lean))}
    n_frame_lines = sum(ln.kind == "frame" for ln in full.lines)
    assert objects["lean"] == objects["full"] < n_frame_lines
