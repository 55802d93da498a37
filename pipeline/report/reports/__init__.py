"""The three reports of `arcstudy report`: calibration, scores and H-ARC, built on pipeline.report.html.

    from pipeline.report.reports import write_reports
    paths = write_reports("reports/demo/demo.duckdb", "reports/demo")   # {"calibration": .../calibration.html, ...}

Layout under `out_dir` (beside whatever else lives there, e.g. the demo's `scores/` and `harc/` folders):

    <out_dir>/<report>.html                       the self-contained report (figures embedded, no network needed)
    <out_dir>/<report>.manifest.json              its run manifest (inputs and their sha256, policy ids, versions)
    <out_dir>/<report>__<table>.csv, .parquet     every table shown, in full
    <out_dir>/figures/<report>/<name>.png, .svg, .vl.json
    <out_dir>/index.html                          every report of the folder by audience, with its headline
                                                  numbers, and the folder's other files (pipeline.report.reports.index)

The database is opened read-only: reports never write to it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pipeline.core.outputs import output_folder, public_path

from .common import ReportContext, ReportInputError
from .index import write_index

__all__ = ["REPORTS", "ReportInputError", "reports_without_data", "write_index", "write_reports"]

REPORTS = ("calibration", "scores", "harc")
DESCRIPTIONS = {  # one line each, for --help and index pages
    "calibration": "Human calibration per game: inclusion bar, completion by level, durations, baselines, "
                   "low-effort exclusions, levels to look at",
    "scores": "RHAE scores per scorecard and game, per-level heatmap, policy sensitivity, replay verification, "
              "score against cost",
    "harc": "The H-ARC paper's tables and figures regenerated from the traces",
}


# The table each report is drawn from, and what fills it: a report whose table is missing or empty has nothing to show.
# report: (the tables any one of which gives it something to show, what fills them)
SOURCES = {
    "calibration": (("out_arc3__game_solvability", "out_arctgi__family_diversity", "out_arc2__pair_calibration"),
                    "arcstudy ingest (recordings and a session manifest, ARC-TGI exports or an ARC-AGI-2 attempt "
                    "log), then arcstudy build"),
    "scores": (("out_arc3__game_scores",), "arcstudy score"),
    "harc": (("out_harc__split_accuracy",), "arcstudy ingest (an H-ARC release), then arcstudy harc-analyses"),
}


def reports_without_data(db_path: Path | str, which: Iterable[str] = REPORTS) -> dict[str, str]:
    """{report: what to run} for each of `which` whose source tables are all missing or empty in the database."""
    from pipeline.core.workspace import Workspace

    missing: dict[str, str] = {}
    with Workspace(Path(db_path), read_only=True) as ws:
        for name in dict.fromkeys(which):
            tables, fill = SOURCES[name]
            if not any(ws.has_table(table) and ws.read(f"SELECT 1 FROM {table} LIMIT 1").height for table in tables):
                missing[name] = f"{' and '.join(tables)} {'is' if len(tables) == 1 else 'are'} empty: run {fill}"
    return missing


def write_reports(db_path: Path | str, out_dir: Path | str, which: Iterable[str] = REPORTS,
                  ground_truth: Path | str | None = None, policy: str | None = None, *,
                  games: Iterable[Path | str] | None = None, explore_seconds: float | None = None,
                  explore_max_nodes: int | None = None, command: str | None = None, competition: bool = False,
                  compare_with: Path | str | None = None) -> dict[str, Path]:
    """Write the chosen reports and the folder's index.html (see the module docstring for the layout) and
    return {report: html path}.

    `ground_truth`: a CSV with participant_id and/or session_id and is_low_effort (the simulator's
    ground_truth/arc3_participants.csv): the calibration report then gives the detector's precision and recall.
    `policy`: the scoring policy of the scores report (default: arc-agi-3/2026-04 when scored).
    `games`: folders of game files for the state-graph explorer (default: the repository's games/ only);
    `explore_seconds` caps its total time (0 disables it). `competition`: the scores report adds the totals of
    competition mode over the environments of `games`; `compare_with`: a scorecard the scores report explains
    its difference from (pipeline.scoring.compare). Raises ReportInputError for an unusable option or
    input file, pipeline.core.workspace.WorkspaceError when the database cannot be opened.
    """
    from engine.loader import default_environments_dir
    from pipeline.core.workspace import Workspace

    from .calibration import EXPLORE_MAX_NODES, EXPLORE_SECONDS, ExploreOptions, write_calibration_report
    from .harc_report import write_harc_report
    from .scores import write_scores_report

    chosen = list(dict.fromkeys(which))
    unknown = [w for w in chosen if w not in REPORTS]
    if unknown or not chosen:
        raise ReportInputError(f"unknown report {', '.join(unknown) or '(none)'}; choose from {', '.join(REPORTS)}")
    db = Path(db_path)
    out = Path(out_dir)
    truth = Path(ground_truth) if ground_truth is not None else None
    if truth is not None and not truth.is_file():
        raise ReportInputError(f"--ground-truth {truth} is not a file")
    game_dirs = tuple(Path(g) for g in games) if games is not None else ()
    explore = ExploreOptions(games_dirs=(*game_dirs, default_environments_dir()),
                             max_nodes=explore_max_nodes if explore_max_nodes is not None else EXPLORE_MAX_NODES,
                             seconds=explore_seconds if explore_seconds is not None else EXPLORE_SECONDS)
    if competition and not game_dirs:
        raise ReportInputError("--competition needs --games: the environment set is every environment of those folders")
    other_card = None
    if compare_with is not None:
        from pipeline.scoring.compare import CompareError, read_comparison_card

        try:
            other_card = (Path(compare_with).name, read_comparison_card(Path(compare_with)))
        except CompareError as err:
            raise ReportInputError(f"--compare-with {compare_with}: {err}") from None
    written: dict[str, Path] = {}
    # The folder is written as a whole (pipeline.core.outputs.output_folder): a failure, a full disk or Ctrl-C
    # anywhere leaves the previous reports, exports, figures and manifests as they were, all matching.
    with Workspace(db, read_only=True) as ws, output_folder(out) as stage:
        for name in chosen:
            ctx, cmd = ReportContext(ws), command or f"arcstudy report {name}"
            if name == "calibration":
                written[name] = write_calibration_report(ctx, stage, ground_truth=truth, explore=explore,
                                                         command=cmd)
            elif name == "scores":
                written[name] = write_scores_report(ctx, stage, policy=policy, command=cmd,
                                                    competition_games=game_dirs if competition else None,
                                                    compare_with=other_card)
            else:
                written[name] = write_harc_report(ctx, stage, command=cmd)
        _write_report_index(stage, written, command or f"arcstudy report {' '.join(chosen)}")
        written = {name: public_path(path) for name, path in written.items()}
    return written


def _write_report_index(out: Path, written: dict[str, Path], command: str) -> Path:
    from pipeline.core.manifest import RunManifest

    manifest = RunManifest(command=command, config={"out": str(out)})
    for html in written.values():
        manifest.add_input(html)
    manifest.finish(0)
    return write_index(out, manifest=manifest)

