"""The format registry: each input format names its reader, its sniffer and the tables it writes.

Detection is by content (the first KiB of the file and its name), in registry order; `--format NAME`
overrides it. A reader module registers its formats at import (see `pipeline.ingest.READER_MODULES`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pipeline.core.textfiles import bom_encoding, not_utf8_reason, read_text_head
from pipeline.ingest.base import FileContext, ReaderOutput


@dataclass(frozen=True)
class Head:
    """What sniffers look at: the file name and the beginning of the file."""

    path: Path
    text: str  # decoded (utf-8, errors replaced) first HEAD_BYTES bytes
    first_line: str
    is_complete: bool  # the whole file fits in `text`
    start: bytes = b""  # the file's first bytes as they are (a UTF-16 byte-order mark is seen there)

    @cached_property
    def nested_too_deeply(self) -> bool:
        """Whether json gives up on the head (the whole file when it fits, else its first line) for its depth."""
        try:
            json.loads(self.text if self.is_complete else self.first_line)
        except RecursionError:
            return True
        except ValueError:
            pass
        return False

    @cached_property
    def json_value(self) -> Any:
        """The text parsed as JSON when it is the whole file, else None (also when it is not JSON). Parsed
        once for all sniffers: a small JSON file is otherwise parsed by each JSON sniffer in turn."""
        if not self.is_complete:
            return None
        try:
            return json.loads(self.text)
        except (ValueError, RecursionError):  # (an integer longer than Python reads is a plain ValueError)
            return None


@dataclass(frozen=True)
class InputFormat:
    name: str
    description: str
    reader: Callable[[FileContext], ReaderOutput]
    sniff: Callable[[Head], str | None]  # evidence text when the file looks like this format, else None
    tables: tuple[str, ...]  # every table the reader may write (a re-ingest clears them for the file)
    # The reader can hand rows over while it reads (`FileContext.write_chunk`): a large file is then read inside
    # its transaction, its rows written chunk by chunk, instead of held whole in memory.
    streams: bool = False


FORMATS: dict[str, InputFormat] = {}


def register(fmt: InputFormat) -> InputFormat:
    if fmt.name in FORMATS:
        raise ValueError(f"input format {fmt.name!r} registered twice")
    FORMATS[fmt.name] = fmt
    return fmt


def read_head(path: Path) -> Head:
    """The file's first HEAD_BYTES after any blank lines it starts with (`read_text_head`)."""
    head = read_text_head(path)
    return Head(path=path, text=head.text, first_line=head.first_line, is_complete=head.is_complete, start=head.start)


def detect(path: Path) -> tuple[InputFormat | None, str]:
    """The first registered format whose sniffer recognises the file, with the evidence."""
    head = read_head(path)
    if not head.text.strip():
        return None, "the file is empty"
    too_deep = False
    for fmt in FORMATS.values():
        try:
            evidence = fmt.sniff(head)
        except RecursionError:  # json gives up on thousands of nested brackets: no format nests that deep
            too_deep, evidence = True, None
        if evidence:
            return fmt, evidence
    if too_deep or head.nested_too_deeply:  # (the sniffers that parse the first line say no for it)
        return None, ("not valid JSON for any format (nested too deeply to read: about a thousand brackets or more, "
                      "inside one another)")
    if bom_encoding(head.start) is not None:  # the sniffers read UTF-8: this is why none knew the file
        return None, f"content not recognised: {not_utf8_reason(None, head.start)}"
    if "\r" in head.text and "\n" not in head.text:
        return None, ("content not recognised: its lines end with a bare CR (classic Mac line ends), which no "
                      "reader here splits; convert the file to LF or CRLF line ends")
    return None, f"content not recognised (starts with {head.first_line[:80]!r})"
