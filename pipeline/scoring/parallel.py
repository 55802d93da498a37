"""The expensive half of ``arcstudy score`` fanned out over the executor (pipeline.core.executor).

    steps, plays, files, problems, checks = read_and_verify(paths, game_dirs, recovered, workers=2)
    checks = verify_recordings(recordings, game_dirs, from_file=False, workers=2)

Reading recording files (JSON frames parsed into pixels) and replaying them (the engine steps every action
again) dominate scoring, and every file is independent: batches of files go to workers, each worker reads its
files and replays them at once (one parse per file), and only the step and play tables and the `PlayCheck`
lists come back. With one worker the files are read and replayed one after the other in this process, the
same way: a file's pixels live only while it is replayed. Two local workers are this process and one helper
process (`HelperExecutor`), each taking the next file when it is free; three or more start a local Dask
cluster (`_open`). Database plays ship their step rows (frame hashes,
no pixels). Scoring, cards and tables stay in the caller. Results come back in input order, whatever the
number of workers or the cluster, so the scorecards are byte-identical.

A recording whose replay raises (a bug, a game file that breaks the verifier) is reported, not fatal: each of
its plays gets status ``not_replayable`` with ``detail`` starting with `REPLAY_FAILED`, and the run goes on. A
file whose reading raises on a worker is reported as rejected input, like a file that cannot be read.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path

import polars as pl

from pipeline.core.executor import (
    Executor,
    HelperExecutor,
    default_workers,
    open_executor,
    open_helper_executor,
)
from pipeline.core.outputs import OutputError
from pipeline.core.sandbox import SandboxFailure
from pipeline.core.spool import Spool

from .plays import (
    STEP_COLUMNS,
    FileRef,
    RecordingInput,
    read_recording_files,
    recording_order,
    recordings_from_tables,
    same_content_as,
)
from .verify import PlayCheck, verify_recording

__all__ = ["PARALLEL_MIN_BYTES", "PARALLEL_MIN_STEPS", "REPLAY_FAILED", "open_read_executor", "read_and_verify",
           "verify_recordings"]

REPLAY_FAILED = "replay failed: "
# Without --workers, other processes are started only from these sizes on: a local cluster takes 2-7 s to start
# (docs/cluster.md), against roughly 10 MB of recording files read and replayed, or 3,000 database steps
# replayed, per second and core. On two cores (this process and a helper, `_open`) the break-even is lower but
# close: 35 MB of engine-made recordings (9 files) scored in 1.71-1.76 s with the helper against 1.70-1.79 s
# without, 17 MB in 1.57-1.64 s against 1.46-1.52 s.
PARALLEL_MIN_BYTES = 64 << 20
PARALLEL_MIN_STEPS = 20_000
PIECES_PER_WORKER = 8  # batches per worker: enough to even out unequal files (the last batch is the tail), few enough to stay cheap
# Each worker of a local cluster (and the helper process) imports the engine and the scorer as it starts rather
# than with its first batch.
WORKER_PRELOAD = ("pipeline.scoring.parallel",)

# Columns of the step table that a database replay reads (verify.steps_from_table).
_TABLE_COLUMNS = ("line_number", "state", "levels_completed", "win_levels", "is_full_reset", "available_actions",
                  "click_x", "click_y", "n_frames", "frame_sha256s")

Progress = Callable[..., Iterable]


def _say_one_process(size: str, threshold: str) -> None:
    """Tell the user why the automatic choice left the other cores idle (below the threshold a local cluster
    costs more to start than it saves)."""
    from pipeline.core.console import out

    out.info(f"{size}: below the {threshold} from which worker processes pay for their start-up, so the replays "
             "run in this one process (--workers N to use N processes anyway)")


def failed_checks(rec: RecordingInput, error: BaseException, *, from_file: bool) -> list[PlayCheck]:
    """Every play of `rec` as not replayable because its replay raised `error`."""
    if isinstance(error, SandboxFailure):  # the game's code ended abnormally (the detail names the game)
        detail = f"{REPLAY_FAILED}stopped in the sandbox ({error.kind}): {error.detail}"
    else:
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


def _batches(sizes: Sequence[int], n_pieces: int) -> list[list[int]]:
    """Consecutive runs of indexes with about equal total `sizes` (at most about `n_pieces` runs)."""
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


# ------------------------------------------------------------------------------------------------------
# recording files: read and replay on the same worker
# ------------------------------------------------------------------------------------------------------
FileResult = tuple  # (steps, plays, files, problems, checks by file_id) of one file, as read_recording_files


def _read_and_verify_file(path: Path, game_dirs: Sequence[Path], recovered: Mapping[str, Sequence[int | str]]
                          ) -> FileResult:
    steps, plays, files, problems = read_recording_files([path], step_columns=STEP_COLUMNS)
    # A playback script holds actions only: it is replayed and verified after `replay_scripts`.
    recorded = (steps, plays) if not plays["is_replay_needed"].any() else (  # no copy of a large file's steps
        steps.filter(_recorded(plays)), plays.filter(_recorded(plays)))
    checks = {rec.file_id: verify_one(rec, game_dirs, True)
              for rec in recordings_from_tables(*recorded, files, recovered)}
    # The parsed file (pixels) is dropped here, once replayed: the caller scores from the tables.
    return steps, plays, _portable_refs(files), problems, checks


def _recorded(plays: pl.DataFrame) -> pl.Expr:
    """Rows of files that are recordings, not playback scripts (``is_replay_needed``: actions only)."""
    return ~pl.col("file_id").is_in(plays.filter(pl.col("is_replay_needed"))["file_id"].implode())


def _portable_refs(files: Mapping[str, FileRef]) -> dict[str, tuple]:
    """(name, path, lines skipped) per file: the parsed recording (pixels) stays behind."""
    return {fid: (ref[0], ref[1], ref.n_skipped_lines) for fid, ref in files.items()}


def _read_and_verify_batch(paths: Sequence[Path], game_dirs: tuple[Path, ...],
                           recovered: Mapping[str, Sequence[int | str]]) -> list[FileResult | str]:
    results: list[FileResult | str] = []
    for path in paths:
        try:
            results.append(_read_and_verify_file(path, game_dirs, recovered))
        except OutputError:  # the scratch space failed, not the file: the run stops (exit 1)
            raise
        except Exception as err:  # this file's failure (read_recording_files reports the expected ones)
            results.append(_unreadable(err))
    return results


def _unreadable(err: BaseException) -> str:
    return f"unreadable: reading failed on a worker: {type(err).__name__}: {err}"


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


@contextmanager
def _open(workers: int | None, scheduler: str | None, n_items: int) -> Iterator[Executor]:
    """The executor for `workers` local processes or the cluster at `scheduler`.

    Two local workers are this process and one helper process (`HelperExecutor`), not a two-worker Dask
    cluster. On four simulated studies (320 recordings, 1.25 GB, two cores, quiet) the cluster's start
    (the first file was read 2.2 s into the run, against 0.6 s), its scheduler in this process and its close
    made `--workers 2` take 14.1-15.4 s where the helper takes 11.0-12.8 s (one process: 18.6-23.5 s). The
    helper starts while this process reads its first files, and this process reads and replays too: a file
    goes to whichever of the two is free. Three or more workers start a local Dask cluster."""
    if scheduler is None and workers == 2 and n_items > 1:
        with open_helper_executor(WORKER_PRELOAD) as ex:
            yield ex
        return
    with open_executor(workers, scheduler, n_items=n_items, preload=WORKER_PRELOAD) as ex:
        yield ex


def _one_at_a_time(ex: Executor) -> bool:
    """Whether pieces are single files (or recordings): in this process (a progress step each, nothing copied),
    or handed to whichever of this process and its helper is free (a short tail); a cluster gets batches."""
    return ex.n_workers <= 1 or isinstance(ex, HelperExecutor)


@contextmanager
def open_read_executor(paths: Sequence[Path], workers: int | None = None, scheduler: str | None = None
                       ) -> Iterator[Executor]:
    """The executor `read_and_verify(paths, ..., executor=)` runs on: `workers` local processes (None: every
    usable core from PARALLEL_MIN_BYTES of files on, else this process, and the user is told why), or the
    cluster at `scheduler` (`_open`). A helper process or a local cluster starts as this opens: open it before
    other set-up to overlap the two."""
    sizes = [_size(Path(p)) for p in paths]
    if workers is None and scheduler is None:
        workers = default_workers() if sum(sizes) >= PARALLEL_MIN_BYTES else 1
        if workers == 1 and default_workers() > 1 and len(paths) > 1:
            _say_one_process(f"{sum(sizes) / 1e6:,.0f} MB of recordings", f"{PARALLEL_MIN_BYTES >> 20} MB")
    with _open(workers, scheduler, len(paths)) as ex:
        yield ex


def read_and_verify(paths: Sequence[Path], game_dirs: Iterable[Path],
                    recovered: Mapping[str, Sequence[int | str]] | None = None, *, workers: int | None = None,
                    scheduler: str | None = None, progress: Progress | None = None,
                    executor: Executor | None = None
                    ) -> tuple[pl.DataFrame, pl.DataFrame, dict, list[tuple[Path, str]], list[PlayCheck] | None]:
    """`read_recording_files(paths)` plus the replay checks of every recording read (pass them to
    `score_recordings(..., checks=)`): each file is read and replayed at once, and only its tables and checks
    are kept (its frame pixels are let go as soon as it is replayed, so memory does not grow with the files).

    On workers (`workers` > 1, or None from `PARALLEL_MIN_BYTES` of files on, or `scheduler`; or the `executor`
    given, from `open_read_executor`) batches of files are read and replayed there; otherwise one file after
    the other in this process. The checks are None only
    when the same content was given under two paths (`score_recordings` then replays it itself)."""
    paths = [Path(p) for p in paths]
    dirs = tuple(Path(d) for d in game_dirs)
    recovered = dict(recovered or {})
    sizes = [_size(p) for p in paths]
    per_path: list[FileResult | str | None] = [None] * len(paths)
    with (nullcontext(executor) if executor is not None else open_read_executor(paths, workers, scheduler)) as ex:
        if _one_at_a_time(ex):
            batches = [[i] for i in range(len(paths))]
            description = "reading and replaying" + (" (this process and a helper)" if ex.n_workers > 1 else "")
        else:
            batches = _batches(sizes, ex.n_workers * PIECES_PER_WORKER)
            description = f"reading and replaying ({ex.n_workers} workers, {len(batches)} batches)"
        fn = partial(_read_and_verify_batch, game_dirs=dirs, recovered=recovered)
        pieces = ((key, [paths[i] for i in batch]) for key, batch in enumerate(batches))
        for key, value, error in ex.map_unordered(fn, pieces, progress=progress, description=description):
            if isinstance(error, OutputError):  # the scratch space failed, not the files: the run stops (exit 1)
                raise error
            for slot, index in enumerate(batches[key]):
                per_path[index] = value[slot] if error is None else _unreadable(error)
    steps_frames, plays_frames, files, checks = [], [], {}, {}
    problems: list[tuple[Path, str]] = Spool()  # a flood of bad lines: their reasons wait on disk
    for path, result in zip(paths, per_path, strict=True):
        if isinstance(result, str):
            problems.append((path, result))
            continue
        steps, plays, refs, file_problems, file_checks = result
        if refs and refs.keys() <= files.keys():
            problems.append((path, same_content_as(files[next(iter(refs))][0])))
            continue
        problems.extend_mapped(file_problems)  # (a worker's spool: read from its file when asked for)
        if steps.height:
            steps_frames.append(steps)
            plays_frames.append(plays)
        files.update({fid: FileRef(name, ref_path, None, skipped) for fid, (name, ref_path, skipped) in refs.items()})
        for fid, found in file_checks.items():
            checks.setdefault(fid, []).append(found)
    if not steps_frames:
        from schemas import empty_frame

        steps_all, plays_all = empty_frame("core_arc3__steps"), empty_frame("core_arc3__plays")
    else:
        # diagonal: a recording's steps hold `STEP_COLUMNS`, a playback script's every column (its replay reads them)
        steps_all, plays_all = (pl.concat(steps_frames, how="diagonal_relaxed"),
                                pl.concat(plays_frames, how="vertical_relaxed"))
    # The same content under two paths is one recording read twice, whose replays were each made alone: such
    # a recording is replayed again by `score_recordings`.
    ordered = []
    recorded = _recorded(plays_all)  # the scripts' checks come after their replay
    for file_id in recording_order(steps_all.select("file_id").filter(recorded), plays_all.filter(recorded)):
        found = checks.get(file_id, [])
        if len(found) != 1:
            return steps_all, plays_all, files, problems, None
        ordered.extend(found[0])
    return steps_all, plays_all, files, problems, ordered


# ------------------------------------------------------------------------------------------------------
# recordings already in memory (database steps, or files read by the caller)
# ------------------------------------------------------------------------------------------------------
def _verify_batch(batch: Sequence[RecordingInput], game_dirs: tuple[Path, ...], from_file: bool
                  ) -> list[list[PlayCheck]]:
    return [verify_one(rec, game_dirs, from_file) for rec in batch]


def _portable(rec: RecordingInput, from_file: bool) -> RecordingInput:
    """`rec` without what the replay does not read, for sending to a worker: a recording file is read again
    there from its path (workers see the same paths) rather than shipped as pixels."""
    if from_file:
        parsed = rec.parsed if rec.path is None else None
        return dataclasses.replace(rec, steps=rec.steps.clear(), effects=(), parsed=parsed)
    return dataclasses.replace(rec, steps=rec.steps.select(_TABLE_COLUMNS), effects=(), parsed=None)


def verify_recordings(recordings: Sequence[RecordingInput], game_dirs: Iterable[Path], *, from_file: bool,
                      workers: int | None = None, scheduler: str | None = None,
                      progress: Progress | None = None) -> list[PlayCheck]:
    """The checks of every recording, in recording order (identical for any `workers` or `scheduler`).

    `workers`: local processes (None: every usable core from `PARALLEL_MIN_STEPS` steps on, else 1);
    `scheduler`: the address of a Dask cluster to use instead."""
    dirs = tuple(Path(d) for d in game_dirs)
    if workers is None and scheduler is None:
        n_steps = sum(rec.steps.height for rec in recordings)
        workers = default_workers() if n_steps >= PARALLEL_MIN_STEPS else 1
        if workers == 1 and default_workers() > 1 and len(recordings) > 1:
            _say_one_process(f"{n_steps:,} steps to replay", f"{PARALLEL_MIN_STEPS:,} steps")
    with _open(workers, scheduler, len(recordings)) as ex:
        if ex.n_workers <= 1:  # in this process: one recording per piece (a progress step each), nothing copied
            batches = [[i] for i in range(len(recordings))]
            pieces = [[rec] for rec in recordings]
            description = "replaying"
        elif _one_at_a_time(ex):  # this process and its helper: one recording per piece, picklable
            batches = [[i] for i in range(len(recordings))]
            pieces = [[_portable(rec, from_file)] for rec in recordings]
            description = "replaying (this process and a helper)"
        else:
            batches = _batches([max(1, rec.steps.height) for rec in recordings], ex.n_workers * PIECES_PER_WORKER)
            pieces = [[_portable(recordings[i], from_file) for i in batch] for batch in batches]
            description = f"replaying ({ex.n_workers} workers, {len(pieces)} batches)"
        per_recording: list[list[PlayCheck] | None] = [None] * len(recordings)
        for key, value, error in ex.map_unordered(partial(_verify_batch, game_dirs=dirs, from_file=from_file),
                                                  enumerate(pieces), progress=progress, description=description):
            for slot, index in enumerate(batches[key]):
                per_recording[index] = (value[slot] if error is None
                                        else failed_checks(recordings[index], error, from_file=from_file))
    return [check for checks in per_recording for check in checks or ()]
