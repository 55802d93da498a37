"""Long replays go to the sandbox a chunk at a time, with the same results as one call.

`score` of a playback script of 500,000 actions took 1.2 GB, and `replay` of 20,000 actions with frames 1.3 GB:
the script's whole recording came back from the sandbox in one answer, and the recording's verification sent
every step in one call. Now a script's recording comes back a few thousand lines per call
(`playback.iter_replay_lines`, `transition_replay.script_lines_chunk`), and a recording of more than
`verify.REPLAY_CHUNK_STEPS` steps is verified a chunk at a time (`verify.replay_game`). These tests make the
chunks tiny and check that every line, check and divergence equals what one call gives, and that no answer
holds more than a chunk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import pipeline.core.game_code as game_code
import pipeline.core.sandbox as sandbox
import pipeline.recordings.playback as playback
import pipeline.scoring.verify as verify
from engine.loader import resolve_game
from pipeline.cli import app
from pipeline.recordings.playback import iter_replay_lines, read_playback_file, script_guid
from tests.integration.test_score_replay import load as _load
from tests.integration.test_score_replay import with_hash_changed as _with_hash_changed
from tests.integration.test_score_replay import without_line as _without_line
from tests.unit.test_broken_games_cli import write_game

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SAMPLES = SHARED / "samples" / "arc-agi-3"
GAMES = [SHARED / "conformance" / "environment_files"]
SCRIPTS = SHARED / "samples" / "playback-arc-agi-3"
WIN_FRAMES = SAMPLES / "fixtures" / "an53_scripted-win.frames.jsonl"
LOSE_NOFRAMES = SAMPLES / "fixtures" / "an53_scripted-lose.noframes.jsonl"

runner = CliRunner()


def _calls(monkeypatch, where, sent: list | None = None, held: list | None = None) -> list:
    """The answers of every sandbox call made through `where.run_game_code` (their arguments into ``sent``; into
    ``held``, whether the call's child was held then: the replay lives there between calls)."""
    answers = []
    real = where.run_game_code

    def counted(fn, arg, **kwargs):
        if sent is not None:
            sent.append(arg)
        if held is not None:
            held.append(any(ident[3] == kwargs["key"] for ident in sandbox._holds))
        answers.append(real(fn, arg, **kwargs))
        return answers[-1]

    monkeypatch.setattr(where, "run_game_code", counted)
    return answers


CASES = {
    "verified": lambda tmp: _load(WIN_FRAMES),
    "divergent at a frame": lambda tmp: _load(_without_line(WIN_FRAMES, 10, tmp)),
    "divergent by the level count": lambda tmp: _load(_without_line(LOSE_NOFRAMES, 20, tmp)),
    "frame-only, reconverged": lambda tmp: _with_hash_changed(_load(WIN_FRAMES), 5),
    "never reconverged": lambda tmp: _with_hash_changed(_load(WIN_FRAMES), 40),
}


@pytest.mark.parametrize("from_file", [True, False], ids=["file", "steps"])
@pytest.mark.parametrize("case", CASES)
def test_a_recording_verified_in_chunks_gets_the_checks_of_one_call(case, from_file, tmp_path, monkeypatch):
    rec = CASES[case](tmp_path)
    whole = verify.verify_recording(rec, GAMES, from_file=from_file)
    monkeypatch.setattr(verify, "REPLAY_CHUNK_STEPS", 3)
    sent: list = []
    held: list = []
    answers = _calls(monkeypatch, verify, sent, held)
    chunked = verify.verify_recording(rec, GAMES, from_file=from_file)
    assert chunked == whole
    assert all(held) and not sandbox._holds  # the child held while the replay lives there, released after
    assert len(answers) > 3 and all(isinstance(a, dict) for a in answers)  # the replay went in chunks
    assert max(len(arg[2]) for arg in sent) == 3  # each call carried a chunk of steps, not the recording
    assert [arg[3] for arg in sent].count(True) <= 1  # the last steps only once, as the last


def test_a_recording_that_does_not_load_in_chunks_is_unverified_as_in_one_call(tmp_path, monkeypatch):
    game_id = write_game(tmp_path / "games", "an53", init="raise RuntimeError('boom in init')")
    rec = _load(WIN_FRAMES)
    rec.game_id = game_id
    whole = verify.verify_recording(rec, [tmp_path / "games"], from_file=True)
    monkeypatch.setattr(verify, "REPLAY_CHUNK_STEPS", 3)
    chunked = verify.verify_recording(rec, [tmp_path / "games"], from_file=True)
    assert chunked == whole and {c.status for c in whole} == {"unverified"}
    assert "boom in init" in whole[0].detail


def _script_lines(script: Path, *, frames: bool) -> list[dict]:
    parsed = read_playback_file(script, keep_lines=False)
    info = resolve_game(parsed.game_id, GAMES)
    return list(iter_replay_lines(parsed.actions, info, guid=script_guid(parsed.file_sha256), frames=frames))


@pytest.mark.parametrize("frames", [False, True], ids=["counts", "frames"])
@pytest.mark.parametrize("name", ["ck17_scripted-win", "an53_scripted-lose"])
def test_a_script_replayed_in_chunks_gives_the_lines_of_one_call(name, frames, monkeypatch):
    script = SCRIPTS / f"{name}.playback.jsonl"
    whole = _script_lines(script, frames=frames)
    assert len(whole) == len(read_playback_file(script).actions) + 1
    monkeypatch.setattr(playback, "LINES_PER_CALL", 4)
    monkeypatch.setattr(playback, "FRAMES_PER_CALL", 3)
    held: list = []
    answers = _calls(monkeypatch, game_code, held=held)
    assert _script_lines(script, frames=frames) == whole
    assert all(held) and not sandbox._holds  # the child held while the replay lives there, released after
    assert len(answers) >= len(whole) // 4
    assert max(len(a["lines"]) for a in answers) <= 4  # no answer held more than a chunk
    if frames:  # and no more than about FRAMES_PER_CALL frames (one line's may cross it)
        assert all(sum(len(line["data"]["frame"]) for line in a["lines"][:-1]) < 3 for a in answers)


def _raising_game(root: Path, after: int) -> str:
    """A game whose step raises once it has answered ``after`` actions."""
    step = (f"if getattr(self, '_n', 0) >= {after}:\n            raise RuntimeError('boom at action {after + 1}')"
            "\n        self._n = getattr(self, '_n', 0) + 1")
    return write_game(root, "bx01", step=step)


def _long_script(path: Path, game_id: str, n: int) -> Path:
    path.write_text("".join(json.dumps({"data": {"action_input": {"id": 2, "data": {"game_id": game_id}}}}) + "\n"
                            for _ in range(n)), encoding="utf-8")
    return path


def test_a_game_that_raises_in_a_later_chunk_fails_the_replay_and_writes_nothing(tmp_path, monkeypatch):
    game_id = _raising_game(tmp_path / "games", after=10)
    script = _long_script(tmp_path / "s.jsonl", game_id, 30)
    monkeypatch.setattr(playback, "LINES_PER_CALL", 4)
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["--plain", "replay", str(script), "--games", str(tmp_path / "games"),
                                 "--out", str(out)])
    assert result.exit_code == 3, result.output
    assert "cannot replay" in result.output and "RuntimeError: boom at action 11" in result.output
    assert "Traceback" not in result.output
    assert not out.exists() and list(tmp_path.glob("out*")) == []  # no half-written recording either


