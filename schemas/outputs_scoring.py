"""`out_*` tables written by `arcstudy score` (pipeline/commands/score.py): replay checks, run, level and game
scores per policy, and how run scores move between policies.

Every table carries the scorecard's `card_id` (derived from the set of scored play ids, so re-scoring the
same plays replaces the same rows) and, except the replay checks, the scoring `policy_id`.

Fields reused from other modules keep their meaning: card_id, policy_id, play_id, game_id, guid, file_id,
run_index, score, levels_completed, actions, resets, state, is_completed, card_actions_by_level (the run's
cumulative pairs, rebuilt from its recording), message, level_index, n_actions, is_level_completed,
baseline_actions, baseline_rule, is_only_reset_levels, flags.
"""

from __future__ import annotations

import polars as pl

from schemas.model import Field

SHA256 = r"^[0-9a-f]{64}$"
REPLAY_STATUSES = ("verified", "divergent", "unverified", "not_replayable", "summary_only")
BASELINE_SOURCES = ("baselines-dir", "baselines-csv", "db-level-baselines", "db-environments", "games-dir",
                    "reference-csv", "none", "scorecard")

FIELDS: list[Field] = [
    # --- replay checks -----------------------------------------------------------------------------
    Field("verification_status", pl.String, "replay verification of the play: `verified` (replayed through the engine, "
          "states, level counts and recorded frames match, or frames differed only at steps after which they "
          "matched again: see n_frame_only_steps), `divergent` (first divergence reported), "
          "`unverified` (game not loadable: scored from the recording alone), `not_replayable` (the actions "
          "are not known, e.g. the benchmarking action_ids_lost defect), `summary_only` (a scorecard's run: scored from "
          "its per-level actions, not replay-verified)", isin=REPLAY_STATUSES),
    Field("replay_input", pl.String, "what was replayed: the recording file given on the command line "
          "(`recording`, frames compared pixel by pixel), the database steps (`steps`, frame hashes compared), or "
          "nothing: a scorecard's run (`card`, summary only)", isin=("recording", "steps", "card")),
    Field("n_steps_replayed", pl.Int64, "frame lines of the play replayed through the engine", ge=0),
    Field("divergence_step_index", pl.Int64, "0-based index of the recording's frame line where the replay "
          "first diverged (the file's step_index)", nullable=True, ge=0),
    Field("divergence_line_number", pl.Int64, "1-based line of the recording file where the replay first "
          "diverged", nullable=True, ge=1),
    Field("divergence_field", pl.String, "what differed first: state, levels_completed, win_levels, full_reset, "
          "available_actions, frame_count, frame, or exception", nullable=True),
    Field("divergence_expected", pl.String, "the recorded value at the divergence, as JSON", nullable=True),
    Field("divergence_got", pl.String, "the engine's value at the divergence, as JSON", nullable=True),
    Field("replay_detail", pl.String, "the divergence in words, why the play was not replayed, or for a verified "
          "play with frame-only differences the note (e.g. `frames differ at 1 step (...; 661 cells), reconverged "
          "at step 7`)", nullable=True),
    Field("n_frame_only_steps", pl.Int64, "steps of the play whose frames (or frame count) differed from the replay "
          "while every field agreed and later frames matched again (frame-only divergences, e.g. animations "
          "that depend on PYTHONHASHSEED); the play stays verified. Null when the play was not replayed "
          "(unverified, not_replayable)", nullable=True, ge=0),
    Field("n_frame_only_cells", pl.Int64, "cells differing over those steps; null when unknown (database steps "
          "are compared by sha256, or a frame count differed) or when the play was not replayed", nullable=True, ge=0),
    Field("game_source_sha256", pl.String, "sha256 of the game source file the play was replayed on",
          nullable=True, regex=SHA256),
    Field("is_score_excluded", pl.Boolean, "the play is reported but left out of the scorecard (divergent "
          "without --trust-recordings, or its actions are unknown)"),
    Field("exclusion_reason", pl.String, "why the play is left out of the scorecard", nullable=True),
    Field("is_recovered", pl.Boolean, "the play's action ids were lost (the agents recorder's action_ids_lost "
          "defect) and recovered: searched for from its frames (`--recover-actions`, `arcstudy recover-actions`) "
          "or supplied (`--recovered-actions`); replay-verified like any other play. Null in rows written before "
          "this column existed", nullable=True),
    Field("recovery_provenance", pl.String, "for a recovered play, where its actions come from, e.g. `recovered "
          "from frames by arcstudy recover-actions on <game_id> (game source sha256 ...): N steps, k with "
          "alternatives, j ambiguous`", nullable=True),
    # --- run and level scores ----------------------------------------------------------------------
    Field("cutoff_level", pl.Int64, "policies with a per-level action cutoff: the first completed level whose "
          "actions exceed ceil(5 x baseline); it and every later level score 0", nullable=True, ge=1),
    Field("is_best_run", pl.Boolean, "this run gives its game's score (the first highest score in card order)"),
    Field("level_baseline", pl.Int64, "the baseline actions the level was scored against (paired by position)"),
    Field("level_budget", pl.Int64, "the policy's per-level action cutoff ceil(5 x baseline); null when the "
          "policy has none", nullable=True, ge=0),
    Field("level_score", pl.Float64, "the level's score in percent under the policy", ge=0),
    # --- game scores -------------------------------------------------------------------------------
    Field("n_runs", pl.Int64, "runs (plays) of the game in the scorecard", ge=0),
    Field("best_play_id", pl.String, "the play whose score is the game's score", nullable=True),
    Field("level_count", pl.Int64, "levels of the scored environment (the scorecard's level_count: the longest "
          "list of level scores among its runs)", ge=0),
    Field("baseline_source", pl.String, "where the game's baseline came from (`arcstudy score --help` gives the "
          "resolution order); `none` when no source knows the game", isin=BASELINE_SOURCES),
    # --- policy sensitivity ------------------------------------------------------------------------
    Field("from_policy_id", pl.String, "the earlier scoring policy of the pair"),
    Field("to_policy_id", pl.String, "the later scoring policy of the pair"),
    Field("from_score", pl.Float64, "the run's score under from_policy_id (percent)", ge=0),
    Field("to_score", pl.Float64, "the run's score under to_policy_id (percent)", ge=0),
    Field("score_delta", pl.Float64, "to_score minus from_score (percentage points)"),
]
