"""ARC-AGI-3 recordings, environment metadata and scorecards (spec/formats.md §A-C)."""

from __future__ import annotations

import polars as pl

from schemas.model import Field
from schemas.vocabulary import ACTION_NAMES, GAME_STATES, RECORDING_VARIANTS

MAX_BASELINE_ACTIONS = 10**9  # a level's human baseline: far above any play, far below what the scorer's
# arithmetic holds exactly (2**62 actions once made the set-based and per-play scores disagree, and score stopped);
# the one bound of a metadata.json, a --baselines CSV, a counts CSV and a scorecard's level_baseline_actions

UTC = pl.Datetime("us", "UTC")
SHA256 = r"^[0-9a-f]{64}$"
GAME_ID = r"^[a-z0-9]{4}(-[0-9a-f]{8}|-[0-9a-f]{12})?$"

# Quality flags of a recording file (raw_ingest__files.flags and every one of its core_arc3__plays.flags).
# Odd but usable files load with these set instead of being refused (spec/formats.md §A).
RECORDING_FLAGS: dict[str, str] = {
    "utf8_bom": "the file starts with a UTF-8 byte-order mark (removed before reading; any text format)",
    "crlf_line_endings": "lines end with CRLF (accepted as is; any text format)",
    "string_action_ids": "action ids written as enum names (`\"ACTION5\"`), normalised to integers",
    "no_leading_reset": "the first frame line is not a RESET (older human client, agents recorder)",
    "no_opening_reset_line": "recorder defect: a toolkit recording without the RESET line make() performs; "
                             "that RESET opened play 1 on the toolkit's card uncounted, so the first written "
                             "line is counted as the first action, as the toolkit did",
    "action_ids_lost": "recorder defect: every action id recorded as 0 (RESET) while levels or frames change; "
                       "the file is excluded from scoring unless the actions are recovered (any variant)",
    "leading_reset_repeated": "the first two frame lines are both RESETs: the second, at the level start, is a "
                              "full reset that opened a second, empty play on the toolkit's card (counted so; "
                              "an empty play scores 0)",
    "doubled_reset": "a RESET line repeats the previous line's response exactly; a repeated level RESET of a "
                     "toolkit recording cannot be two engine responses and is quarantined (counted once, as "
                     "the toolkit did), a repeated full RESET is counted as an empty play",
    "over_max_actions": "the file name carries the agent's MAX_ACTIONS (`{game}.{agent}.{max_actions}.{guid}"
                        ".recording.jsonl`) and the file holds more actions than that (harness off-by-one); "
                        "counted as the lines say",
    "no_trailing_summary": "a human-dataset file without its trailing scorecard line",
    "no_frame_lines": "a human-dataset file whose frame lines are all missing or cut off: only its summary "
                      "card loads (core_arc3__card_plays), no steps or plays",
    "empty_guids": "the summary card's `guids` list is empty",
    "actions_by_level_short": "the summary card's `actions_by_level` has fewer slots than its plays",
    "stub_plays_in_card": "the summary card holds zero-action slots of abandoned sessions",
    "preview_card_no_level_costs": "a 2025 preview card (`scores`, no `actions_by_level`): it holds no per-level "
                                   "costs, which only the recording's `score` transitions give (formats.md A.4), so "
                                   "`arcstudy score` cannot score its runs from the card",
}
# Quality flags of one step (core_arc3__steps.flags).
STEP_FLAGS: dict[str, str] = {
    "post_terminal": "a post-terminal echo (empty frame or win_levels 0): kept, never counted",
    "action_not_available": "the action was not in the previous line's available_actions",
    "reasoning_over_16kib": "the reasoning blob exceeded the toolkit's 16 KiB: quarantined, not stored",
    "action_id_lost": "the file has the action_ids_lost defect",
    "timestamp_dropped": "the line's timestamp jumped ahead of the lines on both sides of it (a clock glitch): "
                         "quarantined and stored as null, the step itself still counts",
}

