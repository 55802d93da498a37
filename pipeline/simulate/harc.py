"""Synthetic H-ARC studies: simulated participants solving generated ARC tasks, written as the H-ARC release.

Entry point (the lead's ``arcstudy simulate`` calls it; no CLI wiring here)::

    simulate_harc_study(out_dir, *, scale="demo", seed=0, generation="both", workers=None,
                        overwrite=False, arc_tgi=True, scheduler=None) -> HarcStudySummary

- ``scale``: ``"demo"`` (40 participants: 16 training, 4 of them with 10 tasks, and 24 evaluation, 8 of the 40
  incomplete; 12 + 12 tasks; about 350 attempts and 13k rows; a few seconds) or ``"paper"`` (the H-ARC design:
  1,729 participants, 783 training of whom the first 241 got 10 tasks, 946 evaluation with 5 tasks, 90 + 242
  incomplete, 400 + 400 tasks; about 15,500 attempts and 580k rows; 1-2 minutes of CPU on 2 cores); or a
  ``StudyDesign``.
- ``seed``: everything is a function of it; the same seed gives byte-identical files (also with workers).
- ``generation``: ``"current"`` (OSF release), ``"2024"`` (original clean_* files) or ``"both"``.
- ``workers``: processes for the participant simulation (default: 1 for up to 100 participants, else 2): a
  local Dask cluster (pipeline.core.executor) whose workers are started with ``spawn``, so a script calling
  this with workers > 1 needs the ``if __name__ == "__main__"`` guard (console scripts have it).
- ``scheduler``: the address of a Dask cluster to simulate the participants on instead (replaces ``workers``).
- ``overwrite``: replace an earlier simulation in ``out_dir`` (else a non-empty ``out_dir`` is an error).
- ``arc_tgi``: also write the generated tasks as an ARC-TGI export CSV.

Files under ``out_dir`` (spec/formats.md §D, §E, §F):

- ``current/data/data.csv`` (40 columns in release order), ``current/data/summary_data.csv`` (the authors'
  get_summary, §D.8), ``current/data/incorrect_submissions.csv``, ``current/survey/feedback.csv``,
  ``current/survey/demographics.csv``, ``current/survey/withdraw.csv``;
- ``2024/clean_data.csv`` and ``2024/clean_data_incomplete.csv`` (``num_actions`` instead of ``action_id``),
  ``2024/clean_summary_data.csv`` / ``_incomplete.csv``, ``2024/clean_errors.csv`` / ``_incomplete.csv`` (with
  ``hashed_output_grid`` = md5 of the grid string), ``2024/clean_feedback_data.csv``,
  ``2024/clean_demographics_data.csv``, ``2024/clean_withdraw_data.csv``;
- ``tasks/<task_id>.json``: the ARC task of every task a participant saw (test[0] is what was shown);
- ``generators/arc_tgi_tasks.csv``: the same tasks as an ARC-TGI export (the code column is the
  transformation's source text).

No readme files are written: ingest would reject them as an unknown format. ``incorrect_submissions`` counts the
wrong grids of the summary's unsolved attempts (the released file's derivation is not published; this keeps it
consistent with summary_data). The returned ``HarcStudySummary`` has the counts, the k-attempt accuracies
measured on the written summary and behaviour shares to compare with the paper.

Study design (spec/study-protocol.md §4): participants get 5 tasks of one split (the first training ones 10),
drawn from a shuffled deck so every task is seen about equally often; three attempts per task with
correct/incorrect feedback; first description before the first judged submission, a last description after
a later solve or three failures; incomplete participants stop between tasks or in the middle of one
(``complete`` false; a few also filled in the withdraw form). Participants who started before 2023-12-01
15:43:10 could resubmit the same wrong grid; later ones could not.

Calibration targets (H-ARC paper, reproduced from the data as k-attempt accuracy averaged over tasks):
training 59.9 / 72.6 / 76.2 %, evaluation 47.8 / 60.2 / 64.2 % for k = 1, 2, 3. Skill and task difficulty
constants below were tuned at paper scale to land near them (measured values are in the returned summary).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.executor import open_executor
from pipeline.core.outputs import write_with
from pipeline.ingest.harc import DATA_CURRENT, ERRORS_CURRENT, SUMMARY, SURVEY_TAIL
from pipeline.simulate.arc_tasks import (
    FAMILIES,
    GeneratedTask,
    derive_rng,
    generate_task_pool,
    write_task_files,
    write_tgi_csv,
)
from pipeline.simulate.harc_participant import Participant, ParticipantSpec, Style, TaskTrace
from schemas.vocabulary import HARC_SPLITS, HARC_TERMINAL_ACTIONS

GENERATIONS = ("current", "2024", "both")
# The release's column sets are format facts: one definition, in the reader that checks them.
DATA_COLUMNS = DATA_CURRENT
SUMMARY_COLUMNS = SUMMARY
ERROR_COLUMNS = ERRORS_CURRENT
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.000000"
# Resubmitting the previous wrong grid was blocked from this moment on (spec/harc-editor.md §5.3a).
DUPLICATE_BLOCK_FROM = datetime(2023, 12, 1, 15, 43, 10)
BEFORE_BLOCK_SHARE = 405 / 783  # of training participants ran before the block (405 of 1,729 overall)

# Participant and task model (logit scale), tuned at paper scale against the k-attempt accuracies in the
# docstring and the paper's shares of participants who solved all / none of their tasks (40.1 / 8.6 %
# training, 33.8 / 16.7 % evaluation) and of tasks solved by nobody (5 per split).
SKILL_MEAN = 1.8
SKILL_SD = 1.4
# A disengaged minority barely tries (skill far below, short thinking): the paper's "solved none" share is
# much higher than independent task failures would give, and higher on evaluation.
DISENGAGED_SHARE = {"training": 0.12, "evaluation": 0.2}
DISENGAGED_SKILL_SHIFT = 5.0
TASK_SD = 1.4
HARD_TASK_SHARE = 0.025  # a few tasks (ambiguous rules) almost nobody gets
HARD_TASK_SHIFT = 3.5
LEVEL_WEIGHT = 2.45
DIFFICULTY_OFFSET = {"training": -0.25, "evaluation": -0.1}

WITHDRAW_REASONS = ("The tasks were too difficult", "It was taking too long", "Technical problems",
                    "Personal reasons", "Other")
WITHDRAW_COMMENTS = ("too hard for me", "My browser froze", "I have to leave, sorry", "these puzzles are confusing",
                     "ran out of time")
FEEDBACK = ("Fun puzzles!", "Some of them were really hard.", "The editor was a bit clumsy to use.",
            "I enjoyed it, thanks.", "It would help to have a bigger grid.", "Interesting study.",
            "The last task was confusing.", "no comments")
AGES = tuple(str(a) for a in range(18, 76))
GENDERS = ("Female", "Male", "Non-binary", "Prefer not to say")
RACES = ("White", "Black or African American", "Asian", "Hispanic or Latino", "More than one race",
         "Prefer not to say")
EDUCATION = ("High school", "Some college", "Bachelor's degree", "Master's degree", "Doctorate")
INCOME = ("Less than $25,000", "$25,000-$49,999", "$50,000-$74,999", "$75,000-$99,999", "$100,000 or more",
          "Prefer not to say")


@dataclass(frozen=True)
class StudyDesign:
    """Who takes part and which tasks exist (spec/study-protocol.md §4)."""

    name: str
    n_training: int  # participants on the training split
    n_training_ten: int  # the first training participants, given 10 tasks (expv0/expv1)
    n_evaluation: int
    n_incomplete_training: int
    n_incomplete_evaluation: int
    n_tasks_training: int  # tasks in each split's pool
    n_tasks_evaluation: int
    withdraw_share: float = 0.3  # of incomplete participants who also filled in the withdraw form

    @property
    def n_participants(self) -> int:
        return self.n_training + self.n_evaluation


DESIGNS = {
    "demo": StudyDesign("demo", n_training=16, n_training_ten=4, n_evaluation=24, n_incomplete_training=2,
                        n_incomplete_evaluation=6, n_tasks_training=12, n_tasks_evaluation=12),
    "paper": StudyDesign("paper", n_training=783, n_training_ten=241, n_evaluation=946, n_incomplete_training=90,
                         n_incomplete_evaluation=242, n_tasks_training=400, n_tasks_evaluation=400),
}


@dataclass
class HarcStudySummary:
    """What a simulation produced: counts, measured accuracies and behaviour shares, and the files."""

    out_dir: str
    design: str
    seed: int
    generation: str
    n_participants: int
    n_complete: int
    n_incomplete: int
    n_withdrawn: int
    n_tasks: int  # distinct tasks seen
    n_rows: int  # data.csv rows
    n_attempts: int  # summary rows (D.8)
    n_incorrect_submissions: int  # submit rows judged wrong
    k_accuracy: dict[str, list[float]]  # split -> [k=1, k=2, k=3], averaged over tasks (D.8)
    behaviour: dict[str, float]  # shares that the H-ARC paper reports (resize first, copy errors, ...)
    files: list[str] = field(default_factory=list)  # relative paths, sorted
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------------------
# Design -> participants


def _task_difficulty(seed: int, task: GeneratedTask) -> float:
    rng = derive_rng(seed, "difficulty", task.task_id)
    hard = HARD_TASK_SHIFT if rng.random() < HARD_TASK_SHARE else 0.0
    return (DIFFICULTY_OFFSET[task.split] - FAMILIES[task.family].ease + LEVEL_WEIGHT * task.level
            + rng.gauss(0.0, TASK_SD) + hard)


def _style(rng) -> Style:
    selector = rng.random() < 0.35
    return Style(
        speed=math.exp(rng.gauss(0.0, 0.3)),
        p_copy=rng.uniform(0.6, 1.0),
        p_flood=rng.uniform(0.0, 0.9),
        p_select=rng.uniform(0.3, 0.8) if selector else rng.uniform(0.0, 0.08),
        p_mistake=rng.uniform(0.01, 0.07),
        p_undo_fix=rng.uniform(0.3, 0.9),
        p_arrow=0.7 if rng.random() < 0.12 else 0.02,
        carefulness=math.exp(rng.gauss(0.0, 0.4)),
        think=math.exp(rng.gauss(0.0, 0.35)),
    )


def _exp_name(split: str, position: int, design: StudyDesign) -> str:
    if split == "training":
        if position < design.n_training_ten:
            return "expv0" if position < design.n_training_ten // 2 else "expv1"
        rest = design.n_training - design.n_training_ten
        return "expv2" if position - design.n_training_ten < rest // 2 else "expv3"
    third = max(1, design.n_evaluation // 3)
    return ("expv4", "expv5", "expv6_1")[min(2, position // third)]


def _start_times(seed: int, split: str, n: int) -> list[datetime]:
    """Sorted start times: training from 2023-08-01 (405/783 of them before the duplicate block), evaluation
    from 2024-01-22."""
    rng = derive_rng(seed, "start-times", split)
    if split == "training":
        n_before = round(BEFORE_BLOCK_SHARE * n)
        windows = [(datetime(2023, 8, 1, 8), DUPLICATE_BLOCK_FROM - timedelta(hours=2), n_before),
                   (DUPLICATE_BLOCK_FROM + timedelta(hours=20), datetime(2024, 1, 19, 22), n - n_before)]
    else:
        windows = [(datetime(2024, 1, 22, 8), datetime(2024, 4, 30, 22), n)]
    starts = []
    for lo, hi, count in windows:
        span = int((hi - lo).total_seconds())
        starts += sorted(lo + timedelta(seconds=rng.randrange(span)) for _ in range(count))
    return starts


def _deal_tasks(seed: int, split: str, task_ids: Sequence[str], counts: Sequence[int]) -> list[list[str]]:
    """Each participant's tasks: drawn from a shuffled deck (refilled when empty), no repeats per person."""
    rng = derive_rng(seed, "deck", split)
    deck: list[str] = []
    hands = []
    for count in counts:
        hand: list[str] = []
        skipped: list[str] = []
        while len(hand) < count:
            if not deck:
                deck = list(task_ids)
                rng.shuffle(deck)
            task = deck.pop()
            (skipped if task in hand else hand).append(task)
        deck.extend(reversed(skipped))
        hands.append(hand)
    return hands


