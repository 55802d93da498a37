"""A real recording with one line's timestamp rewritten to the far future (a clock glitch) scores, builds and
reports as the untouched file does: the line is kept without its time and named in quarantine (exit 3, as for
any value dropped from a kept line), and nothing downstream trips over the null time in the middle of a play.

The glitched copies are made at test time from the shared samples."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.config import load_config
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.transforms.build import build

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SAMPLES = SHARED / "samples" / "arc-agi-3"
GAMES = SHARED / "conformance" / "environment_files"
FUTURE = "2099-01-01T00:00:00+00:00"


def _glitch(src: Path, dest: Path) -> int:
    """Copy `src` to `dest` with its middle line's timestamp set to FUTURE; that line's number."""
    lines = src.read_text().splitlines()
    i = len(lines) // 2
    obj = json.loads(lines[i])
    obj["timestamp"] = FUTURE
    lines[i] = json.dumps(obj)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines) + "\n")
    return i + 1


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--plain", *args], catch_exceptions=False)
    return result.exit_code, result.output


def _card(folder: Path) -> dict:
    (path,) = folder.glob("scorecard__*.json")
    card = json.loads(path.read_text())
    replay = [(c["play_id"], c["status"], c["n_steps_replayed"]) for c in card["verification"]["replay_checks"]]
    return {"replay": replay, **{k: card[k] for k in ("score", "environments", "total_actions",
                                                      "total_levels_completed")}}


@pytest.mark.parametrize("sample", ["tf62_scripted-win.frames.jsonl", "ly28_scripted-win.noframes.jsonl"])
def test_score_of_a_file_with_one_far_future_line_is_the_untouched_files(tmp_path: Path, sample: str):
    src = SAMPLES / "fixtures" / sample
    bad = tmp_path / "in" / sample
    line = _glitch(src, bad)
    code, out = _cli("score", str(src), "--games", str(GAMES), "--out", str(tmp_path / "good"))
    assert code == 0, out
    code, out = _cli("score", str(bad), "--games", str(GAMES), "--out", str(tmp_path / "bad"))
    assert code == 3, out  # a value was dropped from a kept line: reported, as an oversized reasoning is
    assert f"line {line}: time_jumps_ahead: timestamp {FUTURE}" in out
    assert "line kept without its timestamp" in out and "time_goes_backwards" not in out
    good, glitched = _card(tmp_path / "good"), _card(tmp_path / "bad")
    assert good["score"] > 0 and all(status == "verified" for _, status, _ in good["replay"])
    assert glitched == good  # every step replayed and verified, the same score


def _out(ws: Workspace) -> dict[str, list]:
    return {
        "attempts": ws.read("SELECT guid, n_actions, duration_s, is_fully_solved FROM out_arc3__attempts "
                            "ORDER BY guid").rows(),
        "plays": ws.read("SELECT play_id, n_actions, levels_completed, duration_s FROM out_arc3__plays "
                         "ORDER BY play_id").rows(),
        "levels": ws.read("SELECT play_id, level_index, n_actions, level_duration_s FROM out_arc3__levels "
                          "ORDER BY play_id, level_index").rows(),
    }


def test_ingest_build_and_report_of_human_recordings_with_one_far_future_line_each(tmp_path: Path):
    sources = sorted((SAMPLES / "human").glob("*/*.recording.jsonl"))
    assert len(sources) >= 2
    good_dir, bad_dir = tmp_path / "good", tmp_path / "bad"
    good_dir.mkdir()
    glitched = {}
    for src in sources:
        shutil.copy(src, good_dir / src.name)
        glitched[src.name] = _glitch(src, bad_dir / src.name)
    results = {}
    for name, folder in (("good", good_dir), ("bad", bad_dir)):
        with Workspace(tmp_path / f"{name}.duckdb") as ws:
            report = ingest_paths(ws, [folder], run_id=name, workers=1)
            assert report.has_rejections == (name == "bad")
            build(ws, load_config(), figures=False)
            results[name] = _out(ws)
            if name == "bad":
                q = ws.read("SELECT file_path, source_location, check_name, column_name FROM quarantine "
                            "ORDER BY file_path")
                assert q.rows() == [(str((bad_dir / n).resolve()), f"line {glitched[n]}", "time_jumps_ahead",
                                     "timestamp") for n in sorted(glitched)]
                nulls = ws.read("SELECT line_number, flags FROM core_arc3__steps WHERE recorded_at IS NULL")
                assert sorted(nulls["line_number"].to_list()) == sorted(glitched.values())
                assert all(f.to_list() == ["timestamp_dropped"] for f in nulls["flags"])
    good, bad = results["good"], results["bad"]
    assert good["attempts"] and all(d is not None for _, _, d, _ in good["attempts"])
    # same steps counted; a play's and an attempt's duration run from its first to its last remaining time
    assert bad["attempts"] == good["attempts"] and bad["plays"] == good["plays"]
    # per level the same actions; a level whose last line lost its time ends at the line before (cd82's line
    # that completes level 1), so the next level starts there: the durations move, their sum per play stays
    assert [r[:3] for r in bad["levels"]] == [r[:3] for r in good["levels"]]
    assert [r[3] for r in bad["levels"]] != [r[3] for r in good["levels"]]
    for play_id in {r[0] for r in good["levels"]}:
        durations = {name: [r[3] for r in results[name]["levels"] if r[0] == play_id] for name in results}
        assert None not in durations["bad"]
        assert sum(durations["bad"]) == pytest.approx(sum(durations["good"]), abs=1e-6)
    code, out = _cli("report", "calibration", "--db", str(tmp_path / "bad.duckdb"), "--out", str(tmp_path / "rep"))
    assert code == 0, out
    assert (tmp_path / "rep" / "calibration.html").stat().st_size > 0
