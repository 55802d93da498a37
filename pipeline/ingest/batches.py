"""Small files, many to a transaction (`commit_batch`).

A transaction, a registry query and a schema check per table cost milliseconds each, far more than
reading a task file or a scorecard. Small files are therefore committed in batches: one registry query,
one validation per table, one insert per table and one transaction for the whole batch. The result is
exactly that of `commit_file` on each file in turn: the batch takes the fast path only when no file in it
could see another (no shared content hash or path, no key clash across files or with the database, every
frame clean), and otherwise, or when writing fails, commits its files one by one with `commit_file`.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline.core.workspace import Workspace
from pipeline.ingest.base import ReaderOutput, Reject
from pipeline.ingest.commit import commit_file, key_match
from pipeline.ingest.prepared import (
    QUARANTINE_BATCH,
    FileReport,
    PreparedFile,
    _failed_piece,
    _failure_report,
    _file_record,
    _loaded_report,
    _quarantine_records,
    _skipped_report,
    skipped_message,
    validate_output,
)
from schemas import validate_frame
from schemas.validate import conform

SMALL_FILE_BYTES = 1 << 20  # files up to this size are batched
# Recordings read whole (below the runner's STREAM_MIN_BYTES) are batched up to this size too: their rows are a
# few percent of their bytes (frame pixels are hashed, not stored), so a batch of them holds little, and the
# per-file costs of a commit (a schema check and an insert per table, a transaction and its fsync) were most
# of the writer's time on engine-made recordings (80 files of 0.02-17 MB: 2.4 s of CPU one by one, 0.5-0.9 s
# in batches).
SMALL_RECORDING_BYTES = 32 << 20
BATCHED_FORMATS = ("arc3-recording",)
BATCH_MAX_FILES = 500
BATCH_MAX_BYTES = 64 << 20  # input bytes held in memory by one batch
# A batch of at least this many input bytes is handed over early when the writer has nothing to do: a batch waits
# for BATCH_MAX_BYTES only while the writer is busy, so the last batch of a run (committed after the reading
# ends, on nobody's overlap) stays short.
BATCH_EAGER_BYTES = 16 << 20


def is_small(prepared: PreparedFile) -> bool:
    """A file for `commit_batch`: small (a recording: up to SMALL_RECORDING_BYTES), and read whole (not streamed,
    not in pieces: `commit_file` writes those)."""
    whole = not prepared.streamed and (prepared.output is None or prepared.output.pieces is None)
    limit = SMALL_RECORDING_BYTES if prepared.fmt_name in BATCHED_FORMATS else SMALL_FILE_BYTES
    return prepared.n_bytes <= limit and whole


def commit_batch(ws: Workspace, batch: list[PreparedFile]) -> list[FileReport]:
    """Commit small prepared files, in order, with the result of `commit_file` on each in turn."""
    batch = validate_batch(batch)
    if len(batch) <= 1:
        return [commit_file(ws, p) for p in batch]
    plan = _plan_batch(ws, batch)
    if plan is None:
        return [commit_file(ws, p) for p in batch]
    try:
        _write_batch(ws, plan)
    except Exception:
        # Rolled back as a whole; one by one, each file lands wholly or raises as it would alone.
        return [commit_file(ws, p) for p in batch]
    return plan.reports


@dataclass
class _BatchPlan:
    reports: list[FileReport]
    tables: dict[str, list[pl.DataFrame]]  # rows to insert, per table, in file order
    files: list[dict]  # registry rows
    quarantine: list[dict]
    clear_ids: list[str]  # file ids whose rows go first (--force re-reads, older versions of a path)
    requarantined_ids: list[str]  # file ids whose earlier quarantine rows go first


def _plan_batch(ws: Workspace, batch: list[PreparedFile]) -> _BatchPlan | None:
    """What writing the batch at once means, or None when its files must be committed one by one."""
    active = [p for p in batch if not p.skipped]
    batch_ids = {p.ctx.file_id for p in active if p.ctx.file_id is not None}
    paths = {str(p.path) for p in active}
    if len(batch_ids) < sum(p.ctx.file_id is not None for p in active) or len(paths) < len(active):
        return None  # a file would see another of the batch in the registry
    if sum(len(p.output.rejects) for p in active if p.output is not None) + \
            sum(len(p.failure_rejects) for p in active) > QUARANTINE_BATCH:
        return None  # a flood of rejects: file by file, their quarantine written a bounded batch at a time
    loading = [p for p in active if p.failure is None]
    by_id: dict[str, str] = {}
    by_path: dict[str, set[str]] = {}
    if loading:
        rows = ws.read("SELECT file_id, file_path FROM raw_ingest__files "
                       "WHERE file_id IN (SELECT unnest(?)) OR file_path IN (SELECT unnest(?))",
                       [[p.ctx.file_id for p in loading], [str(p.path) for p in loading]]).rows()
        for file_id, file_path in rows:
            by_id[file_id] = file_path
            by_path.setdefault(file_path, set()).add(file_id)
    plan = _BatchPlan([], {}, [], [], [], [])
    loaded: list[tuple[dict[str, pl.DataFrame], list[str]]] = []  # tables, with the ids not a clash for them
    claimed: set[str] = set()  # registry ids some file of the batch already sees
    for p in batch:
        if p.skipped:
            plan.reports.append(_skipped_report(p, ws))
            continue
        if p.failure is not None:
            _, check, reason, location, raw = p.failure
            plan.quarantine += _quarantine_records(p.ctx, p.fmt_name, [Reject(location, check, reason, raw),
                                                                      *p.failure_rejects])
            if p.ctx.file_id:
                plan.requarantined_ids.append(p.ctx.file_id)
            plan.reports.append(_failure_report(p))
            continue
        output, file_id = p.output, p.ctx.file_id
        assert output is not None and file_id is not None
        seen = by_path.get(str(p.path), set()) | ({file_id} if file_id in by_id else set())
        replaced = sorted(seen - {file_id})
        if claimed & seen or batch_ids & set(replaced):
            return None  # files of the batch share an older version: their order decides
        claimed |= seen
        if file_id in seen and not p.force:
            plan.reports.append(FileReport(p.path, "skipped",
                                           message=skipped_message(p.path, by_id.get(file_id), this_run=True),
                                           file_id=file_id))
            continue
        if file_id in seen or p.seen_before:
            plan.clear_ids.append(file_id)
        plan.clear_ids += replaced
        plan.requarantined_ids.append(file_id)
        quarantine = _quarantine_records(p.ctx, p.fmt_name, output.rejects)
        plan.quarantine += quarantine
        plan.files.append(_file_record(p, len(quarantine)))
        for name, df in output.tables.items():
            plan.tables.setdefault(name, []).append(df)
        plan.reports.append(_loaded_report(p, len(quarantine), len(replaced)))
        loaded.append((output.tables, [file_id, *replaced]))
    if _batch_has_key_clash(ws, loaded):
        return None
    return plan


def validate_batch(batch: list[PreparedFile]) -> list[PreparedFile]:
    """The batch with every file's output validated (`validate_output`). The usual case costs one conform
    and one schema check per table and frame shape for the whole batch: the frames of a table are stacked,
    conformed and checked at once, and each file gets its slice back, when every row is clean. Otherwise the
    files are validated one by one, and a file whose frames cannot be validated at all is refused as if its
    reading had raised (`_failed_piece`)."""
    todo = {id(p): p.output for p in batch if not p.validated and p.output is not None}
    if not todo:
        return batch
    try:
        clean = _conform_and_check_together(list(todo.values()))
    except Exception:  # e.g. a value no cast takes: the file-by-file path finds (and refuses) its file
        clean = False
    out = []
    for p in batch:
        output = todo.get(id(p))
        if output is not None:
            if not clean:
                try:
                    validate_output(output)
                except Exception as err:
                    out.append(_failed_piece(p.path, p.ctx.run_id, err))
                    continue
            p.validated = True
        out.append(p)
    return out


def _conform_and_check_together(outputs: list[ReaderOutput]) -> bool:
    """Conform the outputs' frames a stack per table and shape at a time (conform works row by row, so a
    slice of the conformed stack is the conformed slice), and say whether every stack is certainly valid;
    only then are the outputs' frames replaced by their conformed slices."""
    stacks: dict[tuple, list[tuple[ReaderOutput, str, pl.DataFrame]]] = {}
    for output in outputs:
        for name, df in output.tables.items():
            # A frame without columns conforms to one row of nulls (a literal select): keep it apart.
            shape = (name, tuple(df.columns), tuple(df.dtypes)) if df.width else (name, id(df))
            stacks.setdefault(shape, []).append((output, name, df))
    done: list[tuple[ReaderOutput, str, pl.DataFrame]] = []
    for (name, *_), group in stacks.items():
        stacked = conform(name, pl.concat([df for _, _, df in group]))
        if not validate_frame(name, stacked).ok:
            return False
        if len(group) == 1:
            done.append((group[0][0], name, stacked))
            continue
        offset = 0
        for output, _, df in group:
            done.append((output, name, stacked.slice(offset, df.height)))
            offset += df.height
    for output, name, df in done:
        output.tables[name] = df
    return True


