"""A corpus of malformed recordings, one defect per file: each defect is quarantined with the right
reason and location, the good lines of the same file still land, and the CLI exits with 3."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"
BASE = SAMPLES / "toolkit" / "bt33_click_three_levels.frames.jsonl"  # 29 lines, clicks, frames


def base_lines() -> list[dict]:
    return [json.loads(ln) for ln in BASE.read_text().splitlines()]


def dump(lines: list[dict | str]) -> str:
    return "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines)


def edit(i: int, fn: Callable[[dict], None]) -> Callable[[list], list]:
    def apply(lines: list) -> list:
        fn(lines[i])
        return lines
    return apply


def _set(path: str, value) -> Callable[[dict], None]:
    def apply(line: dict) -> None:
        obj = line
        keys = path.split(".")
        for k in keys[:-1]:
            obj = obj[k]
        obj[keys[-1]] = value
    return apply


def _frame_cell(value: int) -> Callable[[dict], None]:
    def apply(line: dict) -> None:
        line["data"]["frame"][0][10][20] = value
    return apply


def _frame_rows(n: int) -> Callable[[dict], None]:
    def apply(line: dict) -> None:
        line["data"]["frame"][0] = line["data"]["frame"][0][:n]
    return apply


def _earlier_time(lines: list) -> list:
    lines[12]["timestamp"] = "2020-01-01T00:00:00.000000+00:00"
    return lines


def _duplicate(lines: list) -> list:
    return lines[:8] + [lines[7]] + lines[8:]


def _broken_json(lines: list) -> list:
    lines[5] = json.dumps(lines[5])[:-40] + "}}"
    return lines


def _truncated(lines: list) -> str:
    return dump(lines[:-1]) + json.dumps(lines[-1])[:5000]  # cut mid-write: no closing newline


def _deeply_nested(lines: list) -> list:
    lines[5] = '{"data": ' * 5000 + "1" + "}" * 5000  # past any JSON parser's recursion limit
    return lines


def _number_too_long(i: int) -> Callable[[list], list]:
    def apply(lines: list) -> list:  # Python reads no integer of more than 4,300 digits
        lines[i]["data"]["action_input"]["reasoning"] = "__N__"
        lines[i] = json.dumps(lines[i]).replace('"__N__"', "1" * 4301)
        return lines
    return apply


def _other_game(lines: list) -> list:
    lines[6]["data"]["game_id"] = "zz99-0123abcd"
    return lines


# name -> (mutation, 1-based line that must be quarantined, check name, words expected in the reason)
DEFECTS: dict[str, tuple[Callable[[list], list | str], int, str, str]] = {
    "broken_json": (_broken_json, 6, "invalid_json", "not valid JSON"),
    "truncated_last_line": (_truncated, 29, "truncated_line", "cut off"),
    "wrong_type": (edit(3, _set("data.levels_completed", "one")), 4, "bad_levels", "must be an integer"),
    "click_out_of_range": (edit(4, _set("data.action_input.data.x", 64)), 5, "bad_click", "0-63"),
    "colour_out_of_range": (edit(9, _frame_cell(16)), 10, "bad_frame", "outside the 16-colour range"),
    "frame_not_64x64": (edit(10, _frame_rows(63)), 11, "bad_frame", "not a 64x64 grid"),
    "unknown_action_id": (edit(11, _set("data.action_input.id", "ACTION9")), 12, "unknown_action", "ACTION9"),
    "time_goes_backwards": (_earlier_time, 13, "time_goes_backwards", "earlier than the previous"),
    "duplicate_step": (_duplicate, 9, "duplicate_step", "repeats line 8"),
    "contradicts_play": (_other_game, 7, "contradicts_file", "differs from the file's"),
    # (the reader's rule, for every command: ingest's table check said `isin` and score counted the line)
    "state_outside_enum": (edit(14, _set("data.state", "PAUSED")), 15, "bad_state", '"PAUSED" is not one of'),
    "levels_exceed_win": (edit(15, _set("data.levels_completed", 9)), 16, "levels_exceed_win", "exceeds win_levels"),
    # Values of a type no column can hold: the line is quarantined, the file's other lines still land.
    "deeply_nested_line": (_deeply_nested, 6, "invalid_json", "nested too deeply"),
    "state_not_a_string": (edit(16, _set("data.state", ["WIN"])), 17, "bad_state", "must be a string"),
    "win_levels_over_64_bits": (edit(17, _set("data.win_levels", 2**70)), 18, "bad_levels", "64-bit"),
    "levels_over_64_bits": (edit(17, _set("data.levels_completed", -(2**70))), 18, "bad_levels", "64-bit"),
    "available_actions_not_a_list": (edit(18, _set("data.available_actions", "all")), 19, "bad_available_actions",
                                     "list of action ids"),
    "available_action_not_an_id": (edit(19, _set("data.available_actions", [6, True])), 20,
                                   "bad_available_actions", "list of action ids"),
    "available_action_float": (edit(20, _set("data.available_actions", [6, 1e999])), 21, "bad_available_actions",
                               "list of action ids"),
    # once stored as null (and so not counted as a full reset) without a word
    "full_reset_a_string": (edit(21, _set("data.full_reset", "true")), 22, "bad_full_reset", "true or false"),
    "full_reset_a_number": (edit(22, _set("data.full_reset", 1)), 23, "bad_full_reset", "got 1"),
    # once refused the whole file (a plain ValueError, an AttributeError) or stored where score, view and the
    # export counted, replayed or wrote it (a state or level count no table holds)
    "number_too_long": (_number_too_long(23), 24, "invalid_json", "more than 4,300 digits"),
    "click_data_not_an_object": (edit(24, _set("data.action_input.data", [3, 4])), 25, "bad_action_data",
                                 "must be an object"),
    "state_null": (edit(25, _set("data.state", None)), 26, "bad_state", "null is not one of"),
    "levels_negative": (edit(26, _set("data.levels_completed", -1)), 27, "bad_levels", "outside 0-254"),
    "levels_over_254": (edit(27, _set("data.levels_completed", 300)), 28, "bad_levels", "outside 0-254"),
    # valid JSON whose frame is one list deeper: it was said to be "not valid JSON (Expecting ',' delimiter ...)"
    "frame_one_list_deeper": (edit(8, lambda line: line["data"].update(frame=[line["data"]["frame"]])), 9,
                              "bad_frame", "not a 64x64 grid"),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("malformed")
    for name, (mutate, *_rest) in DEFECTS.items():
        lines = base_lines()
        guid = str(uuid.uuid5(uuid.NAMESPACE_URL, name))  # each file its own session, as on disk
        for ln in lines:
            ln["data"]["guid"] = guid
        mutated = mutate(lines)
        (folder / f"{name}.jsonl").write_text(mutated if isinstance(mutated, str) else dump(mutated))
    return folder


@pytest.mark.parametrize("name", list(DEFECTS))
def test_each_defect_is_quarantined_and_good_lines_land(corpus: Path, tmp_path: Path, name: str):
    _, line_no, check, words = DEFECTS[name]
    path = corpus / f"{name}.jsonl"
    n_lines = len(path.read_text().splitlines())
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [path], run_id="t")
        assert report.has_rejections
        q = ws.read("SELECT * FROM quarantine")
        assert q.height == 1, q
        row = q.row(0, named=True)
        assert row["source_location"] == f"line {line_no}"
        assert check in row["check_name"]
        assert words in row["reason"]
        assert row["raw_text"] and row["file_path"] == str(path.resolve())
        steps = ws.read("SELECT line_number FROM core_arc3__steps")["line_number"].to_list()
        assert line_no not in steps
        assert len(steps) == n_lines - 1  # every other line landed


def test_file_without_frame_lines_is_refused(tmp_path: Path):
    path = tmp_path / "usage_only.jsonl"
    path.write_text(dump([{"timestamp": "2026-04-01T03:04:19.555969+00:00",
                           "data": {"tokens": 1, "total_tokens": 1, "conversation_length": 1, "assistant": ""}}]))
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [path], run_id="t")
        assert report.files[0].status == "rejected"
        q = ws.read("SELECT check_name, reason, source_location FROM quarantine").row(0, named=True)
        assert q["check_name"] == "no_frame_line" and q["source_location"] == "file"
        assert ws.row_count("raw_ingest__files") == 0


def test_a_file_with_cr_only_line_ends_is_said_to_have_them_not_to_be_cut_off(tmp_path: Path):
    """Its records read as one line without a closing LF, which was reported as "the last line is cut off (file
    truncated mid-write)": the fix (convert the line ends) was nowhere in sight."""
    path = tmp_path / "old_mac.jsonl"
    path.write_bytes(dump(base_lines()).replace("\n", "\r").encode())
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [path], run_id="t")
        assert report.files[0].status == "rejected"
        q = {r["source_location"]: r for r in ws.read("SELECT * FROM quarantine").iter_rows(named=True)}
    assert q["line 1"]["check_name"] == "cr_line_ends", q
    assert q["line 1"]["reason"].startswith(f"the file's lines end with CR alone (old Mac line ends), so "
                                            f"{len(base_lines())} records were read as one line; convert its line "
                                            "ends to LF (`tr '\\r' '\\n' < FILE > FIXED`"), q["line 1"]["reason"]


