"""Stable state hashes for games: node identity for state-graph exploration.

``state_digest(game)`` is a sha256 over

1. ``b"scene"`` + the 4096 bytes of the current *scene*: the 64x64 frame of the current level as
   the camera composes it (letterbox, up-scaled view) **without** interfaces.  Interfaces are
   excluded because calling them has side effects in some games (they pop animation queues);
   everything they draw is derived from game attributes, which part 2 covers.  The scene is the
   same whether or not the last action rendered frames, so the hash does not depend on the
   environment's frame mode.
2. ``b"state"`` + a canonical serialization of the game's hidden state: every attribute of the
   game object except the ones listed in ``EXCLUDED_GAME_ATTRIBUTES`` (the pristine level
   templates ``_clean_levels``, the last action ``_action``, the per-response flag ``_full_reset``
   and the engine's own ``_engine_*`` bookkeeping), with ``_levels`` reduced to the current level
   (earlier levels are never revisited without being re-cloned from the templates, later ones
   are untouched clones; a game that mutates a level other than the current one has that change
   ignored by the hash).  That includes the level index, ``_action_count``, state, score, the
   camera (position, size, colours, interface objects and their attributes) and every
   game-defined attribute (budgets, undo stacks, counters).

Serialization rules: sprites by their full state (name, position, layer, scale, rotation,
mirrors, blocking, interaction, tags, pixels dtype/shape/bytes); levels by name, grid size, data,
placeable areas and sprite list; numpy arrays by dtype, shape and bytes; dicts and sets in a
canonical order; other objects by class name and attributes (``__dict__`` and ``__slots__``);
functions, classes and modules by qualified name; ``random.Random`` by its state.  Repeated
objects are written as back-references, so aliasing and cycles are part of the hash.  Object ids
and memory addresses never enter it, so equal states hash equally across instances and processes.
"""

from __future__ import annotations

import hashlib
import random
import types
from enum import Enum
from typing import Any

import numpy as np

from .level import Level
from .sprites import Sprite

__all__ = ["EXCLUDED_GAME_ATTRIBUTES", "state_digest", "encode_state"]

EXCLUDED_GAME_ATTRIBUTES = frozenset({"_clean_levels", "_action", "_full_reset"})

_ATOM_TYPES = (int, float, str, bool, bytes, type(None))


