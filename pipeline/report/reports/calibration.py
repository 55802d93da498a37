"""The calibration report: is each game "easy for humans" by the paper's protocol, and where do people struggle?

Per game (spec/study-protocol.md §3): the inclusion bar (at least `solvability.min_full_solvers` participants
fully solved it on first contact), players and full solvers, completion by level with Wilson intervals and the
drop-off level, attempt durations by outcome (the paper's Figure 5), actions by level against the optimal, best
first run and baseline (Figure 6), recomputed baselines against the published ones, the low-effort exclusions
and why (precision and recall against a ground-truth file when one is given), and a short list of levels a
designer should look at.

Everything is read from the out tables `arcstudy build` wrote; nothing is recomputed except what only the report
needs (the comparison with published baselines, the ground-truth evaluation and, when game files are at hand,
the state-graph explorer's random-policy win probabilities). Static tasks get their own sections at the end
(pipeline/report/reports/static_tasks.py): "Task families" (ARC-TGI) and "ARC-AGI-2 calibration".

Designer's list, with the thresholds and why:
- completion spike: a level that at most `SPIKE_CONDITIONAL_MAX` (70 %) of the people who completed the previous
  level complete, with at least `SPIKE_MIN_PLAYERS` players: the paper diagnoses failing environments by
  consistent drop-off points, and a game whose levels compose earlier mechanics should lose few people per level;
- effort spike: a level whose baseline is at least `EFFORT_SPIKE_RATIO` (3x) the previous level's: difficulty
  should come from composing mechanics, and a tripling of the typical human's actions is worth a replay review;
- random-policy wins: a level other than level 1 that the uniform random policy wins with probability above
  `RANDOM_WIN_THRESHOLD` (1 in 10,000, the paper's acceptance threshold; level 1 is a tutorial that random agents
  may win by design); a level whose bounds still straddle the threshold when the explorer's budget is spent is
  listed as undetermined (never counted as passing), with the command that settles it;
- moved baselines: the levels whose recomputed baseline differs most from the published one, relative to the
  published value, when the change is at least `BASELINE_MOVE_MIN` (25 %).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.figures import alt, save_figure
from pipeline.report.html import Callout, Facts, Figure, Prose, Section, Table
from pipeline.simulate.targets import (
    ATTEMPTS,
    MEDIAN_MINUTES,
    PAPER_ENVIRONMENTS,
    PAPER_PARTICIPANTS,
    PAPER_TARGETS,
)

from .common import (
    ReportContext,
    ReportInputError,
    clear_previous,
    minutes,
    publish_report,
    report_manifest,
)
from .static_tasks import arc2_sections, static_headline, task_family_sections

SPIKE_CONDITIONAL_MAX = 0.7
SPIKE_MIN_PLAYERS = 3
EFFORT_SPIKE_RATIO = 3.0
RANDOM_WIN_THRESHOLD = 1e-4
BASELINE_MOVE_MIN = 0.25
DESIGNER_LIST_MAX = 12

GAME_FACT_LABELS = {
    "is_included": "passes the inclusion bar", "n_levels": "levels", "n_players": "players",
    "n_full_solvers": "full solvers (first contact)", "full_solve_rate": "full-solve rate",
    "min_full_solvers": "full solvers needed", "drop_off_level": "drop-off level",
    "max_completion_drop": "completion fall at the drop-off level", "n_analysis_attempts": "analysis attempts",
    "median_successful_min": "median successful attempt (min)",
    "median_unsuccessful_min": "median unsuccessful attempt (min)", "has_published_baseline": "published baseline",
}
LABELS = {**GAME_FACT_LABELS,  # table headers the column names do not give by themselves (html.column_label)
          "recomputed": "recomputed baseline (actions)", "published": "published baseline (actions)",
          "delta": "recomputed - published (actions)", "status": "change", "published_source": "published by",
          "scope_id": "game (or all)", "outcome_group": "outcome", "n_nodes": "states explored",
          "random_win_lower": "random-win probability, lower bound",
          "random_win_upper": "random-win probability, upper bound",
          "optimal_actions": "optimal (actions)", "best_first_run_actions": "best first run (actions)",
          "baseline_value": "baseline (actions)", "best_minus_optimal": "best - optimal (actions)",
          "is_excluded": "excluded by the detector", "is_low_effort": "low effort (ground truth)",
          "this_study": "this study", "is_within": "within tolerance"}

# The explorer: a node budget per level (deterministic), the same as `arcstudy explore`'s (pipeline.explore.graph.
# DEFAULT_MAX_NODES), so a level `explore` settles is settled here too; and a wall-clock budget for the whole report
# (a safety cap that each level may spend in full: levels go in order of level number across games, so a spent
# budget leaves the last levels unexplored, and says so). Every level of the shipped games takes about 30 s in all.
EXPLORE_MAX_NODES = 200_000
EXPLORE_SECONDS = 300.0
UNDETERMINED = "undetermined within the budget"
RANDOM_WINS = "random policy wins too often"

__all__ = ["ExploreOptions", "baseline_comparison", "build_config", "designer_list", "evaluate_exclusions",
           "explore_levels", "paper_comparison", "published_baselines", "random_win_facts", "read_ground_truth",
           "write_calibration_report"]


@dataclass(frozen=True)
class ExploreOptions:
    """State-graph exploration of every level of the studied games found under games_dirs."""

    games_dirs: tuple[Path, ...] = ()
    max_nodes: int = EXPLORE_MAX_NODES
    seconds: float = EXPLORE_SECONDS  # total; 0 disables the explorer


# --------------------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------------------
def build_config(ctx: ReportContext):
    """The configuration of the build that made the tables (from its run manifest), else the defaults."""
    from pipeline.core.config import ConfigError, load_config, resolve

    if ctx.ws.has_table("runs"):
        rows = ctx.ws.read("SELECT manifest_json FROM runs WHERE command LIKE 'arcstudy build%' "
                           "ORDER BY started_at DESC, run_id DESC LIMIT 1")
        if rows.height:
            config = json.loads(rows["manifest_json"][0]).get("config") or {}
            try:
                return resolve({k: v for k, v in config.items() if isinstance(v, dict)}, origin="build manifest")
            except ConfigError:
                pass
    return load_config()


def published_baselines(ctx: ReportContext, rule: str, games_dirs: Sequence[Path] = ()) -> pl.DataFrame:
    """(game_id, published: list[int], published_source), first source that knows the game: its metadata
    baseline_actions as ingested (core_arc3__environments, latest download), its metadata.json in a game folder
    (`games_dirs`), the shipped reference CSV for public games."""
    from engine.loader import find_games
    from pipeline.scoring.baseline_sources import REFERENCE_CSV, read_published

    rows: dict[str, tuple[list[int], str]] = {}
    envs = ctx.table("core_arc3__environments", order_by="game_id, date_downloaded NULLS FIRST, file_id")
    for game_id, values in envs.select("game_id", "baseline_actions").iter_rows():
        if values:
            rows[game_id] = ([int(v) for v in values], "metadata (core_arc3__environments)")
    for info in find_games([d for d in games_dirs if Path(d).is_dir()]):
        if info.game_id not in rows and info.baseline_actions:
            ctx.add_input(info.directory / "metadata.json")
            rows[info.game_id] = ([int(v) for v in info.baseline_actions], f"metadata.json in {info.directory}")
    if REFERENCE_CSV.is_file():
        ctx.add_input(REFERENCE_CSV)
        ref = read_published(REFERENCE_CSV, rule)
        for game_id, ref_rule, values in ref.iter_rows():
            if game_id not in rows and values:
                rows[game_id] = (values, f"reference CSV ({ref_rule or 'rule unknown'})")
    return pl.DataFrame([(g, v, s) for g, (v, s) in sorted(rows.items())], orient="row",
                        schema={"game_id": pl.String, "published": pl.List(pl.Int64), "published_source": pl.String})


def baseline_comparison(level_baselines: pl.DataFrame, published: pl.DataFrame, rule: str) -> pl.DataFrame:
    """Level by level: recomputed (under rule) vs published, with the absolute and relative change."""
    from pipeline.transforms.baselines import compare_baselines, game_baselines

    ours = game_baselines(level_baselines, rule)
    pub = published.select("game_id", pl.lit(None, pl.String).alias("published_rule"),
                           pl.col("published").alias("baseline_actions"))
    diff = compare_baselines(ours, pub).drop("published_rule")
    return (diff.join(published.select("game_id", "published_source"), on="game_id", how="left")
            .rename({"ours": "recomputed"})
            .with_columns(pl.lit(rule).alias("baseline_rule"),
                          (pl.col("delta") / pl.col("published")).alias("relative_change"))
            .select("game_id", "level_index", "baseline_rule", "recomputed", "published", "delta", "relative_change",
                    "status", "published_source")
            .sort("game_id", "level_index"))


def read_ground_truth(path: Path) -> pl.DataFrame:
    """A ground-truth CSV: is_low_effort plus participant_id and/or session_id (what the simulator writes
    to ground_truth/arc3_participants.csv)."""
    try:
        df = pl.read_csv(path, infer_schema=False)
    except (OSError, pl.exceptions.PolarsError) as err:
        raise ReportInputError(f"--ground-truth {path}: cannot read it as CSV ({err})") from err
    keys = [c for c in ("participant_id", "session_id") if c in df.columns]
    if "is_low_effort" not in df.columns or not keys:
        raise ReportInputError(f"--ground-truth {path}: needs columns is_low_effort and participant_id or "
                               f"session_id; has {df.columns}")
    truthy, falsy = {"true", "1", "yes", "t", "y"}, {"false", "0", "no", "f", "n"}
    bad = df.filter(~pl.col("is_low_effort").str.to_lowercase().str.strip_chars().is_in(truthy | falsy))
    if bad.height:
        raise ReportInputError(f"--ground-truth {path}: is_low_effort must be true/false, got "
                               f"{bad['is_low_effort'].head(3).to_list()}")
    return df.select(*keys, pl.col("is_low_effort").str.to_lowercase().str.strip_chars().is_in(truthy))


def evaluate_exclusions(features: pl.DataFrame, truth: pl.DataFrame) -> tuple[dict[str, Any], pl.DataFrame]:
    """Detector decisions against ground truth, per participant (per session when the truth has no participant
    ids). Only judged people count (those with a row in out_study__session_features)."""
    key = "participant_id" if "participant_id" in truth.columns else "session_id"
    judged = (features.filter(pl.col(key).is_not_null())
              .group_by(key).agg(
                  pl.col("is_low_effort_excluded").any().alias("is_excluded"),
                  pl.col("reason_codes").list.explode(keep_nulls=False, empty_as_null=False).unique().sort()
                  .alias("reason_codes")))
    rows = (judged.join(truth.select(key, "is_low_effort").unique(key, keep="first"), on=key, how="left")
            .with_columns(pl.when(pl.col("is_low_effort").is_null()).then(pl.lit("not in ground truth"))
                          .when(pl.col("is_excluded") & pl.col("is_low_effort")).then(pl.lit("true positive"))
                          .when(pl.col("is_excluded")).then(pl.lit("false positive"))
                          .when(pl.col("is_low_effort")).then(pl.lit("false negative"))
                          .otherwise(pl.lit("true negative")).alias("outcome"))
            .sort(key))
    counts = {k: rows.filter(pl.col("outcome") == k).height
              for k in ("true positive", "false positive", "false negative", "true negative", "not in ground truth")}
    tp, fp, fn = counts["true positive"], counts["false positive"], counts["false negative"]
    stats = {
        "compared per": key,
        "judged and labelled": tp + fp + fn + counts["true negative"],
        **counts,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
    }
    return stats, rows


def explore_levels(game_levels: dict[str, int], options: ExploreOptions) -> tuple[pl.DataFrame, list[str]]:
    """Random-policy win probability bounds and BFS-optimal actions per level (1-based level_index), for the
    games found under options.games_dirs; returns (table, notes)."""
    schema = {"game_id": pl.String, "level_index": pl.Int64, "verdict": pl.String, "random_win_lower": pl.Float64,
              "random_win_upper": pl.Float64, "optimal_actions": pl.Int64, "n_nodes": pl.Int64,
              "is_complete": pl.Boolean}
    notes: list[str] = []
    if options.seconds <= 0 or not game_levels:
        return pl.DataFrame(schema=schema), (["explorer disabled (--explore-seconds 0)"] if options.seconds <= 0
                                             else [])
    try:
        from pipeline.core.game_code import GameCodeError, SandboxFailure, record_stopped
        from pipeline.explore import discover
        from pipeline.explore.run import explore_level_in_sandbox
    except ImportError as err:  # the explorer is optional for the report: say so, never fail silently
        return pl.DataFrame(schema=schema), [f"state-graph explorer not available: {err}"]
    sources = {}
    for folder in options.games_dirs:
        if Path(folder).is_dir():
            for src in discover(folder):
                sources.setdefault(src.game_id, src)
    missing = sorted(set(game_levels) - set(sources))
    if missing:
        notes.append(f"no game files for {', '.join(missing)} under "
                     f"{', '.join(str(d) for d in options.games_dirs) or '(no folder)'}: not explored")
    # Level by level across games, so a spent budget leaves the hardest (last) levels unexplored, not whole games.
    todo = sorted(((g, lvl) for g in game_levels if g in sources for lvl in range(game_levels[g])),
                  key=lambda gl: (gl[1], gl[0]))
    rows = []
    deadline = time.monotonic() + options.seconds
    stopped: set[str] = set()
    for i, (game_id, level) in enumerate(todo):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            skipped = ", ".join(f"{g} level {lvl + 1}" for g, lvl in todo[i:])
            notes.append(f"explorer time budget ({options.seconds:g} s, --explore-seconds) spent: not explored: "
                         f"{skipped}")
            break
        if game_id in stopped:
            continue
        try:  # the game's code runs in its sandbox (pipeline.core.game_code), never in this process
            cap = None if math.isinf(remaining) else max(0.5, remaining)
            _graph, m = explore_level_in_sandbox(sources[game_id], level + 1, identity=None, budget=None,
                                                 options={"max_nodes": options.max_nodes, "max_seconds": cap},
                                                 want_graph=False)
        except SandboxFailure as err:  # time, memory, exit, crash: this game is not explored further
            stopped.add(game_id)
            notes.append(f"explorer stopped: {record_stopped(f'{game_id} level {level + 1}', err)}")
            continue
        except (GameCodeError, Exception) as err:  # noqa: BLE001 - a game the explorer cannot run is reported
            notes.append(f"{game_id} level {level + 1}: explorer failed ({type(err).__name__}: {err})")
            continue
        lower, upper = float(m.random_win_lower), float(m.random_win_upper)
        if lower > RANDOM_WIN_THRESHOLD:
            verdict = "tutorial: random wins allowed" if level == 0 else RANDOM_WINS
        elif upper <= RANDOM_WIN_THRESHOLD:
            verdict = "passes"
        else:
            verdict = UNDETERMINED
            option = "--explore-seconds" if "time" in m.stop_reason else "--explore-nodes"
            notes.append(f"{game_id} level {level + 1}: undetermined: the explorer stopped at its {m.stop_reason} "
                         f"after {m.nodes:,} states; raise {option}, or run `arcstudy explore "
                         f"{game_id.split('-')[0]} --level {level + 1}`")
        rows.append((game_id, level + 1, verdict, lower, upper, m.optimal_actions, m.nodes, m.complete))
    return pl.DataFrame(rows, schema=schema, orient="row").sort("game_id", "level_index"), notes


def paper_comparison(n_analysis_attempts: int, overall_durations: pl.DataFrame) -> pl.DataFrame:
    """One row per paper target (pipeline.simulate.targets): the paper's value, this study's (analysis attempts;
    median minutes by outcome group from the scope-all rows of out_arc3__durations_summary), the tolerance and
    whether this study is within it."""
    medians = {r["outcome_group"]: r["median_duration_s"] for r in overall_durations.iter_rows(named=True)}
    rows = []
    for target in PAPER_TARGETS:
        if target.outcome_group is None:
            value: float | None = float(n_analysis_attempts)
        else:
            seconds = medians.get(target.outcome_group)
            value = None if seconds is None else round(seconds / 60, 2)
        rows.append((target.metric, target.paper, value, target.tolerance_text, target.within(value)))
    return pl.DataFrame(rows, orient="row", schema={"metric": pl.String, "paper": pl.Float64,
                                                    "this_study": pl.Float64, "tolerance": pl.String,
                                                    "is_within": pl.Boolean})


def designer_list(completion: pl.DataFrame, points: pl.DataFrame, explored: pl.DataFrame,
                  comparison: pl.DataFrame) -> list[str]:
    """The levels a designer should look at, most telling first within each kind (module docstring)."""
    items: list[str] = []
    spikes = (completion.filter((pl.col("level_index") > 1) & (pl.col("n_players") >= SPIKE_MIN_PLAYERS)
                                & (pl.col("conditional_completion_rate") <= SPIKE_CONDITIONAL_MAX))
              .sort("conditional_completion_rate", "game_id", "level_index"))
    for r in spikes.iter_rows(named=True):
        items.append(f"{r['game_id']} level {r['level_index']}: completion spike: only "
                     f"{r['conditional_completion_rate']:.0%} of those who completed level {r['level_index'] - 1} "
                     f"completed it ({r['completion_rate']:.0%} of {r['n_players']} players overall)"
                     + (" (the drop-off level)" if r["is_drop_off_level"] else ""))
    effort = (points.sort("game_id", "level_index")
              .with_columns(pl.col("baseline_value").shift(1).over("game_id").alias("previous"))
              .filter(pl.col("previous").is_not_null() & (pl.col("previous") > 0)
                      & (pl.col("baseline_value") >= EFFORT_SPIKE_RATIO * pl.col("previous")))
              .with_columns((pl.col("baseline_value") / pl.col("previous")).alias("ratio"))
              .sort("ratio", descending=True))
    for r in effort.iter_rows(named=True):
        items.append(f"{r['game_id']} level {r['level_index']}: effort spike: baseline {r['baseline_value']:g} "
                     f"actions, {r['ratio']:.1f}x level {r['level_index'] - 1}'s {r['previous']:g}")
    if explored.height:
        for r in explored.filter(pl.col("verdict") == RANDOM_WINS).iter_rows(named=True):
            items.append(f"{r['game_id']} level {r['level_index']}: a random policy wins it with probability at "
                         f"least {_prob(r['random_win_lower'])} (threshold 1 in 10,000)")
        for r in explored.filter(pl.col("verdict") == UNDETERMINED).iter_rows(named=True):
            items.append(f"{r['game_id']} level {r['level_index']}: random-policy win probability undetermined "
                         f"within the explorer's budget (between {_prob(r['random_win_lower'])} and "
                         f"{_prob(r['random_win_upper'])} after {r['n_nodes']:,} states; threshold 1 in 10,000)")
    moved = (comparison.filter(pl.col("relative_change").abs() >= BASELINE_MOVE_MIN)
             .sort(pl.col("relative_change").abs(), "game_id", "level_index", descending=[True, False, False]))
    for r in moved.head(5).iter_rows(named=True):
        items.append(f"{r['game_id']} level {r['level_index']}: baseline moved {r['relative_change']:+.0%} "
                     f"(recomputed {r['recomputed']:g} vs published {r['published']})")
    return items[:DESIGNER_LIST_MAX] + ([f"... and {len(items) - DESIGNER_LIST_MAX} more in the tables below"]
                                        if len(items) > DESIGNER_LIST_MAX else [])


def _prob(p: float) -> str:
    if p <= 0:
        return "0"
    return f"1 in {1 / p:,.0f}" if p < 0.01 else f"{p:.3g}"


# --------------------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------------------
def baseline_chart(comparison: pl.DataFrame, games: Sequence[str]):
    df = (comparison.filter(pl.col("game_id").is_in(list(games)))
          .select("game_id", "level_index", "recomputed", pl.col("published").cast(pl.Float64))
          .unpivot(index=["game_id", "level_index"], variable_name="baseline", value_name="actions")
          .drop_nulls("actions"))
    if df.filter(pl.col("baseline") == "published").height == 0:
        return None
    return alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("level_index:O", title="level", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("actions:Q", title="baseline actions"),
        color=alt.Color("baseline:N", scale=alt.Scale(domain=["recomputed", "published"])),
        tooltip=["game_id:N", "level_index:O", "baseline:N", "actions:Q"],
    ).properties(width=180, height=140).facet(facet=alt.Facet("game_id:N", title=None), columns=4).properties(
        title="Recomputed vs published baselines")


# --------------------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------------------
WIDE_INTERVAL_SHARE = 0.5  # a baseline interval wider than this share of the baseline asks for more testers


def testers_needed(intervals: pl.DataFrame, rule: str, share: float = WIDE_INTERVAL_SHARE) -> pl.DataFrame:
    """The levels (under `rule`) whose baseline interval is wider than `share` of the baseline, or whose
    interval does not reach its confidence level at all, per game: what a study designer adds testers for."""
    from pipeline.scoring.baseline_intervals import completers_needed

    df = intervals.filter(pl.col("baseline_rule") == rule)
    if df.height == 0:
        return df.select("game_id", "level_index")
    needed = {c: completers_needed(rule, c) for c in df["confidence_level"].unique().to_list()}
    wide = df.filter((pl.col("interval_relative_width") > share) | ~pl.col("is_interval_at_level"))
    return wide.sort("game_id", "level_index").select(
        "game_id", "level_index", "baseline_value", "n_completers", "interval_lower", "interval_upper",
        "interval_coverage", "interval_relative_width",
        pl.col("confidence_level").replace_strict(needed, return_dtype=pl.Int64).alias("completers_for_level"),
        "baseline_with_one_more_fastest", "baseline_with_one_more_slowest")


def testers_needed_sections(intervals: pl.DataFrame, rule: str, share: float = WIDE_INTERVAL_SHARE) -> list[Section]:
    """The "How many testers does this level need" view of the calibration report."""
    if intervals.height == 0:
        return [Callout("How many testers does this level need", [
            "No baseline intervals: run `arcstudy build` (its baseline_intervals step) on a study with human "
            "evidence."])]
    wide = testers_needed(intervals, rule, share)
    ours = intervals.filter(pl.col("baseline_rule") == rule)
    confidence = ours["confidence_level"][0] if ours.height else 0.95
    per_game = ", ".join(f"{g}: {n}" for g, n in wide.group_by("game_id").len().sort("game_id").iter_rows())
    text = (f"A baseline is an order statistic of a few completers' action counts, so it is uncertain. For each "
            f"level with a {rule} baseline, the build gives a distribution-free {confidence:.0%} interval (order "
            "statistics of the completers' costs, exact binomial coverage) and where the baseline would go with "
            f"one more tester as fast as the fastest or as slow as the slowest. Listed: the levels whose interval "
            f"spans more than {share:.0%} of the baseline, or whose completers are too few for any interval to reach "
            f"{confidence:.0%} (completers_for_level says how many it takes). {wide.height} of {ours.height} "
            f"levels" + (f" ({per_game})." if per_game else "."))
    return [Prose("How many testers does this level need", text),
            Table("Levels whose baseline needs more testers", wide, name="calibration__testers_needed",
                  caption="interval_relative_width = (upper - lower) / baseline; the one-more-tester columns "
                          "are the baseline recomputed with one more completer at the observed extremes. Every "
                          "level and rule: out_arc3__baseline_intervals.")]


def write_calibration_report(ctx: ReportContext, out_dir: Path, *, ground_truth: Path | None = None,
                             explore: ExploreOptions | None = None, command: str = "arcstudy report calibration"
                             ) -> Path:
    """Write <out_dir>/calibration.html, its tables as <out_dir>/calibration__<table>.csv and .parquet, its
    figures under <out_dir>/figures/calibration/ and its run manifest <out_dir>/calibration.manifest.json."""
    from pipeline.transforms.figures import actions_chart, completion_chart, durations_chart, top_games

    out_dir.mkdir(parents=True, exist_ok=True)
    clear_previous(out_dir, "calibration")
    explore = explore or ExploreOptions()
    truth = None
    if ground_truth is not None:
        truth = read_ground_truth(ground_truth)
        ctx.add_input(ground_truth)
    config = build_config(ctx)
    solv = ctx.table("out_arc3__game_solvability")
    completion = ctx.table("out_arc3__level_completion")
    durations = ctx.table("out_arc3__durations_summary")
    points = ctx.table("out_arc3__level_reference_points")
    level_baselines = ctx.table("out_arc3__level_baselines")
    attempts = ctx.table("out_arc3__attempts", order_by="guid")
    features = ctx.table("out_study__session_features")
    removed = ctx.table("out_study__low_effort_exclusions")
    rule = config.baselines.rule
    sections: list[Section] = [Prose("What this report shows", (
        "Human calibration of each game by the ARC-AGI-3 protocol: a game is kept when at least "
        f"{config.solvability.min_full_solvers} participants fully solved it on first contact. Completion by level "
        "shows where people drop off; durations, actions and baselines show how hard each level is; low-effort "
        "sessions are excluded before any of it is computed.\n\n"
        f"Read from the tables of arcstudy build in {ctx.db_path.name}; baselines under the {rule} rule."))]
    figures: dict[str, dict[str, Path]] = {}
    fig_dir = out_dir / "figures" / "calibration"

    def make_figure(chart, name: str, title: str, caption: str = "") -> Figure | None:
        # A chart with nothing to draw (None) leaves no figure and no section.
        if chart is None:
            return None
        figures[name] = save_figure(chart, fig_dir, name)
        return Figure(title, figures[name], caption=caption)

    def add_figure(chart, name: str, title: str, caption: str = "") -> None:
        fig = make_figure(chart, name, title, caption)
        if fig is not None:
            sections.append(fig)

    if solv.height == 0:
        static = static_sections(ctx, make_figure)
        if static:
            sections.append(Callout("No ARC-AGI-3 study", [
                f"{ctx.db_path} holds no built ARC-AGI-3 study (out_arc3__game_solvability is empty); the sections "
                "below cover its static tasks."]))
        else:
            sections.append(Callout("No calibration data", [
                f"{ctx.db_path} has no built study (out_arc3__game_solvability is empty or missing): run arcstudy "
                "ingest on the recordings and session manifest, then arcstudy build."], kind="warning"))
        sections += static
        return _finish(ctx, out_dir, sections, figures, command, ground_truth, explore, rule,
                       {"games": 0, **static_headline(ctx)})

    game_levels = {g: int(n) for g, n in solv.select("game_id", "n_levels").iter_rows() if n}
    explored, explore_notes = explore_levels(game_levels, explore)
    if explored.height:
        points = _fill_optimal(points, explored, explore)
    published = published_baselines(ctx, rule, explore.games_dirs)
    comparison = baseline_comparison(level_baselines, published, rule)
    analysis = attempts.filter(pl.col("is_analysis_attempt"))

    # -- overview ------------------------------------------------------------------------------------
    overall = durations.filter(pl.col("scope_id") == "all")
    med = {r["outcome_group"]: r["median_duration_s"] for r in overall.iter_rows(named=True)}
    n_included = solv.filter(pl.col("is_included")).height
    facts: dict[str, Any] = {
        "games": solv.height,
        f"games passing the inclusion bar (>= {config.solvability.min_full_solvers} full solvers)": n_included,
        "participants": attempts["participant_id"].drop_nulls().n_unique(),
        "participant recordings": attempts.height,
        "analysis attempts (first contact, > 30 actions, < 30 min, not low effort)": analysis.height,
        "sessions excluded as low effort": features.filter(pl.col("is_low_effort_excluded")).height,
    }
    for group, label in (("all", "median attempt"), ("successful", "median successful attempt"),
                         ("unsuccessful", "median unsuccessful attempt")):
        value = med.get(group)
        facts[f"{label} (paper: {MEDIAN_MINUTES[group].paper} min)"] = (
            f"{value / 60:.1f} min" if value is not None else None)
    sections.append(Facts("Study at a glance", facts))
    n_games = attempts["game_id"].n_unique()
    sections.append(Table("This study vs the paper's study", paper_comparison(analysis.height, overall),
                          name="calibration__paper_comparison",
                          caption="The paper's human-study totals (spec/study-protocol.md §3) against this study's "
                                  "analysis attempts and median durations by outcome (scope all), with the tolerances "
                                  "a simulated study is calibrated to (pipeline/simulate/targets.py). With one "
                                  f"attempt per participant and game, {n_games} game(s) allow at most "
                                  f"{n_games} attempts per participant (the paper: "
                                  f"{ATTEMPTS.paper / PAPER_PARTICIPANTS:.2f} over {PAPER_ENVIRONMENTS} environments)."))
    n_baselines = level_baselines.filter((pl.col("baseline_rule") == rule)
                                         & pl.col("baseline_value").is_not_null()).height
    headline = {"participants": facts["participants"], "games": solv.height, "games included": n_included,
                "levels with a baseline": f"{n_baselines} of {int(solv['n_levels'].sum() or 0)}",
                "low-effort sessions excluded": facts["sessions excluded as low effort"]}
    designer = designer_list(completion, points, explored, comparison)
    sections.append(Callout("Levels a designer should look at", designer or [
        "Nothing flagged: no completion or effort spike, no level a random policy wins or that the explorer left "
        "undetermined, no baseline that moved "
        f"by {BASELINE_MOVE_MIN:.0%} or more."], kind="warning" if designer else "note"))
    failing = solv.filter(~pl.col("is_included"))
    if failing.height:
        sections.append(Callout("Games failing the inclusion bar", [
            f"{r['game_id']}: {r['n_full_solvers']} full solver(s) of {r['n_players']} players (needs "
            f"{r['min_full_solvers']})" + (f"; people drop off at level {r['drop_off_level']}"
                                           if r["drop_off_level"] else "")
            for r in failing.iter_rows(named=True)], kind="error"))

    per_game = _per_game(solv, durations, analysis, published)
    sections.append(Table("Games and the inclusion bar", per_game, name="calibration__games",
                          caption="One row per game: players (analysis attempts), full solvers on first contact, "
                                  "whether the game passes the bar, the drop-off level (largest fall in completion "
                                  "from one level to the next) and median attempt minutes by outcome."))

    # -- completion ----------------------------------------------------------------------------------
    games = top_games(attempts, max(len(game_levels), 1))
    add_figure(completion_chart(completion, games), "completion_by_level", "Completion by level",
               caption="Share of players who completed each level, with "
                       f"{config.solvability.confidence_level:.0%} Wilson intervals.")
    sections.append(Table("Completion rates by level", completion, name="calibration__level_completion",
                          caption="Conditional completion rate: completers of this level / completers of the "
                                  "previous one; drop-off level marks the game's largest fall."))

    # -- durations -----------------------------------------------------------------------------------
    add_figure(durations_chart(attempts, config), "durations_by_outcome", "Attempt duration by outcome",
               caption="Analysis attempts, successful (every level) vs not, with the 20-minute "
                       "soft limit and the 30-minute cutoff (the paper's Figure 5).")
    sections.append(Table("Durations by outcome", durations.with_columns(
        minutes("median_duration_s"), minutes("mean_duration_s"), minutes("p25_duration_s"),
        minutes("p75_duration_s")).drop("median_duration_s", "mean_duration_s", "p25_duration_s", "p75_duration_s"),
        name="calibration__durations_summary", caption="Minutes; scope all is every game together."))

    # -- actions by level ----------------------------------------------------------------------------
    add_figure(actions_chart(points, games), "actions_by_level", "Actions by level",
               caption="Optimal playthrough (state-graph explorer), best first run (fewest actions "
                       f"of any participant) and the {rule} baseline (the paper's Figure 6).")
    sections.append(Table("Reference points by level", points, name="calibration__level_reference_points",
                          caption="Best - optimal is the cost of exploration and learning."))

    # -- baselines -----------------------------------------------------------------------------------
    add_figure(baseline_chart(comparison, games), "baselines_vs_published", "Recomputed vs published baselines")
    n_pub = published.filter(pl.col("game_id").is_in(list(game_levels))).height
    sections.append(Table("Baselines by level, recomputed and published", comparison, name="calibration__baseline_comparison",
                          caption=f"Recomputed under {rule} from eligible first runs; published = the game's "
                                  "metadata baseline_actions (as ingested in core_arc3__environments, else the "
                                  "metadata.json in the game folders), else the shipped reference CSV for public "
                                  f"games. {n_pub} of {len(game_levels)} games have a published baseline."))

    # -- how sure the baselines are --------------------------------------------------------------------
    sections += testers_needed_sections(ctx.table("out_arc3__baseline_intervals"), rule)

    # -- low effort ----------------------------------------------------------------------------------
    excluded = features.filter(pl.col("is_low_effort_excluded"))
    sections.append(Table("Low-effort exclusions", excluded.select(
        "unit_id", "participant_id", "reason", "reason_codes", "unit_kind", "n_environments", "n_recordings",
        "abandonment_rate", "short_play_share", "relative_actions_median", "relative_duration_median"),
        name="calibration__low_effort_exclusions",
        caption="Units (sessions, or recordings outside any session) the detector excluded, and why. A slow "
                "participant scores above 1 relative to the cohort and is never caught."))
    sections.append(Table("Recordings removed by the exclusions", removed,
                          name="calibration__low_effort_removed_recordings"))
    if truth is not None:
        stats, rows = evaluate_exclusions(features, truth)
        sections.append(Facts("Exclusions against ground truth", stats))
        sections.append(Table("Detector decisions against ground truth", rows,
                              name="calibration__low_effort_ground_truth",
                              caption=f"From {ground_truth}; one row per judged "
                                      f"{stats['compared per'].removesuffix('_id')}."))

    # -- explorer ------------------------------------------------------------------------------------
    if explored.height or explore_notes:
        if explored.height:
            sections.append(Table("Random-policy win probability (state-graph explorer)", explored,
                                  name="calibration__random_win_probability",
                                  caption=f"Bounds on the probability that a uniformly random policy wins the level "
                                          f"from its start (exact when the graph is complete); up to "
                                          f"{explore.max_nodes:,} states per level. Threshold: 1 in 10,000."))
        if explore_notes:
            sections.append(Callout("Explorer notes", explore_notes))

    # -- per game ------------------------------------------------------------------------------------
    for r in per_game.iter_rows(named=True):
        game_facts = {GAME_FACT_LABELS.get(k, k): v for k, v in r.items() if k != "game_id"}
        if explored.height:
            ex = explored.filter(pl.col("game_id") == r["game_id"])
            game_facts.update(random_win_facts(ex))
        sections.append(Facts(f"Game {r['game_id']}", game_facts))
    sections += static_sections(ctx, make_figure)
    return _finish(ctx, out_dir, sections, figures, command, ground_truth, explore, rule,
                   {**headline, **static_headline(ctx)})


def static_sections(ctx: ReportContext, make_figure=None) -> list[Section]:
    """The static-task sections (pipeline/report/reports/static_tasks.py): ARC-TGI task families, then ARC-AGI-2."""
    return [*task_family_sections(ctx, make_figure), *arc2_sections(ctx, make_figure)]


def random_win_facts(explored_game: pl.DataFrame) -> dict[str, str]:
    """A game's random-policy facts from its explorer rows: the levels a random policy wins, and the levels the
    budget left undetermined. "none" only when every level was settled: an undetermined level is not a pass."""
    if explored_game.height == 0:
        return {"levels a random policy wins": "not explored"}
    flagged = explored_game.filter(pl.col("verdict") == RANDOM_WINS)["level_index"].to_list()
    open_levels = explored_game.filter(pl.col("verdict") == UNDETERMINED)["level_index"].to_list()
    wins = ", ".join(map(str, flagged))
    if open_levels:
        return {"levels a random policy wins": (f"{wins}; others undetermined" if wins else
                                                "undetermined (see the next line)"),
                "levels undetermined within the explorer budget": ", ".join(map(str, open_levels))}
    return {"levels a random policy wins": wins or "none"}


def _fill_optimal(points: pl.DataFrame, explored: pl.DataFrame, explore: ExploreOptions) -> pl.DataFrame:
    """Optimal actions from the explorer (BFS depth of the nearest win: exact once a win is found) where the
    build had none."""
    found = explored.filter(pl.col("optimal_actions").is_not_null()).select(
        "game_id", "level_index", pl.col("optimal_actions").alias("_explored"))
    if found.height == 0:
        return points
    label = f"explorer (report, BFS up to {explore.max_nodes:,} states)"
    return (points.join(found, on=["game_id", "level_index"], how="left")
            .with_columns(pl.when(pl.col("optimal_actions").is_null() & pl.col("_explored").is_not_null())
                          .then(pl.lit(label)).otherwise(pl.col("optimal_source")).alias("optimal_source"),
                          pl.coalesce("optimal_actions", "_explored").alias("optimal_actions"))
            .with_columns((pl.col("best_first_run_actions") - pl.col("optimal_actions")).alias("best_minus_optimal"))
            .drop("_explored"))


def _per_game(solv: pl.DataFrame, durations: pl.DataFrame, analysis: pl.DataFrame,
              published: pl.DataFrame) -> pl.DataFrame:
    med = (durations.filter(pl.col("scope_id") != "all")
           .pivot(on="outcome_group", index="scope_id", values="median_duration_s")
           .rename({"scope_id": "game_id"}))
    for group in ("successful", "unsuccessful"):
        if group not in med.columns:
            med = med.with_columns(pl.lit(None, pl.Float64).alias(group))
    med = med.select("game_id", (pl.col("successful") / 60).alias("median_successful_min"),
                     (pl.col("unsuccessful") / 60).alias("median_unsuccessful_min"))
    n_attempts = analysis.group_by("game_id").agg(pl.len().alias("n_analysis_attempts"))
    return (solv.join(n_attempts, on="game_id", how="left").join(med, on="game_id", how="left")
            .join(published.select("game_id", pl.col("published").list.len().alias("n_published_levels")),
                  on="game_id", how="left")
            .select("game_id", "is_included", "n_levels", "n_players", "n_full_solvers", "full_solve_rate",
                    "min_full_solvers", "drop_off_level", "max_completion_drop",
                    pl.col("n_analysis_attempts").fill_null(0), "median_successful_min", "median_unsuccessful_min",
                    (pl.col("n_published_levels").is_not_null()).alias("has_published_baseline"))
            .sort("game_id"))


def _finish(ctx: ReportContext, out_dir: Path, sections: list[Section], figures: dict[str, dict[str, Path]],
            command: str, ground_truth: Path | None, explore: ExploreOptions, rule: str,
            headline: dict[str, Any]) -> Path:
    manifest = report_manifest(ctx, report="calibration", command=command, headline=headline, config={
        "out": str(out_dir), "ground_truth": str(ground_truth) if ground_truth else None, "baseline_rule": rule,
        "games_dirs": [str(d) for d in explore.games_dirs], "explore_max_nodes": explore.max_nodes,
        "explore_seconds": explore.seconds, "random_win_threshold": RANDOM_WIN_THRESHOLD,
        "spike_conditional_max": SPIKE_CONDITIONAL_MAX, "effort_spike_ratio": EFFORT_SPIKE_RATIO,
        "baseline_move_min": BASELINE_MOVE_MIN})
    return publish_report(manifest, "Calibration report", sections, LABELS, figures, out_dir / "calibration.html",
                          subtitle="Does each game pass the human inclusion bar, and where do people struggle?")
