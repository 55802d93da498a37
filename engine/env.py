"""A small Gymnasium-style environment over one game: ``make``, ``reset``, ``step``, hashing, branching.

    env = engine.make("ls20", environments_dir="path/to/environment_files")
    first = env.reset()                       # the RESET the toolkit's make() sends
    result = env.step(GameAction.ACTION6, {"x": 10, "y": 20})
    key = env.state_hash()
    saved = env.snapshot(); env.step(1); env.restore(saved)

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
import inspect
import random
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .base_game import FRAMES_ALL, FRAMES_LAST, FRAMES_NONE, ARCBaseGame
from .enums import ActionInput, FrameData, FrameDataRaw, GameAction
from .loader import GameInfo, load_game_class, resolve_game
from .statehash import encode_state, state_digest

__all__ = ["GameEnv", "Snapshot", "make", "FRAME_MODES", "to_action_input"]

FRAME_MODES = (FRAMES_ALL, FRAMES_LAST, FRAMES_NONE)


@dataclass(frozen=True)
class Snapshot:
    """An opaque saved environment state; restore it any number of times."""

    game_state: dict[str, Any]
    last_response: Any
    steps: int
    python_rng: Any
    numpy_rng: Any


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
        self.game: ARCBaseGame = self._new_game()
        self.last_response: FrameData | FrameDataRaw | None = None
        self.steps = 0  # perform_action calls so far, RESETs included

    def _new_game(self) -> ARCBaseGame:
        cls = self._game_class
        kwargs: dict[str, Any] = {}
        try:
            if "seed" in inspect.signature(cls).parameters:  # the toolkit passes seed only if accepted
                kwargs["seed"] = self._seed
        except (TypeError, ValueError):
            pass
        game = cls(**kwargs)
        if self.only_reset_levels is not None:
            game._engine_only_reset_levels = bool(self.only_reset_levels)
        return game

    # ------------------------------------------------------------------ acting
    def reset(self, *, frames: str | None = None) -> FrameData | FrameDataRaw:
        """Send RESET (level or full reset by the engine's rule, as in the toolkit)."""
        return self.step(GameAction.RESET, frames=frames)

    def step(
        self,
        action: Any,
        data: Mapping[str, Any] | None = None,
        *,
        reasoning: Any = None,
        frames: str | None = None,
    ) -> FrameData | FrameDataRaw:
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

    @property
    def state(self) -> Any:
        return self.game._state

    @property
    def levels_completed(self) -> int:
        return self.game._score

    # ------------------------------------------------------------------ identity and branching
    def state_hash(self) -> str:
        """sha256 hex of the current scene plus hidden state (see ``engine.statehash``)."""
        return state_digest(self.game)

    def state_bytes(self) -> bytes:
        """The canonical hidden-state serialization that ``state_hash`` covers (for debugging)."""
        return encode_state(self.game)

    def _shared(self) -> dict[int, Any]:
        """deepcopy memo entries for objects shared (not copied) between snapshots and the game."""
        game = self.game
        memo: dict[int, Any] = {id(game): game}
        clean = game.__dict__.get("_engine_clean_levels")
        if isinstance(clean, list):
            memo[id(clean)] = clean
            for level in clean:
                memo[id(level)] = level
        return memo

    def snapshot(self) -> Snapshot:
        """Save the game (levels, camera, interfaces, game attributes) and Python/numpy global RNGs.

        The pristine level templates (``_clean_levels``) are shared, not copied: the engine only
        ever clones them.  Global RNG states are saved because some games draw from them.
        """
        state = copy.deepcopy(self.game.__dict__, self._shared())
        return Snapshot(
            game_state=state,
            last_response=self.last_response,
            steps=self.steps,
            python_rng=random.getstate(),
            numpy_rng=np.random.get_state(),
        )

    def restore(self, snapshot: Snapshot, *, restore_global_rng: bool = True) -> None:
        state = copy.deepcopy(snapshot.game_state, self._shared())
        game_state = self.game.__dict__
        game_state.clear()
        game_state.update(state)
        self.last_response = snapshot.last_response
        self.steps = snapshot.steps
        if restore_global_rng:
            random.setstate(snapshot.python_rng)
            np.random.set_state(snapshot.numpy_rng)

    def clone(self) -> GameEnv:
        """An independent environment in the same state (same game class, new guid)."""
        other = object.__new__(GameEnv)
        other.__dict__.update(self.__dict__)
        other.guid = str(uuid.uuid4())
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
