"""Frame pixels for display: the settled (last) frame of every step, from the recording file or from the frames
Parquet written by `arcstudy ingest --keep-frames` (frames re-rendered by the engine come from
`pipeline.scoring.verify.render_steps`).

Frames are 64x64 grids of colour indices 0-15 (uint8); a step whose response carried no frame (a post-terminal
echo) has None.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.recordings.frames import FrameError, KeptFrames, decode_frames, split_frame_field

__all__ = ["GRID", "as_grid", "display_frames", "file_frames", "first_frame_difference", "parquet_frames"]

GRID = 64

Frame = np.ndarray | None


def as_grid(frame: Any) -> np.ndarray:
    """A 64x64 grid of colour indices 0-15 as uint8; raises ValueError otherwise."""
    grid = np.asarray(frame)
    if grid.shape != (GRID, GRID):
        raise ValueError(f"a frame must be a 64x64 grid, got shape {grid.shape}")
    if grid.size and (grid.min() < 0 or grid.max() > 15):
        raise ValueError("frame cells must be colour indices 0-15")
    return grid.astype(np.uint8, copy=False)


def file_frames(path: Path | str, line_numbers: Sequence[int]) -> list[Frame]:
    """The settled frame of each of `line_numbers` (1-based lines of a recording file); None for an empty
    frame list. Raises FrameError for a frame that is not a list of 64x64 grids of colours 0-15."""
    wanted = set(line_numbers)
    found: dict[int, np.ndarray] = {}
    with open(path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if number not in wanted:
                continue
            _, array = split_frame_field(text)
            if array is None:
                continue
            try:
                grids = decode_frames(array)
            except FrameError as err:
                raise FrameError(f"line {number}: {err}") from err
            if len(grids):
                found[number] = as_grid(grids[-1])
    return [found.get(n) for n in line_numbers]


def parquet_frames(path: Path, line_numbers: Sequence[int]) -> list[Frame]:
    """The settled frame of each of `line_numbers` from an `ingest --keep-frames` Parquet file, read a row group
    at a time (`KeptFrames`; read whole, a 300,000-step file's took `view --db` of one play to 3.6 GB)."""
    kept = KeptFrames(path)
    wanted = sorted(set(int(n) for n in line_numbers))
    found: dict[int, np.ndarray] = {}
    for start in range(0, len(wanted), PARQUET_LINES):
        for number, frames in kept.frames_of(wanted[start:start + PARQUET_LINES]).items():
            found[number] = as_grid(frames[-1].copy())  # its own 4 KB, not a view of the line's frames
    return [found.get(int(n)) for n in line_numbers]


PARQUET_LINES = 4096  # lines whose frames are read together


def first_frame_difference(stored: Sequence[Frame], rendered: Sequence[Frame], limit: int
                           ) -> tuple[int, int, tuple[int, int, int, int] | None] | None:
    """(step, cells differing, bbox) of the first of the first `limit` steps whose stored frame differs from
    the rendered one (steps missing either are skipped); None when they all agree."""
    from engine.replay import compare_frames

    for index in range(min(limit, len(stored), len(rendered))):
        want, got = stored[index], rendered[index]
        if want is None or got is None:
            continue
        cells, box = compare_frames(want, got)
        if cells:
            return index, cells, box
    return None


def display_frames(frames: Sequence[Frame], n_steps: int) -> list[Frame]:
    """The frame shown at each of `n_steps` steps: a step without a frame of its own (a post-terminal echo
    returns none) shows the previous step's; steps beyond `frames` (never reached by a replay) show none."""
    shown: list[Frame] = []
    previous: Frame = None
    for index in range(n_steps):
        if index >= len(frames):
            shown.append(None)
            continue
        if frames[index] is not None:
            previous = frames[index]
        shown.append(previous)
    return shown
