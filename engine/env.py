"""A small Gymnasium-style environment over one game: ``make``, ``reset``, ``step``, hashing, branching.

    env = engine.make("ls20", environments_dir="path/to/environment_files")
    first = env.reset()                       # the RESET the toolkit's make() sends
    result = env.step(GameAction.ACTION6, {"x": 10, "y": 20})
    key = env.state_hash()
    saved = env.snapshot(); env.step(1); env.restore(saved)
    env.restore(saved, reuse_render_caches=True)  # the camera starts from the outgoing game's caches
    kept = env.detach(); env.restore(saved)   # keep the running game itself (no copy); restore it once
    env.start_level(2)                        # a new game at level 3, restarted (a level reset)

Responses are what the game's ``perform_action(..., raw=True)`` returns (``FrameDataRaw`` with numpy
frames; a ``FrameData`` with no frames for actions sent after WIN/GAME_OVER), with ``game_id`` set to
the versioned id and ``guid`` to the environment's id, as the toolkit does.

Frame modes (``frames=`` on ``make`` or per ``step``):

* ``"all"``  - every frame of the action, exactly as the reference returns them;
* ``"last"`` - the camera still renders every frame (so interfaces and camera overrides run exactly
  as often as in the reference), only the final frame is kept;
* ``"none"`` - nothing is composed or returned.  Interfaces are still called once per frame, in
  order, on a scratch canvas (letterbox colour only), so their side effects on the game (queued
  animations, counters) happen as in the reference; a camera subclass overriding ``render`` is
  still called.  Exact for every game whose interfaces do not read the pixels they are given and
  whose ``_raw_render`` overrides have no side effects (all known games); use ``"last"`` otherwise.

``only_reset_levels``: ``None`` honours the ``ONLY_RESET_LEVELS`` environment variable at every RESET
like the reference; ``True``/``False`` override it for this environment only.
"""

from __future__ import annotations

import copy
import copyreg
import hashlib
import inspect
import io
import pickle
import random
import sys
import uuid
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import is_, itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from ._attrs import read_only
from ._copying import copies_by_default, copy_state
from .base_game import FRAMES_ALL, FRAMES_LAST, FRAMES_NONE, ARCBaseGame
from .enums import ActionInput, FrameData, FrameDataRaw, GameAction
from .level import Level, _LazyLevel
from .loader import GameInfo, load_game_class, resolve_game
from .statehash import encode_state, state_digest
from .watchdog import time_limited

__all__ = ["GameEnv", "Snapshot", "make", "FRAME_MODES", "to_action_input"]

FRAME_MODES = (FRAMES_ALL, FRAMES_LAST, FRAMES_NONE)


@dataclass(frozen=True)
class Snapshot:
    """An opaque saved environment state; restore it any number of times."""

    # ("pickle", bytes), ("copy", a detached deep copy of the game) or ("live", [the game itself])
    # from ``GameEnv.detach`` (emptied by its one restore)
    game: tuple[str, Any]
    clean_levels: Any  # the pristine level templates, shared (the engine only ever clones them)
    levels: dict[int, tuple[str, Any]]  # level index -> ("shared", Level) or ("lazy", template)
    last_response: Any
    steps: int
    python_rng: Any  # None when the snapshot was taken without the global RNGs
    numpy_rng: Any


# ---------------------------------------------------------------------- pickling game objects
# Game classes live in a module that ``engine.loader`` never registers in ``sys.modules``, so
# pickle cannot name them.  Snapshots pickle instances of game-defined classes through a
# dispatch table that names the class by a token instead; the token is looked up here on load.
_GAME_CLASSES: weakref.WeakValueDictionary[str, type] = weakref.WeakValueDictionary()


def _new_game_object(token: str, *args: Any) -> Any:
    cls = _GAME_CLASSES[token]
    return cls.__new__(cls, *args)


def _call_game_class(token: str, args: tuple) -> Any:
    return _GAME_CLASSES[token](*args)


