"""``ARCBaseGame``: levels, the action loop, resets and progress (spec §7).

Games subclass it, call ``super().__init__`` and override ``step()`` / ``on_set_level()``.  Every
hook listed in spec §7.14 is reached through normal attribute lookup so overrides take effect.
Engine-private state on game objects uses the ``_engine_`` prefix (games own every other name).
"""

from __future__ import annotations

import os
from abc import ABC
from typing import Any

import numpy as np

from ._attrs import read_only
from ._model import ValidationError
from .camera import Camera
from .enums import ActionInput, FrameData, FrameDataRaw, GameAction, GameState
from .level import Level
from .sprites import Sprite, colliding_sprites
from .watchdog import enter as _watch_enter
from .watchdog import leave as _watch_leave

__all__ = ["ARCBaseGame", "MAX_FRAME_PER_ACTION"]

MAX_FRAME_PER_ACTION = 1000

_RESET = GameAction.RESET
_WIN = GameState.WIN
_GAME_OVER = GameState.GAME_OVER
_NOT_FINISHED = GameState.NOT_FINISHED
_NOT_PLAYED = GameState.NOT_PLAYED
_TERMINAL = (_WIN, _GAME_OVER)

# One list shared by every game built without ``available_actions`` (reference quirk Q13).
_SHARED_DEFAULT_ACTIONS = [1, 2, 3, 4, 5, 6]

# Frame production modes of the engine loop (``perform_action`` always uses FRAMES_ALL).
FRAMES_ALL = "all"  # every frame, exactly like the reference
FRAMES_LAST = "last"  # every camera.render call happens; only the last frame is returned
FRAMES_NONE = "none"  # no composition; interfaces still run on a scratch canvas (see env docs)


def _copy_actions(actions: Any) -> list[int]:
    out = list(actions)
    for value in out:
        if type(value) is not int:
            return [int(v) for v in out]
    return out


def _check_count(name: str, value: Any) -> None:
    if type(value) is not int or not 0 <= value <= 254:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value <= 254:
            return
        raise ValidationError(
            "FrameData",
            [{"type": "less_than_equal", "loc": (name,), "msg": "Input should be between 0 and 254", "input": value}],
        )


class _RowLists:
    """Converts 64x64 int8 frames to nested lists of int like ``ndarray.tolist()``.

    A frame repeats the previous one, or is made of rows seen before (backgrounds, walls, the
    same sprites in other places); copying a ready row list costs a fraction of converting the
    row.  So the previous frame's rows are kept, and every row ever converted is kept by its 64
    bytes (shared by all games: a template is never handed out, only copies), and only rows never
    seen are converted.  (On CPython 3.11 even the copy is dominated by reference-count updates
    on the few small-int objects a frame holds.)
    """

    __slots__ = ("raw", "templates")

    def __init__(self) -> None:
        self.raw: bytes | None = None  # the previous frame's bytes
        self.templates: list[list[int]] = []  # its rows

    def __reduce__(self) -> tuple:
        # A cache: copies and pickles of a game start empty (a deep copy of the row lists would
        # cost 4096 atomic copies, most of a game snapshot's time).
        return (_RowLists, ())

    def convert(self, frame: Any) -> Any:
        if type(frame) is not np.ndarray or frame.dtype != _INT8 or frame.shape != (64, 64) or not frame.flags.c_contiguous:
            return frame.tolist()
        raw = frame.tobytes()
        if raw != self.raw:
            # One bytes object per row, in one C call.  (An "S64" item drops trailing zero bytes,
            # but all rows are 64 bytes long, so equal keys still mean equal rows.)
            keys = frame.view(_ROW_KEY).ravel().tolist()
            templates = list(map(_ROWS_GET, keys))
            if None in templates:
                if len(_ROWS) > _ROWS_LIMIT:
                    _ROWS.clear()
                for index, row in enumerate(templates):
                    if row is None:
                        key = keys[index]
                        row = _ROWS.get(key)  # the same new row twice in one frame
                        if row is None:
                            row = _ROWS[key] = frame[index].tolist()
                        templates[index] = row
            self.raw = raw
            self.templates = templates
        # Private copies: the caller may mutate the lists it gets.
        return list(map(list.copy, self.templates))


# Row lists by the row's bytes (as "S64" items), for every game; bounded, clearing only costs
# reconversion.
_ROWS: dict[bytes, list[int]] = {}
_ROWS_GET = _ROWS.get
_ROWS_LIMIT = 16384
_ROW_KEY = np.dtype("S64")
_INT8 = np.dtype(np.int8)


