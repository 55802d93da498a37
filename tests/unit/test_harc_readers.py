"""H-ARC / ARC task JSON / ARC-TGI readers, called directly (no database): parsing, checks, flags, sniffing.

Expected values are derived by hand from tests/fixtures/harc (see its docstring for the event log).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.harc
import pipeline.ingest  # noqa: F401  (registers the ARC-AGI-3 formats, so sniffing order is realistic)
import pipeline.ingest.harc  # noqa: F401  (registers the H-ARC / ARC formats)
from pipeline.ingest.base import FileContext, FileRejected, PiecesStartOver
from pipeline.ingest.formats import detect, read_head
from pipeline.ingest.harc import (
    ACTIONS,
    ATTEMPTS,
    DEMOGRAPHICS,
    ERRORS,
    FEEDBACK,
    RAW,
    TASKS,
    WITHDRAWALS,
    read_data,
    read_errors,
    read_summary,
    read_survey,
    sniff_data,
    sniff_errors,
    sniff_summary,
    sniff_survey,
)
from pipeline.ingest.harc_arc import (
    PAIRS,
    TGI_TASKS,
    grid_to_string,
    read_task_json,
    read_tgi,
    sniff_task_json,
)
from pipeline.ingest.harc_csv import (
    ROW_HASH,
    TIME_FORMATS,
    CsvSource,
    Variant,
    as_bool,
    as_int,
    as_time,
    grid_problems,
    match_variant,
    read_header,
    sha256_texts,
)
from schemas.harc import HARC_ACTIONS, raw_csv_column
from tests.fixtures import harc as fx

SHARED = Path(__file__).resolve().parents[2].parent / "shared"


def ctx(path: Path) -> FileContext:
    return FileContext(path, "f" * 64, "test", datetime.now(UTC))


def flags_by_event(df: pl.DataFrame) -> dict[tuple[str, int], list[str]]:
    return {(r["task_id"], r["action_number"]): r["flags"] for r in df.iter_rows(named=True)}


# --- grid strings -------------------------------------------------------------------------------


@pytest.mark.parametrize("text, height, width, problem", [
    ("|077|777|077|", 3, 3, None),
    ("|0|", 1, 1, None),
    ("|" + "9" * 30 + "|", 1, 30, None),
    (None, None, None, "is empty"),
    ("077|777", None, None, "does not start and end with '|'"),
    ("|07a|777|", None, None, "contains a character that is not a digit 0-9 or '|' ('a')"),
    ("| 7|77|", None, None, "contains a character that is not a digit 0-9 or '|' (' ')"),
    ("|07||77|", None, None, "has an empty row"),
    ("|", None, None, "has an empty row"),
    ("|077|77|", None, None, "has rows of uneven length (shortest 2 cells, longest 3)"),
    ("|" + "0|" * 31, None, None, "is larger than the 30 x 30 maximum (it is 31 x 1)"),
    ("|" + "1" * 31 + "|", None, None, "is larger than the 30 x 30 maximum (it is 1 x 31)"),
])
def test_grid_check_cases(text, height, width, problem):
    got = grid_problems([text]).row(0, named=True)
    assert (got["height"], got["width"]) == (height, width)
    if problem is None:
        assert got["problem"] is None
    else:
        assert got["problem"] is not None and got["problem"].startswith(problem), got["problem"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="0123456789|x ", min_size=0, max_size=40), min_size=1, max_size=20))
def test_grid_check_agrees_with_the_editor_parser(texts):
    """The vectorised check accepts exactly the strings engine.harc.parse_grid accepts, with its shape."""
    got = grid_problems(texts)
    for text, row in zip(texts, got.iter_rows(named=True), strict=True):
        try:
            shape = engine.harc.parse_grid(text).shape
        except engine.harc.GridFormatError:
            assert row["problem"] is not None, text
        else:
            assert row["problem"] is None, (text, row)
            assert (row["height"], row["width"]) == shape


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 30), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_arc_grid_round_trip(height, width, seed):
    """ARC JSON grid -> grid string (ingest) -> array (editor parser) gives the same grid back."""
    rows = np.random.default_rng(seed).integers(0, 10, size=(height, width)).tolist()
    text, h, w = grid_to_string(rows, "grid")
    assert text == engine.harc.format_grid(rows)
    assert (h, w) == (len(rows), len(rows[0]))
    assert np.array_equal(engine.harc.parse_grid(text), np.array(rows, dtype=np.uint8))
    assert grid_problems([text]).row(0) == (h, w, None)


@pytest.mark.parametrize("value, reason", [
    ([], "must be a non-empty list of rows"),
    ([[1, 2], [3]], "is not rectangular: row 0 has 2 cells, row 1 has 1"),
    ([[1, 10]], "cell (0, 1) is 10, expected an integer 0-9"),
    ([[True]], "cell (0, 0) is True, expected an integer 0-9"),
    ([[0] * 31], "is 1 x 31; sides must be 1-30"),
    ([1, 2], "every row must be a list of cells"),
])
def test_arc_grid_rejections(value, reason):
    with pytest.raises(ValueError) as err:
        grid_to_string(value, "train[0].input")
    assert err.value.reason == reason


# --- typed parsing ------------------------------------------------------------------------------


def test_time_accepts_the_four_formats_and_nothing_else():
    texts = ["2023-08-03T04:22:11.000000", "2023-08-03 04:22:11.000000", "8/3/2023, 4:22:11 AM",
             "8/3/2023, 16:22:11", "12/13/2023, 12:05:01 PM", "2023-02-30T01:00:00.000000", "yesterday", None]
    got = pl.DataFrame({"t": texts}).select(as_time("t")).to_series().to_list()
    assert got[:5] == [datetime(2023, 8, 3, 4, 22, 11), datetime(2023, 8, 3, 4, 22, 11),
                       datetime(2023, 8, 3, 4, 22, 11), datetime(2023, 8, 3, 16, 22, 11),
                       datetime(2023, 12, 13, 12, 5, 1)]
    assert got[5:] == [None, None, None]
    assert len(TIME_FORMATS) == 4


def test_a_file_may_mix_the_time_formats(tmp_path):
    rows = fx.data_rows()
    rows[1]["time"] = "2023-08-03 10:00:05.000000"
    rows[2]["time"] = "8/3/2023, 10:00:09 AM"
    rows[3]["time"] = "8/3/2023, 10:00:12"
    rows[4]["task_number"] = " 1 "  # padded integers and odd boolean spellings take the tolerant path
    rows[4]["solved"] = "f"
    out = read_data(ctx(fx.write_data(tmp_path / "data.csv", rows)))
    assert out.rejects == []
    acts = out.tables[ACTIONS].sort("row_number")
    assert acts["occurred_at"].to_list()[:5] == [datetime(2023, 8, 3, 10, 0, s) for s in (0, 5, 9, 12, 14)]
    assert acts.row(4, named=True)["task_number"] == 1 and acts.row(4, named=True)["is_solved"] is False
    assert acts["action_row"].to_list()[2] == 0  # "0.0" as pandas wrote the float column


def test_int_and_bool_parsing():
    ints = pl.DataFrame({"v": ["3", " 4 ", "5.0", "5.5", "x", None, "-1"]}).select(as_int("v")).to_series()
    assert ints.to_list() == [3, 4, 5, None, None, None, -1]
    bools = pl.DataFrame({"v": ["True", "false", "1", "0.0", "maybe", None]}).select(as_bool("v")).to_series()
    assert bools.to_list() == [True, False, True, False, None, None]


def test_vocabulary_matches_the_editor_replay():
    assert set(HARC_ACTIONS) == set(engine.harc.KNOWN_ACTIONS)


# --- headers ------------------------------------------------------------------------------------


def test_unknown_header_names_missing_and_unexpected_columns():
    variants = (Variant("small", ("a", "b", "c")), Variant("big", ("a", "b", "c", "d", "e")))
    assert match_variant(["c", "a", "b"], variants, "file").name == "small"  # order does not matter
    with pytest.raises(FileRejected) as err:
        match_variant(["a", "b", "x"], variants, "test file")
    assert err.value.check == "header_unknown"
    assert "closest is the small: missing c; unexpected x" in err.value.reason
    with pytest.raises(FileRejected) as err:
        match_variant(["a", "b", "b"], variants, "test file")
    assert "column(s) b appear more than once" in err.value.reason


def test_data_file_with_a_renamed_column_is_rejected(tmp_path):
    path = fx.write_data(tmp_path / "data.csv")
    path.write_text(path.read_text().replace("selected_tool", "tool", 1))
    with pytest.raises(FileRejected) as err:
        read_data(ctx(path))
    assert "missing selected_tool; unexpected tool" in err.value.reason


# --- data.csv -----------------------------------------------------------------------------------


def test_current_data_file_typed_values_and_flags(tmp_path):
    out = read_data(ctx(fx.write_data(tmp_path / "data.csv")))
    assert out.rejects == []
    acts = out.tables[ACTIONS].sort("row_number")
    assert acts.height == out.tables[RAW].height == 25
    assert set(acts["release_generation"]) == {"osf-current"}
    first = acts.row(0, named=True)
    assert first["participant_id"] == fx.HASH_A and first["task_id"] == "007bbfb7"
    assert first["task_file_name"] == "007bbfb7.json" and first["task_split"] == "training"
    assert first["occurred_at"] == datetime(2023, 8, 3, 10, 0, 0)
    edit = acts.row(2, named=True)  # A, 007bbfb7, event 3: edit at row 0, column 1
    assert (edit["action"], edit["action_row"], edit["action_col"], edit["selected_symbol"]) == ("edit", 0, 1, 7)
    assert (edit["test_output_grid"], edit["test_output_height"], edit["test_output_width"]) == ("|070|000|", 2, 3)
    assert (edit["test_input_height"], edit["test_input_width"]) == (2, 2)
    closing = acts.filter(pl.col("task_id") == "0d3d703e").row(-1, named=True)
    assert (closing["action"], closing["attempt_number"], closing["is_done"]) == ("write_last_description", 4, True)

    flags = flags_by_event(acts)
    assert flags[("007bbfb7", 1)] == ["input_placeholder"]
    assert all(flags[("007bbfb7", n)] == [] for n in range(2, 9))  # the undo at event 4 keeps sizes aligned
    assert flags[("0d3d703e", 7)] == []
    assert all(flags[("0d3d703e", n)] == ["size_lags_undo"] for n in range(8, 12))
    assert flags[("e9afcf9a", 2)] == ["tutorial", "no_terminal_row", "incomplete_participant"]
    assert flags[("00576224", 3)] == ["no_terminal_row", "incomplete_participant"]
    assert flags[("00576224", 4)] == ["no_terminal_row", "time_not_monotonic", "incomplete_participant"]
    assert acts.filter(pl.col("task_id") == "e9afcf9a")["is_tutorial"].to_list() == [True, True]


def test_participant_tasks(tmp_path):
    out = read_data(ctx(fx.write_data(tmp_path / "data.csv")))
    tasks = {r["task_id"]: r for r in out.tables[TASKS].iter_rows(named=True)}
    assert set(tasks) == {"007bbfb7", "0d3d703e", "e9afcf9a", "00576224"}
    a2 = tasks["0d3d703e"]
    assert (a2["first_description"], a2["last_description"]) == (fx.DESC_A2_FIRST, fx.DESC_A2_LAST)
    assert (a2["task_number"], a2["has_terminal_row"], a2["is_complete"], a2["flags"]) == (2, True, True, [])
    assert tasks["007bbfb7"]["last_description"] is None
    b = tasks["00576224"]
    assert (b["has_terminal_row"], b["is_complete"]) == (False, False)
    assert b["flags"] == ["no_terminal_row", "time_not_monotonic", "incomplete_participant"]
    assert tasks["e9afcf9a"]["flags"] == ["tutorial", "no_terminal_row", "incomplete_participant"]


def test_2024_data_file_uses_num_actions(tmp_path):
    out = read_data(ctx(fx.write_data(tmp_path / "clean_data.csv", release="2024")))
    acts = out.tables[ACTIONS]
    assert out.rejects == [] and acts.height == 25
    assert set(acts["release_generation"]) == {"2024"}
    assert acts.filter(pl.col("task_id") == "0d3d703e")["action_number"].sort().to_list() == list(range(1, 12))
    assert "2024 clean_data" in out.detection_evidence
    raw = out.tables[RAW].sort("row_number").row(0, named=True)
    assert raw["csv_num_actions"] == "1" and "csv_action_id" not in raw and raw["csv_action_x"] is None


def _raw_fields(raw: pl.DataFrame, header: list[str]) -> list[dict[str, str | None]]:
    """The raw table's rows (in row order) as {header name: text}: the fields as the file had them."""
    return [{h: r[raw_csv_column(h)] for h in header} for r in raw.sort("row_number").iter_rows(named=True)]


