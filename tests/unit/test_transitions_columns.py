"""A large recording (its lines held as columns) is exported from steps made as they are asked for
(`_ReplaySteps`) and records read from the columns: the same steps and records as a file read as a list."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.datasets.transitions import _Recording, _ReplaySteps
from pipeline.recordings.reader import LineView, read_recording_file

TOOLKIT = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "toolkit"


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) if isinstance(x, np.ndarray) or isinstance(y, np.ndarray) else x == y
               for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("name", ["bt33_click_three_levels.frames.jsonl", "bt11_two_plays_fullreset.noframes.jsonl"])
def test_a_recording_read_as_columns_gives_the_steps_and_records_of_one_read_as_a_list(name: str):
    path = TOOLKIT / name
    as_list = _Recording.of_file(read_recording_file(path, want_frames=True, keep_raw_json=False, columns=False))
    as_columns = _Recording.of_file(read_recording_file(path, want_frames=True, keep_raw_json=False, columns=True))
    assert isinstance(as_columns.steps, _ReplaySteps) and isinstance(as_list.steps, list)
    n = len(as_list.steps)
    assert n > 5 and len(as_columns.steps) == n
    assert all(_same(a, b) for a, b in zip(as_columns.steps, as_list.steps, strict=True))
    part = as_columns.steps[2:5]  # a slice is kept: its steps are read back from it, not made again
    assert all(_same(a, b) for a, b in zip(part, as_list.steps[2:5], strict=True))
    assert as_columns.steps[3] is part[1] and _same(as_columns.steps[-1], as_list.steps[-1])
    assert _same(as_columns.steps[0], as_list.steps[0])  # made again: not in a kept slice
    for got, want in zip(as_columns.records, as_list.records, strict=True):
        assert (got.action_id, got.levels_completed, got.win_levels) == (want.action_id, want.levels_completed,
                                                                          want.win_levels)
    assert len(as_columns.records) == n and as_columns.records[n - 1].action_id == as_list.records[-1].action_id
    for name_ in ("effects", "step_play", "play_ids", "has_pixels"):
        assert getattr(as_columns, name_) == getattr(as_list, name_), name_
    assert isinstance(read_recording_file(path, columns=True).steps, LineView)


@pytest.mark.parametrize("name", ["bt33_click_three_levels.frames.jsonl", "bt11_two_plays_fullreset.noframes.jsonl"])
def test_a_stored_recordings_steps_made_a_slice_at_a_time_equal_the_list(name: str, monkeypatch):
    """The database path's steps (`_ReplaySteps.of_table`, for `export-transitions --db`): as `steps_from_table`
    gives them, by index, slice and iteration, whatever the slice size."""
    import pipeline.datasets.transitions as transitions
    from pipeline.scoring.plays import read_recording_files, recordings_from_tables
    from pipeline.scoring.verify import steps_from_table

    steps, plays, files, _ = read_recording_files([TOOLKIT / name])
    (rec,) = recordings_from_tables(steps, plays, files)
    whole = steps_from_table(rec)
    monkeypatch.setattr(transitions, "READ_SLICE_STEPS", 4)
    made = _ReplaySteps.of_table(rec)
    assert len(made) == len(whole) > 5
    assert list(made) == whole and made[2:9] == whole[2:9] and made[::3] == whole[::3]
    assert made[-1] == whole[-1] and made[4] == whole[4]
    with pytest.raises(IndexError):
        made[len(whole)]