class ARCBaseGame(ABC):  # noqa: B024 - the reference is an ABC without abstract methods
    # Engine-only state; class-level defaults keep game instances clean until needed.
    _engine_only_reset_levels: bool | None = None
    _engine_rows: _RowLists | None = None

    def __init__(
        self,
        game_id: str,
        levels: list[Level],
        camera: Camera | None = None,
        debug: bool = False,
        win_score: int = 1,
        available_actions: list[int] = _SHARED_DEFAULT_ACTIONS,
        seed: int = 0,
    ) -> None:
        if not levels:
            raise ValueError("Game must have at least one level")
        self._game_id = game_id
        # The game plays lazy clones of its private templates (see Level._engine_lazy_clone): a level
        # is cloned when first touched, and copies of the game share the levels nobody touched yet.
        clean = [level.clone() for level in levels]
        self._levels = [Level._engine_lazy_clone(level) for level in clean]
        self._clean_levels = clean
        self._current_level_index = 0
        self._debug = debug
        self._camera = camera if camera is not None else Camera()
        self._state = _NOT_PLAYED
        self._score = 0
        self._next_level = False
        self._action = ActionInput()
        self._action_complete = False
        self._action_count = 0
        self._full_reset = False
        self._win_score = win_score if win_score > 1 else len(levels)
        self.set_level(0)
        self._available_actions = available_actions
        self._placeable_sprite: Sprite | None = None
        self._seed = seed

    # ------------------------------------------------------------------ properties
    @property
    def _clean_levels(self) -> list[Level]:
        """The pristine level templates.  Handing them to game code first materializes any lazily
        cloned level, so a game that edits a template afterwards cannot change those clones."""
        for level in getattr(self, "_levels", None) or ():
            if isinstance(level, Level) and level._engine_lazy:
                level._engine_materialize()
        return self._engine_clean_levels

    @_clean_levels.setter
    def _clean_levels(self, levels: list[Level]) -> None:
        # Plain attribute writes (never self.__dict__): CPython keeps attribute reads on objects
        # whose __dict__ was never requested about 2.5x faster, and game code reads self.* a lot.
        self._engine_clean_levels = levels

    @property
    def current_level(self) -> Level:
        return self._levels[self._current_level_index]

    camera = read_only("_camera", "Camera")
    game_id = read_only("_game_id", "str")
    win_score = read_only("_win_score", "int")
    level_index = read_only("_current_level_index", "int")
    action = read_only("_action", "ActionInput")

    # ------------------------------------------------------------------ the action loop
    def perform_action(self, action_input: ActionInput, raw: bool = False) -> FrameData | FrameDataRaw:
        return self._engine_perform(action_input, raw, FRAMES_ALL)

    def _engine_perform(self, action_input: ActionInput, raw: bool, frames_mode: str) -> FrameData | FrameDataRaw:
        """``perform_action`` with a choice of which frames to produce (spec §7.3), under the step time limit
        (`engine.watchdog`: game code that never returns raises StepTimeout instead of hanging the caller)."""
        token = _watch_enter()
        try:
            return self._engine_perform_unwatched(action_input, raw, frames_mode)
        finally:
            _watch_leave(token)

    def _engine_perform_unwatched(self, action_input: ActionInput, raw: bool, frames_mode: str
                                  ) -> FrameData | FrameDataRaw:
        self._full_reset = False
        if action_input.id is _RESET:
            self.handle_reset()
        elif self._state in _TERMINAL:
            # Q1: the reference passes obsolete keyword names here, so both counters fall back to 0.
            return FrameData._engine_fast(
                self._game_id, [], self._state, 0, 0, action_input, False, _copy_actions(self._available_actions)
            )
        self._state = _NOT_FINISHED
        self._action = action_input
        self._action_complete = False
        if action_input.id is not _RESET:
            self._action_count += 1

        frames: list = []
        iterations = 0
        keep_all = frames_mode == FRAMES_ALL
        render_frames = frames_mode != FRAMES_NONE
        last = None
        # The hooks below are reached through normal lookup when a game overrides them; otherwise
        # their bodies are inlined (same reads, no Python calls) - checked once per action.
        cls = type(self)
        own_completion = cls.is_action_complete is not _BASE_IS_ACTION_COMPLETE
        own_camera = cls.camera is not _BASE_CAMERA or cls.current_level is not _BASE_CURRENT_LEVEL
        to_lists = None if raw or not render_frames else self._engine_lists
        while True:
            if own_completion:
                if self.is_action_complete():
                    break
            elif not self._next_level and self._action_complete:
                break
            if iterations > MAX_FRAME_PER_ACTION:
                raise ValueError("Action took too many frames")
            if self._next_level:
                self.set_level(self._current_level_index + 1)
                self._next_level = False
            else:
                self.step()
            if render_frames:
                if own_camera:
                    last = self.camera.render(self.current_level.get_sprites())
                else:
                    last = self._camera.render(self._levels[self._current_level_index].get_sprites())
                if keep_all:
                    frames.append(last if to_lists is None else to_lists(last))
            else:
                self._engine_run_interfaces_only()
            iterations += 1
        if frames_mode == FRAMES_LAST and last is not None:
            frames.append(last if to_lists is None else to_lists(last))

        if raw:
            return FrameDataRaw._engine_fast(
                self._game_id,
                frames,
                self._state,
                self._score,
                self._win_score,
                action_input,
                self._full_reset,
                self._available_actions,
            )
        score = self._score
        win_score = self._win_score
        if type(score) is not int or not 0 <= score <= 254:
            _check_count("levels_completed", score)
        if type(win_score) is not int or not 0 <= win_score <= 254:
            _check_count("win_levels", win_score)
        state = self._state
        full_reset = self._full_reset
        return FrameData._engine_fast(
            self._game_id,
            frames,
            state if type(state) is GameState else GameState(state),
            score,
            win_score,
            action_input,
            full_reset if full_reset is True or full_reset is False else bool(full_reset),
            _copy_actions(self._available_actions),
        )

    @property
    def _engine_lists(self) -> Any:
        """``frame -> frame.tolist()``, reusing the rows that equal the previous frame's (see _RowLists)."""
        rows = self._engine_rows
        if rows is None:
            rows = self._engine_rows = _RowLists()
        return rows.convert

    def _engine_run_interfaces_only(self) -> None:
        """FRAMES_NONE stand-in for ``camera.render``: keeps interface side effects, skips drawing."""
        camera = self.camera
        if type(camera).render is not Camera.render:
            camera.render(self.current_level.get_sprites())  # a custom render may do anything: run it
            return
        canvas = np.empty((64, 64), dtype=np.int8)
        canvas.fill(camera._letter_box)  # same as np.full (a Python-level wrapper), cheaper
        for interface in camera._interfaces:
            canvas = interface.render_interface(canvas)

    # ------------------------------------------------------------------ resets
    def handle_reset(self) -> None:
        only_levels = self._engine_only_reset_levels
        if only_levels is None:
            only_levels = os.environ.get("ONLY_RESET_LEVELS") == "true"
        if only_levels and self._state != _WIN:
            self.level_reset()
        elif self._action_count == 0 or self._state == _WIN:
            self.full_reset()
        else:
            self.level_reset()

    def full_reset(self) -> None:
        # Levels other than the first are cloned lazily, on first use (see Level.lazy_clone).
        clean = self._engine_clean_levels
        self._levels = [clean[0].clone()] + [Level._engine_lazy_clone(level) for level in clean[1:]]
        self._score = 0
        self._action_count = 0
        self._full_reset = True
        self.set_level(0)
        self._state = _NOT_FINISHED

    def level_reset(self) -> None:
        index = self._current_level_index
        self._levels[index] = self._engine_clean_levels[index].clone()
        self.set_level(index)
        self._state = _NOT_FINISHED

    # ------------------------------------------------------------------ level selection
    def set_level(self, index: int) -> None:
        count = len(self._levels)
        if not 0 <= index < count:
            raise IndexError(f"Level index {index} out of range [0, {count})")
        self._current_level_index = index
        self._action_count = 0
        level = self.current_level
        grid_size = level.grid_size
        if grid_size:
            self.camera.resize(grid_size[0], grid_size[1])
        self.on_set_level(level)

    def set_level_by_name(self, name: str) -> None:
        for index, level in enumerate(self._levels):
            if level.name == name:
                self.set_level(index)
                return
        raise ValueError(f"Level with name {name} not found")

    # ------------------------------------------------------------------ game hooks
    def step(self) -> None:
        self.complete_action()

    def on_set_level(self, level: Level) -> None:  # noqa: B027 - optional hook, deliberately empty
        pass

    # ------------------------------------------------------------------ progress
    def next_level(self) -> None:
        self._score += 1
        if not self.is_last_level():
            self._next_level = True
        else:
            self.win()

    def win(self) -> None:
        self._state = _WIN

    def lose(self) -> None:
        self._state = _GAME_OVER

    def complete_action(self) -> None:
        self._action_complete = True

    def is_action_complete(self) -> bool:
        return not self._next_level and self._action_complete

    def is_last_level(self) -> bool:
        return self._current_level_index == len(self._levels) - 1

    # ------------------------------------------------------------------ movement
    def try_move_sprite(self, sprite: Sprite, dx: int, dy: int) -> list[Sprite]:
        x, y = sprite.x, sprite.y
        sprite.move(dx, dy)
        hits = colliding_sprites(sprite, self.current_level.get_sprites())
        if hits:
            sprite.set_position(x, y)
        return hits

    def try_move(self, sprite_name: str, dx: int, dy: int) -> list[Sprite]:
        for sprite in self.current_level._sprites:
            if sprite.name == sprite_name:
                return self.try_move_sprite(sprite, dx, dy)
        raise ValueError(f"No sprite found with name: {sprite_name}")

    # ------------------------------------------------------------------ pixel read-back
    def get_pixels(self, x: int, y: int, width: int, height: int) -> np.ndarray:
        camera = self.camera
        if type(camera)._raw_render is Camera._raw_render:
            # Same cells as slicing a fresh view (negative bounds included), copying only the window.
            composite = camera._engine_compose(self.current_level._sprites)
            return composite.canvas[composite.view_slice][y : y + height, x : x + width].copy()
        view = camera._raw_render(self.current_level.get_sprites())
        return view[y : y + height, x : x + width]

    def get_pixels_at_sprite(self, sprite: Sprite) -> np.ndarray:
        camera = self.camera
        return self.get_pixels(sprite.x - camera.x, sprite.y - camera.y, sprite.width, sprite.height)

    # ------------------------------------------------------------------ graph-builder helpers (spec §7.11)
    def set_placeable_sprite(self, sprite: Sprite | None) -> None:
        self._placeable_sprite = sprite

    def _is_sprite_clickable_now(self, sprite: Sprite) -> bool:
        return True

    def _get_valid_actions(self) -> list[ActionInput]:
        actions: list[ActionInput] = []
        for action_id in self._available_actions:
            if action_id in (1, 2, 3, 4, 5):
                actions.append(ActionInput(id=GameAction.from_id(action_id)))
            elif action_id == 6:
                if self._placeable_sprite:
                    actions.extend(self._get_valid_placeable_actions())
                else:
                    actions.extend(self._get_valid_clickable_actions())
        return actions

    def _get_valid_placeable_actions(self) -> list[ActionInput]:
        scale, x_off, y_off = self.camera._calculate_scale_and_offset()
        actions = []
        for area in self.current_level.placeable_areas:
            y = area.y
            while y < area.y + area.height:
                x = area.x
                while x < area.x + area.width:
                    actions.append(
                        ActionInput(id=GameAction.ACTION6, data={"x": x * scale + x_off, "y": y * scale + y_off})
                    )
                    x += area.x_scale
                y += area.y_scale
        return actions

    def _get_valid_clickable_actions(self) -> list[ActionInput]:
        scale, x_off, y_off = self.camera._calculate_scale_and_offset()
        level = self.current_level
        candidates = level.get_sprites_by_tag("sys_click") + level.get_sprites_by_tag("sys_place")
        actions = []
        for sprite in candidates:
            if not self._is_sprite_clickable_now(sprite):
                continue
            image = sprite.render()
            every_pixel = "sys_every_pixel" in sprite.tags
            rows, cols = np.nonzero(image >= 0)
            for row, col in zip(rows.tolist(), cols.tolist(), strict=True):
                actions.append(
                    ActionInput(
                        id=GameAction.ACTION6,
                        data={"x": (sprite.x + col) * scale + x_off, "y": (sprite.y + row) * scale + y_off},
                    )
                )
                if not every_pixel:
                    break
        return actions

    def _get_hidden_state(self) -> np.ndarray:
        return np.zeros((4, 4), dtype=np.int8)

    def _get_graph_location(self) -> Any:
        return None

    # ------------------------------------------------------------------ misc
    def debug(self, message: str) -> None:
        if self._debug:
            print(message)


_BASE_IS_ACTION_COMPLETE = ARCBaseGame.is_action_complete
_BASE_CAMERA = ARCBaseGame.__dict__["camera"]
_BASE_CURRENT_LEVEL = ARCBaseGame.__dict__["current_level"]
