"""A time limit on each game action: game code that never returns from a step must not hang the program that
replays it (a scorer, an explorer, a viewer, a qualification run).

Not part of the reference engine's interface (it has no limit); the default is generous (60 s for one action,
where real games take well under a millisecond) and `ARCSTUDY_STEP_TIMEOUT_S` changes it (0 or less: no
limit). `set_step_time_limit` changes it in a running process.

How: each action registers its thread and deadline (`enter`/`leave`: a dict write and a pop, a fraction of a
microsecond); one daemon thread sleeps until the nearest deadline (at least every limit's length) and raises
`StepTimeout` in a thread whose action has run past it (`PyThreadState_SetAsyncExc`, delivered at the game's
next Python bytecode: a loop in the game's own Python code is stopped; a single C call such as a long sleep
is stopped when it returns).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from threading import get_ident
from time import monotonic

_ENV = "ARCSTUDY_STEP_TIMEOUT_S"


def _limit_from_env() -> float:
    try:
        return float(os.environ.get(_ENV, "60"))
    except ValueError:
        return 60.0


_limit = _limit_from_env()
_lock = threading.Lock()
_wake = threading.Condition(_lock)
_deadlines: dict[int, float] = {}  # thread ident -> deadline (time.monotonic) of the action it is running
_watcher: threading.Thread | None = None


class StepTimeout(RuntimeError):
    """A game action ran longer than the step time limit."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or (f"the game's action ran longer than the step time limit of {_limit:g} s "
                                    f"(set {_ENV} to change it): its code does not return",)))


def set_step_time_limit(seconds: float | None) -> None:
    """Seconds one action may take; None or <= 0: no limit (from the next action on)."""
    global _limit
    with _lock:
        _limit = 0.0 if seconds is None else float(seconds)
        _wake.notify()


def step_time_limit() -> float | None:
    return _limit if _limit > 0 else None


def enter() -> int | None:
    """Called as an action starts; returns the token for `leave` (None when there is no limit). No lock: a
    dict store is atomic, and this runs on every action."""
    if _limit <= 0:
        return None
    ident = get_ident()
    _deadlines[ident] = monotonic() + _limit
    if _watcher is None:
        with _lock:
            if _watcher is None:
                _start_watcher()
    return ident


def leave(token: int | None) -> None:
    """Called as the action ends, however it ends."""
    if token is not None:
        _deadlines.pop(token, None)


@contextmanager
def time_limited(what: str) -> Iterator[None]:
    """Game code that is not an action (executing the game file, constructing the game) under the same limit as
    one action: `StepTimeout` naming `what` instead of a hang. Inside an action already watched (a game that
    builds another game in its step), the action's own deadline stands."""
    if _limit <= 0 or get_ident() in _deadlines:
        yield
        return
    token = enter()
    try:
        yield
    except StepTimeout as err:  # said of `what`, raised as it is: its traceback shows the game line that looped
        err.args = (f"{what} ran longer than the step time limit of {_limit:g} s (set {_ENV} to change it): its "
                    "code does not return",)
        raise
    finally:
        leave(token)


def _forget_watcher_in_child() -> None:
    # A forked process has no copy of the parent's watcher thread: it starts its own on its first action.
    global _lock, _wake, _watcher
    _lock = threading.Lock()
    _wake = threading.Condition(_lock)
    _watcher = None
    _deadlines.clear()


os.register_at_fork(after_in_child=_forget_watcher_in_child)


def _start_watcher() -> None:  # under _lock
    global _watcher
    _watcher = threading.Thread(target=_watch, name="arcstudy-step-watchdog", daemon=True)
    _watcher.start()


def _watch() -> None:
    with _lock:
        while True:
            if not _deadlines:
                _wake.wait(_limit if _limit > 0 else None)
                continue
            now = monotonic()
            running = list(_deadlines.items())  # a copy: actions come and go meanwhile
            overdue = [ident for ident, deadline in running if deadline <= now]
            for ident in overdue:
                # Once per action (the game may take a moment to reach a bytecode). An action that ends in
                # the instant between this check and the raise still ran past the limit: the exception then
                # surfaces just after it, which reports the same overrun.
                if _deadlines.pop(ident, None) is not None:
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(StepTimeout))
            if not overdue and running:
                _wake.wait(max(0.0, min(deadline for _, deadline in running) - now))
