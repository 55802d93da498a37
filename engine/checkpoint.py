"""Checkpoints of a running game: take one, play on, and roll the same game object back to it.

A branching search that tries several actions from one state otherwise deep-copies the game before
each try.  ``take(game)`` records instead what a rollback needs, and ``rollback`` puts it back in
place, so that the game is then observably the game a deep copy taken at ``take`` time would be:

* engine objects keep their identity and get their contents back: the game object itself, its
  level list, every ``Level`` in it (pending lazy clones return to pending), their sprite lists
  and get_sprite_at orders, every ``Sprite`` in those (attributes, mirror slots, tag lists, and the
  contents of pixel arrays game code may have written into), and the camera (render caches kept:
  they check every sprite against what they drew, and restored sprites get a new change stamp);
* everything else the game refers to (its own attributes, level data, camera interfaces, the last
  action) is deep-copied at ``take`` time with a memo that maps those engine objects to
  themselves, and every rollback installs a fresh deep copy of that, so aliasing between them and
  the engine objects is kept and no rollback shares state with the next.

Not supported (``take`` returns None; copy the game instead): games whose class copies itself in
its own way (``__deepcopy__``, ``__reduce__``, slots), sprite or level subclasses and cameras that
are not ``Camera`` instances.  Levels declared shared (``GameEnv.share_levels``) and the pristine
templates are left alone, as snapshots leave them.
"""

from __future__ import annotations

from operator import is_
from typing import Any

import numpy as np

from . import sprites as _sprites_module
from ._copying import copies_by_default, deep_copy
from .camera import Camera
from .level import Level, _LazyLevel
from .sprites import Sprite, _set_dict

__all__ = ["Checkpoint", "take", "rollback"]

_NDARRAY = np.ndarray
_DEFAULT_TAGS = _sprites_module._SHARED_DEFAULT_TAGS
_SLOTS = ("x", "y", "tags", "name", "layer", "_engine_px", "_engine_plain")
_SLOT_SETTERS = tuple(_sprites_module._SpriteLayout.__dict__[name].__set__ for name in _SLOTS)
_SLOT_GETTERS = tuple(_sprites_module._SpriteLayout.__dict__[name].__get__ for name in _SLOTS)


class Checkpoint:
    """What ``rollback`` needs (opaque)."""

    __slots__ = ("game", "seed", "values", "lists", "levels", "sprites", "arrays", "camera")

    def __init__(self) -> None:
        self.game: Any = None
        self.seed: dict[int, Any] = {}  # engine objects kept by identity (the memo's start)
        # Deep-copied state, installed (as a fresh copy) by each rollback: the game's attributes,
        # the levels' attributes, the camera's attributes but its render caches, the sprites'
        # attributes.  One dict of dicts, so one deep copy keeps aliasing between all of them.
        self.values: dict[str, Any] = {}
        self.lists: list[tuple[list, list]] = []  # kept lists and their items
        self.levels: list[tuple[Level, type]] = []
        # sprite, its mirror slot values, its attribute names and values (None: always restored)
        self.sprites: list[tuple[Sprite, tuple, tuple, tuple | None]] = []
        self.arrays: list[tuple[np.ndarray, bytes]] = []  # exposed pixel arrays and their bytes
        self.camera: Camera | None = None


def _slots_of(sprite: Sprite) -> tuple | None:
    try:
        return tuple(get(sprite, Sprite) for get in _SLOT_GETTERS)
    except AttributeError:  # a slot never set (made without __init__): not supported
        return None