def test_raw_rows_keep_every_field_as_text(tmp_path):
    import csv

    path = fx.write_data(tmp_path / "data.csv")
    out = read_data(ctx(path))
    raw = out.tables[RAW]
    first = _raw_fields(raw, fx.DATA_COLUMNS)[0]
    assert first["first_written_solution"] == fx.DESC_A1 and first["action_y"] is None
    with open(path, newline="", encoding="utf-8") as fh:
        header, *records = csv.reader(fh)
    assert _raw_fields(raw, header) == [{h: v or None for h, v in zip(header, r, strict=True)} for r in records]
    # provenance is the file's sha256 and the row number; no per-row JSON or hash is stored
    assert set(raw["file_id"]) == {"f" * 64} and raw["row_number"].to_list() == list(range(1, 26))
    assert "row_json" not in raw.columns and "content_sha256" not in raw.columns


@pytest.mark.parametrize("row, change, check, column, reason", [
    (3, {"test_output_grid": "070|000"}, "grid_malformed", "test_output_grid",
     "test_output_grid does not start and end with '|'"),
    (3, {"action": "paste"}, "unknown_action", "action", "action is 'paste', not one of edit, floodfill"),
    (3, {"attempt_number": "0"}, "attempt_out_of_range", "attempt_number", "attempt_number is 0, outside 1-4"),
    (3, {"time": "03/08/2023 10:00"}, "time_unparsable", "time", "time '03/08/2023 10:00' is not a valid time"),
    (3, {"copy_paste_data": "[[0,1,"}, "invalid_json", "copy_paste_data", "copy_paste_data is not a JSON list"),
    (3, {"selected_symbol": "12"}, "out_of_range", "selected_symbol", "selected_symbol is 12, outside 0-9"),
    (3, {"solved": "yes please"}, "not_a_boolean", "solved", "solved is 'yes please', expected true or false"),
    (3, {"action_x": "0.5"}, "not_an_integer", "action_x", "action_x is '0.5', expected an integer"),
    (3, {"action_x": "12345678901234567890"}, "out_of_range", "action_x",
     "action_x is '12345678901234567890', outside -2**63..2**63-1 (the 64-bit integers)"),
    (3, {"action_x": "1e30"}, "out_of_range", "action_x", "action_x is '1e30', outside -2**53..2**53"),
    (3, {"hashed_id": ""}, "missing_value", "hashed_id", "hashed_id is empty"),
    (3, {"selected_tool": "lasso"}, "out_of_vocabulary", "selected_tool", "selected_tool is 'lasso'"),
    (3, {"test_output_size_y": "4"}, "size_mismatch", "test_output_size_x",
     "test_output_size_x/_y say 2 x 4 but test_output_grid is 2 x 3, and no undo"),
])
def test_row_defects_are_quarantined_with_a_reason(tmp_path, row, change, check, column, reason):
    rows = fx.data_rows()
    rows[row - 1] = {**rows[row - 1], **change}
    out = read_data(ctx(fx.write_data(tmp_path / "data.csv", rows)))
    mine = [r for r in out.rejects if r.check == check]
    assert [r.location for r in mine] == [f"row {row}"], out.rejects
    assert mine[0].column == column and mine[0].reason.startswith(reason), mine[0].reason
    assert mine[0].target_table == ACTIONS and json.loads(mine[0].raw_text)["action_id"] == str(row)
    assert out.tables[ACTIONS].height == 24 and row not in out.tables[ACTIONS]["row_number"].to_list()
    assert out.tables[RAW].height == 25  # the raw layer keeps the bad row


