"""One line of an ARC-AGI-3 recording, any variant (shared/spec/formats.md §A): parse, classify, validate.

`parse_line` is the streaming parser ingest and `score FILES` read files with: it keeps a small record per
line (frame pixels are hashed; kept as a uint8 array only when asked), normalises string action ids and the
2025 preview's `score` fields, and raises `LineError` (a rule id and a reason for a person) for a line that
must be quarantined. It reads the line's bytes with orjson; a line orjson refuses (or reads differently:
NaN, integers over 64 bits, lone surrogates) is read again with `json`, whose reading and messages decide.

`steps_from_recording_lines` is the small normalizer from lines already parsed with `json` (the viewer's and
the sample tests' input) to ``StepRecord``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from pipeline.core.textfiles import (
    DUPLICATE_KEY,
    JSON_TOO_DENSE,
    LONE_SURROGATE,
    NUMBER_TOO_LONG,
    BadText,
    dense_json_reason,
    is_number_too_long,
    json_document,
    json_message,
    lone_surrogates,
    path_text,
)
from schemas import FIELDS

from .counting import ACTION_NAMES, StepRecord
from .frames import (
    FrameError,
    PlainFrames,
    frame_hashes,
    frames_from_json,
    hash_frames,
    split_frame_field,
    split_plain_frames,
)

__all__ = [
    "ACTION_IDS",
    "Line",
    "LineError",
    "LineIssue",
    "MAX_GUID_BYTES",
    "MAX_REASONING_BYTES",
    "action_id_of",
    "classify_record",
    "clip",
    "filename_guid",
    "guid_problem",
    "parse_line",
    "sniff_first_line",
]

ACTION_IDS = {name: i for i, name in enumerate(ACTION_NAMES)}
GAME_ID_RE = re.compile(FIELDS["game_id"].regex)
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MAX_GUID_BYTES = FIELDS["guid"].max_bytes  # a UUID: a longer "guid" is not one (10 MB once went into every row)
MAX_REASONING_BYTES = FIELDS["reasoning_json"].max_bytes  # the toolkit's limit, declared with the column
GAME_STATES = FIELDS["state"].isin
_LEVELS_RANGE = {name: (FIELDS[name].ge, FIELDS[name].le) for name in ("levels_completed", "win_levels")}
INT64_LIMIT = 2**63
MAX_RAW_TEXT = 4096  # the same limit as pipeline.ingest.base.clip: quarantine rows keep this much text


def clip(text: str) -> str:
    return text if len(text) <= MAX_RAW_TEXT else text[:MAX_RAW_TEXT] + f"... [{len(text) - MAX_RAW_TEXT} more chars]"


# --------------------------------------------------------------------------------------------------
# what a file is
# --------------------------------------------------------------------------------------------------
def sniff_first_line(line: str) -> str | None:
    """Evidence that a file whose first line is ``line`` is an ARC-AGI-3 recording, else None."""
    line = line.lstrip("\ufeff").rstrip("\r\n")  # a BOM and CRLF are not content (pipeline.core.textfiles)
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        # A first line too long for a head buffer (frames) is still recognisable by its keys.
        if '"data"' in line[:200] and ('"game_id"' in line[:400] or '"tokens"' in line[:400]):
            return "JSON Lines whose first line is a `{timestamp, data}` envelope (long frame line)"
        return None
    except (RecursionError, ValueError):  # thousands of nested brackets, an integer longer than Python reads: no
        return None                         # envelope (the reader says why, not a traceback)
    if isinstance(obj, dict) and isinstance(obj.get("data"), dict) and "timestamp" in obj:
        return "JSON Lines of `{timestamp, data}` envelopes (ARC-AGI-3 recording)"
    if (isinstance(obj, dict) and isinstance(obj.get("data"), dict) and "action_input" in obj["data"]
            and "state" not in obj["data"] and "frame" not in obj["data"]):
        return "JSON Lines of `{data: {action_input}}` actions (playback script, formats.md §A.7)"
    return None


def filename_guid(path: Path) -> tuple[str | None, str]:
    """The guid a file name carries, and which naming convention it follows (formats.md §A.0)."""
    name = path.name
    if name.endswith(".recording.jsonl"):
        parts = name.split(".")
        if len(parts) >= 5 and UUID_RE.fullmatch(parts[-3]):
            return parts[-3], "benchmarking"
        stem = name[: -len(".recording.jsonl")]
        if UUID_RE.fullmatch(stem):
            return stem, "human-dataset"
    match = re.fullmatch(r"([a-z0-9]{4}-[0-9a-f]+)-(" + UUID_RE.pattern + r")\.jsonl", name)
    if match:
        return match.group(2), "toolkit"
    return None, "other"


# --------------------------------------------------------------------------------------------------
# one line, streamed
# --------------------------------------------------------------------------------------------------
@dataclass(slots=True)  # a large recording keeps one per line until its steps are counted
class Line:
    number: int
    sha: bytes  # sha256 of the line's bytes, 32 bytes (its hex, twice the size, is made when stored)
    offset: int = 0  # where the line's bytes start in its file, and how many: its text is read again only
    size: int = 0  # for a quarantine record (a recording can be hundreds of MB of frame JSON)
    kind: str = "other"  # classify_record
    data: dict[str, Any] = field(default_factory=dict)  # `data`, frame pixels replaced by "[n frames]"
    recorded_at: datetime | None = None
    frames: np.ndarray | None = None  # (n, 64, 64) uint8, only when the caller wants pixels
    n_frames: int | None = None
    hashes: list[str] | None = None
    raw_json: str = ""
    action_id: int | None = None
    id_was_string: bool = False
    dropped: tuple[LineError, ...] = ()  # values over their size bound, not stored (one shared empty tuple)

    @property
    def levels_completed(self) -> int | None:
        return self.data.get("levels_completed", self.data.get("score"))

    @property
    def win_levels(self) -> int | None:
        return self.data.get("win_levels", self.data.get("win_score"))

    @property
    def full_reset(self) -> bool | None:
        full = self.data.get("full_reset")
        return full if isinstance(full, bool) else None

    @property
    def click(self) -> tuple[int | None, int | None]:
        if self.action_id != 6:
            return None, None
        payload = (self.data.get("action_input") or {}).get("data") or {}
        return payload.get("x"), payload.get("y")

    def step_record(self) -> StepRecord:
        return StepRecord(
            action_id=self.action_id, state=self.data.get("state"), levels_completed=self.levels_completed,
            full_reset=self.full_reset, win_levels=self.win_levels, frame_count=self.n_frames,
            guid=self.data.get("guid"), line_number=self.number,
            frame_digest=self.hashes[-1] if self.hashes else None,
        )


def _parse_timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts if ts.tzinfo else None


def classify_record(data: Mapping[str, Any]) -> str:
    """What a line's `data` holds: "frame", "usage" (LLM tokens), "scorecard" or "other"."""
    if "cards" in data or ("won" in data and "played" in data):
        return "scorecard"
    if "game_id" in data and ("state" in data or "frame" in data):
        return "frame"
    if "game_id" not in data and ("tokens" in data or "total_tokens" in data):
        return "usage"
    if not data:
        return "scorecard"  # the benchmarking recorder's `{}` scorecard entry
    return "other"


