"""In the sandbox: replays run piece by piece (`arcstudy export-transitions`, and a playback script's recording).

`pipeline.datasets.transitions` exports a file in chunks of at most `ExportJob.batch_rows` steps: each call
(`replay_chunk`) feeds the next steps to a replay kept alive in the sandbox's child between calls (a session,
keyed by a token) and returns what the responses to them hold: the answers' fields, every frame's bytes as one
contiguous buffer (a uint8 array; row-major, 4096 bytes a frame) and the frame counts per response (int32).
No frame travels as a Python object, and no chunk holds more than about `max_frame_bytes` of frames, so a long
recording never sits whole in either process. The frames' sha256 digests are not made here: the caller hashes
the bytes it received (`pipeline.datasets.transitions._digests`), so a game's code, which runs in this process,
cannot make a frame's published hash differ from the frame. The game's class is loaded once per child while its file is unchanged (`_game_class`).

A playback script replayed into its toolkit recording (`score`, `view`, `replay`:
`pipeline.recordings.playback.iter_replay_lines`) runs the same way (`script_lines_chunk`): each call answers at
most a few thousand lines, so a script of a million actions is never one answer (in one call, 500,000 actions'
lines took 1.2 GB; 20,000 actions' lines with frames, 1.3 GB).

This module imports only numpy and the engine (through `replaying`): the child stays cheap to start.
"""

from __future__ import annotations

import os
from collections import OrderedDict, deque
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from engine.base_game import FRAMES_ALL, FRAMES_NONE
from engine.enums import ActionInput, GameAction
from engine.env import GameEnv
from engine.loader import load_game_class
from engine.recording import response_to_record
from engine.replay import Divergence

from .replaying import ReplayResult, ReplayStep, iter_replay_classified

__all__ = ["CHUNK_SHAPE", "Feed", "are_chunks", "is_chunk", "replay_chunk", "replay_chunks", "script_lines_chunk"]

MAX_SESSIONS = 16  # sessions a child keeps (a process exports one file at a time per game; threads: a few)
_SESSIONS: OrderedDict[str, _Session] = OrderedDict()
_CLASSES: dict[tuple, type] = {}  # the game classes loaded in this child, by game and the state of its file
MAX_CLASSES = 64


def _game_class(info: Any) -> type:
    """`engine.loader.load_game_class(info)`, once per game file while the file is unchanged (its path, size,
    modification time and inode): the loader's own check reads and hashes the file and resolves its paths on
    every call, which cost more than constructing the game for a file of 50 steps."""
    if info.source is None:
        return load_game_class(info)  # raises, saying why
    st = os.stat(info.source)
    key = (info.game_id, str(info.directory), str(info.source), info.class_name, info.also_declared_in,
           st.st_size, st.st_mtime_ns, st.st_ino)
    cls = _CLASSES.get(key)
    if cls is None:
        cls = load_game_class(info)
        if len(_CLASSES) >= MAX_CLASSES:
            _CLASSES.clear()
        _CLASSES[key] = cls
    return cls


class Feed:
    """Values handed to a running generator one at a time, only when it asks for the next (the steps of a
    running replay here; the records of `counting.iter_step_effects` in the export)."""

    def __init__(self) -> None:
        self.queue: deque = deque()

    def __iter__(self) -> Feed:
        return self

    def __next__(self) -> Any:
        if self.queue:
            return self.queue.popleft()
        raise StopIteration