@pytest.mark.parametrize(("text", "check"), [("12345678901234567890", "out_of_range"),
                                             ("-9223372036854775809", "out_of_range"),
                                             ("9007199254740993.0", "out_of_range"), ("inf", "not_an_integer"),
                                             ("twelve", "not_an_integer")])
def test_an_integer_past_64_bits_is_out_of_range_not_not_an_integer(tmp_path, text: str, check: str):
    """An integer the column cannot hold was once rejected as `not_an_integer` ("expected an integer"): it is
    one. It now gets its own check, once, and the reason says the range."""
    rows = fx.data_rows()
    rows[2] = {**rows[2], "selected_symbol": text}
    out = read_data(ctx(fx.write_data(tmp_path / "data.csv", rows)))
    assert [(r.location, r.check, r.column) for r in out.rejects] == [("row 3", check, "selected_symbol")]


def test_bom_and_windows_line_endings(tmp_path):
    path = fx.write_data(tmp_path / "data.csv")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    out = read_data(ctx(path))
    assert out.rejects == [] and out.tables[ACTIONS].height == 25
    assert out.tables[RAW].sort("row_number")["csv_complete"][0] == "True"  # no stray \r


def test_blank_lines_are_skipped_and_rows_keep_their_line_based_numbers(tmp_path):
    path = fx.write_data(tmp_path / "data.csv")
    lines = path.read_text().split("\n")
    path.write_text("\n".join([*lines[:3], "", *lines[3:]]) + "\n")  # a blank line after data row 2
    out = read_data(ctx(path))
    assert out.rejects == [] and out.flags == ["blank_lines_skipped"]
    numbers = out.tables[ACTIONS].sort("row_number")["row_number"].to_list()
    assert numbers == [1, 2, *range(4, 27)]  # data row 3 is the 4th line after the header


def test_hashed_id_change_is_caught_as_a_joint_id_mismatch(tmp_path):
    rows = fx.data_rows()
    rows[0] = {**rows[0], "hashed_id": fx.HASH_B}
    out = read_data(ctx(fx.write_data(tmp_path / "data.csv", rows)))
    assert [(r.location, r.check) for r in out.rejects] == [("row 1", "joint_id_mismatch")]


# --- summary, errors, surveys -------------------------------------------------------------------


def test_summary_rows(tmp_path):
    out = read_summary(ctx(fx.write_summary(tmp_path / "summary_data.csv")))
    assert out.rejects == []
    att = out.tables[ATTEMPTS].sort("row_number")
    assert att["attempt_number"].to_list() == [1, 1, 2, 3]
    assert att["last_action_number"].to_list() == [8, 4, 6, 11]
    assert att["is_solved"].to_list() == [True, False, False, False]
    assert set(att["release_generation"]) == {"osf-current"}
    out24 = read_summary(ctx(fx.write_summary(tmp_path / "clean_summary_data.csv")))
    assert set(out24.tables[ATTEMPTS]["release_generation"]) == {"2024"}


@pytest.mark.parametrize("n_rows", [3, 10, 25])
def test_a_reason_names_at_most_ten_rows_of_a_key(tmp_path, n_rows):
    """A key on many rows with different contents: each row's reason names the first ten rows and how many there
    are (naming every row in every reason made a key on 400,000 rows of a 300 MB file take over 24 GB)."""
    first = fx.summary_rows()[0]
    rows = [{**first, "num_actions": str(10 + i)} for i in range(n_rows)]  # one (task, attempt), other contents
    out = read_summary(ctx(fx.write_summary(tmp_path / "summary_data.csv", rows)))
    reasons = [r.reason for r in out.rejects if r.check == "duplicate_attempt"]
    assert len(reasons) == n_rows and len(set(reasons)) == 1
    listed = ", ".join(str(n) for n in range(1, min(n_rows, 10) + 1))
    assert f"appears on rows {listed}{f', ... ({n_rows} rows in all)' if n_rows > 10 else ''} with" in reasons[0]


def test_an_arc_tgi_row_whose_task_is_too_large_for_any_task_is_quarantined_unparsed(tmp_path, monkeypatch):
    """`data` over MAX_TASK_BYTES, as an ARC task file over it is refused (a 17 MB task of 2x2 grids took 0.84 GB):
    the row is quarantined as `task_too_large` and the other rows load."""
    import pipeline.ingest.harc_arc as harc_arc

    rows = fx.tgi_rows(tmp_path / "EXECUTED")
    assert len(rows[0]["data"]) < len(rows[1]["data"])
    monkeypatch.setattr(harc_arc, "MAX_TASK_BYTES", len(rows[0]["data"].encode()))  # row 1's task: at the limit
    out = read_tgi(ctx(fx.write_tgi(tmp_path / "task0b148d64.csv", rows)))
    assert [(r.location, r.check, r.column) for r in out.rejects] == [("row 2", "task_too_large", "data")]
    assert "not parsed" in out.rejects[0].reason
    assert out.tables[TGI_TASKS]["row_number"].to_list() == [1]


def test_an_arc_tgi_task_id_on_many_rows_names_ten_of_them(tmp_path):
    first = fx.tgi_rows(tmp_path / "EXECUTED")[0]
    rows = [{**first, "task_variables": json.dumps({"rows": 2, "columns": 2, "border": i})} for i in range(12)]
    out = read_tgi(ctx(fx.write_tgi(tmp_path / "task0b148d64.csv", rows)))
    reasons = {r.reason for r in out.rejects if r.check == "duplicate_task"}
    assert reasons == {f"task_id {first['task_id']} appears on rows 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ... (12 rows in "
                       "all) with different contents"}


def test_a_release_file_far_larger_than_the_releases_is_refused_unread(tmp_path, monkeypatch):
    """The summary, incorrect-submissions and survey files are read whole: one over MAX_RELEASE_FILE_BYTES
    (ten times the release's largest) is refused as `file_too_large`, not read (a 300 MB summary took 3 GB)."""
    import pipeline.ingest.harc as harc

    path = fx.write_summary(tmp_path / "summary_data.csv")
    monkeypatch.setattr(harc, "MAX_RELEASE_FILE_BYTES", path.stat().st_size)
    assert read_summary(ctx(path)).tables[ATTEMPTS].height == 4  # at the limit: read
    monkeypatch.setattr(harc, "MAX_RELEASE_FILE_BYTES", path.stat().st_size - 1)
    monkeypatch.setattr(harc, "load_csv", lambda *a, **k: pytest.fail("a file over the limit was read"))
    with pytest.raises(FileRejected) as err:
        read_summary(ctx(path))
    assert err.value.check == "file_too_large" and "split it" in err.value.reason


def test_summary_keeps_attempt_4_out(tmp_path):
    rows = fx.summary_rows()
    rows[3] = {**rows[3], "attempt_number": "4"}
    out = read_summary(ctx(fx.write_summary(tmp_path / "summary_data.csv", rows)))
    assert [(r.location, r.check) for r in out.rejects] == [("row 4", "attempt_out_of_range")]
    assert "outside 1-3" in out.rejects[0].reason


def test_errors_with_and_without_md5(tmp_path):
    cur = read_errors(ctx(fx.write_errors(tmp_path / "incorrect_submissions.csv")))
    df = cur.tables[ERRORS].sort("row_number")
    assert df["n_submissions"].to_list() == [2, 1, 1] and df["output_grid_md5"].null_count() == 3
    assert set(df["release_generation"]) == {"osf-current"}
    old = read_errors(ctx(fx.write_errors(tmp_path / "clean_errors.csv", with_md5=True, bad_md5_row=2)))
    df = old.tables[ERRORS].sort("row_number")
    assert df["flags"].to_list() == [[], ["md5_mismatch"], []]
    assert set(df["release_generation"]) == {"2024"}


