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
from itertools import compress as _compress
from itertools import count as _count
from operator import ne as _ne
from typing import Any

import numpy as np

from ._attrs import read_only
from ._copying import keep_alive, register_copier
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
_new_object = object.__new__
_NORMAL_ROTATIONS = frozenset((0, 90, 180, 270))
_SPRITE_STATE_SIZE = 15  # keys of a Sprite's __dict__: 12 state attributes + 3 _engine_ ones
_IMAGE_ATTRIBUTES = frozenset(("pixels", "rotation", "_scale", "_mirror_ud", "_mirror_lr"))
# Bumped by every change that can affect what a camera draws (see Sprite); cameras compare it.
_epoch = 0


def _next_stamp() -> int:
    global _epoch
    _epoch += 1
    return _epoch
_IMMUTABLE_TYPES = frozenset((int, float, bool, str, type(None), BlockingMode, InteractionMode))
_NDARRAY = np.ndarray
_INT8 = np.dtype(np.int8)
try:  # the C function itself: np.count_nonzero adds a Python-level wrapper per call
    from numpy._core.multiarray import count_nonzero as _count_nonzero
except ImportError:  # pragma: no cover - other numpy layouts
    _count_nonzero = np.count_nonzero
_logical_and = np.logical_and


def convert_pixels(pixels: Any) -> np.ndarray:
    """Constructor conversion of ``pixels`` (spec §3.1 step 1)."""
    if isinstance(pixels, np.ndarray):
        if pixels.ndim != 2:
            raise ValueError("Pixels must be a 2D array")
        if pixels.dtype == _INT8:
            return pixels  # aliased, not copied
        return pixels.astype(np.int8)
    if not isinstance(pixels, list):
        raise ValueError("Pixels must be a 2D list of integers")
    for row in pixels:
        if not isinstance(row, list):
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
    """A rendered sprite image and the masks derived from it, shared by every sprite state that
    renders to it (treat all arrays as read-only).  ``token`` is unique per image object.

    ``img8``: the values as drawn (int8, numpy's unsafe cast); ``draw``: cells >= 0, or None when
    all are drawn; ``solid``: cells != -1 (collisions, hit tests), or None when all are solid;
    ``drawn``: number of drawn cells; ``cells()``: their rows, columns and values (for cameras).
    """

    __slots__ = (
        "img", "h", "w", "token", "img8", "draw", "solid", "drawn", "_cells", "_scaled",
        "scaled_for", "scaled_img", "scaled_mask",
    )

    def __init__(self, img: np.ndarray) -> None:
        self.img = img
        self.h, self.w = img.shape
        self.token = next(_token_counter)
        self.img8 = img if img.dtype == _INT8 else img.astype(np.int8)
        draw = img >= 0
        self.drawn = int(_count_nonzero(draw))
        self.draw = None if self.drawn == draw.size else draw
        solid = img != -1
        self.solid = None if _count_nonzero(solid) == solid.size else solid
        self._cells = None
        self._scaled: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
        # The most recently requested scaling, as plain attributes for the camera's inner loop.
        self.scaled_for = 0
        self.scaled_img = self.scaled_mask = None

    def scaled(self, scale: int) -> tuple[np.ndarray, np.ndarray | None]:
        """(img8, draw mask) up-scaled by ``scale`` in both directions (cameras draw with these)."""
        found = self._scaled.get(scale)
        if found is None:
            if scale == 1:
                found = (self.img8, self.draw)
            else:
                up = self.img8.repeat(scale, axis=0).repeat(scale, axis=1)
                mask = None if self.draw is None else self.draw.repeat(scale, axis=0).repeat(scale, axis=1)
                found = (up, mask)
            self._scaled[scale] = found
        self.scaled_for = scale
        self.scaled_img, self.scaled_mask = found
        return found

    def cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, columns, int8 values) of the drawn cells, in row-major order."""
        if self._cells is None:
            if self.draw is None:
                rows, cols = np.divmod(np.arange(self.h * self.w), self.w)
                values = self.img8.ravel()
            else:
                rows, cols = np.nonzero(self.draw)
                values = self.img8[rows, cols]
            self._cells = (rows, cols, np.ascontiguousarray(values))
        return self._cells


class _SpriteCache:
    """A sprite's current image and the pixel bytes it was computed from.  Dropped whenever
    ``pixels``, ``rotation``, ``_scale`` or a mirror flag is assigned."""

    __slots__ = ("raw", "image")

    def __init__(self, raw: bytes, image: _Image) -> None:
        self.raw = raw
        self.image = image


# Content-addressed images: sprites in the same state (clones, undo copies, colours toggled back)
# share one image and token, so the camera sees them as unchanged.  Bounded; clearing it only
# costs recomputation (tokens are never reused).
_IMAGES: dict[tuple, _Image] = {}
_IMAGES_LIMIT = 50_000


def image_for(pixels: np.ndarray, raw: bytes, rotation: Any, mirror_ud: Any, mirror_lr: Any, scale: int) -> _Image:
    try:
        key = (raw, pixels.shape, pixels.dtype.str, rotation, bool(mirror_ud), bool(mirror_lr), scale)
        image = _IMAGES.get(key)
    except TypeError:  # unhashable transform values written by a game: no sharing
        key = None
        image = None
    if image is None:
        image = _Image(render_image(pixels, rotation, mirror_ud, mirror_lr, scale))
        if key is not None:
            if len(_IMAGES) >= _IMAGES_LIMIT:
                _IMAGES.clear()
            _IMAGES[key] = image
    return image


def _remap(pixels: Any, old_color: Any, new_color: Any) -> np.ndarray:
    """``color_remap``'s new pixels (spec §3.9)."""
    if old_color is None:
        return np.where(pixels >= 0, new_color, pixels)
    return np.where(pixels == old_color, new_color, pixels)


