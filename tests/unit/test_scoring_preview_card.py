"""A 2025 preview scorecard cannot be scored from the card (formats.md A.4).

formats.md A.4: "The preview scorecard card had no `actions_by_level`: `Card{game_id, total_plays, scores[],
states[], actions[], resets[]}`" and "per-level costs must be derived from `score` transitions because the card
has no `actions_by_level`". Before, `score` read such a card as a run with no completed level and scored it 0,
exit 0, without a word; ingest stored it without a flag.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.ingest.runner import prepare_file

PREVIEW_CARD_FLAG = "preview_card_no_level_costs"  # schemas.arc3.RECORDING_FLAGS

runner = CliRunner()
PREVIEW_GAME = "vc33-051d064efa38"
PREVIEW_CARD = {"game_id": PREVIEW_GAME, "total_plays": 1, "scores": [2], "states": ["NOT_FINISHED"],
                "actions": [6], "resets": [0]}
# A current card for another game: one level completed in 12 actions. The reference CSV's second-best baseline
# of vc33-9851e02b is [6, 13, 31, 59, 92, 24, 82] (7 levels).
GOOD_GAME = "vc33-9851e02b"
GOOD_CARD = {"game_id": GOOD_GAME, "total_plays": 1, "guids": ["abababab-0000-4000-8000-000000000001"],
             "levels_completed": [1], "states": ["NOT_FINISHED"], "actions": [12], "actions_by_level": [[[1, 12]]],
             "resets": [0]}


def _wrapper(path: Path, cards: dict) -> Path:
    path.write_text(json.dumps({"won": 0, "played": len(cards), "total_actions": 18, "score": 3, "cards": cards}))
    return path


def test_a_preview_card_run_is_left_out_with_the_reason_and_the_other_cards_still_score(tmp_path):
    card = _wrapper(tmp_path / "mixed.json", {PREVIEW_GAME: PREVIEW_CARD, GOOD_GAME: GOOD_CARD})
    out = tmp_path / "out"
    result = runner.invoke(app, ["--plain", "score", str(card), "--policy", "arc-agi-3/2025-preview",
                                 "--games", str(tmp_path), "--out", str(out)])
    assert result.exit_code == 3, result.output  # rejected input
    assert "card run left out (slot 0 of vc33-051d064efa38)" in result.output
    assert "no per-level costs" in result.output
    doc = json.loads((out / "scorecard__arc-agi-3_2025-preview.json").read_text())
    scores = {e["id"]: e["score"] for e in doc["environments"]}
    # The preview card is not a game of the scorecard (before: scored 0.0). The good card, by hand under the 2025
    # preview policy: level 1 scores 100 * min(1, 6/12) = 50, plain mean over the 7 levels: 50 / 7.
    assert PREVIEW_GAME not in scores
    assert abs(scores[GOOD_GAME] - 50 / 7) < 1e-9


def test_a_preview_card_alone_is_said_and_exits_3(tmp_path):
    card = _wrapper(tmp_path / "preview_card.json", {PREVIEW_GAME: PREVIEW_CARD})
    result = runner.invoke(app, ["--plain", "score", str(card), "--policy", "arc-agi-3/2025-preview",
                                 "--games", str(tmp_path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output
    assert "formats.md A.4" in result.output


def test_ingest_flags_a_preview_card_and_score_db_says_why_it_cannot_score_it(tmp_path):
    card = _wrapper(tmp_path / "preview_card.json", {PREVIEW_GAME: PREVIEW_CARD})
    prepared = prepare_file(card, run_id="test")
    assert prepared.failure is None and prepared.output is not None
    assert PREVIEW_CARD_FLAG in prepared.output.flags
    (row,) = prepared.output.tables["core_arc3__card_plays"].to_dicts()
    assert row["flags"] == [PREVIEW_CARD_FLAG] and row["card_score"] == 2

    db = tmp_path / "p.duckdb"
    ingested = runner.invoke(app, ["--plain", "ingest", str(card), "--db", str(db)])
    assert ingested.exit_code == 0, ingested.output
    assert "2025 preview card: no per-level costs" in ingested.output
    scored = runner.invoke(app, ["--plain", "score", "--db", str(db), "--policy", "arc-agi-3/2025-preview",
                                 "--games", str(tmp_path), "--out", str(tmp_path / "out")])
    assert scored.exit_code == 3, scored.output
    assert "card run left out (slot 0 of vc33-051d064efa38)" in scored.output
