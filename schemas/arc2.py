"""ARC-AGI-2 human testing attempt logs (spec/formats.md §H) and the calibration tables built from them.

The same layout carries human audits of ARC-TGI generated tasks (`task_ID` = the ARC-TGI `task_id`,
`task_set` free text such as "ARC-TGI"): those rows land in core_arc2__attempts like any other and are
told apart at build time by joining with core_arctgi__tasks (pipeline/transforms/arc2.py).

Conventions: `start_time_seconds` becomes `start_offset_s` (seconds from the start of the session, not a
timestamp); `duration_seconds` becomes `attempt_duration_s`; `submissions` and `correct_submissions` become
`n_attempt_submissions` and `n_correct_submissions` (`n_submissions` already names the H-ARC count of one
wrong grid). Reused fields keep their meaning: task_id, session_id, is_solved, n_attempts, n_sessions,
median_duration_s, n_test_pairs, confidence_level, flags and the provenance fields of `schemas.meta`.
"""

from __future__ import annotations

import polars as pl

from schemas.model import Field

ARC2_TASK_SETS = ("Public Train", "Public Eval")
REPRODUCTION_STATUSES = ("reproduced", "not_reproduced", "cannot_check")

FIELDS: list[Field] = [
    # --- core_arc2__attempts ---------------------------------------------------------------------------
    Field("task_set", pl.String,
          "`task_set` as written: `Public Train` or `Public Eval` in the ARC-AGI-2 release; free text (e.g. "
          "`ARC-TGI`) in an audit of generated tasks (flag `nonstandard_task_set`)"),
    Field("test_index", pl.Int64, "which test pair of the task the attempt is at (0, 1, ...)", ge=0),
    Field("start_offset_s", pl.Float64,
          "`start_time_seconds`: start of the attempt in seconds from the start of the session; null when the "
          "file leaves it empty (flag `no_duration`)", nullable=True, ge=0),
    Field("attempt_duration_s", pl.Float64, "`duration_seconds`: time spent on the attempt, seconds; null when "
          "the file leaves it empty (flag `no_duration`: the row counts, its time does not)", nullable=True, ge=0),
    Field("n_attempt_submissions", pl.Int64,
          "`submissions`: grids submitted in the attempt (0 when the participant moved on without submitting)",
          ge=0),
    Field("n_correct_submissions", pl.Int64,
          "`correct_submissions`: correct grids submitted in the attempt (0 unsolved; 1, rarely 2, solved)",
          ge=0),
    Field("is_solved_within_2", pl.Boolean,
          "one of the attempt's first two submissions was certainly correct: n_correct_submissions >= 1 and "
          "(n_attempt_submissions <= 2 or at most one wrong submission); false where the log cannot tell "
          "(e.g. 3 submissions, 1 correct)"),
    # --- out_arc2__pair_calibration and friends ----------------------------------------------------------
    Field("n_sessions", pl.Int64, "distinct sessions (participants) counted", ge=0),
    Field("n_solved", pl.Int64,
          "solvers: units that solved (a correct submission in any of their rows). A unit is one session (person) "
          "x test pair, all its rows together: per pair, sessions; per task, summed over its pairs; in family "
          "audits, also H-ARC participant x task", ge=0),
    Field("n_solved_within_2", pl.Int64,
          "units (as n_solved) certainly solved within 2 submissions: the unit's rows in start-time order, the "
          "submissions before its first correct row plus that row's wrong ones at most 1 (one row: "
          "is_solved_within_2); where the times cannot order its rows the worst order counts, so a lower bound",
          ge=0),
    Field("meets_two_solver_rule", pl.Boolean,
          "the ARC-AGI-2 keep rule (two people): pair: n_solved_within_2 >= 2 distinct sessions; task: every test "
          "pair meets it"),
    Field("attempt_solve_rate", pl.Float64,
          "the solve rate: n_solved over the units that tried (per ARC-AGI-2 pair: n_sessions; per family audit: "
          "n_attempts, one unit each)", nullable=True, ge=0, le=1),
    Field("solve_rate_ci_low", pl.Float64,
          "Wilson interval lower bound of attempt_solve_rate (statsmodels proportion_confint, method wilson, at "
          "confidence_level)", nullable=True, ge=0, le=1),
    Field("solve_rate_ci_high", pl.Float64, "Wilson interval upper bound of attempt_solve_rate", nullable=True,
          ge=0, le=1),
    Field("solve_rate_within_2", pl.Float64, "n_solved_within_2 over the same units as attempt_solve_rate",
          nullable=True, ge=0, le=1),
    Field("n_pairs_meeting_rule", pl.Int64, "test pairs of the task that meet the two-solver rule", ge=0),
    Field("median_task_duration_s", pl.Float64,
          "median over sessions of the time a session spent on the task: the sum of its rows' durations over "
          "the task's test pairs", nullable=True, ge=0),
    Field("n_pairs_attempted", pl.Int64, "(task, test pair)s the session has a row for", ge=0),
    Field("n_pairs_solved_within_2", pl.Int64,
          "of those, pairs the session solved within 2 submissions (its rows on the pair together, as "
          "n_solved_within_2)", ge=0),
    Field("session_score", pl.Float64,
          "n_pairs_solved_within_2 / n_pairs_attempted: the session's test-taker score (its mean over sessions is "
          "the published \"average test-taker score\")", ge=0, le=1),
    Field("total_duration_s", pl.Float64, "sum of the session's attempt durations, seconds", ge=0),
    # --- out_arc2__reproduction ---------------------------------------------------------------------------
    Field("claim_id", pl.String, "short id of a published ARC-AGI-2 calibration figure"),
    Field("claim", pl.String, "the published figure in words, with where it comes from"),
    Field("claimed_value", pl.Float64, "the published number", nullable=True),
    Field("measured_value", pl.Float64, "the same quantity computed from the ingested log", nullable=True),
    Field("reproduction_status", pl.String,
          "`reproduced` (within the stated tolerance), `not_reproduced`, or `cannot_check` (the public file "
          "cannot give this number; `explanation` says why)", isin=REPRODUCTION_STATUSES),
    Field("explanation", pl.String, "how the measured value was computed, and what the public file cannot show"),
]
