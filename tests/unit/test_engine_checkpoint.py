"""``GameEnv.checkpoint`` / ``rollback``: after any play, the rolled-back game is the game a deep copy
taken at the checkpoint would be (same hidden state and levels, then the same frames and states for
the same actions), on the shipped games, the conformance games (which replace sprite lists, write
into pixels, keep undo stacks, clone levels) and the explorer fixtures; a rollback shares nothing
with the play it undid or with the next rollback."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import numpy as np
import pytest

from engine.env import GameEnv, _deepcopy_game
from engine.loader import resolve_game
from games import GAMES_DIR, list_games
from tests.conftest import SHARED

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explore"
CONFORMANCE = SHARED / "conformance" / "environment_files"

CASES = ([(entry.game_id.split("-")[0], GAMES_DIR) for entry in list_games(GAMES_DIR)]
         + [(game, CONFORMANCE) for game in ("an53", "ck17", "cm86", "ly28", "mz41", "pl39", "tf62", "ud74")]
         + [(game, FIXTURES) for game in ("cr01", "lv02", "ck03", "dm04")])


def random_action(env: GameEnv, rng: random.Random) -> tuple[int, dict | None]:
    actions = [a for a in env.available_actions if a != 0] or [1]
    action = rng.choice(actions)
    return action, ({"x": rng.randrange(64), "y": rng.randrange(64)} if action == 6 else None)


def fingerprint(env: GameEnv) -> tuple:
    """Hidden state (engine.statehash) plus every level's pickled state (statehash covers only the
    current level) and the camera's non-cache attributes."""
    game = env.game
    levels = []
    for level in game._levels:
        if type(level).__name__ != "Level":  # a pending lazy clone
            levels.append(("lazy", id(level._engine_source)))
            continue
        sprites = [(id(sprite), sprite.pixels.tobytes(), sorted((k, v) for k, v in vars(sprite).items()
                                                             if not k.startswith("_engine_") and k != "pixels"))
                   for sprite in level._sprites]
        rest = {k: v for k, v in vars(level).items() if k not in ("_sprites", "_engine_order")}
        order = None if level._engine_order is None else [id(sprite) for sprite in level._engine_order]
        levels.append((id(level), sprites, pickle.dumps(rest, protocol=5), order))
    return env.state_bytes(), levels, game._current_level_index, game._state, game._score, game._action_count


def play_same(a: GameEnv, b: GameEnv, rng: random.Random, steps: int) -> None:
    for _ in range(steps):
        action, data = random_action(a, rng)
        got, expected = a.step(action, data), b.step(action, data)
        assert len(got.frame) == len(expected.frame)
        for x, y in zip(got.frame, expected.frame, strict=True):
            assert np.array_equal(x, y)
        assert got.state == expected.state and got.levels_completed == expected.levels_completed
        assert a.state_bytes() == b.state_bytes()
        if got.state.name in ("WIN", "GAME_OVER"):
            a.reset()
            b.reset()


@pytest.mark.parametrize(("game", "root"), CASES, ids=[game for game, _ in CASES])
def test_rollback_equals_a_copy_taken_at_the_checkpoint(game: str, root: Path) -> None:
    info = resolve_game(game, root)
    env = GameEnv(info)
    env.reset()
    rng = random.Random(11)
    checked = 0
    for round_ in range(12):
        for _ in range(rng.randrange(0, 6)):
            action, data = random_action(env, rng)
            if env.step(action, data).state.name in ("WIN", "GAME_OVER"):
                env.reset()
        cp = env.checkpoint()
        if cp is None:
            continue
        reference = GameEnv(info, game_class=env._game_class)
        reference.game = _deepcopy_game(env.game)
        before = fingerprint(env)
        for _ in range(3):  # several rollbacks of one checkpoint
            for _ in range(rng.randrange(1, 8)):
                action, data = random_action(env, rng)
                if env.step(action, data).state.name in ("WIN", "GAME_OVER"):
                    env.reset() if rng.random() < 0.5 else None
            env.rollback(cp)
            assert fingerprint(env) == before
        checked += 1
        # Then the rolled-back game plays as the copy does.
        play_same(env, reference, random.Random(round_), 6)
    assert checked > 0


class Meddler:
    """A game that changes its state in every way the engine cannot see coming: writes into sprite
    pixels and tag lists in place, renames sprites and changes their blocking (no change stamp),
    adds and removes sprites, edits level data and its own containers, and keeps a HUD with state
    that refers back to the game."""

    @staticmethod
    def make_class():
        from engine import ARCBaseGame, BlockingMode, Camera, Level, RenderableUserDisplay, Sprite

        class Hud(RenderableUserDisplay):
            def __init__(self, game):
                self.game = game
                self.drawn = []

            def render_interface(self, frame):
                self.drawn.append(len(self.game.log))
                frame[0, : len(self.game.log) % 64] = 3
                return frame

        class Meddle(ARCBaseGame):
            def __init__(self):
                self.log = []
                self.counts = {"moves": 0}
                board = Sprite(np.zeros((4, 4), dtype=np.int8), name="board", tags=["board"])
                walker = Sprite([[2]], name="walker", x=1, y=1, layer=1, tags=["walker"])
                level = Level(sprites=[board, walker], grid_size=(4, 4), data={"marks": [1, 2]}, name="one")
                super().__init__(game_id="meddle", levels=[level, level.clone()],
                                 camera=Camera(interfaces=[Hud(self)]), available_actions=[1, 2, 3, 4, 5])

            def step(self):
                level = self.current_level
                board = level.get_sprites_by_name("board")[0] if level.get_sprites_by_name("board") else None
                action = self.action.id.value
                self.log.append(action)
                self.counts["moves"] += 1
                level._data["marks"].append(action)
                if board is not None:
                    board.pixels[action % 4, (action * 3) % 4] = action + 3  # in place
                    board.tags.append(f"t{action}")
                walker = level._sprites[-1]
                if action == 1:
                    walker.set_name(f"walker{len(self.log)}")
                    walker.set_blocking(BlockingMode.BOUNDING_BOX)
                elif action == 2:
                    level.add_sprite(Sprite([[4]], name=f"dot{len(self.log)}", x=len(self.log) % 4, y=2, layer=2))
                elif action == 3 and len(level._sprites) > 2:
                    level.remove_sprite(level._sprites[1])
                elif action == 4:
                    walker.move(1, 0)
                elif action == 5 and len(self.log) > 6:
                    self.next_level()
                self.complete_action()

        return Meddle


def test_rollback_undoes_changes_the_engine_does_not_see() -> None:
    cls = Meddler.make_class()
    info = resolve_game("cr01", FIXTURES)  # any info: the class is given
    env = GameEnv(info, game_class=cls)
    env.reset()
    rng = random.Random(5)
    for round_ in range(30):
        for _ in range(rng.randrange(0, 4)):
            env.step(*random_action(env, rng))
        cp = env.checkpoint()
        assert cp is not None
        reference = GameEnv(info, game_class=cls)
        reference.game = _deepcopy_game(env.game)
        before = fingerprint(env)
        hud_before = list(env.game.camera._interfaces[0].drawn)
        for _ in range(2):
            for _ in range(rng.randrange(1, 6)):
                env.step(*random_action(env, rng))
            env.rollback(cp)
            assert fingerprint(env) == before
            assert env.game.camera._interfaces[0].drawn == hud_before
            assert env.game.camera._interfaces[0].game is env.game
        play_same(env, reference, random.Random(round_), 5)
