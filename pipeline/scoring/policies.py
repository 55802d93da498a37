"""Versioned, frozen RHAE scoring policies (shared/spec/scoring.md §A).

A released policy never changes: a new rule is a new policy id. Every policy is an immutable dataclass whose
fields state each rule explicitly, with the source citations it rests on; ``ScoringPolicy.fingerprint()``
hashes all fields so tests can pin them.

Scores are in percent (0-100; per-level values up to ``level_cap``), as the official toolkit reports them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from schemas.vocabulary import BaselineRule

__all__ = [
    "DEFAULT_POLICY_ID",
    "POLICIES",
    "ScoringPolicy",
    "SourceCitation",
    "get_policy",
]

LevelWeights = Literal["uniform", "level-index"]
GameCap = Literal["none", "positive-level-weight-share"]
PlayCombination = Literal["best-play-score"]
GameAggregation = Literal["mean-over-games"]
UnplayedGames = Literal["excluded", "excluded-except-competition-mode-zero"]
LevelPairing = Literal["by-position"]


@dataclass(frozen=True)
class SourceCitation:
    """One source a policy rests on, cited by name as in shared/spec/scoring.md."""

    source: str
    says: str


@dataclass(frozen=True)
class ScoringPolicy:
    """A frozen RHAE definition.

    Level score for a completed level with ``a > 0`` actions and baseline ``b``::

        s = min(level_cap, 100 * (b / a) ** efficiency_exponent)

    (equivalently ``100 * min(1, b/a) ** k`` when ``level_cap`` is 100); 0 when not completed, when ``a == 0``
    (toolkit arithmetic guard) or ``b == 0``. Game score: weighted mean of level scores with ``level_weights``
    (uniform or ``w_l = l``), optionally capped by ``game_cap``; plays combined by ``play_combination``; games
    averaged by ``game_aggregation``.
    """

    policy_id: str
    title: str
    effective_from: str
    efficiency_exponent: int
    level_cap: float
    level_weights: LevelWeights
    game_cap: GameCap
    baseline_rule: BaselineRule
    baseline_min_completers: int
    play_combination: PlayCombination
    game_aggregation: GameAggregation
    unplayed_games: UnplayedGames
    level_pairing: LevelPairing
    completed_zero_action_level_scores_zero: bool
    action_cutoff_multiplier: float | None
    action_cutoff_rounding: Literal["ceil"] | None
    toolkit_releases: str
    provenance: tuple[SourceCitation, ...]
    conventions: tuple[str, ...]

    # -- derived helpers (pure) -------------------------------------------------------------------------
    def level_weight(self, level_index: int) -> int:
        """Weight of 1-based level ``level_index``."""
        return level_index if self.level_weights == "level-index" else 1

    def level_budget(self, baseline: float) -> int | None:
        """Per-level action cutoff ``ceil(multiplier * b)``, or None when the policy has no cutoff."""
        if self.action_cutoff_multiplier is None:
            return None
        return math.ceil(self.action_cutoff_multiplier * baseline)

    @property
    def has_action_cutoff(self) -> bool:
        return self.action_cutoff_multiplier is not None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def fingerprint(self) -> str:
        """sha256 over the canonical JSON of every field (parameters and provenance)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(blob.encode("ascii")).hexdigest()


_SEED_002 = "seed 002_17ccbe97c2bdc06f.txt (2025 scoring draft, preview period)"
_SEED_000 = "seed 000_fd0357d4251a673e.txt (ARC-AGI-3 technical paper, sections 4-5, March 2026)"
_SEED_001 = "seed 001_0fa2dcc94d1e03eb.txt (docs methodology page, after 14 April 2026)"
_TOOLKIT = "official toolkit arc-agi, arc_agi/scorecard.py"
_HARNESS = "official benchmarking harness arcprize/arc-agi-3-benchmarking, benchmarking/agent.py"
_CHANGELOG = "ARC Prize docs changelog, 14 April 2026"

_COMMON_CONVENTIONS = (
    "Actions are counted with the toolkit rules of spec/scoring.md §B (levels paired with cumulative entries "
    "by position).",
    "Several plays of one game: the game takes the best play's score (every toolkit version does).",
    "Missing baseline, missing metadata or more completed levels than baseline values: score 0 with the "
    "toolkit's message, baselines reported as -1 (toolkit behaviour, §A.3).",
    "A completed level charged 0 actions scores 0 (toolkit arithmetic guard).",
)

PREVIEW_2025 = ScoringPolicy(
    policy_id="arc-agi-3/2025-preview",
    title="ARC-AGI-3 preview scoring (2025 draft): linear efficiency, plain mean",
    effective_from="2025",
    efficiency_exponent=1,
    level_cap=100.0,
    level_weights="uniform",
    game_cap="none",
    baseline_rule="second-best",
    baseline_min_completers=2,
    play_combination="best-play-score",
    game_aggregation="mean-over-games",
    unplayed_games="excluded",
    level_pairing="by-position",
    completed_zero_action_level_scores_zero=True,
    action_cutoff_multiplier=None,
    action_cutoff_rounding=None,
    toolkit_releases="0.9.1-0.9.2",
    provenance=(
        SourceCitation(_SEED_002, "Level score s_l = 100 * min(1, b_l / a_l) for completed levels, else 0 "
                                  "(linear: '10 vs 1,000 actions scores 1 %')."),
        SourceCitation(_SEED_002, "Game score: plain mean over all levels; total: mean over games."),
        SourceCitation(_SEED_002, "Baseline: the second-best (second fewest actions) first-time human per "
                                  "level; about 10 testers per game."),
        SourceCitation(_TOOLKIT, "0.9.1 (2026-01-29): (b/a)*100 capped at 100, plain mean."),
    ),
    conventions=_COMMON_CONVENTIONS,
)