def build_participants(design: StudyDesign, seed: int, tasks: Sequence[GeneratedTask]) -> list[ParticipantSpec]:
    specs: list[ParticipantSpec] = []
    for split, n, n_incomplete in (("training", design.n_training, design.n_incomplete_training),
                                   ("evaluation", design.n_evaluation, design.n_incomplete_evaluation)):
        pool = [t.task_id for t in tasks if t.split == split]
        counts = [10 if split == "training" and i < design.n_training_ten else 5 for i in range(n)]
        hands = _deal_tasks(seed, split, pool, counts)
        starts = _start_times(seed, split, n)
        incomplete = set(derive_rng(seed, "incomplete", split).sample(range(n), n_incomplete))
        for position in range(n):
            index = len(specs)
            rng = derive_rng(seed, "participant", index)
            disengaged = rng.random() < DISENGAGED_SHARE[split]
            style = _style(rng)
            if disengaged:
                style = replace(style, think=style.think * 0.5)
            spec = ParticipantSpec(
                index=index,
                hashed_id=hashlib.md5(f"arcstudy-simulated-participant:{seed}:{index}".encode()).hexdigest(),
                split=split, exp_name=_exp_name(split, position, design), task_ids=hands[position],
                skill=rng.gauss(SKILL_MEAN, SKILL_SD) - (DISENGAGED_SKILL_SHIFT if disengaged else 0.0),
                style=style, start=starts[position],
                block_duplicates=starts[position] >= DUPLICATE_BLOCK_FROM,
            )
            if position in incomplete:
                spec.complete = False
                spec.stop_task = min(int(rng.random() ** 1.3 * counts[position]), counts[position] - 1)
                spec.stop_inside = spec.stop_task == 0 or rng.random() < 0.6
                spec.stop_fraction = rng.uniform(0.1, 0.95)
                if rng.random() < design.withdraw_share:
                    spec.withdraw = True
                    spec.withdraw_reason = rng.choice(WITHDRAW_REASONS)
                    spec.withdraw_comment = rng.choice(WITHDRAW_COMMENTS) if rng.random() < 0.5 else None
            else:
                spec.survey = {
                    "age": rng.choice(AGES), "gender": rng.choice(GENDERS), "race": rng.choice(RACES),
                    "education_level": rng.choice(EDUCATION), "household_income": rng.choice(INCOME),
                    "normal_vision": "Yes" if rng.random() < 0.93 else "No",
                    "color_blind": "No" if rng.random() < 0.95 else "Yes",
                    "fluent_english": "Yes" if rng.random() < 0.98 else "No",
                }
                if rng.random() < 0.08:
                    spec.survey[rng.choice(SURVEY_TAIL[:5])] = None  # a skipped question
                spec.feedback = rng.choice(FEEDBACK) if rng.random() < 0.6 else None
            specs.append(spec)
    return specs


