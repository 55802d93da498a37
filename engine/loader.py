"""Finding and loading game files laid out like the official ``environment_files``.

Layout: ``<root>/<id>/<version>/<id>.py`` next to a ``metadata.json`` (searched at any depth under
each environments directory, as the toolkit does).  ``"ls20"`` selects the most recent version by
``date_downloaded``; ``"ls20-9607627b"`` selects exactly that version.

Game code runs only from directories the caller names (default: the repository's ``games/``), and
only from the game's own version folder: ``class_name`` must be a plain class name (no path), and a
game file that resolves outside the folder (a symlink) is refused, so a ``metadata.json`` cannot
point the loader at code elsewhere (``"../../payload/Evil"``).
Its ``from arcengine import ...`` / ``from arcengine.enums import ...`` statements resolve to this
package through an ``__import__`` installed in the game module's own ``__builtins__``: the
redirection is scoped to code defined in that module (including imports inside functions that run
later) and never touches ``sys.modules``, so an installed official ``arcengine`` stays importable
and unshadowed everywhere else.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import json
import os
import re
import stat
import sys
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .watchdog import StepTimeout, time_limited

__all__ = [
    "GameInfo",
    "GameNotFoundError",
    "GameUnloadableError",
    "default_environments_dir",
    "describe_game_error",
    "find_games",
    "resolve_game",
    "skipped_metadata",
    "unloadable_reason",
    "load_game_class",
    "load_game_module",
    "metadata_files",
    "metadata_problem",
    "iter_walk_files",
    "walk_files",
    "METADATA_MAX_BYTES",
]

_ENGINE_PACKAGE = __name__.rpartition(".")[0]  # "engine"
# A game id names output folders (``explore``/``qualify --out DIR/<game_id>/``): a plain name, never a path.
_PLAIN_GAME_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_REFERENCE_PACKAGE = "arcengine"


class GameNotFoundError(LookupError):
    """No game (or no such version) under the environments directories."""


class GameUnloadableError(GameNotFoundError):
    """The game is there but its code cannot be used (the message says why)."""


@dataclass(frozen=True)
class GameInfo:
    """One game version found on disk."""

    game_id: str  # full id, e.g. "ls20-9607627b"
    short_id: str  # e.g. "ls20"
    version: str  # e.g. "9607627b" ("" when the id has no version part)
    directory: Path
    source: Path | None
    class_name: str
    date_downloaded: datetime | None
    metadata: dict[str, Any] = field(compare=False, repr=False)
    # other folders under the same environments directory declaring this game id: which code is meant is unknown
    also_declared_in: tuple[Path, ...] = field(default=(), compare=False, repr=False)

    @property
    def baseline_actions(self) -> list[int] | None:
        value = self.metadata.get("baseline_actions")
        return list(value) if isinstance(value, list) else None

    def source_sha256(self) -> str:
        if self.source is None:
            raise GameNotFoundError(f"{self.game_id}: no source file for class {self.class_name} in {self.directory}")
        problem = _file_problem(self.source, SOURCE_MAX_BYTES, "a game file")
        if problem is not None:  # hashed in arcstudy's own process: never a FIFO, never gigabytes
            raise GameNotFoundError(f"{self.game_id}: game file {self.source}: {problem}")
        with open(self.source, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()


def default_environments_dir() -> Path:
    """The repository's ``games/`` directory (next to the ``engine`` package)."""
    return Path(__file__).resolve().parent.parent / "games"


def _as_dirs(environments_dir: str | Path | Iterable[str | Path] | None) -> list[Path]:
    if environments_dir is None:
        return [default_environments_dir()]
    if isinstance(environments_dir, (str, Path)):
        return [Path(environments_dir)]
    return [Path(item) for item in environments_dir]


def metadata_files(root: str | Path) -> list[Path]:
    """Every ``metadata.json`` below ``root`` (`walk_files`: a symlinked folder followed as the folder it stands
    for; Path.rglob skipped them, and the games of a games folder of links were "not found")."""
    return [path for path in walk_files(root) if path.name == "metadata.json"]


def walk_files(root: str | Path) -> list[Path]:
    """Every entry below ``root`` that is not a folder (`iter_walk_files`), as paths."""
    return [Path(name) for name in iter_walk_files(root)]


