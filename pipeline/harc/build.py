"""Orchestration of the H-ARC analyses: read core tables, run the pure functions of pipeline/harc/, validate and
write the out_harc__* tables in one transaction, write figures and a run manifest.

Two entry points, one per command:

- `run_trace_checks` (`arcstudy replay-harc`): every trace of core_harc__actions (all release generations) ->
  out_harc__trace_checks (see trace_checks.py). With `only_task` only that task's traces are replayed and only
  its rows are replaced.
- `run_analyses` (`arcstudy harc-analyses`): one release generation -> every other out_harc__* table and the
  figures. Rows of other release generations are left as they are. A release without events (no data.csv)
  but with summary_data.csv / incorrect_submissions.csv rows gets the tables those files allow
  (summary_files.py); the others are left empty and named, with the file they need, in the report.

Inputs are read with SQL; everything in between is in memory (polars), so `compute_analyses` can also be called
on frames from a notebook or a test without a database.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.executor import default_workers, machine_load, open_executor
from pipeline.core.manifest import RunManifest
from pipeline.core.workspace import Workspace
from pipeline.harc import (
    accuracy,
    bounds,
    errors,
    first_actions,
    graphs,
    learning,
    reproduction,
    summary_files,
    timing,
    trace_checks,
)
from pipeline.harc.published import DATA_CSV, SUMMARY_CSV
from pipeline.harc.stats import CONFIDENCE
from schemas import TABLES
from schemas.validate import conform
from schemas.vocabulary import HARC_RELEASES

Progress = Callable[[Iterable[Any], str, int], Iterable[Any]]
RELEASE_PREFERENCE = HARC_RELEASES  # newest first
ANALYSIS_TABLES = (
    "out_harc__task_state_graphs", "out_harc__split_descriptives", "out_harc__task_outcomes",
    "out_harc__task_accuracy", "out_harc__split_accuracy", "out_harc__tasks_by_min_solvers",
    "out_harc__participant_accuracy", "out_harc__accuracy_bounds", "out_harc__submissions",
    "out_harc__task_errors", "out_harc__error_summary", "out_harc__statistical_tests", "out_harc__time_summary",
    "out_harc__first_actions", "out_harc__position_accuracy", "out_harc__learning_model", "out_harc__reproduction",
)
ANALYSIS_ACTION_COLUMNS = ("participant_id", "task_id", "action_number", "exp_name", "task_split", "task_number",
                           "attempt_number", "action", "occurred_at", "is_solved", "test_output_grid",
                           "is_tutorial", "is_complete")
AUTO_PARALLEL_ROWS = 1_000_000  # see auto_replay_workers
PAIR_COLUMNS = ("file_id", "task_id", "pair_split", "pair_index", "input_grid", "output_grid")


class HarcError(RuntimeError):
    """Analyses that cannot run (no H-ARC data, unknown release), with a message for the user."""


@dataclass(frozen=True)
class Skipped:
    """An analysis not computed for lack of an input file."""
    analysis: str
    tables: tuple[str, ...]
    needs: str
    why: str = ""

    def line(self) -> str:
        return (f"{self.analysis}: needs {self.needs}" + (f": {self.why}" if self.why else "")
                + f" ({', '.join(self.tables)})")


@dataclass
class AnalysisReport:
    release: str
    tables: dict[str, pl.DataFrame]
    inputs: str = "events"  # "events" (data.csv) or "summary files" (summary_data.csv, incorrect_submissions.csv)
    skipped: list[Skipped] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    figures: dict[str, dict[str, Path]] = field(default_factory=dict)
    skipped_figures: list[str] = field(default_factory=list)
    manifest: RunManifest | None = None
    manifest_path: Path | None = None


@dataclass
class TraceCheckReport:
    checks: pl.DataFrame
    counts: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)
    manifest: RunManifest | None = None


# --------------------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------------------
def releases(ws: Workspace) -> list[str]:
    if not ws.has_table("core_harc__actions"):
        return []
    df = ws.read("SELECT DISTINCT release_generation FROM core_harc__actions ORDER BY 1")
    return df["release_generation"].to_list()


def no_events_message(ws: Workspace, command: str) -> str:
    return (f"no H-ARC events in {ws.path} (core_harc__actions is empty): {command} needs {DATA_CSV}; run "
            "`arcstudy ingest` on it first")


def resolve_release(ws: Workspace, requested: str | None, command: str = "this command") -> str:
    """The requested release generation, else osf-current when present, else 2024."""
    present = releases(ws)
    if not present:
        raise HarcError(no_events_message(ws, command))
    if requested is not None:
        if requested not in present:
            raise HarcError(f"release generation {requested!r} is not in the database; present: "
                            f"{', '.join(present)}")
        return requested
    preferred = [r for r in RELEASE_PREFERENCE if r in present]
    return preferred[0] if preferred else present[0]


def summary_releases(ws: Workspace) -> list[str]:
    """Release generations with summary_data.csv or incorrect_submissions.csv rows."""
    parts = [f"SELECT release_generation FROM {t}" for t in ("core_harc__attempts", "core_harc__incorrect_submissions")
             if ws.has_table(t)]
    if not parts:
        return []
    return ws.read(f"SELECT DISTINCT release_generation FROM ({' UNION '.join(parts)}) ORDER BY 1")[
        "release_generation"].to_list()


def resolve_analysis_release(ws: Workspace, requested: str | None) -> tuple[str, bool]:
    """(release generation, whether it has events) for harc-analyses: a release with events as resolve_release
    chooses it; without any events, the preferred release with summary or incorrect-submission rows."""
    events, summaries = releases(ws), summary_releases(ws)
    if not events and not summaries:
        raise HarcError(f"no H-ARC events, summary or incorrect-submission rows in {ws.path}: run `arcstudy "
                        "ingest` on the H-ARC data.csv, summary_data.csv or incorrect_submissions.csv first")
    if requested is not None and requested not in events:
        if requested in summaries:
            return requested, False
        raise HarcError(f"release generation {requested!r} is not in the database; present: "
                        f"{', '.join(sorted(set(events) | set(summaries)))}")
    if events:
        return resolve_release(ws, requested), True
    preferred = [r for r in RELEASE_PREFERENCE if r in summaries]
    return (preferred[0] if preferred else summaries[0]), False


def load_summary_files(ws: Workspace, release: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(core_harc__attempts rows, core_harc__incorrect_submissions rows) of one release."""
    attempts = ws.read(f"SELECT {', '.join(summary_files.ATTEMPT_COLUMNS)} FROM core_harc__attempts "
                       "WHERE release_generation = ?", [release])
    incorrect = ws.read(f"SELECT {', '.join(summary_files.INCORRECT_COLUMNS)} FROM core_harc__incorrect_submissions "
                        "WHERE release_generation = ?", [release])
    return attempts, incorrect


