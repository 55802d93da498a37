"""A big ARC-TGI export is read in pieces, in two passes (pipeline/ingest/harc_arc.py `_TgiExport`, at least
TGI_PIECED_BYTES), holding one piece at a time. Forced on a real generator export with hand-added bad rows, read
in many pieces, it must store exactly what the same export read at once stores: every table row for row, every
quarantine row (check, location, column, value, reason), the file's counts and flags. The duplicate rules look
across pieces: an id on rows of different pieces with different contents quarantines every such row, naming
them all; an exact copy of a row of an earlier piece is quarantined, the first copy kept."""

from __future__ import annotations

import csv
import io
from contextlib import closing
from pathlib import Path

import duckdb
import polars as pl
import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import harc_arc, ingest_paths
from pipeline.ingest.harc_arc import PAIRS, TGI_RAW, TGI_TASKS, _TgiExport
from pipeline.ingest.harc_csv import ROW, CsvSource

GENERATED = Path(__file__).parents[1] / "fixtures" / "static" / "tgi_generator_out"
FIXTURE = GENERATED / "ARC-AGI-1-Train.csv"
PIECE_BYTES = 15_000  # the export below (~130 kB, rows of 7-9 kB) in about nine pieces


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def _hostile_export(folder: Path, more: tuple[list[str], ...] = ()) -> tuple[Path, dict[str, str]]:
    """The generator's tasks (all.csv: three of its rows, each four times under new ids as `-n 4` would give
    them) as an export named for its folder (the family prefix comes from it), with bad rows added; the ids of
    the rows that make each case."""
    header, *made = _rows((GENERATED / "all.csv").read_text(encoding="utf-8"))
    rows = [[f"{r[0]}{k}", *r[1:]] for k in range(4) for r in made]
    first, copied, third = rows[0], rows[2], rows[4]
    code = header.index("code")
    variables = header.index("task_variables")
    data = header.index("data")
    added = [
        [first[0], *first[1:code], first[code] + "\n# edited by hand\n", *first[code + 1:]],  # id of row 1 again
        list(copied),  # an exact copy of row 3
        list(third), [*third[:variables], '{"edited": 1}', *third[variables + 1:]],  # row 5 twice, once changed
        ["bad_json_row", *rows[1][1:data], '{"train": [oops'],
        ["   ", *rows[1][1:]],  # a blank id
        ["bad_time_row", "yesterday at noon", *rows[1][2:]],
        ["nul\x00row", *rows[1][1:]],  # a NUL byte
        ["key_twice_row", *rows[1][1:data], '{"train": [], "test": [], "train": []}'],
        *more,
    ]
    out = io.StringIO(newline="")
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows[:6])
    out.write("\n")  # a blank line: skipped, flagged
    w.writerows([*rows[6:], *added])
    out.write("cut_short_row,2026-11-29T20:49:40,task0a938d79")  # cut off: no newline at the end
    path = folder / FIXTURE.name
    path.write_text(out.getvalue(), encoding="utf-8")
    return path, {"conflict": first[0], "copy": copied[0], "three": third[0]}


def _ingest(db: Path, path: Path) -> None:
    with Workspace(db) as ws:
        report = ingest_paths(ws, [path], run_id="t", workers=1)
        assert [f.status for f in report.files] == ["loaded"]
        assert report.files[0].n_quarantined > 0


QUERIES = {
    **{t: f"SELECT * EXCLUDE (file_id) FROM {{db}}.{t}" for t in (TGI_RAW, TGI_TASKS, PAIRS)},
    "quarantine": "SELECT source_location, target_table, column_name, check_name, failing_value, reason, raw_text "
                  "FROM {db}.quarantine",
    "files": "SELECT n_records_loaded, n_records_quarantined, list_sort(flags) FROM {db}.raw_ingest__files",
}


def _stored_alike(tmp_path: Path, monkeypatch, path: Path) -> dict[str, str]:
    """Ingest `path` at once, then in pieces of PIECE_BYTES: every table and the quarantine alike, EXCEPT ALL both
    ways. The quarantine of the second ingest: `location check` -> reason."""
    _ingest(tmp_path / "once.duckdb", path)
    monkeypatch.setattr(harc_arc, "TGI_PIECED_BYTES", 0)
    monkeypatch.setattr(harc_arc, "TGI_PIECE_BYTES", PIECE_BYTES)
    _ingest(tmp_path / "pieces.duckdb", path)
    with closing(duckdb.connect()) as con:
        for name in ("once", "pieces"):
            con.execute(f"ATTACH '{tmp_path / name}.duckdb' AS {name} (READ_ONLY)")
        for name, sql in QUERIES.items():
            once, pieced = sql.format(db="once"), sql.format(db="pieces")
            assert con.execute(f"SELECT count(*) FROM ({once})").fetchone()[0] > 0, name
            for a, b in ((once, pieced), (pieced, once)):
                extra = con.execute(f"{a} EXCEPT ALL {b}").fetchall()
                assert extra == [], (name, extra[:3])
        return dict(con.execute("SELECT source_location || ' ' || check_name, reason FROM pieces.quarantine")
                    .fetchall())


