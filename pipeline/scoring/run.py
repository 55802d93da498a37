"""One ``arcstudy score`` run without the command line: verify, exclude, score under each policy, build outputs.

    result = score_recordings(recordings, ScoreRequest(policies, sources, game_dirs), progress=out.track)

1. every recording is replayed (``verify.verify_recording``: recording files as they are read, one at a time
   or on workers, by ``parallel.read_and_verify``, which passes the checks in; database steps fanned out by
   ``parallel.verify_recordings``; a recording whose replay raises has its plays excluded with the error as
   reason); a divergent play is
   excluded unless ``trust_recordings``; a play whose actions are unknown is always excluded; an unverified
   one is scored, unless its game is unknown (no game files under ``game_dirs`` and no baseline source knows
   it: most likely a wrong folder or a mistyped game id, whose believable scorecard of zeros would hide the
   mistake) and ``include_unknown_games`` is off;
2. the remaining plays form one toolkit card per game, plays in (guid, play index) order;
3. per policy, each game's baseline is resolved (``baseline_sources.resolve_baselines``) and the cards are
   scored twice: the scorecard with the pure functions (``scorecard.build_scorecard``) and the out tables
   with the set-based scorer (``vectorized.score_plays_frame``); the two must agree exactly, else the run
   fails (they implement the same arithmetic, see vectorized.py);
4. the scorecard gets one extra top-level key, ``verification`` (replay checks, exclusions, baseline
   sources), with nothing that depends on where the plays were read from, so scoring recording files and
   scoring their ingested copies give the same bytes.

The scorecard id is ``arcstudy-`` plus 16 hex digits of sha256 over the sorted play ids given, so re-scoring
the same plays (from files or from the database) gives the same id and replaces the same out rows.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from engine.loader import GameNotFoundError, find_games, resolve_game
from pipeline.recordings.counting import Card, CardPlay, play_flags
from schemas.validate import conform, rows_frame

from .baseline_sources import BaselineSource, ResolvedBaseline, resolve_baselines
from .card_input import CARD_VARIANT, SUMMARY_ONLY, card_checks, environment_difference, stated_differences
from .parallel import REPLAY_FAILED, verify_recordings
from .plays import RecordingInput
from .policies import POLICIES, ScoringPolicy
from .scorecard import Scorecard, build_scorecard, scorecard_to_json
from .vectorized import VectorizedScores, score_plays_frame
from .verify import PlayCheck, divergence_columns, verify_recording

__all__ = ["NOTHING_SCORED", "PREVIEW_POLICY_ID", "PREVIEW_VARIANT", "UNKNOWN_GAME_REASON", "PolicyResult", "ScoreInputError", "ScoreRequest", "ScoreResult", "card_id_for",
           "policy_slug", "preview_exclusions", "preview_only", "preview_reason", "score_recordings",
           "level_counts", "unknown_games", "unknown_reason"]

POLICY_ORDER = {pid: i for i, pid in enumerate(POLICIES)}  # release order


class ScoreInputError(ValueError):
    """The plays given cannot be scored together (the message is for a person)."""


@dataclass(frozen=True)
class ScoreRequest:
    policies: Sequence[ScoringPolicy]
    baseline_sources: Sequence[BaselineSource]
    game_dirs: Sequence[Path] = ()
    trust_recordings: bool = False
    from_files: bool = False  # replay recording files (pixels) rather than database steps (hashes)
    include_unknown_games: bool = False  # score plays of games nothing knows (no game files, no baseline)
    workers: int | None = None  # replay fan-out (parallel.verify_recordings); the result does not depend on it
    scheduler: str | None = None
    # Competition mode (policies whose `unplayed_games` defines it): `environments` is the environment set; every
    # environment of it that no play reached scores 0, a second play of one environment is left out, and a
    # played game outside the set is left out and reported.
    competition_mode: bool = False
    environments: Sequence[str] = ()
    card_runs: Sequence[Any] = ()  # card_input.CardRun of the scorecard recordings (variant "scorecard")
    # game_id -> its number of levels where the caller knows it (a card's game: the shipped or published count,
    # else the engine's under --games): only flags a baseline of another length, as the recordings' win_levels do
    # (`level_counts`)
    level_counts: Mapping[str, int] = field(default_factory=dict)


@dataclass
class PolicyResult:
    policy: ScoringPolicy
    scorecard: Scorecard
    scorecard_json: str
    baselines: dict[str, ResolvedBaseline]
    scores: VectorizedScores
    card_inputs: dict[str, Any] | None = None  # the scorecard's `card_inputs` (not parsed back from its text)


@dataclass
class ScoreResult:
    card_id: str
    checks: list[PlayCheck]
    excluded: dict[str, str]  # play_id -> reason
    policies: list[PolicyResult]
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    competition: dict[str, Any] | None = None  # environment set, unplayed and outside-the-set games
    file_names: dict[str, str] = field(default_factory=dict)  # file_id -> file name of every play's file
    # policy_id -> play_id -> reason: plays left out under that policy only (a 2025 preview play under a later
    # policy, formats.md A.4); `excluded` holds those left out under every policy
    policy_excluded: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def n_excluded(self) -> int:
        return len(self.excluded)

    def let_go_of_scorecard_texts(self) -> None:
        """Drop each policy's scorecard JSON once it is written: `score` of a flood of plays held one of 110 MB per
        policy at 100,000 plays while it wrote the tables. Its `scorecard_json` is then empty."""
        for pr in self.policies:
            pr.scorecard_json = ""

    def status_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for c in self.checks:
            counts[c.status] = counts.get(c.status, 0) + 1
        return dict(sorted(counts.items()))


def policy_slug(policy_id: str) -> str:
    return policy_id.replace("/", "_")


def card_id_for(play_ids: Iterable[str]) -> str:
    digest = hashlib.sha256("\n".join(sorted(play_ids)).encode()).hexdigest()
    return f"arcstudy-{digest[:16]}"


def _exclusion(check: PlayCheck, trust: bool) -> str | None:
    if check.status == "not_replayable" and check.detail and check.detail.startswith(REPLAY_FAILED):
        return check.detail
    if check.status == "not_replayable":
        return "actions unknown (action_ids_lost); not countable"
    if check.status == "divergent" and not trust:
        d = check.divergence
        where = f"line {d.line}, field {d.field}" if d is not None else "unknown step"
        return f"replay diverged ({where}); pass --trust-recordings to score it anyway"
    return None


_STATUS_RANK = {"not_replayable": 0, "divergent": 1, "unverified": 2, "verified": 3}


def merge_checks_per_play(recordings: Sequence[RecordingInput], checks: list[PlayCheck]) -> list[PlayCheck]:
    """Competition counting makes one play of each recording (a game reset is a level reset): the checks made
    per play of the file (when it was read) become one check of that play, with the worst status and the first
    divergence."""
    by_file: dict[str, list[PlayCheck]] = {}
    for c in checks:
        by_file.setdefault(c.file_id, []).append(c)
    out: list[PlayCheck] = []
    for rec in recordings:
        found = by_file.pop(rec.file_id, [])
        if len(rec.play_ids) != 1 or [c.play_id for c in found] == rec.play_ids or not found:
            out += found
            continue
        worst = min(found, key=lambda c: _STATUS_RANK.get(c.status, 0))
        out.append(replace(worst, play_id=rec.play_ids[0],
                           n_steps_replayed=sum(c.n_steps_replayed for c in found)))
    return out + [c for rest in by_file.values() for c in rest]


def _code(game_id: str) -> str:
    return game_id.split("-", 1)[0]


def _competition_exclusions(recordings: Sequence[RecordingInput], environments: Sequence[str],
                            excluded: dict[str, str]) -> dict[str, Any]:
    """Competition mode: leave out (in ``excluded``) a played game outside the environment set and every play of
    an environment after its first (``make`` is called once per environment); the environments no play reached
    (they score 0) and the games outside the set, for the scorecard's ``competition`` key."""
    env_set = sorted(set(environments))
    by_code: dict[str, list[str]] = {}
    for g in env_set:
        by_code.setdefault(_code(g), []).append(g)
    first: dict[str, str] = {}
    outside: dict[str, list[str]] = {}
    played_set: set[str] = set()
    second: list[dict[str, str]] = []
    for rec in recordings:
        for pid, play in rec.plays():
            if play is None or pid in excluded:
                continue
            g = rec.game_id
            member = g if g in env_set else (by_code.get(_code(g)) or [None])[0]
            if member is None:
                outside.setdefault(g, []).append(pid)
                excluded[pid] = (f"competition mode: {g} is not in the environment set (the games of --games); "
                                 "a competition scorecard holds only those environments")
                continue
            if member in first and first[member].endswith(f"({rec.label})"):
                excluded[pid] = (f"competition mode: a second play of {member} opened by a game reset (the engine "
                                 "went back to level 1, which the competition server never does)")
                second.append({"play_id": pid, "game_id": g, "file": rec.label, "first": first[member]})
                continue
            if member in first:
                excluded[pid] = (f"competition mode: a second play of {member} (`make` is called once per "
                                 f"environment; its first play is {first[member]})")
                second.append({"play_id": pid, "game_id": g, "file": rec.label, "first": first[member]})
                continue
            first[member] = f"{pid} ({rec.label})"
            played_set.add(member)
    return {"environment_set": env_set, "n_environments": len(env_set),
            "played": sorted(played_set), "unplayed": [g for g in env_set if g not in played_set],
            "outside_set": {g: sorted(p) for g, p in sorted(outside.items())}, "second_plays": second,
            "rules": "every environment of the set is in the mean (an unplayed one scores 0); game resets count as "
                     "level resets; one make per environment (later plays left out)"}