class _Chunk:
    """The responses of one call, packed as they come: frames appended to one buffer."""

    def __init__(self) -> None:
        self.answers: list[tuple] = []
        self.counts: list[int] = []
        self.frames = bytearray()

    @property
    def frame_bytes(self) -> int:
        return len(self.frames)

    def add(self, response: Any, keep_frames: bool, answer: bool) -> None:
        n = 0
        if keep_frames:
            frames = self.frames
            for grid in response.frame or ():
                if type(grid) is not np.ndarray:
                    grid = np.asarray(grid)
                frames += grid.tobytes() if grid.dtype.itemsize == 1 else grid.astype(np.uint8).tobytes()
                n += 1
        self.counts.append(n)
        if answer:
            state = response.state
            self.answers.append((getattr(state, "name", None) or (None if state is None else str(state)),
                                 int(response.levels_completed), int(response.win_levels), bool(response.full_reset),
                                 tuple(map(int, response.available_actions))))

    def packed(self) -> dict[str, Any]:
        """The chunk; its frames as a uint8 array over the buffer (so that the sandbox sends them out of band,
        through memory shared with the parent, not in the pickle: `sandbox_child._pickle_result`)."""
        return {"answers": self.answers, "counts": np.asarray(self.counts, dtype=np.int32).tobytes(),
                "frames": np.frombuffer(self.frames, dtype=np.uint8)}


class _Session:
    def __init__(self, kind: str, env: GameEnv, needs_opening: bool, check_full_reset: bool,
                 frames: str = FRAMES_ALL, all_frames: bool = True) -> None:
        self.kind = kind
        self.frames = frames  # scripts: which frames the engine renders (none when only the counts are needed)
        self.error: Exception | None = None  # scripts: what the game raised, when it stopped the replay
        self.feed = Feed()
        self.needs: deque = deque()
        self.fed = 0
        self.done = 0
        self.stopped: str | None = None
        self.result = ReplayResult()
        self.ended = False
        self.frame_only_sent = 0  # frame-only divergences already reported
        if kind == "script":
            self.responses: Iterator[tuple[int, Any]] = self._script(env)
        else:
            self.responses = iter_replay_classified(env, self.feed, self.result, needs_opening=needs_opening,
                                                    check_full_reset=check_full_reset, all_frames=all_frames)

    def next_response(self, final: bool) -> tuple[int, Any] | None:
        """The replay's next (index, response), the step counted as answered; None when every step fed is
        answered and more may come (not ``final``), or when the replay is over (``ended`` then says so)."""
        if self.ended or (self.done >= self.fed and not final):
            return None
        try:
            index, response = next(self.responses)
        except StopIteration:
            self.ended = True
            return None
        if index >= 0:
            self.done += 1
        return index, response

    def _script(self, env: GameEnv) -> Iterator[tuple[int, Any]]:
        """make() (the opening RESET), then every action, like the playback agent; a game that raises ends
        the replay (`stopped` says where)."""
        yield -1, env.reset(frames=self.frames)
        for index, (action_id, data, reasoning, line, name) in enumerate(self.feed):
            try:
                response = env.step(ActionInput(id=GameAction.from_id(action_id), data=data, reasoning=reasoning),
                                    frames=self.frames)
            except MemoryError:  # the sandbox's memory limit: the game's failure, reported as such by the sandbox
                raise
            except Exception as err:  # the game's code raised: the play is exported up to here
                self.stopped = f"line {line} ({name}): the game raised {type(err).__name__}: {err}"
                self.error = err
                return
            yield index, response


def _open(token: str, session: _Session) -> None:
    while len(_SESSIONS) >= MAX_SESSIONS:
        _SESSIONS.popitem(last=False)
    _SESSIONS[token] = session


