"""``deep_copy(value, memo)``: ``copy.deepcopy(value, memo)`` with fast paths, for copying games.

Deep copies of games are how snapshots branch (``engine.env``), and most of a game is plain data
(ints, strings, tuples, lists and dicts of them) and engine objects with their own ``__deepcopy__``
(levels, sprites, the camera).  ``copy.deepcopy`` reaches every one of them through its generic
dispatch; here every type is copied by a *copier* looked up once per value in ``_COPIERS`` (type ->
function): builtin containers of plain data are copied directly, objects the default way
(``cls.__new__`` plus a copy of ``__dict__``) without the ``__reduce_ex__`` round trip, engine
classes by the copiers their modules register (``register_copier``: the same code as their
``__deepcopy__``), other ``__deepcopy__`` methods are called directly.  Same memo discipline as
``copy.deepcopy`` (each copied container or object is entered before its contents), so shared and
recursive references come out the same; anything unusual takes ``copy.deepcopy`` itself.
"""

from __future__ import annotations

import copy
import copyreg
import enum
import types
from collections.abc import Callable
from operator import is_ as _is
from typing import Any

__all__ = ["deep_copy", "copy_state", "default_deepcopy", "copies_by_default", "register_copier", "keep_alive", "ATOMIC"]

# Values ``copy.deepcopy`` returns as they are (its atomic types; enum members copy to themselves).
ATOMIC = frozenset({type(None), int, float, bool, complex, str, bytes, range, type, types.FunctionType,
                    types.BuiltinFunctionType, type(Ellipsis), type(NotImplemented)})

# Types whose values deep_copy returns as they are: ATOMIC plus the enum classes met so far.
_SHARED: set[type] = set(ATOMIC)
_SHARED_LIMIT = 4096
_all_atomic = ATOMIC.issuperset  # over map(type, items): one C-level pass

# Tuples known to be frozen (below) and frozensets of atomic values, by id.  Holding the value keeps
# its id from being reused, and its contents never change, so an entry stays true; bounded, clearing
# only costs rechecks.
_FROZEN: dict[int, tuple | frozenset] = {}
_FROZEN_LIMIT = 1 << 16


def frozen(value: tuple) -> bool:
    """True if the tuple ``value`` holds only atomic values, enum members and such tuples, at any depth: deepcopy
    returns it as it is.  Remembered across copies (``_FROZEN``): games that keep histories of
    their states copy the same tuples again and again."""
    if _FROZEN.get(id(value)) is value:
        return True
    for item in value:
        kind = type(item)
        if kind in _SHARED or type(kind) is enum.EnumType:
            continue
        if kind is tuple and frozen(item):
            continue
        return False
    if len(_FROZEN) >= _FROZEN_LIMIT:
        _FROZEN.clear()
    _FROZEN[id(value)] = value
    return True


def default_deepcopy(cls: type) -> bool:
    """True when ``copy.deepcopy`` copies instances of ``cls`` the default way: a new
    ``cls.__new__(cls)`` whose ``__dict__`` is updated with a deep copy of the original's."""
    obj = object
    return (
        cls.__reduce_ex__ is obj.__reduce_ex__
        and cls.__reduce__ is obj.__reduce__
        and getattr(cls, "__getstate__", obj.__getstate__) is obj.__getstate__
        and not hasattr(cls, "__setstate__")
        and not hasattr(cls, "__deepcopy__")
        and not hasattr(cls, "__getnewargs_ex__")
        and not hasattr(cls, "__getnewargs__")
        and cls.__new__ is obj.__new__
        and not copyreg._slotnames(cls)
        and cls not in copyreg.dispatch_table
        and not issubclass(cls, type)
    )


def keep_alive(original: Any, memo: dict[int, Any]) -> None:
    """As copy.deepcopy does: originals stay alive while their ids are memo keys."""
    keep = memo.get(id(memo))
    if keep is None:
        memo[id(memo)] = [original]
    else:
        keep.append(original)


# ---------------------------------------------------------------------- copiers
# A copier ``f(value, memo)`` returns the deep copy of a value that is not in ``memo`` and enters it
# there itself (containers and objects before their contents).


def _copy_value(value: Any, memo: dict[int, Any]) -> Any:
    """The copy of a value that is neither shared as is nor in ``memo`` (a memo miss)."""
    copier = _COPIERS.get(type(value))
    if copier is None:
        copier = _copier_for(type(value))
        if copier is None:  # copied to itself (enum members)
            return value
    return copier(value, memo)


def deep_copy(value: Any, memo: dict[int, Any]) -> Any:
    """``copy.deepcopy(value, memo)`` (see the module docstring; frozensets of atomic values are
    shared rather than rebuilt: equal, immutable, only ``is`` could tell)."""
    if type(value) in _SHARED:
        return value
    found = memo.get(id(value))
    if found is not None:
        return found
    return _copy_value(value, memo)


def copy_state(state: dict[str, Any], memo: dict[int, Any]) -> dict[str, Any]:
    """``deep_copy`` of an object's ``__dict__`` (a dict, maybe in ``memo`` already)."""
    found = memo.get(id(state))
    if found is not None:
        return found
    return _copy_dict(state, memo)


def _copy_list(value: list, memo: dict[int, Any]) -> list:
    items = value[:]
    memo[id(value)] = items  # before the items: recursive lists refer to their copy
    if len(items) > 4 and type(items[0]) is tuple and all(map(_is, map(_FROZEN.get, map(id, items)), items)):
        return items  # only frozen tuples (histories of states), found in one C-level pass
    get = memo.get
    for i, item in enumerate(items):
        # Inline: values copied as they are, frozen tuples (histories of states), memo hits.
        kind = type(item)
        if kind in _SHARED or kind is tuple and _FROZEN.get(id(item)) is item:
            continue
        found = get(id(item))
        if found is None:
            copier = _COPIERS.get(kind)
            found = copier(item, memo) if copier is not None else _copy_value(item, memo)
        items[i] = found
    return items


