"""The paper's human-study totals a simulated (or real) ARC-AGI-3 study is compared with, and how close counts.

Source: spec/study-protocol.md §3 (ARC-AGI-3 technical paper, sections 4.2 and 5): 486 participants, 2,893
environment attempts, median attempt 7.4 minutes, successful 8.1, unsuccessful 5.9, unsuccessful under the
20-minute soft limit 4.7. Attempts and durations are measured by the pipeline's own definitions
(pipeline.transforms.attempts: analysis attempts; pipeline.transforms.durations: medians by outcome group).

The tolerances are what `arcstudy simulate --scale arc3 --seed 0` is calibrated to (tests/integration/
test_simulate_calibration.py) and what the calibration report's "this study vs the paper's study" table judges.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaperTarget:
    metric: str  # what is compared, in words
    paper: float
    tolerance: float
    relative: bool  # tolerance as a share of the paper's value (counts) or absolute (minutes)
    outcome_group: str | None = None  # the durations outcome group (out_arc3__durations_summary), if a median

    def within(self, value: float | None) -> bool:
        if value is None:
            return False
        allowed = self.tolerance * self.paper if self.relative else self.tolerance
        return abs(value - self.paper) <= allowed

    @property
    def tolerance_text(self) -> str:
        return f"±{self.tolerance:.0%}" if self.relative else f"±{self.tolerance:g} min"


PAPER_PARTICIPANTS = 486
PAPER_ENVIRONMENTS = 414  # candidate environments
ATTEMPTS = PaperTarget("analysis attempts", 2893, 0.05, relative=True)
MEDIAN_MINUTES = {
    "all": PaperTarget("median attempt (min)", 7.4, 0.5, relative=False, outcome_group="all"),
    "successful": PaperTarget("median successful attempt (min)", 8.1, 0.5, relative=False,
                              outcome_group="successful"),
    "unsuccessful": PaperTarget("median unsuccessful attempt (min)", 5.9, 0.5, relative=False,
                                outcome_group="unsuccessful"),
    "unsuccessful_under_soft_limit": PaperTarget("median unsuccessful attempt under 20 min (min)", 4.7, 0.5,
                                                 relative=False, outcome_group="unsuccessful_under_soft_limit"),
}
PAPER_TARGETS = (ATTEMPTS, *MEDIAN_MINUTES.values())
