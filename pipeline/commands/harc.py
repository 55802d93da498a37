"""`arcstudy replay-harc`, `arcstudy harc-analyses` and `arcstudy harc-graph`: the H-ARC study.

Exit codes (common.py): 0 ok, 1 error (no H-ARC data, database locked, ...), 2 usage. Divergent or
non-replayable traces are findings about the data, not rejected input: replay-harc records them and exits 0
with a summary, unless --strict asks for exit code 3 when any trace is not consistent.

Without data.csv (core_harc__actions empty) replay-harc has nothing to replay: a one-line message naming
data.csv and exit code 1 (an error of the run, not rejected input: the summary files are valid, just not
replayable). harc-analyses computes what summary_data.csv and incorrect_submissions.csv allow, names each
analysis it skipped with the file it needs, and exits 0; 1 only when nothing at all could be computed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import polars as pl
import typer
from rich.table import Table as RichTable

from pipeline.core.console import out
from pipeline.core.outputs import output_folder, public_path, write_text
from schemas.vocabulary import HARC_RELEASES, HARC_SPLITS

from .common import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    HARC,
    DbOption,
    LockTimeoutOption,
    SchedulerOption,
    beside_database,
    command_line,
    fail,
    foreign_tables_said,
    make_out_dir,
    open_workspace,
    out_write_errors_said,
    refuse_overwriting_database,
    run_manifest_dir,
)


def _release_name(value: str | None) -> str | None:
    """A name that is no release generation is a usage mistake (exit 2), not missing data."""
    if value is not None and value not in HARC_RELEASES:
        raise typer.BadParameter(f"{value!r} is not an H-ARC release generation; one of {', '.join(HARC_RELEASES)}")
    return value


ReleaseOption = Annotated[str | None, typer.Option("--release", help="H-ARC release generation to analyse: "
                                                   "osf-current or 2024 (default: osf-current when present, "
                                                   "else 2024).", show_default=False, callback=_release_name)]
# Seeds are stored in manifests and tables as BIGINT, and numpy takes only non-negative ones.
MAX_SEED = 2**63 - 1
MAX_SIMULATIONS = 100_000  # each draws one (simulations x tasks) block of floats: bounded memory


def replay_harc_command(
    ctx: typer.Context,
    db: DbOption = None,
    only_task: Annotated[str | None, typer.Option("--only-task", help="Replay only this task's traces (task id "
                                                  "without .json) and replace only its rows.",
                                                  show_default=False)] = None,
    workers: Annotated[int, typer.Option("--workers", min=0, help="Worker processes for the replay (a local Dask "
                                         "cluster); 1 = serial, without Dask; 0 = auto (2 from 1,000,000 event "
                                         "rows on when 1.5 cores are idle by the load average, else 1). "
                                         "Results do not depend on it.")] = 0,
    scheduler: SchedulerOption = None,
    strict: Annotated[bool, typer.Option("--strict", help="Exit with code 3 when any trace is divergent or not "
                                         "replayable.")] = False,
    strict_replay: Annotated[bool, typer.Option("--strict-replay", help="Also treat secondary mismatches "
                                                "(colour, tool, clipboard, selection, attempt, solved, input) as "
                                                "divergences of kind `state`.")] = False,
    lock_timeout: LockTimeoutOption = 30.0,
) -> None:
    """Replay every H-ARC participant-task trace through the editor engine and check each logged row.

    After every row, the replayed grid must equal the row's test_output_grid and the drop-downs its sizes. Each
    participant's tasks are chained (the previous task's final grid is on the undo stack at task start).
    Reads: core_harc__actions (every release generation), core_arc__task_pairs (answers, to re-judge
    submissions). Writes: out_harc__trace_checks (all rows, or the --only-task rows, in one transaction), a row
    in `runs` and its manifest under <db>.runs/. Divergent traces are reported, not rejected: exit code 0
    unless --strict. Without data.csv (no events; summary files alone cannot be replayed): exit code 1.
    """
    from pipeline.core.workspace import WorkspaceError, default_db_path
    from pipeline.harc.build import HarcError, run_trace_checks

    db_path = db or default_db_path()
    if not db_path.exists():
        raise fail(f"database {db_path} does not exist (run `arcstudy ingest` on the H-ARC files first)")
    with open_workspace(db_path, lock_timeout_s=lock_timeout) as ws:
        try:
            report = run_trace_checks(ws, only_task=only_task, workers=workers, scheduler=scheduler,
                                      strict=strict_replay,
                                      command=command_line(ctx), progress=out.track,
                                      manifest_dir=run_manifest_dir(db_path))
        except (HarcError, WorkspaceError) as err:
            raise fail(str(err)) from err
    _print_trace_summary(report)
    bad = report.counts["divergent"] + report.counts["not_replayable"]
    raise typer.Exit(EXIT_REJECTED if strict and bad else EXIT_OK)


def _print_trace_summary(report) -> None:
    checks = report.checks
    c = report.counts
    out.console.print(f"{checks.height:,} traces replayed: {c['consistent']:,} consistent, {c['divergent']:,} "
                      f"divergent, {c['not_replayable']:,} not replayable (out_harc__trace_checks)")
    if checks.height:
        kinds = (checks.filter(pl.col("replay_status") == "divergent").group_by("divergence_kind").len()
                 .sort("len", descending=True))
        if kinds.height:
            out.console.print("divergences by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.iter_rows()))
        adopted = checks.filter(pl.col("n_adopted_rows") > 0).height
        if adopted:
            out.console.print(f"{adopted:,} traces adopted a logged grid (undo into an unknown previous grid, "
                              "late start or auto_solve)")
    bad = checks.filter(pl.col("replay_status") != "consistent").head(10)
    if bad.height:
        table = RichTable(title="first traces that are not consistent")
        for col in ("participant", "task", "status", "action_number", "action", "reason"):
            table.add_column(col)
        for r in bad.iter_rows(named=True):
            table.add_row(r["participant_id"][:10], r["task_id"], r["replay_status"],
                          "-" if r["divergence_action_number"] is None else str(r["divergence_action_number"]),
                          r["divergence_action"] or "-", (r["reason"] or "")[:90])
        out.console.print(table)
    if report.manifest is not None:
        out.console.print(f"run {report.manifest.run_id}; timings: "
                          + ", ".join(f"{k} {v:.1f}s" for k, v in report.timings.items()))


def default_out_dir(db_path: Path) -> Path:
    """Figures, graphs and the analyses' manifest live beside the database: `<db>.harc/`."""
    return beside_database(db_path, HARC)


