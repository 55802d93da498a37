"""Human baselines per level from per-participant data (shared/spec/scoring.md §C).

Input: one first-run play per participant, as its cumulative ``actions_by_level`` pairs (``None``, ``[]`` and
``[[]]`` mean "no level completed"). Pairs are differenced into per-level costs by position (§B.2); a participant
completed level ``l`` when the play has an ``l``-th pair; unfinished levels contribute nothing (no censoring
correction). Per level, a rule picks one completer's cost:

- ``upper-median`` (2026-04): ``x_(floor(m/2)+1)`` in ascending order = ``statistics.median_high``;
- ``second-best`` (2025-preview, 2026-03): ``x_(2)``, undefined for m < 2;
- ``median``: ``statistics.median`` (averages the two middle values for even m; not an official rule);
- ``best``: ``x_(1)``.

Levels with fewer completers than the rule's minimum get no baseline (``value`` None, ``too_few`` True).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pipeline.recordings.counting import normalize_actions_by_level
from schemas.vocabulary import BASELINE_RULES, BaselineRule

from .policies import ScoringPolicy, get_policy

__all__ = [
    "DEFAULT_MIN_COMPLETERS",
    "LevelBaseline",
    "apply_rule",
    "baseline_actions",
    "baselines_from_level_costs",
    "baselines_from_participants",
    "baselines_for_policy",
    "level_costs_from_participants",
]

DEFAULT_MIN_COMPLETERS: Mapping[str, int] = MappingProxyType(
    {"upper-median": 1, "second-best": 2, "median": 1, "best": 1}
)


@dataclass(frozen=True)
class LevelBaseline:
    level: int  # 1-based
    rule: BaselineRule
    value: int | float | None
    n_completers: int
    min_completers: int
    costs: tuple[int, ...]  # completers' costs, in participant order

    @property
    def too_few(self) -> bool:
        return self.n_completers < self.min_completers


def apply_rule(costs: Sequence[int | float], rule: BaselineRule) -> int | float:
    """Pick the baseline value from a non-empty list of completer costs."""
    if not costs:
        raise ValueError("no costs")
    ordered = sorted(costs)
    if rule == "upper-median":
        return ordered[len(ordered) // 2]
    if rule == "second-best":
        if len(ordered) < 2:
            raise ValueError("second-best needs at least 2 completers")
        return ordered[1]
    if rule == "median":
        return statistics.median(ordered)
    if rule == "best":
        return ordered[0]
    raise ValueError(f"unknown baseline rule {rule!r}")


def level_costs_from_participants(participants: Iterable[Any], n_levels: int | None = None
                                  ) -> list[list[int]]:
    """Per level, the completers' costs (participant order), differenced from cumulative pairs by position.
    ``n_levels`` defaults to the largest number of pairs; pairs beyond it are ignored."""
    diffs: list[list[int]] = []
    for pairs in participants:
        prev, row = 0, []
        for _, cumulative in normalize_actions_by_level(pairs):
            row.append(cumulative - prev)
            prev = cumulative
        diffs.append(row)
    n = max((len(r) for r in diffs), default=0) if n_levels is None else n_levels
    return [[row[level] for row in diffs if len(row) > level] for level in range(n)]


def baselines_from_level_costs(level_costs: Sequence[Sequence[int | float]], rule: BaselineRule = "upper-median",
                               min_completers: int | None = None) -> tuple[LevelBaseline, ...]:
    """Apply ``rule`` to each level's completer costs; ``min_completers`` defaults per rule (1, or 2 for
    second-best) and is never below what the rule needs."""
    if rule not in BASELINE_RULES:
        raise ValueError(f"unknown baseline rule {rule!r}")
    minimum = DEFAULT_MIN_COMPLETERS[rule] if min_completers is None else min_completers
    minimum = max(minimum, DEFAULT_MIN_COMPLETERS[rule])
    out = []
    for i, costs in enumerate(level_costs, start=1):
        costs_t = tuple(costs)
        value = apply_rule(costs_t, rule) if len(costs_t) >= minimum else None
        out.append(LevelBaseline(level=i, rule=rule, value=value, n_completers=len(costs_t),
                                 min_completers=minimum, costs=costs_t))
    return tuple(out)


def baselines_from_participants(participants: Iterable[Any], n_levels: int | None = None,
                                rule: BaselineRule = "upper-median", min_completers: int | None = None
                                ) -> tuple[LevelBaseline, ...]:
    """Baselines per level from per-participant cumulative ``actions_by_level`` pairs."""
    return baselines_from_level_costs(level_costs_from_participants(participants, n_levels), rule,
                                      min_completers)


def baselines_for_policy(participants: Iterable[Any], policy: ScoringPolicy | str | None = None,
                         n_levels: int | None = None) -> tuple[LevelBaseline, ...]:
    """Baselines with the policy's rule and minimum number of completers."""
    pol = get_policy(policy)
    return baselines_from_participants(participants, n_levels, pol.baseline_rule, pol.baseline_min_completers)


def baseline_actions(levels: Sequence[LevelBaseline]) -> tuple[int | float, ...] | None:
    """The ``baseline_actions`` list for scoring, or None when any level lacks a baseline (the game is then
    unscorable under that rule)."""
    if not levels or any(lv.value is None for lv in levels):
        return None
    return tuple(lv.value for lv in levels)  # type: ignore[misc]
