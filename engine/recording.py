"""Recordings in the official toolkit JSONL format: writer and reader.

Each line is ``{"timestamp": <ISO-8601 UTC with microseconds>, "data": <frame record>}`` written with
``json.dumps`` defaults, the data keys in the toolkit's order: ``game_id, state, levels_completed,
win_levels, action_input {id, data, reasoning}, guid, full_reset, available_actions`` and, when
frames are included, ``frame`` (a list of 64x64 grids of ints).  ``action_input.id`` is the enum
name (``"ACTION1"``) as in the toolkit recorder, or the int with ``action_ids="int"`` (the
agents/REST variant).  N actions after the opening RESET give N+1 lines (observations), like the
toolkit (and Minari's N+1 observations per N actions).

Format version: the official format has no version field, and readers (the toolkit, our ingest)
treat the envelope and the frame record as closed shapes, so the writer adds nothing to the lines.
The format is identified by its shape (spec/formats.md §A) and, when asked for with
``sidecar=True``, by a ``<recording>.meta.json`` file next to it carrying ``format``,
``format_version`` and how the file was produced.

The reader accepts every variant of spec/formats.md §A: int or name ids, with or without frames,
usage records and a trailing scorecard summary (kept as non-frame lines).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import numpy as np

from .enums import GameAction

__all__ = [
    "RECORDING_FORMAT",
    "RECORDING_FORMAT_VERSION",
    "RecordingWriter",
    "RecordingLine",
    "Recording",
    "read_recording",
    "iter_recording",
    "response_to_record",
]

RECORDING_FORMAT = "toolkit-jsonl"
RECORDING_FORMAT_VERSION = 1


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _frames_as_lists(frames: Any) -> list:
    out = []
    for frame in frames:
        out.append(frame.tolist() if hasattr(frame, "tolist") else [list(row) for row in frame])
    return out


def response_to_record(response: Any, *, include_frames: bool = True, action_ids: str = "name") -> dict[str, Any]:
    """The ``data`` object of a recording line for an engine response (FrameData / FrameDataRaw)."""
    action_input = response.action_input
    action = action_input.id
    if isinstance(action, GameAction):
        action_id: Any = action.name if action_ids == "name" else action.value
    else:
        action_id = action
    state = response.state
    record: dict[str, Any] = {
        "game_id": response.game_id,
        "state": getattr(state, "value", state),
        "levels_completed": int(response.levels_completed),
        "win_levels": int(response.win_levels),
        "action_input": {"id": action_id, "data": dict(action_input.data), "reasoning": action_input.reasoning},
        "guid": response.guid,
        "full_reset": bool(response.full_reset),
        "available_actions": [int(a) for a in response.available_actions],
    }
    if include_frames:
        record["frame"] = _frames_as_lists(response.frame)
    return record


class RecordingWriter:
    """Appends toolkit-format lines; use as a context manager or call ``close()``."""

    def __init__(
        self,
        target: str | Path | IO[str],
        *,
        include_frames: bool = True,
        action_ids: str = "name",
        sidecar: bool = False,
        append: bool = False,
        clock: Any = _utc_now,
    ) -> None:
        if action_ids not in ("name", "int"):
            raise ValueError("action_ids must be 'name' (toolkit recorder) or 'int' (agents/REST variant)")
        self.include_frames = include_frames
        self.action_ids = action_ids
        self.clock = clock
        self.lines_written = 0
        self._sidecar = sidecar
        self._first: dict[str, Any] | None = None
        if isinstance(target, (str, Path)):
            self.path: Path | None = Path(target)
            self._file: IO[str] = open(self.path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
            self._owns_file = True
        else:
            self.path = None
            self._file = target
            self._owns_file = False

    def write(self, response: Any) -> dict[str, Any]:
        """Write one line for ``response``; returns the line object."""
        record = response_to_record(response, include_frames=self.include_frames, action_ids=self.action_ids)
        line = {"timestamp": self.clock(), "data": record}
        self._file.write(json.dumps(line) + "\n")
        self.lines_written += 1
        if self._first is None:
            self._first = record
        return line

    def close(self) -> None:
        if self._owns_file:
            self._file.close()
        else:
            self._file.flush()
        if self._sidecar and self.path is not None:
            meta = {
                "format": RECORDING_FORMAT,
                "format_version": RECORDING_FORMAT_VERSION,
                "writer": "engine.recording.RecordingWriter",
                "game_id": self._first.get("game_id") if self._first else None,
                "guid": self._first.get("guid") if self._first else None,
                "frames_included": self.include_frames,
                "action_ids": self.action_ids,
                "line_count": self.lines_written,
            }
            Path(str(self.path) + ".meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ----------------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------------

def _record_field(name: str) -> property:
    """A read-only property giving the line's frame-record field ``name`` (None if absent)."""
    return property(lambda line: line.data.get(name), doc=f"The frame record's ``{name}`` (None if absent).")


