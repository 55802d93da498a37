"""Fast handling of frame pixel arrays inside recording lines.

A frame line is ~12.5 KB of JSON per 64x64 grid, and parsing 4096 small ints through `json` dominates
ingest time. `split_frame_field` cuts the `"frame": [...]` array out of the line (the rest is parsed as
JSON), and `decode_frames` turns the array's bytes into a uint8 array with a few whole-buffer passes: the
brackets and commas left after removing the digits must be exactly the skeleton of n 64x64 grids, then the
digits are read with numpy. Anything unusual (other spacing, negative numbers, floats, odd nesting) falls
back to `json`, so errors are reported exactly.

`hash_frames` is the fast path in front of it: frames repeat row by row, so the array's text is split into
its rows (bytes.split, in C) and each row's text (with its separator) is looked up in a per-process cache of rows already
decoded; a frame's hash is then sha256 of its 64 row byte strings joined. A row text never seen is decoded
only if it is the plain JSON of 64 colours 0-15; any other text (other spacing, odd nesting, bad values)
goes to `decode_frames`, whose answer (pixels or error) is the rule.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import AnyStr

import numpy as np

FRAME_KEY = '"frame":'
GRID = 64
CELLS = GRID * GRID
_DIGITS = b"0123456789"
_ROW = b"[" + b"," * (GRID - 1) + b"]"
_ONE_FRAME = b"[" + b",".join([_ROW] * GRID) + b"]"
_COMMAS_PER_FRAME = _ONE_FRAME.count(b",")


class FrameError(ValueError):
    """A frame array that is not a list of 64x64 grids of colours 0-15."""


def split_frame_field(line: AnyStr) -> tuple[AnyStr, AnyStr | None]:
    """(line with the frame array replaced by `null`, the array's text) or (line, None) without a frame.
    Works on str and on bytes alike.

    The caller must check that the parsed remainder has `data.frame is None`, to be sure the cut was the
    real field and not text inside another value; otherwise parse the full line.
    """
    is_bytes = isinstance(line, bytes)
    key_text = FRAME_KEY.encode() if is_bytes else FRAME_KEY
    open_, close_, closes3, null = (b"[", b"]", b"]]]", b"null") if is_bytes else ("[", "]", "]]]", "null")
    key = line.find(key_text)
    if key < 0:
        return line, None
    start = line.find(open_, key + len(key_text))
    if start < 0 or line[key + len(key_text):start].strip():
        return line, None
    after = line[start + 1:start + 64].lstrip()
    if after.startswith(close_):
        end = line.find(close_, start) + 1
    else:
        close = line.find(closes3, start)
        if close < 0:
            return line, None
        end = close + 3
    return line[:start] + null + line[end:], line[start:end]


@cache
def _skeleton(n_frames: int, spaced: bool) -> bytes:
    """The text of n frames with every digit removed, compact or with json.dumps's ", " separators."""
    skeleton = b"[" + b",".join([_ONE_FRAME] * n_frames) + b"]"
    return skeleton.replace(b",", b", ") if spaced else skeleton


def decode_frames(text: str | bytes) -> np.ndarray:
    """Frame array text -> uint8 array of shape (n, 64, 64). Raises FrameError with a readable reason."""
    raw = text if isinstance(text, bytes) else text.encode("utf-8", errors="replace")
    skeleton = raw.translate(None, _DIGITS)
    if len(skeleton) < 16 and skeleton.replace(b" ", b"") == b"[]":
        return np.zeros((0, GRID, GRID), dtype=np.uint8)
    # The skeleton fixes every bracket, comma and space, in order, for some number of frames.
    for sep in (1, 2):
        n_frames, extra = divmod(len(skeleton) - 2 + sep, len(_ONE_FRAME) + (sep - 1) * _COMMAS_PER_FRAME + sep)
        if not extra and n_frames >= 1 and skeleton == _skeleton(n_frames, sep == 2):
            break
    else:
        return _slow(text)
    cells = n_frames * CELLS
    stream = np.frombuffer(raw.translate(None, b"[]"), dtype=np.uint8)  # "d,d,dd" or "d, d, dd"
    step = sep + 1
    if len(stream) == step * cells - sep:
        # As long as one value a cell: the separators must sit at fixed places, the digits between them.
        if not ((stream[1::step] == 44).all() and (sep == 1 or (stream[2::step] == 32).all())):
            return _slow(text)  # an empty value beside a two-digit one
        values = stream[::step] - 48
    else:
        commas = np.flatnonzero(stream == 44)
        if sep == 2 and not (stream[commas + 1] == 32).all():
            return _slow(text)
        ends = np.append(commas, len(stream))
        lengths = ends - np.concatenate(([0], commas + sep))
        if lengths.min() < 1 or lengths.max() > 2:
            return _slow(text)  # an empty value or a 3+ digit number: let the slow path report it
        two = lengths == 2
        tens = stream[ends[two] - 2]
        if (tens == 49).all():  # 10-15, as a colour must be
            values = stream[ends - 1] - 48 + two * np.uint8(10)
        else:
            if (tens == 48).any():
                return _slow(text)  # a leading zero is not JSON
            values = (stream[ends - 1] - 48).astype(np.int16)
            values[two] += (tens.astype(np.int16) - 48) * 10  # 20 or more: reported below
    if values.max(initial=0) > 15:
        raise FrameError(f"frame cell value {int(values.max())} is outside the 16-colour range 0-15")
    return values.reshape(n_frames, GRID, GRID)


def _slow(text: str | bytes) -> np.ndarray:
    return frames_from_json(json.loads(text))


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
        if any(type(cell) is bool for row in grid for cell in row):
            # numpy reads [true, 0] as integers (True == 1): a JSON boolean is not a colour
            raise FrameError(f"frame {i} holds a boolean cell (true/false), not a colour 0-15")
        if arr.min(initial=0) < 0 or arr.max(initial=0) > 15:
            bad = int(arr.min()) if arr.min() < 0 else int(arr.max())
            raise FrameError(f"frame {i} cell value {bad} is outside the 16-colour range 0-15")
        out[i] = arr
    return out


# A row's text between its brackets: 64 colours 0-15 as JSON numbers, separated by "," or ", ".
_ROW_TEXT = re.compile(rb"(?:1[0-5]|\d)(?:, ?(?:1[0-5]|\d)){%d}" % (GRID - 1))
_ONE_DIGIT = bytes.maketrans(_DIGITS, bytes(range(10)))  # "7" -> 7
_ROW_CACHE_SIZE = 1 << 15  # rows (~200 bytes each with their key); cleared when full
_row_cache: dict[bytes, bytes] = {}  # "<row>], " or "<row>]," -> the row's cells
_last_row_cache: dict[bytes, bytes] = {}  # a frame's last "<row>" -> its cells


def hash_frames(text: str | bytes | PlainFrames, want_pixels: bool) -> tuple[list[str], np.ndarray | None]:
    """Frame array text (or its rows, as `split_plain_frames` found them) -> (sha256 of each frame as
    `frame_hashes` computes it, the (n, 64, 64) uint8 pixels when ``want_pixels``). The same answer as
    `decode_frames`, FrameError included."""
    if isinstance(text, PlainFrames):
        if not want_pixels:
            return list(text.hashes), None
        pixels = np.frombuffer(bytearray(text.cells), dtype=np.uint8)  # writable, as decode_frames's
        return list(text.hashes), pixels.reshape(-1, GRID, GRID)
    frames = _split_rows(text) if isinstance(text, bytes) else None
    if frames is None:
        pixels = decode_frames(text)
        return frame_hashes(pixels), pixels if want_pixels else None
    cells = [b"".join(rows) for rows in frames]  # 4096 bytes a frame, row-major
    hashes = [hashlib.sha256(frame).hexdigest() for frame in cells]
    if not want_pixels:
        return hashes, None
    pixels = np.frombuffer(bytearray(b"".join(cells)), dtype=np.uint8)  # writable, as decode_frames's
    return hashes, pixels.reshape(-1, GRID, GRID)


class PlainFrames:
    """A frame array found in its plain form by `split_plain_frames`: each frame's sha256 (as `frame_hashes`
    computes it) and the cells of every frame, 4096 bytes a frame, row-major."""

    __slots__ = ("cells", "hashes")

    def __init__(self, hashes: tuple[str, ...], cells: bytes):
        self.hashes, self.cells = hashes, cells


# Frame arrays already read, by their exact text: real play shows the same frame again and again (a move into a
# wall, a level's start after a reset, the screens of a game over), and a frame line is ~12 KB of text whose
# reading (64 rows looked up, joined and hashed) costs ~4x the lookup of its text. The answer for a text is a
# function of that text alone, so a hit gives exactly what reading it again would. Bounded by the bytes held.
_FRAME_CACHE_BYTES = 32 << 20
_frame_cache: dict[bytes, tuple[tuple[str, ...], bytes]] = {}
_frame_cache_held = [0]  # bytes of text and cells held by `_frame_cache`


def split_plain_frames(line: bytes) -> tuple[bytes, PlainFrames] | None:
    """`split_frame_field(line)` for the usual frame line, without searching the array for its end: (the line
    with the frame array replaced by `null`, the array's frames), or None (then `split_frame_field` decides).

    The usual line ends with its frame array (the last field of `data`), and `split_frame_field`'s forward
    search for the array's closing "]]]" reads through all of its ~12 KB a frame; the LAST "]]]" of the line is
    found at once from the end. The two are the same "]]]" whenever the text from the array's "[" to that last
    "]]]" is in the plain form `_split_rows` reads (it holds no "]]]" before its end: rows are digits and
    separators, and frames are joined by "]], [["): only then is an answer given (a text in `_frame_cache` was
    read so), so the cut is `split_frame_field`'s, byte for byte."""
    key = line.find(b'"frame":')
    if key < 0:
        return None
    start = line.find(b"[", key + 8)
    end = line.rfind(b"]]]") + 3
    if start < 0 or end - 3 <= start or line[key + 8:start].strip():
        return None
    text = line[start:end]
    found = _frame_cache.get(text)
    if found is None:
        rows = _split_rows(text)
        if rows is None:
            return None
        cells = [b"".join(frame) for frame in rows]  # 4096 bytes a frame, row-major
        found = (tuple(hashlib.sha256(frame).hexdigest() for frame in cells), b"".join(cells))
        size = len(text) + len(found[1])
        if _frame_cache_held[0] + size > _FRAME_CACHE_BYTES:
            _frame_cache.clear()
            _frame_cache_held[0] = 0
        _frame_cache[text] = found
        _frame_cache_held[0] += size
    return line[:start] + b"null" + line[end:], PlainFrames(*found)


def _split_rows(text: bytes) -> list[list[bytes]] | None:
    """Each frame's 64 rows of cells as bytes, or None when the text is not in the plain form handled here."""
    if not (text.startswith(b"[[[") and text.endswith(b"]]]")):
        return None
    inner = text[3:-3]
    # Split at each row's opening bracket (one byte: a C loop; a separator like "], [" shares ", " with the
    # cells and is searched byte by byte, twice as slow): a frame is 63 pieces "<row>], " (or "<row>],") and
    # its last row. One frame (the usual line) is exactly 64 pieces; several are split at their boundaries
    # first. A piece is only ever found in the cache of its kind, whose keys were checked to be exactly that
    # (`_decode_piece`): anything else (other spacing, a bracket out of place) fails there.
    pieces = inner.split(b"[")
    if len(pieces) == GRID:
        pieces_by_frame = [pieces]
    else:
        frame_sep = b"]], [[" if inner.find(b"], [", 0, 400) > 0 else b"]],[["
        pieces_by_frame = [f.split(b"[") for f in inner.split(frame_sep)]
    lookup, lookup_last = _row_cache.get, _last_row_cache.get
    frames = []
    for texts in pieces_by_frame:
        if len(texts) != GRID:
            return None
        rows = list(map(lookup, texts[:-1]))
        rows.append(lookup_last(texts[-1]))
        if None in rows:
            for i, row in enumerate(rows):
                if row is None:
                    row = rows[i] = _decode_piece(texts[i], last=i == GRID - 1)
                    if row is None:
                        return None
        frames.append(rows)
    return frames


def _decode_piece(piece: bytes, last: bool) -> bytes | None:
    """A piece never seen before -> its row's 64 cells, cached; None if not plain. A frame's last row is its
    text alone, any other row its text and "], " or "],"."""
    if last:
        row_text, cache = piece, _last_row_cache
    elif piece.endswith(b"], "):
        row_text, cache = piece[:-3], _row_cache
    elif piece.endswith(b"],"):
        row_text, cache = piece[:-2], _row_cache
    else:
        return None
    if not _ROW_TEXT.fullmatch(row_text):
        return None
    if len(row_text) == 2 * GRID - 1:  # one digit a cell, ","-separated
        row = row_text[::2].translate(_ONE_DIGIT)
    else:
        row = bytes(map(int, row_text.split(b",")))
    if len(cache) >= _ROW_CACHE_SIZE:
        cache.clear()
    cache[piece] = row
    return row


def frame_hashes(frames: np.ndarray) -> list[str]:
    """sha256 of each frame's 4096 uint8 cells, row-major (the conformance kit's definition)."""
    return [hashlib.sha256(f if f.flags.c_contiguous else f.tobytes()).hexdigest() for f in frames]


def kept_frames_path(frames_file: str, db_path: str | Path) -> Path | None:
    """Where a step's `frames_file` (as ingest stored it: the path given, or relative to the database's folder)
    is now, or None."""
    return next((p for p in (Path(frames_file), Path(db_path).parent / frames_file) if p.is_file()), None)


class KeptFrames:
    """The frames `ingest --keep-frames` stored for one file (a Parquet file of line_number, frame_index, pixels,
    a row group per FRAME_BATCH frames, in line order), read a row group at a time as they are asked for: read
    whole, the pixels of a 300,000-step recording took 3.8 GB (the table, a `bytes` per frame, then the arrays)."""

    GRID_BYTES = 64 * 64

    def __init__(self, path: Path):
        import pyarrow.parquet as pq

        self.path = path
        self.file = pq.ParquetFile(path)
        lines = self.file.read(columns=["line_number"]).column("line_number")  # 8 bytes a frame
        if lines.null_count:
            raise ValueError("a frame without its line number")
        numbers = lines.to_numpy()
        sizes = [self.file.metadata.row_group(g).num_rows for g in range(self.file.num_row_groups)]
        ends = np.cumsum(sizes, dtype=np.int64)
        # each row group's first and last line (an empty group: none)
        self._first = np.array([numbers[e - n:e].min() if n else 1 for n, e in zip(sizes, ends, strict=True)],
                               dtype=np.int64)
        self._last = np.array([numbers[e - n:e].max() if n else 0 for n, e in zip(sizes, ends, strict=True)],
                              dtype=np.int64)
        found, counts = np.unique(numbers, return_counts=True)
        self.counts = dict(zip(found.tolist(), counts.tolist(), strict=True))  # line -> frames stored
        self._group: int | None = None
        self._rows: dict[int, list[tuple[int, bytes]]] = {}

    @classmethod
    def open(cls, frames_file: str | None, db_path: str | Path) -> KeptFrames | None:
        """The file `frames_file` names (as stored, or beside the database), or None when there is none or it
        cannot be read (the caller then has hashes only)."""
        path = kept_frames_path(frames_file, db_path) if frames_file else None
        if path is None:
            return None
        try:
            return cls(path)
        except (OSError, ValueError, KeyError, TypeError):  # pyarrow's errors are these too
            return None

    def _read_group(self, g: int) -> dict[int, list[tuple[int, bytes]]]:
        if self._group != g:
            table = self.file.read_row_group(g, columns=["line_number", "frame_index", "pixels"])
            rows: dict[int, list[tuple[int, bytes]]] = {}
            for number, index, blob in zip(table.column("line_number").to_pylist(),
                                           table.column("frame_index").to_pylist(),
                                           table.column("pixels").to_pylist(), strict=True):
                if number is not None and blob is not None and len(blob) == self.GRID_BYTES:
                    rows.setdefault(number, []).append((index if index is not None else 0, blob))
            self._group, self._rows = g, rows
        return self._rows

    def frames_of(self, line_numbers: Sequence[int]) -> dict[int, np.ndarray]:
        """line -> (n, 64, 64) uint8, every stored frame of the line in order, for those of `line_numbers` that
        have any. Cheapest asked in line order: a row group is read once while its lines are asked for."""
        out: dict[int, np.ndarray] = {}
        try:
            for number in line_numbers:
                parts: list[tuple[int, bytes]] = []
                for g in np.flatnonzero((self._first <= number) & (number <= self._last)).tolist():
                    parts += self._read_group(g).get(int(number), ())
                if parts:
                    out[int(number)] = np.frombuffer(b"".join(blob for _, blob in sorted(parts)),
                                                     dtype=np.uint8).reshape(-1, 64, 64)
        except (ValueError, KeyError, TypeError) as err:  # the file changed or broke since it was opened
            raise OSError(f"the kept frames file {self.path} cannot be read: {err}") from err
        return out