def _game_reducer(token: str, cls: type) -> Any:
    def reduce(obj: Any) -> Any:
        value = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
        if isinstance(value, str):
            return value
        func, args, *rest = value
        if func is copyreg.__newobj__ and args and args[0] is cls:
            return (_new_game_object, (token, *args[1:]), *rest)
        if func is cls:  # e.g. members of an Enum the game defines
            return (_call_game_class, (token, tuple(args)), *rest)
        return value

    return reduce


def _game_dispatch_table(game_class: type) -> dict[type, Any]:
    """copyreg's table plus a reducer for every class defined in the game's module (when pickle
    cannot import that module, as for every game ``engine.loader`` executed)."""
    table = dict(copyreg.dispatch_table)
    module = sys.modules.get(game_class.__module__)
    if module is not None and getattr(module, game_class.__qualname__, None) is game_class:
        return table  # an importable module: pickle names its classes itself
    namespace: dict[str, Any] = {}
    for value in vars(game_class).values():  # the module's namespace, from a method's globals
        globals_ = getattr(value, "__globals__", None)
        if isinstance(globals_, dict) and globals_.get("__name__") == game_class.__module__:
            namespace = globals_
            break
    classes = [value for value in namespace.values() if isinstance(value, type)] + [game_class]
    seen: set[int] = set()
    while classes:
        cls = classes.pop()
        if id(cls) in seen or cls.__module__ != game_class.__module__:
            continue
        seen.add(id(cls))
        token = f"{cls.__module__}@{id(cls):x}:{cls.__qualname__}"
        _GAME_CLASSES[token] = cls
        table[cls] = _game_reducer(token, cls)
        classes.extend(value for value in vars(cls).values() if isinstance(value, type))  # nested classes
    return table


def _is_pending_lazy(level: Any) -> bool:
    """A lazily cloned level nothing else refers to and nobody touched (see ``Level._engine_lazy_clone``)."""
    return (
        type(level) is _LazyLevel
        and level._engine_lazy
        and len(vars(level)) == 2  # only _engine_lazy and _engine_source
        # in ``snapshot``: the game's levels list, the loop variable, this argument and getrefcount's
        # own (CPython); one more means the game keeps the level somewhere else too
        and sys.getrefcount(level) <= 4
    )


def _deepcopy_game(game: Any, memo: dict[int, Any] | None = None) -> Any:
    """``copy.deepcopy(game, memo)`` through ``engine._copying.deep_copy`` (its fast paths for plain
    data and engine objects); games that customise copying take ``copy.deepcopy`` itself."""
    memo = {} if memo is None else memo
    cls = type(game)
    state = getattr(game, "__dict__", None)
    if type(state) is not dict or not copies_by_default(cls):
        return copy.deepcopy(game, memo)
    new = object.__new__(cls)
    memo[id(game)] = new
    memo.setdefault(id(memo), []).append(game)  # copy.deepcopy's keep-alive list
    new.__dict__.update(copy_state(state, memo))
    return new


class _CopyMemo:
    """The memo entries ``GameEnv._copy_game`` starts every copy from, made once per (template
    list, shared-level declaration): a branching search copies games with the same ones again and
    again.  ``templates_only``: the template list and the templates (plain Levels: ``templates ==
    clean`` checks the list is unchanged by identity); ``with_shared``: those and the declared levels,
    for games that have every declared level in its place (``in_place``)."""

    def __init__(self, clean: Any, shared: dict[int, Level]) -> None:
        self.clean = clean
        self.shared = shared
        self.templates = list(clean) if isinstance(clean, list) else None
        entries: dict[int, Any] = {}
        if isinstance(clean, list):
            entries[id(clean)] = clean
            entries.update((id(template), template) for template in clean)
        self.templates_only = entries
        self.with_shared = {**entries, **{id(level): level for level in shared.values()}}
        self._end = max(shared, default=-1) + 1
        self._declared = tuple(shared.values())
        self._at = itemgetter(*shared) if len(shared) > 1 else None  # a tuple of the levels there
        self._unshared: tuple[int, list[int]] = (-1, [])

    def in_place(self, levels: list) -> bool:
        return self._at is not None and len(levels) >= self._end and all(map(is_, self._at(levels), self._declared))

    def unshared(self, count: int) -> list[int]:
        """The indices below ``count`` that are not declared shared."""
        if self._unshared[0] != count:
            self._unshared = (count, [j for j in range(count) if j not in self.shared])
        return self._unshared[1]


