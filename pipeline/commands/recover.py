"""`arcstudy recover-actions`: find the actions of recordings whose action ids were lost, from their frames."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from pipeline.core.console import out
from pipeline.core.manifest import manifest_beside
from pipeline.core.outputs import OutputError, write_text

from .common import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    SchedulerOption,
    WorkersOption,
    command_line,
    fail,
    left_out_beside,
    refuse_names_too_long,
)

MaxTriesOption = Annotated[int, typer.Option(
    "--max-backtrack-tries", min=0, help="Per recording, the most candidate actions the search may try again "
    "while backtracking (steps visited before); past it the recording is not recoverable. The first visit of "
    "every step is not counted.")]
MaxSecondsOption = Annotated[float, typer.Option(
    "--max-seconds", min=0.1, help="Per recording, the most seconds the search may take.")]


def recover_actions_command(
    ctx: typer.Context,
    recordings: Annotated[list[Path], typer.Argument(
        help="Recording files (JSONL) or folders searched for *.jsonl.", exists=True, show_default=False)],
    out_file: Annotated[Path, typer.Option("--out", help="The JSON file to write (what `arcstudy score "
                                           "--recovered-actions` reads).", dir_okay=False, show_default=False)],
    games: Annotated[list[Path] | None, typer.Option("--games", help="Folder of game files laid out like the "
                                                     "official environment_files (repeatable); without it, the "
                                                     "games shipped with arcstudy.", exists=True, file_okay=False,
                                                     show_default=False)] = None,
    max_tries: MaxTriesOption = 20_000,
    max_seconds: MaxSecondsOption = 600.0,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
) -> None:
    """Recover the actions of recordings flagged `action_ids_lost` (the agents recorder writes every action as
    RESET, ARC-AGI-3-Agents #91, and never writes frame 0, #92) by replaying candidate actions from make() and
    keeping those that reproduce each recorded frame, state and level count.

    Per step the candidates are the game's available actions, RESET, and one ACTION6 click per click region;
    candidates that fit but leave different hidden states are kept as branches, a branch a later frame
    contradicts is dropped, and the search backtracks when every branch dies, within bounds
    (--max-backtrack-tries, --max-seconds). Each step records the action found, how many fitted, the others
    that fitted, and `ambiguous` when actions of different kinds fitted (the action count does not depend on
    which, save a RESET against a no-op at a level's start in files made through the REST API, whose lines never
    say full_reset).

    Reads: the recordings (with frames) and the game files of --games. Writes: --out, a JSON object mapping each
    recovered recording's file name to its actions, plus `$recovery` (provenance, and the recordings that could
    not be recovered with the step and the reason), and its run manifest `<out stem>.manifest.json` beside it.
    Recordings whose action ids are not lost are left out. Exit code 3 when a recording could not be recovered
    (no frames, no loadable game, or no action sequence reproduces it).
    """
    from engine.loader import default_environments_dir
    from pipeline.core.game_code import announce
    from pipeline.core.manifest import LISTED_PROBLEMS, RunManifest
    from pipeline.core.special_files import not_regular_file
    from pipeline.explore.recover import RecoverLimits, recover_files, recovery_document

    from .score import expand_recordings

    if out_file.suffix.lower() != ".json":
        raise fail(f"--out {out_file}: the recovered actions are a JSON file, give a .json file name", EXIT_USAGE)
    refuse_names_too_long("--out", out_file, manifest_beside(out_file), left_out_beside(out_file))
    paths = expand_recordings(list(recordings))
    if not paths:
        raise fail("no *.jsonl recording found in " + ", ".join(str(p) for p in recordings), EXIT_USAGE)
    # A FIFO blocks until a writer comes and /dev/zero never ends: only regular files are read.
    special = [(p, kind) for p in paths if (kind := not_regular_file(p)) is not None]
    paths = [p for p in paths if p not in {q for q, _ in special}]
    game_dirs = list(games) if games else [default_environments_dir()]
    if not games:
        out.info(f"no --games given: using the games shipped with arcstudy ({game_dirs[0]})")
    announce(game_dirs)  # the games' code runs (in the sandbox)
    limits = RecoverLimits(max_backtrack_tries=max_tries, max_seconds=max_seconds)
    manifest = RunManifest(command=command_line(ctx), config={
        "recordings": [str(p) for p in recordings], "games": [str(g) for g in game_dirs], "out": str(out_file),
        "max_backtrack_tries": max_tries, "max_seconds": max_seconds, "workers": workers, "scheduler": scheduler})
    results = recover_files(paths, game_dirs, limits, workers=1 if workers is None else workers,
                            scheduler=scheduler, progress=out.track)
    for p in paths:
        try:
            manifest.add_input(p)
        except OSError:
            pass  # unreadable: said below
    doc = recovery_document(results, game_dirs)
    try:  # whole, never through a symlink
        write_text(out_file, json.dumps(doc, indent=1) + "\n")
    except OutputError as err:
        raise fail(str(err)) from err
    manifest.add_output(out_file)
    failed = [r for r in results if r.needed and not r.ok]
    code = EXIT_REJECTED if failed or special or any(r.lines_left_out for r in results) else EXIT_OK
    manifest.notes.update({"recovered": [r.file_name for r in results if r.ok],
                           "not_recovered": {r.file_name: r.error for r in failed},
                           "not_needed": [r.file_name for r in results if not r.needed],
                           "not_regular_files": [str(p) for p, _ in special],
                           "lines_left_out": {r.file_name: r.lines_left_out[:LISTED_PROBLEMS]
                                              for r in results if r.lines_left_out}})
    if any(len(r.lines_left_out) > LISTED_PROBLEMS for r in results):  # a flood: every line in a file beside it
        manifest.notes.update(manifest.listed_problems(
            "every_line_left_out", (f"{r.file_name}: {why}" for r in results for why in r.lines_left_out),
            left_out_beside(out_file)))
    manifest.finish(code)
    manifest_file = manifest_beside(out_file)
    try:  # whole, never through a symlink
        write_text(manifest_file, json.dumps(manifest.to_dict(), indent=2, default=str) + "\n")
    except OutputError as err:
        raise fail(f"wrote {out_file}, but {err}") from err
    for p, kind in special:
        out.console.print(f"{p.name}: {kind}, not a regular file: only regular files are read", soft_wrap=True,
                          markup=False, highlight=False)
    for r in results:
        out.console.print(r.summary(), soft_wrap=True, markup=False, highlight=False)
    n_ok = sum(r.ok for r in results)
    out.console.print(f"wrote {out_file}: {n_ok} recording{'s' if n_ok != 1 else ''} recovered, {len(failed)} not "
                      f"recoverable, {sum(not r.needed for r in results)} without lost actions (manifest: "
                      f"{manifest_file.name})", soft_wrap=True, markup=False, highlight=False)
    raise typer.Exit(code)
