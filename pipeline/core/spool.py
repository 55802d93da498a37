"""A list that keeps a bounded number of its items in memory (`Spool`): the rest wait in a temporary file.

A flood of bad lines (a million `{}` lines, an H-ARC file of short rows) makes one quarantine record per line;
held as Python objects they once took 2-6 KB each, gigabytes for a file of a few megabytes. Readers collect
those records in a `Spool`: past `limit` items a batch is pickled (zlib) to a temporary file and let go, so
memory holds one batch whatever the count; iterating yields every item, in order, a batch at a time.

It is a `list` so that code which appends, extends, counts, tests or iterates its records needs no change;
indexing and slicing read the items back (for small spools, as tests do). Pickled (to or from a worker
process of this machine) it carries its file's path and its in-memory items.
"""

from __future__ import annotations

import itertools
import os
import pickle
import struct
import tempfile
import weakref
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

SPOOL_LIMIT = 20_000  # items held in memory before a batch goes to disk
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

    def __iadd__(self, items: Iterable[Any]) -> Spool:  # type: ignore[override]
        self.extend(items)
        return self

    def _spill(self) -> None:
        batch = list(super().__iter__())
        data = zlib.compress(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL), 1)
        if self._path is None:
            fd, self._path = tempfile.mkstemp(prefix="arcstudy-spool-")
            os.close(fd)
            weakref.finalize(self, _remove, self._path)
        with open(self._path, "ab") as f:
            f.write(_HEADER.pack(len(data), len(batch)))
            f.write(data)
        self._spilled += len(batch)
        super().clear()

    # -- reading ------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._spilled + super().__len__()

    def __bool__(self) -> bool:
        return len(self) > 0

    def batches(self) -> Iterator[list[Any]]:
        """The items a batch at a time (each at most `limit`), in order."""
        if self._path is not None and self._spilled:
            with open(self._path, "rb") as f:
                while True:
                    head = f.read(_HEADER.size)
                    if not head:
                        break
                    size, _ = _HEADER.unpack(head)
                    yield pickle.loads(zlib.decompress(f.read(size)))
        memory = list(super().__iter__())
        if memory:
            yield memory

    def __iter__(self) -> Iterator[Any]:
        for batch in self.batches():
            yield from batch

    def __getitem__(self, index):  # type: ignore[override]
        if not self._spilled:
            return super().__getitem__(index)
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("spool index out of range")
        return next(itertools.islice(iter(self), index, None))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, list) and len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Spool({len(self)} items, {self._spilled} on disk)"

    def __reduce__(self):
        return (_restore, (self._path if self._spilled else None, self._spilled, list(super().__iter__()),
                           self._limit))


def _restore(path: str | None, spilled: int, memory: list[Any], limit: int) -> Spool:
    spool = Spool(limit=limit)
    if path is not None:
        # A copy of the file: the sender's spool removes its own when it is let go.
        fd, copy = tempfile.mkstemp(prefix="arcstudy-spool-")
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            while block := src.read(1 << 20):
                out.write(block)
        spool._path, spool._spilled = copy, spilled
        weakref.finalize(spool, _remove, copy)
    list.extend(spool, memory)
    return spool