def load_actions(ws: Workspace, release: str, columns: Iterable[str] = ANALYSIS_ACTION_COLUMNS,
                 task_id: str | None = None) -> pl.DataFrame:
    columns = tuple(columns)
    cols = ", ".join(columns)
    sql = f"SELECT {cols} FROM core_harc__actions WHERE release_generation = ?"
    params: list[Any] = [release]
    if task_id is not None:
        sql += " AND task_id = ?"
        params.append(task_id)
    # Sorted here rather than by DuckDB: an ORDER BY materialises the whole result once more inside DuckDB
    # (about 240 MB and 0.8 s at paper scale), and the events are usually stored in this order already.
    order = ("participant_id", "task_id", "action_number")  # unique within a release: one order only
    if not set(order) <= set(columns):
        return ws.read(sql + f" ORDER BY {', '.join(order)}", params)
    actions = ws.read(sql, params)
    return actions if accuracy.is_sorted_by(actions, order) else actions.sort(order)



def load_pairs(ws: Workspace) -> pl.DataFrame:
    if not ws.has_table("core_arc__task_pairs"):
        return pl.DataFrame(schema={c: pl.String if c != "pair_index" else pl.Int64 for c in PAIR_COLUMNS})
    return conform_pairs(ws.read(f"SELECT {', '.join(PAIR_COLUMNS)} FROM core_arc__task_pairs"))


