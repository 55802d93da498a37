"""Replaying a recording's steps on the engine and comparing each answer: the part of replay verification
(pipeline.scoring.verify) that runs the game, so that it runs in the sandbox.

The game's code runs only in a sandbox (pipeline.core.game_code); the sandbox's child imports this module alone
(numpy, the engine and frame hashing: no polars, no database), so a fresh child is cheap. `pipeline.scoring.verify`
prepares the steps (`ReplayStep`, from a recording file or database rows), calls `load_and_run` in the sandbox and
turns the `ReplayResult` into per-play checks; `pipeline.recordings.playback` replays action scripts through
`transition_replay.script_lines_chunk`. The comparison rules are documented in pipeline/scoring/verify.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from engine.base_game import FRAMES_ALL, FRAMES_LAST, FRAMES_NONE
from engine.enums import ActionInput, GameAction
from engine.env import GameEnv
from engine.replay import Divergence, compare_frames

from .frames import frame_hashes

__all__ = ["FIELDS", "ReplayResult", "ReplayStep", "iter_replay_classified", "load_and_run", "recorded_outcome",
           "render_steps", "replay_classified", "replay_steps"]

FIELDS = ("state", "levels_completed", "win_levels", "full_reset", "available_actions")


def recorded_outcome(data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a line's `data` a replay compares (FIELDS), as recorded. A field written as null is not
    recorded, as one left out is (and as a stored step's null column is): `"win_levels": null` compared with
    the engine's 7 made a whole play divergent."""
    return {k: v for k in FIELDS if (v := data.get(k)) is not None}


class ReplayStep(NamedTuple):
    """One step to replay: the action sent and what the recording says the engine answered. A named tuple (not a
    dataclass): steps travel to the sandbox by the thousand, and a tuple is pickled and rebuilt at a fraction of
    a dataclass's cost."""

    line: int
    action_id: int
    action_data: dict[str, Any]
    reasoning: Any
    expected: dict[str, Any]  # the fields of FIELDS the recording holds (an absent one is not compared)
    n_frames: int | None  # None: the step recorded no frames (they are not compared)
    frame_hashes: list[str] | None = None  # database steps: sha256 per frame
    pixels: np.ndarray | None = None  # recording files: the frames, (n, 64, 64)


def _observed(response: Any) -> dict[str, Any]:
    state = response.state
    return {"state": getattr(state, "value", state), "levels_completed": int(response.levels_completed),
            "win_levels": int(response.win_levels), "full_reset": bool(response.full_reset),
            "available_actions": [int(a) for a in response.available_actions]}


def _outcome_divergence(step: ReplayStep, index: int, response: Any, check_full_reset: bool) -> Divergence | None:
    expected = step.expected
    got = _observed(response)
    for name in FIELDS:
        if name in expected and (check_full_reset or name != "full_reset") and expected[name] != got[name]:
            action = GameAction.from_id(step.action_id).name  # named only for a divergence: this runs every step
            return Divergence(step.line, index, action, name, expected[name], got[name])
    return None


def _same_pixels(want: np.ndarray, have: Any) -> bool:
    """True only if the two frames hold the same values (False: let ``compare_frames`` count): for one-byte
    integer frames (the reader's uint8, the engine's int8) equal bytes are equal values, unless a byte has its
    high bit set, which uint8 and int8 read differently."""
    if not (isinstance(have, np.ndarray) and want.shape == have.shape and want.dtype.itemsize == 1
            and have.dtype.itemsize == 1 and want.dtype.kind in "iu" and have.dtype.kind in "iu"):
        return False
    if want.tobytes() != have.tobytes():
        return False
    return want.dtype == have.dtype or int(want.view(np.uint8).max(initial=0)) < 128


def _frame_divergence(step: ReplayStep, index: int, response: Any) -> Divergence | None:
    """The step's first differing frame (or frame count), ``cells_differing`` summed over all its frames when
    pixels are compared (the first frame's box); None when the frames match or were not recorded."""
    if step.n_frames is None:
        return None
    action = GameAction.from_id(step.action_id).name
    frames = list(response.frame or [])
    if step.n_frames != len(frames):
        return Divergence(step.line, index, action, "frame_count", step.n_frames, len(frames))
    if step.pixels is not None:
        first: Divergence | None = None
        for j, (want, have) in enumerate(zip(step.pixels, frames, strict=True)):
            if _same_pixels(want, have):  # the common case, without counting cells
                continue
            cells, box = compare_frames(want, have)
            if cells and first is None:
                first = Divergence(step.line, index, action, "frame", None, None, frame_index=j,
                                   cells_differing=cells, bbox=box)
            elif cells:
                first.cells_differing = (first.cells_differing or 0) + cells
        return first
    got_hashes = frame_hashes(np.stack([np.asarray(f, dtype=np.uint8) for f in frames])) if frames else []
    for j, (want, have) in enumerate(zip(step.frame_hashes or [], got_hashes, strict=True)):
        if want != have:
            return Divergence(step.line, index, action, "frame", want, have, frame_index=j)
    return None


@dataclass
class ReplayResult:
    """A classified replay (see the module docstring).

    ``divergence``: what makes the recording divergent from its step on (None: verified); ``outcome``: the
    outcome divergence that stopped the replay, if any (it is ``divergence`` unless frames already differed
    without reconverging before it); ``frame_only``: the frame divergences that reconverged, one per step;
    ``reconverged``: for each of them, the step whose frames matched again."""

    divergence: Divergence | None = None
    outcome: Divergence | None = None
    replayed: int = 0
    frame_only: list[Divergence] = field(default_factory=list)
    reconverged: list[int] = field(default_factory=list)
    pending: list[Divergence] = field(default_factory=list)


