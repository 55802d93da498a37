"""The two hypothesis tests the H-ARC analyses report, as out_harc__statistical_tests rows.

- `t_test`: independent-samples t-test with pooled variance (statsmodels `ttest_ind(usevar="pooled")`, the
  paper's t(df) with df = n_1 + n_2 - 2), two-sided; effect size Cohen's d = (mean_1 - mean_2) / pooled SD;
  the interval is statsmodels' confidence interval of mean_1 - mean_2 (pooled).
- `pearson`: scipy.stats.pearsonr, two-sided; the interval of r is the Fisher-z interval scipy gives.

Too few observations (t-test: fewer than 2 per group or no variance; correlation: fewer than 3 pairs or a
constant variable) give a row with the counts and means but null statistics, never an error.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

CONFIDENCE = 0.95


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _untested_row(test_id: str, kind: str, effect_size_kind: str, description: str, group_1: str, group_2: str,
                  a: np.ndarray, b: np.ndarray, confidence: float) -> dict[str, Any]:
    """An out_harc__statistical_tests row with the groups described and no result yet (what is returned when
    the data cannot support the test)."""
    return {
        "test_id": test_id, "test_kind": kind, "test_description": description, "group_1": group_1,
        "group_2": group_2, "n_1": int(a.size), "n_2": int(b.size), "mean_1": _mean(a), "mean_2": _mean(b),
        "statistic": None, "degrees_of_freedom": None, "p_value": None, "effect_size": None,
        "effect_size_kind": effect_size_kind, "ci_low": None, "ci_high": None, "confidence_level": confidence,
    }


def t_test(test_id: str, description: str, group_1: str, group_2: str, x1: Sequence[float],
           x2: Sequence[float], confidence: float = CONFIDENCE) -> dict[str, Any]:
    from statsmodels.stats.weightstats import CompareMeans, DescrStatsW, ttest_ind

    a, b = np.asarray(x1, dtype=float), np.asarray(x2, dtype=float)
    row = _untested_row(test_id, "t_test_pooled", "cohens_d", description, group_1, group_2, a, b, confidence)
    if a.size < 2 or b.size < 2:
        return row
    pooled_var = ((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (a.size + b.size - 2)
    if pooled_var <= 0:
        return row
    t, p, df = ttest_ind(a, b, usevar="pooled", alternative="two-sided")
    low, high = CompareMeans(DescrStatsW(a), DescrStatsW(b)).tconfint_diff(alpha=1 - confidence, usevar="pooled")
    row.update(statistic=_finite(t), degrees_of_freedom=float(df), p_value=_finite(p),
               effect_size=float((a.mean() - b.mean()) / math.sqrt(pooled_var)), ci_low=_finite(low),
               ci_high=_finite(high))
    return row


def pearson(test_id: str, description: str, x_name: str, y_name: str, x: Sequence[float], y: Sequence[float],
            confidence: float = CONFIDENCE) -> dict[str, Any]:
    from scipy.stats import pearsonr

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    row = _untested_row(test_id, "pearson", "pearson_r", description, x_name, y_name, a, b, confidence)
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return row
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # exact +-1 correlations warn about the interval
        result = pearsonr(a, b)
        interval = result.confidence_interval(confidence)
    r = float(result.statistic)
    row.update(statistic=r, degrees_of_freedom=float(a.size - 2), p_value=_finite(result.pvalue), effect_size=r,
               ci_low=_finite(interval.low), ci_high=_finite(interval.high))
    return row