@dataclass(frozen=True)
class LineIssue:
    """One line (or card slot) left out of a recording: quarantined by ingest, reported by `score FILES`."""

    location: str  # "line 12"
    check: str
    reason: str
    raw_text: str | None = None
    target_table: str | None = None
    column: str | None = None
    value: str | None = None
    n_raw_bytes: int | None = None  # the line in full (raw_text keeps 4 KiB of it): its length and sha256
    raw_sha256: str | None = None
    is_line_kept: bool = False  # only a value (`column`) was dropped: the line itself is used (its step counts)

    @property
    def outcome(self) -> str:
        """What became of the line, for a person: "line left out", or that it was kept without one value."""
        if self.is_line_kept:
            return f"line kept without its {self.column or 'value'}"
        return "line left out"


class LineError(Exception):
    """A line to quarantine: ``check`` is the rule id, ``reason`` says what is wrong."""

    def __init__(self, check: str, reason: str, column: str | None = None, value: Any = None):
        super().__init__(reason)
        self.check, self.reason, self.column = check, reason, column
        self.value = None if value is None else str(value)


def refuse_dense_json(raw: bytes) -> None:
    """LineError (`json_too_dense`) for a line that `dense_json_reason` refuses."""
    reason = dense_json_reason(raw)
    if reason is not None:
        raise LineError(JSON_TOO_DENSE, reason)


