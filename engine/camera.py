"""``Camera``: the window onto a level and the 64x64 frame renderer (spec §5).

Speed (an implementation detail; frames are identical to the reference's):

* each camera caches its 64x64 base frame (letterbox + scaled view, no interfaces) with the draw
  list it was made from (image token and world position per drawn sprite, in draw order) and the
  change stamp of every sprite of the list it was drawn from;
* when the sprite list holds the same objects, only sprites whose stamp changed (see the change
  tracking in ``engine.sprites``) or whose exposed pixel arrays were written into are looked at;
  if none changed their layer or visibility, their draw-list entries are updated in place and
  only their old and new rectangles are redrawn.  Otherwise the draw list is rebuilt and only
  the rectangles covered by entries that changed, moved, appeared or disappeared are redrawn;
  entries equal in both lists keep their relative order, so elsewhere every pixel is the same.
  A camera move shifts the frame and redraws the exposed strips.  Redrawing works directly at
  display resolution from pre-scaled images.

Interfaces still run on every ``render`` call, on a fresh copy, exactly as often as in the
reference.  A game's ``_raw_render`` override bypasses the cache entirely.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import numpy as np

from . import sprites as _sprites_module
from ._copying import deep_copy, keep_alive, register_copier
from .enums import InteractionMode
from .sprites import changed_indices as _changed_indices

__all__ = ["Camera"]

_TANGIBLE = InteractionMode.TANGIBLE
_INTANGIBLE = InteractionMode.INTANGIBLE
_FRAME = 64
_NDARRAY = np.ndarray

# Composites kept per camera (one per distinct size/background/letterbox combination).
_POOL_SIZE = 8
# Images kept pre-drawn over the background per composite.
_BACKED_SIZE = 64
# Above this many separate dirty rectangles, redraw their bounding box once instead.
_MAX_DIRTY_RECTS = 6


class _Composite:
    """The cached 64x64 base frame (letterbox + scaled view) of one camera configuration.

    Sprites are drawn straight into the frame at display resolution; the camera-resolution view
    is read back from it (every scale-th pixel) when ``_raw_render`` needs it.
    """

    __slots__ = (
        "params", "cam_x", "cam_y", "entries", "boxes", "sprites", "stamps", "layers", "slots", "exposed", "backed", "epoch",
        "width", "height", "canvas", "view_slice", "scale", "x_off", "y_off",
    )

    def __init__(self, params: tuple, width: int, height: int, background: Any, letter_box: Any) -> None:
        self.params = params
        self.width = width
        self.height = height
        self.cam_x = self.cam_y = None
        # Draw list of the cached frame: (image token, world x, world y) per drawn sprite, in order.
        self.entries: list[tuple[int, int, int]] = []
        # Per entry: its world cells, display-resolution pixels and mask, and image (see _box).
        self.boxes: list[tuple] = []
        # Image token -> its display-resolution pixels drawn over the background.
        self.backed: dict[int, np.ndarray] = {}
        # The sprite list it was drawn from and, per sprite: its change stamp, layer, and position
        # in the draw list (-1: not drawn).  ``stamps`` is None when the next pass must rebuild.
        self.sprites: list = []
        self.stamps: list | None = None
        self.epoch = -1  # engine.sprites._epoch when ``stamps`` were taken
        self.layers: list = []
        self.slots: list[int] = []
        # Sprite index -> pixel bytes, for drawn sprites whose arrays game code may write into.
        self.exposed: dict | None = {}
        scale = min(_FRAME // width, _FRAME // height)
        self.scale = scale
        self.x_off = x_off = (_FRAME - width * scale) // 2
        self.y_off = y_off = (_FRAME - height * scale) // 2
        self.canvas = np.full((_FRAME, _FRAME), letter_box, dtype=np.int8)
        self.canvas[y_off : y_off + height * scale, x_off : x_off + width * scale] = background
        self.view_slice = (slice(y_off, y_off + height * scale, scale), slice(x_off, x_off + width * scale, scale))

    def view(self) -> np.ndarray:
        """The camera-resolution view (a new array)."""
        return self.canvas[self.view_slice].copy()


_layer_of = attrgetter("layer")
_stamp_of = attrgetter("_engine_stamp")
_PLAIN_VALUES = frozenset({int, bool, str, float, type(None)})
_copyto = np.copyto
_new_object = object.__new__


class Camera:
    MAX_DIMENSION = 64
    # Render caches (class defaults: copies start without them); see the module docstring.
    _engine_composite: _Composite | None = None
    _engine_pool: dict | None = None
    # The render caches above, the camera's only ``_engine_`` attributes (see env._move_render_caches).
    _engine_render_caches = ("_engine_composite", "_engine_pool")

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
        self._width = self._checked_dimension(value, "width")

    @property
    def height(self) -> int:
        return self._height

    @height.setter
    def height(self, value: int) -> None:
        self._height = self._checked_dimension(value, "height")

    def _checked_dimension(self, value: int, name: str) -> int:
        """The width/height setters' rule (spec §5.1): ``int()``, at most MAX_DIMENSION, negatives pass."""
        value = int(value)
        if value > self.MAX_DIMENSION:
            raise ValueError(f"Camera {name} cannot exceed {self.MAX_DIMENSION}")
        return value

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
        return self._engine_compose(sprites).view()

    def render(self, sprites: list) -> np.ndarray:
        """The 64x64 frame: letterbox, scaled view, then every interface in order."""
        if type(self)._raw_render is Camera._raw_render:
            canvas = self._engine_compose(sprites).canvas.copy()
        else:
            canvas = self._engine_letterboxed(sprites)
        for interface in self._interfaces:
            canvas = interface.render_interface(canvas)
        return canvas

    def _engine_scene(self, sprites: list) -> np.ndarray:
        """The frame without interfaces (read-only when not overridden); used for state hashing."""
        if type(self)._raw_render is Camera._raw_render:
            return self._engine_compose(sprites).canvas
        return self._engine_letterboxed(sprites)

    def _engine_letterboxed(self, sprites: list) -> np.ndarray:
        """A new frame without interfaces from a game's own ``_raw_render``: letterbox, then its view
        scaled up and centred (the uncached path; the cached one draws at display resolution)."""
        canvas = np.full((_FRAME, _FRAME), self._letter_box, dtype=np.int8)
        view = self._raw_render(sprites)
        scale, x_off, y_off = self._calculate_scale_and_offset()
        if scale > 1:
            view = np.repeat(np.repeat(view, scale, axis=0), scale, axis=1)
        canvas[y_off : y_off + view.shape[0], x_off : x_off + view.shape[1]] = view
        return canvas

    def _engine_compose(self, sprites: list) -> _Composite:
        """Bring the cached base frame up to date with ``sprites``; returns the cache."""
        width = self._width
        height = self._height
        cam_x = self._x
        cam_y = self._y
        params = (width, height, self._background, self._letter_box)
        state = self._engine_composite
        if state is None or state.params != params:
            state = self._engine_select(params)
        epoch = _sprites_module._epoch
        groups = None
        old_stamps = state.stamps
        if old_stamps is not None and state.sprites == sprites:
            # Same sprite objects in the same order: look only at the ones that changed since the
            # last pass (stamp bumped, or exposed pixels written in place).
            if state.epoch == epoch:
                stamps = old_stamps  # no sprite anywhere changed
                changed = []
            else:
                stamps = list(map(_stamp_of, sprites))
                changed = [] if stamps == old_stamps else _changed_indices(stamps, old_stamps)
            for index, raw in state.exposed.items():
                if index not in changed and sprites[index].__dict__["pixels"].tobytes() != raw:
                    changed.append(index)
            if not changed:
                if state.cam_x == cam_x and state.cam_y == cam_y:
                    state.epoch = epoch
                    return state
                groups = []
            else:
                groups = _patch(state, sprites, changed)
        else:
            stamps = list(map(_stamp_of, sprites))
        if groups is None:
            old_entries = state.entries
            old_boxes = state.boxes
            self._engine_rebuild(state, sprites)
        state.stamps = stamps if state.exposed is not None else None
        state.epoch = epoch
        if state.exposed is None:
            state.exposed = {}
        if state.cam_x is None:
            rects = [(0, 0, width, height)]
        elif state.cam_x != cam_x or state.cam_y != cam_y:
            rects = self._engine_scroll(state, cam_x, cam_y)
        else:
            rects = []
        if groups is None:
            if old_entries != state.entries:
                rects += _dirty_rects(old_entries, old_boxes, state.entries, state.boxes, cam_x, cam_y, width, height)
        elif groups:
            rects += _group_rects(groups, cam_x, cam_y, width, height)
        if rects:
            boxes = state.boxes
            for x0, y0, x1, y1 in rects:
                self._engine_redraw(state, boxes, cam_x, cam_y, x0, y0, x1, y1)
        state.cam_x = cam_x
        state.cam_y = cam_y
        return state

    def _engine_select(self, params: tuple) -> _Composite:
        """The composite for ``params``, made current."""
        # Composites are kept per size/colours, so going back to an earlier level's camera
        # setup (resets, level changes) starts from that level's last frame.
        pool = self._engine_pool
        if pool is None:
            pool = self._engine_pool = {}
        state = pool.get(params)
        if state is None:
            if len(pool) >= _POOL_SIZE:
                pool.clear()
            state = pool[params] = _Composite(params, *params)
        self._engine_composite = state
        return state

    def _engine_rebuild(self, state: _Composite, sprites: list) -> None:
        """Remake ``state``'s draw list and per-sprite records for ``sprites`` from scratch
        (``exposed`` is None when some drawn sprite's pixels cannot be compared cheaply)."""
        scale = state.scale
        layers = list(map(_layer_of, sprites))
        order = [i for i, s in enumerate(sprites) if s._interaction is _TANGIBLE or s._interaction is _INTANGIBLE]
        if len(order) > 1:
            order.sort(key=layers.__getitem__)  # stable: equal layers keep list order, later ones on top
        slots = [-1] * len(sprites)
        entries = []
        boxes = []
        exposed: dict | None = {}
        for position, index in enumerate(order):
            sprite = sprites[index]
            slots[index] = position
            # Inlined Sprite._engine_image(): this loop runs for every drawn sprite.
            cache = sprite._engine_cache
            if sprite._engine_exposed:
                pixels = sprite.__dict__["pixels"]
                if type(pixels) is not _NDARRAY:
                    exposed = None
                    image = sprite._engine_refresh()
                else:
                    raw = pixels.tobytes()
                    if cache is not None and cache.raw == raw:
                        image = cache.image
                    else:
                        image = sprite._engine_refresh()
                    if exposed is not None:
                        exposed[index] = raw
            elif cache is not None:
                image = cache.image
            else:
                image = sprite._engine_refresh()
            x = sprite.x
            y = sprite.y
            entries.append((image.token, x, y))
            boxes.append(_box(image, x, y, scale))
        state.entries = entries
        state.boxes = boxes
        state.sprites = list(sprites)
        state.layers = layers
        state.slots = slots
        state.exposed = exposed

    def _engine_scroll(self, state: _Composite, cam_x: int, cam_y: int) -> list[tuple[int, int, int, int]]:
        """Shift the frame's view area for a camera move; returns the exposed view rectangles."""
        width = state.width
        height = state.height
        dx = cam_x - state.cam_x
        dy = cam_y - state.cam_y
        if abs(dx) >= width or abs(dy) >= height:
            return [(0, 0, width, height)]
        scale = state.scale
        # Cell (r, c) of the new view shows what old cell (r + dy, c + dx) showed.
        src_y0, src_y1 = max(dy, 0), height + min(dy, 0)
        src_x0, src_x1 = max(dx, 0), width + min(dx, 0)
        top = state.y_off
        left = state.x_off
        canvas = state.canvas
        canvas[
            top + (src_y0 - dy) * scale : top + (src_y1 - dy) * scale,
            left + (src_x0 - dx) * scale : left + (src_x1 - dx) * scale,
        ] = canvas[top + src_y0 * scale : top + src_y1 * scale, left + src_x0 * scale : left + src_x1 * scale].copy()
        exposed = []
        if dy > 0:
            exposed.append((0, height - dy, width, height))
        elif dy < 0:
            exposed.append((0, 0, width, -dy))
        if dx > 0:
            exposed.append((width - dx, 0, width, height))
        elif dx < 0:
            exposed.append((0, 0, -dx, height))
        return exposed

    def _engine_redraw(
        self, state: _Composite, boxes: list, cam_x: int, cam_y: int, x0: int, y0: int, x1: int, y1: int
    ) -> None:
        """Recomposite view cells [x0, x1) x [y0, y1) at display resolution from the draw list."""
        scale = state.scale
        canvas = state.canvas
        # Display coordinates of world cell (0, 0); the rectangle in world cells.
        top = state.y_off - cam_y * scale
        left = state.x_off - cam_x * scale
        x0 += cam_x
        x1 += cam_x
        y0 += cam_y
        y1 += cam_y
        filled = False
        for bx0, by0, bx1, by1, source, mask, image in boxes:
            if bx1 <= x0 or bx0 >= x1 or by1 <= y0 or by0 >= y1:
                continue
            if not filled:
                filled = True
                if bx0 > x0 or by0 > y0 or bx1 < x1 or by1 < y1:
                    canvas[top + y0 * scale : top + y1 * scale, left + x0 * scale : left + x1 * scale] = self._background
                elif mask is not None:
                    # The first sprite drawn covers the whole rectangle: copy it pre-drawn over
                    # the background instead of filling and then copying through its mask.
                    backed = state.backed.get(image.token)
                    if backed is None:
                        if len(state.backed) >= _BACKED_SIZE:
                            state.backed.clear()
                        backed = state.backed[image.token] = np.empty_like(source)
                        backed[...] = self._background
                        _copyto(backed, source, where=mask)
                    source = backed
                    mask = None
            if bx0 < x0 or by0 < y0 or bx1 > x1 or by1 > y1:
                cx0 = x0 if bx0 < x0 else bx0
                cy0 = y0 if by0 < y0 else by0
                cx1 = x1 if bx1 > x1 else bx1
                cy1 = y1 if by1 > y1 else by1
                rows = slice((cy0 - by0) * scale, (cy1 - by0) * scale)
                cols = slice((cx0 - bx0) * scale, (cx1 - bx0) * scale)
                source = source[rows, cols]
                if mask is not None:
                    mask = mask[rows, cols]
                bx0 = cx0
                by0 = cy0
                bx1 = cx1
                by1 = cy1
            if mask is None:
                canvas[top + by0 * scale : top + by1 * scale, left + bx0 * scale : left + bx1 * scale] = source
            else:
                _copyto(canvas[top + by0 * scale : top + by1 * scale, left + bx0 * scale : left + bx1 * scale], source, where=mask)
        if not filled:
            canvas[top + y0 * scale : top + y1 * scale, left + x0 * scale : left + x1 * scale] = self._background

    def __deepcopy__(self, memo: dict[int, Any]) -> Camera:
        return _copy_camera(self, memo)

    def __getstate__(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if not key.startswith("_engine_")}


