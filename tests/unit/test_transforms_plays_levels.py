"""Plays and levels under the official counting rules: level attribution with resets, plays split by full
resets, echoes, times, and the card cross-check (hand-derived numbers)."""

from __future__ import annotations

import random
from datetime import timedelta

import polars as pl
import pytest

from pipeline.core.config import load_config
from pipeline.recordings.counting import StepRecord, per_level_actions, rebuild_card
from pipeline.recordings.variant import counting_options_for_variant
from pipeline.transforms.build import run_in_memory
from pipeline.transforms.plays_levels import explain_card
from pipeline.transforms.synthetic import EPOCH, SyntheticStudy

G = "pl99-0000e001"


def _run(st: SyntheticStudy) -> dict[str, pl.DataFrame]:
    return run_in_memory(st.tables(), load_config(), steps=["plays_levels"])


def test_level_attribution_with_level_reset_game_over_echo_and_full_reset():
    # toolkit recording, 3 levels, one step every 10 s:
    #  R(open, free) a a L | a G e(echo, free) r(level reset: charged to level 2) a a L | F(full reset) a L u u
    st = SyntheticStudy()
    guid = st.add_recording(G, "R aaL aGe r aaL F aL uu", n_levels=3, variant="toolkit", step_s=10, card=None,
                            start=EPOCH)
    out = _run(st)
    plays = out["out_arc3__plays"].sort("play_index")
    assert plays["play_id"].to_list() == [f"{guid}/0", f"{guid}/1"]
    p0, p1 = plays.row(0, named=True), plays.row(1, named=True)
    assert (p0["n_actions"], p0["n_resets"], p0["n_undo"], p0["n_post_terminal"]) == (9, 1, 0, 1)
    assert p0["rebuilt_actions_by_level"] == [[1, 3], [2, 9]]
    assert (p0["levels_completed"], p0["play_state"], p0["is_fully_solved"]) == (2, "GAME_OVER", False)
    assert p0["duration_s"] == 100.0  # R at 0 s ... L at 100 s
    assert (p1["n_actions"], p1["n_resets"], p1["n_undo"]) == (4, 0, 2)
    assert p1["rebuilt_actions_by_level"] == [[1, 2]]
    assert p1["play_state"] == "NOT_FINISHED"

    levels = out["out_arc3__levels"].sort("play_id", "level_index")
    got = [(r["play_id"][-1], r["level_index"], r["n_actions"], r["n_resets"], r["n_undo"], r["is_level_completed"],
            r["level_duration_s"]) for r in levels.iter_rows(named=True)]
    assert got == [
        ("0", 1, 3, 0, 0, True, 30.0),  # 0 s -> L at 30 s
        ("0", 2, 6, 1, 0, True, 70.0),  # a G r a a L, 30 s -> 100 s
        ("0", 3, 0, 0, 0, False, 0.0),  # reached, nothing charged: the play ended with the full reset
        ("1", 1, 2, 0, 0, True, 20.0),  # F at 110 s, L at 130 s
        ("1", 2, 2, 0, 2, False, 20.0),  # two undo, 130 s -> 150 s
    ]
    l2 = levels.filter((pl.col("play_id") == f"{guid}/0") & (pl.col("level_index") == 2)).row(0, named=True)
    assert l2["level_started_at"] == EPOCH + timedelta(seconds=30)
    assert l2["level_ended_at"] == EPOCH + timedelta(seconds=100)


def test_human_dataset_reset_after_win_opens_a_new_play_and_post_win_actions_are_free():
    # human-dataset (level-only resets): R a L | r(level reset at a level start: counted) a L (WIN) | a a a
    # (after WIN: echoes) | R (after WIN: full reset, new play) a a
    st = SyntheticStudy()
    guid = st.add_recording(G, "R aL r aL aaa R aa", n_levels=2, card=None)
    plays = _run(st)["out_arc3__plays"].sort("play_index")
    assert plays.select("play_id", "n_actions", "n_resets", "n_post_terminal", "levels_completed",
                        "is_fully_solved").rows() == [
        (f"{guid}/0", 5, 1, 3, 2, True),
        (f"{guid}/1", 2, 0, 0, 0, False),
    ]
    assert plays["rebuilt_actions_by_level"].to_list() == [[[1, 2], [2, 5]], []]