def conform_pairs(df: pl.DataFrame) -> pl.DataFrame:
    schema = {c: pl.String for c in PAIR_COLUMNS} | {"pair_index": pl.Int64}
    if df.height == 0:
        return pl.DataFrame(schema=schema)
    return df.select([pl.col(c).cast(t) for c, t in schema.items()])


def table_digest(df: pl.DataFrame) -> str:
    """sha256 of the frame as CSV after sorting by every column (list columns joined as text)."""
    flat = df.with_columns([pl.col(c).cast(pl.List(pl.String)).list.join("\u241f")
                            for c, t in df.schema.items() if isinstance(t, pl.List)])
    return hashlib.sha256(flat.sort(flat.columns).write_csv().encode()).hexdigest()


def _core_inputs(ws: Workspace, manifest: RunManifest, tables: Iterable[str]) -> None:
    from pipeline.transforms.build import core_digest

    for t in tables:
        digest = core_digest(ws, t)
        manifest.inputs[f"db:{ws.path}#{t}"] = digest["sha256"]


# --------------------------------------------------------------------------------------------------------
# replay-harc
# --------------------------------------------------------------------------------------------------------
def auto_replay_workers(n_rows: int) -> int:
    """Workers for `--workers 0`: 2 from AUTO_PARALLEL_ROWS event rows on, and only when the machine has room
    for both (1.5 cores idle by `machine_load`, the tasks running now: this process and most of a second one).

    A local cluster costs about 3-5 s to start and close and about 70 % more CPU in all (its processes import
    Dask, the frames travel to them), which two workers win back only on a large input with a second core
    to themselves: at paper scale on a 2-core machine whose load average already fills the other core, the
    serial replay was faster (25 s against 34 s wall), and on the same machine idle two workers gained nothing
    (15.8 s against 16.3 s) for 1.67 GB instead of 1.03: only inputs well past the paper's 573k rows can win."""
    if n_rows < AUTO_PARALLEL_ROWS:
        return 1
    cores = default_workers()
    busy = machine_load() or 0.0
    return 2 if cores - busy >= 1.5 else 1


def run_trace_checks(ws: Workspace, *, only_task: str | None = None, workers: int = 0, strict: bool = False,
                     command: str = "arcstudy replay-harc", progress: Progress | None = None,
                     manifest_dir: Path | None = None, scheduler: str | None = None) -> TraceCheckReport:
    """Replay the traces, replace their rows of out_harc__trace_checks in one transaction, record the run.

    `workers`: processes for the replay; 0 = auto (auto_replay_workers).
    `scheduler`: the address of a Dask cluster to replay on instead.
    With workers > 1 (or a scheduler) for a whole replay, the executor is opened on a thread at once, while the
    events are read."""
    if only_task is not None or (workers <= 1 and not scheduler):
        return _run_trace_checks(ws, None, only_task=only_task, workers=workers, strict=strict, command=command,
                                 progress=progress, manifest_dir=manifest_dir, scheduler=scheduler)
    # Workers asked for a whole replay: their cluster starts (a few seconds: processes that import Dask) while
    # this thread reads the events, rather than after.
    cluster = ExitStack()
    beside = ThreadPoolExecutor(1, thread_name_prefix="harc executor")
    opening = beside.submit(cluster.enter_context, open_executor(workers, scheduler))
    beside.shutdown(wait=False)
    try:
        return _run_trace_checks(ws, opening, only_task=only_task, workers=workers, strict=strict, command=command,
                                 progress=progress, manifest_dir=manifest_dir, scheduler=scheduler)
    finally:
        opening.exception()  # waits: a cluster still starting cannot be closed yet
        cluster.close()