def _box(image: Any, x: int, y: int, scale: int) -> tuple:
    """Draw record of ``image`` at world (x, y): its world cell bounds, display-resolution pixels
    and mask (None: all drawn), and the image."""
    if image.scaled_for == scale:
        source = image.scaled_img
        mask = image.scaled_mask
    else:
        source, mask = image.scaled(scale)
    return (x, y, x + image.w, y + image.h, source, mask, image)


def _copy_camera(camera: Camera, memo: dict[int, Any]) -> Camera:
    """``copy.deepcopy(camera, memo)`` without the render caches, entering the copy in ``memo``
    (``Camera.__deepcopy__``, and the copier ``engine._copying`` uses for cameras)."""
    cls = type(camera)
    new = cls.__new__(cls)
    memo[id(camera)] = new
    source = camera.__dict__
    state = source.copy()
    new.__dict__ = state  # an assigned dict is a combined table: faster attribute reads
    for key in _RENDER_CACHES:
        state.pop(key, None)  # rebuilt on first use (but see below)
    for key, value in state.items():
        # Position, size and colours are plain ints: what deepcopy returns for them is themselves.
        if type(value) not in _PLAIN_VALUES:
            state[key] = deep_copy(value, memo)
    # Unless the sprites were copied first (a whole game copy): then the copy starts from the
    # current frame's cache, redrawn from the copied sprites (see _translated_composite).
    composite = _translated_composite(source.get("_engine_composite"), memo)
    if composite is not None:
        state["_engine_composite"] = composite
        state["_engine_pool"] = {composite.params: composite}
    keep_alive(camera, memo)
    return new


