"""Scored-summary JSON (formats.md C.2): build from cards, deterministic serialization, parse round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.scoring import (
    Card,
    CardPlay,
    build_scorecard,
    no_metadata_message,
    scorecard_from_dict,
    scorecard_from_json,
    scorecard_to_dict,
    scorecard_to_json,
)
from pipeline.scoring.scorecard import environment_from_dict

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SAMPLES = SHARED / "samples" / "arc-agi-3"
SIDECARS = [json.loads(p.read_text()) for p in sorted(SAMPLES.rglob("*.expected.json"))]


def one_card_per_game():
    cards, infos = {}, {}
    for exp in SIDECARS:
        gid = exp["game_id"]
        if gid not in cards:
            cards[gid] = Card.from_dict(exp["card"])
            infos[gid] = exp["baseline_actions"]
    return cards, infos


@pytest.mark.parametrize("policy_id", ["arc-agi-3/2026-04", "arc-agi-3/2026-03", "arc-agi-3/2025-preview"])
def test_round_trip_and_determinism(policy_id):
    cards, infos = one_card_per_game()
    tags = {gid: (["keyboard"] if i % 2 else ["click", "keyboard"]) for i, gid in enumerate(sorted(cards))}
    sc = build_scorecard("card-1", list(cards.values()), infos, policy_id, game_tags=tags, tags=["agent"],
                         source_url="https://example.invalid", opaque={"run": 1})
    text = scorecard_to_json(sc)
    again = build_scorecard("card-1", list(reversed(list(cards.values()))), infos, policy_id, game_tags=tags,
                            tags=["agent"], source_url="https://example.invalid", opaque={"run": 1})
    assert scorecard_to_json(again) == text
    parsed = scorecard_from_json(text)
    assert parsed == sc
    assert scorecard_to_json(parsed) == text
    d = json.loads(text)
    assert [e["id"] for e in d["environments"]] == sorted(cards)
    assert d["total_environments"] == len(cards)
    assert d["scoring_policy"] == policy_id
    assert {t["id"] for t in d["tags_scores"]} == {"click", "keyboard"}
    assert all(isinstance(e["score"], float) for e in d["environments"])


def test_the_text_is_json_dumps_text_written_piece_by_piece():
    """The scorecard's text is written a piece at a time (json.dumps with an indent listed every piece first: 6 GB
    for a card of a million runs); the text is the same, byte for byte, non-ASCII and tiny floats included, and
    a NaN is still refused."""
    cards, infos = one_card_per_game()
    sc = build_scorecard("card-é", list(cards.values()), infos, "arc-agi-3/2026-04", opaque={"note": "naïve ✓"})
    extra = {"verification": {"tiny": 1e-07, "big": 1e16, "third": 1 / 3, "empty": [], "none": {}}}
    assert scorecard_to_json(sc, extra=extra) == json.dumps(
        scorecard_to_dict(sc, extra), sort_keys=True, indent=2, allow_nan=False, ensure_ascii=False) + "\n"
    with pytest.raises(ValueError, match="not JSON compliant"):
        scorecard_to_json(sc, extra={"verification": {"x": float("nan")}})


def test_parse_toolkit_environment_entries():
    """Sidecar ``scored.environment`` entries are toolkit output; they parse strictly (aggregates consistent)."""
    for exp in SIDECARS:
        env = exp["scored"]["environment"]
        game = environment_from_dict(env)
        assert game.score == exp["scored"]["game_score"]
        assert game.best_play_index == exp["scored"]["best_run_index"]


def test_strict_parse_rejects_inconsistent_aggregates():
    cards, infos = one_card_per_game()
    d = scorecard_to_dict(build_scorecard("c", list(cards.values()), infos))
    d["environments"][0]["actions"] += 1
    with pytest.raises(ValueError):
        scorecard_from_dict(d)
    scorecard_from_dict(d, strict=False)


def test_no_metadata_and_competition_mode():
    play = CardPlay("g", 10, 0, "NOT_FINISHED", 1, ((1, 7),))
    sc = build_scorecard("c", [Card("zz99-1", (play,))], {"aa01-1": [5, 5]}, competition_mode=True)
    envs = {g.game_id: g for g in sc.environments}
    assert set(envs) == {"zz99-1", "aa01-1"}
    assert envs["zz99-1"].message == no_metadata_message("zz99-1")
    assert envs["aa01-1"].plays[0].actions == 0 and envs["aa01-1"].score == 0.0
    run = scorecard_to_dict(sc)["environments"][1]["runs"][0]
    assert run["level_baseline_actions"] == [-1, -1] and run["id"] == "zz99-1"
    with pytest.raises(ValueError):
        build_scorecard("c", [], {"aa01-1": [5]}, "arc-agi-3/2026-03", competition_mode=True)
