"""Participant recordings and the attempt rules (spec/study-protocol.md §3).

A participant recording is a recording listed in a session manifest (`core_study__session_plays`), or,
without a manifest, one whose variant is in `attempts.participant_variants` (the human-dataset shape).
Without a manifest each recording is its own participant and is assumed to be a first run (the released
human dataset is first-run only), flagged so.

Rules, in the paper's words, with their reason codes:
- an attempt has more than `actions_more_than` actions (`too_few_actions` otherwise) and less than
  `duration_less_than_s` of interaction (`too_long` otherwise; `duration_unknown` without timestamps when
  `unknown_duration = "exclude"`);
- one attempt per participant and game, first contact only: a recording that is not a first run is
  `not_first_run`; of several first runs by one participant on one game, only the earliest counts
  (`duplicate_first_run`);
- the soft limit is flagged (`is_over_soft_limit`), not excluded;
- sessions excluded by the low-effort detector add `low_effort`.
"""

from __future__ import annotations

import polars as pl

from pipeline.core.config import BuildConfig

ATTEMPT_RULE_CODES = ("too_few_actions", "too_long", "duration_unknown")


def participant_recordings(plays: pl.DataFrame, session_plays: pl.DataFrame, config: BuildConfig) -> pl.DataFrame:
    """One row per participant recording (guid), with totals over its plays and its manifest entry."""
    per = (plays.sort("guid", "play_index").group_by("guid", maintain_order=True).agg(
        pl.col("game_id").first(),
        pl.col("recording_variant").first(),
        pl.len().cast(pl.Int64).alias("n_plays"),
        pl.col("n_actions").sum().cast(pl.Int64),
        pl.col("n_resets").sum().cast(pl.Int64),
        pl.col("n_undo").sum().cast(pl.Int64),
        pl.col("levels_completed").max(),
        pl.col("n_levels").max(),
        pl.col("is_fully_solved").any(),
        pl.col("started_at").min(),
        pl.col("ended_at").max(),
    ).with_columns(((pl.col("ended_at") - pl.col("started_at")).dt.total_microseconds() / 1e6).alias("duration_s")))
    manifest = session_plays.select(
        "guid", "session_id", "participant_id", "order_in_session", "is_first_run",
        pl.col("game_id").alias("manifest_game_id"), pl.lit(True).alias("in_manifest"))
    rec = per.join(manifest, on="guid", how="left").with_columns(pl.col("in_manifest").fill_null(False))
    variants = list(config.attempts.participant_variants)
    rec = rec.filter(pl.col("in_manifest") | pl.col("recording_variant").is_in(variants))
    return rec.with_columns(
        pl.concat_list(
            pl.when(~pl.col("in_manifest")).then(pl.lit("no_session_manifest")),
            pl.when(pl.col("is_first_run").is_null()).then(pl.lit("first_run_assumed")),
            pl.when(pl.col("manifest_game_id").is_not_null() & (pl.col("manifest_game_id") != pl.col("game_id")))
            .then(pl.lit("manifest_game_mismatch")),
            pl.when(pl.col("duration_s").is_null()).then(pl.lit("duration_unknown")),
        ).list.drop_nulls().alias("flags"),
        pl.col("is_first_run").fill_null(True),
        pl.coalesce("participant_id", "guid").alias("participant_key"),
    ).sort("guid")


def apply_attempt_rules(recordings: pl.DataFrame, config: BuildConfig) -> pl.DataFrame:
    """Adds is_attempt, is_over_soft_limit, is_first_contact and the rule reason codes."""
    a = config.attempts
    # First contact: the earliest first-run recording per participant and game.
    ranked = (recordings.filter(pl.col("is_first_run"))
              .sort("started_at", "order_in_session", "guid", nulls_last=True)
              .group_by("participant_key", "game_id", maintain_order=True).agg(pl.col("guid").first())
              .select(pl.col("guid"), pl.lit(True).alias("is_first_contact")))
    r = recordings.join(ranked, on="guid", how="left").with_columns(pl.col("is_first_contact").fill_null(False))
    unknown = pl.col("duration_s").is_null()
    return r.with_columns(
        pl.concat_list(
            pl.when(pl.col("n_actions") <= a.actions_more_than).then(pl.lit("too_few_actions")),
            pl.when(pl.col("duration_s") >= a.duration_less_than_s).then(pl.lit("too_long")),
            pl.when(unknown & pl.lit(a.unknown_duration == "exclude")).then(pl.lit("duration_unknown")),
        ).list.drop_nulls().alias("rule_codes"),
        pl.concat_list(
            pl.when(~pl.col("is_first_run")).then(pl.lit("not_first_run")),
            pl.when(pl.col("is_first_run") & ~pl.col("is_first_contact")).then(pl.lit("duplicate_first_run")),
        ).list.drop_nulls().alias("contact_codes"),
        (pl.col("duration_s") >= a.soft_limit_s).fill_null(False).alias("is_over_soft_limit"),
    ).with_columns((pl.col("rule_codes").list.len() == 0).alias("is_attempt"))


def finalize_attempts(rules: pl.DataFrame, excluded_guids: pl.Series) -> pl.DataFrame:
    """out_arc3__attempts: the rules plus the low-effort decision."""
    r = rules.with_columns(pl.col("guid").is_in(excluded_guids.implode()).alias("is_low_effort_excluded"))
    return r.with_columns(
        pl.col("rule_codes").list.concat(pl.col("contact_codes")).list.concat(
            pl.concat_list(pl.when(pl.col("is_low_effort_excluded")).then(pl.lit("low_effort"))).list.drop_nulls()
        ).alias("reason_codes"),
        (pl.col("is_attempt") & pl.col("is_first_contact") & ~pl.col("is_low_effort_excluded"))
        .alias("is_analysis_attempt"),
        pl.when(pl.col("is_over_soft_limit")).then(pl.col("flags").list.concat(pl.lit(["over_soft_limit"])))
        .otherwise(pl.col("flags")).alias("flags"),
    ).sort("guid")