def _copy_dict(value: dict, memo: dict[int, Any]) -> dict:
    if not value:  # (an action's data, a game's empty tables)
        out: dict = {}
        memo[id(value)] = out
        return out
    if len(value) > 4:
        if not _all_atomic(map(type, value)):  # keys that are not atomic: only frozen tuples are copied here
            return _copy_dict_keys(value, memo)
    else:
        for key in value:  # (cheaper than the C-level pass for a few keys)
            if type(key) not in ATOMIC:
                return _copy_dict_keys(value, memo)
    out = value.copy()
    memo[id(value)] = out
    get = memo.get
    for key, item in out.items():
        kind = type(item)
        if kind in _SHARED or kind is tuple and _FROZEN.get(id(item)) is item:
            continue
        found = get(id(item))
        if found is None:
            copier = _COPIERS.get(kind)
            found = copier(item, memo) if copier is not None else _copy_value(item, memo)
        out[key] = found
    return out


def _copy_dict_keys(value: dict, memo: dict[int, Any]) -> dict:
    """A dict with keys that are not atomic: copied here if they are frozen tuples."""
    for key in value:
        if type(key) not in ATOMIC and not (type(key) is tuple and frozen(key)):
            return copy.deepcopy(value, memo)
    out = value.copy()
    memo[id(value)] = out
    for key, item in out.items():
        found = deep_copy(item, memo)
        if found is not item:
            out[key] = found
    return out


def _copy_tuple(value: tuple, memo: dict[int, Any]) -> tuple:
    return value if frozen(value) else copy.deepcopy(value, memo)


def _copy_set(value: set, memo: dict[int, Any]) -> set:
    if not _all_atomic(map(type, value)):
        return copy.deepcopy(value, memo)
    out = set(value)
    memo[id(value)] = out
    return out


def _copy_frozenset(value: frozenset, memo: dict[int, Any]) -> frozenset:
    if _FROZEN.get(id(value)) is value:  # known to hold atomic values only (see ``frozen``)
        return value
    if not _all_atomic(map(type, value)):
        return copy.deepcopy(value, memo)
    if len(_FROZEN) >= _FROZEN_LIMIT:
        _FROZEN.clear()
    _FROZEN[id(value)] = value
    return value


def _copy_default(value: Any, memo: dict[int, Any]) -> Any:
    """An object of a class ``default_deepcopy`` accepts: ``cls.__new__`` plus a copy of ``__dict__``."""
    state = getattr(value, "__dict__", None)
    if type(state) is not dict:
        return copy.deepcopy(value, memo)
    new = object.__new__(type(value))
    memo[id(value)] = new
    new.__dict__.update(copy_state(state, memo))
    keep_alive(value, memo)
    return new


def _copy_own(value: Any, memo: dict[int, Any]) -> Any:
    """An object with its own ``__deepcopy__``, entered in ``memo`` as ``copy.deepcopy`` does."""
    new = value.__deepcopy__(memo)
    if new is not value:
        memo[id(value)] = new
        keep_alive(value, memo)
    return new


_BUILTIN_COPIERS: dict[type, Callable[[Any, dict[int, Any]], Any]] = {
    list: _copy_list,
    dict: _copy_dict,
    tuple: _copy_tuple,
    set: _copy_set,
    frozenset: _copy_frozenset,
}
# type -> copier: the builtins, the engine's registered classes, and the classes met so far.
_COPIERS: dict[type, Callable[[Any, dict[int, Any]], Any]] = dict(_BUILTIN_COPIERS)
_REGISTERED: dict[type, Callable[[Any, dict[int, Any]], Any]] = {}
_COPIERS_LIMIT = 4096


def register_copier(cls: type, copier: Callable[[Any, dict[int, Any]], Any]) -> None:
    """Copy instances of exactly ``cls`` with ``copier(value, memo)``, which must give what
    ``copy.deepcopy`` gives (``cls.__deepcopy__`` delegating to it) and enter the copy in ``memo``."""
    _REGISTERED[cls] = copier
    _COPIERS[cls] = copier


def _copier_for(cls: type) -> Callable[[Any, dict[int, Any]], Any] | None:
    """Decide, once per class, how its instances are copied; None for enums (copied to themselves)."""
    if type(cls) is enum.EnumType:  # members copy to themselves
        if len(_SHARED) >= _SHARED_LIMIT:
            _SHARED.intersection_update(ATOMIC)
        _SHARED.add(cls)
        return None
    if cls in copy._deepcopy_dispatch or issubclass(cls, type):
        copier = copy.deepcopy
    elif default_deepcopy(cls):
        copier = _copy_default
    elif hasattr(cls, "__deepcopy__") and cls not in copyreg.dispatch_table:
        copier = _copy_own
    else:
        copier = copy.deepcopy
    if len(_COPIERS) >= _COPIERS_LIMIT:  # bounded (games load classes per session); clearing only costs rechecks
        _COPIERS.clear()
        _COPIERS.update(_BUILTIN_COPIERS)
        _COPIERS.update(_REGISTERED)
    _COPIERS[cls] = copier
    return copier


def copies_by_default(cls: type) -> bool:
    """``default_deepcopy(cls)`` and not a builtin ``copy.deepcopy`` knows, remembered per class."""
    copier = _COPIERS.get(cls)
    if copier is None:
        copier = _copier_for(cls)
    return copier is _copy_default
