"""Paths that must never be opened as files: a FIFO blocks its reader until a writer comes (and its writer until
a reader comes), /dev/zero never ends. Every input a user names goes through `not_regular_file` first."""

from __future__ import annotations

import stat
from pathlib import Path

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def not_regular_file(path: Path, *, dir_ok: bool = False) -> str | None:
    """Why `path` (symlinks followed) is not a regular file (`dir_ok`: nor a folder), or None when it is, or
    when it does not exist (whoever opens it reports that, with the OS's reason)."""
    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode) or (dir_ok and stat.S_ISDIR(mode)):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


NOT_UTF8_NAME = "the file's path is not UTF-8 text (each byte that is not is shown as \\xNN): rename the file to read it"


def undecodable(text: str) -> str | None:
    """None when ``text`` (a path or an argument, as Python received it) is UTF-8 text; else the text with each
    byte that is not shown as ``\\xNN``. Python keeps such bytes of a file name as lone surrogates, which
    DuckDB, polars, Parquet and JSON writers refuse: a name like that is reported, never stored."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return None


def resolved(path: Path) -> Path:
    """`path.resolve()`, or the absolute path when it cannot be resolved (symlinks that go round in a loop:
    resolve raises RuntimeError; whoever opens it then reports why it cannot be read)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def tree_files(folder: Path) -> list[Path]:
    """Every entry below `folder` that is not a folder (files, and symlinks, FIFOs, sockets or devices for the
    caller to refuse by name), sorted, named through `folder` as the user gave it. A symlinked folder is followed,
    as the folder it stands for (Path.rglob skipped its files without a word); one already walked (a loop, or a
    second link to it) is not walked again, so the walk ends and no file is listed twice."""
    import os

    found: list[Path] = []
    seen: set[str] = set()
    for top, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if os.path.realpath(os.path.join(top, d)) not in seen)  # in name order:
        # of two links to one folder, the first by name is the one walked, whatever order the OS lists them in
        found.extend(Path(top) / name for name in files)
    return sorted(found)
