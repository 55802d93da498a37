"""``Sprite``: a pixel image with position, layer, rotation, mirroring, scale and collision mode (spec §3).

Speed: the rendered image (rotation -> mirrors -> scale) and the masks derived from it are cached
per sprite in ``_engine_cache``.  The cache is revalidated on every use against everything it was
computed from, including the *contents* of ``pixels`` (games write into ``pixels`` in place, replace
it, or share one array between sprites), so it can never go stale.  Each distinct cached image gets
a unique ``token`` that the camera uses to detect which sprites changed between frames.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from typing import Any

import numpy as np

from .enums import BlockingMode, InteractionMode

__all__ = ["Sprite"]

_TANGIBLE = InteractionMode.TANGIBLE
_INTANGIBLE = InteractionMode.INTANGIBLE
_INVISIBLE = InteractionMode.INVISIBLE
_REMOVED = InteractionMode.REMOVED
_PIXEL_PERFECT = BlockingMode.PIXEL_PERFECT
_NOT_BLOCKED = BlockingMode.NOT_BLOCKED
_BOUNDING_BOX = BlockingMode.BOUNDING_BOX

_INTERACTION_BY_FLAGS = {
    (True, True): _TANGIBLE,
    (True, False): _INTANGIBLE,
    (False, True): _INVISIBLE,
    (False, False): _REMOVED,
}

# One list shared by every sprite built without ``tags`` (reference quirk Q13).
_SHARED_DEFAULT_TAGS: list[str] = []

_token_counter = itertools.count(1)
_NDARRAY = np.ndarray
_INT8 = np.dtype(np.int8)


def convert_pixels(pixels: Any) -> np.ndarray:
    """Constructor conversion of ``pixels`` (spec §3.1 step 1)."""
    if isinstance(pixels, np.ndarray):
        if pixels.ndim != 2:
            raise ValueError("Pixels must be a 2D array")
        if pixels.dtype == _INT8:
            return pixels  # aliased, not copied
        return pixels.astype(np.int8)
    if not isinstance(pixels, list) or not all(isinstance(row, list) for row in pixels):
        raise ValueError("Pixels must be a 2D list of integers")
    array = np.array(pixels, dtype=np.int8)
    if array.ndim != 2:
        raise ValueError("Pixels must be a 2D list of integers")
    return array


def _downscale(image: np.ndarray, factor: int) -> np.ndarray:
    """Block-mode down-scaling (spec §3.6)."""
    height, width = image.shape
    if height % factor or width % factor:
        raise ValueError(f"Sprite dimensions {width}x{height} are not divisible by the down-scale factor {factor}")
    out = np.empty((height // factor, width // factor), dtype=image.dtype)
    for row in range(height // factor):
        for col in range(width // factor):
            block = image[row * factor : (row + 1) * factor, col * factor : (col + 1) * factor].ravel().tolist()
            transparent = sum(1 for v in block if v < 0)
            solid = [v for v in block if v != -1]
            if transparent > len(solid):
                out[row, col] = -1
                continue
            if any(v < -1 for v in solid):
                raise ValueError("Cannot down-scale a block whose cells include values below -1")
            counts: dict[Any, int] = {}
            for v in solid:
                counts[v] = counts.get(v, 0) + 1
            best = max(counts.values())
            out[row, col] = max(v for v, n in counts.items() if n == best)
    return out


def render_image(pixels: np.ndarray, rotation: Any, mirror_ud: Any, mirror_lr: Any, scale: int) -> np.ndarray:
    """The rendered image of a sprite state, as a new C-contiguous array (spec §3.5)."""
    image = pixels
    if rotation:
        quarter_turns_ccw = int(((-rotation) % 360) // 90)
        if quarter_turns_ccw:
            image = np.rot90(image, quarter_turns_ccw)
    if mirror_ud:
        image = image[::-1]
    if mirror_lr:
        image = image[:, ::-1]
    if scale > 1:
        image = np.repeat(np.repeat(image, scale, axis=0), scale, axis=1)
    elif scale < 0:
        image = _downscale(np.ascontiguousarray(image), 1 - scale)
    return np.array(image, copy=True, order="C")


class _Image:
    """Cached render of one sprite state plus lazily derived masks (treat every array as read-only)."""

    __slots__ = (
        "src", "raw", "shape", "rotation", "mirror_ud", "mirror_lr", "scale",
        "img", "h", "w", "token", "_img8", "_draw", "_solid", "_opaque", "_all_solid",
    )

    def __init__(self, src: np.ndarray, rotation: Any, mirror_ud: Any, mirror_lr: Any, scale: int) -> None:
        self.src = src
        self.raw = src.tobytes()
        self.shape = src.shape
        self.rotation = rotation
        self.mirror_ud = mirror_ud
        self.mirror_lr = mirror_lr
        self.scale = scale
        self.img = render_image(src, rotation, mirror_ud, mirror_lr, scale)
        self.h, self.w = self.img.shape
        self.token = next(_token_counter)
        self._img8 = None
        self._draw = None
        self._solid = None
        self._opaque = None
        self._all_solid = None

    def rebind(self, src: np.ndarray) -> _Image:
        """Same image for a new pixels object with identical contents (clone / deepcopy)."""
        other = _Image.__new__(_Image)
        for name in _Image.__slots__:
            setattr(other, name, getattr(self, name))
        other.src = src
        return other

    # Drawing: int8 values and the mask of cells >= 0 (None when every cell is drawn).
    def img8(self) -> np.ndarray:
        if self._img8 is None:
            img = self.img
            self._img8 = img if img.dtype == _INT8 else img.astype(np.int8)
        return self._img8

    def draw_mask(self) -> np.ndarray | None:
        if self._opaque is None:
            mask = self.img >= 0
            self._opaque = bool(mask.all())
            self._draw = None if self._opaque else mask
        return self._draw

    # Collision / hit tests: the mask of cells != -1 (None when every cell is solid).
    def solid_mask(self) -> np.ndarray | None:
        if self._all_solid is None:
            mask = self.img != -1
            self._all_solid = bool(mask.all())
            self._solid = None if self._all_solid else mask
        return self._solid


class Sprite:
    """A game object drawn by the camera; attribute names are part of the API (games touch them)."""

    VALID_ROTATIONS = {0, 90, 180, 270}

    def __init__(
        self,
        pixels: Any,
        name: str | None = None,
        x: int = 0,
        y: int = 0,
        layer: int = 0,
        scale: int = 1,
        rotation: int = 0,
        mirror_ud: bool = False,
        mirror_lr: bool = False,
        blocking: BlockingMode = BlockingMode.PIXEL_PERFECT,
        interaction: InteractionMode | None = None,
        visible: bool = True,
        collidable: bool = True,
        tags: list[str] = _SHARED_DEFAULT_TAGS,
    ) -> None:
        self._engine_cache: _Image | None = None
        self.pixels = convert_pixels(pixels)
        # uuid4 draws from os.urandom, so Python's and numpy's global RNGs stay untouched.
        self._name = name if name is not None else str(uuid.uuid4())
        self._x = int(x)
        self._y = int(y)
        self._layer = int(layer)
        normalised = rotation % 360
        if normalised not in self.VALID_ROTATIONS:
            raise ValueError(f"Invalid rotation {rotation}: must be one of {sorted(self.VALID_ROTATIONS)}")
        self.rotation = normalised
        self._mirror_ud = mirror_ud
        self._mirror_lr = mirror_lr
        self._blocking = blocking
        self._scale = 1
        self.set_scale(scale)
        if interaction is None:
            interaction = _INTERACTION_BY_FLAGS[(bool(visible), bool(collidable))]
        self._interaction = interaction
        self._tags = tags

    # ------------------------------------------------------------------ cached image
    def _engine_image(self) -> _Image:
        """The validated cached render of the current state (rebuilt if anything changed)."""
        cache = self._engine_cache
        pixels = self.pixels
        if (
            cache is not None
            and cache.src is pixels
            and cache.rotation == self.rotation
            and cache.scale == self._scale
            and cache.mirror_ud == self._mirror_ud
            and cache.mirror_lr == self._mirror_lr
            and cache.shape == pixels.shape
            and cache.raw == pixels.tobytes()
        ):
            return cache
        if type(pixels) is not _NDARRAY:
            pixels = np.asarray(pixels)
        cache = _Image(pixels, self.rotation, self._mirror_ud, self._mirror_lr, self._scale)
        if cache.src is self.pixels:
            self._engine_cache = cache
        return cache

    # ------------------------------------------------------------------ read-only properties
    @property
    def name(self) -> str:
        return self._name

    @property
    def x(self) -> int:
        return self._x

    @property
    def y(self) -> int:
        return self._y

    @property
    def layer(self) -> int:
        return self._layer

    @property
    def scale(self) -> int:
        return self._scale

    @property
    def blocking(self) -> BlockingMode:
        return self._blocking

    @property
    def interaction(self) -> InteractionMode:
        return self._interaction

    @property
    def mirror_ud(self) -> bool:
        return self._mirror_ud

    @property
    def mirror_lr(self) -> bool:
        return self._mirror_lr

    @property
    def tags(self) -> list[str]:
        return self._tags

    @property
    def is_visible(self) -> bool:
        return self._interaction is _TANGIBLE or self._interaction is _INTANGIBLE

    @property
    def is_collidable(self) -> bool:
        return self._interaction is _TANGIBLE or self._interaction is _INVISIBLE

    @property
    def width(self) -> int:
        return self._engine_image().w

    @property
    def height(self) -> int:
        return self._engine_image().h

    # ------------------------------------------------------------------ mutators
    def set_position(self, x: int, y: int) -> Sprite:
        self._x = int(x)
        self._y = int(y)
        return self

    def move(self, dx: int, dy: int) -> None:
        self._x += int(dx)
        self._y += int(dy)

    def set_rotation(self, rotation: int) -> Sprite:
        normalised = int(rotation) % 360
        if normalised not in self.VALID_ROTATIONS:
            raise ValueError(f"Invalid rotation {rotation}: must be one of {sorted(self.VALID_ROTATIONS)}")
        self.rotation = normalised
        return self

    def rotate(self, delta: int) -> Sprite:
        return self.set_rotation(self.rotation + delta)

    def set_scale(self, scale: int) -> Sprite:
        value = int(scale)
        if value == 0:
            raise ValueError("Scale cannot be zero")
        if value < 0:
            factor = 1 - value
            height, width = self.pixels.shape[:2]
            if height % factor or width % factor:
                raise ValueError(
                    f"Down-scale factor {factor} must divide the sprite dimensions {width}x{height}"
                )
        self._scale = value
        return self

    def adjust_scale(self, delta: int) -> None:
        """Step the scale by +-1 toward ``scale + delta``, skipping 0 (spec §3.9)."""
        if delta == 0:
            return
        target = self._scale + delta
        if target == 0:
            # The reference loops forever (increasing) or fails part-way (decreasing); fail up front.
            raise ValueError("Cannot adjust scale to 0")
        step = 1 if delta > 0 else -1
        current = self._scale
        while current != target:
            current += step
            if current == 0:
                current = step
            self.set_scale(current)

    def set_layer(self, layer: int) -> Sprite:
        self._layer = int(layer)
        return self

    def set_mirror_ud(self, mirror_ud: bool) -> Sprite:
        self._mirror_ud = mirror_ud
        return self

    def set_mirror_lr(self, mirror_lr: bool) -> Sprite:
        self._mirror_lr = mirror_lr
        return self

    def set_blocking(self, blocking: BlockingMode) -> Sprite:
        if not isinstance(blocking, BlockingMode):
            raise ValueError(f"Invalid blocking mode: {blocking!r}")
        self._blocking = blocking
        return self

    def set_interaction(self, interaction: InteractionMode) -> Sprite:
        if not isinstance(interaction, InteractionMode):
            raise ValueError(f"Invalid interaction mode: {interaction!r}")
        self._interaction = interaction
        return self

    def set_visible(self, visible: bool) -> Sprite:
        self._interaction = _INTERACTION_BY_FLAGS[(bool(visible), self.is_collidable)]
        return self

    def set_collidable(self, collidable: bool) -> Sprite:
        self._interaction = _INTERACTION_BY_FLAGS[(self.is_visible, bool(collidable))]
        return self

    def set_name(self, name: str) -> Sprite:
        if not name:
            raise ValueError("Sprite name cannot be empty")
        self._name = name
        return self

    def color_remap(self, old_color: int | None, new_color: int) -> Sprite:
        pixels = self.pixels
        if old_color is None:
            self.pixels = np.where(pixels >= 0, new_color, pixels)
        else:
            self.pixels = np.where(pixels == old_color, new_color, pixels)
        return self

    # ------------------------------------------------------------------ queries
    def render(self) -> np.ndarray:
        return self._engine_image().img.copy()

    def collides_with(self, other: Sprite, ignoreMode: bool = False) -> bool:  # noqa: N803 - API name
        return sprites_collide(self, other, ignoreMode)

    # ------------------------------------------------------------------ construction helpers
    def merge(self, other: Sprite) -> Sprite:
        mine = self._engine_image()
        theirs = other._engine_image()
        x0 = min(self._x, other._x)
        y0 = min(self._y, other._y)
        x1 = max(self._x + mine.w, other._x + theirs.w)
        y1 = max(self._y + mine.h, other._y + theirs.h)
        canvas = np.full((y1 - y0, x1 - x0), -1, dtype=np.int8)
        for sprite, image in ((other, theirs), (self, mine)):
            top, left = sprite._y - y0, sprite._x - x0
            region = canvas[top : top + image.h, left : left + image.w]
            np.copyto(region, image.img, where=image.img != -1, casting="unsafe")
        blocking = self._blocking
        if blocking is _NOT_BLOCKED:
            blocking = other._blocking
        elif blocking is _BOUNDING_BOX and other._blocking is _PIXEL_PERFECT:
            blocking = _PIXEL_PERFECT
        interaction = self._interaction
        if interaction is _REMOVED:
            interaction = other._interaction
        elif interaction in (_INVISIBLE, _INTANGIBLE) and other._interaction is _TANGIBLE:
            interaction = _TANGIBLE
        # The reference builds the tag union from a set (unordered); keep a deterministic order.
        tags = list(dict.fromkeys(list(self._tags) + list(other._tags)))
        return Sprite(
            canvas,
            name=self._name,
            x=x0,
            y=y0,
            layer=max(self._layer, other._layer),
            blocking=blocking,
            interaction=interaction,
            tags=tags,
        )

    def clone(self, new_name: str | None = None) -> Sprite:
        pixels = self.pixels
        if type(pixels) is _NDARRAY and pixels.dtype == _INT8 and pixels.ndim == 2 and pixels.shape[0] > 0:
            # Same values as the reference's round trip through nested lists, without the lists.
            new_pixels = pixels.copy()
            cache = self._engine_cache
        else:
            new_pixels = convert_pixels(pixels.tolist() if isinstance(pixels, np.ndarray) else pixels)
            cache = None
        rotation = self.rotation % 360
        if rotation not in self.VALID_ROTATIONS:
            raise ValueError(f"Invalid rotation {self.rotation}: must be one of {sorted(self.VALID_ROTATIONS)}")
        new = Sprite.__new__(Sprite)
        state = new.__dict__
        state["_engine_cache"] = None
        state["pixels"] = new_pixels
        state["_name"] = new_name if new_name is not None else self._name
        state["_x"] = int(self._x)
        state["_y"] = int(self._y)
        state["_layer"] = int(self._layer)
        state["rotation"] = rotation
        state["_mirror_ud"] = self._mirror_ud
        state["_mirror_lr"] = self._mirror_lr
        state["_blocking"] = self._blocking
        state["_scale"] = 1
        new.set_scale(self._scale)
        state["_interaction"] = self._interaction
        state["_tags"] = list(self._tags)
        if cache is not None and cache.src is pixels and cache.raw == pixels.tobytes() and cache.shape == pixels.shape:
            state["_engine_cache"] = cache.rebind(new_pixels)
        return new

    # ------------------------------------------------------------------ copying
    def __deepcopy__(self, memo: dict[int, Any]) -> Sprite:
        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        state = new.__dict__
        deepcopy = copy.deepcopy
        for key, value in self.__dict__.items():
            kind = type(value)
            if kind is int or kind is str or kind is bool or kind is float or value is None or kind is BlockingMode or kind is InteractionMode:
                state[key] = value
            elif key == "_engine_cache":
                state[key] = None
            elif kind is _NDARRAY:
                copied = memo.get(id(value))
                if copied is None:
                    copied = value.__deepcopy__(memo)
                    memo[id(value)] = copied
                    memo.setdefault(id(memo), []).append(value)  # keep the original alive, as copy.deepcopy does
                state[key] = copied
            else:
                state[key] = deepcopy(value, memo)
        cache = self._engine_cache
        pixels = self.__dict__.get("pixels")
        if (
            cache is not None
            and cache.src is pixels
            and cache.shape == pixels.shape
            and cache.raw == pixels.tobytes()
        ):
            state["_engine_cache"] = cache.rebind(state["pixels"])
        return new

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_engine_cache"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_engine_cache", None)

    def __repr__(self) -> str:
        return f"Sprite(name={self._name!r}, x={self._x}, y={self._y}, layer={self._layer})"


def sprites_collide(a: Sprite, b: Sprite, ignore_mode: bool = False) -> bool:
    """``a.collides_with(b, ignore_mode)`` (spec §3.8)."""
    if a is b:
        return False
    if not ignore_mode:
        ia = a._interaction
        ib = b._interaction
        if not (ia is _TANGIBLE or ia is _INVISIBLE) or not (ib is _TANGIBLE or ib is _INVISIBLE):
            return False
        if a._blocking is _NOT_BLOCKED or b._blocking is _NOT_BLOCKED:
            return False
    ca = a._engine_image()
    cb = b._engine_image()
    ax, ay, bx, by = a._x, a._y, b._x, b._y
    x0 = ax if ax > bx else bx
    x1 = min(ax + ca.w, bx + cb.w)
    if x0 >= x1:
        return False
    y0 = ay if ay > by else by
    y1 = min(ay + ca.h, by + cb.h)
    if y0 >= y1:
        return False
    if a._blocking is not _PIXEL_PERFECT and b._blocking is not _PIXEL_PERFECT:
        return True
    mask_a = ca.solid_mask()
    mask_b = cb.solid_mask()
    if mask_a is None and mask_b is None:
        return True
    if mask_a is None:
        return bool(mask_b[y0 - by : y1 - by, x0 - bx : x1 - bx].any())
    if mask_b is None:
        return bool(mask_a[y0 - ay : y1 - ay, x0 - ax : x1 - ax].any())
    return bool(
        (mask_a[y0 - ay : y1 - ay, x0 - ax : x1 - ax] & mask_b[y0 - by : y1 - by, x0 - bx : x1 - bx]).any()
    )
