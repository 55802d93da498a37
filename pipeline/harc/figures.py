"""Figures of the H-ARC analyses (altair), saved with pipeline.core.figures.save_figure (PNG, SVG, Vega-Lite):

- `harc_fig5_tasks_by_min_solvers`: share of tasks with at least N solvers (3 attempts), per split (Figure 5);
- `harc_fig6_participant_solve_share`: distribution of the per-participant share of finished tasks solved
  (3 attempts), per split (Figure 6);
- `harc_accuracy_bounds`: observed task-averaged accuracy for k = 1, 2, 3 with the pessimistic and optimistic
  bounds (mean and 2.5-97.5 percentile band over the simulations), per split;
- `harc_time_distributions`: time per task normalised by attempts, time to first action and thinking time per
  attempt (minutes, log scale), per split;
- `harc_error_divergence_vs_success`: error divergence against the 3-attempt solve rate, one point per task, a
  least-squares line per split;
- `harc_accuracy_by_position`: 3-attempt accuracy by task position, per split.

A figure whose data are empty is skipped (and reported), never drawn empty.

`python -m pipeline.harc.figures` runs `write_figures` in a child interpreter for pipeline.harc.build's
FigureProcess: it imports altair and starts vl-convert at once, then reads one pickled (out_dir, tables) from
stdin, writes the figures and prints {"written": {name: {kind: path}}, "skipped": [name]} as JSON.
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import polars as pl

from pipeline.core.figures import alt, save_figure
from schemas.vocabulary import HARC_SPLITS

SPLITS = list(HARC_SPLITS)  # altair wants a list
SPLIT_COLOURS = alt.Scale(domain=SPLITS, range=["#4c78a8", "#f58518"])
FIGURE_NAMES = ("harc_fig5_tasks_by_min_solvers", "harc_fig6_participant_solve_share", "harc_accuracy_bounds",
                "harc_time_distributions", "harc_error_divergence_vs_success", "harc_accuracy_by_position")


def fig5_chart(by_min: pl.DataFrame):
    df = by_min.filter(pl.col("max_attempts") == 3)
    if df.height == 0:
        return None
    return alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("min_solvers:Q", title="N (participants who solved the task)"),
        y=alt.Y("share_tasks_at_least:Q", title="share of tasks with at least N solvers",
                scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("task_split:N", title="split", scale=SPLIT_COLOURS),
        tooltip=["task_split", "min_solvers", "n_tasks_at_least", "n_tasks"],
    ).properties(width=420, height=280, title="Tasks solved by at least N participants (3 attempts)")


def fig6_chart(participant_acc: pl.DataFrame):
    df = (participant_acc.filter((pl.col("max_attempts") == 3) & pl.col("solve_share").is_not_null())
          .with_columns(pl.col("solve_share").round(2)))
    if df.height == 0:
        return None
    counts = (df.group_by("task_split", "solve_share").len().sort("task_split", "solve_share")  # stable bytes
              .with_columns((pl.col("len") / pl.col("len").sum().over("task_split")).alias("share_of_participants")))
    return alt.Chart(counts).mark_bar(opacity=0.8).encode(
        x=alt.X("solve_share:O", title="share of the participant's finished tasks solved",
              axis=alt.Axis(labelAngle=0)),
        xOffset="task_split:N",
        y=alt.Y("share_of_participants:Q", title="share of participants"),
        color=alt.Color("task_split:N", title="split", scale=SPLIT_COLOURS),
        tooltip=["task_split", "solve_share", "len", "share_of_participants"],
    ).properties(width=420, height=280, title="Per-participant accuracy (3 attempts)")


def bounds_chart(bounds: pl.DataFrame):
    if bounds.height == 0:
        return None
    x = alt.X("max_attempts:O", title="attempts (k)", axis=alt.Axis(labelAngle=0))
    band = alt.Chart().mark_errorbar(ticks=True).encode(
        x=x, y=alt.Y("bound_p025:Q", title="task-averaged accuracy", scale=alt.Scale(domain=[0, 1])),
        y2="bound_p975:Q", color=alt.Color("bound_kind:N", title="bound"), xOffset="bound_kind:N")
    points = alt.Chart().mark_point(filled=True, size=60).encode(
        x=x, y="bound_estimate:Q", color="bound_kind:N", xOffset="bound_kind:N",
        tooltip=["task_split", "max_attempts", "bound_kind", "bound_estimate", "bound_p025", "bound_p975"])
    observed = alt.Chart().mark_tick(color="black", thickness=2, size=30).encode(
        x=x, y="mean_task_accuracy:Q", tooltip=["task_split", "max_attempts", "mean_task_accuracy"])
    return alt.layer(band, points, observed, data=bounds).properties(width=220, height=260).facet(
        column=alt.Column("task_split:N", title=None, sort=SPLITS)).properties(
        title="Accuracy with pessimistic / optimistic bounds (black tick: observed)")


def time_chart(outcomes: pl.DataFrame):
    """Box plots drawn from quartiles computed here (whiskers: min and max), so the spec stays small at any
    number of participant-tasks."""
    measures = {"time_per_attempt_s": "time per task / attempts", "time_to_first_action_s": "time to first action",
                "thinking_time_per_attempt_s": "thinking time / attempts (solved)"}
    minutes = pl.col("seconds") / 60
    df = (outcomes.select("task_split", *measures)
          .unpivot(index="task_split", variable_name="measure", value_name="seconds")
          .filter(pl.col("seconds").is_not_null() & (pl.col("seconds") > 0))
          .group_by("task_split", "measure")
          .agg(minutes.min().alias("min"), minutes.quantile(0.25, "linear").alias("q1"),
               minutes.median().alias("median"), minutes.quantile(0.75, "linear").alias("q3"),
               minutes.max().alias("max"), pl.len().alias("n"))
          .with_columns(pl.col("measure").replace(measures))
          .sort("measure", "task_split"))
    if df.height == 0:
        return None
    x = alt.X("task_split:N", title=None, sort=SPLITS, axis=alt.Axis(labelAngle=0))
    y_scale = alt.Scale(type="log")
    whisker = alt.Chart().mark_rule().encode(x=x, y=alt.Y("min:Q", title="minutes (log scale)", scale=y_scale),
                                             y2="max:Q")
    box = alt.Chart().mark_bar(size=28).encode(
        x=x, y=alt.Y("q1:Q", scale=y_scale), y2="q3:Q",
        color=alt.Color("task_split:N", title="split", scale=SPLIT_COLOURS, legend=None),
        tooltip=["task_split", "measure", "n", "min", "q1", "median", "q3", "max"])
    median = alt.Chart().mark_tick(color="white", size=28, thickness=2).encode(x=x, y=alt.Y("median:Q",
                                                                                           scale=y_scale))
    return alt.layer(whisker, box, median, data=df).properties(width=160, height=260).facet(
        column=alt.Column("measure:N", title=None)).properties(title="Time per participant-task")


def divergence_chart(task_errors: pl.DataFrame):
    df = task_errors.filter(pl.col("error_divergence").is_not_null() & pl.col("solve_rate").is_not_null())
    if df.height == 0:
        return None
    points = alt.Chart(df).mark_circle(opacity=0.6).encode(
        x=alt.X("error_divergence:Q", title="error divergence (distinct incorrect grids / submissions)"),
        y=alt.Y("solve_rate:Q", title="task solve rate (3 attempts)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("task_split:N", title="split", scale=SPLIT_COLOURS),
        tooltip=["task_id", "task_split", "error_divergence", "solve_rate", "n_submits"])
    line = alt.Chart(df).transform_regression("error_divergence", "solve_rate", groupby=["task_split"]).mark_line(
    ).encode(x="error_divergence:Q", y="solve_rate:Q", color=alt.Color("task_split:N", scale=SPLIT_COLOURS))
    return (points + line).properties(width=420, height=300, title="Error divergence vs task success")


def position_chart(position: pl.DataFrame):
    if position.height == 0:
        return None
    return alt.Chart(position).mark_line(point=True).encode(
        x=alt.X("task_number:O", title="task position", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("solve_rate:Q", title="share solved (3 attempts)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("task_split:N", title="split", scale=SPLIT_COLOURS),
        tooltip=["task_split", "task_number", "n_participants", "n_solvers", "solve_rate"],
    ).properties(width=420, height=260, title="Accuracy by task position")


def write_figures(out_dir: Path, tables: dict[str, pl.DataFrame]) -> tuple[dict[str, dict[str, Path]], list[str]]:
    """Write every figure; returns ({name: paths}, [names skipped for lack of data])."""
    charts = {
        "harc_fig5_tasks_by_min_solvers": fig5_chart(tables["out_harc__tasks_by_min_solvers"]),
        "harc_fig6_participant_solve_share": fig6_chart(tables["out_harc__participant_accuracy"]),
        "harc_accuracy_bounds": bounds_chart(tables["out_harc__accuracy_bounds"]),
        "harc_time_distributions": time_chart(tables["out_harc__task_outcomes"]),
        "harc_error_divergence_vs_success": divergence_chart(tables["out_harc__task_errors"]),
        "harc_accuracy_by_position": position_chart(tables["out_harc__position_accuracy"]),
    }
    written, skipped = {}, []
    for name, chart in charts.items():
        if chart is None:
            skipped.append(name)
            for suffix in (".png", ".svg", ".vl.json"):
                (out_dir / f"{name}{suffix}").unlink(missing_ok=True)
            continue
        written[name] = save_figure(chart, out_dir, name)
    return written, skipped


def _child() -> None:
    """The child of pipeline.harc.build.FigureProcess (see the module docstring). An empty stdin (the parent
    gave up before its tables were ready) ends it quietly."""
    import vl_convert

    vl_convert.vegalite_to_svg('{"mark": "point", "data": {"values": []}}')  # starts the JavaScript engine now
    request = sys.stdin.buffer.read()
    if not request:
        return
    out_dir, tables = pickle.loads(request)
    written, skipped = write_figures(Path(out_dir), tables)
    json.dump({"written": {name: {kind: str(path) for kind, path in paths.items()} for name, paths in written.items()},
               "skipped": skipped}, sys.stdout)


if __name__ == "__main__":
    _child()
