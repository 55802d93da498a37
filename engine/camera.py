"""``Camera``: the window onto a level and the 64x64 frame renderer (spec §5).

Speed: the composited camera-resolution view and the letterboxed, up-scaled 64x64 base frame are
cached per camera together with the draw list they were made from (one entry per drawn sprite:
its image token and position).  A frame redraws only the rectangles touched by entries that
changed, moved, appeared or disappeared; everything else is provably identical (entries outside
those rectangles cover the same pixels in the same order).  Interfaces still run on every call,
on a fresh copy, exactly as often as in the reference.  A ``_raw_render`` override in a game's
Camera subclass bypasses the cache entirely.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .enums import InteractionMode

__all__ = ["Camera"]

_TANGIBLE = InteractionMode.TANGIBLE
_INTANGIBLE = InteractionMode.INTANGIBLE
_FRAME = 64

# Above this many separate dirty rectangles, redraw their bounding box once instead.
_MAX_DIRTY_RECTS = 4


class _Composite:
    """Cached view + base frame of one camera size/colour configuration."""

    __slots__ = ("params", "cam", "entries", "images", "view", "canvas", "canvas4", "scale", "x_off", "y_off")

    def __init__(self, params: tuple, width: int, height: int, background: Any, letter_box: Any) -> None:
        self.params = params
        self.cam: tuple[int, int] | None = None
        # Draw list of the cached view: (image token, world x, world y) per drawn sprite, in order.
        self.entries: list[tuple[int, int, int]] = []
        self.images: list = []
        scale = min(_FRAME // width, _FRAME // height)
        self.scale = scale
        self.x_off = (_FRAME - width * scale) // 2
        self.y_off = (_FRAME - height * scale) // 2
        self.view = np.full((height, width), background, dtype=np.int8)
        self.canvas = np.full((_FRAME, _FRAME), letter_box, dtype=np.int8)
        if scale > 1:
            region = self.canvas[self.y_off :, self.x_off :]
            self.canvas4 = as_strided(
                region, shape=(height, scale, width, scale), strides=(_FRAME * scale, _FRAME, scale, 1)
            )
        else:
            self.canvas4 = None


_layer_of = attrgetter("_layer")


class Camera:
    MAX_DIMENSION = 64

    def __init__(
        self,
        x: int = 0,
        y: int = 0,
        width: int = 64,
        height: int = 64,
        background: int = 5,
        letter_box: int = 5,
        interfaces: list | None = None,
    ) -> None:
        if width > self.MAX_DIMENSION or height > self.MAX_DIMENSION:
            raise ValueError(f"Camera dimensions cannot exceed {self.MAX_DIMENSION}x{self.MAX_DIMENSION}")
        if width < 0 or height < 0:
            raise ValueError("Camera dimensions cannot be negative")
        self._engine_composite: _Composite | None = None
        self._x = x
        self._y = y
        self.width = width
        self.height = height
        self._background = background
        self._letter_box = letter_box
        self._interfaces = list(interfaces) if interfaces else []

    # ------------------------------------------------------------------ properties
    @property
    def x(self) -> int:
        return self._x

    @x.setter
    def x(self, value: int) -> None:
        self._x = int(value)

    @property
    def y(self) -> int:
        return self._y

    @y.setter
    def y(self, value: int) -> None:
        self._y = int(value)

    @property
    def width(self) -> int:
        return self._width

    @width.setter
    def width(self, value: int) -> None:
        value = int(value)
        if value > self.MAX_DIMENSION:
            raise ValueError(f"Camera width cannot exceed {self.MAX_DIMENSION}")
        self._width = value

    @property
    def height(self) -> int:
        return self._height

    @height.setter
    def height(self, value: int) -> None:
        value = int(value)
        if value > self.MAX_DIMENSION:
            raise ValueError(f"Camera height cannot exceed {self.MAX_DIMENSION}")
        self._height = value

    @property
    def background(self) -> int:
        return self._background

    @background.setter
    def background(self, value: int) -> None:
        self._background = value

    @property
    def letter_box(self) -> int:
        return self._letter_box

    @letter_box.setter
    def letter_box(self, value: int) -> None:
        self._letter_box = value

    # ------------------------------------------------------------------ mutators
    def move(self, dx: int, dy: int) -> None:
        self._x += int(dx)
        self._y += int(dy)

    def resize(self, width: int, height: int) -> None:
        self.width = width
        self.height = height

    def replace_interface(self, new_interfaces: list | None) -> None:
        self._interfaces = list(new_interfaces) if new_interfaces else []

    # ------------------------------------------------------------------ geometry
    def _calculate_scale_and_offset(self) -> tuple[int, int, int]:
        scale = min(_FRAME // self._width, _FRAME // self._height)
        x_off = (_FRAME - self._width * scale) // 2
        y_off = (_FRAME - self._height * scale) // 2
        return scale, x_off, y_off

    def display_to_grid(self, display_x: int, display_y: int) -> tuple[int, int] | None:
        width, height = self._width, self._height
        scale = min(int(_FRAME / width), int(_FRAME / height))
        pad_x = int((_FRAME - width * scale) / 2)
        pad_y = int((_FRAME - height * scale) / 2)
        grid_x = int((display_x - pad_x) / scale) if display_x - pad_x >= 0 else -1
        grid_y = int((display_y - pad_y) / scale) if display_y - pad_y >= 0 else -1
        if grid_x < 0 or grid_y < 0 or grid_x >= width or grid_y >= height:
            return None
        return grid_x + self._x, grid_y + self._y

    # ------------------------------------------------------------------ rendering
    def _raw_render(self, sprites: list) -> np.ndarray:
        """The camera-resolution view (no scaling, letterbox or interfaces), as a new array."""
        return self._engine_compose(sprites).view.copy()

    def render(self, sprites: list) -> np.ndarray:
        """The 64x64 frame: letterbox, scaled view, then every interface in order."""
        if type(self)._raw_render is Camera._raw_render:
            canvas = self._engine_compose(sprites).canvas.copy()
        else:
            canvas = np.full((_FRAME, _FRAME), self._letter_box, dtype=np.int8)
            view = self._raw_render(sprites)
            scale, x_off, y_off = self._calculate_scale_and_offset()
            if scale > 1:
                view = np.repeat(np.repeat(view, scale, axis=0), scale, axis=1)
            canvas[y_off : y_off + view.shape[0], x_off : x_off + view.shape[1]] = view
        for interface in self._interfaces:
            canvas = interface.render_interface(canvas)
        return canvas

    def _engine_scene(self, sprites: list) -> np.ndarray:
        """The frame without interfaces (read-only when not overridden); used for state hashing."""
        if type(self)._raw_render is Camera._raw_render:
            return self._engine_compose(sprites).canvas
        canvas = np.full((_FRAME, _FRAME), self._letter_box, dtype=np.int8)
        view = self._raw_render(sprites)
        scale, x_off, y_off = self._calculate_scale_and_offset()
        if scale > 1:
            view = np.repeat(np.repeat(view, scale, axis=0), scale, axis=1)
        canvas[y_off : y_off + view.shape[0], x_off : x_off + view.shape[1]] = view
        return canvas

    def _engine_compose(self, sprites: list) -> _Composite:
        """Bring the cached view and base frame up to date with ``sprites``; returns the cache."""
        width = self._width
        height = self._height
        params = (width, height, self._background, self._letter_box)
        visible = [s for s in sprites if s._interaction is _TANGIBLE or s._interaction is _INTANGIBLE]
        if len(visible) > 1:
            visible.sort(key=_layer_of)  # stable: equal layers keep list order, later ones on top
        images = []
        entries = []
        add_image = images.append
        add_entry = entries.append
        for sprite in visible:
            # Inlined Sprite._engine_image() fast path: this loop runs for every sprite of every frame.
            cache = sprite._engine_cache
            pixels = sprite.pixels
            if (
                cache is not None
                and cache.src is pixels
                and cache.rotation == sprite.rotation
                and cache.scale == sprite._scale
                and cache.mirror_ud == sprite._mirror_ud
                and cache.mirror_lr == sprite._mirror_lr
                and cache.shape == pixels.shape
                and cache.raw == pixels.tobytes()
            ):
                image = cache.image
            else:
                image = sprite._engine_refresh()
            add_image(image)
            add_entry((image.token, sprite._x, sprite._y))
        cam = (self._x, self._y)
        state = self._engine_composite
        if state is None or state.params != params:
            state = _Composite(params, width, height, self._background, self._letter_box)
            self._engine_composite = state
            rects = [(0, 0, width, height)]
        elif state.cam != cam:
            rects = self._engine_scroll(state, cam)
            rects += _dirty_rects(state.entries, state.images, entries, images, cam, width, height)
        elif state.entries == entries:
            return state
        else:
            rects = _dirty_rects(state.entries, state.images, entries, images, cam, width, height)
        for x0, y0, x1, y1 in rects:
            self._engine_redraw(state, entries, images, cam, x0, y0, x1, y1)
        state.cam = cam
        state.entries = entries
        state.images = images
        return state

    def _engine_scroll(self, state: _Composite, cam: tuple[int, int]) -> list[tuple[int, int, int, int]]:
        """Shift the cached view for a camera move; returns the newly exposed view rectangles."""
        width, height = state.view.shape[1], state.view.shape[0]
        old_x, old_y = state.cam if state.cam is not None else cam
        dx = cam[0] - old_x
        dy = cam[1] - old_y
        if state.cam is None or abs(dx) >= width or abs(dy) >= height:
            return [(0, 0, width, height)]
        view = state.view
        # New view cell (r, c) shows what old cell (r + dy, c + dx) showed.
        src_y0, src_y1 = max(dy, 0), height + min(dy, 0)
        src_x0, src_x1 = max(dx, 0), width + min(dx, 0)
        view[src_y0 - dy : src_y1 - dy, src_x0 - dx : src_x1 - dx] = view[src_y0:src_y1, src_x0:src_x1].copy()
        exposed = []
        if dy > 0:
            exposed.append((0, height - dy, width, height))
        elif dy < 0:
            exposed.append((0, 0, width, -dy))
        if dx > 0:
            exposed.append((width - dx, 0, width, height))
        elif dx < 0:
            exposed.append((0, 0, -dx, height))
        # The scaled canvas is rebuilt from the shifted view by the caller's redraws plus this copy.
        self._engine_upscale(state, 0, 0, width, height)
        return exposed

    @staticmethod
    def _engine_upscale(state: _Composite, x0: int, y0: int, x1: int, y1: int) -> None:
        view = state.view
        if state.canvas4 is None:
            state.canvas[state.y_off + y0 : state.y_off + y1, state.x_off + x0 : state.x_off + x1] = view[y0:y1, x0:x1]
        else:
            state.canvas4[y0:y1, :, x0:x1, :] = view[y0:y1, None, x0:x1, None]

    def _engine_redraw(
        self, state: _Composite, entries: list, images: list, cam: tuple[int, int], x0: int, y0: int, x1: int, y1: int
    ) -> None:
        """Recomposite view rectangle [x0, x1) x [y0, y1) from the full draw list."""
        view = state.view
        view[y0:y1, x0:x1] = self._background
        cam_x, cam_y = cam
        for (_, ex, ey), image in zip(entries, images, strict=True):
            ex -= cam_x
            ey -= cam_y
            ix0 = ex if ex > x0 else x0
            ix1 = ex + image.w
            if ix1 > x1:
                ix1 = x1
            if ix0 >= ix1:
                continue
            iy0 = ey if ey > y0 else y0
            iy1 = ey + image.h
            if iy1 > y1:
                iy1 = y1
            if iy0 >= iy1:
                continue
            source = image.img8[iy0 - ey : iy1 - ey, ix0 - ex : ix1 - ex]
            mask = image.draw
            if mask is None:
                view[iy0:iy1, ix0:ix1] = source
            else:
                np.copyto(view[iy0:iy1, ix0:ix1], source, where=mask[iy0 - ey : iy1 - ey, ix0 - ex : ix1 - ex])
        self._engine_upscale(state, x0, y0, x1, y1)

    def __deepcopy__(self, memo: dict[int, Any]) -> Camera:
        import copy

        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = None if key == "_engine_composite" else copy.deepcopy(value, memo)
        return new

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_engine_composite"] = None
        return state


def _dirty_rects(
    old: list, old_images: list, new: list, new_images: list, cam: tuple[int, int], width: int, height: int
) -> list[tuple[int, int, int, int]]:
    """View rectangles whose pixels can differ between draw lists ``old`` and ``new``.

    Entries equal in both lists and in the same relative order cover the same pixels in the same
    order, so only the rectangles of the other entries (old and new positions) need redrawing.
    """
    n_old = len(old)
    n_new = len(new)
    groups: list[list[tuple[int, int, Any]]] = []
    if n_old == n_new:
        for index in range(n_old):
            if old[index] != new[index]:
                groups.append([(old[index][1], old[index][2], old_images[index]), (new[index][1], new[index][2], new_images[index])])
    else:
        shortest = n_old if n_old < n_new else n_new
        start = 0
        while start < shortest and old[start] == new[start]:
            start += 1
        tail = 0
        while tail < shortest - start and old[n_old - 1 - tail] == new[n_new - 1 - tail]:
            tail += 1
        for index in range(start, n_old - tail):
            groups.append([(old[index][1], old[index][2], old_images[index])])
        for index in range(start, n_new - tail):
            groups.append([(new[index][1], new[index][2], new_images[index])])
    cam_x, cam_y = cam
    rects = []
    for group in groups:
        x0 = y0 = 1 << 60
        x1 = y1 = -(1 << 60)
        for ex, ey, image in group:
            if image.w <= 0 or image.h <= 0:
                continue
            ex -= cam_x
            ey -= cam_y
            x0 = min(x0, ex)
            y0 = min(y0, ey)
            x1 = max(x1, ex + image.w)
            y1 = max(y1, ey + image.h)
        x0 = max(x0, 0)
        y0 = max(y0, 0)
        x1 = min(x1, width)
        y1 = min(y1, height)
        if x0 < x1 and y0 < y1:
            rects.append((x0, y0, x1, y1))
    if len(rects) > _MAX_DIRTY_RECTS:
        rects = [(min(r[0] for r in rects), min(r[1] for r in rects), max(r[2] for r in rects), max(r[3] for r in rects))]
    return rects