class _Encoder:
    """Writes a canonical byte stream for an object graph (back-references for repeats)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.seen: dict[int, int] = {}
        self.keep: list[Any] = []  # keeps encoded objects alive so their ids stay unique

    def out(self, data: bytes) -> None:
        self.parts.append(data)

    def ref(self, obj: Any) -> bool:
        """Emit a back-reference if ``obj`` was encoded before; otherwise register it."""
        index = self.seen.get(id(obj))
        if index is not None:
            self.out(b"R%d;" % index)
            return True
        self.seen[id(obj)] = len(self.seen)
        self.keep.append(obj)
        return False

    def atom(self, value: Any) -> None:
        kind = type(value)
        if value is None:
            self.out(b"N;")
        elif kind is bool:
            self.out(b"T;" if value else b"F;")
        elif kind is int:
            self.out(b"i%d;" % value)
        elif kind is float:
            self.out(b"f" + repr(value).encode() + b";")
        elif kind is str:
            data = value.encode("utf-8", "surrogatepass")
            self.out(b"s%d:" % len(data) + data)
        else:  # bytes
            self.out(b"b%d:" % len(value) + value)

    def encode(self, obj: Any) -> None:
        kind = type(obj)
        if kind in _ATOM_TYPES:
            self.atom(obj)
            return
        if isinstance(obj, Enum):
            self.out(b"E" + f"{type(obj).__qualname__}.{obj.name}".encode() + b";")
            return
        if isinstance(obj, (np.generic,)):
            self.out(b"g" + obj.dtype.str.encode() + b":" + obj.tobytes() + b";")
            return
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType)):
            name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", repr(type(obj)))
            self.out(b"Q" + f"{getattr(obj, '__module__', '')}.{name}".encode() + b";")
            return
        if kind is tuple:  # immutable: by value, so incidental sharing of equal tuples is not state
            self.out(b"(")
            for item in obj:
                self.encode(item)
            self.out(b")")
            return
        if self.ref(obj):
            return
        if isinstance(obj, np.ndarray):
            self.array(obj)
        elif isinstance(obj, Sprite):
            self.sprite(obj)
        elif isinstance(obj, Level):
            self.level(obj)
        elif isinstance(obj, (list, tuple)):
            self.out(b"[")
            for item in obj:
                self.encode(item)
            self.out(b"]")
        elif isinstance(obj, dict):
            self.mapping(obj)
        elif isinstance(obj, (set, frozenset)):  # frozensets are rare enough to share the ref path
            items = sorted(_standalone(item) for item in obj)
            self.out(b"{s%d:" % len(items) + b"".join(items) + b"}")
        elif isinstance(obj, random.Random):
            self.out(b"random:")
            self.encode(obj.getstate())
        elif isinstance(obj, np.random.Generator):
            self.out(b"npgen:")
            self.encode(obj.bit_generator.state)
        elif isinstance(obj, (types.MethodType,)):
            self.out(b"M" + obj.__func__.__qualname__.encode() + b";")
            self.encode(obj.__self__)
        else:
            self.generic(obj)

    def array(self, array: np.ndarray) -> None:
        if array.dtype.hasobject:
            self.out(b"A" + repr(array.shape).encode() + b"O:")
            self.encode(array.tolist())
            return
        self.out(b"A" + array.dtype.str.encode() + repr(array.shape).encode() + b":")
        self.out(np.ascontiguousarray(array).tobytes())

    def sprite(self, sprite: Sprite) -> None:
        state = sprite.__dict__
        self.out(b"S")
        for name in ("_name", "_x", "_y", "_layer", "_scale", "rotation", "_mirror_ud", "_mirror_lr", "_blocking", "_interaction"):
            self.encode(state.get(name))
        self.encode(state.get("_tags"))
        self.encode(state.get("pixels"))
        extra = sorted(key for key in state if key not in _SPRITE_KEYS and not key.startswith("_engine_"))
        for key in extra:  # attributes a game added to its sprites
            self.atom(key)
            self.encode(state[key])
        self.out(b";")

    def level(self, level: Level) -> None:
        self.out(b"L")
        for name in ("_name", "_grid_size", "_data", "_placeable_areas", "_sprites"):
            self.encode(level.__dict__.get(name))
        self.out(b";")

    def mapping(self, mapping: dict) -> None:
        items = list(mapping.items())
        if all(type(key) is str for key, _ in items):
            items.sort(key=lambda item: item[0])
        else:
            items.sort(key=lambda item: _standalone(item[0]))
        self.out(b"{%d:" % len(items))
        for key, value in items:
            self.encode(key)
            self.encode(value)
        self.out(b"}")

    def generic(self, obj: Any) -> None:
        cls = type(obj)
        self.out(b"O" + f"{cls.__module__}.{cls.__qualname__}".encode() + b":")
        state = getattr(obj, "__dict__", None)
        if state is not None:
            self.mapping({key: value for key, value in state.items() if not key.startswith("_engine_")})
        for klass in cls.__mro__:
            for slot in getattr(klass, "__slots__", ()):
                if slot in ("__dict__", "__weakref__") or slot.startswith("_engine_") or not hasattr(obj, slot):
                    continue
                self.atom(slot)
                self.encode(getattr(obj, slot))
        self.out(b";")


_SPRITE_KEYS = frozenset(
    ("_engine_cache", "_engine_exposed", "pixels", "_name", "_x", "_y", "_layer", "rotation", "_mirror_ud", "_mirror_lr",
     "_blocking", "_scale", "_interaction", "_tags")
)


def _standalone(obj: Any) -> bytes:
    encoder = _Encoder()
    encoder.encode(obj)
    return b"".join(encoder.parts)


def encode_state(game: Any) -> bytes:
    """The canonical serialization of a game's hidden state (part 2 of the state hash)."""
    encoder = _Encoder()
    encoder.ref(game)
    state = game.__dict__
    levels = state.get("_levels")
    index = state.get("_current_level_index")
    try:
        current = levels[index]
    except (TypeError, IndexError, KeyError):
        current = None
    # The current level first, so game attributes pointing at its sprites become back-references.
    encoder.out(b"level:")
    encoder.encode(current)
    encoder.out(b"game:")
    filtered = {}
    for key, value in state.items():
        if key in EXCLUDED_GAME_ATTRIBUTES or key.startswith("_engine_"):
            continue
        if key == "_levels":
            continue
        filtered[key] = value
    encoder.mapping(filtered)
    return b"".join(encoder.parts)


def state_digest(game: Any) -> str:
    """sha256 hex digest of the current scene and hidden state (see the module docstring)."""
    digest = hashlib.sha256()
    scene = game.camera._engine_scene(game.current_level.get_sprites())
    digest.update(b"scene")
    digest.update(np.ascontiguousarray(scene, dtype=np.int8).tobytes())
    digest.update(b"state")
    digest.update(encode_state(game))
    return digest.hexdigest()

