"""The toolkit's scored summary (``EnvironmentScorecard``, shared/spec/formats.md §C.2): build, serialize, parse.

Serialization is deterministic: dict keys sorted, ``environments`` and ``tags_scores`` sorted by id (the
toolkit's order there is insertion order, which carries no meaning), ``runs`` in card (play) order and every
per-level list in level order; scores always floats written with Python's shortest round-trip repr; ``None``
values omitted (the toolkit serializes with ``exclude_none``).

Two keys are additions to the toolkit shape: top-level ``scoring_policy`` (the policy id, so a parsed
scorecard knows its rules) and, under policies with an action cutoff, ``runs[].cutoff_level`` /
``runs[].level_budgets``. Callers may add further top-level keys (``extra``), which parsers ignore.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.recordings.counting import Card

from .policies import DEFAULT_POLICY_ID, ScoringPolicy, get_policy
from .rhae import GameInput, GameScore, PlayScore, SuiteScore, best_play_index, score_suite

__all__ = [
    "Scorecard",
    "TagScore",
    "build_scorecard",
    "environment_from_dict",
    "environment_to_dict",
    "run_from_dict",
    "run_to_dict",
    "scorecard_from_dict",
    "scorecard_from_json",
    "scorecard_to_dict",
    "scorecard_to_json",
    "tag_scores",
]


@dataclass(frozen=True)
class TagScore:
    """Per-tag summary. Follows formats.md C.2: computed from each game's play with the most levels (first on
    ties), not its best-scoring play; ``score`` is the mean of those plays' scores. No toolkit-computed vector
    pins this; treat it as informational."""

    id: str
    score: float
    levels_completed: int
    actions: int
    number_of_levels: int
    number_of_environments: int


@dataclass(frozen=True)
class Scorecard:
    card_id: str
    suite: SuiteScore
    tags_scores: tuple[TagScore, ...] = ()
    source_url: str | None = None
    tags: tuple[str, ...] | None = None
    opaque: Any = None

    @property
    def score(self) -> float:
        return self.suite.total_score

    @property
    def environments(self) -> tuple[GameScore, ...]:
        return self.suite.games

    @property
    def policy_id(self) -> str:
        return self.suite.policy_id

    @property
    def competition_mode(self) -> bool:
        return self.suite.competition_mode


def tag_scores(games: Sequence[GameScore], game_tags: Mapping[str, Sequence[str]]) -> tuple[TagScore, ...]:
    by_tag: dict[str, list[GameScore]] = {}
    for game in games:
        for tag in sorted(set(game_tags.get(game.game_id, ()))):
            by_tag.setdefault(tag, []).append(game)
    out = []
    for tag in sorted(by_tag):
        picked = []
        for game in by_tag[tag]:
            if not game.plays:
                continue
            most = max(range(len(game.plays)), key=lambda i, g=game: (g.plays[i].levels_completed, -i))
            picked.append((game, game.plays[most]))
        out.append(TagScore(
            id=tag,
            score=float(sum(p.score for _, p in picked) / len(picked)) if picked else 0.0,
            levels_completed=sum(p.levels_completed for _, p in picked),
            actions=sum(p.actions for _, p in picked),
            number_of_levels=sum(g.level_count for g in by_tag[tag]),
            number_of_environments=len(by_tag[tag]),
        ))
    return tuple(out)


def build_scorecard(card_id: str, cards: Iterable[Card], environment_infos: Mapping[str, Sequence[Any] | None],
                    policy: ScoringPolicy | str | None = None, *, competition_mode: bool = False,
                    available_games: Iterable[str] | None = None,
                    game_tags: Mapping[str, Sequence[str]] | None = None, source_url: str | None = None,
                    tags: Sequence[str] | None = None, opaque: Any = None) -> Scorecard:
    """Score cards into a scorecard.

    ``environment_infos`` maps game_id -> ``baseline_actions`` (None or [] = metadata without a baseline); a
    game absent from it has no metadata ("No Matching EnvironmentInfo found for <game_id>"). In competition
    mode every game of ``available_games`` (default: the keys of ``environment_infos``) without a card is
    added with one zero-action play.
    """
    pol = get_policy(policy)
    inputs: dict[str, GameInput] = {}
    for card in cards:
        if card.game_id is None:
            raise ValueError("a card without game_id cannot be scored")
        if card.game_id in inputs:
            raise ValueError(f"two cards for {card.game_id}")
        baseline = environment_infos.get(card.game_id)
        inputs[card.game_id] = GameInput(card.game_id, card.plays,
                                         None if baseline is None else tuple(baseline),
                                         has_metadata=card.game_id in environment_infos)
    if competition_mode:
        for game_id in (environment_infos if available_games is None else available_games):
            if game_id not in inputs:
                baseline = environment_infos.get(game_id)
                inputs[game_id] = GameInput(game_id, None, None if baseline is None else tuple(baseline),
                                            has_metadata=game_id in environment_infos)
    suite = score_suite((inputs[g] for g in sorted(inputs)), pol, competition_mode=competition_mode)
    return Scorecard(card_id=card_id, suite=suite, tags_scores=tag_scores(suite.games, game_tags or {}),
                     source_url=source_url, tags=None if tags is None else tuple(tags), opaque=opaque)


# ----------------------------------------------------------------------------------------------------------
# dicts


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def run_to_dict(run: PlayScore, game_id: str | None = None) -> dict[str, Any]:
    """A ``runs[]`` entry. Toolkit quirk (pinned by the bt33 size-mismatch sample): an unscorable run also
    carries ``id`` (the game id) and ``number_of_environments: 0``; reproduced when ``game_id`` is given."""
    unscorable = run.message is not None and game_id is not None
    return _drop_none({
        "id": game_id if unscorable else None,
        "number_of_environments": 0 if unscorable else None,
        "guid": run.guid,
        "score": float(run.score),
        "levels_completed": run.levels_completed,
        "actions": run.actions,
        "resets": run.resets,
        "state": run.state,
        "completed": run.completed,
        "level_scores": [float(s) for s in run.level_scores],
        "level_actions": list(run.level_actions),
        "level_baseline_actions": list(run.level_baseline_actions),
        "message": run.message,
        "cutoff_level": run.cutoff_level,
        "level_budgets": None if run.level_budgets is None else list(run.level_budgets),
    })


def environment_to_dict(game: GameScore) -> dict[str, Any]:
    return {
        "id": game.game_id,
        "runs": [run_to_dict(r, game.game_id) for r in game.plays],
        "score": float(game.score),
        "actions": game.actions,
        "levels_completed": game.levels_completed,
        "completed": game.completed,
        "level_count": game.level_count,
        "resets": game.resets,
    }


def scorecard_to_dict(sc: Scorecard, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The scored summary as a dict; ``extra`` adds top-level keys (e.g. arcstudy's ``verification``) that
    readers of the toolkit shape ignore. An extra key may not replace a toolkit key."""
    suite = sc.suite
    out = _drop_none({
        "card_id": sc.card_id,
        "source_url": sc.source_url,
        "tags": None if sc.tags is None else list(sc.tags),
        "opaque": sc.opaque,
        "score": float(sc.score),
        "environments": [environment_to_dict(g) for g in sorted(suite.games, key=lambda g: g.game_id)],
        "tags_scores": [
            {"id": t.id, "score": float(t.score), "levels_completed": t.levels_completed, "actions": t.actions,
             "number_of_levels": t.number_of_levels, "number_of_environments": t.number_of_environments}
            for t in sorted(sc.tags_scores, key=lambda t: t.id)
        ],
        "total_environments_completed": suite.total_environments_completed,
        "total_environments": suite.total_environments,
        "total_levels_completed": suite.total_levels_completed,
        "total_levels": suite.total_levels,
        "total_actions": suite.total_actions,
        "competition_mode": suite.competition_mode,
        "scoring_policy": suite.policy_id,
    })
    for key, value in (extra or {}).items():
        if key in out:
            raise ValueError(f"extra scorecard key {key!r} would replace a scorecard field")
        out[key] = value
    return out