@pytest.mark.parametrize("release, readme_names", [("osf-current", False), ("osf-current", True), ("2024", False)])
def test_surveys(tmp_path, release, readme_names):
    paths = fx.write_surveys(tmp_path, release=release, readme_names=readme_names)
    fb = read_survey(ctx(paths["feedback"])).tables[FEEDBACK].sort("row_number")
    assert fb["participant_id"].to_list() == [fx.HASH_A, fx.HASH_B]
    assert fb["feedback_text"][0].startswith("fun, but task 2 was hard") and fb["feedback_text"][1] is None
    demo = read_survey(ctx(paths["demographics"])).tables[DEMOGRAPHICS].sort("row_number")
    assert demo["age"].to_list() == ["34", None]
    wd = read_survey(ctx(paths["withdraw"])).tables[WITHDRAWALS].sort("row_number")
    assert wd["is_withdrawn"].to_list() == [False, True]
    assert wd["withdraw_reason"].to_list() == [None, "It took too long"]
    assert set(fb["release_generation"]) == set(demo["release_generation"]) == {release}
    if release == "2024":
        assert demo["household_income"].to_list() == ["$50,000 - $74,999", None]
        assert demo["is_complete"].to_list() == [True, False]
        assert wd["flags"].to_list() == [[], ["incomplete_participant"]]
    else:
        assert demo["household_income"].null_count() == 2 and demo["is_complete"].null_count() == 2


# --- ARC task JSON ------------------------------------------------------------------------------


def test_single_task_file(tmp_path):
    out = read_task_json(ctx(fx.write_task(tmp_path / "007bbfb7.json", fx.TASK_007)))
    task = out.tables["core_arc__tasks"].row(0, named=True)
    assert (task["task_id"], task["n_train_pairs"], task["n_test_pairs"], task["has_test_outputs"]) == \
        ("007bbfb7", 2, 1, True)
    assert task["flags"] == []
    pairs = out.tables[PAIRS].sort("pair_split", "pair_index")
    assert pairs.select("pair_split", "pair_index", "input_grid", "output_grid").rows() == [
        ("test", 0, "|07|70|", "|070|000|"),
        ("train", 0, "|10|01|", "|100|010|"),
        ("train", 1, "|2|", "|200|"),
    ]


def test_task_flags_and_missing_test_outputs(tmp_path):
    task = {**fx.TASK_EVAL_NO_OUTPUT, "id": "somethingelse"}
    out = read_task_json(ctx(fx.write_task(tmp_path / "ConceptAboveBelow1.json", task)))
    row = out.tables["core_arc__tasks"].row(0, named=True)
    assert row["task_id"] == "ConceptAboveBelow1" and row["has_test_outputs"] is False
    assert row["flags"] == ["id_not_filename", "nonstandard_task_id", "extra_keys"]
    assert out.tables[PAIRS].filter(pl.col("pair_split") == "test")["output_grid"].to_list() == [None, None]


@pytest.mark.parametrize("task, check, reason", [
    ({"train": [{"input": [[1]], "output": [[1]]}]}, "task_structure", "task is missing test"),
    ({"train": [{"input": [[1, 2], [3]], "output": [[1]]}], "test": [{"input": [[1]]}]}, "grid_invalid",
     "task train[0].input is not rectangular: row 0 has 2 cells, row 1 has 1"),
    ({"train": [{"input": [[1]]}], "test": [{"input": [[1]]}]}, "task_structure",
     "task train[0] has no output grid (train pairs need one)"),
    ([{"train": []}], "task_structure", "an ARC task file holds a JSON object, this one holds a list"),
])
def test_bad_single_task_file_is_rejected(tmp_path, task, check, reason):
    with pytest.raises(FileRejected) as err:
        read_task_json(ctx(fx.write_task(tmp_path / "0000000a.json", task)))
    assert err.value.check == check
    assert err.value.reason.startswith(reason), err.value.reason


def test_collection_quarantines_only_the_bad_task(tmp_path):
    bad = {"train": [{"input": [[1, 12]], "output": [[1]]}], "test": [{"input": [[1]]}]}
    coll = {"007bbfb7": fx.TASK_007, "0badbad0": bad, "11223344": fx.TASK_EVAL_NO_OUTPUT}
    out = read_task_json(ctx(fx.write_task(tmp_path / "arc-agi_training_challenges.json", coll)))
    assert out.tables["core_arc__tasks"]["task_id"].to_list() == ["007bbfb7", "11223344"]
    assert [(r.location, r.check) for r in out.rejects] == [("task 0badbad0", "grid_invalid")]
    assert "cell (0, 1) is 12" in out.rejects[0].reason


# --- ARC-TGI ------------------------------------------------------------------------------------


def test_tgi_rows_are_loaded_and_code_is_never_run(tmp_path):
    marker = tmp_path / "EXECUTED"
    out = read_tgi(ctx(fx.write_tgi(tmp_path / "task0b148d64.csv", fx.tgi_rows(marker))))
    assert not marker.exists()
    assert out.rejects == []
    tasks = out.tables[TGI_TASKS].sort("row_number")
    assert tasks["code_text"].to_list() == [fx.tgi_code(marker)] * 2  # multi-line, quotes and commas intact
    assert tasks["generated_at"].to_list() == [datetime(2025, 1, 14, 9, 31, 2, 123456),
                                               datetime(2025, 1, 14, 8, 31, 5, 1)]
    assert tasks["flags"].to_list() == [[], ["offset_converted_to_utc"]]
    assert tasks["n_train_pairs"].to_list() == [1, 2]
    assert json.loads(tasks["task_variables_json"][0]) == {"rows": 2, "columns": 2, "border": 7}
    assert out.tables[PAIRS].height == 5


@pytest.mark.parametrize("column, value, check, reason", [
    ("task_variables", "{rows: 2}", "invalid_json", "task_variables is not valid JSON"),
    ("input_reasoning_chain", '{"a": 1}', "wrong_json_type", "input_reasoning_chain is a JSON dict, expected a list"),
    ("data", '{"train": []}', "task_structure", "data is missing test"),
    ("data", json.dumps({"train": [{"input": [[1]], "output": [[11]]}], "test": [{"input": [[1]]}]}),
     "grid_invalid", "data train[0].output cell (0, 0) is 11"),
    ("created_at", "last tuesday", "time_unparsable", "created_at 'last tuesday' is not an ISO-8601 time"),
])
def test_tgi_row_defects(tmp_path, column, value, check, reason):
    rows = fx.tgi_rows(tmp_path / "EXECUTED")
    rows[1] = {**rows[1], column: value}
    out = read_tgi(ctx(fx.write_tgi(tmp_path / "all.csv", rows)))
    assert [(r.location, r.check, r.column) for r in out.rejects] == [("row 2", check, column)]
    assert out.rejects[0].reason.startswith(reason), out.rejects[0].reason
    assert out.tables[TGI_TASKS]["row_number"].to_list() == [1]


# --- sniffing -----------------------------------------------------------------------------------


def _fixture_tree(root: Path) -> dict[str, str]:
    """Path name -> expected format for every valid fixture file."""
    fx.write_data(root / "data" / "data.csv")
    fx.write_data(root / "2024" / "clean_data.csv", release="2024")
    fx.write_summary(root / "data" / "summary_data.csv")
    fx.write_errors(root / "data" / "incorrect_submissions.csv")
    fx.write_errors(root / "2024" / "clean_errors.csv", with_md5=True)
    fx.write_surveys(root / "survey")
    fx.write_surveys(root / "2024", release="2024")
    fx.write_task(root / "arc" / "007bbfb7.json", fx.TASK_007)
    fx.write_task(root / "arc" / "challenges.json", {"007bbfb7": fx.TASK_007})
    fx.write_tgi(root / "tgi" / "all.csv", fx.tgi_rows(root / "EXECUTED"))
    return {
        "data.csv": "harc-data", "clean_data.csv": "harc-data", "summary_data.csv": "harc-summary",
        "incorrect_submissions.csv": "harc-errors", "clean_errors.csv": "harc-errors",
        "feedback.csv": "harc-survey", "demographics.csv": "harc-survey", "withdraw.csv": "harc-survey",
        "clean_feedback_data.csv": "harc-survey", "clean_demographics_data.csv": "harc-survey",
        "clean_withdraw_data.csv": "harc-survey", "007bbfb7.json": "arc-task", "challenges.json": "arc-task",
        "all.csv": "arc-tgi",
    }


