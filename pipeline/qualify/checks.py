"""Qualification checks of a game (study-protocol.md §2, the paper's automated validation).

Regimes size every check; ``standard`` mirrors the paper's first regime (50,000 random steps),
``full`` its second and third (1,000,000 steps), ``quick`` is for the test suite.

Checks (each returns a :class:`CheckResult` with ``pass`` / ``fail`` / ``skip`` and its evidence):

``random_play``
    Uniform random play on every non-tutorial level, separately: start the level, choose each
    action uniformly from the available actions (clicks: uniform over the 64x64 display), RESET
    after GAME_OVER; a win is an accident and fails the check. Level 1 is the tutorial and is
    played too, but its wins are only reported (random agents may win a tutorial by design).
``random_win_threshold``
    The paper's acceptance threshold: for every non-tutorial level, the probability that the
    uniform random policy ever wins must be at most 1/10,000, computed by the explorer (absorbing
    Markov chain). Exact when the level's graph is fully explored; otherwise the explorer gives a
    lower and an upper bound: the level passes if the upper bound is below the threshold, fails if
    the lower bound is above it, and is *inconclusive* (reported, not failed) in between.
``winnable``
    Every level has a winning path from its start (a win found by BFS), and the explored optimum
    is reported. A complete graph without a win fails; an incomplete one without a win is
    inconclusive.
``fuzz``
    A sweep across all levels: random actions, level jumps with ``set_level``, RESETs (level and
    full), actions outside ``available_actions``, clicks in the letterbox and at the edges.
    Fails on any exception, on malformed frames (not 64x64, not an integer dtype, values outside
    0-15, no frame for an accepted action), on inconsistent counters (``levels_completed`` outside
    ``0..win_levels``, ``win_levels`` not the number of levels, a state name outside the enum),
    on non-determinism (a second instance fed the same actions must return the same frames) and
    on snapshot inconsistency (restoring a snapshot and repeating actions must reproduce them).
``playback``
    Re-executes the game's shipped recordings (``solutions/*.jsonl``, toolkit format) on a fresh
    instance and compares every response; ``win.jsonl`` must end in WIN and ``lose.jsonl`` in
    GAME_OVER. Skipped (not failed) for games that ship none.
``hash_seeds`` (the ``hash-seeds`` regime, only this check)
    Replays the shipped recordings and a seeded random walk in child interpreters under two or more
    ``PYTHONHASHSEED`` values and compares every step (``pipeline.qualify.hash_seeds``). Fails when frames
    depend on the seed (e.g. an animation drawn in the iteration order of a set of strings: a recording made
    in another process then shows other frames, and replay verification can only accept it as a frame-only
    divergence) or, worse, when states or level counts do. The evidence lists the scripts and steps.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine import GameEnv, GameState
from engine.loader import describe_game_error
from pipeline.explore import GameInfo, Session
from pipeline.explore.analysis import analyse
from pipeline.explore.graph import explore_level
from pipeline.recordings.solution_files import solution_problem
from pipeline.recordings.toolkit_writer import ReplayMismatch, read_recording, replay_recording, steps_of

from .hash_seeds import compare, observe_under_seeds

__all__ = ["REGIMES", "Regime", "CheckResult", "THRESHOLD", "check_hash_seeds", "run_checks"]

THRESHOLD = 1e-4  # the paper's acceptance threshold: at most 1 random win in 10,000


@dataclass(frozen=True)
class Regime:
    name: str
    random_steps: int  # per game, split evenly across levels
    fuzz_steps: int
    determinism_steps: int
    explore_nodes: int  # per level
    explore_seconds: float  # per level
    hash_seeds: tuple[int, ...] = ()  # when given, only the hash_seeds check runs (random_steps: its walk)


REGIMES = {
    "quick": Regime("quick", random_steps=3_000, fuzz_steps=1_500, determinism_steps=200, explore_nodes=3_000,
                    explore_seconds=8.0),
    "standard": Regime("standard", random_steps=50_000, fuzz_steps=50_000, determinism_steps=2_000,
                       explore_nodes=300_000, explore_seconds=300.0),
    "full": Regime("full", random_steps=1_000_000, fuzz_steps=1_000_000, determinism_steps=20_000,
                   explore_nodes=3_000_000, explore_seconds=3_600.0),
    "hash-seeds": Regime("hash-seeds", random_steps=2_000, fuzz_steps=0, determinism_steps=0, explore_nodes=0,
                         explore_seconds=0.0, hash_seeds=(1, 2, 3)),
}


@dataclass
class CheckResult:
    name: str
    status: str  # pass | fail | skip
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "summary": self.summary, "evidence": self.evidence,
                "elapsed_s": round(self.elapsed_s, 3)}


Progress = Callable[[str], None]


def _random_action(rng: random.Random, actions: list[int]) -> tuple[int, dict[str, int] | None]:
    a = rng.choice(actions)
    if a == 6:
        return 6, {"x": rng.randrange(64), "y": rng.randrange(64)}
    return a, None


# ---------------------------------------------------------------------- random play
def check_random_play(info: GameInfo, regime: Regime, *, seed: int = 0, tutorial_levels: int = 1,
                      progress: Progress | None = None) -> CheckResult:
    t0 = time.perf_counter()
    session = Session(info)
    session.start(0)
    n_levels = session.n_levels
    per_level = max(1, regime.random_steps // n_levels)
    rng = random.Random(seed)
    rows, accidents = [], []
    for level in range(n_levels):
        session.start(level)
        wins = losses = steps = resets = 0
        while steps < per_level:
            if session.won() or session.lost():
                if session.won():
                    wins += 1
                    if level >= tutorial_levels:
                        accidents.append({"level": level + 1, "step": steps})
                    session.start(level)
                else:
                    losses += 1
                    session.step(0)  # RESET after GAME_OVER: a level reset
                    if session.game._current_level_index != level:
                        session.start(level)
                resets += 1
                continue
            actions = [a for a in session.available_actions if a != 0] or [1]
            a, data = _random_action(rng, actions)
            session.step(a, data)
            steps += 1
        rows.append({"level": level + 1, "steps": steps, "wins": wins, "game_overs": losses,
                     "tutorial": level < tutorial_levels})
        if progress:
            progress(f"random play level {level + 1}: {steps:,} steps, {wins} wins")
    status = "fail" if accidents else "pass"
    summary = (f"{len(accidents)} accidental wins on non-tutorial levels" if accidents else
               f"no non-tutorial level won in {sum(r['steps'] for r in rows):,} random steps")
    return CheckResult("random_play", status, summary,
                       {"seed": seed, "steps_per_level": per_level, "levels": rows, "accidents": accidents[:20]},
                       time.perf_counter() - t0)


# ---------------------------------------------------------------------- explorer checks
def explore_levels(info: GameInfo, regime: Regime, progress: Progress | None = None) -> list[dict[str, Any]]:
    session = Session(info)
    session.start(0)
    out = []
    for level in range(session.n_levels):
        graph = explore_level(session, level, max_nodes=regime.explore_nodes, max_seconds=regime.explore_seconds)
        m = analyse(graph)
        out.append({"level": level + 1, "nodes": m.nodes, "edges": m.edges, "complete": m.complete,
                    "stop_reason": m.stop_reason, "optimal_actions": m.optimal_actions,
                    "random_win_lower": m.random_win_lower, "random_win_upper": m.random_win_upper,
                    "lose_nodes": m.lose_nodes, "win_nodes": m.win_nodes, "max_depth": m.max_depth,
                    "errors": [e["error"] for e in m.errors][:5], "elapsed_s": round(m.elapsed_s, 2)})
        if progress:
            progress(f"explored level {level + 1}: {m.nodes:,} states, complete={m.complete}")
    return out


def check_threshold(levels: list[dict[str, Any]], tutorial_levels: int = 1) -> CheckResult:
    failing, inconclusive = [], []
    for row in levels:
        if row["level"] <= tutorial_levels:
            continue
        if row["random_win_lower"] > THRESHOLD:
            failing.append(row["level"])
        elif row["random_win_upper"] > THRESHOLD:
            inconclusive.append(row["level"])
    evidence = {"threshold": THRESHOLD, "tutorial_levels": tutorial_levels, "inconclusive_levels": inconclusive,
                "levels": [{k: row[k] for k in ("level", "nodes", "complete", "random_win_lower", "random_win_upper")}
                           for row in levels]}
    if failing:
        return CheckResult("random_win_threshold", "fail",
                           f"levels {failing} are won by a random policy more often than 1 in 10,000", evidence)
    if inconclusive and len(inconclusive) == len([r for r in levels if r["level"] > tutorial_levels]):
        return CheckResult("random_win_threshold", "skip",
                           f"not tractable within the budget: levels {inconclusive} only have bounds", evidence)
    extra = f" (levels {inconclusive} inconclusive within the budget)" if inconclusive else ""
    return CheckResult("random_win_threshold", "pass",
                       f"every checked non-tutorial level is won by a random policy at most 1 in 10,000{extra}",
                       evidence)


def check_winnable(levels: list[dict[str, Any]]) -> CheckResult:
    unwinnable = [r["level"] for r in levels if r["optimal_actions"] is None and r["complete"]]
    unknown = [r["level"] for r in levels if r["optimal_actions"] is None and not r["complete"]]
    errors = {r["level"]: r["errors"] for r in levels if r["errors"]}
    evidence = {"optimal_actions": {r["level"]: r["optimal_actions"] for r in levels}, "unknown": unknown,
                "errors": errors}
    if unwinnable or errors:
        what = f"levels {unwinnable} cannot be won" if unwinnable else f"exceptions while exploring levels {sorted(errors)}"
        return CheckResult("winnable", "fail", what, evidence)
    if unknown:
        return CheckResult("winnable", "skip", f"no win found within the budget on levels {unknown}", evidence)
    return CheckResult("winnable", "pass", "every level has a winning path from its start", evidence)


# ---------------------------------------------------------------------- fuzz
def _frame_problems(result: Any) -> list[str]:
    problems = []
    for k, frame in enumerate(result.frames):
        arr = np.asarray(frame)
        if arr.shape != (64, 64):
            problems.append(f"frame {k} has shape {arr.shape}")
            continue
        if not np.issubdtype(arr.dtype, np.integer):
            problems.append(f"frame {k} has dtype {arr.dtype}")
            continue
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi > 15:
            problems.append(f"frame {k} has colours {lo}..{hi} (allowed 0..15)")
    return problems


def _digest(result: Any) -> str:
    h = hashlib.sha256()
    for frame in result.frames:
        h.update(np.ascontiguousarray(frame, dtype=np.int8).tobytes())
    h.update(f"{result.state.value}|{result.levels_completed}|{result.level_index}|{result.available_actions}".encode())
    return h.hexdigest()


def _fuzz_actions(rng: random.Random, steps: int, n_levels: int) -> list[tuple[str, Any]]:
    """A reproducible script of fuzz events: ("act", (id, data) or None), ("jump", (level, live)), ("reset", None).

    A jump either starts the level afresh (a new game, level RESET) or, ``live``, calls ``set_level`` on the
    running game mid-play, the way the conformance protocol and some harnesses jump.
    """
    script: list[tuple[str, Any]] = []
    for _ in range(steps):
        u = rng.random()
        if u < 0.01:
            script.append(("jump", (rng.randrange(n_levels), rng.random() < 0.5)))
        elif u < 0.03:
            script.append(("reset", None))
        elif u < 0.05:
            a = rng.choice([1, 2, 3, 4, 5, 6, 7])  # possibly outside available_actions (engines accept it)
            data = {"x": rng.choice([0, 63, rng.randrange(64)]), "y": rng.choice([0, 63, rng.randrange(64)])}
            script.append(("act", (a, data if a == 6 else None)))
        else:
            script.append(("act", None))  # a random available action, drawn at run time
    return script


def _run_fuzz(info: GameInfo, script: list[tuple[str, Any]], seed: int, record: bool,
              problems: list[dict[str, Any]] | None = None) -> list[str]:
    session = Session(info)
    session.start(0)
    rng = random.Random(seed + 1)
    digests: list[str] = []
    for step, (kind, arg) in enumerate(script):
        where = {"step": step, "event": kind, "arg": arg, "level": session.game._current_level_index + 1}
        try:
            if kind == "jump":
                level, live = arg
                if live:
                    session.game.set_level(level)
                    continue
                session.start(level)
                result = session.last
            elif kind == "reset":
                result = session.step(0)
            else:
                if arg is None:
                    actions = [a for a in session.available_actions if a != 0] or [1]
                    a, data = _random_action(rng, actions)
                else:
                    a, data = arg
                where["action"] = [a, data]
                result = session.step(a, data)
        except Exception as err:  # noqa: BLE001 - a crash is the finding
            if problems is not None:
                problems.append({**where, "problem": f"exception {type(err).__name__}: {err}"})
            break
        if problems is not None:
            terminal_echo = not result.frames and kind == "act"
            issues = [] if terminal_echo else _frame_problems(result)
            if not result.frames and not terminal_echo:
                issues.append("no frame for an accepted action")
            if terminal_echo and session.last.state not in (GameState.WIN, GameState.GAME_OVER):
                issues.append("empty response outside WIN/GAME_OVER")
            if result.frames:
                wl = session.game._win_score
                if wl < 1:
                    issues.append(f"win_levels {wl} is not positive")
                if not 0 <= result.levels_completed <= wl:
                    issues.append(f"levels_completed {result.levels_completed} outside 0..{wl}")
                if not result.available_actions or any(a not in range(1, 8) for a in result.available_actions):
                    issues.append(f"available_actions {result.available_actions} not a non-empty subset of 1..7")
            for issue in issues:
                problems.append({**where, "problem": issue})
            if len(problems) > 50:
                break
        if record:
            digests.append(_digest(result) if result.frames else f"echo|{result.state.value}")
        if session.won() and session.last.state == GameState.WIN:
            session.step(0)  # after WIN a RESET is a full reset
        elif session.lost():
            session.step(0)
    return digests


def _snapshot_problems(info: GameInfo, rng: random.Random, rounds: int) -> list[dict[str, Any]]:
    """Snapshot, act, restore, repeat the same actions: the responses must be identical."""
    problems: list[dict[str, Any]] = []
    session = Session(info)
    session.start(0)
    for r in range(rounds):
        level = rng.randrange(session.n_levels)
        session.start(level)
        for _ in range(rng.randrange(0, 20)):
            if session.won() or session.lost():
                break
            session.step(*_random_action(rng, [a for a in session.available_actions if a != 0] or [1]))
        if session.won() or session.lost():
            continue
        snap = session.snapshot()
        acts = []
        for _ in range(5):
            acts.append(_random_action(rng, [a for a in session.available_actions if a != 0] or [1]))
        first = [_digest(session.step(a, d)) for a, d in acts]
        session.restore(snap)
        again = [_digest(session.step(a, d)) for a, d in acts]
        if first != again:
            problems.append({"round": r, "level": level + 1, "problem": "restored snapshot diverged",
                             "actions": [[a, d] for a, d in acts]})
    return problems


def check_fuzz(info: GameInfo, regime: Regime, *, seed: int = 0, progress: Progress | None = None) -> CheckResult:
    t0 = time.perf_counter()
    session = Session(info)
    session.start(0)
    n_levels = session.n_levels
    rng = random.Random(seed)
    script = _fuzz_actions(rng, regime.fuzz_steps, n_levels)
    problems: list[dict[str, Any]] = []
    _run_fuzz(info, script, seed, record=False, problems=problems)
    if progress:
        progress(f"fuzz: {len(script):,} events, {len(problems)} problems")
    det_script = script[: regime.determinism_steps]
    first = _run_fuzz(info, det_script, seed, record=True)
    second = _run_fuzz(info, det_script, seed, record=True)
    divergence = next((i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b), None)
    if divergence is None and len(first) != len(second):
        divergence = min(len(first), len(second))
    if divergence is not None:
        problems.append({"step": divergence, "problem": "two instances fed the same actions diverged"})
    problems += _snapshot_problems(info, random.Random(seed + 7), rounds=max(5, regime.determinism_steps // 40))
    if progress:
        progress(f"fuzz: determinism over {len(det_script):,} events and snapshot rounds checked")
    evidence = {"seed": seed, "events": len(script), "determinism_events": len(det_script),
                "problems": problems[:50], "n_problems": len(problems)}
    status = "fail" if problems else "pass"
    summary = (f"{len(problems)} problems, first: {problems[0]['problem']}" if problems else
               f"{len(script):,} fuzz events across {n_levels} levels: no exception, malformed frame or "
               f"inconsistent state; deterministic and snapshot-consistent")
    return CheckResult("fuzz", status, summary, evidence, time.perf_counter() - t0)


# ---------------------------------------------------------------------- loads
def check_loads(info: GameInfo) -> CheckResult:
    """The game's code loads, constructs and answers the opening RESET; every other check needs that."""
    t0 = time.perf_counter()
    try:
        GameEnv(info).reset()
    except Exception as err:  # noqa: BLE001 - the game's own code failed: that is the finding
        return CheckResult("loads", "fail", f"the game cannot be loaded and started: {describe_game_error(err, info)}",
                           {"error": describe_game_error(err, info)}, time.perf_counter() - t0)
    return CheckResult("loads", "pass", "the game loads and answers the opening RESET", {}, time.perf_counter() - t0)