# color_remap results by (pixel bytes, shape, strides, old, new); sprites get copies.  Bounded;
# clearing only costs recomputation.
_REMAPS: dict[tuple, np.ndarray] = {}
_REMAPS_LIMIT = 4096


class _SpriteLayout:
    """The slots of ``Sprite`` (see there).  Its subclasses, ``Sprite`` and ``_SpriteBlank``, add
    the instance ``__dict__`` themselves (no ``__slots__``), so CPython manages it inline: reads of
    the state attributes (``_x``, ``_interaction``, ...) are then specialised by the interpreter,
    about twice as fast as through a ``__dict__`` slot."""

    __slots__ = ("x", "y", "tags", "name", "layer", "_engine_px", "_engine_plain")


class _SpriteBlank(_SpriteLayout):
    """Same memory layout as ``Sprite`` without its ``__setattr__``: copies fill the slots with
    plain stores and then become a ``Sprite`` by ``__class__`` assignment, several times cheaper
    than slot descriptor calls."""


class Sprite(_SpriteLayout):
    """A game object drawn by the camera; attribute names are part of the API (games touch them).

    Change tracking (an implementation detail that keeps caches exact and cheap):

    * any attribute assignment from outside the engine goes through ``__setattr__``, which drops
      the image cache when it touches ``pixels``/``rotation``/``_scale``/mirrors and bumps the
      module's change epoch (``_epoch``) that the camera uses to skip unchanged frames;
    * ``pixels`` is a property: the first time code outside the engine reads it, or assigns an
      array, or passes an int8 array to the constructor (which keeps it by reference), the array is
      marked *exposed* (the holder may write into it in place at any time), and from then on its
      contents are compared with the cache on every use.  Arrays the engine created itself (clones,
      ``color_remap`` results, conversions from lists, deep copies of unexposed arrays) are private
      until read, so nobody can write into them unseen.  The array itself stays in
      ``__dict__["pixels"]``; the slot ``_engine_px`` holds it too once it is exposed (None before),
      so the property's usual path is a single slot read.
    * copy-on-write: deep copies and clones of an unexposed array get a *view* of it instead of a
      copy (the engine never writes into pixel arrays in place, so the memory is shared safely).
      Such holders have ``_engine_exposed`` None ("unexposed, memory maybe shared"), and whichever
      exposes its array replaces it with a private copy first (``_engine_unshare``).  Views are
      distinct array objects, so object identity (aliasing, state hashes) is unchanged.

    Read speed: ``x``, ``y``, ``tags``, ``name`` and ``layer`` are slots holding the objects of ``_x``,
    ``_y``, ``_tags``, ``_name`` and ``_layer``, because games read them in tight loops and a slot
    read costs a few ns where a property call costs tens.  The ``__dict__`` entries stay the single
    source of truth that games write; every write (``__setattr__``, the mutators, the constructor,
    copies) updates the slot, and assigning or deleting a public name raises ``AttributeError`` as a
    setter-less property does.
    """

    VALID_ROTATIONS = {0, 90, 180, 270}

    # Class-level defaults, so objects made without __init__ (subclasses, __new__) stay valid.
    _engine_cache: _SpriteCache | None = None
    _engine_exposed: bool = True
    # The epoch of the sprite's last change: caches keyed on (sprite, stamp) see every change.
    _engine_stamp: int = 0

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
        global _epoch
        # A combined dict (see _SpriteLayout), keeping what a subclass may have set before.
        state = dict(self.__dict__)
        _set_dict(self, state)
        converted = convert_pixels(pixels)
        state["_engine_cache"] = None
        state["_engine_exposed"] = converted is pixels  # an int8 array is kept by reference
        state["pixels"] = converted
        # uuid4 draws from os.urandom, so Python's and numpy's global RNGs stay untouched.
        state["_name"] = name if name is not None else str(uuid.uuid4())
        state["_x"] = int(x)
        state["_y"] = int(y)
        state["_layer"] = int(layer)
        normalised = rotation % 360
        if normalised not in self.VALID_ROTATIONS:
            raise ValueError(f"Invalid rotation {rotation}: must be one of {sorted(self.VALID_ROTATIONS)}")
        state["rotation"] = normalised
        state["_mirror_ud"] = mirror_ud
        state["_mirror_lr"] = mirror_lr
        state["_blocking"] = blocking
        state["_scale"] = 1
        if type(scale) is not int or scale != 1 or type(self) is not Sprite:
            self.set_scale(scale)  # validation; scale 1 (the usual) would change nothing
        if interaction is None:
            interaction = _INTERACTION_BY_FLAGS[(bool(visible), bool(collidable))]
        state["_interaction"] = interaction
        state["_tags"] = tags
        _set_x(self, state["_x"])
        _set_y(self, state["_y"])
        _set_tags(self, tags)
        _set_name(self, state["_name"])
        _set_layer(self, state["_layer"])
        _set_px(self, converted if state["_engine_exposed"] else None)
        _set_plain(self, -1)
        _epoch += 1
        self.__dict__["_engine_stamp"] = _epoch

    # ------------------------------------------------------------------ change tracking
    def __setattr__(self, name: str, value: Any) -> None:
        global _epoch
        if name in _MIRRORS:
            if name in _READ_ONLY:
                raise AttributeError(f"property {name!r} of {type(self).__name__!r} object has no setter")
            _MIRRORS[name](self, value)  # for "pixels": the assigner holds the array, so it is exposed
        state = self.__dict__
        state[name] = value
        if name in _IMAGE_ATTRIBUTES:
            state["_engine_cache"] = None
            if name == "pixels":
                state["_engine_exposed"] = True  # the assigner still holds the array
        _epoch += 1
        state["_engine_stamp"] = _epoch

    def __delattr__(self, name: str) -> None:
        global _epoch
        if name in _READ_ONLY:
            raise AttributeError(f"property {name!r} of {type(self).__name__!r} object has no deleter")
        if name == "pixels":  # a plain attribute in the reference; object.__delattr__ would find the property
            try:
                del self.__dict__["pixels"]
            except KeyError:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute 'pixels'") from None
            _set_px(self, None)
        else:
            object.__delattr__(self, name)
            if name in _DELETE_MIRROR:  # reading the public name fails now too, as the property would
                try:
                    _DELETE_MIRROR[name](self)
                except AttributeError:
                    pass
        if name in _IMAGE_ATTRIBUTES:
            self.__dict__["_engine_cache"] = None
        _epoch += 1
        self.__dict__["_engine_stamp"] = _epoch

    @property
    def pixels(self) -> np.ndarray:
        try:
            exposed = self._engine_px
        except AttributeError:  # made without __init__ (__new__, a subclass that skips it)
            exposed = None
        if exposed is None:
            return self._engine_expose()
        return exposed

    def _engine_expose(self) -> np.ndarray:
        """``pixels`` read for the first time since the array was last private: mark it exposed."""
        global _epoch
        state = self.__dict__
        exposed = state.get("_engine_exposed", True)
        if not exposed:
            if exposed is None:
                _engine_unshare(state)
            state["_engine_exposed"] = True
            _epoch += 1  # the reader may now write into the array behind our back
            state["_engine_stamp"] = _epoch
        try:
            pixels = state["pixels"]
        except KeyError:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute 'pixels'") from None
        _set_px(self, pixels)
        return pixels

    def __copy__(self) -> Sprite:
        # A shallow copy shares the pixels array between two sprites: both count as exposed.
        cls = type(self)
        new = _new_object(cls)
        if self.__dict__.get("_engine_exposed", True) is None:
            _engine_unshare(self.__dict__)
        state = self.__dict__.copy()
        state["_engine_exposed"] = True
        state["_engine_stamp"] = _next_stamp()
        self.__dict__["_engine_exposed"] = True
        _set_dict(new, state)
        _sync_slots(new, state)
        return new

    # ------------------------------------------------------------------ cached image
    def _engine_image(self) -> _Image:
        """The image of the current state (exposed pixels are compared with the cache)."""
        state = self.__dict__
        cache = state.get("_engine_cache")
        if cache is not None and (not state.get("_engine_exposed", True) or cache.raw == state["pixels"].tobytes()):
            return cache.image
        return self._engine_refresh()

    def _engine_refresh(self) -> _Image:
        state = self.__dict__
        pixels = state["pixels"]
        rotation = state["rotation"]
        mirror_ud = state["_mirror_ud"]
        mirror_lr = state["_mirror_lr"]
        scale = state["_scale"]
        if type(pixels) is not _NDARRAY:
            # Not an array (a game assigned something else): compute without caching.
            return _Image(render_image(np.asarray(pixels), rotation, mirror_ud, mirror_lr, scale))
        raw = pixels.tobytes()
        image = image_for(pixels, raw, rotation, mirror_ud, mirror_lr, scale)
        state["_engine_cache"] = _SpriteCache(raw, image)
        return image

    # ------------------------------------------------------------------ read-only properties
    scale = read_only("_scale", "int")
    blocking = read_only("_blocking", "BlockingMode")
    interaction = read_only("_interaction", "InteractionMode")
    mirror_ud = read_only("_mirror_ud", "bool")
    mirror_lr = read_only("_mirror_lr", "bool")

    @property
    def is_visible(self) -> bool:
        return self._interaction is _TANGIBLE or self._interaction is _INTANGIBLE

    @property
    def is_collidable(self) -> bool:
        return self._interaction is _TANGIBLE or self._interaction is _INVISIBLE

    @property
    def width(self) -> int:
        return image_of(self).w

    @property
    def height(self) -> int:
        return image_of(self).h

    # ------------------------------------------------------------------ mutators
    # set_position and move run in games' inner loops: int() only for what is not an int already
    # (the same value either way: int(v) is v for an exact int).
    def set_position(self, x: int, y: int) -> Sprite:
        global _epoch
        if type(x) is not int:
            x = int(x)
        if type(y) is not int:
            y = int(y)
        state = self.__dict__
        state["_x"] = x
        state["_y"] = y
        _set_x(self, x)
        _set_y(self, y)
        _epoch += 1
        state["_engine_stamp"] = _epoch
        return self

    def move(self, dx: int, dy: int) -> None:
        global _epoch
        state = self.__dict__
        state["_x"] = x = state["_x"] + (dx if type(dx) is int else int(dx))
        state["_y"] = y = state["_y"] + (dy if type(dy) is int else int(dy))
        _set_x(self, x)
        _set_y(self, y)
        _epoch += 1
        state["_engine_stamp"] = _epoch

    def set_rotation(self, rotation: int) -> Sprite:
        normalised = int(rotation) % 360
        if normalised not in self.VALID_ROTATIONS:
            raise ValueError(f"Invalid rotation {rotation}: must be one of {sorted(self.VALID_ROTATIONS)}")
        return self._engine_restyle("rotation", normalised)

    def rotate(self, delta: int) -> Sprite:
        return self.set_rotation(self.rotation + delta)

    def set_scale(self, scale: int) -> Sprite:
        value = int(scale)
        if value == 0:
            raise ValueError("Scale cannot be zero")
        if value < 0:
            factor = 1 - value
            height, width = self.__dict__["pixels"].shape[:2]
            if height % factor or width % factor:
                raise ValueError(
                    f"Down-scale factor {factor} must divide the sprite dimensions {width}x{height}"
                )
        return self._engine_restyle("_scale", value)

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
        global _epoch
        self.__dict__["_layer"] = layer = int(layer)
        _set_layer(self, layer)
        _epoch += 1
        self.__dict__["_engine_stamp"] = _epoch
        return self

    def set_mirror_ud(self, mirror_ud: bool) -> Sprite:
        return self._engine_restyle("_mirror_ud", mirror_ud)

    def set_mirror_lr(self, mirror_lr: bool) -> Sprite:
        return self._engine_restyle("_mirror_lr", mirror_lr)

    def _engine_restyle(self, key: str, value: Any) -> Sprite:
        """Store a field the rendered image depends on (rotation, scale, mirrors): the cached image is
        dropped and the sprite restamped, so cameras re-render it."""
        global _epoch
        state = self.__dict__
        state[key] = value
        state["_engine_cache"] = None
        _epoch += 1
        state["_engine_stamp"] = _epoch
        return self

    def set_blocking(self, blocking: BlockingMode) -> Sprite:
        if not isinstance(blocking, BlockingMode):
            raise ValueError(f"Invalid blocking mode: {blocking!r}")
        self.__dict__["_blocking"] = blocking
        return self

    def set_interaction(self, interaction: InteractionMode) -> Sprite:
        global _epoch
        if not isinstance(interaction, InteractionMode):
            raise ValueError(f"Invalid interaction mode: {interaction!r}")
        self.__dict__["_interaction"] = interaction
        _epoch += 1
        self.__dict__["_engine_stamp"] = _epoch
        return self

    def set_visible(self, visible: bool) -> Sprite:
        global _epoch
        self.__dict__["_interaction"] = _INTERACTION_BY_FLAGS[(bool(visible), self.is_collidable)]
        _epoch += 1
        self.__dict__["_engine_stamp"] = _epoch
        return self

    def set_collidable(self, collidable: bool) -> Sprite:
        global _epoch
        self.__dict__["_interaction"] = _INTERACTION_BY_FLAGS[(self.is_visible, bool(collidable))]
        _epoch += 1
        self.__dict__["_engine_stamp"] = _epoch
        return self

    def set_name(self, name: str) -> Sprite:
        if not name:
            raise ValueError("Sprite name cannot be empty")
        self.__dict__["_name"] = name
        _set_name(self, name)
        _set_plain(self, -1)  # any value (see __deepcopy__)
        return self

    def color_remap(self, old_color: int | None, new_color: int) -> Sprite:
        global _epoch
        state = self.__dict__
        pixels = state["pixels"]
        if (
            type(pixels) is _NDARRAY
            and pixels.dtype is _INT8
            and type(new_color) is int
            and -128 <= new_color <= 127
            and (old_color is None or type(old_color) is int)
        ):
            # Games remap the same few images back and forth: results are content-addressed
            # (strides included, as np.where keeps the input's memory layout).  Exact int types
            # only: True == 1 would alias keys.  A copy rather than a copy-on-write view, as
            # games often read the pixels of sprites they remap (ck17).
            key = (pixels.tobytes(), pixels.shape, pixels.strides, old_color, new_color)
            shared = _REMAPS.get(key)
            if shared is None:
                shared = _remap(pixels, old_color, new_color)
                if len(_REMAPS) >= _REMAPS_LIMIT:
                    _REMAPS.clear()
                _REMAPS[key] = shared
            state["pixels"] = shared.copy(order="K")
        else:
            state["pixels"] = _remap(pixels, old_color, new_color)
        state["_engine_exposed"] = False  # a new array nobody else holds
        _set_px(self, None)
        state["_engine_cache"] = None
        _epoch += 1
        self.__dict__["_engine_stamp"] = _epoch
        return self

    # ------------------------------------------------------------------ queries
    def render(self) -> np.ndarray:
        return image_of(self).img.copy()

    def collides_with(self, other: Sprite, ignoreMode: bool = False) -> bool:  # noqa: N803 - API name
        return sprites_collide(self, other, ignoreMode)

    # ------------------------------------------------------------------ construction helpers
    def merge(self, other: Sprite) -> Sprite:
        mine = image_of(self)
        theirs = image_of(other)
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
        merged = Sprite(
            canvas,
            name=self._name,
            x=x0,
            y=y0,
            layer=max(self._layer, other._layer),
            blocking=blocking,
            interaction=interaction,
            tags=tags,
        )
        merged.__dict__["_engine_exposed"] = False  # the canvas is ours alone
        return merged

    def clone(self, new_name: str | None = None) -> Sprite:
        state = self.__dict__
        pixels = state.get("pixels")
        if (
            len(state) == _SPRITE_STATE_SIZE
            and type(pixels) is _NDARRAY
            and pixels.dtype is _INT8
            and pixels.ndim == 2
            and pixels.shape[0]
            and type(state["_x"]) is int
            and type(state["_y"]) is int
            and type(state["_layer"]) is int
            and type(state["_scale"]) is int
            and state["_scale"] > 0
            and state["rotation"] in _NORMAL_ROTATIONS
        ):
            # Fast path for the usual state: the constructor would change nothing but copy pixels
            # (an int8 copy equals the reference's round trip through nested lists) and tags.
            copied = state.copy()
            # The copy renders exactly like the original, so it shares the original's (validated,
            # immutable) image cache: clones made at every reset need no image lookup of their own.
            cache = state.get("_engine_cache")
            if cache is None or (state.get("_engine_exposed", True) and cache.raw != pixels.tobytes()):
                self._engine_refresh()  # templates (clean levels, prototypes) are cloned again and again
                copied["_engine_cache"] = state["_engine_cache"]
            global _epoch
            _epoch += 1
            copied["_engine_stamp"] = _epoch
            if not state.get("_engine_exposed", True) and pixels.flags.c_contiguous:
                # Copy-on-write (see the class docstring); C order only, the layout of a real copy.
                copied["pixels"] = pixels.view()
                copied["_engine_exposed"] = state["_engine_exposed"] = None
            else:
                copied["pixels"] = pixels.copy()
                copied["_engine_exposed"] = False
            copied["_tags"] = list(state["_tags"])
            if new_name is not None:
                copied["_name"] = new_name
            return _new_sprite(copied)
        return self._engine_clone_slow(new_name)

    def _engine_clone_slow(self, new_name: str | None) -> Sprite:
        pixels = self.__dict__.get("pixels")
        if type(pixels) is _NDARRAY and pixels.dtype == _INT8 and pixels.ndim == 2 and pixels.shape[0] > 0:
            new_pixels = pixels.copy()
        else:
            new_pixels = convert_pixels(pixels.tolist() if isinstance(pixels, np.ndarray) else pixels)
        rotation = self.rotation % 360
        if rotation not in self.VALID_ROTATIONS:
            raise ValueError(f"Invalid rotation {self.rotation}: must be one of {sorted(self.VALID_ROTATIONS)}")
        new = _new_object(Sprite)
        _set_dict(
            new,
            {
                "_engine_cache": None,
                "_engine_exposed": False,
                "_engine_stamp": _next_stamp(),
                "pixels": new_pixels,
                "_name": new_name if new_name is not None else self._name,
                "_x": int(self._x),
                "_y": int(self._y),
                "_layer": int(self._layer),
                "rotation": rotation,
                "_mirror_ud": self._mirror_ud,
                "_mirror_lr": self._mirror_lr,
                "_blocking": self._blocking,
                "_scale": 1,
                "_interaction": self._interaction,
                "_tags": list(self._tags),
            }
        )
        _sync_slots(new, new.__dict__)
        new.set_scale(self._scale)  # validation (zero, divisibility) as in the constructor
        return new

    # ------------------------------------------------------------------ copying
    def __deepcopy__(self, memo: dict[int, Any]) -> Sprite:
        return _copy_sprite(self, memo)

    def _engine_deepcopy_generic(self, memo: dict[int, Any]) -> Sprite:
        cls = type(self)
        new = _new_object(cls)
        memo[id(self)] = new
        state = self.__dict__.copy()
        for key, value in state.items():
            kind = type(value)
            if kind in _IMMUTABLE_TYPES:
                continue
            if key == "_engine_cache":
                state[key] = None
                continue
            copied = memo.get(id(value))
            if copied is not None:
                state[key] = copied
            elif kind is _NDARRAY:
                copied = value.__deepcopy__(memo)
                memo[id(value)] = copied
                memo.setdefault(id(memo), []).append(value)  # keep the original alive, like copy.deepcopy
                state[key] = copied
            elif kind is list and all(type(item) is str for item in value):
                copied = value[:]
                memo[id(value)] = copied
                memo.setdefault(id(memo), []).append(value)
                state[key] = copied
            else:
                state[key] = copy.deepcopy(value, memo)
        cache = self.__dict__.get("_engine_cache")
        pixels = self.__dict__.get("pixels")
        if (
            cache is not None
            and type(pixels) is _NDARRAY
            and type(state.get("pixels")) is _NDARRAY
            and (not self.__dict__.get("_engine_exposed", True) or cache.raw == pixels.tobytes())
        ):
            state["_engine_cache"] = cache  # same contents, same image (the cache is immutable)
        state["_engine_stamp"] = _next_stamp()
        _set_dict(new, dict(state))
        _sync_slots(new, state)
        return new

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_engine_cache"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        combined = dict(self.__dict__)
        combined.update(state)
        _set_dict(self, combined)
        self.__dict__["_engine_cache"] = None
        self.__dict__.setdefault("_engine_exposed", True)
        _sync_slots(self, self.__dict__)

    def __repr__(self) -> str:
        return f"Sprite(name={self._name!r}, x={self._x}, y={self._y}, layer={self._layer})"


