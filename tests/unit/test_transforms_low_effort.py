"""The low-effort detector: a cycling session is excluded, a slow-but-genuine one is not; every decision
has its reason codes; the play-level fallback without a session manifest. Cohort medians in the fixture
are 100 actions and 600 s on every game (see tests/fixtures/transforms/studies.py)."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.core.config import load_config, resolve
from pipeline.transforms.build import run_in_memory
from tests.fixtures.transforms.studies import low_effort_study, play_level_study


@pytest.fixture(scope="module")
def out() -> dict[str, pl.DataFrame]:
    return run_in_memory(low_effort_study().tables(), load_config(), steps=["plays_levels", "attempts"])


def _unit(out, unit_id: str) -> dict:
    return out["out_study__session_features"].filter(pl.col("unit_id") == unit_id).row(0, named=True)


def test_cycling_session_is_excluded_with_its_reasons(out):
    u = _unit(out, "s-cycler")
    assert u["is_low_effort_excluded"]
    assert u["reason_codes"] == ["high_abandonment", "low_time_vs_cohort", "low_actions_vs_cohort", "many_short_plays"]
    assert (u["n_environments"], u["n_recordings"], u["n_actions"], u["n_abandoned"]) == (4, 4, 40, 4)
    assert u["interaction_s"] == 200.0 and u["environments_per_hour"] == pytest.approx(72.0)
    assert u["abandonment_rate"] == 1.0 and u["short_play_share"] == 1.0
    assert u["relative_actions_median"] == pytest.approx(0.1)  # 10 / 100 on every game
    assert u["relative_duration_median"] == pytest.approx(50 / 600)
    assert u["reason"].startswith("excluded as low effort: 4 games, 4 abandoned")


def test_slow_but_genuine_session_is_kept(out):
    u = _unit(out, "s-slow")
    assert not u["is_low_effort_excluded"]
    # two games left unsolved before the soft limit: the abandonment criterion fires, engagement does not
    assert u["reason_codes"] == ["high_abandonment"]
    assert (u["n_abandoned"], u["abandonment_rate"]) == (2, 0.5)
    assert u["relative_actions_median"] == pytest.approx(3.0)
    assert u["relative_duration_median"] == pytest.approx((1100 / 600 + 1500 / 600) / 2)
    assert u["reason"].startswith("kept:")


def test_fast_expert_and_short_session_are_kept(out):
    expert = _unit(out, "s-expert")
    assert not expert["is_low_effort_excluded"] and expert["reason_codes"] == ["low_time_vs_cohort"]
    assert expert["relative_duration_median"] == pytest.approx(0.3)
    short = _unit(out, "s-short")
    assert not short["is_low_effort_excluded"]  # every signal fires, but 2 games are too few to judge
    assert short["reason_codes"] == ["high_abandonment", "low_time_vs_cohort", "low_actions_vs_cohort",
                                     "many_short_plays"]
    assert "fewer than 3 games" in short["reason"]
    for p in range(1, 6):
        genuine = _unit(out, f"s-genuine-{p}")
        assert genuine["reason_codes"] == [] and not genuine["is_low_effort_excluded"]


def test_what_the_exclusion_removed(out):
    ex = out["out_study__low_effort_exclusions"]
    assert ex["unit_id"].unique().to_list() == ["s-cycler"] and ex.height == 4
    assert ex["n_actions"].to_list() == [10] * 4 and ex["duration_s"].to_list() == [50.0] * 4
    assert not ex["is_attempt"].any() and ex["participant_id"].unique().to_list() == ["p-cycler"]
    att = out["out_arc3__attempts"]
    cyc = att.filter(pl.col("session_id") == "s-cycler")
    assert cyc["is_low_effort_excluded"].all()
    assert cyc["reason_codes"].to_list() == [["too_few_actions", "low_effort"]] * 4
    assert att.filter(pl.col("is_low_effort_excluded")).height == 4


def test_detector_can_be_disabled():
    out = run_in_memory(low_effort_study().tables(), resolve({"low_effort": {"enabled": False}}),
                        steps=["plays_levels", "attempts"])
    feats = out["out_study__session_features"]
    assert not feats["is_low_effort_excluded"].any()
    assert feats.filter(pl.col("unit_id") == "s-cycler")["reason"][0].startswith("detector disabled")


def test_play_level_fallback_without_a_session_manifest():
    st, minimal, slow = play_level_study()
    out = run_in_memory(st.tables(), load_config(), steps=["plays_levels", "attempts"])
    feats = out["out_study__session_features"]
    assert feats["unit_kind"].unique().to_list() == ["recording"] and feats.height == 8
    m = feats.filter(pl.col("unit_id") == minimal).row(0, named=True)
    assert m["is_low_effort_excluded"]
    assert m["reason_codes"] == ["abandoned", "low_time_vs_cohort", "low_actions_vs_cohort", "short_play"]
    assert m["relative_actions_median"] == pytest.approx(10 / 150)
    assert m["relative_duration_median"] == pytest.approx(20 / 700)
    s = feats.filter(pl.col("unit_id") == slow).row(0, named=True)
    assert not s["is_low_effort_excluded"] and s["reason_codes"] == []  # reached the soft limit: not abandoned
    assert feats.filter(pl.col("is_low_effort_excluded")).height == 1
    off = run_in_memory(st.tables(), resolve({"low_effort": {"play_level_fallback": False}}),
                        steps=["plays_levels", "attempts"])
    assert not off["out_study__session_features"]["is_low_effort_excluded"].any()


def test_a_units_time_is_the_same_whatever_order_its_games_come_in():
    """A session's interaction_s is a float sum over its games: it once differed in the last digit between two
    builds of one database (group_by's order varies). The games are now added in one fixed order."""
    from pipeline.transforms.low_effort import detect_low_effort

    durations = [0.1, 0.2, 0.3, 1e-16, 90.693506, 3.3, 7.7]  # their float sum depends on the order
    base = pl.DataFrame({
        "session_id": ["s1"] * len(durations), "guid": [f"g{i}" for i in range(len(durations))],
        "game_id": [f"ab{i:02d}-0123abcd" for i in range(len(durations))], "participant_id": ["p1"] * len(durations),
        "n_actions": [50] * len(durations), "duration_s": durations, "is_fully_solved": [True] * len(durations),
        "levels_completed": [1] * len(durations), "is_attempt": [True] * len(durations)})
    config = load_config()
    seen = set()
    for seed in range(12):
        shuffled = base.sample(fraction=1.0, shuffle=True, seed=seed)
        units = detect_low_effort(shuffled, config).features
        seen.add(units.filter(pl.col("unit_id") == "s1")["interaction_s"].item())
    assert len(seen) == 1
