"""Replay a recording's actions on a fresh game and report the first divergence.

    report = replay("ls20-<guid>.jsonl", environments_dir="environment_files")
    if not report.ok:
        print(report.divergence.describe())

For every frame record (in file order) the recorded action is sent to a fresh environment of the
recorded ``game_id`` and the response is compared with the record, field by field in this order:
``state``, ``levels_completed``, ``win_levels``, ``full_reset``, ``available_actions``, the number of
frames, then each frame (when the line has frames; the report gives the number of differing cells
and their bounding box).  Recordings without frames replay with frames switched off, which is much
faster.  A recording whose first frame record is not a RESET (older client files) is preceded by
the opening RESET the toolkit's ``make`` sends, which is not compared.

``only_reset_levels=True`` replays with level-only resets (human-dataset files were recorded that
way); ``check_full_reset=False`` skips ``full_reset`` (REST-produced lines always say false).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .base_game import FRAMES_ALL, FRAMES_NONE
from .enums import ActionInput, GameAction
from .env import GameEnv, make
from .recording import Recording, RecordingLine, read_recording

__all__ = ["Divergence", "ReplayReport", "replay", "compare_frames"]


@dataclass
class Divergence:
    line: int  # 1-based line number in the recording file
    step: int  # 0-based index among the replayed frame records
    action: str
    field: str  # "state", "levels_completed", ..., "frame_count", "frame", "exception"
    expected: Any
    got: Any
    frame_index: int | None = None  # for "frame": which frame of the line (0-based)
    cells_differing: int | None = None
    bbox: tuple[int, int, int, int] | None = None  # (x0, x1, y0, y1), inclusive

    def describe(self) -> str:
        where = f"line {self.line} (step {self.step}, {self.action})"
        if self.field == "frame":
            box = self.bbox
            detail = f"{self.cells_differing} cells differ"
            if box is not None:
                detail += f", bounding box x={box[0]}..{box[1]} y={box[2]}..{box[3]}"
            return f"{where}: frame {self.frame_index + 1}: {detail}"
        return f"{where}: {self.field} expected={self.expected!r} got={self.got!r}"


@dataclass
class ReplayReport:
    game_id: str | None
    steps_replayed: int = 0
    frames_compared: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    final_state: str | None = None
    final_levels_completed: int | None = None

    @property
    def ok(self) -> bool:
        return not self.divergences

    @property
    def divergence(self) -> Divergence | None:
        return self.divergences[0] if self.divergences else None


def compare_frames(expected: Any, got: Any) -> tuple[int, tuple[int, int, int, int] | None]:
    """(number of differing cells, inclusive bounding box (x0, x1, y0, y1) or None)."""
    want = np.asarray(expected, dtype=np.int16)
    have = np.asarray(got, dtype=np.int16)
    if want.shape != have.shape:
        return int(max(want.size, have.size)), None
    diff = want != have
    count = int(diff.sum())
    if not count:
        return 0, None
    rows, cols = np.nonzero(diff)
    return count, (int(cols.min()), int(cols.max()), int(rows.min()), int(rows.max()))


_FIELDS = ("state", "levels_completed", "win_levels", "full_reset", "available_actions")


def _observed(response: Any) -> dict[str, Any]:
    state = response.state
    return {
        "state": getattr(state, "value", state),
        "levels_completed": int(response.levels_completed),
        "win_levels": int(response.win_levels),
        "full_reset": bool(response.full_reset),
        "available_actions": [int(a) for a in response.available_actions],
    }


def _check_line(
    line: RecordingLine, step: int, response: Any, compare_frame_pixels: bool, check_full_reset: bool
) -> tuple[list[Divergence], int]:
    action = line.action.name if line.action is not None else "?"
    got = _observed(response)
    found: list[Divergence] = []
    for name in _FIELDS:
        if name == "full_reset" and not check_full_reset:
            continue
        if name not in line.data:
            continue
        expected = line.data[name]
        if expected != got[name]:
            found.append(Divergence(line.line_no, step, action, name, expected, got[name]))
            return found, 0
    if not (compare_frame_pixels and line.has_frames):
        return found, 0
    expected_frames = line.data.get("frame") or []
    got_frames = list(response.frame)
    if len(expected_frames) != len(got_frames):
        found.append(Divergence(line.line_no, step, action, "frame_count", len(expected_frames), len(got_frames)))
        return found, 0
    for index, (want, have) in enumerate(zip(expected_frames, got_frames, strict=True)):
        cells, box = compare_frames(want, have)
        if cells:
            found.append(
                Divergence(line.line_no, step, action, "frame", None, None, frame_index=index, cells_differing=cells, bbox=box)
            )
            return found, index
    return found, len(got_frames)


def replay(
    recording: str | Path | Recording,
    environments_dir: str | Path | Iterable[str | Path] | None = None,
    *,
    only_reset_levels: bool | None = False,
    compare_frames: bool = True,
    check_full_reset: bool = True,
    max_divergences: int = 1,
    env: GameEnv | None = None,
) -> ReplayReport:
    """Replay ``recording`` (a path or a parsed ``Recording``); see the module docstring.

    ``env``: an environment to use instead of ``make(game_id, environments_dir, ...)`` (it must be
    fresh, i.e. before its first RESET).  ``max_divergences``: stop after this many (>= 1).
    """
    rec = recording if isinstance(recording, Recording) else read_recording(recording)
    frame_lines = rec.frame_lines
    report = ReplayReport(game_id=rec.game_id)
    if not frame_lines:
        return report
    with_frames = compare_frames and rec.has_frames
    if env is None:
        if rec.game_id is None:
            raise ValueError("recording has no game_id")
        env = make(rec.game_id, environments_dir, only_reset_levels=only_reset_levels)
    mode = FRAMES_ALL if with_frames else FRAMES_NONE
    if frame_lines[0].action_id != GameAction.RESET.value:
        env.reset(frames=FRAMES_NONE)  # the toolkit's opening RESET, absent from older files
    for step, line in enumerate(frame_lines):
        action_input = ActionInput(id=line.action_id, data=dict(line.action_data), reasoning=line.reasoning)
        line_mode = mode if line.has_frames else FRAMES_NONE
        try:
            response = env.step(action_input, frames=line_mode)
        except Exception as err:  # the game or engine failed: that is a divergence too
            name = line.action.name if line.action is not None else "?"
            report.divergences.append(Divergence(line.line_no, step, name, "exception", None, f"{type(err).__name__}: {err}"))
            break
        report.steps_replayed += 1
        found, compared = _check_line(line, step, response, with_frames, check_full_reset)
        report.frames_compared += compared
        report.final_state = getattr(response.state, "value", response.state)
        report.final_levels_completed = int(response.levels_completed)
        if found:
            report.divergences.extend(found)
            if len(report.divergences) >= max(1, max_divergences):
                break
    return report
