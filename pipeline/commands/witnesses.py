"""`arcstudy check-witnesses`: run the stored ARC-TGI witnesses in the sandbox (pipeline.qualify.witnesses)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.core.console import out

from .common import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    DbOption,
    LockTimeoutOption,
    SchedulerOption,
    WorkersOption,
    command_line,
    fail,
    foreign_tables_said,
    open_workspace,
)


def check_witnesses_command(
    ctx: typer.Context,
    framework: Annotated[Path, typer.Option("--framework", metavar="DIR", show_default=False,
                                            help="The ARC-TGI checkout: the folder that holds "
                                                 "Framework/transformation_library.py (imported in the sandbox).")],
    db: DbOption = None,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, max=3600, metavar="SECONDS",
                                           help="Wall-clock and CPU limit for one task's witness (both runs of "
                                                "every input). A child's start (the framework's import) gets "
                                                "the larger of this and 30 s.")] = 10.0,
    lock_timeout: LockTimeoutOption = 30.0,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
) -> None:
    """Run every ingested ARC-TGI task's stored witness (its `code`) on each train and test input, twice, and
    compare the outputs exactly with the stored ones.

    Reads: core_arctgi__tasks (code and pairs, from `arcstudy ingest` of ARC-TGI exports) and the checkout's
    Framework/ (--framework DIR; its transformation_library and what it imports, e.g. scipy, must be installed
    in arcstudy's Python). Writes: out_arctgi__witness_checks (replaced: one row per task, with status pass,
    mismatch, error, timeout, refused or nondeterministic and a reason) and a row in `runs`.

    The witnesses are code from outside: they run in the sandbox (docs/security.md), in confined child processes
    that import the framework once each, on --workers processes or the cluster at --scheduler. The rows do not
    depend on either: the tasks run in fixed batches (up to 128 tasks of one export, in task order), each batch in
    a fresh child, whatever the workers; tasks of different exports never share a child, and a witness that
    changes a module (replaces numpy.array, say) ends its child, so the next task starts fresh. A witness that
    changes shared state in place can still change what later witnesses of its batch see, the same in every
    run (docs/security.md, "Witnesses"). Exit code 3 when any task does not pass (the table and the summary say
    which and why), 2 when --framework holds no Framework/transformation_library.py, 1 when the framework cannot
    be imported.
    """
    from pipeline.core.executor import SerialExecutor, open_executor
    from pipeline.core.manifest import RunManifest
    from pipeline.core.workspace import default_db_path
    from pipeline.ingest.harc_arc import TGI_INSTANCE
    from pipeline.qualify import witnesses as wt

    try:
        root = wt.check_framework_dir(framework)
    except wt.FrameworkError as err:
        raise fail(str(err), EXIT_USAGE) from err
    db_path = db or default_db_path()
    if not db_path.exists():
        raise fail(f"database {db_path} does not exist: run `arcstudy ingest` on ARC-TGI exports first (or pass --db)")
    limits = wt.witness_limits(timeout)
    manifest = RunManifest(command=command_line(ctx), config={
        "framework": str(root), "timeout_s": timeout, "workers": workers, "scheduler": scheduler,
        "memory_bytes": limits.memory_bytes, "output_bytes": limits.output_bytes})
    # The database is read, closed while the witnesses run (minutes, on a large export), and opened again to write.
    with open_workspace(db_path, read_only=True, lock_timeout_s=lock_timeout) as ws, foreign_tables_said(db_path):
        # the columns that tell a task instance's copies apart (all.csv beside the per-folder CSVs): one run each
        tgi = ws.read(f"SELECT file_id, task_id, row_number, family_prefix, flags, {', '.join(TGI_INSTANCE)} "
                      "FROM core_arctgi__tasks") if ws.has_table("core_arctgi__tasks") else None
    tasks = wt.witness_tasks(tgi) if tgi is not None else []
    if not tasks:
        raise fail(f"no ARC-TGI tasks in {db_path}: run `arcstudy ingest` on an ARC-TGI export (the CSV its "
                   "dataset generator writes) first")
    out.info(f"{len(tasks)} task(s); witnesses run in the sandbox with {root / 'Framework'} (docs/security.md)")
    children = wt.witness_children(root, limits)
    batches = wt.witness_batches(tasks)
    try:  # the child for the first batch: serially, it serves that batch's tasks
        wt.probe_framework(root, limits, children, batches[0].key)
    except wt.FrameworkError as err:
        raise fail(str(err)) from err
    manifest.add_input(f"{db_path}#core_arctgi__tasks", wt.tasks_digest(tasks))
    with open_executor(workers, scheduler, n_items=len(batches)) as ex:
        if not isinstance(ex, SerialExecutor):
            children.discard()  # the probe's child: the workers start their own
        try:
            rows = list(wt.check_witnesses(tasks, root, limits, ex, progress=out.track))
        finally:
            wt.close_children()
    frame = wt.rows_frame(rows)
    counts = dict(frame.group_by("status").len().sort("status").iter_rows())
    failed = frame.filter(frame["status"] != "pass")
    code = EXIT_REJECTED if failed.height else EXIT_OK
    with open_workspace(db_path, lock_timeout_s=lock_timeout) as ws, foreign_tables_said(db_path):
        ws.ensure_tables([wt.TABLE, "runs"])
        with ws.transaction() as con:
            ws.replace_table(wt.TABLE, frame, con=con)
        ws.finish_run(manifest, exit_code=code)
    out.console.print(f"checked {frame.height} witness(es): "
                      + ", ".join(f"{counts[s]} {s}" for s in sorted(counts)) + f" (written to {wt.TABLE})")
    for rec in failed.head(20).iter_rows(named=True):
        out.error(f"{rec['family_id']} / {rec['task_id']}: {rec['status']}: {rec['reason']}")
    if failed.height > 20:
        out.error(f"... and {failed.height - 20} more task(s) that did not pass (see {wt.TABLE})")
    raise typer.Exit(code)