def _card_inputs_json(sc: Scorecard, cards: Sequence[Card], play_ids: dict[int, str], runs_by_play: dict,
                      excluded: dict[str, str], baselines: dict[str, ResolvedBaseline], policy: ScoringPolicy
                      ) -> dict[str, Any]:
    """The scorecard runs scored: each summary-only, with its file, guid, stated and recomputed score and the
    per-level differences with their causes."""
    scored_by_pid = {}
    env = {g.game_id: g for g in sc.environments}
    for card in cards:
        game = env.get(card.game_id)
        if game is None:
            continue
        for play, run in zip(card.plays, game.plays, strict=True):
            scored_by_pid[play_ids[id(play)]] = run
    runs = []
    by_environment: dict[tuple[str, str], list] = {}  # (file name, game) -> (run, recomputed score, differences)
    for pid, run in sorted(runs_by_play.items()):
        scored = scored_by_pid.get(pid)
        entry = {"play_id": pid, "file_name": run.file_name, "guid": run.play.guid, "game_id": run.game_id,
                 "run_index": run.run_index, "shape": run.shape, "status": SUMMARY_ONLY,
                 "notes": list(run.notes) or None, "flags": list(play_flags(run.play)) or None,
                 "excluded": pid in excluded or None,
                 "exclusion_reason": excluded.get(pid)}
        if run.stated is not None:
            entry["stated_score"] = run.stated.score
            entry["stated_policy"] = run.stated.policy_id
        if scored is not None:
            entry["score"] = scored.score
            b = baselines.get(run.game_id)
            diffs = stated_differences(run, scored, policy.policy_id, b.source if b else "no")
            entry["differences"] = diffs or None
            by_environment.setdefault((run.file_name, run.game_id), []).append((run, scored.score, diffs))
        runs.append({k: v for k, v in entry.items() if v is not None})
    environments = [{"file_name": name, "game_id": game_id, **diff}
                    for (name, game_id), members in sorted(by_environment.items())
                    if (diff := environment_difference(members)) is not None]
    files = {}
    for run in runs_by_play.values():
        if run.stated is not None and run.stated.card_score is not None:
            files[run.file_name] = {k: v for k, v in {"stated_total": run.stated.card_score,
                                                      "competition_mode": run.stated.competition_mode}.items()
                                    if v is not None}
    return {k: v for k, v in {
        "note": SUMMARY_ONLY + ": scored from what each card says (per-level actions), not replayed",
        "cards": dict(sorted(files.items())) or None, "runs": runs,
        "environments": environments or None}.items() if v is not None}


