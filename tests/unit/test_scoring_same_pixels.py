"""verify._same_pixels, the replay's cheap test before counting differing cells, must never call two frames
equal that ``compare_frames`` finds different, and must recognise the common case (equal 0..15 frames of the
reader's uint8 and the engine's int8)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from engine.replay import compare_frames
from pipeline.scoring.verify import _same_pixels

one_byte = st.sampled_from([np.uint8, np.int8])
shapes = st.sampled_from([(4, 4), (4, 5), (64, 64)])


@st.composite
def frame_pairs(draw):
    shape = draw(shapes)
    want = draw(arrays(np.uint8, shape, elements=st.integers(0, 255)))
    kind = draw(st.sampled_from(["same", "reinterpreted", "other"]))
    if kind == "same":
        have = want.astype(draw(one_byte)) if want.max(initial=0) < 128 else want.copy()
    elif kind == "reinterpreted":  # the same bytes read as int8: different values where the high bit is set
        have = want.view(np.int8)
    else:
        have = draw(arrays(draw(st.sampled_from([np.uint8, np.int8, np.int16])), draw(shapes),
                           elements=st.integers(0, 15)))
    return want, have


@settings(max_examples=300, deadline=None)
@given(frame_pairs())
def test_same_pixels_only_when_compare_frames_finds_no_difference(pair):
    want, have = pair
    cells, _ = compare_frames(want, have)
    if _same_pixels(want, have):
        assert cells == 0
    elif want.shape == have.shape and have.dtype.itemsize == 1 and want.max(initial=0) < 128:
        assert cells > 0  # one-byte frames of colour values: equal ones are always recognised


def test_the_common_case_is_recognised():
    frame = np.random.default_rng(1).integers(0, 16, (64, 64)).astype(np.uint8)
    assert _same_pixels(frame, frame.astype(np.int8))
    changed = frame.astype(np.int8)
    changed[3, 7] = (changed[3, 7] + 1) % 16
    assert not _same_pixels(frame, changed)
