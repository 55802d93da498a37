"""Orchestration of the H-ARC analyses: read core tables, run the pure functions of pipeline/harc/, validate and
write the out_harc__* tables in one transaction, write figures and a run manifest.

Two entry points, one per command:

- `run_trace_checks` (`arcstudy replay-harc`): every trace of core_harc__actions (all release generations) ->
  out_harc__trace_checks (see trace_checks.py). With `only_task` only that task's traces are replayed and only
  its rows are replaced.
- `run_analyses` (`arcstudy harc-analyses`): one release generation -> every other out_harc__* table and the
  figures. Rows of other release generations are left as they are.

Inputs are read with SQL; everything in between is in memory (polars), so `compute_analyses` can also be called
on frames from a notebook or a test without a database.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.manifest import RunManifest
from pipeline.core.workspace import Workspace
from pipeline.harc import accuracy, bounds, errors, first_actions, graphs, learning, timing, trace_checks
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
    "out_harc__first_actions", "out_harc__position_accuracy", "out_harc__learning_model",
)
ANALYSIS_ACTION_COLUMNS = ("participant_id", "task_id", "action_number", "exp_name", "task_split", "task_number",
                           "attempt_number", "action", "occurred_at", "is_solved", "test_output_grid",
                           "is_tutorial", "is_complete")
AUTO_PARALLEL_ROWS = 50_000
PAIR_COLUMNS = ("file_id", "task_id", "pair_split", "pair_index", "input_grid", "output_grid")


class HarcError(RuntimeError):
    """Analyses that cannot run (no H-ARC data, unknown release), with a message for the user."""


@dataclass
class AnalysisReport:
    release: str
    tables: dict[str, pl.DataFrame]
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


def resolve_release(ws: Workspace, requested: str | None) -> str:
    """The requested release generation, else osf-current when present, else 2024."""
    present = releases(ws)
    if not present:
        raise HarcError(f"no H-ARC events in {ws.path} (core_harc__actions is empty): run `arcstudy ingest` on "
                        "the H-ARC data.csv first")
    if requested is not None:
        if requested not in present:
            raise HarcError(f"release generation {requested!r} is not in the database; present: "
                            f"{', '.join(present)}")
        return requested
    preferred = [r for r in RELEASE_PREFERENCE if r in present]
    return preferred[0] if preferred else present[0]


def load_actions(ws: Workspace, release: str, columns: Iterable[str] = ANALYSIS_ACTION_COLUMNS,
                 task_id: str | None = None) -> pl.DataFrame:
    cols = ", ".join(columns)
    sql = f"SELECT {cols} FROM core_harc__actions WHERE release_generation = ?"
    params: list[Any] = [release]
    if task_id is not None:
        sql += " AND task_id = ?"
        params.append(task_id)
    return ws.read(sql + " ORDER BY participant_id, task_id, action_number", params)


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
def run_trace_checks(ws: Workspace, *, only_task: str | None = None, workers: int = 0, strict: bool = False,
                     command: str = "arcstudy replay-harc", progress: Progress | None = None,
                     manifest_dir: Path | None = None) -> TraceCheckReport:
    """Replay the traces, replace their rows of out_harc__trace_checks in one transaction, record the run.

    `workers`: processes for the replay; 0 = auto (2 from AUTO_PARALLEL_ROWS event rows on, else 1)."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    if not releases(ws):
        raise HarcError(f"no H-ARC events in {ws.path} (core_harc__actions is empty): run `arcstudy ingest` on "
                        "the H-ARC data.csv first")
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
    jobs = trace_checks.build_jobs(actions, previous, answers)
    timings["load"] = time.perf_counter() - started
    if workers <= 0:  # auto: process start-up (~2-5 s) pays off only on larger inputs
        workers = min(2, os.cpu_count() or 1) if actions.height >= AUTO_PARALLEL_ROWS else 1

    t0 = time.perf_counter()
    checks = trace_checks.check_traces(jobs, strict=strict, workers=workers, progress=progress)
    timings["replay"] = time.perf_counter() - t0

    manifest = RunManifest(command=command, config={"only_task": only_task, "workers": workers,
                                                    "strict_replay": strict, "db": str(ws.path)})
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
    task_acc = accuracy.task_accuracy(outcomes)
    participant_acc = accuracy.participant_accuracy(outcomes, people)
    out["out_harc__task_accuracy"] = task_acc
    out["out_harc__participant_accuracy"] = participant_acc
    out["out_harc__split_accuracy"] = accuracy.split_accuracy(task_acc, participant_acc)
    out["out_harc__tasks_by_min_solvers"] = accuracy.tasks_by_min_solvers(task_acc)
    lap("accuracy")

    pool = accuracy.analysis_actions(actions).select("task_id", "task_split").unique()
    out["out_harc__accuracy_bounds"] = bounds.accuracy_bounds(task_acc, people, outcomes, pool,
                                                              n_simulations=n_simulations, seed=seed)
    lap("bounds")

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
    return out


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
    transaction, write the figures and manifest.json under out_dir, and record the run."""
    release = resolve_release(ws, release)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    actions = load_actions(ws, release)
    pairs = load_pairs(ws)
    timings["load"] = time.perf_counter() - t0
    tables = with_release(compute_analyses(actions, pairs, seed=seed, n_simulations=n_simulations,
                                           thinking_threshold_s=thinking_threshold_s, progress=progress,
                                           timings=timings), release)
    manifest = RunManifest(command=command, seeds={"bounds": seed},
                           config={"release_generation": release, "seed": seed, "n_simulations": n_simulations,
                                   "thinking_threshold_s": thinking_threshold_s, "confidence_level": CONFIDENCE,
                                   "out_dir": None if out_dir is None else str(out_dir), "figures": figures,
                                   "db": str(ws.path)})
    _core_inputs(ws, manifest, ("core_harc__actions", "core_arc__task_pairs"))
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
    report = AnalysisReport(release=release, tables=tables, timings=timings)
    if figures and out_dir is not None:
        from pipeline.harc.figures import write_figures

        t0 = time.perf_counter()
        report.figures, report.skipped_figures = write_figures(out_dir / "figures", tables)
        timings["figures"] = time.perf_counter() - t0
        for paths in report.figures.values():
            for path in paths.values():
                manifest.add_output(path)
    manifest.notes.update(timings_s=timings, rows={n: tables[n].height for n in ANALYSIS_TABLES},
                          skipped_figures=report.skipped_figures)
    manifest.finish(0)
    ws.record_run(manifest)
    if out_dir is not None:
        report.manifest_path = manifest.write_json(out_dir)
    report.manifest = manifest
    return report


# --------------------------------------------------------------------------------------------------------
# harc-graph
# --------------------------------------------------------------------------------------------------------
def task_graph(ws: Workspace, task_id: str, *, release: str | None = None) -> dict[str, Any]:
    """The visited-state graph document of one task (graphs.graph_document)."""
    from engine.harc import build_state_graph

    release = resolve_release(ws, release)
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
