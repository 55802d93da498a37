"""One recording (any variant, playback scripts included, or a recording's database steps) -> transition rows.

`export_transitions(job)` is the per-file piece of `arcstudy export-transitions`: a module-level function of
one picklable argument, run through the one executor (`pipeline.core.executor`). Everything that runs a game's
code (loading, constructing, stepping it) is handed to `pipeline.core.game_code.run_game_code`, in a confined
child (`pipeline.recordings.transition_replay.replay_chunk`); a game stopped there leaves its file out. It reads
the file with the one reader (`pipeline.recordings`), rebuilds its plays and counts as `arcstudy score` does
(`pipeline.scoring.plays`, recovered action ids included), and replays it on the engine with the scorer's
comparison (`pipeline.recordings.replaying.iter_replay_classified`).

A file is replayed in chunks of at most `ExportJob.batch_rows` steps, one sandbox call each, the replay kept
alive in the child between calls; each chunk comes back as one buffer of frames (through memory shared with
the child), whose sha256 digests are computed here, once (`_digests`), and becomes blocks of at most
`batch_rows` rows (or BATCH_FRAME_BYTES of frames). Files are exported in groups (`iter_job_pieces`,
`_group_streams`): a group's files are read first, then the whole replays of its short files go to the sandbox
in as few calls as their frames allow (`transition_replay.replay_chunks`), and each file's stream goes on from
its answer. The calls after a file's first, and in this process a group's calls, are made on a background
thread (`_AHEAD`), each as soon as its arguments are known: the sandbox child replays the next chunk or group
while this process turns the one before into rows. In this process the groups go in turn to two children of
the game (`replay_lanes`, a thread each): one child replaying while this process only reads, hashes and writes
was the bottleneck on two cores.
In this process (serial runs) the blocks are an iterator the single writer (`shards.ShardWriter`) consumes as
the replay goes, gathering several files' blocks into one record batch (`build_batch`, columns built from
buffers): a file's frames are never held whole, whatever its length, and a short file does not pay for a batch
of its own. From a worker they come back as zstd Arrow IPC streams (a file's compressed rows, whole).
What stays per step in memory is the input's: a script's actions, a recording's parsed lines (the reader
reads a file whole). A game stopped in the sandbox after some of a file's batches were written cuts the play
there (the rows before it stay, the file is reported); stopped before, the file gives no row.

Where the frames come from:

- a recording with frames whose replay agrees: the file's frames (they equal the engine's), ``verified``;
- a recording without frames (and every playback script): the engine's frames, ``verified``;
- a step whose frames differed while the replay reconverged later (animations that depend on the interpreter's
  hash seed): the file's frames, ``verified`` false for that row only;
- the game cannot be loaded: a recording with frames is exported from the file, every row ``verified`` false;
  one without frames cannot be (the play is listed as not exported);
- the replay diverges (outcome, or frames that never match again, or the game raises): the plays are exported
  up to the step before the divergence and listed as cut; a game that raised (its step time limit included) is
  also the file's problem (exit 3): its code failed, where a divergence of the data is a fact about the file.
  Database steps hold frame hashes, not pixels: a frame difference there cuts the play (the recorded frames are
  not at hand).

A recording that lacks the opening RESET (the agents recorder) gets the engine's answer to it as step 0,
``line_number`` null. Recordings whose action ids were lost and not recovered are not exported (the actions
are unknown).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import hashlib
import inspect
import os
import uuid
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from engine.loader import GameNotFoundError, resolve_game
from pipeline.core.game_code import (
    GameCodeError,
    SandboxFailure,
    game_key,
    hold_game_child,
    portable_info,
    run_game_code,
)
from pipeline.core.outputs import OutputError
from pipeline.core.prefetch import CallsAhead
from pipeline.core.result_shape import expect
from pipeline.core.spool import Spool
from pipeline.recordings.counting import (
    ACTION_NAMES,
    StepEffect,
    StepRecord,
    iter_level_changes,
    iter_play_index,
    iter_step_effects,
    level_changes,
    play_index_per_step,
)
from pipeline.recordings.frames import KeptFrames, frame_hashes
from pipeline.recordings.lines import Line
from pipeline.recordings.playback import (
    PlaybackError,
    ScriptActions,
    is_playback_file,
    read_playback_file,
    resolve_script_game,
    script_guid,
)
from pipeline.recordings.reader import (
    LineView,
    ParsedRecording,
    RecordingRejected,
    read_recording_file,
    record_view,
)
from pipeline.recordings.replaying import recorded_outcome
from pipeline.recordings.transition_replay import (
    CHUNK_SHAPE,
    Feed,
    are_chunks,
    is_chunk,
    replay_chunk,
    replay_chunks,
)
from pipeline.recordings.variant import counting_options_for_variant
from pipeline.scoring.plays import (
    PLAY_COLUMNS,
    STEP_COLUMNS,
    RecordingInput,
    read_recording_files,
    recordings_from_tables,
    steps_in_parts,
)
from pipeline.scoring.verify import (
    ReplayStep,
    describe,
    file_steps,
    steps_from_file,
    table_steps,
)
from schemas.transitions import ARROW_SCHEMA, FRAME_SHAPE

__all__ = ["ExportJob", "FileExport", "PlayExport", "PlayOwners", "RowBlock", "batches_from_bytes", "build_batch",
           "export_files", "export_group", "export_transitions", "iter_job_pieces", "iter_pieces",
           "source_of"]

BATCH_ROWS = 1024  # rows per Arrow batch sent back (and per Parquet row group)
BATCH_FRAME_BYTES = 16 << 20  # ... or fewer, once their frames hold this many bytes
GROUP_FILES = 64  # files per piece of work on a worker (`export_group`) ...
GROUP_BYTES = 16 << 20  # ... or fewer, once their input holds this many bytes
MAX_LANES = 2  # sandbox children replaying at once per game in this process (`replay_lanes`)
EMPTY_FRAMES = np.zeros((0, 64, 64), dtype=np.uint8)
DB_STEP_COLUMNS = (*STEP_COLUMNS, "frames_file")  # what the export reads of stored steps


def _game(game_id: str, dirs: tuple[str, ...]) -> tuple[Any, str]:
    """The game and the sha256 of its source, once per process (a worker exports many files of one game);
    GameNotFoundError for one that cannot be loaded, also looked for once (each of 100,000 one-play files of a
    game not shipped walked the game folders again: 74 s for the export)."""
    found = _game_or_why(game_id, dirs)
    if isinstance(found, GameNotFoundError):
        raise type(found)(*found.args)  # (a new one: raising the cached one again grows its traceback)
    return found


@functools.lru_cache(maxsize=256)
def _game_or_why(game_id: str, dirs: tuple[str, ...]) -> tuple[Any, str] | GameNotFoundError:
    try:
        info = resolve_game(game_id, [Path(d) for d in dirs])
    except GameNotFoundError as err:
        return err.with_traceback(None)
    return info, info.source_sha256()


@functools.lru_cache(maxsize=256)
def _script_game(named: str, dirs: tuple[str, ...], version: str | None) -> tuple[Any, str]:
    """`resolve_script_game` and the game's source sha256, once per process (PlaybackError is not cached)."""
    info = resolve_script_game(named, [Path(d) for d in dirs], version)
    return info, info.source_sha256()


def _portable(info: Any) -> Any:
    """`portable_info(info)` once per game and working folder (it makes the paths absolute: relative ones mean
    something else after a chdir)."""
    return _portable_in(info, os.getcwd())


@functools.lru_cache(maxsize=256)
def _portable_in(info: Any, cwd: str) -> Any:
    return portable_info(info)


def source_of(variant: str) -> str:
    """The `source` column of a recording variant: the official human dataset is human play, action scripts
    are playback, every other recorder is an agent's."""
    return {"human-dataset": "human", "playback": "playback"}.get(variant, "agent")


@dataclass(frozen=True)
class ExportJob:
    """One file to export: a recording or playback file (``path``), or a recording's database steps (``db`` and
    ``file_id``). Everything a worker needs, picklable."""

    path: str | None = None
    db: str | None = None
    file_id: str | None = None
    game_dirs: tuple[str, ...] = ()
    recovered: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # --recovered-actions: (key, actions) pairs
    game_version: str | None = None  # playback scripts: the version to replay on
    batch_rows: int = BATCH_ROWS
    compress: bool = True  # zstd IPC streams (they travel from a worker); False: the batches as they are (serial)
    lane: int = 0  # which of a game's sandbox children replays it (`iter_job_pieces`' ``lanes``)

    @property
    def label(self) -> str:
        return self.path if self.path is not None else f"{self.db}#{self.file_id}"


@dataclass
class PlayExport:
    """What happened to one play: `exported` (every step), `cut` (up to a divergence), `unverified` (from the
    file, game not loadable) or `not_exported` (nothing could be), with the reason."""

    play_id: str
    game_id: str
    source: str
    status: str
    n_rows: int = 0
    detail: str | None = None
    n_unconfirmed_rows: int = 0  # rows of a replayed play whose frames differed where the replay reconverged later


