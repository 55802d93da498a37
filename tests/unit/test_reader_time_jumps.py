"""One far-future timestamp (a clock glitch: year 2099 in the middle of a real recording) costs that line its time
only: the line, its action and its frames are kept, its time is stored as null with one quarantine record naming
it, and the lines after it are read as they would be without the glitch. Time that really goes backwards (a line
earlier than a good line before it) is still quarantined line by line, as `time_goes_backwards`.

The inputs are a shared sample recording with one line's timestamp rewritten, built at test time."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.recordings.reader import LineView, read_recording_file, recording_tables

SAMPLE = (Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "toolkit"
          / "bt33_click_three_levels.frames.jsonl")  # 29 frame lines, one play, clicks, times increasing
FUTURE = "2099-01-01T00:00:00+00:00"


def _write(tmp_path: Path, times: dict[int, str]) -> Path:
    """The sample with the timestamps of some lines (1-based) replaced."""
    lines = SAMPLE.read_text().splitlines()
    for number, ts in times.items():
        obj = json.loads(lines[number - 1])
        obj["timestamp"] = ts
        lines[number - 1] = json.dumps(obj)
    path = tmp_path / SAMPLE.name
    path.write_text("\n".join(lines) + "\n")
    return path


def _time(number: int) -> datetime:
    return datetime.fromisoformat(json.loads(SAMPLE.read_text().splitlines()[number - 1])["timestamp"])


def _between(a: int, b: int) -> str:
    """A time between those of sample lines a and b (a < b)."""
    return (_time(a) + (_time(b) - _time(a)) / 2).isoformat()


@pytest.fixture(scope="module")
def clean():
    return read_recording_file(SAMPLE)


@pytest.mark.parametrize("columns", [False, True], ids=["lines", "columns"])
@pytest.mark.parametrize("glitch", [14, 1, 27], ids=["middle", "first-line", "third-last"])
def test_a_far_future_line_keeps_its_step_and_loses_only_its_time(tmp_path, clean, columns, glitch):
    rec = read_recording_file(_write(tmp_path, {glitch: FUTURE}), columns=columns)
    assert isinstance(rec.steps, LineView) == columns
    # every line kept, counted and cut into plays exactly as without the glitch
    assert [ln.number for ln in rec.steps] == [ln.number for ln in clean.steps] == list(range(1, 30))
    assert [ln.action_id for ln in rec.steps] == [ln.action_id for ln in clean.steps]
    assert [ln.hashes for ln in rec.steps] == [ln.hashes for ln in clean.steps]
    assert rec.effects == clean.effects and rec.play_index == clean.play_index
    # only that line's time is gone; every other line keeps its own
    times = {ln.number: ln.recorded_at for ln in rec.steps}
    assert times[glitch] is None
    assert all(times[n] == _time(n) for n in times if n != glitch)
    # one record, naming the line, its value and the neighbours that show it is the odd one
    (issue,) = rec.issues
    assert (issue.location, issue.check, issue.column, issue.value) == (f"line {glitch}", "time_jumps_ahead",
                                                                       "timestamp", FUTURE)
    assert issue.is_line_kept and issue.target_table == "core_arc3__steps"
    assert f"line {glitch + 1}: {_time(glitch + 1).isoformat()}" in issue.reason
    assert (f"line {glitch - 1}: {_time(glitch - 1).isoformat()} before it" in issue.reason) == (glitch > 1)
    assert "kept without its time" in issue.reason and issue.outcome == "line kept without its timestamp"
    assert issue.raw_text.startswith(f'{{"timestamp": "{FUTURE}"')  # the line as written (4 KiB of it)


@pytest.mark.parametrize("columns", [False, True], ids=["lines", "columns"])
def test_the_stored_rows_hold_null_for_that_time_and_the_play_its_remaining_times(tmp_path, clean, columns):
    path = _write(tmp_path, {1: FUTURE, 14: FUTURE})  # the play's first line and one in its middle
    rec = read_recording_file(path, columns=columns)
    assert [(i.location, i.check) for i in rec.issues] == [("line 1", "time_jumps_ahead"),
                                                          ("line 14", "time_jumps_ahead")]
    tables = recording_tables(rec, "f")
    steps = tables["core_arc3__steps"]
    assert steps.height == 29
    dropped = steps.filter(steps["recorded_at"].is_null())
    assert dropped["line_number"].to_list() == [1, 14]
    assert all("timestamp_dropped" in flags for flags in dropped["flags"])
    assert not any("timestamp_dropped" in flags for flags in steps.filter(steps["recorded_at"].is_not_null())["flags"])
    (play,) = tables["core_arc3__plays"].iter_rows(named=True)
    assert play["n_steps"] == 29
    assert play["started_at"] == _time(2) and play["ended_at"] == _time(29)  # the times that remain
    # the raw layer keeps the line as written
    raw = tables["raw_arc3__recording_lines"].filter(tables["raw_arc3__recording_lines"]["line_number"] == 14)
    assert json.loads(raw["raw_json"][0])["timestamp"] == FUTURE


@pytest.mark.parametrize("columns", [False, True], ids=["lines", "columns"])
def test_time_going_backwards_is_still_quarantined_as_before(tmp_path, columns):
    # A line earlier than the good line before it: that line is left out, with the reason it always had.
    rec = read_recording_file(_write(tmp_path, {13: "2020-01-01T00:00:00+00:00"}), columns=columns)
    assert [(i.location, i.check, i.value) for i in rec.issues] == [
        ("line 13", "time_goes_backwards", "2020-01-01T00:00:00+00:00")]
    assert rec.issues[0].reason == (f"timestamp 2020-01-01T00:00:00+00:00 is earlier than the previous line's "
                                    f"{_time(12).isoformat()}")
    assert not rec.issues[0].is_line_kept
    assert 13 not in [ln.number for ln in rec.steps] and len(rec.steps) == 28
    assert all(ln.recorded_at == _time(ln.number) for ln in rec.steps)


def test_a_clock_set_back_for_the_rest_of_the_file_quarantines_every_later_line(tmp_path):
    # Lines 11 on are earlier than line 9 and 10: line 10 is not the odd one (the line after it is earlier than
    # line 9 too), so nothing is forgiven and each later line is time_goes_backwards, as before.
    back = {n: f"2020-01-01T00:00:{n:02d}+00:00" for n in range(11, 30)}
    rec = read_recording_file(_write(tmp_path, back))
    assert {i.check for i in rec.issues} == {"time_goes_backwards"}
    assert [i.location for i in rec.issues] == [f"line {n}" for n in range(11, 30)]
    assert [ln.number for ln in rec.steps] == list(range(1, 11))


def test_a_line_overtaken_within_the_window_is_not_forgiven(tmp_path):
    # Line 14 is a little early (between lines 12 and 13): line 13 is later than line 14, but line 15 is later
    # than line 13 again, so line 13's time is not the odd one; line 14 is time_goes_backwards, as before.
    rec = read_recording_file(_write(tmp_path, {14: _between(12, 13)}))
    assert [(i.location, i.check) for i in rec.issues] == [("line 14", "time_goes_backwards")]
    assert all(ln.recorded_at is not None for ln in rec.steps)


def test_a_jump_too_near_the_end_cannot_be_confirmed_and_is_judged_as_before(tmp_path):
    # On the last line nothing comes after it: it is kept with its time, no record.
    rec = read_recording_file(_write(tmp_path, {29: FUTURE}))
    assert list(rec.issues) == [] and rec.steps[-1].recorded_at.isoformat() == FUTURE
    # On the line before the last, one line cannot confirm it: that last line is time_goes_backwards, as before.
    rec = read_recording_file(_write(tmp_path, {28: FUTURE}))
    assert [(i.location, i.check) for i in rec.issues] == [("line 29", "time_goes_backwards")]
    assert rec.steps[-1].number == 28 and rec.steps[-1].recorded_at.isoformat() == FUTURE


def _timeline_file(folder: Path, seconds: list[int]) -> Path:
    """A small frameless recording whose line i is written at 2026-01-01 plus seconds[i]."""
    guid = "9064696e-1bf8-40f1-8b96-607f92b98787"
    rows = []
    for i, s in enumerate(seconds):
        data = {"game_id": "ab12-00000000", "state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 3,
                "action_input": {"id": "RESET" if i == 0 else f"ACTION{1 + i % 4}", "data": {}, "reasoning": i},
                "guid": guid, "full_reset": i == 0, "available_actions": [1, 2, 3, 4]}
        stamp = f"2026-01-01T{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}+00:00"
        rows.append(json.dumps({"timestamp": stamp, "data": data}))
    path = folder / f"ab12-00000000-{guid}.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seconds=st.lists(st.integers(0, 80_000), min_size=1, max_size=9), columns=st.booleans())
def test_any_timeline_keeps_its_times_in_order_and_loses_a_line_only_to_time_going_backwards(tmp_path, seconds,
                                                                                           columns):
    rec = read_recording_file(_timeline_file(tmp_path, seconds), columns=columns)
    by_check: dict[str, list[int]] = {}
    for issue in rec.issues:
        by_check.setdefault(issue.check, []).append(int(issue.location.removeprefix("line ")))
    assert set(by_check) <= {"time_goes_backwards", "time_jumps_ahead"}
    kept = [ln.number for ln in rec.steps]
    # a line is either kept or left out for its time; a kept line loses its time only with a record
    assert sorted(kept + by_check.get("time_goes_backwards", [])) == list(range(1, len(seconds) + 1))
    assert [ln.number for ln in rec.steps if ln.recorded_at is None] == by_check.get("time_jumps_ahead", [])
    times = [ln.recorded_at for ln in rec.steps if ln.recorded_at is not None]
    assert times == sorted(times)  # what remains is a timeline in order


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.integers(0, 600), min_size=4, max_size=9), data=st.data())
def test_one_far_future_line_before_the_last_two_costs_nothing_but_its_time(tmp_path, steps, data):
    seconds = [sum(steps[:i + 1]) for i in range(len(steps))]  # in order (equal times allowed)
    glitch = data.draw(st.integers(0, len(seconds) - 3))
    seconds[glitch] = 86_399  # later than every other line
    rec = read_recording_file(_timeline_file(tmp_path, seconds))
    assert [ln.number for ln in rec.steps] == list(range(1, len(seconds) + 1))
    assert [(i.location, i.check) for i in rec.issues] == [(f"line {glitch + 1}", "time_jumps_ahead")]
    assert [ln.recorded_at is None for ln in rec.steps] == [i == glitch for i in range(len(seconds))]
