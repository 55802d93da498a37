"""Counting rules beyond what the sample recordings exercise (spec/scoring.md §B, formats.md A.3/C)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.scoring import (
    Card,
    CardPlay,
    CountingOptions,
    StepEffect,
    StepRecord,
    action_id_from,
    classify_steps,
    detect_action_ids_lost,
    normalize_actions_by_level,
    per_level_actions,
    play_flags,
    raw_level_actions,
    rebuild_card,
    score_game,
)

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
VECTORS = {v["name"]: v for v in json.loads((SHARED / "spec" / "scoring-vectors.json").read_text())["vectors"]}
BT11 = json.loads((SHARED / "samples" / "arc-agi-3" / "toolkit"
                   / "bt11_win_gameover_levelreset.noframes.expected.json").read_text())


def step(action, levels=0, state="NOT_FINISHED", full_reset=False, **kw) -> StepRecord:
    return StepRecord(action_id=action_id_from(action), state=state, levels_completed=levels,
                      full_reset=full_reset, win_levels=kw.pop("win_levels", 5), guid="g", **kw)


def test_action_ids():
    assert action_id_from("RESET") == 0
    assert action_id_from("ACTION6") == 6
    assert action_id_from("GameAction.ACTION7") == 7
    assert action_id_from(3) == 3
    assert action_id_from("4") == 4
    for bad in (8, -1, "ACTION8", None, True):
        with pytest.raises(ValueError):
            action_id_from(bad)


def test_competition_mode_d5():
    """§D.5: open, swallowed RESET (echoes the opening RESET), 4 x ACTION3 (level 1 at 5), swallowed RESET at
    the level-2 start (echoes ACTION3), ACTION3, level RESET, swallowed RESET (echoes that RESET):
    actions 9, resets 3, level 1 charged 5 -> (4/5)^2 = 64 -> game 64/15."""
    steps = [
        step("RESET", full_reset=True),
        step("RESET", full_reset=True),  # echo of the opening response
        step("ACTION3"), step("ACTION3"), step("ACTION3"), step("ACTION3", levels=1),
        step("ACTION3", levels=1),  # echo of the previous ACTION3 response
        step("ACTION3", levels=1),
        step("RESET", levels=1),
        step("RESET", levels=1),  # echo of the level reset
    ]
    card = rebuild_card(steps, CountingOptions(competition_mode=True), game_id="bt11")
    assert card.total_plays == 1
    (play,) = card.plays
    assert (play.actions, play.resets, play.actions_by_level) == (9, 3, ((1, 5),))
    game = score_game("bt11", card.plays, BT11["baseline_actions"])
    assert game.score == pytest.approx(64 / 15, abs=1e-9)
    # Outside competition mode the second RESET is a full reset: a new play.
    assert rebuild_card(steps, CountingOptions()).total_plays == 2


def test_rest_lines_infer_full_reset_only_after_win():
    steps = [step("RESET"), step("ACTION1", levels=1, state="WIN", win_levels=1), step("RESET"),
             step("RESET"), step("ACTION1")]
    effects = classify_steps(steps, CountingOptions.human_dataset())
    assert effects == (StepEffect.OPEN, StepEffect.ACTION, StepEffect.FULL_RESET, StepEffect.LEVEL_RESET,
                       StepEffect.ACTION)
    card = rebuild_card(steps, CountingOptions.human_dataset())
    assert [p.actions for p in card.plays] == [1, 2]
    assert card.plays[0].state == "WIN"


def test_post_terminal_echo_and_sticky_state():
    steps = [step("RESET", full_reset=True), step("ACTION1"), step("ACTION1", state="GAME_OVER"),
             step("ACTION2", state="GAME_OVER", win_levels=0),  # echo (no frames: win_levels 0)
             step("ACTION2", state="GAME_OVER", frame_count=0, win_levels=5),  # echo (empty frame)
             step("RESET"), step("ACTION1", levels=1)]
    effects = classify_steps(steps, CountingOptions.toolkit())
    assert effects.count(StepEffect.ECHO) == 2
    (play,) = rebuild_card(steps, CountingOptions.toolkit()).plays
    assert (play.actions, play.resets, play.state, play.actions_by_level) == (4, 1, "GAME_OVER", ((1, 4),))


def test_leading_reset_options():
    steps = [step("RESET", full_reset=True), step("ACTION1")]
    assert rebuild_card(steps, CountingOptions.toolkit()).actions == [1]
    # Benchmarking recorder: the opening RESET is not recorded, so a recorded RESET is the agent's own.
    assert rebuild_card(steps, CountingOptions.benchmarking()).actions == [0, 1]
    no_leading = [step("ACTION6"), step("RESET"), step("ACTION6", levels=1)]
    card = rebuild_card(no_leading, CountingOptions.human_dataset())
    assert (card.actions, card.resets) == ([3], [1])
    with pytest.raises(ValueError):
        rebuild_card(no_leading, CountingOptions.toolkit())


def test_action_ids_lost_needs_evidence():
    one = [step("RESET", full_reset=False)]
    assert not detect_action_ids_lost(one)
    repeated_full_resets = [step("RESET", full_reset=True) for _ in range(3)]
    assert not detect_action_ids_lost(repeated_full_resets)
    same_frame = [step("RESET", frame_count=1, frame_digest="a") for _ in range(3)]
    assert not detect_action_ids_lost(same_frame)
    level_advances = [step("RESET"), step("RESET", levels=1)]
    assert detect_action_ids_lost(level_advances)


def test_card_from_human_dict_normalizes_quirks():
    card = Card.from_dict({
        "game_id": "sc25-x", "total_plays": 3, "guids": [], "levels_completed": [0, 2, 0],
        "states": ["NOT_FINISHED"] * 3, "actions": [0, 30, 0], "resets": [0, 1, 0],
        "actions_by_level": [[[]], [[1, 10], [2, 25]]],  # shorter than its siblings
    })
    assert [p.actions_by_level for p in card.plays] == [(), ((1, 10), (2, 25)), ()]
    assert card.play_for_guid("whatever").actions == 30  # empty guids: the single slot with actions
    assert normalize_actions_by_level(None) == normalize_actions_by_level([]) == ()
    with pytest.raises(ValueError):
        normalize_actions_by_level([[1, 2, 3]])


def test_per_level_actions_and_raw_form():
    play = CardPlay("g", actions=35, resets=0, state="NOT_FINISHED", levels_completed=2,
                    actions_by_level=((1, 10), (2, 30)))
    counts = per_level_actions(play, 4)
    assert counts.actions == (10, 20, 5, 0) and counts.completed == (True, True, False, False)
    assert raw_level_actions(play) == (10, 20, 5)
    with pytest.raises(ValueError):
        per_level_actions(play, 1)


@pytest.mark.parametrize(("name", "flag"), [("2604-quirk-level-jump-index-pairing", "pair_levels_not_1_to_k"),
                                            ("2604-quirk-completed-level-zero-actions",
                                             "completed_level_zero_actions")])
def test_quirk_vectors_are_flagged(name, flag):
    p = VECTORS[name]["plays"][0]
    play = CardPlay(None, p["actions"], p["resets"], p["state"], p["levels_completed"],
                    tuple(map(tuple, p["actions_by_level"])))
    assert flag in play_flags(play)


def test_clean_play_has_no_flags():
    (play,) = Card.from_dict(BT11["card"]).plays
    assert play_flags(play) == ()


def test_recovered_ids_replace_the_lost_ones_and_echoes_stop_looking_like_resets():
    from pipeline.recordings.counting import StepRecord, live_step_indices, recover_action_ids

    lost = [StepRecord(0, "NOT_FINISHED", 0, False, 3, 1), StepRecord(0, "GAME_OVER", 0, False, 3, 1),
            StepRecord(0, "GAME_OVER", 0, False, 0, 0),  # a post-terminal echo: answered a non-RESET action
            StepRecord(0, "NOT_FINISHED", 0, True, 3, 1)]
    assert live_step_indices(lost) == [0, 1, 3]
    out = recover_action_ids(lost, ["ACTION2", 5, "RESET"])
    assert [s.action_id for s in out] == [2, 5, 1, 0]  # the echo's lost RESET became a non-RESET action
    assert [s.full_reset for s in out] == [False, False, False, True]
    with pytest.raises(ValueError, match="2 recovered ids for 3 frame steps"):
        recover_action_ids(lost, [1, 1])
