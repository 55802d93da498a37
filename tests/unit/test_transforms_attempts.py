"""The attempt rules at their boundaries (30/31 actions, 29:59/30:00, the 20-minute soft limit), first
contact, and who counts as a participant."""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from pipeline.core.config import load_config, resolve
from pipeline.transforms.build import run_in_memory
from pipeline.transforms.synthetic import EPOCH, SyntheticStudy
from tests.fixtures.transforms.studies import ATTEMPT_GAME, attempt_boundary_study


def _attempts(st: SyntheticStudy, config=None) -> pl.DataFrame:
    out = run_in_memory(st.tables(), config or load_config(), steps=["plays_levels", "attempts"])
    return out["out_arc3__attempts"]


def test_attempt_boundaries():
    st, guids = attempt_boundary_study()
    att = _attempts(st)
    by = {name: att.filter(pl.col("guid") == g).row(0, named=True) for name, g in guids.items()}
    # "more than 30 actions": 30 is not an attempt, 31 is
    assert by["30_actions"]["n_actions"] == 30 and not by["30_actions"]["is_attempt"]
    assert by["30_actions"]["reason_codes"] == ["too_few_actions"]
    assert by["31_actions"]["n_actions"] == 31 and by["31_actions"]["is_attempt"]
    # the echo after GAME_OVER is not an action: 30 counted
    assert by["30_plus_echo"]["n_actions"] == 30 and not by["30_plus_echo"]["is_attempt"]
    # "less than 30 minutes": 29:59 is an attempt, 30:00 is not
    assert by["29m59s"]["duration_s"] == 1799.0 and by["29m59s"]["is_attempt"]
    assert by["30m00s"]["duration_s"] == 1800.0 and by["30m00s"]["reason_codes"] == ["too_long"]
    # the soft limit is flagged at 20:00, never excluded
    assert not by["19m59s"]["is_over_soft_limit"] and by["20m00s"]["is_over_soft_limit"]
    assert by["20m00s"]["is_analysis_attempt"] and "over_soft_limit" in by["20m00s"]["flags"]
    assert by["29m59s"]["is_over_soft_limit"]
    # no timestamps: kept by default, flagged
    assert by["no_times"]["duration_s"] is None and by["no_times"]["is_attempt"]
    assert "duration_unknown" in by["no_times"]["flags"]
    # without a manifest every human-dataset recording is its own first-run participant; agents are not listed
    assert att.height == len(guids)
    assert all({"no_session_manifest", "first_run_assumed"} <= set(f) for f in att["flags"].to_list())
    assert att["is_first_contact"].all()


def test_unknown_duration_can_be_excluded_and_thresholds_are_configurable():
    st, guids = attempt_boundary_study()
    att = _attempts(st, resolve({"attempts": {"unknown_duration": "exclude", "actions_more_than": 29,
                                              "duration_less_than_s": 1801}}))
    by = {name: att.filter(pl.col("guid") == g).row(0, named=True) for name, g in guids.items()}
    assert by["no_times"]["reason_codes"] == ["duration_unknown"]
    assert by["30_actions"]["is_attempt"] and by["30m00s"]["is_attempt"]


def test_first_contact_one_attempt_per_participant_and_game():
    st = SyntheticStudy()
    st.add_session("s1", "p1")
    st.add_session("s2", "p1")
    st.add_session("s3", "p2")
    # p1 appears twice as a first run on the same game (a manifest error): only the earliest counts
    later = st.add_recording(ATTEMPT_GAME, "R" + "a" * 40, n_levels=3, session_id="s2", duration_s=300,
                             start=EPOCH + timedelta(days=1))
    first = st.add_recording(ATTEMPT_GAME, "R" + "a" * 40, n_levels=3, session_id="s1", duration_s=300,
                             start=EPOCH)
    replay = st.add_recording(ATTEMPT_GAME, "R" + "a" * 40, n_levels=3, session_id="s3", duration_s=300,
                              is_first_run=False)
    att = _attempts(st)
    by = {g: att.filter(pl.col("guid") == g).row(0, named=True) for g in (first, later, replay)}
    assert by[first]["is_first_contact"] and by[first]["is_analysis_attempt"]
    assert by[later]["reason_codes"] == ["duplicate_first_run"] and not by[later]["is_analysis_attempt"]
    assert by[replay]["reason_codes"] == ["not_first_run"] and not by[replay]["is_first_contact"]
    assert by[first]["participant_id"] == "p1" and by[first]["session_id"] == "s1"
    assert "no_session_manifest" not in by[first]["flags"]


def test_session_manifest_makes_toolkit_recordings_participants():
    st = SyntheticStudy()
    st.add_session("s1", "p1")
    g = st.add_recording(ATTEMPT_GAME, "R" + "a" * 40, n_levels=3, variant="toolkit", card=None, session_id="s1")
    st.add_recording(ATTEMPT_GAME, "R" + "a" * 40, n_levels=3, variant="toolkit", card=None)
    att = _attempts(st)
    assert att["guid"].to_list() == [g]
