"""Determinism, the Gymnasium way: two instances, the same actions, equal at every step.

Also checks that the frame modes only change what is returned (``"none"`` skips drawing but keeps
the game's state identical) and that state hashes do not depend on them.
"""

import random
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import GameAction

GAMES_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "environment_files"
FIXTURE_GAMES = ["an53", "ck17", "cm86", "ly28", "mz41", "pl39", "tf62", "ud74"]


def random_actions(env, rng, count):
    """Actions from the current available list (clicks anywhere), with occasional RESETs."""
    for _ in range(count):
        if rng.random() < 0.05:
            yield GameAction.RESET, None
            continue
        choice = rng.choice(env.available_actions)
        yield (choice, {"x": rng.randrange(64), "y": rng.randrange(64)}) if choice == 6 else (choice, None)


@pytest.mark.parametrize("game_id", FIXTURE_GAMES)
def test_two_instances_agree_at_every_step(game_id):
    first = engine.make(game_id, GAMES_DIR)
    second = engine.make(game_id, GAMES_DIR)
    first.reset()
    second.reset()
    rng = random.Random(f"determinism-{game_id}")
    for step, (action, data) in enumerate(random_actions(first, rng, 80)):
        a = first.step(action, data)
        b = second.step(action, data)
        assert (a.state, a.levels_completed, a.full_reset, len(a.frame)) == (b.state, b.levels_completed, b.full_reset, len(b.frame)), f"step {step}"
        for index, (frame_a, frame_b) in enumerate(zip(a.frame, b.frame, strict=True)):
            assert np.array_equal(frame_a, frame_b), f"step {step}: frame {index} differs"
        assert first.state_hash() == second.state_hash(), f"step {step}: state hashes differ"


@pytest.mark.parametrize("game_id", FIXTURE_GAMES)
def test_frame_modes_keep_the_same_state(game_id):
    full = engine.make(game_id, GAMES_DIR, frames="all")
    last = engine.make(game_id, GAMES_DIR, frames="last")
    bare = engine.make(game_id, GAMES_DIR, frames="none")
    for env in (full, last, bare):
        env.reset()
    rng = random.Random(f"modes-{game_id}")
    for step, (action, data) in enumerate(random_actions(full, rng, 80)):
        a, b, c = full.step(action, data), last.step(action, data), bare.step(action, data)
        assert (a.state, a.levels_completed) == (b.state, b.levels_completed) == (c.state, c.levels_completed), f"step {step}"
        if a.frame:
            assert len(b.frame) == 1 and np.array_equal(a.frame[-1], b.frame[0]), f"step {step}"
        assert c.frame == [], f"step {step}"
        assert full.state_hash() == last.state_hash() == bare.state_hash(), f"step {step}"


def test_state_hash_tracks_hidden_state():
    env = engine.make("an53", GAMES_DIR)
    env.reset()
    before = env.state_hash()
    env.game.shots_fired += 3  # hidden: nothing on screen changes
    assert env.state_hash() != before
    env.game.shots_fired -= 3
    assert env.state_hash() == before


def test_only_reset_levels_option_and_environment_variable(monkeypatch):
    monkeypatch.delenv("ONLY_RESET_LEVELS", raising=False)
    assert engine.make("mz41", GAMES_DIR, only_reset_levels=True).reset().full_reset is False
    assert engine.make("mz41", GAMES_DIR).reset().full_reset is True
    monkeypatch.setenv("ONLY_RESET_LEVELS", "true")
    assert engine.make("mz41", GAMES_DIR).reset().full_reset is False
    assert engine.make("mz41", GAMES_DIR, only_reset_levels=False).reset().full_reset is True


def test_responses_carry_the_versioned_id_and_guid():
    env = engine.make("ck17", GAMES_DIR, guid="fixed-guid")
    response = env.reset()
    assert response.game_id == "ck17-8ce0c519" and response.guid == "fixed-guid"
    assert env.available_actions == [6] and env.frame.shape == (64, 64)