def _move_render_caches(source: Any, target: Any) -> None:
    """Move the camera render caches (``Camera._engine_render_caches``) from game ``source`` to
    game ``target``, two states of the same game.  The camera validates these caches against the
    sprites it is given on every render (sprite identities, change stamps, pixel bytes, camera
    position and colours: the checks that make them correct whatever a game does between two
    frames), so a cache built for another game object only costs the redraw of what differs.
    Copies and pickles drop them; moving (not sharing) keeps one owner per cache."""
    old_camera = getattr(source, "__dict__", {}).get("_camera")
    new_camera = getattr(target, "__dict__", {}).get("_camera")
    if old_camera is None or new_camera is None or old_camera is new_camera or type(old_camera) is not type(new_camera):
        return
    old_state, new_state = old_camera.__dict__, new_camera.__dict__
    for key in getattr(type(old_camera), "_engine_render_caches", ()):
        if old_state.get(key) is not None and new_state.get(key) is None:
            new_state[key] = old_state.pop(key)


def to_action_input(action: Any, data: Mapping[str, Any] | None = None, reasoning: Any = None) -> ActionInput:
    """An ActionInput from a GameAction, an int id, a name (``"ACTION1"``) or an ActionInput."""
    if isinstance(action, ActionInput):
        return action
    if isinstance(action, GameAction):
        member = action
    elif isinstance(action, str):
        member = GameAction.from_name(action.strip())
    elif isinstance(action, (int, np.integer)) and not isinstance(action, bool):
        member = GameAction.from_id(int(action))
    else:
        raise TypeError(f"cannot interpret {action!r} as an action")
    return ActionInput(id=member, data=dict(data or {}), reasoning=reasoning)


