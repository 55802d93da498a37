"""Opening text input files: one place that knows about the UTF-8 byte-order mark and CRLF line endings.

Windows tools (Excel, Notepad, PowerShell's `Out-File`) write a BOM (EF BB BF) before the first byte and end
lines with CRLF. Neither changes what a file says, so every reader and the format sniffers strip a leading
BOM and accept CRLF, and the file is flagged (`utf8_bom`, `crlf_line_endings`) instead of being altered
silently. Anything else that is not UTF-8 stays an error for the caller to report, in the one wording of
`not_utf8_reason`, which names a UTF-16 (or UTF-32) file by its byte-order mark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

__all__ = ["CONTROL_CHARACTER", "CRLF_FLAG", "BOM_FLAG", "DUPLICATE_KEY", "LONE_SURROGATE", "UTF8_BOM", "BadText", "DuplicateKey",
           "DuplicateKeyError", "MarkingDecoder", "TextFacts", "ascii_json", "bom_encoding", "decode_head",
           "has_lone_surrogate", "json_document", "keys_twice", "lone_surrogates", "not_utf8_reason", "path_text",
           "read_text_document", "storable", "strip_bom", "unique_json", "visible"]

UTF8_BOM = b"\xef\xbb\xbf"
BOM_FLAG = "utf8_bom"
CRLF_FLAG = "crlf_line_endings"
# Byte-order marks of the encodings a text editor offers besides UTF-8 ("Unicode" in Notepad and Excel is UTF-16
# little-endian); UTF-32 first, since its little-endian mark begins with UTF-16's.
OTHER_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
              (b"\xfe\xff", "UTF-16"))


def bom_encoding(head: bytes) -> tuple[str, bytes] | None:
    """(encoding, mark) when ``head`` (a file's first bytes) starts with a UTF-16 or UTF-32 byte-order mark."""
    return next(((name, mark) for mark, name in OTHER_BOMS if head.startswith(mark)), None)


def not_utf8_reason(err: UnicodeDecodeError | None, head: bytes = b"", subject: str = "") -> str:
    """The one wording of "this text is not UTF-8", for files, lines and rows. ``head``: the file's first bytes,
    when known: a UTF-16 or UTF-32 file is named as such (its byte-order mark says so) instead of pointing at
    byte 0 (without ``head``, the bytes being decoded are looked at when the first of them failed: they are the
    file's first bytes when the whole file or its first line was decoded). ``subject``: what was read, when the
    message needs one ("line", a path)."""
    lead = f"{subject} is " if subject else ""
    if not head and err is not None and err.start == 0 and isinstance(err.object, bytes):
        head = err.object[:4]
    found = bom_encoding(head)
    if found is not None:
        name, mark = found
        return (f"{lead}{name} text, not UTF-8 (it starts with the {name} byte-order mark {mark.hex(' ').upper()}); "
                "re-save the file as UTF-8")
    why = f" ({err.reason} at byte {err.start})" if err is not None else ""
    return f"{lead}not UTF-8 text{why}; re-save the file as UTF-8"


@dataclass
class TextFacts:
    """What was found (and removed or tolerated) while reading a text file."""

    has_bom: bool = False
    has_crlf: bool = False

    def flags(self) -> list[str]:
        return [flag for flag, seen in ((BOM_FLAG, self.has_bom), (CRLF_FLAG, self.has_crlf)) if seen]

    def see_line_end(self, raw: bytes) -> None:
        if raw.endswith(b"\r\n"):
            self.has_crlf = True


def strip_bom(raw: bytes) -> tuple[bytes, bool]:
    """``raw`` without a leading UTF-8 BOM, and whether there was one."""
    return (raw[len(UTF8_BOM):], True) if raw.startswith(UTF8_BOM) else (raw, False)


def decode_head(raw: bytes) -> tuple[str, TextFacts]:
    """The beginning of a file as text for sniffing: BOM removed, undecodable bytes replaced."""
    body, bom = strip_bom(raw)
    return body.decode("utf-8", errors="replace"), TextFacts(has_bom=bom, has_crlf=b"\r\n" in body)


@dataclass(frozen=True)
class TextHead:
    """A file's beginning for sniffing (`read_text_head`)."""

    start: bytes  # the file's first bytes as they are (a UTF-16 byte-order mark is seen there)
    text: str  # decoded, BOM removed, undecodable bytes replaced: `size` bytes from the first that is not blank
    first_line: str  # its first line that is not blank, stripped ("" for a file of blank lines)
    is_complete: bool  # the rest of the file fits in `text`


HEAD_BYTES = 64 * 1024  # what a file is recognised by: its first 64 KiB (past leading blank lines)


def read_text_head(path: Path, size: int = HEAD_BYTES) -> TextHead:
    """The first `size` bytes of the file after any blank lines it starts with: readers skip blank lines wherever
    they are, so a file that opens with some is recognised by its first line of content."""
    with open(path, "rb") as fh:
        raw = fh.read(size + 1)
        start, skipped = raw[:4], 0
        while len(raw) > size and not raw[:size].strip():  # only blank lines so far: read past them
            skipped += size
            fh.seek(skipped)
            raw = fh.read(size + 1)
    text, _ = decode_head(raw[:size])
    first_line = next((line.strip() for line in text.split("\n") if line.strip()), "")
    return TextHead(start, text, first_line, len(raw) <= size)


# A metadata.json, scorecard or study manifest is kilobytes (a card of 100 games of 100 plays each: about 2 MB).
# Parsed, JSON takes up to about 30 times its size in Python objects (a 225 MB card of 3M plays: 6 GB), so a
# document over this is refused unparsed, with its size (`document_too_large`).
MAX_JSON_DOCUMENT_BYTES = 8 << 20
DOCUMENT_TOO_LARGE = "document_too_large"

# A long JSON text's arrays and objects: each is 56 bytes or more once parsed (Python), more in polars' parser, so a
# 57 MB recording line of `[[0]],` repeated became 2.4 GB of lists, and a 15 MB H-ARC field of them 2 GB in polars,
# before any rule could look at it. A recording's frame line has 65 per frame of at least 8 KB (one per 126 bytes or
# more), and no record of any input needs more than one per DENSE_JSON_BYTES_PER_CONTAINER bytes. Texts under
# DENSE_JSON_FROM_BYTES are not counted: parsed, they stay small, and counting would cost time on every line.
DENSE_JSON_FROM_BYTES = 1 << 20
DENSE_JSON_BYTES_PER_CONTAINER = 64
JSON_TOO_DENSE = "json_too_dense"


def dense_json_reason(text: bytes | str, what: str = "line") -> str | None:
    """Why a long JSON text is not parsed (far more arrays and objects than any record needs), or None. Brackets
    are counted in C, those inside strings too: an upper bound, never an undercount. A str is measured in UTF-8
    bytes, as polars measures it (`dense_json`)."""
    if len(text) < DENSE_JSON_FROM_BYTES // 4:  # 4 bytes a character at most: surely under the bound
        return None
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if len(raw) < DENSE_JSON_FROM_BYTES:
        return None
    containers = raw.count(b"[") + raw.count(b"{")
    if containers * DENSE_JSON_BYTES_PER_CONTAINER <= len(raw):
        return None
    return (f"{what} of {len(raw):,} bytes holds up to {containers:,} JSON arrays and objects, more than one per "
            f"{DENSE_JSON_BYTES_PER_CONTAINER} bytes, which no record of any input needs; not parsed, since parsing "
            "it would take many times its size in memory")


def document_too_large(path: Path | str, what: str) -> str | None:
    """Why the JSON document at `path` is not parsed (it is over MAX_JSON_DOCUMENT_BYTES), or None. `what`: what
    it was read as ("a scorecard")."""
    size = Path(path).stat().st_size
    if size <= MAX_JSON_DOCUMENT_BYTES:
        return None
    return (f"{size / (1 << 20):,.1f} MiB of JSON read as {what}: over {MAX_JSON_DOCUMENT_BYTES >> 20} MiB, far more "
            "than one holds (a scorecard of 100 games of 100 plays is about 2 MB), so it is not parsed; split it "
            "(e.g. one file per game)")


def read_text_document(path: Path | str) -> tuple[str, TextFacts]:
    """A whole (JSON) text file, BOM removed, CRLF kept (JSON treats it as whitespace).
    Raises UnicodeDecodeError for bytes that are not UTF-8 and OSError for a file that cannot be read."""
    body, bom = strip_bom(Path(path).read_bytes())
    text = body.decode("utf-8")
    return text, TextFacts(has_bom=bom, has_crlf="\r\n" in text)


# ------------------------------------------------------------------------------------------------ bad escapes
# A JSON string may spell a UTF-16 surrogate as an escape (`\udfff`). A pair of them is one character (an emoji);
# one alone, as a client that cuts an emoji in half writes it, is no character at all: Python's json reads it
# into a string that cannot be encoded, so nothing holding it can be stored. Such a value is bad text in one
# line or one entry, never a reason to refuse the file.
_LONE_SURROGATE_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")

# Python reads no integer of more digits (`sys.get_int_max_str_digits`: converting one costs time quadratic in its
# length). json.loads then raises a plain ValueError, not a JSONDecodeError: readers ask `is_number_too_long`.
MAX_INTEGER_DIGITS = 4300


def json_message(err: json.JSONDecodeError) -> str:
    """json's message of the error, to be followed by where it is: some end in " at" already ("Invalid control
    character at"), which read "at at line 1" that way."""
    return err.msg.removesuffix(" at")


def is_number_too_long(err: BaseException) -> bool:
    """Whether json.loads refused the text for an integer of more than MAX_INTEGER_DIGITS digits."""
    return type(err) is ValueError and "integer string conversion" in str(err)


NUMBER_TOO_LONG = (f"it holds an integer of more than {MAX_INTEGER_DIGITS:,} digits, longer than any value of "
                   "the format (Python reads none that long)")


LONE_SURROGATE = "lone_surrogate"


@dataclass(frozen=True)
class BadText:
    """A string of a parsed JSON document that holds a lone surrogate: where it is (keys and indices from the
    root), the document's line, and the escape as written."""

    path: tuple[str | int, ...]
    line: int | None
    escape: str
    check: ClassVar[str] = LONE_SURROGATE

    @property
    def shown(self) -> str:
        """What the quarantine shows as the bad value."""
        return self.escape

    def reason(self, what: str, whole: bool = False) -> str:
        where = f" at line {self.line}" if self.line is not None else ""
        return (f"{what} holds a lone surrogate escape ({self.escape}){where}: half of a UTF-16 pair, as a client "
                "that cuts an emoji in half writes it, is not text"
                + ("" if whole else "; this is quarantined, the rest of the file loads"))


@dataclass(frozen=True)
class _Key:
    key: str


def has_lone_surrogate(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def lone_surrogates(obj: Any, text: str | None = None) -> list[BadText]:
    """Every string (value or key) of a parsed JSON document that holds a lone surrogate, in document order, with
    its line in `text` (the document as parsed) when given. Costs a substring search when there is none."""
    if text is not None and "\\u" not in text:
        return []
    found: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), obj)]
    while stack:  # depth first, in document order (children pushed reversed; a key before its value)
        path, value = stack.pop()
        if isinstance(value, _Key):
            found.append((path, value.key))
        elif isinstance(value, str):
            if has_lone_surrogate(value):
                found.append((path, value))
        elif isinstance(value, dict):
            children: list[tuple[tuple[str | int, ...], Any]] = []
            for k, v in value.items():
                if has_lone_surrogate(k):
                    children.append(((*path, k), _Key(k)))
                children.append(((*path, k), v))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend(reversed([((*path, i), v) for i, v in enumerate(value)]))
    if not found:
        return []
    spots = list(_LONE_SURROGATE_ESCAPE.finditer(text)) if text is not None else []
    out, used = [], 0
    for path, value in found:
        n = len(_SURROGATE.findall(value))
        spot = spots[used] if used < len(spots) else None
        used += n
        line = text.count("\n", 0, spot.start()) + 1 if spot is not None and text is not None else None
        escape = spot.group(0) if spot is not None else "\\u" + format(ord(_SURROGATE.search(value).group(0)), "x")
        out.append(BadText(tuple(str(p) if isinstance(p, str) and has_lone_surrogate(p) else p for p in path),
                           line, escape))
    return out