def _translated_composite(state: _Composite | None, memo: dict[int, Any]) -> _Composite | None:
    """For a deep copy (``memo``) that has already copied every sprite ``state`` was drawn from: a
    copy of ``state`` that refers to those copies, so the copied camera's next frame patches what
    changed instead of rebuilding.  Deep copies have the same pixels, positions, layers, (shared)
    image caches and change stamps as their originals (``sprites._copy_sprite``), so the stamps
    ``state`` recorded hold for the copies as they held for the originals: a sprite changed since
    the frame was drawn has another stamp, and the next pass redraws it.  None when there is
    nothing exact to carry over."""
    if state is None or state.stamps is None or state.exposed is None:
        return None
    sprites = list(map(memo.get, map(id, state.sprites)))
    if None in sprites:
        return None
    new = _new_object(_Composite)
    # The configuration, as it is (immutable values).
    new.params = state.params
    new.cam_x = state.cam_x
    new.cam_y = state.cam_y
    new.width = state.width
    new.height = state.height
    new.view_slice = state.view_slice
    new.scale = state.scale
    new.x_off = state.x_off
    new.y_off = state.y_off
    new.sprites = sprites
    new.epoch = -1  # compare stamps on the next pass
    # Shared: lists that passes replace but never change in place ...
    new.stamps = state.stamps
    new.layers = state.layers
    new.slots = state.slots
    # ... and images pre-drawn over the background, by image token (never reused), for one
    # configuration (the background is part of ``params``): a cache whose entries never go stale.
    new.backed = state.backed
    # Copied: what passes change in place (_patch, redraws).
    new.canvas = state.canvas.copy()
    new.entries = state.entries[:]
    new.boxes = state.boxes[:]
    new.exposed = state.exposed.copy()
    return new