def _run_trace_checks(ws: Workspace, opening: Future | None, *, only_task: str | None, workers: int, strict: bool,
                      command: str, progress: Progress | None, manifest_dir: Path | None,
                      scheduler: str | None) -> TraceCheckReport:
    timings: dict[str, float] = {}
    started = time.perf_counter()
    if not releases(ws):
        raise HarcError(no_events_message(ws, "replay-harc"))
    last = ws.read("SELECT release_generation, participant_id, task_id, min(task_number) AS task_number, "
                   "arg_max(test_output_grid, action_number) AS last_grid FROM core_harc__actions "
                   "GROUP BY release_generation, participant_id, task_id")
    previous = trace_checks.previous_grids(last)
    cols = ", ".join(trace_checks.ACTION_COLUMNS)
    if only_task is None:
        actions = ws.read(f"SELECT {cols} FROM core_harc__actions")
    else:
        actions = ws.read(f"SELECT {cols} FROM core_harc__actions WHERE task_id = ?", [only_task])
        if actions.height == 0:
            raise HarcError(f"task {only_task!r} has no events in core_harc__actions")
    truth = errors.task_truth(load_pairs(ws))
    answers = dict(truth.filter(pl.col("answer_grid").is_not_null()).select("task_id", "answer_grid").iter_rows())
    timings["load"] = time.perf_counter() - started
    if workers <= 0:
        workers = auto_replay_workers(actions.height)

    t0 = time.perf_counter()
    checks = trace_checks.check_actions(actions, previous, answers, strict=strict, workers=workers,
                                        scheduler=scheduler, progress=progress,
                                        executor=None if opening is None else opening.result())
    timings["replay"] = time.perf_counter() - t0

    manifest = RunManifest(command=command, config={"only_task": only_task, "workers": workers,
                                                    "scheduler": scheduler, "strict_replay": strict,
                                                    "db": str(ws.path)})
    _core_inputs(ws, manifest, ("core_harc__actions", "core_arc__task_pairs"))
    t0 = time.perf_counter()
    with ws.transaction() as con:
        if only_task is None:
            con.execute(f"DELETE FROM {trace_checks.TABLE}")
        else:
            con.execute(f"DELETE FROM {trace_checks.TABLE} WHERE task_id = ?", [only_task])
        ws.insert_frame(trace_checks.TABLE, checks, con=con)
    timings["write"] = time.perf_counter() - t0
    manifest.outputs[f"db:{ws.path}#{trace_checks.TABLE}"] = table_digest(checks)
    counts = trace_checks.summarize(checks)
    manifest.notes.update(counts=counts, timings_s=timings, n_rows=len(actions))
    manifest.finish(0)
    ws.record_run(manifest)
    if manifest_dir is not None:
        manifest.write_json(manifest_dir / manifest.run_id)
    return TraceCheckReport(checks=checks, counts=counts, timings=timings, manifest=manifest)


