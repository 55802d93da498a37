"""Solvability per game: players, full solvers, the inclusion bar, per-level completion with Wilson
intervals, and the drop-off level (spec/study-protocol.md §3, "Inclusion bar" and "Diagnosis").

Players are analysis attempts (first contact, attempt rules met, not low effort). A player completed
level `l` when the attempt's levels_completed >= l. The drop-off level is where the completion rate falls
most from the previous level (the rate before level 1 is 100 %); ties go to the earliest level.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.core.config import BuildConfig


def game_levels_for(attempts: pl.DataFrame, games: pl.DataFrame) -> pl.DataFrame:
    """game_id -> n_levels for every game with participant recordings (unknown: the deepest level reached)."""
    seen = attempts.group_by("game_id").agg(pl.col("levels_completed").max().alias("deepest"))
    return (seen.join(games, on="game_id", how="left")
            .select("game_id", pl.col("n_levels"),
                    pl.coalesce("n_levels", pl.max_horizontal(pl.col("deepest"), pl.lit(1))).alias("n_eff"))
            .sort("game_id"))


def level_completion(attempts: pl.DataFrame, games: pl.DataFrame, config: BuildConfig) -> pl.DataFrame:
    """out_arc3__level_completion."""
    from statsmodels.stats.proportion import proportion_confint  # slow to import: only when needed

    conf = config.solvability.confidence_level
    analysis = attempts.filter(pl.col("is_analysis_attempt"))
    glv = game_levels_for(attempts, games)
    levels = (glv.select("game_id", pl.int_ranges(1, pl.col("n_eff") + 1).alias("level_index"))
              .explode("level_index").with_columns(pl.col("level_index").cast(pl.Int64)))
    players = analysis.group_by("game_id").agg(pl.len().cast(pl.Int64).alias("n_players"))
    counts = (levels.join(analysis.select("game_id", "levels_completed"), on="game_id", how="left")
              .group_by("game_id", "level_index")
              .agg((pl.col("levels_completed") >= pl.col("level_index")).sum().cast(pl.Int64).alias("n_completers")))
    df = (levels.join(counts, on=["game_id", "level_index"], how="left").join(players, on="game_id", how="left")
          .with_columns(pl.col("n_players", "n_completers").fill_null(0)).sort("game_id", "level_index"))
    k, n = df["n_completers"].to_numpy(), df["n_players"].to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        low, high = proportion_confint(k, np.where(n > 0, n, 1), alpha=1 - conf, method="wilson")
    df = df.with_columns(
        pl.when(pl.col("n_players") > 0).then(pl.col("n_completers") / pl.col("n_players")).alias("completion_rate"),
        pl.when(pl.col("n_players") > 0).then(pl.Series(np.clip(low, 0, 1))).alias("completion_ci_low"),
        pl.when(pl.col("n_players") > 0).then(pl.Series(np.clip(high, 0, 1))).alias("completion_ci_high"),
        pl.lit(conf).alias("confidence_level"),
    )
    prev_n = pl.col("n_completers").shift(1).over("game_id")
    # the players lost at each level, a whole number: the drop is that over the players, so equal losses give
    # equal drops (a difference of two rates, 0.7 - 0.4 against 1.0 - 0.7, sent a tie to the later level)
    lost = pl.when(pl.col("level_index") == 1).then(pl.col("n_players")).otherwise(prev_n) - pl.col("n_completers")
    df = df.with_columns(
        pl.when(pl.col("n_players") > 0).then(lost / pl.col("n_players")).alias("completion_drop"),
        pl.when(pl.col("level_index") == 1).then(pl.col("completion_rate"))
        .otherwise(pl.when(prev_n > 0).then(pl.col("n_completers") / prev_n)).alias("conditional_completion_rate"),
        lost.alias("_lost"),
    )
    best = (df.filter(pl.col("_lost") > 0).sort("game_id", "_lost", "level_index", descending=[False, True, False])
            .group_by("game_id", maintain_order=True).first()
            .select("game_id", pl.col("level_index").alias("drop_off_level")))
    df = df.drop("_lost")
    return (df.join(best, on="game_id", how="left")
            .with_columns((pl.col("level_index") == pl.col("drop_off_level")).fill_null(False)
                          .alias("is_drop_off_level"))
            .drop("drop_off_level").sort("game_id", "level_index"))


def game_solvability(attempts: pl.DataFrame, completion: pl.DataFrame, games: pl.DataFrame,
                     config: BuildConfig) -> pl.DataFrame:
    """out_arc3__game_solvability."""
    bar = config.solvability.min_full_solvers
    analysis = attempts.filter(pl.col("is_analysis_attempt"))
    glv = game_levels_for(attempts, games)
    per = analysis.group_by("game_id").agg(pl.len().cast(pl.Int64).alias("n_players"),
                                           pl.col("is_fully_solved").sum().cast(pl.Int64).alias("n_full_solvers"))
    drop = (completion.filter(pl.col("is_drop_off_level"))
            .select("game_id", pl.col("level_index").alias("drop_off_level"),
                    pl.col("completion_drop").alias("max_completion_drop")))
    return (glv.select("game_id", "n_levels").join(per, on="game_id", how="left")
            .with_columns(pl.col("n_players", "n_full_solvers").fill_null(0))
            .with_columns(
                pl.when(pl.col("n_players") > 0).then(pl.col("n_full_solvers") / pl.col("n_players"))
                .alias("full_solve_rate"),
                pl.lit(bar, pl.Int64).alias("min_full_solvers"),
                (pl.col("n_full_solvers") >= bar).alias("is_included"))
            .join(drop, on="game_id", how="left").sort("game_id"))
