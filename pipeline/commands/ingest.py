"""`arcstudy ingest` and `arcstudy formats`: load input files into the database, list what it can read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table as RichTable

from pipeline.core.console import out
from pipeline.core.workspace import default_db_path

from .common import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    FRAMES,
    DbOption,
    SchedulerOption,
    WorkersOption,
    beside_database,
    command_line,
    database_companions,
    fail,
    lock_timeout_seconds,
    make_out_dir,
    open_workspace,
    write_run_manifest,
)


def _format_choices() -> list[str]:
    from pipeline.ingest import FORMATS

    return ["auto", *FORMATS]


def ingest_command(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (searched recursively).",
                                                exists=True, show_default=False)],
    db: DbOption = None,
    fmt: Annotated[str, typer.Option("--format", help="Input format; `auto` detects it from the content. One of: "
                                     "auto, arc3-recording, arc3-metadata, arc3-scorecard, study-manifest, and "
                                     "the H-ARC/ARC formats listed by `arcstudy formats`.")] = "auto",
    force: Annotated[bool, typer.Option("--force", help="Re-read files already ingested (same content hash) "
                                        "and replace what they loaded.")] = False,
    keep_frames: Annotated[bool, typer.Option("--keep-frames", help="Also write frame pixels to zstd Parquet "
                                              "(one file per recording), referenced from core_arc3__steps.")] = False,
    frames_dir: Annotated[Path | None, typer.Option("--frames-dir", help="Where --keep-frames writes "
                                                    "(default: <db>.frames/ beside the database).")] = None,
    lock_timeout: Annotated[float, typer.Option("--lock-timeout", help="Seconds to wait for another "
                                                "writer to release the database.",
                                                callback=lock_timeout_seconds)] = 30.0,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
    family_prefix: Annotated[str | None, typer.Option(
        "--family-prefix", help="ARC-TGI exports: the benchmark folder the generators come from (e.g. "
        "ARC-AGI-1-Train), kept beside each task's family; default: read from the export's path. Needs --force "
        "to change it for a file already ingested.", show_default=False)] = None,
) -> None:
    """Validate and load input files into the database; bad lines and rows go to `quarantine`.

    Reads: the files and folders given (recordings, metadata.json, scorecards, study manifests, H-ARC CSVs,
    ARC task JSON, ARC-TGI CSVs). Writes: raw_* and core_* tables, `quarantine`, `raw_ingest__files`, a row in
    `runs` and its manifest under <db>.runs/; with --keep-frames, Parquet files under <db>.frames/.
    Exit code 3 when anything was quarantined or a file was refused (a FIFO, device or socket is refused
    unread: only regular files are read); exit code 2 when the paths hold no input file at all.
    Files are read and validated on --workers processes (without it: all usable cores from 256 MB of input
    on, 2 GB on a two-core machine; below that, from 64 MB and while a core is free, in this process and one
    helper process, else in this one process; it says which) or on the cluster at --scheduler; this process
    alone writes the database.
    """
    from rich.table import Table as RichTable

    from pipeline.core.manifest import RunManifest
    from pipeline.ingest import FORMATS, expand_paths, ingest_paths
    from pipeline.ingest.harc_arc import tgi_repeats, tgi_shared_ids
    from pipeline.ingest.runner import start_helper

    if fmt != "auto" and fmt not in FORMATS:
        raise fail(f"unknown format {fmt!r}; one of: {', '.join(_format_choices())}", EXIT_USAGE)
    db_path = db or default_db_path()
    frames_dir = frames_dir or beside_database(db_path, FRAMES)
    manifest = RunManifest(command=command_line(ctx),
                           config={"format": fmt, "force": force, "keep_frames": keep_frames,
                                   "frames_dir": str(frames_dir), "db": str(db_path),
                                   "workers": workers, "scheduler": scheduler, "family_prefix": family_prefix})
    if keep_frames:  # before any work: a frames folder that cannot exist is the output's problem, not the inputs'
        make_out_dir(frames_dir, "--frames-dir")
    simulator_files: list[Path] = []
    own_files: list[Path] = []
    files = expand_paths(paths, simulator_files, database_companions(db_path), own_files)
    if own_files:  # the database and what the commands write beside it: outputs, never inputs
        out.info(f"left out {len(own_files)} file(s) of the database {db_path} itself and the folders written "
                 "beside it (runs, reports, scores, figures): outputs, not input")
    if simulator_files:  # not refused (they are no input format) and not silently dropped either
        out.info(f"left out {len(simulator_files)} file(s) that `arcstudy simulate` wrote beside its study "
                 f"({', '.join(sorted({f.name for f in simulator_files})[:3])}{', ...' if len(simulator_files) > 3 else ''}): "
                 "the simulation's description and ground truth, not study data")
        manifest.notes["simulator_files_left_out"] = [str(f) for f in simulator_files]
    if not files:
        raise fail(f"no input files in {', '.join(map(str, paths))} (hidden files and folders, *.py, *.pyc and "
                   "*.expected.json are skipped); nothing ingested", EXIT_USAGE)
    if workers is None and scheduler is None:
        _say_when_one_process(files)
    # A helper process for reading (when the automatic choice takes one) starts now: its imports overlap the
    # opening of the database.
    with start_helper(files, workers, scheduler) as helper, open_workspace(db_path, lock_timeout_s=lock_timeout) as ws:
        report = ingest_paths(ws, files, run_id=manifest.run_id, fmt_name=fmt, force=force,
                              keep_frames=keep_frames, frames_dir=frames_dir, progress=out.track,
                              workers=workers, scheduler=scheduler,
                              options={"family_prefix": family_prefix} if family_prefix else None, helper=helper)
        for f in report.files:
            if f.status != "unreadable" and f.path.is_file():  # never hash a FIFO or device
                try:
                    manifest.add_input(f.path, f.file_id)  # the hash ingest took, else the file is read again
                except OSError:
                    pass
        code = EXIT_REJECTED if report.has_rejections else EXIT_OK
        repeats = tgi_repeats(ws, [f.file_id for f in report.files if f.status in ("loaded", "replaced")
                                   and f.file_id])
        for path, n, other in repeats:  # all.csv beside the per-folder CSVs: not bad rows, not new tasks
            out.info(f"{Path(path).name}: {n} row(s) repeat ARC-TGI tasks already read from {other} (same generator, "
                     "code, task, reasoning chains and variables, under the same or a new task_id: the dataset "
                     "generator writes each task to its folder's CSV and again to all.csv under a new one, and a "
                     "copy of a file keeps its ids); kept with their file, each task counted once")
        if repeats:
            manifest.notes["arctgi_repeated_rows"] = [{"file": p, "rows": n, "repeats_file": o}
                                                      for p, n, o in repeats]
        shared = tgi_shared_ids(ws, [f.file_id for f in report.files if f.status in ("loaded", "replaced")
                                     and f.file_id])
        for task_id, paths in shared[:10]:
            out.info(f"ARC-TGI task id {task_id!r} is given to different tasks by {' and '.join(paths)}: each "
                     "file keeps its own task, but a human audit row naming the id cannot be told to either and "
                     "counts in no family (build says how many)")
        if len(shared) > 10:
            out.info(f"... and {len(shared) - 10} more ARC-TGI task ids given to different tasks by two files")
        if shared:  # the first 100 (an export reusing another's ids could name thousands)
            manifest.notes["arctgi_ambiguous_task_ids"] = {
                "n": len(shared), "first": [{"task_id": t, "files": ps} for t, ps in shared[:100]]}
        manifest.notes["files"] = {s: sum(1 for f in report.files if f.status == s)
                                   for s in ("loaded", "replaced", "skipped", "rejected", "unreadable")}
        manifest.notes["quarantined"] = report.n_quarantined
        manifest.finish(code)
        ws.record_run(manifest)
    write_run_manifest(manifest, db_path)

    table = RichTable(title=f"ingest into {db_path}")
    for col in ("file", "status", "format", "loaded", "quarantined", "note"):
        table.add_column(col, justify="right" if col in ("loaded", "quarantined") else "left")
    for f in report.files:
        table.add_row(str(f.path.name), f.status, f.source_format or "-", f"{f.n_loaded:,}",
                      f"{f.n_quarantined:,}", f.message[:90])
    out.console.print(table)
    counts = manifest.notes["files"]
    n_files = f"{len(report.files)} file" + ("" if len(report.files) == 1 else "s")
    out.console.print(
        f"{n_files}: {counts['loaded']} loaded, {counts['replaced']} replaced, "
        f"{counts['skipped']} skipped (already ingested), {counts['rejected']} refused, "
        f"{counts['unreadable']} unreadable; {report.n_quarantined:,} records quarantined."
    )
    if code == EXIT_REJECTED:
        out.console.print("Some input was rejected: see `arcstudy query \"SELECT * FROM quarantine WHERE run_id = "
                          f"'{manifest.run_id}'\"`.")
    raise typer.Exit(code)


def formats_command() -> None:
    """List the input formats ingest recognises, with what each one is.

    Reads: nothing. Writes: stdout.
    """
    from pipeline.ingest import FORMATS

    table = RichTable(title="input formats")
    table.add_column("format")
    table.add_column("what it is")
    table.add_column("tables")
    for f in FORMATS.values():
        table.add_row(f.name, f.description, ", ".join(f.tables))
    out.console.print(table)


def _say_when_one_process(files: list[Path]) -> None:
    """Without --workers: tell the user when the automatic choice reads in this process (with one helper process
    beside it, or alone) rather than on worker processes."""
    from pipeline.core.executor import default_workers, machine_load
    from pipeline.ingest.runner import (
        HELPER_MIN_BYTES,
        PARALLEL_MIN_BYTES,
        TWO_CORES_MIN_BYTES,
        auto_ingest_helper,
        auto_ingest_workers,
    )

    cores = default_workers()
    sizes = [p.stat().st_size for p in files if p.is_file()]
    if cores > 1 and len(sizes) > 1 and auto_ingest_workers(sizes, cores) == 1:
        floor = PARALLEL_MIN_BYTES if cores > 2 else TWO_CORES_MIN_BYTES
        shared = (sum(sizes) - max(sizes)) / 1e6
        load = machine_load()
        if auto_ingest_helper(sizes, cores, load):
            out.info(f"reading in this process and one helper process: {shared:,.0f} MB of input could be shared "
                     f"out, below the {floor / 1e6:,.0f} MB from which worker processes pay for their start-up on "
                     f"{cores} cores (--workers N to use N processes anyway, --workers 1 for this one alone)")
        elif auto_ingest_helper(sizes, cores):  # all but a free core
            out.info(f"reading in this one process: no core is free ({load:.0f} other tasks running on {cores} cores), "
                     f"so a helper process would slow it (--workers N to use N processes anyway)")
        else:
            out.info(f"reading in this one process: {shared:,.0f} MB of input could be shared out, below the "
                     f"{HELPER_MIN_BYTES / 1e6:,.0f} MB from which a helper process pays for its start-up on "
                     f"{cores} cores (--workers N to use N processes anyway)")
