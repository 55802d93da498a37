"""Every sample recording in ../shared ingests cleanly, with the exact step, play and level counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.recordings.lines import filename_guid

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"
RECORDINGS = sorted(p for p in SAMPLES.rglob("*.jsonl"))


@pytest.fixture(scope="module")
def samples_db(tmp_path_factory) -> Workspace:
    ws = Workspace(tmp_path_factory.mktemp("samples") / "samples.duckdb")
    report = ingest_paths(ws, RECORDINGS, run_id="test-samples")
    assert [f.status for f in report.files] == ["loaded"] * len(RECORDINGS)
    assert report.n_quarantined == 0
    yield ws
    ws.close()


def test_the_sample_set_is_complete():
    assert len(RECORDINGS) == 32  # 12 toolkit + 3 human + 1 benchmarking + 16 fixtures


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name[:60])
def test_sample_counts_match_the_sidecar(samples_db: Workspace, recording: Path):
    expected = json.loads(recording.with_name(recording.name[: -len(".jsonl")] + ".expected.json").read_text())
    lines = [json.loads(ln) for ln in recording.read_text().splitlines() if ln.strip()]
    frame_lines = [ln for ln in lines if "game_id" in ln["data"]]
    assert len(lines) == expected["line_count"]

    file_id = samples_db.read("SELECT file_id FROM raw_ingest__files WHERE file_name = ?", [recording.name])["file_id"][0]
    steps = samples_db.read("SELECT * FROM core_arc3__steps WHERE file_id = ? ORDER BY line_number", [file_id])
    plays = samples_db.read("SELECT * FROM core_arc3__plays WHERE file_id = ? ORDER BY play_index", [file_id])
    raw = samples_db.read("SELECT count(*) AS n FROM raw_arc3__recording_lines WHERE file_id = ?", [file_id])
    assert raw["n"][0] == expected["line_count"]
    assert steps.height == len(frame_lines)
    assert steps["game_id"].unique().to_list() == [expected["game_id"]]
    assert steps["n_frames"].is_null().all() == (not expected["frames_included"])

    card = expected["card"]
    name_guid, _ = filename_guid(recording)
    if expected["format"] == "human-dataset-jsonl":
        own_slots = [i for i, g in enumerate(card["guids"]) if g == name_guid]
    else:
        own_slots = list(range(card["total_plays"]))
    assert plays.height == len(own_slots)
    # The last counted line of each play shows the card's final levels_completed for its slot.
    live = steps.filter(~steps["is_post_terminal"])
    for play, slot in zip(plays.iter_rows(named=True), own_slots, strict=True):
        mine = live.filter(live["play_id"] == play["play_id"])
        assert mine["levels_completed"][-1] == card["levels_completed"][slot]
        assert play["is_action_ids_lost"] == (expected["format"] == "benchmarking-jsonl")


def test_human_cards_are_kept_and_the_file_slot_is_chosen_by_guid(samples_db: Workspace):
    cards = samples_db.read("SELECT c.*, f.file_name FROM core_arc3__card_plays c JOIN raw_ingest__files f "
                            "USING (file_id) ORDER BY f.file_name, slot_index")
    for name in {n for n in cards["file_name"]}:
        recording = next(p for p in RECORDINGS if p.name == name)
        expected = json.loads(recording.with_name(recording.name[: -len(".jsonl")] + ".expected.json").read_text())
        card = expected["card"]
        mine = cards.filter(cards["file_name"] == name)
        assert mine["card_actions"].to_list() == card["actions"]
        assert mine["levels_completed"].to_list() == card["levels_completed"]
        own = mine.filter(mine["is_file_play"])
        assert own["guid"].to_list() == [filename_guid(recording)[0]]
    stub = cards.filter(cards["file_name"].str.starts_with("92a1d4d1"))
    assert stub["is_file_play"].to_list() == [False, True]


def test_variants_and_flags(samples_db: Workspace):
    plays = samples_db.read("SELECT p.*, f.file_name FROM core_arc3__plays p JOIN raw_ingest__files f USING (file_id)")
    variant = {r["file_name"]: r["recording_variant"] for r in plays.iter_rows(named=True)}
    assert variant["bt11_two_plays_fullreset.noframes.jsonl"] == "toolkit"
    assert variant["4706abe4-58a9-41e9-9a91-9927b5cc2d8e.recording.jsonl"] == "human-dataset"
    assert next(v for k, v in variant.items() if k.startswith("ls20-9607627b")) == "benchmarking"
    lp85 = plays.filter(plays["file_name"].str.starts_with("4706abe4"))
    assert set(lp85["flags"][0]) == {"no_leading_reset", "string_action_ids"}
    assert lp85["is_only_reset_levels"][0]
    usage = samples_db.read("SELECT * FROM core_arc3__usage")
    assert usage.height == 3 and usage["n_tokens"][0] == 12449


def test_post_terminal_echoes_are_marked(samples_db: Workspace):
    # bt11_win_gameover_levelreset: one action while GAME_OVER and six after WIN are echoes (samples/README).
    for name in ("bt11_win_gameover_levelreset.frames.jsonl", "bt11_win_gameover_levelreset.noframes.jsonl"):
        steps = samples_db.read("SELECT s.* FROM core_arc3__steps s JOIN raw_ingest__files f USING (file_id) "
                                "WHERE f.file_name = ?", [name])
        assert steps["is_post_terminal"].sum() == 7


def test_environment_metadata_ingests(tmp_path: Path):
    envs = SAMPLES.parents[1] / "conformance" / "environment_files"
    with Workspace(tmp_path / "env.duckdb") as ws:
        report = ingest_paths(ws, [envs], run_id="t")
        assert {f.status for f in report.files} == {"loaded"}  # game sources (.py) are not inputs
        got = ws.read("SELECT game_id, baseline_actions FROM core_arc3__environments ORDER BY game_id")
        assert got.height == 8
        for row in got.iter_rows(named=True):
            meta = json.loads(next(envs.glob(f"{row['game_id'][:4]}/*/metadata.json")).read_text())
            assert row["baseline_actions"] == meta["baseline_actions"]


# Playback files (formats.md A.7): detected by their content like the recordings, stored as their actions.
PLAYBACK_SCRIPTS = sorted((SAMPLES.parent / "playback-arc-agi-3").glob("*.playback.jsonl"))


@pytest.mark.parametrize("forced", [None, "arc3-recording"], ids=["detected", "forced"])
def test_playback_samples_ingest_as_actions(tmp_path: Path, forced: str | None):
    assert len(PLAYBACK_SCRIPTS) == 4
    with Workspace(tmp_path / "playback.duckdb") as ws:
        report = ingest_paths(ws, PLAYBACK_SCRIPTS, run_id="t", fmt_name=forced or "auto", workers=1)
        assert [f.status for f in report.files] == ["loaded"] * len(PLAYBACK_SCRIPTS)
        assert report.n_quarantined == 0
        for script in PLAYBACK_SCRIPTS:
            expected = json.loads(script.with_name(script.name.replace(".jsonl", ".expected.json")).read_text())
            lines = [json.loads(ln) for ln in script.read_text().splitlines() if ln.strip()]
            actions = [ln["data"]["action_input"] for ln in lines if "action_input" in ln["data"]]
            fid = ws.read("SELECT file_id FROM raw_ingest__files WHERE file_name = ?", [script.name])["file_id"][0]
            raw = ws.read("SELECT line_kind FROM raw_arc3__recording_lines WHERE file_id = ?", [fid])
            steps = ws.read("SELECT * FROM core_arc3__steps WHERE file_id = ? ORDER BY line_number", [fid])
            plays = ws.read("SELECT * FROM core_arc3__plays WHERE file_id = ?", [fid])
            assert raw.height == expected["line_count"]
            assert (raw["line_kind"] == "other").sum() == len(lines) - len(actions)
            assert steps["action_id"].to_list() == [a["id"] for a in actions]
            assert steps["state"].is_null().all() and steps["step_effect"].is_null().all()
            assert plays.height == 1 and plays["is_replay_needed"][0] and not plays["has_leading_reset"][0]
            assert plays["recording_variant"][0] == "playback"
