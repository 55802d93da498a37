"""Hypothesis properties of the scoring core."""

from __future__ import annotations

import statistics

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.scoring import (
    POLICIES,
    CardPlay,
    CountingOptions,
    StepRecord,
    apply_rule,
    level_score,
    per_level_actions,
    rebuild_card,
    score_game,
    score_play,
)

policies = st.sampled_from(sorted(POLICIES))
# Per-test settings (not a global profile: other modules' hypothesis tests keep theirs).
LOCAL = settings(max_examples=150, deadline=None)


@st.composite
def game_and_play(draw, allow_extra_levels: bool = False):
    """A baseline and a play: k completed levels with positive per-level costs, a remainder, a state."""
    baseline = draw(st.lists(st.integers(1, 300), min_size=1, max_size=12))
    n = len(baseline)
    k = draw(st.integers(0, n + (2 if allow_extra_levels else 0)))
    costs = draw(st.lists(st.integers(1, 2000), min_size=k, max_size=k))
    pairs, total = [], 0
    for i, c in enumerate(costs, start=1):
        total += c
        pairs.append((i, total))
    won = k >= n and draw(st.booleans())
    remainder = 0 if won else draw(st.integers(0, 500))
    state = "WIN" if won else draw(st.sampled_from(["NOT_FINISHED", "GAME_OVER"]))
    play = CardPlay(guid=None, actions=total + remainder, resets=0, state=state, levels_completed=k,
                    actions_by_level=tuple(pairs))
    return baseline, play


@LOCAL
@given(policies, st.integers(1, 500), st.integers(1, 5000), st.integers(0, 5000))
def test_level_score_monotone_non_increasing_in_actions(policy_id, baseline, a, extra):
    assert level_score(a, baseline, True, policy_id) >= level_score(a + extra, baseline, True, policy_id)


@LOCAL
@given(policies, st.integers(1, 500), st.integers(0, 5000))
def test_level_score_bounds(policy_id, baseline, a):
    policy = POLICIES[policy_id]
    s = level_score(a, baseline, True, policy)
    assert 0.0 <= s <= policy.level_cap
    assert level_score(a, baseline, False, policy) == 0.0


@LOCAL
@given(policies, game_and_play(allow_extra_levels=True))
def test_play_and_game_score_within_0_100(policy_id, gp):
    baseline, play = gp
    run = score_play(play, baseline, policy_id, game_id="g")
    assert 0.0 <= run.score <= 100.0
    assert all(0.0 <= s <= POLICIES[policy_id].level_cap for s in run.level_scores)
    if run.scorable:
        # actions after the last baseline level has been completed have no level to be charged to
        charged = play.actions if play.n_pairs < len(baseline) else play.actions_by_level[-1][1]
        assert sum(run.level_actions) == charged
        assert len(run.level_scores) == len(baseline)
    game = score_game("g", [play], baseline, policy_id)
    assert 0.0 <= game.score <= 100.0


@LOCAL
@given(policies, st.lists(game_and_play(), min_size=1, max_size=5), st.lists(st.integers(1, 300), min_size=1,
                                                                             max_size=8))
def test_best_play_is_max_of_play_scores(policy_id, gps, baseline):
    plays = [p for _, p in gps]
    game = score_game("g", plays, baseline, policy_id)
    scores = [score_play(p, baseline, policy_id, game_id="g").score for p in plays]
    assert game.score == max(scores)
    assert game.plays[game.best_play_index].score == max(scores)
    assert game.best_play_index == scores.index(max(scores))


@LOCAL
@given(game_and_play())
def test_per_level_actions_partition_the_play(gp):
    baseline, play = gp
    counts = per_level_actions(play, len(baseline))
    charged = play.actions if play.n_pairs < len(baseline) else play.actions_by_level[-1][1]
    assert sum(counts.actions) == charged
    assert counts.n_completed == len(play.actions_by_level)
    assert list(counts.completed) == sorted(counts.completed, reverse=True)  # a prefix


costs = st.lists(st.integers(0, 10_000), min_size=1, max_size=60)


@LOCAL
@given(costs, st.sampled_from(["upper-median", "second-best", "best"]))
def test_baseline_rule_picks_a_member(values, rule):
    if rule == "second-best" and len(values) < 2:
        return
    assert apply_rule(values, rule) in values


@LOCAL
@given(costs)
def test_upper_median_is_median_high(values):
    assert apply_rule(values, "upper-median") == statistics.median_high(values)
    assert min(values) <= apply_rule(values, "median") <= max(values)


@LOCAL
@given(costs)
def test_baseline_rule_ignores_participant_order(values):
    for rule in ("upper-median", "best", "median"):
        assert apply_rule(values, rule) == apply_rule(list(reversed(values)), rule)


STEP = st.builds(
    StepRecord,
    action_id=st.integers(0, 7),
    state=st.sampled_from(["NOT_FINISHED", "NOT_FINISHED", "NOT_FINISHED", "GAME_OVER", "WIN"]),
    levels_completed=st.integers(0, 6),
    full_reset=st.one_of(st.none(), st.booleans()),
    win_levels=st.sampled_from([None, 0, 6, 6, 6]),
)


@LOCAL
@given(st.lists(STEP, max_size=60), st.sampled_from(["recorded", "after-win", "engine"]), st.booleans())
def test_rebuilt_card_invariants(steps, rule, competition):
    card = rebuild_card(steps, CountingOptions(full_reset_rule=rule, competition_mode=competition))
    for play in card.plays:
        cumulative = [c for _, c in play.actions_by_level]
        assert cumulative == sorted(cumulative)
        assert all(0 <= c <= play.actions for c in cumulative)
        assert 0 <= play.resets <= play.actions
    if competition:
        assert card.total_plays <= 1
