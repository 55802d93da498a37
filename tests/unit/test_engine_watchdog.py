"""The step time limit (engine.watchdog): an action whose game code never returns raises StepTimeout in the
thread that runs it, and nothing is raised anywhere once actions end in time."""

from __future__ import annotations

import threading
import time

import pytest

from engine import ActionInput, ARCBaseGame, Camera, GameAction, Level, Sprite, watchdog


class Looping(ARCBaseGame):
    def __init__(self) -> None:
        super().__init__("lp01", [Level([Sprite([[1]], name="p")], grid_size=(4, 4))], Camera(),
                         available_actions=[1, 2])

    def step(self) -> None:
        while self.action.id == GameAction.ACTION2:  # never returns
            pass
        self.complete_action()


@pytest.fixture
def short_limit():
    before = watchdog.step_time_limit()
    watchdog.set_step_time_limit(0.3)
    yield
    watchdog.set_step_time_limit(before)


def test_an_action_that_never_returns_raises_step_timeout(short_limit):
    game = Looping()
    game.perform_action(ActionInput(id=GameAction.RESET))
    started = time.monotonic()
    with pytest.raises(watchdog.StepTimeout, match="step time limit of 0.3 s"):
        game.perform_action(ActionInput(id=GameAction.ACTION2))
    assert time.monotonic() - started < 5
    game.perform_action(ActionInput(id=GameAction.RESET))  # the game and the thread go on
    game.perform_action(ActionInput(id=GameAction.ACTION1))


def test_actions_that_end_in_time_never_get_the_exception(short_limit):
    game = Looping()
    for _ in range(2000):
        game.perform_action(ActionInput(id=GameAction.ACTION1))
    time.sleep(0.6)  # past every deadline those actions had
    total = sum(range(100_000))  # bytecode, where a stray exception would land
    assert total > 0


def test_each_thread_has_its_own_deadline(short_limit):
    errors: list[BaseException] = []

    def loop_forever():
        game = Looping()
        try:
            game.perform_action(ActionInput(id=GameAction.ACTION2))
        except watchdog.StepTimeout as err:
            errors.append(err)

    stuck = threading.Thread(target=loop_forever)
    stuck.start()
    game = Looping()
    for _ in range(500):  # this thread's actions are not disturbed by the other thread's timeout
        game.perform_action(ActionInput(id=GameAction.ACTION1))
    stuck.join(timeout=10)
    assert not stuck.is_alive() and len(errors) == 1


def test_no_limit_means_no_watch():
    before = watchdog.step_time_limit()
    watchdog.set_step_time_limit(None)
    try:
        assert watchdog.enter() is None
    finally:
        watchdog.set_step_time_limit(before)