@dataclass
class FileExport:
    """A file's rows (Arrow IPC streams, zstd) and what happened to its plays: ``plays``, in play order, once the
    rows are all made. While they are made, the play whose rows are coming is ``current_play`` (its counts
    growing) and the ones before it are in ``plays``, which keeps a bounded number in memory (`Spool`): a
    recording of a million one-step plays held an entry for each, about 0.4 KB apiece."""

    label: str
    file_id: str | None = None
    game_id: str | None = None
    source: str | None = None
    game_source_sha256: str | None = None
    batches: list[bytes | RowBlock] = field(default_factory=list)  # IPC streams, or row blocks in-process
    plays: list[PlayExport] = field(default_factory=Spool)
    current_play: PlayExport | None = None
    problems: list[str] = field(default_factory=Spool)  # lines left out (a flood: on disk), or why it was refused
    rejected: bool = False  # the file gave no row because it is bad input (exit 3)
    n_rows: int = 0
    n_engine_steps: int = 0  # responses the engine produced for it
    file_sha256: str | None = None  # the sha256 of the file's bytes, as its reader hashed them (for the manifest)

    def begin_play(self, play: PlayExport) -> PlayExport:
        """``play``'s entry is the current one; the one before is finished."""
        self.end_play()
        self.current_play = play
        return play

    def end_play(self) -> None:
        if self.current_play is not None:
            self.plays.append(self.current_play)
            self.current_play = None

    def cut_current_play(self, detail: str) -> None:
        """The play whose rows were coming when the replay stopped is cut there."""
        if self.current_play is not None:
            self.current_play.status, self.current_play.detail = "cut", detail


def batches_from_bytes(data: bytes | pa.RecordBatch | RowBlock) -> list[pa.RecordBatch]:
    """The record batches of one item of `FileExport.batches` (an IPC stream, rows not yet a batch, or a batch)."""
    if isinstance(data, RowBlock):
        return [build_batch([data])]
    if isinstance(data, pa.RecordBatch):
        return [data]
    with pa.ipc.open_stream(pa.BufferReader(data)) as reader:
        return list(reader)


def unrepeated_rows(items: Iterable[bytes | pa.RecordBatch | RowBlock],
                    first_file: PlayOwners | dict[str, str | None],
                    names: Mapping[str | None, str] | None = None) -> Iterator[bytes | pa.RecordBatch | RowBlock]:
    """``items`` (a file export's batches, as they stream) without the rows of plays an earlier file gave: the same
    play_id (the same guid, as in a copy of a recording) from another file_id, as `score` leaves such a file out
    (`duplicate_play`): each (play_id, step) is one row of the dataset. Rows are matched by their own file_id,
    since a piece's rows may travel with another file's export (`export_group`). ``first_file``: play_id -> the
    file that gave it first, filled as rows pass (files come in the order given), each file by its name in
    ``names`` (file_id -> a name, one per file: an export's label), else by its file_id."""
    def name(file: str | None) -> str | None:
        return file if names is None else names.get(file, file)

    for item in items:
        if isinstance(item, RowBlock):
            # in row order (the first file given wins): `_row` has play_id second, file_id last but one
            pairs = dict.fromkeys([(values[1], values[-2]) for values in item.rows])
            repeated = {(file, play) for play, file in pairs if first_file.setdefault(play, name(file)) != name(file)}
            if repeated:
                item = _without_plays(item, repeated)
            if item.num_rows:
                yield item
            continue
        for batch in batches_from_bytes(item):
            pairs = pa.Table.from_batches([batch]).group_by(["play_id", "file_id"], use_threads=False).aggregate([])
            repeated = {(file, play) for play, file in zip(pairs.column("play_id").to_pylist(),
                                                           pairs.column("file_id").to_pylist(), strict=True)
                        if first_file.setdefault(play, name(file)) != name(file)}
            if repeated:
                import pyarrow.compute as pc

                key = pc.binary_join_element_wise(batch.column("file_id"), batch.column("play_id"), "\x00")
                keys = pa.array([f"{file}\x00{play}" for file, play in repeated], pa.string())
                batch = batch.filter(pc.invert(pc.is_in(key, value_set=keys)))
            if batch.num_rows:
                yield batch


class PlayOwners:
    """Which file gave each play's rows first (play_id -> the file's name), as `unrepeated_rows` fills it: a
    dict's `setdefault` and `get`. A play id is its recording's guid and the play's index (`guid/index`): the
    plays of one guid are held as runs of consecutive indices that one file gave (a file's plays come in order,
    so a recording of a million one-step plays is one run), other ids one by one. A dict of every play id took
    about 150 bytes a play. A guid of one run (the usual case: a recording is one file) is held as one tuple, a
    guid of several runs as arrays: a flood of one-play files took about 450 bytes a guid as arrays, 200 so."""

    def __init__(self) -> None:
        self._run: dict[str, tuple[int, int, str | None]] = {}  # guid -> (start, stop, file) of its one run
        self._runs: dict[str, tuple[array, array, list]] = {}  # guid -> (starts, stops, files) of several, by start
        self._others: dict[str, str | None] = {}

    @staticmethod
    def _split(play_id: str) -> tuple[str, int] | None:
        guid, sep, index = play_id.rpartition("/")
        # (only the index's own spelling: "g/007" is another play than "g/7")
        if sep and index.isascii() and index.isdigit() and (index == "0" or index[0] != "0") and len(index) < 18:
            return guid, int(index)
        return None

    def get(self, play_id: str, default: str | None = None) -> str | None:
        split = self._split(play_id)
        if split is None:
            return self._others.get(play_id, default)
        guid, index = split
        one = self._run.get(guid)
        if one is not None:
            return one[2] if one[0] <= index < one[1] else default
        runs = self._runs.get(guid)
        if runs is None:
            return default
        starts, stops, files = runs
        at = bisect.bisect_right(starts, index) - 1
        return files[at] if at >= 0 and index < stops[at] else default

    def setdefault(self, play_id: str, file_id: str | None) -> str | None:
        """The file that gave ``play_id`` first: ``file_id`` if none did (it is then recorded as the one)."""
        split = self._split(play_id)
        if split is None:
            return self._others.setdefault(play_id, file_id)
        guid, index = split
        one = self._run.get(guid)
        if one is not None:
            start, stop, first = one
            if start <= index < stop:
                return first
            if index == stop and first == file_id:
                self._run[guid] = (start, stop + 1, first)  # the next play of the same run
                return file_id
            del self._run[guid]  # a second run: the guid's runs as arrays
            self._runs[guid] = (array("q", [start]), array("q", [stop]), [first])
        elif guid not in self._runs:
            self._run[guid] = (index, index + 1, file_id)
            return file_id
        starts, stops, files = self._runs[guid]
        at = bisect.bisect_right(starts, index) - 1
        if at >= 0 and index < stops[at]:
            return files[at]
        if at >= 0 and stops[at] == index and files[at] == file_id and (at + 1 == len(starts)
                                                                        or starts[at + 1] > index):
            stops[at] = index + 1  # the next play of the same run
        else:
            starts.insert(at + 1, index)
            stops.insert(at + 1, index + 1)
            files.insert(at + 1, file_id)
        return file_id


def note_repeated_plays(export: FileExport, first_file: PlayOwners | dict[str, str | None],
                        name: str | None = None) -> None:
    """After a piece's rows were written through `unrepeated_rows`: each play of ``export`` that an earlier file
    gave is not exported (its rows were left out), with the reason naming that file as ``first_file`` names it.
    ``name``: the name ``first_file`` knows this file by (default: its file_id)."""
    own = export.file_id if name is None else name

    def first_of(play: PlayExport) -> str | None:
        first = first_file.get(play.play_id) if play.n_rows else None
        return first if first != own else None

    if not any(first_of(play) is not None for play in export.plays):  # (the plays may wait on disk: read twice,
        return  # and written again only when one changes)
    firsts: set[str] = set()
    n_repeated = 0

    def noted(play: PlayExport) -> PlayExport:
        nonlocal n_repeated
        first = first_of(play)
        if first is not None:
            export.n_rows -= play.n_rows
            why = f"duplicate_play: the same play (guid) as in {first}, given first and exported: each step is one row"
            play.status, play.n_rows, play.n_unconfirmed_rows, play.detail = "not_exported", 0, 0, why
            firsts.add(first)
            n_repeated += 1
        return play

    export.plays = Spool(map(noted, export.plays))
    # the file is rejected input, as `score` rejects it (each play is listed as left out)
    export.problems.append(f"duplicate_play: {n_repeated} play(s) also in {', '.join(sorted(firsts))}, "
                           "given first and exported; left out here")