def test_detection_by_content(tmp_path):
    expected = _fixture_tree(tmp_path)
    for path in sorted(p for p in tmp_path.rglob("*") if p.is_file()):
        fmt, evidence = detect(path)
        assert fmt is not None and fmt.name == expected[path.name], (path, evidence)
        renamed = path.with_name("renamed_" + path.stem + ".bin")
        renamed.write_bytes(path.read_bytes())
        assert detect(renamed)[0].name == expected[path.name]  # the name is only supporting evidence
        renamed.unlink()


def test_arc3_files_are_not_claimed():
    files = [p for p in (SHARED / "samples" / "arc-agi-3").rglob("*") if p.is_file()]
    files += list((SHARED / "conformance" / "environment_files").rglob("metadata.json"))
    assert len(files) > 10
    sniffers = (sniff_data, sniff_summary, sniff_errors, sniff_survey, sniff_task_json,
                pipeline.ingest.harc_arc.sniff_tgi)
    for path in files:
        head = read_head(path)
        assert [s.__name__ for s in sniffers if s(head)] == [], path


def _rows_with_defects_far_apart() -> list[dict[str, str]]:
    """The fixture's events plus rule breaks whose evidence lies in different batches when the file is read
    in small pieces: a conflicting duplicate and an exact copy at the end of the file, a bad grid, an unknown
    action, a quoted newline and a blank field."""
    rows = fx.data_rows()
    conflict = {**rows[2], "action_x": "2.0"}  # same (joint_id_task, action_id) as row 3, other contents
    rows[5] = {**rows[5], "test_output_grid": "|12|3|", "first_written_solution": "two\nlines, quoted"}
    rows[7] = {**rows[7], "action": "paste"}
    return [*rows, conflict, dict(rows[10])]


def _sorted_tables(out) -> dict[str, pl.DataFrame]:
    return {name: df.select(sorted(df.columns)).sort(pl.all()) for name, df in out.tables.items()}


@pytest.mark.parametrize("batch_bytes", [600, 1500, 4000])
def test_data_file_read_in_batches_gives_the_same_tables_and_rejects(tmp_path, batch_bytes):
    path = fx.write_data(tmp_path / "data.csv", _rows_with_defects_far_apart())
    whole = read_data(ctx(path), batch_bytes=1 << 30)
    assert whole.pieces is None  # one batch: returned whole
    batched = read_data(ctx(path), batch_bytes=batch_bytes)
    assert batched.pieces is not None and batched.tables == {}
    batched = batched.materialized()
    key = sorted((r.location, r.check, r.reason, r.raw_text, r.column, r.value) for r in whole.rejects)
    assert sorted((r.location, r.check, r.reason, r.raw_text, r.column, r.value) for r in batched.rejects) == key
    assert {r[1] for r in key} >= {"duplicate_action", "duplicate_row", "grid_malformed", "unknown_action"}
    assert sorted(batched.flags) == sorted(whole.flags)
    a, b = _sorted_tables(whole), _sorted_tables(batched)
    assert a.keys() == b.keys() == {RAW, ACTIONS, TASKS}
    for name in a:
        assert a[name].equals(b[name]), name


@pytest.mark.parametrize("extra_field", [False, True])  # True: polars refuses the file, the csv module reads it
@pytest.mark.parametrize("batch_bytes", [None, 700])
def test_the_second_pass_gives_the_batches_of_the_first(tmp_path, batch_bytes, extra_field):
    path = fx.write_data(tmp_path / "data.csv", _rows_with_defects_far_apart())
    if extra_field:
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join([*lines[:4], lines[4].rstrip("\n") + ",surplus\n", *lines[5:]]))
    header = read_header(path)
    source = CsvSource(path, header, RAW, batch_bytes)
    first = source.scan(lambda b: b)
    again = list(source.again())
    assert len(again) == len(first) >= 1
    assert (len(again) == 1) == (batch_bytes is None)  # the csv module's fallback reads in batches too
    for a, b in zip(again, first, strict=True):
        assert a.frame.equals(b.frame.drop(ROW_HASH)) and a.rejects == b.rejects and a.flags == b.flags
    assert ("csv_fallback_parser" in source.flags) == extra_field


def _with_surplus_field(path: Path, line: int = 4) -> Path:
    """The file with a surplus field on one line: polars refuses it, Python's csv module reads it."""
    lines = path.read_text().splitlines(keepends=True)
    lines[line] = lines[line].rstrip("\n") + ",surplus\n"
    path.write_text("".join(lines))
    return path


def test_the_csv_module_reads_a_big_file_in_batches_as_it_would_read_it_whole(tmp_path):
    """A file polars refuses is read by Python's csv module batch by batch (a 452 MB data.csv with one surplus field
    took 3 GB read whole): the same rows, numbers, hashes and rejects as in one batch, no batch much over its size."""
    rows = _rows_with_defects_far_apart() * 4
    path = _with_surplus_field(fx.write_data(tmp_path / "data.csv", rows))
    header = read_header(path)
    whole = CsvSource(path, header, RAW, None).scan(lambda b: b)
    source = CsvSource(path, header, RAW, 700)
    batches = source.scan(lambda b: b)
    assert source.mode == "csv" and len(whole) == 1 and len(batches) > 10
    lengths = [len(line) for line in path.read_text().splitlines()[1:]]
    assert max(b.frame.height for b in batches) <= (700 + max(lengths)) // min(lengths) + 1
    assert pl.concat([b.frame for b in batches]).equals(whole[0].frame)
    assert [r for b in batches for r in b.rejects] == list(whole[0].rejects)
    assert [r.check for r in whole[0].rejects] == ["field_count"]


@pytest.mark.parametrize("batch_bytes", [None, 700])
def test_only_the_row_with_surplus_fields_names_them_in_its_raw_json(tmp_path, batch_bytes):
    """row_json is a row's own fields: a row beside one with a surplus field gets no `__extra_fields` of null (it
    did when the file was read whole, so the same row read in another batch, or from a file without surplus
    fields, had another row_json)."""
    from pipeline.ingest.harc_csv import load_csv

    path = fx.write_data(tmp_path / "data.csv", _rows_with_defects_far_apart())
    plain = {r["row_number"]: r["row_json"] for r in load_csv(path, read_header(path), raw_table=RAW).frame.to_dicts()}
    _with_surplus_field(path)
    loaded = load_csv(path, read_header(path), raw_table=RAW, batch_bytes=batch_bytes or 1 << 30)
    mixed = {r["row_number"]: r["row_json"] for r in loaded.frame.to_dicts()}
    assert "csv_fallback_parser" in loaded.flags
    assert json.loads(mixed.pop(4))["__extra_fields"] == '["surplus"]'
    assert mixed == {n: text for n, text in plain.items() if n != 4}


@pytest.mark.parametrize("batch_bytes", [None, 1500])
def test_the_csv_module_keeps_the_record_limit_polars_reading_has(tmp_path, monkeypatch, batch_bytes):
    """In a file read by the csv module (a surplus field elsewhere): a field over the csv module's own 128 KiB limit
    loads, as polars loads it, and a record over MAX_RECORD_BYTES (one long line, or a quoted field over many
    lines) is quarantined as `record_too_long` without being held, the rows after it keeping their numbers."""
    import pipeline.ingest.harc_csv as harc_csv

    rows = fx.data_rows()
    rows[2] = {**rows[2], "first_written_solution": "w" * 200_000}
    rows[5] = {**rows[5], "first_written_solution": "y" * 400_000}
    rows[9] = {**rows[9], "last_written_solution": 'a "quoted", multi\nline\n' * 30_000}
    path = _with_surplus_field(fx.write_data(tmp_path / "data.csv", rows), line=-1)
    monkeypatch.setattr(harc_csv, "MAX_RECORD_BYTES", 300_000)
    out = read_data(ctx(path), batch_bytes=batch_bytes)
    if out.pieces is not None:
        try:
            out = out.materialized()
        except PiecesStartOver:  # the surplus field is in the last batch: read again, as the ingest does
            out = out.materialized()
    assert "csv_fallback_parser" in out.flags
    by_check = {r.location: r.check for r in out.rejects}
    assert by_check == {"row 6": "record_too_long", "row 10": "record_too_long", f"row {len(rows)}": "field_count"}
    too_long = [r for r in out.rejects if r.check == "record_too_long"]
    assert all(len(r.raw_text) <= 1024 and "longer than" in r.reason and "never closed" not in r.reason
               for r in too_long)
    raw = out.tables[RAW].sort("row_number")
    assert raw["row_number"].to_list() == [n for n in range(1, len(rows) + 1) if n not in (6, 10)]
    assert raw["extra_fields_json"].drop_nulls().to_list() == ['["surplus"]']
    assert raw.filter(pl.col("row_number") == 3)["csv_first_written_solution"].to_list() == ["w" * 200_000]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.none() | st.text(), max_size=20))
