"""A synthetic static-task study: ARC-TGI task families audited by people, and a small ARC-AGI-2 attempt log.

    simulate_static_study(out_dir, *, seed=0, design=AuditDesign()) -> dict

Files under ``out_dir`` (spec/formats.md §D.3, §F, §H):

- ``arc_tgi/ARC-AGI-2-Train/ARC-AGI-2-Train.csv``: an ARC-TGI export, ``tasks_per_family`` tasks of each family
  of pipeline/simulate/arc_tasks.py, the generator named ``task<source id>`` as in the generator repository (the
  folder gives the family prefix);
- ``audit/arc2_layout.csv``: a human audit in the ARC-AGI-2 layout (``task_ID`` = ARC-TGI task id, ``task_set``
  ``ARC-TGI``): each session tries one task of every family, with durations;
- ``audit/harc_layout/summary_data.csv``: a human audit in the H-ARC summary layout (``task_name`` = ARC-TGI task
  id + ``.json``): each participant tries ``tasks_per_participant`` tasks of every family, up to 3 attempts, with
  the submitted grids (answer agreement);
- ``arc2/arc2_attempts.csv``: an ARC-AGI-2 human testing log of the families' source tasks (``Public Train`` /
  ``Public Eval``), with the unusual rows of the public file (0 submissions, 2 correct submissions);
- ``DESIGN.json``: which families were made ambiguous (low agreement) and which much harder than their source:
  the ground truth the report's flags should find. Not an input format: ingest the three folders above.

Design: the families are shuffled by the seed; the first ``n_ambiguous`` are *ambiguous*: people solve them
rarely (``p_ambiguous``) and a wrong answer is any of several plausible wrong grids, so first submissions
disagree; the first of those has a source task people solve easily (``p_easy_source``), so it is much harder
than its source, while the others' sources are as hard as they are. The other families are *clear*: solved often, and a wrong answer is the family's most
plausible wrong grid. Everything descends from ``seed`` (same seed, same bytes).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from pipeline.core.outputs import open_output, write_text
from pipeline.simulate.arc_tasks import (
    FAMILIES,
    TGI_COLUMNS,
    TGI_EPOCH,
    GeneratedTask,
    derive_rng,
    generate_task,
)

PREFIX = "ARC-AGI-2-Train"
ARC2_COLUMNS = ("task_ID", "task_set", "test_index", "session_ID", "start_time_seconds", "duration_seconds",
                "submissions", "correct_submissions")
HARC_SUMMARY_COLUMNS = ("exp_name", "task_type", "hashed_id", "joint_id_task", "task_name", "task_number",
                        "attempt_number", "num_actions", "solved", "test_output_grid", "first_written_solution",
                        "last_written_solution", "complete")
BASE57 = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"  # shortuuid's alphabet


@dataclass(frozen=True)
class AuditDesign:
    tasks_per_family: int = 4
    n_participants: int = 16  # H-ARC layout audit
    tasks_per_participant: int = 2  # per family: every task gets 2 * n_participants / tasks_per_family raters
    n_sessions: int = 10  # ARC-AGI-2 layout audit: one task of every family each
    n_ambiguous: int = 2
    p_clear: float = 0.8  # chance an attempt solves a clear family's task
    p_ambiguous: float = 0.2
    p_source: float = 0.7  # ARC-AGI-2 log: chance an attempt at a source task solves it
    p_easy_source: float = 0.95
    arc2_sessions_per_task: int = 12


def short_id(*material: Any) -> str:
    """A 22-character shortuuid-style id (ARC-TGI task ids), stable per material."""
    n = int.from_bytes(hashlib.sha256(repr(("tgi", *material)).encode()).digest()[:17], "big")
    out = []
    for _ in range(22):
        n, r = divmod(n, len(BASE57))
        out.append(BASE57[r])
    return "".join(out)


def source_id(family: str, seed: int) -> str:
    return hashlib.sha256(repr(("static-source", family, seed)).encode()).hexdigest()[:8]


def grid_string(grid: list[list[int]]) -> str:
    return "|" + "|".join("".join(map(str, row)) for row in grid) + "|"


def _write_csv(path: Path, header: tuple[str, ...], rows: list[list[Any]]) -> Path:
    with open_output(path) as fh:  # written whole (pipeline.core.outputs); the corpus stays raw CSV
        w = csv.writer(fh, lineterminator="\r\n")
        w.writerow(header)
        w.writerows(rows)
    return path


def _wrong_grids(task: GeneratedTask, n: int, seed: int) -> list[str]:
    """Up to `n` distinct plausible wrong answers to the task's test input (the family's misreadings first,
    then the input itself and recoloured copies of the right answer)."""
    fam = FAMILIES[task.family]
    rng = derive_rng(seed, "wrong", task.task_id)
    right = grid_string(task.test_output)
    seen: list[str] = []
    for g in [*fam.wrong_outputs(task.test_input, task.variables, rng), task.test_input]:
        s = grid_string(g)
        if s != right and s not in seen:
            seen.append(s)
    shift = 1
    while len(seen) < n and shift < 10:
        s = grid_string([[(v + shift) % 10 for v in row] for row in task.test_output])
        if s != right and s not in seen:
            seen.append(s)
        shift += 1
    return seen[:n]


def simulate_static_study(out_dir: Path, *, seed: int = 0, design: AuditDesign | None = None) -> dict[str, Any]:
    design = design or AuditDesign()
    out_dir = Path(out_dir)
    names = sorted(FAMILIES)
    order = derive_rng(seed, "static-profiles")
    shuffled = names[:]
    order.shuffle(shuffled)
    ambiguous = set(shuffled[:design.n_ambiguous])
    harder = shuffled[0]
    tasks: dict[str, list[GeneratedTask]] = {}
    tgi_rows = []
    k = 0
    for name in names:
        gen = "task" + source_id(name, seed)
        tasks[name] = []
        for i in range(design.tasks_per_family):
            level = 0.2 + 0.6 * i / max(design.tasks_per_family - 1, 1)
            created = (TGI_EPOCH + timedelta(seconds=k)).isoformat(sep="T", timespec="microseconds")
            t = generate_task(name, derive_rng(seed, "static", name, i), level=level, task_id=short_id(seed, name, i),
                              n_train=3, created_at=created, index=i)
            tasks[name].append(t)
            row = t.tgi_row()
            row["generator_name"] = gen
            tgi_rows.append([row[c] for c in TGI_COLUMNS])
            k += 1
    files = [_write_csv(out_dir / "arc_tgi" / PREFIX / f"{PREFIX}.csv", TGI_COLUMNS, tgi_rows)]

    # -- H-ARC-layout audit: participants x families, grids ---------------------------------------------------
    harc_rows = []
    for j in range(design.n_participants):
        who = hashlib.md5(f"audit-{seed}-{j}".encode()).hexdigest()
        rng = derive_rng(seed, "harc-audit", j)
        position = 0
        for name in names:
            fam_tasks = tasks[name]
            p = design.p_ambiguous if name in ambiguous else design.p_clear
            for m in range(design.tasks_per_participant):
                t = fam_tasks[(j + m) % len(fam_tasks)]
                position += 1
                wrong = _wrong_grids(t, 4 if name in ambiguous else 1, seed)
                actions = 0
                for attempt in (1, 2, 3):
                    actions += rng.randint(3, 40)
                    solved = rng.random() < p
                    grid = grid_string(t.test_output) if solved else (
                        rng.choice(wrong) if name in ambiguous else wrong[0])
                    task_name = f"{t.task_id}.json"
                    harc_rows.append(["audit", "training", who, f"{who}_{task_name}", task_name, position, attempt,
                                      actions, solved, grid, "", "", True])
                    if solved:
                        break
    files.append(_write_csv(out_dir / "audit" / "harc_layout" / "summary_data.csv", HARC_SUMMARY_COLUMNS, harc_rows))

    # -- ARC-AGI-2-layout audit: sessions x families, durations ---------------------------------------------
    arc2_audit = []
    for s in range(design.n_sessions):
        rng = derive_rng(seed, "arc2-audit", s)
        clock = 0.0
        for name in names:
            t = tasks[name][s % len(tasks[name])]
            p = design.p_ambiguous if name in ambiguous else design.p_clear
            subs, correct = _submissions(rng, p)
            duration = round(rng.lognormvariate(math.log(150 if name in ambiguous else 60), 0.5), 1)
            arc2_audit.append([t.task_id, "ARC-TGI", 0, f"audit-{s:02d}", round(clock, 1), duration, subs, correct])
            clock += duration + 5
    files.append(_write_csv(out_dir / "audit" / "arc2_layout.csv", ARC2_COLUMNS, arc2_audit))

    # -- ARC-AGI-2 log of the source tasks ------------------------------------------------------------------
    log = []
    clocks: dict[str, float] = {}
    for n_task, name in enumerate(names):
        sid = source_id(name, seed)
        # the much-harder family's source is easy; the other ambiguous families' sources are as hard as they are
        p = design.p_easy_source if name == harder else design.p_ambiguous if name in ambiguous else design.p_source
        task_set = "Public Train" if n_task % 2 == 0 else "Public Eval"
        for pair in range(1 + n_task % 2):
            rng = derive_rng(seed, "arc2-log", name, pair)
            for s in range(design.arc2_sessions_per_task):
                session = f"session-{(n_task + s) % (design.arc2_sessions_per_task + 3):02d}"
                subs, correct = _submissions(rng, p)
                duration = round(rng.lognormvariate(math.log(260), 0.4), 1)
                start = clocks.get(session, 0.0)
                clocks[session] = start + duration + 10
                log.append([sid, task_set, pair, session, round(start, 1), duration, subs, correct])
    log[0][6], log[0][7] = 2, 2  # the public file's one row with 2 correct submissions
    files.append(_write_csv(out_dir / "arc2" / "arc2_attempts.csv", ARC2_COLUMNS, log))

    summary = {"seed": seed, "design": asdict(design), "family_prefix": PREFIX,
               "families": {n: "task" + source_id(n, seed) for n in names},
               "ambiguous_families": sorted("task" + source_id(n, seed) for n in ambiguous),
               "much_harder_than_source": ["task" + source_id(harder, seed)],
               "n_tgi_tasks": len(tgi_rows), "n_harc_audit_rows": len(harc_rows),
               "n_arc2_audit_rows": len(arc2_audit), "n_arc2_log_rows": len(log),
               "files": [str(f.relative_to(out_dir)) for f in files]}
    write_text(out_dir / "DESIGN.json", json.dumps(summary, indent=1) + "\n")
    return summary


def _submissions(rng, p: float) -> tuple[int, int]:
    """(submissions, correct submissions) of one ARC-AGI-2-layout attempt: up to 3 tries, each solving with
    probability p; now and then a participant moves on without submitting (0, 0)."""
    if rng.random() < 0.08:
        return 0, 0
    for tries in (1, 2, 3):
        if rng.random() < p:
            return tries, 1
    return 3, 0