def _without_plays(block: RowBlock, plays: set[tuple[str | None, str]]) -> RowBlock:
    rows, counts, frames, digests, frame_bytes = [], [], [], [], 0
    at = 0  # frames and digests hold an entry for each row with frames only
    for values, count in zip(block.rows, block.counts, strict=True):
        mine = (values[-2], values[1]) not in plays  # `_row`'s order: ..., play_id second, file_id last but one
        if mine:
            rows.append(values)
            counts.append(count)
        if count:
            if mine:
                frames.append(block.frames[at])
                digests.append(block.digests[at])
                frame_bytes += count * FRAME_BYTES
            at += 1
    return RowBlock(rows, counts, frames, digests, frame_bytes)


# --------------------------------------------------------------------------------------------------
# rows -> compressed Arrow batches
# --------------------------------------------------------------------------------------------------
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")
# The columns are built from buffers: `pa.array` on python values imports pandas on its first call (~0.8 s a
# process), and polars' conversion to Arrow costs milliseconds a batch.
FRAME_BYTES = FRAME_SHAPE[0] * FRAME_SHAPE[1]


def _from_numpy(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(values)])


def _offsets(counts: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return _from_numpy(offsets, pa.int32())


_HEX = np.array([list(f"{i:02x}".encode()) for i in range(256)], dtype=np.uint8)  # byte -> two hex digits


def _frames_array(counts: np.ndarray, data: bytes) -> tuple[pa.Array, pa.Array]:
    """(`frames`, `frame_shape`) from the frame counts per row and every frame's bytes, one buffer (uint8,
    row-major, 4096 bytes a frame): list<binary> with one 4096-byte value per frame, built from buffers."""
    n_frames = int(counts.sum())
    value_offsets = np.arange(0, n_frames * FRAME_BYTES + 1, FRAME_BYTES, dtype=np.int32)
    blobs = pa.Array.from_buffers(pa.binary(), n_frames, [None, pa.py_buffer(value_offsets), pa.py_buffer(data)])
    frames = pa.ListArray.from_arrays(_offsets(counts), blobs)
    shape = pa.ListArray.from_arrays(_offsets(np.full(len(counts), 2, dtype=np.int32)),
                                     _from_numpy(np.tile(np.asarray(FRAME_SHAPE, dtype=np.int16), len(counts)),
                                                 pa.int16()))
    return frames, shape


def _hashes_array(counts: np.ndarray, digests: bytes) -> pa.Array:
    """`frame_sha256s` (list<string> of 64 hex digits) from the frames' sha256 digests, 32 bytes each."""
    n_frames = len(digests) // 32
    text = _HEX[np.frombuffer(digests, dtype=np.uint8)].reshape(-1)
    offsets = np.arange(0, n_frames * 64 + 1, 64, dtype=np.int32)
    items = pa.Array.from_buffers(pa.string(), n_frames, [None, pa.py_buffer(offsets), pa.py_buffer(text)])
    return pa.ListArray.from_arrays(_offsets(counts), items)


_LIST_COLUMNS = ("frame_sha256s", "available_actions")


def _validity(values: Sequence[Any]) -> tuple[np.ndarray | None, pa.Buffer | None]:
    """(validity per value, or None when every value is there; the Arrow validity bitmap, or None)."""
    if None not in values:  # the common case, one C-level scan
        return None, None
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    return valid, pa.py_buffer(np.packbits(valid, bitorder="little"))


def _string_array(values: Sequence[str | None]) -> pa.Array:
    _, mask = _validity(values)
    if len(values) and mask is None and values.count(values[0]) == len(values):  # one value (a file's ids)
        one = values[0].encode()
        offsets = np.arange(0, len(one) * len(values) + 1, len(one) or 1, dtype=np.int32) if one else \
            np.zeros(len(values) + 1, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), len(values), [None, pa.py_buffer(offsets),
                                                               pa.py_buffer(one * len(values))])
    texts = values if mask is None else ["" if v is None else v for v in values]
    joined = "".join(texts)
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    if joined.isascii():  # the common case: a character is a byte, the lengths are the byte lengths
        data = joined.encode()
        np.cumsum(np.fromiter(map(len, texts), dtype=np.int32, count=len(values)), out=offsets[1:])
    else:
        encoded = [v.encode() for v in texts]
        data = b"".join(encoded)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int32, count=len(values)), out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(values), [mask, pa.py_buffer(offsets), pa.py_buffer(data)])


def _scalar_array(values: Sequence[Any], type_: pa.DataType) -> pa.Array:
    """A string, integer or boolean column (nulls allowed) from python values."""
    if pa.types.is_string(type_):
        return _string_array(values)
    valid, mask = _validity(values)
    if valid is not None:
        values = [0 if v is None else v for v in values]
    if pa.types.is_boolean(type_):
        bits = np.array(values, dtype=bool)
        return pa.Array.from_buffers(type_, len(values), [mask, pa.py_buffer(np.packbits(bits, bitorder="little"))])
    numbers = np.array(values, dtype=type_.to_pandas_dtype())
    return pa.Array.from_buffers(type_, len(values), [mask, pa.py_buffer(numbers)])


def _list_array(values: list[list | None], type_: pa.ListType) -> pa.Array:
    """A list column from its flattened items and offsets (polars builds list series one row at a time)."""
    valid, _ = _validity(values)
    counts = np.array([0 if v is None else len(v) for v in values], dtype=np.int32)
    flat = [item for v in values if v is not None for item in v]
    item_type = type_.value_type
    if pa.types.is_string(item_type):
        items = _string_array(flat)
    else:
        items = _from_numpy(np.asarray(flat, dtype=item_type.to_pandas_dtype()), item_type)
    mask = None if valid is None else pa.Array.from_buffers(
        pa.bool_(), len(values), [None, pa.py_buffer(np.packbits(~valid, bitorder="little"))])
    return pa.ListArray.from_arrays(_offsets(counts), items, type=type_, mask=mask)


ROW_COLUMNS = tuple(f.name for f in ARROW_SCHEMA if f.name not in ("frames", "frame_shape", "frame_sha256s"))


def _row(game_id: str, play_id: str, source: str, step: int, action: str, action_id: int, x: int | None,
         y: int | None, levels_completed: int | None, win_levels: int | None, state: str | None,
         available_actions: list[int] | None, is_level_change: bool, is_counted: bool, verified: bool,
         recovered: bool, file_id: str | None, line_number: int | None) -> tuple:
    """A row's values (every column but the frames and their hashes) as the tuple `RowBlock.rows` holds, in
    `ROW_COLUMNS` order. The hot loops below write the same tuple inline."""
    return (game_id, play_id, source, step, action, action_id, x, y, levels_completed, win_levels, state,
            available_actions, is_level_change, is_counted, verified, recovered, file_id, line_number)


# The tuples follow the schema's order (schemas/transitions.py): checked here, against `_row`'s parameters.
if tuple(inspect.signature(_row).parameters) != ROW_COLUMNS:
    raise ImportError(f"schemas.transitions' columns {ROW_COLUMNS} differ from the row tuples' (`_row`)")


class RowBlock:
    """Rows not yet made into an Arrow batch: each row's values (a tuple in `ROW_COLUMNS` order, `_row`), frame
    counts, frames' bytes and digests. In this
    process (serial runs) a file's rows are handed to the writer as blocks, and the writer makes one batch of
    many files' blocks (`build_batch`): building the columns costs about the same for 50 rows as for 1,000."""

    __slots__ = ("counts", "digests", "frame_bytes", "frames", "rows")

    def __init__(self, rows: list[tuple], counts: list[int], frames: list, digests: list,
                 frame_bytes: int) -> None:
        self.rows, self.counts, self.frames, self.digests, self.frame_bytes = rows, counts, frames, digests, \
            frame_bytes

    @property
    def num_rows(self) -> int:
        return len(self.counts)


