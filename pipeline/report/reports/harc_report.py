"""The H-ARC report: the paper's tables and figures regenerated from the out_harc__* tables in the database.

One release generation (osf-current when present, else 2024, as `arcstudy harc-analyses` chooses) is shown,
with the value the H-ARC paper reports beside each number it reports (pipeline/harc/published.py), so a
reader sees at once how the data at hand compare with the published study; out_harc__reproduction lists the
published counts with what the ingested files give. Figures are drawn by
pipeline.harc.figures from the same tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import polars.selectors as cs

from pipeline.harc.published import PAPER
from pipeline.harc.summary_files import SKIPPED_WITHOUT_EVENTS
from pipeline.report.html import Callout, Facts, Figure, Prose, Section, Table
from schemas.vocabulary import HARC_SPLITS

from .common import ReportContext, clear_previous, publish_report, report_manifest

__all__ = ["PAPER", "choose_release", "reproduction_view", "versus_paper", "write_harc_report"]

FIGURE_TITLES = {
    "harc_fig5_tasks_by_min_solvers": ("Tasks solved by at least N participants (Figure 5)",
                                       "Share of tasks with at least N solvers within three attempts, per split."),
    "harc_fig6_participant_solve_share": ("Per-participant accuracy (Figure 6)",
                                          "Distribution of the share of a participant's finished tasks solved."),
    "harc_accuracy_bounds": ("Accuracy with pessimistic and optimistic bounds",
                             "Missing tasks imputed as failures (pessimistic) or successes (optimistic)."),
    "harc_time_distributions": ("Time per task", "Time per task normalised by attempts, time to first action and "
                                                 "thinking time (solved tasks)."),
    "harc_error_divergence_vs_success": ("Error divergence against task success",
                                         "Distinct incorrect grids / submissions per task against its solve rate."),
    "harc_accuracy_by_position": ("Accuracy by task position", "Learning across the session: 3-attempt accuracy "
                                                               "by the task's position."),
}
LABELS = {  # headers the column names do not give by themselves (pipeline.report.html.column_label does the rest)
    "column": "column name", "training_paper": "training (paper)", "evaluation_paper": "evaluation (paper)",
    "paper_mean_task_accuracy": "paper's mean task accuracy (0–1)", "paper_bound_estimate": "paper's bound (0–1)",
    "n_participants_finished": "participants who finished a task", "n_1": "n (group 1)", "n_2": "n (group 2)",
    "mean_1": "mean (group 1)", "mean_2": "mean (group 2)", "max_attempts": "attempts allowed (k)",
}
FIGURE_TABLES = ("out_harc__tasks_by_min_solvers", "out_harc__participant_accuracy", "out_harc__accuracy_bounds",
                 "out_harc__task_outcomes", "out_harc__task_errors", "out_harc__position_accuracy")


TABLE2_MEASURES = (
    ("n_participants", "participants"), ("n_tasks", "tasks"), ("n_participant_tasks", "participant-tasks"),
    ("n_task_attempts", "attempts"), ("n_unique_states", "unique visited states"),
    ("n_action_rows", "action-trace rows"), ("mean_attempts_to_solution", "average attempts to solution"))
ERROR_MEASURES = (
    ("n_submits", "submissions"), ("n_incorrect_submits", "incorrect submissions"),
    ("share_incorrect_size_correct", "incorrect with the right height and width"),
    ("mean_normalized_edit_distance", "normalised edit distance (correct size)"),
    ("share_copy_errors", "copy errors (share of incorrect)"), ("share_copy_train_input", "  copy of a train input"),
    ("share_copy_train_output", "  copy of a train output"), ("share_copy_test_input", "  copy of the test input"))


def versus_paper(df: pl.DataFrame, measures: Sequence[tuple[str, str]]) -> pl.DataFrame:
    """One row per measure: the value per split beside the paper's (as in the paper's tables)."""
    by_split = {r["task_split"]: r for r in df.iter_rows(named=True)}
    rows = []
    for column, label in measures:
        row: dict[str, Any] = {"measure": label, "column": column}
        for split in HARC_SPLITS:
            value = by_split.get(split, {}).get(column)
            row[split] = None if value is None else float(value)
            paper = _paper(split, column)
            row[f"{split}_paper"] = None if paper is None else float(paper)
        rows.append(row)
    schema = {"measure": pl.String, "column": pl.String} | {
        c: pl.Float64 for split in HARC_SPLITS for c in (split, f"{split}_paper")}
    return pl.DataFrame(rows, schema=schema, orient="row")


def choose_release(present: list[str]) -> str | None:
    from pipeline.harc.build import RELEASE_PREFERENCE

    preferred = [r for r in RELEASE_PREFERENCE if r in present]
    return preferred[0] if preferred else (sorted(present)[0] if present else None)


def _paper(split: str, key: str) -> Any:
    return PAPER.get(split, {}).get(key)


def write_harc_report(ctx: ReportContext, out_dir: Path, *, command: str = "arcstudy report harc") -> Path:
    """Write <out_dir>/harc.html, its tables as <out_dir>/harc__<table>.csv and .parquet, its figures
    under <out_dir>/figures/harc/ and its run manifest <out_dir>/harc.manifest.json."""
    from pipeline.harc.figures import write_figures

    out_dir.mkdir(parents=True, exist_ok=True)
    clear_previous(out_dir, "harc")
    present = (ctx.ws.read("SELECT DISTINCT release_generation FROM out_harc__split_accuracy ORDER BY 1")
               ["release_generation"].to_list() if ctx.ws.has_table("out_harc__split_accuracy") else [])
    release = choose_release(present)
    others = [p for p in present if p != release]
    sections: list[Section] = [Prose("What this report shows", (
        "The H-ARC paper's results (LeGris et al.: human performance on the ARC training and evaluation sets) "
        "regenerated from the action traces in the database by arcstudy harc-analyses. Beside each number the "
        "paper reports is the paper's value, for comparison.\n\n"
        + (f"Release generation {release}" + (f" (also in the database: {', '.join(others)})" if others else "")
           + "." if release else "")))]
    figures: dict[str, dict[str, Path]] = {}
    if release is None:
        sections.append(Callout("No H-ARC analyses", [
            f"{ctx.db_path} has no H-ARC analyses (out_harc__split_accuracy is empty or missing): run arcstudy "
            "ingest on the H-ARC release, then arcstudy harc-analyses."], kind="warning"))
        return _finish(ctx, out_dir, sections, figures, command, release, {})

    def table(name: str) -> pl.DataFrame:
        return ctx.table(name, "release_generation = ?", [release]).drop("release_generation")

    split_acc = table("out_harc__split_accuracy")
    desc = table("out_harc__split_descriptives")
    bounds = table("out_harc__accuracy_bounds")
    errors = table("out_harc__error_summary")
    times = table("out_harc__time_summary")
    tests = table("out_harc__statistical_tests")
    first = table("out_harc__first_actions")
    learning = table("out_harc__learning_model")
    fig_tables = {name: table(name) for name in FIGURE_TABLES}

    # -- at a glance ---------------------------------------------------------------------------------
    facts: dict[str, Any] = {"release generation": release}
    for r in desc.iter_rows(named=True):
        facts[f"{r['task_split']}: participants / tasks"] = f"{r['n_participants']:,} / {r['n_tasks']:,}"
    for r in split_acc.filter(pl.col("max_attempts") == 3).iter_rows(named=True):
        paper = _paper(r["task_split"], "k_accuracy") or {}
        label = f"{r['task_split']}: 3-attempt accuracy (paper {paper.get(3, 0):.1%})"
        # a split whose tasks nobody has results for (named only in summary_data.csv) has no mean
        facts[label] = "-" if r["mean_task_accuracy"] is None else f"{r['mean_task_accuracy']:.1%}"
    sections.append(Facts("At a glance", facts))
    if desc.height == 0 and split_acc.height:  # harc-analyses ran on summary_data.csv without the event log
        sections.append(Callout("Analysed without data.csv", [
            f"Release {release} has no events in the database: accuracy and errors come from summary_data.csv "
            "and incorrect_submissions.csv; these sections need data.csv (the event log) and are empty: "
            + ", ".join(analysis for analysis, *_ in SKIPPED_WITHOUT_EVENTS) + "."], kind="warning"))
    reproduction = table("out_harc__reproduction")
    if reproduction.height:
        view, sample_notes = reproduction_view(reproduction)
        if sample_notes:
            sections.append(Callout("This data is a sample of the study", sample_notes))
        sections.append(Table("Published counts beside this data", view, name="harc__reproduction",
                              caption="The H-ARC study's published counts (paper and release notebooks, "
                                      "pipeline/harc/published.py) beside the same numbers from the ingested "
                                      "files; observed_value is empty where the file it needs (needs_file) was "
                                      "not ingested, and why_not_matching says why a value cannot match."))
    three = {r["task_split"]: r["mean_task_accuracy"] for r in split_acc.filter(pl.col("max_attempts") == 3)
             .iter_rows(named=True)}
    per_split = sorted(desc.iter_rows(named=True), key=lambda r: HARC_SPLITS.index(r["task_split"])
                       if r["task_split"] in HARC_SPLITS else 9)
    headline = {"release": release,
                "participants": ", ".join(f"{r['n_participants']:,} {r['task_split']}" for r in per_split),
                "attempts": ", ".join(f"{r['n_task_attempts']:,} {r['task_split']}" for r in per_split),
                "3-attempt accuracy": ", ".join(f"{three[r['task_split']]:.1%} {r['task_split']}"
                                                for r in per_split if three.get(r["task_split"]) is not None)}

    # -- accuracy ------------------------------------------------------------------------------------
    acc = (split_acc.with_columns(
        pl.struct("task_split", "max_attempts").map_elements(
            lambda s: (_paper(s["task_split"], "k_accuracy") or {}).get(s["max_attempts"]),
            return_dtype=pl.Float64).alias("paper_mean_task_accuracy"))
        .select(cs.by_name("task_split", "max_attempts", "n_tasks", "mean_task_accuracy", "paper_mean_task_accuracy",
                           "n_tasks_solved_by_any", "n_tasks_solved_by_all", "n_tasks_solved_by_none",
                           "n_participants", "n_participants_finished",  # absent from older databases
                           "share_participants_all_solved", "share_participants_none_solved", require_all=False))
        .sort(pl.col("task_split").replace_strict({s: i for i, s in enumerate(HARC_SPLITS)}, default=9), "max_attempts"))
    sections.append(Table("k-attempt accuracy", acc, name="harc__split_accuracy",
                          caption="Task-averaged accuracy within k attempts (the paper: training 59.9 / 72.6 / "
                                  "76.2 %, evaluation 47.8 / 60.2 / 64.2 %); tasks solved by any, all or no "
                                  "participant; participants who solved all or none of their tasks (paper, 3 "
                                  "attempts: 40.1 % / 8.6 % training, 33.8 % / 16.7 % evaluation)."))
    paths, skipped = write_figures(out_dir / "figures" / "harc", fig_tables)
    figures.update(paths)
    for name in ("harc_fig5_tasks_by_min_solvers", "harc_fig6_participant_solve_share"):
        _figure(sections, figures, name)

    bounds_view = (bounds.with_columns(pl.struct("task_split", "max_attempts", "bound_kind").map_elements(
        lambda s: _paper_bound(s["task_split"], s["max_attempts"], s["bound_kind"]), return_dtype=pl.Float64)
        .alias("paper_bound_estimate"))
        .select("task_split", "max_attempts", "bound_kind", "mean_task_accuracy", "bound_estimate",
                "paper_bound_estimate", "bound_p025", "bound_p975", "n_simulations", "random_seed",
                "n_imputed_participants", "n_imputed_tasks"))
    sections.append(Table("Pessimistic and optimistic bounds", bounds_view, name="harc__accuracy_bounds",
                          caption="For each participant who finished k < 5 tasks, 5 - k random tasks of the split "
                                  "are imputed as failures (pessimistic) or successes (optimistic), averaged over "
                                  "the simulations (paper, 3 attempts: training [73.3 %, 77.2 %], evaluation "
                                  "[55.9 %, 68.9 %])."))
    _figure(sections, figures, "harc_accuracy_bounds")

    # -- Table 2 -------------------------------------------------------------------------------------
    sections.append(Table("Descriptive statistics (Table 2)", versus_paper(desc, TABLE2_MEASURES),
                          name="harc__split_descriptives",
                          caption="Per split, beside the paper's values (its Table 2). Attempts: the paper says "
                                  "7,924 training attempts; the released summary_data.csv and the authors' "
                                  "notebooks have 7,916 (spec/formats.md §D.8), the number the published-counts "
                                  "table compares with."))

    # -- time ----------------------------------------------------------------------------------------
    _figure(sections, figures, "harc_time_distributions")
    sections.append(Table("Time per task (summary)", times.with_columns(
        (pl.col("mean_s") / 60).alias("mean_min"), (pl.col("median_s") / 60).alias("median_min")),
        name="harc__time_summary", caption="Paper means: time per task normalised by attempts 4m19s (training) "
                                           "vs 6m39s (evaluation); thinking time per attempt 1m06s vs 1m37s."))
    sections.append(Table("Statistical tests", tests, name="harc__statistical_tests",
                          caption="Student's t-tests with pooled variance (t_test_pooled: df = n1 + n2 - 2, as the "
                                  "paper's t(df)), training vs evaluation (paper: time per attempt t(8874) = -21.63, "
                                  "thinking time t(1505) = -6.90, output size t(798) = 6.81), and Pearson "
                                  "correlations of error divergence with success (paper r = -0.81 training, "
                                  "-0.88 evaluation)."))

    # -- errors --------------------------------------------------------------------------------------
    sections.append(Table("Errors", versus_paper(errors, ERROR_MEASURES), name="harc__error_summary",
                          caption="Incorrect submissions with the right height and width, normalised edit distance "
                                  "to the answer on correctly sized grids, and copy errors (a train input or output "
                                  "or the test input submitted)."))
    _figure(sections, figures, "harc_error_divergence_vs_success")

    # -- first actions and learning ------------------------------------------------------------------
    sections.append(Table("First changes of each attempt", first, name="harc__first_actions",
                          caption="The first grid-changing action of an attempt; about a third of first actions "
                                  "resize the output grid in the paper."))
    _figure(sections, figures, "harc_accuracy_by_position")
    sections.append(Table("Learning across tasks (GEE)", learning, name="harc__learning_model",
                          caption="Logistic GEE of success on task position, participants as groups."))

    # -- trace checks --------------------------------------------------------------------------------
    checks = (ctx.query("out_harc__trace_checks by status",
                        "SELECT task_split, replay_status, count(*)::BIGINT AS n_traces FROM out_harc__trace_checks "
                        "WHERE release_generation = ? GROUP BY ALL ORDER BY ALL", [release])
              if ctx.ws.has_table("out_harc__trace_checks") else pl.DataFrame())
    if checks.height:
        sections.append(Table("Trace replay checks", checks, name="harc__trace_checks_summary",
                              caption="Every trace replayed through the H-ARC editor (arcstudy replay-harc)."))
    else:
        sections.append(Prose("Trace replay checks", "The traces of this release were not replayed (run "
                                                     "arcstudy replay-harc to check them through the editor)."))
    if skipped:
        sections.append(Callout("Figures without data", [f"{name}: no rows to draw" for name in skipped]))
    return _finish(ctx, out_dir, sections, figures, command, release, headline)


SAMPLE_SHARE = 0.9  # fewer participants than this share of the study's: the data is a sample (a demo, a subset)


def reproduction_view(reproduction: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """out_harc__reproduction with `why_not_matching` for every row that does not match and has an observed value,
    and the notes of a callout when the data holds only a sample of the study's participants (a simulated demo of
    a few dozen participants against the study's 1,729: a count cannot match, a share varies with the sample)."""
    share: dict[str, tuple[float, float]] = {}
    for r in reproduction.filter(pl.col("metric") == "n_participants").iter_rows(named=True):
        if r["observed_value"] is not None and r["published_value"]:
            share[r["task_split"]] = (r["observed_value"], r["published_value"])
    sampled = {s: v for s, v in share.items() if v[0] < SAMPLE_SHARE * v[1]}
    notes = [f"{split}: {obs:,.0f} of the study's {pub:,.0f} participants ({obs / pub:.0%}). Counts scale with the "
             "participants and cannot match the published ones; shares and accuracies vary with the sample. A demo "
             "or a subset is compared to show the method; ingest the full release to reproduce the numbers."
             for split, (obs, pub) in sorted(sampled.items())]
    why = []
    for r in reproduction.iter_rows(named=True):
        reason = ""
        if not r["is_match"] and r["observed_value"] is not None:
            if r["task_split"] in sampled:
                obs, pub = sampled[r["task_split"]]
                reason = (f"a sample: {obs:,.0f} of {pub:,.0f} participants" + (
                          "; counts scale with the sample" if r["metric"].startswith(("n_", "max_"))
                          else "; a share varies with the sample"))
            elif r["metric"] == "n_attempts" and "7,924" in (r["metric_description"] or ""):
                reason = "compared with the released file's count; the paper's text differs (metric description)"
        why.append(reason)
    view = reproduction.with_columns(pl.Series("why_not_matching", why, dtype=pl.String))
    return view, notes


def _paper_bound(split: str, k: int, kind: str) -> float | None:
    pair = _paper(split, "bounds_3")
    if k != 3 or pair is None:
        return None
    return pair[0] if kind == "pessimistic" else pair[1] if kind == "optimistic" else None


def _figure(sections: list[Section], figures: dict[str, dict[str, Path]], name: str) -> None:
    if name in figures:
        title, caption = FIGURE_TITLES[name]
        sections.append(Figure(title, figures[name], caption=caption))


def _finish(ctx: ReportContext, out_dir: Path, sections: list[Section], figures: dict[str, dict[str, Path]],
            command: str, release: str | None, headline: dict[str, Any]) -> Path:
    manifest = report_manifest(ctx, report="harc", command=command, headline=headline,
                               config={"out": str(out_dir), "release_generation": release})
    return publish_report(manifest, "H-ARC report", sections, LABELS, figures, out_dir / "harc.html",
                          subtitle="Human performance on ARC, regenerated from the traces")
