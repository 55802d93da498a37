"""ARC-TGI task families: family ids, diversity per family, and human audits per family.

Families (`families`): `family_id` is the generator name. A task whose file names no prefix (benchmark folder)
joins the one family of its name that a prefix has only when there is exactly one and the name is not one of the
4 that the public repository's folders share; else it stays apart under the bare name, without a benchmark
label, flagged `folder_unknown` (its generator cannot be known). Where one name's tasks fall into more than one
family (two prefixes, or a prefix and tasks that cannot join it), each prefix's tasks get
`<family_prefix>/<generator_name>`, so the generators are told apart. A task found in several exports (a folder's
CSV and `all.csv`, which repeats it under a new task_id; or one task id read twice) counts once, as the copy that
names its folder (pipeline.ingest.harc_arc.tgi_task_copies).

Diversity (`family_diversity`): over every pair of every task of the family: grid sizes, colours, objects
(4-connected groups of one non-zero colour; 0 is the background), the share of pairs whose output has the
input's size, duplicate input grids and duplicate tasks (same pairs, inputs and outputs, in order).
`diversity_flags` name what a generator maintainer should look at: `duplicate_tasks` (any), `duplicate_grids`
(at least DUPLICATE_GRID_SHARE of the input grids repeat: a generator sampling from a small space),
`one_input_size` and `one_colour_set` (at least NARROW_MIN_TASKS tasks, all inputs one size / at most 2 colours
in all: the family does not vary what the paper's generators are meant to vary), `folder_unknown` (above).

Audits (`family_audits`): human audit rows joined to the family's tasks by task_id; a row naming a task_id that
two exports give to different tasks (harc_arc.tgi_task_instances) counts in no family (build says how many).
- ARC-AGI-2 layout (core_arc2__attempts, task_id = ARC-TGI task id): one unit per session x test pair, as in
  out_arc2__pair_calibration (pipeline.transforms.arc2.session_pairs: solved when a row has a correct
  submission; within 2 judged over the session's rows in start-time order).
- H-ARC layout (core_harc__attempts from summary_data.csv, task_id = ARC-TGI task id): one unit per
  participant x task (solved: any attempt solved; within 2: attempt 1 or 2 solved); its first submissions
  (attempt 1 grids) give answer agreement and Fleiss' kappa. The events (core_harc__actions, data.csv) give the
  unit its duration (first to last event of the task), and a unit of its own where only events were ingested
  (from its `submit` events: first submission, solved, solved on attempt 1 or 2). Where both releases hold a
  participant's rows, osf-current is used.
Answer agreement: per task, the share of first submissions equal to its most common first submission,
averaged over the family's tasks with answers. Fleiss' kappa (statsmodels `fleiss_kappa`, subjects = tasks,
categories = distinct grids) needs the same number of raters per subject: when every answered task has at
least 2, each task counts its first `min_raters_per_task` raters in participant-id order.

Source tasks: `task` + 8 hex characters names the ARC-AGI-1/2 task the family was generated from. Its human
numbers come from the ARC-AGI-2 rows (core_arc2__attempts, not audits; session x test pair units, as above)
when it has any, else from H-ARC
(core_harc__attempts, participants x task, within 2 = solved on attempt 1 or 2). A family is flagged much
harder than its source when its solve rate within 2 is at least MUCH_HARDER_GAP (0.25) below the source's
AND the two Wilson intervals (solve rate within 2, at solvability.confidence_level) do not overlap: the
family's upper bound is below the source's lower bound. Why: a generated instance of a task's rule should be
about as hard for people as the task itself; a gap of a quarter of all attempts is large next to the spread
between ARC's own splits, and the interval condition keeps small samples on either side (a few people per
family, about ten per ARC-AGI-2 test pair) from being flagged on sampling noise alone.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import polars as pl

from pipeline.ingest.harc_arc import benchmark_and_split, tgi_task_copies, tgi_task_instances
from pipeline.transforms.arc2 import session_pairs, wilson
from schemas.arctgi import SHARED_GENERATOR_NAMES

DUPLICATE_GRID_SHARE = 0.2
NARROW_MIN_TASKS = 5
MUCH_HARDER_GAP = 0.25
SOURCE_ID = r"^task([0-9a-f]{8})$"


# ------------------------------------------------------------------------------------------------------------
# families
# ------------------------------------------------------------------------------------------------------------
def families(tgi_tasks: pl.DataFrame) -> pl.DataFrame:
    """One row per distinct ARC-TGI task instance: file_id, task_id, generator_name, family_prefix, family_id,
    benchmark, benchmark_split, source_task_id, folder_unknown.

    Rows that repeat an instance (harc_arc.tgi_task_copies: all.csv beside the per-folder CSVs) count once, as
    the copy that names its folder (the one place where content tells which generator made a task: an exact copy).
    A task whose folder is known (its family_prefix) is in that folder's family. A task whose file names no folder
    joins the one family of its generator name that a known folder has, when there is exactly one and the name is
    not one that more than one folder of the generator repository uses (SHARED_GENERATOR_NAMES: the other
    generator may have made it). Otherwise its folder cannot be known: it stays in a family of its own under the
    bare name, without a benchmark label, flagged `folder_unknown` (a name that no known folder and no other
    repository folder uses is not flagged: its family is the only one it can be). Where a name's tasks fall into
    more than one family (two known folders, or a known folder and tasks that cannot join it), each folder's
    family is `<family_prefix>/<generator_name>`."""
    tasks = (tgi_task_copies(tgi_tasks).filter((pl.col("file_id") == pl.col("kept_file_id"))
                                               & (pl.col("task_id") == pl.col("kept_task_id")))
             .sort("file_id", "row_number")
             .select("file_id", "task_id", "generator_name", "family_prefix"))
    prefix, name = pl.col("family_prefix"), pl.col("generator_name")
    known = (tasks.filter(prefix.is_not_null()).group_by("generator_name")
             .agg(prefix.n_unique().alias("n_known"), prefix.first().alias("_only_prefix")))
    shared = pl.Series(list(SHARED_GENERATOR_NAMES), dtype=pl.String).implode()
    tasks = tasks.join(known, on="generator_name", how="left").with_columns(pl.col("n_known").fill_null(0))
    n_known = pl.col("n_known")
    joins = prefix.is_null() & (n_known == 1) & ~name.is_in(shared)
    apart = prefix.is_null() & ~joins  # in the name's folder-unknown family
    tasks = tasks.with_columns(joins.alias("_joins"), apart.alias("_apart"))
    split = tasks.group_by("generator_name").agg(
        ((pl.col("n_known").first() >= 2) | ((pl.col("n_known").first() == 1) & pl.col("_apart").any())).alias("_split"))
    tasks = tasks.join(split, on="generator_name", how="left")
    label = pl.when(pl.col("_joins")).then(pl.col("_only_prefix")).otherwise(prefix)  # the family's folder
    names = tasks.select(label.alias("p"))["p"].drop_nulls().unique().to_list()
    bench = {p: benchmark_and_split(p) for p in names}
    return tasks.with_columns(
        pl.when(pl.col("_split") & prefix.is_not_null())
        .then(pl.format("{}/{}", "family_prefix", "generator_name")).otherwise("generator_name").alias("family_id"),
        label.replace_strict({k: v[0] for k, v in bench.items()}, default=None, return_dtype=pl.String)
        .alias("benchmark"),
        label.replace_strict({k: v[1] for k, v in bench.items()}, default=None, return_dtype=pl.String)
        .alias("benchmark_split"),
        name.str.extract(SOURCE_ID, 1).alias("source_task_id"),
        (pl.col("_apart") & (name.is_in(shared) | (n_known >= 1))).alias("folder_unknown"),
    ).select("file_id", "task_id", "generator_name", "family_prefix", "family_id", "benchmark", "benchmark_split",
             "source_task_id", "folder_unknown")


# ------------------------------------------------------------------------------------------------------------
# diversity
# ------------------------------------------------------------------------------------------------------------
def grid_array(text: str) -> np.ndarray:
    """An H-ARC grid string (`|012|345|`) as a 2-D array of ints."""
    digits = np.frombuffer(text.replace("|", "").encode(), dtype=np.uint8) - ord("0")
    return digits.reshape(text.count("|") - 1, -1).astype(np.int8)


def grid_stats(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(distinct colours, objects) per grid string: an object is a 4-connected group of cells of one non-zero
    colour. Vectorised: grids of one size are stacked, every edge between equal non-zero neighbours of all of
    them goes into one graph, and its connected components are counted per grid (scipy.sparse.csgraph)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    colours = np.zeros(len(texts), dtype=np.int64)
    objects = np.zeros(len(texts), dtype=np.int64)
    by_shape: dict[tuple[int, int], list[int]] = {}
    arrays = [grid_array(t) for t in texts]
    for i, a in enumerate(arrays):
        by_shape.setdefault(a.shape, []).append(i)
    src, dst, grid_of, nonzero = [], [], [], []
    offset = 0
    for (h, w), members in by_shape.items():
        stack = np.stack([arrays[i] for i in members])
        colours[members] = sum((stack == c).any(axis=(1, 2)).astype(np.int64) for c in range(10))
        idx = offset + np.arange(stack.size).reshape(stack.shape)
        for same, a_idx, b_idx in (
                ((stack[:, :, 1:] == stack[:, :, :-1]) & (stack[:, :, 1:] != 0), idx[:, :, 1:], idx[:, :, :-1]),
                ((stack[:, 1:, :] == stack[:, :-1, :]) & (stack[:, 1:, :] != 0), idx[:, 1:, :], idx[:, :-1, :])):
            src.append(a_idx[same])
            dst.append(b_idx[same])
        grid_of.append(np.repeat(np.asarray(members), h * w))
        nonzero.append((stack != 0).ravel())
        offset += stack.size
    if offset == 0:
        return colours, objects
    s, d = np.concatenate(src), np.concatenate(dst)
    graph = coo_matrix((np.ones(len(s), dtype=np.int8), (s, d)), shape=(offset, offset))
    _, labels = connected_components(graph, directed=False)
    nz = np.concatenate(nonzero)
    owner = np.concatenate(grid_of)
    first = np.unique(labels[nz], return_index=True)[1]  # one node per object (components never cross grids)
    np.add.at(objects, owner[nz][first], 1)
    return colours, objects


def family_diversity(fam: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """out_arctgi__family_diversity."""
    p = pairs.join(fam.select("file_id", "task_id", "family_id"), on=["file_id", "task_id"], how="inner")
    if p.height == 0:
        from schemas.validate import empty_frame

        return empty_frame("out_arctgi__family_diversity")
    grids = pl.concat([p["input_grid"], p["output_grid"].drop_nulls()]).unique().to_list()
    n_colours, n_objects = grid_stats(grids)
    lookup = pl.DataFrame({"g": grids, "colours": n_colours, "objects": n_objects},
                          schema={"g": pl.String, "colours": pl.Int64, "objects": pl.Int64})
    p = (p.join(lookup.rename({"g": "input_grid", "colours": "in_colours", "objects": "in_objects"}),
                on="input_grid", how="left")
         .join(lookup.rename({"g": "output_grid", "colours": "out_colours", "objects": "out_objects"}),
               on="output_grid", how="left"))
    colour_sets = {}
    for family, gs in p.group_by("family_id").agg(pl.col("input_grid"), pl.col("output_grid").drop_nulls()) \
            .select("family_id", pl.concat_list("input_grid", "output_grid").alias("g")).iter_rows():
        colour_sets[family] = len(set("".join(gs)) - {"|"})
    task_keys = (p.sort("pair_split", "pair_index")
                 .group_by("family_id", "task_id")
                 .agg(pl.concat_str("pair_split", "input_grid", pl.col("output_grid").fill_null("-"),
                                    separator=":").str.join(";").alias("k"))
                 .group_by("family_id").agg(pl.len().alias("n_t"), pl.col("k").n_unique().alias("n_k")))
    df = p.group_by("family_id").agg(
        pl.col("task_id").n_unique().cast(pl.Int64).alias("n_tasks"),
        pl.len().cast(pl.Int64).alias("n_pairs"),
        pl.col("input_height").min().alias("input_height_min"), pl.col("input_height").max().alias("input_height_max"),
        pl.col("input_width").min().alias("input_width_min"), pl.col("input_width").max().alias("input_width_max"),
        pl.col("output_height").min().alias("output_height_min"),
        pl.col("output_height").max().alias("output_height_max"),
        pl.col("output_width").min().alias("output_width_min"), pl.col("output_width").max().alias("output_width_max"),
        pl.struct("input_height", "input_width").n_unique().cast(pl.Int64).alias("n_input_sizes"),
        pl.struct("output_height", "output_width").filter(pl.col("output_height").is_not_null())
        .n_unique().cast(pl.Int64).alias("n_output_sizes"),
        pl.concat_list(pl.col("in_colours"), pl.col("out_colours")).explode().drop_nulls().mean()
        .alias("mean_colours_per_grid"),
        pl.col("in_objects").min().alias("input_objects_min"),
        pl.col("in_objects").median().alias("input_objects_median"),
        pl.col("in_objects").max().alias("input_objects_max"),
        pl.col("out_objects").median().alias("output_objects_median"),
        ((pl.col("output_height") == pl.col("input_height")) & (pl.col("output_width") == pl.col("input_width")))
        .filter(pl.col("output_grid").is_not_null()).mean().alias("share_shape_unchanged"),
        (pl.len() - pl.col("input_grid").n_unique()).cast(pl.Int64).alias("n_duplicate_grids"),
    )
    df = (df.join(task_keys.select("family_id", (pl.col("n_t") - pl.col("n_k")).cast(pl.Int64)
                                   .alias("n_duplicate_tasks")), on="family_id", how="left")
          .with_columns(pl.col("family_id").replace_strict(colour_sets, return_dtype=pl.Int64).alias("n_colours")))
    meta = fam.group_by("family_id").agg(pl.col("generator_name").first(), pl.col("family_prefix").drop_nulls().first(),
                                         pl.col("benchmark").drop_nulls().first(),
                                         pl.col("benchmark_split").drop_nulls().first(),
                                         pl.col("source_task_id").first(), pl.col("folder_unknown").any())
    df = df.join(meta, on="family_id", how="left")
    flags = []
    for r in df.iter_rows(named=True):
        f = []
        if r["folder_unknown"]:
            f.append("folder_unknown")
        if r["n_duplicate_tasks"]:
            f.append("duplicate_tasks")
        if r["n_pairs"] and r["n_duplicate_grids"] / r["n_pairs"] >= DUPLICATE_GRID_SHARE:
            f.append("duplicate_grids")
        if r["n_tasks"] >= NARROW_MIN_TASKS and r["n_input_sizes"] == 1:
            f.append("one_input_size")
        if r["n_tasks"] >= NARROW_MIN_TASKS and r["n_colours"] <= 2:
            f.append("one_colour_set")
        flags.append(f)
    return (df.with_columns(pl.Series("diversity_flags", flags, dtype=pl.List(pl.String))).drop("folder_unknown")
            .sort("family_id"))


# ------------------------------------------------------------------------------------------------------------
# audits
# ------------------------------------------------------------------------------------------------------------
def _preferred_release(harc: pl.DataFrame) -> pl.DataFrame:
    """H-ARC rows of one release per participant: osf-current where a participant has rows in both."""
    if harc.height == 0:
        return harc
    rank = pl.when(pl.col("release_generation") == "osf-current").then(0).otherwise(1)
    best = harc.group_by("participant_id").agg(rank.min().alias("_best"))
    return harc.join(best, on="participant_id").filter(rank == pl.col("_best")).drop("_best")


def harc_units(harc: pl.DataFrame) -> pl.DataFrame:
    """One row per participant x task of H-ARC summary rows: solved, solved within 2, first submission."""
    h = _preferred_release(harc)
    return (h.sort("attempt_number").group_by("participant_id", "task_id").agg(
        pl.col("is_solved").any().alias("is_solved"),
        (pl.col("is_solved") & (pl.col("attempt_number") <= 2)).any().alias("is_solved_within_2"),
        pl.col("test_output_grid").first().alias("first_submission"))
        .rename({"participant_id": "rater_id"}))


ACTION_COLUMNS = ("release_generation", "participant_id", "task_id", "attempt_number", "action_number", "action",
                  "occurred_at", "is_solved", "test_output_grid")


def harc_event_units(actions: pl.DataFrame) -> pl.DataFrame:
    """One row per participant x task of H-ARC events (data.csv; core_harc__actions): the time on the task
    (first to last event), and from its `submit` events the first submission, solved, solved within 2 (a correct
    submit on attempt 1 or 2). Columns: rater_id, task_id, duration_s, has_submit, is_solved, is_solved_within_2,
    first_submission."""
    if actions.height == 0:
        return pl.DataFrame(schema={"rater_id": pl.String, "task_id": pl.String, "duration_s": pl.Float64,
                                    "has_submit": pl.Boolean, "is_solved": pl.Boolean,
                                    "is_solved_within_2": pl.Boolean, "first_submission": pl.String})
    a = _preferred_release(actions.select(ACTION_COLUMNS))
    spans = a.group_by("participant_id", "task_id").agg(
        ((pl.col("occurred_at").max() - pl.col("occurred_at").min()).dt.total_microseconds() / 1e6)
        .alias("duration_s"))
    submits = (a.filter(pl.col("action") == "submit").sort("action_number")
               .group_by("participant_id", "task_id").agg(
                   pl.col("is_solved").any().alias("is_solved"),
                   (pl.col("is_solved") & (pl.col("attempt_number") <= 2)).any().alias("is_solved_within_2"),
                   pl.col("test_output_grid").first().alias("first_submission")))
    return (spans.join(submits, on=["participant_id", "task_id"], how="left")
            .with_columns(pl.col("is_solved").is_not_null().alias("has_submit"),
                          pl.col("is_solved", "is_solved_within_2").fill_null(False))
            .rename({"participant_id": "rater_id"})
            .select("rater_id", "task_id", "duration_s", "has_submit", "is_solved", "is_solved_within_2",
                    "first_submission"))


def agreement(units: pl.DataFrame) -> tuple[float | None, int | None, float | None, int]:
    """(answer agreement, min raters per task, Fleiss' kappa, tasks with answers) of one family's units with
    first submissions (columns task_id, rater_id, first_submission)."""
    answered = units.filter(pl.col("first_submission").is_not_null())
    if answered.height == 0:
        return None, None, None, 0
    per_task = answered.sort("rater_id").group_by("task_id", maintain_order=True).agg(pl.col("first_submission"))
    shares, lists = [], []
    for _, subs in per_task.iter_rows():
        counts = Counter(subs)
        shares.append(max(counts.values()) / len(subs))
        lists.append(subs)
    min_raters = min(len(s) for s in lists)
    kappa = None
    if min_raters >= 2:
        from statsmodels.stats.inter_rater import fleiss_kappa

        cats = sorted({g for s in lists for g in s[:min_raters]})
        index = {g: i for i, g in enumerate(cats)}
        table = np.zeros((len(lists), len(cats)))
        for i, s in enumerate(lists):
            for g in s[:min_raters]:
                table[i, index[g]] += 1
        with np.errstate(invalid="ignore", divide="ignore"):
            value = float(fleiss_kappa(table, method="fleiss"))
        kappa = value if math.isfinite(value) else None
    return float(np.mean(shares)), min_raters, kappa, len(lists)


def source_numbers(arc2_rows: pl.DataFrame, harc_attempts: pl.DataFrame) -> pl.DataFrame:
    """Per source task id: source_human_data, source_n_attempts, source_solve_rate_within_2 (ARC-AGI-2 first)."""
    a = session_pairs(arc2_rows).group_by("task_id").agg(pl.len().cast(pl.Int64).alias("source_n_attempts"),
                                          pl.col("is_solved_within_2").mean().alias("source_solve_rate_within_2")) \
        .with_columns(pl.lit("arc-agi-2").alias("source_human_data"))
    h = harc_units(harc_attempts).group_by("task_id").agg(
        pl.len().cast(pl.Int64).alias("source_n_attempts"),
        pl.col("is_solved_within_2").mean().alias("source_solve_rate_within_2")) \
        .with_columns(pl.lit("h-arc").alias("source_human_data"))
    h = h.filter(~pl.col("task_id").is_in(a["task_id"].implode()))
    return pl.concat([a, h.select(a.columns)]).rename({"task_id": "source_task_id"})


def task_aliases(tgi_tasks: pl.DataFrame) -> pl.DataFrame:
    """task_id -> kept_file_id, kept_task_id (the task instance its audits count for) for every stored ARC-TGI
    task id (a repeated copy's id counts for the task it repeats), with is_ambiguous (harc_arc.tgi_task_instances:
    two exports give the id to different tasks)."""
    return tgi_task_instances(tgi_tasks)


def _instance_key(file_id: str, task_id: str) -> pl.Expr:
    """One task instance (a file's task): what audit units are counted by, as `task_id`."""
    return pl.concat_str([pl.col(file_id), pl.col(task_id)], separator="\x1f")


def _to_instance(df: pl.DataFrame, aliases: pl.DataFrame) -> pl.DataFrame:
    """Audit rows of ARC-TGI tasks, their task_id replaced by the key of the task instance it names; rows naming an
    ambiguous id (or no ARC-TGI task) are left out: they count in no family."""
    if df.height == 0:
        return df
    return (df.join(aliases.filter(~pl.col("is_ambiguous")), on="task_id", how="inner")
            .with_columns(_instance_key("kept_file_id", "kept_task_id").alias("task_id"))
            .drop("kept_file_id", "kept_task_id", "is_ambiguous"))


def family_audits(fam: pl.DataFrame, arc2_attempts: pl.DataFrame, harc_attempts: pl.DataFrame,
                  confidence: float, harc_actions: pl.DataFrame | None = None,
                  aliases: pl.DataFrame | None = None) -> pl.DataFrame:
    """out_arctgi__family_audits. `harc_actions`: H-ARC events (core_harc__actions, ACTION_COLUMNS; only the
    rows of ARC-TGI tasks are needed): they give the H-ARC layout its times, and its units where no summary
    file was ingested. `aliases` (task_aliases; default: fam's own task ids): audits of a repeated copy's task_id
    (all.csv's) count for the task it repeats; audits naming a task id that two exports give to different tasks
    count in no family (`ambiguous_audit_rows` says how many)."""
    if aliases is None:
        aliases = fam.select("task_id", pl.col("file_id").alias("kept_file_id"), pl.col("task_id").alias("kept_task_id"),
                             (pl.len().over("task_id") > 1).alias("is_ambiguous"))
    all_ids = aliases["task_id"].implode()
    outside_a2 = arc2_attempts.filter(~pl.col("task_id").is_in(all_ids))
    outside_harc = harc_attempts.filter(~pl.col("task_id").is_in(all_ids))
    arc2_attempts = _to_instance(arc2_attempts, aliases)
    harc_attempts = _to_instance(harc_attempts, aliases)
    harc_actions = _to_instance(harc_actions, aliases) if harc_actions is not None else None
    fam = fam.with_columns(_instance_key("file_id", "task_id").alias("task_id"))
    tgi_ids = fam["task_id"].implode()
    a2 = session_pairs(arc2_attempts.filter(pl.col("task_id").is_in(tgi_ids))).select(
        "task_id", pl.col("session_id").alias("rater_id"), "is_solved", "is_solved_within_2",
        "duration_s", pl.lit(None, pl.String).alias("first_submission"))
    hu = harc_units(harc_attempts.filter(pl.col("task_id").is_in(tgi_ids))).select(
        "task_id", pl.col("rater_id"), "is_solved", "is_solved_within_2", "first_submission")
    events = harc_event_units(harc_actions.filter(pl.col("task_id").is_in(tgi_ids))
                              if harc_actions is not None else pl.DataFrame())
    key = ["rater_id", "task_id"]
    hu = hu.join(events.select(*key, "duration_s"), on=key, how="left")
    only_events = events.filter(pl.col("has_submit")).join(hu, on=key, how="anti").select(
        "task_id", "rater_id", "is_solved", "is_solved_within_2", "duration_s", "first_submission")
    units = pl.concat([a2, hu.select(a2.columns), only_events.select(a2.columns)]).join(fam.select("task_id", "family_id", "generator_name", "source_task_id"),
                                     on="task_id", how="inner")
    if units.height == 0:
        from schemas.validate import empty_frame

        return empty_frame("out_arctgi__family_audits")
    df = units.group_by("family_id").agg(
        pl.col("generator_name").first(), pl.col("source_task_id").first(),
        pl.col("task_id").n_unique().cast(pl.Int64).alias("n_tasks"),
        pl.col("rater_id").n_unique().cast(pl.Int64).alias("n_sessions"),
        pl.len().cast(pl.Int64).alias("n_attempts"),
        pl.col("is_solved").sum().cast(pl.Int64).alias("n_solved"),
        pl.col("is_solved_within_2").sum().cast(pl.Int64).alias("n_solved_within_2"),
        pl.col("duration_s").filter(pl.col("is_solved")).median().alias("median_solved_duration_s"),
    ).sort("family_id")
    low, high = wilson(df["n_solved"], df["n_attempts"], confidence)
    _, high2 = wilson(df["n_solved_within_2"], df["n_attempts"], confidence)
    agree = {f: agreement(units.filter(pl.col("family_id") == f)) for f in df["family_id"].to_list()}
    arc2_rows, harc_rows = outside_a2, outside_harc
    df = df.with_columns(
        (pl.col("n_solved") / pl.col("n_attempts")).alias("attempt_solve_rate"),
        low.alias("solve_rate_ci_low"), high.alias("solve_rate_ci_high"), pl.lit(confidence).alias("confidence_level"),
        (pl.col("n_solved_within_2") / pl.col("n_attempts")).alias("solve_rate_within_2"),
        high2.alias("_high2"),
        pl.Series([agree[f][3] for f in df["family_id"]], dtype=pl.Int64).alias("n_tasks_with_answers"),
        pl.Series([agree[f][0] for f in df["family_id"]], dtype=pl.Float64).alias("answer_agreement"),
        pl.Series([agree[f][1] for f in df["family_id"]], dtype=pl.Int64).alias("min_raters_per_task"),
        pl.Series([agree[f][2] for f in df["family_id"]], dtype=pl.Float64).alias("fleiss_kappa"),
    ).join(source_numbers(arc2_rows, harc_rows), on="source_task_id", how="left")
    src = df.select(pl.col("source_n_attempts").fill_null(0),
                     (pl.col("source_solve_rate_within_2").fill_null(0) * pl.col("source_n_attempts").fill_null(0))
                     .round(0).alias("k"))
    src_low, _ = wilson(src["k"], src["source_n_attempts"], confidence)
    harder = ((pl.col("source_solve_rate_within_2") - pl.col("solve_rate_within_2") >= MUCH_HARDER_GAP)
              & (pl.col("_high2") < pl.col("_src_low")))
    return (df.with_columns(src_low.alias("_src_low"))
            .with_columns(harder.fill_null(False).alias("is_much_harder_than_source")).drop("_high2", "_src_low"))


def build_arctgi(tgi_tasks: pl.DataFrame, pairs: pl.DataFrame, arc2_attempts: pl.DataFrame,
                 harc_attempts: pl.DataFrame, confidence: float,
                 harc_actions: pl.DataFrame | None = None) -> dict[str, pl.DataFrame]:
    """out_arctgi__family_diversity and out_arctgi__family_audits."""
    fam = families(tgi_tasks)
    return {"out_arctgi__family_diversity": family_diversity(fam, pairs),
            "out_arctgi__family_audits": family_audits(fam, arc2_attempts, harc_attempts, confidence, harc_actions,
                                                       task_aliases(tgi_tasks))}


__all__ = ["agreement", "build_arctgi", "families", "family_audits", "family_diversity", "grid_stats",
           "task_aliases"]
