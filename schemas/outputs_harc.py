"""Derived `out_harc__*` tables: H-ARC trace checks (`arcstudy replay-harc`) and the H-ARC paper's analyses
(`arcstudy harc-analyses`), built by pipeline/harc/ from core_harc__actions, core_harc__participant_tasks and
the ARC task files (core_arc__task_pairs); without events, the tables that summary_data.csv and
incorrect_submissions.csv allow are built from core_harc__attempts and core_harc__incorrect_submissions
(pipeline/harc/summary_files.py) and the others are left empty.

Fields reused from other modules keep their meaning: release_generation, participant_id, task_id, exp_name,
task_split, task_number, attempt_number, action_number, test_output_grid, is_solved, is_complete, reason,
flags, confidence_level.

Every analysis table is computed for one release generation per run (chosen by `--release`, `osf-current` by
default when present) and that release's rows are replaced; `release_generation` is the first key column, so
both releases can sit side by side and the choice is visible in every row.
"""

from __future__ import annotations

import polars as pl

from schemas.model import Field

REPLAY_STATUSES = ("consistent", "divergent", "not_replayable")
DIVERGENCE_KINDS = ("grid", "size", "action", "order", "state")
PREVIOUS_GRID_SOURCES = ("previous_task", "tutorial_task", "unknown")
BOUND_KINDS = ("pessimistic", "optimistic")
ANSWER_SOURCES = ("arc_task_file", "correct_submission")
TIME_MEASURES = ("task_duration_s", "time_per_attempt_s", "time_to_first_action_s", "thinking_time_s",
                 "thinking_time_per_attempt_s")
TEST_KINDS = ("pearson", "t_test_pooled")
EFFECT_SIZE_KINDS = ("pearson_r", "cohens_d")
GRID_STRING = r"^\|([0-9]+\|)+$"

