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


def same_frames(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(frames_of(a), frames_of(b), strict=True))


def twin_envs_mid_game(game_id: str) -> tuple[GameEnv, GameEnv, int]:
    """Two environments of the game, both at the start of its middle level (returned too)."""
    info = resolve(game_id, GAMES_DIR)
    first, second = GameEnv(info), GameEnv(info)
    level = len(first.game._levels) // 2
    for env in (first, second):
        env.start_level(level)
    return first, second, level


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_restores_reusing_render_caches_give_the_frames_of_plain_restores(game_id: str) -> None:
    reused, plain, level = twin_envs_mid_game(game_id)
    rng = random.Random(3)
    for _ in range(25):
        saved_reused, saved_plain = reused.snapshot(global_rng=False), plain.snapshot(global_rng=False)
        for _ in range(rng.randrange(1, 5)):  # wander off, then come back
            action, data = random_action(plain, rng)
            a, b = reused.step(action, data), plain.step(action, data)
            assert same_frames(a, b)
        reused.restore(saved_reused, reuse_render_caches=True)
        plain.restore(saved_plain)
        action, data = random_action(plain, rng)
        a, b = reused.step(action, data), plain.step(action, data)
        assert len(frames_of(a)) == len(frames_of(b))
        assert same_frames(a, b)
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


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_keep_restores_of_a_detached_game_play_like_pickled_snapshots(game_id: str) -> None:
    kept, plain, level = twin_envs_mid_game(game_id)
    rng = random.Random(5)
    for _ in range(15):
        saved_plain = plain.snapshot(global_rng=False)
        game = kept.game
        held = kept.detach()
        for branch in range(3):  # copies of the held game, then the game itself
            kept.restore(held, keep=branch < 2, reuse_render_caches=True)
            assert (kept.game is game) == (branch == 2)
            plain.restore(saved_plain)
            assert kept.state_bytes() == plain.state_bytes()
            for _ in range(rng.randrange(1, 4)):
                action, data = random_action(plain, rng)
                a, b = kept.step(action, data), plain.step(action, data)
                assert same_frames(a, b)
                assert kept.state_hash() == plain.state_hash()
        if plain.state.name in ("WIN", "GAME_OVER"):
            for env in (kept, plain):
                env.start_level(level)


class _Plain:
    """A game-like object whose attributes exercise deepcopy's aliasing rules."""


def test_deepcopy_game_keeps_deepcopys_sharing_and_copies_mutables() -> None:
    import copy

    from engine.env import _deepcopy_game

    obj = _Plain()
    shared = [1, 2]
    loop: list = []
    loop.append(loop)
    frozen = (1, ("a", (2.5, None)))
    obj.__dict__.update(
        a=shared, b=shared, t=(shared, 3), frozen=frozen, history=[frozen, frozen], loop=loop,
        d={"k": shared, 1: frozen}, tuple_keys={(1, 2): [3]}, arr=np.arange(4), me=obj, n=7,
        kind=GameAction.ACTION1,
    )
    new, reference = _deepcopy_game(obj), copy.deepcopy(obj)
    for copied in (new, reference):
        assert copied is not obj and copied.me is copied and copied.a is copied.b is copied.t[0] is copied.d["k"]
        assert copied.a == shared and copied.a is not shared
        assert copied.loop[0] is copied.loop and copied.loop is not loop
        assert copied.tuple_keys == {(1, 2): [3]} and copied.tuple_keys[(1, 2)] is not obj.tuple_keys[(1, 2)]
        assert copied.arr is not obj.arr and np.array_equal(copied.arr, obj.arr)
        assert copied.kind is GameAction.ACTION1 and copied.n == 7
    assert new.frozen is frozen and new.history[0] is frozen and new.d[1] is frozen  # immutable: shared, as deepcopy does
    assert reference.frozen is frozen


def test_deepcopy_game_remembers_frozen_tuples_but_copies_tuples_holding_mutables() -> None:
    from engine.env import _deepcopy_game

    obj = _Plain()
    inner = [1]
    obj.__dict__.update(frozen=(1, (2, "x")), thawed=(1, (2, inner)))
    for _ in range(2):  # the second copy answers from the remembered tuples
        new = _deepcopy_game(obj)
        assert new.frozen is obj.frozen
        assert new.thawed is not obj.thawed and new.thawed[1][1] == [1] and new.thawed[1][1] is not inner


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_game_copies_start_from_the_originals_frame_cache_and_render_like_pickles(game_id: str) -> None:
    import copy

    env = GameEnv(resolve(game_id, GAMES_DIR))
    rng = random.Random(11)
    env.start_level(len(env.game._levels) // 2)
    for _ in range(6):
        action, data = random_action(env, rng)
        env.step(action, data)
        if env.state.name in ("WIN", "GAME_OVER"):
            env.start_level(len(env.game._levels) // 2)
    saved = env.snapshot(global_rng=False)
    copied = copy.deepcopy(env.game)
    composite = copied._camera.__dict__.get("_engine_composite")
    assert composite is not None  # carried over, drawn from the copy's own sprites
    copied_ids = {id(s) for level in copied._levels for s in level._sprites}
    assert all(id(s) in copied_ids for s in composite.sprites)
    env.restore(saved)
    for _ in range(10):
        action, data = random_action(env, rng)
        a = env.step(action, data)
        b = copied._engine_perform(env.game._action, True, "all")
        assert len(frames_of(a)) == len(frames_of(b))
        assert same_frames(a, b)
        if env.state.name in ("WIN", "GAME_OVER"):
            break