def harc_analyses_command(
    ctx: typer.Context,
    db: DbOption = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder for figures/ and manifest.json (default: "
                                                 "<db>.harc/ beside the database).", file_okay=False,
                                                 show_default=False)] = None,
    release: ReleaseOption = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, help="Seed of the bound simulations.")] = 0,
    simulations: Annotated[int, typer.Option("--simulations", min=1, max=MAX_SIMULATIONS,
                                             help="Imputation simulations per bound.")] = 1000,
    thinking_threshold: Annotated[float, typer.Option("--thinking-threshold-s", min=0.0, help="Shortest gap "
                                                      "between two events counted as thinking time.")] = 5.0,
    no_figures: Annotated[bool, typer.Option("--no-figures", help="Skip the figures.")] = False,
    lock_timeout: LockTimeoutOption = 30.0,
) -> None:
    """Compute the H-ARC paper's analyses for one release generation as out_harc__* tables and figures.

    k-attempt accuracy (k = 1, 2, 3) per task and split, tasks solved by anyone / everyone / no one, Figure 5
    (tasks with at least N solvers), Figure 6 (per-participant accuracy), pessimistic/optimistic bounds by
    imputation (--simulations, --seed), errors (grid size, edit distance, copy errors, error divergence and
    its correlation with success), time (per attempt, to first action, thinking time; t-tests), first grid
    changes, accuracy by task position with a logistic GEE, visited-state counts (Table 2).
    Beside them, out_harc__reproduction puts the study's published counts next to the same numbers from the
    ingested files. Reads: core_harc__actions (the chosen release), core_arc__task_pairs (correct outputs,
    train/test grids). Without events for the release (no data.csv), reads core_harc__attempts
    (summary_data.csv) and core_harc__incorrect_submissions (incorrect_submissions.csv) instead, computes
    accuracy, Figures 5-6, accuracy by position, the learning model and the errors, leaves the other tables
    empty for that release and names them with the file they need (exit code 0; 1 when nothing could be
    computed). Writes: out_harc__task_state_graphs, out_harc__split_descriptives, out_harc__task_outcomes,
    out_harc__task_accuracy, out_harc__split_accuracy, out_harc__tasks_by_min_solvers,
    out_harc__participant_accuracy, out_harc__accuracy_bounds, out_harc__submissions, out_harc__task_errors,
    out_harc__error_summary, out_harc__statistical_tests, out_harc__time_summary, out_harc__first_actions,
    out_harc__position_accuracy, out_harc__learning_model, out_harc__reproduction (that release's rows, one
    transaction); figures
    (--out/figures/*.png, *.svg, *.vl.json), --out/manifest.json and a row in `runs`.
    """
    from pipeline.core.workspace import WorkspaceError, default_db_path
    from pipeline.harc.build import HarcError, run_analyses

    db_path = db or default_db_path()
    if not db_path.exists():
        raise fail(f"database {db_path} does not exist (run `arcstudy ingest` on the H-ARC files first)")
    out_dir = make_out_dir(out_dir or default_out_dir(db_path), db=db_path)  # before the analyses, not the figures
    if not no_figures:  # drawn in a child process, whose failure to write would come back as a traceback
        make_out_dir(out_dir / "figures")
    # The folder (figures/, manifest.json) is written whole: a failure or a full disk leaves the old one.
    with (open_workspace(db_path, lock_timeout_s=lock_timeout) as ws, foreign_tables_said(db_path),
          out_write_errors_said(out_dir), output_folder(out_dir) as stage):
        if not no_figures:
            (stage / "figures").mkdir(exist_ok=True)
        try:
            report = run_analyses(ws, release=release, seed=seed, n_simulations=simulations,
                                  thinking_threshold_s=thinking_threshold, out_dir=stage,
                                  figures=not no_figures, command=command_line(ctx), progress=out.track)
        except (HarcError, WorkspaceError) as err:
            raise fail(str(err)) from err
        report.figures = {name: {kind: public_path(path) for kind, path in paths.items()}
                          for name, paths in report.figures.items()}
        if report.manifest_path is not None:
            report.manifest_path = public_path(report.manifest_path)
    _print_analyses(report)
    raise typer.Exit(EXIT_OK)


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _print_analyses(report) -> None:
    t = report.tables
    acc = t["out_harc__split_accuracy"]
    table = RichTable(title=f"H-ARC task-averaged accuracy ({report.release})")
    for col in ("split", "tasks", "k=1", "k=2", "k=3", "solved by any", "by all", "by none",
                "bounds k=3 (pess., opt.)"):
        table.add_column(col)
    bounds = t["out_harc__accuracy_bounds"].filter(pl.col("max_attempts") == 3)
    for split in HARC_SPLITS:
        rows = {r["max_attempts"]: r for r in acc.filter(pl.col("task_split") == split).iter_rows(named=True)}
        if not rows:
            continue
        b = {r["bound_kind"]: r["bound_estimate"] for r in bounds.filter(pl.col("task_split") == split)
             .iter_rows(named=True)}
        k3 = rows.get(3, {})
        table.add_row(split, str(k3.get("n_tasks", "-")), *(_pct(rows.get(k, {}).get("mean_task_accuracy"))
                                                             for k in (1, 2, 3)),
                      str(k3.get("n_tasks_solved_by_any", "-")), str(k3.get("n_tasks_solved_by_all", "-")),
                      str(k3.get("n_tasks_solved_by_none", "-")),
                      f"[{_pct(b.get('pessimistic'))}, {_pct(b.get('optimistic'))}]")
    out.console.print(table)
    for r in t["out_harc__statistical_tests"].iter_rows(named=True):
        stat = "-" if r["statistic"] is None else f"{r['statistic']:.2f}"
        df = "-" if r["degrees_of_freedom"] is None else f"{r['degrees_of_freedom']:.0f}"
        p = "-" if r["p_value"] is None else f"{r['p_value']:.3g}"
        name = "r" if r["test_kind"] == "pearson" else "t"
        out.console.print(f"{r['test_id']}: {name}({df}) = {stat}, p = {p}")
    _print_reproduction(t["out_harc__reproduction"])
    if report.inputs != "events":
        out.console.print(f"release {report.release} has no events (data.csv): analysed from summary_data.csv and "
                          "incorrect_submissions.csv")
    for skipped in report.skipped:
        out.console.print(f"skipped {skipped.line()}")
    for caveat in report.caveats:
        out.console.print(f"note: {caveat}")
    out.console.print("tables: " + ", ".join(f"{n} ({df.height:,})" for n, df in t.items()))
    if report.figures:
        folder = next(iter(report.figures.values()))["png"].parent
        out.console.print(f"figures: {', '.join(report.figures)} in {folder}")
    if report.skipped_figures:
        out.console.print(f"figures skipped for lack of data: {', '.join(report.skipped_figures)}")
    if report.manifest_path:
        out.console.print(f"manifest: {report.manifest_path}")


