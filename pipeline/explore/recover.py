"""Recovering the actions of a recording whose action ids were lost, from its frames.

The agents repository's recorder writes the default ``ActionInput`` (RESET, id 0, no data) on every frame line
(ARC-AGI-3-Agents #91, ``action_ids_lost`` in spec/formats.md A.2) and never writes the RESET that ``make()``
sends (#92). The frames are all there, and the engine is deterministic: the actions can be searched for.

    from pipeline.explore.recover import RecoverJob, recover_file
    found = recover_file(RecoverJob(path="x.recording.jsonl", game_dirs=("games",)))
    found.ok, found.actions_json()     # what `--recovered-actions` reads, or found.error

The search (`recover_steps`):

- It starts from ``make()`` (a fresh game and its opening RESET), so the missing frame 0 is the engine's.
- At each step it tries the candidate actions: the game's ``available_actions`` at that point (those of the
  previous frame, once the path so far matches), RESET, and for ACTION6 one click per click region of the
  explorer's ``objects`` partition (`pipeline.explore.graph`); when no candidate fits, the ``cells`` partition
  (one click per grid cell), then every display pixel, are tried before giving up on the step. A candidate
  *fits* when the engine's answer reproduces the recorded line: the cheap fields first (state,
  levels_completed, win_levels, full_reset, available_actions, number of frames), then the frames byte for
  byte (or by sha256 when only hashes are known), last frame first.
- Candidates that fit but leave different hidden states are branches. The search goes on depth first along
  the first fit and keeps the others; when no candidate fits a step, it backtracks to the most recent branch
  left. Only then are state keys computed (``GameEnv.state_hash``: the cheap comparisons above decide every
  step of a search that never backtracks): the branch that failed is marked dead at its step, and a waiting
  fit that leaves the same state as a dead one is skipped, so one state is never searched twice from a step.
- It is bounded: at most ``max_branches`` fits kept per step, for the last ``window`` steps only, and
  ``max_pending`` held overall; beyond the first visit of every step (one try per candidate: the work any
  recovery needs) at most ``max_backtrack_tries`` candidates tried again while backtracking; ``max_seconds``.
  A recording
  that cannot be recovered ends with "not recoverable at step N (line L): why" -- the deepest step reached
  -- in bounded time, whatever it holds (thousands of identical frames, a frame no action can produce).

Each step records the action taken on the path found, how many candidates fit (``n_fit``), the other fitting
actions (``alternatives``, the first few) and ``ambiguous`` when actions of different kinds fit (ACTION1 and
ACTION3, say; two clicks in different regions are one kind). The action count is the same whichever fits.

`recover_file` is a module-level function of one picklable argument, so it runs on the one executor
(`pipeline.core.executor`) across files. The recording is read here; the game's code (loading, stepping) runs in
the game's sandbox (`pipeline.core.game_code.run_game_code`), like every replay. It never raises for a bad
recording: the result says why (``error``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.base_game import FRAMES_ALL
from engine.enums import ActionInput, GameAction
from engine.env import GameEnv
from engine.loader import GameNotFoundError, resolve_game
from pipeline.core.manifest import LISTED_ON_SCREEN
from pipeline.core.spool import Spool
from pipeline.recordings.counting import ACTION_NAMES
from pipeline.recordings.frames import frame_hashes
from pipeline.recordings.reader import ParsedRecording, RecordingRejected, read_recording_file
from pipeline.recordings.replaying import recorded_outcome
from pipeline.scoring.plays import RecoveredSteps

from .graph import _partition

__all__ = ["RECOVERY_TOOL", "NotRecoverable", "RecoverJob", "RecoverLimits", "Recovery", "StepFound", "Target",
           "StepsJob", "recover_file", "recover_files", "recover_lost_actions", "recover_lost_stored_actions",
           "recover_parsed", "recover_stored", "stored_jobs", "recover_steps", "recovered_mapping",
           "recovery_document", "recovery_keys", "targets_of"]

RECOVERY_TOOL = "arcstudy recover-actions"
MAX_ALTERNATIVES_LISTED = 8


@dataclass(frozen=True)
class RecoverLimits:
    """Bounds of the search (see the module docstring). The first visit of every step is the work any recovery
    needs (one try per candidate); ``max_backtrack_tries`` bounds what backtracking adds on top."""

    max_branches: int = 8  # fitting candidates kept per step (the first followed, the others for backtracking)
    max_pending: int = 2_000  # fits held for backtracking, in all (snapshots: memory)
    window: int = 128  # how many steps back a backtrack may go (older fits are let go: a hidden state shows soon)
    max_backtrack_tries: int = 20_000  # candidate actions tried again on steps already visited, in all
    max_seconds: float = 600.0


@dataclass(frozen=True)
class RecoverJob:
    """One file to recover: picklable, for the executor."""

    path: str
    game_dirs: tuple[str, ...] = ()
    limits: RecoverLimits = RecoverLimits()


@dataclass(frozen=True)
class StepsJob:
    """One recording of the database to recover from its stored steps (frame sha256s): picklable."""

    file_id: str
    file_name: str | None
    game_id: str
    guid: str | None
    only_reset_levels: bool
    targets: tuple  # Target per step to recover; empty when the steps carry no frame hashes
    game_dirs: tuple[str, ...] = ()
    limits: RecoverLimits = RecoverLimits()


@dataclass(frozen=True)
class Target:
    """What one recorded step says the engine answered (the fields it holds; frames as pixels or hashes)."""

    step_index: int  # the file's step index (core_arc3__steps.step_index)
    line: int
    expected: dict[str, Any]
    n_frames: int | None  # None: this line recorded no frames (only its fields are compared)
    # sha256 per frame (pipeline.recordings.frames.frame_hashes), the frames' only trace: their pixels, held a
    # step, took a recovery of 20,000 steps past 1 GB, in this process and in the sandbox's
    hashes: tuple[str, ...] | None


@dataclass(frozen=True)
class StepFound:
    """The action found for one step."""

    step_index: int
    line: int
    action_id: int
    x: int | None = None
    y: int | None = None
    n_fit: int = 1
    ambiguous: bool = False
    alternatives: tuple[str, ...] = ()
    full_reset: bool | None = None  # a RESET: whether the engine made it a full reset (REST lines always say no)

    @property
    def label(self) -> str:
        return _label(self.action_id, self.x, self.y)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": ACTION_NAMES[self.action_id]}
        if self.x is not None:
            out["x"], out["y"] = self.x, self.y
        if self.full_reset is not None:
            out["full_reset"] = self.full_reset
        out["n_fit"] = self.n_fit
        if self.ambiguous:
            out["ambiguous"] = True
        if self.alternatives:
            out["alternatives"] = list(self.alternatives)
        return out


@dataclass
class Recovery:
    """The outcome for one recording: the actions found (``ok``), or why not (``error``, one line)."""

    path: str
    file_name: str
    file_id: str | None = None
    guid: str | None = None
    game_id: str | None = None
    ok: bool = False
    needed: bool = True  # False: the file's action ids are not lost (nothing to recover)
    steps: list[StepFound] = field(default_factory=list)
    error: str | None = None
    failed_step: int | None = None
    n_steps: int = 0
    n_nodes: int = 0  # steps expanded by the search
    n_backtracks: int = 0
    game_source_sha256: str | None = None
    seconds: float = 0.0
    lines_left_out: list[str] = field(default_factory=list)  # "line N: check: reason" of the lines not read

    @property
    def n_ambiguous(self) -> int:
        return sum(s.ambiguous for s in self.steps)

    @property
    def n_with_alternatives(self) -> int:
        return sum(s.n_fit > 1 for s in self.steps)

    def actions_json(self) -> list[dict[str, Any]]:
        return [s.to_json() for s in self.steps]

    def provenance(self) -> str:
        """One line naming how the actions were found (replay_checks, scorecard, viewer)."""
        return (f"recovered from frames by {RECOVERY_TOOL} on {self.game_id}"
                + (f" (game source sha256 {self.game_source_sha256[:12]})" if self.game_source_sha256 else "")
                + f": {self.n_steps} steps, {self.n_with_alternatives} with alternatives, "
                  f"{self.n_ambiguous} ambiguous")

    def summary(self) -> str:
        left_out = "".join(f"\n  left out, {why}" for why in self.lines_left_out[:LISTED_ON_SCREEN])  # the reader's
        if len(self.lines_left_out) > LISTED_ON_SCREEN:
            left_out += f"\n  ... and {len(self.lines_left_out) - LISTED_ON_SCREEN:,} more lines left out (see the manifest)"
        if not self.needed:
            return f"{self.file_name}: nothing to recover (its action ids are not lost){left_out}"
        if not self.ok:
            return f"{self.file_name}: {self.error}{left_out}"
        def n(count: int, what: str) -> str:
            return f"{count} {what}{'' if count == 1 else 's'}"

        return (f"{self.file_name}: recovered {n(self.n_steps, 'action')} ({n(self.n_with_alternatives, 'step')} "
                f"with alternatives, {self.n_ambiguous} ambiguous; {n(self.n_nodes, 'step')} searched, "
                f"{n(self.n_backtracks, 'backtrack')}, {self.seconds:.1f} s){left_out}")


def _label(action_id: int, x: int | None, y: int | None) -> str:
    name = ACTION_NAMES[action_id]
    return f"{name}@({x},{y})" if x is not None else name


def _is_echo(ln: Any) -> bool:
    """A post-terminal echo (no frames answered): the same rule as ``recover_action_ids``."""
    return ln.n_frames == 0 or (ln.n_frames is None and ln.win_levels == 0)


def targets_of(parsed: ParsedRecording) -> list[Target]:
    """The steps to recover (every frame line but post-terminal echoes), with what each recorded. Lines made
    through the REST API always say ``full_reset: false`` (the server does not pass it on, formats.md A.3): the
    field is compared only in files where some line says ``true`` (and never for the human dataset)."""
    out = []
    full_resets_written = any(ln.full_reset for ln in parsed.steps)
    for index, ln in enumerate(parsed.steps):
        if _is_echo(ln):
            continue
        expected = recorded_outcome(ln.data)
        if "levels_completed" not in expected and ln.levels_completed is not None:
            expected["levels_completed"] = ln.levels_completed
        if parsed.is_only_reset_levels or not full_resets_written:
            expected.pop("full_reset", None)
        out.append(Target(index, ln.number, expected, ln.n_frames,
                          tuple(ln.hashes) if ln.hashes is not None else None))
    return out


# ------------------------------------------------------------------------------------------ matching
def _observed(response: Any, name: str) -> Any:
    if name == "state":
        return getattr(response.state, "value", response.state)
    if name == "available_actions":
        return [int(a) for a in response.available_actions]
    if name == "full_reset":
        return bool(response.full_reset)
    return int(getattr(response, name))


def _mismatch(response: Any, target: Target) -> str | None:
    """None when the answer reproduces the recorded step; else what differs first (cheapest checks first)."""
    for name, want in target.expected.items():
        if _observed(response, name) != want:
            return name
    if target.n_frames is None:
        return None
    frames = response.frame or []
    if len(frames) != target.n_frames:
        return "frame_count"
    if not frames:
        return None
    if target.hashes is not None:
        got = frame_hashes(np.stack([np.asarray(f, dtype=np.uint8) for f in frames]))
        return None if list(target.hashes) == got else "frame"
    return None


# ------------------------------------------------------------------------------------------ candidates
def _candidates(env: GameEnv, rule: str) -> list[tuple[int, int | None, int | None]]:
    """(action id, x, y) to try from the current state: RESET, the simple available actions, then one click per
    region of the ``rule`` partition when ACTION6 is available. RESET first: it is what the file says (the
    recorder writes RESET for every action), so where it fits it is the action followed, and another action
    that fits too (a no-op at a level's start, where RESET is a free full reset) is an alternative, marked
    ambiguous, not the choice that charges the play an action."""
    available = [int(a) for a in env.available_actions]
    if rule != "objects":
        out: list[tuple[int, int | None, int | None]] = []
    else:
        out = [(0, None, None)] + [(a, None, None) for a in dict.fromkeys(available) if a not in (0, 6)]
    if 6 in available:
        xs, ys, _ = _partition(env.game, rule).reps
        out += [(6, int(x), int(y)) for x, y in zip(xs, ys, strict=True)]
    return out


@dataclass
class _Branch:
    found: StepFound
    snapshot: Any  # an engine snapshot of the state the branch leaves (restorable any number of times)
    key: str | None  # its state key, once a backtrack needed it


class _Tally:
    def __init__(self) -> None:
        self.tried = 0
        self.why: dict[str, int] = {}

    def add(self, why: str) -> None:
        self.why[why] = self.why.get(why, 0) + 1

    def describe(self) -> str:
        parts = ", ".join(f"{n} differ{'s' if n == 1 else ''} in {w}" for w, n in
                          sorted(self.why.items(), key=lambda item: -item[1]))
        return f"no candidate action reproduces it ({self.tried} tried: {parts or 'none fitted'})"


def _expand(env: GameEnv, target: Target, limits: RecoverLimits, tally: _Tally, room: int) -> list[_Branch]:
    """The candidates from the current state that reproduce ``target``, each with a snapshot of the state it
    leaves (at most ``room`` + 1 snapshots: the first fit and the alternatives the search can still hold; the
    others are counted, not kept). Leaves the environment in an unspecified state: the caller restores the
    branch it follows. State keys are not computed here: only a backtrack needs them (``_key``)."""
    base = env.snapshot()
    clicks = 6 in env.available_actions
    fits: list[tuple[tuple[int, int | None, int | None], Any, bool | None]] = []
    keep = max(1, min(limits.max_branches, room + 1))
    for rule in ("objects", "cells", "pixels"):
        if rule != "objects":
            if fits or not clicks:
                break
            env.restore(base, reuse_render_caches=True)
        cands = _candidates(env, rule)
        for i, (aid, x, y) in enumerate(cands):
            if i:
                env.restore(base, reuse_render_caches=True)
            tally.tried += 1
            action = ActionInput(id=GameAction.from_id(aid), data={} if x is None else {"x": x, "y": y})
            try:
                response = env.step(action, frames=FRAMES_ALL)
            except MemoryError:  # the sandbox's memory limit: the game's failure, not a misfit of this candidate
                raise
            except Exception:  # noqa: BLE001 - the game failed on this candidate: it does not fit
                tally.add("exception")
                continue
            why = _mismatch(response, target)
            if why is not None:
                tally.add(why)
                continue
            # kept with the global RNGs, which some games draw from; fits past `keep` are only counted
            fits.append(((aid, x, y), env.snapshot() if len(fits) < keep else None,
                         bool(response.full_reset) if aid == 0 else None))
    kinds = {aid for (aid, _, _), _, _ in fits}
    labels = [_label(*cand) for cand, _, _ in fits]
    return [_Branch(StepFound(target.step_index, target.line, aid, x, y, n_fit=len(fits), ambiguous=len(kinds) > 1,
                              alternatives=tuple(lab for k, lab in enumerate(labels)
                                                 if k != j)[:MAX_ALTERNATIVES_LISTED], full_reset=full), snap, None)
            for j, ((aid, x, y), snap, full) in enumerate(fits) if snap is not None]


def _key(env: GameEnv, branch: _Branch) -> str:
    """The state key of the state ``branch`` leaves (computed once; leaves the environment there)."""
    env.restore(branch.snapshot)
    if branch.key is None:
        branch.key = env.state_hash()
    return branch.key


# ------------------------------------------------------------------------------------------ search
class NotRecoverable(Exception):
    def __init__(self, step: int, line: int, why: str):
        super().__init__(f"not recoverable at step {step} (line {line}): {why}")
        self.step, self.line, self.why = step, line, why


@dataclass
class _Search:
    steps: list[StepFound]
    n_nodes: int
    n_backtracks: int


def recover_steps(env: GameEnv, targets: list[Target], limits: RecoverLimits = RecoverLimits()) -> _Search:
    """The actions that reproduce ``targets`` from the environment's current state (after ``make()``'s RESET);
    raises `NotRecoverable` naming the deepest step reached and why.

    Depth first: the first fitting candidate is followed, the others wait. State keys are computed only on a
    backtrack: the branch that failed is marked dead at its depth, and a waiting branch that leaves the same
    state as a dead one is skipped (it would fail the same way), so equivalent fits are never searched twice."""
    n = len(targets)
    deadline = time.monotonic() + limits.max_seconds
    path: list[_Branch] = []
    pending: list[list[_Branch]] = []
    dead: set[tuple[int, str]] = set()
    held = 0
    nodes = backtracks = again = 0  # again: candidates tried on steps visited before (backtracking's cost)
    reached = -1  # the deepest step expanded so far
    deepest, deepest_why = 0, ""
    while len(path) < n:
        depth = len(path)
        if again >= limits.max_backtrack_tries or time.monotonic() > deadline:
            what = (f"{again:,} candidate actions tried again while backtracking"
                    if again >= limits.max_backtrack_tries else f"{limits.max_seconds:g} s")
            raise NotRecoverable(targets[deepest].step_index, targets[deepest].line,
                                 f"search budget exhausted ({what}, {backtracks} backtracks; the deepest step "
                                 f"reached was {targets[deepest].step_index}"
                                 + (f": {deepest_why}" if deepest_why else "") + ")")
        nodes += 1
        tally = _Tally()
        branches = _expand(env, targets[depth], limits, tally, limits.max_pending - held)
        if depth <= reached:
            again += tally.tried
        reached = max(reached, depth)
        if branches:
            first, rest = branches[0], branches[1:]
            held += len(rest)
            env.restore(first.snapshot)
            path.append(first)
            pending.append(rest)
            old = depth - limits.window
            if old >= 0:  # out of the window: let its fits go (memory, and a bounded search)
                held -= len(pending[old])
                pending[old] = []
                # and the state it leaves: no backtrack restores it any more (a snapshot a step, about 40 KB
                # here, took a 20,000-step recovery's sandbox past 1 GB)
                path[old].snapshot = None
            continue
        if depth >= deepest:
            deepest, deepest_why = depth, tally.describe()
        resumed = False
        while not resumed:  # backtrack to the most recent branch left that is not known dead
            if not path:
                raise NotRecoverable(targets[deepest].step_index, targets[deepest].line, deepest_why
                                     + (f" (after {backtracks} backtracks)" if backtracks else ""))
            d = len(path) - 1
            if pending[d]:
                dead.add((d, _key(env, path[d])))
                again += 1  # a state key costs about what a try does: counted alike
            while pending[d]:
                nxt = pending[d].pop(0)
                held -= 1
                again += 1
                if (d, _key(env, nxt)) in dead:
                    continue
                backtracks += 1
                path[d] = nxt  # the environment is at its state (_key restored it)
                resumed = True
                break
            if not resumed:
                path.pop()
                pending.pop()
    return _Search([b.found for b in path], nodes, backtracks)


def _search_in_game(arg: tuple) -> tuple:
    """In the game's sandbox (`pipeline.core.game_code`): load the game, send make()'s RESET, search."""
    info, only_reset_levels, targets, limits = arg
    try:
        env = GameEnv(info, only_reset_levels=only_reset_levels, frames=FRAMES_ALL)
        env.reset()  # make(): the opening RESET, which the agents recorder never writes (#92)
    except Exception as err:  # noqa: BLE001 - a game that does not load recovers nothing: said by the caller
        return ("load_failed", f"{type(err).__name__}: {err}")
    try:
        found = recover_steps(env, targets, limits)
    except NotRecoverable as err:
        return ("not_recoverable", err.step, str(err))
    return ("ok", found)


def recover_parsed(parsed: ParsedRecording, game_dirs: list[Path], limits: RecoverLimits = RecoverLimits(),
                   *, path: str | None = None) -> Recovery:
    """`recover_file` for a recording already read (with pixels, or at least frame hashes). The game's code runs
    in the sandbox, as for every replay (`pipeline.core.game_code.run_game_code`)."""
    out = Recovery(path=str(path or parsed.path), file_name=Path(path or parsed.path).name,
                   file_id=parsed.file_sha256, guid=parsed.guid, game_id=parsed.game_id)
    if not parsed.is_action_ids_lost:
        out.needed = False
        return out
    if not parsed.has_frames:
        out.error = NO_FRAMES
        return out
    return _search(out, targets_of(parsed), game_dirs, parsed.is_only_reset_levels, limits)


NO_FRAMES = ("cannot recover: the recording has no frames (recorded without them), so there is nothing to match "
             "candidate actions against")


def _search(out: Recovery, targets: list[Target], game_dirs: list[Path], only_reset_levels: bool,
            limits: RecoverLimits) -> Recovery:
    from pipeline.core.game_code import (
        SandboxFailure,
        describe_failure,
        game_key,
        portable_info,
        run_game_code,
    )
    from pipeline.core.result_shape import expect, tuple_of

    def _search_answer(value: Any) -> bool:
        return (tuple_of(str, str)(value) and value[0] == "load_failed"
                or tuple_of(str, int, str)(value) and value[0] == "not_recoverable"
                or tuple_of(str, object)(value) and value[0] == "ok" and isinstance(value[1].steps, list))

    started = time.monotonic()
    out.n_steps = len(targets)
    try:
        info = resolve_game(out.game_id, game_dirs)
        out.game_source_sha256 = info.source_sha256()
    except (GameNotFoundError, OSError) as err:
        out.error = f"cannot recover: game not loadable: {err}"
        return out
    label = f"game {info.game_id}" + (f" ({info.source})" if info.source else "")
    try:
        result = expect(run_game_code(_search_in_game, (portable_info(info), only_reset_levels, targets, limits),
                                      key=game_key(info), source=info.source), _search_answer,
                        '("ok", found), ("not_recoverable", step, why) or ("load_failed", why)')
    except SandboxFailure as err:
        out.error = f"cannot recover: {describe_failure(err, label)}"
        return out
    except Exception as err:  # noqa: BLE001 - the game's code raised outside a step (GameCodeError): said
        out.error = f"cannot recover: {label} failed: {type(err).__name__}: {err}"
        return out
    out.seconds = time.monotonic() - started
    if result[0] == "load_failed":
        out.error = f"cannot recover: {label} failed to load: {result[1]}"
    elif result[0] == "not_recoverable":
        out.failed_step, out.error = result[1], result[2]
    else:
        found = result[1]
        out.ok, out.steps, out.n_nodes, out.n_backtracks = True, found.steps, found.n_nodes, found.n_backtracks
    return out


def recover_stored(job: StepsJob) -> Recovery:
    """`recover_file` for a recording of the database, from its stored steps (frames compared by sha256)."""
    out = Recovery(path=job.file_name or job.file_id, file_name=job.file_name or job.file_id, file_id=job.file_id,
                   guid=job.guid, game_id=job.game_id)
    if not job.targets:
        out.error = NO_FRAMES
        return out
    return _search(out, list(job.targets), [Path(d) for d in job.game_dirs], job.only_reset_levels, job.limits)


def stored_jobs(steps: Any, plays: Any, files: dict, game_dirs: list[Path], limits: RecoverLimits = RecoverLimits()
                ) -> list[StepsJob]:
    """A `StepsJob` per recording of ``plays`` flagged ``is_action_ids_lost`` (core_arc3__steps /
    core_arc3__plays rows; ``files``: file_id -> (file name, path))."""
    import polars as pl

    jobs = []
    lost = plays.filter(pl.col("is_action_ids_lost")).group_by("file_id", maintain_order=True).agg(
        pl.col("game_id").first(), pl.col("guid").first(), pl.col("is_only_reset_levels").first())
    for fid, game_id, guid, only_reset in lost.sort("file_id").iter_rows():
        rows = steps.filter(pl.col("file_id") == fid).sort("line_number")
        compare_full_reset = not only_reset and bool(rows["is_full_reset"].fill_null(False).any())
        targets = []
        for i, r in enumerate(rows.iter_rows(named=True)):
            if r["n_frames"] == 0 or (r["n_frames"] is None and r["win_levels"] == 0):
                continue  # a post-terminal echo
            expected = {"state": r["state"], "levels_completed": r["levels_completed"]}
            for name, column in (("win_levels", "win_levels"), ("full_reset", "is_full_reset"),
                                 ("available_actions", "available_actions")):
                if r[column] is not None and (name != "full_reset" or compare_full_reset):
                    expected[name] = list(r[column]) if name == "available_actions" else r[column]
            hashes = r["frame_sha256s"]
            if hashes is None:
                targets = []
                break
            targets.append(Target(i, r["line_number"], expected, len(hashes), tuple(hashes)))
        name = (files.get(fid) or (None, None))[0]
        jobs.append(StepsJob(fid, name, game_id, guid, bool(only_reset), tuple(targets),
                             tuple(str(d) for d in game_dirs), limits))
    return jobs


def recover_file(job: RecoverJob) -> Recovery:
    """Read ``job.path`` and recover its actions on the games of ``job.game_dirs`` (never raises for a bad
    recording: ``error`` says why)."""
    path = Path(job.path)
    try:
        # its frames' hashes are what is matched: neither their pixels nor its lines' text are kept
        parsed = read_recording_file(path, want_frames=False, keep_raw_json=False)
    except RecordingRejected as err:
        return Recovery(path=str(path), file_name=path.name, error=f"cannot read it: {err.check}: {err.reason}")
    except (OSError, UnicodeDecodeError) as err:
        return Recovery(path=str(path), file_name=path.name, error=f"cannot read it: {err}")
    recovery = recover_parsed(parsed, [Path(d) for d in job.game_dirs], job.limits, path=str(path))
    # lines the reader left out (a truncated last line, a bad frame): the steps are recovered without them, said
    recovery.lines_left_out = Spool(f"{i.location}: {i.check}: {i.reason}" for i in parsed.issues)  # (a flood: on disk)
    return recovery


# ------------------------------------------------------------------------------------------ many files
def recover_files(paths: list[Path], game_dirs: list[Path], limits: RecoverLimits = RecoverLimits(), *,
                  workers: int | None = 1, scheduler: str | None = None, progress: Any = None) -> list[Recovery]:
    """`recover_file` for every path, on the one executor (``workers`` processes, or the cluster at
    ``scheduler``), in the order given. A piece that fails outright (a worker lost) says so in ``error``."""
    jobs = [RecoverJob(str(p), tuple(str(d) for d in game_dirs), limits) for p in paths]
    return _run_jobs(recover_file, jobs, workers=workers, scheduler=scheduler, progress=progress)


def _run_jobs(fn: Any, jobs: list, *, workers: int | None, scheduler: str | None, progress: Any) -> list[Recovery]:
    from pipeline.core.executor import open_executor

    out: list[Recovery | None] = [None] * len(jobs)
    with open_executor(workers, scheduler, n_items=len(jobs)) as ex:
        for key, value, error in ex.map_unordered(fn, enumerate(jobs), progress=progress,
                                                  description="recovering lost actions"):
            if error is None:
                out[key] = value
            else:
                where = getattr(jobs[key], "path", None) or jobs[key].file_name or jobs[key].file_id
                out[key] = Recovery(path=str(where), file_name=Path(str(where)).name,
                                    error=f"recovery failed: {type(error).__name__}: {error}")
    return [r for r in out if r is not None]


def recovery_keys(recoveries: list[Recovery]) -> dict[int, str]:
    """The key each recovered file is given under (``--recovered-actions`` looks up file name, guid or
    file_id): its file name, or its file_id when two files given share a name."""
    names: dict[str, int] = {}
    for r in recoveries:
        names[r.file_name] = names.get(r.file_name, 0) + 1
    return {id(r): (r.file_name if names[r.file_name] == 1 or not r.file_id else r.file_id) for r in recoveries}


def recovery_document(recoveries: list[Recovery], game_dirs: list[Path]) -> dict[str, Any]:
    """The JSON `arcstudy recover-actions --out` writes and ``--recovered-actions`` reads: key -> actions (one
    object per step: ``action``, ``x``/``y`` for clicks, ``n_fit``, ``ambiguous``, ``alternatives``), and the
    ``$recovery`` metadata (the tool, the games folders, per file its provenance and search figures, and the
    files that could not be recovered with the reason)."""
    import pipeline

    keys = recovery_keys(recoveries)
    doc: dict[str, Any] = {"$recovery": {
        "tool": RECOVERY_TOOL, "arcstudy_version": getattr(pipeline, "__version__", None),
        "games": [str(d) for d in game_dirs], "files": {}, "not_recovered": {}}}
    meta = doc["$recovery"]
    for r in recoveries:
        if not r.needed:
            continue
        key = keys[id(r)]
        if not r.ok:
            meta["not_recovered"][key] = {"path": r.path, "reason": r.error, "failed_step": r.failed_step}
            continue
        doc[key] = r.actions_json()
        meta["files"][key] = {"path": r.path, "file_id": r.file_id, "guid": r.guid, "game_id": r.game_id,
                              "game_source_sha256": r.game_source_sha256, "provenance": r.provenance(),
                              "n_steps": r.n_steps, "n_with_alternatives": r.n_with_alternatives,
                              "n_ambiguous": r.n_ambiguous, "n_steps_searched": r.n_nodes,
                              "n_backtracks": r.n_backtracks}
    return doc


def recovered_mapping(recoveries: list[Recovery]) -> dict[str, Any]:
    """What ``recordings_from_tables`` takes (``--recovered-actions`` as loaded), for the files recovered."""
    keys = recovery_keys(recoveries)
    return {keys[id(r)]: RecoveredSteps(r.actions_json(), r.provenance()) for r in recoveries if r.ok}


def recover_lost_actions(paths: list[Path], game_dirs: list[Path], given: dict[str, Any] | None = None, *,
                         limits: RecoverLimits = RecoverLimits(), workers: int | None = None,
                         scheduler: str | None = None, progress: Any = None
                         ) -> tuple[dict[str, Any], list[tuple[Path, str]]]:
    """``score --recover-actions``: ``given`` (``--recovered-actions`` as loaded) plus the actions recovered from
    the frames of the other recordings among ``paths`` whose ids were lost, and (path, reason) for those that
    could not be recovered. Actions given for a file win over a search (it is not run for it)."""
    given = dict(given or {})
    todo = [p for p in paths if Path(p).name not in given]
    results = recover_files(todo, game_dirs, limits, workers=1 if workers is None else workers,
                            scheduler=scheduler, progress=progress)
    failed = [(Path(r.path), f"--recover-actions: {r.error}; its plays stay uncountable")
              for r in results if r.needed and not r.ok]
    return {**recovered_mapping(results), **given}, failed


def recover_lost_stored_actions(steps: Any, plays: Any, files: dict, game_dirs: list[Path],
                                given: dict[str, Any] | None = None, *, limits: RecoverLimits = RecoverLimits(),
                                workers: int | None = None, scheduler: str | None = None, progress: Any = None
                                ) -> tuple[dict[str, Any], list[tuple[Path, str]]]:
    """``score --db --recover-actions``: `recover_lost_actions` for the database's recordings, from their stored
    steps (keyed by file_id; actions given for a file's name, guid or file_id win)."""
    given = dict(given or {})
    jobs = [j for j in stored_jobs(steps, plays, files, game_dirs, limits)
            if not {j.file_name, j.guid, j.file_id} & set(given)]
    results = _run_jobs(recover_stored, jobs, workers=1 if workers is None else workers, scheduler=scheduler,
                        progress=progress)
    failed = [(Path(r.path), f"--recover-actions: {r.error}; its plays stay uncountable")
              for r in results if not r.ok]
    recovered = {r.file_id: RecoveredSteps(r.actions_json(), r.provenance()) for r in results if r.ok}
    return {**recovered, **given}, failed
