"""``Level``: an ordered sprite list plus grid size, data and placeable areas (spec §4).

``_sprites`` is the single authoritative list (games read it, and dc22-style games replace it).
The only cache kept here is the layer-sorted order used by ``get_sprite_at``, whose *stale*
behaviour is part of the reference API (spec §4.4, quirk Q4) and is reproduced exactly.
"""

from __future__ import annotations

import marshal
from operator import attrgetter
from typing import Any

from ._copying import copy_state, deep_copy, keep_alive, register_copier
from .enums import BlockingMode, InteractionMode, PlaceableArea
from .sprites import Sprite, colliding_sprites, image_of

__all__ = ["Level"]

_PIXEL_PERFECT = BlockingMode.PIXEL_PERFECT
_TANGIBLE = InteractionMode.TANGIBLE
_INVISIBLE = InteractionMode.INVISIBLE

# One dict shared by every Level built without ``data`` (reference quirk Q13).
_SHARED_DEFAULT_DATA: dict[str, Any] = {}

_new_object = object.__new__


def copy_level_data(data: Any) -> Any:
    """``copy.deepcopy`` of a level's data dict.  marshal round-trips the usual JSON-like data
    (builtin containers and scalars, shared and recursive references included) several times
    faster; anything else (subclasses, objects) takes ``deep_copy``."""
    try:
        return marshal.loads(marshal.dumps(data))
    except ValueError:
        return deep_copy(data, {})


