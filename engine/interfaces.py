"""HUD overlays drawn on the 64x64 frame after the camera view (spec §6).

``RenderableUserDisplay`` deliberately defines no ``__init__`` and no attributes: games subclass it
with their own state and never call the base initialiser.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .enums import InteractionMode
from .sprites import Sprite

__all__ = ["RenderableUserDisplay", "ToggleableUserDisplay"]

_REMOVED = InteractionMode.REMOVED
_INTANGIBLE = InteractionMode.INTANGIBLE
_FRAME = 64
_INT8 = np.dtype(np.int8)


class RenderableUserDisplay(ABC):
    @abstractmethod
    def render_interface(self, frame: np.ndarray) -> np.ndarray:
        """Draw onto ``frame`` (a fresh 64x64 array) and return the frame to use from now on."""

    def draw_sprite(self, frame: np.ndarray, sprite: Sprite, start_x: int, start_y: int) -> np.ndarray:
        """Draw ``sprite``'s rendered cells >= 0 with their top-left at (start_x, start_y), clipped."""
        image = sprite._engine_image()
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

    def enable_all_by_tag(self, tag: str) -> None:
        for index, (first, _) in enumerate(self._sprite_pairs):
            if tag in first.tags:
                self.enable(index)

    def disabled_all_by_tag(self, tag: str) -> None:
        for index, (first, _) in enumerate(self._sprite_pairs):
            if tag in first.tags:
                self.disable(index)

    def enable_first_by_tag(self, tag: str) -> bool:
        for index, (first, _) in enumerate(self._sprite_pairs):
            if tag in first.tags and first._interaction is _REMOVED:
                self.enable(index)
                return True
        return False

    def disabled_first_by_tag(self, tag: str) -> bool:
        for index, (first, _) in enumerate(self._sprite_pairs):
            if tag in first.tags and first._interaction is _INTANGIBLE:
                self.disable(index)
                return True
        return False

    def clone(self) -> ToggleableUserDisplay:
        return ToggleableUserDisplay(self._sprite_pairs)

    def render_interface(self, frame: np.ndarray) -> np.ndarray:
        pairs = self._sprite_pairs
        if (
            type(self).draw_sprite is not RenderableUserDisplay.draw_sprite
            or type(frame) is not np.ndarray
            or frame.dtype != _INT8
            or frame.shape != (_FRAME, _FRAME)
        ):
            for first, second in pairs:
                for sprite in (first, second):
                    if sprite._interaction is not _REMOVED:
                        self.draw_sprite(frame, sprite, sprite._x, sprite._y)
            return frame
        # The pixels of drawing each pair in turn, composed once per distinct state of the sprites
        # (keyed on each sprite's change stamp, plus the bytes of arrays game code can write into).
        sprites = [sprite for pair in pairs for sprite in pair]
        stamps = [sprite._engine_stamp for sprite in sprites]
        overlay = self.__dict__.get("_engine_overlay")
        if overlay is not None and overlay[0] == sprites and overlay[1] == stamps:
            for sprite, raw in overlay[2]:
                if sprite.__dict__["pixels"].tobytes() != raw:
                    break
            else:
                values, mask = overlay[3], overlay[4]
                if mask is None:
                    frame[...] = values
                elif values is not None:
                    np.copyto(frame, values, where=mask)
                return frame
        parts_cache = self.__dict__.get("_engine_parts")
        if parts_cache is None or len(parts_cache) > 4096:
            parts_cache = self.__dict__["_engine_parts"] = {}
        parts = []
        exposed = []
        for sprite in sprites:
            if sprite._interaction is _REMOVED:
                continue
            state = sprite.__dict__
            if state.get("_engine_exposed", True):
                exposed.append((sprite, state["pixels"].tobytes()))
            image = sprite._engine_image()
            key = (image.token, sprite._x, sprite._y)
            part = parts_cache.get(key, parts_cache)
            if part is parts_cache:
                part = parts_cache[key] = _frame_cells(image, sprite._x, sprite._y)
            if part is not None:
                parts.append(part)
        if parts:
            # put() writes in order, so a later sprite's cell wins, as with sequential drawing.
            combined = parts[0] if len(parts) == 1 else np.concatenate(parts)
            where = combined >> 8
            values = np.zeros(_FRAME * _FRAME, dtype=np.int8)
            values.put(where, combined & 0xFF)
            mask = np.zeros(_FRAME * _FRAME, dtype=bool)
            mask.put(where, True)
            values = values.reshape(_FRAME, _FRAME)
            mask = mask.reshape(_FRAME, _FRAME)
            overlay = (sprites, stamps, exposed, values, None if mask.all() else mask)
        else:
            overlay = (sprites, stamps, exposed, None, np.zeros((_FRAME, _FRAME), dtype=bool))
        self.__dict__["_engine_overlay"] = overlay
        if overlay[4] is None:
            frame[...] = overlay[3]
        elif overlay[3] is not None:
            np.copyto(frame, overlay[3], where=overlay[4])
        return frame


def _frame_cells(image: object, start_x: int, start_y: int) -> np.ndarray | None:
    """The frame cells draw_sprite would write for ``image`` at (start_x, start_y): flat frame
    index shifted left by 8 bits, value (0..127) in the low byte; None if nothing is drawn."""
    rows, cols, values = image.cells()
    rows = rows + start_y
    cols = cols + start_x
    if start_x < 0 or start_y < 0 or start_x + image.w > _FRAME or start_y + image.h > _FRAME:
        keep = (rows >= 0) & (rows < _FRAME) & (cols >= 0) & (cols < _FRAME)
        rows = rows[keep]
        cols = cols[keep]
        values = values[keep]
    if rows.size == 0:
        return None
    return ((rows * _FRAME + cols) << 8) | (values.astype(np.int64) & 0xFF)