_FLOAT_FORMS = re.compile(rb"\d\.0000|\de-\d(?!\d)")  # where orjson writes a float unlike json.dumps
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_NINETEEN_DIGITS = b"0" * 19


def _has_float_form(out: bytes) -> bool:
    """`_FLOAT_FORMS.search(out)`, the regex run only when its literal parts are there (a few µs a line)."""
    return (b".0000" in out or b"e-" in out) and _FLOAT_FORMS.search(out) is not None


def _has_long_digits(text: bytes) -> bool:
    """A run of 19 digits (the regex `[0-9]{19}`): an integer outside orjson's 64 bits may be one, which orjson reads as a
    float. Digits mapped to "0" and searched for in C: ~10x faster than the regex on a line's envelope."""
    return text.translate(_DIGITS_AS_ZERO).find(_NINETEEN_DIGITS) >= 0


def _key_count(obj: Any) -> int:
    """How many keys the objects in `obj` hold, all told."""
    n, stack = 0, [obj]
    while stack:
        value = stack.pop()
        if type(value) is dict:
            n += len(value)
            stack.extend([v for v in value.values() if type(v) is dict or type(v) is list])
        elif type(value) is list:
            stack.extend([v for v in value if type(v) is dict or type(v) is list])
    return n


# A quote, JSON whitespace, a colon: a key spaced from its colon (or such text inside a string), which the count
# of `":` in `refuse_keys_twice` cannot see.
_SPACED_COLON = re.compile(rb'"[ \t\n\r]+:')


def refuse_keys_twice(obj: Any, text: bytes) -> None:
    """LineError (`duplicate_key`) when an object of the line names a key twice: JSON keeps the later value
    without a word (a second `"game_id"` would silently put the step in another game). `obj` is the line as
    parsed from `text`. The usual line has as many `":` in its text as keys in its objects, and is let through
    from that count alone (a microsecond or two); any other is read again, marking each object that names a key
    twice (`textfiles.json_document`). The count is a proof only for a text where every key meets its colon
    without a space between (`"a" :` makes no `":`): a quote followed by a space and a colon sends the line to
    the full reading too."""
    if text.count(b'":') == _key_count(obj) and _SPACED_COLON.search(text) is None:
        return
    try:
        _, twice = json_document(text.decode("utf-8"))
    except (ValueError, RecursionError):  # read by json only in part: what json says of it is said elsewhere
        return
    if twice:
        where = path_text(twice[0].path)
        raise LineError(DUPLICATE_KEY, twice[0].reason(f"the object at {where}" if where else "the line"),
                        where or None, twice[0].key)


def loads_as_json(raw: bytes) -> Any:
    """`json.loads` of a line's bytes (UTF-8): the same value, and for a line json refuses the same
    JSONDecodeError (or RecursionError). orjson reads it when it reads it the same way (about 4x faster); json
    decides the rest: what orjson refuses (NaN, lone surrogate escapes, nesting past its limit, malformed text,
    whose message is json's) and integers of 19 digits or more (orjson makes a float of those past 64 bits).
    LineError for a long line far denser in arrays and objects than any record (`refuse_dense_json`)."""
    refuse_dense_json(raw)
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        obj = _json_loads(raw.decode("utf-8"))
    else:
        if _has_long_digits(raw):
            obj = _json_loads(raw.decode("utf-8"))
    refuse_keys_twice(obj, raw)
    return obj