FIELDS: list[Field] = [
    # --- trace checks ----------------------------------------------------------------------------------
    Field("replay_status", pl.String,
          "result of replaying the trace through the H-ARC editor engine: `consistent` (every row's grid and "
          "drop-down sizes reproduced), `divergent` (first disagreement in the divergence_* columns), "
          "`not_replayable` (a row the engine cannot apply at all; reason says why)", isin=REPLAY_STATUSES),
    Field("n_trace_rows", pl.Int64, "event rows in the participant-task trace", ge=0),
    Field("n_rows_replayed", pl.Int64, "rows applied and checked, the diverging row included", ge=0),
    Field("divergence_action_number", pl.Int64,
          "action_number of the first divergent row, or of the row that made the trace not replayable",
          nullable=True, ge=1),
    Field("divergence_action", pl.String, "the action (event name) of that row, as logged", nullable=True),
    Field("divergence_kind", pl.String,
          "what disagreed first: `grid` (test_output_grid), `size` (drop-down sizes), `action` (a row the "
          "page could not have logged in the replayed state), `order` (action_number not increasing), "
          "`state` (a secondary check, only with --strict-replay)", nullable=True, isin=DIVERGENCE_KINDS),
    Field("recorded_grid", pl.String, "the grid the divergent row logs (test_output_grid)", nullable=True),
    Field("replayed_grid", pl.String, "the editor's grid after applying the divergent row", nullable=True),
    Field("recorded_height", pl.Int64, "height drop-down the divergent row logs", nullable=True),
    Field("recorded_width", pl.Int64, "width drop-down the divergent row logs", nullable=True),
    Field("replayed_height", pl.Int64, "the editor's height drop-down after the divergent row", nullable=True),
    Field("replayed_width", pl.Int64, "the editor's width drop-down after the divergent row", nullable=True),
    Field("note_codes", pl.List(pl.String),
          "distinct codes of the replay notes, sorted: modelled logging quirks (Q3, Q4, Q9, Q11, Q12), "
          "secondary mismatches (V3 colour/tool, V4 clipboard/selection, V5 attempt/solved, V6 input, "
          "selection), V7 action_number gaps, late_start, skipped, auto_solve (engine/harc/replay.py)"),
    Field("n_mismatch_notes", pl.Int64,
          "notes that record a disagreement between a row and the replayed state (V3-V6, selection) without "
          "being a divergence", ge=0),
    Field("n_adopted_rows", pl.Int64,
          "rows whose grid was taken from the log instead of verified (undo into an unknown previous grid, "
          "late start, auto_solve)", ge=0),
    Field("previous_grid_source", pl.String,
          "where the previous task's final grid (the undo stack's bottom at task start) came from: the "
          "participant's task_number - 1 trace, the tutorial trace, or unknown (undo into it is adopted)",
          isin=PREVIOUS_GRID_SOURCES),
    # --- visited states and descriptives ---------------------------------------------------------------
    Field("n_traces", pl.Int64, "participant-task traces", ge=0),
    Field("n_unique_states", pl.Int64,
          "distinct output grids visited: in one trace, or across a task's traces (the visited-state graph's "
          "nodes); per split, the sum over its tasks", ge=0),
    Field("n_state_transitions", pl.Int64,
          "distinct observed transitions between two different grids (the visited-state graph's edges)", ge=0),
    Field("n_correct_states", pl.Int64, "distinct grids submitted and judged correct", ge=0),
    Field("n_incorrect_states", pl.Int64, "distinct grids submitted and judged incorrect", ge=0),
    Field("mean_unique_states_per_trace", pl.Float64, "mean over the task's traces of their n_unique_states",
          nullable=True, ge=0),
    Field("n_action_rows", pl.Int64, "event rows (tutorial rows excluded)", ge=0),
    Field("n_tasks", pl.Int64, "distinct tasks", ge=0),
    Field("n_participants", pl.Int64, "distinct participants counted: per task (or task position), those who finished it (the "
          "denominator of solve_rate); per split, everyone with a non-tutorial event, finished or not", ge=0),
    Field("n_participants_finished", pl.Int64,
          "participants who finished at least one task: the denominator of share_participants_all_solved, "
          "share_participants_none_solved and mean_participant_solve_share", ge=0),
    Field("n_participant_tasks", pl.Int64, "participant x task pairs counted", ge=0),
    Field("n_task_attempts", pl.Int64,
          "participant x task x attempt rows as the authors' get_summary derives them (the paper's "
          "'attempts'; attempt 4 recoded as 3)", ge=0),
    Field("mean_attempts_to_solution", pl.Float64,
          "mean solved_at_attempt over solved participant-tasks", nullable=True, ge=1, le=3),
    # --- participant-task outcomes ---------------------------------------------------------------------
    Field("n_attempts_used", pl.Int64, "attempts the participant used on the task: the highest attempt_number, "
          "4 recoded as 3", ge=1, le=3),
    Field("solved_at_attempt", pl.Int64, "the attempt whose submission was correct; null when unsolved",
          nullable=True, ge=1, le=3),
    Field("task_duration_s", pl.Float64,
          "seconds from the task's first to its last event (action_number order); null when the "
          "participant's clock went back within the task", nullable=True, ge=0),
    Field("time_per_attempt_s", pl.Float64, "task_duration_s / n_attempts_used (the paper's 'time per task "
          "normalised by attempts')", nullable=True, ge=0),
    Field("time_to_first_action_s", pl.Float64,
          "seconds from the task-start reset_grid row to the next event (the participant's first action); "
          "null without such a pair or when the clock went back", nullable=True, ge=0),
    Field("thinking_time_s", pl.Float64,
          "solved tasks only: sum of the gaps of at least the thinking threshold (5 s) between consecutive "
          "events up to the correct submit, leaving out gaps that end on a writing or submission row "
          "(write_first_description, submit, write_last_description, no_last_description, "
          "write_description), which include description-writing time; null when unsolved or when the "
          "clock went back", nullable=True, ge=0),
    Field("thinking_time_per_attempt_s", pl.Float64, "thinking_time_s / solved_at_attempt", nullable=True, ge=0),
    Field("first_change_action", pl.String,
          "the action of the first row whose grid differs from the previous row's grid (for attempt 1 the "
          "previous row of the first change is the task-start reset); `none` when the attempt changed nothing"),
    # --- accuracy ----------------------------------------------------------------------------------------
    Field("max_attempts", pl.Int64, "k of k-attempt accuracy: a task counts as solved when it was solved "
          "within this many attempts", ge=1, le=3),
    Field("n_solvers", pl.Int64, "participants who solved the task within max_attempts", ge=0),
    Field("solve_rate", pl.Float64, "n_solvers / n_participants", nullable=True, ge=0, le=1),
    Field("mean_task_accuracy", pl.Float64,
          "task-averaged k-attempt accuracy: the mean over tasks of each task's solve_rate", nullable=True,
          ge=0, le=1),
    Field("n_tasks_solved_by_any", pl.Int64, "tasks with at least one solver", ge=0),
    Field("n_tasks_solved_by_all", pl.Int64, "tasks solved by every participant who finished them", ge=0),
    Field("n_tasks_solved_by_none", pl.Int64, "tasks nobody solved", ge=0),
    Field("share_participants_all_solved", pl.Float64,
          "share of participants who solved every task they finished", nullable=True, ge=0, le=1),
    Field("share_participants_none_solved", pl.Float64,
          "share of participants who solved none of the tasks they finished", nullable=True, ge=0, le=1),
    Field("mean_participant_solve_share", pl.Float64, "mean over participants of solve_share", nullable=True,
          ge=0, le=1),
    Field("min_solvers", pl.Int64, "N of 'tasks with at least N solvers' (the paper's Figure 5)", ge=0),
    Field("n_tasks_at_least", pl.Int64, "tasks with at least min_solvers solvers", ge=0),
    Field("share_tasks_at_least", pl.Float64, "n_tasks_at_least / n_tasks", nullable=True, ge=0, le=1),
    Field("n_tasks_expected", pl.Int64,
          "tasks the participant's experiment assigned (10 for expv0/expv1, else 5)", ge=1),
    Field("n_tasks_finished", pl.Int64, "tasks the participant finished (a terminal description row)", ge=0),
    Field("n_tasks_solved", pl.Int64, "finished tasks solved within max_attempts", ge=0),
    Field("solve_share", pl.Float64, "n_tasks_solved / n_tasks_finished (the paper's Figure 6)", nullable=True,
          ge=0, le=1),
    # --- bounds -----------------------------------------------------------------------------------------
    Field("bound_kind", pl.String, "`pessimistic` (imputed tasks failed) or `optimistic` (imputed tasks "
          "solved)", isin=BOUND_KINDS),
    Field("bound_estimate", pl.Float64, "mean over the simulations of the imputed mean_task_accuracy",
          ge=0, le=1),
    Field("bound_sd", pl.Float64, "standard deviation of the imputed mean_task_accuracy over simulations", ge=0),
    Field("bound_p025", pl.Float64, "2.5th percentile of the imputed mean_task_accuracy over simulations",
          ge=0, le=1),
    Field("bound_p975", pl.Float64, "97.5th percentile of the imputed mean_task_accuracy over simulations",
          ge=0, le=1),
    Field("bound_min", pl.Float64, "smallest imputed mean_task_accuracy over simulations", ge=0, le=1),
    Field("bound_max", pl.Float64, "largest imputed mean_task_accuracy over simulations", ge=0, le=1),
    Field("n_simulations", pl.Int64, "imputation simulations run", ge=1),
    Field("random_seed", pl.Int64, "seed of the random generator (numpy PCG64) the simulations drew from"),
    Field("n_imputed_participants", pl.Int64, "participants who finished fewer tasks than assigned", ge=0),
    Field("n_imputed_tasks", pl.Int64, "tasks imputed per simulation (sum of the missing tasks)", ge=0),
    # --- errors -----------------------------------------------------------------------------------------
    Field("grid_height", pl.Int64, "rows of the grid in test_output_grid", ge=1, le=30),
    Field("grid_width", pl.Int64, "columns of the grid in test_output_grid", ge=1, le=30),
    Field("is_size_correct", pl.Boolean, "the grid has the correct output's height and width; null when the "
          "correct output is unknown", nullable=True),
    Field("normalized_edit_distance", pl.Float64,
          "share of cells that differ from the correct output; only for grids of the correct size (null "
          "otherwise)", nullable=True, ge=0, le=1),
    Field("is_copy_of_train_input", pl.Boolean, "the grid equals one of the task's train inputs; null without "
          "the ARC task file", nullable=True),
    Field("is_copy_of_train_output", pl.Boolean, "the grid equals one of the task's train outputs; null without "
          "the ARC task file", nullable=True),
    Field("is_copy_of_test_input", pl.Boolean, "the grid equals the task's (first) test input; null without the "
          "ARC task file", nullable=True),
    Field("is_copy_error", pl.Boolean, "an incorrect grid that copies a train input, a train output or the test "
          "input; null for correct grids and without the ARC task file", nullable=True),
    Field("answer_source", pl.String,
          "where the correct output came from: test[0].output of the ARC task file, else the grid of a "
          "correct submission; null when neither exists", nullable=True, isin=ANSWER_SOURCES),
    Field("answer_height", pl.Int64, "rows of the correct output", nullable=True, ge=1, le=30),
    Field("answer_width", pl.Int64, "columns of the correct output", nullable=True, ge=1, le=30),
    Field("n_submits", pl.Int64, "submit rows (every evaluated submission, repeats included)", ge=0),
    Field("n_incorrect_submits", pl.Int64, "submit rows judged incorrect", ge=0),
    Field("n_unique_incorrect_grids", pl.Int64, "distinct grids among the incorrect submit rows", ge=0),
    Field("error_divergence", pl.Float64,
          "n_unique_incorrect_grids / n_submits: how scattered a task's errors are relative to all its "
          "submissions (study-protocol.md §4)", nullable=True, ge=0, le=1),
    Field("mean_normalized_edit_distance", pl.Float64,
          "mean normalized_edit_distance of incorrect submissions of the correct size", nullable=True, ge=0, le=1),
    Field("n_incorrect_with_task_file", pl.Int64, "incorrect submit rows whose task has an ARC task file (the "
          "denominator of the copy-error shares)", ge=0),
    Field("share_incorrect_size_correct", pl.Float64,
          "share of incorrect submissions (with a known answer) that have the correct height and width",
          nullable=True, ge=0, le=1),
    Field("share_copy_errors", pl.Float64, "share of incorrect submissions that are copy errors", nullable=True,
          ge=0, le=1),
    Field("share_copy_train_input", pl.Float64, "share of incorrect submissions equal to a train input",
          nullable=True, ge=0, le=1),
    Field("share_copy_train_output", pl.Float64, "share of incorrect submissions equal to a train output",
          nullable=True, ge=0, le=1),
    Field("share_copy_test_input", pl.Float64, "share of incorrect submissions equal to the test input",
          nullable=True, ge=0, le=1),
    # --- statistical tests --------------------------------------------------------------------------------
    Field("test_id", pl.String, "which comparison: `<measure>:training_vs_evaluation` or "
          "`error_divergence_vs_solve_rate:<split>`"),
    Field("test_kind", pl.String, "`pearson` (scipy.stats.pearsonr) or `t_test_pooled` (statsmodels "
          "ttest_ind, pooled variance, two-sided)", isin=TEST_KINDS),
    Field("test_description", pl.String, "what was compared, in words"),
    Field("group_1", pl.String, "first sample (t-test) or the x variable (correlation)"),
    Field("group_2", pl.String, "second sample (t-test) or the y variable (correlation)"),
    Field("n_1", pl.Int64, "observations in group_1 (correlation: pairs)", ge=0),
    Field("n_2", pl.Int64, "observations in group_2 (correlation: pairs)", ge=0),
    Field("mean_1", pl.Float64, "mean of group_1", nullable=True),
    Field("mean_2", pl.Float64, "mean of group_2", nullable=True),
    Field("statistic", pl.Float64, "t (group_1 minus group_2) or Pearson r", nullable=True),
    Field("degrees_of_freedom", pl.Float64, "degrees of freedom (t-test: n_1 + n_2 - 2; correlation: n - 2)",
          nullable=True),
    Field("p_value", pl.Float64, "two-sided p-value", nullable=True, ge=0, le=1),
    Field("effect_size", pl.Float64, "Cohen's d with the pooled standard deviation (t-test) or r (correlation)",
          nullable=True),
    Field("effect_size_kind", pl.String, "what effect_size is", isin=EFFECT_SIZE_KINDS),
    Field("ci_low", pl.Float64, "lower end of the confidence interval (t-test: of mean_1 - mean_2; "
          "correlation: of r, Fisher z; model: of the coefficient)", nullable=True),
    Field("ci_high", pl.Float64, "upper end of the confidence interval", nullable=True),
    # --- time ---------------------------------------------------------------------------------------------
    Field("time_measure", pl.String, "which per-participant-task time of out_harc__task_outcomes",
          isin=TIME_MEASURES),
    Field("n_values", pl.Int64, "non-null values summarised", ge=0),
    Field("mean_s", pl.Float64, "mean, seconds", nullable=True, ge=0),
    Field("median_s", pl.Float64, "median, seconds", nullable=True, ge=0),
    Field("sd_s", pl.Float64, "sample standard deviation, seconds", nullable=True, ge=0),
    Field("p25_s", pl.Float64, "25th percentile, seconds", nullable=True, ge=0),
    Field("p75_s", pl.Float64, "75th percentile, seconds", nullable=True, ge=0),
    # --- first actions ------------------------------------------------------------------------------------
    Field("n_first_changes", pl.Int64, "attempts whose first grid change was this action", ge=0),
    Field("share_of_attempts", pl.Float64, "n_first_changes / attempts of the split at this attempt_number",
          ge=0, le=1),
    # --- learning -----------------------------------------------------------------------------------------
    Field("model_kind", pl.String, "the fitted model (pipeline/harc/learning.py explains the choice)"),
    Field("model_term", pl.String, "model term: `Intercept` or `task_number`"),
    Field("coefficient", pl.Float64, "estimated coefficient on the log-odds scale", nullable=True),
    Field("std_error", pl.Float64, "robust (sandwich) standard error", nullable=True, ge=0),
    Field("z_value", pl.Float64, "coefficient / std_error", nullable=True),
    Field("odds_ratio", pl.Float64, "exp(coefficient)", nullable=True, ge=0),
    Field("n_observations", pl.Int64, "participant-tasks in the model", ge=0),
    Field("n_groups", pl.Int64, "participants (clusters) in the model", ge=0),
    # --- reproduction of the published counts ---------------------------------------------------------------
    Field("metric", pl.String, "which published H-ARC number (pipeline/harc/published.py FACTS)"),
    Field("metric_description", pl.String, "what the number counts, in words"),
    Field("published_value", pl.Float64, "the value the H-ARC paper or its release notebooks report"),
    Field("observed_value", pl.Float64, "the same number from the ingested files; null when the file it needs "
          "is absent (needs_file names it)", nullable=True),
    Field("is_match", pl.Boolean, "observed_value equals published_value (within the rounding of a published "
          "percentage); null without an observed value", nullable=True),
    Field("observed_from", pl.String, "the input file(s) observed_value comes from", nullable=True),
    Field("needs_file", pl.String, "the absent input file observed_value needs; null when observed",
          nullable=True),
]

