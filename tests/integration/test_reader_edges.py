"""Edges of the one recording reader that every command meets alike (ingest, score, view, export-transitions):
a file that opens with blank lines, fields written as null, and lines whose values no table holds, which score
and the export once counted, replayed or wrote while ingest quarantined them."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from games import GAMES_DIR
from pipeline.cli import app
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths

runner = CliRunner()
WIN = next(GAMES_DIR.glob("bg41/*/solutions/win.jsonl"))  # a shipped game's winning recording: replayable


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["--plain", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, " ".join(result.output.split())


def lines() -> list[dict]:
    return [json.loads(x) for x in WIN.read_text().splitlines() if x.strip()]


def write(path: Path, rows: list[dict], before: str = "") -> Path:
    path.write_text(before + "".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("blank", ["\n", "\r\n \n", "\n" * 70_000], ids=["one", "spaces-crlf", "past-the-head"])
def test_a_recording_that_opens_with_blank_lines_is_read_by_every_command(tmp_path: Path, blank: str):
    """Blank lines are skipped wherever they are; at the start they made ingest refuse the file ("content not
    recognised", or "the file is empty" past 64 KiB of them) and score and view say it was no recording."""
    path = write(tmp_path / "blank_first.jsonl", lines(), before=blank)
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [path], run_id="t", workers=1)
        assert report.files[0].status == "loaded" and not report.has_rejections
        assert ws.row_count("core_arc3__steps") == len(lines())
    code, output = cli("score", str(path), "--out", str(tmp_path / "score"), "--no-figures", "--workers", "1")
    assert code == 0, output
    code, output = cli("view", str(path), "--out", str(tmp_path / "v.html"))
    assert code == 0, output


@pytest.mark.parametrize("field", ["win_levels", "full_reset", "available_actions"])
def test_a_field_written_as_null_is_not_recorded_and_the_play_verifies(tmp_path: Path, field: str):
    """A stored step's null column is not compared by the replay; the same field written as null in the file
    was, so `"win_levels": null` made the whole play divergent in score (ingest loaded it, exit 0)."""
    rows = lines()
    rows[10]["data"][field] = None
    path = write(tmp_path / "null.jsonl", rows)
    code, output = cli("score", str(path), "--out", str(tmp_path / "score"), "--no-figures", "--workers", "1")
    assert code == 0, output
    checks = pl.read_csv(tmp_path / "score" / "replay_checks.csv")
    assert checks["verification_status"].to_list() == ["verified"]
    code, output = cli("export-transitions", str(path), "--out", str(tmp_path / "tr"))
    assert code == 0 and "0 play(s) cut" in output, output


# (the mutation of line 31's `data`, the check, words of the reason)
VALUES_NO_TABLE_HOLDS = {
    "state_outside_vocabulary": (lambda d: d.update(state="WINNING"), "bad_state", '"WINNING" is not one of'),
    "levels_negative": (lambda d: d.update(levels_completed=-1), "bad_levels", "outside 0-254"),
    "click_data_a_list": (lambda d: d["action_input"].update(data=[3, 4]), "bad_action_data", "must be an object"),
}


@pytest.mark.parametrize("name", list(VALUES_NO_TABLE_HOLDS))
@pytest.mark.parametrize("command", ["score", "export-transitions"])
def test_score_and_the_export_leave_out_the_lines_ingest_quarantines(tmp_path: Path, name: str, command: str):
    mutate, check, words = VALUES_NO_TABLE_HOLDS[name]
    rows = lines()
    mutate(rows[30]["data"])
    path = write(tmp_path / f"{name}.jsonl", rows)
    with Workspace(tmp_path / "db.duckdb") as ws:
        ingest_paths(ws, [path], run_id="t", workers=1)
        assert ws.read("SELECT source_location, check_name FROM quarantine").rows() == [("line 31", check)]
    out = tmp_path / "out"
    extra = ["--no-figures", "--workers", "1"] if command == "score" else []
    code, output = cli(command, str(path), "--out", str(out), *extra)
    assert code == 3, output
    assert f"line 31: {check}" in output and words in output, output
    if command == "export-transitions":  # the line is no step: the play is replayed without it, and cut there
        rows_out = pl.read_parquet(out / "data")
        assert 31 not in rows_out["line_number"].to_list()
        assert set(rows_out["state"].unique().to_list()) <= {"NOT_FINISHED", "WIN", "GAME_OVER"}
        assert rows_out["levels_completed"].min() >= 0


@pytest.mark.parametrize("cards", ["notadict", None, [1, 2]], ids=["text", "null", "list"])
def test_a_summary_line_whose_cards_are_not_an_object_is_quarantined(tmp_path: Path, cards):
    """It was read as no summary at all: the play flagged `no_trailing_summary`, exit 0, the line unsaid."""
    rows = lines()
    summary = {"timestamp": rows[-1]["timestamp"], "data": {"won": 1, "played": 1, "total_actions": 94,
                                                           "levels_completed": 7, "cards": cards}}
    path = write(tmp_path / "bad_summary.jsonl", [*rows, summary])
    last = len(rows) + 1
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [path], run_id="t", workers=1)
        assert report.has_rejections
        assert ws.read("SELECT source_location, check_name FROM quarantine").rows() == [(f"line {last}", "bad_card")]
        assert ws.row_count("core_arc3__steps") == len(rows)
    code, output = cli("score", str(path), "--out", str(tmp_path / "score"), "--no-figures", "--workers", "1")
    assert code == 3 and f"line {last}: bad_card" in output and "must be an object" in output, output


def test_an_export_of_a_file_holding_only_its_summary_card_says_there_is_no_step(tmp_path: Path):
    """A human-dataset file whose frame lines are missing still counts plays by its card (ingest stores it);
    the export has no step to give: it wrote "0 rows of 0 plays" and exited 0."""
    sample = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "human"
    source = sorted(sample.glob("*/*.recording.jsonl"))[0]
    path = tmp_path / "only_summary.jsonl"
    path.write_text(source.read_text().splitlines()[-1] + "\n")
    code, output = cli("export-transitions", str(path), "--out", str(tmp_path / "tr"))
    assert code == 3 and "only_summary.jsonl: no_frame_line" in output, output