def _json_loads(text: str) -> Any:
    """json.loads, and LineError (`invalid_json`) for an integer longer than Python reads (a plain ValueError)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError as err:
        if is_number_too_long(err):
            raise LineError("invalid_json", f"not valid JSON for arcstudy: {NUMBER_TOO_LONG}") from None
        raise


def _loads(raw: bytes) -> tuple[Any, bytes | str | PlainFrames | None, bool]:
    """(envelope with `data.frame` cut out when it could be, the frame array's text (or its rows, when it is in
    the plain form `split_plain_frames` reads), read by json?)."""
    refuse_dense_json(raw)
    plain = split_plain_frames(raw)
    stripped, frame_text = plain if plain is not None else split_frame_field(raw)
    try:
        obj = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        obj = None
    if obj is not None and (frame_text is None or _frame_was_cut(obj)) and not _has_long_digits(stripped):
        refuse_keys_twice(obj, stripped)
        return obj, frame_text, False
    # json decides what orjson refused, and reports it: its reading is the rule.
    text = raw.decode("utf-8")
    stripped, frame_text = split_frame_field(text)
    try:
        try:
            obj = _json_loads(stripped)
        except json.JSONDecodeError:
            if frame_text is None:
                raise
            obj = None  # a cut in the wrong place (a frame of another depth): the whole line decides
        if frame_text is not None and not _frame_was_cut(obj):
            obj, frame_text = _json_loads(text), None  # the cut was not the real field: parse it all
    except json.JSONDecodeError as err:
        raise LineError("invalid_json", f"not valid JSON ({json_message(err)} at column {err.colno})") from None
    except RecursionError:  # thousands of nested brackets: no recording field is nested that deep
        raise LineError("invalid_json", "not valid JSON for a recording (nested too deeply to read)") from None
    refuse_keys_twice(obj, raw if frame_text is None else stripped.encode("utf-8"))
    return obj, frame_text, True


def _frame_was_cut(obj: Any) -> bool:
    return (isinstance(obj, dict) and isinstance(obj.get("data"), dict) and "frame" in obj["data"]
            and obj["data"]["frame"] is None)


def _dumps(obj: Any, by_json: bool) -> str:
    """The line re-serialized compactly, exactly as `json.dumps(separators=(",", ":"), ensure_ascii=False)`."""
    if not by_json:
        try:
            out = orjson.dumps(obj)
            if not _has_float_form(out):
                return out.decode()
        except TypeError:
            pass
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def refuse_lone_surrogates(obj: Any, text: str) -> None:
    """LineError (`lone_surrogate`) for a parsed line `text` holding a string with a lone surrogate escape, which
    json reads into a string that no UTF-8 output (a table, a manifest, a page) can hold."""
    bad = lone_surrogates(obj, text)
    if bad:
        field = path_text(bad[0].path) or "the line"
        raise LineError(LONE_SURROGATE, BadText(bad[0].path, None, bad[0].escape).reason(f"field {field}"),
                        value=bad[0].escape)


def parse_line(number: int, raw: bytes, want_frames: bool, keep_raw: bool = True) -> Line:
    """One line's bytes (UTF-8, without its line end) -> `Line`; LineError for a line to quarantine.
    ``keep_raw=False``: `Line.raw_json` stays empty (the compact text is made only for readers that store it;
    the checks are the same either way)."""
    line = Line(number=number, sha=hashlib.sha256(raw).digest())
    obj, frame_text, by_json = _loads(raw)
    if by_json:  # orjson refuses a lone surrogate escape; json reads it into a string nothing can store
        refuse_lone_surrogates(obj, raw.decode("utf-8"))
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), dict):
        raise LineError("bad_envelope", "line is not a `{timestamp, data}` object with an object `data`")
    data = obj["data"]
    line.data = data
    line.kind = classify_record(data)
    line.recorded_at = _parse_timestamp(obj.get("timestamp"))
    if line.kind != "scorecard" and "timestamp" in obj and line.recorded_at is None:
        raise LineError("bad_timestamp", f"timestamp {obj.get('timestamp')!r} is not ISO-8601 with an offset",
                        "timestamp", obj.get("timestamp"))
    if line.kind == "frame":
        hashes = None
        try:
            if frame_text is not None:
                hashes, line.frames = hash_frames(frame_text, want_frames)
            elif "frame" in data:
                frames = frames_from_json(data["frame"])
                hashes, line.frames = frame_hashes(frames), frames if want_frames else None
        except (FrameError, json.JSONDecodeError) as err:
            raise LineError("bad_frame", f"frame is malformed: {err}", "frame") from None
        if hashes is not None:
            data["frame"] = f"[{len(hashes)} frames]"
            line.n_frames = len(hashes)
            line.hashes = hashes
        _check_frame_record(line)
    _bound_sizes(line)
    if keep_raw:
        line.raw_json = _dumps(obj, by_json)
    return line


def _size(value: Any) -> int:
    """UTF-8 bytes of a value as text (a string as is, anything else serialized as JSON)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return len(text.encode())