# ---------------------------------------------------------------------------------------------------------
# Participants -> rows


def _json(value: list) -> str:
    return json.dumps(value, separators=(",", ":"))


def _bool(value: bool) -> str:
    return "True" if value else "False"


def participant_rows(spec: ParticipantSpec, traces: Sequence[TaskTrace]) -> dict[str, list[str | None]]:
    """The participant's data.csv rows (current release columns), as text with None for empty fields."""
    cols: dict[str, list[str | None]] = {c: [] for c in DATA_COLUMNS}
    survey = spec.survey or {}
    fixed = {
        "exp_name": spec.exp_name, "task_type": spec.split, "hashed_id": spec.hashed_id, "is_tutorial": "False",
        "withdraw": _bool(spec.withdraw), "withdraw_reason": spec.withdraw_reason,
        "withdraw_comment": spec.withdraw_comment, "complete": _bool(spec.complete),
        **{c: survey.get(c) for c in SURVEY_TAIL},
    }
    for trace in traces:
        task_name = f"{trace.task_id}.json"
        done_attempts = {r["attempt_number"] for r in trace.rows if r["action"] == "submit"}
        if trace.rows[-1]["action"] in HARC_TERMINAL_ACTIONS:
            done_attempts.add(trace.rows[-1]["attempt_number"])
        per_task = {**fixed, "joint_id_task": f"{spec.hashed_id}_{task_name}", "task_name": task_name,
                    "task_number": str(trace.task_number), "first_written_solution": trace.first_description,
                    "last_written_solution": trace.last_description or None}
        for row, second in zip(trace.rows, trace.seconds, strict=True):
            values = {
                **per_task,
                "time": (spec.start + timedelta(seconds=second)).strftime(TIME_FORMAT),
                "attempt_number": str(row["attempt_number"]), "action_id": str(row["action_id"]),
                "solved": _bool(row["solved"]), "done": _bool(row["attempt_number"] in done_attempts),
                "test_input_grid": row["test_input_grid"], "test_input_size_x": str(row["test_input_size_x"]),
                "test_input_size_y": str(row["test_input_size_y"]), "test_output_grid": row["test_output_grid"],
                "test_output_size_x": str(row["test_output_size_x"]),
                "test_output_size_y": str(row["test_output_size_y"]), "action": row["action"],
                "action_x": None if row["action_x"] is None else f"{row['action_x']:.1f}",
                "action_y": None if row["action_y"] is None else f"{row['action_y']:.1f}",
                "select_loc": row["select_loc"], "selected_data": _json(row["selected_data"]),
                "selected_symbol": str(row["selected_symbol"]), "selected_tool": row["selected_tool"],
                "copy_paste_data": _json(row["copy_paste_data"]),
            }
            for c in DATA_COLUMNS:
                cols[c].append(values[c])
    return cols


