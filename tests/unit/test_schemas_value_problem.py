"""`schemas.validate.value_problem`: a document reader's check of one row against its columns' rules, so that it
refuses an entry itself (and every command reading the document through it refuses the same) with the words
validation would give on ingest. Compared with `validate_frame` through pandera (no shortcut)."""

from __future__ import annotations

import pytest

from schemas import conform, validate_frame
from schemas.validate import value_problem

TABLE = "core_arc3__scorecard_runs"
GOOD = {"file_id": "f" * 64, "card_id": "c", "policy_id": None, "game_id": "ab12-0123abcd", "run_index": 0,
        "guid": "00000000-0000-4000-8000-000000000001", "score": 1.0, "levels_completed": 1, "actions": 1,
        "resets": 0, "state": "WIN", "is_completed": True, "level_scores": [1.0], "level_actions": [1],
        "level_baseline_actions": [1], "message": None}


def test_a_row_every_rule_accepts():
    assert value_problem(TABLE, GOOD) is None
    assert validate_frame(TABLE, conform(TABLE, [GOOD]), shortcut=False).ok


@pytest.mark.parametrize("change", [{"score": -5.0}, {"state": "PLAYING"}, {"game_id": "AB12-0123abcd"},
                                    {"game_id": "ab12\n"}, {"run_index": None}, {"run_index": -1},
                                    {"levels_completed": 255}])
def test_the_reason_is_the_one_validation_gives(change):
    row = {**GOOD, **change}
    (column,) = change
    found = value_problem(TABLE, row)
    failures = [f for f in validate_frame(TABLE, conform(TABLE, [row]), shortcut=False).failures if f.column == column]
    assert failures, change
    assert found == (column, failures[0].reason)


def test_a_value_over_its_byte_bound_is_measured():
    assert value_problem(TABLE, {**GOOD, "guid": "g" * 40}) == ("guid", "column 'guid' is 40 bytes, longer than 36 "
                                                                         "bytes")
    assert not validate_frame(TABLE, conform(TABLE, [{**GOOD, "guid": "g" * 40}]), shortcut=False).ok
