"""Scorecards as scoring input (pipeline/scoring/card_input.py): the samples' official scored entries reproduced
from their cards, stated values compared with recomputed ones, malformed cards quarantined.

The sidecars' `scored.environment` entries are the official toolkit's (arc-agi 0.9.8). Two cards are written
from each sidecar: the scored summary as the toolkit dumps it, and the bare per-game `Card`. The runs are
rebuilt from the summary's `level_actions` / the card's cumulative pairs, scored again, and must give the
toolkit's numbers; the stated numbers play no part in the recomputation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.scoring.baseline_sources import BaselineSource
from pipeline.scoring.card_input import (
    SUMMARY_ONLY,
    TWO_LEVELS_NOTE,
    card_baseline_source,
    card_recordings,
    read_card_files,
)
from pipeline.scoring.policies import get_policy
from pipeline.scoring.run import ScoreRequest, score_recordings
from tests.sidecars import assert_close

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"
TOOLKIT = sorted((SAMPLES / "toolkit").glob("*.expected.json"))
# Every sample with an official card and scored entry: toolkit, fixtures (conformance games), human, benchmarking.
OFFICIAL = sorted(p for p in SAMPLES.rglob("*.expected.json")
                  if {"card", "scored"} <= json.loads(p.read_text()).keys())
POLICY = get_policy("arc-agi-3/2026-04")


def _summary(doc: dict) -> dict:
    env = doc["scored"]["environment"]
    return {"card_id": "official-" + doc["guid"][:8], "score": doc["scored"]["scorecard_score"],
            "environments": [env], "competition_mode": False}


def _sidecar_baselines(docs: list[dict]) -> BaselineSource:
    games = {d["game_id"]: (tuple(d["baseline_actions"]), None, ()) for d in docs}
    return BaselineSource("baselines-dir", "sidecars", None, lambda _rule: games)


def _score(paths: list[Path], sources: list[BaselineSource] | None = None, policy=POLICY):
    found = read_card_files(paths)
    own = card_baseline_source(found.runs)
    request = ScoreRequest(policies=[policy], baseline_sources=[s for s in [*(sources or []), own] if s],
                           card_runs=found.runs, include_unknown_games=False)
    return found, score_recordings(card_recordings(found.runs), request)


def _runs(result) -> dict[str, list]:
    sc = result.policies[0].scorecard
    return {g.game_id: g for g in sc.environments}


@pytest.mark.parametrize("sidecar", OFFICIAL, ids=lambda p: p.name.removesuffix(".expected.json")[:40])
def test_official_scored_entries_reproduced_from_their_cards(sidecar, tmp_path):
    doc = json.loads(sidecar.read_text())
    expected = doc["scored"]["environment"]
    summary, bare = tmp_path / "summary.json", tmp_path / "card.json"
    summary.write_text(json.dumps(_summary(doc)))
    bare.write_text(json.dumps(doc["card"]))
    for path in (summary, bare):
        # Baselines: the card's own (a summary that could score the game states them), else the sidecar's.
        found, result = _score([path], [_sidecar_baselines([doc])] if path == bare or any(
            -1 in r["level_baseline_actions"] for r in expected["runs"]) else None)
        assert found.problems == []
        game = _runs(result)[doc["game_id"]]
        assert len(game.plays) == len(expected["runs"])
        for run, exp in zip(game.plays, expected["runs"], strict=True):
            assert_close(run.score, exp["score"], f"{path.name}.score")
            assert_close(list(run.level_scores), exp["level_scores"], f"{path.name}.level_scores")
            assert list(run.level_actions) == exp["level_actions"]
            assert list(run.level_baseline_actions) == exp["level_baseline_actions"]
            assert run.message == exp.get("message")
        assert_close(game.score, doc["scored"]["game_score"])
        assert {c.status for c in result.checks} == {"summary_only"}
        card_doc = json.loads(result.policies[0].scorecard_json)["card_inputs"]
        assert card_doc["note"].startswith(SUMMARY_ONLY)
        assert all("differences" not in r for r in card_doc["runs"]), card_doc  # the toolkit's own numbers agree


def test_a_card_whose_stated_score_disagrees_with_its_levels(tmp_path):
    doc = json.loads((SAMPLES / "toolkit" / "bt11_win_gameover_levelreset.frames.expected.json").read_text())
    card = _summary(doc)
    run = card["environments"][0]["runs"][0]
    run["level_scores"][1] = 100.0  # level 2 took 17 actions against a baseline of 8: it cannot score 100
    run["score"] = 100.0
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(card))
    _, result = _score([path])
    entry = json.loads(result.policies[0].scorecard_json)["card_inputs"]["runs"][0]
    diffs = entry["differences"]
    assert [d["level_index"] for d in diffs] == [2, None]
    assert diffs[0]["stated"] == 100.0 and abs(diffs[0]["recomputed"] - 100 * (8 / 17) ** 2) < 1e-9
    assert "does not follow from the card's own level actions and baselines" in diffs[0]["cause"]
    assert entry["stated_score"] == 100.0 and abs(entry["score"] - 89.61937716262976) < 1e-9


def test_other_baselines_and_policies_are_named_as_the_cause(tmp_path):
    doc = json.loads((SAMPLES / "toolkit" / "bt11_win_gameover_levelreset.frames.expected.json").read_text())
    path = tmp_path / "card.json"
    path.write_text(json.dumps(_summary(doc)))
    other = BaselineSource("baselines-csv", "other.csv", None,
                           lambda _rule: {doc["game_id"]: ((4, 17, 16, 20, 24), None, ())})
    _, result = _score([path], [other])
    assert result.policies[0].baselines[doc["game_id"]].source == "baselines-csv"
    diffs = json.loads(result.policies[0].scorecard_json)["card_inputs"]["runs"][0]["differences"]
    assert diffs[0]["level_index"] == 2 and diffs[0]["recomputed"] == 100.0
    assert diffs[0]["cause"].startswith("baselines: the card's baseline for level 2 is 8, baselines-csv says 17")
    _, result = _score([path], policy=get_policy("arc-agi-3/2025-preview"))
    diffs = json.loads(result.policies[0].scorecard_json)["card_inputs"]["runs"][0]["differences"]
    assert diffs and all(d["cause"].startswith("policy: the card names no policy: the toolkit's current "
                                               "arc-agi-3/2026-04 assumed, this under arc-agi-3/2025-preview")
                         for d in diffs)
    # An arcstudy scorecard names its policy: tu93 scored under 2026-03 (levels above the baseline capped at 100)
    # and re-scored under 2026-04 (115).
    from pipeline.recordings.counting import Card
    from pipeline.scoring import build_scorecard, scorecard_to_dict

    tu93 = json.loads((SAMPLES / "toolkit" / "tu93_explore_reset_solve_5levels.noframes.expected.json").read_text())
    card = scorecard_to_dict(build_scorecard("old", [Card.from_dict(tu93["card"])],
                                             {tu93["game_id"]: tu93["baseline_actions"]}, "arc-agi-3/2026-03"))
    assert card["scoring_policy"] == "arc-agi-3/2026-03"
    path.write_text(json.dumps(card))
    _, result = _score([path])
    diffs = json.loads(result.policies[0].scorecard_json)["card_inputs"]["runs"][0]["differences"]
    assert diffs and all(d["cause"] == "policy: the card was scored under arc-agi-3/2026-03, this under "
                                      "arc-agi-3/2026-04" for d in diffs)


def test_two_levels_completed_at_once_is_named(tmp_path):
    card = {"game_id": "bt11-fd9df0622a1a", "total_plays": 1, "guids": ["g"], "levels_completed": [5],
            "states": ["WIN"], "actions": [60], "actions_by_level": [[[1, 4], [2, 12], [3, 28], [5, 60]]],
            "resets": [0]}
    path = tmp_path / "jump.json"
    path.write_text(json.dumps(card))
    found, result = _score([path], [_sidecar_baselines([{"game_id": "bt11-fd9df0622a1a",
                                                          "baseline_actions": [4, 8, 16, 20, 24]}])])
    assert found.runs[0].notes == (TWO_LEVELS_NOTE,)
    run = _runs(result)["bt11-fd9df0622a1a"].plays[0]
    # Pairs by position: 4 entries, so level 5 is not completed although the play won (the toolkit's numbers).
    assert run.levels_completed == 4 and run.level_scores[4] == 0.0
    assert TWO_LEVELS_NOTE in result.checks[0].detail


BAD_RUNS = {
    "missing level_actions": ({"guid": "a", "score": 0.0, "levels_completed": 0, "actions": 3, "resets": 0,
                               "state": "NOT_FINISHED", "completed": False}, "missing level_actions"),
    "negative count": ({"guid": "b", "score": 0.0, "levels_completed": 1, "actions": 3, "resets": 0,
                        "state": "NOT_FINISHED", "completed": False, "level_scores": [0.0, 0.0],
                        "level_actions": [-2, 5], "level_baseline_actions": [4, 8]}, "negative"),
    "non-integer count": ({"guid": "c", "score": 0.0, "levels_completed": 1, "actions": 3, "resets": 0,
                           "state": "NOT_FINISHED", "completed": False, "level_scores": [0.0, 0.0],
                           "level_actions": [2.5, 1], "level_baseline_actions": [4, 8]}, "not a whole number"),
    "more level_actions than baselines": ({"guid": "e", "score": 0.0, "levels_completed": 1, "actions": 9,
                                           "resets": 0, "state": "NOT_FINISHED", "completed": False,
                                           "level_scores": [0.0, 0.0, 0.0], "level_actions": [3, 3, 3],
                                           "level_baseline_actions": [4, 8]}, "more levels (3 level_actions) than "
                                                                              "baselines (2"),
    "state outside the vocabulary": ({"guid": "f", "score": 0.0, "levels_completed": 0, "actions": 3, "resets": 0,
                                      "state": "PLAYING", "level_scores": [0.0, 0.0], "level_actions": [3, 0],
                                      "level_baseline_actions": [4, 8]}, "state 'PLAYING' is not one of"),
    # past the bound a metadata.json baseline has at ingest (2**62 once made the two scorers disagree)
    "baseline past the metadata bound": ({"guid": "g", "score": 0.0, "levels_completed": 1, "actions": 6,
                                          "resets": 0, "state": "NOT_FINISHED", "completed": False,
                                          "level_scores": [0.0, 0.0], "level_actions": [3, 3],
                                          "level_baseline_actions": [2**62, 8]},
                                         f"level_baseline_actions[0] = {2**62} is above 1,000,000,000 actions"),
    "more levels than baselines": ({"guid": "d", "score": 0.0, "levels_completed": 3, "actions": 9, "resets": 0,
                                    "state": "NOT_FINISHED", "completed": False, "level_scores": [0.0, 0.0],
                                    "level_actions": [3, 3], "level_baseline_actions": [4, 8]},
                                   "more than its 2 levels"),
}


@pytest.mark.parametrize("case", sorted(BAD_RUNS))
def test_malformed_runs_are_quarantined_and_good_runs_still_score(case, tmp_path):
    doc = json.loads((SAMPLES / "toolkit" / "bt11_win_gameover_levelreset.frames.expected.json").read_text())
    card = _summary(doc)
    bad, reason = BAD_RUNS[case]
    card["environments"].append({"id": "tu93-0768757b", "runs": [bad]})
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(card))
    found, result = _score([path])
    assert len(found.problems) == 1 and found.problems[0][0] == path
    assert reason in found.problems[0][1], found.problems
    assert [r.game_id for r in found.runs] == [doc["game_id"]]
    assert abs(result.policies[0].scorecard.score - doc["scored"]["game_score"]) < 1e-9


def test_malformed_files_and_bare_cards(tmp_path):
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "neg.json").write_text(json.dumps({
        "game_id": "bt11-fd9df0622a1a", "total_plays": 1, "guids": ["g"], "levels_completed": [1],
        "states": ["NOT_FINISHED"], "actions": [-4], "actions_by_level": [[[1, 4]]], "resets": [0]}))
    (tmp_path / "frac.json").write_text(json.dumps({
        "game_id": "bt11-fd9df0622a1a", "total_plays": 1, "guids": ["g"], "levels_completed": [1],
        "states": ["NOT_FINISHED"], "actions": [6.5], "actions_by_level": [[[1, 4]]], "resets": [0]}))
    (tmp_path / "other.json").write_text(json.dumps({"hello": 1}))
    (tmp_path / "nogame.json").write_text(json.dumps({
        "game_id": None, "total_plays": 1, "guids": ["g"], "levels_completed": [1], "states": ["WIN"],
        "actions": [3], "actions_by_level": [[[1, 3]]], "resets": [0]}))
    found = read_card_files(sorted(tmp_path.glob("*.json")))
    reasons = {p.name: r for p, r in found.problems}
    assert found.runs == []
    assert "not valid JSON" in reasons["broken.json"]
    assert "is negative" in reasons["neg.json"]
    assert "not a whole number" in reasons["frac.json"]
    assert reasons["other.json"].startswith("not a scorecard")
    assert "names no game_id" in reasons["nogame.json"]


def test_an_environment_without_a_runs_list_or_with_a_game_id_of_the_wrong_form_is_refused(tmp_path):
    """`runs: null` was read as no runs, without a word; a game id of the wrong form ("TU93-...") passed the
    reading and aborted the whole score run when its rows were written (the good runs lost with it)."""
    doc = json.loads((SAMPLES / "toolkit" / "bt11_win_gameover_levelreset.frames.expected.json").read_text())
    card = _summary(doc)
    card["environments"] += [{"id": "tu93-0768757b", "runs": None},
                             {"id": "TU93-0768757b", "runs": [dict(card["environments"][0]["runs"][0])]}]
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(card))
    found, result = _score([path])
    reasons = [r for p, r in found.problems if p == path]
    assert len(reasons) == 2, found.problems
    assert "environment tu93-0768757b: `runs` is null, not a list of runs" in reasons[0]
    assert "game id 'TU93-0768757b' is not of the form <code>-<version>" in reasons[1]
    assert {r.game_id for r in found.runs} == {doc["game_id"]}
    assert abs(result.policies[0].scorecard.score - doc["scored"]["game_score"]) < 1e-9


def test_a_scorecard_with_no_run_at_all_is_said(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"card_id": "c", "score": 0.0, "environments": [{"id": "tu93-0768757b", "runs": []}]}))
    found = read_card_files([path])
    assert found.runs == [] and found.problems == [(path, "no run to score: the scorecard's environments hold no "
                                                          "runs")]