def _frame_only_json(check: PlayCheck) -> dict[str, Any]:
    """The play's frame-only divergences that reconverged (no key when there is none, so scorecards without any
    stay as they were): step indices and the note, without the cell count, which only a recording file's
    pixels give (out_arc3__replay_checks.n_frame_only_cells has it): the bytes stay input-independent."""
    if not check.n_frame_only_steps:
        return {}
    return {"frame_only_divergences": {"step_indices": [s for s, _ in check.frame_only_where],
                                       "reconverged_at_step": check.reconverged_step,
                                       "note": check.frame_only_note(cells=False)}}


def unknown_games(plays: Iterable[tuple[str, str]], game_dirs: Sequence[Path], policies: Sequence[ScoringPolicy],
                  baseline_sources: Sequence[BaselineSource]) -> set[str]:
    """The games of ``plays`` ((game_id, replay status) pairs) that nothing knows: no game files under
    ``game_dirs`` and no baseline source under any of ``policies``' rules (a play that replayed loaded its game:
    only unverified ones are candidates). A play of such a game is most likely a wrong folder or a mistyped game
    id, whose believable scorecard of zeros would hide the mistake: score leaves it out (`UNKNOWN_GAME_REASON`)
    and view says so, both by this rule."""
    candidates = set()
    for game_id in sorted({game_id for game_id, status in plays if status in ("unverified", "summary_only")}):
        try:
            resolve_game(game_id, list(game_dirs))
        except GameNotFoundError:
            candidates.add(game_id)
    for policy in policies:
        if not candidates:
            break
        known = resolve_baselines(candidates, policy, baseline_sources)
        candidates -= {g for g, b in known.items() if b.source != "none"}
    return candidates