def test_sha256_texts_is_hashlib_sha256_of_the_utf8_text(texts):
    expected = [None if t is None else hashlib.sha256(t.encode()).hexdigest() for t in texts]
    assert sha256_texts(pl.Series("row_json", texts, dtype=pl.String)).to_list() == expected


@pytest.mark.parametrize("batch_bytes", [None, 1500])
def test_a_quoted_empty_field_is_read_like_an_unquoted_one(tmp_path, batch_bytes):
    import csv

    plain = fx.write_data(tmp_path / "plain" / "data.csv", _rows_with_defects_far_apart())
    quoted = tmp_path / "quoted" / "data.csv"
    quoted.parent.mkdir()
    with open(plain, newline="") as src, open(quoted, "w", newline="") as dst:
        csv.writer(dst, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(csv.reader(src))
    assert '""' in quoted.read_text()
    a, b = (read_data(ctx(p), batch_bytes=batch_bytes).materialized() for p in (plain, quoted))
    assert sorted(map(repr, a.rejects)) == sorted(map(repr, b.rejects)) and sorted(a.flags) == sorted(b.flags)
    assert _sorted_tables(a).keys() == _sorted_tables(b).keys()
    for name, df in _sorted_tables(a).items():
        assert df.equals(_sorted_tables(b)[name]), name


_FREE_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)


@settings(max_examples=25, deadline=None)
@given(texts=st.lists(st.tuples(_FREE_TEXT, _FREE_TEXT, _FREE_TEXT), min_size=25, max_size=25),
       crlf=st.booleans(), batch_bytes=st.sampled_from([500, 900, 2500]))
def test_batched_reading_keeps_every_field_of_tricky_rows(tmp_path_factory, texts, crlf, batch_bytes):
    """Quotes, commas, newlines, CR, control characters, non-ASCII and empty fields in the free-text columns,
    with LF or CRLF line ends: read in batches (parsed twice, the raw rows built on a second thread) the
    tables equal those of one batch, and each raw row is its fields as JSON, as Python's csv and json modules
    give them, hashed."""
    import csv
    import io

    rows = [{**row, "first_written_solution": a, "last_written_solution": b, "withdraw_comment": c}
            for row, (a, b, c) in zip(fx.data_rows(), texts, strict=True)]
    records = []
    for fields in [fx.DATA_COLUMNS, *[[r.get(c, "") for c in fx.DATA_COLUMNS] for r in rows]]:
        text = io.StringIO()
        csv.writer(text, lineterminator="\r\n").writerow(fields)  # quotes a field holding \r or \n
        records.append(text.getvalue().removesuffix("\r\n"))
    path = tmp_path_factory.mktemp("tricky") / "data.csv"
    path.write_bytes(("\r\n" if crlf else "\n").join([*records, ""]).encode())
    whole = read_data(ctx(path), batch_bytes=1 << 30)
    batched = read_data(ctx(path), batch_bytes=batch_bytes).materialized()
    assert sorted(map(repr, batched.rejects)) == sorted(map(repr, whole.rejects))
    a, b = _sorted_tables(whole), _sorted_tables(batched)
    for name in a:
        assert a[name].equals(b[name]), name
    with open(path, newline="", encoding="utf-8") as fh:
        header, *records = csv.reader(fh)
    expected = [{h: v or None for h, v in zip(header, r, strict=True)} for r in records]
    assert _raw_fields(batched.tables[RAW], header) == expected


@pytest.mark.parametrize("batch_bytes", [600, 1500])
def test_an_over_long_record_is_quarantined_without_being_held(tmp_path, monkeypatch, batch_bytes):
    import pipeline.ingest.harc_csv as harc_csv

    monkeypatch.setattr(harc_csv, "MAX_RECORD_BYTES", 3000)
    rows = fx.data_rows()
    rows[5] = {**rows[5], "first_written_solution": 'a "quoted", multi\nline ' + "x" * 8000}
    path = fx.write_data(tmp_path / "data.csv", rows)
    out = read_data(ctx(path), batch_bytes=batch_bytes)
    out = out.materialized() if out.pieces is not None else out
    too_long = [r for r in out.rejects if r.check == "record_too_long"]
    assert [r.location for r in too_long] == ["row 6"]
    assert "longer than" in too_long[0].reason and "never closed" not in too_long[0].reason
    assert too_long[0].raw_text.startswith(path.read_text().splitlines()[6][:40])
    monkeypatch.setattr(harc_csv, "MAX_RECORD_BYTES", 1 << 30)  # the same file, every record held
    whole = read_data(ctx(path), batch_bytes=1 << 30)
    raw, raw_whole = out.tables[RAW].sort("row_number"), whole.tables[RAW].sort("row_number")
    assert raw["row_number"].to_list() == [n for n in raw_whole["row_number"].to_list() if n != 6]
    assert raw.equals(raw_whole.filter(pl.col("row_number") != 6))  # the other rows keep their numbers and text


def test_an_unterminated_quote_running_to_the_end_is_quarantined(tmp_path, monkeypatch):
    import pipeline.ingest.harc_csv as harc_csv

    monkeypatch.setattr(harc_csv, "MAX_RECORD_BYTES", 3000)
    path = fx.write_data(tmp_path / "data.csv", fx.data_rows())
    n_rows = len(fx.data_rows())
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(',"'.join(["x"] * 5) + "y" * 9000)  # a last record whose quote is never closed
    out = read_data(ctx(path), batch_bytes=1500)
    out = out.materialized() if out.pieces is not None else out
    too_long = [r for r in out.rejects if r.check == "record_too_long"]
    assert [r.location for r in too_long] == [f"row {n_rows + 1}"]
    assert "never closed" in too_long[0].reason
    assert out.tables[RAW].height == n_rows


@settings(max_examples=60, deadline=None)
@given(records=st.lists(st.text(alphabet='ab,"\n\r', max_size=40), min_size=0, max_size=30),
       batch_bytes=st.integers(8, 120), max_record=st.sampled_from([30, 1 << 20]))
def test_the_second_pass_reads_the_pieces_the_first_pass_cut(tmp_path_factory, records, batch_bytes, max_record):
    """`_replayed_chunks` gives the very pieces `_record_chunks` cut (over-long records, unbalanced quotes and
    headers longer than a batch included), and the cut pieces cover the file after the header in order."""
    import pipeline.ingest.harc_csv as harc_csv

    path = tmp_path_factory.mktemp("cuts") / "data.csv"
    data = ("h1,h2\n" + "\n".join(records)).encode()
    path.write_bytes(data)
    saved, harc_csv.MAX_RECORD_BYTES = harc_csv.MAX_RECORD_BYTES, max_record
    try:
        cuts = harc_csv._Cuts()
        first = list(harc_csv._record_chunks(path, batch_bytes, cuts))
        assert list(harc_csv._replayed_chunks(path, cuts)) == first
    finally:
        harc_csv.MAX_RECORD_BYTES = saved
    ranges = [p for p in cuts.pieces if not isinstance(p, harc_csv.LongRecord)]
    assert [cuts.head + data[a:b] for a, b in ranges] == [p for p in first if isinstance(p, bytes)]
    if len(ranges) == len(cuts.pieces) and ranges:  # no record skipped: the pieces follow one another to the end
        assert ranges[0][0] == len(cuts.head) and ranges[-1][1] == len(data)
        assert all(b == c for (_, b), (c, _) in zip(ranges[:-1], ranges[1:], strict=True))


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.one_of(
    st.none(),
    st.text(alphabet="[]0123456789,- .e\"a{}", max_size=30),
    st.lists(st.lists(st.integers(-20, 120), max_size=3), max_size=4).map(lambda v: json.dumps(v, separators=(",", ":"))),
    st.lists(st.lists(st.integers(-20, 120), max_size=3), max_size=4).map(json.dumps)), max_size=30))
