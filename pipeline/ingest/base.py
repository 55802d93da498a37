"""What every reader returns, and the vocabulary for bad input.

A reader turns one file into frames for schema tables plus `Reject`s. It never writes to the database and
never raises for bad content: a bad line or row becomes a `Reject` (quarantined, the rest loads); only a
file that cannot be used at all raises `FileRejected` (the whole file is refused, the run goes on).
Verdicts follow spec/formats.md: reject (file), quarantine (line/row/play), flag (loaded, marked),
normalize (loaded after a documented rewrite; the raw layer keeps the original).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.spool import Spool
from pipeline.core.textfiles import BadText, DuplicateKey, ascii_json, lone_surrogates, path_text

MAX_RAW_TEXT = 4096
NESTED_TOO_DEEPLY = ("not valid JSON for this format (nested too deeply to read: about a thousand brackets or more, "
                     "inside one another)")


def clip(text: str | None) -> str | None:
    if text is None:
        return None
    return text if len(text) <= MAX_RAW_TEXT else text[:MAX_RAW_TEXT] + f"... [{len(text) - MAX_RAW_TEXT} more chars]"


class FileRejected(Exception):
    """The whole file is refused (nothing from it loads); the message says why, for a person."""

    def __init__(self, reason: str, check: str = "file_rejected", location: str = "file", raw_text: str | None = None,
                 rejects: list[Reject] | None = None):
        super().__init__(reason)
        self.reason = reason
        self.check = check
        self.location = location
        self.raw_text = raw_text
        self.rejects = Spool(rejects or [])  # lines already quarantined when the file was refused (quarantined too)


class FileChangedError(Exception):
    """A file read in pieces changed between its first and a later pass."""


class PiecesStartOver(Exception):
    """A file read in pieces must be read again from its start, after some of its pieces were handed out (H-ARC
    data.csv: a batch showed that the file needs a more forgiving CSV parser). What the earlier pieces wrote is
    undone (the file's transaction rolls back) and the pieces are written again from the first; the reader
    keeps the parser it settled on, so this happens at most once per parser."""


@dataclass(frozen=True)
class Reject:
    """One quarantined line, row or play."""

    location: str  # "line 12", "row 7", "play 2", "file"
    check: str  # short rule id, e.g. "invalid_json", "unknown_action"
    reason: str  # what is wrong, in words a person can act on
    raw_text: str | None = None
    target_table: str | None = None
    column: str | None = None
    value: str | None = None
    # The offending text in full: its UTF-8 length and sha256 (worked out here from `raw_text` unless the
    # reader, which saw the text before clipping it, gives them). `raw_text` itself is capped at MAX_RAW_TEXT.
    n_raw_bytes: int | None = None
    raw_sha256: str | None = None

    def __post_init__(self) -> None:
        # a reason or value quoting a huge field (16 MB in one H-ARC cell) is kept to MAX_RAW_TEXT like raw_text:
        # every failing check of that row would otherwise hold its own full copies while the file is read
        for name in ("reason", "value"):
            text = getattr(self, name)
            if text is not None and len(text) > MAX_RAW_TEXT:
                object.__setattr__(self, name, clip(text))
        if self.raw_text is None:
            return
        if self.n_raw_bytes is None:
            encoded = self.raw_text.encode("utf-8", "surrogatepass")
            object.__setattr__(self, "n_raw_bytes", len(encoded))
            object.__setattr__(self, "raw_sha256", hashlib.sha256(encoded).hexdigest())
        if len(self.raw_text) > MAX_RAW_TEXT:
            object.__setattr__(self, "raw_text", clip(self.raw_text))


@dataclass
class FileContext:
    path: Path
    file_id: str
    run_id: str
    ingested_at: datetime
    keep_frames: bool = False
    frames_dir: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # Set by the runner for a streamed file (InputFormat.streams): rows handed to it are validated and written
    # at once, in the file's transaction; `chunk_bytes` is how much input the reader reads between two hand-overs.
    write_chunk: Callable[[str, pl.DataFrame], None] | None = None
    chunk_bytes: int | None = None


@dataclass
class ReaderOutput:
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    rejects: list[Reject] = field(default_factory=Spool)  # a Spool: a flood of bad lines waits on disk
    flags: list[str] = field(default_factory=list)  # file-level quality flags
    written_files: list[Path] = field(default_factory=list)  # side outputs (frame Parquet)
    detection_evidence: str | None = None  # the reader's finer-grained variant detection, if any
    # A file too big to hold at once: the rest of its output, made piece by piece while the pieces are
    # written (in the writing process, inside the file's transaction). Picklable, called once.
    pieces: Callable[[], Iterator[ReaderOutput]] | None = None
    # Plays quarantined as copies of another file's play (play_id -> that file), set when committing: every row
    # they own goes with them; `n_quarantined_in_db` counts those moved to quarantine inside the database.
    duplicate_plays: dict[str, str] = field(default_factory=dict)
    n_quarantined_in_db: int = 0
    # Columns of a table whose schema value checks the reader's own rules already made on every row it hands
    # out (table -> columns): `validate_output` does not make them twice (`schemas.validate_frame(proven=)`).
    proven: dict[str, frozenset[str]] = field(default_factory=dict)

    def n_records(self) -> int:
        return sum(df.height for df in self.tables.values())

    def materialized(self) -> ReaderOutput:
        """This output with its pieces pulled in: one frame per table, every reject and flag."""
        if self.pieces is None:
            return self
        parts = [self, *self.pieces()]
        tables: dict[str, list[pl.DataFrame]] = {}
        for part in parts:
            for name, df in part.tables.items():
                tables.setdefault(name, []).append(df)
        proven = {name: frozenset.intersection(*[part.proven.get(name, frozenset()) for part in parts
                                                 if name in part.tables]) for name in tables}
        return ReaderOutput(
            tables={name: pl.concat(dfs, how="diagonal_relaxed") for name, dfs in tables.items()},
            rejects=Spool(r for part in parts for r in part.rejects),
            flags=list(dict.fromkeys(f for part in parts for f in part.flags)),
            written_files=[f for part in parts for f in part.written_files],
            detection_evidence=self.detection_evidence,
            proven={name: cols for name, cols in proven.items() if cols})


class BadEntries:
    """The entries of a JSON document that hold bad text (a lone surrogate escape, `lone_surrogates`) or an object
    naming a key twice (`json_document`), by the path of the entry (its first `depth` keys): a reader skips each
    and quarantines it, with its line when known."""

    def __init__(self, doc: Any, text: str, twice: list[DuplicateKey] | None = None):
        self.doc = doc
        self.found: list[BadText | DuplicateKey] = [*(twice or ()), *lone_surrogates(doc, text)]

    def __bool__(self) -> bool:
        return bool(self.found)

    def at(self, *entry: str | int) -> BadText | DuplicateKey | None:
        """The first bad string or object inside `entry` (a path from the root; the entry itself included), or
        None."""
        return next((b for b in self.found if b.path[:len(entry)] == entry), None)

    def reject(self, entry: tuple[str | int, ...], location: str, what: str, table: str | None) -> Reject | None:
        """The quarantine record of `entry` when it holds bad text or names a key twice (its value kept as ASCII
        JSON), else None."""
        bad = self.at(*entry)
        if bad is None:
            return None
        value: Any = self.doc
        for key in entry:
            value = value[key]
        inner = path_text(bad.path[len(entry):])
        line = f" (line {bad.line})" if bad.line is not None else ""
        return Reject(f"{location}{line}", bad.check, bad.reason(what + (f", field {inner}" if inner else "")),
                      clip(ascii_json(value)), table, None, bad.shown)

    def refuse_whole(self, what: str) -> None:
        """A document that is one entry (metadata.json, a top-level field): refused, naming the line."""
        if self.found:
            bad = self.found[0]
            field = path_text(bad.path)
            line = f"line {bad.line}" if bad.line is not None else "file"
            raise FileRejected(bad.reason(f"{what} field {field}" if field else what, whole=True),
                               bad.check, line, clip(ascii_json(self.doc)))
