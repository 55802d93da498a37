"""`KeptFrames`: the frames `ingest --keep-frames` stored, read a row group at a time as lines are asked for (read
whole, a 300,000-step recording's took `export-transitions --db` to 3.8 GB and `view --db` to 3.6 GB)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.recordings.frames import KeptFrames


def _grid(line: int, index: int) -> bytes:
    return np.full((64, 64), (line * 3 + index) % 16, dtype=np.uint8).tobytes()


def _write(path: Path, groups: list[list[tuple[int, int]]]) -> Path:
    """A frames file of these row groups, each a list of (line_number, frame_index)."""
    schema = pa.schema([("line_number", pa.int64()), ("frame_index", pa.int16()), ("pixels", pa.binary(4096))])
    with pq.ParquetWriter(path, schema) as writer:
        for rows in groups:
            writer.write_table(pa.table({"line_number": [n for n, _ in rows], "frame_index": [i for _, i in rows],
                                         "pixels": [_grid(n, i) for n, i in rows]}, schema=schema))
    return path


def test_frames_come_back_per_line_in_order_across_row_groups(tmp_path: Path, monkeypatch):
    # line 4's three frames span two row groups, written out of order within the line
    path = _write(tmp_path / "f.parquet", [[(1, 0), (2, 0), (4, 1)], [(4, 0), (4, 2), (7, 0)], [], [(9, 0), (9, 1)]])
    reads: list[int] = []
    read_group = pq.ParquetFile.read_row_group

    def counted(self, i, *args, **kwargs):
        reads.append(i)
        return read_group(self, i, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counted)
    kept = KeptFrames(path)
    assert kept.counts == {1: 1, 2: 1, 4: 3, 7: 1, 9: 2} and reads == []  # nothing but line numbers read yet
    got = kept.frames_of([1, 2, 3, 4])
    assert sorted(got) == [1, 2, 4] and got[4].shape == (3, 64, 64) and got[4].dtype == np.uint8
    assert [int(f[0, 0]) for f in got[4]] == [(4 * 3 + i) % 16 for i in range(3)]  # in frame_index order
    assert reads == [0, 1]  # each group once: the one held serves every line in it
    got = kept.frames_of([9])
    assert got[9].shape == (2, 64, 64) and reads[-1] == 3 and 2 not in reads  # the empty group: never read
    assert kept.frames_of([100]) == {}


def test_a_missing_or_damaged_file_gives_hashes_only(tmp_path: Path):
    assert KeptFrames.open(None, tmp_path / "s.duckdb") is None
    assert KeptFrames.open("nowhere.parquet", tmp_path / "s.duckdb") is None
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not a parquet file")
    assert KeptFrames.open("bad.parquet", tmp_path / "s.duckdb") is None
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"line_number": pa.array([1, None], pa.int64()), "frame_index": [0, 0],
                             "pixels": pa.array([_grid(1, 0)] * 2, pa.binary(4096))}), nulls)
    assert KeptFrames.open(str(nulls), tmp_path / "s.duckdb") is None
    path = _write(tmp_path / "ok.parquet", [[(1, 0)]])  # found beside the database, by its stored name
    kept = KeptFrames.open("ok.parquet", tmp_path / "s.duckdb")
    assert kept is not None and kept.frames_of([1])[1].shape == (1, 64, 64)
    assert path.exists()
