"""`arcstudy build` and `arcstudy baselines`: the out_* tables from the core tables, and the human baselines
they hold (shown, written as metadata.json, compared with published ones)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import polars as pl
import typer
from rich.table import Table as RichTable

from pipeline.core.config import BASELINE_RULES, ConfigError, load_config
from pipeline.core.console import out
from pipeline.scoring.baseline_sources import read_published

from .common import (
    EXIT_OK,
    EXIT_USAGE,
    DbOption,
    LockTimeoutOption,
    command_line,
    fail,
    open_workspace,
    run_manifest_dir,
)


def default_out_dir(db_path: Path) -> Path:
    """Figures and the build manifest live beside the database: `<db>.build/`."""
    return db_path.parent / (db_path.stem + ".build")


def build_command(
    ctx: typer.Context,
    db: DbOption = None,
    config_file: Annotated[Path | None, typer.Option("--config", help="TOML file overriding keys of the default "
                                                     "configuration (pipeline/core/defaults.toml).", exists=True,
                                                     dir_okay=False, show_default=False)] = None,
    out_dir: Annotated[Path | None, typer.Option("--out-dir", help="Folder for figures and manifest.json "
                                                 "(default: <db>.build/ beside the database).",
                                                 file_okay=False, show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would rebuild and why; write nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Rebuild every table and figure.")] = False,
    no_figures: Annotated[bool, typer.Option("--no-figures", help="Skip the figures.")] = False,
    optimal: Annotated[Path | None, typer.Option("--optimal", help="CSV or Parquet with game_id, level_index, "
                                                 "optimal_actions for the reference points (overrides the config).",
                                                 exists=True, dir_okay=False, show_default=False)] = None,
    lock_timeout: LockTimeoutOption = 30.0,
) -> None:
    """Build the analysis tables (out_*) from the core tables, rebuilding only what changed.

    Reads: core_arc3__steps, core_arc3__plays, core_arc3__card_plays, core_arc3__environments,
    core_study__session_plays, the configuration (--config over pipeline/core/defaults.toml) and an optional
    optimal-actions table. Writes: out_arc3__plays, out_arc3__levels, out_arc3__card_checks, out_arc3__attempts,
    out_study__session_features, out_study__low_effort_exclusions, out_arc3__level_baselines,
    out_arc3__game_solvability, out_arc3__level_completion, out_arc3__durations_summary,
    out_arc3__level_reference_points (one transaction), build_state, a row in `runs`, and under --out-dir the
    figures (figures/*.png, *.svg, *.vl.json) and manifest.json. --dry-run writes nothing.
    """
    from pipeline.core.workspace import WorkspaceError, default_db_path
    from pipeline.transforms.build import BuildError, build

    try:
        config = load_config(config_file)
    except ConfigError as err:
        raise fail(str(err), EXIT_USAGE) from err
    db_path = db or default_db_path()
    if dry_run and not db_path.exists():
        raise fail(f"database {db_path} does not exist (run `arcstudy ingest` first, or pass --db)")
    out_dir = out_dir or default_out_dir(db_path)
    command = command_line(ctx)
    with open_workspace(db_path, read_only=dry_run, lock_timeout_s=lock_timeout) as ws:
        try:
            report = build(ws, config, out_dir=out_dir, dry_run=dry_run, force=force, figures=not no_figures,
                           optimal_path=optimal, command=command, progress=out.track)
        except (BuildError, WorkspaceError) as err:
            raise fail(str(err)) from err
        _print_plan(report)
        if not dry_run:
            _print_summaries(ws, report)
    raise typer.Exit(EXIT_OK)


def _print_plan(report) -> None:
    title = "build plan (dry run: nothing written)" if report.dry_run else "build"
    table = RichTable(title=title)
    for col in ("step", "tables", "status", "why"):
        table.add_column(col)
    for p in report.plans:
        if p.needs_run:
            status = "would rebuild" if report.dry_run else "rebuilt"
        else:
            status = "up to date"
        rows = ", ".join(f"{t} ({report.rows[t]:,})" if t in report.rows else t for t in p.step.outputs)
        table.add_row(p.step.name, rows, status, "; ".join(p.reasons) or "-")
    out.console.print(table)
    if not report.dry_run:
        if report.rebuilt:
            out.console.print(f"rebuilt {len(report.rebuilt)} of {len(report.plans)} steps")
        else:
            out.console.print("nothing to rebuild: every table is up to date")


def _print_summaries(ws, report) -> None:
    checks = ws.read("SELECT play_id, reason_codes, reason FROM out_arc3__card_checks ORDER BY play_id")
    bad = checks.filter(pl.col("reason_codes").list.len() > 0)
    out.console.print(f"card cross-check: {checks.height} plays carry their own card, {bad.height} disagree "
                      "with the lines (see out_arc3__card_checks)")
    for r in bad.head(10).iter_rows(named=True):
        out.console.print(f"  {r['play_id']}: {', '.join(r['reason_codes'])}: {r['reason']}")
    if bad.height > 10:
        out.console.print(f"  ... and {bad.height - 10} more")
    feats = ws.read("SELECT unit_kind, is_low_effort_excluded FROM out_study__session_features")
    n_ex = feats.filter(pl.col("is_low_effort_excluded")).height
    removed = ws.row_count("out_study__low_effort_exclusions")
    out.console.print(f"low effort: {feats.height} units judged, {n_ex} excluded, removing {removed} recordings "
                      "(see out_study__session_features, out_study__low_effort_exclusions)")
    att = ws.read("SELECT count(*) AS n, coalesce(sum(is_analysis_attempt::INT), 0) AS a FROM out_arc3__attempts")
    out.console.print(f"attempts: {att['n'][0]} participant recordings, {att['a'][0]} analysis attempts")
    if report.figures:
        out.console.print(f"figures: {', '.join(report.figures)} in {next(iter(report.figures.values()))['png'].parent}")
    if report.skipped_figures:
        out.console.print(f"figures skipped for lack of data: {', '.join(report.skipped_figures)}")
    if report.manifest_path:
        out.console.print(f"manifest: {report.manifest_path}")


def baselines_command(
    ctx: typer.Context,
    rule: Annotated[str, typer.Option("--rule", help=f"Baseline rule: {', '.join(BASELINE_RULES)} (default: "
                                      "baselines.rule of the configuration, upper-median).",
                                      show_default=False)] = "",
    db: DbOption = None,
    config_file: Annotated[Path | None, typer.Option("--config", help="TOML configuration (for the default rule).",
                                                     exists=True, dir_okay=False, show_default=False)] = None,
    write_metadata: Annotated[Path | None, typer.Option("--write-metadata", help="Write <DIR>/<code>/<version>/"
                                                        "metadata.json with these baseline_actions.",
                                                        file_okay=False, show_default=False)] = None,
    compare: Annotated[Path | None, typer.Option("--compare", help="Published baselines to diff against: a CSV "
                                                 "with game_id and baseline_actions (e.g. reference/arc-agi-3-public-"
                                                 "games.csv) or a folder of metadata.json files.", exists=True,
                                                 show_default=False)] = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write the level-by-level diff (with --compare) "
                                                  "or the baselines as CSV.", dir_okay=False,
                                                  show_default=False)] = None,
) -> None:
    """Show human baselines per game and level under a rule; write metadata.json files; diff against published.

    Reads: out_arc3__level_baselines (run `arcstudy build` first), core_arc3__environments (to keep the rest of
    each metadata.json), and --compare CSV|DIR. Writes: --write-metadata DIR/<code>/<version>/metadata.json,
    --out CSV, and when it writes files a row in `runs` with its manifest under <db>.runs/.
    """
    from pipeline.core.manifest import RunManifest
    from pipeline.core.workspace import default_db_path
    from pipeline.transforms import baselines as bl

    try:
        config = load_config(config_file)
    except ConfigError as err:
        raise fail(str(err), EXIT_USAGE) from err
    rule = rule or config.baselines.rule
    if rule not in BASELINE_RULES:
        raise fail(f"unknown rule {rule!r}; one of {', '.join(BASELINE_RULES)}", EXIT_USAGE)
    db_path = db or default_db_path()
    if not db_path.exists():
        raise fail(f"database {db_path} does not exist (run `arcstudy ingest` and `arcstudy build` first)")
    writes = write_metadata is not None or out_file is not None
    with open_workspace(db_path, read_only=not writes) as ws:
        if not ws.has_table("out_arc3__level_baselines") or ws.row_count("out_arc3__level_baselines") == 0:
            raise fail("no baselines in the database: run `arcstudy build` first (and check that it found "
                           "participant recordings)")
        levels = ws.read("SELECT * FROM out_arc3__level_baselines")
        envs = ws.read("SELECT game_id, metadata_json, date_downloaded FROM core_arc3__environments "
                       "ORDER BY date_downloaded NULLS FIRST") if ws.has_table("core_arc3__environments") else None
        games = bl.game_baselines(levels, rule)
        manifest = RunManifest(command=command_line(ctx),
                               config={"rule": rule, "compare": str(compare) if compare else None,
                                       "write_metadata": str(write_metadata) if write_metadata else None})
        _print_baselines(levels, rule)
        if write_metadata is not None:
            existing = {} if envs is None else {g: j for g, j, _ in envs.iter_rows()}  # latest wins
            for gb in games:
                if not gb.is_complete:
                    missing = [i for i, v in enumerate(gb.values, 1) if v is None]
                    out.console.print(f"skipped {gb.game_id}: no baseline for level(s) {missing} (too few completers)")
                    continue
                values, rounded = gb.metadata_values()
                if rounded:
                    out.console.print(f"{gb.game_id}: level(s) {rounded} have a half-integer {rule} value, "
                                      "rounded up for metadata")
                path = bl.metadata_path(write_metadata, gb.game_id)
                path.parent.mkdir(parents=True, exist_ok=True)
                # Keep every other field: the ingested metadata, else the file already at the target path
                # (e.g. writing back into games/).
                base = existing.get(gb.game_id) or (path.read_text() if path.exists() else None)
                path.write_text(json.dumps(bl.metadata_document(gb.game_id, values, base), indent=2) + "\n")
                manifest.add_output(path)
                out.console.print(f"wrote {path}")
        diff = None
        if compare is not None:
            try:
                published = read_published(compare, rule)
            except (ValueError, OSError, json.JSONDecodeError, pl.exceptions.PolarsError) as err:
                raise fail(f"cannot read {compare}: {err}", EXIT_USAGE) from err
            if compare.is_file():
                manifest.add_input(compare)
            diff = bl.compare_baselines(games, published)
            _print_diff(diff, rule)
        if out_file is not None:
            frame = diff if diff is not None else levels.filter(pl.col("baseline_rule") == rule)
            frame.write_csv(out_file)
            manifest.add_output(out_file)
            out.console.print(f"wrote {out_file}")
        if writes:
            manifest.finish(EXIT_OK)
            ws.record_run(manifest)
            manifest.write_json(run_manifest_dir(db_path) / manifest.run_id)
    raise typer.Exit(EXIT_OK)


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return str(int(v)) if v == int(v) else f"{v:.1f}"


def _print_baselines(levels: pl.DataFrame, rule: str) -> None:
    df = levels.filter(pl.col("baseline_rule") == rule).sort("game_id", "level_index")
    table = RichTable(title=f"human baselines ({rule}); value (completers)")
    for col in ("game", "players", "baseline_actions", "levels without baseline"):
        table.add_column(col)
    for (g,), sub in df.group_by("game_id", maintain_order=True):
        values = [f"{_fmt(v)} ({n})" for v, n in sub.select("baseline_value", "n_completers").iter_rows()]
        missing = sub.filter(pl.col("is_too_few_completers"))["level_index"].to_list()
        table.add_row(g, str(sub["n_players"][0]), ", ".join(values), ", ".join(map(str, missing)) or "-")
    out.console.print(table)


def _print_diff(diff: pl.DataFrame, rule: str) -> None:
    table = RichTable(title=f"ours ({rule}) vs published, level by level")
    for col in ("game", "equal", "levels", "ours", "published", "published rule"):
        table.add_column(col)
    for (g,), sub in diff.group_by("game_id", maintain_order=True):
        ours = ", ".join(_fmt(v) for v in sub["ours"].to_list())
        pub = ", ".join("-" if v is None else str(v) for v in sub["published"].to_list())
        eq = sub.filter(pl.col("status") == "equal").height
        table.add_row(g, str(eq), str(sub.height), ours, pub, sub["published_rule"][0] or "-")
    out.console.print(table)
    n_eq = diff.filter(pl.col("status") == "equal").height
    out.console.print(f"{n_eq} of {diff.height} game-levels equal; statuses: "
                      + ", ".join(f"{s} {n}" for s, n in diff.group_by("status").len().sort("status").iter_rows()))