def test_levels_sum_to_play_and_match_the_toolkit_card_on_random_scripts():
    """Equivalence with pipeline.scoring (rebuild_card + per_level_actions) on 60 random recordings."""
    rng = random.Random(7)
    st = SyntheticStudy()
    for _ in range(60):
        body = "".join(rng.choice("aaaaacuLLGerr") for _ in range(rng.randint(1, 60)))
        st.add_recording(G, "R" + body, n_levels=4, variant=rng.choice(["toolkit", "human-dataset"]), card=None)
    out = _run(st)
    plays = out["out_arc3__plays"]
    steps = st.tables()["core_arc3__steps"].sort("file_id", "line_number")
    for (fid,), lines in steps.group_by("file_id", maintain_order=True):
        variant = plays.filter(pl.col("file_id") == fid)["recording_variant"][0]
        records = [StepRecord(r["action_id"], r["state"], r["levels_completed"], r["is_full_reset"], r["win_levels"],
                              r["n_frames"]) for r in lines.iter_rows(named=True)]
        card = rebuild_card(records, counting_options_for_variant(variant))
        mine = plays.filter(pl.col("file_id") == fid).sort("play_index")
        assert mine["n_actions"].to_list() == card.actions
        assert mine["n_resets"].to_list() == card.resets
        assert mine["rebuilt_actions_by_level"].to_list() == card.actions_by_level
        assert mine["play_state"].to_list() == card.states
        for play_id, cp in zip(mine["play_id"], card.plays, strict=True):
            lv = out["out_arc3__levels"].filter(pl.col("play_id") == play_id).sort("level_index")
            assert lv["n_actions"].sum() == cp.actions
            expected = per_level_actions(cp, 4)
            k = len(cp.actions_by_level)
            assert lv.filter(pl.col("is_level_completed"))["n_actions"].to_list() == list(expected.actions[:k])


def _card_row(**kw) -> dict:
    base = dict(n_actions=20, card_actions=20, n_undo=0, n_actions_no_undo=20, n_resets=0, card_resets=0,
                levels_completed=1, card_levels_completed=1, has_leading_reset=True,
                rebuilt_actions_by_level=[[1, 8]], pairs_no_undo=[[1, 8]], card_actions_by_level=[[1, 8]])
    return {**base, **kw}


@pytest.mark.parametrize("row, codes", [
    (_card_row(), []),
    (_card_row(card_actions=18, n_undo=2, n_actions_no_undo=18, pairs_no_undo=[[1, 7]],
               card_actions_by_level=[[1, 7]]), ["undo_not_counted_by_card"]),
    (_card_row(card_actions=21, has_leading_reset=False, card_actions_by_level=[[1, 9]]), ["missing_leading_reset"]),
    (_card_row(card_actions=25), ["actions_differ"]),  # completed levels agree: the unfinished one differs
    (_card_row(card_actions_by_level=[[1, 9]]), ["level_costs_differ"]),
    (_card_row(card_levels_completed=2, card_actions_by_level=[[1, 8], [2, 20]]), ["levels_differ"]),
    (_card_row(card_resets=1), ["resets_differ"]),
])
def test_card_disagreements_are_explained(row, codes):
    got, reason = explain_card(row)
    assert got == codes
    assert (reason is None) == (not codes)


def test_card_checks_from_a_human_recording_with_undo():
    st = SyntheticStudy()
    guid = st.add_recording(G, "R aauaL aaaa", n_levels=3)  # human card: undo not counted
    checks = _run(st)["out_arc3__card_checks"]
    row = checks.row(0, named=True)
    assert (row["play_id"], row["n_actions"], row["card_actions"], row["n_undo"]) == (f"{guid}/0", 9, 8, 1)
    assert row["card_actions_by_level"] == [[1, 4]] and row["rebuilt_actions_by_level"] == [[1, 5]]
    assert row["reason_codes"] == ["undo_not_counted_by_card"] and not row["is_card_agreeing"]
    assert "did not count the 1 undo" in row["reason"]
    plays = _run(st)["out_arc3__plays"]
    assert plays["flags"].to_list() == [["card_disagrees"]] and plays["has_card"].to_list() == [True]


def test_steps_read_narrow_from_the_database_give_the_same_tables(tmp_path):
    """`build` reads the steps `plays_levels` needs from the database a slice at a time in narrow types
    (`read_narrow_steps`: texts as categories, small integers; every column read whole took two million stored steps
    to 1.9 GB): the plays, levels and card checks are those of the steps read whole in their stored types."""
    from pathlib import Path

    from pipeline.core.workspace import Workspace
    from pipeline.ingest import ingest_paths
    from pipeline.scoring.storage import read_narrow_steps
    from pipeline.transforms.build import _Frames, _plays_levels_steps
    from pipeline.transforms.plays_levels import READ_STEP_COLUMNS, build_plays_levels

    samples = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"
    with Workspace(tmp_path / "w.duckdb") as ws:
        ws.ensure_tables()
        ingest_paths(ws, [samples / "human", samples / "toolkit", samples / "fixtures"], run_id="t")
        tables = {t: ws.read(f"SELECT * FROM {t}") for t in
                  ("core_arc3__steps", "core_arc3__plays", "core_arc3__card_plays", "core_arc3__environments")}
        narrow = _plays_levels_steps(_Frames(ws))
        ids = tables["core_arc3__steps"]["file_id"].unique().to_list()
        assert narrow.equals(read_narrow_steps(ws, READ_STEP_COLUMNS, ids))
    assert narrow.schema["play_id"] == pl.Categorical and narrow.schema["levels_completed"] == pl.Int8
    assert tables["core_arc3__card_plays"].height > 0 and len(ids) > 10
    whole = build_plays_levels(*tables.values())
    read = build_plays_levels(narrow, *list(tables.values())[1:])
    for name in ("plays", "levels", "card_checks"):
        a, b = getattr(whole, name), getattr(read, name)
        keys = [c for c in ("play_id", "level_index") if c in a.columns]
        assert b.sort(keys).equals(a.sort(keys)), name
