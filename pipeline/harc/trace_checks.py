"""Replay every H-ARC participant-task trace through the editor engine (engine.harc) and tabulate the result.

One row per trace in `out_harc__trace_checks`:

- `consistent`: after every row the editor's grid equals the logged `test_output_grid` and its drop-downs equal
  the logged sizes (harc-editor.md §4.3 V1, V2);
- `divergent`: the first row where they disagree, or a row the page could not have logged in the replayed
  state (row's action_number, action, recorded vs replayed grid and sizes, and the engine's reason);
- `not_replayable`: a row the engine cannot apply at all (unknown action, malformed value, copy_from_input with
  no known test input, ...), with the reason.

Documented logging quirks (Q3-Q16) are modelled by the engine and listed as note codes, not divergences.
Secondary checks (V3-V6: colour, tool, clipboard, selection, attempt, solved, input) are notes too unless
`strict=True` (the CLI's --strict-replay), which makes the first one a `state` divergence.

Chaining (spec §1.2, §6): the previous task's final grid sits on the undo stack at task start, so each trace
gets the last logged grid of the same participant's trace with task_number - 1 (the tutorial trace for task
1, when the release has it). When that trace is absent the grid is unknown and an undo reaching it adopts the
logged grid (note Q3). Chaining by explicit task_number rather than by list position keeps a missing task from
feeding the wrong grid.

Parallelism: participants are independent once their previous grids are known, so traces are replayed in
chunks on worker processes (pipeline.core.executor: a local Dask cluster or a remote one). Rows are sorted
by the primary key afterwards, so the table is identical for any number of workers. A chunk whose replay
raises gives its traces `not_replayable` rows saying so; the other chunks go on.

Memory: `check_actions` cuts the events into chunks of whole traces and turns rows into the engine's row
dicts one chunk at a time, in the worker that replays it (a worker receives a columnar frame slice, not
pickled dicts), so neither the caller nor a worker ever holds every row as Python objects.
"""

from __future__ import annotations

import gc
import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any

import polars as pl

from engine.harc import ReplayResult, replay_trace
from pipeline.core.executor import Executor, open_executor

TABLE = "out_harc__trace_checks"
KEY = ("release_generation", "participant_id", "task_id")
# core_harc__actions columns -> the CSV column names the engine's row mappings use (engine/harc/editor.py).
ENGINE_COLUMNS = {
    "action_number": "action_id",
    "attempt_number": "attempt_number",
    "is_solved": "solved",
    "action": "action",
    "action_row": "action_x",
    "action_col": "action_y",
    "select_loc": "select_loc",
    "selected_data_json": "selected_data",
    "selected_symbol": "selected_symbol",
    "selected_tool": "selected_tool",
    "copy_paste_data_json": "copy_paste_data",
    "test_output_grid": "test_output_grid",
    "test_output_height": "test_output_size_x",
    "test_output_width": "test_output_size_y",
    "test_input_grid": "test_input_grid",
}  # not test_input_size_x/_y: the replay checks the input grid itself (V6), never its logged sizes
# Columns of core_harc__actions a replay needs.
ACTION_COLUMNS = (*KEY, "task_split", "task_number", "is_tutorial", "flags", *ENGINE_COLUMNS)
# Row flags that describe the whole participant-task; carried into the trace check.
TASK_FLAGS = ("tutorial", "no_terminal_row", "time_not_monotonic", "incomplete_participant")

Progress = Callable[[Iterable[Any], str, int], Iterable[Any]]


@dataclass(frozen=True)
class TraceJob:
    """Everything needed to replay one trace, picklable for the worker processes."""

    key: tuple[str, str, str]
    task_split: str
    task_number: int
    rows: tuple[dict[str, Any], ...]
    previous_grid: str | None
    previous_grid_source: str
    answer: str | None
    flags: tuple[str, ...]


def previous_grids(last_grids: pl.DataFrame) -> dict[tuple[str, str, str], tuple[str | None, str]]:
    """(previous grid, its source) for every trace, from each trace's last logged grid.

    `last_grids`: release_generation, participant_id, task_id, task_number, last_grid (the test_output_grid of
    the trace's highest action_number). A participant with two traces at the same task_number (not expected)
    gives neither as a previous grid: ambiguous is treated as unknown.
    """
    by_position: dict[tuple[str, str, int], list[str]] = {}
    for r in last_grids.iter_rows(named=True):
        by_position.setdefault((r["release_generation"], r["participant_id"], r["task_number"]), []).append(
            r["last_grid"])
    result = {}
    for r in last_grids.iter_rows(named=True):
        key = (r["release_generation"], r["participant_id"], r["task_id"])
        candidates = by_position.get((r["release_generation"], r["participant_id"], r["task_number"] - 1), [])
        if len(candidates) == 1:
            source = "tutorial_task" if r["task_number"] == 1 else "previous_task"
            result[key] = (candidates[0], source)
        else:
            result[key] = (None, "unknown")
    return result


