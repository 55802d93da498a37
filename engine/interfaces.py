"""HUD overlays drawn on the 64x64 frame after the camera view (spec §6).

``RenderableUserDisplay`` deliberately defines no ``__init__`` and no attributes: games subclass it
with their own state and never call the base initialiser.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import Any

import numpy as np

from . import sprites as _sprites_module
from .enums import InteractionMode
from .sprites import Sprite, changed_indices, image_of

__all__ = ["RenderableUserDisplay", "ToggleableUserDisplay"]

_REMOVED = InteractionMode.REMOVED
_INTANGIBLE = InteractionMode.INTANGIBLE
_FRAME = 64
_INT8 = np.dtype(np.int8)
_NDARRAY = np.ndarray
_SHAPE = (_FRAME, _FRAME)
_STRIDES = (_FRAME, 1)  # with _SHAPE and int8: C-contiguous, so put()'s flat indices are (row, col)
_stamp_of = attrgetter("_engine_stamp")
_CACHE_SIZE = 1024  # entries per overlay cache; clearing only costs recomputation


class RenderableUserDisplay(ABC):
    @abstractmethod
    def render_interface(self, frame: np.ndarray) -> np.ndarray:
        """Draw onto ``frame`` (a fresh 64x64 array) and return the frame to use from now on."""

    def draw_sprite(self, frame: np.ndarray, sprite: Sprite, start_x: int, start_y: int) -> np.ndarray:
        """Draw ``sprite``'s rendered cells >= 0 with their top-left at (start_x, start_y), clipped."""
        image = image_of(sprite)
        x0 = max(start_x, 0)
        y0 = max(start_y, 0)
        x1 = min(start_x + image.w, _FRAME)
        y1 = min(start_y + image.h, _FRAME)
        if x0 >= x1 or y0 >= y1:
            return frame
        source = image.img[y0 - start_y : y1 - start_y, x0 - start_x : x1 - start_x]
        mask = image.draw
        if mask is None:
            frame[y0:y1, x0:x1] = source
        else:
            np.copyto(
                frame[y0:y1, x0:x1],
                source,
                where=mask[y0 - start_y : y1 - start_y, x0 - start_x : x1 - start_x],
                casting="unsafe",
            )
        return frame


class ToggleableUserDisplay(RenderableUserDisplay):
    """Pairs of (enabled, disabled) sprites; each pair shows one or the other."""

    def __init__(self, sprite_pairs: list[tuple[Sprite, Sprite]] = []) -> None:  # noqa: B006 - reference signature; never mutated
        self._sprite_pairs = [(first.clone(), second.clone()) for first, second in sprite_pairs]

    def _check_index(self, index: int) -> None:
        if index < 0 or index >= len(self._sprite_pairs):
            raise ValueError(f"Index {index} is out of bounds")

    def is_enabled(self, index: int) -> bool:
        self._check_index(index)
        return self._sprite_pairs[index][0]._interaction is not _REMOVED

    def enable(self, index: int) -> None:
        self._check_index(index)
        first, second = self._sprite_pairs[index]
        first.set_interaction(_INTANGIBLE)
        second.set_interaction(_REMOVED)

    def disable(self, index: int) -> None:
        self._check_index(index)
        first, second = self._sprite_pairs[index]
        first.set_interaction(_REMOVED)
        second.set_interaction(_INTANGIBLE)

    def _tagged(self, tag: str) -> Iterator[tuple[int, Sprite]]:
        """Index and first sprite of every pair whose first sprite has ``tag``, in pair order."""
        for index, (first, _) in enumerate(self._sprite_pairs):
            if tag in first.tags:
                yield index, first

    def _toggle_first(self, tag: str, interaction: InteractionMode, toggle: Callable[[int], None]) -> bool:
        """``toggle`` the first tagged pair whose first sprite is exactly ``interaction``; False if none."""
        for index, first in self._tagged(tag):
            if first._interaction is interaction:
                toggle(index)
                return True
        return False

    def enable_all_by_tag(self, tag: str) -> None:
        for index, _ in self._tagged(tag):
            self.enable(index)

    def disabled_all_by_tag(self, tag: str) -> None:
        for index, _ in self._tagged(tag):
            self.disable(index)

    def enable_first_by_tag(self, tag: str) -> bool:
        return self._toggle_first(tag, _REMOVED, self.enable)

    def disabled_first_by_tag(self, tag: str) -> bool:
        return self._toggle_first(tag, _INTANGIBLE, self.disable)

    def clone(self) -> ToggleableUserDisplay:
        return ToggleableUserDisplay(self._sprite_pairs)

    def render_interface(self, frame: np.ndarray) -> np.ndarray:
        pairs = self._sprite_pairs
        if (
            type(frame) is not _NDARRAY
            or frame.dtype is not _INT8
            or frame.strides != _STRIDES
            or frame.shape != _SHAPE
            or type(self).draw_sprite is not RenderableUserDisplay.draw_sprite
        ):
            for first, second in pairs:
                for sprite in (first, second):
                    if sprite._interaction is not _REMOVED:
                        self.draw_sprite(frame, sprite, sprite.x, sprite.y)
            return frame
        # Drawing each pair in turn writes a fixed set of (flat index, value) cells, later ones
        # winning: kept per sprite and concatenated, updated for the sprites whose change stamp
        # moved or whose exposed pixel array was written into, and applied with one put().
        overlay = self.__dict__.get("_engine_overlay")
        epoch = _sprites_module._epoch
        if overlay is None or overlay.pairs != pairs:
            overlay = self.__dict__["_engine_overlay"] = _Overlay(pairs)
            changed = range(len(overlay.sprites))
        elif overlay.epoch == epoch:
            changed = []
        else:
            stamps = list(map(_stamp_of, overlay.sprites))
            old = overlay.stamps
            changed = [] if stamps == old else changed_indices(stamps, old)
        overlay.epoch = epoch
        if overlay.exposed:
            sprites = overlay.sprites
            for index, raw in overlay.exposed.items():
                if index not in changed and sprites[index].__dict__["pixels"].tobytes() != raw:
                    changed = [*changed, index]
        if changed:
            overlay.update(changed)
        if overlay.where is not None:
            frame.put(overlay.where, overlay.values)
        return frame


