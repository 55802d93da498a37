"""``deep_copy(value, memo)``: ``copy.deepcopy(value, memo)`` with fast paths, for copying games.

Deep copies of games are how snapshots branch (``engine.env``), and most of a game is plain data
(ints, strings, tuples, lists and dicts of them) and engine objects with their own ``__deepcopy__``
(levels, sprites, the camera).  ``copy.deepcopy`` reaches every one of them through its generic
dispatch; here builtin containers of plain data are copied directly, objects the default way
(``cls.__new__`` plus a copy of ``__dict__``) without the ``__reduce_ex__`` round trip, and
``__deepcopy__`` methods are called directly.  Same memo discipline as ``copy.deepcopy`` (each
copied object is entered before its contents), so shared and recursive references come out the
same; anything unusual takes ``copy.deepcopy`` itself.
"""

from __future__ import annotations

import copy
import copyreg
import enum
import types
from typing import Any

__all__ = ["deep_copy", "default_deepcopy", "copies_by_default", "ATOMIC"]

# Values ``copy.deepcopy`` returns as they are (its atomic types; enum members copy to themselves).
ATOMIC = frozenset({type(None), int, float, bool, complex, str, bytes, range, type, types.FunctionType,
                    types.BuiltinFunctionType, type(Ellipsis), type(NotImplemented)})

# Types whose values deep_copy returns as they are: ATOMIC plus the enum classes met so far.
_SHARED: set[type] = set(ATOMIC)
_SHARED_LIMIT = 4096

# Tuples known to be frozen (below), by id.  Holding the tuple keeps its id from being reused, and a
# tuple's contents never change, so an entry stays true; bounded, clearing only costs rechecks.
_FROZEN: dict[int, tuple] = {}
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


# How instances of a class are copied (decided once per class): _DEFAULT (``default_deepcopy``),
# _OWN (the class has ``__deepcopy__``) or _GENERIC (``copy.deepcopy``).
_DEFAULT, _OWN, _GENERIC = 0, 1, 2
_HOW: dict[type, int] = {}


def _how(cls: type) -> int:
    how = _HOW.get(cls)
    if how is None:
        if cls in copy._deepcopy_dispatch or issubclass(cls, type):
            how = _GENERIC
        elif default_deepcopy(cls):
            how = _DEFAULT
        elif hasattr(cls, "__deepcopy__") and cls not in copyreg.dispatch_table:
            how = _OWN
        else:
            how = _GENERIC
        if len(_HOW) >= 4096:  # bounded (games load classes per session); clearing only costs rechecks
            _HOW.clear()
        _HOW[cls] = how
    return how


def copies_by_default(cls: type) -> bool:
    """``default_deepcopy(cls)`` and not a builtin ``copy.deepcopy`` knows, remembered per class."""
    how = _HOW.get(cls)
    if how is None:
        how = _how(cls)
    return how == _DEFAULT


def _keep_alive(original: Any, memo: dict[int, Any]) -> None:
    """As copy.deepcopy does: originals stay alive while their ids are memo keys."""
    keep = memo.get(id(memo))
    if keep is None:
        keep = memo[id(memo)] = []
    keep.append(original)


def deep_copy(value: Any, memo: dict[int, Any]) -> Any:
    """``copy.deepcopy(value, memo)`` (see the module docstring; frozensets of atomic values are
    shared rather than rebuilt: equal, immutable, only ``is`` could tell)."""
    kind = type(value)
    if kind in _SHARED:
        return value
    if type(kind) is enum.EnumType:  # members copy to themselves
        if len(_SHARED) >= _SHARED_LIMIT:
            _SHARED.intersection_update(ATOMIC)
        _SHARED.add(kind)
        return value
    found = memo.get(id(value))
    if found is not None:
        return found
    if kind is tuple:
        return value if frozen(value) else copy.deepcopy(value, memo)
    if kind is list:
        items = value[:]
        memo[id(value)] = items  # before the items: recursive lists refer to their copy
        for i, item in enumerate(items):
            # Inline: values copied as they are, frozen tuples (histories of states), memo hits.
            kind = type(item)
            if kind in _SHARED or kind is tuple and _FROZEN.get(id(item)) is item:
                continue
            found = memo.get(id(item))
            items[i] = found if found is not None else deep_copy(item, memo)
        return items
    if kind is dict:
        for key in value:
            if type(key) not in ATOMIC and not (type(key) is tuple and frozen(key)):
                return copy.deepcopy(value, memo)
        out = value.copy()
        memo[id(value)] = out
        for key, item in out.items():
            kind = type(item)
            if kind in _SHARED or kind is tuple and _FROZEN.get(id(item)) is item:
                continue
            found = memo.get(id(item))
            out[key] = found if found is not None else deep_copy(item, memo)
        return out
    if kind is set or kind is frozenset:
        for item in value:
            if type(item) not in ATOMIC:
                return copy.deepcopy(value, memo)
        if kind is frozenset:
            return value
        out_set = set(value)
        memo[id(value)] = out_set
        return out_set
    how = _HOW.get(kind)
    if how is None:
        how = _how(kind)
    if how == _DEFAULT:
        state = getattr(value, "__dict__", None)
        if type(state) is dict:
            new = object.__new__(kind)
            memo[id(value)] = new
            new.__dict__.update(deep_copy(state, memo))
            _keep_alive(value, memo)
            return new
    elif how == _OWN:
        new = value.__deepcopy__(memo)
        if new is not value:
            memo[id(value)] = new
            _keep_alive(value, memo)
        return new
    return copy.deepcopy(value, memo)