def _patch(state: _Composite, sprites: list, changed: list) -> list | None:
    """Update the draw list in place for the sprites at indices ``changed``; returns the changed
    draw records as (old box, new box) groups, or None (changing nothing) when the draw order
    changes or a drawn sprite's pixels cannot be compared cheaply."""
    slots = state.slots
    layers = state.layers
    updates = []
    for index in changed:
        sprite = sprites[index]
        position = slots[index]
        if sprite._interaction is not _TANGIBLE and sprite._interaction is not _INTANGIBLE:
            if position >= 0:
                return None
            continue
        if position < 0 or sprite.layer != layers[index]:
            return None
        # As in Camera._engine_rebuild.
        cache = sprite._engine_cache
        raw = None
        if sprite._engine_exposed:
            pixels = sprite.__dict__["pixels"]
            if type(pixels) is not _NDARRAY:
                return None
            raw = pixels.tobytes()
            image = cache.image if cache is not None and cache.raw == raw else sprite._engine_refresh()
        else:
            image = cache.image if cache is not None else sprite._engine_refresh()
        updates.append((index, position, raw, image))
    entries = state.entries
    boxes = state.boxes
    exposed = state.exposed
    scale = state.scale
    groups = []
    for index, position, raw, image in updates:
        if raw is None:
            exposed.pop(index, None)
        else:
            exposed[index] = raw
        sprite = sprites[index]
        x = sprite.x
        y = sprite.y
        entry = (image.token, x, y)
        if entry != entries[position]:
            box = _box(image, x, y, scale)
            groups.append((boxes[position], box))
            entries[position] = entry
            boxes[position] = box
    return groups