def _simulate_chunk(args: tuple[int, list[ParticipantSpec], dict[str, GeneratedTask], dict[str, float]]
                    ) -> pl.DataFrame:
    seed, specs, tasks, difficulty = args
    frames = []
    for spec in specs:
        rng = derive_rng(seed, "behaviour", spec.index)
        traces = Participant(spec, tasks, difficulty, rng).run()
        frames.append(pl.DataFrame(participant_rows(spec, traces), schema={c: pl.String for c in DATA_COLUMNS}))
    return pl.concat(frames) if frames else pl.DataFrame(schema={c: pl.String for c in DATA_COLUMNS})


def simulate_rows(specs: Sequence[ParticipantSpec], tasks: Sequence[GeneratedTask], seed: int,
                  workers: int = 1, scheduler: str | None = None) -> pl.DataFrame:
    """All participants' data.csv rows, in participant order (identical for any number of workers, local or
    on the Dask cluster at `scheduler`)."""
    by_id = {t.task_id: t for t in tasks}
    difficulty = {t.task_id: _task_difficulty(seed, t) for t in tasks}
    by_chunk: dict[int, pl.DataFrame] = {}
    with open_executor(workers, scheduler, n_items=len(specs)) as ex:
        n_chunks = min(len(specs), ex.n_workers * 8) if ex.n_workers > 1 else 1
        chunks = [list(specs[i::n_chunks]) for i in range(n_chunks)]
        jobs = [(seed, chunk, {tid: by_id[tid] for s in chunk for tid in s.task_ids},
                 {tid: difficulty[tid] for s in chunk for tid in s.task_ids}) for chunk in chunks]
        for key, frame, error in ex.map_unordered(_simulate_chunk, enumerate(jobs), description="simulating"):
            if error is not None:  # a simulation is all or nothing: a bug here is the caller's to see
                raise RuntimeError(f"simulating participant chunk {key} failed: {error}") from error
            by_chunk[key] = frame
    frames = [by_chunk[i] for i in range(len(jobs))]
    data = pl.concat(frames)
    order = {s.hashed_id: s.index for s in specs}
    # Participant order; within a participant the chunk already has task and event order.
    return (data.with_row_index("__row")
            .with_columns(pl.col("hashed_id").replace_strict(order, return_dtype=pl.Int64).alias("__p"))
            .sort("__p", "__row").drop("__p", "__row"))


