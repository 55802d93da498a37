"""The Arrow columns of exported transition rows are built from buffers (`pipeline.datasets.transitions`): each
string, number, list and frame column holds exactly the rows' values, nulls and non-ASCII text included."""

from __future__ import annotations

import hashlib

import numpy as np

from pipeline.datasets.transitions import ROW_COLUMNS, RowBlock, build_batch


def _row(i: int, play_id: str | None, state: str | None) -> dict:
    return dict(game_id="ls20-9607627b", play_id=play_id, source="human", step=i, action="ACTION6", action_id=6,
                x=None if i % 2 else i, y=3, levels_completed=i, win_levels=7, state=state,
                available_actions=None if i == 1 else [1, 6], is_level_change=bool(i % 2), is_counted=True,
                verified=i != 2, recovered=False, file_id="f" * 64, line_number=None if i == 0 else i + 1)


def test_the_columns_hold_the_rows_values_including_nulls_and_non_ascii_text():
    rows = [_row(0, "ä-guid/0", "NOT_FINISHED"), _row(1, None, None), _row(2, "guid/1 ✓", "WIN"),
            _row(3, "guid/2", "GAME_OVER")]
    frames = [np.full((64, 64), i, dtype=np.uint8).tobytes() for i in range(4)]
    counts = [1, 0, 2, 1]
    data = [frames[0], frames[1] + frames[2], frames[3]]
    digests = [b"".join(hashlib.sha256(f).digest() for f in (d[i:i + 4096] for i in range(0, len(d), 4096)))
               for d in data]
    values = [tuple(row[c] for c in ROW_COLUMNS) for row in rows]  # a block's rows: tuples in column order
    batch = build_batch([RowBlock(values[:2], counts[:2], data[:1], digests[:1], 4096),
                         RowBlock(values[2:], counts[2:], data[1:], digests[1:], 3 * 4096)])
    got = batch.to_pylist()
    for want, row in zip(rows, got, strict=True):
        assert {k: row[k] for k in want} == want
    assert [len(r["frames"]) for r in got] == counts
    assert [r["frame_sha256s"] for r in got] == [[hashlib.sha256(f).hexdigest() for f in r["frames"]] for r in got]
    assert got[2]["frames"] == [frames[1], frames[2]] and got[3]["frame_shape"] == [64, 64]
