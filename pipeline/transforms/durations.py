"""Attempt durations and the paper's summary statistics (spec/study-protocol.md §3: median attempt 7.4
minutes; successful 8.1; unsuccessful 5.9; unsuccessful under 20 minutes 4.7).

Over analysis attempts with a known duration, per game and for all games together (`scope_id = "all"`),
in four groups: all, successful (fully solved), unsuccessful, and unsuccessful shorter than the soft limit
(attempts.soft_limit_s). Every scope gets all four rows, with n_attempts 0 and null statistics when empty.
Medians are the usual ones (mean of the two middle values); quartiles interpolate linearly.
"""

from __future__ import annotations

import polars as pl

from pipeline.core.config import BuildConfig
from schemas.outputs_arc3 import OUTCOME_GROUPS


def _group_expr(group: str, soft_limit_s: float) -> pl.Expr:
    solved = pl.col("is_fully_solved")
    return {
        "all": pl.lit(True),
        "successful": solved,
        "unsuccessful": ~solved,
        "unsuccessful_under_soft_limit": ~solved & (pl.col("duration_s") < soft_limit_s),
    }[group]


def durations_summary(attempts: pl.DataFrame, config: BuildConfig) -> pl.DataFrame:
    """out_arc3__durations_summary."""
    a = attempts.filter(pl.col("is_analysis_attempt") & pl.col("duration_s").is_not_null())
    scopes = ["all", *sorted(attempts["game_id"].unique().to_list())]
    frames = []
    for group in OUTCOME_GROUPS:
        sub = a.filter(_group_expr(group, config.attempts.soft_limit_s))
        both = pl.concat([sub.with_columns(pl.lit("all").alias("scope_id")),
                          sub.with_columns(pl.col("game_id").alias("scope_id"))])
        stats = both.group_by("scope_id").agg(
            pl.len().cast(pl.Int64).alias("n_attempts"),
            pl.col("duration_s").median().alias("median_duration_s"),
            pl.col("duration_s").mean().alias("mean_duration_s"),
            pl.col("duration_s").quantile(0.25, interpolation="linear").alias("p25_duration_s"),
            pl.col("duration_s").quantile(0.75, interpolation="linear").alias("p75_duration_s"),
        )
        frames.append(pl.DataFrame({"scope_id": scopes}).join(stats, on="scope_id", how="left")
                      .with_columns(pl.lit(group).alias("outcome_group"), pl.col("n_attempts").fill_null(0)))
    order = {g: i for i, g in enumerate(OUTCOME_GROUPS)}
    return (pl.concat(frames).with_columns(pl.col("outcome_group").replace_strict(order).alias("_o"))
            .sort(pl.col("scope_id") != "all", "scope_id", "_o").drop("_o"))
