"""Hostile game folders (tests/fixtures/hostile_games) under every command that runs game code: each ends within
the sandbox's limits, exits 3 naming the game and the reason, writes nothing outside the sandbox's scratch folder
and leaves no process behind."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core import sandbox

runner = CliRunner()
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hostile_games"
SENTINELS = [Path("/tmp/arcstudy-hostile-sentinel-system"), Path("/tmp/arcstudy-hostile-sentinel-write")]

# game code -> what the command must say of it
HOSTILE = {
    "rt01": "no progress",           # retries under `except Exception: continue`: killed by the sandbox
    "rx01": "no progress",           # a catastrophic regular expression (one C call)
    "th01": "thread",                # a non-daemon thread started at import
    "td01": "daemon thread",         # a daemon thread that sleeps for good, started in a step
    "ox01": "exit code 0",           # os._exit(0) in a step
    "mm01": "memory",                # a 4 GB allocation
    "sy01": "os.system",             # a shell command at import
    "wr01": "writing outside",       # file writes at import
    "so01": "socket",                # a network connection at import
    "fg01": "wrong shape",           # every result its sandbox sends back forged to ("ok", 42)
    "lp01": "step time limit",       # a plain endless loop in a step: StepTimeout raised inside it
}


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def sandbox_processes(parent_pid: int) -> list[int]:
    """Processes still running in a scratch folder of a sandbox started by `parent_pid`."""
    marker = os.path.join(tempfile.gettempdir(), f"arcstudy-sandbox-{parent_pid}-")
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd").startswith(marker):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def script(path: Path, game_id: str) -> Path:
    """A playback file: ACTION1 (to level 2), then ACTION2, where the step-time hostilities happen."""
    path.write_text("".join(json.dumps({"data": {"action_input": {"id": a, "data": {"game_id": game_id}}}}) + "\n"
                            for a in (1, 2, 1)), encoding="utf-8")
    return path


@pytest.fixture
def small_limits(monkeypatch):
    from engine import watchdog

    monkeypatch.setattr(watchdog, "_limit", 0.5)  # the engine's step time limit, passed on to the sandbox
    monkeypatch.setenv("ARCSTUDY_SANDBOX_IDLE_S", "1.5")  # no progress for 1.5 s: killed
    from pipeline.core import game_code

    monkeypatch.setattr(game_code, "_announced", set())  # the notice is said once per run: each test is a run
    for sentinel in SENTINELS:
        sentinel.unlink(missing_ok=True)
    before = tree_digest(FIXTURES)
    yield
    sandbox.close_all()
    assert tree_digest(FIXTURES) == before  # nothing written beside the games (no file, no __pycache__)
    assert not [s for s in SENTINELS if s.exists()]
    assert sandbox_processes(os.getpid()) == []


def commands(code: str, tmp_path: Path) -> dict[str, list[str]]:
    game_id = f"{code}-0000beef"
    playback = script(tmp_path / f"{code}.jsonl", game_id)
    return {
        "score": ["score", str(playback), "--games", str(FIXTURES), "--db", str(tmp_path / "s.duckdb"), "--out",
                  str(tmp_path / "score"), "--no-figures", "--workers", "1"],
        "view": ["view", str(playback), "--games", str(FIXTURES), "--out", str(tmp_path / "v.html")],
        "qualify": ["qualify", code, "--regime", "quick", "--environments", str(FIXTURES), "--workers", "1"],
        "replay": ["replay", str(playback), "--games", str(FIXTURES), "--out", str(tmp_path / "r.jsonl")],
        "export-transitions": ["export-transitions", str(playback), "--games", str(FIXTURES), "--out",
                               str(tmp_path / "tr")],
        "explore": ["explore", code, "--environments", str(FIXTURES), "--max-seconds", "5", "--workers", "1"],
    }


@pytest.mark.parametrize("code", HOSTILE)
@pytest.mark.parametrize("verb", ["score", "view", "qualify", "replay", "export-transitions"])
def test_a_hostile_game_is_that_games_failure_and_contained(tmp_path, small_limits, code, verb):
    result = runner.invoke(app, ["--plain", *commands(code, tmp_path)[verb]])
    # (qualify: an action that raises, at its time limit too, fails the game's `runs` check, exit 1; the sandbox
    # stopping the code is exit 3. export-transitions said nothing and exited 0 for lp01: the play was "cut")
    assert result.exit_code == (1 if (verb, code) == ("qualify", "lp01") else 3), result.output
    assert "Traceback" not in result.output, result.output
    assert f"{code}-0000beef" in result.output, result.output
    assert HOSTILE[code] in result.output, result.output
    assert "arcstudy runs the Python code in" in result.output  # the notice, once


def tame_recording(tmp_path: Path, code: str) -> Path:
    """A genuine recording of `script`'s actions, made on a tame copy of the game (same id: its endless loop never
    entered), to be replayed against the hostile original."""
    tame = tmp_path / "tame" / code / "0000beef"
    shutil.copytree(FIXTURES / code / "0000beef", tame)
    source = tame / f"{code}.py"
    source.write_text(source.read_text().replace("while True:", "while False:"))
    recording = tmp_path / f"{code}-recording.jsonl"
    made = runner.invoke(app, ["--plain", "replay", str(script(tmp_path / "s.jsonl", f"{code}-0000beef")), "--games",
                               str(tmp_path / "tame"), "--out", str(recording)])
    assert made.exit_code == 0, made.output
    return recording


def test_a_recording_replayed_for_verification_is_stopped_too(tmp_path, small_limits):
    # a genuine recording, made on a tame copy of rt01 (same id), scored against the hostile original: the
    # verification replay (not a playback script) hangs in ACTION2 and is killed
    recording = tame_recording(tmp_path, "rt01")
    result = runner.invoke(app, ["--plain", "score", str(recording), "--games", str(FIXTURES), "--db",
                                 str(tmp_path / "s.duckdb"), "--out", str(tmp_path / "score"), "--no-figures",
                                 "--workers", "1"])
    assert result.exit_code == 3, result.output
    assert "left out of the score" in result.output and "no progress" in result.output, result.output
    checks = (tmp_path / "score" / "replay_checks.csv").read_text()
    assert "rt01-0000beef" in checks and "stopped in the sandbox (timeout)" in checks


def test_the_games_help_says_the_folders_code_is_run():
    for verb, option in (("score", "--games"), ("view", "--games"), ("replay", "--games"),
                         ("qualify", "--environments"), ("explore", "--environments"), ("simulate", "--environments"),
                         ("report", "--games")):
        result = runner.invoke(app, [verb, "--help"], terminal_width=200)
        assert result.exit_code == 0
        text = " ".join(result.output.replace("│", " ").split())
        described = text[text.index("Options"):]
        described = described[described.index(f" {option} "):]
        assert "Python code is run (in the sandbox" in described[:600], (verb, described[:600])


@pytest.mark.parametrize("code", ["rt01", "th01"])
def test_a_real_run_ends_and_leaves_no_process(tmp_path, code):
    env = {**os.environ, "ARCSTUDY_STEP_TIMEOUT_S": "0.5", "ARCSTUDY_SANDBOX_IDLE_S": "1.5"}
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "--plain", *commands(code, tmp_path)["score"]],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, output
    assert f"{code}-0000beef" in output and HOSTILE[code] in output, output
    assert sandbox_processes(proc.pid) == []
    assert not list(Path(tempfile.gettempdir()).glob(f"arcstudy-sandbox-{proc.pid}-*"))  # scratch removed


def test_the_calibration_explorer_notes_a_stopped_game_and_the_report_run_knows(small_limits, monkeypatch):
    from pipeline.core import game_code
    from pipeline.report.reports.calibration import ExploreOptions, explore_levels

    monkeypatch.setattr(game_code, "_stopped", [])
    table, notes = explore_levels({"ox01-0000beef": 2}, ExploreOptions(games_dirs=(FIXTURES,), max_nodes=50,
                                                                       seconds=60))
    assert any("explorer stopped" in n and "ox01-0000beef" in n and "exit code 0" in n for n in notes), notes
    assert len(game_code.stopped_in_run()) == 1  # `arcstudy report` then exits 3


def test_a_recording_exported_against_a_game_that_fails_mid_replay_is_cut_and_reported(tmp_path, small_limits):
    """A recording made on a tame copy of lp01, exported against the original, whose ACTION2 loops until the step
    time limit raises inside it: the rows before that step are exported and the play is listed as cut, and the
    export says so and exits 3 (it said "1 play(s) cut at a divergence" and exited 0, as for a recording whose
    data differs from the game)."""
    import polars as pl

    recording = tame_recording(tmp_path, "lp01")
    result = runner.invoke(app, ["--plain", "export-transitions", str(recording), "--games", str(FIXTURES), "--out",
                                 str(tmp_path / "tr")])
    assert result.exit_code == 3, result.output
    text = " ".join(result.output.split())
    assert "lp01-0000beef" in text and "(ACTION2): the game raised StepTimeout" in text, text
    rows = pl.read_parquet(tmp_path / "tr" / "data")
    assert rows.get_column("action").to_list() == ["RESET", "ACTION1"]  # up to the step before
    assert "StepTimeout" in (tmp_path / "tr" / "README.md").read_text().split("## Plays cut at a divergence", 1)[1]


def good_script(tmp_path: Path) -> Path:
    """A playback file for a shipped game (run in arcstudy's own games' sandbox): the good file of a run."""
    return script(tmp_path / "good.jsonl", "bg41-a6ea70d5")


@pytest.mark.parametrize("verb", ["replay", "export-transitions", "qualify", "explore"])
def test_a_result_of_the_wrong_shape_is_that_games_failure(tmp_path, small_limits, verb):
    # fg01 replaces the child's result writer at import: whatever arcstudy's function returns, the parent gets
    # ("ok", 42), plain data the restricted unpickler lets through; each caller checks the shape it needs
    args = commands("fg01", tmp_path)[verb]
    if verb == "export-transitions":
        args = [*args, str(good_script(tmp_path))]  # the good game of the same run still lands
    result = runner.invoke(app, ["--plain", *args])
    assert result.exit_code == 3, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    text = " ".join(result.output.split())
    assert "fg01-0000beef" in text and "the game's sandbox answered with a result of the wrong shape" in text, text
    if verb == "export-transitions":
        import polars as pl

        games = pl.read_parquet(tmp_path / "tr" / "data").get_column("game_id").unique().to_list()
        assert games == ["bg41-a6ea70d5"]
        assert "fg01" in (tmp_path / "tr" / "README.md").read_text().split("## Left out", 1)[1]
    if verb == "replay":
        assert not (tmp_path / "r.jsonl").exists()


# td01 starts a sleeping daemon thread in ACTION2 and plays on: the call that started it fails and its child is
# ended (small_limits: no sandbox process is left). mm01 allocates 4 GB in ACTION2: the MemoryError there is the
# sandbox's memory limit, not a divergence that cuts the play, nor an error the explorer lists as a finding of the
# graph. Either is that game's failure alone: the good game of the same export still lands, whole.
@pytest.mark.parametrize(("game", "verb", "said"), [
    ("td01", "replay", "daemon thread 'td01-sleeper'"),
    ("td01", "export-transitions", "daemon thread 'td01-sleeper'"),
    ("mm01", "export-transitions", "(memory): the code ran out of its memory limit"),
    ("mm01", "explore", "(memory): the code ran out of its memory limit"),
])
def test_a_game_that_leaves_a_thread_or_floods_memory_fails_alone(tmp_path, small_limits, game, verb, said):
    args = commands(game, tmp_path)[verb]
    if verb == "export-transitions":
        args = [*args, str(good_script(tmp_path))]
    result = runner.invoke(app, ["--plain", *args])
    assert result.exit_code == 3, result.output
    text = " ".join(result.output.split())
    assert f"{game}-0000beef" in text and said in text, text
    if verb == "export-transitions":
        import polars as pl

        games = pl.read_parquet(tmp_path / "tr" / "data").get_column("game_id").unique().to_list()
        assert games == ["bg41-a6ea70d5"]
