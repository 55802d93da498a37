"""Static-task sections of the calibration report: "Task families" (ARC-TGI, for generator maintainers) and
"ARC-AGI-2 calibration". Read from the out tables of `arcstudy build` (out_arctgi__*, out_arc2__*) and from
out_arctgi__witness_checks, which `arcstudy check-witnesses` writes; nothing is recomputed here.

What a generator maintainer is shown, with the thresholds and why:
- witness failures: every task whose stored witness did not reproduce its outputs (status other than pass);
  a witness that fails means the export's pairs and its code disagree, so the task is not what it says;
- low agreement: a family whose answer agreement is below LOW_AGREEMENT (0.5: no answer is given by a
  majority of the people who answered) or whose Fleiss' kappa is below LOW_KAPPA (0.4, the lower end of
  "moderate" agreement on Landis and Koch's scale): people disagree on what the rule is, so the generated
  instances are likely ambiguous;
- much harder than the source: the flag of out_arctgi__family_audits (pipeline/transforms/arctgi.py says why);
- diversity outliers: the families with diversity_flags (duplicate tasks or grids, one input size, at most two
  colours over 5+ tasks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from pipeline.core.figures import alt
from pipeline.report.html import Callout, Facts, Prose, Section, Table

from .common import ReportContext

# make_figure(chart, name, title, caption): saves the figure (calibration.py) and returns its section, or None
# when the chart is None (nothing to draw)
MakeFigure = Callable[[Any, str, str, str], Section | None]

LOW_AGREEMENT = 0.5
LOW_KAPPA = 0.4
NOT_CHECKED = "witnesses not checked yet: run arcstudy check-witnesses"


def _fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def family_vs_source_chart(audits: pl.DataFrame) -> Any | None:
    """Each audited family's solve rate within 2 against its source task's, the much-harder ones marked."""
    df = audits.filter(pl.col("source_solve_rate_within_2").is_not_null()).select(
        "family_id", "solve_rate_within_2", "source_solve_rate_within_2", "n_attempts",
        pl.when(pl.col("is_much_harder_than_source")).then(pl.lit("much harder than its source"))
        .otherwise(pl.lit("not flagged")).alias("flag"))
    if df.height == 0:
        return None
    points = alt.Chart(df).mark_circle(size=70).encode(
        x=alt.X("source_solve_rate_within_2:Q", title="source task: solved within 2", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("solve_rate_within_2:Q", title="family: solved within 2", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("flag:N", title=None, scale=alt.Scale(
            domain=["much harder than its source", "not flagged"], range=["#d62728", "#4c78a8"])),
        tooltip=["family_id", "n_attempts"])
    diagonal = alt.Chart(pl.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]})).mark_line(
        strokeDash=[4, 4], color="grey").encode(x="x:Q", y="y:Q")
    return (diagonal + points).properties(width=320, height=320, title="Families against their source task")


def arc2_pairs_chart(pairs: pl.DataFrame) -> Any | None:
    """How many test pairs have each number of sessions solving within 2, by task set (the keep rule at 2)."""
    if pairs.height == 0:
        return None
    df = pairs.select("task_set", pl.col("n_solved_within_2").clip(upper_bound=15).alias("solved_within_2"))
    bars = alt.Chart(df).mark_bar().encode(
        x=alt.X("solved_within_2:O", title="sessions solving the pair within 2 submissions (15 = 15 or more)",
                axis=alt.Axis(labelAngle=0)),
        y=alt.Y("count():Q", title="test pairs"), color=alt.Color("task_set:N", title="task set"))
    return bars.properties(width=420, height=200, title="ARC-AGI-2 test pairs by solvers within 2 (keep rule: 2)")


def task_family_sections(ctx: ReportContext, make_figure: MakeFigure | None = None) -> list[Section]:
    """The "Task families" sections, or nothing when no ARC-TGI task is ingested (figures through make_figure)."""
    diversity = ctx.table("out_arctgi__family_diversity")
    audits = ctx.table("out_arctgi__family_audits")
    checks = ctx.table("out_arctgi__witness_checks")
    if diversity.height == 0 and audits.height == 0 and checks.height == 0:
        return []
    sections: list[Section] = [Prose("Task families", (
        f"ARC-TGI task families (one generator each): {diversity.height} families in the ingested exports, "
        f"{audits.height} with human audit rows. For generator maintainers: witnesses that do not reproduce their "
        "outputs, families people disagree on, families much harder than the task they were generated from, and "
        "families that vary little."))]
    # -- witnesses ------------------------------------------------------------------------------------------
    if checks.height == 0:
        sections.append(Callout("Witness checks", [NOT_CHECKED + " --framework DIR (DIR: your ARC-TGI checkout)."]))
    else:
        counts = dict(checks.group_by("status").len().sort("status").iter_rows())
        sections.append(Facts("Witness checks", {"tasks checked": checks.height,
                                                 **{f"status {k}": v for k, v in counts.items()}}))
        failed = checks.filter(pl.col("status") != "pass")
        if failed.height:
            sections.append(Callout("Witness failures", [
                f"{r['family_id']} / {r['task_id']}: {r['status']}" + (f" ({r['reason']})" if r["reason"] else "")
                for r in failed.head(20).iter_rows(named=True)]
                + ([f"... and {failed.height - 20} more (table below)"] if failed.height > 20 else []), kind="error"))
            sections.append(Table("Tasks whose witness failed", failed, name="calibration__witness_failures"))
    # -- audits ---------------------------------------------------------------------------------------------
    if audits.height == 0:
        sections.append(Callout("Human audits", [
            "no audit rows joined to the ingested ARC-TGI tasks: ingest an audit in the ARC-AGI-2 layout (task_ID = "
            "ARC-TGI task_id) or the H-ARC summary layout (task_name = ARC-TGI task_id), then arcstudy build."]))
    else:
        low = audits.filter((pl.col("answer_agreement") < LOW_AGREEMENT) | (pl.col("fleiss_kappa") < LOW_KAPPA))
        sections.append(Callout("Families with low agreement", [
            f"{r['family_id']}: answer agreement {_fmt(r['answer_agreement'])}, Fleiss' kappa "
            f"{_fmt(r['fleiss_kappa'])} over {r['n_tasks_with_answers']} task(s)" for r in low.iter_rows(named=True)]
            or [f"none below agreement {LOW_AGREEMENT} or kappa {LOW_KAPPA} (among families with submitted grids)"],
            kind="warning" if low.height else "note"))
        harder = audits.filter(pl.col("is_much_harder_than_source"))
        sections.append(Callout("Families much harder than their source task", [
            f"{r['family_id']}: {_fmt(r['solve_rate_within_2'])} solved within 2 against "
            f"{_fmt(r['source_solve_rate_within_2'])} for {r['source_task_id']} ({r['source_human_data']}, "
            f"{r['source_n_attempts']} attempts)" for r in harder.iter_rows(named=True)]
            or ["none (a family is flagged 0.25 or more below its source, with Wilson intervals that do not overlap)"],
            kind="warning" if harder.height else "note"))
        if make_figure is not None:
            fig = make_figure(family_vs_source_chart(audits), "families_vs_source", "Families against their source task",
                              "Solve rate within 2 of each audited family (y) and of the task it was generated from "
                              "(x); below the diagonal is harder than the source.")
            sections += [fig] if fig is not None else []
        sections.append(Table("Human audits per family", audits, name="calibration__family_audits",
                              caption="Solve counts per audit unit (ARC-AGI-2 layout: a row; H-ARC layout: a "
                                      "participant x task), answer agreement and Fleiss' kappa of the first "
                                      "submissions, and the source task's human numbers."))
    # -- diversity ------------------------------------------------------------------------------------------
    outliers = diversity.filter(pl.col("diversity_flags").list.len() > 0)
    sections.append(Callout("Diversity outliers", [
        f"{r['family_id']}: {', '.join(r['diversity_flags'])} ({r['n_tasks']} tasks, {r['n_duplicate_tasks']} "
        f"duplicate tasks, {r['n_duplicate_grids']} repeated input grids)" for r in outliers.head(30).iter_rows(named=True)]
        + ([f"... and {outliers.height - 30} more"] if outliers.height > 30 else [])
        or ["none: no duplicate tasks or grids, and no 5+-task family with one input size or two colours"],
        kind="warning" if outliers.height else "note"))
    if diversity.height:
        sections.append(Table("Diversity per family", diversity, name="calibration__family_diversity"))
    return sections


def static_headline(ctx: ReportContext) -> dict[str, object]:
    """Headline numbers of the static-task sections (for the index), empty when there are none."""
    out: dict[str, object] = {}
    diversity = ctx.table("out_arctgi__family_diversity")
    if diversity.height:
        audits = ctx.table("out_arctgi__family_audits")
        out["task families"] = diversity.height
        out["families audited"] = audits.height
        out["families much harder than their source"] = int(audits["is_much_harder_than_source"].sum()) \
            if audits.height else 0
    tasks = ctx.table("out_arc2__task_calibration")
    if tasks.height:
        out["ARC-AGI-2 tasks meeting the two-solver rule"] = f"{int(tasks['meets_two_solver_rule'].sum())} of {tasks.height}"
    return out


def arc2_sections(ctx: ReportContext, make_figure: MakeFigure | None = None) -> list[Section]:
    """The "ARC-AGI-2 calibration" sections, or nothing when no ARC-AGI-2 attempt rows are built."""
    pairs = ctx.table("out_arc2__pair_calibration")
    if pairs.height == 0:
        return []
    tasks = ctx.table("out_arc2__task_calibration")
    sessions = ctx.table("out_arc2__session_accuracy")
    repro = ctx.table("out_arc2__reproduction")
    durations = ctx.table("out_arc2__set_durations")
    n_keep = int(tasks["meets_two_solver_rule"].sum())
    sections: list[Section] = [
        Prose("ARC-AGI-2 calibration", (
            "The ARC-AGI-2 human testing log against the published calibration: a task is kept when at least two "
            "people solved it within two attempts; the average test-taker score was 60 % over all candidate tasks; "
            "a task took about 300 s. The reproduction table says plainly where the public file cannot give the "
            "published number.")),
        Facts("ARC-AGI-2 log at a glance", {
            "tasks": tasks.height, "test pairs": pairs.height, "sessions": sessions.height,
            "attempt rows": int(pairs["n_attempts"].sum()),
            "tasks meeting the two-solver rule (every pair)": f"{n_keep} of {tasks.height}",
            "average test-taker score (mean session score)": _fmt(sessions["session_score"].mean(), 3)}),
        Table("ARC-AGI-2 calibration: published figures and this log", repro, name="calibration__arc2_reproduction"),
        Table("ARC-AGI-2 durations by task set", durations, name="calibration__arc2_set_durations"),
    ]
    if make_figure is not None:
        fig = make_figure(arc2_pairs_chart(pairs), "arc2_pairs_by_solvers", "ARC-AGI-2 test pairs by solvers",
                          "Test pairs by the number of sessions that solved them within 2 submissions; a task is kept "
                          "when each of its pairs has at least 2.")
        sections += [fig] if fig is not None else []
    failing = tasks.filter(~pl.col("meets_two_solver_rule"))
    if failing.height:
        sections.append(Table("ARC-AGI-2 tasks below the two-solver rule in this log", failing,
                              name="calibration__arc2_tasks_below_rule"))
    return sections