class GameEnv:
    """One running game instance (see the module docstring)."""

    def __init__(
        self,
        info: GameInfo,
        *,
        only_reset_levels: bool | None = None,
        seed: int = 0,
        frames: str = FRAMES_ALL,
        guid: str | None = None,
        game_class: type | None = None,
    ) -> None:
        if frames not in FRAME_MODES:
            raise ValueError(f"frames must be one of {FRAME_MODES}, got {frames!r}")
        self.info = info
        self.game_id = info.game_id
        self.frames = frames
        self.guid = guid if guid is not None else str(uuid.uuid4())
        self.only_reset_levels = only_reset_levels
        self._game_class = game_class if game_class is not None else load_game_class(info)
        self._seed = seed
        self._dispatch: dict[type, Any] | None = None  # pickling table for snapshots, built on first use
        self._pickles = True  # False once pickling this game failed: snapshots deep-copy instead
        self._shared_levels: dict[int, Level] = {}
        self._shared_clean: Any = None
        self._shared_digest = b""
        self._copy_memo: _CopyMemo | None = None  # see _copy_game
        self.game: ARCBaseGame = self.new_game()
        self.last_response: FrameData | FrameDataRaw | None = None
        self.steps = 0  # perform_action calls so far, RESETs included
        self.detached = False  # True after ``detach()`` until the next restore or start_level

    def new_game(self) -> ARCBaseGame:
        """A freshly constructed instance of the game (with this environment's reset rule); the
        environment keeps playing its own ``game``."""
        cls = self._game_class
        kwargs: dict[str, Any] = {}
        try:
            if "seed" in inspect.signature(cls).parameters:  # the toolkit passes seed only if accepted
                kwargs["seed"] = self._seed
        except (TypeError, ValueError):
            pass
        with time_limited("constructing the game"):  # its __init__ is game code too: a loop there must not hang us
            game = cls(**kwargs)
        if self.only_reset_levels is not None:
            game._engine_only_reset_levels = bool(self.only_reset_levels)
        return game

    # ------------------------------------------------------------------ acting
    def reset(self, *, frames: str | None = None) -> FrameData | FrameDataRaw:
        """Send RESET (level or full reset by the engine's rule, as in the toolkit)."""
        return self.step(GameAction.RESET, frames=frames)

    def start_level(self, level: int, *, frames: str | None = None) -> FrameData | FrameDataRaw:
        """Play ``level`` (0-based) from its start on a new game instance: ``set_level(level)`` then a
        RESET that is a *level* reset whatever ``only_reset_levels`` says (a full reset would leave
        the level), i.e. exactly the state a player sees after restarting the level.  The response
        has ``levels_completed`` 0; winning the level makes it 1 (or WIN on the last level)."""
        game = self.new_game()
        count = len(game._levels)
        if not 0 <= level < count:
            raise IndexError(f"{self.game_id} has {count} levels; level index {level} is out of range")
        game.set_level(level)
        self.game = game
        self.detached = False
        self._shared_levels, self._shared_clean, self._shared_digest = {}, None, b""
        self.steps = 0
        game._engine_only_reset_levels = True  # this RESET only
        try:
            return self.step(GameAction.RESET, frames=frames)
        finally:
            if self.only_reset_levels is None:
                del game._engine_only_reset_levels  # back to the class default: honour the variable
            else:
                game._engine_only_reset_levels = bool(self.only_reset_levels)

    def step(
        self,
        action: Any,
        data: Mapping[str, Any] | None = None,
        *,
        reasoning: Any = None,
        frames: str | None = None,
    ) -> FrameData | FrameDataRaw:
        if self.detached:
            raise RuntimeError("the running game was handed out by detach(); restore a snapshot first")
        mode = self.frames if frames is None else frames
        if mode not in FRAME_MODES:
            raise ValueError(f"frames must be one of {FRAME_MODES}, got {mode!r}")
        action_input = to_action_input(action, data, reasoning)
        response = self.game._engine_perform(action_input, True, mode)
        response.game_id = self.game_id
        response.guid = self.guid
        self.last_response = response
        self.steps += 1
        return response

    @property
    def available_actions(self) -> list[int]:
        return list(self.game._available_actions)

    @property
    def frame(self) -> np.ndarray | None:
        """The last frame of the last response (None if it had none)."""
        frames = getattr(self.last_response, "frame", None)
        return frames[-1] if frames else None

    state = read_only("game._state", "GameState")
    levels_completed = read_only("game._score", "int")

    # ------------------------------------------------------------------ identity and branching
    def state_hash(self) -> str:
        """sha256 hex of the current scene plus hidden state (see ``engine.statehash``)."""
        return state_digest(self.game)

    def state_bytes(self) -> bytes:
        """The canonical hidden-state serialization that ``state_hash`` covers (for debugging)."""
        return encode_state(self.game)

    def share_levels(self, indices: Iterable[int]) -> None:
        """Let snapshots share the current ``Level`` objects at ``indices`` instead of copying them.

        The caller promises that play from here on never changes them (an explorer confined to one
        level and the next, say); ``shared_levels_intact()`` checks the promise afterwards.  The
        next ``start_level`` forgets the declaration.
        """
        levels = self.game._levels
        self._shared_levels = {j: levels[j] for j in indices if 0 <= j < len(levels)}
        self._shared_clean = self.game._engine_clean_levels
        self._shared_digest = self._digest_shared()

    def _digest_shared(self) -> bytes:
        try:
            payload = (self._shared_clean, sorted(self._shared_levels.items(), key=lambda item: item[0]))
            return hashlib.sha256(self._pickle(payload)).digest()
        except Exception:  # noqa: BLE001 - unpicklable games: no digest, only identities are checked
            return b""

    def shared_levels_intact(self) -> bool:
        """False if play replaced or changed a level declared with ``share_levels`` (or the templates)."""
        if not self._shared_levels and self._shared_clean is None:
            return True
        game, levels = self.game, self.game._levels
        same_objects = game._engine_clean_levels is self._shared_clean and all(
            j < len(levels) and levels[j] is level for j, level in self._shared_levels.items()
        )
        return same_objects and self._digest_shared() == self._shared_digest

    def _pickle(self, obj: Any) -> bytes:
        if self._dispatch is None:
            self._dispatch = _game_dispatch_table(self._game_class)
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.dispatch_table = self._dispatch
        pickler.dump(obj)
        return buffer.getvalue()

    def _save_game(self, game: ARCBaseGame, *, pickled: bool) -> tuple[tuple[str, Any], dict[int, tuple[str, Any]]]:
        """``game`` saved as ("pickle", bytes) or ("copy", a deep copy), without the levels that
        snapshots share (see ``snapshot``), and those levels as index -> ("shared", Level) or
        ("lazy", template)."""
        clean, levels = game._engine_clean_levels, game._levels
        held: dict[int, tuple[str, Any]] = {}
        detached = levels
        if isinstance(levels, list):
            shared = self._shared_levels
            for j in range(len(levels)):
                level = levels[j]
                if shared.get(j) is level:
                    held[j] = ("shared", level)
                elif _is_pending_lazy(level):
                    held[j] = ("lazy", level._engine_source)
            if held:
                detached = [None if j in held else level for j, level in enumerate(levels)]
        game._engine_clean_levels, game._levels = None, detached
        try:
            saved: tuple[str, Any] | None = None
            if pickled:
                try:
                    saved = ("pickle", self._pickle(game))
                except Exception:  # noqa: BLE001 - any pickling failure falls back to deepcopy
                    self._pickles = False
            if saved is None:
                saved = ("copy", _deepcopy_game(game))
        finally:
            game._engine_clean_levels, game._levels = clean, levels
        return saved, held

    def _copy_game(self, game: ARCBaseGame) -> ARCBaseGame:
        """A deep copy of ``game`` sharing what snapshots share (see ``snapshot``): the templates,
        the levels declared shared, and pending lazy clones (as new lazy clones of the same
        templates), entered in the copy's memo as their own copies."""
        clean, levels = game._engine_clean_levels, game._levels
        shared = self._shared_levels
        entries = self._copy_memo
        if entries is None or entries.clean is not clean or entries.shared is not shared or entries.templates != clean:
            entries = self._copy_memo = _CopyMemo(clean, shared)
        if isinstance(levels, list) and entries.in_place(levels):
            memo = entries.with_shared.copy()
            indices = entries.unshared(len(levels))
        else:
            memo = entries.templates_only.copy()
            indices = range(len(levels)) if isinstance(levels, list) else ()
        for j in indices:
            level = levels[j]
            if shared.get(j) is level:
                memo[id(level)] = level
            elif _is_pending_lazy(level):
                memo[id(level)] = Level._engine_lazy_clone(level._engine_source)
        return _deepcopy_game(game, memo)

    def snapshot(self, *, global_rng: bool = True) -> Snapshot:
        """Save the game (levels, camera, interfaces, every game attribute) and, unless
        ``global_rng=False`` (saving them costs about as much as a small game), the Python/numpy
        global RNGs (some games draw from them).

        Not copied but shared: the pristine level templates (the engine only ever clones them),
        lazily cloned levels nobody has touched yet (restored as new lazy clones of the same
        template) and levels declared with ``share_levels``.  The game is pickled when possible
        (fast), deep-copied otherwise.
        """
        saved, held = self._save_game(self.game, pickled=self._pickles)
        return Snapshot(
            game=saved,
            clean_levels=self.game._engine_clean_levels,
            levels=held,
            last_response=self.last_response,
            steps=self.steps,
            python_rng=random.getstate() if global_rng else None,
            numpy_rng=np.random.get_state() if global_rng else None,
        )

    def restore(
        self,
        snapshot: Snapshot,
        *,
        restore_global_rng: bool = True,
        reuse_render_caches: bool = False,
        keep: bool = False,
    ) -> None:
        """Return to ``snapshot``.  ``game`` becomes a new object (references to the old one keep
        the old state).  The global RNGs are restored too if the snapshot saved them, unless
        ``restore_global_rng=False``.

        ``reuse_render_caches=True`` moves the outgoing game's camera render caches to the restored
        game (see ``_move_render_caches``): the first frame after the restore then redraws only what
        differs from the outgoing game's last frame instead of composing the scene from scratch.
        Frames are the same either way; the outgoing game keeps its state but renders cold.

        ``keep=True`` on a snapshot from ``detach`` restores a deep copy of the detached game (sharing
        what ``snapshot`` shares) and leaves the snapshot restorable: a branching search steps copies
        of a state it holds and hands the game itself to its last branch, with no snapshot taken."""
        kind, payload = snapshot.game
        held = snapshot.levels
        if kind == "live":
            if not payload:
                raise RuntimeError("a detached snapshot can be restored only once")
            if keep:
                game = self._copy_game(payload[0])
            else:
                game = payload.pop()
        else:
            game = pickle.loads(payload) if kind == "pickle" else _deepcopy_game(payload)
        if reuse_render_caches:
            _move_render_caches(self.game, game)
        game._engine_clean_levels = snapshot.clean_levels
        if held:
            levels = game._levels
            for j, (how, level) in held.items():
                levels[j] = level if how == "shared" else Level._engine_lazy_clone(level)
        self.game = game
        self.detached = False
        self.last_response = snapshot.last_response
        self.steps = snapshot.steps
        if restore_global_rng and snapshot.python_rng is not None:
            random.setstate(snapshot.python_rng)
            np.random.set_state(snapshot.numpy_rng)

    def detach(self) -> Snapshot:
        """The running game itself as a snapshot, without copying it (no RNGs saved): for a branching
        search that keeps a state it just reached and goes back elsewhere next.  It can be restored
        once (restoring hands the object back); until the next ``restore`` or ``start_level`` the
        environment refuses to step, since stepping would change the snapshot."""
        self.detached = True
        return Snapshot(
            game=("live", [self.game]),
            clean_levels=self.game._engine_clean_levels,
            levels={},
            last_response=self.last_response,
            steps=self.steps,
            python_rng=None,
            numpy_rng=None,
        )

    def clone(self) -> GameEnv:
        """An independent environment in the same state (same game class, new guid, nothing shared
        but the pristine level templates)."""
        other = object.__new__(GameEnv)
        other.__dict__.update(self.__dict__)
        other.guid = str(uuid.uuid4())
        other.detached = False  # the clone plays its own copy
        other._shared_levels, other._shared_clean, other._shared_digest = {}, None, b""
        other.game = object.__new__(type(self.game))
        memo = {id(self.game): other.game}
        clean = self.game.__dict__.get("_engine_clean_levels")
        if isinstance(clean, list):
            memo[id(clean)] = clean
            for level in clean:
                memo[id(level)] = level
        other.game.__dict__.update(copy.deepcopy(self.game.__dict__, memo))
        return other

    def __repr__(self) -> str:
        return f"GameEnv({self.game_id!r}, level={self.game._current_level_index}, state={self.game._state.name})"


def make(
    game_id: str,
    environments_dir: str | Path | Iterable[str | Path] | None = None,
    *,
    only_reset_levels: bool | None = None,
    seed: int = 0,
    frames: str = FRAMES_ALL,
    guid: str | None = None,
) -> GameEnv:
    """Load ``game_id`` (``"ls20"`` = latest version, ``"ls20-9607627b"`` = exact) and start it.

    ``environments_dir``: one or more directories searched for ``metadata.json`` (default: the
    repository's ``games/``).  Unlike the toolkit's ``make``, no RESET is sent: call ``reset()``.
    """
    info = resolve_game(game_id, environments_dir)
    return GameEnv(info, only_reset_levels=only_reset_levels, seed=seed, frames=frames, guid=guid)
