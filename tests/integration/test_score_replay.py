"""Replay verification before scoring (pipeline/scoring/verify.py) on the fixture recordings and conformance games.

Both replay inputs are exercised: the recording file (engine.replay, frames compared pixel by pixel) and the
steps as ingest stores them in core_arc3__steps (frame hashes compared). The steps come from the ingest reader
in memory (`read_recording_files`), the very rows `arcstudy ingest` would write.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.manifest import sha256_file
from pipeline.scoring import Card
from pipeline.scoring.plays import drop_duplicate_plays, read_recording_files, recordings_from_tables
from pipeline.scoring.verify import verify_recording

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SAMPLES = SHARED / "samples" / "arc-agi-3"
GAMES = [SHARED / "conformance" / "environment_files"]
WIN_FRAMES = SAMPLES / "fixtures" / "an53_scripted-win.frames.jsonl"
LOSE_NOFRAMES = SAMPLES / "fixtures" / "an53_scripted-lose.noframes.jsonl"


def load(path: Path, recovered: dict | None = None):
    steps, plays, files, problems = read_recording_files([path])
    assert problems == []
    (rec,) = recordings_from_tables(steps, plays, files, recovered)
    return rec


def without_line(src: Path, line_number: int, tmp_path: Path) -> Path:
    lines = src.read_text().splitlines(keepends=True)
    out = tmp_path / src.name
    out.write_text("".join(lines[:line_number - 1] + lines[line_number:]))
    return out


@pytest.mark.parametrize("from_file", [True, False], ids=["file", "steps"])
def test_fixture_recording_is_verified(from_file):
    rec = load(WIN_FRAMES)
    checks = verify_recording(rec, GAMES, from_file=from_file)
    doc = json.loads(WIN_FRAMES.with_name("an53_scripted-win.frames.expected.json").read_text())
    assert [c.play_id for c in checks] == [f"{doc['guid']}/{i}" for i in range(doc["card"]["total_plays"])]
    assert {c.status for c in checks} == {"verified"}
    assert sum(c.n_steps_replayed for c in checks) == rec.steps.height == doc["line_count"]
    assert {c.game_source_sha256 for c in checks} == {sha256_file(GAMES[0] / "an53" / "6f5f2264" / "an53.py")}
    assert rec.card == Card.from_dict(doc["card"])


@pytest.mark.parametrize("from_file", [True, False], ids=["file", "steps"])
def test_removed_action_is_caught_at_the_next_frame(from_file, tmp_path):
    rec = load(without_line(WIN_FRAMES, 10, tmp_path))  # line 10 was an ACTION4; the next ACTION4 moves up
    checks = verify_recording(rec, GAMES, from_file=from_file)
    first = checks[0]
    assert first.status == "divergent" and first.n_steps_replayed == 10
    d = first.divergence
    assert (d.line, d.step, d.action, d.field, d.frame_index) == (10, 9, "ACTION4", "frame", 0)
    if from_file:
        assert d.cells_differing == 24 and d.bbox == (20, 27, 44, 49)
        assert "24 cells differ" in first.detail
    else:
        assert d.expected == rec.steps["frame_sha256s"][9][0] and d.got != d.expected
        assert "sha256 differs" in first.detail
    assert [c.status for c in checks[1:]] == ["divergent"] * 3  # later plays continue the diverged session
    assert all(c.n_steps_replayed == 0 and "follows a divergence" in c.detail for c in checks[1:])


@pytest.mark.parametrize("from_file", [True, False], ids=["file", "steps"])
def test_removed_action_without_frames_is_caught_by_the_level_count(from_file, tmp_path):
    rec = load(without_line(LOSE_NOFRAMES, 20, tmp_path))
    checks = verify_recording(rec, GAMES, from_file=from_file)
    assert [c.status for c in checks] == ["verified", "divergent"]
    assert [c.n_steps_replayed for c in checks] == [9, 28]
    d = checks[1].divergence
    assert (d.line, d.step, d.action, d.field, d.expected, d.got) == (37, 36, "ACTION5", "levels_completed", 2, 1)
    assert checks[1].divergence_json() == {"step_index": 36, "line_number": 37, "action": "ACTION5",
                                           "field": "levels_completed", "expected": 2, "got": 1}


def with_hash_changed(rec, index: int):
    hashes = rec.steps["frame_sha256s"].to_list()
    hashes[index] = ["0" * 64] + hashes[index][1:]
    rec.steps = rec.steps.with_columns(pl.Series("frame_sha256s", hashes, dtype=pl.List(pl.String)))
    return rec


def test_a_changed_frame_hash_that_reconverges_is_a_frame_only_note_in_database_steps():
    rec = with_hash_changed(load(WIN_FRAMES), 5)
    checks = verify_recording(rec, GAMES, from_file=False)
    first = checks[0]
    assert first.status == "verified" and first.divergence is None
    assert (first.n_frame_only_steps, first.n_frame_only_cells) == (1, None)  # sha256: cells unknown
    assert first.detail == ("frames differ at 1 step (step 5, line 6; cells unknown: frames compared by sha256 "
                            "or frame counts differ), reconverged at step 6")
    assert all(c.status == "verified" and c.n_frame_only_steps == 0 and c.detail is None for c in checks[1:])
    assert verify_recording(rec, GAMES, from_file=True)[0].n_frame_only_steps == 0  # the file itself is intact


def test_a_changed_frame_hash_at_the_last_step_never_reconverges():
    rec = load(WIN_FRAMES)
    last = rec.steps.height - 1
    checks = verify_recording(with_hash_changed(rec, last), GAMES, from_file=False)
    d = checks[-1].divergence
    assert checks[-1].status == "divergent" and [c.status for c in checks[:-1]] == ["verified"] * (len(checks) - 1)
    assert (d.step, d.field, d.frame_index, d.expected) == (last, "frame", 0, "0" * 64)


def test_unloadable_and_lost_ids(tmp_path):
    human = load(SAMPLES / "human" / "lp85" / "4706abe4-58a9-41e9-9a91-9927b5cc2d8e.recording.jsonl")
    assert human.is_only_reset_levels and human.variant == "human-dataset"
    (check,) = verify_recording(human, GAMES, from_file=True)
    assert check.status == "unverified" and "lp85-305b61c3" in check.detail and check.is_only_reset_levels

    bench_path = next((SAMPLES / "benchmarking").glob("*.jsonl"))
    doc = json.loads(bench_path.with_name(bench_path.name.replace(".jsonl", ".expected.json")).read_text())
    lost = load(bench_path)
    assert lost.is_action_ids_lost and lost.card is None
    assert [c.status for c in verify_recording(lost, GAMES, from_file=True)] == ["not_replayable"]
    recovered = load(bench_path, {doc["guid"]: doc["reconstructed_actions"]})  # keyed by guid this time
    assert recovered.recovered and recovered.card == Card.from_dict(doc["card"])
    assert [c.status for c in verify_recording(recovered, GAMES, from_file=True)] == ["unverified"]


@pytest.mark.parametrize("name", ["toolkit/bt11_two_plays_fullreset.noframes.jsonl",
                                  "toolkit/ls20_random_levelreset_fullreset.frames.jsonl",
                                  "fixtures/cm86_scripted-lose.noframes.jsonl",
                                  "human/vc33/82f713eb-a8b5-43fe-a7e2-ca6a5e9451c7.recording.jsonl"])
def test_plays_match_what_ingest_cut(name):
    rec = load(SAMPLES / name)
    assert rec.play_ids == rec.stored_play_ids
    assert [rec.play_ids[i] for i in rec.step_play] == rec.steps["play_id"].to_list()


def test_two_recordings_of_one_play_keep_the_first_and_say_where_they_part(tmp_path):
    """Of two files of one play the first in the given order is kept; the other's reason names the first and the
    first step where they disagree (lines of both files, the field and both values)."""
    lines = WIN_FRAMES.read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace('"ACTION4"', '"ACTION2"', 1)  # line 4: another action, same guid
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(lines))
    for order in ([WIN_FRAMES, edited], [edited, WIN_FRAMES]):
        steps, plays, files, problems = read_recording_files(order)
        assert problems == []
        recs = recordings_from_tables(steps, plays, files)
        kept, dropped = drop_duplicate_plays(recs, order=list(files))
        first, later = order
        assert [rec.path for rec in kept] == [first.resolve()]
        ((path, reason),) = dropped
        assert path == later.resolve()
        here, there = (2, 4) if later == edited else (4, 2)
        assert reason == (f"line 1: duplicate_play: the plays of guid e834078e-f7da-412b-98f1-52cb64982f14 are also "
                          f"in {first.resolve()} (line 1), given first and scored; this file is left out: the two "
                          f"files DISAGREE from step 3 (line 4 here, line 4 there: action_id {here} here, {there} "
                          "there): check which one is right and score it alone")
    other_game = tmp_path / "other-game.jsonl"  # the same guid claimed for another game
    other_game.write_text(WIN_FRAMES.read_text().replace("an53-6f5f2264", "ck17-8ce0c519"))
    steps, plays, files, _ = read_recording_files([WIN_FRAMES, other_game])
    _, ((_, reason),) = drop_duplicate_plays(recordings_from_tables(steps, plays, files), order=list(files))
    assert reason.endswith("this file is left out: the two files DISAGREE: game ck17-8ce0c519 here, an53-6f5f2264 "
                           "there: check which one is right and score it alone")
    steps, plays, files, _ = read_recording_files([WIN_FRAMES, LOSE_NOFRAMES])
    recs = recordings_from_tables(steps, plays, files)
    assert drop_duplicate_plays(recs, order=list(files)) == (recs, [])