# ---------------------------------------------------------------------------------------------------------
# Derived files


def get_summary(data: pl.DataFrame, counter: str = "action_id") -> pl.DataFrame:
    """The authors' get_summary (spec/formats.md §D.8) on data.csv text columns.

    Attempt 4 becomes 3; tasks whose last event (highest attempt, then highest counter) is not a terminal
    description row are dropped; per (joint_id_task, attempt) the row with the highest counter is kept.
    """
    df = data.with_row_index("__row").with_columns(
        pl.col("attempt_number").cast(pl.Int64).replace(4, 3).alias("__attempt"),
        pl.col(counter).cast(pl.Int64).alias("__n"),
    )
    last = (df.sort("__attempt", "__n").group_by("joint_id_task", maintain_order=True)
            .agg(pl.col("action").last().alias("__last")))
    keep = last.filter(pl.col("__last").is_in(HARC_TERMINAL_ACTIONS)).select("joint_id_task")
    df = df.join(keep, on="joint_id_task", how="semi")
    first_row = df.group_by("joint_id_task").agg(pl.col("__row").min().alias("__first"))
    summary = (df.sort("__n").group_by("joint_id_task", "__attempt").agg(pl.all().last())
               .join(first_row, on="joint_id_task")
               .sort("__first", "__attempt"))
    return summary.select(
        *[pl.col(c) for c in SUMMARY_COLUMNS[:6]],
        pl.col("__attempt").cast(pl.String).alias("attempt_number"),
        pl.col("__n").cast(pl.String).alias("num_actions"),
        *[pl.col(c) for c in SUMMARY_COLUMNS[8:]],
    )


