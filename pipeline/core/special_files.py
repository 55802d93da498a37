"""Paths that must never be opened as files: a FIFO blocks its reader until a writer comes (and its writer until
a reader comes), /dev/zero never ends. Every input a user names goes through `not_regular_file` first."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
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
    return not_regular_mode(mode, dir_ok=dir_ok)


def not_regular_mode(mode: int, *, dir_ok: bool = False) -> str | None:
    """`not_regular_file` of a file whose `os.stat` mode is known."""
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
    """Every entry below `folder` that is not a folder, for ingest, score and export (`engine.loader.walk_files`,
    the one folder walk: symlinked folders followed once, no recursion)."""
    from engine.loader import walk_files  # here, not at the top: the engine's imports are paid only by a walk

    return walk_files(folder)


def iter_tree_files(folder: Path) -> Iterator[str]:
    """`tree_files` as it walks, by name (`engine.loader.iter_walk_files`): for a flood of files."""
    from engine.loader import iter_walk_files

    return iter_walk_files(folder)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def remove_tree(path: Path | str) -> None:
    """Remove a folder and everything in it, as far as it can, never raising: for trees that code from outside
    made (a sandbox's scratch folder). shutil.rmtree recurses once per level, so a tree a few thousand folders
    deep raised RecursionError (which `ignore_errors` does not cover) and failed the command that cleaned up;
    here one folder descriptor at a time walks down and back up by `..`, so neither the depth nor a path longer
    than PATH_MAX stops it. Symlinks are removed, never followed."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        try:
            os.unlink(path)  # a symlink or a file where the folder was
        except OSError:
            pass
        return
    levels: list[tuple[str, list[str]]] = [("", _clear_files(fd))]  # (the folder's name, its folders left)
    try:
        while levels:
            name, folders = levels[-1]
            if folders:
                sub = folders.pop()
                try:
                    child = os.open(sub, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue
                os.close(fd)
                fd = child
                levels.append((sub, _clear_files(fd)))
                continue
            levels.pop()
            if not levels:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                pass
    except OSError:
        pass
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError:
        pass


def _clear_files(fd: int) -> list[str]:
    """Unlink every entry of the open folder `fd` that is not a folder; the names of its folders."""
    folders = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.name)
                    else:
                        os.unlink(entry.name, dir_fd=fd)
                except OSError:
                    pass
    except OSError:
        pass
    return folders
