"""Efficiency reference points per level, as in the paper's Figure 6: optimal, best first run, baseline.

- best first run: the fewest actions any eligible first-run participant needed on the level (the `best`
  rule over the same completer costs as the baselines, so possibly different people per level);
- baseline: the configured rule (baselines.rule);
- optimal: the fewest actions once the mechanics are known, from the state-graph explorer. It is null
  unless an *optimal source* fills it, which is the hook for the explorer:

      fill_optimal(points, source, source_name)

  `source` is either a callable `f(game_id, level_index) -> int | None` or a frame with columns game_id,
  level_index, optimal_actions (optional optimal_source). `arcstudy build` finds a source in this order:
  the `--optimal FILE` option, `reference_points.optimal_table`, `reference_points.optimal_provider`
  ("module:function", imported at build time). Nothing else in the pipeline needs to change to wire it.

best_minus_optimal is the cost of exploration and learning (the paper's reading of the gap).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

import polars as pl

OptimalCallable = Callable[[str, int], "int | None"]
OptimalSource = OptimalCallable | pl.DataFrame


def reference_points(level_baselines: pl.DataFrame, rule: str) -> pl.DataFrame:
    """out_arc3__level_reference_points with optimal_actions still null."""
    best = (level_baselines.filter(pl.col("baseline_rule") == "best")
            .select("game_id", "level_index", pl.col("baseline_value").cast(pl.Int64).alias("best_first_run_actions")))
    chosen = (level_baselines.filter(pl.col("baseline_rule") == rule)
              .select("game_id", "level_index", "baseline_value", "baseline_rule", "n_completers"))
    return (chosen.join(best, on=["game_id", "level_index"], how="left")
            .with_columns(pl.lit(None, pl.Int64).alias("optimal_actions"),
                          pl.lit(None, pl.String).alias("optimal_source"),
                          pl.lit(None, pl.Int64).alias("best_minus_optimal"))
            .sort("game_id", "level_index"))


def optimal_frame(points: pl.DataFrame, source: OptimalSource, source_name: str) -> pl.DataFrame:
    """(game_id, level_index, optimal_actions, optimal_source) for the levels in `points`."""
    schema = {"game_id": pl.String, "level_index": pl.Int64, "optimal_actions": pl.Int64, "optimal_source": pl.String}
    if isinstance(source, pl.DataFrame):
        src = _checked_table(source, source_name).select(
            pl.col("game_id").cast(pl.String), pl.col("level_index").cast(pl.Int64),
            pl.col("optimal_actions").cast(pl.Int64),
            (pl.col("optimal_source").cast(pl.String) if "optimal_source" in source.columns
             else pl.lit(source_name)).alias("optimal_source"))
        return src.unique(["game_id", "level_index"], keep="first", maintain_order=True)
    rows = []
    for game_id, level in points.select("game_id", "level_index").iter_rows():
        try:
            value = source(game_id, level)
        except Exception as err:  # noqa: BLE001 - the user's provider: said with where it failed, not a traceback
            raise ValueError(f"optimal provider {source_name} raised {type(err).__name__} for {game_id} level "
                             f"{level}: {err}") from err
        if value is not None:
            rows.append((game_id, level, _optimal_count(value, f"optimal provider {source_name} returned {value!r} "
                                                               f"for {game_id} level {level}"), source_name))
    return pl.DataFrame(rows, schema=schema, orient="row")


MAX_OPTIMAL_ACTIONS = 1_000_000_000  # as a baseline's bound (baseline_sources.baseline_values)


def _whole(value: object) -> int | None:
    """`value` as a whole number (an int, a float that is one, or digits as a CSV cell gives them), else None
    (4.7 was taken as 4, NaN raised from int())."""
    if isinstance(value, str):
        return int(value) if value.strip().isdigit() else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value \
            or not float(value).is_integer():
        return None
    return int(value)


def _optimal_count(value: object, said: str) -> int:
    """An optimal action count: a whole number from 1 to MAX_OPTIMAL_ACTIONS; ValueError with `said` otherwise."""
    count = _whole(value)
    if count is None:
        raise ValueError(f"{said}: not a whole number of actions")
    if not 1 <= count <= MAX_OPTIMAL_ACTIONS:
        raise ValueError(f"{said}: an optimal count is from 1 to {MAX_OPTIMAL_ACTIONS:,} actions")
    return count


def _checked_table(df: pl.DataFrame, source_name: str) -> pl.DataFrame:
    """The table with its columns cast, or ValueError naming what is missing or not a number (checked when the
    table is loaded, so that a bad --optimal file is a usage error and not a failure mid-build)."""
    missing = {"game_id", "level_index", "optimal_actions"} - set(df.columns)
    if missing:
        raise ValueError(f"optimal table {source_name} lacks columns {sorted(missing)}")
    rows = df.select("game_id", "level_index", "optimal_actions",
                     *(["optimal_source"] if "optimal_source" in df.columns else [])).to_dicts()
    seen: dict[tuple[str, int], int] = {}
    for i, row in enumerate(rows, start=2):  # the CSV's line (after its header)
        where = f"optimal table {source_name} row {i}"
        if row["game_id"] is None or not str(row["game_id"]).strip():
            raise ValueError(f"{where}: no game_id")
        level = _whole(row["level_index"])
        if level is None or level < 1:
            raise ValueError(f"{where}: level_index {row['level_index']!r} is not a level (a whole number from 1)")
        count = _optimal_count(row["optimal_actions"], f"{where}: optimal_actions {row['optimal_actions']!r}")
        key = (str(row["game_id"]), level)
        if seen.setdefault(key, count) != count:
            raise ValueError(f"{where}: {key[0]} level {key[1]} is given twice, as {seen[key]} and {count}")
        row["game_id"], row["level_index"], row["optimal_actions"] = key[0], key[1], count
    schema = {"game_id": pl.String, "level_index": pl.Int64, "optimal_actions": pl.Int64,
              **({"optimal_source": pl.String} if "optimal_source" in df.columns else {})}
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def fill_optimal(points: pl.DataFrame, source: OptimalSource | None, source_name: str = "provider") -> pl.DataFrame:
    """Fill optimal_actions (and best_minus_optimal) from a callable or a precomputed table."""
    if source is None:
        return points
    opt = optimal_frame(points, source, source_name)
    out = points.drop("optimal_actions", "optimal_source").join(opt, on=["game_id", "level_index"], how="left")
    return out.with_columns((pl.col("best_first_run_actions") - pl.col("optimal_actions")).alias("best_minus_optimal"))


def load_optimal_source(*, table: Path | str | None = None, provider: str | None = None
                        ) -> tuple[OptimalSource | None, str | None]:
    """Resolve a source: a CSV/Parquet table path, or a 'module:function' provider. (None, None) if neither."""
    if table:
        path = Path(table)
        df = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path)
        return _checked_table(df, str(path)), str(path)
    if provider:
        module, sep, name = provider.partition(":")
        if not sep or not module or not name:
            raise ValueError(f"optimal_provider {provider!r} must look like 'package.module:function'")
        fn = getattr(importlib.import_module(module), name)
        if not callable(fn):
            raise ValueError(f"optimal_provider {provider!r} is not callable")
        return fn, provider
    return None, None
