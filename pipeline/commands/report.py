"""`arcstudy report calibration|scores|harc|all`: the HTML reports (pipeline.report.reports does the work)."""

from __future__ import annotations

import shlex
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from pipeline.core.console import out

from .common import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    REPORTS,
    DbOption,
    RawCsvOption,
    beside_database,
    fail,
    make_out_dir,
    out_write_errors_said,
)


class ReportChoice(StrEnum):
    calibration = "calibration"
    scores = "scores"
    harc = "harc"
    all = "all"


def default_out_dir(db_path: Path) -> Path:
    """Reports live beside the database unless --out says otherwise: `<db>.reports/`."""
    return beside_database(db_path, REPORTS)


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
                                                   "explorer over all levels (0: do not explore).")] = 300.0,
    explore_nodes: Annotated[int, typer.Option("--explore-nodes", min=1, help="States explored per level at "
                                               "most (as `arcstudy explore --max-nodes`).")] = 200_000,
    raw_csv: RawCsvOption = False,
    competition: Annotated[bool, typer.Option("--competition", help="Scores report: each scorecard's total in "
                                              "competition mode too, over every environment of the --games "
                                              "folders (an unplayed one scores 0).")] = False,
    compare_with: Annotated[Path | None, typer.Option("--compare-with", help="Scores report: a section explaining "
                                                      "why each scorecard's total differs from this scorecard (an "
                                                      "official card or an earlier arcstudy scorecard).",
                                                      exists=True, dir_okay=False, show_default=False)] = None,
) -> None:
    """Write the HTML reports: calibration (per game: inclusion bar, players and full solvers, completion by level
    with intervals and drop-off level, durations by outcome, actions by level against optimal / best first run /
    baseline, recomputed vs published baselines, low-effort exclusions and why, levels a designer should look
    at; for static tasks: ARC-TGI task families (witness failures, low agreement, much harder than the source
    task, diversity outliers) and ARC-AGI-2 calibration against the published figures), scores (totals and per game under the policy, level-score heatmap, policy sensitivity, replay
    verification of every run, score against LLM cost) and harc (the H-ARC paper's tables and figures).

    Reads (read-only; the database is never modified): the out_* tables written by `arcstudy build`, `arcstudy
    score` and `arcstudy harc-analyses`, core_arc3__environments (published baselines), core_arc3__plays and
    core_arc3__usage (cost), the runs table (provenance); pipeline/scoring/reference/arc-agi-3-public-games.csv; --ground-truth;
    game files under --games and games/ (explorer). A missing table makes its section say which command fills it.

    Writes under --out: <report>.html (self-contained: figures embedded, no network needed to open it),
    <report>.manifest.json (inputs with sha256, policy ids, versions), <report>__<table>.csv and .parquet for
    every table shown, figures/<report>/<name>.png, .svg, .vl.json, and index.html: the reports of the folder
    grouped by audience (analysts, organizers, researchers) with their headline numbers.

    The folder is replaced as a whole when every file is written: a failure, a full disk or Ctrl-C leaves the
    previous reports as they were (and no temporary file). CSV cells that a spreadsheet would run as a formula
    get a leading ' unless --raw-csv.

    Scores report options: --competition adds each scorecard's total in competition mode over every environment
    of the --games folders (unplayed: 0) beside its local total; --compare-with CARD adds why each scorecard's
    total differs from CARD (denominator, counting, baselines, policy, plays left out; per environment and level).

    Exit codes: 0 written, 1 error (database missing or unreadable, nothing to report: none of the chosen
    reports has its tables, as in a database never built, or an output that cannot be written), 2 usage
    (unknown policy, unusable --ground-truth file, --competition without --games or under a policy without
    competition mode, an unusable --compare-with card), 3 written but a game's code was stopped in the sandbox
    while the explorer ran it.
    """
    import duckdb

    from pipeline.core.outputs import raw_csv as csv_as_is
    from pipeline.core.workspace import WorkspaceError, default_db_path
    from pipeline.report.reports import REPORTS, ReportInputError, reports_without_data, write_reports

    db_path = db or default_db_path()
    if db_path.exists() and not db_path.is_file():  # a folder or a device: "does not exist" would mislead
        raise fail(f"{db_path} is not a DuckDB database (not a regular file); --db names the study's database file")
    if not db_path.is_file():
        raise fail(f"database {db_path} does not exist (run `arcstudy ingest` and `arcstudy build` first, or "
                       "pass --db)")
    chosen = list(REPORTS) if which is ReportChoice.all else [which.value]
    wanted = out_dir or default_out_dir(db_path)
    created = _first_missing(Path(wanted).absolute())
    out_path = make_out_dir(wanted, db=db_path)  # an --out that cannot be written is said first
    try:
        empty = reports_without_data(db_path, chosen)
    except (WorkspaceError, duckdb.Error) as err:
        _remove_empty(out_path, created)
        raise fail(f"cannot read {db_path}: {err}") from err
    if len(empty) == len(chosen):  # a database never built: nothing to report, and a page saying so is not a report
        _remove_empty(out_path, created)
        raise fail(f"{db_path} has nothing to report: " + "; ".join(f"{name}: {why}" for name, why in empty.items()))
    command = shlex.join(["arcstudy", "report", which.value, "--db", str(db_path), "--out", str(out_path)]
                         + (["--ground-truth", str(ground_truth)] if ground_truth else [])
                         + (["--policy", policy] if policy else [])
                         + [arg for g in games or [] for arg in ("--games", str(g))]
                         + ["--explore-seconds", f"{explore_seconds:g}", "--explore-nodes", str(explore_nodes)]
                         + (["--raw-csv"] if raw_csv else [])
                         + (["--competition"] if competition else [])
                         + (["--compare-with", str(compare_with)] if compare_with else []))
    if games and explore_seconds > 0:
        from pipeline.core.game_code import announce

        announce(games)
    try:
        with out_write_errors_said(out_path), csv_as_is(raw_csv):
            written = write_reports(db_path, out_path, chosen, ground_truth=ground_truth, policy=policy, games=games,
                                    explore_seconds=explore_seconds, explore_max_nodes=explore_nodes, command=command,
                                    competition=competition, compare_with=compare_with)
    except ReportInputError as err:
        raise fail(str(err), EXIT_USAGE) from err
    except (WorkspaceError, duckdb.Error) as err:
        raise fail(f"cannot read {db_path}: {err}") from err
    for name, path in written.items():
        out.console.print(f"{name}: {path} ({path.stat().st_size:,} bytes; manifest "
                          f"{path.with_name(path.stem + '.manifest.json').name})")
    for name, why in empty.items():
        out.console.print(f"{name}: no data ({why}); its page says so")
    out.console.print(f"index: {out_path / 'index.html'}")
    from pipeline.core.game_code import stopped_in_run

    stopped = stopped_in_run()
    for line in stopped:  # a game's code ended abnormally in the sandbox (the explorer's notes say it too)
        out.error(line)
    raise typer.Exit(EXIT_REJECTED if stopped else EXIT_OK)


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of `path` that does not exist yet (what make_out_dir will create), or None."""
    top = None
    try:
        while not path.exists() and path != path.parent:
            top, path = path, path.parent
    except OSError:  # too long a name: make_out_dir says so in one line
        return None
    return top


def _remove_empty(out_path: Path, created: Path | None) -> None:
    """Take back the folders this run created for --out, as long as they are empty (nothing was written)."""
    if created is None:
        return
    folder = Path(out_path).absolute()
    while folder == created or created in folder.parents:  # never a folder that was there before
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
