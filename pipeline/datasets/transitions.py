"""One recording (any variant, playback scripts included, or a recording's database steps) -> transition rows.

`export_transitions(job)` is the per-file piece of `arcstudy export-transitions`: a module-level function of
one picklable argument, run through the one executor (`pipeline.core.executor`). Everything that runs a game's
code (loading, constructing, stepping it) is handed to `pipeline.core.game_code.run_game_code`, in a confined
child per game (`_play_script`, `_replay_recording`); a game stopped there leaves its file out. It reads the
file with the one reader (`pipeline.recordings`), rebuilds its plays and counts as `arcstudy score` does
(`pipeline.scoring.plays`, recovered action ids included), replays it on the engine with the scorer's
comparison (`pipeline.scoring.verify.replay_classified`) and returns the rows as Arrow IPC batches (zstd), so a
worker sends back compressed bytes and the single writer (`shards.ShardWriter`) streams them into shards.

Where the frames come from:

- a recording with frames whose replay agrees: the file's frames (they equal the engine's), ``verified``;
- a recording without frames (and every playback script): the engine's frames, ``verified``;
- a step whose frames differed while the replay reconverged later (animations that depend on the interpreter's
  hash seed): the file's frames, ``verified`` false for that row only;
- the game cannot be loaded: a recording with frames is exported from the file, every row ``verified`` false;
  one without frames cannot be (the play is listed as not exported);
- the replay diverges (outcome, or frames that never match again, or the game raises): the plays are exported
  up to the step before the divergence and listed as cut. Database steps hold frame hashes, not pixels: a
  frame difference there cuts the play (the recorded frames are not at hand).

A recording that lacks the opening RESET (the agents recorder) gets the engine's answer to it as step 0,
``line_number`` null. Recordings whose action ids were lost and not recovered are not exported (the actions
are unknown).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from engine.base_game import FRAMES_ALL
from engine.enums import ActionInput, GameAction
from engine.env import GameEnv
from engine.loader import GameNotFoundError, resolve_game
from pipeline.core.game_code import GameCodeError, SandboxFailure, portable_info, run_game_code
from pipeline.recordings.counting import (
    ACTION_NAMES,
    StepEffect,
    StepRecord,
    classify_steps,
    level_changes,
    play_index_per_step,
)
from pipeline.recordings.frames import frame_hashes
from pipeline.recordings.playback import (
    PlaybackError,
    ScriptAction,
    is_playback_file,
    read_playback_file,
    resolve_script_game,
    script_guid,
)
from pipeline.recordings.reader import ParsedRecording, RecordingRejected, read_recording_file
from pipeline.recordings.variant import counting_options_for_variant
from pipeline.scoring.plays import RecordingInput, read_recording_files, recordings_from_tables
from pipeline.scoring.verify import (
    FIELDS,
    ReplayStep,
    describe,
    replay_classified,
    steps_from_file,
    steps_from_table,
)
from schemas.transitions import ARROW_SCHEMA, FRAME_SHAPE

__all__ = ["ExportJob", "FileExport", "PlayExport", "batches_from_bytes", "export_transitions", "source_of"]

BATCH_ROWS = 1024  # rows per Arrow batch sent back (and per Parquet row group)
BATCH_FRAME_BYTES = 16 << 20  # ... or fewer, once their frames hold this many bytes
EMPTY_FRAMES = np.zeros((0, 64, 64), dtype=np.uint8)


@functools.lru_cache(maxsize=256)
def _game(game_id: str, dirs: tuple[str, ...]) -> tuple[Any, str]:
    """The game and the sha256 of its source, once per process (a worker exports many files of one game)."""
    info = resolve_game(game_id, [Path(d) for d in dirs])
    return info, info.source_sha256()


@functools.lru_cache(maxsize=256)
def _script_game(named: str, dirs: tuple[str, ...], version: str | None) -> tuple[Any, str]:
    """`resolve_script_game` and the game's source sha256, once per process (PlaybackError is not cached)."""
    info = resolve_script_game(named, [Path(d) for d in dirs], version)
    return info, info.source_sha256()


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


