"""RHAE level, play, game and suite scores under a ``ScoringPolicy`` (shared/spec/scoring.md §A).

All functions are pure. Results are frozen dataclasses shaped like the toolkit's scored summary so
``scorecard.py`` can serialize them directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pipeline.recordings.counting import WIN, CardPlay, per_level_actions, raw_level_actions

from .policies import ScoringPolicy, get_policy

__all__ = [
    "GameInput",
    "best_play_index",
    "mean_game_score",
    "GameScore",
    "LevelFormScore",
    "MSG_BASELINE_MISSING",
    "MSG_BASELINE_SIZE_MISMATCH",
    "PlayScore",
    "SuiteScore",
    "game_score_from_levels",
    "level_score",
    "no_metadata_message",
    "score_game",
    "score_level_actions",
    "score_play",
    "score_suite",
    "unscorable_reason",
]

MSG_BASELINE_MISSING = "Human baseline actions are not available for this environment"
MSG_BASELINE_SIZE_MISMATCH = "Human baseline actions size mismatch"

Number = int | float


def no_metadata_message(game_id: str) -> str:
    return f"No Matching EnvironmentInfo found for {game_id}"


# ----------------------------------------------------------------------------------------------------------
# Level and game arithmetic


def level_score(actions: int, baseline: Number, completed: bool, policy: ScoringPolicy | str | None = None
                ) -> float:
    """Score of one level in percent: ``min(cap, 100 * (b/a) ** k)`` if completed with ``a > 0`` and ``b > 0``,
    else 0 (not completed; toolkit guard for ``a == 0``; a zero baseline gives 0)."""
    pol = get_policy(policy)
    if not completed or baseline <= 0:
        return 0.0
    if actions <= 0:
        if pol.completed_zero_action_level_scores_zero:
            return 0.0
        return float(pol.level_cap)
    return float(min(pol.level_cap, 100.0 * (baseline / actions) ** pol.efficiency_exponent))


def game_score_from_levels(level_scores: Sequence[float], policy: ScoringPolicy | str | None = None) -> float:
    """Weighted mean of the level scores (weights per policy), capped per policy:
    ``positive-level-weight-share`` caps at ``100 * sum(w_l : s_l > 0) / sum(w_l)``."""
    pol = get_policy(policy)
    n = len(level_scores)
    if n == 0:
        return 0.0
    weights = [pol.level_weight(i) for i in range(1, n + 1)]
    total_weight = sum(weights)
    weighted = sum(w * s for w, s in zip(weights, level_scores, strict=True)) / total_weight
    if pol.game_cap == "positive-level-weight-share":
        share = 100.0 * sum(w for w, s in zip(weights, level_scores, strict=True) if s > 0) / total_weight
        return float(min(weighted, share))
    return float(weighted)


@dataclass(frozen=True)
class LevelFormScore:
    """Scores computed from per-level actions (the toolkit's ``EnvironmentScoreCalculator`` form)."""

    score: float
    level_scores: tuple[float, ...]
    level_actions: tuple[int, ...]
    level_baseline_actions: tuple[Number, ...]
    levels_completed: int
    cutoff_level: int | None = None
    level_budgets: tuple[int, ...] | None = None


def score_level_actions(level_actions: Sequence[int], levels_completed: int,
                        baseline_actions: Sequence[Number], policy: ScoringPolicy | str | None = None
                        ) -> LevelFormScore:
    """Score a play given per-level actions, levels ``1..levels_completed`` completed. ``level_actions`` and
    ``baseline_actions`` are matched by position and must have the same length. Applies the policy's action
    cutoff: a completed level with ``a_l > ceil(m * b_l)`` and every later level score 0."""
    pol = get_policy(policy)
    n = len(baseline_actions)
    if len(level_actions) != n:
        raise ValueError(f"{len(level_actions)} level_actions for {n} baseline levels")
    if not 0 <= levels_completed <= n:
        raise ValueError(f"levels_completed {levels_completed} outside 0..{n}")
    completed = [i < levels_completed for i in range(n)]
    budgets: tuple[int, ...] | None = None
    cutoff_level: int | None = None
    if pol.has_action_cutoff:
        budgets = tuple(pol.level_budget(b) for b in baseline_actions)  # type: ignore[misc]
        for i in range(n):
            if completed[i] and level_actions[i] > budgets[i]:
                cutoff_level = i + 1
                break
    scores = tuple(
        0.0 if (cutoff_level is not None and i + 1 >= cutoff_level)
        else level_score(level_actions[i], baseline_actions[i], completed[i], pol)
        for i in range(n)
    )
    return LevelFormScore(
        score=game_score_from_levels(scores, pol),
        level_scores=scores,
        level_actions=tuple(int(a) for a in level_actions),
        level_baseline_actions=tuple(baseline_actions),
        levels_completed=levels_completed,
        cutoff_level=cutoff_level,
        level_budgets=budgets,
    )


# ----------------------------------------------------------------------------------------------------------
# Plays and games


@dataclass(frozen=True)
class PlayScore:
    """One scored play (a toolkit ``runs[]`` entry), plus the policy's cutoff details."""

    guid: str | None
    score: float
    levels_completed: int
    actions: int
    resets: int
    state: str
    level_scores: tuple[float, ...]
    level_actions: tuple[int, ...]
    level_baseline_actions: tuple[Number, ...]
    message: str | None = None
    cutoff_level: int | None = None
    level_budgets: tuple[int, ...] | None = None

    @property
    def completed(self) -> bool:
        return self.state == WIN

    @property
    def scorable(self) -> bool:
        return self.message is None


def unscorable_reason(play: CardPlay, baseline_actions: Sequence[Number] | None, *, game_id: str,
                      has_metadata: bool = True) -> str | None:
    """The toolkit's message when a play cannot be scored, else None (checked in this order)."""
    if not has_metadata:
        return no_metadata_message(game_id)
    if not baseline_actions:
        return MSG_BASELINE_MISSING
    if len(play.actions_by_level) > len(baseline_actions):
        return MSG_BASELINE_SIZE_MISMATCH
    return None


def score_play(play: CardPlay, baseline_actions: Sequence[Number] | None,
               policy: ScoringPolicy | str | None = None, *, game_id: str = "", has_metadata: bool = True
               ) -> PlayScore:
    """Score one card play. ``levels_completed`` reported is the number of cumulative entries (the toolkit
    pairs entries with levels by position, so a level jump ``[[1,4],[3,10]]`` reports 2)."""
    pol = get_policy(policy)
    message = unscorable_reason(play, baseline_actions, game_id=game_id, has_metadata=has_metadata)
    common = dict(guid=play.guid, levels_completed=len(play.actions_by_level), actions=play.actions,
                  resets=play.resets, state=play.state)
    if message is not None:
        level_actions = raw_level_actions(play)
        return PlayScore(score=0.0, level_scores=tuple(0.0 for _ in level_actions), level_actions=level_actions,
                         level_baseline_actions=tuple(-1 for _ in level_actions), message=message, **common)
    assert baseline_actions is not None
    counts = per_level_actions(play, len(baseline_actions))
    form = score_level_actions(counts.actions, counts.n_completed, baseline_actions, pol)
    return PlayScore(score=form.score, level_scores=form.level_scores, level_actions=form.level_actions,
                     level_baseline_actions=form.level_baseline_actions, cutoff_level=form.cutoff_level,
                     level_budgets=form.level_budgets, **common)


@dataclass(frozen=True)
class GameScore:
    """A scored game (a toolkit ``environments[]`` entry): every play, and the best one."""

    game_id: str
    policy_id: str
    score: float
    plays: tuple[PlayScore, ...]
    best_play_index: int | None

    @property
    def best_play(self) -> PlayScore | None:
        return None if self.best_play_index is None else self.plays[self.best_play_index]

    @property
    def message(self) -> str | None:
        best = self.best_play
        return None if best is None else best.message

    @property
    def level_scores(self) -> tuple[float, ...]:
        best = self.best_play
        return () if best is None else best.level_scores

    @property
    def level_actions(self) -> tuple[int, ...]:
        best = self.best_play
        return () if best is None else best.level_actions

    @property
    def cutoff_level(self) -> int | None:
        best = self.best_play
        return None if best is None else best.cutoff_level

    @property
    def actions(self) -> int:
        return sum(p.actions for p in self.plays)

    @property
    def resets(self) -> int:
        return sum(p.resets for p in self.plays)

    @property
    def levels_completed(self) -> int:
        return max((p.levels_completed for p in self.plays), default=0)

    @property
    def completed(self) -> bool:
        return any(p.completed for p in self.plays)

    @property
    def level_count(self) -> int:
        return max((len(p.level_scores) for p in self.plays), default=0)


def best_play_index(scores: Sequence[float]) -> int | None:
    """Index of the highest score, the first one on ties; None for no plays."""
    if not scores:
        return None
    best = 0
    for i, s in enumerate(scores):
        if s > scores[best]:
            best = i
    return best


def score_game(game_id: str, plays: Iterable[CardPlay], baseline_actions: Sequence[Number] | None,
               policy: ScoringPolicy | str | None = None, *, has_metadata: bool = True) -> GameScore:
    """Score every play; the game takes the best play's score (§B.3). No plays -> score 0, no best play."""
    pol = get_policy(policy)
    scored = tuple(score_play(p, baseline_actions, pol, game_id=game_id, has_metadata=has_metadata)
                   for p in plays)
    best = best_play_index([p.score for p in scored])
    return GameScore(game_id=game_id, policy_id=pol.policy_id,
                     score=0.0 if best is None else scored[best].score, plays=scored, best_play_index=best)


# ----------------------------------------------------------------------------------------------------------
# Suites


@dataclass(frozen=True)
class GameInput:
    """A game for ``score_suite``: its plays (None or empty = never played) and its metadata baseline."""

    game_id: str
    plays: tuple[CardPlay, ...] | None
    baseline_actions: tuple[Number, ...] | None
    has_metadata: bool = True


ZERO_ACTION_PLAY = CardPlay(guid=None, actions=0, resets=0, state="NOT_FINISHED", levels_completed=0)


@dataclass(frozen=True)
class SuiteScore:
    """Scorecard total: mean of the game scores of the games in the scorecard."""

    policy_id: str
    competition_mode: bool
    games: tuple[GameScore, ...] = field(default_factory=tuple)
    total_score: float = 0.0

    @property
    def game_scores(self) -> dict[str, float]:
        return {g.game_id: g.score for g in self.games}

    @property
    def total_environments(self) -> int:
        return len(self.games)

    @property
    def total_environments_completed(self) -> int:
        return sum(1 for g in self.games if g.completed)

    @property
    def total_levels_completed(self) -> int:
        return sum(g.levels_completed for g in self.games)

    @property
    def total_levels(self) -> int:
        return sum(g.level_count for g in self.games)

    @property
    def total_actions(self) -> int:
        return sum(g.actions for g in self.games)


def mean_game_score(games: Sequence[GameScore]) -> float:
    return float(sum(g.score for g in games) / len(games)) if games else 0.0


def score_suite(games: Iterable[GameInput], policy: ScoringPolicy | str | None = None, *,
                competition_mode: bool = False) -> SuiteScore:
    """Mean of game scores over the games in the scorecard. Outside competition mode games never played are
    left out; in competition mode (2026-04 only) each is made with one zero-action play and scores 0."""
    pol = get_policy(policy)
    if competition_mode and pol.unplayed_games != "excluded-except-competition-mode-zero":
        raise ValueError(f"policy {pol.policy_id} defines no competition mode")
    scored = []
    for game in games:
        plays = game.plays or ()
        if not plays:
            if not competition_mode:
                continue
            plays = (ZERO_ACTION_PLAY,)
        scored.append(score_game(game.game_id, plays, game.baseline_actions, pol, has_metadata=game.has_metadata))
    return SuiteScore(policy_id=pol.policy_id, competition_mode=competition_mode, games=tuple(scored),
                      total_score=mean_game_score(scored))