# --------------------------------------------------------------------------------------------------------
# harc-analyses
# --------------------------------------------------------------------------------------------------------
def compute_analyses(actions: pl.DataFrame, pairs: pl.DataFrame, *, seed: int = bounds.DEFAULT_SEED,
                     n_simulations: int = bounds.DEFAULT_SIMULATIONS,
                     thinking_threshold_s: float = timing.THINKING_THRESHOLD_S, confidence: float = CONFIDENCE,
                     progress: Progress | None = None,
                     timings: dict[str, float] | None = None) -> dict[str, pl.DataFrame]:
    """Every analysis table (without release_generation) from one release's events and the ARC task pairs."""
    timings = {} if timings is None else timings
    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        timings[name] = timings.get(name, 0.0) + now - clock[0]
        clock[0] = now

    out: dict[str, pl.DataFrame] = {}
    summary = accuracy.summary_attempts(actions)
    outcomes = accuracy.participant_task_outcomes(summary)
    finished = outcomes.select(accuracy.PT)
    people = accuracy.participants(actions, outcomes)
    out.update(accuracy.accuracy_tables(outcomes, people))
    task_acc = out["out_harc__task_accuracy"]
    lap("accuracy")

    # The bound simulations are numpy work that releases the GIL: on a thread of their own they run beside
    # the state graphs, times and errors below (Python and polars) instead of before them. Same numbers: the
    # simulations draw from their own seeded generator. Their timing is their own duration on that thread.
    pool = accuracy.analysis_actions(actions).select("task_id", "task_split").unique()
    beside = ThreadPoolExecutor(1, thread_name_prefix="harc bounds")
    simulated = beside.submit(_timed, bounds.accuracy_bounds, task_acc, people, outcomes, pool,
                              n_simulations=n_simulations, seed=seed)
    beside.shutdown(wait=False)  # its thread ends with this one piece
    out["out_harc__accuracy_bounds"] = pl.DataFrame()  # the table's place in the order; filled in at the end

    state_graphs = graphs.state_graph_table(actions, progress=progress)
    out["out_harc__task_state_graphs"] = state_graphs
    out["out_harc__split_descriptives"] = graphs.split_descriptives(state_graphs, summary, outcomes, actions)
    lap("state_graphs")

    times = timing.task_times(actions, outcomes, thinking_threshold_s)
    changes = first_actions.first_changes(actions, outcomes)
    first_of_task = changes.filter(pl.col("attempt_number") == 1).select(*accuracy.PT, "first_change_action")
    outcome_table = (outcomes.join(times, on=list(accuracy.PT), how="left")
                     .join(graphs.trace_unique_states(actions), on=list(accuracy.PT), how="left")
                     .join(first_of_task, on=list(accuracy.PT), how="left"))
    n_rows = accuracy.analysis_actions(actions).group_by(accuracy.PT).agg(pl.len().alias("n_trace_rows"))
    outcome_table = outcome_table.join(n_rows, on=list(accuracy.PT), how="left")
    out["out_harc__task_outcomes"] = outcome_table
    out["out_harc__time_summary"] = timing.time_summary(outcome_table)
    out["out_harc__first_actions"] = first_actions.first_action_table(changes)
    lap("time_and_first_actions")

    truth = errors.task_truth(pairs)
    subs = errors.submissions(actions, finished, truth)
    known = errors.answers(truth, subs)
    task_errors = errors.task_errors(subs, task_acc, known)
    out["out_harc__submissions"] = subs
    out["out_harc__task_errors"] = task_errors
    out["out_harc__error_summary"] = errors.error_summary(subs)
    lap("errors")

    tests = [*timing.time_tests(outcome_table, confidence), timing.answer_size_test(task_errors, confidence),
             *errors.divergence_correlations(task_errors, confidence)]
    out["out_harc__statistical_tests"] = accuracy.release_frame("out_harc__statistical_tests", tests)
    out["out_harc__position_accuracy"] = learning.position_accuracy(outcomes)
    out["out_harc__learning_model"] = learning.learning_model(outcomes, confidence)
    lap("tests_and_learning")
    out["out_harc__reproduction"] = reproduction.reproduction_table(
        split_accuracy=out["out_harc__split_accuracy"], summary=summary, summary_source="data.csv (get_summary)",
        truth=truth, actions=actions)
    out["out_harc__accuracy_bounds"], timings["bounds"] = simulated.result()
    return out


def _timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """fn's result and its duration in seconds."""
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - t0


