"""A list that keeps a bounded number of its items in memory (`Spool`): the rest wait in a temporary file.

A flood of bad lines (a million `{}` lines, an H-ARC file of short rows) makes one quarantine record per line;
held as Python objects they once took 2-6 KB each, gigabytes for a file of a few megabytes. Readers collect
those records in a `Spool`: past `limit` items a batch is pickled (zlib) to a temporary file and let go, so
memory holds one batch whatever the count; iterating yields every item, in order, a batch at a time.
A spool can also take other spools' items as parts, converted as they are read (`extend_mapped`): a reader's
line issues become ingest's rejects, and a file's pieces' rejects one file's, without another trip to disk.
A batch of instances of one plain dataclass (the readers' rejects) is pickled as their field dicts and rebuilt
without their `__init__`: about 3 µs an item to and from disk, against 7.5 for the objects themselves (a flood
of a million bad lines passes through a spool or two).

It is a `list` so that code which appends, extends, counts, tests or iterates its records needs no change;
indexing and slicing read the items back (a slice only the batches up to its end: the first few of a flood).
Pickled (to or from a worker process of this machine) it carries its file's path and its in-memory items.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import pickle
import struct
import tempfile
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pipeline.core.outputs import scratch_error

SPOOL_LIMIT = 5_000  # items held in memory before a batch goes to disk (a reject may hold 4 KiB of text and more)
_HEADER = struct.Struct("<QI")  # compressed size, items


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class Spool(list):
    def __init__(self, items: Iterable[Any] = (), limit: int = SPOOL_LIMIT):
        super().__init__()
        self._limit = limit
        self._path: str | None = None
        self._spilled = 0
        self._parts: list[tuple[Spool, Callable[[Any], Any] | None]] = []  # items that come before this one's own
        self._sent: Spool | None = None  # the copy a pickling of a spool with parts sends
        self._finalizer: weakref.finalize | None = None  # removes the file when the spool is let go
        self.extend(items)

    # -- adding -------------------------------------------------------------------------------------
    def append(self, item: Any) -> None:
        super().append(item)
        if super().__len__() >= self._limit:
            self._spill()

    def extend(self, items: Iterable[Any]) -> None:
        iterator = iter(items)
        while True:
            room = self._limit - super().__len__()
            chunk = list(itertools.islice(iterator, max(room, 1)))
            if not chunk:
                return
            super().extend(chunk)
            if super().__len__() >= self._limit:
                self._spill()

    def extend_mapped(self, source: Iterable[Any], convert: Callable[[Any], Any] | None = None) -> None:
        """Add `source`'s items, each passed through `convert`. From a spool, they are not copied: `source`
        (which must not change afterwards) becomes a part of this spool, read whenever this one is; the items in
        its memory go to its file first, so that parts hold nothing in memory however many there are. This
        spool's own items so far become a part before it, in the same way. Other iterables are copied."""
        if not isinstance(source, Spool):
            self.extend(source if convert is None else map(convert, source))
            return
        if self._spilled or super().__len__():
            self._parts.append((self._handed_over(), None))
        source._flush()
        self._parts.append((source, convert))

    def _flush(self) -> None:
        """The items in memory go to the file (as a shorter batch)."""
        if super().__len__():
            self._spill()

    def _handed_over(self) -> Spool:
        """A new spool holding this one's own items (its file and memory), this one left with none."""
        self._flush()
        taken = Spool(limit=self._limit)
        taken._path, taken._spilled = self._path, self._spilled
        if self._path is not None:
            self._finalizer.detach()
            taken._finalizer = weakref.finalize(taken, _remove, self._path)
        self._path, self._spilled = None, 0
        return taken

    def __iadd__(self, items: Iterable[Any]) -> Spool:  # type: ignore[override]
        self.extend(items)
        return self

    # `list + spool` and `spool + list` would otherwise join the list's C array with the spool's items in memory
    # only, and drop those on disk without a word: both give a new spool of every item, in order
    def __add__(self, items: Iterable[Any]) -> Spool:  # type: ignore[override]
        joined = Spool(self, self._limit)
        joined.extend(items)
        return joined

    def __radd__(self, items: Iterable[Any]) -> Spool:
        joined = Spool(items, self._limit)
        joined.extend(self)
        return joined

    def _in_memory_only(self, name: str) -> None:
        """`list`'s own methods see the items in memory only: on a spool that has sent items to disk they would
        lose or miss those, so they are refused there."""
        if self._spilled or self._parts:
            raise TypeError(f"Spool.{name}: not supported once items have gone to disk ({len(self)} items)")

    def _spill(self) -> None:
        batch = list(super().__iter__())
        data = zlib.compress(pickle.dumps(_packed(batch), protocol=pickle.HIGHEST_PROTOCOL), 1)
        try:
            if self._path is None:
                fd, self._path = tempfile.mkstemp(prefix="arcstudy-spool-")
                os.close(fd)
                self._finalizer = weakref.finalize(self, _remove, self._path)
            with open(self._path, "ab") as f:
                f.write(_HEADER.pack(len(data), len(batch)))
                f.write(data)
        except OSError as err:  # the scratch space is full or not writable: not the input's fault (exit 1)
            raise scratch_error(err) from err
        self._spilled += len(batch)
        super().clear()

    # -- reading ------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return sum(len(part) for part, _ in self._parts) + self._spilled + super().__len__()

    def __bool__(self) -> bool:
        return len(self) > 0

    def batches(self) -> Iterator[list[Any]]:
        """The items a batch at a time (each at most `limit`), in order."""
        for part, convert in self._parts:
            for batch in part.batches():
                yield batch if convert is None else [convert(item) for item in batch]
        if self._path is not None and self._spilled:
            with open(self._path, "rb") as f:
                while True:
                    head = f.read(_HEADER.size)
                    if not head:
                        break
                    size, _ = _HEADER.unpack(head)
                    yield _unpacked(pickle.loads(zlib.decompress(f.read(size))))
        memory = list(super().__iter__())
        if memory:
            yield memory

    def __iter__(self) -> Iterator[Any]:
        for batch in self.batches():
            yield from batch

    def __getitem__(self, index):  # type: ignore[override]
        if not self._spilled and not self._parts:
            return super().__getitem__(index)
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:  # (a stride: every item read)
                return list(self)[index]
            # only the batches up to `stop` are read back: the first few problems of a flood, not all of them
            return list(itertools.islice(iter(self), start, max(start, stop)))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("spool index out of range")
        return next(itertools.islice(iter(self), index, None))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, list) and len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __contains__(self, item: object) -> bool:
        return any(x is item or x == item for x in self)

    def __reversed__(self) -> Iterator[Any]:
        return reversed(list(self))

    def count(self, item: Any) -> int:
        return sum(1 for x in self if x is item or x == item)

    def index(self, item: Any, *args: Any) -> int:  # type: ignore[override]
        self._in_memory_only("index")
        return super().index(item, *args)

    def copy(self) -> Spool:  # type: ignore[override]
        return Spool(self, self._limit)

    def __repr__(self) -> str:
        return f"Spool({len(self)} items, {self._spilled} on disk)"

    def __reduce__(self):
        if self._parts:  # to another process: one spool of its own, the parts' items read into it, kept as
            self._sent = Spool(self, self._limit)  # long as this one (its file goes with it)
            return self._sent.__reduce__()
        return (_restore, (self._path if self._spilled else None, self._spilled, list(super().__iter__()),
                           self._limit))


