"""Derived `out_*` tables built by `arcstudy build` from the ARC-AGI-3 and study `core_*` tables, and the
`build_state` meta table that records what each out table was built from (pipeline/transforms/).

Fields reused from other modules keep their meaning: play_id, guid, game_id, file_id, play_index,
recording_variant, levels_completed, started_at, ended_at, participant_id, session_id, order_in_session,
is_first_run, has_leading_reset, card_actions, card_resets, card_actions_by_level, reason, run_id, flags.
"""

from __future__ import annotations

import polars as pl

from schemas.model import Field
from schemas.vocabulary import BASELINE_RULES, PLAY_STATES

UTC = pl.Datetime("us", "UTC")
SHA256 = r"^[0-9a-f]{64}$"
OUTCOME_GROUPS = ("all", "successful", "unsuccessful", "unsuccessful_under_soft_limit")
# Where a completer's level cost comes from (pipeline/transforms/baselines.py): a recording's own card, its
# lines, a human scorecard summary with no recording of the play (stand-alone card or summary-only file), or
# a per-player counts CSV (`arcstudy baselines --from-counts`).
BASELINE_EVIDENCE = ("recording-card", "recording-lines", "card-summary", "counts-file")

FIELDS: list[Field] = [
    # --- plays and levels --------------------------------------------------------------------------
    Field("level_index", pl.Int64, "1-based level number; levels are numbered in the order the play completed "
          "them, as the toolkit pairs them (by position, spec/scoring.md §B.2)", ge=1),
    Field("n_actions", pl.Int64, "actions charged under the official counting rules (spec/scoring.md §B): "
          "ACTION1-7 and level RESETs cost 1 each; the opening RESET, full resets and post-terminal actions "
          "are free", ge=0),
    Field("n_resets", pl.Int64, "level RESETs (each one also counted in n_actions)", ge=0),
    Field("n_undo", pl.Int64, "ACTION7 (undo) actions counted in n_actions (released human cards mostly do "
          "not count them)", ge=0),
    Field("n_post_terminal", pl.Int64, "actions sent after WIN or GAME_OVER: echoed by the engine, never "
          "counted", ge=0),
    Field("n_levels", pl.Int64, "levels in the game: the engine's win_levels from the recordings, else the "
          "length of the metadata's baseline_actions; null when neither is known", nullable=True, ge=1),
    Field("is_fully_solved", pl.Boolean, "every level of the game was completed (WIN)"),
    Field("play_state", pl.String, "final state of the play by the counting rules: WIN, GAME_OVER or "
          "NOT_FINISHED (sticky like the card's: GAME_OVER stays after a later level reset)", isin=PLAY_STATES),
    Field("duration_s", pl.Float64, "ended_at minus started_at, in seconds; null without timestamps",
          nullable=True, ge=0),
    Field("rebuilt_actions_by_level", pl.List(pl.List(pl.Int64)), "cumulative `[levels_completed, actions]` "
          "pairs rebuilt from the lines, exactly as the toolkit card would hold them (§B.4)"),
    Field("has_card", pl.Boolean, "the recording's trailing scorecard holds this play's own slot"),
    Field("is_card_agreeing", pl.Boolean, "the play's own card slot agrees with the counts rebuilt from the "
          "lines (actions, resets, level pairs); null when the play has no card", nullable=True),
    Field("is_level_completed", pl.Boolean, "the play completed this level"),
    Field("level_started_at", UTC, "when the level began: the play's first line for level 1, else the line "
          "that completed the previous level", nullable=True),
    Field("level_ended_at", UTC, "the line that completed the level, or the play's last line for the level "
          "it ended on", nullable=True),
    Field("level_duration_s", pl.Float64, "level_ended_at minus level_started_at, in seconds", nullable=True,
          ge=0),
    Field("n_actions_no_undo", pl.Int64, "n_actions minus counted undo: what a card that ignores ACTION7 "
          "would show", ge=0),
    Field("card_levels_completed", pl.Int64, "levels completed according to the card slot", ge=0),
    Field("reason_codes", pl.List(pl.String), "machine-readable reason codes (listed in the README section "
          "'Building the analysis tables')"),
    # --- attempts --------------------------------------------------------------------------------
    Field("n_plays", pl.Int64, "plays (spans between full resets) in the recording", ge=0),
    Field("is_attempt", pl.Boolean, "meets the attempt definition: more than attempts.actions_more_than "
          "counted actions and less than attempts.duration_less_than_s of interaction"),
    Field("is_over_soft_limit", pl.Boolean, "the interaction reached the soft limit (attempts.soft_limit_s)"),
    Field("is_first_contact", pl.Boolean, "the participant's first recording of this game: a first run "
          "(manifest is_first_run; assumed without a manifest), the earliest when several claim it"),
    Field("is_low_effort_excluded", pl.Boolean, "excluded by the low-effort detector (its unit was judged "
          "low effort; see out_study__session_features)"),
    Field("is_analysis_attempt", pl.Boolean, "counted in the analysis tables: an attempt, first contact, not "
          "excluded as low effort"),
    # --- low-effort detector -----------------------------------------------------------------------
    Field("unit_id", pl.String, "what the low-effort detector judged: a session_id, or the recording's guid "
          "for a participant recording that is in no session manifest"),
    Field("unit_kind", pl.String, "`session` (from a session manifest) or `recording` (play-level fallback)",
          isin=("session", "recording")),
    Field("n_environments", pl.Int64, "distinct games the unit played", ge=0),
    Field("n_recordings", pl.Int64, "participant recordings in the unit", ge=0),
    Field("interaction_s", pl.Float64, "sum of the unit's recording durations, in seconds", nullable=True, ge=0),
    Field("median_actions_per_environment", pl.Float64, "median counted actions per game played",
          nullable=True, ge=0),
    Field("median_environment_duration_s", pl.Float64, "median recording duration per game played, seconds",
          nullable=True, ge=0),
    Field("environments_per_hour", pl.Float64, "n_environments per hour of interaction", nullable=True, ge=0),
    Field("n_abandoned", pl.Int64, "games left unsolved before the soft limit", ge=0),
    Field("abandonment_rate", pl.Float64, "n_abandoned / n_environments", nullable=True, ge=0, le=1),
    Field("short_play_share", pl.Float64, "share of the unit's recordings with no more than "
          "attempts.actions_more_than actions", nullable=True, ge=0, le=1),
    Field("relative_actions_median", pl.Float64, "median over the unit's recordings of n_actions divided by "
          "the cohort median of the same game (games with a large enough cohort only)", nullable=True, ge=0),
    Field("relative_duration_median", pl.Float64, "median over the unit's recordings of duration_s divided "
          "by the cohort median of the same game", nullable=True, ge=0),
    # --- baselines, solvability, durations, reference points ----------------------------------------
    Field("baseline_rule", pl.String, "rule picking the baseline among completers' per-level actions "
          "(spec/scoring.md §C)", isin=BASELINE_RULES),
    Field("baseline_value", pl.Float64, "the rule's pick among completers' per-level actions; null when too "
          "few completed (median can be a half)", nullable=True, ge=0),
    Field("n_completers", pl.Int64, "eligible participants who completed the level", ge=0),
    Field("min_completers", pl.Int64, "completers the rule needs (baselines.min_completers, at least 2 for "
          "second-best)", ge=1),
    Field("is_too_few_completers", pl.Boolean, "fewer completers than min_completers: no baseline"),
    Field("n_players", pl.Int64, "participants counted for the game (the denominator)", ge=0),
    Field("n_card_costs", pl.Int64, "completers whose level cost came from their recording's own card "
          "rather than the lines", ge=0),
    Field("n_summary_costs", pl.Int64, "completers whose level cost came from a human scorecard summary with "
          "no recording of the play (evidence card-summary)", ge=0),
    Field("baseline_player_id", pl.String, "who a baseline cost is counted for: the recording's guid; a summary "
          "card slot's guid (`<file_id>#<slot_index>` when the card has no guids); a counts file's player_id"),
    Field("level_cost", pl.Int64, "actions the player spent on the level (difference of cumulative "
          "actions_by_level values, by position)", ge=0),
    Field("evidence", pl.String, "where the level cost comes from: " + ", ".join(BASELINE_EVIDENCE),
          isin=BASELINE_EVIDENCE),
    Field("is_summary_sourced", pl.Boolean, "the cost comes from a human scorecard summary, not from a "
          "recording of the play (evidence card-summary)"),
    Field("is_default_rule", pl.Boolean, "the rule named by baselines.rule in the build configuration"),
    Field("n_full_solvers", pl.Int64, "participants who completed every level on first contact", ge=0),
    Field("full_solve_rate", pl.Float64, "n_full_solvers / n_players", nullable=True, ge=0, le=1),
    Field("min_full_solvers", pl.Int64, "the inclusion bar (solvability.min_full_solvers)", ge=1),
    Field("is_included", pl.Boolean, "passes the inclusion bar: at least min_full_solvers full solvers"),
    Field("drop_off_level", pl.Int64, "the level where the completion rate falls the most from the previous "
          "level (level 0 counts as 100 %); null when it never falls", nullable=True, ge=1),
    Field("max_completion_drop", pl.Float64, "the completion-rate fall at drop_off_level", nullable=True,
          ge=0, le=1),
    Field("completion_rate", pl.Float64, "n_completers / n_players", nullable=True, ge=0, le=1),
    Field("completion_ci_low", pl.Float64, "Wilson interval lower bound of completion_rate", nullable=True,
          ge=0, le=1),
    Field("completion_ci_high", pl.Float64, "Wilson interval upper bound of completion_rate", nullable=True,
          ge=0, le=1),
    Field("confidence_level", pl.Float64, "confidence level of the interval", ge=0, le=1),
    Field("conditional_completion_rate", pl.Float64, "completers of this level / completers of the previous "
          "level (players for level 1)", nullable=True, ge=0, le=1),
    Field("completion_drop", pl.Float64, "previous level's completion_rate minus this one (1.0 before level "
          "1)", nullable=True, ge=-1, le=1),
    Field("is_drop_off_level", pl.Boolean, "this is the game's drop_off_level"),
    Field("scope_id", pl.String, "`all` for every game together, else the game_id"),
    Field("outcome_group", pl.String, "which analysis attempts: all, successful (fully solved), "
          "unsuccessful, or unsuccessful and shorter than the soft limit", isin=OUTCOME_GROUPS),
    Field("n_attempts", pl.Int64, "analysis attempts with a known duration in the group", ge=0),
    Field("median_duration_s", pl.Float64, "median attempt duration, seconds", nullable=True, ge=0),
    Field("mean_duration_s", pl.Float64, "mean attempt duration, seconds", nullable=True, ge=0),
    Field("p25_duration_s", pl.Float64, "25th percentile of attempt duration, seconds", nullable=True, ge=0),
    Field("p75_duration_s", pl.Float64, "75th percentile of attempt duration, seconds", nullable=True, ge=0),
    Field("optimal_actions", pl.Int64, "fewest actions that solve the level once its mechanics are known "
          "(state-graph explorer); null until a provider fills it", nullable=True, ge=0),
    Field("optimal_source", pl.String, "where optimal_actions came from (provider or table)", nullable=True),
    Field("best_first_run_actions", pl.Int64, "fewest actions any eligible first-run participant needed "
          "on the level", nullable=True, ge=0),
    Field("best_minus_optimal", pl.Int64, "best_first_run_actions minus optimal_actions: the cost of "
          "exploration and learning", nullable=True),
    # --- build state (meta) ------------------------------------------------------------------------
    Field("build_target", pl.String, "an out table, or `figures`, maintained by arcstudy build"),
    Field("build_step", pl.String, "the build step that produces the target"),
    Field("input_fingerprint", pl.String, "sha256 over the step's code, resolved configuration and inputs "
          "(file ids and row counts of core tables, fingerprints of upstream steps)", regex=SHA256),
    Field("fingerprint_parts_json", pl.String, "the parts the fingerprint was computed from, as JSON (used to "
          "explain why a step rebuilds)"),
    Field("built_at", UTC, "when the target was last rebuilt"),
    Field("n_rows", pl.Int64, "rows written (figures: files written)", ge=0),
    # --- baseline intervals (pipeline/scoring/baseline_intervals.py) ---------------------------------------
    Field("baseline_quantile", pl.Float64, "the population quantile of completers' costs the rule estimates: 0.5 "
          "for the medians, r / (m + 1) for a rule of rank r among m completers", ge=0, le=1),
    Field("interval_lower", pl.Float64, "lower end of the distribution-free interval for the baseline: the "
          "completers' cost of rank interval_lower_rank", ge=0),
    Field("interval_upper", pl.Float64, "upper end of the interval: the cost of rank interval_upper_rank", ge=0),
    Field("interval_lower_rank", pl.Int64, "1-based rank (ascending cost) of the interval's lower end", ge=1),
    Field("interval_upper_rank", pl.Int64, "1-based rank of the interval's upper end", ge=1),
    Field("interval_coverage", pl.Float64, "exact probability that [interval_lower, interval_upper] holds the "
          "population quantile: P(l <= B <= u - 1), B ~ Binomial(n_completers, baseline_quantile); "
          "distribution-free (ties make it conservative)", ge=0, le=1),
    Field("is_interval_at_level", pl.Boolean, "interval_coverage reaches confidence_level; false when even the "
          "widest interval (lowest to highest cost) does not, i.e. too few completers for that confidence"),
    Field("interval_relative_width", pl.Float64, "(interval_upper - interval_lower) / baseline_value; null for a "
          "0 baseline", nullable=True, ge=0),
    Field("baseline_with_one_more_fastest", pl.Float64, "the baseline if one more tester completed the level "
          "as cheaply as the cheapest completer", ge=0),
    Field("baseline_with_one_more_slowest", pl.Float64, "the baseline if one more tester completed the level "
          "as dearly as the dearest completer", ge=0),
]
