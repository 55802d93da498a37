"""A viewer page embeds at most `MAX_PAGE_STEPS` steps (issue 29: "the viewer caps what it embeds"): a
recording of millions of steps made a page of tens of MB and took the command over 1 GB. A longer recording's
page shows its first steps, says so, and keeps its plays and scores whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.report import viewer as v
from pipeline.report.viewer import data as viewer_data

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"
GAMES = Path(__file__).resolve().parents[2] / "games"


def _pages(path: Path, tmp_path: Path, monkeypatch, cap: int, **options) -> tuple[v.ViewerResult, v.ViewerResult]:
    whole = v.write_viewer(path, tmp_path / "whole.html", **options)
    monkeypatch.setattr(viewer_data, "MAX_PAGE_STEPS", cap)
    cut = v.write_viewer(path, tmp_path / "cut.html", **options)
    return whole, cut


def _assert_cut(whole: v.ViewerResult, cut: v.ViewerResult, cap: int) -> None:
    total = whole.data["n_steps"]
    assert total > cap
    assert cut.data["n_steps"] == cap
    for name, column in cut.data["steps"].items():
        if isinstance(column, list) and len(whole.data["steps"][name]) == total:
            assert column == whole.data["steps"][name][:cap], name  # the first steps, as the whole page has them
    for key in ("plays", "n_plays", "baseline", "policy", "verification"):
        assert cut.data[key] == whole.data[key], key  # the plays and scores count every step
    note = next(n for n in cut.data["notes"] if "this page shows the first" in n)
    assert f"first {cap:,} of the recording's {total:,} steps" in note
    assert not any("this page shows the first" in n for n in whole.data["notes"])
    assert cut.n_bytes < whole.n_bytes


def test_a_recording_with_frames_shows_its_first_steps_and_their_frames(tmp_path, monkeypatch):
    path = SAMPLES / "fixtures" / "tf62_scripted-win.frames.jsonl"
    whole, cut = _pages(path, tmp_path, monkeypatch, 7)
    _assert_cut(whole, cut, 7)
    assert len(cut.source.recorded_frames) == 7 and cut.data["frames_origin"] == "recording"


def test_a_replayed_playback_script_renders_only_the_steps_shown(tmp_path, monkeypatch):
    solution = next(GAMES.glob("bg41/*/solutions/win.jsonl"))
    lines = [json.loads(text) for text in solution.read_text().splitlines() if text.strip()]
    script = tmp_path / "bg41_win.playback.jsonl"
    script.write_text("".join(json.dumps({"data": {"action_input": {
        "id": line["data"]["action_input"]["id"], "data": {"game_id": line["data"]["game_id"],
                                                           **(line["data"]["action_input"].get("data") or {})}}}})
        + "\n" for line in lines[1:]))
    whole, cut = _pages(script, tmp_path, monkeypatch, 5, games=[GAMES])
    _assert_cut(whole, cut, 5)
    assert cut.verification.status == whole.verification.status == "verified"  # the whole replay is checked
    assert len(cut.verification.rendered) == 5  # and only the steps shown are rendered for the page


@pytest.mark.parametrize("cap", [1, 3])
def test_the_timeline_of_the_first_steps_is_the_whole_timeline_cut(tmp_path, monkeypatch, cap):
    path = SAMPLES / "fixtures" / "tf62_scripted-win.frames.jsonl"
    whole = v.load_recording_source(path)
    monkeypatch.setattr(viewer_data, "MAX_PAGE_STEPS", cap)
    page = whole.page_recording()
    assert page.steps.height == len(page.records) == len(page.effects) == len(page.step_play) == cap
    assert page.card == whole.recording.card and page.play_ids == whole.recording.play_ids
    full, first = v.step_timeline(whole.recording), v.step_timeline(page)
    assert first.level == full.level[:cap] and first.charged_level == full.charged_level[:cap]