def last_grids_of(actions: pl.DataFrame) -> pl.DataFrame:
    """The last logged grid of every trace (input of `previous_grids`)."""
    return (actions.sort(*KEY, "action_number")
            .group_by(list(KEY), maintain_order=True)
            .agg(pl.col("task_number").first(), pl.col("test_output_grid").last().alias("last_grid")))


def build_jobs(actions: pl.DataFrame, previous: Mapping[tuple[str, str, str], tuple[str | None, str]],
               answers: Mapping[str, str] | None = None) -> list[TraceJob]:
    """One job per trace of `actions` (core_harc__actions columns, ACTION_COLUMNS at least), in key order.

    `answers`: task_id -> the ARC file's test[0].output grid; submissions are then re-judged (V5 notes).
    """
    answers = answers or {}
    ordered = actions.select(ACTION_COLUMNS).sort(*KEY, "action_number")
    rows = engine_rows(ordered)
    traces = ordered.group_by(list(KEY), maintain_order=True).agg(
        pl.col("task_split", "task_number").first(), pl.len().alias("n_rows"),
        pl.col("is_tutorial").any().alias("tutorial"), pl.col("flags").list.explode(keep_nulls=False, empty_as_null=False).drop_nulls()
        .alias("row_flags"))
    jobs = []
    start = 0
    for release, participant, task, split, number, n, tutorial, flags in traces.iter_rows():
        row_flags = set(flags) | ({"tutorial"} if tutorial else set())
        key = (release, participant, task)
        prev_grid, source = previous.get(key, (None, "unknown"))
        jobs.append(TraceJob(
            key=key, task_split=split, task_number=number,
            rows=tuple(rows[start:start + n]), previous_grid=prev_grid, previous_grid_source=source,
            answer=answers.get(task), flags=tuple(f for f in TASK_FLAGS if f in row_flags),
        ))
        start += n
    return jobs


def engine_rows(actions: pl.DataFrame) -> list[dict[str, Any]]:
    """The engine's row mappings of `actions` (ENGINE_COLUMNS renamed), in frame order. Built from whole
    columns (a C-level to_list each) with one dict display per row, about twice as fast as to_dicts() or
    dict(zip(...)) row by row: this runs on every event row of a replay. The keys are ENGINE_COLUMNS' values,
    in its order (a test holds the two together)."""
    columns = [actions[column].to_list() for column in ENGINE_COLUMNS]
    return [{"action_id": action_id, "attempt_number": attempt, "solved": solved, "action": action,
             "action_x": x, "action_y": y, "select_loc": select_loc, "selected_data": selected_data,
             "selected_symbol": symbol, "selected_tool": tool, "copy_paste_data": clipboard,
             "test_output_grid": grid, "test_output_size_x": height, "test_output_size_y": width,
             "test_input_grid": test_input}
            for (action_id, attempt, solved, action, x, y, select_loc, selected_data, symbol, tool, clipboard, grid,
                 height, width, test_input) in zip(*columns, strict=True)]


def check_trace(job: TraceJob, *, strict: bool = False) -> dict[str, Any]:
    """Replay one trace and return its out_harc__trace_checks row."""
    result = replay_trace(job.rows, previous_grid=job.previous_grid, answer=job.answer, strict=strict)
    return result_row(job, result)


def result_row(job: TraceJob, result: ReplayResult) -> dict[str, Any]:
    release, participant, task = job.key
    row: dict[str, Any] = {
        "release_generation": release, "participant_id": participant, "task_id": task,
        "task_split": job.task_split, "task_number": job.task_number, "replay_status": result.status,
        "n_trace_rows": result.n_rows, "n_rows_replayed": result.n_rows_replayed,
        "divergence_action_number": None, "divergence_action": None, "divergence_kind": None, "reason": None,
        "recorded_grid": None, "replayed_grid": None, "recorded_height": None, "recorded_width": None,
        "replayed_height": None, "replayed_width": None,
        "note_codes": sorted({n.code for n in result.notes}),
        "n_mismatch_notes": sum(1 for n in result.notes if n.is_mismatch),
        "n_adopted_rows": len(result.adopted_rows),
        "previous_grid_source": job.previous_grid_source,
        "flags": list(job.flags),
    }
    if result.divergence is not None:
        d = result.divergence
        row.update(divergence_action_number=_action_number(job, d.row_index), divergence_action=d.action,
                   divergence_kind=d.kind, reason=d.reason, recorded_grid=d.expected_grid,
                   replayed_grid=d.got_grid or None, replayed_height=d.got_size[0] or None,
                   replayed_width=d.got_size[1] or None)
        if d.expected_size is not None:
            row.update(recorded_height=d.expected_size[0], recorded_width=d.expected_size[1])
    elif result.status == "not_replayable":
        index = result.row_index
        row.update(reason=result.reason, divergence_action_number=_action_number(job, index))
        if index is not None and 0 <= index < len(job.rows):
            row["divergence_action"] = job.rows[index].get("action")
    return row


