"""Human scorecard summaries as baseline evidence (pipeline/transforms/baselines.py summary_players): which
card slots count as first-run players, and how they enter the level baselines beside recordings."""

from __future__ import annotations

import polars as pl

from pipeline.core.config import load_config, resolve
from pipeline.transforms import baselines as bl
from schemas.validate import conform

GAME = "sm01-00000001"


def _slot(file_id: str, slot: int, guid: str | None, pairs: list[list[int]], actions: int | None = None,
          play_id: str | None = None, score: float | None = None, line: int | None = None) -> dict:
    return {"file_id": file_id, "line_number": line, "game_id": GAME, "slot_index": slot, "guid": guid,
            "play_id": play_id, "is_file_play": play_id is not None,
            "card_actions": actions if actions is not None else (pairs[-1][1] + 1 if pairs else 3),
            "card_resets": 0, "levels_completed": len(pairs), "card_state": "NOT_FINISHED",
            "card_actions_by_level": pairs, "card_score": score, "flags": []}


def _plays(*pairs: tuple[str, str]) -> pl.DataFrame:
    return pl.DataFrame(list(pairs), schema={"file_id": pl.String, "guid": pl.String}, orient="row")


def _players(slots: list[dict], plays: pl.DataFrame, config=None, files=None) -> dict[str, list]:
    df = bl.summary_players(conform("core_arc3__card_plays", slots), plays, config or load_config(), files)
    return {p: pairs for p, pairs in df.select("baseline_player_id", "card_actions_by_level").iter_rows()}


def test_which_card_slots_are_players():
    slots = [
        # a recording's card: its own slot is counted through the recording, the other slot is the same
        # participant's abandoned session: neither is a summary player
        _slot("rec", 0, "g-old", [[1, 4]]), _slot("rec", 1, "g-rec", [[1, 9]], play_id="g-rec/0"),
        # stand-alone cards
        _slot("card-a", 0, "g-a", [[1, 10], [2, 30]]),
        _slot("card-a", 1, "g-a", [[1, 2]]),          # the same guid after a full reset: not a first run
        _slot("card-a", 2, "g-stub", [], actions=0),  # zero-action stub: no play
        _slot("card-b", 0, "g-a", [[1, 10], [2, 30]]),  # the same card ingested twice: counted once
        _slot("card-c", 0, "g-rec", [[1, 9]]),        # a recorded guid: counted from its recording only
        _slot("card-d", 0, None, [[1, 6]]),           # no guids, one slot: a player
        _slot("card-e", 0, None, [[1, 6]]), _slot("card-e", 1, None, [[1, 5]]),  # replays or players? none
        _slot("card-f", 0, "g-old-preview", [], score=3.0),  # 2025 preview card: no per-level actions
    ]
    got = _players(slots, _plays(("rec", "g-rec")))
    assert got == {"g-a": [[1, 10], [2, 30]], "card-d#0": [[1, 6]]}


def test_a_recording_without_frame_lines_counts_its_own_slot():
    own = "92a1d4d1-9b0c-4d2a-bdcd-02c51c743ead"
    slots = [
        # the summary line (line 1) of <own>.recording.jsonl whose frame lines are missing: slot 0 is another
        # session of the same participant, slot 1 the file's own
        _slot("noframes", 0, "ac90af35-2e72-45ca-810d-f36a3932795d", [], actions=1, line=1),
        _slot("noframes", 1, own, [[1, 9]], line=1),
        # a summary line in a file named without a guid: the single slot with actions (spec/formats.md §A.3)
        _slot("single", 0, "g-stub", [], actions=0, line=1), _slot("single", 1, "g-one", [[1, 4]], line=1),
        # ... and when two slots have actions, neither can be told to be the file's
        _slot("two", 0, "g-x", [[1, 4]], line=1), _slot("two", 1, "g-y", [[1, 5]], line=1),
    ]
    files = pl.DataFrame({"file_id": ["noframes", "single", "two"],
                          "file_name": [f"{own}.recording.jsonl", "summary.jsonl", "other.jsonl"]})
    assert _players(slots, _plays(), files=files) == {own: [[1, 9]], "g-one": [[1, 4]]}


def test_require_valid_attempt_keeps_cards_with_enough_actions():
    slots = [_slot("c1", 0, "short", [[1, 5]], actions=12), _slot("c2", 0, "long", [[1, 20]], actions=45)]
    cfg = resolve({"baselines": {"require_valid_attempt": True}})
    assert set(_players(slots, _plays(), cfg)) == {"long"}
    # a card has no timestamps: when unknown durations are excluded, no card is a valid attempt
    cfg = resolve({"baselines": {"require_valid_attempt": True}, "attempts": {"unknown_duration": "exclude"}})
    assert _players(slots, _plays(), cfg) == {}
    assert set(_players(slots, _plays())) == {"short", "long"}


def test_summary_costs_enter_the_baselines_flagged():
    slots = [_slot(f"c{i}", 0, f"p{i}", pairs) for i, pairs in
             enumerate([[[1, 10], [2, 30]], [[1, 4]], [[1, 7], [2, 10]], []])]
    players = bl.summary_players(conform("core_arc3__card_plays", slots), _plays(), load_config())
    costs = bl.summary_costs(players)
    assert costs["evidence"].unique().to_list() == ["card-summary"] and costs["is_summary_sourced"].all()
    levels = bl.level_baselines(costs, players.select("game_id", "baseline_player_id"), {GAME: 3}, load_config())
    um = levels.filter(pl.col("baseline_rule") == "upper-median").sort("level_index")
    # level 1 costs 10, 4, 7 -> 4, 7, 10: upper median 7; level 2 costs 20, 3 -> 20; level 3: nobody
    assert um["baseline_value"].to_list() == [7.0, 20.0, None]
    assert um["n_summary_costs"].to_list() == [3, 2, 0] and um["n_card_costs"].to_list() == [0, 0, 0]
    assert um["n_players"].unique().to_list() == [4]
