"""An explainable low-effort detector (spec/study-protocol.md §3, "Low-effort behaviour").

The paper excluded a small subset of participants who "cycled rapidly through environments with minimal
engagement, abandoning harder ones to attempt more easy ones". The detector judges *units*: a session from
the session manifest, or, for a participant recording in no manifest, the recording itself (play-level
fallback). Every feature is a plain number in `out_study__session_features`; every criterion that fires
is a reason code; the decision rule is one line:

    session:   n_environments >= min_environments
               AND high_abandonment
               AND (low_time_vs_cohort OR low_actions_vs_cohort OR many_short_plays)
    recording: abandoned AND low_time_vs_cohort AND low_actions_vs_cohort   (play_relative_max)

Features, per unit (games are aggregated first, so a game played twice counts once):
- n_environments, n_recordings, n_actions, interaction_s, environments_per_hour;
- median actions and median time per game;
- n_abandoned / abandonment_rate: games left unsolved before the soft limit (reaching the soft limit is
  not abandoning: participants were prompted to conclude there);
- short_play_share: games with no more than attempts.actions_more_than actions (not even an attempt);
- relative_actions_median / relative_duration_median: the median over the unit's games of its actions
  (time) on the game divided by the cohort median on the same game. Per-game ratios remove difficulty:
  a slow participant on a hard game scores near or above 1. Cohort medians come from every participant
  recording of the game (the detector's own targets included: a median is robust to a small subset), and
  only for games with at least min_cohort_recordings recordings.

Reason codes: high_abandonment, low_time_vs_cohort, low_actions_vs_cohort, many_short_plays (sessions);
abandoned, low_time_vs_cohort, low_actions_vs_cohort, short_play (recordings). A code fires whether or not
the unit is excluded, so a kept unit shows how close it came.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline.core.config import BuildConfig


@dataclass(frozen=True)
class LowEffortResult:
    features: pl.DataFrame  # out_study__session_features
    exclusions: pl.DataFrame  # out_study__low_effort_exclusions
    excluded_guids: pl.Series


def cohort_medians(recordings: pl.DataFrame, min_recordings: int) -> pl.DataFrame:
    """game_id -> median actions and median duration over the game's participant recordings."""
    return (recordings.group_by("game_id").agg(
        pl.len().alias("n_cohort"),
        pl.col("n_actions").median().alias("cohort_actions"),
        pl.col("duration_s").median().alias("cohort_duration_s"),
    ).filter(pl.col("n_cohort") >= min_recordings))