def _action_number(job: TraceJob, index: int | None) -> int | None:
    if index is None or not 0 <= index < len(job.rows):
        return None
    value = job.rows[index].get("action_id")
    return None if value is None else int(value)


def _check_chunk(jobs: Sequence[TraceJob], strict: bool) -> list[dict[str, Any]]:
    rows = []
    for job in jobs:
        try:
            rows.append(check_trace(job, strict=strict))
        except Exception as err:  # an engine bug fails this trace only, not its chunk
            rows.append(failed_row(job, err))
    return rows


def failed_row(job: TraceJob, error: BaseException) -> dict[str, Any]:
    """The row of a trace whose replay raised (an engine bug) or kept killing its worker: not replayable."""
    reason = f"replay failed: {type(error).__name__}: {error}"
    return result_row(job, ReplayResult("not_replayable", len(job.rows), 0, reason=reason))


def pack(actions: pl.DataFrame) -> bytes:
    """A chunk of events as zstd-compressed Arrow IPC, for a worker process. Pickled as a frame, a chunk of
    36,000 rows is 20 MB, which Dask serialises, copies through its scheduler and sends over TCP (at paper scale
    about half the CPU of a two-worker replay); packed it is 0.5 MB (grids compress well: each row repeats the
    previous grid but for a cell), written and read in about 20 ms each."""
    buffer = io.BytesIO()
    actions.write_ipc(buffer, compression="zstd")
    return buffer.getvalue()


def unpacked(actions: pl.DataFrame | bytes) -> pl.DataFrame:
    """A chunk of events as given to check_actions' pieces: a frame, or `pack`ed bytes."""
    return pl.read_ipc(io.BytesIO(actions)) if isinstance(actions, bytes) else actions


def _check_slice(piece: tuple[pl.DataFrame | bytes, dict, dict], strict: bool) -> list[dict[str, Any]]:
    """Replay the traces of one chunk of events (whole traces, a frame or `pack`ed), building their jobs here.

    Without the cyclic garbage collector meanwhile: a chunk allocates a dict per row and a few per replayed
    row, all alive until the chunk ends, and the collector's passes over them cost about a fifth of the
    replay's CPU. A replay leaves no reference cycle (replay_trace breaks the replayer's), so everything is
    freed by reference counting; the young-generation collection at the end only resets the collector's
    count."""
    actions, previous, answers = piece
    paused = gc.isenabled()
    gc.disable()
    try:
        return _check_chunk(build_jobs(unpacked(actions), previous, answers), strict)
    finally:
        if paused:
            gc.enable()
            gc.collect(0)


def in_trace_order(actions: pl.DataFrame) -> bool:
    """Whether every trace's rows are contiguous and in increasing action_number order (as the events are
    stored, participant by participant), whatever the order of the traces: enough to cut chunks of whole
    traces, since each chunk is sorted on its own and the result by the key. One pass and a hash count,
    where a sort would copy every column."""
    changed = pl.any_horizontal([pl.col(k) != pl.col(k).shift(1) for k in KEY]).fill_null(True)
    number = pl.col("action_number")
    found = actions.select(
        changed.sum().alias("runs"), pl.struct(KEY).n_unique().alias("traces"),
        (changed | (number > number.shift(1))).fill_null(False).all().alias("increasing")).row(0, named=True)
    return actions.height == 0 or (found["runs"] == found["traces"] and found["increasing"])


