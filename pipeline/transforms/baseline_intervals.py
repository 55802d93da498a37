"""out_arc3__baseline_intervals: how sure each baseline of out_arc3__level_baselines is (pure).

For every game, level and rule with a baseline value, the completers' costs (out_arc3__baseline_costs: every
kind of human evidence, recordings, card summaries and counts files alike) give the distribution-free interval
and the one-more-tester moves of `pipeline.scoring.baseline_intervals`.
"""

from __future__ import annotations

import polars as pl

from pipeline.scoring.baseline_intervals import DEFAULT_CONFIDENCE, baseline_interval
from schemas.validate import conform

TABLE = "out_arc3__baseline_intervals"


def baseline_intervals(costs: pl.DataFrame, level_baselines: pl.DataFrame,
                       confidence: float = DEFAULT_CONFIDENCE) -> pl.DataFrame:
    """`costs`: out_arc3__baseline_costs rows; `level_baselines`: out_arc3__level_baselines rows."""
    per_level: dict[tuple[str, int], list[int]] = {}
    for g, lvl, c in costs.select("game_id", "level_index", "level_cost").iter_rows():
        per_level.setdefault((g, lvl), []).append(c)
    rows = []
    for row in level_baselines.filter(pl.col("baseline_value").is_not_null()).sort(
            "game_id", "level_index", "baseline_rule").iter_rows(named=True):
        found = baseline_interval(per_level.get((row["game_id"], row["level_index"]), []), row["baseline_rule"],
                                  confidence)
        if found is None:
            continue
        rows.append({
            "game_id": row["game_id"], "level_index": row["level_index"], "baseline_rule": row["baseline_rule"],
            "baseline_value": row["baseline_value"], "n_completers": found.n_completers,
            "baseline_quantile": found.quantile, "confidence_level": confidence,
            "interval_lower": found.lower, "interval_upper": found.upper,
            "interval_lower_rank": found.lower_rank, "interval_upper_rank": found.upper_rank,
            "interval_coverage": found.coverage, "is_interval_at_level": found.reaches_level,
            "interval_relative_width": found.relative_width,
            "baseline_with_one_more_fastest": found.with_one_more_fastest,
            "baseline_with_one_more_slowest": found.with_one_more_slowest,
            "is_default_rule": row["is_default_rule"],
        })
    return conform(TABLE, rows)
