"""Toolkit-format recordings (spec/formats.md §A.1) for shipped solutions and qualification playback.

A recording is JSON Lines, one ``{"timestamp", "data"}`` envelope per engine response; the first
line is the opening RESET (``full_reset`` true), ``action_input.id`` is the enum *name*, and frames
are omitted (``include_frame_data=False`` in the toolkit), which keeps shipped files small. This is
a small self-contained writer/reader (used by qualification and the games' shipped solutions,
``games/*/*/solutions``) so they do not depend on the engine's own recorder; the files it writes are
what the official toolkit writes for the same actions, and `pipeline.recordings.reader` reads them
like any other toolkit recording.

Timestamps are synthetic and deterministic (a fixed epoch plus one millisecond per line) and the
guid is derived from the game id and the action list, so regenerating a solution gives a
byte-identical file.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine import ActionInput, GameAction, GameState
from pipeline.core.outputs import write_text
from pipeline.core.textfiles import read_text_document

__all__ = ["Step", "record_actions", "write_recording", "read_recording", "replay_recording", "ReplayMismatch"]

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Step:
    """One action of a recording: the id (0-7) and, for clicks, display coordinates."""

    action: int
    x: int | None = None
    y: int | None = None

    @property
    def data(self) -> dict[str, int]:
        return {} if self.x is None else {"x": int(self.x), "y": int(self.y)}

    def as_dict(self) -> dict[str, int]:
        return {"action": self.action, **self.data}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        return cls(int(d["action"]), d.get("x"), d.get("y"))


def _line(game_id: str, guid: str, n: int, result: Any, step: Step) -> dict[str, Any]:
    return {
        "timestamp": (EPOCH + timedelta(milliseconds=n)).isoformat(),
        "data": {
            "game_id": game_id,
            "state": GameState(result.state).value,
            "levels_completed": int(result.levels_completed),
            "win_levels": int(result.win_levels),
            "action_input": {"id": GameAction.from_id(step.action).name, "data": step.data, "reasoning": None},
            "guid": guid,
            "full_reset": bool(result.full_reset),
            "available_actions": [int(a) for a in result.available_actions],
        },
    }


def record_actions(game: Any, game_id: str, steps: list[Step]) -> list[dict[str, Any]]:
    """Play ``steps`` on a freshly constructed ``game`` after the opening RESET; return the lines."""
    digest = hashlib.sha256(json.dumps([game_id, [s.as_dict() for s in steps]]).encode()).digest()
    guid = str(uuid.UUID(bytes=digest[:16], version=4))
    lines = []
    opening = Step(0)
    result = game.perform_action(ActionInput(id=GameAction.RESET), raw=True)
    lines.append(_line(game_id, guid, 0, result, opening))
    for n, step in enumerate(steps, 1):
        result = game.perform_action(ActionInput(id=GameAction.from_id(step.action), data=step.data), raw=True)
        lines.append(_line(game_id, guid, n, result, step))
    return lines


def write_recording(path: Path, lines: list[dict[str, Any]]) -> None:
    write_text(path, "".join(json.dumps(line, separators=(", ", ": ")) + "\n" for line in lines))


def read_recording(path: Path) -> list[dict[str, Any]]:
    lines = []
    for n, raw in enumerate(read_text_document(path)[0].splitlines(), 1):
        if not raw.strip():
            continue
        try:
            lines.append(json.loads(raw))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{n}: not JSON ({err})") from err
    if not lines:
        raise ValueError(f"{path}: empty recording")
    return lines


def steps_of(lines: list[dict[str, Any]]) -> list[Step]:
    """The actions after the opening RESET (ids may be names or integers)."""
    out = []
    for line in lines[1:]:
        ai = line["data"]["action_input"]
        ident = ai["id"]
        action = GameAction.from_name(ident).value if isinstance(ident, str) else int(ident)
        data = ai.get("data") or {}
        out.append(Step(action, data.get("x"), data.get("y")))
    return out


class ReplayMismatch(AssertionError):
    """A recording did not re-execute to the same responses."""


FIELDS = ("state", "levels_completed", "win_levels", "full_reset", "available_actions")


def replay_recording(game: Any, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Re-execute a recording on a fresh game and compare every response field; return the new lines."""
    first = lines[0]["data"]
    if first["action_input"]["id"] not in ("RESET", 0):
        raise ReplayMismatch("the first line is not the opening RESET")
    replayed = record_actions(game, first["game_id"], steps_of(lines))
    for n, (want, got) in enumerate(zip(lines, replayed, strict=True)):
        for key in FIELDS:
            if want["data"][key] != got["data"][key]:
                raise ReplayMismatch(
                    f"line {n + 1}: {key} expected {want['data'][key]!r}, got {got['data'][key]!r} "
                    f"(action {want['data']['action_input']})"
                )
    return replayed
