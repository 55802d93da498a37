"""Every vector of shared/spec/scoring-vectors.json (vectors, suite_vectors, baseline_vectors) to 1e-9."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pipeline.scoring import (
    Card,
    CardPlay,
    GameInput,
    baselines_from_level_costs,
    build_scorecard,
    get_policy,
    level_costs_from_participants,
    score_game,
    score_level_actions,
    score_suite,
)

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
VECTORS = json.loads((SHARED / "spec" / "scoring-vectors.json").read_text())
TOL = VECTORS["tolerance"]["abs"]
GAME_ID = VECTORS["game_id_used"]


def assert_close(actual, expected, path="$"):
    """Structural equality with numbers compared to the vectors' absolute tolerance."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        assert set(actual) == set(expected), f"{path}: keys {sorted(actual)} != {sorted(expected)}"
        for key in expected:
            assert_close(actual[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)), f"{path}: {actual!r}"
        assert len(actual) == len(expected), f"{path}: {list(actual)} != {expected}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_close(a, e, f"{path}[{i}]")
    elif isinstance(expected, bool) or expected is None or isinstance(expected, str):
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
    else:
        assert isinstance(actual, (int, float)) and not isinstance(actual, bool), f"{path}: {actual!r}"
        assert math.isclose(actual, expected, rel_tol=0.0, abs_tol=TOL), f"{path}: {actual!r} != {expected!r}"


def play_from_vector(p: dict) -> CardPlay:
    return CardPlay(guid=p.get("guid"), actions=p["actions"], resets=p.get("resets", 0), state=p["state"],
                    levels_completed=p["levels_completed"],
                    actions_by_level=tuple((lvl, c) for lvl, c in p["actions_by_level"]))


def test_vector_counts_match_file():
    counts = VECTORS["counts"]
    assert len(VECTORS["vectors"]) == counts["vectors"]
    assert len(VECTORS["suite_vectors"]) == counts["suite_vectors"]
    assert len(VECTORS["baseline_vectors"]) == counts["baseline_vectors"]
    by_policy: dict[str, int] = {}
    for v in VECTORS["vectors"]:
        by_policy[v["policy"]] = by_policy.get(v["policy"], 0) + 1
    assert by_policy == counts["by_policy"]
    assert set(VECTORS["policies"]) <= {get_policy(p).policy_id for p in VECTORS["policies"]}


@pytest.mark.parametrize("vec", VECTORS["vectors"], ids=[v["name"] for v in VECTORS["vectors"]])
def test_game_vector(vec):
    policy = get_policy(vec["policy"])
    exp = vec["expected"]
    if "plays" not in vec:  # per-level form (EnvironmentScoreCalculator)
        res = score_level_actions(vec["level_actions"], vec["levels_completed"], vec["baseline_actions"], policy)
        assert_close(res.score, exp["game_score"], "game_score")
        assert_close(res.level_scores, exp["level_scores"], "level_scores")
        assert_close(res.level_actions, exp["level_actions"], "level_actions")
        if "cutoff_level" in exp:
            assert res.cutoff_level == exp["cutoff_level"]
        return

    plays = [play_from_vector(p) for p in vec["plays"]]
    game = score_game(GAME_ID, plays, vec["baseline_actions"], policy,
                      has_metadata=not vec.get("metadata_missing", False))
    assert game.policy_id == vec["policy"]
    assert_close(game.score, exp["game_score"], "game_score")
    assert game.best_play_index == exp["best_play_index"]
    assert_close(game.level_scores, exp["level_scores"], "level_scores")
    assert_close(game.level_actions, exp["level_actions"], "level_actions")
    assert game.message == exp.get("message")
    if "cutoff_level" in exp:
        assert game.cutoff_level == exp["cutoff_level"]
    assert len(game.plays) == len(exp["runs"])
    for i, (run, erun) in enumerate(zip(game.plays, exp["runs"], strict=True)):
        assert run.message == erun.get("message"), f"runs[{i}].message"
        actual = {key: getattr(run, key) for key in erun}
        assert_close(actual, erun, f"runs[{i}]")


@pytest.mark.parametrize("vec", VECTORS["suite_vectors"], ids=[v["name"] for v in VECTORS["suite_vectors"]])
def test_suite_vector(vec):
    policy = get_policy(vec["policy"])
    exp = vec["expected"]
    games = [
        GameInput(g["game_id"], None if g["plays"] is None else tuple(play_from_vector(p) for p in g["plays"]),
                  None if g["baseline_actions"] is None else tuple(g["baseline_actions"]))
        for g in vec["games"]
    ]
    suite = score_suite(games, policy, competition_mode=vec["competition_mode"])
    assert_close(suite.game_scores, exp["game_scores"], "game_scores")
    assert_close(suite.total_score, exp["total_score"], "total_score")
    for key in ("total_environments", "total_levels_completed", "total_levels", "total_actions"):
        assert getattr(suite, key) == exp[key], key

    # Same numbers through the scorecard builder (cards + metadata baselines).
    cards = [Card(g["game_id"], tuple(play_from_vector(p) for p in g["plays"]))
             for g in vec["games"] if g["plays"]]
    infos = {g["game_id"]: g["baseline_actions"] for g in vec["games"]}
    sc = build_scorecard("suite-" + vec["name"], cards, infos, policy, competition_mode=vec["competition_mode"])
    assert_close(sc.score, exp["total_score"], "scorecard.score")
    assert {g.game_id for g in sc.environments} == set(exp["game_scores"])
    assert sc.suite.total_levels == exp["total_levels"]


@pytest.mark.parametrize("vec", VECTORS["baseline_vectors"], ids=[v["name"] for v in VECTORS["baseline_vectors"]])
def test_baseline_vector(vec):
    exp = vec["expected"]
    if "participants" in vec:
        costs = level_costs_from_participants([p["actions_by_level"] for p in vec["participants"]],
                                              vec["n_levels"])
    else:
        costs = vec["level_costs"]
    assert costs == exp["level_costs"]
    for rule, minimum in vec["min_completers"].items():
        levels = baselines_from_level_costs(costs, rule, minimum)
        assert [lv.n_completers for lv in levels] == exp["n_completers"]
        assert [lv.value for lv in levels] == exp[rule], rule
        assert [lv.too_few for lv in levels] == [v is None for v in exp[rule]]