@dataclass
class RecordingLine:
    """One line of a recording.  Frame records have ``is_frame`` set and the fields parsed."""

    line_no: int  # 1-based line number in the file
    timestamp: str | None
    data: dict[str, Any]
    is_frame: bool = False
    action_id: int | None = None
    action_data: dict[str, Any] = field(default_factory=dict)
    reasoning: Any = None
    id_was_name: bool = False

    @property
    def action(self) -> GameAction | None:
        return None if self.action_id is None else GameAction.from_id(self.action_id)

    # The frame record's fields, as recorded (None when the line lacks one).
    state = _record_field("state")  # str | None
    levels_completed = _record_field("levels_completed")  # int | None
    win_levels = _record_field("win_levels")  # int | None
    full_reset = _record_field("full_reset")  # bool | None
    available_actions = _record_field("available_actions")  # list[int] | None
    game_id = _record_field("game_id")  # str | None

    @property
    def has_frames(self) -> bool:
        return "frame" in self.data

    def frames(self) -> list[np.ndarray]:
        """The recorded frames as int16 arrays (empty if none were recorded)."""
        return [np.asarray(frame, dtype=np.int16) for frame in self.data.get("frame") or []]


@dataclass
class Recording:
    path: Path | None
    lines: list[RecordingLine]

    @property
    def frame_lines(self) -> list[RecordingLine]:
        return [line for line in self.lines if line.is_frame]

    @property
    def game_id(self) -> str | None:
        for line in self.frame_lines:
            if line.game_id:
                return line.game_id
        return None

    @property
    def has_frames(self) -> bool:
        return any(line.has_frames for line in self.frame_lines)


def _parse_action_id(value: Any) -> tuple[int, bool]:
    if isinstance(value, bool):
        raise ValueError(f"invalid action id {value!r}")
    if isinstance(value, int):
        return GameAction.from_id(value).value, False
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return GameAction.from_id(int(text)).value, False
        return GameAction.from_name(text).value, True
    raise ValueError(f"invalid action id {value!r}")


def _parse_line(line_no: int, text: str) -> RecordingLine:
    obj = json.loads(text)
    if not isinstance(obj, dict):
        raise ValueError(f"line {line_no}: not a JSON object")
    data = obj.get("data", obj)
    if not isinstance(data, dict):
        raise ValueError(f"line {line_no}: 'data' is not an object")
    line = RecordingLine(line_no=line_no, timestamp=obj.get("timestamp"), data=data)
    action_input = data.get("action_input")
    if isinstance(action_input, dict) and "state" in data:
        line.is_frame = True
        line.action_id, line.id_was_name = _parse_action_id(action_input.get("id", 0))
        raw = action_input.get("data") or {}
        line.action_data = dict(raw) if isinstance(raw, dict) else {}
        line.reasoning = action_input.get("reasoning")
    return line


def iter_recording(source: str | Path | IO[str]) -> Iterator[RecordingLine]:
    """Lines of a recording, streamed (blank lines skipped; line numbers count every line)."""
    if isinstance(source, (str, Path)):
        with open(source, encoding="utf-8-sig") as handle:  # a byte-order mark (Windows tools) is not content
            yield from iter_recording(handle)
        return
    for line_no, text in enumerate(source, start=1):
        if line_no == 1:
            text = text.removeprefix("\ufeff")  # a handle opened as plain utf-8 keeps the byte-order mark
        if text.strip():
            yield _parse_line(line_no, text)


def read_recording(source: str | Path | IO[str]) -> Recording:
    path = Path(source) if isinstance(source, (str, Path)) else None
    return Recording(path=path, lines=list(iter_recording(source)))
