"""A game folder's shipped solution recordings (``solutions/*.jsonl``): which may be read, and why not the others.

A game folder comes from outside (docs/security.md): what it ships under ``solutions/`` is read by arcstudy's own
code (`arcstudy simulate` in its own process, `arcstudy qualify`'s playback checks in the game's sandbox). A FIFO
there would block the reader for good, a device never ends, a sparse file of gigabytes would be read whole:
each is checked before it is opened (regular file, at most MAX_SOLUTION_BYTES) and refused by name, with the
reason, so the caller can fail that game alone.
"""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.core.special_files import not_regular_file

__all__ = ["MAX_SOLUTION_BYTES", "solution_files", "solution_problem"]

MAX_SOLUTION_BYTES = 64 << 20  # a winning toolkit recording of a game here is tens of kB (hundreds with frames)


def solution_problem(path: Path, limit: int = MAX_SOLUTION_BYTES) -> str | None:
    """Why `path` must not be read as a solution recording ("is a FIFO ...", "is 2.0 GB ..."), or None."""
    kind = not_regular_file(path)
    if kind is not None:
        return f"is {kind}, not a regular file: only regular files are read"
    try:
        size = os.stat(path).st_size
    except OSError as err:
        return f"cannot be read: {err.strerror or err}"
    if size > limit:
        return (f"is {size / (1 << 20):,.1f} MB, more than a solution recording may be "
                f"({limit >> 20} MB): it is not read")
    return None


def solution_files(folder: Path | str, limit: int = MAX_SOLUTION_BYTES) -> tuple[list[Path], list[str]]:
    """The game folder's ``solutions/*.jsonl`` that may be read, sorted; and "path: reason" for each refused."""
    paths = sorted((Path(folder) / "solutions").glob("*.jsonl"))
    readable, refused = [], []
    for path in paths:
        why = solution_problem(path, limit)
        if why is None:
            readable.append(path)
        else:
            refused.append(f"{path}: {why}")
    return readable, refused