def build_batch(blocks: Sequence[RowBlock]) -> pa.RecordBatch:
    """One record batch of the rows of ``blocks``, in order, its columns built from buffers."""
    if len(blocks) == 1:
        block = blocks[0]
        rows, counts_list, frames_list, digests_list = block.rows, block.counts, block.frames, block.digests
    else:
        rows, counts_list, frames_list, digests_list = [], [], [], []
        for block in blocks:
            rows += block.rows
            counts_list += block.counts
            frames_list += block.frames
            digests_list += block.digests
    counts = np.asarray(counts_list, dtype=np.int32)
    frames, shape = _frames_array(counts, b"".join(frames_list))
    hashes = _hashes_array(counts, b"".join(digests_list))
    columns = dict(zip(ROW_COLUMNS, zip(*rows, strict=True), strict=True))
    arrays = []
    for f in ARROW_SCHEMA:
        if f.name == "frames":
            arrays.append(frames)
        elif f.name == "frame_shape":
            arrays.append(shape)
        elif f.name == "frame_sha256s":
            arrays.append(hashes)
        elif f.name in _LIST_COLUMNS:
            arrays.append(_list_array(list(columns[f.name]), f.type))
        else:
            arrays.append(_scalar_array(list(columns[f.name]), f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


class _Rows:
    """Rows of one file, handed on every `batch_rows` rows (or frame bytes): as `RowBlock`s (in this process, for
    the writer to gather), or as zstd Arrow IPC streams (from a worker). A row's frames come as bytes with their
    sha256 digests (a slice of a sandbox chunk, `transition_replay`), or as the file's pixels with their hex
    hashes."""

    def __init__(self, batch_rows: int, compress: bool = True):
        self.batch_rows = max(1, batch_rows)
        self.compress = compress
        self.out: list[bytes | RowBlock] = []
        self.n = 0
        self._reset()

    def _reset(self) -> None:
        self.rows: list[tuple] = []  # each row's values, `_row` (columns are made at `build_batch`)
        self.counts: list[int] = []
        self.frames: list[bytes] = []
        self.digests: list[bytes] = []
        self.frame_bytes = 0

    def add(self, frames: np.ndarray, hashes: list[str] | None, values: tuple) -> None:
        """A row whose frames are an (n, 64, 64) array (the file's)."""
        frames = np.ascontiguousarray(frames, dtype=np.uint8) if len(frames) else EMPTY_FRAMES
        if hashes is None or len(hashes) != len(frames):
            hashes = frame_hashes(frames)
        self.add_packed(len(frames), frames.tobytes(), bytes.fromhex("".join(hashes)), values)

    def add_packed(self, count: int, frames: bytes, digests: bytes, values: tuple) -> None:
        """A row of ``count`` frames: their bytes (4096 each) and sha256 digests (32 each)."""
        self.rows.append(values)
        self.counts.append(count)
        if count:
            self.frames.append(frames)
            self.digests.append(digests)
            self.frame_bytes += count * FRAME_BYTES
        self.n += 1
        if len(self.counts) >= self.batch_rows or self.frame_bytes >= BATCH_FRAME_BYTES:
            self.flush()

    def take(self) -> list[bytes | RowBlock]:
        """The blocks or streams made so far (handed over: they leave this object)."""
        out, self.out = self.out, []
        return out

    def flush(self) -> None:
        if not self.counts:
            return
        block = RowBlock(self.rows, self.counts, self.frames, self.digests, self.frame_bytes)
        self._reset()
        if not self.compress:  # the writer is in this process: it makes the batches, of many files' rows
            self.out.append(block)
            return
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, ARROW_SCHEMA, options=_IPC_OPTIONS) as writer:
            writer.write_batch(build_batch([block]))
        self.out.append(sink.getvalue().to_pybytes())


def _state(value: Any) -> str | None:
    return getattr(value, "name", None) or (None if value is None else str(value))


# --------------------------------------------------------------------------------------------------
# the piece
# --------------------------------------------------------------------------------------------------
def export_transitions(job: ExportJob) -> FileExport:
    """The rows of one file (see the module docstring). Never raises for a bad file: the reason is in the
    result (``rejected``), and an unexpected failure of the game's code cuts the play where it happened.

    With ``job.compress`` (the result travels from a worker) the batches are all made here, as zstd IPC
    streams. Without it (the writer is in this process) ``batches`` is an iterator that replays the file as it
    is consumed, one bounded batch at a time: the file's frames are never held whole; ``plays``, ``n_rows`` and
    the problems are complete once it is exhausted."""
    result = FileExport(label=job.label)
    stream = _without_calls(_export(job, result))
    if job.compress:
        result.batches = list(stream)
    else:
        result.batches = stream  # type: ignore[assignment]
    return result


def _without_calls(stream: Iterator[Any]) -> Iterator[bytes | RowBlock]:
    for item in stream:
        if not isinstance(item, _Call):
            yield item


def _resumed(first: Any, stream: Iterator[Any], token: str | None) -> Iterator[bytes | RowBlock]:
    try:
        if first is not None:
            yield first
        yield from _without_calls(stream)
    finally:
        if token is not None:
            _PREFETCHED.pop(token, None)


def _group_streams(jobs: Sequence[ExportJob], ahead: bool = False
                   ) -> list[tuple[FileExport, Iterator[bytes | RowBlock]]]:
    """Each file's export and the stream of its rows, the files read and their first replay calls made
    together: every file is read up to its first sandbox call, then those calls go in one per game sandbox
    (`_prefetch`), and each stream, consumed in turn, goes on from there (a file longer than a chunk makes its
    further calls on its own). With ``ahead`` the group's calls are made on the background thread
    (`_AHEAD`) and this returns at once: a stream waits for its answer only when it is consumed. A file whose
    reading fails unexpectedly is that file's failure (``rejected``, the reason in ``problems``)."""
    started: list[tuple[FileExport, Iterator[bytes | RowBlock]]] = []
    calls: list[_Call] = []
    for job in jobs:
        result = FileExport(label=job.label)
        stream = _export(job, result)
        try:
            first = next(stream, None)
        except OutputError:  # the scratch space failed, not the file: the run stops (exit 1)
            raise
        except Exception as err:  # noqa: BLE001 - one file's failure, reported as such
            failed = FileExport(label=job.label, rejected=True)
            failed.problems.append(f"export failed: {type(err).__name__}: {err}")
            started.append((failed, iter(())))
            continue
        token = None
        if isinstance(first, _Call):
            calls.append(first)
            token, first = first.arg[0], None
        started.append((result, _resumed(first, stream, token)))
    if ahead and calls:
        answers: dict[str, dict] = {}
        pending = _Pending(_AHEAD[calls[0].lane].submit(_prefetch, calls, answers), answers)
        for call in calls:
            _PREFETCHED[call.arg[0]] = pending
    else:
        _prefetch(calls, _PREFETCHED)
    return started


def export_files(jobs: Sequence[ExportJob]) -> list[FileExport]:
    """`export_transitions` of several files in this process (the writer's), their first replay calls made in one
    (`_group_streams`), on the background thread: each export's ``batches`` is an iterator of row blocks, to be
    consumed in order. It returns once the files are read, so a caller that asks for the next group before
    writing this one (`SerialExecutor.map_ordered`'s look-ahead) has the sandbox replay that group meanwhile."""
    out = []
    for export, stream in _group_streams([dataclasses.replace(job, compress=False) for job in jobs], ahead=True):
        export.batches = stream  # type: ignore[assignment]
        out.append(export)
    return out


def export_group(jobs: Sequence[ExportJob]) -> list[FileExport]:
    """`export_transitions` of several files in one piece of work (on a worker: a Dask task costs ~15 ms of CPU
    in the scheduler, the worker and this process, more than exporting a short file), their first replay calls
    made in one (`_group_streams`). The files' rows are gathered
    into zstd Arrow IPC streams of about `BATCH_ROWS` rows (or BATCH_FRAME_BYTES of frames) each, many short
    files' rows in one, in file order; a stream travels with the export of the last file whose rows it holds (the
    writer writes the exports in order, so the rows stay in file order). A file whose export fails unexpectedly
    is that file's failure (``rejected``, the reason in ``problems``, none of its rows); the others are
    exported."""
    out: list[FileExport] = []
    pending: list[RowBlock] = []
    rows = frame_bytes = 0

    def flush(into: FileExport) -> None:
        nonlocal pending, rows, frame_bytes
        if pending:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, ARROW_SCHEMA, options=_IPC_OPTIONS) as writer:
                writer.write_batch(build_batch(pending))
            into.batches.append(sink.getvalue().to_pybytes())
            pending, rows, frame_bytes = [], 0, 0

    for export, stream in _group_streams([dataclasses.replace(job, compress=False) for job in jobs]):
        try:
            blocks = list(stream)  # the replay runs here; a failure leaves none of the file's rows
        except OutputError:  # the scratch space failed, not the file: the run stops (exit 1)
            raise
        except Exception as err:  # noqa: BLE001 - one file's failure, reported as such
            failed = FileExport(label=export.label, rejected=True)
            failed.problems.append(f"export failed: {type(err).__name__}: {err}")
            out.append(failed)
            continue
        export.batches = []
        out.append(export)
        for block in blocks:
            pending.append(block)
            rows += block.num_rows
            frame_bytes += block.frame_bytes
            if rows >= BATCH_ROWS or frame_bytes >= BATCH_FRAME_BYTES:
                flush(export)
    if out:
        flush(out[-1])
    return out


def replay_lanes() -> int:
    """How many sandbox children replay pieces at once in this process (a piece per child, in turn): one per
    core this process may use, at most MAX_LANES. One child is the whole export's bottleneck on two cores (it
    replays while this process only reads, hashes and writes), so a second keeps both cores busy."""
    from pipeline.core.executor import default_workers

    return max(1, min(MAX_LANES, default_workers()))


def iter_job_pieces(sized_jobs: Iterable[tuple[ExportJob, int | None]], max_bytes: int | None = None,
                    max_files: int | None = None, lanes: int = 1) -> Iterator[tuple[ExportJob, ...]]:
    """`iter_pieces` of (job, its input's size). With ``lanes`` N, the pieces' jobs go to the sandbox lanes 0, 1,
    ..., N-1 in turn (a piece's files all to one)."""
    for i, piece in enumerate(iter_pieces(sized_jobs, max_bytes, max_files)):
        yield tuple(dataclasses.replace(job, lane=i % lanes) for job in piece) if lanes > 1 else tuple(piece)