PREVIEW_VARIANT = "preview-2025"  # recordings.variant: frame records with `score` (formats.md A.4)
PREVIEW_POLICY_ID = "arc-agi-3/2025-preview"


def preview_reason(game_id: str, policy: ScoringPolicy, baseline: ResolvedBaseline) -> str:
    found = ("no baseline source knows it" if baseline.source == "none" else
             f"the baseline found ({baseline.source}) is "
             + (f"the {baseline.snapshot} snapshot's" if baseline.snapshot else "of no named snapshot"))
    return (f"2025 preview recording (`score` instead of `levels_completed`): scored only under {PREVIEW_POLICY_ID} "
            f"unless a baseline for {game_id} exists in a later snapshot (formats.md A.4); under {policy.policy_id} "
            f"{found}; give one with --baselines CSV (game_id, baseline_actions, snapshot)")


def preview_only(baseline: ResolvedBaseline) -> bool:
    """A 2025 preview play with this baseline is scored under the preview policy only: no baseline, or one from
    no named later snapshot (`preview_exclusions`)."""
    return baseline.baseline_actions is None or baseline.snapshot in (None, PREVIEW_VARIANT)


def preview_exclusions(recordings: Sequence[RecordingInput], excluded: dict[str, str], policy: ScoringPolicy,
                       sources: Sequence[BaselineSource], n_levels: dict[str, int] | None = None) -> dict[str, str]:
    """The plays of 2025 preview recordings left out under ``policy`` (play_id -> reason): formats.md A.4 "score
    such plays only under `arc-agi-3/2025-preview` unless a baseline for the same `game_id` exists in a later
    snapshot". A later snapshot is one the baseline source names (a published-shape CSV's `snapshot` column) other
    than `preview-2025`; a metadata.json, a database table or a recomputed baseline names none, and the 12-hex
    preview game ids have no later snapshot in the published baselines."""
    if policy.policy_id == PREVIEW_POLICY_ID:
        return {}
    preview = [rec for rec in recordings if rec.variant == PREVIEW_VARIANT
               and any(play is not None and pid not in excluded for pid, play in rec.plays())]
    if not preview:
        return {}
    resolved = resolve_baselines({rec.game_id for rec in preview}, policy, sources, n_levels)
    out = {}
    for rec in preview:
        b = resolved[rec.game_id]
        if not preview_only(b):
            continue
        out.update({pid: preview_reason(rec.game_id, policy, b) for pid, play in rec.plays()
                    if play is not None and pid not in excluded})
    return out


UNKNOWN_GAME_REASON = ("unknown game: no game files under --games and no baseline source knows it (a wrong "
                       "folder or a mistyped game id?); pass --include-unknown-games to score it anyway")

NOTHING_SCORED = ("every play was left out (replay_checks: exclusion_reason), so this scorecard has no environment: "
                  "its score 0.0 is the toolkit's value for an empty scorecard, not a result")


