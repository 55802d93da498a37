"""`arcstudy replay`: a playback file (action script) replayed into the full toolkit recording it yields."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from pipeline.core.console import out
from pipeline.core.manifest import manifest_beside

from .common import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    GameVersionOption,
    command_line,
    fail,
    left_out_beside,
    refuse_names_too_long,
)


def replay_command(
    ctx: typer.Context,
    script: Annotated[Path, typer.Argument(help="A playback file: one `{\"data\": {\"action_input\": ...}}` action "
                                           "per line (spec/formats.md §A.7).", exists=True, dir_okay=False,
                                           show_default=False)],
    out_file: Annotated[Path, typer.Option("--out", help="The toolkit recording (.jsonl) to write.",
                                           dir_okay=False, show_default=False)],
    games: Annotated[list[Path] | None, typer.Option("--games", help="Folder of game files laid out like the "
                                                     "official environment_files (repeatable); the shipped games "
                                                     "are searched after them. Their Python code is run (in the "
                                                     "sandbox, docs/security.md).", exists=True, file_okay=False,
                                                     show_default=False)] = None,
    frames: Annotated[bool, typer.Option("--frames/--no-frames", help="Write every response's frames (the "
                                         "toolkit's include_frame_data).")] = True,
    game_version: GameVersionOption = None,
) -> None:
    """Replay a playback file the way the official playback agent does (make(), which sends the opening RESET,
    then each action) and write the toolkit recording the session produces, so it can be ingested, shared or
    viewed like any recording (`arcstudy score` gives it the same scorecard as the script).

    Reads: SCRIPT and the game files (--games, then the shipped games/; the version the script names, else the
    latest of its 4-character code, or --game-version). Writes: --out and its run manifest
    `<out stem>.manifest.json` beside it. Exit 3 when the game cannot be loaded or action lines were left out.
    """
    from engine.loader import default_environments_dir, describe_game_error
    from pipeline.core.game_code import SandboxFailure
    from pipeline.core.manifest import LISTED_ON_SCREEN, RunManifest, sha256_file, unlisted_note
    from pipeline.core.outputs import OutputError, named, write_text
    from pipeline.core.special_files import not_regular_file
    from pipeline.recordings.playback import PlaybackError, replay_script_file, write_lines
    from pipeline.recordings.reader import RecordingRejected

    if os.path.realpath(out_file) == os.path.realpath(script):  # Path.resolve raises on a symlink loop
        raise fail("--out must not be the script itself", EXIT_USAGE)
    refuse_names_too_long("--out", out_file, manifest_beside(out_file), left_out_beside(out_file))
    kind = not_regular_file(script)
    if kind is not None:  # a FIFO would block until a writer came
        raise fail(f"{script} is {kind}, not a regular file: only regular files are read", EXIT_USAGE)
    game_dirs = [*(games or []), default_environments_dir()]
    if games:
        from pipeline.core.game_code import announce

        announce(games)
    manifest = RunManifest(command=command_line(ctx), config={
        "script": str(script), "out": str(out_file), "games": [str(g) for g in games or []], "frames": frames,
        "game_version": game_version})
    how = None  # (known once the script is read and its game resolved: named when the game's code fails)
    try:
        parsed, how, lines = replay_script_file(script, game_dirs, version=game_version, frames=frames)
        with named("--out"):  # written as the replay answers, whole (no file if the game fails on the way)
            n_lines = write_lines(out_file, lines)  # a missing or read-only folder, a full disk: OutputError
    except RecordingRejected as err:
        lines = "".join(f"\n  {i.location}: {i.check}: {i.reason}"  # why, line by line (a flood: the first ones)
                        for i in err.issues[:LISTED_ON_SCREEN])
        if len(err.issues) > LISTED_ON_SCREEN:
            lines += f"\n  ... and {len(err.issues) - LISTED_ON_SCREEN:,} more"
        raise fail(f"{script}: {err.check}: {err.reason}{lines}", EXIT_USAGE) from err
    except PlaybackError as err:
        raise fail(f"{script}: cannot replay: {err.reason}", EXIT_REJECTED) from err
    except SandboxFailure as err:  # the game's code ended abnormally, or answered with a result of the wrong shape
        raise fail(f"{script}: cannot replay: its code was stopped in the sandbox ({err.kind}): {err.detail}",
                   EXIT_REJECTED) from err
    except OutputError:
        raise
    except Exception as err:  # the game's own code raised (loading, constructing or stepping): nothing written
        game = f" on game {how.game_id}" if how is not None else ""
        raise fail(f"{script}: cannot replay{game}: the game's code raised {describe_game_error(err)}",
                   EXIT_REJECTED) from err
    manifest.add_input(script, sha256_file(script))
    manifest.add_output(out_file)
    code = EXIT_REJECTED if parsed.issues else EXIT_OK
    left_out = left_out_beside(out_file)  # (past LISTED_PROBLEMS of them)
    try:
        manifest.notes["replay"] = {**how.as_json(), "lines_written": n_lines, **manifest.listed_problems(
            "action_lines_left_out", (f"{i.location}: {i.check}: {i.reason}" for i in parsed.issues), left_out)}
    except OutputError as err:
        raise fail(f"wrote {out_file}, but {err}") from err
    manifest.finish(code)
    manifest_file = manifest_beside(out_file)
    try:  # whole, never through a symlink
        write_text(manifest_file, json.dumps(manifest.to_dict(), indent=2, default=str) + "\n")
    except OutputError as err:
        raise fail(f"wrote {out_file}, but {err}") from err
    out.console.print(f"wrote {out_file}: {n_lines} lines (the opening RESET and {how.n_actions} actions"
                      f"{', with frames' if frames else ''}); {how.describe()}", markup=False, soft_wrap=True)
    for issue in parsed.issues[:LISTED_ON_SCREEN]:
        out.console.print(f"left out: {issue.location}: {issue.check}: {issue.reason}", markup=False)
    if (more := unlisted_note(len(parsed.issues), "lines left out", left_out.name, manifest_file.name)) is not None:
        out.console.print(more, markup=False)
    raise typer.Exit(code)
