"""The one way arcstudy writes its outputs: whole files, whole folders, CSV safe in a spreadsheet.

    write_text(path, text)            # a single file: a fresh temporary file beside it, then os.replace
    with output_folder(out_dir) as stage:
        ...write everything into `stage`...
    # the folder is swapped into place as a whole when the block ends without an error

Single files are written to a uniquely named temporary file created in the target's folder (O_EXCL: a
pre-placed symlink is never followed) and renamed over the target, so a reader sees the old file or the new
one, and a symlink at the target is replaced, never written through. Any error or Ctrl-C removes the
temporary file.

`output_folder(target)` gives a fresh stage folder beside the target that starts as a copy of it (hard links:
no bytes copied; leftover `*.tmp` files are dropped). The command writes into the stage, replacing files (never
writing into a file in place: the old folder shares those inodes), and when the block ends the stage is swapped
with the target (Linux: one atomic `renameat2(RENAME_EXCHANGE)`; elsewhere two renames) and the old folder is
removed. A reader sees the old complete set or the new one. On an error, or Ctrl-C, the stage is removed and
the target is untouched. Where a folder cannot be swapped (it is the working directory or holds it, it is a
mount point, another user owns it, it holds FIFOs, sockets or devices, or its parent folder is not writable:
the stage then goes inside it), the stage is moved in file by file instead: each file is still whole and a
failed run still leaves the old set, but a reader in the last moment may see a mix. Paths under the stage
read as their final place in run manifests (`public_path`, `public_json`).

Output-side OSErrors become `OutputError` (the path and the OS reason); commands turn it into one line and
exit 1 (pipeline.commands.common), never a traceback and never blamed on an input.

CSV: `csv_text(df)` is the one way a CSV is made. Text cells that start with `=`, `+`, `-`, `@`, TAB or CR
(OWASP's "CSV injection" rule) get a leading `'` so a spreadsheet shows them instead of running them; numbers
stay numbers. `raw_csv(True)` (the commands' `--raw-csv`) turns that off. Parquet is always written raw.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import stat
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pipeline.core.special_files import remove_tree
from pipeline.core.textfiles import visible

__all__ = ["FORMULA_STARTS", "OUTPUT_ERRNOS", "OutputError", "as_output_error", "csv_text", "current_umask",
           "is_output_oserror", "markdown_code", "markdown_text", "named", "neutralise_formulas", "open_output",
           "output_folder", "public_json", "public_path", "raw_csv", "write_bytes", "write_csv", "write_text",
           "write_with"]

# errnos only a write can give: such an error is the output's (or the environment's), never the input's
OUTPUT_ERRNOS = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EROFS, errno.EFBIG)
                          if e is not None)
STAGE_MARK = ".arcstudy-stage-"


class OutputError(Exception):
    """An output that cannot be written: `path` (as the user knows it) and the OS `reason`."""

    def __init__(self, path: Path | str, reason: str, errno_: int | None = None, option: str | None = None):
        super().__init__(str(path), reason, errno_, option)
        self.path, self.reason, self.errno, self.option = str(path), reason, errno_, option

    def __str__(self) -> str:
        return f"cannot write {self.option + ' ' if self.option else ''}{self.path}: {self.reason}"


@contextmanager
def named(option: str) -> Iterator[None]:
    """OutputErrors raised in the block name the command-line option that chose the path (`--out`)."""
    try:
        yield
    except OutputError as err:
        if err.option is None:
            err.option = option
        raise


def _reason(err: BaseException) -> str:
    if isinstance(err, OSError):
        return err.strerror or str(err) or type(err).__name__
    return str(err) or type(err).__name__


def scratch_error(err: OSError) -> OutputError:
    """`err`, met writing arcstudy's own temporary files (spilled rows, line data), as an OutputError naming where
    they go: a full or unwritable $TMPDIR is not the input's fault, and ends the run with exit 1."""
    out = as_output_error(err, tempfile.gettempdir())
    out.option = out.option or "$TMPDIR"
    return out


def as_output_error(err: BaseException, path: Path | str) -> OutputError:
    """`err` (an OSError met while writing `path`) as an OutputError naming the path the user knows."""
    if isinstance(err, OutputError):
        return err
    name = getattr(err, "filename", None)
    code = getattr(err, "errno", None)
    if isinstance(err, FileExistsError) and isinstance(name, str) and not os.path.isdir(name):
        # mkdir of a folder the output goes in, where a regular file is: the output's folder is not one
        return OutputError(public_path(path), f"Not a directory ({public_path(name)} is a file)", errno.ENOTDIR)
    where = public_path(name) if isinstance(name, str) and name else public_path(path)
    return OutputError(where, _reason(err), code)