def compute_summary_analyses(attempts: pl.DataFrame, incorrect: pl.DataFrame, pairs: pl.DataFrame, *,
                             confidence: float = CONFIDENCE,
                             timings: dict[str, float] | None = None,
                             ) -> tuple[dict[str, pl.DataFrame], list[Skipped], list[str]]:
    """Without events: the analysis tables summary_data.csv (`attempts`: core_harc__attempts rows) and
    incorrect_submissions.csv (`incorrect`: core_harc__incorrect_submissions rows) allow, every other table
    empty; with the analyses skipped and the caveats of what was computed (summary_files.py)."""
    timings = {} if timings is None else timings
    given = summary_files.summary_rows(attempts)
    if given.height == 0:  # incorrect_submissions.csv alone has no solve rates and no correct submissions
        raise HarcError(f"nothing to compute without {DATA_CSV}: accuracy and the error analyses need "
                        f"{SUMMARY_CSV} (core_harc__attempts has no rows of this release)")
    t0 = time.perf_counter()
    out = {name: accuracy.release_frame(name, []) for name in ANALYSIS_TABLES}
    skipped = [Skipped(*s) for s in summary_files.SKIPPED_WITHOUT_EVENTS]
    caveats = [summary_files.PARTICIPANT_CAVEAT]
    truth = errors.task_truth(pairs)
    summary = summary_files.recoded(given)
    outcomes = accuracy.participant_task_outcomes(summary)
    people = accuracy.participants(summary_files.summary_people_rows(summary), outcomes)
    out.update(accuracy.accuracy_tables(outcomes, people))
    task_acc = out["out_harc__task_accuracy"]
    out["out_harc__position_accuracy"] = learning.position_accuracy(outcomes)
    out["out_harc__learning_model"] = learning.learning_model(outcomes, confidence)
    timings["accuracy"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    tests: list[dict[str, Any]] = []
    if incorrect.height:
        known = errors.answers(truth, summary)
        subs = errors.judge_submissions(summary_files.pseudo_submissions(summary, incorrect), truth, known)
        task_errors = errors.task_errors(subs, task_acc, known)
        out["out_harc__task_errors"] = task_errors
        out["out_harc__error_summary"] = errors.error_summary(subs)
        tests = [timing.answer_size_test(task_errors, confidence),
                 *errors.divergence_correlations(task_errors, confidence)]
        if subs.filter(~pl.col("is_solved") & pl.col("is_copy_error").is_not_null()).height == 0:
            skipped.append(Skipped(*summary_files.SKIPPED_WITHOUT_TASK_FILES))
    else:
        skipped.append(Skipped(*summary_files.SKIPPED_WITHOUT_INCORRECT))
    out["out_harc__statistical_tests"] = accuracy.release_frame("out_harc__statistical_tests", tests)
    timings["errors"] = time.perf_counter() - t0
    out["out_harc__reproduction"] = reproduction.reproduction_table(
        split_accuracy=out["out_harc__split_accuracy"], summary=given, summary_source=SUMMARY_CSV,
        truth=truth)
    return out, skipped, caveats




def with_release(tables: dict[str, pl.DataFrame], release: str) -> dict[str, pl.DataFrame]:
    """Add release_generation and conform every table to its schema (column order, dtypes), sorted by key."""
    result = {}
    for name, df in tables.items():
        conformed = conform(name, df.with_columns(pl.lit(release).alias("release_generation")))
        result[name] = conformed.sort(list(TABLES[name].primary_key))
    return result


def run_analyses(ws: Workspace, *, release: str | None = None, seed: int = bounds.DEFAULT_SEED,
                 n_simulations: int = bounds.DEFAULT_SIMULATIONS,
                 thinking_threshold_s: float = timing.THINKING_THRESHOLD_S, out_dir: Path | None = None,
                 figures: bool = True, command: str = "arcstudy harc-analyses",
                 progress: Progress | None = None) -> AnalysisReport:
    """Compute every analysis for one release, replace that release's rows of the out tables in one
    transaction, write the figures and manifest.json under out_dir, and record the run.

    A release without events is analysed from its summary_data.csv / incorrect_submissions.csv rows
    (compute_summary_analyses): the tables they do not allow are emptied for that release, and the report
    names them in `skipped` with the file they need."""
    release, has_events = resolve_analysis_release(ws, release)
    start_warm_up()
    drawer = FigureProcess() if figures and out_dir is not None else None
    try:
        return _run_analyses(ws, drawer, release=release, has_events=has_events, seed=seed,
                             n_simulations=n_simulations, thinking_threshold_s=thinking_threshold_s,
                             out_dir=out_dir, figures=figures, command=command, progress=progress)
    finally:
        if drawer is not None:
            drawer.close()


def _run_analyses(ws: Workspace, drawer: FigureProcess | None, *, release: str, has_events: bool, seed: int,
                  n_simulations: int, thinking_threshold_s: float, out_dir: Path | None, figures: bool,
                  command: str, progress: Progress | None) -> AnalysisReport:
    timings: dict[str, float] = {}
    skipped: list[Skipped] = []
    caveats: list[str] = []
    t0 = time.perf_counter()
    pairs = load_pairs(ws)
    if has_events:
        actions = load_actions(ws, release)
        timings["load"] = time.perf_counter() - t0
        computed = compute_analyses(actions, pairs, seed=seed, n_simulations=n_simulations,
                                    thinking_threshold_s=thinking_threshold_s, progress=progress, timings=timings)
        core_tables: tuple[str, ...] = ("core_harc__actions", "core_arc__task_pairs")
    else:
        attempts, incorrect = load_summary_files(ws, release)
        timings["load"] = time.perf_counter() - t0
        computed, skipped, caveats = compute_summary_analyses(attempts, incorrect, pairs, timings=timings)
        core_tables = ("core_harc__attempts", "core_harc__incorrect_submissions", "core_arc__task_pairs")
    tables = with_release(computed, release)
    figures_started = time.perf_counter()
    if drawer is not None and out_dir is not None:  # drawn while the tables are written below
        drawer.draw(out_dir / "figures", tables)
    manifest = RunManifest(command=command, seeds={"bounds": seed},
                           config={"release_generation": release, "seed": seed, "n_simulations": n_simulations,
                                   "thinking_threshold_s": thinking_threshold_s, "confidence_level": CONFIDENCE,
                                   "out_dir": None if out_dir is None else str(out_dir), "figures": figures,
                                   "db": str(ws.path)})
    _core_inputs(ws, manifest, core_tables)
    t0 = time.perf_counter()
    with ws.transaction() as con:
        for name in ANALYSIS_TABLES:
            # A derived table written by an older arcstudy with other columns is rebuilt (the rows of other
            # releases come back when their analyses run again; the traces are untouched).
            if ws.has_table(name) and tuple(ws.read(f"SELECT * FROM {name} LIMIT 0").columns) != TABLES[name].columns:
                ws.recreate_table(name, con=con)
            con.execute(f"DELETE FROM {name} WHERE release_generation = ?", [release])
            ws.insert_frame(name, tables[name], con=con)
    timings["write"] = time.perf_counter() - t0
    for name in ANALYSIS_TABLES:
        manifest.outputs[f"db:{ws.path}#{name}@{release}"] = table_digest(tables[name])
    report = AnalysisReport(release=release, tables=tables, timings=timings,
                            inputs="events" if has_events else "summary files", skipped=skipped, caveats=caveats)
    if drawer is not None:
        report.figures, report.skipped_figures = drawer.result()
        timings["figures"] = time.perf_counter() - figures_started  # overlaps the write
        for paths in report.figures.values():
            for path in paths.values():
                manifest.add_output(path)
    manifest.notes.update(timings_s=timings, rows={n: tables[n].height for n in ANALYSIS_TABLES},
                          skipped_figures=report.skipped_figures, inputs=report.inputs,
                          skipped_analyses=[{"analysis": s.analysis, "tables": list(s.tables), "needs": s.needs,
                                             "why": s.why} for s in skipped], caveats=caveats)
    report.manifest_path = ws.finish_run(manifest, out_dir)
    report.manifest = manifest
    return report


# Modules the tests and the learning model import where they are first used (stats.py, learning.py): statsmodels
# and scipy take about a second of CPU to import, holding the GIL.
DEFERRED_IMPORTS = ("scipy.stats", "statsmodels.stats.weightstats", "statsmodels.genmod.cov_struct",
                    "statsmodels.genmod.families", "statsmodels.genmod.generalized_estimating_equations")
REPO = Path(__file__).resolve().parents[2]  # the folder holding `pipeline`, for the figure process


def start_warm_up() -> threading.Thread:
    """Import DEFERRED_IMPORTS in a thread, now rather than at first use: the calling thread meanwhile waits on
    DuckDB, polars and numpy, which release the GIL, so most of it costs no wall time. They import only what
    sits above the modules the caller imports meanwhile (numpy, polars, pyarrow), never the other way round,
    so the two threads cannot wait on each other's import locks. A failure here is ignored: it shows again,
    with its message, where the module is used."""
    def warm_up() -> None:
        for name in DEFERRED_IMPORTS:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - see the docstring
                pass

    thread = threading.Thread(target=warm_up, name="harc warm-up")  # not a daemon: exit waits for it
    thread.start()
    return thread


class FigureProcess:
    """pipeline.harc.figures.write_figures in a child interpreter (`python -m pipeline.harc.figures`), started
    with the analyses: the child imports altair and starts vl-convert (about a second) while this process
    computes, then draws the figures while this one writes the tables. vl-convert holds the GIL while it
    renders, so in this process it would run after everything else; in the child it is the same code on the
    same tables, hence the same bytes."""

    def __init__(self) -> None:
        path = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
        # -P: `-m` would otherwise put the working folder first on the child's sys.path
        self.proc = subprocess.Popen([sys.executable, "-P", "-m", "pipeline.harc.figures"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, "PYTHONPATH": path})
        self.talking: threading.Thread | None = None
        self.output: tuple[bytes, bytes] = (b"", b"")

    def draw(self, out_dir: Path, tables: dict[str, pl.DataFrame]) -> None:
        """Hand the child the tables; it writes the figures under out_dir. The exchange runs on a thread
        (communicate: stdin written while stdout and stderr are read, so no pipe can fill up and block)."""
        payload = pickle.dumps((str(out_dir), tables), protocol=pickle.HIGHEST_PROTOCOL)
        self.talking = threading.Thread(target=self._communicate, args=(payload,), name="harc figures")
        self.talking.start()

    def _communicate(self, payload: bytes) -> None:
        self.output = self.proc.communicate(payload)

    def result(self) -> tuple[dict[str, dict[str, Path]], list[str]]:
        """write_figures' result: ({name: paths}, [names skipped for lack of data])."""
        if self.talking is None:
            raise RuntimeError("FigureProcess.result before draw")
        self.talking.join()
        out, err = self.output
        if self.proc.returncode != 0:
            raise RuntimeError(f"drawing the figures failed: {err.decode(errors='replace').strip()[-2000:]}")
        done = json.loads(out)
        return ({name: {kind: Path(p) for kind, p in paths.items()} for name, paths in done["written"].items()},
                done["skipped"])

    def close(self) -> None:
        """End the child if it never got its tables (the analyses failed): an empty stdin ends it."""
        if self.talking is None:
            self.proc.communicate(b"")
        else:
            self.talking.join()


# --------------------------------------------------------------------------------------------------------
# harc-graph
# --------------------------------------------------------------------------------------------------------
def task_graph(ws: Workspace, task_id: str, *, release: str | None = None) -> dict[str, Any]:
    """The visited-state graph document of one task (graphs.graph_document)."""
    from engine.harc import build_state_graph

    release = resolve_release(ws, release, "harc-graph")
    actions = load_actions(ws, release, task_id=task_id)
    found = list(graphs.task_traces(actions))
    if not found:
        raise HarcError(f"task {task_id!r} has no (non-tutorial) events in release {release}")
    _, split, traces = found[0]
    graph = build_state_graph(traces)
    truth = errors.task_truth(load_pairs(ws).filter(pl.col("task_id") == task_id))
    subs = accuracy.analysis_actions(actions).filter(pl.col("action") == "submit").select(
        *accuracy.PT, "is_solved", "test_output_grid")
    known = errors.answers(truth, subs)
    answer = known["answer_grid"][0] if known.height else None
    source = known["answer_source"][0] if known.height else None
    doc = graphs.graph_document(graph, traces, task_split=split, answer=answer, answer_source=source)
    doc["release_generation"] = release
    return doc
