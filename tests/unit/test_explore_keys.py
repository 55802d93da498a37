"""Node identity bytes: ``Session.state_key`` is the documented hash (the session module's docstring),
byte for byte -- graph exports name nodes by it -- for games with and without their own hidden
state and under the engine identity, on states reached by a random walk (won states included)."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import numpy as np
import pytest

from engine.loader import load_game_class
from games import GAMES_DIR
from pipeline.explore import Session, resolve

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explore"


def documented_key(session: Session) -> bytes:
    """sha256 over the last frame's int8 bytes, str(hidden.shape) + the hidden state's bytes, the
    game state's value and the level-won flag (W or -); the engine identity hashes state_hash + flag."""
    won = session.won()
    if session.identity == "engine":
        return hashlib.sha256(session.env.state_hash().encode() + (b"W" if won else b"-")).digest()
    h = hashlib.sha256(np.ascontiguousarray(session.last.frame, dtype=np.int8).tobytes())
    hidden = np.asarray(session.game._get_hidden_state())
    h.update(str(hidden.shape).encode())
    h.update(np.ascontiguousarray(hidden).tobytes())
    h.update(str(session.last.state.value).encode())
    h.update(b"W" if won else b"-")
    return h.digest()


def with_hidden_state(info):
    """The game's class with a hidden state its frames do not show (a step counter mod 3)."""
    base = load_game_class(info)

    class Hidden(base):
        def _get_hidden_state(self) -> np.ndarray:
            return np.array([[self._action_count % 3, 7]], dtype=np.int16)

    return Hidden


@pytest.mark.parametrize(("game", "root", "level", "hidden", "identity"),
                         [("cr01", FIXTURES, 0, False, "frame"), ("cr01", FIXTURES, 0, True, "frame"),
                          ("bg41", GAMES_DIR, 5, False, "frame"), ("pv63", GAMES_DIR, 2, True, "frame"),
                          ("cr01", FIXTURES, 0, False, "engine")])
def test_state_key_is_the_documented_hash(game: str, root: Path, level: int, hidden: bool, identity: str) -> None:
    info = resolve(game, root)
    session = Session(info, with_hidden_state(info) if hidden else None, identity=identity)
    session.start(level)
    rng = random.Random(3)
    keys, outcomes = set(), set()
    for _ in range(80):
        key = session.state_key()
        assert key == documented_key(session)
        assert key == hashlib.sha256(session.key_bytes()).digest()
        keys.add(key)
        outcomes.add((session.won(), session.lost()))
        if session.won() or session.lost():
            session.start(level)
            continue
        action = rng.choice([a for a in session.available_actions if a not in (0, 7)])
        session.step(action, {"x": rng.randrange(64), "y": rng.randrange(64)} if action == 6 else None)
    assert len(keys) > 3
    if game == "cr01":
        assert (True, False) in outcomes  # a won state was keyed too
