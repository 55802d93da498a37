"""arcstudy's own temporary files (a flood of quarantine records, a large recording's line data) going to a full
or unwritable $TMPDIR end the run as an output error (exit 1), never as the input's failure ("unreadable")."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from pipeline.core.outputs import OutputError
from pipeline.core.spool import Spool

GUID = "9064696e-1bf8-40f1-8b96-607f92b98787"


@pytest.fixture
def no_scratch_space(tmp_path: Path, monkeypatch) -> Path:
    gone = tmp_path / "no-such-folder"
    monkeypatch.setattr(tempfile, "tempdir", str(gone))
    return gone


def test_a_spool_that_cannot_spill_is_an_output_error(no_scratch_space: Path):
    spool = Spool(limit=2)
    with pytest.raises(OutputError, match=r"\$TMPDIR") as err:
        spool.extend(range(5))
    assert str(no_scratch_space) in str(err.value)


def test_line_data_that_cannot_spill_is_an_output_error(no_scratch_space: Path):
    from pipeline.recordings.reader import DataColumn

    column = DataColumn(held_bytes=0)
    with pytest.raises(OutputError, match=r"\$TMPDIR"):
        column.append({"a": 1}, '{"a":1}')


def test_pixels_that_cannot_spill_are_an_output_error(no_scratch_space: Path):
    import numpy as np

    from pipeline.recordings.reader import FrameColumn

    column = FrameColumn(held_bytes=0)
    with pytest.raises(OutputError, match=r"\$TMPDIR"):
        column[0] = np.zeros((1, 64, 64), dtype=np.uint8)


def _recording(path: Path, n: int) -> Path:
    rows = [{"timestamp": f"2026-01-01T00:00:{i // 1000:02d}.{i % 1000:03d}000+00:00", "data": {
        "game_id": "bt11-fd9df0622a1a", "state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 5,
        "action_input": {"id": "RESET" if i == 0 else "ACTION3", "data": {}, "reasoning": f"step {i}"},
        "guid": GUID, "full_reset": i == 0, "available_actions": [3, 4]}} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_score_stops_on_a_full_scratch_space_and_does_not_blame_the_file(tmp_path: Path, monkeypatch):
    """`score FILES` of a large recording whose line data must spill: an output error, not `unreadable`."""
    import pipeline.recordings.reader as reader
    from pipeline.scoring.parallel import read_and_verify

    path = _recording(tmp_path / f"bt11-fd9df0622a1a-{GUID}.jsonl", 50)
    monkeypatch.setattr(reader, "COLUMNS_FROM_BYTES", 0)
    monkeypatch.setattr(reader, "HELD_DATA_BYTES", 0)
    steps, *_ = read_and_verify([path], [], workers=1)  # with room to spill, the file reads
    assert steps.height == 50
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-folder"))
    with pytest.raises(OutputError, match=r"\$TMPDIR"):
        read_and_verify([path], [], workers=1)
