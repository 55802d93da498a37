"""H-ARC human traces, ARC task JSON and ARC-TGI exports (spec/formats.md §D, §E, §F).

Conventions specific to these sources:
- H-ARC coordinates: every `*_x` of the CSVs is a row and every `*_y` a column; here they are named
  `action_row`/`action_col` and `*_height`/`*_width` so nobody has to remember that.
- H-ARC times are the participant's local clock without a zone: `occurred_at` is a naive timestamp and
  only differences within one participant are meaningful.
- Grids are stored as H-ARC grid strings (`"|077|777|077|"`, row by row), also for ARC task JSON, so that
  a participant's submission can be compared with the ARC truth by string equality.
- The H-ARC CSV names `action_id` (2024: `num_actions`) and `action` are stored as `action_number` and
  `action`, because `action_id` already names the ARC-AGI-3 action id (0-7) in `schemas.arc3`.
- Provenance fields (`file_id`, `file_name`, `row_number`, `content_sha256`, `flags`) come from
  `schemas.meta`.
"""

from __future__ import annotations

import polars as pl

from schemas.model import Field
from schemas.vocabulary import HARC_RELEASES, HARC_SPLITS

GRID_STRING = r"^\|([0-9]+\|)+$"
# D.7 plus `write_description` (the predecessor interface's single closing row, which the authors'
# `get_summary` accepts as a terminal action; spec/harc-editor.md §8.2).
HARC_ACTIONS = (
    "edit", "floodfill", "select_cells", "select_copy", "select_paste", "select_change_color",
    "copy_from_input", "change_height", "change_width", "reset_grid", "undo",
    "change_color", "change_tool", "submit", "write_first_description", "write_last_description",
    "no_last_description", "write_description", "submit_tutorial", "write_first_tutorial_description",
    "write_last_tutorial_description", "submit_feedback", "Help", "auto_solve",
)
HARC_TOOLS = ("edit", "select", "floodfill")
SELECT_LOCATIONS = ("test_input", "test_output")

# Every column name of every H-ARC CSV (data, summary, incorrect submissions, surveys; both release
# generations). raw_harc__csv_rows keeps each as a text column `csv_<name>`, exactly as read.
HARC_CSV_COLUMNS = (
    "exp_name", "task_type", "hashed_id", "joint_id_task", "task_name", "task_number", "is_tutorial", "time",
    "attempt_number", "action_id", "solved", "done", "test_input_grid", "test_input_size_x", "test_input_size_y",
    "test_output_grid", "test_output_size_x", "test_output_size_y", "action", "action_x", "action_y",
    "select_loc", "selected_data", "selected_symbol", "selected_tool", "copy_paste_data",
    "first_written_solution", "last_written_solution", "withdraw", "withdraw_reason", "withdraw_comment", "age",
    "gender", "race", "education_level", "household_income", "normal_vision", "color_blind", "fluent_english",
    "complete", "num_actions", "count", "hashed_output_grid", "feedback",
)
RAW_CSV_PREFIX = "csv_"
# long text that rarely repeats: zstd (see Field.compression; on a simulated data.csv the raw table is 40 %
# smaller on disk than with DuckDB's own choice, for slightly less CPU)
_RAW_FREE_TEXT = ("first_written_solution", "last_written_solution", "withdraw_comment", "feedback", "test_input_grid",
                  "test_output_grid", "selected_data", "copy_paste_data", "time", "joint_id_task")


def raw_csv_column(name: str) -> str:
    """The raw_harc__csv_rows column that holds the H-ARC CSV column `name` as read."""
    return RAW_CSV_PREFIX + name


