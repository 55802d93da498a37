"""Read an ARC-AGI-3 recording file once, every variant of spec/formats.md §A, into one model.

`read_recording_file` streams the file line by line (`lines.parse_line`), then takes the file-level decisions
in one place: which writer produced it (`variant.detect_variant`), which lines contradict the file (another
game or guid, time going backwards, a duplicated write; a line whose time alone jumps ahead of its neighbours
keeps its step and loses its time, `_jumps_ahead`), whether the benchmarking recorder lost the action
ids, and the effect of every step on the card (`counting.classify_steps`), which cuts the plays and marks the
post-terminal echoes. Ingest stores the result (`recording_tables`), `score FILES` scores it and replays its
steps, so both see the same steps, plays and counts.

Verdicts (spec/formats.md): a file with neither a frame line nor a trailing summary card is refused
(`RecordingRejected`, for what was wrong with its lines when they were all quarantined); a bad line is a
`LineIssue` (quarantined, the rest is used); odd but usable files and lines are flagged (a BOM, CRLF, the
recorder defects of schemas.arc3.RECORDING_FLAGS) and counted as the toolkit's card counted them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import accumulate, islice, pairwise, repeat
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pyarrow as pa

from pipeline.core import spill
from pipeline.core.outputs import scratch_error
from pipeline.core.spill import SpillArray, growing, spill_attributes
from pipeline.core.spool import Spool
from pipeline.core.textfiles import TextFacts, bom_encoding, dense_json_reason, not_utf8_reason, strip_bom
from schemas.validate import conform, empty_frame

from .cards import card_rows
from .counting import (
    ACTION_NAMES,
    StepEffect,
    StepEffects,
    StepRecord,
    detect_action_ids_lost,
    iter_level_changes,
    iter_step_effects,
)
from .lines import Line, LineError, LineIssue, clip, filename_guid, parse_line
from .variant import RecordingVariant, counting_options_for_variant, detect_variant

__all__ = ["LineIssue", "ParsedRecording", "PlayIds", "RecordingRejected", "line_rows", "read_recording_file",
           "recording_tables", "repeated", "step_frames", "table_from_columns"]

LINES = "raw_arc3__recording_lines"
STEPS = "core_arc3__steps"
PLAYS = "core_arc3__plays"
USAGE = "core_arc3__usage"


class RecordingRejected(Exception):
    """The whole file cannot be used; ``reason`` says why, for a person, ``check`` is the rule id."""

    def __init__(self, reason: str, check: str, location: str = "file", issues: list[LineIssue] | None = None):
        super().__init__(reason)
        self.reason, self.check, self.location = reason, check, location
        self.issues = Spool(issues or [])  # the lines quarantined on the way (kept with the refusal)


@dataclass
class ParsedRecording:
    """A recording file as read: its lines, the steps kept, and every file-level decision."""

    path: Path
    file_sha256: str  # of the bytes read: the file_id ingest gives the file
    lines: Sequence[Line]  # every parsed line (frame, usage, scorecard, other), in file order
    steps: Sequence[Line]  # the frame lines kept (contradicting or duplicated lines left out)
    usage: Sequence[Line]
    summary: Line | None  # the last scorecard line
    issues: list[LineIssue]
    variant: RecordingVariant
    evidence: str
    game_id: str
    guid: str | None
    name_guid: str | None  # the guid the file name carries
    is_action_ids_lost: bool
    effects: StepEffects  # one per kept step
    play_index: Sequence[int]  # one per kept step (int64s): 0, then +1 at every full reset (echoes stay in their play)
    flags: list[str] = field(default_factory=list)  # file-level quality flags
    card_slots: list[dict] = field(default_factory=list)  # core_arc3__card_plays rows of the summary's cards
    card_flags: list[str] = field(default_factory=list)  # file flags from those cards

    @property
    def has_frames(self) -> bool:
        if isinstance(self.steps, LineView):  # from the column, without making each line
            column = self.steps.store.n_frames
            return any(column[p] != _NO_FRAMES for p in self.steps.positions)
        return any(ln.n_frames is not None for ln in self.steps)

    @property
    def has_leading_reset(self) -> bool:
        return bool(self.steps) and self.steps[0].action_id == 0

    @property
    def schema_generation(self) -> str:
        """The field generation of the frame records: the 2025 `score` names or the 2026 ones."""
        return "preview-2025" if self.variant == "preview-2025" else "2026"

    @property
    def is_only_reset_levels(self) -> bool:
        """Played with level-only resets (``ONLY_RESET_LEVELS=true``), so replayed that way: the human dataset
        always; a toolkit recording whose opening RESET (make()'s) is a level reset, which the engine answers
        only in that mode (formats.md A.1). REST-produced files (agents) say nothing: their ``full_reset`` is
        always false."""
        if self.variant == "human-dataset":
            return True
        return self.variant == "toolkit" and opens_with_level_reset(self.steps)

    def play_id(self, index: int) -> str:
        return f"{self.guid}/{index}"

    def play_ids(self, n: int) -> PlayIds:
        """The ids of plays 0 .. n-1, each made as it is asked for."""
        return PlayIds(self.guid, n)


class PlayIds(Sequence):
    """A recording's play ids (`ParsedRecording.play_id`: its guid, a slash, the play's index), made as they are
    asked for: held as a list, a recording of a million one-step plays took 96 MB of them."""

    def __init__(self, guid: str | None, n: int):
        self.guid, self.n = guid, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [f"{self.guid}/{j}" for j in range(*i.indices(self.n))]
        return f"{self.guid}/{range(self.n)[i]}"

    def __iter__(self) -> Iterator[str]:
        return (f"{self.guid}/{j}" for j in range(self.n))

    def __eq__(self, other: object) -> bool:  # (as the list it stands for)
        if isinstance(other, PlayIds):
            return (self.guid, self.n) == (other.guid, other.n) or (self.n == other.n == 0)
        return isinstance(other, (list, tuple)) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PlayIds({self.guid!r}, {self.n})"


CHUNK_BYTES = 32 * 1024 * 1024  # input read between two `on_chunk` calls (the rows a chunk adds are ~3% of it)
STEP_CHUNK_ROWS = 20_000  # steps built (and, by ingest, written) at a time
PLAY_CHUNK_ROWS = 100_000  # plays built (and, by ingest, written) at a time
SHARED_VALUES = ("game_id", "guid", "state", "frame")
READ_BUFFER = 1024 * 1024  # frame lines are ~12 KB: a small buffer reads each in several pieces


COLUMNS_FROM_BYTES = 32 * 1024 * 1024  # a file this large is held as columns whoever reads it (ingest streams it)
MAX_LINE_BYTES = 64 * 1024 * 1024  # a frame line is ~12 KB a frame: a longer line is never held whole
SHARED_DATA_LIMIT = 4096  # distinct `data` objects remembered for sharing (then forgotten, and the table starts over)


def share_data(data: dict[str, Any], raw: str | bytes, shared: dict[bytes, dict[str, Any]]) -> dict[str, Any]:
    """One object for every frame line of a file whose `data` is the same JSON (a step's `data` without its frame
    pixels is a few hundred bytes of small objects: most steps repeat one held before, and a file keeps one `data`
    per line until its steps are counted). Equal means equal JSON, types included (1, 1.0 and true differ):
    the key is orjson's serialization, which writes every value's type; a line with a non-finite float
    (orjson writes it as null) or an integer over 64 bits (orjson refuses it) keeps its own. Nothing changes
    a line's `data` once it is read. `raw`: the line's compact text without its pixels, else the line as read (a
    line that spells NaN or Infinity anywhere keeps its own `data`)."""
    key = share_key(data, raw)
    if key is None:
        return data
    held = shared.get(key)
    if held is not None:
        return held
    if len(shared) >= SHARED_DATA_LIMIT:
        shared.clear()
    shared[key] = data
    return data


SCAN_RAW_UP_TO = 2048  # share_key: a longer line (its frames' text, ~12 KB a frame) has its `data` looked at instead


def share_key(data: dict[str, Any], raw: str | bytes) -> bytes | None:
    """`data` as compact JSON that reads back as an equal object, types included (`share_data`'s key); None for
    a `data` orjson cannot write exactly (a non-finite float, an integer over 64 bits). A short ``raw`` is
    searched for NaN and Infinity (one search of a few hundred bytes); a longer one, a frame line's whole text,
    is not: searching 12 KB of digits for those two words took 17 µs a line, a fifth of reading a recording
    with frames, where looking for a non-finite float among `data`'s few values takes about 2."""
    if len(raw) <= SCAN_RAW_UP_TO:
        nan, infinity = (b"NaN", b"Infinity") if isinstance(raw, bytes) else ("NaN", "Infinity")
        if nan in raw or infinity in raw:
            return None
    elif not _finite_only(data):
        return None
    try:
        return orjson.dumps(data)
    except TypeError:
        return None


def _finite_only(value: Any) -> bool:
    """No float in ``value`` (parsed JSON) is NaN or infinite: orjson writes those as null. (A loop, not a
    recursion: a line may nest as deep as orjson reads.)"""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                return False
        elif kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
    return True


def bounded_lines(fh: Any, digest: Any | None) -> Iterator[tuple[bytes, int | None]]:
    """(line, None) for each line of at most MAX_LINE_BYTES; (its first bytes, its length with its line end)
    for a longer one, whose rest is read in pieces and dropped (its bytes still go to `digest`): memory is
    bounded by the limit, not by the line."""
    limit = MAX_LINE_BYTES
    while raw := fh.readline(limit):
        if len(raw) < limit or raw.endswith(b"\n"):
            yield raw, None
            continue
        head, size = raw[:4096], 0
        while raw:
            if digest is not None:
                digest.update(raw)
            size += len(raw)
            raw = b"" if raw.endswith(b"\n") else fh.readline(READ_BUFFER)  # the rest in small pieces
        yield head, size


HELD_DATA_BYTES = 64 * 1024 * 1024  # a large file's distinct `data` held as objects up to this much of their JSON
SPILL_BLOCK_BYTES = 1024 * 1024  # spilled `data` read back a block at a time


class DataColumn(Sequence):
    """The `data` objects of a large file's lines, in file order, in bounded memory.

    A line whose `data` is the same JSON as one held before shares that object (`share_key`: types included).
    Distinct objects are held until their JSON reaches `held_bytes`; each later one is written as its compact
    JSON to a temporary file and decoded again when asked for (a small cache keeps the last few thousand, so
    the lines that repeat one stay cheap). A file of a million steps each with its own reasoning held 1.2 GB of
    `data` objects; what stays in memory per spilled line is its place in the file (20 bytes). Nothing changes
    a line's `data` once it is read, so a decoded copy is as good as the object."""

    def __init__(self, held_bytes: int | None = None) -> None:
        self._held: list[dict[str, Any]] = []  # the distinct objects held (their JSON within `held_bytes`)
        self._objects: array | SpillArray = array("i")  # per line: its object's place in `_held`; -1: spilled
        # Where a spilled line's JSON starts in the file (-1: held), and its length (negative: written by `json`,
        # which orjson could not write exactly); made at the first spill (a file whose data are held pays nothing).
        self._at: array | None = None
        self._size: array | None = None
        self._shared: dict[bytes, dict[str, Any] | tuple[int, int]] = {}
        self._room = HELD_DATA_BYTES if held_bytes is None else held_bytes
        self._file: Any = None
        self._end = 0
        self._unflushed = False
        self._decoded: dict[int, dict[str, Any]] = {}
        self._block_at, self._block = 0, memoryview(b"")  # the part of the file read last

    def append(self, data: dict[str, Any], raw: str | bytes) -> None:
        """Add one line's `data`; `raw` is its compact text without pixels, else the line as read."""
        key = share_key(data, raw)
        if key is None:  # orjson cannot write it exactly: its own object, held or written by json
            entry = self._hold_or_spill(data, None, len(raw))
        else:
            entry = self._shared.get(key)
            if entry is None:
                entry = self._hold_or_spill(data, key, len(key))
                if len(self._shared) >= SHARED_DATA_LIMIT:
                    self._shared.clear()
                self._shared[key] = entry
        if isinstance(entry, int):
            self._objects.append(entry)
            if self._at is not None:
                self._at.append(-1)
                self._size.append(0)
        else:
            if self._at is None:
                n = len(self._objects)
                if isinstance(self._objects, SpillArray):  # (a block at a time: n may be millions)
                    self._at, self._size = SpillArray("q", repeat(-1, n)), SpillArray("i", repeat(0, n))
                else:
                    self._at, self._size = array("q", [-1]) * n, array("i", [0]) * n
            self._objects.append(-1)
            self._at.append(entry[0])
            self._size.append(entry[1])

    def spill_columns(self) -> None:
        """Past HELD_ITEMS lines: the per-line columns wait on disk but for their newest lines (`SpillArray`)."""
        spill_attributes(self, (("_objects", "i"), ("_at", "q"), ("_size", "i")))

    def _hold_or_spill(self, data: dict[str, Any], key: bytes | None, size: int) -> int | tuple[int, int]:
        """`data`'s place among the held objects, or where its JSON starts in the file and its length."""
        if size <= self._room:
            self._room -= size
            self._held.append(data)
            return len(self._held) - 1
        blob = key if key is not None else json.dumps(data).encode()  # ASCII: lone surrogates stay escapes
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="arcstudy-data-")
            self._file.write(blob)
        except OSError as err:  # the scratch space is full or not writable: not the input's fault (exit 1)
            raise scratch_error(err) from err
        self._unflushed = True
        at, self._end = self._end, self._end + len(blob)
        return at, len(blob) if key is not None else -len(blob)

    def __len__(self) -> int:
        return len(self._objects)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(len(self))[i]]
        held = self._objects[i]
        if held >= 0:
            return self._held[held]
        at = self._at[i]
        decoded = self._decoded.get(at)
        if decoded is not None:
            return decoded
        size = self._size[i]
        start = at - self._block_at
        if start < 0 or start + abs(size) > len(self._block):  # the lines are read in order: a block at a time
            if self._unflushed:
                self._file.flush()
                self._unflushed = False
            self._block_at, start = at, 0
            self._block = memoryview(os.pread(self._file.fileno(), max(abs(size), SPILL_BLOCK_BYTES), at))
        blob = self._block[start:start + abs(size)]
        decoded = orjson.loads(blob) if size > 0 else json.loads(bytes(blob))
        if len(self._decoded) >= SHARED_DATA_LIMIT:
            self._decoded.clear()
        self._decoded[at] = decoded
        return decoded

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(self.__getitem__, range(len(self)))

    def __getstate__(self) -> dict[str, Any]:  # pickled (to another process): every object, held
        return {"objects": list(self)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(held_bytes=0)
        self._held = state["objects"]
        self._objects = growing("i", range(len(self._held)))

    def spilled(self) -> int:
        """How many lines' `data` wait on disk."""
        return sum(code < 0 for code in self._objects)


HELD_FRAME_BYTES = 64 * 1024 * 1024  # a large file's pixels held as arrays up to this much, then on disk


class FrameColumn:
    """The pixels of a large file's frame lines (each an (n, 64, 64) uint8 array), by position, in bounded memory.

    Held as arrays until they reach `held_bytes`; each later line's are written to a temporary file and read back
    when asked for (`get`). Held, they took about 5 KB a step: `export-transitions` of a 100,000-step recording
    with its frames peaked at 0.75 GB, `score` at 0.88 GB, and a longer one went over 1 GB. What stays in memory
    per spilled line is where its pixels are (20 bytes). Nothing changes a line's pixels once read."""

    def __init__(self, held_bytes: int | None = None) -> None:
        self._held: dict[int, np.ndarray] = {}
        self._room = HELD_FRAME_BYTES if held_bytes is None else held_bytes
        # By line position, from the first spilled line's on: where its pixels start in the file (-1: none there)
        # and its number of frames (each 64x64: other shapes are held).
        self._first = -1
        self._at = SpillArray("q")
        self._n = SpillArray("i")
        self._spilled = 0
        self._file: Any = None
        self._end = 0
        self._unflushed = False

    def __setitem__(self, i: int, pixels: np.ndarray) -> None:
        """Line `i`'s pixels; lines are added in increasing order."""
        if pixels.nbytes <= self._room or pixels.dtype != np.uint8 or pixels.shape[1:] != (64, 64):
            self._room -= pixels.nbytes
            self._held[i] = pixels
            return
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="arcstudy-frames-")
            self._file.write(np.ascontiguousarray(pixels).data)
        except OSError as err:  # the scratch space is full or not writable: not the input's fault (exit 1)
            raise scratch_error(err) from err
        self._unflushed = True
        if self._first < 0:
            self._first = i
        gap = i - self._first - len(self._at)  # lines without spilled pixels since the last one
        self._at.extend(repeat(-1, gap))
        self._n.extend(repeat(0, gap))
        self._at.append(self._end)
        self._n.append(len(pixels))
        self._spilled += 1
        self._end += pixels.nbytes

    def get(self, i: int) -> np.ndarray | None:
        """Line `i`'s pixels (a new array for a spilled line), or None for a line without."""
        held = self._held.get(i)
        k = i - self._first
        if held is not None or self._first < 0 or not 0 <= k < len(self._at):
            return held
        at = self._at[k]
        if at < 0:
            return None
        if self._unflushed:
            self._file.flush()
            self._unflushed = False
        pixels = np.empty((self._n[k], 64, 64), dtype=np.uint8)
        if os.preadv(self._file.fileno(), [pixels.data], at) != pixels.nbytes:
            raise OSError(f"the temporary file of spilled frames ended early (at {at})")
        return pixels

    def __getstate__(self) -> dict[str, Any]:  # pickled (to another process): every line's pixels, held
        spilled = {self._first + k: self.get(self._first + k) for k, at in enumerate(self._at) if at >= 0}
        return {"held": {**self._held, **spilled}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(held_bytes=0)
        self._held = state["held"]

    def spilled(self) -> int:
        """How many lines' pixels wait on disk."""
        return self._spilled


_KINDS = ("frame", "usage", "scorecard", "other")
_KIND_CODE = {k: i for i, k in enumerate(_KINDS)}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NO_TIME = -(2**63)
_NO_FRAMES = -1
_NO_ACTION = -1
_MICROSECOND = timedelta(microseconds=1)
_INT64 = 2**63
_NO_WIN = -_INT64
_FROM_LINE = -2


class _TextColumn:
    """Each line's compact text ("" when none is kept): held for the lines that have one, by position, until
    they are released (`reset_from`: their chunk is written). A reader that keeps no text holds nothing a line
    (a list of "" took 8 bytes a line of millions), and one that releases its chunks holds the last chunk's."""

    __slots__ = ("texts", "n")

    def __init__(self) -> None:
        self.texts: dict[int, str] = {}
        self.n = 0

    def append(self, text: str) -> None:
        if text:
            self.texts[self.n] = text
        self.n += 1

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> str:
        if not -self.n <= i < self.n:
            raise IndexError(i)
        return self.texts.get(i % self.n, "")

    def reset_from(self, start: int) -> None:
        """Every line from position `start` on holds no text again."""
        for i in [i for i in self.texts if i >= start]:
            del self.texts[i]


class _HashColumn:
    """Per line, its frames' sha256s (hex) or None: nothing is held a line while no line has frames; then each
    frame's 32 bytes (a hex string in a list took about 180 bytes a frame) and where a line's start (-1: None),
    as `SpillArray`s."""

    __slots__ = ("n", "start", "count", "digests")

    def __init__(self) -> None:
        self.n = 0  # lines, while no line had hashes
        self.start: SpillArray | None = None
        self.count: SpillArray | None = None
        self.digests: SpillArray | None = None

    def append(self, hashes: list[str] | None) -> None:
        if self.start is None:
            if hashes is None:
                self.n += 1
                return
            self.start, self.count = SpillArray("q", repeat(-1, self.n)), SpillArray("i", repeat(0, self.n))
            self.digests = SpillArray("B")
        if hashes is None:
            self.start.append(-1)
            self.count.append(0)
            return
        self.start.append(len(self.digests))
        self.count.append(len(hashes))
        for h in hashes:
            self.digests += bytes.fromhex(h)

    def __len__(self) -> int:
        return self.n if self.start is None else len(self.start)

    def __getitem__(self, i: int) -> list[str] | None:
        if self.start is None:
            if not -self.n <= i < self.n:
                raise IndexError(i)
            return None
        at = self.start[i]
        if at < 0:
            return None
        blob = bytes(self.digests[at:at + 32 * self.count[i]])
        return [blob[k:k + 32].hex() for k in range(0, len(blob), 32)]

    def last(self, i: int) -> str | None:
        """The last of line `i`'s hashes (its step's frame digest), or None."""
        if self.start is None:
            return None
        at, n = self.start[i], self.count[i]
        return bytes(self.digests[at + 32 * (n - 1):at + 32 * n]).hex() if at >= 0 and n else None


class LineColumns(Sequence):
    """The parsed lines of a large file held as columns, one compact value per line and field (~100 bytes a
    line, against ~500 for a `Line` object with its number, sha, offsets and datetime): a `Line` is made when
    one is asked for (indexing, iterating) and let go by the caller. `data` objects are shared as read
    (a `DataColumn`: held up to a bound, then on disk); times are kept as UTC microseconds and their offset (a
    non-UTC one per line, sparse).
    Subsets (`select`, slices) are views (`LineView`) over the same columns. The raw text (`raw_json`) of a line
    is let go once its chunk is written (`release_raw`)."""

    def __init__(self) -> None:
        self.number = array("q")
        self.kind = bytearray()
        self.data = DataColumn()
        self.sha: bytearray | None = bytearray()  # 32 bytes a line (None once forgotten: `forget_shas`)
        self.offset = array("q")
        self.size = array("q")
        self.time = array("q")  # UTC microseconds since the epoch, _NO_TIME for none
        self.tz: dict[int, Any] = {}  # position -> tzinfo, for the times not in UTC
        self.n_frames = array("i")
        self.hashes = _HashColumn()  # per line: its frames' hashes (None without frames)
        self.raw_json = _TextColumn()  # per line: its compact text ("" once released, or when not kept)
        self.action_id = array("b")
        self.id_was_string = bytearray()
        self.dropped: dict[int, tuple] = {}
        self.frames = FrameColumn()  # position -> pixels (only when the caller keeps them)
        # A frame line's step record as columns (`step_record`), so that counting never decodes its `data`:
        self.levels = array("q")
        self.win = array("q")
        self.full_reset = bytearray()  # 0 false, 1 true, 2 not recorded
        self.state = array("i")  # code in `_values` (-1: None; _FROM_LINE: made from the line when asked)
        self.guid = array("i")
        self._values: list[Any] = []  # the distinct state and guid strings (a file has a few; a flood, bounded)
        self._value_code: dict[Any, int] = {}

    def append(self, ln: Line, raw: str | bytes) -> None:
        """Add a parsed line; `raw`: its compact text without pixels when it was made, else its bytes as read."""
        i = len(self.number)
        if i == spill.HELD_ITEMS:
            self._spill_columns()
        self.number.append(ln.number)
        self.kind.append(_KIND_CODE[ln.kind])
        self.data.append(ln.data, raw)
        if self.sha is not None:
            self.sha += ln.sha
        self.offset.append(ln.offset)
        self.size.append(ln.size)
        at = ln.recorded_at
        if at is None:
            self.time.append(_NO_TIME)
        else:
            self.time.append((at - _EPOCH) // _MICROSECOND)
            if at.tzinfo is not UTC:
                self.tz[i] = at.tzinfo
        self.n_frames.append(_NO_FRAMES if ln.n_frames is None else ln.n_frames)
        self.hashes.append(ln.hashes)
        self.raw_json.append(ln.raw_json)
        self.action_id.append(_NO_ACTION if ln.action_id is None else ln.action_id)
        self.id_was_string.append(ln.id_was_string)
        if ln.dropped:
            self.dropped[i] = ln.dropped
        if ln.frames is not None:
            self.frames[i] = ln.frames
        self._add_record(ln)

    _FIXED = (("number", "q"), ("kind", "B"), ("sha", "B"), ("offset", "q"), ("size", "q"), ("time", "q"),
              ("n_frames", "i"), ("action_id", "b"), ("id_was_string", "B"), ("levels", "q"), ("win", "q"),
              ("full_reset", "B"), ("state", "i"), ("guid", "i"))

    def _spill_columns(self) -> None:
        """A file past HELD_ITEMS lines: every fixed-width column becomes a `SpillArray` (its newest lines in memory,
        the rest on disk), so that the file's length no longer sets the memory (about 100 bytes a line held: a
        file of ten million steps took over 1 GB). Smaller files keep plain arrays, indexed at C speed."""
        spill_attributes(self, self._FIXED)
        self.data.spill_columns()

    def _code(self, value: Any) -> int:
        if value is None:
            return -1
        code = self._value_code.get(value)
        if code is None:
            if len(self._values) >= SHARED_DATA_LIMIT:  # a flood of distinct guids: read from the line instead
                return _FROM_LINE
            code = self._value_code[value] = len(self._values)
            self._values.append(value)
        return code

    def _add_record(self, ln: Line) -> None:
        levels, win, full = ln.levels_completed, ln.win_levels, ln.full_reset
        state = guid = _FROM_LINE
        # A frame line's values were checked (`_check_frame_record`); other lines' may be anything and are
        # never counted: their record, if asked for, is made from the line.
        if (ln.kind == "frame" and type(levels) is int and -_INT64 <= levels < _INT64
                and (win is None or (type(win) is int and -_INT64 < win < _INT64))):
            state, guid = ln.data.get("state"), ln.data.get("guid")
            state = self._code(state) if state is None or type(state) is str else _FROM_LINE
            guid = self._code(guid) if guid is None or type(guid) is str else _FROM_LINE
        self.levels.append(levels if state != _FROM_LINE else 0)
        self.win.append(_NO_WIN if win is None or state == _FROM_LINE else win)
        self.full_reset.append(2 if full is None else int(full))
        self.state.append(state)
        self.guid.append(guid)

    def step_record(self, i: int) -> StepRecord:
        """`self.line(i).step_record()`, from the columns: its `data` is not read (but for odd lines)."""
        state, win, guid = self.state[i], self.win[i], self.guid[i]
        if state == _FROM_LINE or guid == _FROM_LINE:
            return self.line(i).step_record()
        n, action, full = self.n_frames[i], self.action_id[i], self.full_reset[i]
        # (positional, in the fields' order: a keyword call costs a third more, and counting makes millions)
        return StepRecord(None if action == _NO_ACTION else action, None if state < 0 else self._values[state],
                          self.levels[i], None if full == 2 else bool(full), None if win == _NO_WIN else win,
                          None if n == _NO_FRAMES else n, None if guid < 0 else self._values[guid],
                          self.hashes.last(i), self.number[i])

    def line(self, i: int) -> Line:
        t = self.time[i]
        at = None
        if t != _NO_TIME:
            at = _EPOCH + timedelta(microseconds=t)
            tz = self.tz.get(i)
            if tz is not None:
                at = at.astimezone(tz)
        n, action = self.n_frames[i], self.action_id[i]
        sha = b"" if self.sha is None else bytes(self.sha[32 * i:32 * i + 32])
        return Line(self.number[i], sha, self.offset[i], self.size[i],
                    _KINDS[self.kind[i]], self.data[i], at, self.frames.get(i), None if n == _NO_FRAMES else n,
                    self.hashes[i], self.raw_json[i], None if action == _NO_ACTION else action,
                    bool(self.id_was_string[i]), self.dropped.get(i, ()))

    def __len__(self) -> int:
        return len(self.number)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return LineView(self, range(len(self))[i])
        return self.line(range(len(self))[i])

    def __iter__(self) -> Iterator[Line]:
        return map(self.line, range(len(self)))

    def select(self, kind: str) -> LineView:
        code = _KIND_CODE[kind]
        return LineView(self, growing("i", (i for i, k in enumerate(self.kind) if k == code)))

    def drop_time(self, i: int, err: LineError) -> None:
        """Line `i` loses its time (stored as null) and records why, as a value dropped over its bound does."""
        self.time[i] = _NO_TIME
        self.tz.pop(i, None)
        self.dropped[i] = (*self.dropped.get(i, ()), err)

    def forget_shas(self) -> None:
        """Let go of every line's sha256 (32 bytes a line; a `Line` made after has an empty `sha`): for a reader
        that never writes the lines' rows, whose hashes served the duplicated-write check while reading only."""
        self.sha = None

    def release_raw(self, start: int) -> None:
        """Let go of the raw text of the lines from position `start` on (their chunk is written)."""
        self.raw_json.reset_from(start)


class LineView(Sequence):
    """Some lines of a `LineColumns`, by position, in order; a `Line` made for each as it is asked for."""

    def __init__(self, store: LineColumns, positions: Sequence[int]):
        self.store, self.positions = store, positions

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return LineView(self.store, self.positions[i])
        return self.store.line(self.positions[i])

    def __iter__(self) -> Iterator[Line]:
        return map(self.store.line, self.positions)

    def take(self, indices: Sequence[int]) -> LineView:
        """The lines at these indices of this view."""
        return LineView(self.store, growing("i", (self.positions[i] for i in indices)))


class StepRecordView(Sequence):
    """The step records of some lines of a `LineColumns`, by position, each made from the columns as asked for."""

    def __init__(self, view: LineView):
        self.store, self.positions = view.store, view.positions

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self.store.step_record(p) for p in self.positions[i]]
        return self.store.step_record(self.positions[i])

    def __iter__(self) -> Iterator[StepRecord]:
        return map(self.store.step_record, self.positions)


def record_view(lines: Sequence[Line]) -> Sequence[StepRecord | Line]:
    """The lines as step records to index: a `LineView`'s from its columns (no `Line` made, no `data` read);
    a list's are its lines themselves (a `Line` has a record's `action_id`, `levels_completed`, `win_levels`)."""
    return StepRecordView(lines) if isinstance(lines, LineView) else lines


def step_records(lines: Sequence[Line]) -> Iterator[StepRecord]:
    """Each line's `step_record()`; from the columns of a `LineView` (no `Line` made, no `data` read)."""
    if isinstance(lines, LineView):
        return map(lines.store.step_record, lines.positions)
    return (ln.step_record() for ln in lines)


def _select(lines: Sequence[Line], kind: str) -> Sequence[Line]:
    if isinstance(lines, LineColumns):
        return lines.select(kind)
    return [ln for ln in lines if ln.kind == kind]


def _take(lines: Sequence[Line], indices: Sequence[int]) -> Sequence[Line]:
    if isinstance(lines, LineView):
        return lines.take(indices)
    return [lines[i] for i in indices]


def _records_joined_by_cr(body: bytes) -> int:
    """How many records a line that is not JSON holds when it is split at CR (0 unless its first piece is a JSON
    object): a file with CR-only line ends reads as one line, which is not a cut-off line."""
    pieces = [p for p in body.split(b"\r") if p.strip()]
    if len(pieces) < 2 or dense_json_reason(pieces[0]) is not None:
        return 0
    try:
        return len(pieces) if isinstance(orjson.loads(pieces[0]), dict) else 0
    except orjson.JSONDecodeError:
        return 0


def _read_lines(path: Path, issues: list[LineIssue], want_frames: bool,
                on_frames: Callable[[Line], None] | None, digest: Any | None, text: TextFacts,
                on_chunk: Callable[[list[Line]], None] | None, chunk_bytes: int,
                columns: bool = False, keep_raw: bool = True) -> Sequence[Line]:
    """The file's parsed lines: a list, or (`columns`) a `LineColumns`, whose raw text goes once `on_chunk` had it.
    ``keep_raw=False``: the lines keep no compact text (`Line.raw_json` empty) and no `data` is shared between
    lines (`share_data` keys on that text)."""
    lines: Any = LineColumns() if columns else []
    pending = 0  # index in `lines` of the first line not yet handed to on_chunk
    keep_pixels = want_frames or on_frames is not None
    shared: dict[str, str] = {}
    shared_data: dict[bytes, dict[str, Any]] = {}
    with open(path, "rb", buffering=READ_BUFFER) as fh:
        number = offset = 0
        since_chunk = 0
        for raw, too_long in bounded_lines(fh, digest):
            number += 1
            if too_long is not None:  # its bytes went to `digest` as they were read
                offset += too_long
                issues.append(LineIssue(f"line {number}", "line_too_long", f"line is {too_long} bytes (with its "
                                        "line end), over the "
                                        f"{MAX_LINE_BYTES}-byte limit of a recording line (a frame line is about 12 KB "
                                        "a frame); not read", clip(raw.decode("utf-8", "replace")), STEPS))
                continue
            if digest is not None:
                digest.update(raw)
            start, offset = offset, offset + len(raw)
            if number == 1:
                raw, text.has_bom = strip_bom(raw)  # Windows tools write one; it is not part of line 1
                start = offset - len(raw)
            text.see_line_end(raw)
            truncated = not raw.endswith(b"\n")
            body = raw.rstrip(b"\r\n")
            if not body.isascii():
                try:
                    blank = not body.decode("utf-8").strip()
                except UnicodeDecodeError as err:
                    if number == 1 and bom_encoding(raw):  # every line of it would be quarantined as garbage
                        raise RecordingRejected(not_utf8_reason(err), "not_utf8") from None
                    issues.append(LineIssue(f"line {number}", "not_utf8", not_utf8_reason(err, subject="line"),
                                            clip(raw.decode("utf-8", "replace")), STEPS))
                    continue
            else:
                blank = not body.strip()
            if blank:
                continue
            try:
                line = parse_line(number, body, want_frames=keep_pixels, keep_raw=keep_raw)
            except LineError as err:
                check, reason = err.check, err.reason
                if check == "invalid_json" and (joined := _records_joined_by_cr(body)):
                    check, reason = "cr_line_ends", (
                        f"the file's lines end with CR alone (old Mac line ends), so {joined} records were read as "
                        "one line; convert its line ends to LF (`tr '\\r' '\\n' < FILE > FIXED`, or save it with "
                        "Unix line ends in an editor) and read it again")
                elif truncated and check == "invalid_json":
                    check, reason = "truncated_line", "the last line is cut off (file truncated mid-write)"
                issues.append(LineIssue(f"line {number}", check, reason, clip(body.decode("utf-8")), STEPS,
                                        err.column, err.value, len(body), hashlib.sha256(body).hexdigest()))
                continue
            line.offset, line.size = start, len(body)
            data = line.data
            for key in SHARED_VALUES:  # one copy per file of the values every line repeats
                value = data.get(key)
                if type(value) is str:
                    data[key] = shared.setdefault(value, value)
            raw_text = line.raw_json if keep_raw else body  # (the compact text is shorter to search, when made)
            if line.kind == "frame" and not columns:  # (the columns share every line's `data` themselves)
                line.data = share_data(data, raw_text, shared_data)
            for err in line.dropped:  # a value over its size bound: the line stays, the value is not stored
                issues.append(LineIssue(f"line {number}", err.check, f"{err.reason}; the line is kept without it",
                                        clip(body.decode("utf-8")), USAGE if line.kind == "usage" else STEPS,
                                        err.column, err.value, is_line_kept=True))
            if on_frames is not None and line.frames is not None:
                on_frames(line)
                if not want_frames:
                    line.frames = None
            if columns:
                lines.append(line, raw_text)
            else:
                lines.append(line)
            since_chunk += len(raw)
            if on_chunk is not None and since_chunk >= chunk_bytes:
                on_chunk(lines[pending:])
                if columns:
                    lines.release_raw(pending)
                pending, since_chunk = len(lines), 0
        if on_chunk is not None and pending < len(lines):
            on_chunk(lines[pending:])
            if columns:
                lines.release_raw(pending)
    return lines


def _line_text(path: Path, line: Line) -> str:
    """A line's text as read (clipped to 4 KiB, as quarantine keeps it), read again from its file."""
    with open(path, "rb") as fh:
        fh.seek(line.offset)
        return clip(fh.read(line.size).decode("utf-8"))


def _no_frame_line(lines: Sequence[Line], issues: list[LineIssue]) -> RecordingRejected:
    """Why a file without a usable frame line and without a summary is refused, in terms of its lines: a file
    whose every line was quarantined is refused for what was wrong with those lines."""
    n_bad, first, by_check = 0, [], Counter()  # one pass: the issues may be a flood, waiting on disk
    for i in issues:
        if i.location.startswith("line "):
            n_bad += 1
            by_check[i.check] += 1
            if len(first) < 11:
                first.append(i.location.removeprefix("line "))
    if not n_bad:
        return RecordingRejected("the recording has no frame line (nothing an engine returned)", "no_frame_line")
    where = ", ".join(first[:10]) + (", ..." if n_bad > 10 else "")
    checks = sorted(by_check)
    if checks == ["not_utf8"] and not lines:
        return RecordingRejected(f"no line of the file is UTF-8 text: all {n_bad} lines were quarantined as "
                                 f"not_utf8 (lines {where}); re-save the file as UTF-8", "not_utf8", issues=issues)
    counts = ", ".join(f"{c} x{by_check[c]}" for c in checks)
    return RecordingRejected(f"the recording has no usable frame line and no trailing scorecard summary: "
                             f"{n_bad} line(s) were quarantined ({counts}; lines {where})", "no_frame_line",
                             issues=issues)


def _consistent_steps(path: Path, frames: Sequence[Line], game_id: str, guid: str | None, issues: list[LineIssue],
                      variant: str | None) -> Sequence[Line]:
    """Contradictions, time order, duplicates: the line is left out, the rest kept. A line whose time alone
    jumps ahead (`_jumps_ahead`) is kept without its time."""
    kept = SpillArray("i")  # indices in `frames`
    last_time: datetime | None = None
    last_timed: Line | None = None  # the kept line whose time is `last_time`
    prev: Line | None = None
    micros, n = _micros_of(frames), len(frames)
    ahead, ahead_time = -1, None  # the last line whose time was looked up ahead of its turn, and that time
    # Played with level-only resets (ONLY_RESET_LEVELS=true: the opening RESET a level reset, `is_only_reset_levels`),
    # two level resets in a row are two engine responses, each counted: the doubled-write rule does not hold there.
    doubled_resets_impossible = variant == "toolkit" and not opens_with_level_reset(frames)
    for index, ln in enumerate(frames):
        reject = None
        if ln.data["game_id"] != game_id:
            reject = ("contradicts_file", f"game_id {ln.data['game_id']!r} differs from the file's {game_id!r}",
                      "game_id", ln.data["game_id"])
        elif guid is not None and ln.data.get("guid") not in (None, guid):
            reject = ("contradicts_file", f"guid {ln.data.get('guid')!r} differs from the file's {guid!r}",
                      "guid", ln.data.get("guid"))
        elif prev is not None and ln.sha == prev.sha:
            reject = ("duplicate_step", f"line repeats line {prev.number} exactly (duplicated write)", None, None)
        elif doubled_resets_impossible and prev is not None and _is_rewritten_level_reset(prev, ln):
            # Two engine responses cannot look like this: a RESET right after a level reset is at the level
            # start, so the engine makes it a full reset. The recorder wrote one response twice; the
            # toolkit's card counted it once.
            reject = ("doubled_reset", f"level RESET repeats line {prev.number}'s response (only the timestamp "
                      "differs): the recorder wrote it twice and the toolkit counted it once", None, None)
        elif last_time is not None and ln.recorded_at is not None and ln.recorded_at < last_time:
            reject = ("time_goes_backwards", f"timestamp {ln.recorded_at.isoformat()} is earlier than the "
                      f"previous line's {last_time.isoformat()}", "timestamp", ln.recorded_at.isoformat())
        if reject:
            check, reason, column, value = reject
            issues.append(LineIssue(f"line {ln.number}", check, reason, _line_text(path, ln), STEPS, column,
                                    None if value is None else str(value)))
            continue
        kept.append(index)
        prev = ln
        if ln.recorded_at is None:
            continue
        t = ahead_time if ahead == index else micros(index)
        ahead, ahead_time = index + 1, (micros(index + 1) if index + 1 < n else None)
        if ahead_time is not None and ahead_time >= t:
            last_time, last_timed = ln.recorded_at, ln  # the common case: the next line is not earlier
            continue
        after = _jumps_ahead(micros, index, n, last_time)
        if after is not None:
            issues.append(_drop_time(path, frames, index, ln, last_timed, [frames[j] for j in after]))
            continue
        last_time, last_timed = ln.recorded_at, ln
    return _take(frames, kept)


# A line "jumps ahead" (a clock glitch wrote one far-future time, e.g. 2099 in a 2025 recording, and every later
# line would otherwise be `time_goes_backwards`) when the JUMP_WINDOW timed lines after it are all earlier than
# it, none earlier than the line before it, and in order among themselves: the timeline without its time is
# monotone, so its time alone is wrong. The line (its action, its frames) is kept and only its time dropped
# (null), with a quarantine record naming it. Without a line before it (the first timed line), the window alone
# decides. With fewer than JUMP_WINDOW timed lines after it (the end of the file) it cannot be confirmed and is
# judged as before: kept, and a later line earlier than it is `time_goes_backwards`. A line earlier than a good
# line before it is still `time_goes_backwards`, line by line: the window never confirms a line whose next
# line is earlier than the line before it, nor one that a later line overtakes within the window.
JUMP_WINDOW = 2


def _micros_of(frames: Sequence[Line]) -> Callable[[int], int | None]:
    """The time of `frames[j]` as UTC microseconds since the epoch (None: no time), without making its `Line`."""
    if isinstance(frames, LineView):
        times, positions = frames.store.time, frames.positions

        def from_columns(j: int) -> int | None:
            t = times[positions[j]]
            return None if t == _NO_TIME else t
        return from_columns

    def from_lines(j: int) -> int | None:
        at = frames[j].recorded_at
        return None if at is None else (at - _EPOCH) // _MICROSECOND
    return from_lines


def _numbers_of(frames: Sequence[Line]) -> Callable[[int], int]:
    """The line number of `frames[j]`, without making its `Line`."""
    if isinstance(frames, LineView):
        numbers, positions = frames.store.number, frames.positions
        return lambda j: numbers[positions[j]]
    return lambda j: frames[j].number


def _jumps_ahead(micros: Callable[[int], int | None], index: int, n: int,
                 last_time: datetime | None) -> list[int] | None:
    """The indices of the JUMP_WINDOW timed lines after `frames[index]` that show its time alone jumps ahead,
    else None (see JUMP_WINDOW). A line later than the next timed line is rare: only then is the window read."""
    t = micros(index)
    after: list[int] = []
    times: list[int] = []
    j = index + 1
    while j < n and len(after) < JUMP_WINDOW:
        tj = micros(j)
        if tj is not None:
            if tj >= t or (times and tj < times[-1]):
                return None
            after.append(j)
            times.append(tj)
        j += 1
    if len(after) < JUMP_WINDOW:
        return None
    if last_time is not None and times[0] < (last_time - _EPOCH) // _MICROSECOND:
        return None
    return after


def _drop_time(path: Path, frames: Sequence[Line], index: int, ln: Line, before: Line | None,
               after: list[Line]) -> LineIssue:
    """Clear the time of `frames[index]` (in the column store, or on the line) and say why, in the words of a
    value dropped over its bound."""
    value = ln.recorded_at.isoformat()
    around = ", ".join(f"line {a.number}: {a.recorded_at.isoformat()}" for a in after)
    if before is not None:
        what = (f"timestamp {value} is later than the lines on both sides of it (line {before.number}: "
                f"{before.recorded_at.isoformat()} before it; {around} after it)")
    else:
        what = f"timestamp {value} is later than the lines after it ({around})"
    err = LineError("time_jumps_ahead", f"{what}, which are in order without it: a clock glitch", "timestamp",
                    value)
    if isinstance(frames, LineView):
        frames.store.drop_time(frames.positions[index], err)
    else:
        ln.recorded_at = None
        ln.dropped += (err,)
    return LineIssue(f"line {ln.number}", err.check, f"{err.reason}; the line is kept without its time (its action "
                     "and frames count; correct the timestamp in the file to keep it)", _line_text(path, ln),
                     STEPS, err.column, err.value, is_line_kept=True)


def opens_with_level_reset(steps: Sequence[Line]) -> bool:
    """The first step is make()'s RESET answered as a level reset (`full_reset` false, no level yet): the engine
    does that only with ``ONLY_RESET_LEVELS=true`` (formats.md A.1)."""
    return bool(steps) and steps[0].action_id == 0 and steps[0].full_reset is False and not steps[0].levels_completed


def _is_rewritten_level_reset(prev: Line, ln: Line) -> bool:
    return ln.action_id == 0 and prev.action_id == 0 and ln.full_reset is False and ln.data == prev.data


def reset_defects(frames: Sequence[Line]) -> set[str]:
    """Flags for RESET lines written twice or sent twice (recorder defects users report).

    `leading_reset_repeated`: the first two frame lines are both RESETs. The second is at the level start, so
    the engine made it a full reset and the toolkit's card opened a second, empty play: it is counted so (an
    empty play scores 0 and the game takes the best play).
    `doubled_reset`: a RESET line repeats the previous line's response (`data`) exactly. A repeated level RESET
    of a toolkit recording is left out (`_consistent_steps`: the toolkit counted it once); a repeated full
    RESET is counted as the engine answered it (an empty play)."""
    flags: set[str] = set()
    # (a large file's lines are made only for two RESETs in a row; its ids are read one at a time)
    ids = (map(frames.store.action_id.__getitem__, frames.positions) if isinstance(frames, LineView)
           else (ln.action_id for ln in frames))
    for k, (a, b) in enumerate(pairwise(ids)):
        if a == 0 and b == 0:
            if k == 0:
                flags.add("leading_reset_repeated")
            if "doubled_reset" not in flags and frames[k].data == frames[k + 1].data:
                flags.add("doubled_reset")
    return flags


def read_recording_file(path: Path | str, *, want_frames: bool = False,
                        on_frames: Callable[[Line], None] | None = None,
                        on_chunk: Callable[[list[Line]], None] | None = None,
                        chunk_bytes: int = CHUNK_BYTES, file_sha256: str | None = None,
                        columns: bool | None = None, keep_raw_json: bool = True) -> ParsedRecording:
    """Read one recording file. ``want_frames`` keeps every frame line's pixels (uint8) on its `Line`;
    ``on_frames`` receives each line with pixels as it is read (ingest streams them to Parquet);
    ``on_chunk`` receives the parsed lines of every ``chunk_bytes`` of input as they are read (ingest
    writes their `line_rows` then, and drops their `raw_json`), the last, shorter chunk included.
    ``file_sha256``: the file's hash when the caller has it already (ingest's file_id); else it is computed
    while reading.

    ``columns``: hold the lines as columns (`LineColumns`: a large file's lines in a fifth of the memory; its
    `lines`, `steps` and `usage` are then sequences that make a `Line` as each is asked for). None (the
    default): columns for a file of COLUMNS_FROM_BYTES or more, so that no reader holds a `Line` object per
    line of a large file (2,000,000 frameless steps took `score` 3.6 GB that way).

    ``keep_raw_json=False``: for a reader that never stores the lines' text (score, recover-actions, the
    transitions export): each `Line.raw_json` stays empty, which saves re-serializing every line and holding the
    text. Every check, issue and quarantine reason is the same.

    Raises `RecordingRejected` for a file that cannot be used and OSError for one that cannot be read."""
    path = Path(path)
    if columns is None:
        columns = path.stat().st_size >= COLUMNS_FROM_BYTES
    issues: list[LineIssue] = Spool()  # a flood of bad lines waits on disk, not in memory
    digest = hashlib.sha256() if file_sha256 is None else None
    text = TextFacts()
    lines = _read_lines(path, issues, want_frames, on_frames, digest, text, on_chunk, chunk_bytes, columns,
                        keep_raw_json)
    frames = _select(lines, "frame")
    usage = _select(lines, "usage")
    summaries = _select(lines, "scorecard")
    summary = summaries[-1] if summaries else None
    has_cards = summary is not None and isinstance(summary.data.get("cards"), dict) and bool(summary.data["cards"])
    if summary is not None and "cards" in summary.data and not isinstance(summary.data["cards"], dict):
        # said, not read as no summary at all (the play was flagged `no_trailing_summary`, exit 0)
        issues.append(LineIssue(f"line {summary.number}", "bad_card", "the scorecard summary's `cards` must be an "
                                f"object of cards by game id, got {clip(json.dumps(summary.data['cards']))}; the "
                                "summary is not used", _line_text(path, summary)))
    if not frames and not has_cards:
        raise _no_frame_line(lines, issues)
    variant, evidence = detect_variant(lines.data if isinstance(lines, LineColumns) else (ln.data for ln in lines),
                                       path)
    name_guid, _ = filename_guid(path)

    others = _select(lines, "other")
    misplaced = summaries[:-1]
    for ln in sorted([*others, *misplaced], key=lambda ln: ln.number) if others or misplaced else ():
        if ln.kind == "other":
            issues.append(LineIssue(f"line {ln.number}", "unknown_record",
                                    "`data` is neither a frame, an LLM usage record nor a scorecard",
                                    _line_text(path, ln)))
        else:
            issues.append(LineIssue(f"line {ln.number}", "misplaced_scorecard",
                                    "a scorecard summary line that is not the last one", _line_text(path, ln)))

    flags: set[str] = set(text.flags())
    if frames:
        game_id, guid = frames[0].data["game_id"], frames[0].data.get("guid")
    else:
        # Human-dataset shape whose frame lines are missing or cut off: the summary's card still says what the
        # toolkit counted (formats.md §A.3), so its slots load and the file is flagged.
        assert summary is not None
        games = list(summary.data["cards"])
        if len(games) != 1:
            raise RecordingRejected(f"the file has no frame line and its summary line's cards hold {len(games)} "
                                    f"games ({games}): which one was recorded cannot be told", "summary_other_game",
                                    f"line {summary.number}", issues=issues)
        game_id, guid = games[0], name_guid
        flags.add("no_frame_lines")
    if summary is not None and has_cards:
        others = [g for g in summary.data["cards"] if g != game_id]
        if others:
            raise RecordingRejected(f"the summary line's cards hold {others}, not the recorded game {game_id}",
                                    "summary_other_game", f"line {summary.number}", issues=issues)

    # Lines whose ids were lost all read RESET: they are not judged as repeated RESETs.
    # The steps' records are made as they are used, never held for the whole file (a large file has millions).
    ids_lost = detect_action_ids_lost(step_records(frames))
    steps = _consistent_steps(path, frames, game_id, guid, issues, None if ids_lost else variant)
    ids_lost = detect_action_ids_lost(step_records(steps))
    options = counting_options_for_variant(variant)
    if variant == "toolkit" and steps and steps[0].action_id != 0 and not ids_lost:
        # Recorder defect: the RESET made by make() opened play 1 on the toolkit's card but was not written.
        # The card the toolkit kept counts the first written line as the first action, so do we.
        flags.add("no_opening_reset_line")
        options = replace(options, leading_reset="absent")
    # Lines whose ids were lost cannot be classified: they stay one play of plain actions (flagged), and no
    # line is treated as an echo.
    effects = StepEffects(repeat(StepEffect.ACTION, len(steps)) if ids_lost
                          else iter_step_effects(step_records(steps), options))
    # (an array: a list's int objects took 40 bytes a step, a fifth of a large file's parsed columns)
    play_index = growing("q", accumulate(effect is StepEffect.FULL_RESET for effect in effects))

    if any(ln.id_was_string for ln in steps):
        flags.add("string_action_ids")
    if steps and steps[0].action_id != 0:
        flags.add("no_leading_reset")
    if ids_lost:
        flags.add("action_ids_lost")
    if not ids_lost:
        flags.update(reset_defects(frames))
    if _over_max_actions(path, effects):
        flags.add("over_max_actions")
    if variant == "human-dataset" and not has_cards:
        flags.add("no_trailing_summary")
    card_slots, card_flags = [], []
    if summary is not None and has_cards:
        # The slot that is this file's play is chosen by the file's guid (the file name's, for human data).
        file_guid = name_guid if variant == "human-dataset" and name_guid else guid
        play_ids = [f"{guid}/{i}" for i in sorted(set(play_index))]
        card_slots, card_issues, card_flags = card_rows(None, summary.data["cards"], summary.number, file_guid,
                                                        play_ids)
        issues.extend(card_issues)
    if not keep_raw_json and isinstance(lines, LineColumns):  # no line row is written: nothing reads the hashes now
        lines.forget_shas()
    return ParsedRecording(path=path, file_sha256=file_sha256 or digest.hexdigest(), lines=lines, steps=steps, usage=usage,
                           summary=summary, issues=issues, variant=variant, evidence=evidence, game_id=game_id,
                           guid=guid, name_guid=name_guid, is_action_ids_lost=ids_lost, effects=effects,
                           play_index=play_index, flags=sorted(flags), card_slots=card_slots,
                           card_flags=card_flags)


def _over_max_actions(path: Path, effects: Sequence[StepEffect]) -> bool:
    """The agents recorder's documented file name `{game_id}.{agent_type}.{max_actions}.{guid}.recording.jsonl`
    carries the agent's MAX_ACTIONS: a file with more agent actions than that (the harness's off-by-one) is
    flagged `over_max_actions`; the lines are counted as they are. Every written line is an action the agent
    sent (the opening RESET is not written by this recorder), echoes included."""
    parts = path.name.split(".")
    if not path.name.endswith(".recording.jsonl") or len(parts) != 6 or not parts[2].isdigit():
        return False
    sent = sum(e is not StepEffect.OPEN for e in effects)
    return sent > int(parts[2])


# --------------------------------------------------------------------------------------------------
# the recording as table rows (what ingest stores and `score FILES` scores)
# --------------------------------------------------------------------------------------------------
def step_frames(rec: ParsedRecording, file_id: str, frames_file: str | None = None,
                chunk_rows: int = STEP_CHUNK_ROWS) -> Iterator[pl.DataFrame]:
    """core_arc3__steps rows, `chunk_rows` steps at a time, built column by column (a large file has
    hundreds of thousands of steps; ingest writes each piece as it comes)."""
    prev_available: list[int] | None = None
    ids_lost = rec.is_action_ids_lost
    changes = iter_level_changes(zip(step_records(rec.steps), rec.effects, rec.play_index,
                                     strict=True))  # taken a chunk at a time: no record of every step held
    for first in range(0, max(len(rec.steps), 1), chunk_rows):
        cols: dict[str, list] = {name: [] for name in empty_frame(STEPS).columns}
        last = min(first + chunk_rows, len(rec.steps))
        for ln, effect, play in zip(rec.steps[first:last], rec.effects[first:last], rec.play_index[first:last],
                                    strict=True):
            data = ln.data
            echo = effect is StepEffect.ECHO
            flags = []
            if echo:
                flags.append("post_terminal")
            if (prev_available is not None and ln.action_id not in (0, None) and ln.action_id not in prev_available
                    and not echo and not ids_lost):
                flags.append("action_not_available")
            reasoning = (data.get("action_input") or {}).get("reasoning")
            if any(err.column == "reasoning_json" for err in ln.dropped):
                flags.append("reasoning_over_16kib")  # not stored (quarantined with the line's location)
            if any(err.column == "timestamp" for err in ln.dropped):
                flags.append("timestamp_dropped")  # its time jumped ahead of its neighbours' (quarantined, null)
            if ids_lost:
                flags.append("action_id_lost")
            click_x, click_y = ln.click
            available = data.get("available_actions")
            cols["line_number"].append(ln.number)
            cols["play_id"].append(rec.play_id(play))
            cols["guid"].append(data.get("guid") or rec.guid)
            cols["recorded_at"].append(ln.recorded_at)
            cols["action_id"].append(ln.action_id)
            cols["action_name"].append(ACTION_NAMES[ln.action_id])
            cols["click_x"].append(click_x)
            cols["click_y"].append(click_y)
            cols["state"].append(data.get("state"))
            cols["levels_completed"].append(ln.levels_completed)
            cols["win_levels"].append(ln.win_levels)
            cols["is_full_reset"].append(ln.full_reset)
            cols["available_actions"].append(available)
            cols["n_frames"].append(ln.n_frames)
            cols["frame_sha256s"].append(ln.hashes)
            cols["last_frame_sha256"].append(ln.hashes[-1] if ln.hashes else None)
            cols["frames_file"].append(frames_file if ln.n_frames else None)
            cols["is_post_terminal"].append(echo)
            cols["step_effect"].append(effect.value)
            cols["is_counted"].append(effect.is_counted)
            cols["reasoning_json"].append(None if reasoning is None else json.dumps(reasoning, ensure_ascii=False))
            cols["flags"].append(flags)
            if not echo and isinstance(available, list):
                prev_available = available
        n = last - first
        # Texts that repeat on every step are stored once per chunk (a 64-character file id on each of a
        # million steps would be 80 MB of the table a scored file keeps).
        cols.update(file_id=repeated(file_id, n), step_index=list(range(first, last)),
                    game_id=repeated(rec.game_id, n), is_level_change=list(islice(changes, n)),
                    play_id=_few_texts(cols["play_id"]), guid=_few_texts(cols["guid"]))
        yield table_from_columns(STEPS, cols)


def repeated(value: Any, n: int, dtype: pl.DataType = pl.String) -> pl.Series:
    """`n` times `value` (a text, a list, None), the value stored once."""
    return pl.Series([value], dtype=dtype).new_from_index(0, n)


def _few_texts(values: list) -> pl.Series | list:
    """A text column whose values are few (a file's play ids, its guid) with each distinct text stored once;
    the list as it is when most values differ."""
    index: dict[Any, int] = {}
    codes = [index.setdefault(v, len(index)) for v in values]
    if len(index) * 4 > len(values) or not all(type(v) is str for v in index):
        return values  # None or another type: `table_from_columns` decides as for any list
    return pl.Series(list(index), dtype=pl.String).gather(codes)


def table_from_columns(table: str, cols: dict[str, Any]) -> pl.DataFrame:
    """A table's frame from its columns as python lists (faster than rows of dicts) or ready polars Series
    (a value stored once for many rows: `repeated`, `_few_texts`)."""
    schema = empty_frame(table).schema
    try:
        return pl.DataFrame([cols[name].alias(name).cast(dtype) if isinstance(cols[name], pl.Series)
                             else _list_column(name, cols[name], dtype.inner) if isinstance(dtype, pl.List)
                             else pl.Series(name, cols[name], dtype) for name, dtype in schema.items()])
    except (TypeError, pl.exceptions.PolarsError, pa.ArrowException):
        # A value of another type than the column's (a string `state`, say): conform decides as for rows.
        return conform(table, [dict(zip(cols, row, strict=True)) for row in zip(*cols.values(), strict=True)])


def _list_column(name: str, values: list[list | None], inner: pl.DataType) -> pl.Series:
    """A list column from its Arrow buffers: the values flattened (polars builds a flat column in one go), the
    offsets and the validity as numpy. Polars builds a list column from python lists one row at a time (~10x
    slower, and ~4 KB of memory a row of strings that it keeps); `pa.array` would do it in one go too but
    imports pandas on its first call (~0.25 s of CPU, a tenth of a 200 MB ingest). TypeError for a value
    that is not a list (None aside) or an item polars would not take as `inner`."""
    flat: list = []
    offsets = [0]
    valid = []
    for value in values:
        if value is not None:
            if type(value) not in (list, tuple):
                raise TypeError(f"{name}: expected a list, got {type(value).__name__}")
            flat.extend(value)
        valid.append(value is not None)
        offsets.append(len(flat))
    # The oldest compat level gives large_string for strings: no cast (which would import pyarrow.compute).
    items = pl.Series(flat, dtype=inner, strict=True).to_arrow(compat_level=pl.CompatLevel.oldest())
    buffers = [pa.py_buffer(np.packbits(np.asarray(valid, dtype=bool), bitorder="little")),
               pa.py_buffer(np.asarray(offsets, dtype=np.int64))]
    array = pa.Array.from_buffers(pa.large_list(items.type), len(values), buffers, children=[items])
    return pl.Series(_ArrowCArray(array)).alias(name)


class _ArrowCArray:
    """An Arrow array seen through the Arrow C data interface only: polars takes it without the pyarrow-specific
    path, whose first call imports pyarrow.compute (~0.05 s)."""

    def __init__(self, array: pa.Array):
        self.array = array

    def __arrow_c_array__(self, requested_schema=None):
        return self.array.__arrow_c_array__(requested_schema)


def play_frames(rec: ParsedRecording, file_id: str, chunk_rows: int | None = None) -> Iterator[pl.DataFrame]:
    """The recording's core_arc3__plays rows, `chunk_rows` plays at a time (ingest writes each as it comes):
    each play's first and last line, its count and its first and last time (not its lines: a large file has
    millions). The times are those the lines keep: a line whose time was dropped (`_jumps_ahead`) has none.
    A play's steps are consecutive (`play_index` only grows), so one pass over the steps' columns makes each
    play's entry; as rows of dicts, all at once, a recording of a million one-step plays took 1.6 GB."""
    chunk_rows = chunk_rows or PLAY_CHUNK_ROWS
    micros, numbers = _micros_of(rec.steps), _numbers_of(rec.steps)
    # (the file's values, worked out once: `has_frames` reads every step)
    constant = {"file_id": file_id, "guid": rec.guid, "game_id": rec.game_id, "recording_variant": rec.variant,
                "schema_generation": rec.schema_generation}
    truths = {"has_frames": rec.has_frames, "is_only_reset_levels": rec.is_only_reset_levels,
              "is_action_ids_lost": rec.is_action_ids_lost, "is_replay_needed": False}
    leading_reset, file_flags = rec.has_leading_reset, list(rec.flags)

    def frame(columns: list[array]) -> pl.DataFrame:
        index, first, last, n_steps, started, ended = (pl.Series(np.array(c, dtype=np.int64)) for c in columns)
        n = len(index)
        return table_from_columns(PLAYS, {
            # (the ids `ParsedRecording.play_id` gives, made in one go)
            "play_id": pl.select(pl.lit(f"{rec.guid}/") + pl.lit(index).cast(pl.String)).to_series(),
            **{name: repeated(value, n) for name, value in constant.items()},
            "play_index": index, "first_line_number": first, "last_line_number": last, "n_steps": n_steps,
            "started_at": _times(started), "ended_at": _times(ended),
            **{name: repeated(value, n, pl.Boolean) for name, value in truths.items()},
            "has_leading_reset": index.ne(0) | leading_reset,
            "flags": repeated(file_flags, n, pl.List(pl.String)),
        })

    columns = [array("q") for _ in range(6)]  # play_index, first and last line, steps, first and last time
    index, first, last, n_steps, started, ended = columns
    play = None
    for j, step_play in enumerate(rec.play_index):
        t = micros(j)
        t = _NO_TIME if t is None else t
        if step_play != play:
            if len(index) == chunk_rows:
                yield frame(columns)
                for column in columns:
                    del column[:]
            play = step_play
            index.append(play)
            first.append(numbers(j))
            last.append(first[-1])
            n_steps.append(1)
            started.append(t)
            ended.append(t)
        else:
            last[-1] = numbers(j)
            n_steps[-1] += 1
            if t != _NO_TIME:
                ended[-1] = t
                if started[-1] == _NO_TIME:
                    started[-1] = t
    if index:
        yield frame(columns)


def _times(micros: pl.Series) -> pl.Series:
    return micros.set(micros == _NO_TIME, None).cast(pl.Datetime("us", "UTC"))


def line_rows(lines: Sequence[Line], file_id: str) -> pl.DataFrame:
    """raw_arc3__recording_lines rows of parsed lines (of a whole file, or of a chunk of it); a `LineView`'s
    from its columns (no `Line` made)."""
    if isinstance(lines, LineView):
        store, at = lines.store, lines.positions
        if store.sha is None:
            raise ValueError("the lines' hashes were let go (read with keep_raw_json=False): no rows of them")
        numbers = [store.number[p] for p in at]
        shas = [bytes(store.sha[32 * p:32 * p + 32]).hex() for p in at]  # (a SpillArray's slice is an array)
        kinds = [_KINDS[store.kind[p]] for p in at]
        texts = [store.raw_json[p] for p in at]
    else:
        numbers, shas = [ln.number for ln in lines], [ln.sha.hex() for ln in lines]
        kinds, texts = [ln.kind for ln in lines], [ln.raw_json for ln in lines]
    return conform(LINES, pl.DataFrame({
        "file_id": [file_id] * len(lines), "line_number": numbers, "content_sha256": shas, "line_kind": kinds,
        "raw_json": texts,
    }, schema_overrides={"line_number": pl.Int64}))


def recording_tables(rec: ParsedRecording, file_id: str, frames_file: str | None = None, *,
                     streamed: bool = False, plays: bool = True) -> dict[str, pl.DataFrame]:
    """The recording's rows of raw_arc3__recording_lines, core_arc3__steps, core_arc3__plays, and when the
    file has them core_arc3__card_plays (trailing summary) and core_arc3__usage (agents recorder), conformed
    to their schemas. ``streamed``: the lines' and the steps' rows are taken chunk by chunk (`line_rows`,
    `step_frames`), leave them out; ``plays`` false: the plays' rows are taken chunk by chunk too (`play_frames`).
    """
    tables = {} if streamed else {LINES: line_rows(rec.lines, file_id),
                                  STEPS: pl.concat(list(step_frames(rec, file_id, frames_file)))}
    if plays:
        tables[PLAYS] = pl.concat([empty_frame(PLAYS), *play_frames(rec, file_id)])
    if rec.summary is not None and rec.summary.data.get("cards"):
        tables["core_arc3__card_plays"] = conform("core_arc3__card_plays",
                                                  [{**row, "file_id": file_id} for row in rec.card_slots])
    if rec.usage:
        tables["core_arc3__usage"] = conform("core_arc3__usage", [{
            "file_id": file_id, "line_number": ln.number, "recorded_at": ln.recorded_at,
            "n_tokens": ln.data.get("tokens"), "n_total_tokens": ln.data.get("total_tokens"),
            "conversation_length": ln.data.get("conversation_length"),
            "assistant_text": ln.data.get("assistant"),
        } for ln in rec.usage])
    return tables
