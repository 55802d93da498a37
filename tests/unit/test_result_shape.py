"""pipeline.core.result_shape: what a caller needs from a sandbox's answer, and the failure for anything else."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.result_shape import (
    WRONG_SHAPE,
    WRONG_SHAPE_TEXT,
    expect,
    instance,
    list_of,
    pair,
    tuple_of,
)
from pipeline.core.sandbox import SandboxFailure
from pipeline.recordings.transition_replay import are_chunks, is_chunk


@pytest.mark.parametrize(("value", "check"), [
    ([{"a": 1}], list_of(dict)), ([], list_of(dict)), (("ok", 3), pair(str, int)), ([1, "x"], tuple_of(int, str)),
    (7, instance(int)),
])
def test_a_value_of_the_shape_is_given_back(value, check):
    assert expect(value, check, "it") is value


@pytest.mark.parametrize(("value", "check"), [
    (42, list_of(dict)), ([{"a": 1}, 2], list_of(dict)), (("ok",), pair(str, int)), (("ok", "3"), pair(str, int)),
    (True, instance(int)), ({"x": 1}, lambda v: v[0] == 1),  # a check that raises: not of the shape
])
def test_another_shape_is_a_sandbox_failure_that_says_what_came(value, check):
    with pytest.raises(SandboxFailure) as caught:
        expect(value, check, "a list of recording lines")
    assert caught.value.kind == WRONG_SHAPE
    assert caught.value.detail.startswith(f"{WRONG_SHAPE_TEXT} (expected a list of recording lines, got ")
    assert type(value).__name__ in caught.value.detail


def _chunk(**changes):
    out = {"status": "ok", "answers": [("NOT_FINISHED", 0, 2, False, (1, 2))], "counts": np.int32([1]).tobytes(),
           "frames": np.zeros(4096, np.uint8), "first": -1, "n": 1, "ended": False, "stopped": None, "replayed": 0,
           "frame_only": [], "pending": [], "outcome": None}
    out.update(changes)
    return out


def test_a_replay_chunk_is_checked_field_by_field():
    assert is_chunk(_chunk()) and is_chunk({"status": "load_failed", "reason": "ImportError: x"})
    for bad in (42, ("ok", 42), _chunk(n="1"), _chunk(counts=b"\0\0\0"), _chunk(frames=np.zeros(3, np.int64)),
                _chunk(status="fine"), _chunk(ended=None), _chunk(frame_only=[1]), _chunk(answers=[[1]]),
                {"status": "load_failed"}):
        assert not is_chunk(bad), bad
    assert are_chunks([_chunk(), None], 2) and not are_chunks([_chunk()], 2) and not are_chunks(42, 1)
    assert is_chunk(_chunk(), 4096) and not is_chunk(_chunk(), 4095)  # frames as many as the counts say
    assert not is_chunk(_chunk(counts=np.int32([2]).tobytes()), 4096) and not is_chunk(_chunk(counts=np.int32([-1]).tobytes()))