def unknown_reason(game_id: str, game_dirs: Sequence[Path], policies: Sequence[ScoringPolicy],
                   baseline_sources: Sequence[BaselineSource]) -> str:
    """Why a play of ``game_id``, which `unknown_games` found nothing knows, is left out: `UNKNOWN_GAME_REASON`,
    naming the versions its game code is known under when some game folder or baseline source knows one (another
    version's baselines are not this version's: never used in its place)."""
    code = _code(game_id)
    where: dict[str, list[str]] = {}
    for info in find_games(list(game_dirs)):
        if info.short_id == code and info.game_id != game_id:
            where.setdefault(info.game_id, []).append("game files")
    for policy in policies:
        for source in baseline_sources:
            for other in source.games(policy.baseline_rule):
                if _code(other) == code and other != game_id and source.kind not in where.get(other, []):
                    where.setdefault(other, []).append(source.kind)
    if not where:
        return UNKNOWN_GAME_REASON
    known = sorted(where)
    named = ", ".join(f"{g} ({', '.join(where[g])})" for g in known[:3]) + (
        f" and {len(known) - 3} more" if len(known) > 3 else "")
    return (f"unknown game: no game files under --games and no baseline source knows {game_id}, but {code} is known "
            f"as {named}: another version (its baselines are not this one's) or a mistyped version? give this "
            "version's baselines (--baselines) or game files (--games), or pass --include-unknown-games to score it "
            "anyway")


def _verification(checks: Sequence[PlayCheck], excluded: dict[str, str], baselines: dict[str, ResolvedBaseline],
                  trust: bool, scripts: dict[str, dict[str, Any]] | None = None,
                  file_names: dict[str, str] | None = None) -> dict[str, Any]:
    scripts = scripts or {}
    file_names = file_names or {}
    return {
        "trust_recordings": trust,
        "replay_checks": [
            {k: v for k, v in {
                "play_id": c.play_id, "file_name": file_names.get(c.file_id), "guid": c.guid or None,
                "game_id": c.game_id, "status": c.status,
                "only_reset_levels": c.is_only_reset_levels, "n_steps_replayed": c.n_steps_replayed,
                "first_divergence": c.divergence_json(), **_frame_only_json(c), "excluded": c.play_id in excluded,
                "exclusion_reason": excluded.get(c.play_id),
                "replayed_from_script": scripts.get(c.file_id), "recovered": c.recovery}.items() if v is not None}
            for c in sorted(checks, key=lambda c: c.play_id)
        ],
        "baseline_sources": {
            g: {k: v for k, v in {"source": b.source, "rule": b.rule, "sha256": b.sha256,
                                  "flags": list(b.flags) or None,
                                  # the card files whose own level_baseline_actions were used
                                  "cards": b.location if b.source == "scorecard" else None}.items() if v is not None}
            for g, b in sorted(baselines.items())
        },
    }


def _n_levels(recordings: Sequence[RecordingInput]) -> dict[str, int]:
    out: dict[str, int] = {}
    for rec in recordings:
        seen = [w for w in rec.steps["win_levels"].drop_nulls().to_list() if w > 0]
        if seen:
            out[rec.game_id] = max(out.get(rec.game_id, 0), max(seen))
    return out


def level_counts(recordings: Sequence[RecordingInput], card_runs: Sequence[Any] = (),
                 loaded: Mapping[str, int] | None = None) -> dict[str, int]:
    """game_id -> its number of levels where something given says it, to flag a baseline of another length
    (formats.md B: "length != the engine's level count (score with the toolkit rule, but report)"): the engine's
    ``win_levels`` in a recording's steps, else the count the caller knows (``loaded``: shipped, published or
    loaded), else
    the level count of a scored summary that scored the game (its runs' per-level values, `environments[].level_count`)."""
    out: dict[str, int] = {}
    for run in card_runs:  # several runs of one game: the most levels any states
        if (n := run.stated_level_count) is not None:
            out[run.game_id] = max(out.get(run.game_id, 0), n)
    out.update({g: n for g, n in (loaded or {}).items() if n})
    out.update(_n_levels(recordings))
    return out


def _plays_frame(cards: Sequence[Card], play_ids: dict[int, str]) -> pl.DataFrame:
    rows = []
    for card in cards:
        for order, play in enumerate(card.plays):
            rows.append({"play_id": play_ids[id(play)], "game_id": card.game_id, "run_order": order,
                         "actions": play.actions, "cumulative": [c for _, c in play.actions_by_level]})
    return pl.DataFrame(rows, schema={"play_id": pl.String, "game_id": pl.String, "run_order": pl.Int64,
                                      "actions": pl.Int64, "cumulative": pl.List(pl.Int64)})