def incorrect_submissions(summary: pl.DataFrame, *, with_md5: bool) -> pl.DataFrame:
    """One row per task x distinct wrong grid among the summary's unsolved attempts, with its count."""
    wrong = summary.filter(pl.col("solved") == "False")
    errors = (wrong.group_by("task_name", "task_type", "test_output_grid").agg(pl.len().alias("__count"))
              .sort(["task_name", "__count", "test_output_grid"], descending=[False, True, False])
              .with_columns(pl.col("__count").cast(pl.String).alias("count")))
    columns = list(ERROR_COLUMNS)
    if with_md5:
        errors = errors.with_columns(pl.col("test_output_grid").map_elements(
            lambda g: hashlib.md5(g.encode()).hexdigest(), return_dtype=pl.String).alias("hashed_output_grid"))
        columns.append("hashed_output_grid")
    return errors.select(columns)


def k_attempt_accuracy(summary: pl.DataFrame) -> dict[str, list[float]]:
    """k = 1, 2, 3 accuracy per split: solved within k attempts per participant-task, mean per task, mean over
    tasks (spec/formats.md §D.8)."""
    df = summary.with_columns(pl.col("attempt_number").cast(pl.Int64), (pl.col("solved") == "True").alias("__s"))
    out: dict[str, list[float]] = {}
    for split in HARC_SPLITS:
        part = df.filter(pl.col("task_type") == split)
        if part.height == 0:
            continue
        values = []
        for k in (1, 2, 3):
            per_pt = part.group_by("joint_id_task", "task_name").agg(
                (pl.col("__s") & (pl.col("attempt_number") <= k)).any().alias("ok"))
            per_task = per_pt.group_by("task_name").agg(pl.col("ok").mean())
            values.append(round(float(per_task["ok"].mean()), 4))
        out[split] = values
    return out


def _surveys(specs: Sequence[ParticipantSpec]) -> dict[str, pl.DataFrame]:
    who = lambda s: {"exp_name": s.exp_name, "task_type": s.split, "hashed_id": s.hashed_id}  # noqa: E731
    feedback = [{**who(s), "feedback": s.feedback} for s in specs if s.complete]
    demographics = [{**who(s), **(s.survey or {}), "complete": _bool(s.complete)} for s in specs if s.survey]
    withdraw = [{**who(s), "withdraw": _bool(s.withdraw), "withdraw_reason": s.withdraw_reason,
                 "withdraw_comment": s.withdraw_comment, "complete": _bool(s.complete)} for s in specs]

    def frame(rows: list[dict], columns: Sequence[str]) -> pl.DataFrame:
        return pl.DataFrame([{c: r.get(c) for c in columns} for r in rows],
                            schema={c: pl.String for c in columns})

    base = ("exp_name", "task_type", "hashed_id")
    demo_current = (*base, "age", "gender", "race", "education_level", "normal_vision", "color_blind",
                    "fluent_english")
    return {
        "feedback": frame(feedback, (*base, "feedback")),
        "demographics": frame(demographics, demo_current),
        "withdraw": frame(withdraw, (*base, "withdraw", "withdraw_reason", "withdraw_comment")),
        "demographics_2024": frame(demographics, (*base, *SURVEY_TAIL, "complete")),
        "withdraw_2024": frame(withdraw, (*base, "withdraw", "withdraw_reason", "withdraw_comment", "complete")),
    }


def _write(df: pl.DataFrame, path: Path) -> Path:
    # a synthetic input in the release's own format: written as is (no formula neutralising), whole
    write_with(path, lambda tmp: df.write_csv(tmp, line_terminator="\n"))
    return path