def iter_pieces(sized: Iterable[tuple[Any, int | None]], max_bytes: int | None = None,
                max_files: int | None = None) -> Iterator[list[Any]]:
    """Consecutive items, each given with its input's size, in pieces of at most ``max_files`` items and about
    ``max_bytes`` of input (a larger item is a piece of its own; a size of None, not known, counts as
    ``max_bytes``), in order, made as they are read. The bounds default to GROUP_BYTES and GROUP_FILES."""
    max_bytes = GROUP_BYTES if max_bytes is None else max_bytes
    max_files = GROUP_FILES if max_files is None else max_files
    current: list[Any] = []
    size = 0
    for item, n in sized:
        n = max_bytes if n is None else n
        if current and (size + n > max_bytes or len(current) >= max_files):
            yield current
            current, size = [], 0
        current.append(item)
        size += n
    if current:
        yield current


def _export(job: ExportJob, result: FileExport) -> Iterator[bytes | RowBlock]:
    sent = 0
    rows: list[_Rows] = []  # the file's row builder, once made (to flush what it holds after a late stop)
    try:
        if job.path is not None:
            path = Path(job.path)
            if is_playback_file(path):
                parts = _export_script_file(path, job, result, rows)
            else:
                parts = _export_recording_file(path, job, result, rows)
        else:
            parts = _export_db_file(job, result, rows)
        for batch in parts:
            if not isinstance(batch, _Call):
                sent += 1
            yield batch
    except RecordingRejected as err:
        result.rejected = True
        result.problems.append(f"{err.check}: {err.reason}")
        result.problems += (f"{i.location}: {i.check}: {i.reason}" for i in err.issues)
    except PlaybackError as err:
        result.rejected = True
        result.problems.append(f"cannot replay the playback script: {err.reason}")
    except GameStopped as err:
        if not sent:  # nothing of the file is exported: its rows would depend on the stopped run
            result.rejected, result.n_rows, result.plays, result.current_play = True, 0, Spool(), None
            result.problems.append(f"not exported: {err}")
        else:  # batches already streamed to the shards: the rows up to the stop stay, the play is cut there
            if rows:
                rows[0].flush()
                yield from rows[0].take()
                result.n_rows = rows[0].n
            result.cut_current_play(f"the replay stopped: {err}")
            result.problems.append(f"cut: {err}")
    except (OSError, UnicodeDecodeError) as err:
        result.rejected = True
        result.problems.append(f"unreadable: {err}")
    result.end_play()


def _game_code_failed(result: FileExport, game_id: str, where: str) -> None:
    """The file's problem (exit 3) when its game's code failed mid-replay: the play is cut there, as for a
    divergence of the data, and unlike one it is said."""
    result.problems.append(f"cut: game {game_id}: {where}; the play is exported up to the step before")


def _recovered(job: ExportJob) -> dict[str, list]:
    return {key: list(actions) for key, actions in job.recovered}


# ---- the game's code: always in the sandbox (pipeline.core.game_code) -------------------------------
class GameStopped(Exception):
    """The game's code ended abnormally in the sandbox (time, memory, exit, crash): the file's failure."""


@functools.lru_cache(maxsize=256)
def _key_of(game_id: str, directory: str) -> str:
    from types import SimpleNamespace

    return game_key(SimpleNamespace(game_id=game_id, directory=directory))


def _sandbox_key(info: Any, lane: int = 0) -> str:
    """`game_key(info)` (one child for the shipped games, one per game from outside), once per game: it resolves
    paths on the disk. Lane N > 0: another child of the same game (`replay_lanes`); a file's replay stays in
    the child of its job's lane (the child keeps it between calls)."""
    key = _key_of(info.game_id, str(info.directory))
    return key if lane == 0 else f"{key}#lane{lane}"


def _in_sandbox(info: Any, fn: Any, arg: Any, lane: int = 0) -> Any:
    """`fn(arg)` (`replay_chunk`) in the game's sandbox: its chunk, checked for shape before any field is read;
    the game's code ending abnormally, or an answer of another shape, raises GameStopped (that file's failure)."""
    try:
        return expect(run_game_code(fn, arg, key=_sandbox_key(info, lane), source=info.source),
                      lambda out: is_chunk(out, FRAME_BYTES), CHUNK_SHAPE)
    except SandboxFailure as err:
        raise GameStopped(f"game {info.game_id} ({info.source}): its code was stopped in the sandbox "
                          f"({err.kind}): {err.detail}") from None
    except GameCodeError as err:  # raised outside the steps (they catch): loading, constructing
        raise GameStopped(f"game {info.game_id} ({info.source}): {type(err).__name__}: {err}") from None


class _Call:
    """The first sandbox call of a file's replay, yielded (by `_chunks`, then by the file's stream) before it is
    made: a group of files (`_group_streams`) sends many files' first calls in one (`replay_chunks`) and leaves
    the answers in `_PREFETCHED`; a stream read on its own skips it, and the call is made as it comes."""

    __slots__ = ("arg", "info", "lane")

    def __init__(self, info: Any, arg: tuple, lane: int = 0) -> None:
        self.info, self.arg, self.lane = info, arg, lane


# the sandbox calls made ahead (see the module docstring), one thread per lane: a lane's calls wait only for
# its own child
_AHEAD = [CallsAhead(f"export-ahead-{lane}") for lane in range(MAX_LANES)]


class _Pending:
    """A group's first calls being made on the background thread: each file takes its answer once they end."""

    __slots__ = ("answers", "future")

    def __init__(self, future: Future, answers: dict[str, dict]) -> None:
        self.future, self.answers = future, answers

    def take(self, token: str) -> dict | None:
        """The file's answer (None: not made in the group, the file makes its own call). `_prefetch` itself
        turns a failed group call into no answers; anything else it raises is raised here."""
        self.future.result()
        return self.answers.pop(token, None)


_PREFETCHED: dict[str, dict | _Pending] = {}  # token -> the answer to a file's first call, made in a group's one
# call (or the group's calls under way on the background thread)
_PREFETCH_HOLDS: dict[str, Callable[[], None]] = {}  # token -> the hold on the child of a file whose replay a
# group's call began and did not end (its frames filled the answer): released when the file's stream ends
GROUP_CALL_FRAME_BYTES = 16 << 20  # frames answered by one call of a group's files (the rest: the next call) ...
GROUP_PREFETCH_BYTES = 64 << 20  # ... and by all of a group's calls (the rest: each file's own, as it comes)


def _chunks(info: Any, start: tuple, items: Sequence[Any], convert: Any, job: ExportJob
            ) -> Iterator[dict | _Call]:
    """Replay a file in the sandbox in chunks (`transition_replay.replay_chunk`): at most ``job.batch_rows``
    steps fed per call (``convert`` turns a slice of ``items`` into what the child takes), each answer at most
    about BATCH_FRAME_BYTES of frames. Yields each call's answer, the last one ``ended``; before the first, a
    `_Call` (whose answer a group may have made already, with other files'). Each next call is made on the
    background thread (`_AHEAD`) before the answer in hand is yielded, so the child replays the next chunk while
    the caller makes rows of this one."""
    token = uuid.uuid4().hex
    size = max(1, job.batch_rows)
    sent = answered = 0

    def arg_of(first_call: bool) -> tuple:
        nonlocal sent
        take: list[Any] = []
        if answered >= sent:  # the child has answered every step fed: feed the next ones
            take = convert(items[sent:sent + size])
            sent += len(take)
        return (token, start if first_call else None, take, sent >= len(items), BATCH_FRAME_BYTES)

    arg, lane = arg_of(True), job.lane
    key = _sandbox_key(info, lane)
    # A replay of more than one call lives in its child between them: the child is held (`hold_game_child`), so
    # that other games' children, started meanwhile, never close it to make room (that ended the replay)
    release = None if arg[3] else hold_game_child(key)
    try:
        yield _Call(info, arg, lane)
        prefetched = _PREFETCHED.pop(token, None)
        out = prefetched.take(token) if isinstance(prefetched, _Pending) else prefetched
        release = release or _PREFETCH_HOLDS.pop(token, None)
        if out is None:
            out = _in_sandbox(info, replay_chunk, arg, lane)
        if release is None and out["status"] == "ok" and not out["ended"]:
            release = hold_game_child(key)
        while out["status"] == "ok" and not out["ended"]:
            answered += out["n"] - (1 if out["first"] == -1 else 0)
            following = _AHEAD[lane].submit(_in_sandbox, info, replay_chunk, arg_of(False), lane)
            yield _with_digests(out)
            out = following.result()
        yield _with_digests(out)
    finally:
        # (and a group's hold on a file whose stream stopped before it took it)
        for held in (release, _PREFETCH_HOLDS.pop(token, None)):
            if held is not None:
                held()


def _digests(frames: Any) -> bytes:
    """The sha256 digest (32 bytes) of every 4096-byte frame of a buffer, in order."""
    view, sha256 = memoryview(frames), hashlib.sha256
    return b"".join([sha256(view[at:at + FRAME_BYTES]).digest() for at in range(0, len(view), FRAME_BYTES)])


