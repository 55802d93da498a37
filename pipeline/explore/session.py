"""A session over one game for the explorer and qualification: one level at a time, node identity.

The game runs in ``engine``'s own environment (``engine.GameEnv``: loading, level start, snapshots);
this module adds what graph exploration needs on top: a result reduced to what the explorer and the
checks read, won/lost as *level* outcomes, snapshots that share the levels exploration never
reaches, and a choice of node identity.

Node identity (``identity=``):

* ``"frame"`` (default, the paper's rule and the reference graph tooling's): sha256 of the last
  frame's bytes, the game's ``_get_hidden_state()`` (zeros in the base class; a game whose frame
  does not show everything it remembers overrides it), the game state and a level-won flag. Two
  trajectories that look the same merge. Engine bookkeeping that games rarely show
  (``_action_count``) and undo histories are *not* part of it.
* ``"engine"``: ``GameEnv.state_hash`` (scene plus a canonical serialisation of every game
  attribute, ``_action_count`` and undo stacks included) plus the won flag. Sound for any game,
  but since ``_action_count`` grows with every action no two trajectories of different length ever
  merge: use it to check a game's frame identity on small budgets, not to measure state spaces.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine import ActionInput, ARCBaseGame, GameAction, GameState
from engine.env import GameEnv, Snapshot
from engine.loader import GameInfo

__all__ = ["IDENTITIES", "Session", "StepResult", "node_key"]

IDENTITIES = ("frame", "engine")

_INT8 = np.dtype(np.int8)
# The base class's hidden state (a constant) as state_key writes it.
_BASE_HIDDEN_STATE = ARCBaseGame._get_hidden_state
_BASE_HIDDEN_BYTES = (lambda zeros: str(zeros.shape).encode() + zeros.tobytes())(np.zeros((4, 4), dtype=np.int8))
# Key bytes after the frame's for games with the base class's hidden state, by (state, won).
_BASE_TAILS: dict[tuple[GameState, bool], bytes] = {}


def _state_tail(state: GameState, won: bool) -> bytes:
    """The last key bytes: the game state's value and the level-won flag."""
    return str(state.value).encode() + (b"W" if won else b"-")


def node_key(key_bytes: bytes) -> bytes:
    """The 32-byte node identity of a state with these key bytes (``Session.key_bytes``)."""
    return hashlib.sha256(key_bytes).digest()


@dataclass(slots=True)
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


