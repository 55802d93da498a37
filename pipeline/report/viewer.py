"""The replay viewer behind `arcstudy view`: data preparation (pure where possible) and page rendering.

    result = write_viewer("rec.jsonl", "view.html", games=["environment_files"])
    result = write_viewer("<guid or play_id>", "view.html", db="arcstudy.duckdb")

The page (`templates/viewer.html.j2`) is one self-contained HTML file: no network, inline CSS and JS, the
data embedded as JSON. It plays a recording step by step (one step = one frame line = one engine response;
the settled, i.e. last, frame of each response is shown).

Frames are sent compactly and decoded lazily by the page:

- each 64x64 grid of colour indices 0-15 is *packed* two cells per byte (high nibble = even cell, row-major),
  2048 bytes;
- the per-step list holds one string per step: ``"K" + base64(packed)`` (a keyframe), ``"D" + base64(runs)``
  (a delta against the previous step's frame) or ``"N"`` (no frame for this step). A delta is a sequence of
  runs ``start (uint16 big-endian), length (uint8, 1-255), length bytes of colour``; unchanged steps are an
  empty delta (``"D"``). A keyframe is forced every ``keyframe_interval`` steps (so jumping anywhere decodes
  at most that many deltas), after an ``"N"``, and whenever the delta would be larger than the keyframe;
- the page keeps a bounded cache of decoded frames and draws them into an ImageData on a <canvas>; the
  timeline is a canvas too, so thousands of steps never become thousands of DOM nodes.

Frames come from the recording itself, from the frames Parquet written by `arcstudy ingest --keep-frames`,
or are re-rendered by replaying the actions through the engine when the game is loadable (`--games`).
Without any of these the page shows a "no frames" state with the action/state timeline only.

Verification: when the game is loadable the recording is replayed with `engine.replay` (every field and,
when the recording has frames, every frame) and the page shows `verified`, `divergent` (with the first
divergence marked on the timeline and, for pixel differences, its bounding box on the frame) or
`unverified` (with the reason).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.recording import Recording, RecordingLine, read_recording
from pipeline.recordings.counting import (
    ACTION_NAMES,
    CountingOptions,
    StepEffect,
    StepRecord,
    classify_steps,
)
from pipeline.recordings.variant import counting_options_for_variant, detect_variant

__all__ = [
    "PALETTE",
    "KEYFRAME_INTERVAL",
    "ViewerSource",
    "Verification",
    "Baseline",
    "Timeline",
    "ViewerResult",
    "ViewerError",
    "pack_frame",
    "unpack_frame",
    "encode_frames",
    "decode_frames",
    "step_records",
    "step_timeline",
    "divergence_step",
    "display_frames",
    "load_recording_source",
    "load_database_source",
    "verify_and_render",
    "find_baseline",
    "build_viewer_data",
    "render_viewer_html",
    "write_viewer",
]

GRID = 64
CELLS = GRID * GRID
PACKED_BYTES = CELLS // 2
KEYFRAME_INTERVAL = 64
REASONING_CHARS = 400

# The ARC-AGI-3 16-colour palette, index -> sRGB hex, as the public ARC-AGI-3 docs and web player show it.
# Unlike ARC-AGI-1/2 (where 0 is black), ARC-AGI-3 colour 0 is white and 5 is black; games commonly paint
# their backgrounds with the greys 3-5. This is the only place the viewer's colours are defined.
PALETTE: tuple[str, ...] = (
    "#FFFFFF",  # 0  white
    "#CCCCCC",  # 1  light grey
    "#999999",  # 2  grey
    "#666666",  # 3  dark grey
    "#333333",  # 4  charcoal
    "#000000",  # 5  black
    "#E53AA3",  # 6  magenta
    "#FF7BCC",  # 7  pink
    "#F93C31",  # 8  red
    "#1E93FF",  # 9  blue
    "#88D8F1",  # 10 light blue
    "#FFDC00",  # 11 yellow
    "#FF851B",  # 12 orange
    "#921231",  # 13 maroon
    "#4FCC30",  # 14 green
    "#A356D6",  # 15 purple
)

STATE_NAMES: tuple[str, ...] = ("NOT_PLAYED", "NOT_FINISHED", "WIN", "GAME_OVER")
EFFECT_NAMES: tuple[str, ...] = tuple(effect.value for effect in StepEffect)


class ViewerError(RuntimeError):
    """A problem preparing a viewer page, with a message meant for the user."""


# --------------------------------------------------------------------------------------------------------
# Frame encoding (mirrored by `decodeFrame` in the page's script)
# --------------------------------------------------------------------------------------------------------
def _as_grid(frame: Any) -> np.ndarray:
    grid = np.asarray(frame)
    if grid.shape != (GRID, GRID):
        raise ValueError(f"a frame must be a 64x64 grid, got shape {grid.shape}")
    if grid.size and (grid.min() < 0 or grid.max() > 15):
        raise ValueError("frame cells must be colour indices 0-15")
    return grid.astype(np.uint8, copy=False)


def pack_frame(frame: Any) -> bytes:
    """64x64 colour indices -> 2048 bytes, two cells per byte (high nibble = even cell, row-major)."""
    flat = _as_grid(frame).reshape(-1)
    return ((flat[0::2] << 4) | flat[1::2]).astype(np.uint8).tobytes()


def unpack_frame(data: bytes) -> np.ndarray:
    if len(data) != PACKED_BYTES:
        raise ValueError(f"a packed frame has {PACKED_BYTES} bytes, got {len(data)}")
    packed = np.frombuffer(data, dtype=np.uint8)
    flat = np.empty(CELLS, dtype=np.uint8)
    flat[0::2] = packed >> 4
    flat[1::2] = packed & 0x0F
    return flat.reshape(GRID, GRID)


def _delta(previous: np.ndarray, current: np.ndarray) -> bytes:
    """Runs covering every changed cell; unchanged gaps shorter than a run header are merged in."""
    prev, cur = previous.reshape(-1), current.reshape(-1)
    changed = np.flatnonzero(prev != cur)
    if changed.size == 0:
        return b""
    out = bytearray()
    breaks = np.flatnonzero(np.diff(changed) > 3) + 1  # a gap of >= 3 unchanged cells starts a new run
    for group in np.split(changed, breaks):
        start, stop = int(group[0]), int(group[-1]) + 1
        while start < stop:
            length = min(255, stop - start)
            out += start.to_bytes(2, "big") + bytes([length]) + cur[start:start + length].tobytes()
            start += length
    return bytes(out)


def _apply_delta(previous: np.ndarray, delta: bytes) -> np.ndarray:
    flat = previous.reshape(-1).copy()
    pos = 0
    while pos < len(delta):
        if pos + 3 > len(delta):
            raise ValueError("truncated delta run header")
        start = int.from_bytes(delta[pos:pos + 2], "big")
        length = delta[pos + 2]
        values = np.frombuffer(delta[pos + 3:pos + 3 + length], dtype=np.uint8)
        if length == 0 or len(values) != length or start + length > CELLS or (values > 15).any():
            raise ValueError(f"invalid delta run at byte {pos}")
        flat[start:start + length] = values
        pos += 3 + length
    return flat.reshape(GRID, GRID)


def encode_frames(frames: Sequence[Any], *, keyframe_interval: int = KEYFRAME_INTERVAL) -> list[str]:
    """One string per entry of `frames` (a 64x64 grid, or None for "no frame"); see the module docstring."""
    if keyframe_interval < 1:
        raise ValueError("keyframe_interval must be >= 1")
    encoded: list[str] = []
    previous: np.ndarray | None = None
    since_key = 0
    for frame in frames:
        if frame is None:
            encoded.append("N")
            previous = None
            continue
        grid = _as_grid(frame)
        delta = _delta(previous, grid) if previous is not None and since_key < keyframe_interval else None
        if delta is None or len(delta) >= PACKED_BYTES:
            encoded.append("K" + base64.b64encode(pack_frame(grid)).decode("ascii"))
            since_key = 1
        else:
            encoded.append("D" + base64.b64encode(delta).decode("ascii"))
            since_key += 1
        previous = grid
    return encoded


def decode_frames(encoded: Sequence[str]) -> list[np.ndarray | None]:
    """The inverse of `encode_frames` (the page does the same, lazily)."""
    out: list[np.ndarray | None] = []
    previous: np.ndarray | None = None
    for index, item in enumerate(encoded):
        kind, payload = item[:1], base64.b64decode(item[1:])
        if kind == "N":
            previous = None
        elif kind == "K":
            previous = unpack_frame(payload)
        elif kind == "D":
            if previous is None:
                raise ValueError(f"frame {index}: a delta with no frame before it")
            previous = _apply_delta(previous, payload)
        else:
            raise ValueError(f"frame {index}: unknown kind {kind!r}")
        out.append(previous)
    return out


def display_frames(frames: Sequence[np.ndarray | None], n_steps: int) -> list[np.ndarray | None]:
    """The frame shown at each of `n_steps` steps: a step without a frame of its own (a post-terminal echo
    returns none) shows the previous step's; steps beyond `frames` (never reached by a replay) show none."""
    shown: list[np.ndarray | None] = []
    previous: np.ndarray | None = None
    for index in range(n_steps):
        if index >= len(frames):
            shown.append(None)
            continue
        frame = frames[index]
        if frame is not None:
            previous = frame
        shown.append(previous)
    return shown


