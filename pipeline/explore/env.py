"""A snapshot-able session over one game, for the explorer and qualification.

Games are found and executed by ``engine.loader`` (recursive ``metadata.json`` search, ``from
arcengine import ...`` resolved to our ``engine`` without touching ``sys.modules['arcengine']``).
This module wraps one game instance in a :class:`Session` with what graph exploration needs beyond
``engine.make``: starting a *level* in isolation, cheap snapshots, and a choice of node identity.

Node identity (``identity=``):

* ``"frame"`` (default, the paper's rule and the reference graph tooling's): sha256 of the last
  frame's bytes, the game's ``_get_hidden_state()`` (zeros in the base class; a game whose frame
  does not show everything it remembers overrides it), the game state and a level-won flag. Two
  trajectories that look the same merge. Engine bookkeeping that games rarely show
  (``_action_count``) and undo histories are *not* part of it.
* ``"engine"``: ``engine.statehash.state_digest`` (scene plus a canonical serialisation of every
  game attribute, ``_action_count`` and undo stacks included) plus the won flag. Sound for any
  game, but since ``_action_count`` grows with every action no two trajectories of different
  length ever merge: use it to check a game's frame identity on small budgets, not to measure
  state spaces.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine import ActionInput, GameAction, GameState
from engine.loader import GameInfo, GameNotFoundError, find_games, load_game_module, resolve_game
from engine.statehash import state_digest

__all__ = [
    "GameInfo",
    "GameNotFoundError",
    "IDENTITIES",
    "Session",
    "StepResult",
    "discover",
    "resolve",
    "load_game_class",
    "open_session",
]

IDENTITIES = ("frame", "engine")


def discover(environments_dir: Path | str) -> list[GameInfo]:
    """Every loadable game under ``environments_dir`` (recursive ``metadata.json`` search)."""
    return [info for info in find_games(environments_dir) if info.source is not None]


def resolve(game: str, environments_dir: Path | str) -> GameInfo:
    """``game`` is a full id (``pv63-1a2b3c4d``) or a code (``pv63``: latest ``date_downloaded``)."""
    info = resolve_game(game, environments_dir)
    if info.source is None:
        raise GameNotFoundError(f"{info.game_id}: no {info.class_name.lower()}.py in {info.directory}")
    return info


def load_game_class(info: GameInfo) -> type:
    """The game class, its module registered under its own name so instances can be pickled.

    ``engine.loader`` executes the file as module ``arc_agi_3.<game_id>`` without registering it;
    pickle needs to find the class by module and name, so we add that one entry (never
    ``arcengine``). If another file with the same game id is registered later, pickling instances
    of this class fails and snapshots fall back to ``copy.deepcopy``.
    """
    module = load_game_module(info)
    cls = getattr(module, info.class_name, None)
    if not isinstance(cls, type):
        raise GameNotFoundError(f"class {info.class_name} not found in {info.source}")
    sys.modules.setdefault("arc_agi_3", type(sys)("arc_agi_3"))
    sys.modules[module.__name__] = module
    return cls


def _construct(cls: type, seed: int = 0) -> Any:
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins
        params = {}
    return cls(seed=seed) if "seed" in params else cls()


@dataclass
class StepResult:
    """What one action did, reduced to what the explorer and the checks need."""

    frames: list[np.ndarray]
    state: GameState
    levels_completed: int
    level_index: int
    available_actions: list[int]
    full_reset: bool

    @property
    def frame(self) -> np.ndarray | None:
        return self.frames[-1] if self.frames else None


def _raw_action(action_id: int, data: dict[str, int] | None = None) -> ActionInput:
    return ActionInput(id=GameAction.from_id(action_id), data=dict(data or {}))


class Session:
    """One live game instance positioned at the start of a level, with snapshot/restore.

    ``start(level)`` rebuilds the game, selects the level and performs a *level* RESET (as with
    ``ONLY_RESET_LEVELS=true``), so every level starts from exactly the state a player sees after
    restarting it; ``levels_completed`` is then 0 and a level win shows up as it becoming 1 (or as
    ``WIN`` on the last level).
    """

    def __init__(self, src: GameInfo, cls: type | None = None, identity: str = "frame") -> None:
        if identity not in IDENTITIES:
            raise ValueError(f"identity must be one of {IDENTITIES}, got {identity!r}")
        self.src = src
        self.identity = identity
        self.cls = cls or load_game_class(src)
        self.game: Any = None
        self.level = 0
        self.n_levels = 0
        self.last: StepResult | None = None
        self._picklable: bool | None = None
        self._shared_levels: dict[int, Any] = {}
        self._shared_clean: Any = None
        self._shared_digest = b""
        self._actions: dict[tuple[int, int | None, int | None], ActionInput] = {}

    # ------------------------------------------------------------------ lifecycle
    def new_game(self) -> Any:
        return _construct(self.cls)

    def start(self, level: int = 0) -> StepResult:
        game = self.new_game()
        self.n_levels = len(game._levels)
        if not 0 <= level < self.n_levels:
            raise IndexError(f"{self.src.game_id} has {self.n_levels} levels; level index {level} is out of range")
        game.set_level(level)
        previous = os.environ.get("ONLY_RESET_LEVELS")
        os.environ["ONLY_RESET_LEVELS"] = "true"
        try:
            result = game.perform_action(_raw_action(0), raw=True)
        finally:
            if previous is None:
                os.environ.pop("ONLY_RESET_LEVELS", None)
            else:
                os.environ["ONLY_RESET_LEVELS"] = previous
        self.game = game
        self.level = level
        self.last = self._wrap(result)
        self._share_static_objects()
        return self.last

    def _share_static_objects(self) -> None:
        """Objects every snapshot of this level shares instead of copying.

        ``_clean_levels`` (pristine clones used for resets, read but never written by games) and the
        ``Level`` objects of levels other than the current one and the next (a win moves to the
        next level, whose ``on_set_level`` may mutate it). Snapshots detach them before pickling
        and re-attach them on restore; ``shared_state_intact()`` checks the assumption afterwards.
        """
        game = self.game
        keep = (self.level, self.level + 1)
        self._shared_levels = {j: lvl for j, lvl in enumerate(game._levels) if j not in keep}
        self._shared_clean = game._clean_levels
        self._shared_digest = self._digest_shared()

    def _digest_shared(self) -> bytes:
        try:
            payload = (self._shared_clean, sorted(self._shared_levels.items(), key=lambda kv: kv[0]))
            return hashlib.sha256(pickle.dumps(payload, protocol=4)).digest()
        except Exception:  # noqa: BLE001 - unpicklable games use deepcopy snapshots
            return b""

    def shared_state_intact(self) -> bool:
        """False if a game mutated an object the snapshots share (see ``_share_static_objects``)."""
        if self._shared_clean is None:
            return True
        same_objects = self.game._clean_levels is self._shared_clean and all(
            j < len(self.game._levels) and self.game._levels[j] is lvl for j, lvl in self._shared_levels.items()
        )
        return same_objects and self._digest_shared() == self._shared_digest

    def _wrap(self, result: Any) -> StepResult:
        frames = [np.asarray(f) for f in result.frame] if result.frame else []
        return StepResult(
            frames=frames,
            state=GameState(result.state),
            levels_completed=int(result.levels_completed),
            level_index=int(self.game._current_level_index),
            available_actions=[int(a) for a in result.available_actions],
            full_reset=bool(result.full_reset),
        )

    def action_input(self, action_id: int, data: dict[str, int] | None = None) -> ActionInput:
        """A cached ``ActionInput`` per (id, x, y); games only read the action they are given."""
        key = (action_id, data.get("x") if data else None, data.get("y") if data else None)
        found = self._actions.get(key)
        if found is None:
            found = self._actions[key] = _raw_action(action_id, data)
        return found

    def step(self, action_id: int, data: dict[str, int] | None = None) -> StepResult:
        result = self.game.perform_action(self.action_input(action_id, data), raw=True)
        wrapped = self._wrap(result)
        if wrapped.frames:
            self.last = wrapped
        else:  # a rejected action after WIN/GAME_OVER: keep the last real observation
            self.last = StepResult(self.last.frames if self.last else [], wrapped.state, self.last.levels_completed
                                   if self.last else 0, wrapped.level_index, wrapped.available_actions, False)
        return wrapped

    # ------------------------------------------------------------------ state
    @property
    def available_actions(self) -> list[int]:
        return [int(a) for a in self.game._available_actions]

    @property
    def camera(self) -> Any:
        return self.game.camera

    def hidden_state(self) -> np.ndarray:
        hidden = self.game._get_hidden_state()
        return np.asarray(hidden if hidden is not None else np.zeros((0,), dtype=np.int8))

    def state_key(self) -> bytes:
        """32-byte node identity of the current state (see module docstring)."""
        last = self.last
        if last is None or last.frame is None:
            raise RuntimeError("no observation yet: call start() first")
        if self.identity == "engine":
            h = hashlib.sha256(state_digest(self.game).encode())
            h.update(b"W" if self.won(last) else b"-")
            return h.digest()
        frame = np.ascontiguousarray(last.frame, dtype=np.int8)
        hidden = self.hidden_state()
        h = hashlib.sha256(frame.tobytes())
        h.update(str(hidden.shape).encode())
        h.update(np.ascontiguousarray(hidden).tobytes())
        h.update(str(last.state.value).encode())
        h.update(b"W" if self.won(last) else b"-")
        return h.digest()

    def won(self, result: StepResult | None = None) -> bool:
        """The level was completed (``levels_completed`` went 0 -> 1, or WIN on the last level)."""
        result = result or self.last
        return result is not None and (result.state == GameState.WIN or result.levels_completed > 0)

    def lost(self, result: StepResult | None = None) -> bool:
        result = result or self.last
        return result is not None and result.state == GameState.GAME_OVER

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> Any:
        """An opaque copy of the game object (shared static levels detached, see above).

        Pickle (C implementation) when the game allows it, else ``copy.deepcopy``. The last
        observation is not part of a snapshot: the explorer keeps what it needs per node.
        """
        game = self.game
        clean, levels = game._clean_levels, game._levels
        detached = [None if j in self._shared_levels and lvl is self._shared_levels[j] else lvl
                    for j, lvl in enumerate(levels)]
        game._clean_levels, game._levels = None, detached
        try:
            if self._picklable is not False:
                try:
                    blob = pickle.dumps(game, protocol=pickle.HIGHEST_PROTOCOL)
                    self._picklable = True
                    return ("p", blob)
                except Exception:  # noqa: BLE001 - any pickling failure falls back to deepcopy
                    self._picklable = False
            import copy

            return ("c", copy.deepcopy(game))
        finally:
            game._clean_levels, game._levels = clean, levels

    def restore(self, snap: Any) -> None:
        kind, payload = snap
        if kind == "p":
            game = pickle.loads(payload)
        else:
            import copy

            game = copy.deepcopy(payload)
        game._clean_levels = self._shared_clean
        game._levels = [self._shared_levels[j] if lvl is None else lvl for j, lvl in enumerate(game._levels)]
        self.game = game


def open_session(game: str, environments_dir: Path | str, identity: str = "frame") -> Session:
    return Session(resolve(game, environments_dir), identity=identity)