def replay_classified(env: GameEnv, steps: Sequence[ReplayStep], *, check_full_reset: bool = True,
                      on_response: Callable[[int, Any], None] | None = None, all_frames: bool = False
                      ) -> ReplayResult:
    """Send every step's action to a fresh ``env`` and compare its answer; go on after frame-only divergences.
    Frames are rendered only for the steps that recorded some (every step with ``all_frames``).

    ``on_response(index, response)`` sees every engine response once it is compared (index -1: the opening
    RESET sent for a recording that lacks it), e.g. to keep the frames (`pipeline.datasets.transitions`)."""
    result = ReplayResult()
    needs_opening = bool(steps) and steps[0].action_id != GameAction.RESET.value
    for index, response in iter_replay_classified(env, steps, result, needs_opening=needs_opening,
                                                  check_full_reset=check_full_reset, all_frames=all_frames):
        if on_response is not None:
            on_response(index, response)
    return result


def iter_replay_classified(env: GameEnv, steps: Iterable[ReplayStep], result: ReplayResult, *,
                           needs_opening: bool, check_full_reset: bool = True, all_frames: bool = False
                           ) -> Iterator[tuple[int, Any]]:
    """`replay_classified` one response at a time: yields (index, response) once the step is compared (index
    -1 first: the opening RESET, when ``needs_opening``), filling ``result`` as it goes (``result.pending``:
    the frame-only divergences not reconverged yet). A step is taken from ``steps`` only when the next
    response is asked for, so ``steps`` may be fed piece by piece (`pipeline.recordings.transition_replay`)."""
    if needs_opening:  # the toolkit's opening RESET, absent from older files
        yield -1, env.reset(frames=FRAMES_ALL if all_frames else FRAMES_NONE)
    pending = result.pending  # frame-only divergences since frames last matched
    for index, step in enumerate(steps):
        action = ActionInput(id=step.action_id, data=dict(step.action_data), reasoning=step.reasoning)
        try:
            response = env.step(action, frames=FRAMES_ALL if all_frames or step.n_frames is not None
                                else FRAMES_NONE)
        except MemoryError:  # the sandbox's memory limit: the game's failure, reported as such by the sandbox
            raise
        except Exception as err:  # the game or engine failed: that is a divergence too
            name = GameAction.from_id(step.action_id).name
            result.outcome = Divergence(step.line, index, name, "exception", None, f"{type(err).__name__}: {err}")
            break
        result.replayed += 1
        result.outcome = _outcome_divergence(step, index, response, check_full_reset)
        if result.outcome is not None:
            yield index, response
            break
        frame = _frame_divergence(step, index, response)
        if frame is not None:
            pending.append(frame)
        elif step.n_frames and pending:  # frames match again (an empty echo frame proves nothing): reconverged
            result.frame_only += pending
            result.reconverged += [index] * len(pending)
            pending.clear()
        yield index, response
    result.divergence = pending[0] if pending else result.outcome


def replay_steps(env: GameEnv, steps: Sequence[ReplayStep], *, check_full_reset: bool = True
                 ) -> tuple[Divergence | None, int]:
    """``replay_classified`` as (the divergence that makes the recording divergent, steps replayed up to it)."""
    result = replay_classified(env, steps, check_full_reset=check_full_reset)
    d = result.divergence
    return d, result.replayed if d is None else d.step + 1


def render_steps(env: GameEnv, steps: Sequence[ReplayStep], *,
                 on_step: Callable[[], None] | None = None) -> list[np.ndarray | None]:
    """The settled (last) frame of every step, sending the steps' actions to a fresh ``env`` as
    ``replay_classified`` does, for display: nothing is compared, so the replay goes on after a divergence (the
    frames are then the engine's, not necessarily the recorded ones); an exception stops it (later steps get no
    frame). A step answered with no frame (a post-terminal echo) gets None."""
    if steps and steps[0].action_id != GameAction.RESET.value:
        env.reset(frames=FRAMES_NONE)  # the toolkit's opening RESET, absent from older files
    out: list[np.ndarray | None] = []
    for step in steps:
        action = ActionInput(id=step.action_id, data=dict(step.action_data), reasoning=step.reasoning)
        try:
            response = env.step(action, frames=FRAMES_LAST)
        except MemoryError:  # the sandbox's memory limit (see iter_replay_classified)
            raise
        except Exception:  # the game failed here: replay_classified reports it as a divergence
            break
        grids = response.frame
        out.append(np.asarray(grids[-1], dtype=np.uint8) if grids is not None and len(grids) else None)
        if on_step is not None:
            on_step()
    return out


def load_and_run(arg: tuple) -> tuple[str, Any]:
    """In the sandbox: load the game, then replay (or render) the steps on a fresh instance."""
    info, only_reset_levels, steps, check_full_reset, render = arg
    try:
        env = GameEnv(info, only_reset_levels=only_reset_levels)
    except Exception as err:  # noqa: BLE001 - the game does not load: said by the caller
        return "load_failed", f"{type(err).__name__}: {err}"
    if render:
        return "rendered", render_steps(env, steps)
    return "replayed", replay_classified(env, steps, check_full_reset=check_full_reset)
