"""`arcstudy qualify --regime hash-seeds`: frames that depend on PYTHONHASHSEED are flagged before publication.

hs01 (tests/fixtures/hashseed) animates in the iteration order of a set of strings: flagged, with the steps of
its shipped solution that animate; a shipped arcstudy game plays identically under every seed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from games import GAMES_DIR, list_games
from pipeline.cli import app
from pipeline.explore import resolve
from pipeline.qualify.checks import REGIMES, check_hash_seeds

HASHSEED_GAMES = Path(__file__).resolve().parents[1] / "fixtures" / "hashseed"
runner = CliRunner()


def qualify(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["--plain", "qualify", *args, "--regime", "hash-seeds", "--json"])
    return result.exit_code, json.loads(result.stdout.strip().splitlines()[-1])[0]


def test_a_game_whose_frames_follow_set_order_is_flagged():
    code, report = qualify("hs01", "--environments", str(HASHSEED_GAMES))
    assert code == 1 and report["verdict"] == "fail" and report["regime"] == "hash-seeds"
    (check,) = report["checks"]
    assert check["name"] == "hash_seeds" and check["status"] == "fail"
    assert check["summary"].startswith("frames depend on PYTHONHASHSEED (outcomes agree)")
    scripts = {s["script"]: s for s in check["evidence"]["scripts"]}
    assert scripts["win.jsonl"]["frame_steps"] == [1, 3, 5]  # the three ACTION1 animations
    assert all(s["outcome_step"] is None for s in scripts.values())
    assert scripts["random"]["steps"] == REGIMES["hash-seeds"].random_steps + 1 and scripts["random"]["frame_steps"]


def test_a_shipped_game_is_not_flagged():
    entry = list_games()[0]
    code, report = qualify(entry.short_id)
    assert code == 0 and report["verdict"] == "pass", report
    (check,) = report["checks"]
    assert check["status"] == "pass"
    assert all(not s["frame_steps"] and s["outcome_step"] is None for s in check["evidence"]["scripts"])
    assert {s["script"] for s in check["evidence"]["scripts"]} >= {"win.jsonl", "random"}


def test_an_outcome_that_depends_on_the_seed_is_reported_as_such(tmp_path):
    # a variant where ACTION2 loses when the set starts with "amber": under PYTHONHASHSEED=1 only
    src = HASHSEED_GAMES / "hs01" / "5eed0001"
    target = tmp_path / "hs01" / "5eed0001"
    shutil.copytree(src, target, ignore=shutil.ignore_patterns("solutions"))
    code = (src / "hs01.py").read_text().replace(
        "            self.paint([])\n",
        "            self.paint([])\n            if next(iter(LAMPS)) == NAMES[0]:\n                self.lose()\n")
    (target / "hs01.py").write_text(code)
    check = check_hash_seeds(resolve("hs01", tmp_path), REGIMES["hash-seeds"])
    assert check.status == "fail" and check.summary.startswith("the outcome (state, levels, actions) depends")
    (script,) = check.evidence["scripts"]
    assert script["script"] == "random" and script["outcome_step"] is not None


def test_the_child_interpreters_import_nothing_from_the_working_folder(tmp_path, monkeypatch):
    # `python -m` puts the working folder first on sys.path: a stray json.py there would run in every child
    marker = tmp_path / "ran.txt"
    (tmp_path / "json.py").write_text(f"open({str(marker)!r}, 'w').write('imported from cwd')\n"
                                      "raise ImportError('not the real json')\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, report = qualify("hs01", "--environments", str(HASHSEED_GAMES))
    assert report["checks"][0]["name"] == "hash_seeds" and report["checks"][0]["status"] == "fail", report
    assert not marker.exists()


def test_an_extra_recording_that_cannot_be_read_fails_the_check_with_its_reason(tmp_path):
    """A broken, empty or deeply nested --recording ended the command in a traceback."""
    entry = list_games()[0]
    lines = (entry.directory / "solutions" / "win.jsonl").read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*lines[:2], "{not json", *lines[2:]]) + "\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for path, words in ((broken, "broken.jsonl:3: not JSON"), (empty, "empty recording")):
        result = check_hash_seeds(resolve(entry.game_id, GAMES_DIR), REGIMES["hash-seeds"], extra=[path])
        assert result.status == "fail" and path.name in result.summary and words in result.summary, result.summary
    # given on the command line, it is the input's fault, not the game's: refused before any check (it was a
    # FAIL verdict for the game)
    result = runner.invoke(app, ["--plain", "qualify", entry.short_id, "--recording", str(broken), "--regime",
                                 "hash-seeds", "--json"])
    assert result.exit_code == 2 and f"--recording {broken}: {broken}:3: not JSON" in result.output, result.output