def guid_problem(guid: Any) -> tuple[str, str] | None:
    """(rule id, reason) when a session guid is not one the `guid` column holds: a string of at most
    MAX_GUID_BYTES (a UUID's 36); None (absent) is fine. The one rule for recordings and scorecards."""
    if guid is None:
        return None
    if not isinstance(guid, str):
        return "bad_guid", f"guid must be a string (a UUID), got {type(guid).__name__}"
    if _size(guid) > MAX_GUID_BYTES:
        return "field_too_large", f"guid is {_size(guid)} bytes, over the {MAX_GUID_BYTES}-byte limit of guid"
    return None


def _too_large(what: str, column: str, value: Any, limit: int, check: str = "field_too_large") -> LineError:
    return LineError(check, f"{what} is {_size(value)} bytes, over the {limit}-byte limit of {column}", column,
                     clip(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)))


def _bound_sizes(line: Line) -> None:
    """Field size bounds (declared with the columns in schemas: `Field.max_bytes`). An identifying field over
    its bound makes the line unusable (LineError: quarantined). A free-text field over its bound is left out
    of the stored line (`Line.dropped`, quarantined by the reader) so that the step itself still counts."""
    data = line.data
    if line.kind == "frame":
        guid = data.get("guid")
        if (problem := guid_problem(guid)) is not None:
            raise LineError(*problem, "guid", clip(guid if isinstance(guid, str) else json.dumps(guid)))
        action = data.get("action_input") or {}
        reasoning = action.get("reasoning")
        if reasoning is not None and _size(reasoning) > MAX_REASONING_BYTES:
            line.dropped += (_too_large("action_input.reasoning (serialized)", "reasoning_json", reasoning,
                                        MAX_REASONING_BYTES, "reasoning_too_large"),)
            action["reasoning"] = None
    elif line.kind == "usage":
        text, limit = data.get("assistant"), FIELDS["assistant_text"].max_bytes
        if isinstance(text, str) and _size(text) > limit:
            line.dropped += (_too_large("assistant", "assistant_text", text, limit),)
            data["assistant"] = None


def action_id_of(raw_id: Any) -> tuple[int, bool]:
    """(action id 0-7, whether it was written as an enum name); LineError for anything else."""
    if isinstance(raw_id, str):
        if raw_id not in ACTION_IDS:
            raise LineError("unknown_action", f"unknown action name {raw_id!r} (expected RESET or ACTION1-7)",
                            "action_input.id", raw_id)
        return ACTION_IDS[raw_id], True
    if isinstance(raw_id, int) and not isinstance(raw_id, bool) and 0 <= raw_id <= 7:
        return raw_id, False
    raise LineError("unknown_action", f"unknown action id {raw_id!r} (expected 0-7 or a name)",
                    "action_input.id", raw_id)


_INT_ONLY = frozenset({int})


