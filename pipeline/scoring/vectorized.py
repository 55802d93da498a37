"""Set-based RHAE scoring in polars: the rules of ``pipeline.scoring.rhae`` over whole tables of plays.

Same rules, same arithmetic, same order of floating-point operations as the pure functions, so the numbers are
the same (tests/unit/test_scoring_vectorized.py compares both on thousands of random plays):

- levels are paired with cumulative entries by position; level ``i <= k`` costs ``c_i - c_{i-1}``, level
  ``k+1`` the remainder ``actions - c_k`` (dropped when ``k == n``), later levels 0 (``counting.per_level_actions``);
- unscorable plays (no metadata, empty baseline, more entries than baseline values) score 0 with the toolkit's
  message (``rhae.unscorable_reason``);
- level score ``min(cap, 100 * (b/a) ** k)`` when completed with ``a > 0`` and ``b > 0``; the policy's action
  cutoff zeroes the first completed level over ``ceil(m * b)`` and every later one;
- play score: weighted mean, summed level by level in level order (a sequential cumulative sum, as Python's
  ``sum``), capped by the weighted share of positive levels when the policy says so;
- game score: the best play (first one on ties, in ``run_order``); total: mean over games in game-id order.

Input frames:

``plays``: ``play_id`` (str, unique), ``game_id`` (str), ``run_order`` (int, order of the play in its game's card,
unique within a game),
``actions`` (int), ``cumulative`` (list[int]: the cumulative action counts of the play's
``actions_by_level`` pairs).

``games``: ``game_id``, ``baseline_actions`` (list[int], null or empty = metadata without a baseline). A game
absent from ``games`` has no metadata.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from .policies import ScoringPolicy, get_policy
from .rhae import MSG_BASELINE_MISSING, MSG_BASELINE_SIZE_MISMATCH, no_metadata_message

__all__ = ["VectorizedScores", "score_plays_frame"]

PLAYS_SCHEMA = {"play_id": pl.String, "game_id": pl.String, "run_order": pl.Int64, "actions": pl.Int64,
                "cumulative": pl.List(pl.Int64)}
GAMES_SCHEMA = {"game_id": pl.String, "baseline_actions": pl.List(pl.Int64)}


@dataclass(frozen=True)
class VectorizedScores:
    """``runs``: one row per play in input order (play_id, game_id, run_order, score, levels_completed, message,
    cutoff_level, n_levels, is_best). ``levels``: one row per scorable play and baseline level (play_id, game_id, level_index,
    level_actions, level_baseline, is_level_completed, level_budget, level_score). ``games``: one row per game
    with plays (game_id, score, best_play_id, n_runs). ``total``: mean of the game scores."""

    policy_id: str
    runs: pl.DataFrame
    levels: pl.DataFrame
    games: pl.DataFrame
    total: float


def _empty_levels() -> pl.DataFrame:
    return pl.DataFrame(schema={"play_id": pl.String, "game_id": pl.String, "level_index": pl.Int64,
                                "level_actions": pl.Int64, "level_baseline": pl.Int64,
                                "is_level_completed": pl.Boolean, "level_budget": pl.Int64,
                                "level_score": pl.Float64})


def score_plays_frame(plays: pl.DataFrame, games: pl.DataFrame, policy: ScoringPolicy | str | None = None
                      ) -> VectorizedScores:
    """Score every play of ``plays`` against the baselines of ``games`` under ``policy`` (module docstring)."""
    pol = get_policy(policy)
    plays = plays.select(list(PLAYS_SCHEMA)).cast(PLAYS_SCHEMA)  # type: ignore[arg-type]
    games = games.select(list(GAMES_SCHEMA)).cast(GAMES_SCHEMA).with_columns(has_metadata=pl.lit(True))  # type: ignore[arg-type]
    if games["game_id"].is_duplicated().any():
        raise ValueError("games: one row per game_id expected")
    if plays["play_id"].is_duplicated().any():
        raise ValueError("plays: play_id must be unique")

    p = (plays.with_row_index("_row").join(games, on="game_id", how="left", maintain_order="left")
         .with_columns(pl.col("has_metadata").fill_null(False),
                       k=pl.col("cumulative").list.len().cast(pl.Int64),
                       n=pl.col("baseline_actions").list.len().fill_null(0).cast(pl.Int64)))
    p = p.with_columns(
        message=pl.when(~pl.col("has_metadata"))
        .then(pl.format(no_metadata_message("{}"), pl.col("game_id")))
        .when(pl.col("n") == 0).then(pl.lit(MSG_BASELINE_MISSING))
        .when(pl.col("k") > pl.col("n")).then(pl.lit(MSG_BASELINE_SIZE_MISMATCH))
        .otherwise(pl.lit(None, pl.String)),
        last_cum=pl.col("cumulative").list.last().fill_null(0),
    )

    scorable = p.filter(pl.col("message").is_null())
    if scorable.height:
        levels = _levels(scorable, pol)
    else:
        levels = _empty_levels()

    per_play = _play_scores(levels, pol)
    runs = (p.join(per_play, on="_row", how="left", maintain_order="left")
            .select("play_id", "game_id", "run_order",
                    pl.col("play_score").fill_null(0.0).alias("score"),
                    pl.col("k").alias("levels_completed"), "message", "cutoff_level",
                    pl.when(pl.col("message").is_null()).then(pl.col("n")).alias("n_levels")))
    # Best play: the highest score, the first in card order on ties (rhae.best_play_index).
    best = runs.group_by("game_id").agg(
        pl.col("play_id").sort_by("score", "run_order", descending=[True, False]).first().alias("best_play_id"),
        pl.col("score").max().alias("score"), pl.len().cast(pl.Int64).alias("n_runs"))
    runs = runs.with_columns(is_best=pl.col("play_id").is_in(best["best_play_id"].implode()))
    games_out = best.select("game_id", "score", "best_play_id", "n_runs").sort("game_id")
    total = 0.0
    if games_out.height:
        # Sequential sum in game-id order, then one division (rhae.mean_game_score).
        total = float(games_out["score"].cum_sum()[-1] / games_out.height)
    return VectorizedScores(policy_id=pol.policy_id, runs=runs, levels=levels.select(_empty_levels().columns),
                            games=games_out, total=total)


def _levels(scorable: pl.DataFrame, pol: ScoringPolicy) -> pl.DataFrame:
    """One row per (scorable play, baseline level), in play order then level order (rows of a play are
    contiguous, which the running sums below rely on instead of window functions)."""
    k, n = pl.col("k"), pl.col("n")
    padded = pl.concat_list(pl.col("cumulative"), pl.lit(0, pl.Int64).repeat_by(n - k)).list.head(n)
    lv = (scorable.select("play_id", "game_id", "_row", "actions", "k", "n", "last_cum",
                          padded.alias("cum_i"),
                          pl.int_ranges(1, n + 1, dtype=pl.Int64).alias("level_index"),
                          pl.col("baseline_actions").alias("level_baseline"))
          .explode("cum_i", "level_index", "level_baseline")
          .with_columns(pl.col("_row").set_sorted()))
    i = pl.col("level_index")
    # counting.per_level_actions: c_i - c_{i-1} for completed levels (the previous row is level i-1 of the
    # same play), the remainder on level k+1, 0 after.
    cum_prev = pl.when(i == 1).then(pl.lit(0, pl.Int64)).otherwise(pl.col("cum_i").shift(1))
    lv = lv.with_columns(
        level_actions=pl.when(i <= k).then(pl.col("cum_i") - cum_prev)
        .when(i == k + 1).then(pl.col("actions") - pl.col("last_cum"))
        .otherwise(pl.lit(0, pl.Int64)).cast(pl.Int64),
        is_level_completed=i <= k,
    )
    a = pl.col("level_actions")
    b = pl.col("level_baseline")
    if pol.action_cutoff_multiplier is not None:
        lv = lv.with_columns(level_budget=(b.cast(pl.Float64) * pol.action_cutoff_multiplier).ceil().cast(pl.Int64))
        over = (pl.col("is_level_completed") & (a > pl.col("level_budget"))).cast(pl.Int64)
        # "an earlier or this level of the play went over": a running count of overs minus the count at the
        # play's first level (integer arithmetic, exact).
        running = over.cum_sum()
        at_start = pl.when(i == 1).then(running - over).forward_fill()
        lv = lv.with_columns(is_cut=(running - at_start) > 0, is_over=over > 0)
    else:
        lv = lv.with_columns(level_budget=pl.lit(None, pl.Int64), is_cut=pl.lit(False), is_over=pl.lit(False))
    scored = pl.col("is_level_completed") & (b > 0) & (a > 0)
    ratio = pl.when(scored).then(b.cast(pl.Float64) / a.cast(pl.Float64))
    exponent = pol.efficiency_exponent
    efficiency = ratio.map_batches(lambda s: _python_pow(s, exponent), return_dtype=pl.Float64)
    raw = pl.min_horizontal(pl.lit(float(pol.level_cap)), pl.lit(100.0) * efficiency)
    zero_action = pl.lit(0.0) if pol.completed_zero_action_level_scores_zero else pl.lit(float(pol.level_cap))
    score = (pl.when(~pl.col("is_level_completed") | (b <= 0)).then(pl.lit(0.0))
             .when(a <= 0).then(zero_action)
             .otherwise(raw))
    return lv.with_columns(level_score=pl.when(pl.col("is_cut")).then(pl.lit(0.0)).otherwise(score))


def _python_pow(ratios: pl.Series, exponent: int) -> pl.Series:
    """``r ** exponent`` with Python's float power (C ``pow``), once per distinct ratio.

    ``r * r`` or polars' ``pow`` differ from ``pow(r, 2.0)`` in the last bit for about 1 ratio in 1000; going
    through Python's operator on the distinct values keeps the result bit-identical to ``rhae.level_score``
    while staying set-based (a few distinct ratios per baseline value, not one call per level row)."""
    distinct = ratios.drop_nulls().unique()
    if distinct.len() == 0:
        return ratios
    powered = pl.Series([r ** exponent for r in distinct.to_list()], dtype=pl.Float64)
    return ratios.replace_strict(distinct, powered, default=None, return_dtype=pl.Float64)


def _play_scores(levels: pl.DataFrame, pol: ScoringPolicy) -> pl.DataFrame:
    """Play scores from the level rows (rhae.game_score_from_levels). The weighted sum adds the levels left
    to right, as Python's ``sum`` does: one list per play, folded position by position (a level a play does
    not have adds 0.0 at the end, which changes nothing)."""
    if levels.height == 0:
        return pl.DataFrame(schema={"_row": pl.UInt32, "play_score": pl.Float64, "cutoff_level": pl.Int64})
    i = pl.col("level_index")
    w = i if pol.level_weights == "level-index" else pl.lit(1, pl.Int64)
    per_play = levels.with_columns(w=w.cast(pl.Int64)).group_by("_row", maintain_order=True).agg(
        (pl.col("w").cast(pl.Float64) * pl.col("level_score")).alias("ws"),
        pl.col("w").sum().alias("total_weight"),
        pl.col("w").filter(pl.col("level_score") > 0).sum().alias("positive_weight"),
        i.filter(pl.col("is_over")).first().alias("cutoff_level"),
    )
    longest = int(per_play["ws"].list.len().max() or 0)
    weighted_sum = pl.lit(0.0)
    for j in range(longest):
        weighted_sum = weighted_sum + pl.col("ws").list.get(j, null_on_oob=True).fill_null(0.0)
    total = pl.col("total_weight").cast(pl.Float64)
    weighted = weighted_sum / total
    if pol.game_cap == "positive-level-weight-share":
        share = (pl.lit(100.0) * pl.col("positive_weight").cast(pl.Float64)) / total
        score = pl.min_horizontal(weighted, share)
    else:
        score = weighted
    return per_play.select("_row", score.alias("play_score"), "cutoff_level")
