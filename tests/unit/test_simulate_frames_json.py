"""The simulator writes frames' JSON from cached row texts (pipeline.simulate.arc3.FramesJson): it must be
byte for byte what json.dumps writes for the same frames, whatever the rows repeat or the cache holds."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pipeline.simulate.arc3 import FramesJson

frames_of = st.lists(arrays(np.int8, (64, 64), elements=st.integers(0, 15)), min_size=0, max_size=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(frames_of, min_size=1, max_size=4))
def test_frames_json_is_json_dumps(steps):
    encode = FramesJson()
    for frames in steps:
        assert encode(frames) == json.dumps([f.tolist() for f in frames])


def test_a_full_cache_starts_over_and_stays_exact(monkeypatch):
    monkeypatch.setattr(FramesJson, "MAX_ROWS", 3)
    encode = FramesJson()
    rng = np.random.default_rng(0)
    for _ in range(5):
        frames = [rng.integers(0, 16, (64, 64), dtype=np.int8), np.zeros((64, 64), dtype=np.int8)]
        assert encode(frames) == json.dumps([f.tolist() for f in frames])
    assert len(encode._rows) <= 3
