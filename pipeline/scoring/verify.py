"""Replay verification of plays before they are scored, driving ``engine.env.GameEnv`` directly.

Every recording is replayed on a fresh engine instance of its game, when the game can be loaded from the
environment folders given (``--games``), and each play gets a status:

- ``verified``: every step replayed and matched (state, levels_completed, win_levels, full_reset,
  available_actions, and the frames: pixel by pixel for a recording file, by sha256 for database steps),
  except possibly frame-only divergences that reconverged (below);
- ``divergent``: the first divergence (line, step, field, expected, got) is reported; plays of the same
  recording after it are divergent too (they continue the diverged session);
- ``unverified``: the game cannot be loaded; the play is scored from the recording alone;
- ``not_replayable``: the actions are unknown (the benchmarking ``action_ids_lost`` defect, not recovered).

A recording whose lost actions were recovered (``--recovered-actions``, ``--recover-actions``) is replayed with
them like any other, and its checks carry where the actions come from (``PlayCheck.recovery``).

Recordings of the official human dataset were made with level-only resets (``ONLY_RESET_LEVELS``) through
the REST server, whose lines always say ``full_reset: false``: they replay with level-only resets and
without the ``full_reset`` comparison.

Both inputs are the steps of the recording, with the action ids `pipeline.scoring.plays` settled on (recovered
ones when there are any): a recording file as `pipeline.recordings` read it (its lines' fields and frame
pixels, so nothing is read twice), database steps as ingest stored them (their fields and frame hashes,
``pipeline.recordings.frames.frame_hashes``, the definition ingest used). The comparison follows
``engine.replay``: per step the fields in order, then the number of frames, then each frame; a recording
whose first step is not a RESET is preceded by the opening RESET the toolkit's ``make`` sends, not compared.

Divergences come in two kinds. An *outcome* divergence (state, levels_completed, win_levels, full_reset,
available_actions, or an exception) stops the replay: the play is divergent. A *frame-only* divergence (the
frames or their number differ, every field agrees) does not stop it: some games animate in an order that
depends on ``PYTHONHASHSEED`` (lf52 iterates over a set of strings), so a genuine recording made in another
interpreter shows other animation frames while the game itself does the same. The replay goes on and decides
at the end: frame-only steps followed by a step whose frames match again *reconverged*, and the play stays
``verified`` with a note (``PlayCheck.n_frame_only_steps``, ``n_frame_only_cells`` and ``detail``, e.g. "frames
differ at 1 step (661 cells), reconverged at step 7"); frames that never match again (up to the last step
with frames, or up to an outcome divergence) make the play divergent at the first step of that stretch. Cells
are counted only when pixels are compared (recording files); database steps compare sha256 hashes, so their
cells are unknown (``n_frame_only_cells`` None). The official toolkit does not compare frames at all, so this
tolerance scores what it scores; note that it also lets through a change whose visible effect is undone later.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import chain, islice
from pathlib import Path
from typing import Any

import numpy as np

from engine.enums import GameAction
from engine.loader import GameInfo, GameNotFoundError, resolve_game
from engine.replay import Divergence
from pipeline.core.game_code import SandboxFailure, game_key, hold_game_child, portable_info, run_game_code
from pipeline.core.result_shape import expect, instance, list_of, wrong_shape
from pipeline.recordings.reader import read_recording_file
from pipeline.recordings.replaying import (  # noqa: F401 - re-exported: the replay itself lives there
    FIELDS,
    ReplayResult,
    ReplayStep,
    _same_pixels,
    load_and_run,
    recorded_outcome,
    render_steps,
    replay_classified,
    replay_steps,
)

from .plays import RecordingInput

__all__ = ["PlayCheck", "ReplayResult", "STATUSES", "describe", "divergence_columns", "game_label", "render_game",
           "render_steps", "replay_classified", "replay_game", "verify_recording"]

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
    n_frame_only_steps: int = 0  # steps of the play whose frames differed while the replay reconverged
    n_frame_only_cells: int | None = 0  # their differing cells; None when unknown (sha256 comparison)
    frame_only_where: tuple[tuple[int, int], ...] = ()  # (step index, line number) of each of those steps
    reconverged_step: int | None = None  # the last step of the play's replay whose frames matched again
    recovery: str | None = None  # the play's actions were recovered (action_ids_lost): where they come from

    @property
    def is_recovered(self) -> bool:
        return self.recovery is not None

    def frame_only_note(self, *, cells: bool = True) -> str | None:
        """E.g. "frames differ at 1 step (step 3, line 4; 661 cells), reconverged at step 4"; ``cells=False``
        leaves the count out (the scorecard's note, the same for a file as for its database steps)."""
        n = len(self.frame_only_where)
        if not n:
            return None
        where = ", ".join(f"step {s}, line {ln}" for s, ln in self.frame_only_where[:3]) + (", ..." if n > 3 else "")
        if cells:
            where += "; " + (f"{self.n_frame_only_cells:,} cells" if self.n_frame_only_cells is not None
                             else "cells unknown: frames compared by sha256 or frame counts differ")
        return f"frames differ at {n} step{'s' if n != 1 else ''} ({where}), reconverged at step {self.reconverged_step}"

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


def steps_from_file(rec: RecordingInput) -> list[ReplayStep]:
    """The steps of the recording file as read (``rec.parsed``, else read now), pixels included."""
    return list(iter_steps_from_file(rec))


def iter_steps_from_file(rec: RecordingInput) -> Iterator[ReplayStep]:
    """`steps_from_file` one step at a time (a long recording is replayed a chunk at a time: `replay_game`)."""
    parsed = rec.parsed if rec.parsed is not None else read_recording_file(rec.path, want_frames=True,
                                                                           keep_raw_json=False)
    return _file_steps(rec, parsed.steps, rec.records, 0)


def file_steps(rec: RecordingInput, start: int, stop: int) -> list[ReplayStep]:
    """The steps ``start`` to ``stop`` of the recording file (`steps_from_file`'s), made from its parsed lines
    (``rec.parsed``, held: a large file's as columns) as they are asked for, not held for the whole file (its
    pixels, 4 KB a frame, took an export of 100,000 recovered steps to 0.8 GB)."""
    assert rec.parsed is not None
    return list(_file_steps(rec, rec.parsed.steps[start:stop], rec.records[start:stop], start))


def _file_steps(rec: RecordingInput, lines: Sequence[Any], records: Sequence[Any], first: int
                ) -> Iterator[ReplayStep]:
    for i, (ln, record) in enumerate(zip(lines, records, strict=True), first):  # records carry recovered ids
        action_input = ln.data.get("action_input") or {}
        payload = action_input.get("data")
        data = dict(payload) if isinstance(payload, dict) else {}
        if i in rec.recovered_clicks:  # a recovered click: the line holds the recorder's empty default
            data = {"x": rec.recovered_clicks[i][0], "y": rec.recovered_clicks[i][1]}
        expected = recorded_outcome(ln.data)
        if i in rec.recovered_full_resets:  # a recovered RESET: its kind as found (REST lines always say false)
            expected["full_reset"] = rec.recovered_full_resets[i]
        yield ReplayStep(
            line=ln.number, action_id=record.action_id, action_data=data,
            reasoning=action_input.get("reasoning"), expected=expected,
            n_frames=ln.n_frames, frame_hashes=ln.hashes, pixels=ln.frames)


_TABLE_COLUMNS = ("line_number", "state", "levels_completed", "win_levels", "is_full_reset", "available_actions",
                  "click_x", "click_y", "n_frames", "frame_sha256s")


def steps_from_table(rec: RecordingInput) -> list[ReplayStep]:
    """The database steps of the recording (core_arc3__steps rows): fields and frame hashes, no pixels."""
    return list(iter_steps_from_table(rec))


def iter_steps_from_table(rec: RecordingInput) -> Iterator[ReplayStep]:
    """`steps_from_table` one step at a time, its columns read REPLAY_CHUNK_STEPS rows at a time."""
    for start in range(0, len(rec.records), REPLAY_CHUNK_STEPS):
        yield from table_steps(rec, start, start + REPLAY_CHUNK_STEPS)


def table_steps(rec: RecordingInput, start: int, stop: int) -> list[ReplayStep]:
    """The database steps ``start`` to ``stop`` of the recording (`steps_from_table`'s)."""
    records = rec.records
    part = rec.steps.slice(start, max(0, min(stop, len(records)) - start))
    cols = {c: part[c].to_list() for c in _TABLE_COLUMNS}
    out = []
    for j in range(part.height):
        i = start + j
        record = records[i]
        expected = {"state": cols["state"][j], "levels_completed": cols["levels_completed"][j]}
        for name, column in (("win_levels", "win_levels"), ("full_reset", "is_full_reset"),
                             ("available_actions", "available_actions")):
            if cols[column][j] is not None:
                expected[name] = cols[column][j]
        if i in rec.recovered_full_resets:  # a recovered RESET: its kind as found (REST lines always say false)
            expected["full_reset"] = rec.recovered_full_resets[i]
        click = {}
        if i in rec.recovered_clicks:
            click = {"x": rec.recovered_clicks[i][0], "y": rec.recovered_clicks[i][1]}
        elif record.action_id == GameAction.ACTION6.value and cols["click_x"][j] is not None:
            click = {"x": cols["click_x"][j], "y": cols["click_y"][j]}
        hashes = cols["frame_sha256s"][j]
        n_frames = None if hashes is None else (cols["n_frames"][j] if cols["n_frames"][j] is not None
                                                else len(hashes))
        out.append(ReplayStep(line=cols["line_number"][j], action_id=record.action_id, action_data=click,
                              reasoning=None, expected=expected, n_frames=n_frames, frame_hashes=hashes))
    return out


def _cells(divergences: Sequence[Divergence]) -> int | None:
    """Differing cells over the steps; None unless every step compared pixels of equally many frames."""
    if any(d.field != "frame" or d.cells_differing is None for d in divergences):
        return None
    return sum(d.cells_differing or 0 for d in divergences)


# ------------------------------------------------------------------------------------------------------
# the game's code runs in the sandbox (pipeline.core.game_code): loading, constructing and stepping it
# ------------------------------------------------------------------------------------------------------
class GameLoadFailed(Exception):
    """The game's file or constructor raised (a normal exception, reported as the game not loadable)."""


def game_label(info: GameInfo) -> str:
    return f"game {info.game_id} ({info.source})" if info.source else f"game {info.game_id}"


_ANSWERS = {  # load_and_run's answers: (kind, check of the value)
    "load_failed": instance(str),
    "replayed": instance(ReplayResult),
    "rendered": list_of(lambda frame: frame is None or isinstance(frame, np.ndarray)),
}


def _in_sandbox(info: GameInfo, arg: tuple) -> Any:
    want = "rendered" if arg[-1] else "replayed"
    try:
        kind, value = expect(run_game_code(load_and_run, arg, key=game_key(info), source=info.source),
                             lambda answer: answer[0] in ("load_failed", want) and _ANSWERS[answer[0]](answer[1]),
                             f'("{want}", its result) or ("load_failed", why)')
    except SandboxFailure as err:  # the game's code ended abnormally: this game's failure, named
        raise SandboxFailure(err.kind, f"{game_label(info)}: {err.detail}", err.exc_type) from None
    if kind == "load_failed":
        raise GameLoadFailed(value)
    return value


REPLAY_CHUNK_STEPS = 5_000  # a recording of more steps is replayed a chunk at a time (`replay_game`)


def replay_game(info: GameInfo, steps: Iterable[ReplayStep], *, only_reset_levels: bool | None,
                check_full_reset: bool = True) -> ReplayResult:
    """`replay_classified` on a fresh instance of the game, in the sandbox. Raises GameLoadFailed when the
    game does not load, SandboxFailure when its code ended abnormally (time, memory, exit, crash).

    Up to REPLAY_CHUNK_STEPS steps go in one call. More are sent REPLAY_CHUNK_STEPS at a time to a replay kept
    open in the sandbox (`transition_replay.replay_chunk`, as `export-transitions` replays), and taken from
    ``steps`` only as they are sent: neither process holds a long recording's steps whole (500,000 steps made
    as ReplaySteps and pickled in one call took the command 0.3 GB more). The result is the same."""
    steps = iter(steps)
    first = list(islice(steps, REPLAY_CHUNK_STEPS + 1))
    if len(first) <= REPLAY_CHUNK_STEPS:
        return _in_sandbox(info, (portable_info(info), only_reset_levels, first, check_full_reset, False))
    return _replay_in_chunks(info, chain(first, steps), only_reset_levels=only_reset_levels,
                             check_full_reset=check_full_reset)


def _replay_in_chunks(info: GameInfo, steps: Iterator[ReplayStep], *, only_reset_levels: bool | None,
                      check_full_reset: bool) -> ReplayResult:
    from pipeline.recordings.transition_replay import is_chunk, replay_chunk

    token = uuid.uuid4().hex
    result = ReplayResult()
    part = list(islice(steps, REPLAY_CHUNK_STEPS))
    needs_opening = part[0].action_id != GameAction.RESET.value  # as replay_classified decides
    start: tuple | None = ("recording", portable_info(info), only_reset_levels, needs_opening, False,
                           check_full_reset)
    key = game_key(info)
    release = hold_game_child(key)  # the replay lives in that child between calls: never closed for room
    try:
        while True:
            following = list(islice(steps, REPLAY_CHUNK_STEPS))
            arg = (token, start, [(step, False) for step in part], not following, 1 << 40)
            try:
                answer = expect(run_game_code(replay_chunk, arg, key=key, source=info.source),
                                lambda a: is_chunk(a) and (a.get("status") == "load_failed"
                                                           or list_of(int)(a.get("reconverged"))),
                                "a replay chunk (replay_chunk's dict)")
            except SandboxFailure as err:
                raise SandboxFailure(err.kind, f"{game_label(info)}: {err.detail}", err.exc_type) from None
            if answer["status"] == "load_failed":
                raise GameLoadFailed(answer["reason"])
            start = None
            result.replayed, result.pending, result.outcome = answer["replayed"], answer["pending"], answer["outcome"]
            result.frame_only += answer["frame_only"]
            result.reconverged += answer["reconverged"]
            if answer["ended"]:
                result.divergence = answer.get("divergence")
                return result
            if not following:  # the last steps were sent as final: the replay must have ended
                raise wrong_shape("a replay that ended with its last steps", answer)
            part = following
    finally:
        release()


def render_game(info: GameInfo, steps: Sequence[ReplayStep], *, only_reset_levels: bool | None
                ) -> list[np.ndarray | None]:
    """`render_steps` on a fresh instance of the game, in the sandbox (raises as `replay_game`)."""
    bare = [step._replace(pixels=None, frame_hashes=None) for step in steps]  # what rendering does not read
    return _in_sandbox(info, (portable_info(info), only_reset_levels, bare, True, True))


def _resolve(game_id: str, dirs: Sequence[Path]) -> tuple[GameInfo | None, str | None]:
    try:
        return resolve_game(game_id, list(dirs)), None
    except GameNotFoundError as err:
        return None, str(err)


def verify_recording(rec: RecordingInput, game_dirs: Iterable[Path], *, from_file: bool) -> list[PlayCheck]:
    """Replay one recording and return a check per play (see the module docstring).

    ``from_file``: replay the recording file (``rec.parsed``, or read from ``rec.path``; pixels compared);
    otherwise the database steps (frame hashes compared)."""
    dirs = [Path(d) for d in game_dirs]
    replay_input = "recording" if from_file else "steps"
    common = dict(file_id=rec.file_id, game_id=rec.game_id, guid=rec.guid, replay_input=replay_input,
                  is_only_reset_levels=rec.is_only_reset_levels, recovery=rec.recovery if rec.recovered else None)
    plays = rec.plays()
    if rec.card is None:
        reason = ("action ids lost (every action recorded as RESET, the benchmarking recorder defect): the "
                  "actions are unknown; recover them with --recover-actions, or supply them with "
                  "--recovered-actions")
        return [PlayCheck(play_id=pid, status="not_replayable", detail=reason, **common) for pid, _ in plays]
    info, missing = _resolve(rec.game_id, dirs)
    if info is None:
        detail = f"game not loadable: {missing}" if dirs else "game not loadable: no --games folder given"
        return [PlayCheck(play_id=pid, status="unverified", detail=detail, **common) for pid, _ in plays]
    steps = iter_steps_from_file(rec) if from_file else iter_steps_from_table(rec)  # made as they are sent
    try:
        source_sha = info.source_sha256()
        # in the sandbox; an abnormal end (SandboxFailure) is raised: the recording's replay failed
        result = replay_game(info, steps, only_reset_levels=rec.is_only_reset_levels,
                             check_full_reset=not rec.is_only_reset_levels)
    except (OSError, GameLoadFailed) as err:  # a game file that does not load cannot verify anything: unverified
        text = str(err) if isinstance(err, GameLoadFailed) else f"{type(err).__name__}: {err}"
        detail = f"game {info.game_id} failed to load: {text}"
        return [PlayCheck(play_id=pid, status="unverified", detail=detail, **common) for pid, _ in plays]
    divergence = result.divergence
    replayed = result.replayed if divergence is None else divergence.step + 1  # counted up to the divergence

    step_play = rec.step_play
    replayed_per_play = [0] * len(plays)
    for i in range(min(replayed, len(step_play))):
        replayed_per_play[step_play[i]] += 1
    frame_only: list[list[tuple[Divergence, int]]] = [[] for _ in plays]
    for d, back in zip(result.frame_only, result.reconverged, strict=True):
        frame_only[step_play[d.step]].append((d, back))
    div_play = step_play[divergence.step] if divergence is not None else None
    checks = []
    for index, (pid, _) in enumerate(plays):
        ours = frame_only[index]
        check = PlayCheck(play_id=pid, status="verified", n_steps_replayed=replayed_per_play[index],
                          game_source_sha256=source_sha, n_frame_only_steps=len(ours),
                          n_frame_only_cells=_cells([d for d, _ in ours]) if ours else 0,
                          frame_only_where=tuple((d.step, d.line) for d, _ in ours),
                          reconverged_step=max(b for _, b in ours) if ours else None, **common)
        note = check.frame_only_note()
        if div_play is not None and index >= div_play:
            detail = describe(divergence) if index == div_play else (
                f"follows a divergence earlier in the same recording: {describe(divergence)}")
            if index == div_play and result.outcome is not None and result.outcome is not divergence:
                detail += f"; frames never matched again before {describe(result.outcome)}"
            if note:
                detail += f" (earlier, {note})"
            check = replace(check, status="divergent", divergence=divergence, detail=detail)
        else:
            check = replace(check, detail=note)
        checks.append(check)
    return checks