def _with_digests(out: dict) -> dict:
    """A sandbox chunk with its frames' digests, hashed in this process from the bytes received: the game's code
    runs in the child, so a hash made there could differ from the frame it is published with."""
    if "frames" in out:
        out["digests"] = _digests(out["frames"])
    return out


def _prefetch(calls: Sequence[_Call], into: dict) -> None:
    """The first calls of several files (those whose every step fits in one), in as few sandbox calls as their
    frames allow (`replay_chunks`, each answering about GROUP_CALL_FRAME_BYTES, at most GROUP_PREFETCH_BYTES in
    all), per game sandbox; the answers left in ``into`` (by token) for the files' streams. A call that fails
    leaves no answer: each of its files then makes its own call, so the failure is that file's alone (as if no
    group had been tried)."""
    by_key: dict[str, list[_Call]] = {}
    for call in calls:
        if call.arg[3]:  # every step of the file in this call (a longer file goes on its own)
            by_key.setdefault(_sandbox_key(call.info, call.lane), []).append(call)
    for key, group in by_key.items():
        info = group[0].info
        total = 0
        while len(group) > 1 and total < GROUP_PREFETCH_BYTES:  # one file alone: its own call, as it comes
            try:
                answers = run_game_code(replay_chunks, ([c.arg for c in group], GROUP_CALL_FRAME_BYTES), key=key,
                                        source=info.source)
                expect(answers, lambda value, n=len(group): are_chunks(value, n, FRAME_BYTES),
                       f"a list of {CHUNK_SHAPE}s or None")
            except (SandboxFailure, GameCodeError):
                break
            left = []
            for call, answer in zip(group, answers, strict=True):
                if answer is None:
                    left.append(call)
                else:
                    into[call.arg[0]] = answer
                    total += len(answer.get("frames", b""))
                    if answer["status"] == "ok" and not answer["ended"]:  # its replay goes on in that child
                        _PREFETCH_HOLDS[call.arg[0]] = hold_game_child(key)
            if len(left) == len(group):  # nothing answered (cannot happen: the first always is); no loop
                break
            group = left


def _slices(out: dict) -> Iterator[tuple[int, bytes, bytes]]:
    """(frame count, frames' bytes, digests) of every response of a chunk, in order."""
    counts = np.frombuffer(out["counts"], dtype=np.int32)
    frames, digests = memoryview(out["frames"]), memoryview(out["digests"])
    at = 0
    for count in counts.tolist():
        yield count, frames[at * FRAME_BYTES:(at + count) * FRAME_BYTES], digests[at * 32:(at + count) * 32]
        at += count


# ---- playback scripts ------------------------------------------------------------------------------
def _export_script(actions: ScriptActions, named_game: str, file_id: str, job: ExportJob,
                   result: FileExport, holder: list) -> Iterator[bytes | RowBlock]:
    """Replay like the playback agent (make(), then every action), keeping every response's frames; the
    responses are counted by the toolkit rules the reader applies to the recording such a replay writes
    (`counting.iter_step_effects` with the playback variant's options), as they come."""
    info, sha = _script_game(named_game, tuple(job.game_dirs), job.game_version)
    guid = script_guid(file_id)
    result.file_id, result.game_id, result.source = file_id, info.game_id, "playback"
    result.game_source_sha256 = sha
    records, triples = Feed(), Feed()
    effects = iter_step_effects(records, counting_options_for_variant("playback"))
    effect_feed = Feed()
    play_index = iter_play_index(effect_feed)
    changes = iter_level_changes(triples)
    rows = _Rows(job.batch_rows, job.compress)
    holder.append(rows)
    game_id = info.game_id
    current_play, pid, export = None, "", None
    i = 0
    stopped = None
    ids, xs, ys, numbers = actions.action_id, actions.x, actions.y, actions.line_number  # (columns: no objects)
    # what `_chunks` feeds is a range of the actions' indices, sent as `replay_items`
    for out in _chunks(info, ("script", _portable(info), guid), range(len(actions)),
                       lambda span: actions.replay_items(span.start, span.stop), job):
        if isinstance(out, _Call):
            yield out
            continue
        # the chunk's records go to the counting rules together (they look only backwards; each generator is
        # asked for exactly as many answers as it was fed), then its rows are made in one pass
        answers = out["answers"]
        n = len(answers)
        first = i
        # the chunk's actions by index (-1: make()'s opening RESET, in no line of the script)
        acts = range(first - 1, first - 1 + n)
        chunk_records = [StepRecord(action_id=0 if j < 0 else ids[j], state=state, levels_completed=levels,
                                    full_reset=full_reset, win_levels=win_levels, guid=guid, line_number=j + 2)
                         for j, (state, levels, win_levels, full_reset, _) in zip(acts, answers, strict=True)]
        records.queue.extend(chunk_records)
        chunk_effects = list(islice(effects, n))
        effect_feed.queue.extend(chunk_effects)
        chunk_plays = list(islice(play_index, n))
        triples.queue.extend(zip(chunk_records, chunk_effects, chunk_plays, strict=True))
        chunk_changes = list(islice(changes, n))
        counts = np.frombuffer(out["counts"], dtype=np.int32).tolist()
        frames_view, digests_view = memoryview(out["frames"]), memoryview(out["digests"])
        at = 0
        add_packed = rows.add_packed
        for j, answer, record, effect, play, change, count in zip(
                acts, answers, chunk_records, chunk_effects, chunk_plays, chunk_changes, counts, strict=True):
            state, levels, win_levels, _full_reset, available = answer
            if play != current_play:  # (a play's steps are consecutive: the one before is finished)
                current_play, pid = play, f"{guid}/{play}"
                export = result.begin_play(PlayExport(pid, info.game_id, "playback", "exported"))
            action_id = record.action_id
            x, y, line = (xs[j], ys[j], numbers[j]) if j >= 0 else (-1, -1, None)
            # `_row`'s order (the opening RESET is make()'s, in no line of the script: no x, y or line)
            add_packed(count, frames_view[at * FRAME_BYTES:(at + count) * FRAME_BYTES],
                       digests_view[at * 32:(at + count) * 32],
                       (game_id, pid, "playback", i, ACTION_NAMES[action_id], action_id,
                        None if x < 0 else x, None if y < 0 else y, levels,
                        win_levels, state, list(available), change, effect.is_counted, True, False, file_id, line))
            at += count
            export.n_rows += 1
            i += 1
        result.n_engine_steps = i
        stopped = out["stopped"]
        yield from rows.take()
    if stopped is not None:  # the game's code failed (raised, or ran past the step time limit): the file's failure
        result.cut_current_play(f"the replay stopped: {stopped}")
        _game_code_failed(result, game_id, stopped)
    rows.flush()
    yield from rows.take()
    result.n_rows = rows.n


def _export_script_file(path: Path, job: ExportJob, result: FileExport, holder: list
                        ) -> Iterator[bytes | RowBlock]:
    script = read_playback_file(path, keep_lines=False)
    result.file_sha256 = script.file_sha256
    result.problems += (f"{i.location}: {i.check}: {i.reason} ({i.outcome})" for i in script.issues)
    return _export_script(script.actions, script.game_id, script.file_sha256, job, result, holder)


# ---- recordings ------------------------------------------------------------------------------------
@dataclass
class _Recording:
    """What the export needs of a recording, as `arcstudy score` rebuilds it (`scoring.plays`)."""

    file_id: str
    game_id: str
    variant: str
    is_only_reset_levels: bool
    records: Sequence[StepRecord | Line]  # one per step (recovered action ids, if any); only their
    # `action_id` and `levels_completed` are read, which a reader's `Line` has as its `step_record()` would
    effects: Sequence[StepEffect]
    step_play: Sequence[int]
    play_ids: Sequence[str]
    steps: Sequence[ReplayStep]
    actions_known: bool = True
    recovered: bool = False
    why_unknown: str | None = None
    has_pixels: bool = False  # the steps carry the file's frames

    @classmethod
    def of_input(cls, rec: RecordingInput, steps: Sequence[ReplayStep], has_pixels: bool) -> _Recording:
        play_ids = rec.play_ids if rec.actions_known else rec.stored_play_ids
        return cls(rec.file_id, rec.game_id, rec.variant, rec.is_only_reset_levels, rec.records, rec.effects,
                   rec.step_play, play_ids, steps, rec.actions_known, rec.recovered, rec.recovery_error,
                   has_pixels)

    @classmethod
    def of_file(cls, parsed: ParsedRecording) -> _Recording:
        """Straight from the reader (no tables built): the same records, effects and plays as
        `recordings_from_tables` gives a file without recovered actions, and `steps_from_file`'s steps. The
        records are the reader's lines themselves, or for a large file (its lines held as columns) made from
        its columns as asked for (`record_view`); so are a large file's steps (`_ReplaySteps`)."""
        records = record_view(parsed.steps)
        step_play = play_index_per_step(parsed.effects)
        steps = (_ReplaySteps.of_lines(parsed.steps) if isinstance(parsed.steps, LineView)
                 else list(map(_replay_step, parsed.steps)))
        n_plays = max(step_play, default=-1) + 1
        return cls(parsed.file_sha256, parsed.game_id, parsed.variant, parsed.is_only_reset_levels, records,
                   parsed.effects, step_play, parsed.play_ids(n_plays), steps,
                   not parsed.is_action_ids_lost, False, None, parsed.has_frames)


