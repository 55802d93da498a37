"""Figures of ``arcstudy score`` (altair), saved with ``pipeline.core.figures.save_figure``:

- ``level_scores_heatmap__<policy>``: games x levels, the level scores of each game's best run (the run that
  gives the game score), one figure per policy (a game whose best run is unscorable has no cells);
- ``policy_sensitivity``: each scored run's score under every policy scored (policies in release order, one
  line per run, coloured by game), drawn when at least two policies were scored.

The tables behind them are out_arc3__level_scores / out_arc3__game_scores and out_arc3__policy_sensitivity.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.core.figures import alt, save_figure

from .run import POLICY_ORDER, ScoreResult, policy_slug

__all__ = ["heatmap_chart", "save_score_figures", "score_scale", "sensitivity_chart"]


def score_scale(values: pl.Series, step: float = 25.0) -> tuple[list[float], list[float]]:
    """(domain, legend values) of a score colour or axis scale: from 0 (or the lowest score, if below) to 100 (or the
    highest score, if above: a level score can exceed 100 under policies that reward beating the baseline), never
    rounded, and labels both ends plus every `step` not crowding them (within 15 % of the range), so the legend spans
    every value a cell shows and shows its ends."""
    finite = values.drop_nulls().cast(pl.Float64)
    finite = finite.filter(finite.is_finite())
    lo = min(0.0, float(finite.min())) if finite.len() else 0.0
    hi = max(100.0, float(finite.max())) if finite.len() else 100.0
    gap = 0.15 * (hi - lo)
    ticks = [lo]
    tick = (lo // step + 1) * step
    while tick < hi:
        if tick - lo >= gap and hi - tick >= gap:
            ticks.append(tick)
        tick += step
    return [lo, hi], ticks + [hi]


def heatmap_chart(levels: pl.DataFrame, games: pl.DataFrame, policy_id: str) -> alt.TopLevelMixin | None:
    g = games.filter(pl.col("policy_id") == policy_id)
    if g.height == 0:
        return None
    best = (levels.filter(pl.col("policy_id") == policy_id)
            .join(g.select("game_id", pl.col("best_play_id").alias("play_id")), on=["game_id", "play_id"])
            .select("game_id", "level_index", "level_score", "n_actions", "level_baseline", "is_level_completed"))
    if best.height == 0:
        return None
    order = g.sort("game_id")["game_id"].to_list()
    domain, ticks = score_scale(best["level_score"])
    base = alt.Chart(best).encode(
        x=alt.X("level_index:O", title="level", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("game_id:N", title=None, sort=order))
    rect = base.mark_rect().encode(
        color=alt.Color("level_score:Q", title="level score (%)",
                        scale=alt.Scale(domain=domain, nice=False, scheme="viridis"),
                        legend=alt.Legend(values=ticks, format=".0f", labelOverlap=False,
                                          gradientLength=max(100, 18 * len(order)))),
        tooltip=["game_id:N", "level_index:O", alt.Tooltip("level_score:Q", format=".2f"), "n_actions:Q",
                 "level_baseline:Q", "is_level_completed:N"])
    text = base.mark_text(fontSize=9).encode(
        text=alt.Text("level_score:Q", format=".0f"),
        color=alt.condition(alt.datum.level_score > 60, alt.value("black"), alt.value("white")))
    return (rect + text).properties(width=alt.Step(28), height=alt.Step(18),
                                    title=f"Level scores of each game's best run ({policy_id})")


def sensitivity_chart(runs: pl.DataFrame) -> alt.TopLevelMixin | None:
    policies = sorted(runs["policy_id"].unique().to_list(), key=lambda p: POLICY_ORDER.get(p, len(POLICY_ORDER)))
    if len(policies) < 2 or runs.height == 0:
        return None
    df = runs.select("policy_id", "play_id", "game_id", "score")
    domain, _ = score_scale(df["score"])
    base = alt.Chart(df).encode(
        x=alt.X("policy_id:N", title="scoring policy", sort=policies, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("score:Q", title="run score (%)", scale=alt.Scale(domain=domain, nice=False)),
        color=alt.Color("game_id:N", title="game"),
        detail="play_id:N",
        tooltip=["play_id:N", "game_id:N", "policy_id:N", alt.Tooltip("score:Q", format=".3f")])
    return (base.mark_line(opacity=0.6) + base.mark_point(filled=True)).properties(
        width=120 * len(policies), height=320, title="How each run's score moves between policies")


def save_score_figures(result: ScoreResult, out_dir: Path) -> dict[str, dict[str, Path]]:
    """Write every figure that has data; returns {name: {"png"|"svg"|"json": path}}."""
    saved = {}
    levels = result.tables["out_arc3__level_scores"]
    games = result.tables["out_arc3__game_scores"]
    for pr in result.policies:
        chart = heatmap_chart(levels, games, pr.policy.policy_id)
        if chart is not None:
            name = f"level_scores_heatmap__{policy_slug(pr.policy.policy_id)}"
            saved[name] = save_figure(chart, out_dir, name)
    chart = sensitivity_chart(result.tables["out_arc3__run_scores"])
    if chart is not None:
        saved["policy_sensitivity"] = save_figure(chart, out_dir, "policy_sensitivity")
    return saved
