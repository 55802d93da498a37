"""``GameEnv.detach`` (the running game as an uncopied snapshot) and ``restore(...,
reuse_render_caches=True)`` (the camera starts from the outgoing game's render caches)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from engine import GameAction
from engine.env import GameEnv
from engine.loader import resolve_game as resolve
from games import GAMES_DIR, list_games

GAME_IDS = [entry.game_id for entry in list_games(GAMES_DIR)]


def random_action(env: GameEnv, rng: random.Random) -> tuple[int, dict | None]:
    actions = [a for a in env.available_actions if a != 0]
    action = rng.choice(actions)
    return action, ({"x": rng.randrange(64), "y": rng.randrange(64)} if action == 6 else None)


def frames_of(response) -> list[np.ndarray]:
    return [np.asarray(frame) for frame in (response.frame or [])]


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_restores_reusing_render_caches_give_the_frames_of_plain_restores(game_id: str) -> None:
    info = resolve(game_id, GAMES_DIR)
    reused, plain = GameEnv(info), GameEnv(info)
    rng = random.Random(3)
    level = len(reused.game._levels) // 2
    for env in (reused, plain):
        env.start_level(level)
    for _ in range(25):
        saved_reused, saved_plain = reused.snapshot(global_rng=False), plain.snapshot(global_rng=False)
        for _ in range(rng.randrange(1, 5)):  # wander off, then come back
            action, data = random_action(plain, rng)
            a, b = reused.step(action, data), plain.step(action, data)
            assert all(np.array_equal(x, y) for x, y in zip(frames_of(a), frames_of(b), strict=True))
        reused.restore(saved_reused, reuse_render_caches=True)
        plain.restore(saved_plain)
        action, data = random_action(plain, rng)
        a, b = reused.step(action, data), plain.step(action, data)
        assert len(frames_of(a)) == len(frames_of(b))
        assert all(np.array_equal(x, y) for x, y in zip(frames_of(a), frames_of(b), strict=True))
        assert reused.state_hash() == plain.state_hash()
        if plain.state.name in ("WIN", "GAME_OVER"):
            for env in (reused, plain):
                env.start_level(level)


def test_detach_hands_over_the_game_once_and_blocks_steps_until_a_restore() -> None:
    env = GameEnv(resolve(GAME_IDS[0], GAMES_DIR))
    env.start_level(0)
    saved = env.snapshot(global_rng=False)
    game = env.game
    live = env.detach()
    with pytest.raises(RuntimeError, match="detach"):
        env.step(GameAction.ACTION1)
    env.restore(saved)
    assert env.game is not game
    env.step(env.available_actions[0])  # stepping the copy leaves the detached game alone
    env.restore(live)
    assert env.game is game and not env.detached
    with pytest.raises(RuntimeError, match="only once"):
        env.restore(live)
    assert env.step(env.available_actions[0]).frame
