"""Why two scorecards differ (pipeline/scoring/compare.py): every cause named, and the contributions add up to the
difference of the totals. The scorecards are scored here from the toolkit samples' cards with the real scorer,
under the rules each cause stands for (another policy, other baselines, other counts, a play left out)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from pipeline.recordings.counting import Card
from pipeline.scoring import build_scorecard, scorecard_to_dict
from pipeline.scoring.compare import compare_scorecards, competition_view

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "toolkit"


def _doc(name: str) -> dict:
    return json.loads((SAMPLES / f"{name}.expected.json").read_text())


BT11 = _doc("bt11_win_gameover_levelreset.frames")
TU93 = _doc("tu93_explore_reset_solve_5levels.noframes")
VC33 = _doc("vc33_two_levels_then_random.frames")


def _card(docs: list[dict], policy: str = "arc-agi-3/2026-04", baselines: dict | None = None) -> dict:
    cards = [Card.from_dict(d["card"]) for d in docs]
    infos = {d["game_id"]: (baselines or {}).get(d["game_id"], d["baseline_actions"]) for d in docs}
    return scorecard_to_dict(build_scorecard("c", cards, infos, policy))


def _adds_up(cmp) -> None:
    assert math.isclose(cmp.other_total + sum(s["contribution"] for s in cmp.steps), cmp.this_total, abs_tol=1e-9)


def test_official_cards_agree_with_their_rescoring():
    official = {"score": BT11["scored"]["scorecard_score"], "environments": [BT11["scored"]["environment"]]}
    cmp = compare_scorecards(official, _card([BT11]))
    _adds_up(cmp)
    assert all(abs(s["contribution"]) < 1e-9 for s in cmp.steps) and "They agree." in cmp.verdict()


def test_policy_baselines_counting_and_left_out_are_told_apart():
    other = _card([BT11, TU93, VC33])
    # Policy: the same cards under 2026-03 (cap 100, no game cap): tu93 and vc33 move, bt11 does not.
    cmp = compare_scorecards(other, _card([BT11, TU93, VC33], "arc-agi-3/2026-03"))
    _adds_up(cmp)
    assert set(cmp.by_cause) - {"denominator", "denominator (here only)"} == {"policy"}
    assert any("level cap" in r["cause"] for r in cmp.rows if r["level_index"] is not None)
    # Baselines: bt11 against another level-2 baseline.
    cmp = compare_scorecards(other, _card([BT11, TU93, VC33], baselines={BT11["game_id"]: [4, 17, 16, 20, 24]}))
    _adds_up(cmp)
    level2 = [r for r in cmp.rows if r["game_id"] == BT11["game_id"] and r["level_index"] == 2]
    assert level2 and level2[0]["cause"] == "baselines: 8 there, 17 here"
    # Counting: the level-reset charged elsewhere (level 2 costs 16 instead of 17).
    recounted = json.loads(json.dumps(BT11))
    recounted["card"]["actions_by_level"] = [[[1, 4], [2, 20], [3, 36], [4, 56], [5, 80]]]
    recounted["card"]["actions"] = [80]
    cmp = compare_scorecards(other, _card([recounted, TU93, VC33]))
    _adds_up(cmp)
    assert set(cmp.by_cause) - {"denominator", "denominator (here only)"} == {"counting"}
    # Plays left out here: vc33's only play excluded (divergent): the environment is missing here.
    here = _card([BT11, TU93])
    here["verification"] = {"replay_checks": [{"game_id": VC33["game_id"], "excluded": True,
                                               "exclusion_reason": "replay diverged (line 5, field frame)"}]}
    cmp = compare_scorecards(other, here)
    _adds_up(cmp)
    left = next(s for s in cmp.steps if s["cause"] == "plays left out")
    assert left["environments"] == [VC33["game_id"]] and "replay diverged" in left["detail"]
    assert math.isclose(left["contribution"], cmp.this_total - cmp.other_total, abs_tol=1e-9)


def test_competition_view_counts_every_environment_of_the_set():
    view = competition_view({"a-1": 60.0, "b-1": 30.0, "z-9": 90.0}, ["a-1", "b-2", "c-1", "d-1"])
    # b-1 stands for b-2 (another version of the environment); z-9 is outside the set.
    assert view["n_played"] == 2 and view["unplayed"] == ["c-1", "d-1"] and view["outside_set"] == ["z-9"]
    assert math.isclose(view["competition_total"], 90.0 / 4) and math.isclose(view["local_total"], 60.0)


def test_a_card_to_compare_with_is_checked(tmp_path):
    import pytest

    from pipeline.scoring.compare import CompareError, read_comparison_card

    bad = {"score": 1.0, "environments": [{"id": "a-1", "score": 1.0, "runs": [{"score": 1.0,
                                                                               "level_scores": ["x"]}]}]}
    cases = {"not json": "{", "no environments": json.dumps({"cards": {}}), "bad level": json.dumps(bad),
             "bad total": json.dumps({"score": "high", "environments": []})}
    for name, text in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        with pytest.raises(CompareError):
            read_comparison_card(path)