def scorecard_to_json(sc: Scorecard, indent: int | None = 2, extra: Mapping[str, Any] | None = None) -> str:
    """Deterministic JSON text (sorted keys, stable float repr, no NaN, trailing newline). Its pieces are
    written one by one into one buffer: `json.dumps` with an indent lists every piece before joining them, about
    sixty a run (a card of a million runs: 6 GB more for the list, beside the 1.1 GB text)."""
    encoder = json.JSONEncoder(sort_keys=True, indent=indent, allow_nan=False, ensure_ascii=False)
    text = io.StringIO()
    for piece in encoder.iterencode(scorecard_to_dict(sc, extra)):
        text.write(piece)
    text.write("\n")
    return text.getvalue()


def _num(v: Any) -> int | float:
    return v if isinstance(v, int) and not isinstance(v, bool) else float(v)


def run_from_dict(d: Mapping[str, Any]) -> PlayScore:
    """Parse a ``runs[]`` entry (the unscorable-run ``id`` / ``number_of_environments`` keys are ignored)."""
    run = PlayScore(
        guid=d.get("guid"),
        score=float(d["score"]),
        levels_completed=int(d["levels_completed"]),
        actions=int(d["actions"]),
        resets=int(d.get("resets", 0)),
        state=str(d["state"]),
        level_scores=tuple(float(s) for s in d.get("level_scores") or ()),
        level_actions=tuple(int(a) for a in d.get("level_actions") or ()),
        level_baseline_actions=tuple(_num(b) for b in d.get("level_baseline_actions") or ()),
        message=d.get("message"),
        cutoff_level=d.get("cutoff_level"),
        level_budgets=None if d.get("level_budgets") is None else tuple(int(b) for b in d["level_budgets"]),
    )
    if "completed" in d and bool(d["completed"]) != run.completed:
        raise ValueError(f"run {run.guid}: completed={d['completed']} but state={run.state}")
    return run