FIELDS: list[Field] = [
    # --- raw CSV rows ----------------------------------------------------------------------------
    *[Field(raw_csv_column(c), pl.String,
            f"the H-ARC CSV field `{c}` exactly as read (text, not parsed; null when the field was empty or "
            "the file has no such column)", nullable=True,
            compression="zstd" if c in _RAW_FREE_TEXT else None) for c in HARC_CSV_COLUMNS],
    Field("extra_fields_json", pl.String,
          "the fields of a row beyond the header's count (a row with too many fields, quarantined), as a JSON "
          "list of their texts; null for every row that fits the header", nullable=True, compression="zstd"),
    Field("row_json", pl.String,
          "the CSV row's fields exactly as read, as a JSON object {header name: text, or null when the "
          "field was empty} in header order; content_sha256 is the sha256 of this text", compression="zstd"),
    # --- H-ARC identity ---------------------------------------------------------------------------
    Field("release_generation", pl.String,
          "which H-ARC release the file belongs to: `osf-current` (OSF archive, complete and incomplete "
          "participants merged) or `2024` (the original clean_*.csv files); from the header where it "
          "differs (`action_id` vs `num_actions`, survey columns), else from the `clean_` file-name prefix",
          isin=HARC_RELEASES),
    Field("task_id", pl.String,
          "id of an ARC-format task: the ARC task id (H-ARC `task_name` or the task file name, without "
          "`.json`; 8 hex chars for ARC-AGI-1/2), or the shortuuid of an ARC-TGI generated task"),
    Field("task_file_name", pl.String, "H-ARC `task_name` exactly as written (with `.json`)"),
    Field("exp_name", pl.String, "H-ARC experiment build (`expv0` ... `expv6_1`)", nullable=True),
    Field("task_split", pl.String, "ARC split the task comes from (H-ARC `task_type`)", isin=HARC_SPLITS),
    Field("task_number", pl.Int64,
          "1-based position of the task in the participant's sequence; 0 = tutorial", ge=0),
    Field("attempt_number", pl.Int64,
          "attempt 1-3; 4 only on the closing `write_last_description` row after a third wrong submit "
          "(summaries recode 4 as 3)", ge=1, le=4),
    # --- H-ARC events -----------------------------------------------------------------------------
    Field("action_number", pl.Int64,
          "per-task event counter 1, 2, 3, ... (H-ARC `action_id`, 2024 `num_actions`); not reset between "
          "attempts; the authoritative order of a task's events", ge=1),
    Field("action", pl.String, "H-ARC interface event name (spec/formats.md §D.7)", isin=HARC_ACTIONS),
    Field("occurred_at", pl.Datetime("us"),
          "when the event was logged: naive timestamp on the participant's local clock (tagged "
          "participant_local; no zone, 1-second resolution); compare only within a participant"),
    Field("is_solved", pl.Boolean, "the task was solved (events: from the correct submit onward; attempts: "
          "this attempt's submission was correct)"),
    Field("is_done", pl.Boolean, "H-ARC `done`: post-processing marker of a finished attempt"),
    Field("test_input_grid", pl.String,
          "the task's test input as shown, as a grid string; the first event of each task holds the 3x3 "
          "zero placeholder (flag `input_placeholder`)", regex=GRID_STRING),
    Field("test_input_height", pl.Int64, "test input height as logged (`test_input_size_x`)", ge=1, le=30),
    Field("test_input_width", pl.Int64, "test input width as logged (`test_input_size_y`)", ge=1, le=30),
    Field("test_output_grid", pl.String,
          "the participant's output grid as a grid string: after the event (events), as submitted "
          "(attempts, incorrect submissions)", regex=GRID_STRING,
          # a grid the participant is editing rarely repeats (64 % distinct on a simulated data.csv): zstd makes
          # core_harc__actions 57 -> 17 MB for 573k events, for about 0.4 s less CPU to write than DuckDB's choice
          compression="zstd"),
    Field("test_output_height", pl.Int64,
          "height drop-down value (`test_output_size_x`); may lag the grid after an undo", ge=1, le=30),
    Field("test_output_width", pl.Int64,
          "width drop-down value (`test_output_size_y`); may lag the grid after an undo", ge=1, le=30),
    Field("action_row", pl.Int64, "row of the cell the event touched (`action_x`); null when no cell",
          nullable=True, ge=0, le=29),
    Field("action_col", pl.Int64, "column of the cell the event touched (`action_y`); null when no cell",
          nullable=True, ge=0, le=29),
    Field("select_loc", pl.String, "grid of a selection event; null otherwise", nullable=True,
          isin=SELECT_LOCATIONS),
    Field("selected_data_json", pl.String, "`selected_data`: JSON list of [row, col] (persists, may be stale)",
          nullable=True),
    Field("selected_symbol", pl.Int64, "selected colour 0-9", nullable=True, ge=0, le=9),
    Field("selected_tool", pl.String, "selected tool", nullable=True, isin=HARC_TOOLS),
    Field("copy_paste_data_json", pl.String, "`copy_paste_data`: JSON list of [row, col, symbol] (clipboard)",
          nullable=True),
    Field("is_tutorial", pl.Boolean, "a tutorial row or task (`is_tutorial`, or task_number 0)"),
    Field("is_complete", pl.Boolean, "the participant finished the whole experiment (`complete`)"),
    # --- H-ARC per task / attempt -----------------------------------------------------------------
    Field("first_description", pl.String, "the participant's first written description of the rule "
          "(`first_written_solution`)", nullable=True),
    Field("last_description", pl.String, "the final written description (`last_written_solution`)",
          nullable=True),
    Field("has_terminal_row", pl.Boolean,
          "the task's last event (highest attempt, then highest action_number) is `no_last_description`, "
          "`write_description` or `write_last_description`; tasks without one are dropped by the "
          "authors' get_summary"),
    Field("last_action_number", pl.Int64,
          "action_number of the attempt's last event (summary `num_actions`: events until the submission, "
          "cumulative within the task)", ge=1),
    # --- H-ARC incorrect submissions --------------------------------------------------------------
    Field("n_submissions", pl.Int64, "how many times this wrong grid was submitted for the task (`count`)",
          ge=1),
    Field("output_grid_md5", pl.String,
          "md5 hex of the grid string (2024 `hashed_output_grid`; flag `md5_mismatch` when it disagrees)",
          nullable=True, regex=r"^[0-9a-f]{32}$"),
    # --- H-ARC surveys ----------------------------------------------------------------------------
    Field("feedback_text", pl.String, "free-text feedback at the end of the experiment", nullable=True),
    Field("age", pl.String, "survey answer as given", nullable=True),
    Field("gender", pl.String, "survey answer as given", nullable=True),
    Field("race", pl.String, "survey answer as given", nullable=True),
    Field("education_level", pl.String, "survey answer as given", nullable=True),
    Field("household_income", pl.String, "survey answer as given (2024 release only)", nullable=True),
    Field("normal_vision", pl.String, "survey answer as given (text, not a boolean)", nullable=True),
    Field("color_blind", pl.String, "survey answer as given (text, not a boolean)", nullable=True),
    Field("fluent_english", pl.String, "survey answer as given (text, not a boolean)", nullable=True),
    Field("is_withdrawn", pl.Boolean, "the participant withdrew (`withdraw`)"),
    Field("withdraw_reason", pl.String, "reason chosen when withdrawing", nullable=True),
    Field("withdraw_comment", pl.String, "free-text comment when withdrawing", nullable=True),
    # --- ARC task JSON ----------------------------------------------------------------------------
    Field("n_train_pairs", pl.Int64, "demonstration (train) pairs in the task", ge=0),
    Field("n_test_pairs", pl.Int64, "test pairs in the task", ge=0),
    Field("has_test_outputs", pl.Boolean, "every test pair carries its output (evaluation files may omit it)"),
    Field("task_json", pl.String, "the task object (`train`, `test`, ...) as compact JSON text"),
    Field("pair_split", pl.String, "which list of the task the pair is in", isin=("train", "test")),
    Field("pair_index", pl.Int64, "0-based position of the pair in its list", ge=0),
    Field("input_grid", pl.String, "the pair's input as a grid string", regex=GRID_STRING),
    Field("output_grid", pl.String, "the pair's output as a grid string; null when the file omits it",
          nullable=True, regex=GRID_STRING),
    Field("input_height", pl.Int64, "rows of the input grid", ge=1, le=30),
    Field("input_width", pl.Int64, "columns of the input grid", ge=1, le=30),
    Field("output_height", pl.Int64, "rows of the output grid", nullable=True, ge=1, le=30),
    Field("output_width", pl.Int64, "columns of the output grid", nullable=True, ge=1, le=30),
    # --- ARC-TGI ----------------------------------------------------------------------------------
    Field("generated_at", pl.Datetime("us"),
          "ARC-TGI `created_at`: when the generator produced the task, as written (naive; a written "
          "offset is converted to UTC and flagged `offset_converted_to_utc`)"),
    Field("generator_name", pl.String, "ARC-TGI generator module name (e.g. `task0b148d64`)"),
    Field("input_reasoning_chain_json", pl.String, "JSON list of strings describing the inputs"),
    Field("transformation_reasoning_chain_json", pl.String, "JSON list of strings describing the "
          "transformation"),
    Field("task_variables_json", pl.String, "JSON object of the sampled task variables"),
    Field("code_text", pl.String,
          "Python source of the generator's transform, stored as text and NEVER executed by ingest "
          "(re-execution belongs in a sandboxed verification step)"),
]