# ``sprite._engine_image()`` as a plain function call: method lookups on sprites are not
# specialised by CPython 3.11 (their instance dicts are materialised), global function calls are.
image_of = Sprite._engine_image

# State attribute -> the read-only public name whose slot mirrors it (see Sprite).
_MIRRORED = {"_x": "x", "_y": "y", "_tags": "tags", "_name": "name", "_layer": "layer"}
_READ_ONLY = frozenset(_MIRRORED.values())
_SLOT_SETTERS = tuple((source, _SpriteLayout.__dict__[public].__set__) for source, public in _MIRRORED.items())
_set_x, _set_y, _set_tags, _set_name, _set_layer = (setter for _, setter in _SLOT_SETTERS)
_set_px = _SpriteLayout.__dict__["_engine_px"].__set__
_set_plain = _SpriteLayout.__dict__["_engine_plain"].__set__
# Installs an instance dict without Sprite.__setattr__.  An assigned dict is a combined table, whose
# attribute reads CPython specialises; the dict it makes itself for a Sprite is a split table
# (shared keys), whose reads take the generic path at about twice the cost.
_set_dict = Sprite.__dict__["__dict__"].__set__
# Attribute written through __setattr__ -> setter of its mirror slot (None: a read-only public name).
_MIRRORS: dict[str, Any] = {**dict(_SLOT_SETTERS), "pixels": _set_px, **dict.fromkeys(_READ_ONLY)}
_DELETE_MIRROR = {source: _SpriteLayout.__dict__[public].__delete__ for source, public in _MIRRORED.items()}


