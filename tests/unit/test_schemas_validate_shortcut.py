"""The validation shortcut of `schemas.validate_frame` judges exactly as pandera does: a clean frame passes
untouched without pandera, and a frame breaking any rule gets pandera's own failures (rule, column, value,
reason) and valid rows (`shortcut=False`, pandera alone, is the reference)."""

from __future__ import annotations

import polars as pl
import pytest

import schemas.validate
from schemas import validate_frame
from schemas.validate import conform

TABLE = "core_arc__task_pairs"
FILE_ID = "a" * 64


def clean() -> pl.DataFrame:
    return conform(TABLE, [
        {"file_id": FILE_ID, "task_id": "t1", "pair_split": split, "pair_index": i, "input_grid": "|01|23|",
         "output_grid": None if split == "test" else "|4|", "input_height": 2, "input_width": 2,
         "output_height": None if split == "test" else 1, "output_width": None if split == "test" else 1}
        for split in ("train", "test") for i in range(3)])


def test_clean_frame_passes_without_pandera(monkeypatch):
    def refuse(*_):
        raise AssertionError("pandera must not run on a clean frame")

    monkeypatch.setattr(schemas.validate, "pandera_schema", refuse)
    df = clean()
    result = validate_frame(TABLE, df)
    assert result.failures == [] and result.valid is df
    assert conform(TABLE, df) is df


BREAKS = {
    "isin": ("pair_split", 1, "validation"),
    "ge": ("pair_index", 2, -1),
    "le": ("input_height", 0, 31),
    "regex": ("input_grid", 4, "|01|2x|"),
    "regex_file_id": ("file_id", 5, "not-a-sha"),
    "not_nullable": ("input_grid", 3, None),
    "primary_key": ("pair_index", 1, 0),
}


@pytest.mark.parametrize("rule", list(BREAKS))
def test_a_broken_rule_gets_pandera_failures(rule):
    column, row, value = BREAKS[rule]
    df = clean()
    df = df.with_columns(pl.when(pl.int_range(pl.len()) == row).then(pl.lit(value, df.schema[column]))
                         .otherwise(pl.col(column)).alias(column))
    mine, reference = validate_frame(TABLE, df), validate_frame(TABLE, df, shortcut=False)
    assert mine.failures and mine.failures == reference.failures
    assert mine.valid.equals(reference.valid) and mine.valid.height < df.height


def test_wrong_dtype_or_columns_go_to_pandera():
    df = clean().with_columns(pl.col("pair_index").cast(pl.Int32))
    assert validate_frame(TABLE, df).failures == validate_frame(TABLE, df, shortcut=False).failures != []
    df = clean().drop("output_width")
    assert validate_frame(TABLE, df).failures == validate_frame(TABLE, df, shortcut=False).failures != []


def test_a_value_over_its_byte_limit_is_not_passed_by_the_shortcut():
    """The shortcut once left out `max_bytes`: a 40-byte guid passed it untouched where pandera refuses it."""
    table = "core_arc3__card_plays"
    row = {"file_id": FILE_ID, "line_number": None, "game_id": "ab12-0123abcd", "slot_index": 0,
           "guid": "00000000-0000-4000-8000-000000000001", "play_id": None, "is_file_play": False,
           "card_actions": 5, "card_resets": 0, "levels_completed": 1, "card_state": "WIN",
           "card_actions_by_level": [[1, 5]], "card_score": None, "flags": []}
    df = conform(table, [row, {**row, "slot_index": 1}])
    assert validate_frame(table, df).failures == []
    long = conform(table, [row, {**row, "slot_index": 1, "guid": "x" * 40}])
    mine, reference = validate_frame(table, long), validate_frame(table, long, shortcut=False)
    assert reference.failures and mine.failures == reference.failures
    assert mine.valid.equals(reference.valid) and mine.valid.height == 1