def _check_agreement(sc: Scorecard, scores: VectorizedScores, play_ids: dict[int, str],
                     cards: Sequence[Card], n_unplayed: int = 0) -> None:
    """The pure and the set-based scorers must give identical numbers (they share the arithmetic). In
    competition mode the set-based scorer sees the played games only: the unplayed ones add zeros to the mean."""
    by_id = {pid: s for pid, s in scores.runs.select("play_id", "score").iter_rows()}
    plays_by_game = {c.game_id: c.plays for c in cards}
    if n_unplayed:
        n_played = len(cards)
        total = scores.total * n_played / (n_played + n_unplayed) if n_played else 0.0
        if abs(total - sc.score) > 1e-9:
            raise RuntimeError(f"set-based and pure totals differ under {sc.policy_id}: {total!r} != {sc.score!r}")
        scores = replace(scores, total=sc.score)
    for game in sc.environments:
        if game.game_id not in plays_by_game:
            continue
        for play, run in zip(plays_by_game[game.game_id], game.plays, strict=True):
            if by_id[play_ids[id(play)]] != run.score:
                raise RuntimeError(f"set-based and pure scores differ for {play_ids[id(play)]} under "
                                   f"{sc.policy_id}: {by_id[play_ids[id(play)]]!r} != {run.score!r}")
    if scores.total != sc.score:
        raise RuntimeError(f"set-based and pure totals differ under {sc.policy_id}: {scores.total!r} != {sc.score!r}")


def _with_scripts_verified(recordings: Sequence[RecordingInput], checks: list[PlayCheck], request: ScoreRequest
                           ) -> list[PlayCheck]:
    """The checks in recording order, a playback script's being those of the steps its replay produced (the
    workers that read the files saw only the script's actions), each saying which game version it ran on."""
    by_file: dict[str, list[PlayCheck]] = {}
    for c in checks:
        by_file.setdefault(c.file_id, []).append(c)
    ordered: list[PlayCheck] = []
    for rec in recordings:
        if rec.script is None:
            ordered += by_file.pop(rec.file_id, [])
            continue
        by_file.pop(rec.file_id, None)
        note = rec.script.describe()
        ordered += [replace(c, detail=f"{note}; {c.detail}" if c.detail else note)
                    for c in verify_recording(rec, request.game_dirs, from_file=request.from_files)]
    return ordered + [c for rest in by_file.values() for c in rest]