def _new_sprite(state: dict[str, Any], plain: int = -1) -> Sprite:
    """A new ``Sprite`` whose ``__dict__`` is ``state`` (not copied; it has every standard
    attribute), mirror slots filled, without ``Sprite.__setattr__`` or ``__init__``.  ``plain``:
    the state's ``_engine_stamp`` if it is known to pass ``_plain_state``."""
    new = _new_object(_SpriteBlank)
    new.__dict__ = state
    new.x = state["_x"]
    new.y = state["_y"]
    new.tags = state["_tags"]
    new.name = state["_name"]
    new.layer = state["_layer"]
    new._engine_px = None
    new._engine_plain = plain
    new.__class__ = Sprite
    return new


def _copy_sprite(sprite: Sprite, memo: dict[int, Any]) -> Sprite:
    """``copy.deepcopy(sprite, memo)``, entering the copy in ``memo`` (``Sprite.__deepcopy__``, and
    the copier ``engine._copying`` uses for sprites).

    Same result as the generic deepcopy (memo-aware, so aliasing between copied sprites is kept),
    minus nothing but cost: dc22/ud74-style games deep-copy the whole sprite list on every move,
    others snapshot whole levels for undo, and the explorer copies a game per transition.  The
    exposure flag is kept: another copied object may hold the copied array too.  The image cache
    is shared as is: an exposed copy compares it with its pixels on every use (so a stale one is
    never used), and an unexposed array still matches it.  The change stamp is kept too: the copy
    is in the state its original was in at that stamp, and every change of either object gives it
    a new stamp, so caches that recorded the original at that stamp (a camera's frame, carried
    over to the copied camera by ``camera._translated_composite``) hold for the copy.

    A direct path when every attribute but pixels and tags is immutable (shared as is).  Checking
    that costs about as much as the rest of the copy, so a sprite remembers the change stamp at
    which it last passed (``_engine_plain``): every write from outside the engine, and every
    engine write of a value that could be mutable, bumps the stamp.
    """
    state = sprite.__dict__
    try:
        pixels = state["pixels"]
        tags = state["_tags"]
        stamp = state["_engine_stamp"]
        plain = sprite._engine_plain == stamp
    except (KeyError, AttributeError):  # a game replaced standard attributes by others
        plain = False
    if not plain:
        if not _plain_state(state):
            return _copy_sprite_generic(sprite, memo)
        _set_plain(sprite, stamp)
    if type(pixels) is not _NDARRAY or type(tags) is not list:
        return _copy_sprite_generic(sprite, memo)
    get = memo.get
    new_tags = get(id(tags))
    if new_tags is None:
        for item in tags:
            if type(item) not in _IMMUTABLE_TYPES:
                return _copy_sprite_generic(sprite, memo)
    keep = get(id(memo))
    if keep is None:
        keep = memo[id(memo)] = []  # like copy.deepcopy: originals stay alive while memo ids are in use
    copied = state.copy()
    if new_tags is None:
        copied["_tags"] = new_tags = memo[id(tags)] = tags[:]
        keep.append(tags)
    else:
        copied["_tags"] = new_tags
    new_pixels = get(id(pixels))
    if new_pixels is None:
        if not state["_engine_exposed"]:  # copy-on-write (see the class docstring)
            new_pixels = pixels.view()
            copied["_engine_exposed"] = state["_engine_exposed"] = None
        elif pixels.dtype is not _INT8 and pixels.dtype.hasobject:
            new_pixels = pixels.__deepcopy__(memo)
        else:
            new_pixels = pixels.copy(order="K")  # what ndarray.__deepcopy__ does for plain dtypes
        memo[id(pixels)] = new_pixels
        keep.append(pixels)
    elif not state["_engine_exposed"]:
        copied["_engine_exposed"] = None  # not our own array: it may share memory with someone's
    copied["pixels"] = new_pixels
    if type(sprite) is Sprite:  # as _new_sprite, inlined
        new = _new_object(_SpriteBlank)
        new.__dict__ = copied
        new.x = copied["_x"]
        new.y = copied["_y"]
        new.tags = new_tags
        new.name = copied["_name"]
        new.layer = copied["_layer"]
        new._engine_px = None
        new._engine_plain = stamp  # same kinds of values: plain as well
        new.__class__ = Sprite
    else:
        new = _new_object(type(sprite))
        _set_dict(new, copied)
        _sync_slots(new, copied)
    memo[id(sprite)] = new
    keep.append(sprite)
    return new