def test_an_export_read_in_pieces_stores_what_it_stores_read_at_once(tmp_path: Path, monkeypatch):
    path, ids = _hostile_export(tmp_path)
    pieces = CsvSource(path, _rows(path.read_text())[0], TGI_RAW, batch_bytes=PIECE_BYTES).scan(
        lambda b: b.frame.select("task_id", ROW))
    assert len(pieces) >= 6
    piece_of = {r: i for i, p in enumerate(pieces) for r in p[ROW]}
    rows = dict(pl.concat(pieces).group_by("task_id").agg(pl.col(ROW).sort()).rows())
    for case in ("conflict", "copy", "three"):  # each case's rows lie in different pieces
        assert len({piece_of[r] for r in rows[ids[case]]}) > 1, case

    q = _stored_alike(tmp_path, monkeypatch, path)
    with closing(duckdb.connect(str(tmp_path / "pieces.duckdb"), read_only=True)) as con:
        tasks = {r[0] for r in con.execute("SELECT task_id FROM core_arctgi__tasks").fetchall()}

    conflict = rows[ids["conflict"]]
    for r in conflict:  # every row of the id, each naming all of them
        assert q[f"row {r} duplicate_task"] == (f"task_id {ids['conflict']} appears on rows "
                                               f"{', '.join(map(str, conflict))} with different contents")
    three = rows[ids["three"]]
    assert len(three) == 3 and all(f"row {r} duplicate_task" in q for r in three)
    first, copy = rows[ids["copy"]]
    assert f"row {first} duplicate_row" not in q and ids["copy"] in tasks
    assert q[f"row {copy} duplicate_row"] == (f"exact copy of row {first} (task_id {ids['copy']}); the first copy "
                                             "was loaded")
    assert not tasks & {ids["conflict"], ids["three"], "bad_json_row", "bad_time_row", "   ", "cut_short_row"}
    last = max(piece_of)
    assert "the file ends without a newline" in q[f"row {last} field_count"]
    assert any(k.endswith(" invalid_json") for k in q) and any(k.endswith(" time_unparsable") for k in q)
    assert any(k.endswith(" nul_byte") for k in q) and any(k.endswith(" duplicate_key") for k in q)


def test_an_export_polars_cannot_split_is_read_alike_both_ways(tmp_path: Path, monkeypatch):
    """A row with a field too many: the whole file is read by the forgiving parser (one batch) either way."""
    path, _ = _hostile_export(tmp_path, (["surplus_row", *["x"] * 7, "one too many"],))
    q = _stored_alike(tmp_path, monkeypatch, path)
    assert any(k.endswith(" field_count") for k in q)


def test_rows_whose_hashes_agree_are_told_apart_by_their_texts(tmp_path: Path):
    """The first pass's 64-bit hashes may collide: an id whose rows all hash alike has its rows compared by their
    texts before any is kept as the first copy. Two differing rows given one hash (as a collision would) are
    a conflict; two true copies stay copies."""
    path, ids = _hostile_export(tmp_path)
    header = _rows(path.read_text())[0]
    source = CsvSource(path, header, TGI_RAW, batch_bytes=PIECE_BYTES)
    export = _TgiExport("f", header, source, None, [])
    found = pl.concat(source.scan(lambda b: export.loaded(b).frame.select("task_id", ROW)))
    ids_frame = found.with_columns(pl.lit(7, pl.UInt64).alias("__row_hash"))  # every row hashes alike
    duplicates = harc_arc._duplicate_ids(ids_frame, "__row_hash")
    assert set(duplicates["__dup_distinct"]) == {1}  # the hashes alone take every such id for copies
    exact = dict(export._exact(duplicates, ids_frame).select("task_id", "__dup_distinct").rows())
    assert exact[ids["conflict"]] > 1 and exact[ids["three"]] > 1
    assert exact[ids["copy"]] == 1


@pytest.mark.parametrize("size", [0, 1 << 30])
def test_the_size_threshold_picks_the_way_an_export_is_read(tmp_path: Path, monkeypatch, size: int):
    from datetime import datetime

    from pipeline.ingest.base import FileContext

    monkeypatch.setattr(harc_arc, "TGI_PIECED_BYTES", size)
    out = harc_arc.read_tgi(FileContext(FIXTURE, "f", "r", datetime(2026, 1, 1)))
    assert (out.pieces is not None) == (size == 0)
    assert (TGI_TASKS in out.materialized().tables)


def test_a_task_field_far_too_dense_to_parse_is_quarantined_unparsed(tmp_path: Path):
    """A row's `data` of `[[0]],` repeated (an array per 3 bytes: parsed, about 40 times its size) is quarantined
    from its bracket count; the other rows load."""
    header = _rows((GENERATED / "all.csv").read_text(encoding="utf-8"))[0]
    good = _rows((GENERATED / "all.csv").read_text(encoding="utf-8"))[1]
    dense = '{"train": [' + "[[0]]," * 200_000 + '[[0]]], "test": []}'
    path, _ = _hostile_export(tmp_path, (["dense_row", *good[1:header.index("data")], dense],))
    with Workspace(tmp_path / "x.duckdb") as ws:
        ingest_paths(ws, [path], run_id="r", workers=1)
        q = ws.read("SELECT check_name, reason FROM quarantine WHERE check_name = 'json_too_dense'")
        tasks = set(ws.read("SELECT task_id FROM core_arctgi__tasks")["task_id"])
    assert q.height == 1 and q["reason"][0].startswith("data of ") and "not parsed" in q["reason"][0]
    assert "dense_row" not in tasks and len(tasks) > 5