# --------------------------------------------------------------------------------------------------------
# Steps, plays, levels
# --------------------------------------------------------------------------------------------------------
def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def step_records(lines: Sequence[RecordingLine], n_frames: Sequence[int | None] | None = None) -> list[StepRecord]:
    """Counting records for frame lines (`n_frames` overrides the per-line frame count, e.g. from the DB)."""
    records = []
    for index, line in enumerate(lines):
        data = line.data
        levels = data.get("levels_completed", data.get("score"))
        frames = data.get("frame")
        count = n_frames[index] if n_frames is not None else (None if frames is None else len(frames))
        records.append(StepRecord(
            action_id=int(line.action_id or 0),
            state=str(data.get("state")),
            levels_completed=int(levels or 0),
            full_reset=None if data.get("full_reset") is None else bool(data.get("full_reset")),
            win_levels=_int_or_none(data.get("win_levels", data.get("win_score"))),
            frame_count=count,
            guid=data.get("guid"),
            line_number=line.line_no,
        ))
    return records


@dataclass
class Timeline:
    """Per-step play and level bookkeeping (the card's counting rules, spec/scoring.md §B)."""

    effects: list[StepEffect]
    play: list[int]  # 0-based play (span between full resets) the step belongs to
    level: list[int]  # 1-based level being played after the step (the last level after a WIN)
    charged_level: list[int]  # 1-based level the step's action is charged to; 0 when not counted
    level_actions: list[int]  # counted actions charged so far, in this play, to `level`
    level_index: list[dict[str, int]]  # {"play", "level", "step"}: first step of each (play, level)
    options: CountingOptions


