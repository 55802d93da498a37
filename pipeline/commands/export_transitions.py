"""`arcstudy export-transitions`: recordings (any variant, playback scripts included) or the database's plays ->
a verified transitions dataset (Parquet shards, dataset card, manifest)."""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from pipeline.core.console import out
from pipeline.core.outputs import named, output_folder, write_text

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
GC_YOUNG_THRESHOLD = 20_000  # allocations between young collections while exporting (Python's default: 700)


def _copies(paths: Iterator[Path]) -> dict[Path, Path]:
    """Each file whose bytes are those of a file given before it -> that file (as `score` reads such a file
    once): its rows would be every row again, with the same play ids and file id. Only files of a size given
    twice are hashed."""
    from pipeline.core.manifest import sha256_file

    by_size: dict[int, list[Path]] = {}
    for path in paths:
        try:
            by_size.setdefault(path.stat().st_size, []).append(path)
        except OSError:  # said by the export, which reads it
            continue
    copies: dict[Path, Path] = {}
    for same_size in (group for group in by_size.values() if len(group) > 1):
        first: dict[str, Path] = {}
        for path in same_size:
            try:
                digest = sha256_file(path)
            except OSError:
                continue
            copies_of = first.setdefault(digest, path)
            if copies_of != path:
                copies[path] = copies_of
    return copies


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


def _automatic_workers(jobs: list) -> int | None:
    """`_automatic` for files: small below the scorer's PARALLEL_MIN_BYTES of input."""
    from pipeline.scoring.parallel import PARALLEL_MIN_BYTES

    def below() -> str | None:
        total = 0
        for job in jobs:
            try:
                total += Path(job.path).stat().st_size
            except OSError:
                continue
        if total >= PARALLEL_MIN_BYTES:
            return None
        return (f"{total / (1 << 20):,.1f} MiB of input: below the {PARALLEL_MIN_BYTES >> 20} MiB from which "
                "worker processes pay for their start-up")

    return _automatic(len(jobs), below)


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
    for name in ("README.md", "manifest.json", PROBLEMS_FILE, *PLAY_LISTINGS.values()):
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
    from pipeline.core.special_files import not_regular_file
    from pipeline.core.spool import Spool
    from pipeline.datasets.shards import PLAY_LISTINGS, DatasetSummary, ShardWriter, dataset_card
    from pipeline.datasets.transitions import (
        ExportJob,
        PlayOwners,
        export_files,
        export_group,
        group_jobs,
        note_repeated_plays,
        recovered_pairs,
        replay_lanes,
        unrepeated_rows,
    )
    from pipeline.scoring.plays import (
        RecordingReadError,
        load_recovered_actions,
        same_content_as,
        unmatched_reason,
        unmatched_recovered,
    )

    from .score import expand_recordings

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
        paths = expand_recordings(list(recordings or []))
        if not paths:
            raise fail("no *.jsonl file found in " + ", ".join(str(p) for p in recordings or []), EXIT_USAGE)
        special = [p for p in paths if not_regular_file(p) is not None]
        problems += [(str(p), f"{not_regular_file(p)}, not a regular file: only regular files are read")
                     for p in special]
        copies = _copies(p for p in paths if p not in special)
        problems += [(str(p), same_content_as(str(first))) for p, first in copies.items()]
        jobs = [ExportJob(path=str(p), **common) for p in paths if p not in special and p not in copies]
        if workers is None and scheduler is None:
            run_workers = _automatic_workers(jobs)
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
        jobs = [ExportJob(db=str(db_path), file_id=fid, **common) for fid in ids]
        if workers is None and scheduler is None:
            run_workers = _automatic_workers_db(len(jobs), n_steps)
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
        first_file = PlayOwners()  # play_id -> the file_id that gave its rows (unrepeated_rows)
        labels: dict[str | None, str] = {}  # file_id -> its label, for the reasons
        file_ids: dict[str, tuple] = {}  # label -> its file_id and guids (what --recovered-actions may name)
        n_engine = 0
        input_sha256: dict[str, str] = {}  # files' hashes as their readers computed them (not read a second time)
        try:
            with _fewer_collections(), open_executor(run_workers, scheduler, n_items=len(jobs)) as ex:
                if isinstance(ex, SerialExecutor):  # pieces run in this process: their rows need no compression,
                    # and stream to the writer as they are replayed (several files' first replay calls made in one);
                    # the next pieces are read while this one is written, and the sandbox's children (one per
                    # lane, the pieces in turn) replay them meanwhile
                    lanes = replay_lanes()
                    pieces = group_jobs(jobs, lanes=lanes)
                    outcomes = ex.map_ordered(export_files, enumerate(pieces), look_ahead=lanes, progress=out.track,
                                              description=f"replaying and exporting ({len(jobs):,} files in "
                                                          f"{len(pieces):,} pieces)")
                else:  # on workers: several short files a piece (a task's own cost is more than a short file's)
                    pieces = group_jobs(jobs)
                    outcomes = ex.map_ordered(export_group, enumerate(pieces), progress=out.track,
                                              description=f"replaying and exporting ({len(jobs):,} files in "
                                                          f"{len(pieces):,} pieces)")
                for key, value, error in outcomes:
                    if error is not None:
                        problems += [(job.label, f"export failed: {type(error).__name__}: {error}")
                                     for job in pieces[key]]
                        continue
                    piece = value if isinstance(value, list) else [value]
                    for export in piece:  # a piece's rows may travel with another of its files' export
                        export.batches = unrepeated_rows(export.batches, first_file)
                        writer.write_export(export)
                        labels[export.file_id] = export.label
                    for export in piece:
                        file_ids[export.label] = (export.file_id, *{p.play_id.split("/")[0] for p in export.plays})
                        note_repeated_plays(export, first_file, labels)
                        summary.add(export)
                        n_engine += export.n_engine_steps
                        if export.file_sha256 is not None:
                            input_sha256[export.label] = export.file_sha256
                        problems += ((export.label, p) for p in export.problems)
                        export.batches = []  # written: let the bytes go
            shards = writer.close()
            if recovered and from_files:  # said, not ignored: the file's plays would stay unexported unsaid
                exported = [(Path(j.label).name, *file_ids.get(j.label, ())) for j in jobs]
                problems += [(str(recovered_actions), unmatched_reason(key)) for key in unmatched_recovered(
                    recovered, (x for names in exported for x in names))]
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
        for job in jobs:
            if job.path is not None:
                try:
                    manifest.add_input(job.path, input_sha256.get(job.label))
                except OSError:
                    pass
        if not from_files:
            manifest.inputs[f"{db_path}#core_arc3__steps"] = "database"
        for p in [*shards, card]:
            manifest.add_output(p)
        code = EXIT_REJECTED if problems or summary.not_exported else EXIT_OK
        manifest.notes["transitions"] = {"rows": summary.n_rows, "shards": len(shards), "engine_steps": n_engine}
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
