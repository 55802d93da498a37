"""Games that misbehave (raise while loading, starting or stepping) under every command that runs game code:
each is reported as that game's failure with the error, never as a Python traceback, and other games still run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app

runner = CliRunner()

GAME = '''
from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite
{module}

class {cls}(ARCBaseGame):
    def __init__(self):
        {init}
        super().__init__("{code}", [Level([Sprite([[1]], name="p")], grid_size=(4, 4)),
                                    Level([Sprite([[2]], name="p")], grid_size=(4, 4))],
                         Camera(), available_actions=[1, 2])

    def step(self):
        {step}
        if self.action.id == GameAction.ACTION1:
            self.next_level()
        self.complete_action()
'''


def write_game(root: Path, code: str, *, module: str = "", init: str = "pass", step: str = "pass",
               metadata: dict | None = None) -> str:
    folder = root / code / "aaaa1111"
    folder.mkdir(parents=True)
    cls = code[:1].upper() + code[1:]
    (folder / f"{code}.py").write_text(GAME.format(module=module, cls=cls, init=init, step=step, code=code),
                                       encoding="utf-8")
    meta = {"game_id": f"{code}-aaaa1111", "class_name": cls, "baseline_actions": [1, 1],
            "date_downloaded": "2026-01-01T00:00:00+00:00", **(metadata or {})}
    (folder / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    return f"{code}-aaaa1111"


BROKEN = {
    "on import": {"module": "raise RuntimeError('boom on import')"},
    "in __init__": {"init": "raise RuntimeError('boom in init')"},
    "in step": {"step": "raise RuntimeError('boom in step')"},
}


def script(path: Path, game_id: str) -> Path:
    path.write_text("".join(json.dumps({"data": {"action_input": {"id": a, "data": {"game_id": game_id}}}}) + "\n"
                            for a in (1, 2, 1)), encoding="utf-8")
    return path


def assert_reported(result, *needles: str) -> None:
    assert "Traceback" not in result.output, result.output
    for needle in needles:
        assert needle in result.output, result.output


# what `qualify all` says of each broken game; a top-level exit() once ended the whole run at that game
QUALIFY_BROKEN = {**{where: (game, ["RuntimeError: boom"]) for where, game in BROKEN.items()},
                  "exit on import": ({"module": "raise SystemExit(0)"}, ["called exit", "bx01.py:"])}


@pytest.mark.parametrize("where", QUALIFY_BROKEN)
def test_qualify_reports_a_game_that_raises_as_failed_and_qualifies_the_others(tmp_path, where):
    game, said = QUALIFY_BROKEN[where]
    write_game(tmp_path, "ok01")
    write_game(tmp_path, "bx01", **game)
    result = runner.invoke(app, ["--plain", "qualify", "all", "--regime", "quick", "--environments", str(tmp_path),
                                 "--workers", "1", "--json"])
    assert result.exit_code == 1, result.output
    assert_reported(result)
    reports = {r["game_id"]: r for r in json.loads(result.stdout)}
    # the other game ran every check (this toy game is too easy to pass them: its verdict is not the point)
    assert [c["name"] for c in reports["ok01-aaaa1111"]["checks"]] == [
        "playback", "winnable", "random_win_threshold", "random_play", "fuzz"]
    broken = reports["bx01-aaaa1111"]
    assert broken["verdict"] == "fail"
    assert broken["checks"][0]["name"] == "loads" and broken["checks"][0]["status"] == "fail"
    assert all(words in broken["checks"][0]["summary"] for words in said), broken["checks"][0]


@pytest.mark.parametrize("where", BROKEN)
def test_explore_reports_a_game_that_raises_while_starting(tmp_path, where):
    write_game(tmp_path, "bx01", **BROKEN[where])
    result = runner.invoke(app, ["--plain", "explore", "bx01", "--environments", str(tmp_path), "--workers", "1"])
    assert result.exit_code == 1, result.output
    assert_reported(result, "bx01-aaaa1111", "RuntimeError: boom", "bx01.py:")


@pytest.mark.parametrize("where", BROKEN)
def test_replay_reports_a_game_that_raises(tmp_path, where):
    game_id = write_game(tmp_path / "games", "bx01", **BROKEN[where])
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["--plain", "replay", str(script(tmp_path / "s.jsonl", game_id)), "--games",
                                 str(tmp_path / "games"), "--out", str(out)])
    assert result.exit_code == 3, result.output
    assert_reported(result, "cannot replay", "RuntimeError: boom", "bx01.py:")
    assert not out.exists()


@pytest.mark.parametrize("values", [[1, "x"], [-1, 2], [True, 1], [1.5, 2], [None, 1], "12"])
def test_score_and_view_name_metadata_baselines_that_are_not_action_counts(tmp_path, values):
    game_id = write_game(tmp_path / "games", "mb01", metadata={"baseline_actions": values})
    playback = script(tmp_path / "s.jsonl", game_id)
    for args in (["score", str(playback), "--db", str(tmp_path / "x.duckdb"), "--workers", "1"],
                 ["view", str(playback), "--out", str(tmp_path / "v.html")]):
        result = runner.invoke(app, ["--plain", *args, "--games", str(tmp_path / "games")])
        assert_reported(result)
        if values != "12":  # a string is not a list: the metadata has no baseline, as before
            assert result.exit_code == 2 if args[0] == "score" else 1, result.output
            assert "metadata.json" in result.output and "baseline" in result.output, result.output


def test_view_names_a_game_that_draws_colours_outside_the_palette(tmp_path):
    game_id = write_game(tmp_path / "games", "co01", step="self.current_level.get_sprites()[0].pixels[0, 0] = 99")
    out = tmp_path / "v.html"
    result = runner.invoke(app, ["--plain", "view", str(script(tmp_path / "s.jsonl", game_id)), "--games",
                                 str(tmp_path / "games"), "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert_reported(result, "co01-aaaa1111", "colour indices 0-15")


@pytest.mark.parametrize("code", [0, 3])
def test_game_code_that_calls_exit_does_not_end_the_command_as_if_it_had_finished(tmp_path, code):
    # the game's code runs in the sandbox: its exit is that game's failure (exit 3, rejected input), named
    game_id = write_game(tmp_path / "games", "ex01", step=f"raise SystemExit({code})")
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["--plain", "replay", str(script(tmp_path / "s.jsonl", game_id)), "--games",
                                 str(tmp_path / "games"), "--out", str(out)])
    assert result.exit_code == 3, result.output
    assert_reported(result, "SystemExit", "ex01.py:")
    assert not out.exists()


def test_a_keyboard_interrupt_raised_by_game_code_is_the_games_failure(tmp_path):
    # raised by the game in the sandbox, it is not the person's Ctrl-C (which reaches arcstudy alone)
    game_id = write_game(tmp_path / "games", "lp01", step="raise KeyboardInterrupt")
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["--plain", "replay", str(script(tmp_path / "s.jsonl", game_id)), "--games",
                                 str(tmp_path / "games"), "--out", str(out)])
    assert result.exit_code == 3, result.output
    assert_reported(result, "KeyboardInterrupt", "lp01.py:")
    assert not out.exists()


def test_ctrl_c_in_a_game_that_never_returns_says_the_run_was_interrupted(tmp_path):
    # a game stuck in step is left with Ctrl-C: the command says so and exits 130, and the sandboxed game is gone
    import os
    import signal
    import threading

    game_id = write_game(tmp_path / "games", "lp01", step="import time\n        time.sleep(60)")
    out = tmp_path / "out.jsonl"
    # Ctrl-C as an interactive shell delivers it: a suite started in the background of a non-interactive shell
    # (`make test &`) inherits SIGINT ignored, and Python then installs no handler (the game slept its 60 s)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT))  # the key press, while the game sleeps
    timer.start()
    try:
        result = runner.invoke(app, ["--plain", "replay", str(script(tmp_path / "s.jsonl", game_id)), "--games",
                                     str(tmp_path / "games"), "--out", str(out)])
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, before)
    assert result.exit_code == 130, result.output
    assert_reported(result, "interrupted")
    assert not out.exists()


@pytest.mark.parametrize("verb", ["replay", "score"])
def test_a_game_that_never_returns_from_a_step_is_stopped_by_the_step_time_limit(tmp_path, monkeypatch, verb):
    from engine import watchdog

    monkeypatch.setattr(watchdog, "_limit", 0.5)
    game_id = write_game(tmp_path / "games", "hg01", step="while self.action.id == GameAction.ACTION2: pass")
    args = {"replay": ["replay", str(script(tmp_path / "s.jsonl", game_id)), "--out", str(tmp_path / "o.jsonl")],
            "score": ["score", str(script(tmp_path / "s.jsonl", game_id)), "--db", str(tmp_path / "s.duckdb"),
                      "--out", str(tmp_path / "out"), "--no-figures", "--workers", "1"]}[verb]
    result = runner.invoke(app, ["--plain", *args, "--games", str(tmp_path / "games")])
    assert result.exit_code in (1, 3), result.output
    assert_reported(result, "step time limit")


# game code that never returns outside a step: the file's top level, the game's __init__
LOOPING = {"executing the game file": {"module": "while True: pass"},
           "constructing the game": {"init": "while True: pass"}}


@pytest.mark.parametrize("where", LOOPING)
def test_a_game_that_never_finishes_loading_is_stopped_by_the_step_time_limit(tmp_path, monkeypatch, where):
    from engine import watchdog

    monkeypatch.setattr(watchdog, "_limit", 0.5)
    write_game(tmp_path, "ok01")
    game_id = write_game(tmp_path, "lp01", **LOOPING[where])
    result = runner.invoke(app, ["--plain", "qualify", "all", "--regime", "quick", "--environments", str(tmp_path),
                                 "--workers", "1", "--json"])
    assert result.exit_code == 1, result.output
    reports = {r["game_id"]: r for r in json.loads(result.stdout)}
    assert reports["ok01-aaaa1111"]["checks"][0]["name"] == "playback"  # the other game was qualified
    loads = reports[game_id]["checks"][0]
    assert loads["name"] == "loads" and loads["status"] == "fail", loads
    assert f"{where} ran longer than the step time limit" in loads["summary"], loads
    result = runner.invoke(app, ["--plain", "replay", str(script(tmp_path / "s.jsonl", game_id)), "--games",
                                 str(tmp_path), "--out", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 3, result.output
    # the game line that looped, not the engine's
    assert_reported(result, f"{where} ran longer", "lp01.py:")


@pytest.mark.parametrize("verb", ["replay", "score"])
def test_sigterm_stops_the_command_like_ctrl_c_and_says_so(tmp_path, verb):
    """SIGTERM (timeout, systemd, docker stop, CI cancellation) ended the process at once: no message, exit 143,
    its sandbox's and staging folders left behind. It now stops the command as Ctrl-C does, cleaning up, with one
    line and exit 143."""
    import os
    import signal
    import subprocess
    import sys
    import time

    game_id = write_game(tmp_path / "games", "lp01", step="import time\n        time.sleep(60)")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / ("o.jsonl" if verb == "replay" else "out")
    args = {"replay": ["replay", str(script(tmp_path / "s.jsonl", game_id)), "--out", str(out)],
            "score": ["score", str(script(tmp_path / "s.jsonl", game_id)), "--out", str(out), "--no-figures",
                      "--workers", "1"]}[verb]
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "--plain", *args, "--games", str(tmp_path / "games")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    time.sleep(4)  # the game is asleep in its step by now
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stdout + stderr
    assert "terminated (SIGTERM)" in stderr and "Traceback" not in stderr, stderr
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if ".arcstudy-stage-" in p.name] == []
    assert list(scratch.iterdir()) == []  # the sandbox's scratch folders are gone with it