def test_toolkit_file_without_leading_reset_loads_flagged(tmp_path: Path):
    # A recorder defect, not a broken file: make()'s RESET opened the play but was not written
    # (test_ingest_odd_files checks that it counts as the toolkit's card).
    path = tmp_path / "no_reset.jsonl"
    path.write_text(dump(base_lines()[1:]))
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [path], run_id="t")
        assert report.files[0].status == "loaded" and not report.has_rejections
        assert "no_opening_reset_line" in ws.read("SELECT flags FROM raw_ingest__files")["flags"][0]
        assert ws.row_count("core_arc3__steps") == 28


def test_unreadable_and_unknown_files_do_not_stop_the_run(tmp_path: Path):
    good = tmp_path / "good.jsonl"
    good.write_text(BASE.read_text())
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 4)
    gone = tmp_path / "gone.jsonl"
    gone.symlink_to(tmp_path / "does-not-exist.jsonl")
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [junk, gone, good], run_id="t")
        assert [f.status for f in report.files] == ["rejected", "unreadable", "loaded"]
        reasons = ws.read("SELECT file_path, reason FROM quarantine ORDER BY file_path")
        assert reasons.height == 2
        assert any("cannot read" in r for r in reasons["reason"])
        assert any("not recognised" in r for r in reasons["reason"])
        assert ws.row_count("core_arc3__steps") == 29


