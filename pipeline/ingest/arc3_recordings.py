"""ARC-AGI-3 recordings (JSONL), every variant of spec/formats.md §A, streamed line by line.

One pass over the file keeps a small record per line (frame pixels are hashed, and written to Parquet only
with --keep-frames), then the file-level decisions are taken: which writer produced it (toolkit, official
human dataset, agents/benchmarking recorder, 2025 preview), where plays start and end, which lines are
post-terminal echoes, and which card slot of a trailing scorecard line belongs to the file.

Verdicts (spec/formats.md): a file with no frame line is rejected; a bad line (broken JSON, unknown
action, out-of-range click or colour, a game or guid contradicting the file, time going backwards, a
duplicated line, a truncated last line) is quarantined and the rest loads; odd but usable lines are
flagged; string ids and the preview's `score` fields are normalised (the raw layer keeps the original).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.ingest.base import FileContext, FileRejected, ReaderOutput, Reject, clip
from pipeline.ingest.formats import Head, InputFormat, register
from pipeline.recordings.counting import StepEffect, StepRecord, classify_steps, detect_action_ids_lost
from pipeline.recordings.frames import FrameError, decode_frames, frame_hashes, split_frame_field
from pipeline.recordings.lines import counting_options_for_variant

ACTION_NAMES = ("RESET", "ACTION1", "ACTION2", "ACTION3", "ACTION4", "ACTION5", "ACTION6", "ACTION7")
ACTION_IDS = {name: i for i, name in enumerate(ACTION_NAMES)}
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MAX_REASONING_BYTES = 16 * 1024
FRAME_BATCH = 2048  # frames buffered before a Parquet row group is written


# --------------------------------------------------------------------------------------------------
# detection
# --------------------------------------------------------------------------------------------------
def sniff(head: Head) -> str | None:
    line = head.first_line
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        # A first line too long for the head buffer (frames) is still recognisable by its keys.
        if '"data"' in line[:200] and ('"game_id"' in line[:400] or '"tokens"' in line[:400]):
            return "JSON Lines whose first line is a `{timestamp, data}` envelope (long frame line)"
        return None
    if isinstance(obj, dict) and isinstance(obj.get("data"), dict) and "timestamp" in obj:
        return "JSON Lines of `{timestamp, data}` envelopes (ARC-AGI-3 recording)"
    return None


def filename_guid(path: Path) -> tuple[str | None, str]:
    """The guid a file name carries, and which naming convention it follows."""
    name = path.name
    if name.endswith(".recording.jsonl"):
        parts = name.split(".")
        if len(parts) >= 5 and UUID_RE.fullmatch(parts[-3]):
            return parts[-3], "benchmarking"
        stem = name[: -len(".recording.jsonl")]
        if UUID_RE.fullmatch(stem):
            return stem, "human-dataset"
    match = re.fullmatch(r"([a-z0-9]{4}-[0-9a-f]+)-(" + UUID_RE.pattern + r")\.jsonl", name)
    if match:
        return match.group(2), "toolkit"
    return None, "other"


# --------------------------------------------------------------------------------------------------
# per-line parsing
# --------------------------------------------------------------------------------------------------
@dataclass
class Line:
    number: int
    text: str  # the line as read, clipped to 4 KiB: kept for quarantine records, not the whole frame text
    sha: str
    kind: str = "other"
    data: dict[str, Any] = field(default_factory=dict)
    recorded_at: datetime | None = None
    frames: np.ndarray | None = None  # only while buffering for Parquet
    n_frames: int | None = None
    hashes: list[str] | None = None
    raw_json: str = ""
    action_id: int | None = None
    id_was_string: bool = False


def _parse_timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts if ts.tzinfo else None


def _classify(data: dict[str, Any]) -> str:
    if "cards" in data or ("won" in data and "played" in data):
        return "scorecard"
    if "game_id" in data and ("state" in data or "frame" in data):
        return "frame"
    if "game_id" not in data and ("tokens" in data or "total_tokens" in data):
        return "usage"
    if not data:
        return "scorecard"  # the benchmarking recorder's `{}` scorecard entry
    return "other"


class LineError(Exception):
    def __init__(self, check: str, reason: str, column: str | None = None, value: Any = None):
        super().__init__(reason)
        self.check, self.reason, self.column = check, reason, column
        self.value = None if value is None else str(value)


def parse_line(number: int, text: str, want_frames: bool) -> Line:
    # Only a clipped copy of the text is kept: a recording can be hundreds of MB of frame JSON.
    line = Line(number=number, text=clip(text), sha=hashlib.sha256(text.encode()).hexdigest())
    stripped, frame_text = split_frame_field(text)
    try:
        obj = json.loads(stripped)
        if frame_text is not None and not (isinstance(obj, dict) and isinstance(obj.get("data"), dict)
                                           and "frame" in obj["data"] and obj["data"]["frame"] is None):
            obj, frame_text = json.loads(text), None  # the cut was not the real field: parse it all
    except json.JSONDecodeError as err:
        raise LineError("invalid_json", f"not valid JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), dict):
        raise LineError("bad_envelope", "line is not a `{timestamp, data}` object with an object `data`")
    data = obj["data"]
    line.data = data
    line.kind = _classify(data)
    line.recorded_at = _parse_timestamp(obj.get("timestamp"))
    if line.kind != "scorecard" and "timestamp" in obj and line.recorded_at is None:
        raise LineError("bad_timestamp", f"timestamp {obj.get('timestamp')!r} is not ISO-8601 with an offset",
                        "timestamp", obj.get("timestamp"))
    if line.kind == "frame":
        if frame_text is not None:
            try:
                frames = decode_frames(frame_text)
            except (FrameError, json.JSONDecodeError) as err:
                raise LineError("bad_frame", f"frame is malformed: {err}", "frame") from None
            data["frame"] = f"[{len(frames)} frames]"
        elif "frame" in data:
            try:
                from pipeline.recordings.frames import frames_from_json

                frames = frames_from_json(data["frame"])
            except FrameError as err:
                raise LineError("bad_frame", f"frame is malformed: {err}", "frame") from None
            data["frame"] = f"[{len(frames)} frames]"
        else:
            frames = None
        if frames is not None:
            line.n_frames = len(frames)
            line.hashes = frame_hashes(frames)
            if want_frames:
                line.frames = frames
        _check_frame_record(line)
    line.raw_json = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return line


def _check_frame_record(line: Line) -> None:
    data = line.data
    action = data.get("action_input")
    if not isinstance(action, dict) or "id" not in action:
        raise LineError("missing_action", "frame record has no `action_input.id`", "action_input")
    raw_id = action["id"]
    if isinstance(raw_id, str):
        if raw_id not in ACTION_IDS:
            raise LineError("unknown_action", f"unknown action name {raw_id!r} (expected RESET or ACTION1-7)",
                            "action_input.id", raw_id)
        line.action_id, line.id_was_string = ACTION_IDS[raw_id], True
    elif isinstance(raw_id, int) and not isinstance(raw_id, bool) and 0 <= raw_id <= 7:
        line.action_id = raw_id
    else:
        raise LineError("unknown_action", f"unknown action id {raw_id!r} (expected 0-7 or a name)",
                        "action_input.id", raw_id)
    if line.action_id == 6:
        payload = action.get("data") or {}
        x, y = payload.get("x"), payload.get("y")
        for name, v in (("x", x), ("y", y)):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 63:
                raise LineError("bad_click", f"ACTION6 needs integer {name} in 0-63, got {v!r}",
                                f"action_input.data.{name}", v)
    levels = data.get("levels_completed", data.get("score"))
    win = data.get("win_levels", data.get("win_score"))
    if not isinstance(levels, int) or isinstance(levels, bool):
        raise LineError("bad_levels", f"levels_completed must be an integer, got {levels!r}", "levels_completed",
                        levels)
    if win is not None and (not isinstance(win, int) or isinstance(win, bool)):
        raise LineError("bad_levels", f"win_levels must be an integer, got {win!r}", "win_levels", win)
    if win and levels > win:
        raise LineError("levels_exceed_win", f"levels_completed {levels} exceeds win_levels {win}",
                        "levels_completed", levels)
    if not isinstance(data.get("game_id"), str):
        raise LineError("bad_game_id", "frame record has no string game_id", "game_id", data.get("game_id"))


# --------------------------------------------------------------------------------------------------
# the reader
# --------------------------------------------------------------------------------------------------
class _FrameSink:
    """Streams kept frames to `<frames_dir>/<file_id>.parquet` (zstd), a row group at a time."""

    def __init__(self, ctx: FileContext):
        self.path = (ctx.frames_dir or ctx.path.parent) / f"{ctx.file_id}.parquet"
        self.rows: dict[str, list] = {"line_number": [], "frame_index": [], "frame_sha256": [], "pixels": []}
        self.writer = None
        self.tmp = self.path.with_suffix(".parquet.tmp")

    def add(self, line: Line) -> None:
        assert line.frames is not None and line.hashes is not None
        for i, (grid, digest) in enumerate(zip(line.frames, line.hashes, strict=True)):
            self.rows["line_number"].append(line.number)
            self.rows["frame_index"].append(i)
            self.rows["frame_sha256"].append(digest)
            self.rows["pixels"].append(grid.tobytes())
        line.frames = None
        if len(self.rows["pixels"]) >= FRAME_BATCH:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self.rows["pixels"]:
            return
        table = pa.table({
            "line_number": pa.array(self.rows["line_number"], pa.int64()),
            "frame_index": pa.array(self.rows["frame_index"], pa.int16()),
            "frame_sha256": pa.array(self.rows["frame_sha256"], pa.string()),
            "pixels": pa.array(self.rows["pixels"], pa.binary(4096)),
        })
        if self.writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.writer = pq.ParquetWriter(self.tmp, table.schema, compression="zstd")
        self.writer.write_table(table)
        for v in self.rows.values():
            v.clear()

    def close(self) -> Path | None:
        self.flush()
        if self.writer is None:
            return None
        self.writer.close()
        self.tmp.replace(self.path)  # atomic: a crash never leaves a half-written frames file
        return self.path

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.tmp.unlink(missing_ok=True)


def read_lines(ctx: FileContext, out: ReaderOutput) -> list[Line]:
    """Parse every line; bad lines become rejects. Frames go to the sink as they are read."""
    lines: list[Line] = []
    sink = _FrameSink(ctx) if ctx.keep_frames else None
    try:
        with open(ctx.path, "rb") as fh:
            number = 0
            for raw in fh:
                number += 1
                truncated = not raw.endswith(b"\n")
                try:
                    text = raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError as err:
                    out.rejects.append(Reject(f"line {number}", "not_utf8", f"line is not UTF-8 text ({err.reason})",
                                              clip(raw.decode("utf-8", "replace"))))
                    continue
                if not text.strip():
                    continue
                try:
                    line = parse_line(number, text, want_frames=sink is not None)
                except LineError as err:
                    check, reason = err.check, err.reason
                    if truncated and check == "invalid_json":
                        check, reason = "truncated_line", "the last line is cut off (file truncated mid-write)"
                    out.rejects.append(Reject(f"line {number}", check, reason, clip(text),
                                              "core_arc3__steps", err.column, err.value))
                    continue
                if sink is not None and line.frames is not None:
                    sink.add(line)
                lines.append(line)
        if sink is not None:
            path = sink.close()
            if path is not None:
                out.written_files.append(path)
                ctx.options["frames_file"] = str(path)
    except BaseException:
        if sink is not None:
            sink.abort()
        raise
    return lines


def detect_variant(ctx: FileContext, frames: list[Line], summary: Line | None, usage: list[Line]) -> tuple[str, str]:
    name_guid, naming = filename_guid(ctx.path)
    if summary is not None and "cards" in summary.data:
        return "human-dataset", "last line is a scorecard summary with `cards`"
    if any("score" in ln.data and "levels_completed" not in ln.data for ln in frames):
        return "preview-2025", "frame records carry `score` instead of `levels_completed`"
    if usage:
        return "benchmarking", "LLM usage lines without game fields are interleaved"
    if any(ln.id_was_string for ln in frames):
        return "toolkit", "action ids are enum names and there is no trailing summary line"
    if naming == "benchmarking":
        return "benchmarking", "integer action ids and an agents-recorder file name"
    if naming == "human-dataset":
        return "human-dataset", "file named <guid>.recording.jsonl (no trailing summary line)"
    return "benchmarking", "integer action ids without a trailing summary (agents recorder)"


def read_recording(ctx: FileContext) -> ReaderOutput:
    out = ReaderOutput()
    lines = read_lines(ctx, out)
    frames = [ln for ln in lines if ln.kind == "frame"]
    if not frames:
        raise FileRejected("the recording has no frame line (nothing an engine returned)", "no_frame_line")
    usage = [ln for ln in lines if ln.kind == "usage"]
    summaries = [ln for ln in lines if ln.kind == "scorecard"]
    summary = summaries[-1] if summaries else None
    variant, evidence = detect_variant(ctx, frames, summary, usage)
    out.detection_evidence = f"{variant}: {evidence}"
    name_guid, _ = filename_guid(ctx.path)

    for ln in lines:
        if ln.kind == "other":
            out.rejects.append(Reject(f"line {ln.number}", "unknown_record",
                                      "`data` is neither a frame, an LLM usage record nor a scorecard",
                                      clip(ln.text)))
        elif ln.kind == "scorecard" and ln is not summary:
            out.rejects.append(Reject(f"line {ln.number}", "misplaced_scorecard",
                                      "a scorecard summary line that is not the last one", clip(ln.text)))

    first = frames[0]
    game_id, guid = first.data["game_id"], first.data.get("guid")
    if variant == "toolkit" and first.action_id != 0:
        raise FileRejected(f"toolkit recordings always start with the RESET made by make(); line {first.number} "
                           f"is {ACTION_NAMES[first.action_id]}", "no_leading_reset")
    if summary is not None and "cards" in summary.data:
        others = [g for g in summary.data["cards"] if g != game_id]
        if others:
            raise FileRejected(f"the summary line's cards hold {others}, not the recorded game {game_id}",
                               "summary_other_game", f"line {summary.number}")

    # Contradictions, time order, duplicates: quarantine the line, keep the rest.
    kept: list[Line] = []
    last_time: datetime | None = None
    prev: Line | None = None
    for ln in frames:
        reject = None
        if ln.data["game_id"] != game_id:
            reject = ("contradicts_file", f"game_id {ln.data['game_id']!r} differs from the file's {game_id!r}",
                      "game_id", ln.data["game_id"])
        elif guid is not None and ln.data.get("guid") not in (None, guid):
            reject = ("contradicts_file", f"guid {ln.data.get('guid')!r} differs from the file's {guid!r}",
                      "guid", ln.data.get("guid"))
        elif prev is not None and ln.sha == prev.sha:
            reject = ("duplicate_step", f"line repeats line {prev.number} exactly (duplicated write)", None, None)
        elif last_time is not None and ln.recorded_at is not None and ln.recorded_at < last_time:
            reject = ("time_goes_backwards", f"timestamp {ln.recorded_at.isoformat()} is earlier than the "
                      f"previous line's {last_time.isoformat()}", "timestamp", ln.recorded_at.isoformat())
        if reject:
            check, reason, column, value = reject
            out.rejects.append(Reject(f"line {ln.number}", check, reason, clip(ln.text), "core_arc3__steps",
                                      column, None if value is None else str(value)))
            continue
        kept.append(ln)
        prev = ln
        last_time = ln.recorded_at or last_time
    frames = kept

    ids_lost = detect_action_ids_lost([step_record(ln) for ln in frames])
    only_reset_levels = variant == "human-dataset"
    has_leading_reset = bool(frames) and frames[0].action_id == 0
    has_frames = any(ln.n_frames is not None for ln in frames)
    generation = "preview-2025" if variant == "preview-2025" else "2026"

    file_flags: set[str] = set()
    if any(ln.id_was_string for ln in frames):
        file_flags.add("string_action_ids")
    if not has_leading_reset:
        file_flags.add("no_leading_reset")
    if ids_lost:
        file_flags.add("action_ids_lost")
    if variant == "human-dataset" and (summary is None or "cards" not in summary.data):
        file_flags.add("no_trailing_summary")

    # Plays and post-terminal echoes: the same counting walk the scorer uses (spec/scoring.md §B.4).
    effects = _effects(frames, variant, ids_lost)
    step_rows, play_rows = [], []
    play_index = 0
    prev_available: list[int] | None = None
    plays_lines: list[list[Line]] = [[]]
    for i, (ln, effect) in enumerate(zip(frames, effects, strict=True)):
        data = ln.data
        echo = effect is StepEffect.ECHO
        if effect is StepEffect.FULL_RESET:
            play_index += 1
            plays_lines.append([])
        plays_lines[-1].append(ln)
        flags = []
        if echo:
            flags.append("post_terminal")
        if (prev_available is not None and ln.action_id not in (0, None) and ln.action_id not in prev_available
                and not echo and not ids_lost):
            flags.append("action_not_available")
        reasoning = (data.get("action_input") or {}).get("reasoning")
        reasoning_json = None if reasoning is None else json.dumps(reasoning, ensure_ascii=False)
        if reasoning_json is not None and len(reasoning_json.encode()) > MAX_REASONING_BYTES:
            flags.append("reasoning_over_16kib")
        if ids_lost:
            flags.append("action_id_lost")
        payload = (data.get("action_input") or {}).get("data") or {}
        full = data.get("full_reset")
        step_rows.append({
            "file_id": ctx.file_id, "line_number": ln.number, "step_index": i,
            "play_id": f"{guid}/{play_index}", "game_id": game_id, "guid": data.get("guid") or guid,
            "recorded_at": ln.recorded_at, "action_id": ln.action_id, "action_name": ACTION_NAMES[ln.action_id],
            "click_x": payload.get("x") if ln.action_id == 6 else None,
            "click_y": payload.get("y") if ln.action_id == 6 else None,
            "state": data.get("state"), "levels_completed": data.get("levels_completed", data.get("score")),
            "win_levels": data.get("win_levels", data.get("win_score")),
            "is_full_reset": full if isinstance(full, bool) else None,
            "available_actions": data.get("available_actions"), "n_frames": ln.n_frames,
            "frame_sha256s": ln.hashes, "last_frame_sha256": ln.hashes[-1] if ln.hashes else None,
            "frames_file": ctx.options.get("frames_file") if ln.n_frames else None,
            "is_post_terminal": echo, "reasoning_json": reasoning_json, "flags": flags,
        })
        if not echo and isinstance(data.get("available_actions"), list):
            prev_available = data["available_actions"]

    for idx, plines in enumerate(plays_lines):
        if not plines:
            continue
        pflags = sorted(file_flags)
        play_rows.append({
            "play_id": f"{guid}/{idx}", "file_id": ctx.file_id, "guid": guid, "game_id": game_id,
            "play_index": idx, "recording_variant": variant, "schema_generation": generation,
            "first_line_number": plines[0].number, "last_line_number": plines[-1].number,
            "n_steps": len(plines), "started_at": plines[0].recorded_at, "ended_at": plines[-1].recorded_at,
            "has_frames": has_frames, "is_only_reset_levels": only_reset_levels,
            "is_action_ids_lost": ids_lost, "has_leading_reset": has_leading_reset if idx == 0 else True,
            "flags": pflags,
        })

    out.flags.extend(sorted(file_flags))
    out.tables["raw_arc3__recording_lines"] = pl.DataFrame(
        [{"file_id": ctx.file_id, "line_number": ln.number, "content_sha256": ln.sha, "line_kind": ln.kind,
          "raw_json": ln.raw_json} for ln in lines],
        schema={"file_id": pl.String, "line_number": pl.Int64, "content_sha256": pl.String,
                "line_kind": pl.String, "raw_json": pl.String}, orient="row",
    )
    out.tables["core_arc3__steps"] = _frame("core_arc3__steps", step_rows)
    out.tables["core_arc3__plays"] = _frame("core_arc3__plays", play_rows)
    if usage:
        out.tables["core_arc3__usage"] = _frame("core_arc3__usage", [{
            "file_id": ctx.file_id, "line_number": ln.number, "recorded_at": ln.recorded_at,
            "n_tokens": ln.data.get("tokens"), "n_total_tokens": ln.data.get("total_tokens"),
            "conversation_length": ln.data.get("conversation_length"),
            "assistant_text": ln.data.get("assistant"),
        } for ln in usage])
    if summary is not None and summary.data.get("cards"):
        from pipeline.ingest.arc3_cards import card_rows

        file_guid = name_guid if variant == "human-dataset" and name_guid else guid
        rows, rejects, flags = card_rows(ctx, summary.data["cards"], summary.number, file_guid,
                                         [p["play_id"] for p in play_rows])
        out.tables["core_arc3__card_plays"] = _frame("core_arc3__card_plays", rows)
        out.rejects.extend(rejects)
        out.flags.extend(flags)
    return out


def step_record(ln: Line) -> StepRecord:
    data = ln.data
    full = data.get("full_reset")
    return StepRecord(
        action_id=ln.action_id, state=data.get("state"),
        levels_completed=data.get("levels_completed", data.get("score")),
        full_reset=full if isinstance(full, bool) else None,
        win_levels=data.get("win_levels", data.get("win_score")), frame_count=ln.n_frames,
        guid=data.get("guid"), line_number=ln.number, frame_digest=ln.hashes[-1] if ln.hashes else None,
    )


def _effects(frames: list[Line], variant: str, ids_lost: bool) -> tuple[StepEffect, ...]:
    """Each frame line's effect on the card. Lines whose ids were lost cannot be classified: they stay one
    play of plain actions (flagged), and no line is treated as an echo."""
    if ids_lost:
        return tuple(StepEffect.ACTION for _ in frames)
    return classify_steps([step_record(ln) for ln in frames], counting_options_for_variant(variant))


def _frame(table: str, rows: list[dict]) -> pl.DataFrame:
    from schemas.validate import conform

    return conform(table, rows)


RECORDING_TABLES = ("raw_arc3__recording_lines", "core_arc3__steps", "core_arc3__plays", "core_arc3__usage",
                    "core_arc3__card_plays")

register(InputFormat(
    name="arc3-recording",
    description="ARC-AGI-3 recording JSONL: toolkit, official human dataset, agents/benchmarking or 2025 preview",
    reader=read_recording,
    sniff=sniff,
    tables=RECORDING_TABLES,
))