def _copy_sprite_generic(sprite: Sprite, memo: dict[int, Any]) -> Sprite:
    new = sprite._engine_deepcopy_generic(memo)
    keep_alive(sprite, memo)
    return new


def _plain_state(state: dict[str, Any]) -> bool:
    """Whether a sprite state holds exactly the standard attributes, all of immutable types but
    ``pixels`` (an ndarray), ``_tags`` (a list) and ``_engine_cache`` (immutable in effect)."""
    try:
        return (
            len(state) == _SPRITE_STATE_SIZE
            and type(state["pixels"]) is _NDARRAY
            and type(state["_tags"]) is list
            and type(state["_x"]) is int
            and type(state["_y"]) is int
            and type(state["_layer"]) is int
            and type(state["_scale"]) is int
            and type(state["rotation"]) is int
            and type(state["_name"]) is str
            and type(state["_mirror_ud"]) in _IMMUTABLE_TYPES
            and type(state["_mirror_lr"]) in _IMMUTABLE_TYPES
            and type(state["_blocking"]) is BlockingMode
            and type(state["_interaction"]) is InteractionMode
            and type(state["_engine_stamp"]) is int
            and type(state["_engine_exposed"]) in _IMMUTABLE_TYPES
            and "_engine_cache" in state
        )
    except KeyError:
        return False


