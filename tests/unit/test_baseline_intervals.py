"""Distribution-free intervals for a baseline (pipeline/scoring/baseline_intervals.py), on small hand-made
counts whose exact order-statistic interval is worked out by hand in the comments."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.scoring.baseline_intervals import baseline_interval, coverage, rank_of_rule
from pipeline.transforms.baseline_intervals import baseline_intervals

# Nine completers; sorted: 7, 8, 9, 11, 12, 15, 20, 30, 40.
COSTS = [12, 7, 30, 9, 15, 11, 40, 8, 20]


def test_upper_median_interval_of_nine_completers():
    # upper-median = x_(floor(9/2)+1) = x_(5) = 12, estimating the median (p = 1/2).
    # P(B = i) for B ~ Binomial(9, 1/2) is C(9, i)/512: 1, 9, 36, 84, 126, 126, 84, 36, 9, 1.
    # [x_(l), x_(u)] covers the median with P(l <= B <= u-1). Holding rank 5:
    #   width 5: [2,7] -> i=2..6 = 36+84+126+126+84 = 456/512 = 0.8906; [3,8] -> 84+126+126+84+36 = 456/512
    #            [1,6] -> 9+36+84+126+126 = 381/512; [4,9] -> 381/512          (all < 0.95)
    #   width 6: [2,8] -> i=2..7 = 36+84+126+126+84+36 = 492/512 = 0.9609 (>= 0.95)
    #            [1,7] -> 9+36+84+126+126+84 = 465/512; [3,9] -> 465/512      (< 0.95)
    # so the interval is [x_(2), x_(8)] = [8, 30] with coverage 492/512.
    found = baseline_interval(COSTS, "upper-median", 0.95)
    assert (found.value, found.lower, found.upper) == (12, 8, 30)
    assert (found.lower_rank, found.upper_rank) == (2, 8)
    assert found.coverage == pytest.approx(492 / 512) and found.reaches_level
    assert found.relative_width == pytest.approx((30 - 8) / 12)
    # one more tester as cheap as the cheapest (7): 7,7,8,9,11,12,... -> x_(6) of 10 = 12 (no move);
    # as dear as the dearest (40): 7,8,9,11,12,15,20,30,40,40 -> x_(6) = 15
    assert (found.with_one_more_fastest, found.with_one_more_slowest) == (12, 15)


def test_second_best_cannot_reach_95_percent_with_nine_completers():
    # second-best = x_(2) = 8, estimating the 2/(9+1) = 0.2 quantile. Any interval [x_(l), x_(u)] with
    # l >= 1 leaves out B = 0, whose probability is 0.8^9 = 0.134: no interval reaches 95 %, and the widest,
    # [x_(1), x_(9)] = [7, 40], covers with 1 - 0.8^9 - 0.2^9 = 0.8658.
    found = baseline_interval(COSTS, "second-best", 0.95)
    assert found.value == 8 and found.quantile == pytest.approx(0.2)
    assert (found.lower, found.upper) == (7, 40) and not found.reaches_level
    assert found.coverage == pytest.approx(1 - 0.8 ** 9 - 0.2 ** 9)
    # one more at the extremes: 7,7,8,... -> x_(2) = 7; ...,40,40 -> x_(2) = 8
    assert (found.with_one_more_fastest, found.with_one_more_slowest) == (7, 8)


def test_even_median_and_too_few():
    # four completers 10, 20, 30, 40: median = 25 (ranks 2 and 3). The widest [x_(1), x_(4)] covers the
    # median with P(1 <= B <= 3) = (4 + 6 + 4)/16 = 0.875 < 0.95; at 80 %, [x_(1), x_(3)] and [x_(2), x_(4)]
    # cover (4 + 6)/16 = 0.625 each, so only [x_(1), x_(4)] = [10, 40] reaches it.
    found = baseline_interval([40, 10, 30, 20], "median", 0.80)
    assert found.value == 25 and (found.lower, found.upper) == (10, 40)
    assert found.coverage == pytest.approx(14 / 16) and found.reaches_level
    assert rank_of_rule("median", 4) == (2, 3)
    assert baseline_interval([5], "second-best") is None  # the rule needs two completers
    one = baseline_interval([5], "upper-median")
    assert (one.lower, one.upper, one.coverage, one.reaches_level) == (5, 5, 0, False)
    assert coverage(4, 0.5, 1, 4) == pytest.approx(0.875)


def test_the_build_table_has_one_row_per_level_and_rule_with_a_value():
    costs = pl.DataFrame({"game_id": ["ab12-00000001"] * 9 + ["ab12-00000001"],
                          "level_index": [1] * 9 + [2], "level_cost": COSTS + [4]})
    levels = pl.DataFrame({
        "game_id": ["ab12-00000001"] * 4, "level_index": [1, 1, 2, 2],
        "baseline_rule": ["upper-median", "second-best", "upper-median", "second-best"],
        "baseline_value": [12.0, 8.0, 4.0, None], "is_default_rule": [True, False, True, False]})
    out = baseline_intervals(costs, levels)
    assert out.select("level_index", "baseline_rule").rows() == [(1, "second-best"), (1, "upper-median"),
                                                                 (2, "upper-median")]
    first = out.filter(pl.col("baseline_rule") == "upper-median", pl.col("level_index") == 1).row(0, named=True)
    assert (first["interval_lower"], first["interval_upper"], first["n_completers"]) == (8, 30, 9)
    assert first["confidence_level"] == 0.95 and first["is_default_rule"]


def test_completers_needed_for_a_95_percent_interval():
    # medians: the widest interval [x_(1), x_(m)] covers with 1 - 2 * 0.5^m: m = 5 gives 0.9375, m = 6 0.96875
    from pipeline.scoring.baseline_intervals import completers_needed

    assert completers_needed("upper-median") == 6 and completers_needed("median", 0.9) == 5
    # second-best estimates the 2/(m+1) quantile: the widest coverage tends to 1 - e^-2 = 0.865, never 95 %
    assert completers_needed("second-best") is None and completers_needed("second-best", 0.8) is not None