FIELDS: list[Field] = [
    Field("game_id", pl.String, "game and version, `<code>-<version>` (e.g. `ls20-9607627b`); the bare 4-char "
          "code when a source gives no version", regex=GAME_ID),
    Field("game_code", pl.String, "the 4-character game code (`ls20`)", regex=r"^[a-z0-9]{4}$"),
    Field("guid", pl.String, "session id of the environment instance (stays the same across full resets); a "
          "UUID", max_bytes=len("00000000-0000-0000-0000-000000000000")),
    Field("play_id", pl.String, "one play = the span between full resets: `<guid>/<play_index>`"),
    Field("play_index", pl.Int64, "0-based index of the play within its recording file", ge=0),
    Field("step_index", pl.Int64, "0-based index of the frame line within its recording file", ge=0),
    Field("recorded_at", UTC, "wall-clock time the line was written (UTC)", nullable=True),
    Field("line_kind", pl.String, "what the line holds (`action`: a playback script's action line)", isin=("frame", "usage", "scorecard", "action", "other")),
    Field("raw_json", pl.String, "the line as written, with frame pixel arrays replaced by their count "
          "(pixels are summarised by frame hashes in core tables and kept in Parquet with --keep-frames)"),
    Field("action_id", pl.Int64, "action id as recorded: 0 RESET, 1-5 ACTION1-5, 6 click, 7 undo", ge=0, le=7),
    Field("action_name", pl.String, "action as named by the engine",
          isin=ACTION_NAMES),
    Field("click_x", pl.Int64, "ACTION6 display column 0-63", nullable=True, ge=0, le=63),
    Field("click_y", pl.Int64, "ACTION6 display row 0-63", nullable=True, ge=0, le=63),
    Field("state", pl.String, "game state after the action", isin=GAME_STATES),
    Field("levels_completed", pl.Int64, "levels completed so far in the current play (preview: `score`)",
          ge=0, le=254),
    Field("win_levels", pl.Int64, "levels needed to win; 0 on post-terminal echoes; null when the build "
          "did not report it", nullable=True, ge=0, le=254),
    Field("is_full_reset", pl.Boolean, "the engine reported this RESET as a full reset (null: field absent)",
          nullable=True),
    Field("available_actions", pl.List(pl.Int64), "action ids the game accepted after this action",
          nullable=True),
    Field("n_frames", pl.Int64, "animation frames returned by the action; null when the recording has no "
          "frames", nullable=True, ge=0),
    Field("frame_sha256s", pl.List(pl.String), "sha256 of each frame's 4096 uint8 cells, row-major "
          "(the conformance kit's definition)", nullable=True),
    Field("last_frame_sha256", pl.String, "sha256 of the settled (last) frame", nullable=True, regex=SHA256),
    Field("frames_file", pl.String, "Parquet file holding this line's frames (ingest --keep-frames)",
          nullable=True),
    Field("is_post_terminal", pl.Boolean, "a non-RESET action sent after WIN/GAME_OVER: echoed, never counted"),
    Field("step_effect", pl.String, "what the step does to the toolkit card (spec/scoring.md §B.4), decided "
          "once at ingest under the recording variant's counting rules: `open` (the opening RESET), "
          "`full_reset` (opens a new play), `level_reset` and `action` (1 action each), `uncounted_undo`, "
          "`post_terminal_echo`", isin=("open", "full_reset", "level_reset", "action", "uncounted_undo",
                                        "post_terminal_echo")),
    Field("is_counted", pl.Boolean, "the step costs one action on the card (`action` or `level_reset`)"),
    Field("is_level_change", pl.Boolean, "`levels_completed` differs from the previous non-echo step of the "
          "play (0 before the first): the card appends a `[levels_completed, actions]` pair here"),
    Field("reasoning_json", pl.String, "the client's opaque reasoning blob as JSON text (the toolkit's limit: "
          "16 KiB serialized; a larger blob is quarantined and not stored)", nullable=True, max_bytes=16 * 1024),
    Field("recording_variant", pl.String, "recording writer (spec/formats.md §A)",
          isin=RECORDING_VARIANTS),
    Field("schema_generation", pl.String, "field generation of frame records",
          isin=("2026", "preview-2025")),
    Field("first_line_number", pl.Int64, "first line of the play in its file", ge=1),
    Field("last_line_number", pl.Int64, "last line of the play in its file", ge=1),
    Field("n_steps", pl.Int64, "frame lines in the play (post-terminal echoes included)", ge=0),
    Field("ended_at", UTC, "time of the play's last line", nullable=True),
    Field("has_frames", pl.Boolean, "the recording carries frame pixels"),
    Field("is_only_reset_levels", pl.Boolean, "recorded with ONLY_RESET_LEVELS semantics (human testing)"),
    Field("is_action_ids_lost", pl.Boolean, "the benchmarking defect: every action id recorded as 0, so "
          "actions cannot be counted from the lines"),
    Field("has_leading_reset", pl.Boolean, "the play's file starts with the RESET that opens the session"),
    Field("is_replay_needed", pl.Boolean, "the file holds actions only (a playback script, spec/formats.md "
          "§A.7): states, levels and frames come from replaying it through the engine (`score`, `view`)"),
    # usage lines (agents/benchmarking recorder)
    Field("n_tokens", pl.Int64, "LLM tokens of this call", nullable=True, ge=0),
    Field("n_total_tokens", pl.Int64, "LLM tokens so far", nullable=True, ge=0),
    Field("conversation_length", pl.Int64, "messages in the conversation", nullable=True, ge=0),
    Field("assistant_text", pl.String, "the assistant message (the recorders set no limit; over 1 MiB it is "
          "quarantined and not stored)", nullable=True, max_bytes=1024 * 1024),
    # cards (per-game scorecard slots)
    Field("slot_index", pl.Int64, "0-based play slot in the card", ge=0),
    Field("is_file_play", pl.Boolean, "this slot is the recording file's own play (chosen by filename guid)"),
    Field("card_actions", pl.Int64, "counted actions of the slot, as the card says", ge=0),
    Field("card_resets", pl.Int64, "level resets of the slot, as the card says", nullable=True, ge=0),
    Field("card_state", pl.String, "sticky state of the slot, as the card says", nullable=True, isin=GAME_STATES),
    Field("card_actions_by_level", pl.List(pl.List(pl.Int64)),
          "cumulative `[levels_completed, actions]` pairs of the slot, normalised to a list"),
    Field("card_score", pl.Int64, "preview cards: the slot's score (levels completed)", nullable=True, ge=0),
    # environments (metadata.json)
    Field("version", pl.String, "the game version hash", nullable=True),
    Field("title", pl.String, "display name", nullable=True),
    Field("default_fps", pl.Int64, "playback speed", nullable=True),
    Field("tags", pl.List(pl.String), "environment tags", nullable=True),
    Field("baseline_actions", pl.List(pl.Int64), "human baseline action count per level (not cumulative)",
          nullable=True),
    Field("date_downloaded", UTC, "when this copy was fetched (picks the latest version)", nullable=True),
    Field("class_name", pl.String, "game class name", nullable=True),
    Field("metadata_json", pl.String, "the metadata file as written"),
    # scorecards
    Field("card_id", pl.String, "scorecard id", nullable=True),
    Field("run_index", pl.Int64, "0-based run (play) in the scored environment", ge=0),
    Field("score", pl.Float64, "score in percent", nullable=True, ge=0),
    Field("is_completed", pl.Boolean, "the run reached WIN", nullable=True),
    Field("actions", pl.Int64, "counted actions", nullable=True, ge=0),
    Field("resets", pl.Int64, "level resets", nullable=True, ge=0),
    Field("level_scores", pl.List(pl.Float64), "per-level scores (percent)", nullable=True),
    Field("level_actions", pl.List(pl.Int64), "per-level charged actions", nullable=True),
    Field("level_baseline_actions", pl.List(pl.Int64), "per-level baselines (-1 = not scorable)", nullable=True),
    Field("message", pl.String, "why a run could not be scored", nullable=True),
    Field("policy_id", pl.String, "scoring policy id (arcstudy scorecards)", nullable=True),
    Field("scorecard_json", pl.String, "the scorecard document as written"),
]
