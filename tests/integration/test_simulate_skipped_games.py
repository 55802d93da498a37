"""`arcstudy simulate --environments`: a game folder whose metadata.json or solution recordings cannot be read, or
whose code ends abnormally on its winning lines, is named with the reason, the other games are still simulated,
and the exit code (3) says something was skipped."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from pathlib import Path

from typer.testing import CliRunner

from games import GAMES_DIR
from pipeline.cli import app


def test_a_game_whose_metadata_cannot_be_read_is_named_and_the_run_exits_3(tmp_path: Path):
    envs = tmp_path / "envs"
    shutil.copytree(GAMES_DIR / "pv63", envs / "pv63", ignore=shutil.ignore_patterns("__pycache__"))
    (broken,) = (shutil.copytree(GAMES_DIR / "tw85", envs / "tw85",
                                 ignore=shutil.ignore_patterns("__pycache__")).glob("*/metadata.json"))
    broken.write_text('{"game_id": ', encoding="utf-8")  # cut short
    res = CliRunner().invoke(app, ["--plain", "simulate", "--out", str(tmp_path / "study"), "--no-harc",
                                   "--no-static", "--environments", str(envs)])
    text = " ".join(res.output.split())
    assert res.exit_code == 3, res.output
    assert f"skipped a game: {broken}: not valid JSON" in text, res.output
    assert "1 game folder(s) skipped" in text, res.output
    played = json.loads((tmp_path / "study" / "SIMULATION.json").read_text())["games"]
    assert [g["game_id"] for g in played] == ["pv63-003f92f7"]


def _two_games(tmp_path: Path) -> tuple[Path, Path]:
    """bg41 and pv63 copied to a folder of their own (games from outside: one sandbox per game)."""
    envs = tmp_path / "envs"
    for code in ("bg41", "pv63"):
        shutil.copytree(GAMES_DIR / code, envs / code, ignore=shutil.ignore_patterns("__pycache__"))
    (solutions,) = (envs / "bg41").glob("*/solutions")
    return envs, solutions


def _simulate(tmp_path: Path, envs: Path):
    res = CliRunner().invoke(app, ["--plain", "simulate", "--out", str(tmp_path / "study"), "--no-harc",
                                   "--no-static", "--environments", str(envs)])
    return res, " ".join(res.output.split())


def _simulated(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "study" / "SIMULATION.json").read_text())


def test_a_game_whose_code_ends_abnormally_is_left_out_by_name_and_the_others_are_simulated(tmp_path: Path):
    envs, _ = _two_games(tmp_path)
    (source,) = (envs / "bg41").glob("*/bg41.py")
    text = source.read_text(encoding="utf-8")
    at = text.index("\n", text.index("from arcengine import")) + 1
    source.write_text(text[:at] + "import os as _o\n_o._exit(0)\n" + text[at:], encoding="utf-8")
    res, text = _simulate(tmp_path, envs)
    assert res.exit_code == 3, res.output
    assert "left a game out: bg41-a6ea70d5" in text and "(exited)" in text, res.output
    described = _simulated(tmp_path)
    assert [g["game_id"] for g in described["games"]] == ["pv63-003f92f7"]
    assert len(described["games_left_out"]) == 1 and "bg41-a6ea70d5" in described["games_left_out"][0]


def test_a_solution_file_that_is_a_fifo_is_refused_by_name(tmp_path: Path):
    envs, solutions = _two_games(tmp_path)
    (solutions / "win.jsonl").unlink()
    os.mkfifo(solutions / "win.jsonl")
    with _unblocked(solutions / "win.jsonl"):  # had it been opened, the test ends (and fails) instead of hanging
        res, text = _simulate(tmp_path, envs)
    assert res.exit_code == 3, res.output
    assert f"bg41-a6ea70d5: {solutions / 'win.jsonl'}: is a FIFO (named pipe), not a regular file" in text, text
    assert [g["game_id"] for g in _simulated(tmp_path)["games"]] == ["pv63-003f92f7"]


def test_a_solution_file_too_large_to_be_one_is_not_read(tmp_path: Path):
    from pipeline.recordings.solution_files import MAX_SOLUTION_BYTES

    envs, solutions = _two_games(tmp_path)
    os.truncate(solutions / "win.jsonl", MAX_SOLUTION_BYTES + 1)  # sparse: nothing written to the disk
    res, text = _simulate(tmp_path, envs)
    assert res.exit_code == 3, res.output
    assert f"{solutions / 'win.jsonl'}: is 64.0 MB, more than a solution recording may be" in text, text
    assert [g["game_id"] for g in _simulated(tmp_path)["games"]] == ["pv63-003f92f7"]


def test_a_solution_file_that_is_not_a_recording_is_named(tmp_path: Path):
    envs, solutions = _two_games(tmp_path)
    (solutions / "win.jsonl").write_text("not json\n", encoding="utf-8")
    res, text = _simulate(tmp_path, envs)
    assert res.exit_code == 3, res.output
    assert f"{solutions / 'win.jsonl'}: not a toolkit recording that can be read: JSONDecodeError" in text, text
    assert [g["game_id"] for g in _simulated(tmp_path)["games"]] == ["pv63-003f92f7"]


def test_qualify_fails_the_playback_check_on_a_fifo_without_opening_it(tmp_path: Path):
    from engine.loader import resolve_game
    from pipeline.qualify.checks import check_playback

    envs, solutions = _two_games(tmp_path)
    (solutions / "win.jsonl").unlink()
    os.mkfifo(solutions / "win.jsonl")
    with _unblocked(solutions / "win.jsonl"):
        result = check_playback(resolve_game("bg41-a6ea70d5", envs))
    assert result.status == "fail"
    assert "win.jsonl" in result.summary and "is a FIFO (named pipe), not a regular file" in result.summary
    assert [r["recording"] for r in result.evidence["recordings"]] == ["lose.jsonl"]  # the other one is checked


@contextlib.contextmanager
def _unblocked(fifo: Path, after_s: float = 20.0):
    """Opens `fifo` for writing after `after_s` if a reader is blocked on it, so a regression fails, not hangs."""
    done = threading.Event()

    def release():
        if not done.wait(after_s):
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO when no reader waits: nothing to release
                os.close(fd)
            except OSError:
                pass

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
