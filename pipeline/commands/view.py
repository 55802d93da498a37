"""`arcstudy view`: the HTML replay viewer of one recording (pipeline.report.viewer does the work)."""

from __future__ import annotations

import json
import shlex
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
    db_to_read,
    fail,
    refuse_names_too_long,
)

RECORDING_SUFFIXES = (".jsonl", ".json", ".ndjson")


def _looks_like_path(target: str) -> bool:
    """A recording path rather than a guid or play_id (`<guid>/<play index>`, which has a slash too)."""
    if target.lower().endswith(RECORDING_SUFFIXES) or target.startswith(("/", "./", "../", "~")):
        return True
    head, slash, tail = target.rpartition("/")
    return bool(slash) and not (head and tail.isdigit())


def _exists(target: str) -> bool:
    try:
        return Path(target).exists()
    except (OSError, ValueError):  # a name the OS refuses outright (too long, a NUL byte) names nothing
        return False


def view_command(
    target: Annotated[str, typer.Argument(help="A recording file (.jsonl), or a play guid / play_id to look up "
                                          "in the database (--db).", show_default=False)],
    out_file: Annotated[Path, typer.Option("--out", help="The HTML page to write.", dir_okay=False,
                                           show_default=False)],
    db: Annotated[Path | None, typer.Option("--db", help="DuckDB database to look up a guid/play_id in, and to "
                                            "read baselines from (core_arc3__environments). Default: "
                                            "$ARCSTUDY_DB or ./arcstudy.duckdb when TARGET is not a file.",
                                            dir_okay=False, show_default=False)] = None,
    games: Annotated[list[Path] | None, typer.Option("--games", help="Environment files directory (repeatable) "
                                                     "holding the game: enables replay verification, "
                                                     "re-rendering of frames and metadata baselines. Its "
                                                     "Python code is run (in the sandbox, docs/security.md).",
                                                     exists=True, file_okay=False, show_default=False)] = None,
    baselines: Annotated[str | None, typer.Option("--baselines", help="Per-level baseline actions: comma-separated "
                                                  "integers (e.g. 7,18,23) or a metadata.json path; overrides "
                                                  "--games and --db.", show_default=False)] = None,
    only_reset_levels: Annotated[bool | None, typer.Option("--only-reset-levels/--no-only-reset-levels",
                                                           help="Replay with level-only resets (default: on for "
                                                           "human-dataset recordings, off otherwise).",
                                                           show_default=False)] = None,
    verify: Annotated[bool, typer.Option("--verify/--no-verify", help="Replay through the engine to verify the "
                                         "recording and, when it has no stored frames, re-render them (needs "
                                         "--games). --no-verify does neither.")] = True,
    include_unknown_games: Annotated[bool, typer.Option("--include-unknown-games", help="Accept a play of a game "
                                                 "that has no game files under --games and no baseline anywhere "
                                                 "(as `arcstudy score` does; without it the page says the score "
                                                 "leaves the play out, and the exit code is 3).")] = False,
    game_version: GameVersionOption = None,
    recover_actions: Annotated[bool, typer.Option("--recover-actions", help="A recording whose action ids were "
                                                  "lost (action_ids_lost): recover its actions from its frames "
                                                  "first, as `arcstudy score --recover-actions` does (a database "
                                                  "play: from its stored frame hashes).")] = False,
) -> None:
    """Write a self-contained HTML replay viewer for one recording (play/pause, step, speed, jump to level,
    timeline; action, click, level, state, actions per level against the baseline; replay verification with
    the first divergence marked). A playback file (action script) is replayed on its game first, as
    `arcstudy score` replays it (--games; --game-version pins the version).

    Reads: the recording file, or core_arc3__plays/core_arc3__steps in --db (and the frames Parquet written by
    `ingest --keep-frames`); game files under --games (replayed to verify and, without stored frames, to
    re-render); baselines from --baselines, metadata.json under --games, or core_arc3__environments in --db.
    Writes: the --out HTML file (no network needed to view it) and its run manifest `<out stem>.manifest.json`
    beside it. Never writes to the database.

    Exit code 3, as for `arcstudy score`, when lines of the recording were left out (each named in a note) or
    the play is of a game nothing knows (no game files under --games, no baseline anywhere: most likely a
    wrong folder or a mistyped game id; shown with the reason the score leaves it out, unless
    --include-unknown-games).
    """
    from pipeline.core.manifest import RunManifest
    from pipeline.core.outputs import OutputError, named, write_text
    from pipeline.report.viewer import (
        ViewerError,
        ViewerRejected,
        ViewerUsageError,
        is_file_target,
        write_viewer,
    )

    if out_file.suffix.lower() not in (".html", ".htm"):
        raise fail(f"--out {out_file}: the viewer is an HTML page, give a .html file name", EXIT_USAGE)
    refuse_names_too_long("--out", out_file, manifest_beside(out_file))
    is_file = is_file_target(target)
    if not is_file and _looks_like_path(target):
        raise fail(f"{target}: no such file" if not _exists(target) else
                   f"{target} is not a file (give a recording file, or a guid or play_id with --db)", EXIT_USAGE)
    db_path = db if db is not None else (None if is_file else db_to_read(None))
    if not is_file and (db_path is None or not db_path.exists()):
        raise fail(f"{target} is not a recording file, and there is no database to look it up in "
                       f"({db_path}); pass a file path or --db FILE", EXIT_USAGE)
    command = shlex.join(["arcstudy", "view", target, "--out", str(out_file)]
                         + (["--db", str(db)] if db is not None else [])
                         + [arg for g in games or [] for arg in ("--games", str(g))]
                         + (["--baselines", baselines] if baselines else [])
                         + ([] if only_reset_levels is None else
                            ["--only-reset-levels" if only_reset_levels else "--no-only-reset-levels"])
                         + ([] if verify else ["--no-verify"])
                         + (["--include-unknown-games"] if include_unknown_games else [])
                         + (["--game-version", game_version] if game_version else [])
                         + (["--recover-actions"] if recover_actions else []))
    manifest = RunManifest(command=command, config={
        "target": target, "out": str(out_file), "db": str(db_path) if db_path else None,
        "games": [str(g) for g in games or []], "baselines": baselines, "only_reset_levels": only_reset_levels,
        "verify": verify, "game_version": game_version, "include_unknown_games": include_unknown_games,
        "recover_actions": recover_actions})
    if games and verify:
        from pipeline.core.game_code import announce

        announce(games)
    with out.progress("replaying", None) as bar:
        on_step = (lambda: bar.advance(0)) if bar is not None else None  # type: ignore[union-attr]
        try:
            with named("--out"):
                result = write_viewer(target, out_file, db=db_path, games=games, baselines=baselines,
                                      verify=verify, only_reset_levels=only_reset_levels, manifest=manifest,
                                      on_step=on_step, game_version=game_version,
                                      include_unknown_games=include_unknown_games,
                                      recover_actions=recover_actions)
        except ViewerUsageError as err:
            raise fail(str(err), EXIT_USAGE) from err
        except ViewerRejected as err:
            raise fail(str(err), EXIT_REJECTED) from err
        except ViewerError as err:
            raise fail(str(err)) from err
    code = EXIT_REJECTED if result.rejected else EXIT_OK  # lines left out, or a play score leaves out
    manifest.finish(code)
    manifest_file = manifest_beside(out_file)
    try:  # whole, never through a symlink
        write_text(manifest_file, json.dumps(manifest.to_dict(), indent=2, default=str) + "\n")
    except OutputError as err:
        raise fail(f"wrote {out_file}, but {err}") from err
    data = result.data
    lines = [f"wrote {out_file} ({result.n_bytes:,} bytes): {data['n_steps']:,} steps, {data['n_plays']} play(s), "
             f"frames: {data['frames_origin']}, replay: {result.verification.status}",
             f"  {result.verification.detail}"]
    if data["baseline"]:
        lines.append(f"  baseline {data['baseline']} from {data['baseline_source']}")
    lines += [f"  note: {note}" for note in data["notes"]]
    for line in lines:
        out.console.print(line, soft_wrap=True, markup=False, highlight=False)
    out.info(f"manifest: {manifest_file}")
    raise typer.Exit(code)