def test_a_script_replayed_in_chunks_writes_the_whole_recording(tmp_path, monkeypatch):
    game_id = _raising_game(tmp_path / "games", after=1000)
    script = _long_script(tmp_path / "s.jsonl", game_id, 30)
    out_one = tmp_path / "one.jsonl"
    assert runner.invoke(app, ["--plain", "replay", str(script), "--games", str(tmp_path / "games"),
                               "--out", str(out_one)]).exit_code == 0
    monkeypatch.setattr(playback, "LINES_PER_CALL", 4)
    out = tmp_path / "chunked.jsonl"
    result = runner.invoke(app, ["--plain", "replay", str(script), "--games", str(tmp_path / "games"),
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == out_one.read_bytes() and len(out.read_text().splitlines()) == 31
    manifest = json.loads(out.with_name("chunked.manifest.json").read_text())
    assert manifest["notes"]["replay"]["lines_written"] == 31


def test_score_of_a_script_whose_game_raises_in_a_later_chunk_reports_the_script(tmp_path, monkeypatch):
    game_id = _raising_game(tmp_path / "games", after=10)
    script = _long_script(tmp_path / "s.jsonl", game_id, 30)
    monkeypatch.setattr(playback, "LINES_PER_CALL", 4)
    result = runner.invoke(app, ["--plain", "score", str(script), "--games", str(tmp_path / "games"),
                                 "--out", str(tmp_path / "scored"), "--workers", "1"])
    assert result.exit_code == 3, result.output
    assert "boom at action 11" in result.output and "Traceback" not in result.output


def test_a_stored_scripts_actions_made_a_slice_at_a_time_equal_the_scripts():
    from pipeline.recordings.playback import _StepActions, script_tables

    script = read_playback_file(SCRIPTS / "ck17_scripted-win.playback.jsonl")
    steps = script_tables(script, script.file_sha256)["core_arc3__steps"]
    actions = _StepActions(steps.reverse())  # in line order whatever the table's order
    assert len(actions) == len(script.actions) > 10
    assert actions[:] == script.actions and actions[3:9] == script.actions[3:9]
    assert actions[::4] == script.actions[::4] and actions[::-1] == script.actions[::-1]
    assert actions[-1] == script.actions[-1] and actions[5] == script.actions[5]
    assert list(actions) == script.actions