def _behaviour(data: pl.DataFrame, summary: pl.DataFrame, tasks: dict[str, GeneratedTask]) -> dict[str, float]:
    """Shares the H-ARC paper reports, measured on the simulated data (for calibration reports)."""
    ordered = data.with_columns(pl.col("action_id").cast(pl.Int64).alias("__n"))
    second = ordered.filter(pl.col("__n") == 2)
    resize_first = second["action"].is_in(["change_height", "change_width"]).mean() if second.height else 0.0
    submits = data.filter(pl.col("action") == "submit")
    wrong = submits.filter(pl.col("solved") == "False")
    right_size = copy_errors = 0
    for task_name, grid in wrong.select("task_name", "test_output_grid").iter_rows():
        task = tasks[task_name.removesuffix(".json")]
        answer = task.test_output
        pieces = grid.strip("|").split("|")
        right_size += (len(pieces), len(pieces[0])) == (len(answer), len(answer[0]))
        copies = {_grid_text(task.test_input)} | {_grid_text(g) for pair in task.train for g in pair}
        copy_errors += grid in copies
    n_wrong = max(1, wrong.height)
    repeats = (submits.with_columns(pl.col("action_id").cast(pl.Int64))
               .sort("joint_id_task", "action_id")
               .with_columns(pl.col("test_output_grid").is_duplicated().over("joint_id_task").alias("dup"),
                             pl.int_range(pl.len()).over("joint_id_task", "test_output_grid").alias("nth"))
               .filter((pl.col("solved") == "False") & pl.col("dup") & (pl.col("nth") > 0)).height)
    attempts = summary.height
    solved_tasks = summary.filter(pl.col("solved") == "True")
    per_split: dict[str, float] = {}
    solved = summary.group_by("task_type", "hashed_id", "task_name", "joint_id_task").agg(
        (pl.col("solved") == "True").any().alias("ok"))
    people = solved.group_by("task_type", "hashed_id").agg(pl.col("ok").all().alias("all"),
                                                          (~pl.col("ok")).all().alias("none"))
    by_task = solved.group_by("task_type", "task_name").agg(pl.col("ok").all().alias("everyone"),
                                                           (~pl.col("ok")).all().alias("nobody"))
    durations = (data.group_by("task_type", "joint_id_task").agg(
        pl.col("time").str.to_datetime("%Y-%m-%dT%H:%M:%S%.f").max().alias("end"),
        pl.col("time").str.to_datetime("%Y-%m-%dT%H:%M:%S%.f").min().alias("start"),
        pl.col("attempt_number").cast(pl.Int64).max().clip(1, 3).alias("attempts"),
        pl.col("action").last().is_in(HARC_TERMINAL_ACTIONS).alias("ended"))
        .filter(pl.col("ended"))
        .with_columns(((pl.col("end") - pl.col("start")).dt.total_seconds() / pl.col("attempts") / 60).alias("m")))
    for split in HARC_SPLITS:
        part = data.filter(pl.col("task_type") == split)
        if not part.height:
            continue
        p_split = people.filter(pl.col("task_type") == split)
        t_split = by_task.filter(pl.col("task_type") == split)
        per_split |= {
            f"rows_per_task_{split}": round(part.height / part["joint_id_task"].n_unique(), 2),
            f"minutes_per_attempt_{split}": round(float(durations.filter(pl.col("task_type") == split)["m"].mean()), 2),
            f"participants_all_solved_{split}": round(float(p_split["all"].mean()), 4),
            f"participants_none_solved_{split}": round(float(p_split["none"].mean()), 4),
            f"tasks_solved_by_everyone_{split}": int(t_split["everyone"].sum()),
            f"tasks_solved_by_nobody_{split}": int(t_split["nobody"].sum()),
        }
    return {
        **per_split,
        "first_action_resize_share": round(float(resize_first), 4),
        "wrong_submissions_right_size_share": round(right_size / n_wrong, 4),
        "wrong_submissions_copy_error_share": round(copy_errors / n_wrong, 4),
        "wrong_submissions_repeat_share": round(repeats / n_wrong, 4),
        "rows_per_task": round(data.height / max(1, data["joint_id_task"].n_unique()), 2),
        "attempts_per_task": round(attempts / max(1, summary["joint_id_task"].n_unique()), 3),
        "mean_attempts_to_solution": round(float(solved_tasks["attempt_number"].cast(pl.Int64).mean() or 0), 3),
    }