def _slices(ordered: pl.DataFrame, n_chunks: int) -> list[tuple[int, int]]:
    """(offset, length) of about `n_chunks` contiguous pieces of `ordered` (sorted by KEY), cut between traces."""
    ends = (ordered.select(pl.int_range(pl.len()).alias("i"), *KEY).group_by(list(KEY), maintain_order=True)
            .agg(pl.col("i").last())["i"] + 1).to_list()
    target = max(1, ordered.height // max(1, n_chunks))
    pieces, start = [], 0
    for end in ends:
        if end - start >= target:
            pieces.append((start, end - start))
            start = end
    if start < ordered.height:
        pieces.append((start, ordered.height - start))
    return pieces


def check_actions(actions: pl.DataFrame, previous: Mapping[tuple[str, str, str], tuple[str | None, str]],
                  answers: Mapping[str, str] | None = None, *, strict: bool = False, workers: int = 1,
                  scheduler: str | None = None, progress: Progress | None = None,
                  rows_per_chunk: int = 20_000, executor: Executor | None = None) -> pl.DataFrame:
    """out_harc__trace_checks rows of every trace of `actions` (ACTION_COLUMNS at least), sorted by the primary
    key: build_jobs + check_traces, a chunk of whole traces at a time (serially, on `workers` local processes or
    on the Dask cluster at `scheduler`). The result depends neither on `workers` nor on the chunking.
    `executor`: one the caller opened already for these `workers` / `scheduler` (and closes); else one is opened
    here."""
    answers = answers or {}
    ordered = actions.select(ACTION_COLUMNS)
    if not in_trace_order(ordered):  # events read trace by trace (as stored) need no sorted copy
        ordered = ordered.sort(*KEY, "action_number")
    # Enough chunks to keep every worker busy to the end, none larger than rows_per_chunk.
    shipped = workers > 1 or bool(scheduler)  # the pieces travel to other processes: packed
    n_chunks = max(1, -(-ordered.height // rows_per_chunk), 8 * workers if shipped else 1)
    pieces = []
    for offset, length in _slices(ordered, n_chunks):
        part = ordered.slice(offset, length)
        keys = part.select(KEY).unique().rows()
        pieces.append((pack(part) if shipped else part, {k: previous[k] for k in keys if k in previous},
                       {t: answers[t] for t in {k[2] for k in keys} if t in answers}))
    rows: list[dict[str, Any]] = []
    opened = nullcontext(executor) if executor is not None else open_executor(workers, scheduler, n_items=len(pieces))
    with opened as ex:
        description = ("replaying traces" if ex.n_workers <= 1 else
                       f"replaying traces ({ex.n_workers} workers, {len(pieces)} chunks)")
        for key, chunk_rows, error in ex.map_unordered(partial(_check_slice, strict=strict), enumerate(pieces),
                                                       progress=progress, description=description):
            if error is not None:  # the whole chunk failed (its worker kept dying): each trace says so
                actions, previous_of, answers_of = pieces[key]
                chunk_rows = [failed_row(job, error) for job in build_jobs(unpacked(actions), previous_of, answers_of)]
            rows.extend(chunk_rows)
    return to_frame(rows)


def _chunks(jobs: Sequence[TraceJob], n_chunks: int) -> list[list[TraceJob]]:
    """Contiguous chunks of about equal row counts (a participant's traces may straddle chunks: each job
    carries its own previous grid, so that is harmless)."""
    total = sum(len(j.rows) for j in jobs)
    target = max(1, total // max(1, n_chunks))
    chunks: list[list[TraceJob]] = [[]]
    size = 0
    for job in jobs:
        if size >= target and chunks[-1]:
            chunks.append([])
            size = 0
        chunks[-1].append(job)
        size += len(job.rows)
    return [c for c in chunks if c]


def check_traces(jobs: Sequence[TraceJob], *, strict: bool = False, workers: int = 1,
                 scheduler: str | None = None, progress: Progress | None = None) -> pl.DataFrame:
    """Replay every job (serially, on `workers` local processes or on the Dask cluster at `scheduler`) and
    return out_harc__trace_checks rows sorted by the primary key. The result does not depend on `workers`."""
    rows: list[dict[str, Any]] = []
    with open_executor(workers, scheduler, n_items=len(jobs)) as ex:
        # One trace per piece in this process (a progress step per trace); chunks of several on workers. A
        # chunk still fails as a whole when it kills worker after worker (out of memory).
        chunks = [[job] for job in jobs] if ex.n_workers <= 1 else _chunks(jobs, ex.n_workers * 8)
        description = ("replaying traces" if ex.n_workers <= 1 else
                       f"replaying traces ({ex.n_workers} workers, {len(chunks)} chunks)")
        for key, chunk_rows, error in ex.map_unordered(partial(_check_chunk, strict=strict), enumerate(chunks),
                                                       progress=progress, description=description):
            rows.extend(chunk_rows if error is None else [failed_row(job, error) for job in chunks[key]])
    return to_frame(rows)


def to_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    from schemas.validate import conform

    return conform(TABLE, rows).sort(*KEY)


def summarize(checks: pl.DataFrame) -> dict[str, int]:
    """Counts by replay_status (all three statuses present, zero when absent)."""
    counts = dict(checks.group_by("replay_status").len().iter_rows())
    return {s: int(counts.get(s, 0)) for s in ("consistent", "divergent", "not_replayable")}
