"""engine.GameEnv: level starts, snapshots (pickled without sys.modules), shared levels, reset rule per environment."""

import json
import os
import sys

import numpy as np
import pytest

import engine
from engine import GameAction, GameState
from engine.env import GameEnv
from engine.loader import resolve_game

GAME_SOURCE = '''
import enum
import random

from arcengine import ARCBaseGame, Camera, GameAction, Level, RenderableUserDisplay, Sprite


class Mood(enum.Enum):
    CALM = 1
    EAGER = 2


class Tally:
    """A game-defined object in the game's state."""

    def __init__(self):
        self.moves = []


class Meter(RenderableUserDisplay):
    def __init__(self, game):
        self.game = game  # a reference back to the game

    def render_interface(self, frame):
        frame[63, : len(self.game.tally.moves) % 64] = 5
        return frame


def level(name, width):
    return Level(sprites=[Sprite([[2]], name="p", x=0, y=0)], grid_size=(width, 2), name=name)


class Ev01(ARCBaseGame):
    def __init__(self):
        self.tally = Tally()
        self.mood = Mood.CALM
        self.draws = []
        super().__init__("ev01", [level("a", 3), level("b", 4), level("c", 5)],
                         Camera(background=0, letter_box=0, interfaces=[Meter(self)]), available_actions=[1, 2, 3])

    def on_set_level(self, level):
        self.mood = Mood.CALM

    def step(self):
        player = self.current_level.get_sprites_by_name("p")[0]
        self.tally.moves.append(self.action.id.value)
        if self.action.id == GameAction.ACTION1:
            player.move(1, 0)
            self.mood = Mood.EAGER
            if player.x == self.current_level.grid_size[0] - 1:
                self.next_level()
        elif self.action.id == GameAction.ACTION2:
            player.move(-1, 0)
        elif self.action.id == GameAction.ACTION3:
            self.draws.append(random.random())  # some games draw from the global RNG
        self.complete_action()
'''


@pytest.fixture
def env(tmp_path):
    folder = tmp_path / "ev01" / "v1"
    folder.mkdir(parents=True)
    (folder / "ev01.py").write_text(GAME_SOURCE, encoding="utf-8")
    (folder / "metadata.json").write_text(json.dumps({"game_id": "ev01-v1"}), encoding="utf-8")
    return GameEnv(resolve_game("ev01", tmp_path))


def test_start_level_restarts_the_level_without_touching_the_process(env, monkeypatch):
    monkeypatch.delenv("ONLY_RESET_LEVELS", raising=False)
    response = env.start_level(1)
    assert response.full_reset is False and response.levels_completed == 0
    assert env.game.level_index == 1 and env.state is GameState.NOT_FINISHED
    assert "ONLY_RESET_LEVELS" not in os.environ
    # later RESETs follow the environment's rule again: the variable's (unset: after a RESET with
    # no action since, a full reset back to level 0)
    assert env.reset().full_reset is True and env.game.level_index == 0
    with pytest.raises(IndexError, match="has 3 levels"):
        env.start_level(3)


def test_only_reset_levels_is_per_environment(env, monkeypatch):
    monkeypatch.delenv("ONLY_RESET_LEVELS", raising=False)
    levels_only = GameEnv(env.info, only_reset_levels=True)
    assert levels_only.reset().full_reset is False  # the reference's rule with ONLY_RESET_LEVELS=true
    assert env.reset().full_reset is True  # another environment in the same process is unaffected
    assert "ONLY_RESET_LEVELS" not in os.environ


def test_snapshots_pickle_game_classes_the_loader_never_registered(env):
    assert not any(name.startswith("arc_agi_3") for name in sys.modules)
    env.start_level(0)
    env.step(1)
    saved_hash = env.state_hash()
    snapshot = env.snapshot()
    assert snapshot.game[0] == "pickle"
    first = [env.step(a).frame[-1].copy() for a in (2, 1, 1)]
    assert env.game.level_index == 1
    env.restore(snapshot)
    game = env.game
    assert env.state_hash() == saved_hash and game.level_index == 0
    assert type(game).__name__ == "Ev01" and type(game.mood).__name__ == "Mood" and game.mood.name == "EAGER"
    assert game.camera._interfaces[0].game is game  # the back reference follows the restored game
    again = [env.step(a).frame[-1] for a in (2, 1, 1)]
    assert all(np.array_equal(x, y) for x, y in zip(first, again, strict=True))
    assert not any(name.startswith("arc_agi_3") for name in sys.modules)


def test_untouched_lazy_levels_are_shared_not_copied(env):
    env.reset()  # a full reset: levels after the first are lazy clones of the templates
    snapshot = env.snapshot()
    assert sorted(snapshot.levels) == [1, 2] and all(how == "lazy" for how, _ in snapshot.levels.values())
    saved_hash = env.state_hash()
    env.step(1)
    env.step(1)  # wins level 0: level 1 is materialized and played
    env.restore(snapshot)
    assert env.state_hash() == saved_hash
    env.step(1)
    env.step(1)
    assert env.game.level_index == 1 and env.game.current_level.get_sprites_by_name("p")[0].x == 0


def test_shared_levels_and_the_intact_check(env):
    env.start_level(0)
    env.share_levels([2])
    snapshot = env.snapshot()
    assert snapshot.levels[2][0] == "shared"
    env.step(1)
    env.restore(snapshot)
    assert env.game._levels[2] is snapshot.levels[2][1] and env.shared_levels_intact()
    env.game._levels[2].get_sprites_by_name("p")[0].move(1, 0)  # breaks the promise
    assert not env.shared_levels_intact()


def test_global_rngs_are_saved_unless_asked_not_to(env):
    env.start_level(0)
    np.random.seed(1)
    with_rng = env.snapshot()
    without = env.snapshot(global_rng=False)
    env.step(3)
    drawn = env.game.draws[-1]
    env.restore(with_rng)
    env.step(3)
    assert env.game.draws[-1] == drawn  # the Python RNG was rewound with the game
    env.restore(without)
    env.step(3)
    assert env.game.draws[-1] != drawn  # left where it was


def test_unpicklable_state_falls_back_to_deep_copies(env):
    env.start_level(0)
    env.game.callback = lambda: None  # a lambda defined here cannot be pickled
    saved_hash = env.state_hash()
    snapshot = env.snapshot()
    assert snapshot.game[0] == "copy"
    env.step(1)
    env.restore(snapshot)
    assert env.state_hash() == saved_hash


def test_new_game_is_a_fresh_instance_with_the_environments_reset_rule(env, monkeypatch):
    monkeypatch.setenv("ONLY_RESET_LEVELS", "true")
    env.step(1)
    fresh = GameEnv(env.info, only_reset_levels=False).new_game()
    assert fresh is not env.game and type(fresh) is type(env.game) and fresh._action_count == 0
    assert fresh.perform_action(engine.ActionInput(id=GameAction.RESET)).full_reset is True