def step_timeline(records: Sequence[StepRecord], options: CountingOptions | None = None) -> Timeline:
    """Plays, levels and per-level action counts at every step.

    An action is charged to the level being played when it was sent (so the action completing level k counts
    on level k, a level reset on the level it restarts); post-terminal echoes and the opening RESET are free.
    """
    opts = options or CountingOptions()
    try:
        effects = list(classify_steps(records, opts))
    except ValueError:  # e.g. leading_reset="present" but the span does not start with a RESET
        opts = CountingOptions(full_reset_rule=opts.full_reset_rule, leading_reset="auto",
                               competition_mode=opts.competition_mode, count_undo=opts.count_undo)
        effects = list(classify_steps(records, opts))
    timeline = Timeline(effects, [], [], [], [], [], opts)
    play, levels_before, level_now = 0, 0, 1
    counts: dict[int, int] = {}
    seen: set[tuple[int, int]] = set()
    for index, (record, effect) in enumerate(zip(records, effects, strict=True)):
        if effect is StepEffect.FULL_RESET:
            play += 1
            counts = {}
            levels_before = 0
        charged = 0
        if effect.is_counted:
            charged = levels_before + 1
            counts[charged] = counts.get(charged, 0) + 1
        if effect is not StepEffect.ECHO:
            levels_before = record.levels_completed
            level_now = record.levels_completed + 1
            if record.win_levels and record.levels_completed >= record.win_levels:
                level_now = record.win_levels  # WIN: stay on the last level
        timeline.play.append(play)
        timeline.level.append(level_now)
        timeline.charged_level.append(charged)
        timeline.level_actions.append(counts.get(level_now, 0))
        if (play, level_now) not in seen:
            seen.add((play, level_now))
            timeline.level_index.append({"play": play, "level": level_now, "step": index})
    return timeline


