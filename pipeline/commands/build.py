"""`arcstudy build` and `arcstudy baselines`: the out_* tables from the core tables, and the human baselines
they hold (shown, written as metadata.json, compared with published ones)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import polars as pl
import typer
from rich.table import Table as RichTable

from engine.loader import metadata_files, metadata_problem
from pipeline.core.config import BASELINE_RULES, ConfigError, load_config
from pipeline.core.console import out
from pipeline.core.outputs import named, write_csv, write_text
from pipeline.ingest.baseline_rule import baseline_actions_problem
from pipeline.scoring.baseline_sources import read_published

from .common import (
    BUILD,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    DbOption,
    LockTimeoutOption,
    RawCsvOption,
    beside_database,
    command_line,
    fail,
    foreign_tables_said,
    make_out_dir,
    open_workspace,
    out_write_errors_said,
    refuse_overwriting_any_database,
    refuse_overwriting_database,
    write_run_manifest,
)


def default_out_dir(db_path: Path) -> Path:
    """Figures and the build manifest live beside the database: `<db>.build/`."""
    return beside_database(db_path, BUILD)


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
    core_study__session_plays, raw_ingest__files (file names), core_arc2__attempts, core_arctgi__tasks,
    core_arc__task_pairs, core_harc__attempts (static tasks), the configuration (--config over
    pipeline/core/defaults.toml) and an optional optimal-actions table. Writes: out_arc3__plays, out_arc3__levels,
    out_arc3__card_checks, out_arc3__attempts, out_study__session_features, out_study__low_effort_exclusions,
    out_arc3__baseline_costs, out_arc3__level_baselines, out_arc3__game_solvability, out_arc3__level_completion,
    out_arc3__durations_summary, out_arc3__level_reference_points, out_arc2__pair_calibration,
    out_arc2__task_calibration, out_arc2__session_accuracy, out_arc2__set_durations, out_arc2__reproduction,
    out_arctgi__family_diversity, out_arctgi__family_audits (one transaction), build_state, a row in `runs`, and under --out-dir the
    figures (figures/*.png, *.svg, *.vl.json) and manifest.json. --dry-run writes nothing.
    """
    from pipeline.core.workspace import WorkspaceError, default_db_path
    from pipeline.transforms.build import BuildError, build, resolve_optimal

    try:
        config = load_config(config_file)
    except ConfigError as err:
        raise fail(str(err), EXIT_USAGE) from err
    if optimal is not None:  # a wrong --optimal is a usage error, said before the database is opened
        try:
            resolve_optimal(config, optimal)
        except BuildError as err:
            raise fail(f"--optimal: {err}", EXIT_USAGE) from err
    db_path = db or default_db_path()
    if not db_path.exists():  # building a new, empty database would hide a mistyped --db behind empty tables
        raise fail(f"database {db_path} does not exist (run `arcstudy ingest` first, or pass --db)")
    out_dir = out_dir or default_out_dir(db_path)
    refuse_overwriting_database(out_dir, db_path, "--out-dir")
    if not dry_run:  # before the database is touched: a folder that cannot exist would fail only at the figures
        make_out_dir(out_dir, "--out-dir")
    command = command_line(ctx)
    with (open_workspace(db_path, read_only=dry_run, lock_timeout_s=lock_timeout) as ws, foreign_tables_said(db_path),
          out_write_errors_said(out_dir, "--out-dir")):
        try:
            report = build(ws, config, out_dir=out_dir, dry_run=dry_run, force=force, figures=not no_figures,
                           optimal_path=optimal, command=command, progress=out.track)
        except (BuildError, WorkspaceError) as err:
            raise fail(str(err)) from err
        _print_plan(report)
        if not dry_run:
            _print_summaries(ws, report)
    if report.excluded:
        for file_id, why in report.excluded.items():
            name = report.excluded_paths.get(file_id, file_id)
            out.console.print(f"left out of the out_* tables: {name} ({why}); `arcstudy forget {name}` removes "
                              "what it brought, or fix and re-ingest it", markup=False, highlight=False)
        out.console.print(f"{len(report.excluded)} file(s) left out; every other file was built", markup=False)
        raise typer.Exit(EXIT_REJECTED)
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
    summary = ws.read("SELECT count(DISTINCT (game_id, baseline_player_id)) AS n FROM out_arc3__baseline_costs "
                      "WHERE is_summary_sourced")["n"][0]
    if summary:
        out.console.print(f"baselines: {summary} players counted from human scorecard summaries without a recording "
                          "of the play (evidence card-summary in out_arc3__baseline_costs)")
    _print_tgi_ambiguous(ws)
    if report.figures:
        out.console.print(f"figures: {', '.join(report.figures)} in {next(iter(report.figures.values()))['png'].parent}")
    if report.skipped_figures:
        out.console.print(f"figures skipped for lack of data: {', '.join(report.skipped_figures)}")
    if report.manifest_path:
        out.console.print(f"manifest: {report.manifest_path}")


