"""`arcstudy report calibration|scores|harc|all`: the HTML reports (pipeline.report.reports does the work)."""

from __future__ import annotations

import shlex
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from pipeline.core.console import out

from .common import EXIT_OK, EXIT_REJECTED, EXIT_USAGE, DbOption, fail, make_out_dir, out_write_errors_said


class ReportChoice(StrEnum):
    calibration = "calibration"
    scores = "scores"
    harc = "harc"
    all = "all"


def default_out_dir(db_path: Path) -> Path:
    """Reports live beside the database unless --out says otherwise: `<db>.reports/`."""
    return db_path.parent / (db_path.stem + ".reports")


def report_command(
    which: Annotated[ReportChoice, typer.Argument(help="Which report: calibration, scores, harc, or all three.",
                                                  show_default=False)],
    db: DbOption = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder for the reports (default: <db>.reports/ "
                                                 "beside the database).", file_okay=False,
                                                 show_default=False)] = None,
    ground_truth: Annotated[Path | None, typer.Option("--ground-truth", help="CSV with participant_id and/or "
                                                      "session_id and is_low_effort (e.g. the simulator's "
                                                      "ground_truth/arc3_participants.csv): the calibration report "
                                                      "gives the low-effort detector's precision and recall.",
                                                      dir_okay=False, show_default=False)] = None,
    policy: Annotated[str | None, typer.Option("--policy", help="Scoring policy of the scores report (default: "
                                               "arc-agi-3/2026-04 when it was scored, else the latest scored).",
                                               show_default=False)] = None,
    games: Annotated[list[Path] | None, typer.Option("--games", help="Folder of game files (repeatable) for the "
                                                     "state-graph explorer of the calibration report (the "
                                                     "repository's games/ is always searched). Their Python code "
                                                     "is run (in the sandbox, docs/security.md).", exists=True,
                                                     file_okay=False, show_default=False)] = None,
    explore_seconds: Annotated[float, typer.Option("--explore-seconds", min=0.0, help="Time budget of the "
                                                   "explorer over all levels (0: do not explore).")] = 20.0,
    explore_nodes: Annotated[int, typer.Option("--explore-nodes", min=1, help="States explored per level at "
                                               "most.")] = 2000,
) -> None:
    """Write the HTML reports: calibration (per game: inclusion bar, players and full solvers, completion by level
    with intervals and drop-off level, durations by outcome, actions by level against optimal / best first run /
    baseline, recomputed vs published baselines, low-effort exclusions and why, levels a designer should look
    at), scores (totals and per game under the policy, level-score heatmap, policy sensitivity, replay
    verification of every run, score against LLM cost) and harc (the H-ARC paper's tables and figures).

    Reads (read-only; the database is never modified): the out_* tables written by `arcstudy build`, `arcstudy
    score` and `arcstudy harc-analyses`, core_arc3__environments (published baselines), core_arc3__plays and
    core_arc3__usage (cost), the runs table (provenance); pipeline/scoring/reference/arc-agi-3-public-games.csv; --ground-truth;
    game files under --games and games/ (explorer). A missing table makes its section say which command fills it.

    Writes under --out: <report>.html (self-contained: figures embedded, no network needed to open it),
    <report>.manifest.json (inputs with sha256, policy ids, versions), <report>__<table>.csv and .parquet for
    every table shown, figures/<report>/<name>.png, .svg, .vl.json, and index.html: the reports of the folder
    grouped by audience (analysts, organizers, researchers) with their headline numbers.

    Exit codes: 0 written, 1 error (database missing or unreadable), 2 usage (unknown policy, unusable
    --ground-truth file), 3 written but a game's code was stopped in the sandbox while the explorer ran it.
    """
    import duckdb

    from pipeline.core.workspace import WorkspaceError, default_db_path
    from pipeline.report.reports import REPORTS, ReportInputError, write_reports

    db_path = db or default_db_path()
    if db_path.exists() and not db_path.is_file():  # a folder or a device: "does not exist" would mislead
        raise fail(f"{db_path} is not a DuckDB database (not a regular file); --db names the study's database file")
    if not db_path.is_file():
        raise fail(f"database {db_path} does not exist (run `arcstudy ingest` and `arcstudy build` first, or "
                       "pass --db)")
    out_path = make_out_dir(out_dir or default_out_dir(db_path))
    chosen = list(REPORTS) if which is ReportChoice.all else [which.value]
    command = shlex.join(["arcstudy", "report", which.value, "--db", str(db_path), "--out", str(out_path)]
                         + (["--ground-truth", str(ground_truth)] if ground_truth else [])
                         + (["--policy", policy] if policy else [])
                         + [arg for g in games or [] for arg in ("--games", str(g))]
                         + ["--explore-seconds", f"{explore_seconds:g}", "--explore-nodes", str(explore_nodes)])
    if games and explore_seconds > 0:
        from pipeline.core.game_code import announce

        announce(games)
    try:
        with out_write_errors_said(out_path):
            written = write_reports(db_path, out_path, chosen, ground_truth=ground_truth, policy=policy, games=games,
                                    explore_seconds=explore_seconds, explore_max_nodes=explore_nodes, command=command)
    except ReportInputError as err:
        raise fail(str(err), EXIT_USAGE) from err
    except (WorkspaceError, duckdb.Error) as err:
        raise fail(f"cannot read {db_path}: {err}") from err
    for name, path in written.items():
        out.console.print(f"{name}: {path} ({path.stat().st_size:,} bytes; manifest "
                          f"{path.with_name(path.stem + '.manifest.json').name})")
    out.console.print(f"index: {out_path / 'index.html'}")
    from pipeline.core.game_code import stopped_in_run

    stopped = stopped_in_run()
    for line in stopped:  # a game's code ended abnormally in the sandbox (the explorer's notes say it too)
        out.error(line)
    raise typer.Exit(EXIT_REJECTED if stopped else EXIT_OK)