@dataclass
class FileExport:
    """A file's rows (Arrow IPC streams, zstd) and what happened to its plays."""

    label: str
    file_id: str | None = None
    game_id: str | None = None
    source: str | None = None
    game_source_sha256: str | None = None
    batches: list[bytes | pa.RecordBatch] = field(default_factory=list)  # IPC streams, or batches in-process
    plays: list[PlayExport] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # lines left out, or why the whole file was refused
    rejected: bool = False  # the file gave no row because it is bad input (exit 3)
    n_rows: int = 0
    n_engine_steps: int = 0  # responses the engine produced for it


def batches_from_bytes(data: bytes | pa.RecordBatch) -> list[pa.RecordBatch]:
    """The record batches of one item of `FileExport.batches` (an IPC stream, or a batch already)."""
    if isinstance(data, pa.RecordBatch):
        return [data]
    with pa.ipc.open_stream(pa.BufferReader(data)) as reader:
        return list(reader)


# --------------------------------------------------------------------------------------------------
# rows -> compressed Arrow batches
# --------------------------------------------------------------------------------------------------
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")
# The columns are built from buffers: `pa.array` on python values imports pandas on its first call (~0.8 s a
# process), and polars' conversion to Arrow costs milliseconds a batch.
_BUILT_BY_ROWS = [f.name for f in ARROW_SCHEMA if f.name not in ("frames", "frame_shape")]
FRAME_BYTES = FRAME_SHAPE[0] * FRAME_SHAPE[1]


def _from_numpy(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(values)])


def _offsets(counts: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return _from_numpy(offsets, pa.int32())


def _frames_array(per_row: Sequence[np.ndarray]) -> tuple[pa.Array, pa.Array]:
    """(`frames`, `frame_shape`) from (n_i, 64, 64) uint8 arrays: list<binary> with one 4096-byte value per
    frame, built from buffers (no python objects per frame)."""
    counts = np.fromiter((len(f) for f in per_row), dtype=np.int32, count=len(per_row))
    n_frames = int(counts.sum())
    data = (np.concatenate([f.reshape(-1) for f in per_row if len(f)]) if n_frames
            else np.zeros(0, dtype=np.uint8))
    value_offsets = np.arange(0, n_frames * FRAME_BYTES + 1, FRAME_BYTES, dtype=np.int32)
    blobs = pa.Array.from_buffers(pa.binary(), n_frames, [None, pa.py_buffer(value_offsets),
                                                          pa.py_buffer(np.ascontiguousarray(data))])
    frames = pa.ListArray.from_arrays(_offsets(counts), blobs)
    shape = pa.ListArray.from_arrays(_offsets(np.full(len(per_row), 2, dtype=np.int32)),
                                     _from_numpy(np.tile(np.asarray(FRAME_SHAPE, dtype=np.int16), len(per_row)),
                                                 pa.int16()))
    return frames, shape


_LIST_COLUMNS = ("frame_sha256s", "available_actions")


def _validity(values: Sequence[Any]) -> tuple[np.ndarray, pa.Buffer | None]:
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    return valid, None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def _string_array(values: Sequence[str | None]) -> pa.Array:
    encoded = [b"" if v is None else v.encode() for v in values]
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int32, count=len(values)), out=offsets[1:])
    _, mask = _validity(values)
    return pa.Array.from_buffers(pa.string(), len(values), [mask, pa.py_buffer(offsets),
                                                           pa.py_buffer(b"".join(encoded))])


def _scalar_array(values: Sequence[Any], type_: pa.DataType) -> pa.Array:
    """A string, integer or boolean column (nulls allowed) from python values."""
    if pa.types.is_string(type_):
        return _string_array(values)
    _, mask = _validity(values)
    if pa.types.is_boolean(type_):
        bits = np.fromiter((bool(v) for v in values), dtype=bool, count=len(values))
        return pa.Array.from_buffers(type_, len(values), [mask, pa.py_buffer(np.packbits(bits, bitorder="little"))])
    numbers = np.fromiter((0 if v is None else v for v in values), dtype=type_.to_pandas_dtype(), count=len(values))
    return pa.Array.from_buffers(type_, len(values), [mask, pa.py_buffer(numbers)])


