"""The one rule for a game's baseline values (formats.md B, metadata validator): "reject: `baseline_actions`
present but not a list of positive integers (0 or negatives produce silent zero level scores in the toolkit)".

Every reader of baseline values asks it: ingest's metadata.json reader (`arc3_json.read_metadata`), the
`score --baselines DIR|CSV` and `--games` metadata sources (`pipeline.scoring.baseline_sources.baseline_values`,
also behind `baselines --compare`) and the per-player counts of `baselines --from-counts`
(`baseline_counts`: a completed level's cost becomes a baseline when a rule picks it).

A value is one level's action count: a whole number from 1 to `MAX_BASELINE_ACTIONS`. In a JSON document (a
metadata.json) it must be a JSON integer, as ingest has always required (`10.0` and `"10"` are refused); in a
table cell (a CSV, a database column written as a float) a whole number written as a float or as digits is that
number. A list holds at most `MAX_LEVELS` values, one per level.
"""

from __future__ import annotations

import math
from typing import Any

from pipeline.recordings.cards import MAX_LEVELS
from schemas.arc3 import MAX_BASELINE_ACTIONS

__all__ = ["ZERO_BASELINE_WHY", "baseline_actions_problem", "baseline_count", "baseline_value_problem"]

ZERO_BASELINE_WHY = "0 or negatives produce silent zero level scores in the toolkit (formats.md B)"


def baseline_count(v: Any, json_integer: bool = False) -> tuple[int | None, str | None]:
    """(the value as an action count, None) or (None, why it is not one level's baseline)."""
    if v is None:
        return None, "a baseline value is missing"
    exact = v if isinstance(v, int) and not isinstance(v, bool) else None
    typed = exact is not None
    if isinstance(v, str) and v.strip().lstrip("+").isdigit():
        exact = int(v)  # a float would round a long integer
    try:
        f = None if isinstance(v, bool) or exact is not None else float(v)
    except (TypeError, ValueError, OverflowError):
        f = None
    if exact is None and (f is None or not math.isfinite(f)):
        return None, f"baseline value {v!r} is not a number of actions"
    if exact is None and f != int(f):
        return None, f"baseline value {v} is not a whole number of actions"
    n = int(f) if exact is None else exact
    if n < 1:
        return None, f"baseline value {v!r} is not a number of actions of at least 1: {ZERO_BASELINE_WHY}"
    if n > MAX_BASELINE_ACTIONS:
        return None, (f"baseline value {v} is above {MAX_BASELINE_ACTIONS:,} actions, the largest baseline "
                      "accepted: a typo?")
    if json_integer and not typed:  # 10.0 or "10": a number of actions, but not as a JSON document writes one
        return None, f"baseline value {v!r} is not an integer (a JSON document's baseline values are integers)"
    return n, None


def baseline_value_problem(v: Any, json_integer: bool = False) -> str | None:
    """Why ``v`` cannot be one level's baseline, or None (module docstring)."""
    return baseline_count(v, json_integer)[1]


def baseline_actions_problem(values: Any, json_integer: bool = True) -> str | None:
    """Why ``values`` cannot be a game's ``baseline_actions``, or None: a list of at most `MAX_LEVELS` values,
    each passing `baseline_value_problem` (the first bad one is named with its position)."""
    if not isinstance(values, list | tuple):
        return f"baseline_actions must be a list of action counts, got {values!r}"
    if len(values) > MAX_LEVELS:
        return (f"baseline_actions has {len(values):,} values, one per level, and a game has at most {MAX_LEVELS} "
                "levels")
    for i, v in enumerate(values):
        if (why := baseline_value_problem(v, json_integer)) is not None:
            return f"level {i + 1}: {why}"
    return None
