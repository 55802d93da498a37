"""`arcstudy simulate`: write a deterministic synthetic study (see pipeline.simulate.study)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.core.console import out

from .common import EXIT_REJECTED, EXIT_USAGE, SchedulerOption, WorkersOption, fail, make_out_dir


def simulate_command(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write the study into.")],
    scale: Annotated[str, typer.Option(help="demo (seconds), arc3 (the paper's 486 participants), large "
                                       "(10x, for benchmarks) or release (340 long recordings with frames, "
                                       "about 2.7 GB: the size of the official human release).")] = "demo",
    seed: Annotated[int, typer.Option(help="Everything descends from this seed: same seed, same bytes.")] = 0,
    environments: Annotated[Path | None, typer.Option("--environments", help="Games to play (default: the "
                                                      "repository's games/). Their Python code is run (in the "
                                                      "sandbox, docs/security.md).")] = None,
    no_harc: Annotated[bool, typer.Option("--no-harc", help="Skip the synthetic H-ARC study.")] = False,
    no_static: Annotated[bool, typer.Option("--no-static", help="Skip the static-task study (ARC-TGI families "
                                            "audited by people, and an ARC-AGI-2 attempt log).")] = False,
    overwrite: Annotated[bool, typer.Option(help="Replace a non-empty --out folder.")] = False,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
) -> None:
    """Simulate a human study (participants, sessions, low-effort minority), agent runs, an H-ARC study and a
    static-task study (ARC-TGI families audited by people in both audit layouts, an ARC-AGI-2 attempt log).

    Reads: the games (their shipped solution recordings); their Python code is run, in the sandbox
    (docs/security.md), which may write only the --out folder. Writes: --out (recordings, session manifest,
    H-ARC CSVs, ARC tasks, static/ (ARC-TGI export, audits, ARC-AGI-2 log, DESIGN.json), SIMULATION.json and
    ground_truth/ with the low-effort labels, kept apart from the data). Nothing goes into a database: run
    `arcstudy ingest` on the result. The H-ARC participants are
    simulated on --workers processes (without it: serially up to 100 participants, else 2) or on the cluster
    at --scheduler; the files do not depend on it. Exit code 3 when a game folder was skipped because its
    metadata.json cannot be read, a game's solution recordings cannot be read (not a regular file, too large,
    not a recording) or its code failed on its winning lines in the sandbox (each is named with the reason; the
    other games are simulated).
    """
    from engine.loader import skipped_metadata
    from games import GAMES_DIR
    from pipeline.core.game_code import GameCodeError, SandboxFailure, announce
    from pipeline.simulate.study import SCALES, NoGameLeft, simulate_study

    if scale not in SCALES:
        raise fail(f"unknown scale {scale!r}; one of {', '.join(SCALES)}", EXIT_USAGE)
    if out_dir.exists() and not out_dir.is_dir():
        raise fail(f"--out {out_dir} is a file, not a folder; choose a folder for the study", EXIT_USAGE)
    make_out_dir(out_dir)
    announce([environments or GAMES_DIR])
    skipped = skipped_metadata(environments or GAMES_DIR)
    for why in skipped:  # a game folder whose metadata.json cannot be read is not played: said, and exit 3
        out.console.print(f"skipped a game: {why}; fix its metadata.json to simulate it", markup=False,
                          highlight=False)
    left_out: list[str] = []
    try:
        summary = simulate_study(out_dir, scale=scale, seed=seed, environments_dir=environments or GAMES_DIR,
                                 with_harc=not no_harc, overwrite=overwrite, progress=out.track,
                                 workers=workers, scheduler=scheduler, with_static=not no_static,
                                 left_out=left_out)
    except NoGameLeft as err:  # every game failed: each named, exit 3
        raise fail(str(err), EXIT_REJECTED) from err
    except (FileExistsError, ValueError) as err:
        raise fail(str(err)) from err
    except SandboxFailure as err:  # a game's code ended abnormally (time, memory, exit, crash): named, exit 3
        raise fail(f"simulation stopped: a game's code ended abnormally in the sandbox ({err.kind}): {err.detail}",
                   EXIT_REJECTED) from err
    except GameCodeError as err:
        raise fail(f"simulation stopped: a game's code raised {type(err).__name__}: {err}", EXIT_REJECTED) from err
    for why in left_out:  # that game's failure: named with the reason; the other games were simulated
        out.console.print(f"left a game out: {why}", markup=False, highlight=False)
    human = summary["arc3_human"]
    out.console.print(
        f"simulated {human['participants']} participants ({human['low_effort']} low-effort), "
        f"{human['plays']} plays, {len(summary['agents'])} agent runs"
        + (f", H-ARC {summary['harc'].get('n_participants', '?')} participants" if summary["harc"] else "")
        + (f", {len(summary['static']['families'])} ARC-TGI families audited" if summary.get("static") else "")
        + f" -> {out_dir}"
    )
    if skipped:
        out.console.print(f"{len(skipped)} game folder(s) skipped (metadata.json cannot be read); every other game "
                          "was simulated", markup=False, highlight=False)
    if left_out:
        out.console.print(f"{len(left_out)} game(s) left out (named above, listed in SIMULATION.json); every other "
                          "game was simulated", markup=False, highlight=False)
    if skipped or left_out:
        raise typer.Exit(EXIT_REJECTED)