def changed_indices(stamps: list, old_stamps: list) -> list[int]:
    """Indices where two equally long stamp lists differ (C-level iteration: cameras and
    interfaces run this over every sprite of a level on each frame where something changed)."""
    return list(_compress(_count(), map(_ne, stamps, old_stamps)))


def _sync_slots(sprite: Sprite, state: dict[str, Any]) -> None:
    """Set ``sprite``'s mirror slots from ``state`` (its ``__dict__``).  An attribute missing from
    the state leaves its slot as it is: empty on a new object, so reading the public name fails as
    the property would."""
    for name, setter in _SLOT_SETTERS:
        if name in state:
            setter(sprite, state[name])
    _set_px(sprite, None)  # filled by the first read of ``pixels``
    _set_plain(sprite, -1)


def _engine_unshare(state: dict[str, Any]) -> None:
    """Give a copy-on-write sprite state (``_engine_exposed`` None) a private pixels array."""
    state["pixels"] = state["pixels"].copy(order="K")  # the layout a deep copy would have
    state["_engine_exposed"] = False


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
    ca = image_of(a)
    cb = image_of(b)
    ax, ay, bx, by = a.x, a.y, b.x, b.y
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
    mask_a = ca.solid
    mask_b = cb.solid
    if mask_a is None and mask_b is None:
        return True
    # The answer depends only on the two (immutable) images and their offset: games test the same
    # pairs at the same offsets again and again (walls against a moving player).
    key = (ca.token, cb.token, bx - ax, by - ay)
    hit = _OVERLAPS.get(key)
    if hit is None:
        if mask_a is None:
            hit = _count_nonzero(mask_b[y0 - by : y1 - by, x0 - bx : x1 - bx]) > 0
        elif mask_b is None:
            hit = _count_nonzero(mask_a[y0 - ay : y1 - ay, x0 - ax : x1 - ax]) > 0
        else:
            # count_nonzero is a C function; ndarray.any() has a Python-level wrapper in numpy 2.
            hit = _count_nonzero(_logical_and(mask_a[y0 - ay : y1 - ay, x0 - ax : x1 - ax], mask_b[y0 - by : y1 - by, x0 - bx : x1 - bx])) > 0
        if len(_OVERLAPS) >= _OVERLAPS_LIMIT:
            _OVERLAPS.clear()
        _OVERLAPS[key] = hit
    return hit


