"""``engine._copying.deep_copy`` is ``copy.deepcopy``: same values, same sharing and recursion,
independent results; and a game's levels are lazy clones, so copies of a game never share a level
that either side may change."""

from __future__ import annotations

import copy
import enum
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine._copying import deep_copy
from engine.env import GameEnv, _deepcopy_game
from engine.level import _LazyLevel
from games import GAMES_DIR
from pipeline.explore import resolve

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explore"


class Colour(enum.Enum):
    RED = 1


class Plain:
    """A default-deepcopy object (the fast path builds it without __reduce_ex__)."""

    def __init__(self, payload):
        self.payload = payload


class Custom:
    def __init__(self, payload):
        self.payload = payload
        self.copies = 0

    def __deepcopy__(self, memo):
        new = Custom(copy.deepcopy(self.payload, memo))
        new.copies = self.copies + 1
        return new


atoms = st.one_of(st.none(), st.integers(), st.text(max_size=3), st.booleans(), st.just(Colour.RED), st.floats(allow_nan=False))
values = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.integers(), st.text(max_size=2)), inner, max_size=3),
        st.frozensets(st.integers(), max_size=3),
        st.sets(st.integers(), max_size=3),
        inner.map(Plain),
        inner.map(Custom),
        st.lists(st.integers(-1, 9), min_size=1, max_size=4).map(lambda row: np.array([row], dtype=np.int8)),
    ),
    max_leaves=12,
)


def shape(value, seen=None):
    """A structural fingerprint: types, contents and which positions share one object."""
    seen = {} if seen is None else seen
    if id(value) in seen:
        return ("ref", seen[id(value)])
    if isinstance(value, (list, tuple, dict, set, frozenset, Plain, Custom, np.ndarray)):
        seen[id(value)] = len(seen)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [shape(v, seen) for v in value])
    if isinstance(value, dict):
        return ("dict", [(k, shape(v, seen)) for k, v in value.items()])
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, sorted(value))
    if isinstance(value, Plain):
        return ("Plain", shape(value.payload, seen))
    if isinstance(value, Custom):
        return ("Custom", value.copies, shape(value.payload, seen))
    if isinstance(value, np.ndarray):
        return ("array", value.tolist())
    return ("atom", value)


@settings(max_examples=300, deadline=None)
@given(values, values)
def test_deep_copy_is_deepcopy(a, b):
    original = [a, b, a, [b, a]]  # shared references
    original.append(original)  # and a recursive one
    ours = deep_copy(original, {})
    theirs = copy.deepcopy(original)
    assert shape(ours) == shape(theirs)
    assert ours[4] is ours


def test_deep_copy_results_are_independent():
    inner = {"xs": [1, 2], "obj": Plain([3])}
    original = {"a": inner, "b": inner, "s": {1, 2}}
    copied = deep_copy(original, {})
    assert copied["a"] is copied["b"] and copied["a"] is not inner
    copied["a"]["xs"].append(9)
    copied["a"]["obj"].payload.append(9)
    copied["s"].add(5)
    assert inner == {"xs": [1, 2], "obj": inner["obj"]} and inner["obj"].payload == [3] and original["s"] == {1, 2}


def test_game_copies_do_not_share_levels_either_side_changes():
    env = GameEnv(resolve("cr01", FIXTURES))
    env.start_level(0)
    game = env.game
    assert any(type(level) is _LazyLevel for level in game._levels)  # untouched levels stay lazy
    held = env.detach()
    env.restore(held, keep=True)
    branch = env.game
    assert branch is not game
    pending = [j for j, level in enumerate(game._levels) if type(level) is _LazyLevel]
    assert [j for j, level in enumerate(branch._levels) if type(level) is _LazyLevel] == pending  # not cloned
    assert branch._engine_clean_levels is game._engine_clean_levels
    for j in range(len(game._levels)):
        mine, theirs = game._levels[j], branch._levels[j]
        assert mine is not theirs
        before = [(s.name, s.x, s.y) for s in mine._sprites]
        for sprite in theirs._sprites:  # the branch changes every level it has
            sprite.set_position(sprite.x + 1, sprite.y + 1)
        theirs._data = {"changed": True}
        assert [(s.name, s.x, s.y) for s in mine._sprites] == before
        assert mine._data != {"changed": True}


def test_game_copy_plays_like_deepcopy():
    env = GameEnv(resolve("cr01", FIXTURES))
    env.start_level(0)
    twin = GameEnv(resolve("cr01", FIXTURES))
    twin.game = copy.deepcopy(env.game)
    env.game = _deepcopy_game(env.game)
    assert env.state_bytes() == twin.state_bytes()
    for action in [1, 2, 3, 4, 1, 1, 2]:
        if action in env.available_actions:
            assert np.array_equal(env.step(action).frame[-1], twin.step(action).frame[-1])
            assert env.state_bytes() == twin.state_bytes()


def test_game_copies_share_only_the_declared_levels_still_in_place():
    env = GameEnv(resolve("bg41", GAMES_DIR))  # seven levels
    env.start_level(0)
    env.share_levels([2, 3, 4])
    game = env.game
    held = env.detach()
    env.restore(held, keep=True)
    branch = env.game
    assert [branch._levels[j] is game._levels[j] for j in range(len(game._levels))] == [False, False, True, True, True, False, False]
    # A declared level replaced in the held game (and still referred to elsewhere) is copied like
    # any other object; the declared levels still in their places are shared.
    moved = game._levels[3]
    game._levels[3] = game._engine_clean_levels[3].clone()
    game.kept_level = moved
    env.restore(held, keep=True)
    again = env.game
    assert again._levels[2] is game._levels[2] and again._levels[4] is game._levels[4]
    assert again._levels[3] is not game._levels[3] and again.kept_level is not moved
    assert [s.name for s in again.kept_level._sprites] == [s.name for s in moved._sprites]