# ---------------------------------------------------------------------- playback
def recording_game(path: Path) -> str:
    """The game an extra recording (--recording) is of, from its first line; ValueError saying why it is not a
    toolkit recording to replay."""
    why = solution_problem(path)
    if why is not None:
        raise ValueError(why)
    first = read_recording(path)[0]
    game_id = first.get("data", {}).get("game_id") if isinstance(first, dict) and isinstance(first.get("data"), dict) \
        else None
    if not isinstance(game_id, str) or not game_id:
        raise ValueError("its first line names no game_id: not a toolkit recording")
    return game_id


def is_recording_of(game_id: str, info: GameInfo) -> bool:
    """Whether a recording naming `game_id` is of the game `info` (its full id, or its code alone)."""
    return game_id in (info.game_id, info.short_id)


def recordings_of(info: GameInfo, extra: list[Path] | None) -> list[Path]:
    """The extra recordings that are of this game (the command checked that each is of one of its games: a
    recording of another game failed this one's playback, "win_levels expected 6, got 7")."""
    out = []
    for path in extra or []:
        try:
            if is_recording_of(recording_game(path), info):
                out.append(path)
        except (OSError, ValueError):
            out.append(path)  # said by the playback check, as it says a shipped recording's problem
    return out


def check_playback(info: GameInfo, extra: list[Path] | None = None) -> CheckResult:
    t0 = time.perf_counter()
    player = GameEnv(info, only_reset_levels=False)  # recordings are made with full resets (toolkit default)
    paths = sorted((info.directory / "solutions").glob("*.jsonl")) + recordings_of(info, extra)
    if not paths:
        return CheckResult("playback", "skip", "the game ships no recordings", {}, time.perf_counter() - t0)
    rows, failures = [], []
    for path in paths:
        why = solution_problem(path)  # a FIFO would block the read for good, a sparse file fill the memory
        if why is not None:
            failures.append({"recording": path.name, "problem": f"{path} {why}"})
            continue
        try:
            lines = read_recording(path)
            replay_recording(player.new_game(), lines)
            final = lines[-1]["data"]["state"]
            want = "WIN" if path.stem.startswith("win") else "GAME_OVER" if path.stem.startswith("lose") else None
            if want is not None and final != want:
                raise ReplayMismatch(f"ends in {final}, expected {want}")
            rows.append({"recording": path.name, "lines": len(lines), "final_state": final,
                         "levels_completed": lines[-1]["data"]["levels_completed"]})
        except (ReplayMismatch, ValueError, KeyError) as err:
            failures.append({"recording": path.name, "problem": str(err)})
        except Exception as err:  # noqa: BLE001 - the game's code raised during playback
            failures.append({"recording": path.name, "problem": describe_game_error(err, info)})
    names = {p.stem for p in paths}
    missing = [n for n in ("win", "lose") if n not in names]
    evidence = {"recordings": rows, "failures": failures, "missing": missing}
    if failures:
        first = failures[0]
        return CheckResult("playback", "fail", f"{len(failures)} recordings did not re-execute faithfully (first: "
                           f"{first['recording']}: {first['problem'][:300]})", evidence, time.perf_counter() - t0)
    summary = f"{len(rows)} recordings re-executed identically" + (f" (no {', '.join(missing)} recording)" if missing
                                                                   else " (a win and a loss)")
    return CheckResult("playback", "pass", summary, evidence, time.perf_counter() - t0)


