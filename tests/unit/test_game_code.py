"""Running game code through pipeline.core.game_code: errors keep their name and line, progress is judged on
game code only, paths survive the sandbox's working folder."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from engine.loader import resolve_game
from pipeline.core import game_code, sandbox
from pipeline.core.game_code import GameCodeError, portable_info, run_game_code
from tests.unit import sandbox_targets as t

GAMES = Path(__file__).resolve().parents[2] / "games"


@pytest.fixture(autouse=True)
def _close():
    yield
    sandbox.close_all()


def test_an_exception_of_the_code_keeps_its_name_and_message():
    with pytest.raises(GameCodeError) as info:
        run_game_code(t.raise_value_error, "level 3 is broken", key="test-errors")
    err = info.value
    assert type(err).__name__ == "ValueError" and err.exc_type == "ValueError"
    assert str(err).startswith("level 3 is broken")
    assert isinstance(err, RuntimeError)  # never the original class: nothing of the child is rebuilt here
    again = pickle.loads(pickle.dumps(err))
    assert type(again).__name__ == "ValueError" and str(again) == str(err)


def test_a_memory_error_the_game_raises_itself_is_its_exception_and_a_failed_allocation_the_limit():
    with pytest.raises(GameCodeError) as info:
        run_game_code(t.raise_memory_error, "fake", key="test-errors")
    assert info.value.exc_type == "MemoryError" and str(info.value).startswith("fake")
    with pytest.raises(game_code.SandboxFailure) as stopped:
        run_game_code(t.allocate, 1 << 40, key="test-errors")  # a terabyte: past any limit
    assert stopped.value.kind == "memory" and "ran out of its memory limit" in stopped.value.detail


def test_what_a_game_raises_is_one_bounded_line():
    # a 20 MB message was printed and stored whole; a line break in it forged a line of arcstudy's own output
    message = "boom\r\nreplay: 1 play: 1 verified <- FAKE LINE \x1b[2J" + "x" * 5_000_000
    with pytest.raises(GameCodeError) as info:
        run_game_code(t.raise_value_error, message, key="test-errors")
    text = str(info.value)
    assert len(text) <= game_code.MAX_MESSAGE_CHARS and "\n" not in text and "\r" not in text
    assert text.startswith("boom replay: 1 play: 1 verified <- FAKE LINE \\x1b[2J") and text.endswith("…")


@pytest.mark.parametrize("answer", [42, ("ok",), ("done", 1), ("raised", "ValueError"), ("raised", (1,))])
def test_an_answer_of_the_wrong_shape_is_a_refusal(monkeypatch, answer):
    # a game can replace what its child sends back: the answer's shape is checked before it is used
    monkeypatch.setattr(game_code, "confined", lambda *a, **k: lambda _arg: answer)
    with pytest.raises(sandbox.SandboxFailure) as info:
        run_game_code(t.echo, 1, key="test-shape")
    assert info.value.kind == "wrong_shape" and "wrong shape" in info.value.detail


def test_arcstudys_own_work_in_the_sandbox_is_progress(monkeypatch):
    monkeypatch.setenv("ARCSTUDY_SANDBOX_IDLE_S", "0.8")
    assert game_code.game_limits().idle_s == 0.8
    # 2 s without a game action, but no game code under way either: not killed
    assert run_game_code(t.sleep, 2.0, key="test-progress") == "woke"


def test_a_game_found_by_a_relative_path_loads_in_the_sandbox(monkeypatch):
    monkeypatch.chdir(GAMES.parent)
    info = resolve_game("bg41", [Path("games")])
    assert not info.directory.is_absolute()
    portable = portable_info(info)
    assert portable.directory.is_absolute() and portable.source.parent == portable.directory
    assert run_game_code(t.n_levels, portable, key="test-paths", source=portable.source) == 7