def _replay_step(ln: Line) -> ReplayStep:
    action_input = ln.data.get("action_input") or {}
    payload = action_input.get("data")
    return ReplayStep(line=ln.number, action_id=ln.action_id,
                      action_data=dict(payload) if isinstance(payload, dict) else {},
                      reasoning=action_input.get("reasoning"), expected=recorded_outcome(ln.data),
                      n_frames=ln.n_frames, frame_hashes=ln.hashes, pixels=ln.frames)


READ_SLICE_STEPS = 5_000  # steps a `_ReplaySteps` makes at a time when it is iterated


class _ReplaySteps(Sequence):
    """A long recording's steps made as they are asked for, ``make(start, stop)`` a slice at a time: for the
    sandbox, then each step again from the last few slices while its rows are made. A large file's (its lines
    held as columns: `of_lines`) held as a list took about 0.5 KB a step (2,000,000 steps: over 1 GB); a stored
    recording's (`of_table`), with the table they were read from, 2.3 GB."""

    KEPT_SLICES = 3  # the slice being replayed, the one fed ahead of it, and one more

    def __init__(self, n: int, make: Callable[[int, int], list[ReplayStep]]):
        self.n = n
        self.make = make
        self._made: dict[int, list[ReplayStep]] = {}  # first index -> the steps of a slice made lately

    @classmethod
    def of_lines(cls, lines: LineView) -> _ReplaySteps:
        return cls(len(lines), lambda start, stop: list(map(_replay_step, lines[start:stop])))

    @classmethod
    def of_table(cls, rec: RecordingInput) -> _ReplaySteps:
        return cls(len(rec.records), functools.partial(table_steps, rec))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            start, stop, stride = i.indices(len(self))
            if stride != 1:
                return [self[j] for j in range(start, stop, stride)]
            made = self.make(start, stop)
            if made:  # (made on the background thread too: replaced whole, never changed)
                kept = list(self._made.items())[len(self._made) + 1 - self.KEPT_SLICES:]
                self._made = dict([*kept, (start, made)])
            return made
        i = range(len(self))[i]
        for start, made in list(self._made.items()):
            if start <= i < start + len(made):
                return made[i - start]
        return self.make(i, i + 1)[0]

    def __iter__(self) -> Iterator[ReplayStep]:
        for start in range(0, len(self), READ_SLICE_STEPS):
            yield from self.make(start, min(len(self), start + READ_SLICE_STEPS))


def _export_recording_file(path: Path, job: ExportJob, result: FileExport, holder: list
                           ) -> Iterator[bytes | RowBlock]:
    recovered = _recovered(job)
    if not recovered:  # the common case: the reader's model as it is, no tables
        parsed = read_recording_file(path, want_frames=True, keep_raw_json=False)  # its text is not stored
        result.file_sha256 = parsed.file_sha256
        result.problems += (f"{i.location}: {i.check}: {i.reason} ({i.outcome})" for i in parsed.issues)
        if not parsed.steps:  # only a summary card (its frame lines missing): it counts plays, no step to export
            result.rejected = True
            result.problems.append("no_frame_line: the file has no frame line, only its scorecard summary: no step "
                                   "to export (ingest stores its card)")
            return iter(())
        return _export_recording(_Recording.of_file(parsed), job, result, holder, from_file=True)
    steps, plays, files, problems = read_recording_files([path])
    result.problems += (reason for _, reason in problems)
    recs = recordings_from_tables(steps, plays, files, recovered, cards=False)
    if not recs:
        result.rejected = True
        if not result.problems:
            result.problems.append("no step could be read from the file")
        return iter(())
    rec = recs[0]
    has_pixels = rec.parsed is not None and rec.parsed.has_frames
    if not rec.actions_known:
        replay_steps: Sequence[ReplayStep] = []
    elif rec.parsed is not None:  # made a slice at a time from the parsed lines (pixels on disk past a bound)
        replay_steps = _ReplaySteps(len(rec.records), functools.partial(file_steps, rec))
    else:
        replay_steps = steps_from_file(rec)
    return _export_recording(_Recording.of_input(rec, replay_steps, has_pixels), job, result, holder,
                             from_file=True)


def _export_db_file(job: ExportJob, result: FileExport, holder: list) -> Iterator[bytes | RowBlock]:
    # (the database's modules: only for this path)
    from pipeline.core.workspace import Workspace
    from pipeline.scoring.storage import STORED_READ_MEMORY, StoredSteps

    # the file's steps are read a block at a time as the export goes (`StoredSteps`), the database open till
    # its end: held whole, even narrowed, two million stored steps of one file took 0.62 GB
    with Workspace(job.db, read_only=True, memory=STORED_READ_MEMORY) as ws:
        # The file's first play: what a recording takes from its plays is the file's (its guid, game, variant,
        # whether it is a script or lost its actions); the ids of its plays are made from its steps, but for a
        # file whose actions are lost, whose stored ids are read (one play: every step counts as an action). All
        # of them took 0.17 GB for a million one-step plays, and their ids, as a list, more.
        plays = ws.read(f"SELECT {', '.join(PLAY_COLUMNS)}, is_replay_needed FROM core_arc3__plays WHERE "
                        "file_id = ? AND (is_action_ids_lost OR play_index = (SELECT min(play_index) FROM "
                        "core_arc3__plays WHERE file_id = ?))", [job.file_id, job.file_id]).sort("play_index")
        steps = StoredSteps(ws, job.file_id, DB_STEP_COLUMNS)
        names = ws.read("SELECT file_name FROM raw_ingest__files WHERE file_id = ?", [job.file_id]).rows()
        name = names[0][0] if names else None
        if plays.height == 0 or steps.height == 0:
            result.rejected = True
            result.problems.append(f"no plays or steps of file {job.file_id} in the database")
            return
        if bool(plays["is_replay_needed"].fill_null(False).any()):  # a playback script: actions only
            actions = ScriptActions.of_column_parts(
                [part[c] for c in ("line_number", "action_id", "click_x", "click_y")] for part in steps.parts())
            yield from _export_script(actions, plays["game_id"][0], job.file_id, job, result, holder)
            return
        recs = recordings_from_tables(steps, plays.with_columns(pl.col("is_only_reset_levels").fill_null(False)),
                                      {job.file_id: (name, None)}, _recovered(job), cards=False)
        if not recs:
            result.rejected = True
            result.problems.append("no step could be read")
            return
        rec = recs[0]
        del recs, plays  # (per play: what the export keeps of its plays is its own entries)
        # the frames `ingest --keep-frames` stored: the database path then has the file's pixels, as the file
        # path does (a play whose game cannot be loaded is exported from them; frames that differ where the
        # replay reconverges later are kept, not cut)
        files = ws.read("SELECT DISTINCT frames_file FROM core_arc3__steps WHERE file_id = ? AND frames_file IS "
                        "NOT NULL", [job.file_id])["frames_file"].to_list()
        kept = KeptFrames.open(files[0], job.db) if len(files) == 1 and rec.actions_known else None
        # all or nothing: every step that recorded frames has them all in the store (else hashes only, as before)
        has_pixels = kept is not None and bool(kept.counts) and _all_frames_kept(rec.steps, kept.counts)
        # the replay reads the recording's steps and records, not its play ids (the stored ones, a list: held to
        # the export's end, with the card it had then, 0.1 GB of a recording of 126,000 plays)
        replayed = dataclasses.replace(rec, play_ids=[], stored_play_ids=[])
        if not rec.actions_known:
            replay_steps: Sequence[ReplayStep] = []
        elif has_pixels:  # each slice's pixels read from the store as the replay asks for its steps
            assert kept is not None
            replay_steps = _ReplaySteps(len(rec.records), functools.partial(_steps_with_kept_frames, replayed,
                                                                            kept))
        else:  # made a slice at a time as the replay asks for them
            replay_steps = _ReplaySteps.of_table(replayed)
        recording = _Recording.of_input(rec, replay_steps, has_pixels)
        del rec
        yield from _export_recording(recording, job, result, holder, from_file=False)


def _all_frames_kept(steps: Any, counts: dict[int, int]) -> bool:
    """Whether every stored step that recorded frames has as many in the kept frames file (`counts`: line ->
    frames kept), as `table_steps` counts a step's frames; ``steps`` a table or `StoredSteps`, in a pass."""
    for part in steps_in_parts(steps.select("line_number", "frame_sha256s", "n_frames")):
        wanted = part.select(pl.col("line_number"), pl.when(pl.col("frame_sha256s").is_null()).then(None)
                             .otherwise(pl.coalesce(pl.col("n_frames"), pl.col("frame_sha256s").list.len()))
                             .alias("n")).filter(pl.col("n").fill_null(0) > 0)
        if not all(counts.get(line, 0) == n for line, n in wanted.iter_rows()):
            return False
    return True


