"""The replay verification of ``arcstudy score`` fanned out over the executor (pipeline.core.executor).

    checks = verify_recordings(recordings, game_dirs, from_file=True, workers=2)

Replaying is the expensive part of scoring (the engine steps every action again); recordings are independent,
so batches of them go to workers and only their `PlayCheck` lists come back. Scoring, cards and tables stay in
the caller. The checks come back in recording order, whatever the number of workers or the cluster, so the
scorecards are byte-identical.

What a worker receives is small: a copy of each recording without what the replay does not read (the step
table of a file replay, the step effects, each line's text); a recording file's frame pixels travel as uint8
arrays, which pickle as raw bytes, rather than being parsed from JSON again on the worker.

A recording whose replay raises (a bug, a game file that breaks the verifier) is reported, not fatal: each of
its plays gets status ``not_replayable`` with ``detail`` starting with `REPLAY_FAILED`, and the run goes on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path

from pipeline.core.executor import default_workers, open_executor

from .plays import RecordingInput
from .verify import PlayCheck, verify_recording

__all__ = ["PARALLEL_MIN_STEPS", "REPLAY_FAILED", "verify_recordings"]

REPLAY_FAILED = "replay failed: "
# Without --workers, a local cluster is started only from this many steps on: replaying runs at roughly
# 500-2,000 steps a second per core, and a local cluster takes 2-7 s to start (docs/cluster.md).
PARALLEL_MIN_STEPS = 20_000
PIECES_PER_WORKER = 4  # batches per worker: enough to even out unequal recordings, few enough to stay cheap

# Columns of the step table that a database replay reads (verify.steps_from_table) or that describe the play.
_TABLE_COLUMNS = ("line_number", "state", "levels_completed", "win_levels", "is_full_reset", "available_actions",
                  "click_x", "click_y", "n_frames", "frame_sha256s")


def failed_checks(rec: RecordingInput, error: BaseException, *, from_file: bool) -> list[PlayCheck]:
    """Every play of `rec` as not replayable because its replay raised `error`."""
    detail = f"{REPLAY_FAILED}{type(error).__name__}: {error}"
    return [PlayCheck(play_id=pid, file_id=rec.file_id, game_id=rec.game_id, guid=rec.guid, status="not_replayable",
                      replay_input="recording" if from_file else "steps",
                      is_only_reset_levels=rec.is_only_reset_levels, detail=detail) for pid, _ in rec.plays()]


def verify_one(rec: RecordingInput, game_dirs: Sequence[Path], from_file: bool) -> list[PlayCheck]:
    """`verify_recording`, with a raising replay reported as the recording's plays' failure."""
    try:
        return verify_recording(rec, game_dirs, from_file=from_file)
    except Exception as err:  # this recording's failure; the others are still verified
        return failed_checks(rec, err, from_file=from_file)


def _verify_batch(batch: Sequence[RecordingInput], game_dirs: tuple[Path, ...], from_file: bool
                  ) -> list[list[PlayCheck]]:
    return [verify_one(rec, game_dirs, from_file) for rec in batch]


def _portable(rec: RecordingInput, from_file: bool) -> RecordingInput:
    """`rec` without what the replay does not read, for sending to a worker."""
    if from_file:
        parsed = rec.parsed
        if parsed is not None:
            slim = [dataclasses.replace(ln, text="", raw_json="") for ln in parsed.steps]
            parsed = dataclasses.replace(parsed, lines=[], steps=slim, usage=[], summary=None, issues=[],
                                         card_slots=[])
        return dataclasses.replace(rec, steps=rec.steps.clear(), effects=(), parsed=parsed)
    return dataclasses.replace(rec, steps=rec.steps.select(_TABLE_COLUMNS), effects=(), parsed=None)


def _batches(recordings: Sequence[RecordingInput], n_pieces: int) -> list[list[int]]:
    """Consecutive runs of recording indexes with about equal numbers of steps (at most `n_pieces` runs)."""
    sizes = [max(1, rec.steps.height) for rec in recordings]
    target = sum(sizes) / max(1, n_pieces)
    batches: list[list[int]] = [[]]
    filled = 0
    for index, size in enumerate(sizes):
        if batches[-1] and filled + size / 2 > target:
            batches.append([])
            filled = 0
        batches[-1].append(index)
        filled += size
    return batches


def verify_recordings(recordings: Sequence[RecordingInput], game_dirs: Iterable[Path], *, from_file: bool,
                      workers: int | None = None, scheduler: str | None = None,
                      progress: Callable[..., Iterable] | None = None) -> list[PlayCheck]:
    """The checks of every recording, in recording order (identical for any `workers` or `scheduler`).

    `workers`: local processes (None: every usable core from `PARALLEL_MIN_STEPS` steps on, else 1);
    `scheduler`: the address of a Dask cluster to use instead."""
    dirs = tuple(Path(d) for d in game_dirs)
    if workers is None and scheduler is None:
        n_steps = sum(rec.steps.height for rec in recordings)
        workers = default_workers() if n_steps >= PARALLEL_MIN_STEPS else 1
    with open_executor(workers, scheduler, n_items=len(recordings)) as ex:
        if ex.n_workers <= 1:  # in this process: one recording per piece (a progress step each), nothing copied
            batches = [[i] for i in range(len(recordings))]
            pieces = [[rec] for rec in recordings]
            description = "replaying"
        else:
            batches = _batches(recordings, ex.n_workers * PIECES_PER_WORKER)
            pieces = [[_portable(recordings[i], from_file) for i in batch] for batch in batches]
            description = f"replaying ({ex.n_workers} workers, {len(pieces)} batches)"
        per_recording: list[list[PlayCheck] | None] = [None] * len(recordings)
        for key, value, error in ex.map_unordered(partial(_verify_batch, game_dirs=dirs, from_file=from_file),
                                                  enumerate(pieces), progress=progress, description=description):
            for slot, index in enumerate(batches[key]):
                per_recording[index] = (value[slot] if error is None
                                        else failed_checks(recordings[index], error, from_file=from_file))
    return [check for checks in per_recording for check in checks or ()]
