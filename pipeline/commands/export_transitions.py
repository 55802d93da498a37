"""`arcstudy export-transitions`: recordings (any variant, playback scripts included) or the database's plays ->
a verified transitions dataset (Parquet shards, dataset card, manifest)."""

from __future__ import annotations

import gc
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from pipeline.core.console import out
from pipeline.core.outputs import named, output_folder, write_text
from pipeline.core.spool import Spool

from .common import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    DbOption,
    GameVersionOption,
    SchedulerOption,
    WorkersOption,
    command_line,
    fail,
    refuse_overwriting_database,
)

DEFAULT_LICENCE = "other"
LICENCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]{0,63}")  # SPDX ids and the Hugging Face licence names
# Without --workers, one process exports, its sandbox child replaying beside it on a second core (the next group
# while this process writes the one before). On this 2-core machine a local cluster of two workers was slower
# at every size measured (quiet, 2026-11-29): 26 MiB / 146,201 rows 13.3 s against 8.5 s in one process; the
# simulated studies' recordings 348 MB 4.7 s against 3.7 s, 583 MB 6.2-6.4 s against 5.2 s, 930 MB 9.4 s against
# 8.0 s, 1.3 GB 12.9 s against 10.8 s. So a cluster is started by itself only on 3 cores or more, and only from
# the scorer's thresholds on (pipeline.scoring.parallel), with a worker per two cores (each worker's sandbox
# child replays beside it); not measured here, on a machine of 2 cores.
PROBLEMS_FILE = "problems.jsonl"  # every problem, past the manifest's first LISTED_PROBLEMS
INPUTS_FILE = "inputs.jsonl"  # every input file, past the manifest's first LISTED_INPUTS
GC_YOUNG_THRESHOLD = 20_000  # allocations between young collections while exporting (Python's default: 700)


