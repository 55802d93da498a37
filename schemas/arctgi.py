"""ARC-TGI task families: diversity of the generated tasks, witness checks and human audits per family.

A family is the tasks one generator produced. `family_id` is the generator name, except where the same
name's tasks fall into two families (two benchmark folders, or a folder and tasks of unknown folder that cannot
join it; 4 names repeat across the public repository's folders): then each folder's tasks of that name get
`<family_prefix>/<generator_name>` so the generators stay apart (pipeline/transforms/arctgi.py). The prefix
(`ARC-AGI-1-Train`, ...) comes from `arcstudy ingest --family-prefix`, else from the export's path (its
folder or file name, pipeline/ingest/harc_arc.py); `benchmark` and `benchmark_split` are read from it. A task
read from several files (all.csv beside the per-folder CSVs: the same generator, code, task, reasoning chains and
variables under a new task_id) counts once, as its folder copy (harc_arc.tgi_task_copies).

Reused fields keep their meaning: task_id, file_id, generator_name, n_tasks, n_attempts, n_sessions,
n_solved, n_solved_within_2, attempt_solve_rate, solve_rate_ci_low/high, solve_rate_within_2,
confidence_level, reason, flags.
"""

from __future__ import annotations

import polars as pl

from schemas.model import Field

WITNESS_STATUSES = ("pass", "mismatch", "error", "timeout", "refused", "nondeterministic")
HUMAN_DATA_SOURCES = ("arc-agi-2", "h-arc")
# Generator names that more than one folder of the generator repository uses (spec/formats.md F): a task of one
# of them from a file that names no folder (all.csv alone) cannot be told to either generator.
SHARED_GENERATOR_NAMES = ("task00576224", "task0962bcdd", "task0a938d79", "task150deff5")

