"""A growing array of one C type in bounded memory (`SpillArray`): past `held` items, its oldest full blocks wait
in a temporary file and are read back a block at a time when asked for.

A recording's reader keeps a few numbers per line (its line number, offset, time, action, the positions of its
steps, each step's effect and play). Held as arrays they took about 110 bytes a step: a file of ten million
steps went over 1 GB whatever else was let go. Spilled, what stays in memory per column is its newest `held`
items and the two blocks read last, so memory is bounded by the number of columns, not by the file.

Reads are mostly in file order (a block read once serves 65,536 items); a read far behind costs one `pread` of a
block. Items on disk can be changed (`__setitem__`): the block is written back. Pickled (to a worker process) it
carries every item, as an `array` does.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

from pipeline.core.outputs import scratch_error

BLOCK_ITEMS = 1 << 16  # items read from or written to the file at a time
HELD_ITEMS = 1 << 20  # items a column keeps in memory (8 MB for int64s) before its oldest blocks go to disk


class SpillArray:
    """`array(typecode)` that appends, indexes, slices, iterates and assigns as an array does, holding at most
    about `held` items in memory."""

    __slots__ = ("typecode", "held", "block", "_shift", "_tail", "_base", "_file", "_cache", "_last", "_last_at")

    def __init__(self, typecode: str, items: Iterable[Any] = (), held: int | None = None) -> None:
        self.typecode = typecode
        self.block = BLOCK_ITEMS  # (read when made, as HELD_ITEMS: a test makes both small)
        if self.block & (self.block - 1):
            raise ValueError(f"BLOCK_ITEMS must be a power of two, got {self.block}")
        self._shift = self.block.bit_length() - 1
        self.held = max(HELD_ITEMS if held is None else held, self.block)
        self._last, self._last_at = array(typecode), -1  # the block read last, and its number
        self._tail = array(typecode)  # the items from `_base` on, in memory
        self._base = 0  # items in the file (a whole number of blocks)
        self._file: Any = None
        self._cache: dict[int, array] = {}  # block number -> its items (the two read last)
        self.extend(items)

    # -- adding -------------------------------------------------------------------------------------
    def append(self, value: Any) -> None:
        self._tail.append(value)
        if len(self._tail) >= self.held + self.block:
            self._spill()

    def extend(self, values: Iterable[Any]) -> None:
        if isinstance(values, array) and values.typecode == self.typecode:
            self._tail.extend(values)
        elif isinstance(values, (bytes, bytearray)) and self.typecode == "B":
            self._tail.frombytes(values)
        else:
            tail = self._tail
            for value in values:
                tail.append(value)
                if len(tail) >= self.held + self.block:
                    self._spill()
                    tail = self._tail
        if len(self._tail) >= self.held + self.block:
            self._spill()

    def __iadd__(self, values: Iterable[Any]) -> SpillArray:
        self.extend(values)
        return self

    def _spill(self) -> None:
        """Write the oldest whole blocks beyond `held` to the file and let them go."""
        n = (len(self._tail) - self.held) // self.block * self.block
        if n <= 0:
            return
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="arcstudy-column-")
            with memoryview(self._tail) as view, view[:n].cast("B") as data:
                written = 0
                while written < len(data):  # (a write may take less than asked)
                    written += os.pwrite(self._file.fileno(), data[written:],
                                         self._base * self._tail.itemsize + written)
        except OSError as err:  # the scratch space is full or not writable: not the input's fault (exit 1)
            raise scratch_error(err) from err
        self._tail = self._tail[n:]
        self._base += n

    # -- reading ------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._base + len(self._tail)

    def spilled(self) -> int:
        """How many items wait on disk."""
        return self._base

    def _block(self, b: int) -> array:
        block = self._cache.get(b)
        if block is None:
            block = array(self.typecode)
            size = self.block * block.itemsize
            data = os.pread(self._file.fileno(), size, b * size)
            if len(data) != size:
                raise OSError(f"the temporary file of a spilled column ended early (block {b})")
            block.frombytes(data)
            if len(self._cache) >= 2:
                self._cache.pop(next(iter(self._cache)))
            self._cache[b] = block
        self._last, self._last_at = block, b
        return block

    def __getitem__(self, i: Any) -> Any:
        if type(i) is int and i >= 0:  # (the common case first: this is called millions of times)
            j = i - self._base
            if j >= 0:
                return self._tail[j]
            if i >> self._shift == self._last_at:
                return self._last[i & (self.block - 1)]
            return self._block(i >> self._shift)[i & (self.block - 1)]
        if isinstance(i, slice):
            return self._slice(i)
        n = len(self)
        i = i.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("SpillArray index out of range")
        if i >= self._base:
            return self._tail[i - self._base]
        return self._block(i // self.block)[i % self.block]

    def _slice(self, s: slice) -> array | SpillArray:
        """An array of the items; a SpillArray when there are more than `held` (a copy, in bounded memory)."""
        positions = range(len(self))[s]
        if len(positions) <= self.held:
            if positions.step == 1:
                return self._range(positions.start, positions.stop)
            return array(self.typecode, map(self.__getitem__, positions))
        if positions.step == 1:
            out = SpillArray(self.typecode, held=self.held)
            for start in range(positions.start, positions.stop, self.block):
                out.extend(self._range(start, min(start + self.block, positions.stop)))
            return out
        return SpillArray(self.typecode, map(self.__getitem__, positions), held=self.held)

    def _range(self, start: int, stop: int) -> array:
        out = array(self.typecode)
        while start < min(stop, self._base):
            b, k = divmod(start, self.block)
            end = min(stop, (b + 1) * self.block)
            out.extend(self._block(b)[k:k + end - start])
            start = end
        if start < stop:
            out.extend(self._tail[start - self._base:stop - self._base])
        return out

    def __iter__(self) -> Iterator[Any]:
        for b in range(self._base // self.block):
            yield from self._block(b)
        yield from self._tail

    def __setitem__(self, i: int, value: Any) -> None:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("SpillArray assignment index out of range")
        if i >= self._base:
            self._tail[i - self._base] = value
            return
        b, k = divmod(i, self.block)
        block = self._block(b)
        block[k] = value
        try:
            os.pwrite(self._file.fileno(), block[k:k + 1].tobytes(), i * block.itemsize)
        except OSError as err:
            raise scratch_error(err) from err

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (SpillArray, array, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SpillArray({self.typecode!r}, {len(self)} items, {self._base} on disk)"

    # -- pickling (to another process of this machine): every item, held -------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"typecode": self.typecode, "held": self.held, "items": self._range(0, len(self))}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.typecode, self.held, self.block = state["typecode"], state["held"], BLOCK_ITEMS
        self._shift = self.block.bit_length() - 1
        self._tail, self._base, self._file, self._cache = array(self.typecode), 0, None, {}
        self._last, self._last_at = array(self.typecode), -1
        self.extend(state["items"])


def growing(typecode: str, items: Iterable[Any] = (), held: int | None = None) -> array | SpillArray:
    """The items as an `array` when there are at most `held` (HELD_ITEMS) of them (indexed at C speed), else a
    `SpillArray`."""
    held = HELD_ITEMS if held is None else held
    if isinstance(items, array) and items.typecode == typecode:  # taken as it is
        return items if len(items) <= held else SpillArray(typecode, items, held=held)
    if isinstance(items, (list, tuple, range, array)) and len(items) <= held:
        return array(typecode, items)
    out = array(typecode)
    iterator = iter(items)
    for value in iterator:
        out.append(value)
        if len(out) > held:
            spilled = SpillArray(typecode, out, held=held)
            spilled.extend(iterator)
            return spilled
    return out


def spill_attributes(owner: Any, columns: Iterable[tuple[str, str]]) -> None:
    """Make each named array attribute of `owner` (name, typecode) a `SpillArray` of its items: a file or script
    past HELD_ITEMS lines keeps their newest in memory and the rest on disk. None and SpillArrays stay."""
    for name, typecode in columns:
        column = getattr(owner, name)
        if column is not None and not isinstance(column, SpillArray):
            setattr(owner, name, SpillArray(typecode, column))