def _steps_with_kept_frames(rec: RecordingInput, kept: KeptFrames, start: int, stop: int) -> list[ReplayStep]:
    part = table_steps(rec, start, stop)
    pixels = kept.frames_of([st.line for st in part if st.n_frames])
    return [st._replace(pixels=pixels[st.line] if st.n_frames else EMPTY_FRAMES) for st in part]


def _none_exported(result: FileExport, rec: _Recording, source: str, why: str) -> None:
    """Every play of ``rec`` is not exported, for ``why`` (their entries made as they are written to disk)."""
    result.plays = Spool(PlayExport(pid, rec.game_id, source, "not_exported", 0, why) for pid in rec.play_ids)


def _export_recording(rec: _Recording, job: ExportJob, result: FileExport, holder: list, *, from_file: bool
                      ) -> Iterator[bytes | RowBlock]:
    source = source_of(rec.variant)
    result.file_id, result.game_id, result.source = rec.file_id, rec.game_id, source
    steps = rec.steps
    if not rec.actions_known:  # action ids lost, not recovered: the actions are unknown
        why = rec.why_unknown or ("action ids lost (every action recorded as RESET, the benchmarking "
                                  "recorder defect): the actions are unknown; supply them with "
                                  "--recovered-actions")
        _none_exported(result, rec, source, why)
        return
    info = None
    why = None
    try:
        info, result.game_source_sha256 = _game(rec.game_id, tuple(job.game_dirs))
    except GameNotFoundError as err:
        why, info = f"game not loadable: {err}", None
    except OSError as err:  # the game file cannot be read
        why, info = f"game {rec.game_id} cannot be read: {err}", None

    pixels_in_file = rec.has_pixels  # the file's frames, or the ones `ingest --keep-frames` stored
    if info is None and not pixels_in_file:
        _none_exported(result, rec, source, f"{why}; the file has no frames to export unverified")
        return
    rows = _Rows(job.batch_rows, job.compress)
    holder.append(rows)
    changes = level_changes(rec.records, rec.effects, rec.step_play)
    # `step` counts the session's responses: 0 = make()'s opening RESET (a recording lacking its line gets the
    # engine's answer as step 0 when replayed), then one per action, across full resets (play_id changes there)
    first = 0 if steps and steps[0].action_id == 0 else 1
    next_play = 0  # the first play (index) without an entry yet: the plays' entries are made in play order

    def entries_through(index: int, verified: bool) -> None:
        """Entries for the plays up to ``index`` (`FileExport.begin_play`: each one before is finished; a
        play's steps are consecutive, and one that gave no row gets its entry here)."""
        nonlocal next_play
        while next_play <= index:
            result.begin_play(PlayExport(rec.play_ids[next_play], rec.game_id, source,
                                         "exported" if verified else "unverified", 0,
                                         None if verified else f"{why}: frames from the file, not checked"))
            next_play += 1

    def play_of(index: int, verified: bool) -> PlayExport:
        """Play ``index``'s entry, the current one."""
        entries_through(index, verified)
        assert result.current_play is not None and index == next_play - 1, "plays out of order"
        return result.current_play

    def emit(i: int, packed: tuple[int, bytes, bytes] | None, verified: bool, st: ReplayStep | None = None) -> None:
        st = steps[i] if st is None else st
        play_index = rec.step_play[i]
        pid = rec.play_ids[play_index]
        expected = st.expected
        record = rec.records[i]
        action_id = record.action_id
        x, y = (st.action_data.get("x"), st.action_data.get("y")) if action_id == 6 else (None, None)
        values = (rec.game_id, pid, source, i + first, ACTION_NAMES[action_id], action_id, x, y,
                  expected.get("levels_completed", record.levels_completed),
                  expected.get("win_levels", record.win_levels),  # a 2025 preview line's win_score too
                  _state(expected.get("state")), expected.get("available_actions"), bool(changes[i]),
                  rec.effects[i].is_counted, verified, rec.recovered, rec.file_id, st.line)  # `_row`'s order
        if packed is None:  # the file's frames
            rows.add(st.pixels, st.frame_hashes, values)
        else:
            rows.add_packed(*packed, values)
        play = play_of(play_index, info is not None)
        play.n_rows += 1
        if info is not None and not verified:  # the file's frames, kept where the replay reconverged later
            play.n_unconfirmed_rows += 1

    cut_at: int | None = None  # first step index not exported
    cut_reason = None
    if info is not None:
        # the file's frames are kept where it has them: the replay sends back only the frames it must supply
        def items(part: Sequence[ReplayStep]) -> list[tuple[ReplayStep, bool]]:
            return [(st, not (pixels_in_file and st.pixels is not None)) for st in part]

        needs_opening = bool(steps) and steps[0].action_id != 0
        held: dict[int, tuple[int, bytes, bytes] | None] = {}  # answered, not yet exported
        next_emit = answered = 0
        frame_only: set[int] = set()
        opening_done = False
        start = ("recording", _portable(info), rec.is_only_reset_levels, needs_opening)
        for out in _chunks(info, start, steps, items, job):
            if isinstance(out, _Call):
                yield out
                continue
            if out["status"] == "load_failed":
                why = f"game {rec.game_id} failed to load: {out['reason']}"
                if not pixels_in_file:
                    _none_exported(result, rec, source, f"{why}; the file has no frames to export unverified")
                    return
                info = None
                break
            index = out["first"]
            for answer_at, packed in enumerate(_slices(out)):
                if index == -1:  # the opening RESET the recording lacks: the engine's answer, as step 0
                    state, levels, win_levels, _full, available = out["answers"][0]
                    pid = rec.play_ids[rec.step_play[0]]
                    rows.add_packed(*packed, _row(game_id=rec.game_id, play_id=pid, source=source, step=0,
                                    action="RESET", action_id=0, x=None, y=None, levels_completed=levels,
                                    win_levels=win_levels, state=state, available_actions=list(available),
                                    is_level_change=False, is_counted=False, verified=True, recovered=False,
                                    file_id=rec.file_id, line_number=None))
                    play_of(rec.step_play[0], True).n_rows += 1
                    opening_done = True
                else:
                    held[index] = packed if packed[0] or not (pixels_in_file and steps[index].pixels is not None) \
                        else None
                    answered = index + 1
                index += 1
                del answer_at
            result.n_engine_steps = out["replayed"] + opening_done
            frame_only.update(d.step for d in out["frame_only"])
            pending = out["pending"]
            limit = answered
            if pending:
                limit = min(limit, pending[0].step)
            if out["outcome"] is not None:
                limit = min(limit, out["outcome"].step)
            if not pixels_in_file and (out["frame_only"] or pending):
                # database steps without kept frames: no recorded pixels to keep instead, the first frame
                # difference cuts the play
                first_diff = min(d.step for d in [*out["frame_only"], *pending])
                cut_at, cut_reason = first_diff, describe(next(d for d in [*out["frame_only"], *pending]
                                                                if d.step == first_diff))
                limit = min(limit, cut_at)
            for i in range(next_emit, limit):
                emit(i, held.pop(i), i not in frame_only)
            next_emit = max(next_emit, limit)
            yield from rows.take()
            if cut_at is not None:
                break
            if out["ended"]:
                if out["divergence"] is not None:
                    failed = out["divergence"]
                    cut_at, cut_reason = failed.step, describe(failed)
                    if failed.field == "exception":  # the game's code failed, not the recording's data
                        _game_code_failed(result, rec.game_id,
                                          f"line {failed.line} ({failed.action}): the game raised {failed.got}")
                break
    if info is None:  # the file's frames, unchecked, a slice of steps at a time (each made once)
        for start in range(0, len(steps), READ_SLICE_STEPS):
            for i, st in enumerate(steps[start:start + READ_SLICE_STEPS], start):
                emit(i, None, False, st)
                if len(rows.out):
                    yield from rows.take()
    rows.flush()
    yield from rows.take()
    n_plays = len(rec.play_ids)
    cut_play = rec.step_play[cut_at] if cut_at is not None and cut_at < len(rec.step_play) else n_plays
    entries_through(cut_play - 1, info is not None)
    for index in range(cut_play, n_plays):  # (the first may be the current play: its rows before the divergence)
        export = play_of(index, True)
        export.status = "cut"
        export.detail = (f"exported up to the divergence: {cut_reason}" if index == cut_play else
                         f"follows a divergence earlier in the same recording: {cut_reason}")
    result.end_play()
    result.n_rows = rows.n


def recovered_pairs(recovered: Mapping[str, Sequence[Any]]) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """--recovered-actions as the hashable pairs `ExportJob.recovered` holds."""
    return tuple((str(k), tuple(v)) for k, v in sorted(recovered.items()))