def environment_from_dict(d: Mapping[str, Any], policy_id: str = DEFAULT_POLICY_ID, *, strict: bool = True
                          ) -> GameScore:
    """Parse an ``environments[]`` entry. With ``strict``, the stored aggregates (score = max of run scores,
    sums, maxima, completed) must agree with the runs."""
    runs = tuple(run_from_dict(r) for r in d.get("runs") or ())
    best = best_play_index([r.score for r in runs])
    game = GameScore(game_id=str(d["id"]), policy_id=policy_id, score=float(d.get("score", 0.0)), plays=runs,
                     best_play_index=best)
    if strict:
        expected = {"score": 0.0 if best is None else runs[best].score, "actions": game.actions,
                    "resets": game.resets, "levels_completed": game.levels_completed,
                    "completed": game.completed, "level_count": game.level_count}
        for key, value in expected.items():
            if key in d and d[key] != value:
                raise ValueError(f"environment {game.game_id}: {key}={d[key]!r}, runs give {value!r}")
    return game


def scorecard_from_dict(d: Mapping[str, Any], *, strict: bool = True) -> Scorecard:
    """Parse a scored summary (toolkit or ours) back into ``Scorecard``; ``scoring_policy`` defaults to
    ``arc-agi-3/2026-04`` (what the current toolkit implements)."""
    policy_id = get_policy(d.get("scoring_policy", DEFAULT_POLICY_ID)).policy_id
    games = tuple(environment_from_dict(e, policy_id, strict=strict) for e in d.get("environments") or ())
    suite = SuiteScore(policy_id=policy_id, competition_mode=bool(d.get("competition_mode", False)), games=games,
                       total_score=float(d.get("score", 0.0)))
    if strict:
        for key in ("total_environments_completed", "total_environments", "total_levels_completed",
                    "total_levels", "total_actions"):
            if key in d and d[key] != getattr(suite, key):
                raise ValueError(f"scorecard: {key}={d[key]!r}, environments give {getattr(suite, key)!r}")
    tags_scores = tuple(
        TagScore(id=str(t["id"]), score=float(t["score"]), levels_completed=int(t["levels_completed"]),
                 actions=int(t["actions"]), number_of_levels=int(t["number_of_levels"]),
                 number_of_environments=int(t["number_of_environments"]))
        for t in d.get("tags_scores") or ()
    )
    tags = d.get("tags")
    return Scorecard(card_id=str(d["card_id"]), suite=suite, tags_scores=tags_scores,
                     source_url=d.get("source_url"), tags=None if tags is None else tuple(tags),
                     opaque=d.get("opaque"))


def scorecard_from_json(text: str) -> Scorecard:
    return scorecard_from_dict(json.loads(text))