def _are_action_ids(values: list) -> bool:
    """Every value an integer 0-7 (not a bool, nor any other type), in C-level passes (a line's list is short:
    a generator over it cost more than the rest of the line's checks)."""
    return _INT_ONLY.issuperset(map(type, values)) and (not values or (min(values) >= 0 and max(values) <= 7))


def _check_frame_record(line: Line) -> None:
    data = line.data
    action = data.get("action_input")
    if not isinstance(action, dict) or "id" not in action:
        raise LineError("missing_action", "frame record has no `action_input.id`", "action_input")
    line.action_id, line.id_was_string = action_id_of(action["id"])
    payload = action.get("data")
    if payload is not None and not isinstance(payload, dict):  # (a playback script's line is refused alike)
        raise LineError("bad_action_data", f"`action_input.data` must be an object, got {clip(json.dumps(payload))}",
                        "action_input.data", clip(json.dumps(payload)))
    if line.action_id == 6:
        payload = payload or {}
        x, y = payload.get("x"), payload.get("y")
        for name, v in (("x", x), ("y", y)):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 63:
                raise LineError("bad_click", f"ACTION6 needs integer {name} in 0-63, got {v!r}",
                                f"action_input.data.{name}", v)
    levels, win = line.levels_completed, line.win_levels
    if not isinstance(levels, int) or isinstance(levels, bool):
        raise LineError("bad_levels", f"levels_completed must be an integer, got {levels!r}", "levels_completed",
                        levels)
    if win is not None and (not isinstance(win, int) or isinstance(win, bool)):
        raise LineError("bad_levels", f"win_levels must be an integer, got {win!r}", "win_levels", win)
    # Values no column can hold would make the whole file's rows unbuildable: the line is quarantined instead.
    for name, v in (("levels_completed", levels), ("win_levels", win)):
        if v is not None and not -INT64_LIMIT <= v < INT64_LIMIT:
            raise LineError("bad_levels", f"{name} {v} does not fit a 64-bit integer", name, v)
        # the column's range, checked here so that every reader (score, view, the export) leaves out what
        # ingest would: counted, replayed or exported, such a line was a value no table holds
        low, high = _LEVELS_RANGE[name]
        if v is not None and not low <= v <= high:
            raise LineError("bad_levels", f"{name} {v} is outside {low}-{high}", name, v)
    state = data.get("state")
    if state is not None and not isinstance(state, str):
        raise LineError("bad_state", f"state must be a string, got {clip(json.dumps(state))}", "state",
                        clip(json.dumps(state)))
    if state not in GAME_STATES:
        raise LineError("bad_state", f"state {clip(json.dumps(state))} is not one of {', '.join(GAME_STATES)}",
                        "state", clip(json.dumps(state)))
    full = data.get("full_reset")
    if full is not None and not isinstance(full, bool):  # stored as null (and not counted) otherwise, unsaid
        raise LineError("bad_full_reset", f"full_reset must be true or false, got {clip(json.dumps(full))}",
                        "full_reset", clip(json.dumps(full)))
    available = data.get("available_actions")
    if available is not None and not (isinstance(available, list) and _are_action_ids(available)):
        raise LineError("bad_available_actions", "available_actions must be a list of action ids 0-7, got "
                        f"{clip(json.dumps(available))}", "available_actions", clip(json.dumps(available)))
    if win and levels > win:
        raise LineError("levels_exceed_win", f"levels_completed {levels} exceeds win_levels {win}",
                        "levels_completed", levels)
    game_id = data.get("game_id")
    if not isinstance(game_id, str):
        raise LineError("bad_game_id", "frame record has no string game_id", "game_id", clip(str(game_id)))
    if not GAME_ID_RE.fullmatch(game_id):  # the pattern's `$` would also match before a final newline
        raise LineError("bad_game_id", f"game_id {clip(game_id)[:80]!r} ({len(game_id.encode())} bytes) is not "
                        "`<4 lowercase alphanumerics>-<8 or 12 hex digits>`", "game_id", clip(game_id))