def _files_to_export(given: list[Path], problems: list[tuple[str, str]]) -> tuple[Spool, int]:
    """The files to export, as (path, size or None) in the order given, waiting on disk (a flood of files is
    never listed in memory), and their total size. Folders are walked (`iter_recordings`). A file that is not a
    regular file, or whose bytes are those of a file given before it (as `score` reads such a file once: its rows
    would be every row again, with the same play ids and file id), goes to ``problems`` instead. Only files of a
    size given twice are hashed; what memory keeps per file is a count per size and, for those, a digest."""
    from pipeline.core.manifest import sha256_file
    from pipeline.core.special_files import not_regular_mode
    from pipeline.scoring.plays import same_content_as

    from .score import iter_recordings

    found = Spool()  # (path, size or None) of each regular file, or a stat that failed (said by the export)
    n_of_size: Counter[int] = Counter()
    with out.progress("finding the files", None) as bar:
        for path in iter_recordings(given):
            if bar is not None:
                bar.advance(0)
            try:
                st = os.stat(path)
            except (OSError, ValueError):
                found.append((path, None))
                continue
            if (why := not_regular_mode(st.st_mode)) is not None:
                problems.append((path, f"{why}, not a regular file: only regular files are read"))
                continue
            found.append((path, st.st_size))
            n_of_size[st.st_size] += 1
    first_of: dict[bytes, int] = {}  # sha256 (its first 16 bytes) -> the first file with those bytes
    copies: dict[int, int] = {}  # a copy's place -> its first's
    n_alike = sum(n for n in n_of_size.values() if n > 1)
    alike = ((at, path) for at, (path, size) in enumerate(found) if size is not None and n_of_size[size] > 1)
    for at, path in out.track(alike, f"looking for copies among {n_alike:,} files of a size given twice",
                              total=n_alike):
        try:
            digest = bytes.fromhex(sha256_file(Path(path)))[:16]  # (128 bits tell files apart as well as 256)
        except OSError:  # said by the export, which reads it
            continue
        if (first := first_of.setdefault(digest, at)) != at:
            copies[at] = first
    del first_of, n_of_size
    firsts = dict.fromkeys(copies.values(), "")  # the place of a file with copies -> its path
    to_export, n_bytes = Spool(), 0
    for at, (path, size) in enumerate(found):
        if at in firsts:
            firsts[at] = path
        if at in copies:
            problems.append((path, same_content_as(firsts[copies[at]])))
        else:
            to_export.append((path, size))
            n_bytes += size or 0
    return to_export, n_bytes


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """While the files are exported: the objects made so far (the imports) moved out of the collector's reach
    (`gc.freeze`), and young collections every 20,000 allocations instead of 700. The rows' objects are acyclic
    and freed by reference counting; the cycle collector's passes over them (and over every imported module's
    objects) cost about 4 % of a serial export. Put back as it was afterwards."""
    old = gc.get_threshold()
    freeze = gc.get_freeze_count() == 0  # someone else's frozen objects are left as they are
    if freeze:
        gc.freeze()
    gc.set_threshold(max(old[0], GC_YOUNG_THRESHOLD), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        if freeze:
            gc.unfreeze()


def _automatic(n_items: int, below_threshold: Callable[[], str | None]) -> int | None:
    """Without --workers (the rule of the note above): None (serial anyway) for one core or one item; else one
    process (said, with why) on two cores or when ``below_threshold()`` says why the work is too small for a
    local cluster's start to pay off; else a worker per two usable cores."""
    from pipeline.core.executor import default_workers

    cores = default_workers()
    if cores <= 1 or n_items <= 1:
        return None
    why = "2 usable cores: one exporting process and its sandbox child use both" if cores == 2 else below_threshold()
    if why is None:
        return cores // 2
    out.info(f"{why}, so the files are exported in this one process, its sandbox child replaying beside it "
             "(--workers N to use N processes anyway)")
    return 1


def _automatic_workers(n_files: int, n_bytes: int) -> int | None:
    """`_automatic` for files: small below the scorer's PARALLEL_MIN_BYTES of input."""
    from pipeline.scoring.parallel import PARALLEL_MIN_BYTES

    def below() -> str | None:
        if n_bytes >= PARALLEL_MIN_BYTES:
            return None
        return (f"{n_bytes / (1 << 20):,.1f} MiB of input: below the {PARALLEL_MIN_BYTES >> 20} MiB from which "
                "worker processes pay for their start-up")

    return _automatic(n_files, below)


def _automatic_workers_db(n_files: int, n_steps: int) -> int | None:
    """`_automatic` for database plays: small below the scorer's PARALLEL_MIN_STEPS steps."""
    from pipeline.scoring.parallel import PARALLEL_MIN_STEPS

    def below() -> str | None:
        if n_steps >= PARALLEL_MIN_STEPS:
            return None
        return f"{n_steps:,} steps: below the {PARALLEL_MIN_STEPS:,} from which worker processes pay for their start-up"

    return _automatic(n_files, below)


def _check_out(out_dir: Path, overwrite: bool) -> None:
    """Refuse a file, or a non-empty folder unless --overwrite (the folder is then written whole: `_clear_dataset`
    in its stage, the old dataset kept until the new one is complete)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise fail(f"--out {out_dir} is a file, not a folder", EXIT_USAGE)
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise fail(f"--out {out_dir} exists and is not empty: give an empty or new folder, or --overwrite to "
                   "replace the dataset in it", EXIT_USAGE)


def _clear_dataset(stage: Path) -> None:
    """Remove what an export writes from the stage (a copy of --out): the rest of the folder is kept."""
    data = stage / "data"
    if data.is_dir():
        for p in list(data.glob("train-*.parquet")) + list(data.glob(".train-*.parquet.tmp")):
            p.unlink()
    from pipeline.datasets.shards import PLAY_LISTINGS

    # (the listings of an export with many problems or plays: left from an earlier one, they would describe it)
    for name in ("README.md", "manifest.json", PROBLEMS_FILE, INPUTS_FILE, *PLAY_LISTINGS.values()):
        (stage / name).unlink(missing_ok=True)


def export_transitions_command(
    ctx: typer.Context,
    recordings: Annotated[list[Path] | None, typer.Argument(
        help="Recording or playback files (JSONL), or folders searched for *.jsonl. Without any, the plays in "
             "the database (--db) are exported.", exists=True, show_default=False)] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="The dataset folder to write (new or empty; see "
                                          "--overwrite).", file_okay=False, show_default=False)] = ...,
    games: Annotated[list[Path] | None, typer.Option("--games", help="Folder of game files laid out like the "
                                                     "official environment_files (repeatable); the shipped games "
                                                     "are searched after them. Their Python code is run (in the "
                                                     "sandbox, docs/security.md).", exists=True, file_okay=False,
                                                     show_default=False)] = None,
    db: DbOption = None,
    game: Annotated[list[str] | None, typer.Option("--game", help="Database plays: only this game id "
                                                   "(repeatable).", show_default=False)] = None,
    recovered_actions: Annotated[Path | None, typer.Option("--recovered-actions", help="JSON object mapping a "
                                                           "recording's file name, guid or file_id to its real "
                                                           "actions, for recordings whose action ids were lost "
                                                           "(their rows get `recovered` true).", exists=True,
                                                           dir_okay=False, show_default=False)] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace the dataset in a non-empty --out "
                                            "(its shards, README.md, manifest.json and the JSON-lines "
                                            "listings an export writes beside them; nothing else is "
                                            "removed).")] = False,
    licence: Annotated[str, typer.Option("--licence", help="The licence field of the dataset card (an SPDX id "
                                         "such as cc-by-4.0, or `other`).")] = DEFAULT_LICENCE,
    shard_mb: Annotated[int, typer.Option("--shard-mb", min=1, help="Largest shard size, in MB (zstd Parquet).")
                        ] = 256,
    game_version: GameVersionOption = None,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
) -> None:
    """Export a verified transitions dataset: one Parquet row per engine response of every play (action,
    frames, frame hashes, state, levels, whether the card counts it), for world models and learning agents.

    Reads: the recordings given (every variant, playback scripts included; nothing is ingested), or without
    any the plays in the database (core_arc3__plays, core_arc3__steps); the game files of --games, then the
    shipped games/ (replay). Writes under --out: data/train-NNNNN.parquet (zstd, at most about --shard-mb each,
    written atomically), README.md (the dataset card: sources, game versions, licence, counts, plays cut at a
    divergence, columns) and manifest.json.

    Every play is replayed on the engine: frames come from the replay when the file has none, and from the file
    when the replay agrees. A play whose replay diverges is exported up to the divergence and listed in the card.
    A play whose game cannot be loaded is exported from its file's frames with `verified` false (without frames
    it is left out). Files are read and replayed on --workers processes (or the cluster at --scheduler); this
    process alone writes. Exit 3 when a file or line was rejected, a play could not be exported at all, a
    playback script's game cannot be loaded, or a game's code failed mid-replay (it raised, or ran past the step
    time limit: the play is exported up to the step before).
    """
    from engine.loader import default_environments_dir
    from pipeline.core.executor import SerialExecutor, open_executor
    from pipeline.core.manifest import LISTED_ON_SCREEN, RunManifest, unlisted_note
    from pipeline.datasets.shards import PLAY_LISTINGS, DatasetSummary, ShardWriter, dataset_card
    from pipeline.datasets.transitions import (
        ExportJob,
        PlayOwners,
        export_files,
        export_group,
        iter_job_pieces,
        iter_pieces,
        note_repeated_plays,
        recovered_pairs,
        replay_lanes,
        unrepeated_rows,
    )
    from pipeline.scoring.plays import (
        RecordingReadError,
        load_recovered_actions,
        unmatched_reason,
        unmatched_recovered,
    )

    if not LICENCE_ID.fullmatch(licence):  # it goes into the card's YAML front matter as it is
        raise fail(f"--licence {licence!r}: give a licence identifier (letters, digits, '.', '+', '-': an SPDX id "
                   "such as cc-by-4.0, or `other`)", EXIT_USAGE)
    try:
        recovered = load_recovered_actions(recovered_actions) if recovered_actions is not None else {}
    except RecordingReadError as err:
        raise fail(str(err), EXIT_USAGE) from err
    from_files = bool(recordings)
    if from_files and game:
        raise fail("--game selects database plays; give the recordings to export instead", EXIT_USAGE)
    db_path = db
    if not from_files:  # (the workspace imports DuckDB: only an export from the database needs it)
        from pipeline.core.workspace import default_db_path

        db_path = db or default_db_path()
    if not from_files and not db_path.exists():
        raise fail(f"database {db_path} does not exist: give recordings to export, or pass --db")
    if db_path is not None:
        refuse_overwriting_database(out_dir, db_path)
    game_dirs = tuple(str(d) for d in [*(games or []), default_environments_dir()])
    if games:
        from pipeline.core.game_code import announce

        announce(games)  # their Python code runs, in the sandbox (docs/security.md)
    problems: list[tuple[str, str]] = Spool()  # a flood of bad lines: their reasons wait on disk
    run_workers = workers  # what the run uses (the manifest keeps what was asked)
    common = dict(game_dirs=game_dirs, recovered=recovered_pairs(recovered), game_version=game_version)
    if from_files:
        files, n_bytes = _files_to_export(list(recordings or []), problems)
        if not files and not problems:
            raise fail("no *.jsonl file found in " + ", ".join(str(p) for p in recordings or []), EXIT_USAGE)
        n_jobs = len(files)

        def sized_jobs() -> Iterator[tuple[ExportJob, int | None]]:  # (made as the pieces are handed out)
            return ((ExportJob(path=path, **common), size) for path, size in files)

        def input_sizes() -> Iterator[int | None]:  # (the pieces counted without making the jobs)
            return (size for _, size in files)
        if workers is None and scheduler is None:
            run_workers = _automatic_workers(n_jobs, n_bytes)
    else:
        import duckdb

        where, params = "", []
        if game:
            where, params = f" WHERE game_id IN ({', '.join('?' for _ in game)})", list(game)
        try:
            con = duckdb.connect(str(db_path), read_only=True)
            try:
                ids = [r[0] for r in con.execute(f"SELECT DISTINCT file_id FROM core_arc3__plays{where} "
                                                 "ORDER BY file_id", params).fetchall()]
                n_steps = con.execute("SELECT count(*) FROM core_arc3__steps WHERE file_id IN (SELECT file_id "
                                      f"FROM core_arc3__plays{where})", params).fetchone()[0]
            finally:
                con.close()
        except duckdb.Error as err:
            raise fail(f"cannot read the plays of {db_path}: {err}") from err
        if not ids:
            raise fail(f"no plays{' of ' + ', '.join(game) if game else ''} in the database {db_path}")
        n_jobs = len(ids)

        def sized_jobs() -> Iterator[tuple[ExportJob, int | None]]:
            return ((ExportJob(db=str(db_path), file_id=fid, **common), 0) for fid in ids)

        def input_sizes() -> Iterator[int | None]:
            return (0 for _ in ids)
        if workers is None and scheduler is None:
            run_workers = _automatic_workers_db(n_jobs, n_steps)
    _check_out(out_dir, overwrite)

    manifest = RunManifest(command=command_line(ctx), config={
        "recordings": [str(p) for p in recordings or []], "db": None if from_files else str(db_path),
        "games": [str(g) for g in games or []], "game": game or [], "out": str(out_dir), "licence": licence,
        "shard_mb": shard_mb, "recovered_actions": str(recovered_actions) if recovered_actions else None,
        "game_version": game_version, "workers": workers, "scheduler": scheduler})
    # The folder is written whole (pipeline.core.outputs.output_folder): an interrupted or failed export leaves
    # the old dataset as it was, never a mix or nothing.
    with named("--out"), output_folder(out_dir) as stage:
        _clear_dataset(stage)
        writer = ShardWriter(stage, max_bytes=shard_mb << 20)
        summary = DatasetSummary()
        first_file = PlayOwners()  # play_id -> the label of the file that gave its rows (unrepeated_rows)
        names = Spool()  # what --recovered-actions may name: files' names, file_ids and guids
        n_engine = 0
        inputs = Spool()  # (path, sha256 as its reader computed it, or None): not read a second time
        serial = False
        in_flight: dict[int, tuple[ExportJob, ...]] = {}  # pieces handed out, by key (to name a failed one's files)

        def pieces() -> Iterator[tuple[int, tuple[ExportJob, ...]]]:
            for key, piece in enumerate(iter_job_pieces(sized_jobs(), lanes=lanes if serial else 1)):
                in_flight[key] = piece
                yield key, piece

        try:
            with _fewer_collections(), open_executor(run_workers, scheduler, n_items=n_jobs) as ex:
                serial = isinstance(ex, SerialExecutor)
                lanes = replay_lanes() if serial else 1
                n_pieces = sum(1 for _ in iter_pieces((None, size) for size in input_sizes()))
                description = f"replaying and exporting ({n_jobs:,} files in {n_pieces:,} pieces)"
                if serial:  # pieces run in this process: their rows need no compression, and stream to the
                    # writer as they are replayed (several files' first replay calls made in one); the next pieces
                    # are read while this one is written, and the sandbox's children (one per lane, the pieces in
                    # turn) replay them meanwhile
                    outcomes = ex.map_ordered(export_files, pieces(), look_ahead=lanes, progress=out.track,
                                              description=description, total=n_pieces)
                else:  # on workers: several short files a piece (a task's own cost is more than a short file's)
                    outcomes = ex.map_ordered(export_group, pieces(), progress=out.track, description=description,
                                              total=n_pieces)
                for key, value, error in outcomes:
                    piece_jobs = in_flight.pop(key)
                    if error is not None:
                        problems += [(job.label, f"export failed: {type(error).__name__}: {error}")
                                     for job in piece_jobs]
                        inputs += [(job.path, None) for job in piece_jobs if job.path is not None]
                        names += [Path(job.label).name for job in piece_jobs] if recovered else []
                        continue
                    piece = value if isinstance(value, list) else [value]
                    labels = {export.file_id: export.label for export in piece}  # (the reasons name files so)
                    for export in piece:  # a piece's rows may travel with another of its files' export
                        export.batches = unrepeated_rows(export.batches, first_file, labels)
                        writer.write_export(export)
                    for export in piece:
                        if recovered:
                            names += [Path(export.label).name, export.file_id,
                                      *{p.play_id.split("/")[0] for p in export.plays}]
                        note_repeated_plays(export, first_file, export.label)
                        summary.add(export)
                        n_engine += export.n_engine_steps
                        if from_files:
                            inputs.append((export.label, export.file_sha256))
                        problems += ((export.label, p) for p in export.problems)
                        export.batches = []  # written: let the bytes go
            shards = writer.close()
            if recovered and from_files:  # said, not ignored: the file's plays would stay unexported unsaid
                problems += [(str(recovered_actions), unmatched_reason(key)) for key in unmatched_recovered(
                    recovered, (name for name in names if name is not None))]
        except OSError as err:
            writer.abort()
            raise fail(f"cannot write the dataset under {out_dir}: {err.strerror or err}") from err
        except BaseException:
            writer.abort()
            raise
        # the plays cut, unverified, not confirmed or left out: the manifest's first LISTED_PROBLEMS of each, and
        # past that every one in a file of its own, which the card names (a flood of plays: read from disk)
        listed = {key: manifest.listed_problems(key, items, stage / PLAY_LISTINGS[key])
                  for key, items in summary.listings().items()}
        created = datetime.now(UTC).isoformat(timespec="seconds")
        card = stage / "README.md"
        try:
            write_text(card, dataset_card(summary, shards, licence=licence, command=manifest.command,
                                          created_at=created))
        except OSError as err:
            raise fail(f"cannot write the card {out_dir / card.name}: {err.strerror or err}") from err
        try:  # (a flood of files: the first LISTED_INPUTS here, every one in a file beside the manifest)
            inputs_note = manifest.listed_inputs(inputs, stage / INPUTS_FILE)
        except OSError as err:
            raise fail(f"cannot write the list of inputs {out_dir / INPUTS_FILE}: {err.strerror or err}") from err
        if not from_files:
            manifest.inputs[f"{db_path}#core_arc3__steps"] = "database"
        for p in [*shards, card]:
            manifest.add_output(p)
        code = EXIT_REJECTED if problems or summary.not_exported else EXIT_OK
        manifest.notes["transitions"] = {"rows": summary.n_rows, "shards": len(shards), "engine_steps": n_engine,
                                         **inputs_note}
        for note in listed.values():
            manifest.notes["transitions"].update(note)
        # (a flood's: the first LISTED_PROBLEMS here, every one in a file beside the manifest)
        manifest.notes["transitions"].update(
            manifest.listed_problems("problems", (f"{f}: {why}" for f, why in problems), stage / PROBLEMS_FILE))
        manifest.finish(code)
        try:
            manifest.write_json(stage)
        except OSError as err:
            raise fail(f"cannot write the run manifest under {out_dir}: {err.strerror or err}") from err
    n_plays = sum(summary.plays_by_game_source.values())
    out.console.print(f"wrote {out_dir}: {summary.n_rows:,} rows of {n_plays:,} plays in {len(shards)} shard(s); "
                      f"{len(summary.cut)} play(s) cut at a divergence, {len(summary.unverified)} unverified, "
                      f"{len(summary.not_exported)} left out"
                      + (f"; {summary.n_unconfirmed_rows:,} row(s) not confirmed by the replay (verified false, "
                         "the card lists them)" if summary.unconfirmed else ""), markup=False, soft_wrap=True)
    for label, why in problems[:LISTED_ON_SCREEN]:
        out.console.print(f"rejected: {label}: {why}", markup=False, soft_wrap=True)
    if (more := unlisted_note(len(problems), "rejected", "problems.jsonl")) is not None:
        out.console.print(more, markup=False, soft_wrap=True)
    for label, play in summary.not_exported[:LISTED_ON_SCREEN]:
        out.console.print(f"left out: {label}: {play.play_id}: {play.detail}", markup=False, soft_wrap=True)
    if (more := unlisted_note(len(summary.not_exported), "plays left out",
                              PLAY_LISTINGS["plays_not_exported"])) is not None:
        out.console.print(more, markup=False, soft_wrap=True)
    raise typer.Exit(code)