PAPER_2026_03 = ScoringPolicy(
    policy_id="arc-agi-3/2026-03",
    title="ARC-AGI-3 technical paper (March 2026): squared efficiency, level-index weights, 5x cutoff",
    effective_from="2026-03",
    efficiency_exponent=2,
    level_cap=100.0,
    level_weights="level-index",
    game_cap="none",
    baseline_rule="second-best",
    baseline_min_completers=2,
    play_combination="best-play-score",
    game_aggregation="mean-over-games",
    unplayed_games="excluded",
    level_pairing="by-position",
    completed_zero_action_level_scores_zero=True,
    action_cutoff_multiplier=5.0,
    action_cutoff_rounding="ceil",
    toolkit_releases="0.9.3-0.9.6 (without the cutoff)",
    provenance=(
        SourceCitation(_SEED_000, "Equation 1: s_l = 100 * min(1, b_l / a_l)^2 for completed levels, else 0."),
        SourceCitation(_SEED_000, "Equation 2: E = sum_l l * s_l / sum_l l (level-index weights)."),
        SourceCitation(_SEED_000, "Equation 3: T = mean of game scores over the environments."),
        SourceCitation(_SEED_000, "Human baseline: second-best first-run human playthrough; an environment is "
                                  "kept only if at least 2 testers solved it fully."),
        SourceCitation(_SEED_000, "'a hard cutoff of 5x human performance per level'."),
        SourceCitation(_HARNESS, "budget_l = ceil(b_l * MAX_ACTIONS_BASELINE_MULTIPLIER), multiplier 5.0 in "
                                 "every model configuration."),
        SourceCitation(_TOOLKIT, "0.9.3 (2026-03-09): squared, capped at 100, level-index weights, best play."),
    ),
    conventions=_COMMON_CONVENTIONS + (
        "Cutoff: budget B_l = ceil(5 * b_l). A completed level with a_l > B_l would not have been reached, so it "
        "and every later level score 0 (reported as cutoff_level). Unfinished levels never trigger it.",
    ),
)

DOCS_2026_04 = ScoringPolicy(
    policy_id="arc-agi-3/2026-04",
    title="ARC-AGI-3 docs methodology + toolkit 0.9.8 (April 2026): 1.15 level cap, game cap, upper median",
    effective_from="2026-04-14",
    efficiency_exponent=2,
    level_cap=115.0,
    level_weights="level-index",
    game_cap="positive-level-weight-share",
    baseline_rule="upper-median",
    baseline_min_completers=1,
    play_combination="best-play-score",
    game_aggregation="mean-over-games",
    unplayed_games="excluded-except-competition-mode-zero",
    level_pairing="by-position",
    completed_zero_action_level_scores_zero=True,
    action_cutoff_multiplier=None,
    action_cutoff_rounding=None,
    toolkit_releases="0.9.7-0.9.8",
    provenance=(
        SourceCitation(_SEED_001, "Level score min(1.15, (b/a)^2); game score level-index weighted and capped at "
                                  "the weighted share of completed levels ('max_game_score = (1+2+3+4)/(1+...+5)"
                                  " = 66.7 %')."),
        SourceCitation(_SEED_001, "Baseline: upper median first-time human per level."),
        SourceCitation(_CHANGELOG, "Baseline changed from '2nd best human' to 'median human per level', level cap "
                                   "from 1.0x to 1.15x."),
        SourceCitation(_TOOLKIT, "0.9.7 (2026-04-14): level cap 115 and game cap; 0.9.8 (2026-04-17): "
                                 "competition-mode reset fix. Game cap = share of levels with a positive score; "
                                 "best play by score; competition mode adds unplayed games with score 0."),
    ),
    conventions=_COMMON_CONVENTIONS + (
        "No per-level action cutoff in scoring (the harness budget ceil(5b) is agent-side).",
    ),
)

POLICIES: MappingProxyType[str, ScoringPolicy] = MappingProxyType(
    {p.policy_id: p for p in (PREVIEW_2025, PAPER_2026_03, DOCS_2026_04)}
)
DEFAULT_POLICY_ID = DOCS_2026_04.policy_id


def get_policy(policy_id: str | ScoringPolicy | None = None) -> ScoringPolicy:
    """Return a registered policy by id (default ``arc-agi-3/2026-04``); a policy object passes through."""
    if isinstance(policy_id, ScoringPolicy):
        return policy_id
    key = DEFAULT_POLICY_ID if policy_id is None else policy_id
    try:
        return POLICIES[key]
    except KeyError:
        raise KeyError(f"unknown scoring policy {key!r}; known: {sorted(POLICIES)}") from None