class _Overlay:
    """The cells a ToggleableUserDisplay draws, per sprite of its pairs (see render_interface)."""

    __slots__ = ("pairs", "sprites", "stamps", "epoch", "exposed", "keys", "cells", "combined", "where", "values")

    def __init__(self, pairs: list) -> None:
        self.pairs = list(pairs)
        self.sprites = [sprite for pair in pairs for sprite in pair]
        self.stamps = list(map(_stamp_of, self.sprites))
        self.epoch = -1
        # Sprite index -> pixel bytes, for drawn sprites whose arrays game code may write into.
        self.exposed: dict[int, bytes] = {}
        # Per sprite: (image token, x, y) as drawn, or None when not drawn.
        self.keys: list = [None] * len(self.sprites)
        # (image token, x, y) -> (flat frame indices, values) of the cells drawn; tuple of the
        # keys of every drawn sprite -> the cells of all of them, in drawing order.
        self.cells: dict[tuple, tuple] = {}
        self.combined: dict[tuple, tuple] = {}
        self.where: np.ndarray | None = None
        self.values: np.ndarray | None = None

    def update(self, changed: Any) -> None:
        sprites = self.sprites
        keys = self.keys
        exposed = self.exposed
        self.stamps = list(map(_stamp_of, sprites))
        moved = False
        for index in changed:
            sprite = sprites[index]
            key = None
            exposed.pop(index, None)
            if sprite._interaction is not _REMOVED:
                if sprite._engine_exposed:
                    pixels = sprite.__dict__["pixels"]
                    if type(pixels) is _NDARRAY:
                        exposed[index] = pixels.tobytes()
                image = image_of(sprite)
                key = (image.token, sprite.x, sprite.y)
                if key not in self.cells:
                    if len(self.cells) >= _CACHE_SIZE:
                        self.cells.clear()
                    self.cells[key] = _frame_cells(image, sprite.x, sprite.y)
            if key != keys[index]:
                keys[index] = key
                moved = True
        if not moved:
            return
        drawn = tuple(key for key in keys if key is not None)
        found = self.combined.get(drawn)
        if found is None:
            cells = self.cells
            parts = [cells[key] for key in drawn]
            parts = [part for part in parts if part[0].size]
            if not parts:
                found = (None, None)
            elif len(parts) == 1:
                found = parts[0]
            else:
                found = (np.concatenate([part[0] for part in parts]), np.concatenate([part[1] for part in parts]))
            if len(self.combined) >= _CACHE_SIZE:
                self.combined.clear()
            self.combined[drawn] = found
        self.where, self.values = found


def _frame_cells(image: Any, start_x: int, start_y: int) -> tuple[np.ndarray, np.ndarray]:
    """(flat frame indices, int8 values) of the cells draw_sprite writes for ``image`` at
    (start_x, start_y), in drawing order."""
    rows, cols, values = image.cells()
    rows = rows + start_y
    cols = cols + start_x
    if start_x < 0 or start_y < 0 or start_x + image.w > _FRAME or start_y + image.h > _FRAME:
        keep = (rows >= 0) & (rows < _FRAME) & (cols >= 0) & (cols < _FRAME)
        rows = rows[keep]
        cols = cols[keep]
        values = values[keep]
    return rows * _FRAME + cols, values