# ------------------------------------------------------------------------------------------------ duplicate keys
# JSON allows an object to name a key twice, and Python's json (like most parsers) keeps the last value without a
# word: a manifest with a second `"plays": []` would lose every play, a scorecard with a second
# `"environments": []` every run. Which value the writer meant cannot be known, so the object is bad input.
DUPLICATE_KEY = "duplicate_key"


@dataclass(frozen=True)
class DuplicateKey:
    """An object of a parsed JSON document that names `key` more than once: where the object is (keys and indices
    from the root; () for the document itself)."""

    path: tuple[str | int, ...]
    key: str
    line: ClassVar[None] = None  # json does not say where an object was
    check: ClassVar[str] = DUPLICATE_KEY

    @property
    def shown(self) -> str:
        return ascii_json(self.key)

    def reason(self, what: str, whole: bool = False) -> str:
        return (f"{what} names the key {ascii_json(self.key)} twice: JSON keeps only the later value, so the earlier "
                "one would be lost without a word; remove or rename one"
                + ("" if whole else "; this is quarantined, the rest of the file loads"))


class DuplicateKeyError(ValueError):
    """`unique_json`: the document names a key twice in one object."""

    def __init__(self, found: DuplicateKey):
        self.found = found
        where = path_text(found.path)
        super().__init__(found.reason(f"the object at {where}" if where else "the document", whole=True))


