"""One variant rule for every reader: a toolkit recording written with integer action ids.

Such a file (the engine's `RecordingWriter(action_ids="int")` writes one) used to be "benchmarking" for
ingest and "toolkit" for the viewer, so `arcstudy view` and `arcstudy score` counted it under different rules.
Every path now decides with `pipeline.recordings.variant.detect_variant` and must give the toolkit card the
official toolkit gave for the same session (the sample's sidecar).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest.runner import prepare_file
from pipeline.recordings.counting import ACTION_NAMES, Card, rebuild_card
from pipeline.recordings.reader import read_recording_file
from pipeline.recordings.variant import counting_options_for_variant, detect_variant
from pipeline.scoring.plays import read_recording_files, recordings_from_tables

SAMPLE = (Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "toolkit"
          / "bt11_two_plays_fullreset.noframes.jsonl")


def _with_integer_ids(src: Path, dst: Path) -> Path:
    lines = [json.loads(text) for text in src.read_text().splitlines() if text.strip()]
    for line in lines:
        action = line["data"]["action_input"]
        action["id"] = ACTION_NAMES.index(action["id"])
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return dst


@pytest.mark.parametrize("name", ["{game_id}-{guid}.jsonl", "session.jsonl"], ids=["toolkit-name", "plain-name"])
def test_integer_id_toolkit_recording_is_counted_alike_everywhere(name, tmp_path):
    expected = json.loads(SAMPLE.with_name(SAMPLE.name.replace(".jsonl", ".expected.json")).read_text())
    path = _with_integer_ids(SAMPLE, tmp_path / name.format(game_id=expected["game_id"], guid=expected["guid"]))
    card = Card.from_dict(expected["card"])

    # the one reader: the variant decided from the lines and the file name, then the card
    lines = [json.loads(text) for text in path.read_text().splitlines()]
    variant, _ = detect_variant(lines, path)
    assert variant == "toolkit"
    parsed = read_recording_file(path)
    assert parsed.variant == "toolkit"
    assert rebuild_card([ln.step_record() for ln in parsed.steps], counting_options_for_variant(variant),
                        game_id=expected["game_id"]) == card

    # ingest: the rows it would store, then the cards scoring rebuilds from the database
    prepared = prepare_file(path, run_id="test")
    assert prepared.failure is None and prepared.output is not None
    tables = prepared.output.tables
    assert set(tables["core_arc3__plays"]["recording_variant"]) == {"toolkit"}
    (stored,) = recordings_from_tables(tables["core_arc3__steps"], tables["core_arc3__plays"])

    # score FILES
    steps, plays, files, problems = read_recording_files([path])
    assert problems == []
    (scored,) = recordings_from_tables(steps, plays, files)

    for rec in (stored, scored):
        assert rec.variant == "toolkit"
        assert rec.card == card
        assert rec.play_ids == rec.stored_play_ids == [f"{expected['guid']}/0", f"{expected['guid']}/1"]
    assert stored.steps["step_effect"].to_list() == scored.steps["step_effect"].to_list()
    assert tables["core_arc3__steps"]["is_counted"].sum() == card.total_actions
    per_play = (tables["core_arc3__steps"].group_by("play_id").agg(pl.col("is_level_change").sum())
                .sort("play_id")["is_level_change"].to_list())
    assert per_play == [p.n_pairs for p in card.plays]


def test_records_and_effects_read_a_chunk_at_a_time_are_those_of_the_whole_table():
    """`score` makes a file's step records a chunk of rows at a time, and its effects through codes (a file of
    millions of steps made a string object per step): the same records and effects as read at once."""
    from pipeline.recordings.counting import StepEffect, StepRecord
    from pipeline.scoring.plays import _effects, _records

    paths = sorted(p for p in SAMPLE.parent.rglob("*.jsonl") if not p.name.endswith(".expected.json"))[:6]
    steps, _, _, _ = read_recording_files(paths)
    assert steps.height > 50
    whole = [StepRecord(action_id=r["action_id"], state=r["state"], levels_completed=r["levels_completed"],
                        full_reset=r["is_full_reset"], win_levels=r["win_levels"], frame_count=r["n_frames"],
                        guid=r["guid"], frame_digest=r["last_frame_sha256"], line_number=r["line_number"])
             for r in steps.iter_rows(named=True)]
    assert _records(steps, chunk_rows=7) == whole == _records(steps)
    column = steps["step_effect"]  # whole, or in parts (a stored file's blocks)
    assert _effects([column]) == tuple(StepEffect(e) for e in column.to_list())
    assert _effects([column.slice(0, 11), column.slice(11, 30), column.slice(41)]) == _effects([column])
    assert len(set(_effects([column]))) >= 2
