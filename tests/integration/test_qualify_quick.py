"""Qualification: every arcstudy game passes the quick regime; broken games fail the right check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from games import GAMES_DIR, list_games
from pipeline.cli import app
from pipeline.explore import resolve
from pipeline.qualify.checks import (
    REGIMES,
    check_fuzz,
    check_playback,
    check_random_play,
    check_threshold,
    explore_levels,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explore"
GAMES = list_games()
runner = CliRunner()


@pytest.mark.parametrize("entry", GAMES, ids=[g.short_id for g in GAMES])
def test_every_game_passes_quick(entry, tmp_path):
    result = runner.invoke(app, ["--plain", "qualify", entry.short_id, "--regime", "quick", "--out", str(tmp_path),
                                 "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])[0]
    assert report["game_id"] == entry.game_id and report["verdict"] == "pass"
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert statuses["playback"] == "pass" and statuses["fuzz"] == "pass" and statuses["random_play"] == "pass"
    assert statuses["winnable"] in ("pass", "skip")
    files = {p.name for p in (tmp_path / entry.game_id).iterdir()}
    assert files == {"qualification.json", "qualification.md", "manifest.json"}
    md = (tmp_path / entry.game_id / "qualification.md").read_text()
    assert md.startswith(f"# Qualification of {entry.game_id} (quick regime): **PASS**")


def test_a_level_random_play_wins_fails_threshold_and_random_play():
    # cr01 level 2 is a corridor a random walk finishes with probability 1/6
    info = resolve("cr01", FIXTURES)
    levels = explore_levels(info, REGIMES["quick"])
    threshold = check_threshold(levels, tutorial_levels=1)
    assert threshold.status == "fail" and "[2]" in threshold.summary
    play = check_random_play(info, REGIMES["quick"], seed=1)
    assert play.status == "fail" and play.evidence["accidents"][0]["level"] == 2
    assert check_playback(info).status == "skip"


def _broken_copy(tmp_path: Path, replace: tuple[str, str]) -> Path:
    src = next((FIXTURES / "dm04").glob("*/dm04.py"))
    d = tmp_path / "dm04" / "broken"
    d.mkdir(parents=True)
    (d / "dm04.py").write_text(src.read_text().replace(*replace))
    (d / "metadata.json").write_text('{"game_id": "dm04-broken"}')
    return tmp_path


def test_fuzz_catches_out_of_palette_frames(tmp_path):
    root = _broken_copy(tmp_path, ("self.walker.move(dx, dy)", "self.walker.move(dx, dy)\n"
                                   "            self.walker.color_remap(None, 20)"))
    result = check_fuzz(resolve("dm04-broken", root), REGIMES["quick"])
    assert result.status == "fail"
    assert any("colours" in p["problem"] for p in result.evidence["problems"])


def test_fuzz_catches_nondeterminism(tmp_path):
    root = _broken_copy(tmp_path, ("from arcengine import", "import random\n\nfrom arcengine import"))
    game = root / "dm04" / "broken" / "dm04.py"
    game.write_text(game.read_text().replace(
        "self.walker.move(dx, dy)", "self.walker.move(dx, dy)\n            self.walker.color_remap(None, random.randrange(16))"))
    result = check_fuzz(resolve("dm04-broken", root), REGIMES["quick"])
    assert result.status == "fail"
    assert any("diverged" in p["problem"] for p in result.evidence["problems"])


def test_playback_catches_a_recording_that_does_not_replay(tmp_path):
    entry = GAMES[0]
    target = tmp_path / entry.short_id / entry.version
    shutil.copytree(entry.directory, target)
    win = target / "solutions" / "win.jsonl"
    lines = win.read_text().splitlines()
    win.write_text("\n".join(lines[:-1]) + "\n")  # drop the winning action: the recording no longer wins
    result = check_playback(resolve(entry.game_id, tmp_path))
    assert result.status == "fail" and "win.jsonl" in json.dumps(result.evidence)


def test_a_recording_given_by_a_relative_path_is_played_back(tmp_path, monkeypatch):
    """It was read in the sandbox child, whose working folder is not the user's: "did not re-execute
    faithfully", verdict FAIL, for a good recording."""
    entry = GAMES[0]
    (tmp_path / "win_copy.jsonl").write_bytes((entry.directory / "solutions" / "win.jsonl").read_bytes())
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["--plain", "qualify", entry.game_id, "--regime", "quick", "--workers", "1",
                                 "--recording", "win_copy.jsonl", "--json"])
    assert result.exit_code == 0, result.output
    assert "did not re-execute" not in result.output


def test_a_recording_of_another_game_or_none_is_refused_not_a_failed_qualification(tmp_path):
    """`--recording` of another game failed this game's playback ("win_levels expected 6, got 7", verdict FAIL);
    a file that is no recording did too. Now each is refused (exit 2) before any check; with `all`, a recording
    is played back on its own game only."""
    entry, other = GAMES[0], GAMES[1]
    theirs = other.directory / "solutions" / "win.jsonl"
    result = runner.invoke(app, ["--plain", "qualify", entry.game_id, "--regime", "quick", "--workers", "1",
                                 "--recording", str(theirs)])
    assert result.exit_code == 2, result.output
    assert f"is a recording of {other.game_id}, not of {entry.game_id}" in " ".join(result.output.split())
    manifest = tmp_path / "SIMULATION.json"
    manifest.write_text('{"participants": 3}\n')
    result = runner.invoke(app, ["--plain", "qualify", entry.game_id, "--regime", "quick", "--workers", "1",
                                 "--recording", str(manifest)])
    assert result.exit_code == 2 and "its first line names no game_id" in " ".join(result.output.split())
    from pipeline.qualify.checks import check_playback

    mine = tmp_path / "mine.jsonl"
    mine.write_bytes((entry.directory / "solutions" / "win.jsonl").read_bytes())
    result = check_playback(resolve(other.game_id, GAMES_DIR), [mine, theirs])
    assert result.status == "pass" and "mine.jsonl" not in json.dumps(result.evidence)  # its own only


def test_cli_exit_codes(tmp_path):
    bad = runner.invoke(app, ["--plain", "qualify", "cr01", "--regime", "nope", "--environments", str(FIXTURES)])
    assert bad.exit_code == 2
    failing = runner.invoke(app, ["--plain", "qualify", "cr01", "--regime", "quick", "--environments", str(FIXTURES),
                                  "--out", str(tmp_path)])
    assert failing.exit_code == 1
    report = json.loads(next(tmp_path.glob("cr01-*/qualification.json")).read_text())
    assert report["verdict"] == "fail"
    missing = runner.invoke(app, ["--plain", "qualify", "zz99", "--environments", str(FIXTURES)])
    assert missing.exit_code == 1
    assert GAMES_DIR.is_dir()
