"""How sure a human baseline is: distribution-free intervals for the baseline under each rule, and how far it
would move with one more tester.

A level's baseline is an order statistic of its m completers' costs: `upper-median` takes x_(floor(m/2)+1),
`second-best` x_(2), `best` x_(1), `median` the middle (or the mean of the two middle ones). What it estimates is
a quantile of the population of first-time players who complete the level: the median (p = 1/2) for the two
medians, and for a rule of rank r the quantile p = r / (m + 1) (the expected CDF value of x_(r)).

The interval is the classical distribution-free one for the p-quantile xi_p (no assumption about the costs'
distribution): [x_(l), x_(u)] covers xi_p with probability exactly

    P(l <= B <= u - 1),  B ~ Binomial(m, p)

for a continuous distribution (ties in integer action counts only make it more conservative). Of the
intervals [x_(l), x_(u)] holding the rule's own rank(s), the narrowest in ranks whose coverage reaches the
confidence level is taken (ties: the highest coverage, then the lowest l); when even [x_(1), x_(m)] does not
reach it (coverage 1 - p^m - (1-p)^m: with 4 completers at most 87.5 % for the median), that widest interval
is given with its lower coverage and `reaches_level` false. Everything here is a pure function.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from math import exp, fsum, lgamma, log, log1p

from schemas.vocabulary import BaselineRule

from .baselines import apply_rule

__all__ = ["DEFAULT_CONFIDENCE", "BaselineInterval", "baseline_interval", "completers_needed", "coverage",
           "rank_of_rule", "score_range", "target_quantile"]

DEFAULT_CONFIDENCE = 0.95


def rank_of_rule(rule: BaselineRule, m: int) -> tuple[int, int]:
    """The 1-based ranks (ascending) the rule's value is made of among m completers: one rank, or the two
    middle ones of an even `median`."""
    if m < 1:
        raise ValueError("no completers")
    if rule == "upper-median":
        return (m // 2 + 1,) * 2
    if rule == "second-best":
        if m < 2:
            raise ValueError("second-best needs at least 2 completers")
        return (2, 2)
    if rule == "best":
        return (1, 1)
    if rule == "median":
        return ((m + 1) // 2, m // 2 + 1)
    raise ValueError(f"unknown baseline rule {rule!r}")


def target_quantile(rule: BaselineRule, m: int) -> float:
    """The population quantile the rule estimates with m completers."""
    if rule in ("upper-median", "median"):
        return 0.5
    low, _ = rank_of_rule(rule, m)
    return low / (m + 1)


def _binomial_terms(m: int, p: float) -> list[float]:
    """P(B = i) for B ~ Binomial(m, p), i = 0..m, each from log-gamma (no overflow or huge integers at any m:
    a level of a few hundred completers costs microseconds, not an exact binomial coefficient per term)."""
    if p <= 0.0 or p >= 1.0:
        return [float(i == (0 if p <= 0.0 else m)) for i in range(m + 1)]
    log_p, log_q, log_m = log(p), log1p(-p), lgamma(m + 1)
    return [exp(log_m - lgamma(i + 1) - lgamma(m - i + 1) + i * log_p + (m - i) * log_q) for i in range(m + 1)]


def coverage(m: int, p: float, lower_rank: int, upper_rank: int) -> float:
    """P(x_(l) <= xi_p <= x_(u)) = P(l <= B <= u - 1) for B ~ Binomial(m, p), 1 <= l <= u <= m."""
    return fsum(_binomial_terms(m, p)[lower_rank:upper_rank])


@dataclass(frozen=True)
class BaselineInterval:
    """The interval of one level's baseline under one rule (see the module docstring)."""

    rule: BaselineRule
    n_completers: int
    value: float
    quantile: float  # the population quantile estimated
    lower: float  # x_(lower_rank)
    upper: float  # x_(upper_rank)
    lower_rank: int
    upper_rank: int
    coverage: float  # exact, distribution-free
    confidence: float  # the level asked for
    with_one_more_fastest: float  # the baseline if one more tester completed it as cheaply as the cheapest
    with_one_more_slowest: float  # ... or as dearly as the dearest

    @property
    def reaches_level(self) -> bool:
        return self.coverage >= self.confidence - 1e-12

    @property
    def relative_width(self) -> float | None:
        """(upper - lower) / baseline: the share of the baseline the interval spans; None for a 0 baseline."""
        return (self.upper - self.lower) / self.value if self.value else None