AUDIT_TABLES = (("core_arc2__attempts", "ARC-AGI-2-layout row"), ("core_harc__attempts", "H-ARC summary row"),
                ("core_harc__actions", "H-ARC event"))


def _print_tgi_ambiguous(ws) -> None:
    """Human audit rows naming an ARC-TGI task id that two exports give to different tasks: counted in no family
    (pipeline.transforms.arctgi.family_audits); said here, with the ids and their files."""
    from pipeline.ingest.harc_arc import TGI_TASKS, tgi_shared_ids

    tables = [(t, what) for t, what in AUDIT_TABLES if ws.has_table(t)]
    if not ws.has_table(TGI_TASKS) or not tables:
        return
    named = " UNION ".join(f"SELECT task_id FROM {t}" for t, _ in tables)
    # an id two exports use is stored in two files (one file's ids are unique): look only at those an audit names
    candidates = ws.read(f"SELECT task_id FROM {TGI_TASKS} WHERE task_id IN ({named}) GROUP BY task_id "
                         "HAVING count(DISTINCT file_id) > 1")["task_id"].to_list()
    shared = tgi_shared_ids(ws, task_ids=candidates) if candidates else []
    if not shared:
        return
    ids = [t for t, _ in shared]
    counts = [(ws.read(f"SELECT count(*) AS n FROM {t} WHERE task_id IN (SELECT unnest(?))", [ids])["n"][0], what)
              for t, what in tables]
    said = ", ".join(f"{n} {what}{'s' if n != 1 else ''}" for n, what in counts if n)
    verb = "names" if sum(n for n, _ in counts) == 1 else "name"
    out.console.print(f"ARC-TGI audits: {said} {verb} task ids that two exports give to different tasks, so which task "
                      "was audited cannot be known: they count in no family of out_arctgi__family_audits",
                      markup=False, highlight=False)
    for task_id, paths in shared[:10]:
        out.console.print(f"  {task_id}: {', '.join(paths)}", markup=False, highlight=False)
    if len(shared) > 10:
        out.console.print(f"  ... and {len(shared) - 10} more", markup=False, highlight=False)