def score_recordings(recordings: Sequence[RecordingInput], request: ScoreRequest,
                     progress: Callable[..., Iterable] | None = None,
                     checks: Sequence[PlayCheck] | None = None) -> ScoreResult:
    """Verify, exclude and score (module docstring). `checks`: the replay checks of `recordings` when they
    were made as the files were read (``parallel.read_and_verify``); None: the recordings are replayed here."""
    if not request.policies:
        raise ScoreInputError("no scoring policy selected")
    seen: dict[str, str] = {}
    for rec in recordings:
        for pid, _ in rec.plays():
            if pid in seen:
                raise ScoreInputError(f"play {pid} appears in two recordings ({seen[pid]} and {rec.label}); "
                                      "keep one (plays.drop_duplicate_plays)")
            seen[pid] = rec.label
    card_id = card_id_for(seen)

    cards_in = [rec for rec in recordings if rec.variant == CARD_VARIANT]
    replayable = [rec for rec in recordings if rec.variant != CARD_VARIANT]
    if checks is None:
        checks = verify_recordings(replayable, request.game_dirs, from_file=request.from_files,
                                   workers=request.workers, scheduler=request.scheduler, progress=progress)
    checks = _with_scripts_verified(replayable, list(checks), request)
    if request.competition_mode:
        checks = merge_checks_per_play(replayable, checks)
    checks += card_checks(request.card_runs) if cards_in else []
    excluded = {c.play_id: reason for c in checks if (reason := _exclusion(c, request.trust_recordings))}
    if not request.include_unknown_games:
        unknown = unknown_games([(c.game_id, c.status) for c in checks], request.game_dirs, request.policies,
                                request.baseline_sources)
        reasons = {g: unknown_reason(g, request.game_dirs, request.policies, request.baseline_sources)
                   for g in sorted(unknown)}
        excluded.update({c.play_id: reasons[c.game_id] for c in checks
                         if c.game_id in unknown and c.play_id not in excluded})
    competition = None
    if request.competition_mode:
        competition = _competition_exclusions(recordings, request.environments, excluded)

    games: dict[str, list[CardPlay]] = {}
    play_ids: dict[int, str] = {}
    for rec in recordings:
        for pid, play in rec.plays():
            if play is None or pid in excluded:
                continue
            games.setdefault(rec.game_id, []).append(play)
            play_ids[id(play)] = pid
    all_cards = [Card(game_id=g, plays=tuple(ps)) for g, ps in sorted(games.items())]
    n_levels = level_counts(recordings, request.card_runs, request.level_counts)
    unplayed = [] if competition is None else competition["unplayed"]

    results = []
    policy_excluded: dict[str, dict[str, str]] = {}
    runs_by_play = {r.play_id: r for r in request.card_runs}
    file_names = {rec.file_id: rec.label for rec in recordings}
    for policy in sorted(request.policies, key=lambda p: POLICY_ORDER.get(p.policy_id, len(POLICY_ORDER))):
        here = preview_exclusions(recordings, excluded, policy, request.baseline_sources, n_levels)
        policy_excluded[policy.policy_id] = here
        cards = all_cards if not here else [
            Card(game_id=c.game_id, plays=kept) for c in all_cards
            if (kept := tuple(p for p in c.plays if play_ids[id(p)] not in here))]
        plays_frame = _plays_frame(cards, play_ids)
        excluded_here = {**excluded, **here}
        baselines = resolve_baselines([c.game_id for c in cards] + unplayed, policy, request.baseline_sources,
                                      n_levels)
        infos = {g: b.baseline_actions for g, b in baselines.items() if b.has_metadata}
        sc = build_scorecard(card_id, cards, infos, policy, competition_mode=request.competition_mode,
                             available_games=[c.game_id for c in cards] + unplayed)
        games_frame = pl.DataFrame([{"game_id": g, "baseline_actions": None if v is None else list(v)}
                                    for g, v in infos.items()],
                                   schema={"game_id": pl.String, "baseline_actions": pl.List(pl.Int64)})
        scores = score_plays_frame(plays_frame, games_frame, policy)
        _check_agreement(sc, scores, play_ids, cards, n_unplayed=len(unplayed))
        scripts = {rec.file_id: rec.script.as_json() for rec in recordings if rec.script is not None}
        extra = {"verification": _verification(checks, excluded_here, baselines, request.trust_recordings, scripts,
                                               file_names)}
        if not sc.environments:  # every play left out: the toolkit's empty mean is 0.0, which is no result
            extra["verification"]["nothing_scored"] = NOTHING_SCORED
        if runs_by_play:
            extra["card_inputs"] = _card_inputs_json(sc, cards, play_ids, runs_by_play, excluded_here, baselines,
                                                     policy)
        if competition is not None:
            extra["competition"] = competition
        text = scorecard_to_json(sc, extra=extra)
        results.append(PolicyResult(policy, sc, text, baselines, scores, extra.get("card_inputs")))

    result = ScoreResult(card_id=card_id, checks=checks, excluded=excluded, policies=results, competition=competition,
                         file_names=file_names,
                         policy_excluded={p: e for p, e in policy_excluded.items() if e})
    result.tables = build_tables(result, all_cards, play_ids)
    return result