class _Twice(dict):
    """An object that named keys more than once (json kept each one's last value)."""

    __slots__ = ("keys_twice",)


class MarkingDecoder(json.JSONDecoder):
    """A JSON decoder that marks each object naming a key twice (json keeps each key's last value), and counts
    them (`marked`), so that a caller looks for them (`keys_twice`) only when there are some."""

    def __init__(self) -> None:
        self.marked = 0
        super().__init__(object_pairs_hook=self._object)

    def _object(self, pairs: list[tuple[str, Any]]) -> dict:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        counts: dict[str, int] = {}
        for key, _ in pairs:
            counts[key] = counts.get(key, 0) + 1
        twice = _Twice(obj)
        twice.keys_twice = [key for key, n in counts.items() if n > 1]
        self.marked += 1
        return twice


def keys_twice(obj: Any, within: tuple[str | int, ...] = ()) -> list[DuplicateKey]:
    """Every object in `obj` (decoded by a `MarkingDecoder`) that names a key twice, in document order, its path
    starting with `within`."""
    found: list[DuplicateKey] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [(within, obj)]
    while stack:  # depth first, in document order
        path, value = stack.pop()
        if isinstance(value, dict):
            if isinstance(value, _Twice):
                found.extend(DuplicateKey(path, key) for key in value.keys_twice)
            stack.extend(reversed([((*path, k), v) for k, v in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed([((*path, i), v) for i, v in enumerate(value)]))
    return found


def json_document(text: str) -> tuple[Any, list[DuplicateKey]]:
    """`json.loads(text)`, and every object in it that names a key twice, in document order. Raises what
    json.loads raises (JSONDecodeError, RecursionError). Costs about a third more than json.loads."""
    decoder = MarkingDecoder()
    doc = decoder.decode(text)
    return doc, keys_twice(doc) if decoder.marked else []


def unique_json(text: str) -> Any:
    """`json.loads(text)`, refusing an object that names a key twice (`DuplicateKeyError`, a ValueError)."""
    doc, found = json_document(text)
    if found:
        raise DuplicateKeyError(found[0])
    return doc


# Control characters (C0 but TAB and LF, DEL, C1) in text from input files: on a terminal an escape sequence in a
# file name or guid clears the screen or prints a hyperlink; in a Markdown file a CR starts a line of its own.
CONTROL_CHARACTER = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with each control character written as its escape (``\\x1b``): shown, never obeyed."""
    return CONTROL_CHARACTER.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def storable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\udfff``): text a table or file can hold."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def path_text(path: Sequence[str | int]) -> str:
    """A JSON path (`BadText.path`) as text a table can hold: a key holding a lone surrogate is shown escaped."""
    return ".".join(ascii_json(p)[1:-1] if isinstance(p, str) and has_lone_surrogate(p) else str(p) for p in path)


def ascii_json(value: Any) -> str:
    """`value` as JSON that any encoding holds (a lone surrogate stays an escape): for quarantine's raw text."""
    return json.dumps(value, ensure_ascii=True, default=str)