def test_cli_reports_rejections_with_exit_code_3(corpus: Path, tmp_path: Path):
    res = subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "ingest", str(corpus), "--db",
                          str(tmp_path / "cli.duckdb")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 3, res.stderr
    assert f"{len(DEFECTS)} records quarantined" in res.stdout
    with Workspace(tmp_path / "cli.duckdb", read_only=True) as ws:
        assert ws.row_count("quarantine") == len(DEFECTS)
        runs = ws.read("SELECT exit_code, manifest_json FROM runs")
        assert runs["exit_code"].to_list() == [3]
        assert len(json.loads(runs["manifest_json"][0])["inputs"]) == len(DEFECTS)


@pytest.mark.parametrize("where", ["middle", "last_without_newline"])
def test_a_line_over_the_size_limit_is_quarantined_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str):
    """A 200 MB line once took ~950 MB to read (its bytes, their copy, the parsed text, its re-serialization):
    memory grew with the line. A line over MAX_LINE_BYTES is now read in pieces, never held whole, and quarantined
    with its length; the file's other lines land and its sha256 still covers every byte."""
    import hashlib

    from pipeline.recordings import reader

    monkeypatch.setattr(reader, "MAX_LINE_BYTES", 64 * 1024)
    lines = [json.dumps(ln) for ln in base_lines()]
    huge = json.dumps({"timestamp": "2026-01-01T00:00:00+00:00", "data": {"note": "x" * 300_000}})
    if where == "middle":
        text, line_no = "\n".join([*lines[:5], huge, *lines[5:]]) + "\n", 6
    else:
        text, line_no = "\n".join([*lines, huge]), len(lines) + 1
    path = tmp_path / "huge_line.jsonl"
    path.write_text(text)
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [path], run_id="t", workers=1)
        assert report.files[0].status == "loaded" and report.has_rejections
        (row,) = ws.read("SELECT source_location, check_name, reason, raw_text FROM quarantine").rows(named=True)
        assert row["source_location"] == f"line {line_no}" and row["check_name"] == "line_too_long"
        ending = 1 if where == "middle" else 0
        assert f"{len(huge) + ending} bytes" in row["reason"] and len(row["raw_text"]) < 5000
        assert ws.row_count("core_arc3__steps") == len(lines)
        file_id = ws.read("SELECT file_id FROM raw_ingest__files")["file_id"][0]
        assert file_id == hashlib.sha256(path.read_bytes()).hexdigest()
        numbers = ws.read("SELECT line_number FROM core_arc3__steps ORDER BY 1")["line_number"].to_list()
        assert line_no not in numbers and max(numbers) == (len(lines) + 1 if where == "middle" else len(lines))
