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
        drawn = []
        for first, second in self._sprite_pairs:
            if first._interaction is not _REMOVED:
                drawn.append(first)
            if second._interaction is not _REMOVED:
                drawn.append(second)
        if (
            type(self).draw_sprite is not RenderableUserDisplay.draw_sprite
            or type(frame) is not np.ndarray
            or frame.dtype != _INT8
            or frame.shape != (_FRAME, _FRAME)
        ):
            for sprite in drawn:
                self.draw_sprite(frame, sprite, sprite._x, sprite._y)
            return frame
        # Same pixels as drawing each sprite in turn, composed once per distinct pair state.
        images = [sprite._engine_image() for sprite in drawn]
        key = [(image.token, sprite._x, sprite._y) for sprite, image in zip(drawn, images, strict=True)]
        overlay = self.__dict__.get("_engine_overlay")
        if overlay is None or overlay[0] != key:
            values = np.zeros((_FRAME, _FRAME), dtype=np.int8)
            mask = np.zeros((_FRAME, _FRAME), dtype=bool)
            for sprite, image in zip(drawn, images, strict=True):
                _paint(values, mask, image, sprite._x, sprite._y)
            overlay = (key, values, mask if not mask.all() else None)
            self.__dict__["_engine_overlay"] = overlay
        if overlay[2] is None:
            frame[...] = overlay[1]
        else:
            np.copyto(frame, overlay[1], where=overlay[2])
        return frame


def _paint(values: np.ndarray, mask: np.ndarray, image: object, start_x: int, start_y: int) -> None:
    """draw_sprite into an overlay: values written where the image is >= 0, and mask marks them."""
    x0 = max(start_x, 0)
    y0 = max(start_y, 0)
    x1 = min(start_x + image.w, _FRAME)
    y1 = min(start_y + image.h, _FRAME)
    if x0 >= x1 or y0 >= y1:
        return
    source = image.img8[y0 - start_y : y1 - start_y, x0 - start_x : x1 - start_x]
    draw = image.draw
    if draw is None:
        values[y0:y1, x0:x1] = source
        mask[y0:y1, x0:x1] = True
    else:
        cells = draw[y0 - start_y : y1 - start_y, x0 - start_x : x1 - start_x]
        np.copyto(values[y0:y1, x0:x1], source, where=cells)
        mask[y0:y1, x0:x1] |= cells