# ---------------------------------------------------------------------- hash seeds
def check_hash_seeds(info: GameInfo, regime: Regime, *, seed: int = 0, extra: list[Path] | None = None,
                     progress: Progress | None = None) -> CheckResult:
    t0 = time.perf_counter()
    scripts = {}
    for path in sorted((info.directory / "solutions").glob("*.jsonl")) + recordings_of(info, extra):
        why = solution_problem(path)
        if why is not None:
            return CheckResult("hash_seeds", "fail", f"{path.name} cannot be read as a toolkit recording: {path} {why}",
                               {"recording": str(path)}, time.perf_counter() - t0)
        try:
            scripts[path.name] = [[s.action, s.data or None] for s in steps_of(read_recording(path))]
        except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError) as err:  # the file's
            return CheckResult("hash_seeds", "fail", f"{path.name} cannot be read as a toolkit recording: "
                               f"{type(err).__name__}: {err}", {"recording": str(path)}, time.perf_counter() - t0)
    try:
        runs = observe_under_seeds(info.directory.parent.parent, info.game_id, scripts, regime.random_steps, seed,
                                   regime.hash_seeds)
    except RuntimeError as err:  # a child interpreter failed (the game raised there): a finding, not a crash
        return CheckResult("hash_seeds", "fail", str(err), {"hash_seeds": list(regime.hash_seeds), "seed": seed},
                           time.perf_counter() - t0)
    rows = compare(runs)
    if progress:
        progress(f"hash seeds: {sum(r['steps'] for r in rows):,} steps under PYTHONHASHSEED "
                 f"{', '.join(map(str, regime.hash_seeds))}")
    evidence = {"hash_seeds": list(regime.hash_seeds), "seed": seed,
                "scripts": [{**r, "n_frame_steps": len(r["frame_steps"]), "frame_steps": r["frame_steps"][:50]}
                            for r in rows]}
    outcome = [r for r in rows if r["outcome_step"] is not None]
    frames = [r for r in rows if r["frame_steps"]]
    n_steps = sum(r["steps"] for r in rows)
    seeds = ", ".join(map(str, regime.hash_seeds))
    if outcome:
        where = "; ".join(f"{r['script']} step {r['outcome_step']}" for r in outcome)
        return CheckResult("hash_seeds", "fail", f"the outcome (state, levels, actions) depends on PYTHONHASHSEED: "
                           f"first at {where}", evidence, time.perf_counter() - t0)
    if frames:
        where = "; ".join(f"{r['script']}: {len(r['frame_steps'])} steps, first step {r['frame_steps'][0]}"
                          for r in frames)
        return CheckResult("hash_seeds", "fail", f"frames depend on PYTHONHASHSEED (outcomes agree) at "
                           f"{sum(len(r['frame_steps']) for r in frames)} of {n_steps:,} steps ({where})", evidence,
                           time.perf_counter() - t0)
    return CheckResult("hash_seeds", "pass", f"{n_steps:,} steps ({len(rows)} scripts) give the same frames and "
                       f"outcomes under PYTHONHASHSEED {seeds}", evidence, time.perf_counter() - t0)


# ---------------------------------------------------------------------- all
def run_checks(info: GameInfo, regime: Regime, *, seed: int = 0, tutorial_levels: int = 1,
               recordings: list[Path] | None = None, progress: Progress | None = None) -> list[CheckResult]:
    loads = check_loads(info)
    if loads.status == "fail":  # reported only when it fails: every other check would fail on the same error
        return [loads]
    if regime.hash_seeds:
        return [check_hash_seeds(info, regime, seed=seed, extra=recordings, progress=progress)]
    results = [check_playback(info, recordings)]
    t0 = time.perf_counter()
    levels = explore_levels(info, regime, progress)
    elapsed = time.perf_counter() - t0
    winnable = check_winnable(levels)
    winnable.elapsed_s = elapsed
    threshold = check_threshold(levels, tutorial_levels)
    results += [winnable, threshold]
    results.append(check_random_play(info, regime, seed=seed, tutorial_levels=tutorial_levels, progress=progress))
    results.append(check_fuzz(info, regime, seed=seed, progress=progress))
    return results