def _number(value) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.3f}"


def _print_reproduction(rows: pl.DataFrame) -> None:
    table = RichTable(title="H-ARC published counts beside this data (out_harc__reproduction)")
    for col in ("metric", "split", "published", "observed", "match", "needs"):
        table.add_column(col)
    for r in rows.iter_rows(named=True):
        match = "-" if r["is_match"] is None else ("yes" if r["is_match"] else "no")
        table.add_row(r["metric"], r["task_split"], _number(r["published_value"]), _number(r["observed_value"]),
                      match, r["needs_file"] or "")
    out.console.print(table)


def harc_graph_command(
    task_id: Annotated[str, typer.Argument(help="ARC task id (without .json).")],
    db: DbOption = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder for <task>.graph.json and the figure "
                                                 "(default: <db>.harc/graphs/).", file_okay=False,
                                                 show_default=False)] = None,
    release: ReleaseOption = None,
    no_figure: Annotated[bool, typer.Option("--no-figure", help="Write only the JSON.")] = False,
) -> None:
    """Export one task's visited-state graph (H-ARC Figure 1) as JSON and a figure.

    Nodes are the distinct grids participants visited, edges the observed transitions between them, with the
    start state and correct / incorrect submissions marked; the figure lays nodes out by first-visit step and
    distance to the correct output. Reads: core_harc__actions (the task's rows of the release),
    core_arc__task_pairs (its correct output). Writes: --out/<task>.graph.json and, unless --no-figure,
    --out/<task>_state_graph.png, .svg and .vl.json. The database is opened read-only.
    """
    from pipeline.core.workspace import default_db_path
    from pipeline.harc.build import HarcError, task_graph

    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", task_id) or ".." in task_id:
        # the id names the files written under --out: a path there would write outside it
        raise fail(f"task id {task_id!r} is not a plain name (letters, digits, '_', '-', '.'); it names the files "
                   "written under --out", EXIT_USAGE)
    db_path = db or default_db_path()
    if not db_path.exists():
        raise fail(f"database {db_path} does not exist (run `arcstudy ingest` on the H-ARC files first)")
    out_dir = out_dir or default_out_dir(db_path) / "graphs"
    refuse_overwriting_database(out_dir, db_path)
    with open_workspace(db_path, read_only=True) as ws, foreign_tables_said(db_path):
        try:
            doc = task_graph(ws, task_id, release=release)
        except HarcError as err:
            raise fail(str(err)) from err
    make_out_dir(out_dir)
    path = out_dir / f"{task_id}.graph.json"
    with out_write_errors_said(out_dir):
        write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    out.console.print(f"task {task_id} ({doc['task_split']}, {doc['release_generation']}): {doc['n_unique_states']} "
                      f"states, {len(doc['edges'])} transitions, {doc['n_traces']} traces; wrote {path}")
    if not no_figure:
        from pipeline.core.figures import alt, save_figure
        from pipeline.harc.graphs import graph_chart

        with alt.data_transformers.disable_max_rows(), out_write_errors_said(out_dir):  # thousands of states
            paths = save_figure(graph_chart(doc), out_dir, f"{task_id}_state_graph")
        out.console.print(f"figure: {paths['png']}")
    raise typer.Exit(EXIT_OK)