def is_output_oserror(err: BaseException, *folders: Path | str | None) -> bool:
    """Whether `err` is an output's failure: a write-only errno (disk full, quota, read-only file system, file
    too large), or any OSError on a path under one of `folders` (where the command writes)."""
    if not isinstance(err, OSError):
        return False
    if err.errno in OUTPUT_ERRNOS:
        return True
    name = err.filename
    if not isinstance(name, str) or not name:
        return False
    full = os.path.abspath(name)
    for folder in folders:
        if folder is None:
            continue
        top = os.path.abspath(folder)
        if full == top or full.startswith(top.rstrip(os.sep) + os.sep):
            return True
    return False


# --------------------------------------------------------------------------------------------------------
# Single files
# --------------------------------------------------------------------------------------------------------
def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once, at import: os.umask is process-wide, and reading it sets it for a moment


def current_umask() -> int:
    """The process's umask, for the mode of a staged output folder that has no old folder to copy it from."""
    return _UMASK


def _new_temp_file(folder: Path, name: str) -> tuple[int, str]:
    """A fresh, exclusively created temporary file beside `name` in `folder`: (fd, path). Created with mode 0666
    so the kernel applies the umask (no chmod afterwards: a sandboxed writer may not call chmod)."""
    for _ in range(100):
        path = os.path.join(folder, f".{name[:64]}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(folder))


def is_null_device(path: Path | str) -> bool:
    """Whether `path` is the null device (`/dev/null`, or a link to it): an output there is discarded."""
    try:
        st, null = os.stat(path), os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev


@contextmanager
def _replacing(target: Path, make_parents: bool) -> Iterator[tuple[int, str]]:
    """(fd, path) of a fresh temporary file beside `target`, renamed over `target` when the block ends (a symlink
    there is replaced, not followed) and removed on any error; an OSError, or a library's error around one
    (polars: "... (os error 28)"), is raised as OutputError naming `target`. The null device is written as
    itself: renamed over, `--out /dev/null` run as root made it a regular file holding the output."""
    if is_null_device(target):  # (the caller closes the fd, as it closes a temporary file's)
        yield os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC), os.devnull
        return
    tmp: str | None = None
    try:
        if make_parents:
            target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _new_temp_file(target.parent, target.name)
        yield fd, tmp
        os.replace(tmp, target)
        tmp = None
    except OSError as err:
        if not isinstance(err, FileExistsError):  # (os.replace names the temporary file): the target
            err.filename = None
        raise as_output_error(err, target) from err
    except Exception as err:
        found = re.search(r"\(os error (\d+)\)", str(err))
        if found is None:
            raise
        code = int(found[1])
        raise OutputError(public_path(target), os.strerror(code), code) from err
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_with(path: Path | str, write: Callable[[Path], Any], *, make_parents: bool = True) -> Path:
    """Write `path` whole: `write(tmp)` fills a fresh temporary file in the same folder, which then replaces
    `path` (a symlink there is replaced, not followed). Its folder is created if missing (unless not
    `make_parents`: a missing folder is then an error). Any error removes the temporary file; an OSError is
    raised as OutputError naming `path`."""
    target = Path(path)
    with _replacing(target, make_parents) as (fd, tmp):
        os.close(fd)
        write(Path(tmp))
    return target


@contextmanager
def open_output(path: Path | str, *, encoding: str = "utf-8", make_parents: bool = True) -> Iterator[Any]:
    """A text file to stream an output into, written whole: `with open_output(path) as fh: fh.write(...)`
    (a temporary file renamed over `path` when the block ends; removed on any error)."""
    with _replacing(Path(path), make_parents) as (fd, _tmp), os.fdopen(fd, "w", encoding=encoding) as fh:
        yield _Streamed(fh)


