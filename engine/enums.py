"""Enums and data models of the engine API (spec §2): actions, game states, FrameData.

The models follow pydantic v2 semantics (see ``engine._model``) without depending on pydantic.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

from ._model import (
    Field,
    FieldError,
    Model,
    ValidationError,
    bounded_int,
    coerce_bool,
    coerce_int,
    coerce_str,
    int_list,
    optional,
)

__all__ = [
    "MAX_REASONING_BYTES",
    "BlockingMode",
    "InteractionMode",
    "GameState",
    "SimpleAction",
    "ComplexAction",
    "GameAction",
    "ActionInput",
    "FrameData",
    "FrameDataRaw",
    "PlaceableArea",
    "ValidationError",
]

MAX_REASONING_BYTES = 16384


class BlockingMode(Enum):
    NOT_BLOCKED = 1
    BOUNDING_BOX = 2
    PIXEL_PERFECT = 3


class InteractionMode(Enum):
    TANGIBLE = 1
    INTANGIBLE = 2
    INVISIBLE = 3
    REMOVED = 4


class GameState(str, Enum):  # noqa: UP042 - the reference's (str, Enum), whose str() differs from StrEnum
    NOT_PLAYED = "NOT_PLAYED"
    NOT_FINISHED = "NOT_FINISHED"
    WIN = "WIN"
    GAME_OVER = "GAME_OVER"


class SimpleAction(Model):
    _engine_fields = (Field("game_id", str, coerce_str),)


class ComplexAction(Model):
    _engine_fields = (
        Field("game_id", str, coerce_str),
        Field("x", int, bounded_int(0, 63)),
        Field("y", int, bounded_int(0, 63)),
    )


class GameAction(Enum):
    """Action ids.  A plain Enum (``GameAction.ACTION6 == 6`` is False); ``.value`` is the id."""

    RESET = 0
    ACTION1 = 1
    ACTION2 = 2
    ACTION3 = 3
    ACTION4 = 4
    ACTION5 = 5
    ACTION6 = 6
    ACTION7 = 7

    def is_simple(self) -> bool:
        return self.action_type is SimpleAction

    def is_complex(self) -> bool:
        return self.action_type is ComplexAction

    def validate_data(self, data: dict[str, Any]) -> bool:
        self.action_type.model_validate(data)
        return True

    def set_data(self, data: dict[str, Any]) -> Model:
        # Process-wide side effect, as in the reference (the member is shared global state).
        self.action_data = self.action_type(**data)
        return self.action_data

    @classmethod
    def from_id(cls, action_id: int) -> GameAction:
        try:
            return _ACTIONS_BY_ID[action_id]
        except (KeyError, TypeError):
            raise ValueError(f"No GameAction with id {action_id}") from None

    @classmethod
    def from_name(cls, name: str) -> GameAction:
        try:
            return cls.__members__[name.upper()]
        except (KeyError, AttributeError):
            raise ValueError(f"No GameAction with name '{name}'") from None

    @classmethod
    def all_simple(cls) -> list[GameAction]:
        return [member for member in cls if member.is_simple()]

    @classmethod
    def all_complex(cls) -> list[GameAction]:
        return [member for member in cls if member.is_complex()]


for _member in GameAction:
    _member.action_type = ComplexAction if _member is GameAction.ACTION6 else SimpleAction
    _member.action_data = _member.action_type()

# Keyed by exact int ids only (bools and floats are not ids).
_ACTIONS_BY_ID: dict[Any, GameAction] = {member.value: member for member in GameAction}


def _validate_action_id(value: Any) -> GameAction:
    if isinstance(value, GameAction):
        return value
    if isinstance(value, bool) or isinstance(value, (str, bytes)):
        raise FieldError("enum", "Input should be 0, 1, 2, 3, 4, 5, 6 or 7")
    try:
        number = coerce_int(value)
    except FieldError:
        raise FieldError("enum", "Input should be 0, 1, 2, 3, 4, 5, 6 or 7") from None
    member = _ACTIONS_BY_ID.get(number)
    if member is None:
        raise FieldError("enum", "Input should be 0, 1, 2, 3, 4, 5, 6 or 7")
    return member


def _validate_data_dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FieldError("dict_type", "Input should be a valid dictionary")
    for key in value:
        if not isinstance(key, str):
            raise FieldError("string_type", "Input should be a valid string")
    return dict(value)


def _validate_reasoning(value: Any) -> Any:
    if value is None:
        return None
    try:
        encoded = json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError) as err:
        raise FieldError("value_error", f"Value error, reasoning must be JSON-serialisable: {err}") from None
    size = len(encoded.encode("utf-8"))
    if size > MAX_REASONING_BYTES:
        raise FieldError("value_error", f"Value error, reasoning exceeds {MAX_REASONING_BYTES} bytes ({size} bytes)")
    return value


class ActionInput(Model):
    """An action sent to a game: ``id`` (GameAction or its int), ``data`` (copied, not validated), ``reasoning``."""

    _engine_fields = (
        Field("id", lambda: GameAction.RESET, _validate_action_id),
        Field("data", dict, _validate_data_dict),
        Field("reasoning", lambda: None, _validate_reasoning),
    )


def _validate_game_state(value: Any) -> GameState:
    if isinstance(value, GameState):
        return value
    try:
        return GameState(value)
    except ValueError:
        raise FieldError("enum", "Input should be 'NOT_PLAYED', 'NOT_FINISHED', 'WIN' or 'GAME_OVER'") from None


def _validate_action_input(value: Any) -> ActionInput:
    if isinstance(value, ActionInput):
        return value  # the same object is kept (spec §2.6)
    if isinstance(value, dict):
        return ActionInput(**value)
    raise FieldError("model_type", "Input should be a valid dictionary or instance of ActionInput")


def _validate_frames(value: Any) -> list[list[list[int]]]:
    if not isinstance(value, (list, tuple)):
        raise FieldError("list_type", "Input should be a valid list")
    frames = []
    for grid in value:
        if not isinstance(grid, (list, tuple)):
            raise FieldError("list_type", "Input should be a valid list")
        rows = []
        for row in grid:
            if not isinstance(row, (list, tuple)):
                raise FieldError("list_type", "Input should be a valid list")
            if all(type(cell) is int for cell in row):
                rows.append(list(row))
            else:
                rows.append([coerce_int(cell) for cell in row])
        frames.append(rows)
    return frames


_FRAME_COMMON = (
    Field("state", lambda: GameState.NOT_PLAYED, _validate_game_state),
)


_FAST_FIELDS_SET = frozenset(
    ("game_id", "frame", "state", "levels_completed", "win_levels", "action_input", "full_reset", "available_actions")
)


def _fast_frame_data(
    cls: type,
    game_id: str,
    frame: list,
    state: GameState,
    levels_completed: int,
    win_levels: int,
    action_input: ActionInput,
    full_reset: bool,
    available_actions: list[int],
) -> Any:
    """A FrameData / FrameDataRaw built without validation (engine-produced values are already
    well-formed); ``cls._engine_frame_key`` is where the class keeps its frames."""
    obj = cls.__new__(cls)
    obj.__dict__.update(
        game_id=game_id,
        state=state,
        levels_completed=levels_completed,
        win_levels=win_levels,
        action_input=action_input,
        guid=None,
        full_reset=full_reset,
        available_actions=available_actions,
    )
    obj.__dict__[cls._engine_frame_key] = frame
    obj._engine_fields_set = _FAST_FIELDS_SET
    return obj


class FrameData(Model):
    """One engine response: frames as nested lists of int, state, level counts, the action echoed."""

    _engine_fields = (
        Field("game_id", str, coerce_str),
        Field("frame", list, _validate_frames),
        *_FRAME_COMMON,
        Field("levels_completed", int, bounded_int(0, 254)),
        Field("win_levels", int, bounded_int(0, 254)),
        Field("action_input", ActionInput, _validate_action_input),
        Field("guid", lambda: None, optional(coerce_str)),
        Field("full_reset", lambda: False, coerce_bool),
        Field("available_actions", list, int_list),
    )

    def is_empty(self) -> bool:
        return len(self.frame) == 0

    def __str__(self) -> str:
        return self.model_dump_json(indent=2)

    _engine_frame_key = "frame"  # where _engine_fast puts the frames
    _engine_fast = classmethod(_fast_frame_data)


class FrameDataRaw(Model):
    """Like FrameData, but ``frame`` is a private, unserialised list of numpy arrays."""

    _engine_fields = (
        Field("game_id", str, coerce_str),
        *_FRAME_COMMON,
        Field("levels_completed", int, coerce_int),
        Field("win_levels", int, coerce_int),
        Field("action_input", ActionInput, _validate_action_input),
        Field("guid", lambda: None, optional(coerce_str)),
        Field("full_reset", lambda: False, coerce_bool),
        Field("available_actions", list, int_list),
    )

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._frame: list = []

    @property
    def frame(self) -> list:
        return self._frame

    @frame.setter
    def frame(self, value: list) -> None:
        self._frame = value

    def is_empty(self) -> bool:
        return len(self._frame) == 0

    def __str__(self) -> str:
        return self.model_dump_json(indent=2)

    def _engine_dump_fields(self) -> list[tuple[str, Any]]:
        return [(field.name, self.__dict__.get(field.name)) for field in self._engine_fields]

    def __eq__(self, other: object) -> bool:
        # pydantic compares private attributes too; frames are arrays, compared cell by cell.
        if type(self) is not type(other):
            return NotImplemented
        if not super().__eq__(other):
            return False
        mine, theirs = self._frame, other._frame  # type: ignore[attr-defined]
        if len(mine) != len(theirs):
            return False
        import numpy as np

        return all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True))

    __hash__ = None  # type: ignore[assignment]

    _engine_frame_key = "_frame"  # where _engine_fast puts the frames
    _engine_fast = classmethod(_fast_frame_data)


class PlaceableArea:
    """A lattice of placement cells (used by ``ARCBaseGame._get_valid_actions``)."""

    x: int = 0
    y: int = 0
    width: int = 0
    height: int = 0
    x_scale: int = 1
    y_scale: int = 1

    def __init__(self, x: int, y: int, width: int, height: int, x_scale: int = 1, y_scale: int = 1) -> None:
        self.x = x
        self.y = y
        self.width = width
        self.height = height
        self.x_scale = x_scale
        self.y_scale = y_scale

    def __repr__(self) -> str:
        return (
            f"PlaceableArea(x={self.x}, y={self.y}, width={self.width}, height={self.height}, "
            f"x_scale={self.x_scale}, y_scale={self.y_scale})"
        )

