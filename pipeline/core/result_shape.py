"""Checking the shape of what a game's sandbox answered, before arcstudy uses it.

    from pipeline.core.result_shape import expect, pair, list_of

    lines = expect(run_game_code(fn, arg, key=...), list_of(dict), "a list of recording lines")

A game's code runs in the same child as arcstudy's function that returns the result (pipeline.core.game_code), so
it can replace what that function returns: the restricted unpickler only makes sure the answer is plain data
(pipeline.core.sandbox). `expect` is where a caller says what it needs; an answer of another shape raises
SandboxFailure (kind WRONG_SHAPE), which every caller already reports as that game's failure, named, exit 3 --
never a TypeError deep in arcstudy's own code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.core.sandbox import SandboxFailure

__all__ = ["WRONG_SHAPE", "WRONG_SHAPE_TEXT", "expect", "instance", "list_of", "pair", "tuple_of", "wrong_shape"]

WRONG_SHAPE = "wrong_shape"
WRONG_SHAPE_TEXT = "the game's sandbox answered with a result of the wrong shape"

Check = Callable[[Any], bool]


def _shown(value: Any) -> str:
    text = type(value).__name__
    if isinstance(value, (list, tuple)):
        text += f" of {len(value)}"
    return text


def wrong_shape(expected: str, value: Any) -> SandboxFailure:
    """The failure for an answer that is not `expected` (words: "a list of recording lines")."""
    return SandboxFailure(WRONG_SHAPE, f"{WRONG_SHAPE_TEXT} (expected {expected}, got {_shown(value)})")


def expect(value: Any, check: Check, expected: str) -> Any:
    """`value` when `check(value)` holds, else SandboxFailure(WRONG_SHAPE) saying `expected` and what came."""
    try:
        ok = bool(check(value))
    except Exception:  # noqa: BLE001 - a check that trips over the value: the value is not of the shape
        ok = False
    if not ok:
        raise wrong_shape(expected, value)
    return value


def instance(*types: type) -> Check:
    """Of one of `types` (a bool is not an int here)."""
    def check(value: Any) -> bool:
        if isinstance(value, bool) and bool not in types:
            return False
        return isinstance(value, types)
    return check


def list_of(item: type | Check) -> Check:
    """A list whose every item is an instance of `item` (a type) or passes `item` (a check)."""
    test = instance(item) if isinstance(item, type) else item
    return lambda value: isinstance(value, list) and all(test(x) for x in value)


def tuple_of(*items: type | Check) -> Check:
    """A tuple (or list) of exactly len(items) values, each of its type or passing its check."""
    tests = [instance(i) if isinstance(i, type) else i for i in items]
    return lambda value: (isinstance(value, (tuple, list)) and len(value) == len(tests)
                          and all(test(x) for test, x in zip(tests, value, strict=True)))


def pair(first: type | Check = object, second: type | Check = object) -> Check:
    """A 2-tuple (or 2-list): `tuple_of(first, second)`."""
    return tuple_of(first, second)