def _memory_only(name: str) -> Callable[..., Any]:
    method = getattr(list, name)

    def guarded(self: Spool, *args: Any, **kwargs: Any) -> Any:
        self._in_memory_only(name)
        return method(self, *args, **kwargs)

    guarded.__name__ = name
    return guarded


for _name in ("sort", "reverse", "insert", "pop", "remove", "__setitem__", "__delitem__", "__mul__", "__rmul__",
              "__imul__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(Spool, _name, _memory_only(_name))


def _plain_dataclass(cls: type) -> bool:
    """Instances of ``cls`` are their state and nothing else: a dataclass without its own pickling (a slotted
    one has its own `__getstate__`)."""
    return (dataclasses.is_dataclass(cls) and cls.__reduce_ex__ is object.__reduce_ex__
            and cls.__reduce__ is object.__reduce__ and cls.__getstate__ is object.__getstate__
            and not hasattr(cls, "__setstate__"))


def _packed(batch: list[Any]) -> tuple[type | None, list[Any]]:
    """(the class, each item's field dict) for a batch of one plain dataclass; else (None, the items)."""
    cls = type(batch[0]) if batch else None
    if (cls is not None and _plain_dataclass(cls) and hasattr(batch[0], "__dict__")
            and all(type(item) is cls for item in batch)):
        return cls, [item.__dict__ for item in batch]
    return None, batch


def _unpacked(packed: tuple[type | None, list[Any]]) -> list[Any]:
    cls, items = packed
    if cls is None:
        return items
    new, set_attribute = object.__new__, object.__setattr__  # a frozen dataclass refuses its own __setattr__
    out = []
    for fields in items:
        item = new(cls)
        set_attribute(item, "__dict__", fields)
        out.append(item)
    return out


def _restore(path: str | None, spilled: int, memory: list[Any], limit: int) -> Spool:
    spool = Spool(limit=limit)
    if path is not None:
        # A copy of the file: the sender's spool removes its own when it is let go.
        fd, copy = tempfile.mkstemp(prefix="arcstudy-spool-")
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            while block := src.read(1 << 20):
                out.write(block)
        spool._path, spool._spilled = copy, spilled
        spool._finalizer = weakref.finalize(spool, _remove, copy)
    list.extend(spool, memory)
    return spool