def _ratio(num: str, den: str) -> pl.Expr:
    return pl.when(pl.col(den) > 0).then(pl.col(num) / pl.col(den))


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def detect_low_effort(recordings: pl.DataFrame, config: BuildConfig) -> LowEffortResult:
    """`recordings`: participant recordings with the attempt rules applied (attempts.apply_attempt_rules)."""
    le, soft = config.low_effort, config.attempts.soft_limit_s
    short = config.attempts.actions_more_than
    cohort = cohort_medians(recordings, le.min_cohort_recordings)
    rec = recordings.with_columns(
        pl.coalesce("session_id", "guid").alias("unit_id"),
        pl.when(pl.col("session_id").is_not_null()).then(pl.lit("session")).otherwise(pl.lit("recording"))
        .alias("unit_kind"),
    )
    games = (rec.group_by("unit_id", "game_id").agg(
        pl.col("unit_kind").first(), pl.col("session_id").first(), pl.col("participant_id").first(),
        pl.len().alias("n_rec"),
        pl.col("n_actions").sum(),
        pl.col("duration_s").sum().alias("duration_s"),
        pl.col("duration_s").is_null().all().alias("no_time"),
        pl.col("is_fully_solved").any(),
    ).with_columns(pl.when(pl.col("no_time")).then(None).otherwise(pl.col("duration_s")).alias("duration_s"))
        # in a fixed order: the unit's float sums below then add its games' durations in the same order every
        # build (group_by's order varies, and 90.693506 once came out 90.69350599999999 in one build of seven)
        .sort("unit_id", "game_id")
        .join(cohort, on="game_id", how="left", maintain_order="left")
        .with_columns(
            (~pl.col("is_fully_solved") & (pl.col("duration_s").is_null() | (pl.col("duration_s") < soft)))
            .alias("abandoned"),
            (pl.col("n_actions") <= short).alias("short"),
            _ratio("n_actions", "cohort_actions").alias("rel_actions"),
            _ratio("duration_s", "cohort_duration_s").alias("rel_duration"),
    ))
    units = games.group_by("unit_id", maintain_order=True).agg(
        pl.col("unit_kind").first(), pl.col("session_id").first(), pl.col("participant_id").first(),
        pl.len().cast(pl.Int64).alias("n_environments"),
        pl.col("n_rec").sum().cast(pl.Int64).alias("n_recordings"),
        pl.col("n_actions").sum().cast(pl.Int64),
        pl.col("duration_s").sum().alias("interaction_s"),
        pl.col("duration_s").is_null().all().alias("no_time"),
        pl.col("n_actions").median().cast(pl.Float64).alias("median_actions_per_environment"),
        pl.col("duration_s").median().alias("median_environment_duration_s"),
        pl.col("abandoned").sum().cast(pl.Int64).alias("n_abandoned"),
        pl.col("short").mean().alias("short_play_share"),
        pl.col("rel_actions").median().alias("relative_actions_median"),
        pl.col("rel_duration").median().alias("relative_duration_median"),
    ).with_columns(
        pl.when(pl.col("no_time")).then(None).otherwise(pl.col("interaction_s")).alias("interaction_s"),
    ).with_columns(
        (pl.col("n_abandoned") / pl.col("n_environments")).alias("abandonment_rate"),
        pl.when(pl.col("interaction_s") > 0).then(pl.col("n_environments") / (pl.col("interaction_s") / 3600))
        .alias("environments_per_hour"),
    )
    session = pl.col("unit_kind") == "session"
    rel_max = pl.when(session).then(pl.lit(le.relative_max)).otherwise(pl.lit(le.play_relative_max))
    low_time = (pl.col("relative_duration_median") <= rel_max).fill_null(False)
    low_actions = (pl.col("relative_actions_median") <= rel_max).fill_null(False)
    high_aband = (pl.col("abandonment_rate") >= le.abandonment_rate_min).fill_null(False)
    many_short = (pl.col("short_play_share") >= le.short_play_share_min).fill_null(False)
    units = units.with_columns(
        pl.when(session).then(pl.concat_list(
            pl.when(high_aband).then(pl.lit("high_abandonment")),
            pl.when(low_time).then(pl.lit("low_time_vs_cohort")),
            pl.when(low_actions).then(pl.lit("low_actions_vs_cohort")),
            pl.when(many_short).then(pl.lit("many_short_plays")),
        )).otherwise(pl.concat_list(
            pl.when(pl.col("n_abandoned") > 0).then(pl.lit("abandoned")),
            pl.when(low_time).then(pl.lit("low_time_vs_cohort")),
            pl.when(low_actions).then(pl.lit("low_actions_vs_cohort")),
            pl.when(pl.col("short_play_share") >= 1).then(pl.lit("short_play")),
        )).list.drop_nulls().alias("reason_codes"),
        (pl.lit(le.enabled) & pl.when(session).then(
            (pl.col("n_environments") >= le.min_environments) & high_aband & (low_time | low_actions | many_short)
        ).otherwise(
            pl.lit(le.play_level_fallback) & (pl.col("n_abandoned") > 0) & low_time & low_actions
        )).alias("is_low_effort_excluded"),
    ).sort("unit_id")
    units = units.with_columns(pl.Series("reason", [_explain(r, config) for r in units.iter_rows(named=True)],
                                         dtype=pl.String))

    excluded_units = units.filter(pl.col("is_low_effort_excluded")).select("unit_id", "reason_codes")
    exclusions = (rec.join(excluded_units, on="unit_id")
                  .select("unit_id", "guid", "game_id", "session_id", "participant_id", "n_actions", "duration_s",
                          "levels_completed", "is_fully_solved", "is_attempt", "reason_codes")
                  .sort("unit_id", "guid"))
    return LowEffortResult(features=units, exclusions=exclusions, excluded_guids=exclusions["guid"])


def _explain(u: dict, config: BuildConfig) -> str:
    le = config.low_effort
    if u["unit_kind"] == "session":
        facts = (f"{u['n_environments']} games, {u['n_abandoned']} abandoned ({_pct(u['abandonment_rate'])}, "
                 f"bar {_pct(le.abandonment_rate_min)}), median time {_pct(u['relative_duration_median'])} and "
                 f"actions {_pct(u['relative_actions_median'])} of the cohort's (bar {_pct(le.relative_max)}), "
                 f"{_pct(u['short_play_share'])} short plays (bar {_pct(le.short_play_share_min)})")
        if not le.enabled:
            return "detector disabled: " + facts
        if u["is_low_effort_excluded"]:
            return "excluded as low effort: " + facts
        if u["n_environments"] < le.min_environments:
            return f"kept: fewer than {le.min_environments} games, too few to judge: " + facts
        return "kept: " + facts
    facts = (f"{'abandoned' if u['n_abandoned'] else 'not abandoned'}, time "
             f"{_pct(u['relative_duration_median'])} and actions {_pct(u['relative_actions_median'])} of the "
             f"game's cohort median (bar {_pct(le.play_relative_max)}; recording judged alone, no session manifest)")
    if not le.enabled or not le.play_level_fallback:
        return "not judged (detector or play-level fallback disabled): " + facts
    return ("excluded as low effort: " if u["is_low_effort_excluded"] else "kept: ") + facts