def divergence_step(divergence: Any, line_numbers: Sequence[int]) -> int | None:
    """The viewer step of a replay divergence (matched by its line number; None if no step has it)."""
    if divergence is None:
        return None
    try:
        return list(line_numbers).index(int(divergence.line))
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------------------
# Sources: a recording file, or a play in the database
# --------------------------------------------------------------------------------------------------------
@dataclass
class ViewerSource:
    label: str  # what the user asked for (a path, a guid, a play_id)
    kind: str  # "file" or "database"
    recording: Recording  # frame lines usable by engine.replay (built from the DB for database sources)
    game_id: str | None
    guid: str | None
    variant: str
    recorded_frames: list[np.ndarray | None] | None = None  # settled frame per step, None = empty frame list
    frames_origin: str | None = None  # "recording" or "parquet"
    n_frames: list[int | None] | None = None  # frames per step when known from elsewhere (DB)
    initial_step: int = 0
    is_action_ids_lost: bool = False
    inputs: dict[str, str] = field(default_factory=dict)  # path -> sha256, for the run manifest
    notes: list[str] = field(default_factory=list)

    @property
    def lines(self) -> list[RecordingLine]:
        return self.recording.frame_lines


def _last_frames_from_lines(lines: Sequence[RecordingLine]) -> list[np.ndarray | None]:
    from pipeline.recordings.frames import FrameError, frames_from_json

    out: list[np.ndarray | None] = []
    for line in lines:
        frames = line.data.get("frame") or []
        if not frames:
            out.append(None)
            continue
        try:
            out.append(frames_from_json([frames[-1]])[0])
        except FrameError as err:
            raise ViewerError(f"line {line.line_no}: {err}") from err
    return out


def load_recording_source(path: Path | str) -> ViewerSource:
    """A recording file (any variant of spec/formats.md §A)."""
    from pipeline.core.manifest import sha256_file

    path = Path(path)
    try:
        recording = read_recording(path)
    except (OSError, ValueError, UnicodeDecodeError) as err:
        raise ViewerError(f"cannot read recording {path}: {err}") from err
    lines = recording.frame_lines
    if not lines:
        raise ViewerError(f"{path} holds no frame records (not an ARC-AGI-3 recording?)")
    variant, _ = detect_variant([line.data for line in recording.lines], path)
    has_frames = any(line.has_frames for line in lines)
    source = ViewerSource(
        label=str(path), kind="file", recording=recording, game_id=recording.game_id,
        guid=next((line.data.get("guid") for line in lines if line.data.get("guid")), None), variant=variant,
        recorded_frames=_last_frames_from_lines(lines) if has_frames else None,
        frames_origin="recording" if has_frames else None,
        inputs={str(path): sha256_file(path)},
    )
    ids = [line.action_id for line in lines]
    if variant == "benchmarking" and len(ids) > 1 and all(i == 0 for i in ids):
        source.is_action_ids_lost = True
        source.notes.append("every action id is 0 (the benchmarking recorder defect): actions shown as RESET "
                            "and per-level counts are not meaningful")
    return source


_STEP_COLUMNS = ("line_number, play_id, game_id, guid, action_id, click_x, click_y, state, levels_completed, "
                 "win_levels, is_full_reset, available_actions, n_frames, frames_file, is_post_terminal, "
                 "reasoning_json")


def _resolve_frames_file(name: str, db_path: Path) -> Path | None:
    candidate = Path(name)
    for option in (candidate, db_path.parent / candidate):
        if option.is_file():
            return option
    return None


def _parquet_last_frames(path: Path, line_numbers: Sequence[int]) -> dict[int, np.ndarray]:
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["line_number", "frame_index", "pixels"])
    wanted = set(int(n) for n in line_numbers)
    last: dict[int, tuple[int, int]] = {}
    numbers = table.column("line_number").to_pylist()
    indexes = table.column("frame_index").to_pylist()
    for row, (number, index) in enumerate(zip(numbers, indexes, strict=True)):
        if number in wanted and (number not in last or index > last[number][0]):
            last[number] = (index, row)
    rows = sorted(row for _, row in last.values())
    out: dict[int, np.ndarray] = {}
    if not rows:
        return out
    pixels = table.take(rows).column("pixels")
    for row, blob in zip(rows, pixels.to_pylist(), strict=True):
        grid = np.frombuffer(blob, dtype=np.uint8).reshape(GRID, GRID)
        out[numbers[row]] = _as_grid(grid)
    return out