def test_json_list_shortcut_agrees_with_the_json_parser(texts):
    """`json_list_ok_series` (a regex for plain lists of integer lists, the JSON parser for the rest) says what
    `json_list_ok` says of every text, including the ones JSON refuses (leading zeros, "-0" is fine, "[01]" not)."""
    from pipeline.ingest.harc_csv import json_list_ok, json_list_ok_series

    values = pl.Series("t", texts, dtype=pl.String)
    expected = values.to_frame().select(json_list_ok("t")).to_series()
    assert json_list_ok_series(values).to_list() == expected.to_list()
    for text in ("[01]", "[[01]]", "[[1,02]]", "[[-0]]", "[]", "[[]]", "[[1],[2,3]]", "[1,2]", " [[1]]"):
        one = pl.Series("t", [text])
        assert json_list_ok_series(one).to_list() == one.to_frame().select(json_list_ok("t")).to_series().to_list(), text


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200) | st.text(alphabet='ab,"\n\ré', max_size=200).map(str.encode))
def test_a_piece_is_cut_after_the_last_newline_outside_quotes(data):
    """`_last_record_end` (quotes counted by numpy) cuts where counting with `bytes.count` cuts: after the last
    newline preceded by an even number of quotes (0: no such newline)."""
    from pipeline.ingest.harc_csv import _count_quotes, _last_record_end

    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A and data.count(b'"', 0, i + 1) % 2 == 0]
    assert _last_record_end(data) == (ends[-1] if ends else 0)
    assert all(_count_quotes(data, n) == data.count(b'"', 0, max(n, 0)) for n in (-1, 0, len(data) // 2, len(data)))


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.one_of(st.none(), st.text(alphabet="aAbé_1 ", max_size=4)), max_size=40))
def test_text_rank_sorts_like_the_texts(texts):
    from pipeline.ingest.harc import _text_rank

    values = pl.Series("v", texts, dtype=pl.String)
    frame = pl.DataFrame({"v": values, "rank": _text_rank(values.cast(pl.Categorical))})
    assert frame.sort("rank")["v"].to_list() == values.sort().to_list()
    assert frame.group_by("v").agg(pl.col("rank").n_unique())["rank"].max() in (None, 1)  # one rank per text


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from([1, 2, None]),
                               st.integers(0, 2), st.booleans()), max_size=30))
def test_duplicate_windows_over_sorted_runs_equal_the_grouped_ones(rows):
    """`duplicate_rules`' prep on a frame sorted by its key (run ids) gives what grouping by the key texts gives."""
    from pipeline.ingest.harc_csv import ROW, ROW_HASH, UNSPLIT, duplicate_rules

    df = pl.DataFrame({"k": [r[0] for r in rows], "n": [r[1] for r in rows], ROW_HASH: [r[2] for r in rows],
                       UNSPLIT: [r[3] for r in rows]}, schema={"k": pl.String, "n": pl.Int64, ROW_HASH: pl.UInt64,
                                                               UNSPLIT: pl.Boolean})
    df = df.with_row_index(ROW, offset=1).with_columns(pl.col(ROW).cast(pl.Int64)).sort("k", "n", ROW, nulls_last=True)
    prep, _ = duplicate_rules(["k", "n"], "duplicate_action")
    assert prep(df, sorted_by_key=True).equals(prep(df))


@pytest.mark.parametrize("batch_bytes", [1500, 1 << 30])
def test_only_rows_sharing_an_event_key_are_hashed_again(tmp_path, monkeypatch, batch_bytes):
    """The first pass leaves ROW_HASH out; the rows whose (joint_id_task, action_id) repeats get it from one
    more pass, and a file without such rows is not read a third time."""
    from pipeline.ingest.harc import _DataFile

    asked: list[list[int]] = []
    real = _DataFile.row_hashes

    def recorded(self, rows):
        asked.append(sorted(rows.to_list()))
        return real(self, rows)

    monkeypatch.setattr(_DataFile, "row_hashes", recorded)
    rows = _rows_with_defects_far_apart()
    path = fx.write_data(tmp_path / "dups" / "data.csv", rows)
    read_data(ctx(path), batch_bytes=batch_bytes).materialized()
    n = len(rows)
    assert asked == [[3, 11, n - 1, n]]  # the conflict repeats row 3's key, the last row is a copy of row 11
    asked.clear()
    read_data(ctx(fx.write_data(tmp_path / "clean" / "data.csv")), batch_bytes=batch_bytes).materialized()
    assert asked == []


_NUMBERISH = st.one_of(
    st.text(alphabet="0123456789-+. e_x\t٥", max_size=8),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: f"{n}.0"),
    st.integers(-(2**54), 2**54).map(lambda n: f"{n}.0"),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.none() | _NUMBERISH, max_size=30))
def test_typed_integers_are_what_as_int_reads(texts):
    """`typed`'s quick integer parses (exact text, then "3.0") agree with the tolerant `as_int` on every text."""
    from pipeline.ingest.harc_csv import ROW, typed

    df = pl.DataFrame({"s": texts}, schema={"s": pl.String}).with_row_index(ROW, offset=1)
    df = df.with_columns(pl.col(ROW).cast(pl.Int64))
    assert typed(df, ints={"n": "s"})["n"].to_list() == df.select(as_int("s"))["s"].to_list()


@pytest.mark.parametrize("bom", [False, True])
@pytest.mark.parametrize("batch_bytes", [None, 1500])
def test_a_header_line_repeated_inside_the_file_gets_one_clear_reject(tmp_path, bom, batch_bytes):
    """Two data.csv files joined end to end: the second header line is one `header_repeated` reject (not one per
    column), and every event row of both parts lands."""
    one = fx.write_data(tmp_path / "one" / "data.csv").read_bytes()
    path = tmp_path / "data.csv"
    path.write_bytes(one + (b"\xef\xbb\xbf" if bom else b"") + one)
    out = read_data(ctx(path), batch_bytes=batch_bytes)
    out = out.materialized() if out.pieces is not None else out
    n = len(fx.data_rows())
    header_rejects = [r for r in out.rejects if r.check == "header_repeated"]
    assert [r.location for r in header_rejects] == [f"row {n + 1}"]
    assert "repeats the header line" in header_rejects[0].reason
    assert [r for r in out.rejects if r.location == f"row {n + 1}"] == header_rejects
    assert out.tables[RAW].height == 2 * n + 1  # the raw table keeps every line
    # the two parts are the same events twice: every row of the second part is a copy of one of the first
    assert {r.check for r in out.rejects} == {"header_repeated", "duplicate_row"}
    assert out.tables[ACTIONS].height == n


def test_a_summary_file_with_its_header_repeated_gets_one_reject_for_it(tmp_path):
    one = fx.write_summary(tmp_path / "one" / "summary_data.csv").read_text()
    path = tmp_path / "summary_data.csv"
    path.write_text(one + one.split("\n", 1)[0] + "\n")
    out = read_summary(ctx(path))
    assert [(r.location, r.check) for r in out.rejects] == [(f"row {len(fx.summary_rows()) + 1}", "header_repeated")]
    assert out.tables[ATTEMPTS].height == len(fx.summary_rows())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.none() | st.text(alphabet="|0129x \n", max_size=10), max_size=30))
