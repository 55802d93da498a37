"""Memory freed by Python but kept by the C allocator: handed back to the system between a command's stages.

glibc's malloc keeps the pages of freed objects for its next requests (the heap's top is trimmed only past a
threshold, and never below an object still in use there). A stage that made and let go of millions of small
objects (a flood of plays' scorecard runs and replay checks) leaves hundreds of MB resident that the next stage
(writing tables through DuckDB and Arrow, which have their own allocators) cannot reuse, so the peaks add up.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _trim():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return libc.malloc_trim if libc is not None else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to hand back this way
        return None


def give_back_freed_memory() -> bool:
    """Return the C allocator's free pages to the system (glibc `malloc_trim(0)`); False where there is none."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