# Pixel-perfect overlap answers by (image token, image token, x offset, y offset); tokens are never
# reused.  Bounded; clearing only costs recomputation.
_OVERLAPS: dict[tuple[int, int, int, int], bool] = {}
_OVERLAPS_LIMIT = 65536


def colliding_sprites(sprite: Sprite, others: list[Sprite], ignore_mode: bool = False) -> list[Sprite]:
    """``[o for o in others if sprite.collides_with(o, ignore_mode)]`` with the per-``sprite`` work
    hoisted."""
    if not ignore_mode:
        mode = sprite._interaction
        if (mode is not _TANGIBLE and mode is not _INVISIBLE) or sprite._blocking is _NOT_BLOCKED:
            return []
    image = image_of(sprite)
    ax0 = sprite.x
    ay0 = sprite.y
    ax1 = ax0 + image.w
    ay1 = ay0 + image.h
    pixel_perfect = sprite._blocking is _PIXEL_PERFECT
    mask = image.solid
    token = image.token
    hits = []
    for other in others:
        if other is sprite:
            continue
        if not ignore_mode:
            mode = other._interaction
            if (mode is not _TANGIBLE and mode is not _INVISIBLE) or other._blocking is _NOT_BLOCKED:
                continue
        bx0 = other.x
        by0 = other.y
        if bx0 >= ax1 or by0 >= ay1:
            continue
        other_image = image_of(other)
        if bx0 + other_image.w <= ax0 or by0 + other_image.h <= ay0:
            continue
        if (pixel_perfect or other._blocking is _PIXEL_PERFECT) and (mask is not None or other_image.solid is not None):
            hit = _OVERLAPS.get((token, other_image.token, bx0 - ax0, by0 - ay0))
            if hit is None:
                hit = sprites_collide(sprite, other, ignore_mode)  # computes and remembers it
            if not hit:
                continue
        hits.append(other)
    return hits


register_copier(Sprite, _copy_sprite)
