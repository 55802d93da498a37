"""What the H-ARC study published: the numbers our analyses are compared with, defined once.

Sources:
- PAPER: LeGris et al., "H-ARC: A Robust Estimate of Human Performance on the Abstraction and Reasoning Corpus
  Benchmark" (arXiv:2409.01374), as summarised in spec/study-protocol.md §4 (accuracy, bounds, Table 2, errors,
  time).
- RELEASE_COUNTS: the released files and the authors' analysis notebooks (spec/formats.md §D.2 reference counts,
  §D.3 summary rows, §D.8 get_summary), which differ slightly from the paper's text (7,916 vs 7,924 training
  attempts, §D.8); the 24 evaluation summary rows whose `solved` disagrees with grid equality and the 395
  tasks per split are from the same notebooks (the "real data" issue, part 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schemas.vocabulary import HARC_SPLITS

# What the H-ARC paper reports, per split (spec/study-protocol.md §4).
PAPER: dict[str, dict[str, Any]] = {
    "training": {
        "k_accuracy": {1: 0.599, 2: 0.726, 3: 0.762}, "bounds_3": (0.733, 0.772), "share_all_solved": 0.401,
        "share_none_solved": 0.086, "n_tasks_solved_by_all": 74, "n_tasks_solved_by_none": 5,
        "n_participants": 783, "n_tasks": 400, "n_task_attempts": 7924, "n_unique_states": 127_146,
        "n_action_rows": 241_697, "mean_attempts_to_solution": 1.3, "share_incorrect_size_correct": 0.682,
        "share_copy_errors": 0.100, "mean_normalized_edit_distance": 0.19, "divergence_r": -0.81,
        "time_per_attempt_s": 4 * 60 + 19, "thinking_time_per_attempt_s": 66,
    },
    "evaluation": {
        "k_accuracy": {1: 0.478, 2: 0.602, 3: 0.642}, "bounds_3": (0.559, 0.689), "share_all_solved": 0.338,
        "share_none_solved": 0.167, "n_tasks_solved_by_all": 22, "n_tasks_solved_by_none": 5,
        "n_participants": 946, "n_tasks": 400, "n_task_attempts": 7820, "n_unique_states": 208_214,
        "n_action_rows": 344_569, "mean_attempts_to_solution": 1.4, "share_incorrect_size_correct": 0.735,
        "share_copy_errors": 0.092, "mean_normalized_edit_distance": 0.19, "divergence_r": -0.88,
        "time_per_attempt_s": 6 * 60 + 39, "thinking_time_per_attempt_s": 97,
    },
}

# Summary rows (attempts) in the released summary_data.csv (formats.md §D.3); the paper's Table 2 says 7,924
# training attempts (PAPER), the file and notebooks 7,916.
RELEASE_ATTEMPTS = {"training": 7916, "evaluation": 7820}
# Both numbers are the study's own (spec/study-protocol.md §4 Table 2: 7,924; spec/formats.md §D.3 and §D.8: the
# released file and the notebooks, 7,916, and 15,744 vs 15,736 in all): said wherever either is shown.
ATTEMPTS_NOTE = ("; the paper's Table 2 says 7,924 training attempts (15,744 in all), the released "
                 "summary_data.csv and the authors' notebooks 7,916 (15,736): the file's count is compared here "
                 "(spec/formats.md §D.8)")
SOLVED_LABEL_DISAGREEMENTS = {"evaluation": 24}  # summary rows whose `solved` disagrees with grid == answer
LAST_SUMMARY_ATTEMPT = 3  # get_summary recodes attempt 4 (the closing description) as 3 (formats.md §D.8)

# The input files, named as the release names them (formats.md §D.1), for "needs" messages.
DATA_CSV = "data.csv (the event log)"
SUMMARY_CSV = "summary_data.csv"
INCORRECT_CSV = "incorrect_submissions.csv"
ARC_TASKS = "the ARC task JSON files (correct outputs)"


@dataclass(frozen=True)
class Fact:
    """One published number to reproduce: `metric` per `task_split` (reproduction.py observes it)."""
    metric: str
    task_split: str
    published: float
    description: str
    tolerance: float = 0.0  # |observed - published| allowed for `matches` (rounding of a published share)


def _facts() -> list[Fact]:
    facts = []
    for split in HARC_SPLITS:
        paper = PAPER[split]
        facts += [
            Fact("n_participants", split, paper["n_participants"],
                 "participants with any event in the split"),
            Fact("n_attempts", split, RELEASE_ATTEMPTS[split],
                 "participant x task x attempt rows of get_summary (summary_data.csv rows)"
                 + (ATTEMPTS_NOTE if RELEASE_ATTEMPTS[split] != paper["n_task_attempts"] else "")),
            Fact("n_action_rows", split, paper["n_action_rows"], "event rows of data.csv"),
            Fact("mean_task_accuracy_3", split, paper["k_accuracy"][3],
                 "accuracy within 3 attempts, averaged over tasks", tolerance=0.0005),
            Fact("n_tasks", split, paper["n_tasks"], "tasks with a finished participant-task"),
            Fact("n_tasks_solved_by_any", split, paper["n_tasks"] - paper["n_tasks_solved_by_none"],
                 "tasks solved by at least one participant within 3 attempts"),
            Fact("max_attempt_number", split, LAST_SUMMARY_ATTEMPT,
                 "highest attempt_number of the summary: the authors map attempt 4 to 3"),
        ]
    facts.append(Fact("n_solved_label_disagreements", "evaluation", SOLVED_LABEL_DISAGREEMENTS["evaluation"],
                      "summary rows whose `solved` disagrees with equality of the grid and the task's test output "
                      "(of the 7,820 evaluation attempts)"))
    return facts


FACTS: tuple[Fact, ...] = tuple(_facts())
