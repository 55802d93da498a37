"""Replay verification of plays before they are scored (engine.replay, wrapped).

Every recording is replayed on a fresh engine instance of its game, when the game can be loaded from the
environment folders given (``--games``), and each play gets a status:

- ``verified``: every step replayed and matched (state, levels_completed, win_levels, full_reset,
  available_actions, and the frames: pixel by pixel for a recording file, by sha256 for database steps);
- ``divergent``: the first divergence (line, step, field, expected, got) is reported; plays of the same
  recording after it are divergent too (they continue the diverged session);
- ``unverified``: the game cannot be loaded; the play is scored from the recording alone;
- ``not_replayable``: the actions are unknown (the benchmarking ``action_ids_lost`` defect, not recovered).

Recordings of the official human dataset were made with level-only resets (``ONLY_RESET_LEVELS``) through
the REST server, whose lines always say ``full_reset: false``: they replay with level-only resets and
without the ``full_reset`` comparison.

Recording files use ``engine.replay.replay`` directly. Database steps hold no pixels (unless ingested with
--keep-frames) but frame hashes: they are turned back into an ``engine.recording.Recording`` and replayed by
the same function on an environment wrapper that renders the frames of the steps that have hashes and keeps
their sha256 (``pipeline.recordings.frames.frame_hashes``, the definition ingest used); the hashes are compared
afterwards, up to the engine's own first divergence.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.base_game import FRAMES_ALL
from engine.enums import GameAction
from engine.env import GameEnv
from engine.loader import GameInfo, GameNotFoundError, resolve_game
from engine.recording import Recording, RecordingLine, read_recording
from engine.replay import Divergence, replay
from pipeline.recordings.frames import frame_hashes

from .plays import RecordingInput

__all__ = ["PlayCheck", "STATUSES", "describe", "divergence_columns", "verify_recording"]

STATUSES = ("verified", "divergent", "unverified", "not_replayable")


@dataclass(frozen=True)
class PlayCheck:
    """The verification of one play (a row of out_arc3__replay_checks, without card_id)."""

    play_id: str
    file_id: str
    game_id: str
    guid: str
    status: str
    replay_input: str  # "recording" or "steps"
    is_only_reset_levels: bool
    n_steps_replayed: int = 0
    divergence: Divergence | None = None
    detail: str | None = None
    game_source_sha256: str | None = None

    def divergence_json(self) -> dict[str, Any] | None:
        """The divergence for the scorecard: the same whether the play was replayed from its file or from the
        database (pixel-level frame details, which only a file has, are left out)."""
        d = self.divergence
        if d is None:
            return None
        out: dict[str, Any] = {"step_index": d.step, "line_number": d.line, "action": d.action, "field": d.field}
        if d.field in ("frame", "frame_count"):
            out["frame_index"] = d.frame_index
        else:
            out["expected"] = d.expected
            out["got"] = d.got
        return out


def describe(d: Divergence) -> str:
    """``Divergence.describe``, with frame hashes (database replays) instead of a pixel count."""
    if d.field == "frame" and d.cells_differing is None:
        return (f"line {d.line} (step {d.step}, {d.action}): frame {(d.frame_index or 0) + 1}: sha256 differs "
                f"(recorded {str(d.expected)[:12]}..., replayed {str(d.got)[:12]}...)")
    return d.describe()


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def divergence_columns(d: Divergence | None) -> dict[str, Any]:
    if d is None:
        return {"divergence_step_index": None, "divergence_line_number": None, "divergence_field": None,
                "divergence_expected": None, "divergence_got": None}
    return {"divergence_step_index": d.step, "divergence_line_number": d.line, "divergence_field": d.field,
            "divergence_expected": _json(d.expected), "divergence_got": _json(d.got)}


class _HashingEnv:
    """Duck-typed ``GameEnv`` for ``engine.replay``: renders all frames of the steps that recorded frame hashes
    (whatever frame mode replay asks for, since database lines carry no pixels) and keeps their sha256."""

    def __init__(self, env: GameEnv, wants_frames: Sequence[bool]):
        self.env = env
        self.wants = list(wants_frames)
        self.hashes: list[list[str] | None] = []

    def reset(self, *, frames: str | None = None) -> Any:  # the opening RESET replay sends for older files
        return self.env.reset(frames=frames)

    def step(self, action: Any, data: Any = None, *, reasoning: Any = None, frames: str | None = None) -> Any:
        i = len(self.hashes)
        want = i < len(self.wants) and self.wants[i]
        response = self.env.step(action, data, reasoning=reasoning, frames=FRAMES_ALL if want else frames)
        if want:
            grids = [np.asarray(f, dtype=np.uint8) for f in (response.frame or [])]
            self.hashes.append(frame_hashes(np.stack(grids)) if grids else [])
        else:
            self.hashes.append(None)
        return response


def recording_from_steps(rec: RecordingInput) -> Recording:
    """The database steps of a recording as an ``engine.recording.Recording`` (no pixels)."""
    lines = []
    steps = rec.steps
    cols = {c: steps[c].to_list() for c in ("line_number", "game_id", "guid", "state", "levels_completed",
                                             "win_levels", "is_full_reset", "available_actions", "click_x",
                                             "click_y")}
    for i, record in enumerate(rec.records):  # records carry recovered action ids when there are any
        data: dict[str, Any] = {"game_id": cols["game_id"][i], "state": cols["state"][i],
                                "levels_completed": cols["levels_completed"][i], "guid": cols["guid"][i]}
        for name, column in (("win_levels", "win_levels"), ("full_reset", "is_full_reset"),
                             ("available_actions", "available_actions")):
            if cols[column][i] is not None:
                data[name] = cols[column][i]
        action_data = {}
        if record.action_id == GameAction.ACTION6.value and cols["click_x"][i] is not None:
            action_data = {"x": cols["click_x"][i], "y": cols["click_y"][i]}
        data["action_input"] = {"id": record.action_id, "data": action_data}
        lines.append(RecordingLine(line_no=cols["line_number"][i], timestamp=None, data=data, is_frame=True,
                                   action_id=record.action_id, action_data=action_data))
    return Recording(path=None, lines=lines)


def _recording_with_recovered_ids(path: Path, rec: RecordingInput) -> Recording:
    """The recording file with the recovered action ids put back on its frame lines (by line number)."""
    recording = read_recording(path)
    by_line = {r.line_number: r.action_id for r in rec.records}
    for line in recording.frame_lines:
        if line.line_no in by_line:
            line.action_id = by_line[line.line_no]
    return recording


def _hash_divergence(rec: RecordingInput, hashes: list[list[str] | None], limit: int) -> Divergence | None:
    """The first step before ``limit`` whose rendered frames disagree with the stored hashes."""
    n_frames = rec.steps["n_frames"].to_list()
    stored = rec.steps["frame_sha256s"].to_list()
    lines = rec.steps["line_number"].to_list()
    for i in range(min(limit, len(hashes))):
        got = hashes[i]
        if got is None or stored[i] is None:
            continue
        action = GameAction.from_id(rec.records[i].action_id).name
        expected_n = n_frames[i] if n_frames[i] is not None else len(stored[i])
        if expected_n != len(got):
            return Divergence(lines[i], i, action, "frame_count", expected_n, len(got))
        for j, (want, have) in enumerate(zip(stored[i], got, strict=True)):
            if want != have:
                return Divergence(lines[i], i, action, "frame", want, have, frame_index=j)
    return None


def _resolve(game_id: str, dirs: Sequence[Path]) -> tuple[GameInfo | None, str | None]:
    try:
        return resolve_game(game_id, list(dirs)), None
    except GameNotFoundError as err:
        return None, str(err)


def verify_recording(rec: RecordingInput, game_dirs: Iterable[Path], *, from_file: bool) -> list[PlayCheck]:
    """Replay one recording and return a check per play (see the module docstring).

    ``from_file``: replay the recording file at ``rec.path`` (pixels compared); otherwise the database steps."""
    dirs = [Path(d) for d in game_dirs]
    replay_input = "recording" if from_file else "steps"
    common = dict(file_id=rec.file_id, game_id=rec.game_id, guid=rec.guid, replay_input=replay_input,
                  is_only_reset_levels=rec.is_only_reset_levels)
    plays = rec.plays()
    if rec.card is None:
        reason = ("action ids lost (every action recorded as RESET, the benchmarking recorder defect): the "
                  "actions are unknown; supply them with --recovered-actions")
        return [PlayCheck(play_id=pid, status="not_replayable", detail=reason, **common) for pid, _ in plays]
    info, missing = _resolve(rec.game_id, dirs)
    if info is None:
        detail = f"game not loadable: {missing}" if dirs else "game not loadable: no --games folder given"
        return [PlayCheck(play_id=pid, status="unverified", detail=detail, **common) for pid, _ in plays]
    try:
        source_sha = info.source_sha256()
        env = GameEnv(info, only_reset_levels=rec.is_only_reset_levels)
    except Exception as err:  # a game file that does not load cannot verify anything: say so, score unverified
        detail = f"game {info.game_id} failed to load: {type(err).__name__}: {err}"
        return [PlayCheck(play_id=pid, status="unverified", detail=detail, **common) for pid, _ in plays]

    check_full_reset = not rec.is_only_reset_levels
    if from_file:
        assert rec.path is not None
        recording: Recording | Path = _recording_with_recovered_ids(rec.path, rec) if rec.recovered else rec.path
        report = replay(recording, only_reset_levels=rec.is_only_reset_levels, check_full_reset=check_full_reset,
                        env=env)
        divergence, replayed = report.divergence, report.steps_replayed
    else:
        wrapper = _HashingEnv(env, [h is not None for h in rec.steps["frame_sha256s"].to_list()])
        report = replay(recording_from_steps(rec), only_reset_levels=rec.is_only_reset_levels,
                        compare_frames=False, check_full_reset=check_full_reset, env=wrapper)  # type: ignore[arg-type]
        divergence, replayed = report.divergence, report.steps_replayed
        limit = divergence.step if divergence is not None else replayed
        earlier = _hash_divergence(rec, wrapper.hashes, limit)
        if earlier is not None:
            divergence, replayed = earlier, earlier.step + 1

    step_play = rec.step_play
    replayed_per_play = [0] * len(plays)
    for i in range(min(replayed, len(step_play))):
        replayed_per_play[step_play[i]] += 1
    div_play = step_play[divergence.step] if divergence is not None else None
    checks = []
    for index, (pid, _) in enumerate(plays):
        status, detail, div = "verified", None, None
        if div_play is not None and index >= div_play:
            status, div = "divergent", divergence
            detail = describe(divergence) if index == div_play else (
                f"follows a divergence earlier in the same recording: {describe(divergence)}")
        checks.append(PlayCheck(play_id=pid, status=status, n_steps_replayed=replayed_per_play[index],
                                divergence=div, detail=detail, game_source_sha256=source_sha, **common))
    return checks