class _Streamed:
    """`open_output`'s file: text written through `_write_part`, the one place a streamed output reaches the disk
    (as `_fill` is for an output written at once)."""

    def __init__(self, fh: Any) -> None:
        self._fh = fh

    def write(self, text: str) -> int:
        return _write_part(self._fh, text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            _write_part(self._fh, line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, ...
        return getattr(self._fh, name)


def _write_part(fh: Any, text: str) -> int:
    return fh.write(text)


def _fill(tmp: Path, data: bytes) -> None:
    with open(tmp, "wb") as fh:
        fh.write(data)


def write_bytes(path: Path | str, data: bytes, *, make_parents: bool = True) -> Path:
    return write_with(path, lambda tmp: _fill(tmp, data), make_parents=make_parents)


TEXT_SLICE = 1 << 20  # characters encoded and written at a time (`write_text`)


def write_text(path: Path | str, text: str, encoding: str = "utf-8", *, make_parents: bool = True) -> Path:
    """Write `path` whole with `text` (`open_output`), a slice at a time: encoded at once, a text was held twice
    while it was written (`score` of 100,000 plays: a 110 MB scorecard)."""
    with open_output(path, encoding=encoding, make_parents=make_parents) as fh:
        for start in range(0, len(text), TEXT_SLICE):
            fh.write(text[start:start + TEXT_SLICE])
    return Path(path)


# --------------------------------------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------------------------------------
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_RE = r"^[=+\-@\t\r]"
_RAW_CSV: ContextVar[bool] = ContextVar("arcstudy_raw_csv", default=False)


@contextmanager
def raw_csv(raw: bool = True) -> Iterator[None]:
    """Within the block, CSVs are written as the data says (`--raw-csv`): no formula neutralising."""
    token = _RAW_CSV.set(raw)
    try:
        yield
    finally:
        _RAW_CSV.reset(token)


def _safe_name(name: str) -> str:
    return "'" + name if name.startswith(FORMULA_STARTS) else name


_MD_BREAKS = re.compile(r"[\r\n\x0b\x0c\x85\u2028\u2029]+")  # what CommonMark or a browser takes for a line end


def markdown_text(value: object) -> str:
    """`value` as text inside one line of a Markdown file (a table cell, a heading) that arcstudy writes: line
    breaks of any kind become spaces (a file name with a CR once started a heading of its own), control
    characters become escapes, `<`, `>` and `&` HTML entities (no raw HTML: `<img onerror=...>`), and `|`,
    `[`, `]`, `` ` `` are backslash-escaped (no cell of another column, no link, no code span)."""
    text = visible(_MD_BREAKS.sub(" ", str(value)))
    text = text.replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for mark in "|[]`":
        text = text.replace(mark, "\\" + mark)
    return text


def markdown_code(value: object) -> str:
    """`value` as an inline code span of a Markdown line: line breaks and control characters as escapes (`\\x0d`),
    fenced with more backticks than any run inside it (a command line holding a file name from input)."""
    text = re.sub(r"[\n\x85\u2028\u2029]", lambda m: f"\\x{ord(m.group()):02x}", visible(str(value)))
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def neutralise_formulas(df):
    """`df` with every text cell (and column name) that a spreadsheet would run as a formula prefixed with `'`."""
    import polars as pl

    exprs = []
    for name, dtype in df.schema.items():
        if dtype == pl.String or isinstance(dtype, (pl.Categorical, pl.Enum)):
            col = pl.col(name).cast(pl.String)
            exprs.append(pl.when(col.str.contains(_FORMULA_RE)).then(pl.lit("'") + col).otherwise(col).alias(name))
    if exprs:
        df = df.with_columns(exprs)
    renames = {name: _safe_name(name) for name in df.columns if _safe_name(name) != name}
    return df.rename(renames) if renames else df


def _nested_as_json(df):
    import polars as pl

    nested = [name for name, dtype in df.schema.items() if isinstance(dtype, (pl.List, pl.Array, pl.Struct))]
    if not nested:
        return df
    return df.with_columns(
        pl.col(name).map_elements(lambda v: json.dumps(v.to_list() if hasattr(v, "to_list") else v, default=str),
                                  return_dtype=pl.String)
        for name in nested
    )


def csv_text(df, *, raw: bool | None = None, header: bool = True) -> str:
    """The CSV of a polars frame: nested values as JSON text, formula-like text cells neutralised unless `raw`
    (default: the `raw_csv` setting in force); without its header line unless `header`."""
    df = _nested_as_json(df)
    if not (_RAW_CSV.get() if raw is None else raw):
        df = neutralise_formulas(df)
    return df.write_csv(include_header=header)


def write_csv(df, path: Path | str, *, raw: bool | None = None) -> Path:
    return write_text(path, csv_text(df, raw=raw))


# --------------------------------------------------------------------------------------------------------
# Folders
# --------------------------------------------------------------------------------------------------------
_STAGES: dict[str, str] = {}  # stage path (absolute, and as given) -> the target's path in the same form


def public_path(path: Path | str) -> Path:
    """Where `path` ends up: a path under an active stage, under its target; any other path unchanged."""
    text = str(path)
    for stage in sorted(_STAGES, key=len, reverse=True):
        if text == stage or text.startswith(stage.rstrip(os.sep) + os.sep):
            return Path(_STAGES[stage] + text[len(stage):])
    return Path(path)


def public_json(value: Any) -> Any:
    """`value` (JSON-like) with every stage path in its strings read as its final place."""
    if not _STAGES:
        return value
    if isinstance(value, str):
        for stage in sorted(_STAGES, key=len, reverse=True):
            if stage in value:
                value = value.replace(stage, _STAGES[stage])
        return value
    if isinstance(value, dict):
        return {public_json(k): public_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [public_json(v) for v in value]
    return value


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _sweep_stale_stages(parent: Path, prefix: str) -> None:
    """Stages left by a run killed outright (kill -9, power loss): removed once their process is gone."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            if not entry.name.startswith(prefix):
                continue
            pid = entry.name[len(prefix):].split("-", 1)[0]
            if pid.isdigit() and not _pid_alive(int(pid)):
                remove_tree(entry.path)


# Files another connection may be writing while the command runs (a DuckDB database kept in the output folder,
# its write-ahead log): never copied into a stage, and a folder holding one is never swapped (file by file).
LIVE_SUFFIXES = (".duckdb", ".wal")


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    """What tells one version of a file from another without reading it (an inode number alone is reused)."""
    return st.st_ino, st.st_size, st.st_mtime_ns


def _clone(src: str, dst: str, rel: str, cloned: dict[str, tuple[Any, Any]], dropped: set[str]) -> bool:
    """Fill `dst` with `src`'s tree as hard links (copies where links fail), symlinks as symlinks; `cloned`
    gets each carried entry's identity in `src` and in `dst` (`_identity`). Returns False when `src` holds
    something that must not be carried (a FIFO, socket or device; a database: LIVE_SUFFIXES): the folder is then not swapped."""
    carried = True
    for entry in os.scandir(src):
        name = os.path.join(rel, entry.name) if rel else entry.name
        target = os.path.join(dst, entry.name)
        if STAGE_MARK in entry.name:
            continue
        if entry.is_symlink():
            if entry.name.endswith(".tmp"):
                dropped.add(name)
                continue
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir(follow_symlinks=False):
            os.mkdir(target)
            shutil.copystat(entry.path, target, follow_symlinks=False)
            carried = _clone(entry.path, target, name, cloned, dropped) and carried
            continue
        elif entry.is_file(follow_symlinks=False):
            if entry.name.endswith(".tmp"):  # a half-written file of an older arcstudy or another program
                dropped.add(name)
                continue
            if entry.name.endswith(LIVE_SUFFIXES):
                carried = False
                continue
            try:
                os.link(entry.path, target)
            except OSError:
                shutil.copy2(entry.path, target)
        else:
            carried = False
            continue
        cloned[name] = (_identity(entry.stat(follow_symlinks=False)), _identity(os.lstat(target)))
    return carried


def _can_swap(target: Path, carried: bool) -> bool:
    real = os.path.realpath(target)
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:
        cwd = ""
    if cwd == real or cwd.startswith(real.rstrip(os.sep) + os.sep):
        return False
    try:
        st = os.stat(real)
    except OSError:
        return False
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return False
    return carried and not os.path.ismount(real)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, getattr(errno, "ENOTSUP", errno.EINVAL)):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _swap_in(stage: Path, target: Path) -> None:
    """Put `stage` at `target`; `stage` then holds the old folder (or nothing), for the caller to remove."""
    if _exchange(stage, target):
        return
    aside = stage.with_name(stage.name + "-old")
    os.rename(target, aside)
    try:
        os.rename(stage, target)
    except BaseException:
        os.rename(aside, target)
        raise
    os.rename(aside, stage)


def _merge_in(stage: Path, target: Path, cloned: dict[str, tuple[Any, Any]], dropped: set[str]) -> None:
    """Apply what the run changed in its copy to `target`, file by file (each whole): files it wrote are moved
    in, files it removed are removed (unless someone replaced them meanwhile); what it left as it was, and
    whatever is in `target` that was never copied, is not touched."""
    present: set[str] = set()

    def walk(src: str, dst: str, rel: str) -> None:
        os.makedirs(dst, exist_ok=True)
        for entry in os.scandir(src):
            name = os.path.join(rel, entry.name) if rel else entry.name
            there = os.path.join(dst, entry.name)
            present.add(name)
            if entry.is_dir(follow_symlinks=False):
                if os.path.islink(there) or (os.path.lexists(there) and not os.path.isdir(there)):
                    os.unlink(there)
                walk(entry.path, there, name)
                continue
            if name in cloned and _identity(entry.stat(follow_symlinks=False)) == cloned[name][1]:
                continue  # carried over, left as it was by the run
            if os.path.isdir(there) and not os.path.islink(there):
                shutil.rmtree(there)
            os.replace(entry.path, there)

    walk(str(stage), str(target), "")
    for name in sorted(set(cloned) - present, reverse=True):
        path = target / name
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            st = os.lstat(path)
            if _identity(st) == cloned[name][0] and not stat.S_ISDIR(st.st_mode):
                path.unlink()
    for name in sorted(dropped):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError, IsADirectoryError):
            (target / name).unlink()


@contextmanager
def output_folder(target: Path | str) -> Iterator[Path]:
    """A stage folder to write `target`'s new contents into, swapped into place when the block ends without an
    error (see the module docstring). OSErrors on paths under the stage or target, or a full disk, are raised
    as OutputError naming the target's path."""
    given = Path(target)
    if given.name in ("", ".", ".."):  # `--out .`: its stage goes beside it, under its own name
        given = Path(os.path.abspath(given))
    stage: Path | None = None
    try:
        if given.is_symlink() and given.is_dir():  # a folder the user linked elsewhere: written where it points
            given = Path(os.path.realpath(given))
        if os.path.lexists(given) and not given.is_dir():
            what = "a symlink that leads to no folder" if given.is_symlink() else "a file"
            raise OutputError(given, f"Not a directory ({what} is in the way)", errno.ENOTDIR)
        given.parent.mkdir(parents=True, exist_ok=True)
        prefix = f".{given.name[:80]}{STAGE_MARK}"
        _sweep_stale_stages(given.parent, prefix)
        stage = given.parent / f"{prefix}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        inside = False
        try:
            os.mkdir(stage)
        except PermissionError:  # a folder we may write in, in one we may not: staged inside, moved file by file
            if not given.is_dir():
                raise
            _sweep_stale_stages(given, prefix)
            stage, inside = given / stage.name, True
            os.mkdir(stage)
        cloned: dict[str, tuple[Any, Any]] = {}
        dropped: set[str] = set()
        carried = True
        if given.is_dir():
            shutil.copystat(given, stage)
            carried = _clone(str(given), str(stage), "", cloned, dropped)
        else:
            os.chmod(stage, 0o777 & ~current_umask())
    except OSError as err:
        if stage is not None:
            remove_tree(stage)
            if getattr(err, "filename", None) == str(stage):  # its stage could not be made: the user knows the target
                raise OutputError(given, _reason(err), err.errno) from err
        raise as_output_error(err, given) from err
    except BaseException:  # Ctrl-C (or SIGTERM) while the old folder is copied into the stage: no stage left behind
        if stage is not None:
            remove_tree(stage)
        raise
    forms = {str(stage): str(given), os.path.abspath(stage): os.path.abspath(given)}
    _STAGES.update(forms)
    try:
        try:
            yield stage
        except OSError as err:
            if is_output_oserror(err, stage, given):
                raise as_output_error(err, given) from err
            raise
        try:
            if not given.exists():
                os.rename(stage, given)
            elif not inside and _can_swap(given, carried):
                _swap_in(stage, given)
            else:
                _merge_in(stage, given, cloned, dropped)
        except OSError as err:
            raise as_output_error(err, given) from err
    finally:
        for key in forms:
            _STAGES.pop(key, None)
        if os.path.lexists(stage):
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(stage).st_mode):
                    remove_tree(stage)