class Level:
    # Lazy clones (see _engine_lazy_clone) set these on the instance.
    _engine_lazy = False
    _engine_source: Level | None = None

    def __init__(
        self,
        sprites: list[Sprite] | None = None,
        grid_size: tuple[int, int] | None = None,
        data: dict[str, Any] = _SHARED_DEFAULT_DATA,
        name: str = "Level",
        placeable_areas: list[PlaceableArea] | None = None,
    ) -> None:
        self._sprites: list[Sprite] = list(sprites) if sprites else []
        self._grid_size = grid_size
        self._data = data
        self._name = name
        self._placeable_areas = placeable_areas if placeable_areas is not None else []
        # get_sprite_at ordering cache: None = never computed; dirty = add_sprite since then.
        self._engine_order: list[Sprite] | None = None
        self._engine_order_dirty = True
        if self._sprites:
            self._merge_static_sprites()

    # ------------------------------------------------------------------ lazy clones
    @staticmethod
    def _engine_lazy_clone(source: Level) -> Level:
        """A level that turns into ``source.clone()`` on first attribute access.

        Full resets clone every level but use one; the others are cloned when first touched.
        Equivalent to cloning at once as long as ``source`` does not change in between: sources are
        the engine's private templates, which it never modifies, and ``ARCBaseGame._clean_levels``
        materializes pending clones before game code can reach a template.  The pending object is
        a ``_LazyLevel`` (a Level subclass with the materializing ``__getattr__``) and becomes a
        plain ``Level`` when materialized, so ordinary levels keep CPython's fast attribute reads.
        """
        level = _new_object(_LazyLevel)
        level._engine_lazy = True
        level._engine_source = source
        return level

    def _engine_materialize(self) -> None:
        if not self._engine_lazy:
            return
        source = self._engine_source
        self._engine_lazy = False
        self._engine_source = None
        clone = source.clone()
        for key in _LEVEL_STATE:
            try:
                _get_own(self, key)  # assigned before materializing: that value wins
            except AttributeError:
                setattr(self, key, getattr(clone, key))
        if type(self) is _LazyLevel:
            self.__class__ = Level

    def _merge_static_sprites(self) -> None:
        """Merge PIXEL_PERFECT ``sys_static`` sprites per layer (spec §4.2, quirk Q19)."""
        groups: dict[int, list[Sprite]] = {}
        others: list[Sprite] = []
        for sprite in self._sprites:
            if sprite._blocking is _PIXEL_PERFECT and "sys_static" in sprite._tags:
                groups.setdefault(sprite._layer, []).append(sprite)
            else:
                others.append(sprite)
        if not groups:
            return
        for layer, members in groups.items():
            if len(members) == 1:
                others.append(members[0])
                continue
            merged = members[0]
            for member in members[1:]:
                merged = merged.merge(member)
            merged.set_layer(layer)
            if "sys_static" not in merged._tags:
                merged._tags.append("sys_static")
            others.append(merged)
        self._sprites = others

    # ------------------------------------------------------------------ sprite list
    def add_sprite(self, sprite: Sprite) -> None:
        self._sprites.append(sprite)
        self._engine_order_dirty = True

    def remove_sprite(self, sprite: Sprite) -> None:
        try:
            self._sprites.remove(sprite)
        except ValueError:
            pass  # not in the level: nothing to do

    def remove_all_sprites(self) -> None:
        self._sprites = []

    def get_sprites(self) -> list[Sprite]:
        return self._sprites.copy()

    def get_sprites_by_name(self, name: str) -> list[Sprite]:
        return [s for s in self._sprites if s.name == name]

    def get_sprites_by_tag(self, tag: str) -> list[Sprite]:
        return [s for s in self._sprites if tag in s.tags]

    def get_sprites_by_tags(self, tags: list[str]) -> list[Sprite]:
        if not tags:
            return []
        return [s for s in self._sprites if all(tag in s.tags for tag in tags)]

    def get_sprites_by_any_tag(self, tags: list[str]) -> list[Sprite]:
        if not tags:
            return []
        try:
            wanted = frozenset(tags)
        except TypeError:  # unhashable query items: plain membership tests
            return [s for s in self._sprites if any(tag in s.tags for tag in tags)]
        return [s for s in self._sprites if not wanted.isdisjoint(s.tags)]

    def get_all_tags(self) -> set[str]:
        found: set[str] = set()
        for sprite in self._sprites:
            found.update(sprite.tags)
        return found

    def get_sprite_at(self, x: int, y: int, tag: str | None = None, ignore_collidable: bool = False) -> Sprite | None:
        order = self._engine_order
        if order is None or self._engine_order_dirty or len(order) != len(self._sprites):
            # Stable sort, highest layer first; equal layers keep list order (earliest wins).
            order = sorted(self._sprites, key=_layer_of, reverse=True)
            self._engine_order = order
            self._engine_order_dirty = False
        for sprite in order:
            if not ignore_collidable:
                mode = sprite._interaction
                if mode is not _TANGIBLE and mode is not _INVISIBLE:
                    continue
            if tag is not None and tag not in sprite.tags:
                continue
            sx = sprite.x
            sy = sprite.y
            if x < sx or y < sy:
                continue
            image = image_of(sprite)
            if x >= sx + image.w or y >= sy + image.h:
                continue
            if sprite._blocking is _PIXEL_PERFECT:
                mask = image.solid
                if mask is not None and not mask[y - sy, x - sx]:
                    continue
            return sprite
        return None

    def collides_with(self, sprite: Sprite, ignoreMode: bool = False) -> list[Sprite]:  # noqa: N803 - API name
        return colliding_sprites(sprite, self._sprites, bool(ignoreMode))

    # ------------------------------------------------------------------ properties and data
    @property
    def name(self) -> str:
        return self._name

    @property
    def grid_size(self) -> tuple[int, int] | None:
        return self._grid_size

    @property
    def placeable_areas(self) -> list[PlaceableArea]:
        return self._placeable_areas

    def get_data(self, key: str) -> Any:
        return self._data.get(key)

    def clone(self) -> Level:
        # Equivalent to Level(sprites=[s.clone() ...], grid_size, deepcopy(data), name, areas),
        # without the constructor's argument handling.
        sprites = [sprite.clone() for sprite in self._sprites]
        new = _new_object(Level)
        new._sprites = sprites
        new._grid_size = self._grid_size
        new._data = copy_level_data(self._data)
        new._name = self._name
        new._placeable_areas = self._placeable_areas
        new._engine_order = None
        new._engine_order_dirty = True
        for sprite in sprites:
            if sprite._blocking is _PIXEL_PERFECT and "sys_static" in sprite._tags:
                new._merge_static_sprites()
                break
        return new

    # ------------------------------------------------------------------ copying
    def __deepcopy__(self, memo: dict[int, Any]) -> Level:
        return _copy_level(self, memo)

    def __repr__(self) -> str:
        return f"Level(name={self._name!r}, sprites={len(self._sprites)}, grid_size={self._grid_size!r})"


class _LazyLevel(Level):
    """A pending lazy clone (see ``Level._engine_lazy_clone``)."""

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes missing from the instance: materialize, then look again.
        if name in _LEVEL_STATE and self._engine_lazy:
            self._engine_materialize()
            return getattr(self, name)
        raise AttributeError(f"'Level' object has no attribute '{name}'")


_layer_of = attrgetter("layer")
_get_own = object.__getattribute__  # plain lookup, without Level.__getattr__
_LEVEL_STATE = ("_sprites", "_grid_size", "_data", "_name", "_placeable_areas", "_engine_order", "_engine_order_dirty")


def _copy_level(level: Level, memo: dict[int, Any]) -> Level:
    """``copy.deepcopy(level, memo)``, entering the copy in ``memo`` (``Level.__deepcopy__``, and the
    copier ``engine._copying`` uses for levels)."""
    new = _new_object(type(level))
    memo[id(level)] = new
    # Assigned, not updated: an assigned dict is a combined table, whose attribute reads CPython
    # specialises (the one it would make for ``new`` is split, read about twice as slowly).
    # The stale get_sprite_at order is observable (Q4), so it is copied along with the sprites.
    new.__dict__ = copy_state(level.__dict__, memo)
    keep_alive(level, memo)
    return new


register_copier(Level, _copy_level)
register_copier(_LazyLevel, _copy_level)
