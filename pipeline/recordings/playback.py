"""Playback files (action scripts, shared/spec/formats.md §A.7): read them, and replay them into recordings.

A playback file holds one action per line, ``{"data": {"action_input": {"id", "data": {"game_id", x, y},
"reasoning"}}}``, and nothing the engine returned. The official playback agent calls ``make()`` (which sends
the opening RESET) and then sends every line as a step, so everything the toolkit reports comes from that
replay. This module does it the same way: ``iter_replay_lines`` gives the toolkit recording the replay
produces (opening RESET first, action ids as names), and ``replayed_recording`` reads it back through
`reader.read_recording_file`, so a script is counted and scored by the toolkit rules exactly like any
toolkit recording.

Ingest stores a script as it is (``script_tables``: steps without state or levels, the play marked
``is_replay_needed``); `score` and `view` replay the stored actions (``replay_script_tables``), so scoring a
script file and scoring its ingested copy give the same plays.

The script's ``game_id`` may name a version that is in no game folder: the playback agent plays the game it
was started on, so the game is resolved by its 4-character code (``resolve_script_game``), or pinned.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import uuid
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from engine.enums import GameAction
from engine.loader import GameInfo, GameNotFoundError, GameUnloadableError, find_games, resolve_game
from pipeline.core import spill
from pipeline.core.outputs import write_with
from pipeline.core.spill import SpillArray, spill_attributes
from pipeline.core.spool import Spool
from pipeline.core.textfiles import not_utf8_reason, strip_bom
from schemas.validate import conform

from .counting import ACTION_NAMES
from .lines import (
    MAX_REASONING_BYTES,
    LineError,
    LineIssue,
    action_id_of,
    clip,
    loads_as_json,
    refuse_lone_surrogates,
)
from .reader import (
    MAX_LINE_BYTES,
    ParsedRecording,
    RecordingRejected,
    bounded_lines,
    read_recording_file,
    repeated,
    table_from_columns,
)
from .variant import is_action_script_record

__all__ = [
    "PlaybackError",
    "PlaybackScript",
    "ScriptAction",
    "ScriptReplay",
    "is_playback_file",
    "iter_replay_lines",
    "read_playback_file",
    "replay_script_file",
    "replay_script_tables",
    "replayed_recording",
    "resolve_script_game",
    "script_tables",
    "write_lines",
]

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # replayed lines get synthetic, deterministic timestamps


class PlaybackError(Exception):
    """A script cannot be replayed (its game cannot be loaded); ``reason`` is for a person."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ScriptAction:
    """One action line of a script: the action sent, with its click coordinates."""

    line_number: int
    action_id: int
    x: int | None = None
    y: int | None = None
    reasoning: Any = None

    @property
    def data(self) -> dict[str, int]:
        return {} if self.x is None else {"x": self.x, "y": self.y}