def _grid_text(grid: Sequence[Sequence[int]]) -> str:
    return "|" + "|".join("".join(str(v) for v in row) for row in grid) + "|"


# ---------------------------------------------------------------------------------------------------------
# Entry point

_LAYOUT = ("current", "2024", "tasks", "generators")


def simulate_harc_study(out_dir: Path | str, *, scale: str | StudyDesign = "demo", seed: int = 0,
                        generation: str = "both", workers: int | None = None, overwrite: bool = False,
                        arc_tgi: bool = True, scheduler: str | None = None) -> HarcStudySummary:
    """Simulate an H-ARC study and write it in the release formats; see the module docstring."""
    started = time.perf_counter()
    design = scale if isinstance(scale, StudyDesign) else DESIGNS.get(scale)
    if design is None:
        raise ValueError(f"unknown scale {scale!r}; known: {', '.join(DESIGNS)} (or pass a StudyDesign)")
    if generation not in GENERATIONS:
        raise ValueError(f"unknown generation {generation!r}; known: {', '.join(GENERATIONS)}")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{out} is not empty; pass overwrite=True to replace an earlier simulation")
        for name in _LAYOUT:
            if (out / name).is_dir():
                shutil.rmtree(out / name)
    out.mkdir(parents=True, exist_ok=True)
    if workers is None:
        workers = 1 if design.n_participants <= 100 else 2

    tasks = generate_task_pool(seed, design.n_tasks_training, design.n_tasks_evaluation)
    specs = build_participants(design, seed, tasks)
    data = simulate_rows(specs, tasks, seed, workers, scheduler)
    summary = get_summary(data)
    complete = data["complete"] == "True"
    surveys = _surveys(specs)
    written: list[Path] = []
    if generation in ("current", "both"):
        base = out / "current"
        written += [
            _write(data, base / "data" / "data.csv"),
            _write(summary, base / "data" / "summary_data.csv"),
            _write(incorrect_submissions(summary, with_md5=False), base / "data" / "incorrect_submissions.csv"),
            _write(surveys["feedback"], base / "survey" / "feedback.csv"),
            _write(surveys["demographics"], base / "survey" / "demographics.csv"),
            _write(surveys["withdraw"], base / "survey" / "withdraw.csv"),
        ]
    if generation in ("2024", "both"):
        base = out / "2024"
        old = data.rename({"action_id": "num_actions"})
        for suffix, part in (("", old.filter(complete)), ("_incomplete", old.filter(~complete))):
            part_summary = get_summary(part, counter="num_actions")
            written += [
                _write(part, base / f"clean_data{suffix}.csv"),
                _write(part_summary, base / f"clean_summary_data{suffix}.csv"),
                _write(incorrect_submissions(part_summary, with_md5=True), base / f"clean_errors{suffix}.csv"),
            ]
        written += [
            _write(surveys["feedback"], base / "clean_feedback_data.csv"),
            _write(surveys["demographics_2024"], base / "clean_demographics_data.csv"),
            _write(surveys["withdraw_2024"], base / "clean_withdraw_data.csv"),
        ]
    seen = set(data["task_name"].str.strip_suffix(".json").unique().to_list())
    used = [t for t in tasks if t.task_id in seen]
    written += write_task_files(out / "tasks", used)
    if arc_tgi:
        written.append(write_tgi_csv(out / "generators" / "arc_tgi_tasks.csv", used))

    by_id = {t.task_id: t for t in tasks}
    return HarcStudySummary(
        out_dir=str(out), design=design.name, seed=seed, generation=generation,
        n_participants=len(specs), n_complete=sum(s.complete for s in specs),
        n_incomplete=sum(not s.complete for s in specs), n_withdrawn=sum(s.withdraw for s in specs),
        n_tasks=len(used), n_rows=data.height, n_attempts=summary.height,
        n_incorrect_submissions=data.filter((pl.col("action") == "submit") & (pl.col("solved") == "False")).height,
        k_accuracy=k_attempt_accuracy(summary), behaviour=_behaviour(data, summary, by_id),
        files=sorted(p.relative_to(out).as_posix() for p in written),
        elapsed_s=round(time.perf_counter() - started, 2),
    )
