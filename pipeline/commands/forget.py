"""`arcstudy forget`: remove what one input file, a folder of them, or one ingest run brought."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeline.core.console import out

from .common import (
    EXIT_OK,
    EXIT_USAGE,
    DbOption,
    LockTimeoutOption,
    command_line,
    db_to_read,
    fail,
    open_workspace,
    run_manifest_dir,
)


def forget_command(
    ctx: typer.Context,
    targets: Annotated[list[str], typer.Argument(help="Input files or folders (as they were ingested: the file "
                                                 "need not exist any more), content hashes (file_id), or "
                                                 "ingest run ids.", show_default=False, metavar="FILE|RUN_ID")],
    db: DbOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")] = False,
    lock_timeout: LockTimeoutOption = 30.0,
) -> None:
    """Remove everything one input file (or every file of one ingest run) brought into the database.

    Reads and writes: the database. Removes, in one transaction, every row carrying the files' content hash
    (raw_*, core_* and the out_* rows derived from them), their rows in raw_ingest__files and quarantine (a
    refused file has only those), every score run that counted one of their plays (score's tables, whole) and,
    for H-ARC files, the H-ARC trace checks and analyses; then the frame Parquet files their steps reference.
    Records a row in `runs` and its manifest under <db>.runs/. Run `arcstudy build` afterwards to rebuild the
    analysis tables (and `score`, `replay-harc`, `harc-analyses` for what they made, as it says).
    Exit code 1 when a target names nothing the database holds (nothing is removed then).
    """
    from pipeline.core.manifest import RunManifest
    from pipeline.ingest.forget import NothingToForget, forget, resolve_target

    if any(not t.strip() for t in targets):  # "" resolves to the current folder: everything ingested below it
        raise fail("an empty target names no file (a shell variable that expanded to nothing?): give the file, "
                   "folder, content hash or run id; `.` for everything ingested from the current folder",
                   EXIT_USAGE)
    db_path = db_to_read(db)
    if not db_path.exists():
        raise fail(f"database {db_path} does not exist (run `arcstudy ingest` first, or pass --db)")
    manifest = RunManifest(command=command_line(ctx), config={"targets": targets, "db": str(db_path),
                                                              "dry_run": dry_run})
    with open_workspace(db_path, read_only=dry_run, lock_timeout_s=lock_timeout) as ws:
        try:
            found = [resolve_target(ws, t) for t in targets]
        except NothingToForget as err:
            raise fail(str(err)) from err
        merged = found[0]
        for f in found[1:]:  # one transaction for every target
            merged.files.update(f.files)
            merged.refused_paths += [p for p in f.refused_paths if p not in merged.refused_paths]
        if len(found) > 1:
            merged.kind = "file"  # run ids' quarantine rows are matched by their files
        copies = _copies_of(ws, merged)  # before the rows that name them go
        done = forget(ws, merged, dry_run=dry_run)
        if not dry_run:
            manifest.notes["forgotten_files"] = done.files
            manifest.notes["forgotten_refused_paths"] = done.refused_paths
            manifest.notes["rows_removed"] = done.rows
            manifest.notes["scorecards_removed"] = done.scorecards
            manifest.notes["harc_analyses_removed"] = done.harc_analyses
            manifest.finish(EXIT_OK)
            ws.record_run(manifest)
    if not dry_run:
        manifest.write_json(run_manifest_dir(db_path) / manifest.run_id)
    verb = "would remove" if dry_run else "removed"
    n_files = len(done.files) + len(done.refused_paths)
    out.console.print(f"{verb} {done.n_rows:,} rows brought by {n_files} file(s):", markup=False, highlight=False)
    for path in [*done.files.values(), *done.refused_paths]:
        out.console.print(f"  {path}", markup=False, highlight=False)
    for name, n in sorted(done.rows.items()):
        out.console.print(f"  {name}: {n:,}", markup=False, highlight=False)
    if done.scorecards:
        out.console.print(f"{verb} the score run(s) that counted their plays ({', '.join(done.scorecards)}): run "
                          "`arcstudy score` again for scores without them", markup=False, highlight=False)
    if done.harc_analyses:
        out.console.print(f"{verb} the H-ARC trace checks and analyses made with them: run `arcstudy replay-harc` "
                          "and `arcstudy harc-analyses` again", markup=False, highlight=False)
    if done.frames_files:
        out.console.print(f"  and {len(done.frames_files)} frame file(s)", markup=False)
    for path, n in copies:
        out.console.print(f"{path}: {n:,} of its rows were quarantined as copies of rows of the file(s) "
                          f"{'that would be ' if dry_run else ''}forgotten (duplicate_across_files, duplicate_play): "
                          "`arcstudy ingest --force` it to load them", markup=False, soft_wrap=True)
    if not dry_run and done.n_rows:
        out.console.print("run `arcstudy build` to rebuild the analysis tables", markup=False)
    raise typer.Exit(EXIT_OK)


def _copies_of(ws, found) -> list[tuple[str, int]]:
    """(path, rows) of the other files whose rows were quarantined as copies of rows these files brought
    (`duplicate_across_files`, or `duplicate_play` for every row of a play another file gave first; each reason
    names that file): once these are forgotten, nothing holds those rows, and their file must be ingested again
    to load them. (Counting the first check alone, a copied recording's 266 rows were said as 1.)"""
    ids, paths = list(found.files), [str(p) for p in found.files.values()]
    if not paths or not ws.has_table("quarantine"):
        return []
    rows = ws.read("SELECT file_path, count(*) AS n FROM quarantine "
                   "WHERE check_name IN ('duplicate_across_files', 'duplicate_play') "
                   "AND (file_id IS NULL OR file_id NOT IN (SELECT unnest(?))) "
                   "AND len(list_filter(?::VARCHAR[], lambda p: contains(reason, ' from ' || p))) > 0 "
                   "GROUP BY 1 ORDER BY 1", [ids, paths])
    return [(p, int(n)) for p, n in rows.rows()]