def iter_walk_files(root: str | Path) -> Iterator[str]:
    """Every entry below ``root`` that is not a folder (files, and symlinks, FIFOs, sockets or devices for the
    caller to refuse by name), sorted as paths sort, named through ``root`` as given (as `Path` names them). A
    symlinked folder is followed as the folder it stands for; one already walked (a loop, or a second link to it)
    is not walked again, and a link to a folder that holds ``root`` (``/``, the home folder, ``..``) is left out,
    so the walk ends and no file is listed twice. A loop, not recursion (os.walk of Python 3.11 recursed once per
    level: a tree a thousand folders deep failed), and folders known by device and inode, not by real path (whose
    making costs a look-up per level). Lazy: depth first, each folder's entries in name order, which is the
    sorted order of the paths; memory holds the listings of the folders open on the way down, never the whole
    tree (a million files listed at once took about 650 bytes each as paths)."""
    seen: set[tuple[int, int]] = set()
    root_real = os.path.realpath(root)
    top = str(Path(root))
    stack = [iter([(top, True)])]  # each open folder's entries still to visit, the deepest on top
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        path, is_folder = entry
        if not is_folder:
            yield path
            continue
        try:
            folder = os.stat(path)
            if (folder.st_dev, folder.st_ino) in seen:
                continue
            seen.add((folder.st_dev, folder.st_ino))
            with os.scandir(path) as entries:
                listed = [(entry.name, _is_folder(entry)) for entry in entries if not _links_up(entry, root_real)]
        except OSError:
            continue
        # of two links to one folder, the first by name is the one walked, whatever order the OS lists them in
        listed.sort()
        stack.append(iter([(name if path == "." else os.path.join(path, name), sub) for name, sub in listed]))


def _links_up(entry: os.DirEntry, root_real: str) -> bool:
    """A symlink to a folder that holds the walk's own root (``/``, the home folder, ``..``): left out, neither
    walked nor listed, as a loop is (followed, it walked the whole disk around the folder given)."""
    if not entry.is_symlink():
        return False
    real = os.path.realpath(entry.path)
    return root_real == real or root_real.startswith(real.rstrip(os.sep) + os.sep)