def _batch_has_key_clash(ws: Workspace, loaded: list[tuple[dict[str, pl.DataFrame], list[str]]]) -> bool:
    """Whether any row of the batch's files (their tables, each with the file ids whose rows are no clash for
    it: its own and its path's older versions) shares its primary key with a row of another file of the
    batch or of the database: then `drop_cross_file_duplicates` has work to do, file by file. A table with a
    `content_key` is judged on it (`Table.across_files_key`), as that function does."""
    from schemas import TABLES

    names = dict.fromkeys(name for tables, _ in loaded for name in tables)
    own = None
    try:
        for name in names:
            key = list(TABLES[name].across_files_key)
            if "file_id" in key:
                continue
            frame = pl.concat([tables[name].select(key).with_columns(pl.lit(i, pl.Int32).alias("__pos"))
                               for i, (tables, _) in enumerate(loaded) if name in tables])  # one chunk, for DuckDB
            if frame.height == 0:
                continue
            if frame.select(pl.struct(key).is_duplicated().any()).item():
                return True
            if not ws.has_table(name):
                continue
            if own is None:
                own = pl.DataFrame([(i, f) for i, (_, ids) in enumerate(loaded) for f in ids],
                                   schema={"__pos": pl.Int32, "file_id": pl.String}, orient="row")
                ws.con.register("_own_ids", own.to_arrow())
            ws.con.register("_keys", frame.to_arrow())
            try:
                cond = key_match(key, bool(TABLES[name].content_key))
                hit = ws.con.execute(
                    f"SELECT EXISTS (SELECT 1 FROM _keys n JOIN {name} t ON {cond} WHERE NOT EXISTS "
                    f"(SELECT 1 FROM _own_ids o WHERE o.__pos = n.__pos AND o.file_id = t.file_id))").fetchall()[0]
            finally:
                ws.con.unregister("_keys")
            if hit and hit[0]:
                return True
    finally:
        if own is not None:
            ws.con.unregister("_own_ids")
    return False


def _write_batch(ws: Workspace, plan: _BatchPlan) -> None:
    """The batch's rows in one transaction: older rows out first, then one insert per table."""
    from schemas import TABLES

    with ws.transaction() as con:
        if plan.clear_ids:
            for name, table in TABLES.items():
                if "file_id" in table.columns and ws.has_table(name):
                    con.execute(f"DELETE FROM {name} WHERE file_id IN (SELECT unnest(?))", [plan.clear_ids])
        if plan.requarantined_ids:
            con.execute("DELETE FROM quarantine WHERE file_id IN (SELECT unnest(?))", [plan.requarantined_ids])
        if plan.files:
            ws.insert_frame("raw_ingest__files", conform("raw_ingest__files", plan.files), con=con)
        for name, frames in plan.tables.items():
            # One chunk: an Arrow table of a chunk per file costs DuckDB ~30x more to take in.
            ws.insert_frame(name, pl.concat(frames, rechunk=True), con=con, validate=False)  # validated above
        if plan.quarantine:
            ws.insert_frame("quarantine", conform("quarantine", plan.quarantine), con=con)