def replay_chunk(arg: tuple) -> dict[str, Any]:
    """In the sandbox. ``arg``: (token, start, items, final, max_frame_bytes).

    ``start`` (first call only): ("script", info, guid) or ("recording", info, only_reset_levels,
    needs_opening[, all_frames, check_full_reset]): ``all_frames`` renders every step's frames, not only those
    of the steps that recorded some (default true); ``check_full_reset`` compares the full_reset field (default:
    unless only_reset_levels). ``items``: the next steps, as (action_id, data, reasoning, line, name) for a
    script, or (ReplayStep, keep_frames) for a recording; ``final``: no more steps will come.

    Returns {"status": "load_failed", "reason"} when the game does not load, else the chunk (`_Chunk.packed`:
    one answer per response for scripts and for the opening RESET, the kept frames) with ``first`` (the index of
    its first response, -1 for the opening), ``n`` (responses), ``ended`` (the replay is over: every step was
    answered and ``final``, or it stopped), ``stopped`` (scripts: why the game stopped), and for recordings
    ``replayed``, ``frame_only`` (the reconverged frame divergences not reported before) with ``reconverged``
    (the step each of them reconverged at), ``pending`` (those not
    reconverged yet), ``outcome`` (the outcome divergence, once one happened) and, once ended, ``divergence``."""
    token, start, items, final, max_frame_bytes = arg
    if start is not None:
        kind, info = start[0], start[1]
        try:
            if kind == "script":
                env = GameEnv(info, guid=start[2], game_class=_game_class(info))
            else:
                env = GameEnv(info, only_reset_levels=start[2], game_class=_game_class(info))
        except Exception as err:
            if kind == "script":
                raise
            return {"status": "load_failed", "reason": f"{type(err).__name__}: {err}"}
        if kind == "script":
            _open(token, _Session(kind, env, False, True))
        else:
            all_frames = start[4] if len(start) > 4 else True
            check_full_reset = start[5] if len(start) > 5 else not start[2]
            _open(token, _Session(kind, env, start[3], check_full_reset, all_frames=all_frames))
    session = _SESSIONS[token]
    for item in items:
        if session.kind == "script":
            session.feed.queue.append(item)
        else:
            step, keep = item
            session.feed.queue.append(step)
            session.needs.append(keep)
    session.fed += len(items)
    chunk = _Chunk()
    first: int | None = None
    while chunk.frame_bytes < max_frame_bytes and (answered := session.next_response(final)) is not None:
        index, response = answered
        if first is None:
            first = index
        if index < 0:
            chunk.add(response, True, True)
        else:
            keep = True if session.kind == "script" else session.needs.popleft()
            chunk.add(response, keep, session.kind == "script")
    out = chunk.packed()
    result = session.result
    out.update(status="ok", first=first, n=len(chunk.counts), ended=session.ended, stopped=session.stopped,
               replayed=result.replayed, frame_only=result.frame_only[session.frame_only_sent:],
               reconverged=result.reconverged[session.frame_only_sent:],
               pending=list(result.pending), outcome=result.outcome)
    session.frame_only_sent = len(result.frame_only)
    if session.ended:
        out.update(divergence=result.divergence)
        _SESSIONS.pop(token, None)
    return out


def script_lines_chunk(arg: tuple) -> dict[str, Any]:
    """In the sandbox: the next lines of a playback script's toolkit recording (make()'s opening RESET, then one
    line per action, as the playback agent's recorder writes them: action ids as names, the line's timestamp
    ``epoch`` plus its index in milliseconds), the replay kept alive between calls as `replay_chunk`'s is.

    ``arg``: (token, start, items, final, max_lines, max_frames, frames, epoch); ``start`` (first call only):
    (game info, guid); ``items``: the next actions, as (action_id, data, reasoning, line, name); ``final``: no
    more will come. Returns {"lines", "done" (actions answered so far), "ended"}: at most ``max_lines`` lines, or
    fewer once their frames reach ``max_frames`` (``frames``: the lines carry every frame). A game that raises
    (loading, constructing or on an action) raises here, as the whole script's failure."""
    token, start, items, final, max_lines, max_frames, frames, epoch = arg
    if not isinstance(epoch, datetime):
        raise TypeError("epoch must be a datetime")
    try:
        if start is not None:
            info, guid = start
            env = GameEnv(info, guid=guid, game_class=_game_class(info))
            _open(token, _Session("script", env, False, True, frames=FRAMES_ALL if frames else FRAMES_NONE))
        session = _SESSIONS.get(token)
        if session is None:  # this child is not the one that started the replay (it was restarted)
            raise RuntimeError("the script's replay is no longer open in the sandbox (its child was restarted)")
        session.feed.queue.extend(items)
        session.fed += len(items)
        lines: list[dict[str, Any]] = []
        n_frames = 0
        while len(lines) < max_lines and n_frames < max_frames and (answered := session.next_response(final)):
            index, response = answered
            n_frames += len(response.frame or ()) if frames else 0
            lines.append({"timestamp": (epoch + timedelta(milliseconds=index + 1)).isoformat(timespec="microseconds"),
                          "data": response_to_record(response, include_frames=frames)})
        if session.error is not None:
            raise session.error
    except BaseException:
        _SESSIONS.pop(token, None)
        raise
    if session.ended:
        _SESSIONS.pop(token, None)
    return {"lines": lines, "done": session.done, "ended": session.ended}