def _dirty_rects(
    old: list, old_boxes: list, new: list, new_boxes: list, cam_x: int, cam_y: int, width: int, height: int
) -> list[tuple[int, int, int, int]]:
    """View rectangles whose pixels can differ between draw lists ``old`` and ``new``."""
    n_old = len(old)
    n_new = len(new)
    groups: list[tuple] = []
    if n_old == n_new:
        for before, after, before_box, after_box in zip(old, new, old_boxes, new_boxes, strict=True):
            if before != after:
                groups.append((before_box, after_box))
    else:
        shortest = n_old if n_old < n_new else n_new
        start = 0
        while start < shortest and old[start] == new[start]:
            start += 1
        tail = 0
        while tail < shortest - start and old[n_old - 1 - tail] == new[n_new - 1 - tail]:
            tail += 1
        for index in range(start, n_old - tail):
            groups.append((old_boxes[index],))
        for index in range(start, n_new - tail):
            groups.append((new_boxes[index],))
    return _group_rects(groups, cam_x, cam_y, width, height)


def _group_rects(groups: list, cam_x: int, cam_y: int, width: int, height: int) -> list[tuple[int, int, int, int]]:
    """One view rectangle per group of draw records: the union of their areas, clipped to the view."""
    rects = []
    for group in groups:
        x0 = y0 = 1 << 60
        x1 = y1 = -(1 << 60)
        for bx0, by0, bx1, by1, _, _, _ in group:
            if bx1 <= bx0 or by1 <= by0:
                continue
            if bx0 < x0:
                x0 = bx0
            if by0 < y0:
                y0 = by0
            if bx1 > x1:
                x1 = bx1
            if by1 > y1:
                y1 = by1
        x0 -= cam_x
        x1 -= cam_x
        y0 -= cam_y
        y1 -= cam_y
        if x0 < 0:
            x0 = 0
        if y0 < 0:
            y0 = 0
        if x1 > width:
            x1 = width
        if y1 > height:
            y1 = height
        if x0 < x1 and y0 < y1:
            rects.append((x0, y0, x1, y1))
    if len(rects) > _MAX_DIRTY_RECTS:
        rects = [(min(r[0] for r in rects), min(r[1] for r in rects), max(r[2] for r in rects), max(r[3] for r in rects))]
    return rects


register_copier(Camera, _copy_camera)
_RENDER_CACHES = Camera._engine_render_caches
