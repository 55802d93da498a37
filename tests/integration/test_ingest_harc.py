"""H-ARC, ARC task JSON and ARC-TGI files end to end: detection, tables, idempotency, and a malformed corpus.

Valid files: the fixtures of tests/fixtures/harc (current and 2024 releases, surveys under both names,
ARC task JSON, ARC-TGI with multi-line code) go through `arcstudy ingest` (exit 0) and land in their
tables with hand-counted row numbers.

Malformed corpus: one defect per file. The whole corpus goes through `arcstudy ingest` once (exit 3);
then each defect is checked on its own: the quarantine rows of that file (location, rule, column, reason),
the good rows of the same file that still landed, and that the file alone counts as rejected input (its
own quarantine count is what the CLI turns into exit code 3). Each corpus file uses its own participant
ids so that files never collide on primary keys.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from pipeline.cli import app
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from tests.fixtures import harc as fx

EXIT_OK, EXIT_REJECTED = 0, 3


def arcstudy_ingest(paths: list[Path], db: Path) -> Result:
    """`arcstudy --plain ingest PATHS --db DB`, run in-process (the interpreter start costs more than the test)."""
    return CliRunner().invoke(app, ["--plain", "ingest", *map(str, paths), "--db", str(db)])


# --- valid release files --------------------------------------------------------------------------

VALID_FILES = {
    "osf/data/data.csv": "harc-data", "osf/data/summary_data.csv": "harc-summary",
    "osf/data/incorrect_submissions.csv": "harc-errors", "osf/survey/feedback_data.csv": "harc-survey",
    "osf/survey/demographics_data.csv": "harc-survey", "osf/survey/withdraw_data.csv": "harc-survey",
    "2024/clean_data.csv": "harc-data", "2024/clean_data_incomplete.csv": "harc-data",
    "2024/clean_summary_data.csv": "harc-summary", "2024/clean_errors.csv": "harc-errors",
    "2024/clean_feedback_data.csv": "harc-survey", "2024/clean_demographics_data.csv": "harc-survey",
    "2024/clean_withdraw_data.csv": "harc-survey", "arc/007bbfb7.json": "arc-task",
    "arc/evaluation_challenges.json": "arc-task", "tgi/task0b148d64.csv": "arc-tgi",
}


def write_valid_tree(root: Path) -> None:
    rows = fx.data_rows()
    fx.write_data(root / "osf" / "data" / "data.csv", rows)
    fx.write_summary(root / "osf" / "data" / "summary_data.csv")
    fx.write_errors(root / "osf" / "data" / "incorrect_submissions.csv")
    fx.write_surveys(root / "osf" / "survey", readme_names=True)
    # 2024: complete and incomplete participants in separate files
    fx.write_data(root / "2024" / "clean_data.csv", [r for r in rows if r["hashed_id"] == fx.HASH_A], release="2024")
    fx.write_data(root / "2024" / "clean_data_incomplete.csv", [r for r in rows if r["hashed_id"] == fx.HASH_B],
                  release="2024")
    fx.write_summary(root / "2024" / "clean_summary_data.csv", fx.summary_rows()[::-1])  # not byte-identical
    fx.write_errors(root / "2024" / "clean_errors.csv", with_md5=True)
    fx.write_surveys(root / "2024", release="2024")
    fx.write_task(root / "arc" / "007bbfb7.json", fx.TASK_007)
    fx.write_task(root / "arc" / "evaluation_challenges.json",
                  {"11223344": fx.TASK_EVAL_NO_OUTPUT, "007bbfb7": fx.TASK_007})
    fx.write_tgi(root / "tgi" / "task0b148d64.csv", fx.tgi_rows(root / "EXECUTED"))



@pytest.fixture(scope="module")
def valid(tmp_path_factory, empty_db) -> tuple[Path, Path, Result]:
    root = tmp_path_factory.mktemp("harc_valid")
    write_valid_tree(root / "files")
    db = root / "valid.duckdb"
    db.write_bytes(empty_db.read_bytes())
    res = arcstudy_ingest([root / "files"], db)
    return root / "files", db, res


def test_valid_files_load_through_the_cli_with_exit_code_0(valid):
    files, db, res = valid
    assert res.exit_code == EXIT_OK, res.output
    assert "16 files: 16 loaded" in res.output
    with Workspace(db, read_only=True) as ws:
        assert ws.row_count("quarantine") == 0
        got = {Path(p).relative_to(files).as_posix(): f
               for p, f in ws.read("SELECT file_path, source_format FROM raw_ingest__files").rows()}
        assert got == VALID_FILES
        assert not (files / "EXECUTED").exists()


def test_valid_files_table_counts(valid):
    _, db, _ = valid
    expected = {
        "raw_harc__csv_rows": 25 + 4 + 3 + 2 * 3 + 25 + 4 + 3 + 2 * 3,
        "core_harc__actions": 50, "core_harc__participant_tasks": 8, "core_harc__attempts": 8,
        "core_harc__incorrect_submissions": 6, "core_harc__feedback": 4, "core_harc__demographics": 4,
        "core_harc__withdrawals": 4, "core_arc__tasks": 3, "core_arc__task_pairs": 3 + 3 + 3 + 5,
        "raw_arctgi__csv_rows": 2, "core_arctgi__tasks": 2,
    }
    with Workspace(db, read_only=True) as ws:
        assert {t: ws.row_count(t) for t in expected} == expected
        gens = ws.read("SELECT release_generation, count(*) AS n, count(DISTINCT participant_id) AS p, "
                       "sum(CASE WHEN is_complete THEN 1 ELSE 0 END) AS complete FROM core_harc__actions "
                       "GROUP BY 1 ORDER BY 1").rows()
        assert gens == [("2024", 25, 2, 19), ("osf-current", 25, 2, 19)]


def test_participant_local_times_and_rules_survive_the_database(valid):
    _, db, _ = valid
    with Workspace(db, read_only=True) as ws:
        lag = ws.read("SELECT action_number FROM core_harc__actions WHERE release_generation = 'osf-current' "
                      "AND list_contains(flags, 'size_lags_undo') ORDER BY 1")["action_number"].to_list()
        assert lag == [8, 9, 10, 11]
        back = ws.read("SELECT task_id, action_number, occurred_at::VARCHAR AS t FROM core_harc__actions WHERE "
                       "release_generation = '2024' AND list_contains(flags, 'time_not_monotonic')").rows()
        assert back == [("00576224", 4, "2023-08-03 09:05:20")]
        # the ARC truth joins the H-ARC submission by grid-string equality
        hit = ws.read("SELECT a.participant_id, a.is_solved FROM core_harc__attempts a JOIN core_arc__task_pairs p "
                      "ON p.task_id = a.task_id AND p.pair_split = 'test' AND p.pair_index = 0 "
                      "AND p.output_grid = a.test_output_grid JOIN core_arc__tasks t ON t.file_id = p.file_id "
                      "AND t.task_id = p.task_id WHERE t.file_name = '007bbfb7.json' "
                      "AND a.release_generation = 'osf-current'").rows()
        assert hit == [(fx.HASH_A, True)]


def test_reingest_is_idempotent(valid, tmp_path):
    files, db, _ = valid
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    with Workspace(copy) as ws:
        before = {t: ws.row_count(t) for t in ("core_harc__actions", "raw_harc__csv_rows", "quarantine")}
        report = ingest_paths(ws, [files], run_id="again")
        assert {f.status for f in report.files} == {"skipped"}
        forced = ingest_paths(ws, [files / "osf" / "data" / "data.csv"], run_id="force", force=True)
        assert [(f.status, f.n_quarantined) for f in forced.files] == [("loaded", 0)]
        assert {t: ws.row_count(t) for t in before} == before


def test_a_changed_file_at_the_same_path_replaces_the_old_version(valid, tmp_path):
    _, db, _ = valid
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    path = fx.write_data(tmp_path / "data.csv", relabel(fx.data_rows(), "replace"))
    with Workspace(copy) as ws:
        before = ws.row_count("core_harc__actions")
        assert ingest_paths(ws, [path], run_id="one").files[0].n_quarantined == 0
        assert ws.row_count("core_harc__actions") == before + 25
        fx.write_data(path, relabel(fx.data_rows()[:19], "replace"))  # participant B's rows removed
        report = ingest_paths(ws, [path], run_id="two")
        assert (report.files[0].status, report.files[0].n_quarantined) == ("replaced", 0)
        assert ws.row_count("core_harc__actions") == before + 19
        assert ws.row_count("core_harc__participant_tasks") == 8 + 2


# --- malformed corpus -----------------------------------------------------------------------------


def relabel(rows: list[dict[str, str]], name: str) -> list[dict[str, str]]:
    """The same rows under participant ids of their own (so corpus files never share a key)."""
    new = {fx.HASH_A: hashlib.md5(f"{name}/a".encode()).hexdigest(),
           fx.HASH_B: hashlib.md5(f"{name}/b".encode()).hexdigest()}
    out = []
    for r in rows:
        r = dict(r)
        for old, repl in new.items():
            for key in ("hashed_id", "joint_id_task"):
                if key in r:
                    r[key] = r[key].replace(old, repl)
        out.append(r)
    return out


def data_with(name: str, row: int, **change: str) -> Callable[[Path], Path]:
    def build(path: Path) -> Path:
        rows = relabel(fx.data_rows(), name)
        rows[row - 1] = {**rows[row - 1], **change}
        return fx.write_data(path, rows)
    return build


def edited_text(name: str, edit: Callable[[str], str], rows: Callable[[], list[dict]] = fx.data_rows,
                columns: list[str] = fx.DATA_COLUMNS) -> Callable[[Path], Path]:
    def build(path: Path) -> Path:
        path.write_text(edit(fx.csv_text(relabel(rows(), name), columns)), encoding="utf-8")
        return path
    return build


def _duplicate_row_3(rows: list[dict]) -> list[dict]:
    return rows[:3] + [dict(rows[2])] + rows[3:]


def _cut_inside_quotes(text: str) -> str:
    # the last row's last description holds a comma, so it is quoted; the file stops inside that quote
    return text[: text.rindex('"I gave up, sorry') + 10]


def _add_field_to_row_3(text: str) -> str:
    lines = text.split("\n")  # the data fixture has no multi-line fields: line k is row k
    lines[3] = lines[3].replace("expv2,", "expv2,oops,", 1)
    return "\n".join(lines)


def _withdraw_maybe(path: Path) -> Path:
    paths = fx.write_surveys(path.parent)
    for other in ("feedback", "demographics"):
        paths[other].unlink()
    path.write_text(paths["withdraw"].read_text().replace(",True,", ",maybe,"))
    return path


def _survey_row_ends_early(which: str, n_fields: int) -> Callable[[Path], Path]:
    """A survey file whose row 2 (participant B, every answer empty) stops after `n_fields` fields: its last
    column may be empty, so polars read it as a row of empty answers and it loaded, exit 0, without a word."""
    def build(path: Path) -> Path:
        paths = fx.write_surveys(path.parent)
        lines = paths[which].read_text().split("\n")
        lines[2] = ",".join(lines[2].split(",")[:n_fields])  # (B's answers are empty: no quoted comma)
        for written in paths.values():
            written.unlink()
        path.write_text("\n".join(lines))
        return path
    return build


def _errors_count_text(path: Path) -> Path:
    path.write_text(fx.write_errors(path).read_text().replace(",2\n", ",two\n"))
    return path


def _quote_to_the_end(path: Path) -> Path:
    lines = fx.write_errors(path).read_text().split("\n")
    lines[1] = lines[1].replace(",", ',"', 1)  # a quote opened in row 1 that no later quote closes
    path.write_text("\n".join(lines))
    return path


def _bad_byte_in_row_3(path: Path) -> Path:
    lines = fx.write_data(path, relabel(fx.data_rows(), "invalid_utf8")).read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b"expv2", b"exp\xffv2", 1)  # latin-1 debris in one row
    path.write_bytes(b"\n".join(lines))
    return path


def _tgi(edit: Callable[[list[dict]], list[dict]] | None = None,
         text_edit: Callable[[str], str] | None = None) -> Callable[[Path], Path]:
    def build(path: Path) -> Path:
        rows = fx.tgi_rows(path.parent / "EXECUTED")
        text = fx.csv_text(edit(rows) if edit else rows, fx.TGI_COLUMNS)
        path.write_text(text_edit(text) if text_edit else text, encoding="utf-8")
        return path
    return build


@dataclass(frozen=True)
class Defect:
    file: str
    build: Callable[[Path], Path]
    expected: list[tuple[str, str, str | None, str]]  # location, check, column, reason (prefix)
    table: str
    n_good: int  # rows of the file that still land in `table`


ACTIONS = "core_harc__actions"
DEFECTS: dict[str, Defect] = {
    "grid_no_bars": Defect("data.csv", data_with("grid_no_bars", 3, test_output_grid="070|000"),
                           [("row 3", "grid_malformed", "test_output_grid",
                             "test_output_grid does not start and end with '|'")], ACTIONS, 24),
    "grid_uneven_rows": Defect("data.csv", data_with("grid_uneven_rows", 5, test_output_grid="|070|00|"),
                               [("row 5", "grid_malformed", "test_output_grid",
                                 "test_output_grid has rows of uneven length (shortest 2 cells, longest 3)")],
                               ACTIONS, 24),
    "grid_non_digit": Defect("data.csv", data_with("grid_non_digit", 3, test_input_grid="|07|7x|"),
                             [("row 3", "grid_malformed", "test_input_grid",
                               "test_input_grid contains a character that is not a digit 0-9 or '|' ('x')")],
                             ACTIONS, 24),
    "grid_too_big": Defect("data.csv", data_with("grid_too_big", 3, test_output_grid="|" + "0|" * 31),
                           [("row 3", "grid_malformed", "test_output_grid",
                             "test_output_grid is larger than the 30 x 30 maximum (it is 31 x 1)")], ACTIONS, 24),
    "unknown_action": Defect("data.csv", data_with("unknown_action", 3, action="paste"),
                             [("row 3", "unknown_action", "action", "action is 'paste', not one of")], ACTIONS, 24),
    "attempt_5": Defect("data.csv", data_with("attempt_5", 3, attempt_number="5"),
                        [("row 3", "attempt_out_of_range", "attempt_number", "attempt_number is 5, outside 1-4")],
                        ACTIONS, 24),
    "attempt_4_on_submit": Defect(
        "data.csv", data_with("attempt_4_on_submit", 7, attempt_number="4"),
        [("row 7", "attempt_out_of_range", "attempt_number",
          "attempt_number 4 is only valid on the closing write_last_description row, but this row is 'submit'")],
        ACTIONS, 24),
    "time_unparsable": Defect("data.csv", data_with("time_unparsable", 3, time="2023-13-45T10:00:09.000000"),
                              [("row 3", "time_unparsable", "time",
                                "time '2023-13-45T10:00:09.000000' is not a valid time in a known format")],
                              ACTIONS, 24),
    "json_broken": Defect("data.csv", data_with("json_broken", 3, selected_data="[[0,1],"),
                          [("row 3", "invalid_json", "selected_data",
                            "selected_data is not a JSON list: Expecting value at character 7")], ACTIONS, 24),
    "json_not_a_list": Defect("data.csv", data_with("json_not_a_list", 3, copy_paste_data='{"cells": 1}'),
                              [("row 3", "invalid_json", "copy_paste_data",
                                "copy_paste_data is not a JSON list: it parses as a JSON dict, not a list")],
                              ACTIONS, 24),
    "duplicate_conflict": Defect(
        "data.csv", data_with("duplicate_conflict", 4, action_id="3"),
        [(f"row {n}", "duplicate_action", None, "joint_id_task=") for n in (3, 4)], ACTIONS, 23),
    "duplicate_copy": Defect(
        "data.csv", edited_text("duplicate_copy", lambda t: t, lambda: _duplicate_row_3(fx.data_rows())),
        [("row 4", "duplicate_row", None, "exact copy of row 3 (joint_id_task=")], ACTIONS, 25),
    "size_mismatch": Defect(
        "data.csv", data_with("size_mismatch", 3, test_output_size_y="4"),
        [("row 3", "size_mismatch", "test_output_size_x",
          "test_output_size_x/_y say 2 x 4 but test_output_grid is 2 x 3, and no undo")], ACTIONS, 24),
    "joint_id_mismatch": Defect(
        "data.csv", data_with("joint_id_mismatch", 9, task_name="007bbfb7.json"),
        [("row 9", "joint_id_mismatch", "joint_id_task", "joint_id_task '")], ACTIONS, 24),
    "truncated_last_row": Defect(
        "data.csv", edited_text("truncated_last_row", lambda t: t[: t.rindex("|333|333|333|") + 5]),
        [("row 25", "field_count", "complete",
          "row ends early: the last 24 of 40 fields are empty, from column test_output_size_x on (truncated "
          "row?); the file ends without a newline, so it was probably cut off")], ACTIONS, 24),
    "cut_inside_quotes": Defect(
        "data.csv", edited_text("cut_inside_quotes", _cut_inside_quotes, lambda: [
            *fx.data_rows()[:-1], {**fx.data_rows()[-1], "last_written_solution": "I gave up, sorry"}]),
        [("row 25", "csv_malformed", None, "row 25 cannot be split into fields (unexpected end of data)")],
        ACTIONS, 24),
    "extra_field": Defect(
        "data.csv", edited_text("extra_field", _add_field_to_row_3),
        [("row 3", "field_count", None, "row 3 has 41 fields but the header has 40")], ACTIONS, 24),
    "invalid_utf8": Defect(
        "data.csv", _bad_byte_in_row_3,
        [("row 3", "invalid_utf8", None, "row 3 holds bytes that are not valid UTF-8")], ACTIONS, 24),
    "wrong_header": Defect(
        "data.csv", edited_text("wrong_header", lambda t: t.replace(",complete\n", ",completed\n", 1)),
        [("file", "header_unknown", None, "H-ARC data file: the header is not a known column set; closest is the "
          "current (OSF) 40-column data.csv: missing complete; unexpected completed")], ACTIONS, 0),
    "summary_duplicate_attempt": Defect(
        "summary_data.csv", edited_text(
            "summary_duplicate_attempt", lambda t: t,
            lambda: [*fx.summary_rows()[:3], {**fx.summary_rows()[3], "attempt_number": "2"}], fx.SUMMARY_COLUMNS),
        [(f"row {n}", "duplicate_attempt", None, "joint_id_task=") for n in (3, 4)], "core_harc__attempts", 2),
    "summary_quote_swallows_a_row": Defect(  # the quote closes on the next line: that row is read into row 1
        "summary_data.csv", edited_text("summary_quote_swallows_a_row",
                                        lambda t: t.replace(",True\n", ',"True\n', 1), fx.summary_rows,
                                        fx.SUMMARY_COLUMNS),
        [("row 1", "csv_malformed", None, "row 1 cannot be split into fields (',' expected after '\"'): a quote is "
          "not closed or is followed by text. Fix the quoting of this row; it runs over 2 lines of the file, so "
          "any row written on its later lines was read into it and is not loaded")], "core_harc__attempts", 2),
    # the file's other rows were read into row 1 (once without a word, then said and lost): now that line alone is
    # left out and the lines after it load as rows of their own
    "errors_quote_to_the_end": Defect(
        "incorrect_submissions.csv", _quote_to_the_end,
        [("row 1", "csv_malformed", None, "row 1 cannot be split into fields: a quote opened on its line is never "
          "closed (the file ends inside it). Fix the quoting of this row; the lines after it are read as rows of "
          "their own")], "core_harc__incorrect_submissions", 2),
    "errors_count_text": Defect(
        "incorrect_submissions.csv",
        _errors_count_text,
        [("row 1", "not_an_integer", "count", "count is 'two', expected an integer")],
        "core_harc__incorrect_submissions", 2),
    "withdraw_not_boolean": Defect(
        "withdraw.csv",
        _withdraw_maybe,
        [("row 2", "not_a_boolean", "withdraw", "withdraw is 'maybe', expected true or false")],
        "core_harc__withdrawals", 1),
    "feedback_row_ends_early": Defect(
        "feedback.csv", _survey_row_ends_early("feedback", 3),
        [("row 2", "field_count", None, "row 2 has 3 fields but the header has 4 (fewer than expected")],
        "core_harc__feedback", 1),
    "demographics_row_ends_early": Defect(
        "demographics.csv", _survey_row_ends_early("demographics", 5),
        [("row 2", "field_count", None, "row 2 has 5 fields but the header has 10 (fewer than expected")],
        "core_harc__demographics", 1),
    "arc_collection_bad_task": Defect(
        "challenges.json",
        lambda p: fx.write_task(p, {"007bbfb7": fx.TASK_007, "0badbad0": {"train": [{"input": [[1, 12]],
                                "output": [[1]]}], "test": [{"input": [[1]]}]}}),
        [("task 0badbad0", "grid_invalid", None, "task 0badbad0 train[0].input cell (0, 1) is 12")],
        "core_arc__tasks", 1),
    # json gives up past about a thousand levels: the whole collection was refused for one task
    "arc_collection_deep_task": Defect(
        "challenges.json",
        lambda p: fx.write_task(p, {"007bbfb7": fx.TASK_007, "0deep000": "__DEEP__"}).write_text(
            p.read_text().replace('"__DEEP__"', '{"train": ' + "[" * 1000 + "]" * 1000 + ', "test": []}')) and p,
        [('task "0deep000"', "invalid_json", None, 'task "0deep000" is nested too deeply to read')],
        "core_arc__tasks", 1),
    "arc_task_not_rectangular": Defect(
        "0000000a.json",
        lambda p: fx.write_task(p, {"train": [{"input": [[1, 2], [3]], "output": [[1]]}], "test": [{"input": [[1]]}]}),
        [("file", "grid_invalid", None, "task train[0].input is not rectangular")], "core_arc__tasks", 0),
    "tgi_broken_json": Defect(
        "all.csv", _tgi(lambda rows: [rows[0], {**rows[1], "task_variables": "{rows: 1}"}]),
        [("row 2", "invalid_json", "task_variables", "task_variables is not valid JSON")], "core_arctgi__tasks", 1),
    "tgi_cut_inside_code": Defect(
        "all.csv", _tgi(text_edit=lambda t: t[: t.rindex("def transform_input")]),
        [("row 2", "csv_malformed", None, "row 2 cannot be split into fields (unexpected end of data)")],
        "core_arctgi__tasks", 1),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, empty_db) -> tuple[Path, Path, Result, dict[str, Path]]:
    root = tmp_path_factory.mktemp("harc_corpus")
    paths = {}
    for name, d in DEFECTS.items():
        folder = root / "files" / name
        folder.mkdir(parents=True)
        paths[name] = d.build(folder / d.file).resolve()
    db = root / "corpus.duckdb"
    db.write_bytes(empty_db.read_bytes())
    res = arcstudy_ingest([root / "files"], db)
    return root / "files", db, res, paths


def test_cli_exit_code_3_on_the_corpus(corpus):
    _, db, res, paths = corpus
    assert res.exit_code == EXIT_REJECTED, res.output
    n_expected = sum(len(d.expected) for d in DEFECTS.values())
    assert f"{n_expected} records quarantined" in res.output
    with Workspace(db, read_only=True) as ws:
        assert ws.read("SELECT count(DISTINCT file_path) AS n FROM quarantine")["n"][0] == len(DEFECTS)
        assert ws.read("SELECT exit_code FROM runs")["exit_code"].to_list() == [EXIT_REJECTED]


@pytest.mark.parametrize("name", list(DEFECTS))
def test_defect_is_quarantined_and_good_rows_land(corpus, name):
    _, db, _, paths = corpus
    defect = DEFECTS[name]
    path = paths[name]
    with Workspace(db, read_only=True) as ws:
        got = ws.read("SELECT source_location, check_name, column_name, reason, raw_text FROM quarantine "
                      "WHERE file_path = ? ORDER BY source_location", [str(path)]).rows()
        assert [(loc, check, col) for loc, check, col, _, _ in got] == [e[:3] for e in defect.expected], got
        for (_, _, _, reason, raw), (*_, expected_reason) in zip(got, defect.expected, strict=True):
            assert reason.startswith(expected_reason), reason
            assert raw, "the offending text is kept"
        files = ws.read("SELECT file_id, n_records_quarantined FROM raw_ingest__files WHERE file_path = ?",
                        [str(path)])
        if defect.expected[0][0] == "file":
            assert files.height == 0  # refused: nothing from it loaded
        else:
            assert files["n_records_quarantined"].to_list() == [len(defect.expected)]  # => exit code 3 alone
            n = ws.read(f"SELECT count(*) AS n FROM {defect.table} WHERE file_id = ?", [files["file_id"][0]])
            assert n["n"][0] == defect.n_good


def test_quarantined_data_row_keeps_its_fields(corpus):
    _, db, _, paths = corpus
    with Workspace(db, read_only=True) as ws:
        raw = ws.read("SELECT raw_text, failing_value FROM quarantine WHERE file_path = ?",
                      [str(paths["unknown_action"])]).row(0)
        assert json.loads(raw[0])["action"] == "paste" and raw[1] == "paste"
        kept = ws.read("SELECT count(*) AS n FROM raw_harc__csv_rows r JOIN raw_ingest__files f USING (file_id) "
                       "WHERE f.file_path = ?", [str(paths["unknown_action"])])
        assert kept["n"][0] == 25  # the raw layer holds the quarantined row too


def _harc_tables(db: Path) -> dict[str, list[tuple]]:
    with Workspace(db, read_only=True) as ws:
        tables = {name: sorted(ws.read(f"SELECT * FROM {name}").drop("file_id").rows())
                  for name in ("raw_harc__csv_rows", "core_harc__actions", "core_harc__participant_tasks")}
        tables["quarantine"] = sorted(ws.read(
            "SELECT source_location, check_name, column_name, failing_value, reason, raw_text FROM quarantine").rows())
        tables["files"] = ws.read("SELECT n_records_loaded, n_records_quarantined, flags FROM raw_ingest__files").rows()
    return tables


def test_a_data_file_written_in_pieces_lands_like_one_written_whole(tmp_path, empty_db, monkeypatch):
    """Pieces are spilled and moved into the tables in the file's one transaction: same rows, same quarantine,
    same file record."""
    rows = fx.data_rows()
    rows = [*rows, {**rows[2], "action_x": "2.0"}, dict(rows[10]), {**rows[4], "test_output_grid": "|1|22|"}]
    path = fx.write_data(tmp_path / "data" / "data.csv", rows)
    results = {}
    for batch_bytes in (1 << 30, 1500):
        monkeypatch.setattr("pipeline.ingest.harc.BATCH_BYTES", batch_bytes)
        db = tmp_path / f"{batch_bytes}.duckdb"
        db.write_bytes(empty_db.read_bytes())
        with Workspace(db) as ws:
            report = ingest_paths(ws, [path], run_id="pieces")
        assert [f.status for f in report.files] == ["loaded"]
        results[batch_bytes] = _harc_tables(db)
    whole, pieces = results.values()
    assert whole["quarantine"] and whole["core_harc__actions"]
    assert pieces == whole


def test_a_data_file_that_changes_before_its_pieces_are_written_is_refused(tmp_path, empty_db, monkeypatch):
    from pipeline.ingest.commit import commit_file
    from pipeline.ingest.runner import prepare_file

    monkeypatch.setattr("pipeline.ingest.harc.BATCH_BYTES", 1500)
    path = fx.write_data(tmp_path / "data" / "data.csv")
    db = tmp_path / "changed.duckdb"
    db.write_bytes(empty_db.read_bytes())
    with Workspace(db) as ws:
        prepared = prepare_file(path, run_id="changed")  # first pass: the task context
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:3] + lines[4:]))  # a row removed before the rows are read again
        report = commit_file(ws, prepared)
        assert report.status == "unreadable" and "changed since it was first read" in report.message
        assert ws.read("SELECT count(*) AS n FROM core_harc__actions")["n"][0] == 0
        assert ws.read("SELECT check_name FROM quarantine")["check_name"].to_list() == ["unreadable"]


def test_a_reader_bug_while_the_pieces_are_read_refuses_the_file_and_the_run_goes_on(tmp_path, empty_db,
                                                                                     monkeypatch):
    monkeypatch.setattr("pipeline.ingest.harc.BATCH_BYTES", 1500)
    path = fx.write_data(tmp_path / "data" / "data.csv")
    task = tmp_path / "task.json"
    task.write_text('{"train": [{"input": [[1]], "output": [[2]]}], "test": [{"input": [[3]], "output": [[4]]}]}')

    def buggy(*args, **kwargs):
        raise ZeroDivisionError("a reader bug (simulated)")

    monkeypatch.setattr("pipeline.ingest.commit._stage_pieces", buggy)
    db = tmp_path / "bug.duckdb"
    db.write_bytes(empty_db.read_bytes())
    with Workspace(db) as ws:
        report = ingest_paths(ws, [path, task], run_id="bug")
        statuses = {f.path.name: f.status for f in report.files}
        assert statuses["data.csv"] == "rejected" and "ZeroDivisionError" in report.files[0].message
        assert ws.read("SELECT count(*) AS n FROM core_harc__actions")["n"][0] == 0
        assert ws.read("SELECT check_name FROM quarantine")["check_name"].to_list() == ["reader_error"]


def test_a_reader_bug_in_a_later_piece_refuses_the_file_and_stops_the_reader(tmp_path, empty_db, monkeypatch):
    """The pieces are read on a thread ahead of the runner (`prefetched`): a reader bug in the third piece
    reaches the runner, nothing of the file lands, and the reading thread is gone."""
    import threading

    from pipeline.ingest.harc import _DataFile

    monkeypatch.setattr("pipeline.ingest.harc.BATCH_BYTES", 1500)
    path = fx.write_data(tmp_path / "data" / "data.csv")
    checked = []
    real = _DataFile.check_batch

    def buggy(self, *args, **kwargs):
        checked.append(1)
        if len(checked) == 3:
            raise ZeroDivisionError("a reader bug in piece 3 (simulated)")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(_DataFile, "check_batch", buggy)
    db = tmp_path / "bug3.duckdb"
    db.write_bytes(empty_db.read_bytes())
    with Workspace(db) as ws:
        report = ingest_paths(ws, [path], run_id="bug3")
        assert [f.status for f in report.files] == ["rejected"] and "ZeroDivisionError" in report.files[0].message
        assert len(checked) == 3
        assert ws.read("SELECT count(*) AS n FROM core_harc__actions")["n"][0] == 0
        assert ws.read("SELECT count(*) AS n FROM raw_harc__csv_rows")["n"][0] == 0
        assert ws.read("SELECT check_name FROM quarantine")["check_name"].to_list() == ["reader_error"]
    assert not [t for t in threading.enumerate() if t.name == "prefetch"]