# --------------------------------------------------------------------------------------------------
# out tables
# --------------------------------------------------------------------------------------------------
def build_tables(result: ScoreResult, cards: Sequence[Card],
                 play_ids: dict[int, str]) -> dict[str, pl.DataFrame]:
    card_id = result.card_id
    status = {c.play_id: c.status for c in result.checks}
    checks = conform("out_arc3__replay_checks", ({
        "card_id": card_id, "play_id": c.play_id, "file_id": c.file_id, "game_id": c.game_id, "guid": c.guid,
        "verification_status": c.status, "replay_input": c.replay_input,
        "is_only_reset_levels": c.is_only_reset_levels, "n_steps_replayed": c.n_steps_replayed,
        **divergence_columns(c.divergence), "replay_detail": c.detail,
        **({"n_frame_only_steps": c.n_frame_only_steps, "n_frame_only_cells": c.n_frame_only_cells}
           if c.status in ("verified", "divergent") else {"n_frame_only_steps": None, "n_frame_only_cells": None}),
        "game_source_sha256": c.game_source_sha256,
        "is_score_excluded": c.play_id in result.excluded, "exclusion_reason": result.excluded.get(c.play_id),
        "file_name": result.file_names.get(c.file_id),
        "is_recovered": c.is_recovered, "recovery_provenance": c.recovery,
    } for c in sorted(result.checks, key=lambda c: c.play_id)))  # (a row at a time: a flood of plays' checks)

    play_info = {}
    for card in cards:
        for index, play in enumerate(card.plays):
            play_info[play_ids[id(play)]] = (index, play)
    info = rows_frame(({"play_id": p, "run_index": i, "guid": play.guid, "actions": play.actions,
                        "resets": play.resets, "state": play.state, "is_completed": play.completed,
                        "card_actions_by_level": [list(pair) for pair in play.actions_by_level]}
                       for p, (i, play) in play_info.items()),
                      {"play_id": pl.String, "run_index": pl.Int64, "guid": pl.String, "actions": pl.Int64,
                       "resets": pl.Int64, "state": pl.String, "is_completed": pl.Boolean,
                       "card_actions_by_level": pl.List(pl.List(pl.Int64))})
    runs, levels, games, by_policy = [], [], [], {}
    for pr in result.policies:
        pid = pr.policy.policy_id
        vruns = pr.scores.runs
        r = vruns.join(info, on="play_id", how="left").with_columns(
            card_id=pl.lit(card_id), policy_id=pl.lit(pid), is_best_run=pl.col("is_best"),
            verification_status=pl.col("play_id").replace_strict(status, default=None))
        runs.append(r)
        by_policy[pid] = r.select("play_id", "game_id", "score")
        levels.append(pr.scores.levels.rename({"level_actions": "n_actions"})
                      .with_columns(card_id=pl.lit(card_id), policy_id=pl.lit(pid)))
        env = {g.game_id: g for g in pr.scorecard.environments}
        best = dict(pr.scores.games.select("game_id", "best_play_id").iter_rows())
        for game_id, b in sorted(pr.baselines.items()):
            g = env[game_id]
            games.append({
                "card_id": card_id, "policy_id": pid, "game_id": game_id, "score": g.score, "n_runs": len(g.plays),
                "best_play_id": best.get(game_id), "actions": g.actions, "resets": g.resets,
                "levels_completed": g.levels_completed, "is_completed": g.completed, "level_count": g.level_count,
                "baseline_actions": None if b.baseline_actions is None else list(b.baseline_actions),
                "baseline_source": b.source, "baseline_rule": b.rule, "message": g.message, "flags": list(b.flags),
            })
    tables = {
        "out_arc3__replay_checks": checks,
        "out_arc3__run_scores": conform("out_arc3__run_scores", pl.concat(runs) if runs else [])
        .sort("policy_id", "game_id", "run_index"),
        "out_arc3__level_scores": conform("out_arc3__level_scores", pl.concat(levels) if levels else [])
        .sort("policy_id", "play_id", "level_index"),
        "out_arc3__game_scores": conform("out_arc3__game_scores", games).sort("policy_id", "game_id"),
        "out_arc3__policy_sensitivity": sensitivity(card_id, by_policy),
    }
    return tables


def sensitivity(card_id: str, by_policy: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """out_arc3__policy_sensitivity: every pair of scored policies, earlier release first."""
    frames = []
    ordered = sorted(by_policy, key=lambda p: POLICY_ORDER.get(p, len(POLICY_ORDER)))
    for a, b in itertools.combinations(ordered, 2):
        pair = by_policy[a].rename({"score": "from_score"}).join(
            by_policy[b].select("play_id", pl.col("score").alias("to_score")), on="play_id", how="inner")
        frames.append(pair.with_columns(card_id=pl.lit(card_id), from_policy_id=pl.lit(a), to_policy_id=pl.lit(b),
                                        score_delta=pl.col("to_score") - pl.col("from_score")))
    df = conform("out_arc3__policy_sensitivity", pl.concat(frames) if frames else [])
    return df.sort("from_policy_id", "to_policy_id", "game_id", "play_id")
