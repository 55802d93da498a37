"""A big ARC-AGI-2 attempt log is read in pieces (`pipeline/ingest/arc2.py` `_AttemptLog`, through the CsvSource and
`ReaderOutput.pieces` machinery of H-ARC data.csv), so that its memory is bounded by the piece. Each piece runs the
checks, flags and raw layer of a whole log on its rows; the one rule across rows, an exact copy of an earlier row,
holds across pieces (`_KeptKeys`). These tests ingest the same log read whole and read in pieces of a few rows (the
module's size constants made tiny) and require the same database: every table `EXCEPT ALL` both ways, every
quarantine reason and row number, the file record."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.core.workspace import Workspace
from pipeline.ingest import arc2, ingest_paths
from pipeline.ingest.base import FileContext

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "static" / "arc2_attempts_mixed.csv"
HEADER = "task_ID,task_set,test_index,session_ID,start_time_seconds,duration_seconds,submissions,correct_submissions"
TABLES = ("raw_arc2__csv_rows", "core_arc2__attempts")
QUARANTINE = ("file_id, file_path, source_format, source_location, target_table, column_name, check_name, "
              "failing_value, reason, raw_text, n_raw_bytes, raw_sha256")
FILES = "file_id, file_path, n_records_loaded, n_records_quarantined, flags"


def _log(path: Path, *, end_newline: bool = False, surplus: bool = False, blank_tail: bool = False) -> Path:
    """The static fixture's rows (good, impossible, unusual) with copies near and far, by value, with empty
    values, -0 against 0; blank lines, the header again, and a last row cut short (without a newline)."""
    rows = FIX.read_text().splitlines()[1:]
    first = rows[0]  # 00576224,Public Eval,0,s1,0.0,120.5,1,1
    lines = [
        *rows[:6],
        first,  # a copy in the same piece as its first row
        "abcd1234,Public Eval,0,s20,,,1,1",  # empty start and duration
        "abcd1234,Public Eval,0,s21,-0,5,1,1",
        "",
        "",
        *rows[6:],
        HEADER,  # two files joined end to end
        " 00576224 ,Public Eval,0,s1,0,120.50,1,1",  # a copy of row 1 by value, far from it
        "abcd1234,Public Eval,0,s20,,,1,1",  # empty values match empty values
        "abcd1234,Public Eval,0,s21,0,5.0,1,1",  # 0 and -0 are one start time
        "abcd1234,Public Eval,0,s22,1,5,x,1",
        *[f"abcd1234,Public Eval,0,s6{i},1.0,2" for i in range(8)],  # cut short, one of them ending a piece
        "abcd1234,Public Eval,0,s21,-0,5,1,1",
        *[f"ab{i:06x},ARC-TGI,{i % 3},s{30 + i},{i}.5,{i + 1},{i % 4},{i % 2}" for i in range(30)],
        "ab000003,ARC-TGI,0,s33,3.5,4,3,1",  # a copy of a row of the block above
        "abcd1234,Public Eval,0,s20,,,1,1",
    ]
    if surplus:  # a surplus field late in the file: Python's csv module reads it, from the start again
        lines.append("abcd1234,Public Eval,0,s50,1,2,1,1,surplus")
    lines.append("abcd1234,Public Eval,0,s40,1.0")  # cut short
    if blank_tail:  # pieces of blank lines after the last row, the last of them empty fields without a newline
        lines += [""] * 40 + [",,,,,,,"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + "\n" + "\n".join(lines) + ("\n" if end_newline else ""))
    return path


def _in_pieces(monkeypatch, rows: int = 4, min_bytes: int = 1) -> None:
    """From now on every log is read in pieces of about `rows` rows (at least `min_bytes`)."""
    monkeypatch.setattr(arc2, "PIECES_FROM_BYTES", 0)
    monkeypatch.setattr(arc2, "PIECE_ROWS", rows)
    monkeypatch.setattr(arc2, "MIN_PIECE_BYTES", min_bytes)


def _ingest(tmp_path: Path, empty_db: Path, name: str, paths: list[Path]) -> Path:
    db = tmp_path / f"{name}.duckdb"
    db.write_bytes(empty_db.read_bytes())
    with Workspace(db) as ws:
        report = ingest_paths(ws, paths, run_id=name, workers=1)
    assert {f.status for f in report.files} == {"loaded"}
    return db


def _same(whole: Path, pieces: Path) -> None:
    """Every table of the two databases, EXCEPT ALL both ways (run ids and times left out)."""
    with Workspace(pieces) as ws:
        ws.con.execute(f"ATTACH '{whole}' AS whole (READ_ONLY)")
        for name, cols in [*((t, "*") for t in TABLES), ("quarantine", QUARANTINE), ("raw_ingest__files", FILES)]:
            for a, b in (("main", "whole"), ("whole", "main")):
                extra = ws.con.execute(f"SELECT {cols} FROM {a}.{name} EXCEPT ALL SELECT {cols} FROM {b}.{name}").fetchall()
                assert extra == [], (name, a, extra[:5])
            n = ws.con.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0]
            assert n > 0, name


def _rows(db: Path, sql: str) -> list[tuple]:
    with Workspace(db, read_only=True) as ws:
        return ws.read(sql).rows()


def test_a_log_read_in_pieces_lands_as_the_log_read_whole(tmp_path, empty_db, monkeypatch):
    log = _log(tmp_path / "log" / "arc2.csv")
    whole = _ingest(tmp_path, empty_db, "whole", [log])
    _in_pieces(monkeypatch)
    out = arc2.read_attempts(FileContext(log, "f", "r", None))  # type: ignore[arg-type]
    assert out.pieces is not None and not out.tables
    assert len(list(out.pieces())) > 10
    pieces = _ingest(tmp_path, empty_db, "pieces", [log])
    _same(whole, pieces)
    # what the comparison covers: copies across pieces name the first row, the cut-short last row says so
    q = dict(_rows(pieces, "SELECT source_location, reason FROM quarantine WHERE check_name = 'duplicate_row'"))
    far = {loc: why for loc, why in q.items() if int(loc.split()[1]) > 20}
    assert any(why.startswith("exact copy of row 1 ") for why in far.values())
    assert sum(why.startswith("exact copy of row 8 ") for why in q.values()) == 2  # empty values, twice
    assert any(why.startswith("exact copy of row 9 ") for why in far.values())  # -0 and 0
    cut = _rows(pieces, "SELECT reason FROM quarantine WHERE check_name = 'field_count'")
    assert len(cut) == 9 and sum("probably cut off" in why for why, in cut) == 1
    assert _rows(pieces, "SELECT count(*) FROM quarantine WHERE check_name = 'header_repeated'") == [(1,)]


def test_a_log_whose_last_pieces_hold_no_row_names_its_last_row_as_read_whole(tmp_path, empty_db, monkeypatch):
    """The file ends without a newline after pieces of blank lines: its last row is the cut-short row before
    them, which the reason says may be cut off (a piece is checked once the next piece holding rows is read)."""
    log = _log(tmp_path / "log" / "arc2.csv", blank_tail=True)
    whole = _ingest(tmp_path, empty_db, "whole", [log])
    _in_pieces(monkeypatch)
    pieces = _ingest(tmp_path, empty_db, "pieces", [log])
    _same(whole, pieces)
    cut = _rows(pieces, "SELECT source_location FROM quarantine WHERE reason LIKE '%probably cut off%'")
    assert len(cut) == 1 and cut[0][0] != f"row {len(log.read_text().splitlines()) - 1}"


def test_a_piece_of_many_rows_is_checked_a_few_rows_at_a_time(tmp_path, empty_db, monkeypatch):
    """Pieces cut by bytes hold more rows than PIECE_ROWS where the rows are shorter than the file's first ones:
    each is checked in slices of PIECE_ROWS rows, with the same result."""
    log = _log(tmp_path / "log" / "arc2.csv")
    whole = _ingest(tmp_path, empty_db, "whole", [log])
    _in_pieces(monkeypatch, rows=2, min_bytes=600)  # pieces of ~15 rows, checked 2 at a time
    out = arc2.read_attempts(FileContext(log, "f", "r", None))  # type: ignore[arg-type]
    assert out.pieces is not None and out.pieces.source.batch_bytes == 600
    assert len(list(out.pieces())) > 30
    pieces = _ingest(tmp_path, empty_db, "pieces", [log])
    _same(whole, pieces)


def test_a_hash_collision_never_makes_a_row_a_copy(tmp_path, empty_db, monkeypatch):
    """Every key given the same hash: the rows kept so far are compared by their values, so only true copies
    go."""
    log = _log(tmp_path / "log" / "arc2.csv", end_newline=True)
    whole = _ingest(tmp_path, empty_db, "whole", [log])
    _in_pieces(monkeypatch)
    monkeypatch.setattr(arc2, "_key_hash", lambda: pl.lit(7, pl.UInt64))
    pieces = _ingest(tmp_path, empty_db, "pieces", [log])
    _same(whole, pieces)


def test_copies_of_another_file_are_found_in_every_piece(tmp_path, empty_db, monkeypatch):
    """The second log repeats rows of the first (another path, other bytes): each piece is checked against the
    database (`duplicate_across_files`), as the log read whole is."""
    first = _log(tmp_path / "a" / "arc2.csv", end_newline=True)
    second = tmp_path / "b" / "arc2.csv"
    second.parent.mkdir()
    second.write_text(first.read_text().replace("s30,", "s99,") + "ffff0000,Public Eval,1,s70,1,1,1,1\n")
    whole = _ingest(tmp_path, empty_db, "whole", [first, second])
    _in_pieces(monkeypatch)
    pieces = _ingest(tmp_path, empty_db, "pieces", [first, second])
    _same(whole, pieces)
    across = _rows(pieces, "SELECT DISTINCT source_location FROM quarantine WHERE check_name = 'duplicate_across_files'")
    assert len(across) > 30


def test_a_late_change_of_parser_lands_the_log_as_read_whole(tmp_path, empty_db, monkeypatch, parser_start_overs):
    """A surplus field in the last piece: the log is read again from its start by Python's csv module
    (`PiecesStartOver`), what the earlier pieces wrote is undone, and the log lands as when read whole."""
    log = _log(tmp_path / "log" / "arc2.csv", surplus=True)
    whole = _ingest(tmp_path, empty_db, "whole", [log])
    starts = parser_start_overs
    _in_pieces(monkeypatch)
    pieces = _ingest(tmp_path, empty_db, "pieces", [log])
    assert starts == ["csv"]
    _same(whole, pieces)
    assert "csv_fallback_parser" in _rows(pieces, "SELECT flags FROM raw_ingest__files")[0][0]