def baselines_command(
    ctx: typer.Context,
    rule: Annotated[str, typer.Option("--rule", help=f"Baseline rule: {', '.join(BASELINE_RULES)} (default: "
                                      "baselines.rule of the configuration, upper-median).",
                                      show_default=False)] = "",
    db: DbOption = None,
    config_file: Annotated[Path | None, typer.Option("--config", help="TOML configuration (for the default rule).",
                                                     exists=True, dir_okay=False, show_default=False)] = None,
    from_counts: Annotated[Path | None, typer.Option("--from-counts", help="Compute the baselines from a per-player "
                                                     "counts CSV (game_id, level_index, player_id, actions or "
                                                     "cumulative_actions, completed; see README) instead of the "
                                                     "database.", exists=True, dir_okay=False,
                                                     show_default=False)] = None,
    write_metadata: Annotated[Path | None, typer.Option("--write-metadata", help="Write <DIR>/<code>/<version>/"
                                                        "metadata.json with these baseline_actions.",
                                                        file_okay=False, show_default=False)] = None,
    compare: Annotated[Path | None, typer.Option("--compare", help="Published baselines to diff against: a CSV "
                                                 "with game_id and baseline_actions (e.g. reference/arc-agi-3-public-"
                                                 "games.csv) or a folder of metadata.json files (a games folder).",
                                                 exists=True, show_default=False)] = None,
    compare_published: Annotated[bool, typer.Option("--compare-published", help="Also diff against the published "
                                                    "baselines shipped with arcstudy (public games).")] = False,
    write: Annotated[bool, typer.Option("--write", help="Write these baseline_actions into the metadata.json files "
                                        "of the --compare folder, keeping their other fields.")] = False,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write the level-by-level diff (with --compare) "
                                                  "or the baselines as CSV.", dir_okay=False,
                                                  show_default=False)] = None,
    raw_csv: RawCsvOption = False,
) -> None:
    """Show human baselines per game and level under a rule; write metadata.json files; diff against published.

    Reads: out_arc3__level_baselines and out_arc3__baseline_costs (run `arcstudy build` first),
    core_arc3__environments (to keep the rest of each metadata.json), or instead --from-counts CSV; and
    --compare CSV|DIR. Writes: --write-metadata DIR/<code>/<version>/metadata.json, with --write the
    metadata.json files of --compare DIR, --out CSV, and (from the database) when it writes files a row in
    `runs` with its manifest under <db>.runs/. The diff lists every level that disagrees with the published
    baseline, by how much, and which rule (if any) picks the published value from the same costs.
    Exit code 3 when --from-counts rows were rejected (the good rows are still used), or name levels beyond a
    known game's level count (left out).
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
    if write and (compare is None or not compare.is_dir()):
        raise fail("--write writes into the metadata.json files of a folder: give it with --compare DIR", EXIT_USAGE)
    manifest = RunManifest(command=command_line(ctx),
                           config={"rule": rule, "compare": str(compare) if compare else None,
                                   "from_counts": str(from_counts) if from_counts else None,
                                   "write_metadata": str(write_metadata) if write_metadata else None})
    outputs = _BaselineOutputs(rule, write_metadata, compare, compare_published, write, out_file, raw_csv)
    if from_counts is not None:
        refuse_overwriting_any_database(out_file)  # no --db to compare with
        from pipeline.ingest.baseline_counts import CountsFileError, read_counts

        try:
            counts = read_counts(from_counts)
        except CountsFileError as err:
            raise fail(str(err), EXIT_USAGE) from err
        manifest.add_input(from_counts)
        shape = "cumulative_actions" if counts.is_cumulative else "actions per level"
        out.console.print(f"{from_counts}: {counts.n_rows} rows ({shape}), {counts.players.height} players, "
                          f"{counts.costs.height} completed levels used, {len(counts.rejects)} rows rejected")
        _print_rejects(counts.rejects)
        from pipeline.scoring.baseline_sources import known_level_counts

        # A counts file may list only the completed levels: its highest is a floor, and a known game keeps its
        # own level count (levels beyond it are not the game's: left out, said, and the exit code says so).
        known = known_level_counts()
        n_levels = {g: known.get(g, n) for g, n in counts.n_levels.items()}
        beyond = sorted((g, n, known[g]) for g, n in counts.n_levels.items() if n > known.get(g, n))
        for g, n, has in beyond:
            out.console.print(f"{from_counts}: {g} has {has} levels; its rows for level(s) {has + 1}-{n} are not "
                              "the game's and were left out", markup=False, soft_wrap=True)
        levels = bl.level_baselines(counts.costs, counts.players, n_levels, config)
        outputs.run(levels, counts.costs, {}, manifest)
        raise typer.Exit(EXIT_REJECTED if counts.rejects or outputs.refused or beyond else EXIT_OK)

    db_path = db or default_db_path()
    if not db_path.exists():
        raise fail(f"database {db_path} does not exist (run `arcstudy ingest` and `arcstudy build` first)")
    refuse_overwriting_database(out_file, db_path)  # first: "is the database" says more than "is a database"
    refuse_overwriting_any_database(out_file)
    with open_workspace(db_path, read_only=not outputs.writes) as ws, foreign_tables_said(db_path):
        if not ws.has_table("out_arc3__level_baselines") or ws.row_count("out_arc3__level_baselines") == 0:
            raise fail("no baselines in the database: run `arcstudy build` first (and check that it found "
                           "participant recordings)")
        levels = ws.read("SELECT * FROM out_arc3__level_baselines")
        costs = ws.read("SELECT * FROM out_arc3__baseline_costs") \
            if ws.has_table("out_arc3__baseline_costs") else None
        envs = ws.read("SELECT game_id, metadata_json, date_downloaded FROM core_arc3__environments "
                       "ORDER BY date_downloaded NULLS FIRST") if ws.has_table("core_arc3__environments") else None
        existing = {} if envs is None else {g: j for g, j, _ in envs.iter_rows()}  # latest wins
        outputs.run(levels, costs, existing, manifest)
        if outputs.writes:
            manifest.finish(EXIT_OK)
            ws.record_run(manifest)
            write_run_manifest(manifest, db_path)
    raise typer.Exit(EXIT_OK)


@dataclass
class _BaselineOutputs:
    """What `arcstudy baselines` shows and writes, the same from the database or from a counts file."""

    rule: str
    write_metadata: Path | None
    compare: Path | None
    compare_published: bool
    write: bool
    out_file: Path | None
    raw_csv: bool = False  # --raw-csv: the --out CSV without formula neutralising
    refused: int = 0  # games not written: their id names no game, or the baseline covers another level count

    @property
    def writes(self) -> bool:
        return self.write_metadata is not None or self.out_file is not None or self.write

    def run(self, levels: pl.DataFrame, costs: pl.DataFrame | None, existing: dict[str, str],
            manifest) -> None:
        from pipeline.transforms import baselines as bl

        games = bl.game_baselines(levels, self.rule)
        _print_baselines(levels, self.rule)
        if self.write_metadata is not None:
            make_out_dir(self.write_metadata, "--write-metadata")
            for gb, values in _metadata_values(games, self.rule):
                try:
                    path = bl.metadata_path(self.write_metadata, gb.game_id)
                except ValueError as err:  # a counts file's game_id such as ../x: never a path outside DIR
                    out.console.print(f"not written: {err}")
                    self.refused += 1
                    continue
                # Keep every other field: the ingested metadata, else the file already at the target path
                # (e.g. writing back into games/).
                base = existing.get(gb.game_id) or (path.read_text() if path.exists() else None)
                _write_metadata(path, bl.metadata_document(gb.game_id, values, base), manifest)
        diffs, sources = [], self._published()
        for label, source in sources:
            try:
                published = read_published(source, self.rule)
            except (ValueError, OSError, json.JSONDecodeError, pl.exceptions.PolarsError) as err:
                raise fail(f"cannot read {source}: {err}", EXIT_USAGE) from err
            if source.is_file():
                manifest.add_input(source)
            diff = bl.compare_baselines(games, published, costs)
            _print_diff(diff, self.rule, label)
            # several comparisons share one --out file: say which row compares with what
            diffs.append(diff.with_columns(pl.lit(label).alias("compared_with")) if len(sources) > 1 else diff)
        if self.write:
            assert self.compare is not None
            files = _metadata_files(self.compare)
            for gb, values in _metadata_values(games, self.rule):
                if gb.game_id not in files:
                    out.console.print(f"not written: {gb.game_id} has no metadata.json in {self.compare} "
                                      "(use --write-metadata DIR to create one)")
                    continue
                path = files[gb.game_id]
                text = path.read_text()
                if (why := _level_count_problem(text, values)) is not None:
                    out.console.print(f"not written: {gb.game_id}: {why}", markup=False, soft_wrap=True)
                    self.refused += 1
                    continue
                _write_metadata(path, bl.metadata_document(gb.game_id, values, text), manifest)
        if self.out_file is not None:
            if diffs:
                frame = pl.concat(diffs, how="diagonal_relaxed")
                if "reproduced_by" in frame.columns:
                    frame = frame.with_columns(pl.col("reproduced_by").list.join(" "))
            else:
                frame = levels.filter(pl.col("baseline_rule") == self.rule)
                if costs is not None:  # how sure each baseline is (out_arc3__baseline_intervals' columns)
                    from pipeline.transforms.baseline_intervals import baseline_intervals

                    keys = ["game_id", "level_index", "baseline_rule"]
                    intervals = baseline_intervals(costs, levels).drop("baseline_value", "n_completers",
                                                                       "is_default_rule")
                    frame = frame.join(intervals, on=keys, how="left")
            # whole, never through a symlink; an unwritable path is one line (OutputError, commands.common)
            with named("--out"):
                write_csv(frame, self.out_file, raw=self.raw_csv)
            manifest.add_output(self.out_file)
            out.console.print(f"wrote {self.out_file}")

    def _published(self) -> list[tuple[str, Path]]:
        from pipeline.scoring.baseline_sources import reference_source

        sources = [(str(self.compare), self.compare)] if self.compare is not None else []
        if self.compare_published:
            sources.append(("published reference", Path(reference_source().location)))
        return sources


def _metadata_values(games, rule: str):
    """(game, integer baseline_actions) for every game with a baseline on each level; says what it skips or
    rounds."""
    for gb in games:
        if not gb.is_complete:
            missing = [i for i, v in enumerate(gb.values, 1) if v is None]
            out.console.print(f"skipped {gb.game_id}: no baseline for level(s) {missing} (too few completers)")
            continue
        values, rounded = gb.metadata_values()
        if (why := baseline_actions_problem(values)) is not None:  # the one rule ingest reads metadata.json by
            out.console.print(f"skipped {gb.game_id}: its {rule} baseline {values}: {why}", markup=False,
                              soft_wrap=True)
            continue
        if rounded:
            out.console.print(f"{gb.game_id}: level(s) {rounded} have a half-integer {rule} value, "
                              "rounded up for metadata")
        yield gb, values


def _level_count_problem(existing_json: str, values: list[int]) -> str | None:
    """Why a baseline must not replace the one a metadata.json holds: it covers another number of levels (the
    game's levels are what the file's baseline covers; a shorter one would make the game shorter)."""
    try:
        old = json.loads(existing_json).get("baseline_actions")
    except (ValueError, AttributeError):
        return None
    if isinstance(old, list) and old and len(old) != len(values):
        why = ("levels the evidence does not reach have no baseline" if len(values) < len(old)
               else "the evidence has levels the file's game does not")
        return (f"its metadata.json lists {len(old)} levels and the baseline covers {len(values)}: not replaced "
                f"({why}; --write-metadata DIR writes it elsewhere)")
    return None


def _metadata_files(root: Path) -> dict[str, Path]:
    """game_id -> its metadata.json below `root` (the first in path order wins a game listed twice)."""
    files: dict[str, Path] = {}
    for f in metadata_files(root):
        if metadata_problem(f) is not None:  # read_published, which read the folder first, named it
            continue
        try:
            doc = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("game_id"), str):
            files.setdefault(doc["game_id"], f)
    return files


def _write_metadata(path: Path, doc: dict, manifest) -> None:
    write_text(path, json.dumps(doc, indent=2) + "\n")  # e.g. <DIR>/<code> a regular file: one line, exit 1
    manifest.add_output(path)
    out.console.print(f"wrote {path}")


def _print_rejects(rejects) -> None:
    """One line per rejected row, `file:line: reason [check]` (never wrapped, so editors can jump to it)."""
    if rejects:
        out.console.print(f"rejected rows ({len(rejects)}), not used:")
    for r in rejects:
        out.console.print(f"  {r.reason} [{r.check}]", soft_wrap=True, highlight=False, markup=False)


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


def _print_diff(diff: pl.DataFrame, rule: str, label: str) -> None:
    table = RichTable(title=f"ours ({rule}) vs {label}, level by level")
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
    bad = diff.filter(pl.col("status").is_in(["differs", "no_baseline", "only_ours", "only_published"]))
    if bad.height == 0:
        return
    table = RichTable(title=f"levels that disagree with {label}")
    cols = ["game", "level", "ours", "published", "ours - published"]
    if "reproduced_by" in diff.columns:
        cols.append("rule giving the published value")
    for col in cols:
        table.add_column(col)
    for r in bad.iter_rows(named=True):
        row = [r["game_id"], str(r["level_index"]), _fmt(r["ours"]),
               "-" if r["published"] is None else str(r["published"]),
               "-" if r["delta"] is None else f"{r['delta']:+g}"]
        if "reproduced_by" in diff.columns:
            row.append("-" if r["reproduced_by"] is None else ", ".join(r["reproduced_by"]) or "none")
        table.add_row(*row)
    out.console.print(table)