def _is_folder(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _parse_date(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:

        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _inside(path: Path, directory: Path) -> bool:
    return path.resolve().is_relative_to(directory.resolve())


def _find_source(directory: Path, class_name: str) -> Path | None:
    """``<class>.py`` (lower-case first) inside ``directory`` itself, or None."""
    if not class_name.isidentifier():  # a path ("../x/Evil") is never a class name
        return None
    candidates = [directory / f"{class_name.lower()}.py", directory / f"{class_name}.py"]
    # any entry of that name (a FIFO or a device too: unloadable_reason then says what it is)
    return next((path for path in candidates if path.exists() and not path.is_dir() and _inside(path, directory)),
                None)


METADATA_MAX_BYTES = 4 << 20  # a game's metadata is a few hundred bytes (at most 254 baseline values)
SOURCE_MAX_BYTES = 16 << 20  # a game file is tens of KB; it is hashed in arcstudy's own process


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise ValueError(f"the key {twice!r} is given twice in one object (which value is meant?)")
    return out


def metadata_problem(metadata_path: str | Path) -> str | None:
    """Why a ``metadata.json`` must not be read (a FIFO would block its reader for good, a device never end, a
    huge file fill memory), or None. Its readers ask this first: the games' discovery, baselines from a folder."""
    return _file_problem(metadata_path, METADATA_MAX_BYTES, "a game's metadata.json")


def _file_problem(path: str | Path, max_bytes: int, what: str) -> str | None:
    try:
        kind = os.stat(path)
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if not stat.S_ISREG(kind.st_mode):
        return "not a regular file (a FIFO, a device or a socket)"
    if kind.st_size > max_bytes:
        return f"{kind.st_size:,} bytes: {what} is at most {max_bytes:,}"
    return None


def _read_info(metadata_path: Path) -> GameInfo:
    problem = metadata_problem(metadata_path)
    if problem is not None:
        raise ValueError(problem)
    try:  # utf-8-sig: a byte-order mark is accepted, as in every text format arcstudy reads
        metadata = json.loads(metadata_path.read_text(encoding="utf-8-sig"), object_pairs_hook=_unique_keys)
    except RecursionError as err:
        raise ValueError("the JSON is nested too deeply to read") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"not valid JSON ({err})") from err
    if not isinstance(metadata, dict):
        raise ValueError("metadata.json must hold a JSON object")
    game_id = metadata.get("game_id")
    if not isinstance(game_id, str) or not game_id:
        raise ValueError("metadata game_id must be a non-empty string")
    if not _PLAIN_GAME_ID.fullmatch(game_id) or ".." in game_id:
        raise ValueError(f"game_id {game_id!r} is not a plain game id (letters, digits, '-', '_', '.'; "
                         f"no path): game ids name output folders")
    short_id, _, version = game_id.partition("-")
    class_name = metadata.get("class_name") or (game_id[:4][:1].upper() + game_id[:4][1:])
    if not isinstance(class_name, str):
        raise ValueError("metadata class_name must be a string")
    directory = metadata_path.parent
    source = _find_source(directory, class_name)
    return GameInfo(
        game_id=game_id,
        short_id=short_id,
        version=version,
        directory=directory,
        source=source,
        class_name=class_name,
        date_downloaded=_parse_date(metadata.get("date_downloaded")),
        metadata=metadata,
    )


def unloadable_reason(info: GameInfo) -> str | None:
    """Why the game's code cannot be loaded (no file, or a class name that is a path), or None."""
    if info.also_declared_in:
        where = ", ".join(str(path) for path in (info.directory, *info.also_declared_in))
        return (f"{info.game_id}: declared by {1 + len(info.also_declared_in)} folders under one games folder "
                f"({where}); which code is meant is ambiguous: keep one of them")
    if not info.class_name.isidentifier():
        return (f"{info.game_id}: class_name {info.class_name!r} in {info.directory / 'metadata.json'} is not a "
                f"plain class name; game code is loaded only from the game's own folder {info.directory}")
    if info.source is None:
        return f"{info.game_id}: no {info.class_name.lower()}.py or {info.class_name}.py in {info.directory}"
    if info.source.parent != info.directory or not _inside(info.source, info.directory):
        return f"{info.game_id}: game file {info.source} is outside the game's own folder {info.directory}"
    problem = _file_problem(info.source, SOURCE_MAX_BYTES, "a game file")
    if problem is not None:
        return f"{info.game_id}: game file {info.source}: {problem}"
    return None


def find_games(
    environments_dir: str | Path | Iterable[str | Path] | None = None, *, loadable: bool = False
) -> list[GameInfo]:
    """Every game version under the directories (``metadata.json`` at any depth), sorted by id;
    ``loadable=True`` leaves out games whose code cannot be loaded (see ``unloadable_reason``)."""
    found, _ = _scan(environments_dir)
    return [found[key] for key in sorted(found) if not loadable or unloadable_reason(found[key]) is None]


def skipped_metadata(environments_dir: str | Path | Iterable[str | Path] | None = None) -> list[str]:
    """Each ``metadata.json`` under the directories that ``find_games`` leaves out because it cannot be read as a
    game's metadata, as ``"path: reason"`` (a caller that was given the folder says so instead of skipping it
    without a word)."""
    return _scan(environments_dir)[1]


def _scan(environments_dir: str | Path | Iterable[str | Path] | None
          ) -> tuple[dict[str, GameInfo], list[str]]:
    """The games found by id, and why each skipped ``metadata.json`` was skipped ("path: reason")."""
    found: dict[str, GameInfo] = {}
    skipped: list[str] = []
    for root in _as_dirs(environments_dir):
        if not root.is_dir():
            continue
        in_root: dict[str, GameInfo] = {}
        for metadata_path in metadata_files(root):
            try:
                info = _read_info(metadata_path)
            except (OSError, ValueError, KeyError, TypeError) as err:
                # not a game's metadata (or unreadable): skipped, like the toolkit does; named when nothing is found
                skipped.append(f"{metadata_path}: {err}")
                continue
            first = in_root.setdefault(info.game_id, info)
            if first is not info:  # a second folder with this id under the same root: ambiguous, not loadable
                in_root[info.game_id] = replace(first, also_declared_in=(*first.also_declared_in, info.directory))
        for game_id, info in in_root.items():
            found.setdefault(game_id, info)  # the first directory listed wins duplicates across directories
    return found, skipped


def _recency(info: GameInfo) -> tuple:
    stamp = info.date_downloaded.timestamp() if info.date_downloaded is not None else float("-inf")
    return (stamp, info.version)


def resolve_game(
    game_id: str, environments_dir: str | Path | Iterable[str | Path] | None = None, *, loadable: bool = False
) -> GameInfo:
    """``"ls20-9607627b"`` exactly, or ``"ls20"`` as its most recently downloaded version;
    ``loadable=True`` raises ``GameNotFoundError`` (with the reason) if its code cannot be loaded."""
    by_id, skipped = _scan(environments_dir)
    games = [by_id[key] for key in sorted(by_id)]
    found = next((info for info in games if info.game_id == game_id), None)
    if found is None and "-" not in game_id:
        versions = [info for info in games if info.short_id == game_id]
        if versions:
            found = max(versions, key=_recency)
    if found is not None:
        reason = unloadable_reason(found) if loadable else None
        if reason is not None:
            raise GameUnloadableError(reason)
        return found
    where = ", ".join(str(path) for path in _as_dirs(environments_dir))
    detail = ""
    if skipped:
        detail = (f"; {len(skipped)} metadata.json file(s) skipped: " + "; ".join(skipped[:5])
                  + ("; ..." if len(skipped) > 5 else ""))
    raise GameNotFoundError(f"game {game_id!r} not found under {where}{detail}")


# ----------------------------------------------------------------------------------------------
# Executing game files with ``arcengine`` resolved to this package
# ----------------------------------------------------------------------------------------------

def _redirecting_import(real_import: Any) -> Any:
    def import_(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level == 0 and (name == _REFERENCE_PACKAGE or name.startswith(_REFERENCE_PACKAGE + ".")):
            name = _ENGINE_PACKAGE + name[len(_REFERENCE_PACKAGE) :]
        return real_import(name, globals, locals, fromlist, level)

    return import_


def _game_builtins() -> dict[str, Any]:
    scoped = dict(vars(builtins))
    scoped["__import__"] = _redirecting_import(builtins.__import__)
    return scoped


_MODULE_CACHE: dict[tuple[str, str], types.ModuleType] = {}


def load_game_module(info: GameInfo, *, fresh: bool = False) -> types.ModuleType:
    """Execute the game file once (cached by path and content hash); ``fresh`` executes it again
    into a new, uncached module (new classes and module-level templates)."""
    reason = unloadable_reason(info)
    if reason is not None:
        raise GameNotFoundError(reason)
    code = info.source.read_bytes()
    key = (str(info.source.resolve()), hashlib.sha256(code).hexdigest())
    if not fresh and key in _MODULE_CACHE:
        return _MODULE_CACHE[key]
    importlib.import_module(_ENGINE_PACKAGE + ".enums")  # make sure submodules exist before the game imports them
    module = types.ModuleType(f"arc_agi_3.{info.game_id}")
    module.__file__ = str(info.source)
    module.__dict__["__builtins__"] = _game_builtins()
    modules_before, path_before = dict(sys.modules), list(sys.path)
    try:
        with time_limited("executing the game file"):
            exec(compile(code, str(info.source), "exec"), module.__dict__)
    except SystemExit as err:  # the file cannot be loaded; it must not end the command that loads it (`qualify all`)
        raise GameUnloadableError(f"{info.source}: its top level called exit ({describe_game_error(err, info)})") \
            from err
    except StepTimeout as err:  # a top level that never ends (a loop, a wait) must not hang the command either
        raise GameUnloadableError(f"{info.source}: {describe_game_error(err, info)}") from err
    finally:
        _undo_import_side_effects(modules_before, path_before, info.directory)
    if not fresh:
        _MODULE_CACHE[key] = module
    return module


def _undo_import_side_effects(modules_before: dict[str, Any], path_before: list[str], game_dir: Path) -> None:
    """What a game file's top level did to the interpreter's import state stays with that game: ``sys.path`` is
    put back, modules it replaced or removed in ``sys.modules`` (``engine.enums`` included) are restored, and
    modules it imported from its own folder are dropped from the table (the game keeps its references), so a
    game loaded later neither sees them nor imports its own modules from another game's folder."""
    sys.path[:] = path_before
    for name, module in modules_before.items():
        if sys.modules.get(name) is not module:
            sys.modules[name] = module
    root = game_dir.resolve()
    for name in [name for name in sys.modules if name not in modules_before]:
        filename = getattr(sys.modules[name], "__file__", None)
        if filename and Path(filename).resolve().is_relative_to(root):
            del sys.modules[name]


def describe_game_error(err: BaseException, info: GameInfo | None = None) -> str:
    """``"RuntimeError: boom (at <game file>:9)"``: an exception raised by game code, with the line of the game
    file that raised it when the traceback passes through it (what a person fixing the game needs)."""
    text = f"{type(err).__name__}: {err}"
    if isinstance(err, GameNotFoundError) or getattr(err, "located", False):  # already says which file and why
        return text
    if isinstance(err, SyntaxError) and err.filename:
        return f"{text} (at {err.filename}:{err.lineno})" if str(err.filename) not in text else text
    source = str(info.source) if info is not None and info.source is not None else None
    where = None
    tb = err.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if source is None or filename == source:
            where = f"{filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return f"{text} (at {where})" if where else text


def load_game_class(info: GameInfo, *, fresh: bool = False) -> type:
    module = load_game_module(info, fresh=fresh)
    cls = getattr(module, info.class_name, None)
    if not isinstance(cls, type):
        raise GameNotFoundError(f"class {info.class_name} not found in {info.source}")
    return cls
