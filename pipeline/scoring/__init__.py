"""ARC-AGI-3 RHAE scoring: pure functions (shared/spec/scoring.md).

- ``policies``: frozen, versioned scoring policies (``arc-agi-3/2025-preview``, ``/2026-03``, ``/2026-04``).
- ``pipeline.recordings`` (re-exported here): toolkit action counting (steps -> ``Card`` -> per-level
  actions), the recording variant and its counting options, recording lines (parsed JSON) -> ``StepRecord``.
- ``rhae``: level, play, game and suite scores.
- ``baselines``: human baselines per level from per-participant data.
- ``scorecard``: the toolkit scored-summary JSON (build, serialize, parse).

Around the pure core (imported on their own, not re-exported here): ``vectorized`` (the same rules set-based,
in polars), ``plays`` (recordings or database steps -> cards), ``verify`` (replay verification through the
engine), ``baseline_sources`` (where baselines come from), ``run`` (one scoring run: verify, score, out
tables), ``storage`` (database plays in, scorecard files and score tables out) and ``figures``;
pipeline/commands/score.py is ``arcstudy score``.
"""

from pipeline.recordings.counting import (
    ACTION_NAMES,
    Card,
    CardPlay,
    CountingOptions,
    LevelCounts,
    StepEffect,
    StepRecord,
    action_id_from,
    classify_steps,
    detect_action_ids_lost,
    normalize_actions_by_level,
    per_level_actions,
    play_flags,
    raw_level_actions,
    rebuild_card,
    recover_action_ids,
)
from pipeline.recordings.variant import counting_options_for_variant, detect_variant

from .baselines import (
    BASELINE_RULES,
    LevelBaseline,
    apply_rule,
    baseline_actions,
    baselines_for_policy,
    baselines_from_level_costs,
    baselines_from_participants,
    level_costs_from_participants,
)
from .policies import DEFAULT_POLICY_ID, POLICIES, ScoringPolicy, SourceCitation, get_policy
from .rhae import (
    MSG_BASELINE_MISSING,
    MSG_BASELINE_SIZE_MISMATCH,
    GameInput,
    GameScore,
    LevelFormScore,
    PlayScore,
    SuiteScore,
    game_score_from_levels,
    level_score,
    no_metadata_message,
    score_game,
    score_level_actions,
    score_play,
    score_suite,
)
from .scorecard import (
    Scorecard,
    TagScore,
    build_scorecard,
    environment_to_dict,
    run_to_dict,
    scorecard_from_dict,
    scorecard_from_json,
    scorecard_to_dict,
    scorecard_to_json,
)

__all__ = [
    "ACTION_NAMES",
    "BASELINE_RULES",
    "DEFAULT_POLICY_ID",
    "MSG_BASELINE_MISSING",
    "MSG_BASELINE_SIZE_MISMATCH",
    "POLICIES",
    "Card",
    "CardPlay",
    "CountingOptions",
    "GameInput",
    "GameScore",
    "LevelBaseline",
    "LevelCounts",
    "LevelFormScore",
    "PlayScore",
    "Scorecard",
    "ScoringPolicy",
    "SourceCitation",
    "StepEffect",
    "StepRecord",
    "SuiteScore",
    "TagScore",
    "action_id_from",
    "apply_rule",
    "baseline_actions",
    "baselines_for_policy",
    "baselines_from_level_costs",
    "baselines_from_participants",
    "build_scorecard",
    "classify_steps",
    "counting_options_for_variant",
    "detect_action_ids_lost",
    "detect_variant",
    "environment_to_dict",
    "game_score_from_levels",
    "get_policy",
    "level_costs_from_participants",
    "level_score",
    "no_metadata_message",
    "normalize_actions_by_level",
    "per_level_actions",
    "play_flags",
    "raw_level_actions",
    "rebuild_card",
    "recover_action_ids",
    "run_to_dict",
    "score_game",
    "score_level_actions",
    "score_play",
    "score_suite",
    "scorecard_from_dict",
    "scorecard_from_json",
    "scorecard_to_dict",
    "scorecard_to_json",
]
