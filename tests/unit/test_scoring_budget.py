"""The per-level budget of arc-agi-3/2026-03, ceil(5 * b_l) (spec/scoring.md A.2 and B.6), checked on the scoring
vectors: every budget the scorers report, and every cutoff they apply, is derived here from the vector's own
baselines and cumulative pairs with the spec's rules (pairs by position, B.2), not taken from the scorer.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from pipeline.recordings.counting import CardPlay
from pipeline.scoring import get_policy, score_level_actions, score_play
from pipeline.scoring.vectorized import score_plays_frame

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
VECTORS = json.loads((SHARED / "spec" / "scoring-vectors.json").read_text())
POLICY = get_policy("arc-agi-3/2026-03")
CASES = [v for v in VECTORS["vectors"] if v["policy"] == POLICY.policy_id and v.get("plays")
         and v.get("baseline_actions")]


def _per_level(play: dict, n: int) -> tuple[list[int], int]:
    """spec B.2: completed levels from the pairs by position, the remainder on the next level."""
    cum = [c for _, c in play["actions_by_level"]][:n]
    actions = [b - a for a, b in zip([0, *cum], cum, strict=False)]
    if len(actions) < n:
        actions.append(play["actions"] - (cum[-1] if cum else 0))
    return actions + [0] * (n - len(actions)), len(cum)


def test_the_vectors_hold_budget_cases():
    names = {v["name"] for v in CASES}
    assert {"2603-cutoff-exactly-5x", "2603-cutoff-exceeded-level1", "2603-cutoff-exceeded-later-level"} <= names


@pytest.mark.parametrize("vector", CASES, ids=lambda v: v["name"])
def test_budgets_and_cutoffs_follow_ceil_5b(vector):
    base = vector["baseline_actions"]
    budgets = [math.ceil(5 * b) for b in base]
    for p in vector["plays"]:
        play = CardPlay(guid=None, actions=p["actions"], resets=p["resets"], state=p["state"],
                        levels_completed=p["levels_completed"],
                        actions_by_level=tuple(tuple(x) for x in p["actions_by_level"]))
        actions, done = _per_level(p, len(base))
        over = [i + 1 for i in range(done) if actions[i] > budgets[i]]
        cutoff = over[0] if over else None
        scored = score_play(play, base, POLICY)
        assert list(scored.level_budgets) == budgets
        assert scored.cutoff_level == cutoff
        # Every level from the cutoff on scores 0; a level completed on exactly its budget-th action is scored.
        for i, s in enumerate(scored.level_scores):
            if cutoff is not None and i + 1 >= cutoff:
                assert s == 0.0
            elif i < done:
                assert math.isclose(s, min(100.0, 100 * (base[i] / actions[i]) ** 2), abs_tol=1e-9)
        # The set-based scorer (out_arc3__level_scores) reports the same budgets and scores.
        plays = pl.DataFrame([{"play_id": "p", "game_id": "g", "run_order": 0, "actions": p["actions"],
                               "cumulative": [c for _, c in p["actions_by_level"]]}],
                             schema={"play_id": pl.String, "game_id": pl.String, "run_order": pl.Int64,
                                     "actions": pl.Int64, "cumulative": pl.List(pl.Int64)})
        games = pl.DataFrame([{"game_id": "g", "baseline_actions": base}],
                             schema={"game_id": pl.String, "baseline_actions": pl.List(pl.Int64)})
        levels = score_plays_frame(plays, games, POLICY).levels.sort("level_index")
        assert levels["level_budget"].to_list() == budgets
        assert all(math.isclose(a, b, abs_tol=1e-9) for a, b in zip(levels["level_score"].to_list(),
                                                                     scored.level_scores, strict=True))
        if "cutoff_level" in vector.get("expected", {}):
            assert vector["expected"]["cutoff_level"] == cutoff


def test_the_budget_is_a_ceiling_for_fractional_baselines():
    # A recomputed baseline can be a mean; ceil(5 * 2.5) = 13: the 13th action completes the level, the 14th
    # would not have been reached.
    assert POLICY.level_budget(2.5) == 13
    at = score_level_actions([13], 1, [2.5], POLICY)
    assert at.cutoff_level is None and math.isclose(at.level_scores[0], 100 * (2.5 / 13) ** 2)
    over = score_level_actions([14], 1, [2.5], POLICY)
    assert over.cutoff_level == 1 and over.level_scores == (0.0,)
    # Policies without a cutoff report no budget.
    assert get_policy("arc-agi-3/2026-04").level_budget(10) is None
    assert score_level_actions([1000], 1, [10], "arc-agi-3/2026-04").level_budgets is None
