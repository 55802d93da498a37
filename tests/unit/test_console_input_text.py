"""Text that comes from input files reaches the terminal as text.

A file name, guid, game id, family name or reason holding `ESC [2J` (clear screen), `ESC ]0;` (window title) or
an OSC 8 hyperlink was written to the terminal raw, and `[bold]` or `[link=...]` in it was applied as rich
markup: a hostile recording's name printed a clickable link in the ingest table. Control characters are now shown
as escapes and markup as written; arcstudy's own styling still works."""

from __future__ import annotations

import io

from rich.table import Table

from pipeline.core.console import Output, _Console, visible

HOSTILE = "A\x1b[2J\x1b]0;PWNED\x07\x1b[31mRED\r[bold]B[/bold][link=https://evil.example]click[/link]\x9b"


def _terminal() -> tuple[_Console, io.StringIO]:
    buffer = io.StringIO()
    return _Console(file=buffer, force_terminal=True, color_system="truecolor", width=400, highlight=False), buffer


def test_a_table_cell_from_input_is_shown_not_obeyed():
    console, buffer = _terminal()
    table = Table(title=HOSTILE)
    table.add_column("file")
    table.add_row(HOSTILE)
    console.print(table)
    text = buffer.getvalue()
    for obeyed in ("\x1b[2J", "\x1b]0;", "\x1b]8;", "\x1b[31m", "\r", "\x9b", "\x07"):
        assert obeyed not in text, repr(obeyed)
    # shown as escapes and as written (rich itself drops BEL and CR from text)
    assert "A\\x1b[2J\\x1b]0;PWNED" in text and "[bold]B[/bold][link=https://evil.example]click[/link]\\x9b" in text


def test_messages_show_markup_as_written_and_errors_keep_their_style(monkeypatch):
    output = Output()
    output.plain = False  # a terminal: the error's own styling applies
    console, buffer = _terminal()
    output.err = console
    output.info(f"left out {HOSTILE}")
    output.error(f"cannot read {HOSTILE}")
    text = buffer.getvalue()
    assert "\x1b]8;" not in text and "\x1b[2J" not in text
    assert "[link=https://evil.example]click[/link]" in text
    assert "\x1b[1;31merror:" in text  # arcstudy's own markup is still applied


def test_visible_escapes_control_characters_only():
    assert visible("tab\tnew\nline é ✓") == "tab\tnew\nline é ✓"
    assert visible("\x1b[2J\r\x7f\x9b") == "\\x1b[2J\\x0d\\x7f\\x9b"