class ScriptActions(Sequence[ScriptAction]):
    """A script's actions as columns, each `ScriptAction` made as it is asked for: about 11 bytes an action, where
    a list of them took about 110 (a script of 7 million actions: 0.8 GB in the reader before any replay)."""

    def __init__(self) -> None:
        self.line_number = array("q")
        self.action_id = array("b")
        self.x = array("b")  # -1: none (a click's are 0-63)
        self.y = array("b")
        self.reasoning: dict[int, Any] = {}  # index -> reasoning, for the actions that have one

    @classmethod
    def of_column_parts(cls, parts: Iterable[Sequence[Iterable[Any]]]) -> ScriptActions:
        """The actions of columns given in parts, each (line numbers, action ids, xs, ys): a stored script's, a
        block of its lines at a time. Past HELD_ITEMS actions, the columns spill as they grow."""
        made = cls()
        for numbers, ids, xs, ys in parts:
            made.line_number.extend(numbers)
            made.action_id.extend(ids)
            made.x.extend(-1 if v is None else v for v in xs)
            made.y.extend(-1 if v is None else v for v in ys)
            if not len(made.line_number) == len(made.action_id) == len(made.x) == len(made.y):
                raise ValueError("columns of different lengths")
            if len(made) > spill.HELD_ITEMS and not isinstance(made.line_number, spill.SpillArray):
                made._spill_columns()
        return made

    def _spill_columns(self) -> None:
        """A script past HELD_ITEMS actions: its columns keep their newest actions in memory and the rest on disk
        (`SpillArray`), so that its length no longer sets the memory."""
        spill_attributes(self, (("line_number", "q"), ("action_id", "b"), ("x", "b"), ("y", "b")))

    def append(self, action: ScriptAction) -> None:
        if len(self.line_number) == spill.HELD_ITEMS:
            self._spill_columns()
        if action.reasoning is not None:
            self.reasoning[len(self.line_number)] = action.reasoning
        self.line_number.append(action.line_number)
        self.action_id.append(action.action_id)
        self.x.append(-1 if action.x is None else action.x)
        self.y.append(-1 if action.y is None else action.y)

    def __len__(self) -> int:
        return len(self.line_number)

    def replay_items(self, start: int, stop: int) -> list[tuple]:
        """`replay_items` of actions[start:stop], from the columns (no `ScriptAction` made: 2.7 µs each)."""
        ids, xs, ys, numbers, reasoning = self.action_id, self.x, self.y, self.line_number, self.reasoning
        return [(ids[i], {} if xs[i] < 0 else {"x": xs[i], "y": ys[i]}, reasoning.get(i), numbers[i],
                 ACTION_NAMES[ids[i]]) for i in range(start, min(stop, len(ids)))]

    def _make(self, i: int) -> ScriptAction:
        x, y = self.x[i], self.y[i]
        return ScriptAction(self.line_number[i], self.action_id[i], None if x < 0 else x, None if y < 0 else y,
                            self.reasoning.get(i))

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self._make(i) for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(f"action {index} of {len(self)}")
        return self._make(index % len(self))

    def __iter__(self) -> Iterator[ScriptAction]:
        return map(self._make, range(len(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(
            a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ScriptActions({len(self)} actions)"


@dataclass
class PlaybackScript:
    """A playback file as read: its actions, and the lines that are not actions (counted and skipped)."""

    path: Path
    file_sha256: str
    game_id: str  # as the script names it (the first action's `data.game_id`)
    actions: Sequence[ScriptAction]  # a `ScriptActions` when read from a file
    raw_lines: list[tuple[int, str, str]]  # (line number, sha256, text) of the lines kept (not the issues)
    skipped_lines: Sequence[int] = field(default_factory=list)  # lines without `action_input`
    issues: list[LineIssue] = field(default_factory=list)  # action lines left out (bad id or click)
    has_bom: bool = False  # the file starts with a UTF-8 byte-order mark (read as if it did not)


@dataclass(frozen=True)
class ScriptReplay:
    """How a script was replayed: the game it names, the game version played, the lines skipped."""

    named_game_id: str
    game_id: str
    n_actions: int
    n_skipped_lines: int | None = None  # known when the file was read (not from the database)

    @property
    def resolved_by_code(self) -> bool:
        return self.named_game_id != self.game_id

    def describe(self) -> str:
        how = (f"version {self.game_id} used (the script names {self.named_game_id}, resolved by the game code)"
               if self.resolved_by_code else f"game {self.game_id}")
        skipped = "" if not self.n_skipped_lines else (
            f"; {self.n_skipped_lines} line(s) without action_input skipped")
        return f"replayed from an action script ({self.n_actions} actions): {how}{skipped}"

    def as_json(self) -> dict[str, Any]:
        out = {"script_game_id": self.named_game_id, "game_id_used": self.game_id,
               "resolved_by_code": self.resolved_by_code, "n_actions": self.n_actions}
        if self.n_skipped_lines is not None:
            out["n_lines_skipped"] = self.n_skipped_lines
        return out


# --------------------------------------------------------------------------------------------------
# reading a script
# --------------------------------------------------------------------------------------------------
FIRST_LINE_BYTES = 1024 * 1024  # enough to tell a script line (its reasoning is capped at 16 KiB)


def _first_line(path: Path) -> str:
    with open(path, "rb") as fh:
        first = True
        while raw := fh.readline(FIRST_LINE_BYTES):  # never a whole 200 MB line
            if first:  # a byte-order mark (Windows tools write one) is not part of the line
                raw, first = strip_bom(raw)[0], False
            text = raw.decode("utf-8", errors="replace").strip()
            if text:
                return text
    return ""


def is_playback_file(path: Path | str) -> bool:
    """The file's first line is an action-script line (formats.md §A.7)."""
    try:
        obj = json.loads(_first_line(Path(path)))
    except (OSError, ValueError, RecursionError):  # (thousands of brackets: not a script line either)
        return False
    return isinstance(obj, dict) and isinstance(obj.get("data"), dict) and is_action_script_record(obj["data"])


def _script_action(number: int, action: Any) -> ScriptAction:
    if not isinstance(action, dict) or "id" not in action:
        raise LineError("missing_action", "`action_input` has no `id`", "action_input")
    action_id, _ = action_id_of(action["id"])
    payload = action.get("data") or {}
    if not isinstance(payload, dict):
        raise LineError("bad_action_data", "`action_input.data` is not an object", "action_input.data")
    x = y = None
    if action_id == GameAction.ACTION6.value:
        x, y = payload.get("x"), payload.get("y")
        for name, v in (("x", x), ("y", y)):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 63:
                raise LineError("bad_click", f"ACTION6 needs integer {name} in 0-63, got {v!r}",
                                f"action_input.data.{name}", v)
    return ScriptAction(number, action_id, x, y, action.get("reasoning"))


def read_playback_file(path: Path | str, *, keep_lines: bool = True) -> PlaybackScript:
    """Read a playback file. Lines without ``action_input`` are skipped (and counted); an action line with a
    bad id or click is a `LineIssue`. Raises `RecordingRejected` when the file holds no action.
    ``keep_lines=False``: ``raw_lines`` stays empty (a reader that needs only the actions, e.g. an export of a
    script of millions of lines, keeps no copy of their text)."""
    path = Path(path)
    digest = hashlib.sha256()
    actions, raw_lines = ScriptActions(), []
    skipped = SpillArray("q")  # a flood of lines without an action: on disk but for the newest
    issues: list[LineIssue] = Spool()  # a flood of bad action lines waits on disk, not in memory
    game_id: str | None = None
    has_bom = False
    with open(path, "rb") as fh:
        for number, (raw, too_long) in enumerate(bounded_lines(fh, digest), 1):
            if too_long is not None:
                issues.append(LineIssue(f"line {number}", "line_too_long", f"line is {too_long} bytes (with its line "
                                        f"end), over the {MAX_LINE_BYTES}-byte limit of a line; not read",
                                        clip(raw.decode("utf-8", "replace")), "core_arc3__steps"))
                continue
            digest.update(raw)
            if number == 1:
                raw, has_bom = strip_bom(raw)  # not part of line 1
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as err:  # as in recordings: not silently replaced
                issues.append(LineIssue(f"line {number}", "not_utf8", not_utf8_reason(err, subject="line"),
                                        clip(raw.decode("utf-8", "replace")), "core_arc3__steps"))
                continue
            if not text.strip():
                continue
            body = raw.rstrip(b"\r\n")  # the bytes of `text`
            stored = (number, hashlib.sha256(body).hexdigest(), text) if keep_lines else None
            try:
                obj = loads_as_json(body)
                refuse_lone_surrogates(obj, text)
            except LineError as err:  # far too dense to parse, or text no output can hold
                issues.append(LineIssue(f"line {number}", err.check, err.reason, clip(text), "core_arc3__steps",
                                        err.column, err.value))
                continue
            except (json.JSONDecodeError, RecursionError) as err:
                why = err.msg if isinstance(err, json.JSONDecodeError) else "nested too deeply to read"
                issues.append(LineIssue(f"line {number}", "invalid_json", f"not valid JSON ({why})", clip(text),
                                        "core_arc3__steps"))
                continue
            if not isinstance(obj, dict):  # a bare id or name is not a record (the action would go unplayed)
                issues.append(LineIssue(f"line {number}", "not_a_record", f"line is a JSON {_json_kind(obj)}, not an "
                                        'object; a playback line is {"data": {"action_input": {"id": ..., "data": '
                                        '{...}}}}; not replayed', clip(text), "core_arc3__steps"))
                continue
            data = obj.get("data")
            if not isinstance(data, dict) or "action_input" not in data:
                skipped.append(number)  # e.g. the trailing `{"data": {"test": ...}}` annotation
                if keep_lines:
                    raw_lines.append(stored)
                continue
            try:
                action = _script_action(number, data["action_input"])
            except LineError as err:
                issues.append(LineIssue(f"line {number}", err.check, err.reason, clip(text), "core_arc3__steps",
                                        err.column, err.value))
                continue
            reasoning_bytes = 0 if action.reasoning is None else len(json.dumps(action.reasoning,
                                                                                ensure_ascii=False).encode())
            if reasoning_bytes > MAX_REASONING_BYTES:
                # As in recordings (and the toolkit's limit): the text is not kept, the action still counts.
                issues.append(LineIssue(f"line {number}", "reasoning_too_large", f"action_input.reasoning "
                                        f"(serialized) is {reasoning_bytes} bytes, over the {MAX_REASONING_BYTES}-byte "
                                        "limit of reasoning_json; the line is kept without it", clip(text),
                                        "core_arc3__steps", "reasoning_json", is_line_kept=True))
                action = replace(action, reasoning=None)
            named = ((data["action_input"] or {}).get("data") or {}).get("game_id")
            if game_id is None and isinstance(named, str):
                game_id = named
            actions.append(action)
            if keep_lines:
                raw_lines.append(stored)
    if not actions:
        raise RecordingRejected("the playback file has no line with an `action_input`", "no_action_line",
                                issues=issues)  # the action lines that were bad, each with its reason
    if game_id is None:
        raise RecordingRejected("no action line names its game (`action_input.data.game_id`)", "bad_game_id")
    return PlaybackScript(path=path, file_sha256=digest.hexdigest(), game_id=game_id, actions=actions,
                          raw_lines=raw_lines, skipped_lines=skipped, issues=issues, has_bom=has_bom)


def _json_kind(value: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}.get(type(value), "null")


def script_guid(file_id: str) -> str:
    """The session guid given to a script's replay: derived from the file, so a file and its ingested copy get
    the same play ids, and a re-run the same output."""
    return str(uuid.UUID(bytes=hashlib.sha256(file_id.encode()).digest()[:16], version=4))


STEP_COLUMNS_AFTER_REPLAY = ("recorded_at", "state", "levels_completed", "win_levels", "is_full_reset",
                             "available_actions", "n_frames", "frame_sha256s", "last_frame_sha256", "frames_file",
                             "is_post_terminal", "step_effect", "is_counted", "is_level_change")


def replay_items(actions: Sequence[ScriptAction], start: int, stop: int) -> list[tuple]:
    """What a replay in the sandbox is sent of actions[start:stop] (`transition_replay`): (action id, click
    data, reasoning, line number, action name) each."""
    if isinstance(actions, ScriptActions):
        return actions.replay_items(start, stop)
    return [(a.action_id, a.data, a.reasoning, a.line_number, ACTION_NAMES[a.action_id])
            for a in actions[start:stop]]


def _action_columns(actions: Sequence[ScriptAction]) -> tuple[list, list, list, list, list]:
    """(line numbers, action ids, click x, click y, reasonings) of the actions, as lists."""
    if isinstance(actions, ScriptActions):  # from its columns, no object made per action
        reasonings: list[Any] = [None] * len(actions)
        for i, reasoning in actions.reasoning.items():
            reasonings[i] = reasoning
        return (actions.line_number.tolist(), actions.action_id.tolist(),
                [None if v < 0 else v for v in actions.x], [None if v < 0 else v for v in actions.y], reasonings)
    return ([a.line_number for a in actions], [a.action_id for a in actions], [a.x for a in actions],
            [a.y for a in actions], [a.reasoning for a in actions])


def script_tables(script: PlaybackScript, file_id: str, *, lines: bool = True) -> dict[str, pl.DataFrame]:
    """What ingest stores for a script: every line (raw; not with ``lines=False``, as `score` reads it), one step
    per action with what is known (no state, levels or frames: those come from a replay), and one play marked
    ``is_replay_needed``."""
    guid = script_guid(file_id)
    play_id = f"{guid}/0"
    numbers, ids, xs, ys, reasonings = _action_columns(script.actions)
    if lines:
        action_lines = set(numbers)
        raw = [{"file_id": file_id, "line_number": n, "content_sha256": sha,
                "line_kind": "action" if n in action_lines else "other", "raw_json": clip(text)}
               for n, sha, text in script.raw_lines]
    else:
        raw = []
    # column by column (a dict per action cost about 2 KB while the table was made: a long script's read), a
    # value the same on every step stored once (500,000 actions: 128 MB of table, 75 MB of it repeated texts)
    n = len(numbers)
    steps = {
        "file_id": repeated(file_id, n), "line_number": numbers,
        "step_index": pl.int_range(0, n, eager=True), "play_id": repeated(play_id, n),
        "game_id": repeated(script.game_id, n), "guid": repeated(guid, n),
        "action_id": ids, "action_name": [ACTION_NAMES[a] for a in ids],
        "click_x": xs, "click_y": ys,
        "reasoning_json": [None if r is None else json.dumps(r, ensure_ascii=False) for r in reasonings],
        "flags": repeated([], n, pl.List(pl.String)),
    }
    for name in STEP_COLUMNS_AFTER_REPLAY:  # what only a replay tells
        steps[name] = repeated(None, n, pl.Null)
    flags = ["no_leading_reset"] + (["non_action_lines_skipped"] if script.skipped_lines else [])
    plays = [{
        "play_id": play_id, "file_id": file_id, "guid": guid, "game_id": script.game_id, "play_index": 0,
        "recording_variant": "playback", "schema_generation": "2026",
        "first_line_number": script.actions[0].line_number, "last_line_number": script.actions[-1].line_number,
        "n_steps": len(script.actions), "started_at": None, "ended_at": None, "has_frames": False,
        "is_only_reset_levels": False, "is_action_ids_lost": False, "has_leading_reset": False,
        "is_replay_needed": True, "flags": flags,
    }]
    return {"raw_arc3__recording_lines": conform("raw_arc3__recording_lines", raw),
            "core_arc3__steps": table_from_columns("core_arc3__steps", steps),
            "core_arc3__plays": conform("core_arc3__plays", plays)}


# --------------------------------------------------------------------------------------------------
# replaying a script
# --------------------------------------------------------------------------------------------------
def resolve_script_game(game_id: str, game_dirs: Iterable[Path], version: str | None = None) -> GameInfo:
    """The game a script is replayed on: ``version`` when pinned (a version hash or a full game id), else the
    version the script names, else (as the playback agent does) the latest version of its 4-character code.
    Raises `PlaybackError` with the reason when none can be loaded."""
    dirs = [Path(d) for d in game_dirs]
    code = game_id.split("-", 1)[0]
    where = ", ".join(str(d) for d in dirs) or "no game folder"
    if version:
        wanted = version if "-" in version else f"{code}-{version}"
        candidates = [wanted]
    else:
        candidates = [game_id, code]
    reasons: list[str] = []  # the loader's, for each candidate that was found but cannot be used
    for candidate in candidates:
        try:
            return resolve_game(candidate, dirs, loadable=True)
        except GameUnloadableError as err:
            if str(err) not in reasons:
                reasons.append(str(err))
        except GameNotFoundError:
            continue
    known = sorted(info.game_id for info in find_games(dirs) if info.short_id == code)
    if version:
        detail = f"version {version} of {code} is not among the games ({', '.join(known) or 'none'})"
    else:
        detail = f"no version of game {code} ({game_id} named) is loadable"
    why = f" ({'; '.join(reasons)})" if reasons else ""
    raise PlaybackError(f"{detail} under {where}{why}; give the game folder with --games")


LINES_PER_CALL = 20_000  # recording lines one sandbox call answers at most (about 1 KB each, frames aside)
FRAMES_PER_CALL = 2_000  # and frames (a frame as lists of ints is about 37 KB in either process)


def iter_replay_lines(actions: Sequence[ScriptAction], info: GameInfo, *, guid: str, frames: bool = False
                      ) -> Iterator[dict[str, Any]]:
    """The toolkit recording of the playback agent's session, line by line: make() (the opening RESET), then
    every action, one line per engine response (action ids as names, as the toolkit recorder writes them). The
    game runs in the sandbox (pipeline.core.game_code), a few thousand lines per call
    (`transition_replay.script_lines_chunk`), so no process ever holds a long script's whole recording. Its code
    ending abnormally raises SandboxFailure naming the game; raising, the game's error."""
    from pipeline.core.game_code import (
        SandboxFailure,
        game_key,
        hold_game_child,
        portable_info,
        run_game_code,
    )
    from pipeline.core.result_shape import expect, wrong_shape

    from .transition_replay import script_lines_chunk

    token = uuid.uuid4().hex
    start: tuple | None = (portable_info(info), guid)
    sent = done = 0
    ended = False

    def shape(answer: Any) -> bool:  # the game's code runs in the answering child: nothing is taken on trust
        return (isinstance(answer, dict) and isinstance(answer.get("lines"), list)
                and all(isinstance(line, dict) for line in answer["lines"]) and type(answer.get("ended")) is bool
                and type(answer.get("done")) is int and done <= answer["done"] <= sent)

    key = game_key(info)
    release = hold_game_child(key)  # the replay lives in that child between calls: never closed for room
    try:
        while not ended:
            items: list[tuple] = []
            if done >= sent:  # every action sent is answered: send the next ones
                items = replay_items(actions, sent, sent + LINES_PER_CALL)
                sent += len(items)
            arg = (token, start, items, sent >= len(actions), LINES_PER_CALL, FRAMES_PER_CALL, frames, EPOCH)
            try:
                answer = expect(run_game_code(script_lines_chunk, arg, key=key, source=info.source), shape,
                                "a chunk of recording lines")
            except SandboxFailure as err:
                raise SandboxFailure(err.kind, f"game {info.game_id} ({info.source}): {err.detail}",
                                     err.exc_type) from None
            if not answer["lines"] and not answer["ended"] and not items:  # no progress: it would never end
                raise wrong_shape("a chunk of recording lines that answers the actions sent", answer)
            start = None
            done, ended = answer["done"], answer["ended"]
            yield from answer["lines"]
    finally:
        release()
    if done != len(actions):
        raise wrong_shape(f"an answer to each of the {len(actions)} actions", done)


class _LinesFailed(Exception):
    """What gave the lines failed (the game's replay, not the output): carried past the output's error handling,
    which would take an OSError, or a message naming an "os error", for the output's."""


def write_lines(path: Path, lines: Iterable[Mapping[str, Any]]) -> int:
    """The JSONL file, written whole (pipeline.core.outputs: never through a symlink; OutputError on failure;
    an error while ``lines`` is iterated, e.g. the game's, is raised as it is and leaves no file). Returns the
    lines written."""
    written = 0

    def write(tmp: Path) -> None:
        nonlocal written
        source = iter(lines)
        with open(tmp, "w", encoding="utf-8") as fh:
            while True:
                try:
                    line = next(source)
                except StopIteration:
                    break
                except Exception as err:
                    raise _LinesFailed from err
                fh.write(json.dumps(line, separators=(",", ":")) + "\n")
                written += 1

    try:
        write_with(path, write)
    except _LinesFailed as failed:
        raise failed.__cause__ from None  # type: ignore[misc]
    return written


def replayed_recording(actions: Sequence[ScriptAction], info: GameInfo, *, file_id: str, path: Path | None,
                       frames: bool = False) -> ParsedRecording:
    """Replay the actions and read the recording the replay produced like any toolkit recording (the one
    reader decides steps, plays and counts); it keeps the script's file id and path."""
    guid = script_guid(file_id)
    with tempfile.TemporaryDirectory(prefix="arcstudy-replay-") as tmp:
        tmp_path = Path(tmp) / f"{info.game_id}-{guid}.jsonl"  # the toolkit recorder's file name
        write_lines(tmp_path, iter_replay_lines(actions, info, guid=guid, frames=frames))  # a chunk held at a time
        parsed = read_recording_file(tmp_path, want_frames=frames, keep_raw_json=False)  # its text is not stored
    return replace(parsed, path=path or parsed.path, file_sha256=file_id)


def replay_script_file(path: Path | str, game_dirs: Iterable[Path], *, version: str | None = None,
                       frames: bool = True) -> tuple[PlaybackScript, ScriptReplay, Iterator[dict[str, Any]]]:
    """Read a playback file and replay it: (the script, how it was replayed, the toolkit recording's lines as
    the replay answers them: `iter_replay_lines`, whose game errors come while they are read).
    The replay's guid is the one `score` gives the script, so the recording scores as the script does.
    Raises `RecordingRejected` (not a script) or `PlaybackError` (no loadable game)."""
    path = Path(path)
    if not is_playback_file(path):
        raise RecordingRejected("not a playback file (its first line is not `{\"data\": {\"action_input\": "
                                "...}}` without engine output, formats.md §A.7)", "not_a_playback_file")
    script = read_playback_file(path, keep_lines=False)
    info = resolve_script_game(script.game_id, game_dirs, version)
    lines = iter_replay_lines(script.actions, info, guid=script_guid(script.file_sha256), frames=frames)
    return script, ScriptReplay(script.game_id, info.game_id, len(script.actions), len(script.skipped_lines)), lines


class _StepActions(Sequence[ScriptAction]):
    """A script's actions from its stored steps, made a slice at a time as the replay sends them
    (`iter_replay_lines`): a list of 500,000 of them took 100 MB beside the table holding the same values."""

    def __init__(self, steps: pl.DataFrame) -> None:
        self._rows = steps.sort("line_number").select("line_number", "action_id", "click_x", "click_y",
                                                      "reasoning_json")

    def __len__(self) -> int:
        return self._rows.height

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return [_action(*row) for row in self._rows.slice(start, max(0, stop - start)).iter_rows()]
        if not -len(self) <= index < len(self):
            raise IndexError(f"action {index} of {len(self)}")
        return _action(*self._rows.row(index))

    def __iter__(self) -> Iterator[ScriptAction]:
        for row in self._rows.iter_rows():
            yield _action(*row)


def _action(line_number: int, action_id: int, x: int | None, y: int | None, reasoning_json: str | None
            ) -> ScriptAction:
    return ScriptAction(line_number, action_id, x, y, None if reasoning_json is None else json.loads(reasoning_json))


def replay_script_tables(steps: pl.DataFrame, plays: pl.DataFrame, game_dirs: Iterable[Path], *,
                         version: str | None = None, paths: Mapping[str, Path | None] | None = None,
                         skipped: Mapping[str, int] | None = None, frames: bool = False
                         ) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, ParsedRecording],
                                    dict[str, ScriptReplay], dict[str, str]]:
    """Replace the rows of every script (plays with ``is_replay_needed``) by the rows of its replay.

    Returns (steps, plays, parsed replays by file_id, how each was replayed, reasons by file_id of the scripts
    that could not be replayed: their rows are dropped). Rows of other recordings pass through unchanged."""
    from .reader import recording_tables, step_frames

    dirs = list(game_dirs)
    paths, skipped = paths or {}, skipped or {}
    if "is_replay_needed" not in plays.columns:
        return steps, plays, {}, {}, {}
    script_ids = plays.filter(pl.col("is_replay_needed").fill_null(False))["file_id"].unique().sort().to_list()
    if not script_ids:
        return steps, plays, {}, {}, {}
    parsed_by_file, how, failed = {}, {}, {}
    new_steps, new_plays = [], []
    for fid in script_ids:
        file_steps = steps.filter(pl.col("file_id") == fid)
        named = plays.filter(pl.col("file_id") == fid)["game_id"][0]
        try:
            info = resolve_script_game(named, dirs, version)
            actions = _StepActions(file_steps)
            parsed = replayed_recording(actions, info, file_id=fid, path=paths.get(fid), frames=frames)
        except PlaybackError as err:
            failed[fid] = err.reason
            continue
        except Exception as err:  # the game's code failed: the script cannot be replayed
            failed[fid] = f"replay on {named} failed: {type(err).__name__}: {err}"
            continue
        tables = recording_tables(parsed, fid, streamed=True)  # no row per line: scoring reads the steps
        new_steps.append(pl.concat(step_frames(parsed, fid), rechunk=False))
        new_plays.append(tables["core_arc3__plays"].with_columns(
            is_replay_needed=pl.lit(True), recording_variant=pl.lit("playback")))
        parsed_by_file[fid] = parsed
        how[fid] = ScriptReplay(named, info.game_id, len(actions), skipped.get(fid))
    keep = ~pl.col("file_id").is_in(script_ids)
    # the caller's frames may come from the database (its own time zone name, column order): match them; its
    # steps may be narrow (`read_narrow_steps`), so an integer column takes the wider of the two types
    steps = pl.concat([steps.filter(keep), *(_like(f, steps.schema) for f in new_steps)], how="vertical_relaxed")
    plays = pl.concat([plays.filter(keep), *(f.select(plays.columns).cast(dict(plays.schema)) for f in new_plays)])
    return steps, plays, parsed_by_file, how, failed


def _like(frame: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """``frame`` in the order and types of ``schema``, but for its integer columns (and lists of integers): cast
    to a narrower type, a replay's line numbers or levels could lose their values; they are left to the concat's
    supertype."""
    def integral(dtype: pl.DataType) -> bool:
        return dtype.is_integer() or (isinstance(dtype, pl.List) and dtype.inner.is_integer())

    return frame.select(schema.names()).cast({n: t for n, t in schema.items() if not integral(t)})