def baseline_interval(costs: Sequence[int | float], rule: BaselineRule,
                      confidence: float = DEFAULT_CONFIDENCE) -> BaselineInterval | None:
    """The interval for the baseline of one level whose completers' costs are `costs` (any order), or None
    when the rule has no value for so few completers."""
    m = len(costs)
    try:
        low_rank, high_rank = rank_of_rule(rule, m)
    except ValueError:
        return None
    ordered = sorted(costs)
    p = target_quantile(rule, m)
    terms = _binomial_terms(m, p)
    below = list(accumulate(terms, initial=0.0))  # below[k] = P(B < k): coverage(l, u) = below[u] - below[l]
    best: tuple[int, float, int, int] | None = None  # (width in ranks, -coverage, l, u)
    for lo in range(1, low_rank + 1):
        # The narrowest `hi` for this `lo` (a wider one only widens it), found by bisection on the running sums.
        hi = bisect_left(below, below[lo] + confidence - 1e-12, high_rank, m + 1)
        if hi > m:
            continue
        # Coverages equal but for rounding (the two sides of a median) tie, and the lower `lo` wins.
        key = (hi - lo, -round(below[hi] - below[lo], 12), lo, hi)
        if best is None or key < best:
            best = key
    if best is None:
        lo, hi = 1, m
    else:
        _, _, lo, hi = best
    cov = fsum(terms[lo:hi])
    value = float(apply_rule(ordered, rule))
    return BaselineInterval(
        rule=rule, n_completers=m, value=value, quantile=p, lower=float(ordered[lo - 1]),
        upper=float(ordered[hi - 1]), lower_rank=lo, upper_rank=hi, coverage=cov, confidence=confidence,
        with_one_more_fastest=float(apply_rule([*ordered, ordered[0]], rule)),
        with_one_more_slowest=float(apply_rule([*ordered, ordered[-1]], rule)))


def completers_needed(rule: BaselineRule, confidence: float = DEFAULT_CONFIDENCE, limit: int = 200) -> int | None:
    """The fewest completers with which some interval of order statistics reaches `confidence` for the rule's
    quantile: for the medians the smallest m with 1 - 2 * 0.5^m >= confidence (6 at 95 %); for a rank rule
    the quantile shrinks as m grows (r / (m + 1)), so the widest interval's coverage 1 - p^m - (1-p)^m is
    searched. None when no m up to `limit` does (e.g. `best`: p = 1/(m+1), and (1-p)^m tends to 1/e)."""
    for m in range(1, limit + 1):
        try:
            rank_of_rule(rule, m)
        except ValueError:
            continue
        p = target_quantile(rule, m)
        if m >= 2 and 1 - p ** m - (1 - p) ** m >= confidence - 1e-12:  # coverage(m, p, 1, m), closed form
            return m
    return None


def score_range(level_actions: Sequence[int], levels_completed: int, baselines: Sequence[float],
                lower: Sequence[float | None], upper: Sequence[float | None], policy: str | None = None
                ) -> tuple[float, float]:
    """A run's RHAE with every level baseline at its interval's lower end, and at its upper end (None: the
    level has no interval, its baseline is kept), scored by the one scorer (`rhae.score_level_actions`).
    RHAE never falls when a baseline rises, so the two bound what the intervals allow."""
    from .rhae import score_level_actions

    low = [b if lo is None else lo for b, lo in zip(baselines, lower, strict=True)]
    high = [b if hi is None else hi for b, hi in zip(baselines, upper, strict=True)]
    return (score_level_actions(level_actions, levels_completed, low, policy).score,
            score_level_actions(level_actions, levels_completed, high, policy).score)