class Session:
    """One live game positioned at the start of a level (``GameEnv.start_level``), with snapshots.

    ``start(level)`` restarts the level on a new game, so ``levels_completed`` is then 0 and a level
    win shows up as it becoming 1 (or as ``WIN`` on the last level). Later RESETs follow the
    engine's rule (``only_reset_levels`` left to the ``ONLY_RESET_LEVELS`` variable, as a player's).
    """

    def __init__(self, src: GameInfo, cls: type | None = None, identity: str = "frame") -> None:
        if identity not in IDENTITIES:
            raise ValueError(f"identity must be one of {IDENTITIES}, got {identity!r}")
        self.src = src
        self.identity = identity
        self.env = GameEnv(src, game_class=cls)
        self.level = 0
        self.n_levels = len(self.env.game._levels)
        self.last: StepResult | None = None
        self._actions: dict[tuple[int, int | None, int | None], ActionInput] = {}

    @property
    def game(self) -> Any:
        return self.env.game

    # ------------------------------------------------------------------ lifecycle
    def start(self, level: int = 0) -> StepResult:
        """A new game at the start of ``level`` (0-based).

        Snapshots from here on share the ``Level`` objects of every level but this one and the next
        (a win moves to the next level, whose ``on_set_level`` may change it): exploration never
        reaches the others. ``shared_state_intact()`` checks that afterwards.
        """
        result = self.env.start_level(level)
        self.n_levels = len(self.game._levels)
        self.level = level
        self.last = self._wrap(result)
        self.env.share_levels(j for j in range(self.n_levels) if j not in (level, level + 1))
        return self.last

    def shared_state_intact(self) -> bool:
        """False if a game changed a level the snapshots share (see ``start``)."""
        return self.env.shared_levels_intact()

    def _wrap(self, result: Any) -> StepResult:
        frames = list(result.frame or ())
        for f in frames:
            if type(f) is not np.ndarray:
                frames = [np.asarray(f) for f in frames]
                break
        state = result.state
        return StepResult(
            frames,
            state if type(state) is GameState else GameState(state),
            int(result.levels_completed),
            int(self.env.game._current_level_index),
            list(map(int, result.available_actions)),  # a copy: the game's own list may change later
            bool(result.full_reset),
        )

    def action_input(self, action_id: int, data: dict[str, int] | None = None) -> ActionInput:
        """A cached ``ActionInput`` per (id, x, y); games only read the action they are given."""
        key = (action_id, data.get("x") if data else None, data.get("y") if data else None)
        found = self._actions.get(key)
        if found is None:
            found = self._actions[key] = ActionInput(id=GameAction.from_id(action_id), data=dict(data or {}))
        return found

    def step(self, action_id: int, data: dict[str, int] | None = None) -> StepResult:
        return self.play(self.action_input(action_id, data))

    def play(self, action: ActionInput) -> StepResult:
        """``step`` with a prepared input (``action_input``)."""
        wrapped = self._wrap(self.env.step(action))
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

    def key_bytes(self) -> bytes:
        """The bytes the node identity of the current state hashes (``state_key`` is their sha256,
        see the module docstring): two states with equal key bytes are one node."""
        last = self.last
        if last is None or last.frame is None:
            raise RuntimeError("no observation yet: call start() first")
        won = self.won(last)
        if self.identity == "engine":
            return self.env.state_hash().encode() + (b"W" if won else b"-")
        frame = last.frames[-1]
        if type(frame) is not np.ndarray or frame.dtype is not _INT8 or not frame.flags.c_contiguous:
            frame = np.ascontiguousarray(frame, dtype=np.int8)
        state = last.state
        if type(self.env.game)._get_hidden_state is _BASE_HIDDEN_STATE:
            tail = _BASE_TAILS.get((state, won))
            if tail is None:
                tail = _BASE_TAILS[(state, won)] = _BASE_HIDDEN_BYTES + _state_tail(state, won)
            return b"".join((frame, tail))  # the array's bytes, read in place
        hidden = self.hidden_state()
        return b"".join((frame, str(hidden.shape).encode(), np.ascontiguousarray(hidden).tobytes(),
                         _state_tail(state, won)))

    def state_key(self) -> bytes:
        """32-byte node identity of the current state (see module docstring)."""
        return node_key(self.key_bytes())

    def won(self, result: StepResult | None = None) -> bool:
        """The level was completed (``levels_completed`` went 0 -> 1, or WIN on the last level)."""
        result = result or self.last
        return result is not None and (result.state == GameState.WIN or result.levels_completed > 0)

    def lost(self, result: StepResult | None = None) -> bool:
        result = result or self.last
        return result is not None and result.state == GameState.GAME_OVER

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> Snapshot:
        """The engine's snapshot of the game, without the global RNGs (the explorer has never
        rewound them) and without the last observation (the explorer keeps what it needs per node)."""
        return self.env.snapshot(global_rng=False)

    def detach(self) -> Snapshot:
        """The live game as a snapshot, not copied (``GameEnv.detach``): restore it once, and restore
        something before the next step."""
        return self.env.detach()

    def restore(self, snap: Snapshot, *, keep: bool = False) -> None:
        """Return to ``snap``, starting the camera from the outgoing game's render caches (the
        explorer restores between sibling states, whose frames differ in a few cells).
        ``keep=True`` on a detached snapshot plays a copy and keeps the snapshot (``GameEnv.restore``)."""
        self.env.restore(snap, reuse_render_caches=True, keep=keep)