def _rows_digest(rows: Sequence[Mapping[str, Any]]) -> str:
    """sha256 of the rows read (canonical JSON), standing in for hashing a whole database file."""
    import hashlib

    text = json.dumps(list(rows), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_database_source(db_path: Path | str, key: str) -> ViewerSource:
    """A play guid or play_id found in `core_arc3__plays`; the whole recording file is loaded (a play_id
    only sets the step the page opens at). Frames come from the --keep-frames Parquet when present."""
    from pipeline.core.manifest import sha256_file
    from pipeline.core.workspace import Workspace, WorkspaceError

    db_path = Path(db_path)
    try:
        with Workspace(db_path, read_only=True) as ws:
            for table in ("core_arc3__plays", "core_arc3__steps"):
                if not ws.has_table(table):
                    raise ViewerError(f"database {db_path} has no {table} table (ingest recordings first)")
            plays = ws.read(
                "SELECT p.play_id, p.file_id, p.guid, p.game_id, p.recording_variant, p.is_action_ids_lost, "
                "f.file_path, f.ingested_at FROM core_arc3__plays p LEFT JOIN raw_ingest__files f USING (file_id) "
                "WHERE p.play_id = ? OR p.guid = ? ORDER BY f.ingested_at DESC NULLS LAST, p.play_index",
                [key, key])
            if plays.height == 0:
                raise ViewerError(f"no play with guid or play_id {key!r} in {db_path} (core_arc3__plays)")
            chosen = plays.row(0, named=True)
            file_id = chosen["file_id"]
            steps = ws.read(f"SELECT {_STEP_COLUMNS} FROM core_arc3__steps WHERE file_id = ? ORDER BY line_number",
                            [file_id])
    except WorkspaceError as err:
        raise ViewerError(str(err)) from err
    if steps.height == 0:
        raise ViewerError(f"play {key!r}: no steps in core_arc3__steps for file {file_id}")
    rows = steps.to_dicts()
    lines: list[RecordingLine] = []
    for row in rows:
        data: dict[str, Any] = {"game_id": row["game_id"], "state": row["state"],
                                "levels_completed": row["levels_completed"], "guid": row["guid"]}
        for column, name in (("win_levels", "win_levels"), ("is_full_reset", "full_reset"),
                             ("available_actions", "available_actions")):
            if row[column] is not None:
                data[name] = list(row[column]) if name == "available_actions" else row[column]
        action_data = {"x": row["click_x"], "y": row["click_y"]} if row["click_x"] is not None else {}
        reasoning = json.loads(row["reasoning_json"]) if row["reasoning_json"] else None
        data["action_input"] = {"id": row["action_id"], "data": action_data, "reasoning": reasoning}
        lines.append(RecordingLine(line_no=int(row["line_number"]), timestamp=None, data=data, is_frame=True,
                                   action_id=int(row["action_id"]), action_data=action_data, reasoning=reasoning))
    source = ViewerSource(
        label=key, kind="database", recording=Recording(path=None, lines=lines), game_id=chosen["game_id"],
        guid=chosen["guid"], variant=chosen["recording_variant"] or "toolkit",
        n_frames=[row["n_frames"] for row in rows], is_action_ids_lost=bool(chosen["is_action_ids_lost"]),
        inputs={f"db:{db_path}#core_arc3__steps[file_id={file_id}]": _rows_digest(rows)},
    )
    if chosen["play_id"] == key:
        source.initial_step = next(i for i, row in enumerate(rows) if row["play_id"] == key)
    if plays.select("file_id").unique().height > 1:
        source.notes.append(f"{key} appears in {plays.select('file_id').unique().height} ingested files; "
                            f"showing the most recently ingested ({chosen['file_path']})")
    if source.is_action_ids_lost:
        source.notes.append("action ids were lost by the recorder (all 0): per-level counts are not meaningful")
    frames_files = {row["frames_file"] for row in rows if row["frames_file"]}
    if frames_files:
        name = sorted(frames_files)[0]
        path = _resolve_frames_file(name, db_path)
        if path is None:
            source.notes.append(f"frames file {name} (ingest --keep-frames) not found; frames re-rendered if possible")
        else:
            found = _parquet_last_frames(path, [line.line_no for line in lines])
            source.recorded_frames = [found.get(line.line_no) for line in lines]
            source.frames_origin = "parquet"
            source.inputs[str(path)] = sha256_file(path)
    return source


# --------------------------------------------------------------------------------------------------------
# Verification and re-rendering through the engine
# --------------------------------------------------------------------------------------------------------
@dataclass
class Verification:
    status: str  # "verified", "divergent" or "unverified"
    detail: str
    divergence: Any = None  # engine.replay.Divergence
    step: int | None = None  # viewer step of the first divergence
    rendered: list[np.ndarray | None] | None = None  # settled frames from the engine, per replayed step
    game_source: str | None = None  # the game file replayed (for the manifest)
    game_sha256: str | None = None


class _CapturingEnv:
    """Wraps a fresh GameEnv for engine.replay and keeps the settled frame of every replayed step."""

    def __init__(self, env: Any, *, capture: bool, on_step: Callable[[], None] | None = None) -> None:
        self.env = env
        self.capture = capture
        self.on_step = on_step
        self.frames: list[np.ndarray | None] = []

    def reset(self, *, frames: str | None = None) -> Any:
        return self.env.reset(frames=frames)

    def step(self, action: Any, data: Mapping[str, Any] | None = None, *, reasoning: Any = None,
             frames: str | None = None) -> Any:
        from engine.base_game import FRAMES_LAST

        mode = FRAMES_LAST if self.capture and frames != "all" else frames
        response = self.env.step(action, data, reasoning=reasoning, frames=mode)
        if self.capture:
            grids = getattr(response, "frame", None)
            self.frames.append(_as_grid(grids[-1]) if grids is not None and len(grids) else None)
        if self.on_step is not None:
            self.on_step()
        return response


def _only_reset_levels_for(source: ViewerSource, override: bool | None) -> bool:
    if override is not None:
        return override
    return source.variant == "human-dataset"


def verify_and_render(source: ViewerSource, games: Iterable[Path | str] | None, *, verify: bool = True,
                      only_reset_levels: bool | None = None,
                      on_step: Callable[[], None] | None = None) -> Verification:
    """Replay the recording through the engine when its game is loadable under `games`.

    Re-renders frames when the source has none, compares pixels against Parquet frames (database sources),
    and lets engine.replay compare every field and recorded frame. Never raises for a game that cannot be
    loaded: the result is `unverified` with the reason.
    """
    from engine.loader import GameNotFoundError, resolve_game
    from engine.replay import Divergence, compare_frames, replay

    game_dirs = [Path(g) for g in games or []]
    if not verify:
        return Verification("unverified", "replay verification switched off (--no-verify)")
    if not game_dirs:
        return Verification("unverified", "game not loadable: no --games directory given")
    if source.game_id is None:
        return Verification("unverified", "the recording names no game_id")
    try:
        info = resolve_game(source.game_id, game_dirs)
    except GameNotFoundError as err:
        return Verification("unverified", f"game not loadable: {err}")
    import engine

    orl = _only_reset_levels_for(source, only_reset_levels)
    try:
        env = engine.make(info.game_id, game_dirs, only_reset_levels=orl)
    except Exception as err:  # game code that fails to load: report it on the page, do not crash the viewer
        return Verification("unverified", f"game {info.game_id} failed to load: {type(err).__name__}: {err}")
    needs_capture = source.frames_origin != "recording"
    wrapper = _CapturingEnv(env, capture=needs_capture, on_step=on_step)
    lines = source.lines
    n = len(lines)
    # Field and (recorded) frame comparisons by engine.replay; when frames are re-rendered keep going after
    # a divergence so every step still gets a frame (they then show the engine's state, said on the page).
    report = replay(source.recording, game_dirs, only_reset_levels=orl,
                    check_full_reset=source.variant != "human-dataset",
                    max_divergences=1 if not needs_capture else n + 1, env=wrapper)  # type: ignore[arg-type]
    first = report.divergence
    if source.frames_origin == "parquet" and source.recorded_frames is not None:
        limit = divergence_step(first, [line.line_no for line in lines]) if first is not None else n
        limit = n if limit is None else limit
        for index in range(min(limit, len(wrapper.frames))):
            want, got = source.recorded_frames[index], wrapper.frames[index]
            if want is None or got is None:
                continue
            cells, box = compare_frames(want, got)
            if cells:
                line = lines[index]
                action = ACTION_NAMES[line.action_id or 0]
                count = source.n_frames[index] if source.n_frames is not None else None
                settled = (count - 1) if count else 0  # the Parquet comparison is of the settled (last) frame
                first = Divergence(line.line_no, index, action, "frame", None, None, frame_index=settled,
                                   cells_differing=cells, bbox=box)
                break
    verification = Verification(
        "verified" if first is None else "divergent", "", divergence=first,
        step=divergence_step(first, [line.line_no for line in lines]),
        rendered=wrapper.frames if needs_capture else None,
        game_source=str(info.source) if info.source else None,
        game_sha256=info.source_sha256() if info.source else None,
    )
    what = "every field and frame" if source.frames_origin == "recording" else "every field"
    if source.frames_origin == "parquet":
        what += " and settled frame"
    if first is None:
        verification.detail = f"replayed {report.steps_replayed} steps on {info.game_id}: {what} matches"
    else:
        verification.detail = f"first divergence: {first.describe()}"
        if source.recorded_frames is None:  # the page shows re-rendered frames
            verification.detail += "; frames after it show the engine's state, not necessarily the recorded one"
    return verification


# --------------------------------------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Baseline:
    actions: list[int]
    source: str


def _parse_baselines(text: str) -> Baseline:
    path = Path(text)
    if path.is_file():
        try:
            metadata = json.loads(path.read_text(encoding="utf-8"))
            values = metadata["baseline_actions"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ViewerError(f"--baselines {text}: not a metadata.json with baseline_actions ({err})") from err
        return Baseline([int(v) for v in values], f"{path}")
    try:
        values = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError as err:
        raise ViewerError(f"--baselines {text!r}: give comma-separated integers or a metadata.json path") from err
    if not values or any(v < 0 for v in values):
        raise ViewerError(f"--baselines {text!r}: give per-level action counts >= 0")
    return Baseline(values, "--baselines")


def find_baseline(game_id: str | None, *, explicit: str | None = None, games: Iterable[Path | str] | None = None,
                  db: Path | str | None = None) -> Baseline | None:
    """Per-level baseline actions: --baselines, else the game's metadata.json under --games, else the latest
    `core_arc3__environments` row for the exact game_id in the database; None when none is known."""
    if explicit:
        return _parse_baselines(explicit)
    if game_id is None:
        return None
    from engine.loader import GameNotFoundError, resolve_game

    game_dirs = [Path(g) for g in games or []]
    if game_dirs:
        try:
            info = resolve_game(game_id, game_dirs)
        except GameNotFoundError:
            info = None
        if info is not None and info.game_id == game_id and info.baseline_actions:
            return Baseline([int(v) for v in info.baseline_actions], f"metadata.json in {info.directory}")
    if db is not None and Path(db).exists():
        from pipeline.core.workspace import Workspace

        with Workspace(Path(db), read_only=True) as ws:
            if ws.has_table("core_arc3__environments"):
                rows = ws.read("SELECT baseline_actions FROM core_arc3__environments WHERE game_id = ? AND "
                               "baseline_actions IS NOT NULL ORDER BY date_downloaded DESC NULLS LAST LIMIT 1",
                               [game_id])
                if rows.height:
                    return Baseline([int(v) for v in rows.item(0, 0)], f"core_arc3__environments in {db}")
    return None


# --------------------------------------------------------------------------------------------------------
# The page data
# --------------------------------------------------------------------------------------------------------
def _reasoning_text(value: Any) -> str | None:
    if value is None or value == "" or value == {}:
        return None
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= REASONING_CHARS else text[:REASONING_CHARS] + "…"


def build_viewer_data(source: ViewerSource, verification: Verification, baseline: Baseline | None, *,
                      keyframe_interval: int = KEYFRAME_INTERVAL) -> dict[str, Any]:
    """Everything the page needs, as JSON-ready columns (one entry per step)."""
    lines = source.lines
    n = len(lines)
    records = step_records(lines, source.n_frames)
    options = counting_options_for_variant(source.variant)  # type: ignore[arg-type]
    timeline = step_timeline(records, options)
    if source.recorded_frames is not None:
        frames_origin, per_step = source.frames_origin, source.recorded_frames
    elif verification.rendered is not None:
        frames_origin, per_step = "engine", verification.rendered
    else:
        frames_origin, per_step = "none", []
    shown = display_frames(per_step, n) if frames_origin != "none" else [None] * n
    states = list(STATE_NAMES)
    state_codes = []
    for record in records:
        if record.state not in states:
            states.append(record.state)
        state_codes.append(states.index(record.state))
    divergence = None
    if verification.divergence is not None:
        d = verification.divergence
        divergence = {"step": verification.step, "line": d.line, "field": d.field, "text": d.describe(),
                      "bbox": list(d.bbox) if d.bbox else None}
    reasoning = {str(i): text for i, line in enumerate(lines) if (text := _reasoning_text(line.reasoning))}
    return {
        "format": "arcstudy-viewer",
        "version": 1,
        "label": source.label,
        "kind": source.kind,
        "game_id": source.game_id,
        "guid": source.guid,
        "variant": source.variant,
        "n_steps": n,
        "initial_step": source.initial_step,
        "palette": list(PALETTE),
        "actions": list(ACTION_NAMES),
        "states": states,
        "effects": list(EFFECT_NAMES),
        "frames_origin": frames_origin,
        "keyframe_interval": keyframe_interval,
        "frames": encode_frames(shown, keyframe_interval=keyframe_interval) if frames_origin != "none" else [],
        "steps": {
            "line": [line.line_no for line in lines],
            "action": [int(line.action_id or 0) for line in lines],
            "x": [int(line.action_data.get("x", -1)) if line.action_id == 6 else -1 for line in lines],
            "y": [int(line.action_data.get("y", -1)) if line.action_id == 6 else -1 for line in lines],
            "state": state_codes,
            "levels": [r.levels_completed for r in records],
            "win": [-1 if r.win_levels is None else r.win_levels for r in records],
            "full_reset": [-1 if r.full_reset is None else int(r.full_reset) for r in records],
            "n_frames": [-1 if r.frame_count is None else r.frame_count for r in records],
            "effect": [EFFECT_NAMES.index(e.value) for e in timeline.effects],
            "play": timeline.play,
            "level": timeline.level,
            "charged": timeline.charged_level,
            "level_actions": timeline.level_actions,
        },
        "reasoning": reasoning,
        "level_index": timeline.level_index,
        "n_plays": (timeline.play[-1] + 1) if timeline.play else 0,
        "baseline": baseline.actions if baseline else None,
        "baseline_source": baseline.source if baseline else None,
        "verification": {"status": verification.status, "detail": verification.detail, "divergence": divergence},
        "notes": list(source.notes),
        "counting": {"full_reset_rule": timeline.options.full_reset_rule,
                     "leading_reset": timeline.options.leading_reset},
        "is_action_ids_lost": source.is_action_ids_lost,
    }


def _script_json(data: Any) -> str:
    """JSON safe inside a <script> element: no `<`, `>`, `&` or line separators can end or confuse it."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                         ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def render_viewer_html(data: Mapping[str, Any], manifest: Mapping[str, Any] | None = None) -> str:
    from markupsafe import Markup

    from pipeline.report.html import manifest_context, template_environment

    template = template_environment().get_template("viewer.html.j2")
    return template.render(
        data=data,
        data_json=Markup(_script_json(data)),  # escaped for a <script> element by _script_json
        verification=data["verification"],
        manifest=manifest_context(manifest),
        palette=data["palette"],
    )


# --------------------------------------------------------------------------------------------------------
# End to end
# --------------------------------------------------------------------------------------------------------
@dataclass
class ViewerResult:
    out_path: Path
    data: dict[str, Any]
    source: ViewerSource
    verification: Verification
    n_bytes: int = 0


def write_viewer(target: str | Path, out_path: Path | str, *, db: Path | str | None = None,
                 games: Sequence[Path | str] | None = None, baselines: str | None = None, verify: bool = True,
                 only_reset_levels: bool | None = None, manifest: Any = None,
                 on_step: Callable[[], None] | None = None) -> ViewerResult:
    """Build one viewer page for a recording file or a database guid/play_id and write it atomically.

    `manifest` (a pipeline.core.manifest.RunManifest) receives the inputs (recording or database, frames file, game
    source) and the page's sha256 as an output; its content at render time is embedded in the page.
    """
    import os

    out = Path(out_path)
    path = Path(target)
    if path.is_file():
        source = load_recording_source(path)
    elif db is not None and Path(db).exists():
        source = load_database_source(db, str(target))
    elif db is not None:
        raise ViewerError(f"{target} is not a file, and database {db} does not exist")
    else:
        raise ViewerError(f"{target} is not a recording file (pass --db to look up a guid or play_id)")
    verification = verify_and_render(source, games, verify=verify, only_reset_levels=only_reset_levels,
                                     on_step=on_step)
    baseline = find_baseline(source.game_id, explicit=baselines, games=games, db=db)
    data = build_viewer_data(source, verification, baseline)
    manifest_dict = None
    if manifest is not None:
        for name, digest in source.inputs.items():
            manifest.add_input(name, digest)
        if verification.game_source and verification.game_sha256:
            manifest.add_input(verification.game_source, verification.game_sha256)
        manifest.notes["viewer"] = {"n_steps": data["n_steps"], "frames_origin": data["frames_origin"],
                                    "verification": verification.status, "baseline_source": data["baseline_source"]}
        manifest_dict = manifest.to_dict()
    html = render_viewer_html(data, manifest_dict)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)
    if manifest is not None:
        manifest.add_output(out)
    return ViewerResult(out, data, source, verification, n_bytes=out.stat().st_size)
