"""Fast handling of frame pixel arrays inside recording lines.

A frame line is ~12.5 KB of JSON per 64x64 grid, and parsing 4096 small ints through `json` dominates
ingest time. `split_frame_field` cuts the `"frame": [...]` array out of the line text (the rest is parsed
with `json`), and `decode_frames` turns the array text into a uint8 array with numpy in one pass. Anything
unusual (negative numbers, floats, odd nesting) falls back to `json` so errors are reported exactly.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

FRAME_KEY = '"frame":'
_ALLOWED = b"0123456789[], "
GRID = 64


class FrameError(ValueError):
    """A frame array that is not a list of 64x64 grids of colours 0-15."""


def split_frame_field(line: str) -> tuple[str, str | None]:
    """(line with the frame array replaced by `null`, the array's text) or (line, None) without a frame.

    The caller must check that the parsed remainder has `data.frame is None`, to be sure the cut was the
    real field and not text inside another value; otherwise parse the full line.
    """
    key = line.find(FRAME_KEY)
    if key < 0:
        return line, None
    start = line.find("[", key + len(FRAME_KEY))
    if start < 0 or line[key + len(FRAME_KEY):start].strip():
        return line, None
    after = line[start + 1:start + 64].lstrip()
    if after.startswith("]"):
        end = line.find("]", start) + 1
    else:
        close = line.find("]]]", start)
        if close < 0:
            return line, None
        end = close + 3
    return line[:start] + "null" + line[end:], line[start:end]


def decode_frames(text: str) -> np.ndarray:
    """Frame array text -> uint8 array of shape (n, 64, 64). Raises FrameError with a readable reason."""
    raw = text.encode("ascii", errors="replace")
    if raw.translate(None, _ALLOWED):
        return frames_from_json(json.loads(text))
    buf = np.frombuffer(raw, dtype=np.uint8)
    is_digit = (buf >= 48) & (buf <= 57)
    if not is_digit.any():
        if raw.replace(b" ", b"") == b"[]":
            return np.zeros((0, GRID, GRID), dtype=np.uint8)
        return frames_from_json(json.loads(text))
    prev = np.concatenate(([False], is_digit[:-1]))
    nxt = np.concatenate((is_digit[1:], [False]))
    starts = np.flatnonzero(is_digit & ~prev)
    two = nxt[starts]
    if (two & np.concatenate((is_digit[2:], [False, False]))[starts]).any():
        return frames_from_json(json.loads(text))  # a 3+ digit number: let the slow path report it
    digits = buf.astype(np.int16) - 48
    values = digits[starts]
    values[two] = values[two] * 10 + digits[starts[two] + 1]
    # Structure: every innermost list (a row) closes right after a digit and must hold 64 values.
    closers = np.flatnonzero(buf == ord("]"))
    row_closers = closers[is_digit[np.maximum(closers - 1, 0)] | (buf[np.maximum(closers - 1, 0)] == 32)]
    n_open = int((buf == ord("[")).sum())
    n_rows = len(row_closers)
    token_at = np.cumsum(is_digit & ~prev)
    per_row = np.diff(np.concatenate(([0], token_at[row_closers])))
    n_frames = n_rows // GRID
    if (n_rows % GRID or not (per_row == GRID).all() or n_open != 1 + n_frames + n_rows
            or len(values) != n_frames * GRID * GRID):
        return frames_from_json(json.loads(text))
    if values.max(initial=0) > 15:
        bad = int(values.max())
        raise FrameError(f"frame cell value {bad} is outside the 16-colour range 0-15")
    return values.astype(np.uint8).reshape(n_frames, GRID, GRID)


def frames_from_json(frames: object) -> np.ndarray:
    """The exact (slow) path: validate a parsed frame list and convert it."""
    if not isinstance(frames, list):
        raise FrameError(f"`frame` must be a list of grids, got {type(frames).__name__}")
    out = np.zeros((len(frames), GRID, GRID), dtype=np.uint8)
    for i, grid in enumerate(frames):
        if not isinstance(grid, list) or len(grid) != GRID or any(not isinstance(r, list) or len(r) != GRID for r in grid):
            shape = f"{len(grid)} rows" if isinstance(grid, list) else type(grid).__name__
            raise FrameError(f"frame {i} is not a 64x64 grid ({shape})")
        try:
            arr = np.asarray(grid)
        except (ValueError, TypeError) as err:
            raise FrameError(f"frame {i} is not a grid of integers: {err}") from None
        if arr.dtype.kind not in "iu":
            raise FrameError(f"frame {i} holds non-integer cells ({arr.dtype})")
        if arr.min(initial=0) < 0 or arr.max(initial=0) > 15:
            bad = int(arr.min()) if arr.min() < 0 else int(arr.max())
            raise FrameError(f"frame {i} cell value {bad} is outside the 16-colour range 0-15")
        out[i] = arr
    return out


def frame_hashes(frames: np.ndarray) -> list[str]:
    """sha256 of each frame's 4096 uint8 cells, row-major (the conformance kit's definition)."""
    return [hashlib.sha256(f.tobytes()).hexdigest() for f in frames]