def test_grid_shape_is_rows_of_digits_between_bars(texts):
    """The grid shape test (built from the bar and character scans) is the regex ^|([0-9]+|)+$ on every text."""
    from pipeline.ingest.harc_csv import _grid_columns

    df = pl.DataFrame({"g": texts}, schema={"g": pl.String})
    got = _grid_columns(df, "g", "__g")["__g_shape_ok"].to_list()
    assert got == df.select(pl.col("g").str.contains(r"^\|([0-9]+\|)+$"))["g"].to_list()


_GRID_TEXTS = st.one_of(
    st.none(),
    st.text(alphabet="|0129x \n", max_size=12),
    # grids of up to 33 x 33 (past the 30 x 30 maximum), some with one row made shorter or longer
    st.builds(lambda h, w, row, d: "|" + "|".join("1" * (w + d if i == row else w) for i in range(h)) + "|",
              st.integers(1, 33), st.integers(0, 33), st.integers(0, 32), st.sampled_from([0, 0, -1, 1])),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_GRID_TEXTS, max_size=30))
def test_grid_columns_fast_path_matches_splitting_every_grid(texts):
    """The grid columns settled by one regex per row (well-formed grids) equal those of splitting every grid
    into rows and measuring them: shape, problem code and the numbers the reasons quote."""
    from pipeline.ingest.harc_csv import _grid_columns, _grid_columns_split

    df = pl.DataFrame({"g": texts}, schema={"g": pl.String})
    names = [f"__g_{k}" for k in ("shape_ok", "hraw", "wmin", "wmax", "code", "h", "w")]
    fast, split = _grid_columns(df, "g", "__g").select(names), _grid_columns_split(df, "g", "__g").select(names)
    assert fast.schema == split.schema
    assert fast.to_dicts() == split.to_dicts()


def test_the_grid_texts_the_reader_checked_are_not_regex_tested_again_by_the_schema_shortcut(tmp_path):
    """The data reader's kept rows passed its grid rule (stricter than the schema's grid regex): it says so
    (`proven`), and the schema's shortcut leaves those value checks out. Pandera, once anything else looks
    suspect, still checks every column, the grids included."""
    from schemas import validate_frame
    from schemas.validate import conform

    rows = fx.data_rows()
    rows[2] = {**rows[2], "test_output_grid": "070|000"}
    out = read_data(ctx(fx.write_data(tmp_path / "data.csv", rows)))
    assert [r.check for r in out.rejects] == ["grid_malformed"]  # the reader's own rule caught it
    proven = out.proven[ACTIONS]
    assert proven == {"test_input_grid", "test_output_grid"}
    actions = conform(ACTIONS, out.tables[ACTIONS])
    assert validate_frame(ACTIONS, actions, shortcut=False).ok  # what the reader kept passes pandera too
    # a grid that never went through the reader's rule: the shortcut trusts the claim, pandera does not
    bad_grid = actions.with_columns(pl.when(pl.col("row_number") == 1).then(pl.lit("070|000"))
                                    .otherwise(pl.col("test_output_grid")).alias("test_output_grid"))
    assert validate_frame(ACTIONS, bad_grid).failures  # no claim: the shortcut tests the regex
    assert validate_frame(ACTIONS, bad_grid, proven=proven).ok
    assert [f.column for f in validate_frame(ACTIONS, bad_grid, shortcut=False).failures] == ["test_output_grid"]
    # another suspect column sends the frame to pandera, which then reports the grid as well
    both = bad_grid.with_columns(pl.when(pl.col("row_number") == 2).then(pl.lit("paste"))
                                 .otherwise(pl.col("action")).alias("action"))
    failures = validate_frame(ACTIONS, both, proven=proven).failures
    assert {f.column for f in failures} == {"test_output_grid", "action"}


def test_the_second_pass_parses_clean_batches_for_the_checked_columns_only(tmp_path, monkeypatch):
    """A batch the first pass found clean is parsed again without the survey columns no rule reads; one
    where a rule then fails is parsed whole, so its rejects quote every field: the same as one batch."""
    from pipeline.ingest import harc_csv

    path = fx.write_data(tmp_path / "data.csv", _rows_with_defects_far_apart())
    whole = read_data(ctx(path), batch_bytes=1 << 30)
    calls: list[tuple[bytes, list[str] | None]] = []
    real = harc_csv._read_polars

    def spy(data, header, encoding, columns=None):
        calls.append((data, None if columns is None else list(columns)))
        return real(data, header, encoding, columns)

    monkeypatch.setattr(harc_csv, "_read_polars", spy)
    batched = read_data(ctx(path), batch_bytes=1500).materialized()
    narrow = [(data, c) for data, c in calls if c is not None]
    assert narrow and all("age" not in c and "withdraw" not in c and {"action", "complete"} <= set(c)
                          for _, c in narrow)
    # how often each narrow batch's bytes were parsed whole: by the first pass (and the one that hashes the rows
    # sharing a key), and once more where a rule failed in the second
    whole_parses = [sum(1 for d, c in calls if c is None and d == data) for data, _ in narrow]
    assert len(set(whole_parses)) == 2 and max(whole_parses) == min(whole_parses) + 1
    assert sorted((r.location, r.check, r.reason, r.raw_text) for r in batched.rejects) == sorted(
        (r.location, r.check, r.reason, r.raw_text) for r in whole.rejects)
    a, b = _sorted_tables(whole), _sorted_tables(batched)
    for name in a:
        assert a[name].equals(b[name]), name


def test_a_long_json_field_far_too_dense_is_not_parsed_and_says_so():
    """polars' JSON parser took 2 GB for one 15 MB `selected_data` of `[[0]],` repeated: such a text is not a JSON
    list to the check, unparsed, and its reason says why. A long plain list of cells is still one."""
    from pipeline.core.textfiles import DENSE_JSON_FROM_BYTES
    from pipeline.ingest.harc_csv import json_explain, json_list_ok_series

    dense = "[" + "[[0]]," * 200_000 + "[[0]]]"  # 1.2 MB, an array per 3 bytes
    plain = "[" + ",".join(["[1,2]"] * 200_000) + "]"  # 1.2 MB, the interface's own form
    assert len(dense) >= DENSE_JSON_FROM_BYTES and len(plain) >= DENSE_JSON_FROM_BYTES
    values = pl.Series("t", ["[[1,2]]", dense, plain, "{}"], dtype=pl.String)
    assert json_list_ok_series(values).to_list() == [True, False, True, False]
    reason = json_explain("selected_data")(dense)
    assert "arrays and objects" in reason and "not parsed" in reason


def test_a_json_fields_reason_reads_the_whole_value_not_its_clipped_text(tmp_path):
    """The reason of a JSON field that is not a list names where the JSON breaks in the whole value: read from the
    4096 characters kept in quarantine it said "at character 4096" of any long value."""
    from pipeline.ingest.harc_csv import UNSPLIT, RowCheck, apply_checks, json_explain, src

    broken = "[" + ",".join(["[1,2]"] * 1000) + "]]"  # 6 KB, the surplus bracket at its very end
    df = pl.DataFrame({"row_number": [2], src("selected_data"): [broken], "row_json": ["{}"], UNSPLIT: [False]})
    check = RowCheck("invalid_json", pl.lit(True), pl.lit("selected_data is not a JSON list"), "selected_data",
                     explain=json_explain("selected_data"))
    rejects, _ = apply_checks(df, [check], "core_harc__actions")
    reason = list(rejects)[0].reason
    assert reason.endswith(f"Extra data at character {len(broken) - 1}"), reason


@pytest.mark.parametrize(("text", "words"), [
    ('[[1, "\\ud800"]]', "lone surrogate"),
    ("[[NaN, 1]]", "NaN, Infinity"),
    ("[[1e400, 1]]", "too large for a float"),
    ("[[" + "1" * 4301 + ", 1]]", "4,300 digits"),
    ('{"a": 1}', "parses as a JSON dict, not a list"),
])
def test_the_reason_for_a_json_column_names_what_is_wrong(text, words):
    """Python's json reads NaN, 1e400 and a lone surrogate escape, which the column's rule refuses: the reason
    said "it parses as a JSON list, not a list" (and a 4,301-digit integer raised)."""
    from pipeline.ingest.harc_csv import json_explain

    reason = json_explain("selected_data")(text)
    assert words in reason and "a JSON list, not a list" not in reason, reason
