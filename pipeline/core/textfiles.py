"""Opening text input files: one place that knows about the UTF-8 byte-order mark and CRLF line endings.

Windows tools (Excel, Notepad, PowerShell's `Out-File`) write a BOM (EF BB BF) before the first byte and end
lines with CRLF. Neither changes what a file says, so every reader and the format sniffers strip a leading
BOM and accept CRLF, and the file is flagged (`utf8_bom`, `crlf_line_endings`) instead of being altered
silently. Anything else that is not UTF-8 stays an error for the caller to report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["CRLF_FLAG", "BOM_FLAG", "UTF8_BOM", "TextFacts", "decode_head", "read_text_document", "strip_bom"]

UTF8_BOM = b"\xef\xbb\xbf"
BOM_FLAG = "utf8_bom"
CRLF_FLAG = "crlf_line_endings"


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


def read_text_document(path: Path | str) -> tuple[str, TextFacts]:
    """A whole (JSON) text file, BOM removed, CRLF kept (JSON treats it as whitespace).
    Raises UnicodeDecodeError for bytes that are not UTF-8 and OSError for a file that cannot be read."""
    body, bom = strip_bom(Path(path).read_bytes())
    text = body.decode("utf-8")
    return text, TextFacts(has_bom=bom, has_crlf="\r\n" in text)