def take(game: Any, shared: dict[int, Any] | None = None) -> Checkpoint | None:
    """A checkpoint of ``game`` (see the module docstring), or None when it is not supported.
    ``shared``: level index -> Level object left alone (``GameEnv.share_levels``)."""
    state = getattr(game, "__dict__", None)
    if type(state) is not dict or not copies_by_default(type(game)):
        return None
    levels = state.get("_levels")
    camera = state.get("_camera")
    if type(levels) is not list or not isinstance(camera, Camera) or type(camera.__dict__) is not dict:
        return None
    cp = Checkpoint()
    cp.game = game
    seed = cp.seed
    seed[id(game)] = game
    seed[id(levels)] = levels
    cp.lists.append((levels, levels[:]))
    clean = state.get("_engine_clean_levels")
    if isinstance(clean, list):
        seed[id(clean)] = clean
        for template in clean:
            seed[id(template)] = template
    shared = shared or {}
    values: dict[str, Any] = {}
    level_values = []
    sprite_values = []
    for index, level in enumerate(levels):
        seed[id(level)] = level
        if shared.get(index) is level:
            continue
        kind = type(level)
        if kind is not Level and kind is not _LazyLevel:
            return None
        level_state = level.__dict__
        cp.levels.append((level, kind))
        level_values.append(level_state)
        for key in ("_sprites", "_engine_order"):
            items = level_state.get(key)
            if type(items) is not list:
                continue
            if id(items) not in seed:
                seed[id(items)] = items
                cp.lists.append((items, items[:]))
            for sprite in items:
                if id(sprite) in seed:
                    continue
                if type(sprite) is not Sprite:
                    return None
                slots = _slots_of(sprite)
                if slots is None:
                    return None
                seed[id(sprite)] = sprite
                sprite_state = sprite.__dict__
                pixels = sprite_state.get("pixels")
                if type(pixels) is _NDARRAY and id(pixels) not in seed:
                    # Game code may write into it (also a private one it exposes by reading it).
                    seed[id(pixels)] = pixels
                    cp.arrays.append((pixels, pixels.tobytes()))
                tags = sprite_state.get("_tags")
                # The module's default tag list (shared by every sprite made without tags) is
                # copied like other values, as a deep copy of the game copies it.
                if type(tags) is list and tags is not _DEFAULT_TAGS and id(tags) not in seed:
                    seed[id(tags)] = tags
                    cp.lists.append((tags, tags[:]))
                cache = sprite_state.get("_engine_cache")
                if cache is not None:
                    seed[id(cache)] = cache  # immutable in effect: shared, as copies share it
                cp.sprites.append((sprite, slots))
                sprite_values.append(sprite_state)
    seed[id(camera)] = camera
    cp.camera = camera
    camera_values = {key: value for key, value in camera.__dict__.items() if not key.startswith("_engine_")}
    values["game"] = state
    values["levels"] = level_values
    values["sprites"] = sprite_values
    values["camera"] = camera_values
    cp.values = copied = deep_copy(values, dict(seed))
    # Per sprite, its keys and values when the copy holds them as they are (see rollback).
    for i, (sprite_state, sprite_copy) in enumerate(zip(sprite_values, copied["sprites"], strict=True)):
        held = tuple(sprite_state.values())
        plain = all(map(is_, held, sprite_copy.values()))
        sprite, slots = cp.sprites[i]
        cp.sprites[i] = (sprite, slots, tuple(sprite_state), held if plain else None)
    return cp


def rollback(cp: Checkpoint) -> None:
    """Put ``cp.game`` back in the state it had when ``cp`` was taken (``cp`` stays usable)."""
    taken = cp.values
    values = deep_copy(taken, dict(cp.seed))
    for items, saved in cp.lists:
        if len(items) != len(saved) or any(a is not b for a, b in zip(items, saved, strict=True)):
            items[:] = saved
    for array, raw in cp.arrays:
        if array.tobytes() != raw:
            array[...] = np.frombuffer(raw, dtype=array.dtype).reshape(array.shape)
    for (sprite, slots, keys, held), sprite_state in zip(cp.sprites, values["sprites"], strict=True):
        # Unchanged when it holds the very keys and values it held (immutable values or kept
        # objects, whose contents are restored above; ``held`` is None for a sprite holding
        # anything else, which is always restored).
        current = sprite.__dict__
        if held is not None and len(current) == len(held) and all(map(is_, current, keys)) \
                and all(map(is_, current.values(), held)):
            continue
        _set_dict(sprite, sprite_state)  # its stamp too: the state it stamped
        for setter, value in zip(_SLOT_SETTERS, slots, strict=True):
            setter(sprite, value)
    # Cameras skip comparing sprite stamps while the change epoch stands still: move it.
    _sprites_module._next_stamp()
    for (level, kind), level_state in zip(cp.levels, values["levels"], strict=True):
        level.__dict__ = level_state
        if type(level) is not kind:
            level.__class__ = kind
    camera = cp.camera
    camera_state = camera.__dict__
    for key in [key for key in camera_state if not key.startswith("_engine_")]:
        del camera_state[key]
    camera_state.update(values["camera"])
    game_state = cp.game.__dict__
    game_state.clear()
    game_state.update(values["game"])