def _list_array(values: list[list | None], type_: pa.ListType) -> pa.Array:
    """A list column from its flattened items and offsets (polars builds list series one row at a time)."""
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    counts = np.fromiter((len(v) if v is not None else 0 for v in values), dtype=np.int32, count=len(values))
    flat = [item for v in values if v is not None for item in v]
    item_type = type_.value_type
    if pa.types.is_string(item_type):
        items = _string_array(flat)
    else:
        items = _from_numpy(np.asarray(flat, dtype=item_type.to_pandas_dtype()), item_type)
    mask = None if valid.all() else pa.Array.from_buffers(
        pa.bool_(), len(values), [None, pa.py_buffer(np.packbits(~valid, bitorder="little"))])
    return pa.ListArray.from_arrays(_offsets(counts), items, type=type_, mask=mask)


class _Rows:
    """Rows of one file, turned into IPC batches every `batch_rows` rows (or frame bytes)."""

    def __init__(self, batch_rows: int, compress: bool = True):
        self.batch_rows = max(1, batch_rows)
        self.compress = compress
        self.out: list[bytes | pa.RecordBatch] = []
        self.n = 0
        self._reset()

    def _reset(self) -> None:
        self.cols: dict[str, list] = {name: [] for name in _BUILT_BY_ROWS}
        self.frames: list[np.ndarray] = []
        self.frame_bytes = 0

    def add(self, frames: np.ndarray, hashes: list[str] | None, **values: Any) -> None:
        frames = np.ascontiguousarray(frames, dtype=np.uint8) if len(frames) else EMPTY_FRAMES
        values["frame_sha256s"] = hashes if hashes is not None and len(hashes) == len(frames) else (
            frame_hashes(frames))
        for name, column in self.cols.items():
            column.append(values[name])
        self.frames.append(frames)
        self.frame_bytes += frames.nbytes
        self.n += 1
        if len(self.frames) >= self.batch_rows or self.frame_bytes >= BATCH_FRAME_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self.frames:
            return
        frames, shape = _frames_array(self.frames)
        arrays = []
        for f in ARROW_SCHEMA:
            if f.name == "frames":
                arrays.append(frames)
            elif f.name == "frame_shape":
                arrays.append(shape)
            elif f.name in _LIST_COLUMNS:
                arrays.append(_list_array(self.cols[f.name], f.type))
            else:
                arrays.append(_scalar_array(self.cols[f.name], f.type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
        if not self.compress:  # the writer is in this process: the batch itself
            self.out.append(batch)
        else:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, ARROW_SCHEMA, options=_IPC_OPTIONS) as writer:
                writer.write_batch(batch)
            self.out.append(sink.getvalue().to_pybytes())
        self._reset()


def _state(value: Any) -> str | None:
    return getattr(value, "name", None) or (None if value is None else str(value))


def _engine_frames(response: Any) -> np.ndarray:
    frames = response.frame
    if frames is None or not len(frames):
        return EMPTY_FRAMES
    stacked = np.stack(frames)
    # the engine's frames are int8 colour indexes 0-15: the same bytes as uint8
    return stacked.view(np.uint8) if stacked.dtype.itemsize == 1 else stacked.astype(np.uint8)


# --------------------------------------------------------------------------------------------------
# the piece
# --------------------------------------------------------------------------------------------------
def export_transitions(job: ExportJob) -> FileExport:
    """The rows of one file (see the module docstring). Never raises for a bad file: the reason is in the
    result (``rejected``), and an unexpected failure of the game's code cuts the play where it happened."""
    result = FileExport(label=job.label)
    try:
        if job.path is not None:
            path = Path(job.path)
            if is_playback_file(path):
                _export_script_file(path, job, result)
            else:
                _export_recording_file(path, job, result)
        else:
            _export_db_file(job, result)
    except RecordingRejected as err:
        result.rejected = True
        result.problems.append(f"{err.check}: {err.reason}")
        result.problems += [f"{i.location}: {i.check}: {i.reason}" for i in err.issues]
    except PlaybackError as err:
        result.rejected = True
        result.problems.append(f"cannot replay the playback script: {err.reason}")
    except GameStopped as err:  # nothing of the file is exported: its rows would depend on the stopped run
        result.rejected, result.batches, result.n_rows = True, [], 0
        result.problems.append(f"not exported: {err}")
    except (OSError, UnicodeDecodeError) as err:
        result.rejected = True
        result.problems.append(f"unreadable: {err}")
    return result


def _recovered(job: ExportJob) -> dict[str, list]:
    return {key: list(actions) for key, actions in job.recovered}


# ---- the game's code: always in the sandbox (pipeline.core.game_code) -------------------------------
class GameStopped(Exception):
    """The game's code ended abnormally in the sandbox (time, memory, exit, crash): the file's failure."""


def _in_sandbox(info: Any, fn: Any, arg: Any) -> Any:
    try:
        return run_game_code(fn, arg, key=info.game_id, source=info.source)
    except SandboxFailure as err:
        raise GameStopped(f"game {info.game_id} ({info.source}): its code was stopped in the sandbox "
                          f"({err.kind}): {err.detail}") from None
    except GameCodeError as err:  # raised outside the steps (they catch): loading, constructing
        raise GameStopped(f"game {info.game_id} ({info.source}): {type(err).__name__}: {err}") from None


def _answer(response: Any) -> dict[str, Any]:
    return {"state": _state(response.state), "levels_completed": int(response.levels_completed),
            "win_levels": int(response.win_levels), "full_reset": bool(response.full_reset),
            "available_actions": [int(a) for a in response.available_actions]}


def _play_script(arg: tuple) -> tuple[list[dict[str, Any]], list[np.ndarray], str | None]:
    """In the sandbox: make() (the opening RESET), then every action, like the playback agent. Returns every
    response's fields and frames, and why the replay stopped early (the game raised) or None."""
    info, guid, actions = arg
    env = GameEnv(info, guid=guid)
    first = env.reset(frames=FRAMES_ALL)
    answers, frames = [_answer(first)], [_engine_frames(first)]
    for action in actions:
        try:
            response = env.step(ActionInput(id=GameAction.from_id(action.action_id), data=action.data,
                                            reasoning=action.reasoning), frames=FRAMES_ALL)
        except Exception as err:  # the game's code raised: the play is exported up to here
            return answers, frames, (f"line {action.line_number} ({ACTION_NAMES[action.action_id]}): the game "
                                     f"raised {type(err).__name__}: {err}")
        answers.append(_answer(response))
        frames.append(_engine_frames(response))
    return answers, frames, None


def _replay_recording(arg: tuple) -> tuple:
    """In the sandbox: the scorer's replay (`verify.replay_classified`) of a recording's steps on a fresh
    instance, keeping the engine's frames of the steps in `need` and of the opening RESET a file lacks.
    ("load_failed", reason) when the game does not load."""
    info, only_reset_levels, steps, need = arg
    try:
        env = GameEnv(info, only_reset_levels=only_reset_levels)
    except Exception as err:  # noqa: BLE001 - the game does not load: said by the caller
        return "load_failed", f"{type(err).__name__}: {err}"
    kept: dict[int, np.ndarray] = {}
    opening: list[Any] = [None, {}]

    def keep(index: int, response: Any) -> None:
        if index < 0:
            opening[0] = _engine_frames(response)
            answer = _answer(response)
            del answer["full_reset"]
            opening[1] = answer
        elif need[index]:
            kept[index] = _engine_frames(response)

    replay = replay_classified(env, steps, check_full_reset=not only_reset_levels, on_response=keep,
                               all_frames=True)
    return "replayed", replay, opening[0], opening[1], kept


# ---- playback scripts ------------------------------------------------------------------------------
def _export_script(actions: Sequence[ScriptAction], named_game: str, file_id: str, job: ExportJob,
                   result: FileExport) -> None:
    """Replay like the playback agent (make(), then every action), keeping every response's frames; the
    responses are counted by the toolkit rules the reader applies to the recording such a replay writes
    (`counting.classify_steps` with the playback variant's options)."""
    info, sha = _script_game(named_game, tuple(job.game_dirs), job.game_version)
    guid = script_guid(file_id)
    result.file_id, result.game_id, result.source = file_id, info.game_id, "playback"
    result.game_source_sha256 = sha
    answers, frames, stopped = _in_sandbox(info, _play_script, (portable_info(info), guid, list(actions)))
    result.n_engine_steps = len(answers)
    sent = [None, *actions]  # the opening RESET is make()'s, in no line of the script
    records = [StepRecord(action_id=0 if a is None else a.action_id, state=r["state"],
                          levels_completed=r["levels_completed"], full_reset=r["full_reset"],
                          win_levels=r["win_levels"], guid=guid, line_number=n + 1)
               for n, (a, r) in enumerate(zip(sent, answers, strict=False))]
    effects = classify_steps(records, counting_options_for_variant("playback"))
    step_play = play_index_per_step(effects)
    changes = level_changes(records, effects, step_play)
    rows = _Rows(job.batch_rows, job.compress)
    plays: dict[str, PlayExport] = {}
    for i, (action, answer, record) in enumerate(zip(sent, answers, records, strict=False)):
        pid = f"{guid}/{step_play[i]}"
        rows.add(frames[i], None, game_id=info.game_id, play_id=pid, source="playback",
                 step=i, action=ACTION_NAMES[record.action_id],
                 action_id=record.action_id, x=None if action is None else action.x,
                 y=None if action is None else action.y, levels_completed=record.levels_completed,
                 win_levels=record.win_levels, state=record.state,
                 available_actions=answer["available_actions"], is_level_change=changes[i],
                 is_counted=effects[i].is_counted, verified=True, recovered=False, file_id=file_id,
                 line_number=None if action is None else action.line_number)
        plays.setdefault(pid, PlayExport(pid, info.game_id, "playback", "exported")).n_rows += 1
    if stopped is not None and plays:
        last = list(plays.values())[-1]
        last.status, last.detail = "cut", f"the replay stopped: {stopped}"
    rows.flush()
    result.batches, result.n_rows = rows.out, rows.n
    result.plays = list(plays.values())


def _export_script_file(path: Path, job: ExportJob, result: FileExport) -> None:
    script = read_playback_file(path)
    result.problems += [f"{i.location}: {i.check}: {i.reason} (line left out)" for i in script.issues]
    _export_script(script.actions, script.game_id, script.file_sha256, job, result)


# ---- recordings ------------------------------------------------------------------------------------
@dataclass
class _Recording:
    """What the export needs of a recording, as `arcstudy score` rebuilds it (`scoring.plays`)."""

    file_id: str
    game_id: str
    variant: str
    is_only_reset_levels: bool
    records: list[StepRecord]  # one per step (recovered action ids, if any)
    effects: tuple[StepEffect, ...]
    step_play: list[int]
    play_ids: list[str]
    steps: list[ReplayStep]
    actions_known: bool = True
    recovered: bool = False
    why_unknown: str | None = None
    has_pixels: bool = False  # the steps carry the file's frames

    @classmethod
    def of_input(cls, rec: RecordingInput, steps: list[ReplayStep], has_pixels: bool) -> _Recording:
        play_ids = rec.play_ids if rec.card is not None else rec.stored_play_ids
        return cls(rec.file_id, rec.game_id, rec.variant, rec.is_only_reset_levels, rec.records, rec.effects,
                   rec.step_play, play_ids, steps, rec.card is not None, rec.recovered, rec.recovery_error,
                   has_pixels)

    @classmethod
    def of_file(cls, parsed: ParsedRecording) -> _Recording:
        """Straight from the reader (no tables built): the same records, effects and plays as
        `recordings_from_tables` gives a file without recovered actions, and `steps_from_file`'s steps."""
        records = [ln.step_record() for ln in parsed.steps]
        step_play = play_index_per_step(parsed.effects)
        steps = []
        for ln in parsed.steps:
            action_input = ln.data.get("action_input") or {}
            payload = action_input.get("data")
            steps.append(ReplayStep(line=ln.number, action_id=ln.action_id,
                                    action_data=dict(payload) if isinstance(payload, dict) else {},
                                    reasoning=action_input.get("reasoning"),
                                    expected={k: ln.data[k] for k in FIELDS if k in ln.data}, n_frames=ln.n_frames,
                                    frame_hashes=ln.hashes, pixels=ln.frames))
        n_plays = max(step_play, default=-1) + 1
        return cls(parsed.file_sha256, parsed.game_id, parsed.variant, parsed.is_only_reset_levels, records,
                   parsed.effects, step_play, [parsed.play_id(i) for i in range(n_plays)], steps,
                   not parsed.is_action_ids_lost, False, None, parsed.has_frames)


def _export_recording_file(path: Path, job: ExportJob, result: FileExport) -> None:
    recovered = _recovered(job)
    if not recovered:  # the common case: the reader's model as it is, no tables
        parsed = read_recording_file(path, want_frames=True)
        result.problems += [f"{i.location}: {i.check}: {i.reason} (line left out)" for i in parsed.issues]
        _export_recording(_Recording.of_file(parsed), job, result, from_file=True)
        return
    steps, plays, files, problems = read_recording_files([path])
    result.problems += [reason for _, reason in problems]
    recs = recordings_from_tables(steps, plays, files, recovered)
    if not recs:
        result.rejected = True
        if not result.problems:
            result.problems.append("no step could be read from the file")
        return
    rec = recs[0]
    has_pixels = rec.parsed is not None and rec.parsed.has_frames
    _export_recording(_Recording.of_input(rec, steps_from_file(rec) if rec.card is not None else [], has_pixels),
                      job, result, from_file=True)


def _export_db_file(job: ExportJob, result: FileExport) -> None:
    from pipeline.core.workspace import Workspace

    with Workspace(job.db, read_only=True) as ws:
        plays = ws.read("SELECT * FROM core_arc3__plays WHERE file_id = ? ORDER BY play_index", [job.file_id])
        steps = ws.read("SELECT * FROM core_arc3__steps WHERE file_id = ? ORDER BY line_number", [job.file_id])
        names = ws.read("SELECT file_name FROM raw_ingest__files WHERE file_id = ?", [job.file_id]).rows()
    name = names[0][0] if names else None
    if plays.height == 0 or steps.height == 0:
        result.rejected = True
        result.problems.append(f"no plays or steps of file {job.file_id} in the database")
        return
    if bool(plays["is_replay_needed"].fill_null(False).any()):  # a playback script: actions only
        rows = steps.sort("line_number").select("line_number", "action_id", "click_x", "click_y")
        actions = [ScriptAction(n, a, x, y) for n, a, x, y in rows.iter_rows()]
        _export_script(actions, plays["game_id"][0], job.file_id, job, result)
        return
    recs = recordings_from_tables(steps, plays.with_columns(pl.col("is_only_reset_levels").fill_null(False)),
                                  {job.file_id: (name, None)}, _recovered(job))
    if not recs:
        result.rejected = True
        result.problems.append("no step could be read")
        return
    rec = recs[0]
    _export_recording(_Recording.of_input(rec, steps_from_table(rec) if rec.card is not None else [], False),
                      job, result, from_file=False)


def _export_recording(rec: _Recording, job: ExportJob, result: FileExport, *, from_file: bool) -> None:
    source = source_of(rec.variant)
    result.file_id, result.game_id, result.source = rec.file_id, rec.game_id, source
    steps = rec.steps
    if not rec.actions_known:  # action ids lost, not recovered: the actions are unknown
        why = rec.why_unknown or ("action ids lost (every action recorded as RESET, the benchmarking "
                                  "recorder defect): the actions are unknown; supply them with "
                                  "--recovered-actions")
        result.plays = [PlayExport(pid, rec.game_id, source, "not_exported", 0, why) for pid in rec.play_ids]
        return
    info = None
    why = None
    try:
        info, result.game_source_sha256 = _game(rec.game_id, tuple(job.game_dirs))
    except GameNotFoundError as err:
        why, info = f"game not loadable: {err}", None
    except OSError as err:  # the game file cannot be read
        why, info = f"game {rec.game_id} cannot be read: {err}", None

    pixels_in_file = from_file and rec.has_pixels
    engine_frames: dict[int, np.ndarray] = {}
    opening: np.ndarray | None = None
    opening_fields: dict[str, Any] = {}
    cut_at: int | None = None  # first step index not exported
    frame_only: set[int] = set()
    cut_reason = None
    if info is None:
        if not pixels_in_file:
            result.plays = [PlayExport(pid, rec.game_id, source, "not_exported", 0,
                                       f"{why}; the file has no frames to export unverified") for pid in rec.play_ids]
            return
    else:
        # the file's frames are kept where it has them: the replay sends back only the frames it must supply
        need = [not (pixels_in_file and st.pixels is not None) for st in steps]
        loaded = _in_sandbox(info, _replay_recording, (portable_info(info), rec.is_only_reset_levels, steps, need))
        if loaded[0] == "load_failed":
            why = f"game {rec.game_id} failed to load: {loaded[1]}"
            if not pixels_in_file:
                result.plays = [PlayExport(pid, rec.game_id, source, "not_exported", 0,
                                           f"{why}; the file has no frames to export unverified")
                                for pid in rec.play_ids]
                return
            info = None
        else:
            _, replay, opening, opening_fields, engine_frames = loaded
            result.n_engine_steps = replay.replayed + (opening is not None)
            divergence = replay.divergence
            if not from_file and replay.frame_only:  # database steps: no recorded pixels to keep instead
                divergence = replay.frame_only[0]
            if divergence is not None:
                cut_at = divergence.step
                cut_reason = describe(divergence)
            frame_only = {d.step for d in replay.frame_only}

    rows = _Rows(job.batch_rows, job.compress)
    exports = {pid: PlayExport(pid, rec.game_id, source, "exported" if info is not None else "unverified", 0,
                               None if info is not None else f"{why}: frames from the file, not checked")
               for pid in rec.play_ids}
    changes = level_changes(rec.records, rec.effects, rec.step_play)
    # `step` counts the session's responses: 0 = make()'s opening RESET (a recording lacking its line gets the
    # engine's answer as step 0 when replayed), then one per action, across full resets (play_id changes there)
    first = 0 if steps and steps[0].action_id == 0 else 1
    if opening is not None and steps:  # the opening RESET the recording lacks: the engine's answer
        pid = rec.play_ids[rec.step_play[0]]
        rows.add(opening, None, game_id=rec.game_id, play_id=pid, source=source, step=0, action="RESET",
                 action_id=0, x=None, y=None, **opening_fields, is_level_change=False, is_counted=False,
                 verified=True, recovered=False, file_id=rec.file_id, line_number=None)
        exports[pid].n_rows += 1
    n = len(steps) if cut_at is None else cut_at
    for i in range(n):
        st = steps[i]
        play = rec.step_play[i]
        pid = rec.play_ids[play]
        effect = rec.effects[i]
        if pixels_in_file and st.pixels is not None:
            frames, hashes = st.pixels, st.frame_hashes
        else:  # the engine's (a step the engine did not answer is past a divergence: not exported)
            frames, hashes = engine_frames.get(i, EMPTY_FRAMES), None
        expected = st.expected
        action_id = rec.records[i].action_id
        x, y = (st.action_data.get("x"), st.action_data.get("y")) if action_id == 6 else (None, None)
        rows.add(frames, hashes, game_id=rec.game_id, play_id=pid, source=source,
                 step=i + first, action=ACTION_NAMES[action_id], action_id=action_id,
                 x=x, y=y, levels_completed=expected.get("levels_completed", rec.records[i].levels_completed),
                 win_levels=expected.get("win_levels"), state=_state(expected.get("state")),
                 available_actions=expected.get("available_actions"), is_level_change=changes[i],
                 is_counted=effect.is_counted, verified=info is not None and i not in frame_only,
                 recovered=rec.recovered, file_id=rec.file_id, line_number=st.line)
        exports[pid].n_rows += 1
    rows.flush()
    if cut_at is not None:
        cut_play = rec.step_play[cut_at] if cut_at < len(rec.step_play) else None
        for index, pid in enumerate(rec.play_ids):
            if cut_play is not None and index == cut_play:
                exports[pid].status = "cut"
                exports[pid].detail = f"exported up to the divergence: {cut_reason}"
            elif cut_play is not None and index > cut_play:
                exports[pid].status = "cut"
                exports[pid].detail = f"follows a divergence earlier in the same recording: {cut_reason}"
    result.batches, result.n_rows = rows.out, rows.n
    result.plays = list(exports.values())


def recovered_pairs(recovered: Mapping[str, Sequence[Any]]) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """--recovered-actions as the hashable pairs `ExportJob.recovered` holds."""
    return tuple((str(k), tuple(v)) for k, v in sorted(recovered.items()))
