"""The build's figures (altair), saved with `pipeline.core.figures.save_figure`:

- `durations_by_outcome`: attempt durations (minutes) of analysis attempts, successful vs unsuccessful
  (the paper's Figure 5), with the soft and hard limits drawn;
- `completion_by_level`: per-level completion rate with its Wilson interval, one panel per game;
- `actions_by_level`: actions per level for the three reference points (optimal, best first run,
  baseline), one panel per game (the paper's Figure 6).

Per-game panels are limited to `figures.max_games` games, the most played first (ties by game id).
A figure with no data is skipped (and reported), never drawn empty.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.core.config import BuildConfig
from pipeline.core.figures import alt, save_figure

FIGURE_NAMES = ("durations_by_outcome", "completion_by_level", "actions_by_level")


def top_games(attempts: pl.DataFrame, max_games: int) -> list[str]:
    counts = (attempts.filter(pl.col("is_analysis_attempt")).group_by("game_id").agg(pl.len().alias("n"))
              .sort(["n", "game_id"], descending=[True, False]))
    return counts["game_id"].head(max_games).to_list()


def durations_chart(attempts: pl.DataFrame, config: BuildConfig) -> alt.TopLevelMixin | None:
    df = (attempts.filter(pl.col("is_analysis_attempt") & pl.col("duration_s").is_not_null())
          .select(pl.when(pl.col("is_fully_solved")).then(pl.lit("successful")).otherwise(pl.lit("unsuccessful"))
                  .alias("outcome"), (pl.col("duration_s") / 60).alias("minutes"), "game_id"))
    if df.height == 0:
        return None
    limits = pl.DataFrame({"minutes": [config.attempts.soft_limit_s / 60, config.attempts.duration_less_than_s / 60],
                           "limit": ["soft limit", "hard limit"]})
    box = alt.Chart(df).mark_boxplot(extent="min-max", size=40).encode(
        x=alt.X("outcome:N", title=None, sort=["successful", "unsuccessful"], axis=alt.Axis(labelAngle=0)),
        y=alt.Y("minutes:Q", title="attempt duration (minutes)"),
        color=alt.Color("outcome:N", legend=None))
    rules = alt.Chart(limits).mark_rule(strokeDash=[4, 3], color="gray").encode(y="minutes:Q", tooltip=["limit:N"])
    return (box + rules).properties(width=260, height=300, title="Attempt duration by outcome")


def completion_chart(completion: pl.DataFrame, games: list[str]) -> alt.TopLevelMixin | None:
    df = completion.filter(pl.col("game_id").is_in(games) & pl.col("completion_rate").is_not_null())
    if df.height == 0:
        return None
    base = alt.Chart(df).encode(x=alt.X("level_index:O", title="level", axis=alt.Axis(labelAngle=0)))
    line = base.mark_line(point=True).encode(y=alt.Y("completion_rate:Q", title="completion rate",
                                                     scale=alt.Scale(domain=[0, 1])))
    band = base.mark_errorbar().encode(y=alt.Y("completion_ci_low:Q", title="completion rate"),
                                       y2="completion_ci_high:Q")
    return (band + line).properties(width=180, height=140).facet(
        facet=alt.Facet("game_id:N", title=None), columns=4).properties(title="Completion by level (Wilson intervals)")


def actions_chart(points: pl.DataFrame, games: list[str]) -> alt.TopLevelMixin | None:
    df = (points.filter(pl.col("game_id").is_in(games))
          .select("game_id", "level_index",
                  pl.col("optimal_actions").cast(pl.Float64).alias("optimal"),
                  pl.col("best_first_run_actions").cast(pl.Float64).alias("best first run"),
                  pl.col("baseline_value").alias("baseline"))
          .unpivot(index=["game_id", "level_index"], variable_name="reference", value_name="actions")
          .drop_nulls("actions"))
    if df.height == 0:
        return None
    chart = alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("level_index:O", title="level", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("actions:Q", title="actions", scale=alt.Scale(type="log")),
        color=alt.Color("reference:N", scale=alt.Scale(domain=["optimal", "best first run", "baseline"])))
    return chart.properties(width=180, height=140).facet(
        facet=alt.Facet("game_id:N", title=None), columns=4).properties(title="Actions by level")


def write_figures(out_dir: Path, attempts: pl.DataFrame, completion: pl.DataFrame, points: pl.DataFrame,
                  config: BuildConfig) -> tuple[dict[str, dict[str, Path]], list[str]]:
    """Write the figures; returns ({name: {"png"|"svg"|"json": path}}, [names skipped for lack of data])."""
    games = top_games(attempts, config.figures.max_games)
    charts = {
        "durations_by_outcome": durations_chart(attempts, config),
        "completion_by_level": completion_chart(completion, games),
        "actions_by_level": actions_chart(points, games),
    }
    written, skipped = {}, []
    for name, chart in charts.items():
        if chart is None:
            skipped.append(name)
            for suffix in (".png", ".svg", ".vl.json"):  # never leave a stale figure from an earlier build
                (out_dir / f"{name}{suffix}").unlink(missing_ok=True)
            continue
        written[name] = save_figure(chart, out_dir, name)
    return written, skipped
