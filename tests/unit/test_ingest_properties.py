"""Property tests: the fast frame decoder agrees with json; ingest then export gives back every action."""

from __future__ import annotations

import hashlib
import json
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.ingest.export import export_recording_lines
from pipeline.recordings.frames import (
    FrameError,
    decode_frames,
    frame_hashes,
    frames_from_json,
    hash_frames,
    split_frame_field,
    split_plain_frames,
)

NAMES = ["RESET", "ACTION1", "ACTION2", "ACTION3", "ACTION4", "ACTION5", "ACTION6", "ACTION7"]


@st.composite
def frame_stacks(draw) -> np.ndarray:
    n = draw(st.integers(0, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    return rng.integers(0, draw(st.integers(1, 16)), size=(n, 64, 64), dtype=np.uint8)


@given(frames=frame_stacks(), compact=st.booleans())
@settings(max_examples=60, deadline=None)
def test_fast_frame_decoding_equals_json(frames: np.ndarray, compact: bool):
    seps = (",", ":") if compact else (", ", ": ")
    line = json.dumps({"timestamp": "t", "data": {"game_id": "ab12-00000000", "frame": frames.tolist(),
                                                  "state": "NOT_FINISHED"}}, separators=seps)
    rest, text = split_frame_field(line)
    assert text is not None and json.loads(rest)["data"]["frame"] is None
    decoded = decode_frames(text)
    assert decoded.shape == frames.shape and (decoded == frames).all()
    assert frame_hashes(decoded) == [hashlib.sha256(f.tobytes()).hexdigest() for f in frames]
    assert (decode_frames(text.encode()) == decoded).all()  # the bytes of the line, as ingest reads them
    for _ in range(2):  # rows decoded, then rows from the cache
        hashes, pixels = hash_frames(text.encode(), want_pixels=True)
        assert hashes == frame_hashes(decoded) and pixels.shape == frames.shape and (pixels == frames).all()
        assert pixels.flags.writeable and hash_frames(text.encode(), want_pixels=False) == (hashes, None)


@given(frames=frame_stacks(), compact=st.booleans(), before=st.sampled_from(["", '"x": [[[1]]], ', '"s": "]]]", ']),
       after=st.sampled_from(["", ', "y": [[[2]]]', ', "t": "]]]"', ', "z": [[[]]]', ', "g": [[[1, 2]], [[3]]]']),
       edit=st.sampled_from([None, "]]]", "]], [[", "16", " "]))
@settings(max_examples=150, deadline=None)
@example(frames=np.zeros((1, 64, 64), np.uint8), compact=False, before="", after=', "y": [[[2]]]', edit=None)
def test_the_cut_from_the_end_is_the_cut_from_the_start(frames, compact, before, after, edit):
    """`split_plain_frames` finds the frame array's end from the end of the line: when it answers, its cut is
    `split_frame_field`'s byte for byte, and its rows hash as the array's text does; arrays of arrays after
    (or before) the frame, "]]]" in strings, and a frame array with a bracket or value out of place included."""
    seps = ", " if not compact else ","
    frame_text = json.dumps(frames.tolist(), separators=(seps, ": "))
    if edit is not None and len(frames):
        at = len(frame_text) // 2
        frame_text = frame_text[:at] + edit + frame_text[at:]
    line = ('{"timestamp": "t", "data": {' + before + '"game_id": "ab12-00000000", "frame": ' + frame_text + after
            + "}}").encode()
    plain = split_plain_frames(line)
    rest, text = split_frame_field(line)
    if plain is None:
        return
    assert plain[0] == rest
    assert text is not None and hash_frames(plain[1], want_pixels=False) == hash_frames(text, want_pixels=False)
    hashes, pixels = hash_frames(plain[1], want_pixels=True)
    assert pixels.flags.writeable and (pixels == decode_frames(text)).all()
    again = split_plain_frames(line)  # the same text again: from the cache of frame arrays read
    assert again is not None and again[0] == rest and hash_frames(again[1], want_pixels=True)[0] == hashes


@given(frames=frame_stacks().filter(len), cell=st.integers(0, 4095), edit=st.sampled_from(
    ["0{0}", "{0} 1", "{0}.0", "-{0}", "{0}{0}{0}", "", "{0},", "true", "1{0}"]), compact=st.booleans())
@settings(max_examples=150, deadline=None)
def test_fast_frame_decoding_refuses_what_json_refuses(frames: np.ndarray, cell: int, edit: str, compact: bool):
    # One cell rewritten into something else (a leading zero, two numbers, a float, a negative, three digits,
    # an empty value, a bool, a value out of range): the decoder reads it exactly as json does, or refuses it.
    value = frames.reshape(-1, 4096)[0, cell]
    grid = frames.tolist()
    grid[0][cell // 64][cell % 64] = "@"
    text = json.dumps(grid, separators=(",", ":") if compact else (", ", ": ")).replace('"@"', edit.format(value))
    try:
        expected = frames_from_json(json.loads(text))
    except (ValueError, FrameError) as err:
        with pytest.raises((ValueError, FrameError)) as got:
            decode_frames(text.encode())
        # (the fast path names no frame in its colour-range message, as before)
        assert str(got.value).replace("frame 0 cell", "frame cell") == str(err).replace("frame 0 cell", "frame cell")
    else:
        assert (decode_frames(text.encode()) == expected).all()
    _same_as_decode_frames(text.encode())


def _same_as_decode_frames(raw: bytes) -> None:
    """hash_frames (split into rows, rows cached) gives decode_frames's pixels, or its exact error."""
    try:
        expected = decode_frames(raw)
    except (ValueError, FrameError) as err:
        with pytest.raises(type(err)) as got:
            hash_frames(raw, want_pixels=True)
        assert str(got.value) == str(err)
    else:
        hashes, pixels = hash_frames(raw, want_pixels=True)
        assert hashes == frame_hashes(expected) and pixels.shape == expected.shape and (pixels == expected).all()


ROW_EDITS = ["0{0}", "{0} ", " {0}", "{0}.0", "-{0}", "{0}{0}", "", "{0},", "1{0}", "{0}, ", "{0},  ", "[{0}]",
             "{0}]", "{0}],[{0}", "{0}\n", "16", "15", "10"]


@given(frames=frame_stacks().filter(len), row=st.integers(0, 63), col=st.integers(0, 63), compact=st.booleans(),
       edit=st.sampled_from(ROW_EDITS), repeat=st.booleans(), frame_sep=st.sampled_from([None, "],[", "], [", "]]"]))
@settings(max_examples=200, deadline=None)
def test_cached_rows_accept_and_refuse_exactly_as_decode_frames(frames, row, col, compact, edit, repeat, frame_sep):
    # Rows repeated inside and across frames (so the edited row's good twin is cached first), one cell or
    # separator rewritten, or the boundary between two frames changed: the cached path answers as the exact one.
    frames = frames.copy()
    if repeat:
        frames[:, :, :] = frames[0, row]  # every row the same
    sep = ", " if not compact else ","
    _same_as_decode_frames(json.dumps(frames.tolist(), separators=(sep, ": ")).encode())  # warms the cache
    grid = frames.tolist()
    grid[-1][row][col] = "@"
    text = json.dumps(grid, separators=(sep, ": ")).replace('"@"', edit.format(frames[-1, row, col]))
    if frame_sep is not None and len(frames) > 1:
        text = text.replace("]]" + sep + "[[", "]" + frame_sep + "[", 1)
    _same_as_decode_frames(text.encode())


@given(frames=frame_stacks().filter(len), boundary=st.integers(0, 62), compact=st.booleans(),
       between=st.sampled_from(["[", "], [", "],[", "] ,[", "]] [", "],  [", "],\n[", "]], [[", "]][[", ""]))
@settings(max_examples=150, deadline=None)
def test_row_boundaries_rewritten_are_judged_as_decode_frames_judges_them(frames, boundary, compact, between):
    # The rows' texts and separators are cached as pieces "<row>], " and a frame's last row alone: a boundary
    # between two rows rewritten (valid mixed spacing, a missing or extra bracket) after the good frame was
    # cached is judged as the exact path judges it.
    sep = ", " if not compact else ","
    good = json.dumps(frames.tolist(), separators=(sep, ": "))
    _same_as_decode_frames(good.encode())  # warms the caches
    row_sep = "]" + sep + "["
    first = good.index(row_sep)
    at = first
    for _ in range(boundary):
        nxt = good.find(row_sep, at + 1)
        at = nxt if nxt >= 0 else at
    _same_as_decode_frames((good[:at] + between + good[at + len(row_sep):]).encode())


NUMBER_PIECES = ["0", "7", "12", "123456789", "1234567890", "999999999", ".", ".0000", "e", "-", "e-", "+", " ", "x",
                 '"', "1.0000", "1e-5", "1e-55"]


@given(text=st.lists(st.sampled_from(NUMBER_PIECES), max_size=16).map(lambda pieces: "".join(pieces).encode()))
@settings(max_examples=400, deadline=None)
def test_the_fast_number_form_checks_equal_their_regexes(text: bytes):
    import re

    from pipeline.recordings.lines import _FLOAT_FORMS, _has_float_form, _has_long_digits

    assert _has_long_digits(text) == (re.search(rb"\d{19}", text) is not None)
    assert _has_float_form(text) == (_FLOAT_FORMS.search(text) is not None)


actions = st.lists(
    st.tuples(st.integers(1, 7), st.integers(0, 63), st.integers(0, 63),
              st.one_of(st.none(), st.text(max_size=20), st.dictionaries(st.text(max_size=5), st.integers()))),
    min_size=1, max_size=40,
)


@given(steps=actions, with_frames=st.booleans())
@example(steps=[(1, 0, 0, {"big": 18446744073709553209, "low": -9223372036854775809})], with_frames=False)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_ingest_then_export_reproduces_the_actions(steps, with_frames: bool):
    guid = str(uuid.uuid4())
    t0 = datetime(2026, 5, 1, tzinfo=UTC)
    grid = [[0] * 64 for _ in range(64)]
    lines = []
    for i, (aid, x, y, reasoning) in enumerate([(0, 0, 0, None), *steps]):
        data = {"x": x, "y": y} if aid == 6 else {}
        record = {"game_id": "ab12-0123abcd", "state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 3,
                  "action_input": {"id": NAMES[aid], "data": data, "reasoning": reasoning}, "guid": guid,
                  "full_reset": aid == 0, "available_actions": [1, 2, 3, 4, 5, 6, 7]}
        if with_frames:
            record = {"game_id": record.pop("game_id"), "frame": [grid], **record}
        lines.append({"timestamp": (t0 + timedelta(seconds=i)).isoformat(), "data": record})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"ab12-0123abcd-{guid}.jsonl"
        path.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
        with Workspace(Path(tmp) / "db.duckdb") as ws:
            report = ingest_paths(ws, [path], run_id="p")
            assert report.n_quarantined == 0
            file_id = report.files[0].path and ws.read("SELECT file_id FROM raw_ingest__files")["file_id"][0]
            exported = list(export_recording_lines(ws, file_id))
    assert len(exported) == len(lines)
    for got, want in zip(exported, lines, strict=True):
        assert got["data"]["action_input"] == want["data"]["action_input"]
        assert got["data"]["guid"] == want["data"]["guid"]
        assert datetime.fromisoformat(got["timestamp"]) == datetime.fromisoformat(want["timestamp"])


@pytest.mark.parametrize("literal", ["true", "false"])
def test_a_boolean_cell_is_not_a_colour(literal: str):
    """numpy reads [true, 0] as integers: a JSON boolean in a frame must be refused, whichever path decodes it."""
    rows = [", ".join(["0"] * 64)] * 64
    rows[5] = ", ".join([literal] + ["0"] * 63)
    text = "[[" + ", ".join(f"[{r}]" for r in rows) + "]]"
    with pytest.raises(FrameError, match="boolean"):
        frames_from_json(json.loads(text))
    with pytest.raises(FrameError):
        decode_frames(text)
    with pytest.raises(FrameError):
        hash_frames(text, want_pixels=False)