def replay_chunks(arg: tuple) -> list[dict[str, Any] | None]:
    """In the sandbox: several files' whole replays (`replay_chunk` calls with every step, ``final``) in one
    call: short files, one round trip for many. ``arg``: (requests, max_total_frame_bytes). The answers, in
    order; once the frames answered reach ``max_total_frame_bytes`` the requests left are not run, and a replay
    that did not end in its one chunk (more frames than a chunk holds) is dropped: None for those (the caller
    sends them on their own). So no replay stays open in this process after the call (a file's replay never
    depends on another file's call), and the reply holds at most about the budget plus one chunk's frames."""
    requests, budget = arg
    answers: list[dict[str, Any] | None] = []
    total = 0
    for request in requests:
        if total >= budget:
            answers.append(None)
            continue
        answer = replay_chunk(request)
        total += len(answer.get("frames", b""))
        if answer.get("status") == "ok" and not answer["ended"]:
            _SESSIONS.pop(request[0], None)
            answer = None
        answers.append(answer)
    return answers


CHUNK_SHAPE = "a replay chunk (replay_chunk's dict)"
_CHUNK_FIELDS = {"answers": list, "counts": bytes, "first": (int, type(None)), "n": int, "ended": bool,
                 "replayed": int, "frame_only": list, "pending": list}


def is_chunk(out: Any, frame_bytes: int | None = None) -> bool:
    """Whether a sandbox's answer has the shape `replay_chunk` gives (checked in arcstudy's process, before its
    fields are used: the game's code runs in the child that answers, pipeline.core.result_shape); with
    `frame_bytes` (the bytes of one frame), also that its frames are as many as its counts say."""
    if not isinstance(out, dict):
        return False
    if out.get("status") == "load_failed":
        return isinstance(out.get("reason"), str)
    if out.get("status") != "ok" or not all(isinstance(out.get(k), t) for k, t in _CHUNK_FIELDS.items()):
        return False
    frames = out.get("frames")
    if not isinstance(frames, (bytes, bytearray, np.ndarray)) or (isinstance(frames, np.ndarray)
                                                                   and frames.dtype != np.uint8):
        return False
    if len(out["counts"]) != 4 * out["n"] or not all(isinstance(a, tuple) for a in out["answers"]):
        return False
    counts = np.frombuffer(out["counts"], dtype=np.int32)
    if (counts < 0).any() or (frame_bytes is not None and int(counts.sum()) * frame_bytes != len(frames)):
        return False
    divergences = [*out["frame_only"], *out["pending"], out.get("outcome"), out.get("divergence")]
    return all(d is None or isinstance(d, Divergence) for d in divergences)


def are_chunks(answers: Any, n: int, frame_bytes: int | None = None) -> bool:
    """`replay_chunks`' answer to `n` requests: a list of n chunks (`is_chunk`) or None."""
    return isinstance(answers, list) and len(answers) == n and all(a is None or is_chunk(a, frame_bytes)
                                                                    for a in answers)


_ = ReplayStep  # the items' type (recordings)
