"""A new database starts as a copy of a cached empty one.

Creating arcstudy's 60-odd tables takes about 0.3 s of CPU, nearly all of it DuckDB applying the column
comments one `COMMENT ON` statement at a time: a third of a small ingest's run. So the first new database
made with a given schema and DuckDB version is also kept, empty, in the user's cache folder
(`$ARCSTUDY_CACHE_DIR`, else `$XDG_CACHE_HOME/arcstudy`, else `~/.cache/arcstudy`; `ARCSTUDY_CACHE_DIR=`
empty turns it off), and later new databases are copies of it (about 1 ms). The cached file's name holds a
hash of every DDL statement and of the DuckDB version, so a change of either makes a new one.

The copy is only a shortcut: the workspace checks the copied tables against schemas/ as it checks any
database it opens, and anything amiss (a folder it cannot use, a damaged or altered cached file) falls back
to running the DDL, the way it always worked. A cache folder that others may write to is not used.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

CACHE_ENV = "ARCSTUDY_CACHE_DIR"
_PREFIX = "empty-"
_MAX_TEMPLATE_BYTES = 64 << 20  # an empty database is under 1 MB; anything far bigger is not ours


def cache_dir() -> Path | None:
    """The folder for arcstudy's cached files, or None when the person turned it off."""
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return Path(env) if env.strip() else None
    base = os.environ.get("XDG_CACHE_HOME")
    try:
        return (Path(base) if base else Path.home() / ".cache") / "arcstudy"
    except RuntimeError:  # no home folder to be found
        return None


def template_key(statements: list[str]) -> str:
    import duckdb

    digest = hashlib.sha256(f"duckdb {duckdb.__version__}\n".encode())
    for stmt in statements:
        digest.update(stmt.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def _usable_dir(folder: Path) -> bool:
    """Ours alone: a real folder owned by this user that no one else may write to."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    return not hasattr(os, "getuid") or st.st_uid == os.getuid()


def _regular_template(path: Path) -> bool:
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and 0 < st.st_size <= _MAX_TEMPLATE_BYTES


def _make_template(template: Path, statements: list[str]) -> bool:
    """Run `statements` into a new database beside `template` and move it into place (atomically: a reader
    sees the whole file or none). Other cached empty databases (older schemas) are removed."""
    import duckdb

    fd, tmp = tempfile.mkstemp(prefix=".making-", suffix=".duckdb", dir=template.parent)
    os.close(fd)
    os.unlink(tmp)  # DuckDB makes the file itself (an empty file would do too, but this is plainer)
    try:
        con = duckdb.connect(tmp)
        try:
            con.execute("BEGIN")
            for stmt in statements:
                con.execute(stmt)
            con.execute("COMMIT")
            con.execute("CHECKPOINT")  # everything in the file itself, no write-ahead log beside it
        finally:
            con.close()
        os.replace(tmp, template)
    except (OSError, duckdb.Error):
        for leftover in (tmp, tmp + ".wal"):
            try:
                os.unlink(leftover)
            except OSError:
                pass
        return False
    for old in template.parent.glob(f"{_PREFIX}*.duckdb"):
        if old.name != template.name:
            try:
                old.unlink()
            except OSError:
                pass
    return True


def copy_empty_database(path: Path, statements: list[str]) -> bool:
    """Make `path`, which must not exist, a copy of the cached empty database that `statements` make (making
    that first when needed). False when the cache cannot be used or `path` appeared meanwhile: the caller then
    creates the tables itself. The copy is written beside `path` and linked into place, so another process
    opening `path` never sees half a file."""
    folder = cache_dir()
    if folder is None or not _usable_dir(folder):
        return False
    template = folder / f"{_PREFIX}{template_key(statements)}.duckdb"
    if not _regular_template(template) and not _make_template(template, statements):
        return False
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as out, open(template, "rb") as src:
            shutil.copyfileobj(src, out)
        os.link(tmp, path)  # fails if `path` exists: never overwrites a database made meanwhile
        return True
    except OSError:
        return False
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def forget_template(statements: list[str]) -> None:
    """Remove the cached empty database (found damaged or altered), so the next new database makes it again."""
    folder = cache_dir()
    if folder is not None:
        try:
            (folder / f"{_PREFIX}{template_key(statements)}.duckdb").unlink()
        except OSError:
            pass