FIELDS: list[Field] = [
    # --- family identity --------------------------------------------------------------------------------
    Field("family_prefix", pl.String,
          "benchmark folder the export came from (`ARC-AGI-1-Train`, `ARC-AGI-2-Eval`, `ARC-Mini`, ...): "
          "`--family-prefix` at ingest, else the export's folder or file name; null when neither names one",
          nullable=True),
    Field("family_id", pl.String,
          "the task family: the generator name, or `<family_prefix>/<generator_name>` when the name's tasks fall "
          "into more than one family (two prefixes, or a prefix and tasks of unknown folder that cannot join it; "
          "names repeat across the generator repository's folders)"),
    Field("benchmark", pl.String, "benchmark the family's source task belongs to, read from family_prefix "
          "(`ARC-AGI-1`, `ARC-AGI-2`, or the prefix itself)", nullable=True),
    Field("benchmark_split", pl.String, "split of the source task, read from family_prefix (`train`, `eval`)",
          nullable=True),
    Field("source_task_id", pl.String,
          "the ARC-AGI-1/2 task the family was generated from: generator_name without `task` when the rest is "
          "8 hex characters, else null", nullable=True),
    # --- out_arctgi__family_diversity -------------------------------------------------------------------
    Field("n_pairs", pl.Int64, "pairs (train and test) counted", ge=0),
    Field("input_height_min", pl.Int64, "smallest input grid height in the family", nullable=True),
    Field("input_height_max", pl.Int64, "largest input grid height", nullable=True),
    Field("input_width_min", pl.Int64, "smallest input grid width", nullable=True),
    Field("input_width_max", pl.Int64, "largest input grid width", nullable=True),
    Field("output_height_min", pl.Int64, "smallest output grid height", nullable=True),
    Field("output_height_max", pl.Int64, "largest output grid height", nullable=True),
    Field("output_width_min", pl.Int64, "smallest output grid width", nullable=True),
    Field("output_width_max", pl.Int64, "largest output grid width", nullable=True),
    Field("n_input_sizes", pl.Int64, "distinct input sizes (height x width)", ge=0),
    Field("n_output_sizes", pl.Int64, "distinct output sizes", ge=0),
    Field("n_colours", pl.Int64, "distinct colours (0-9) used in any grid of the family", ge=0, le=10),
    Field("mean_colours_per_grid", pl.Float64, "mean number of distinct colours in one grid (inputs and outputs)",
          nullable=True, ge=0, le=10),
    Field("input_objects_min", pl.Int64,
          "fewest objects in an input grid: an object is a 4-connected group of cells of one non-zero colour "
          "(0 is the background)", nullable=True, ge=0),
    Field("input_objects_median", pl.Float64, "median objects per input grid", nullable=True, ge=0),
    Field("input_objects_max", pl.Int64, "most objects in an input grid", nullable=True, ge=0),
    Field("output_objects_median", pl.Float64, "median objects per output grid", nullable=True, ge=0),
    Field("share_shape_unchanged", pl.Float64,
          "share of pairs with an output whose output size equals the input size", nullable=True, ge=0, le=1),
    Field("n_duplicate_grids", pl.Int64,
          "input grids that repeat an earlier input grid of the family (grids minus distinct grids)", ge=0),
    Field("n_duplicate_tasks", pl.Int64,
          "tasks whose pairs (inputs and outputs, in order) repeat another task of the family (tasks minus "
          "distinct tasks)", ge=0),
    Field("diversity_flags", pl.List(pl.String),
          "why the family looks narrow (pipeline/transforms/arctgi.py): `duplicate_tasks`, `duplicate_grids` "
          "(at least 20 % of input grids repeat), `one_input_size` (5+ tasks, all inputs one size), "
          "`one_colour_set` (5+ tasks, at most 2 colours in all), `folder_unknown` (tasks from a file that names "
          "no benchmark folder, e.g. all.csv alone, under a generator name more than one repository folder uses, "
          "or one that two folders in the database have: the family may mix two generators and claims no "
          "benchmark)"),
    # --- out_arctgi__witness_checks ---------------------------------------------------------------------
    Field("status", pl.String,
          "result of running the task's stored witness (`code`) on every pair, twice: `pass` (every output "
          "equal to the stored one, both runs), `mismatch` (an output differs, or is not a grid of integers 0-9 "
          "within 30 x 30), `error` (raised, returned no grid, did not compile, or ended its process), `timeout`, "
          "`refused` (the sandbox stopped a forbidden operation, or the memory or output limit), "
          "`nondeterministic` (the two runs differ)",
          isin=WITNESS_STATUSES),
    Field("n_match", pl.Int64, "pairs whose witness output equals the stored output", ge=0),
    Field("seconds", pl.Float64, "wall time spent checking the task, seconds", ge=0),
    # --- out_arctgi__family_audits ----------------------------------------------------------------------
    Field("median_solved_duration_s", pl.Float64,
          "median duration of the audit units that solved, seconds (ARC-AGI-2 layout: duration_seconds; H-ARC "
          "layout: first to last event of the task when its data.csv events are ingested; summary rows alone "
          "have no times and do not count here)",
          nullable=True, ge=0),
    Field("n_tasks_with_answers", pl.Int64, "audited tasks with at least one first submission (a grid)", ge=0),
    Field("answer_agreement", pl.Float64,
          "per task, the share of first submissions equal to the task's most common first submission; "
          "averaged over the family's tasks with answers", nullable=True, ge=0, le=1),
    Field("min_raters_per_task", pl.Int64, "fewest first submissions any answered task of the family has",
          nullable=True, ge=0),
    Field("fleiss_kappa", pl.Float64,
          "Fleiss' kappa of the first submissions (statsmodels fleiss_kappa; subjects: tasks, categories: "
          "distinct grids), when every answered task has 2 or more raters; each task counts its first "
          "min_raters_per_task raters in participant order so that all tasks have as many; null when "
          "undefined (one category only)", nullable=True),
    Field("source_human_data", pl.String,
          "whose human numbers source_solve_rate_within_2 comes from: `arc-agi-2` (core_arc2__attempts) or "
          "`h-arc` (core_harc__attempts); null when the source task has none", nullable=True,
          isin=HUMAN_DATA_SOURCES),
    Field("source_n_attempts", pl.Int64,
          "attempts at the source task in that data (ARC-AGI-2: sessions x test pairs; H-ARC: participants)",
          nullable=True, ge=0),
    Field("source_solve_rate_within_2", pl.Float64, "share of those that solved within 2 submissions",
          nullable=True, ge=0, le=1),
    Field("is_much_harder_than_source", pl.Boolean,
          "the family's solve rate within 2 is at least 0.25 below its source task's and their Wilson intervals do "
          "not overlap (the family's upper bound is below the source's lower bound; pipeline/transforms/arctgi.py "
          "says why)"),
]
