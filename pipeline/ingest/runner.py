"""Ingest orchestration: hash, skip or replace, detect, read, validate, quarantine, write atomically.

This module holds the run: which files (`expand_paths`), preparing each (`prepare_file`: hash, detect, read
and validate, pure with respect to the database; `HashAhead`), the number of workers, and the order of the
commits (`ingest_paths`). A file is committed by `commit.commit_file`, small files a batch at a time by
`batches.commit_batch`; `prepared` holds the prepared file and the records and reports made of it.

Guarantees (CONVENTIONS.md, issue "Ingest"):
- idempotent: a file whose content hash is already in `raw_ingest__files` is skipped (`force` re-reads it);
  a changed file at a path ingested before replaces the older version, so plays are never counted twice;
- atomic per file: everything a file produces is written in one transaction, or nothing is (small files
  are committed a batch per transaction, `commit_batch`: whole files, with the result of one by one);
- lossless and loud: every rejected line, row, play or file lands in `quarantine` with its location, the raw
  text and a reason, and the caller's exit code says so.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pipeline.core.executor import (
    HelperExecutor,
    SerialExecutor,
    core_free,
    default_workers,
    machine_load,
    open_executor,
    open_helper_executor,
    take_early_helper,
)
from pipeline.core.manifest import FileVersion, file_version, sha256_file
from pipeline.core.special_files import NOT_UTF8_NAME, not_regular_file, resolved, tree_files, undecodable
from pipeline.core.workspace import Workspace
from pipeline.ingest.background import BackgroundWriter
from pipeline.ingest.base import FileContext
from pipeline.ingest.batches import (
    BATCH_EAGER_BYTES,
    BATCH_MAX_BYTES,
    BATCH_MAX_FILES,
    SMALL_FILE_BYTES,
    commit_batch,
    is_small,
)
from pipeline.ingest.commit import commit_file
from pipeline.ingest.formats import FORMATS, InputFormat, detect
from pipeline.ingest.prepared import FileReport, PreparedFile, _failed_piece, _read, _refuse_if_changed

SKIP_DIR_NAMES = {".git", "__pycache__", ".venv"}
# Not inputs: test sidecars beside sample recordings, and game source code in environment folders
# (game code is only ever executed by the engine, from folders the user names).
SKIPPED_SUFFIXES = (".expected.json", ".py", ".pyc")


@dataclass
class IngestReport:
    files: list[FileReport] = field(default_factory=list)

    @property
    def n_quarantined(self) -> int:
        return sum(f.n_quarantined for f in self.files)

    @property
    def has_rejections(self) -> bool:
        return any(f.n_quarantined or f.status in ("rejected", "unreadable") for f in self.files)


def expand_paths(paths: list[Path], simulator_files: list[Path] | None = None,
                 outputs: Sequence[Path] = (), outputs_found: list[Path] | None = None) -> list[Path]:
    """Files as given, and every file below the directories given (sorted, hidden and sidecars skipped).
    Entries that are not regular files (FIFOs, devices, sockets) are kept, so that `prepare_file` refuses
    them by name instead of their vanishing silently. Below the folder of a study made by `arcstudy simulate`
    (`is_simulation_root`), its description and its ground truth (the answers the pipeline is checked against,
    never study data) are left out, and appended to `simulator_files` for the caller to say so. Below a folder,
    `outputs` (the database's own file and folders) and what is under them are left out too, appended to
    `outputs_found`: `ingest .` beside the database read it, and its runs' manifests, as input every time."""
    out: list[Path] = []
    own = [os.path.realpath(o) for o in outputs]
    for p in paths:
        if p.is_dir():
            roots = [d for d in (p, *p.parents) if is_simulation_root(d)]  # a folder inside a simulated study too
            for f in tree_files(p):  # symlinked folders followed, each once
                if any(part in SKIP_DIR_NAMES or part.startswith(".") for part in f.relative_to(p).parts):
                    continue
                if f.name.endswith(SKIPPED_SUFFIXES):
                    continue
                if own and _is_under(os.path.realpath(f), own):
                    if outputs_found is not None:
                        outputs_found.append(f)
                    continue
                if _is_simulator_file(f, roots) or (f.name == SIMULATION_FILE and is_simulation_root(f.parent)):
                    if simulator_files is not None:
                        simulator_files.append(f)
                    continue
                out.append(f)
        else:
            out.append(p)
    return out


def _is_under(real: str, folders: list[str]) -> bool:
    """Whether the real path `real` is one of `folders` (real paths) or below one."""
    return any(real == top or real.startswith(top + os.sep) for top in folders)


SIMULATION_FILE = "SIMULATION.json"  # pipeline.simulate.study writes it at the root of every simulated study
SIMULATION_GROUND_TRUTH = "ground_truth"


def is_simulation_root(folder: Path) -> bool:
    """Whether `folder` is the root of a study written by `arcstudy simulate` (its SIMULATION.json says so)."""
    marker = folder / SIMULATION_FILE
    try:
        if not marker.is_file() or marker.stat().st_size > 1 << 20:
            return False
        return json.loads(marker.read_text(encoding="utf-8")).get("generator") == "arcstudy simulate"
    except (OSError, ValueError, AttributeError):
        return False


def _is_simulator_file(f: Path, roots: list[Path]) -> bool:
    for root in {*roots, *(d for d in f.parents if d.name == SIMULATION_GROUND_TRUTH and is_simulation_root(d.parent))}:
        if f == root / SIMULATION_FILE or (root / SIMULATION_GROUND_TRUTH) in f.parents:
            return True
    return False


# A file of a streaming format (InputFormat.streams) at least this big is read inside its transaction, its rows
# written a chunk at a time: memory stays flat whatever the file's size.
STREAM_MIN_BYTES = 32 * 1024 * 1024


class HashAhead:
    """The content hash (`sha256_file`) of the next input file, computed on a thread while this one reads the
    current file: hashlib and file reads release the GIL, the parse of a recording does not. For a serial
    ingest: `wrap(prepare)` is `prepare` for files given in input order, each once (SerialExecutor)."""

    BLOCK = 8 << 20  # bytes read and hashed per GIL release

    def __init__(self, files: list[Path]):
        self._files = files
        self._next = 0  # index of the next file to be prepared
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arcstudy-hash-ahead")
        self._ahead: tuple[int, Future] | None = None  # index of the file being hashed, and (version, hash)

    def __enter__(self) -> HashAhead:
        return self

    def __exit__(self, *exc) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def wrap(self, prepare: Callable[..., PreparedFile]) -> Callable[[Path], PreparedFile]:
        def prepare_ahead(path: Path) -> PreparedFile:
            index, self._next = self._next, self._next + 1
            return prepare(path, hash_file=partial(self._hash, index))
        return prepare_ahead

    def _hash(self, index: int, path: Path) -> str:
        """File `index`'s hash (taken from the thread when it was hashed ahead); the next file's is started."""
        ahead, self._ahead = self._ahead, None
        following = index + 1
        if following < len(self._files) and self._worth_it(self._files[following]):
            self._ahead = (following, self._pool.submit(self._hash_regular, self._files[following]))
        if ahead is not None and ahead[0] == index:
            hashed = ahead[1].result()  # the OSError of a file that cannot be read, as sha256_file raises it
            # A hash taken ahead holds only for the file as it was then (the caller takes its version first).
            if hashed is not None and hashed[0] == file_version(path):
                return hashed[1]
        return sha256_file(path)

    @staticmethod
    def _worth_it(path: Path) -> bool:
        """A small file is hashed in a blink: handing it to the thread would cost more than it saves."""
        try:
            return path.stat().st_size > SMALL_FILE_BYTES
        except OSError:
            return False

    @classmethod
    def _hash_regular(cls, path: Path) -> tuple[FileVersion, str] | None:
        # Only regular files are opened (a FIFO would block the thread); `prepare_file` judges the others.
        if not_regular_file(path) is not None:
            return None
        try:
            version = file_version(path)
        except OSError:
            return None
        return version, sha256_file(path, cls.BLOCK)


def prepare_file(path: Path, *, run_id: str, fmt_name: str = "auto", force: bool = False,
                 keep_frames: bool = False, frames_dir: Path | None = None,
                 known_file_ids: Mapping[str, str] | None = None, batch_small: bool = False,
                 chunk_bytes: int | None = None, hash_file: Callable[[Path], str] = sha256_file,
                 validate: bool = True, options: dict[str, Any] | None = None) -> PreparedFile:
    """Hash, detect, read and validate one file. Pure with respect to the database. A large file of a streaming
    format (or any, when `chunk_bytes` is given) is only detected here: `commit_file` reads it.

    `batch_small`: a small file (`is_small`) is left unvalidated, for `commit_batch` to validate it together
    with the other files of its batch (a schema check per table and file is most of a small file's cost).
    `hash_file`: how the content hash is had (`HashAhead` gives it in a serial ingest).
    `validate`: false leaves every file unvalidated, for `commit_file` to validate it (on the writer thread).
    `options`: reader options given by the user (`FileContext.options`, e.g. `family_prefix` for ARC-TGI)."""
    now = datetime.now(UTC)
    shown = undecodable(str(path))
    if shown is not None:  # a name no table can hold: the file is refused under its name as shown
        path = Path(shown)
        ctx = FileContext(path, None, run_id, now)  # type: ignore[arg-type]
        return PreparedFile(path, ctx, failure=("rejected", "bad_file_name", NOT_UTF8_NAME, "file", None))
    path = resolved(path)
    kind = not_regular_file(path)
    if kind is not None:
        ctx = FileContext(path, None, run_id, now)  # type: ignore[arg-type]
        return PreparedFile(path, ctx, failure=("rejected", "not_a_regular_file",
                                                f"{kind}, not a regular file: only regular files are read", "file",
                                                None))
    try:
        version = file_version(path)  # before the hash: a change from here on is caught by `_refuse_if_changed`
        file_id = hash_file(path)
        n_bytes = version[2]
    except OSError as err:
        ctx = FileContext(path, None, run_id, now)  # type: ignore[arg-type]
        return PreparedFile(path, ctx, failure=("unreadable", "unreadable",
                                                f"cannot read the file: {err.strerror or err}", "file", None))
    ctx = FileContext(path, file_id, run_id, now, keep_frames=keep_frames, frames_dir=frames_dir,
                      options=dict(options or {}))
    prepared = PreparedFile(path, ctx, n_bytes, force=force, version=version)
    if known_file_ids and file_id in known_file_ids:
        prepared.seen_before, prepared.matched_path = True, known_file_ids[file_id]
        if not force:
            prepared.skipped = True
            return prepared

    fmt: InputFormat | None
    if fmt_name == "auto":
        try:
            fmt, evidence = detect(path)
        except OSError as err:
            prepared.failure = ("unreadable", "unreadable", f"cannot read the file: {err}", "file", None)
            return prepared
        if fmt is None:
            prepared.failure = ("rejected", "unknown_format",
                                f"format not recognised: {evidence}; pass --format to force one", "file", None)
            return prepared
    else:
        fmt, evidence = FORMATS[fmt_name], "forced with --format"
    prepared.fmt_name, prepared.evidence = fmt.name, evidence
    if fmt.streams and (chunk_bytes is not None or n_bytes >= STREAM_MIN_BYTES):
        prepared.streamed, ctx.chunk_bytes = True, chunk_bytes
        return prepared
    _read(prepared, fmt, validate=validate and not (batch_small and is_small(prepared)))
    _refuse_if_changed(prepared)
    return prepared


def known_files(ws: Workspace) -> dict[str, str]:
    """Every ingested file's content hash, with the path it was ingested from (a skipped copy names it)."""
    return dict(ws.read("SELECT file_id, file_path FROM raw_ingest__files").iter_rows())


def ingest_file(ws: Workspace, path: Path, *, run_id: str, fmt_name: str = "auto", force: bool = False,
                keep_frames: bool = False, frames_dir: Path | None = None, chunk_bytes: int | None = None,
                options: dict[str, Any] | None = None) -> FileReport:
    return commit_file(ws, prepare_file(path, run_id=run_id, fmt_name=fmt_name, force=force, keep_frames=keep_frames,
                                        frames_dir=frames_dir, known_file_ids=known_files(ws),
                                        chunk_bytes=chunk_bytes, options=options))


PARALLEL_MIN_BYTES = 256 * 1024 * 1024
# On two cores one ingest process already keeps both busy (it reads on one thread while its writer thread and
# DuckDB commit): a simulated study of 80 recordings (350 MB) took 15.7 s with two workers against 7.5 s in one
# process (the same run, loaded machine), and a release-sized one (2.74 GB) gained 1.13x on a quiet machine.
TWO_CORES_MIN_BYTES = 2 * 1024 * 1024 * 1024


def auto_ingest_workers(file_sizes: list[int], cores: int) -> int:
    """Workers for an ingest without `--workers`: every core when the input that can be shared out (all but the
    largest file, which one process reads whatever the number of workers) pays for the seconds a local
    cluster takes to start and the CPU its processes add, else none. An H-ARC release (one large data.csv and
    many small task files) is therefore read in one process: two workers made it slower (26 s against 20 s at
    paper scale). On two cores the bar is TWO_CORES_MIN_BYTES (see there)."""
    shareable = sum(file_sizes) - max(file_sizes, default=0)
    floor = PARALLEL_MIN_BYTES if cores > 2 else TWO_CORES_MIN_BYTES
    return cores if cores > 1 and shareable >= floor else 1


HELPER_MIN_BYTES = 64 * 1024 * 1024
# Below the bar for worker processes, a second reader in one helper process (`HelperExecutor`) pays from far less
# input: it starts in ~0.5 s of CPU on the other core, overlapping this process's first files, where a Dask
# cluster takes 2-7 s; this process reads too, and writes. Parsing a recording is Python and holds the GIL, so a
# second thread could not do it; on 80 engine-made recordings (364 MB) the reading was ~1.7 s of CPU on one
# core, the command's critical path.


HELPER_PRELOAD = ("pipeline.ingest.runner",)  # what a helper's pieces (`prepare_file`) import


def start_helper(paths: list[Path], workers: int | None = None, scheduler: str | None = None):
    """The helper process an `ingest_paths` of `paths` with these options will read with, started now (its imports
    overlap the caller's own start-up: opening the database, the run manifest), or a context of None when the
    ingest will not use one. Pass what it gives to `ingest_paths(helper=...)`; leaving the block ends it.
    A helper the program started before its imports (`pipeline.commands.early`) is this one; it is ended
    unused when the ingest does not read with one."""
    early = take_early_helper(HELPER_PRELOAD)
    if workers is None and scheduler is None:
        sizes = [p.stat().st_size for p in expand_paths(paths) if p.is_file()]
        cores = default_workers()
        if auto_ingest_workers(sizes, cores) == 1 and auto_ingest_helper(sizes, cores, machine_load()):
            return closing(early) if early is not None else open_helper_executor(HELPER_PRELOAD)
    if early is not None:
        early.discard()
    return nullcontext(None)


def auto_ingest_helper(file_sizes: list[int], cores: int, load: float | None = None) -> bool:
    """Whether an ingest without `--workers`, in one process by `auto_ingest_workers`, reads with one helper
    process beside it: on two cores or more, when the input that can be shared out (all but the largest file)
    is at least HELPER_MIN_BYTES, and when a core is free (`load`, the cores other processes keep busy
    (`machine_load`), below the cores less a half). The helper costs CPU (its start-up, and two readers share
    the caches): on a busy two-core machine (load 5-6) the command took 1.3x its one-process time with it,
    where on a free core it takes the larger part of the reading off this process's critical path."""
    shareable = sum(file_sizes) - max(file_sizes, default=0)
    return cores > 1 and len(file_sizes) > 1 and shareable >= HELPER_MIN_BYTES and core_free(cores, load)


# Commits the writer thread may have pending (running or queued) while this thread reads on: two absorb a commit
# that takes longer than reading the next file (DuckDB checkpoints as its log grows) without the reader waiting.
# Beyond two, files whose rows are in memory are queued while they hold at most PENDING_BYTES of input (`_held`):
# the small files of an H-ARC release are read (by the workers, or this thread) while data.csv commits, instead
# of after it.
COMMITS_AHEAD = 2
PENDING_BYTES = 16 << 20


def _held(files: list[PreparedFile]) -> int:
    """Input bytes whose rows `files` hold in memory until committed (a file read in its transaction holds none)."""
    return sum(p.n_bytes for p in files if p.output is not None and p.output.pieces is None and not p.streamed)


def ingest_paths(ws: Workspace, paths: list[Path], *, run_id: str, fmt_name: str = "auto", force: bool = False,
                 keep_frames: bool = False, frames_dir: Path | None = None, progress=None,
                 workers: int | None = None, scheduler: str | None = None,
                 chunk_bytes: int | None = None, options: dict[str, Any] | None = None,
                 helper: HelperExecutor | None = None) -> IngestReport:
    """Ingest files and folders. With several files and workers (local processes, or the Dask cluster at
    `scheduler`), the workers read and validate files while this process alone writes them, in input order
    (a look-ahead of one file per worker keeps memory flat): one transaction per file, small files a batch
    at a time (`commit_batch`, same result). This process writes on one thread of its own (`BackgroundWriter`,
    up to COMMITS_AHEAD commits pending, more while they hold at most PENDING_BYTES of input), so that a serial
    ingest reads the next files while the last one is committed. A big file read in pieces (H-ARC data.csv)
    is read by the writer inside its transaction, its biggest table streamed into the database as the pieces
    come (`_stage_pieces`). A large recording is read by this process inside its transaction, its rows written a chunk
    (`chunk_bytes` of input, given to stream every recording in such chunks) at a time, each chunk inserted
    on a writer thread while the next is parsed. `helper`: a helper process started by the caller
    (`start_helper`), used when the automatic choice reads with one."""
    if fmt_name != "auto" and fmt_name not in FORMATS:
        raise ValueError(f"unknown format {fmt_name!r}; known: auto, {', '.join(FORMATS)}")
    report = IngestReport()
    files = expand_paths(paths)
    known = known_files(ws)
    prepare = partial(prepare_file, run_id=run_id, fmt_name=fmt_name, force=force, keep_frames=keep_frames,
                      frames_dir=frames_dir, known_file_ids=known, batch_small=True, chunk_bytes=chunk_bytes,
                      options=options)
    use_helper, started = False, helper
    if workers is None and scheduler is None:
        sizes = [p.stat().st_size for p in files if p.is_file()]
        workers = auto_ingest_workers(sizes, default_workers())
        use_helper = workers == 1 and (helper is not None or auto_ingest_helper(sizes, default_workers(),
                                                                                 machine_load()))
    # This thread reads (or collects the workers' files) while `writer` commits the file or batch before,
    # in order; a file that streams is read inside its transaction, by this thread, once the writer is idle.
    if use_helper and started is not None:
        executor: Any = nullcontext(started)  # started by the caller (`start_helper`), which ends it
    elif use_helper:
        executor = open_helper_executor(HELPER_PRELOAD)
    else:
        executor = open_executor(workers, scheduler, n_items=len(files))
    written: list[Path] = []  # frames files the readers wrote (--keep-frames)
    try:
        _read_and_commit(ws, files, prepare, executor, report, written, run_id, progress)
    finally:  # committed or not (a file refused at its commit, a run stopped by a full disk or Ctrl-C)
        _remove_unreferenced(ws, written)
    return report


def _remove_unreferenced(ws: Workspace, written: list[Path]) -> None:
    """Remove the frames files this run wrote that no committed step refers to: a file refused at its commit, or
    left uncommitted by a run that stopped, would otherwise leave a complete frames file nothing points to."""
    if not written:
        return
    try:
        kept = set(ws.read("SELECT DISTINCT frames_file FROM core_arc3__steps WHERE frames_file IN "
                           "(SELECT unnest(?::VARCHAR[]))", [[str(p) for p in written]])["frames_file"].to_list())
    except Exception:  # noqa: BLE001 -- the database cannot be read now (the error that stopped the run): keep them
        return
    for path in written:
        if str(path) not in kept:
            with contextlib.suppress(OSError):
                path.unlink()


def _read_and_commit(ws: Workspace, files: list[Path], prepare: Callable, executor: Any, report: IngestReport,
                     written: list[Path], run_id: str, progress: Any) -> None:
    """Read (or collect the workers' files) and commit, in order (`ingest_paths`); each file's frames files are
    added to `written` as it arrives."""
    batch: list[PreparedFile] = []
    batch_bytes = 0
    with executor as ex, HashAhead(files) as ahead, \
            BackgroundWriter(depth=COMMITS_AHEAD, on_result=report.files.extend, budget=PENDING_BYTES) as writer:
        if isinstance(ex, SerialExecutor):
            # Files prepared here, in order: hash the next one meanwhile, and leave the schema checks (polars)
            # to the writer thread, beside the commit.
            prepare = ahead.wrap(partial(prepare, validate=False))
        elif isinstance(ex, HelperExecutor):  # the schema checks on the writer thread, as for a serial ingest
            prepare = partial(prepare, validate=False)
        for key, prepared, error in ex.map_ordered(prepare, enumerate(files), progress=progress,
                                                   description="ingesting"):
            if error is not None:
                prepared = _failed_piece(files[key], run_id, error)
            if prepared.output is not None:
                written.extend(prepared.output.written_files)
            if not is_small(prepared):
                if batch:
                    writer.submit(commit_batch, ws, batch, weight=_held(batch))
                    batch, batch_bytes = [], 0
                if prepared.streamed:
                    writer.drain()
                    report.files.append(commit_file(ws, prepared))
                else:
                    writer.submit(_commit_one, ws, prepared, weight=_held([prepared]))
                continue
            batch.append(prepared)
            batch_bytes += prepared.n_bytes
            if len(batch) >= BATCH_MAX_FILES or batch_bytes >= BATCH_MAX_BYTES or (
                    batch_bytes >= BATCH_EAGER_BYTES and not writer.working):
                writer.submit(commit_batch, ws, batch, weight=_held(batch))
                batch, batch_bytes = [], 0
        if batch:
            writer.submit(commit_batch, ws, batch, weight=_held(batch))


def _commit_one(ws: Workspace, prepared: PreparedFile) -> list[FileReport]:
    return [commit_file(ws, prepared)]
