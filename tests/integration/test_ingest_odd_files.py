"""Valid but odd files load, flagged; what cannot load is refused for the real reason.

- a UTF-8 byte-order mark and CRLF line endings, in every text format (recordings, CSV, JSON);
- a recording whose every line is not UTF-8 is refused for that, its lines quarantined;
- a human-dataset recording whose frame lines are missing but whose summary line is there loads its card;
- the recorder defects users report (no opening RESET line, action ids lost in a toolkit file, MAX_ACTIONS
  exceeded, a RESET written or sent twice) load flagged and count as the toolkit's card counted them;
- values over their size bound (guid, game_id, reasoning, assistant text) are quarantined, naming the field,
  its size and the bound.
Recordings are made from the shared toolkit samples by editing lines; scores are compared with the samples'
sidecars (the toolkit's own card and scores) where the defect does not change the toolkit's numbers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.recordings.counting import CardPlay
from pipeline.scoring import score_game
from pipeline.scoring.plays import read_recording_files, recordings_from_tables
from schemas import FIELDS
from schemas.arc3 import RECORDING_FLAGS
from tests.fixtures import harc as fx

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"
TOOLKIT = SAMPLES / "toolkit"
BT11 = TOOLKIT / "bt11_two_plays_fullreset.noframes.jsonl"  # 46 lines, two plays, level and full resets
HUMAN = SAMPLES / "human" / "vc33" / "82f713eb-a8b5-43fe-a7e2-ca6a5e9451c7.recording.jsonl"
BENCH = next((SAMPLES / "benchmarking").glob("*.recording.jsonl"))
POLICY = "arc-agi-3/2026-04"
BOM = b"\xef\xbb\xbf"


def sidecar(recording: Path) -> dict:
    return json.loads(recording.with_name(recording.name.replace(".jsonl", ".expected.json")).read_text())


def lines_of(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    return path


def windows(path: Path, *, crlf: bool = True) -> Path:
    """The file as a Windows tool saves it: a BOM in front, CRLF line ends."""
    raw = path.read_bytes()
    path.write_bytes(BOM + (raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n") if crlf else raw))
    return path


def ingest(tmp_path: Path, *paths: Path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    ws = Workspace(tmp_path / "db.duckdb")
    return ws, ingest_paths(ws, list(paths), run_id="t")


def scored_card(path: Path, recovered: dict | None = None):
    """The card `arcstudy score FILES` builds for one recording (None when its actions are unknown)."""
    steps, plays, files, problems = read_recording_files([path])
    (rec,) = recordings_from_tables(steps, plays, files, recovered)
    return rec.card, problems


def assert_scores_like_sidecar(card, expected: dict) -> None:
    game = score_game(card.game_id, card.plays, expected["baseline_actions"], POLICY)
    assert game.score == pytest.approx(expected["scored"]["game_score"], abs=1e-9)


def file_flags(ws: Workspace) -> set[str]:
    row = ws.read("SELECT flags, source_format FROM raw_ingest__files").row(0, named=True)
    if row["source_format"] == "arc3-recording":
        assert set(row["flags"]) <= RECORDING_FLAGS.keys(), "every recording flag is documented in schemas"
    return set(row["flags"])


# ------------------------------------------------------------------------------------------- BOM and CRLF
def _recording(folder: Path) -> Path:
    return Path(shutil.copy(BT11, folder / BT11.name))


def _metadata(folder: Path) -> Path:
    path = folder / "bt11" / "fd9df0622a1a" / "metadata.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"game_id": "bt11-fd9df0622a1a", "title": "bt11", "baseline_actions": [4, 8, 16]},
                               indent=1))
    return path


def _scorecard(folder: Path) -> Path:
    card = sidecar(BT11)["card"]
    path = folder / "card.json"
    path.write_text(json.dumps({"won": 0, "played": 1, "total_actions": card["total_actions"],
                                "levels_completed": 3, "cards": {card["game_id"]: card}}, indent=1))
    return path


def _task(folder: Path) -> Path:
    path = folder / "0a1b2c3d.json"
    path.write_text(json.dumps({"train": [{"input": [[1, 0]], "output": [[0, 1]]}],
                                "test": [{"input": [[1, 1]], "output": [[1, 1]]}]}, indent=1))
    return path


def _harc_csv(folder: Path) -> Path:
    return fx.write_data(folder / "data.csv")


def _manifest(folder: Path) -> Path:
    path = folder / "study.json"
    path.write_text(json.dumps({"format": "arcstudy-study-manifest/1", "study_id": "s1",
                                "participants": [{"participant_id": "p1"}],
                                "sessions": [{"session_id": "s1", "participant_id": "p1",
                                              "started_at": "2026-03-01T10:00:00+00:00"}],
                                "plays": [{"guid": "g1", "session_id": "s1"}]}, indent=1))
    return path


TEXT_FILES = {"recording": _recording, "metadata": _metadata, "scorecard": _scorecard, "arc_task": _task,
              "harc_csv": _harc_csv, "study_manifest": _manifest}


@pytest.mark.parametrize("crlf", [True, False], ids=["bom+crlf", "bom"])
@pytest.mark.parametrize("kind", list(TEXT_FILES))
def test_bom_and_crlf_load_like_the_plain_file_and_are_flagged(tmp_path: Path, kind: str, crlf: bool):
    (tmp_path / "plain").mkdir()
    (tmp_path / "odd").mkdir()
    plain = TEXT_FILES[kind](tmp_path / "plain")
    odd = windows(TEXT_FILES[kind](tmp_path / "odd"), crlf=crlf)
    ws, report = ingest(tmp_path / "a", plain)
    ws.close()
    ws, odd_report = ingest(tmp_path / "b", odd)
    with ws:
        (got,) = odd_report.files
        assert got.status == "loaded", got.message
        assert got.n_quarantined == 0
        assert got.source_format == report.files[0].source_format
        assert got.tables == report.files[0].tables  # the same records as the plain file
        flags = file_flags(ws)
        assert "utf8_bom" in flags
        assert ("crlf_line_endings" in flags) == crlf


def test_bom_recording_scores_like_its_sidecar(tmp_path: Path):
    path = windows(_recording(tmp_path))
    card, problems = scored_card(path)
    assert problems == []
    assert card.to_dict() == sidecar(BT11)["card"]


# ------------------------------------------------------------------------------------------- not UTF-8
def test_file_of_latin1_lines_is_refused_for_that_with_its_lines_quarantined(tmp_path: Path):
    path = tmp_path / "latin1.jsonl"
    text = BT11.read_text().splitlines()[:4]
    path.write_bytes(b"".join(ln.replace('"bt11', '"b\u00e9t11').encode("latin-1") + b"\n" for ln in text))
    ws, report = ingest(tmp_path, path)
    with ws:
        (got,) = report.files
        assert got.status == "rejected" and report.has_rejections
        assert "no line of the file is UTF-8 text" in got.message and "no frame line" not in got.message
        q = ws.read("SELECT source_location, check_name, reason FROM quarantine ORDER BY source_location")
        assert q.filter(q["source_location"] == "file")["check_name"].to_list() == ["not_utf8"]
        lines = q.filter(q["source_location"] != "file")
        assert lines["source_location"].to_list() == [f"line {i}" for i in range(1, 5)]
        assert set(lines["check_name"]) == {"not_utf8"}
        assert all("re-save the file as UTF-8" in r for r in lines["reason"])


# ------------------------------------------------------------------------------------------- summary only
def test_human_recording_without_frame_lines_loads_its_summary_card(tmp_path: Path):
    lines = HUMAN.read_text().splitlines()
    path = tmp_path / HUMAN.name  # the file name carries the session guid
    path.write_text(lines[0][:300] + "\n" + lines[-1] + "\n")  # first frame line cut, the rest lost
    ws, report = ingest(tmp_path, path)
    with ws:
        (got,) = report.files
        assert got.status == "loaded", got.message
        assert report.has_rejections  # the cut line is quarantined
        q = ws.read("SELECT source_location, check_name FROM quarantine")
        assert q.rows() == [("line 1", "invalid_json")]
        slots = ws.read("SELECT * FROM core_arc3__card_plays")
        expected = sidecar(HUMAN)["card"]
        assert slots.height == expected["total_plays"]
        assert slots["card_actions"].to_list() == expected["actions"]
        assert set(slots["line_number"]) == {2}
        assert ws.row_count("core_arc3__steps") == 0 and ws.row_count("core_arc3__plays") == 0
        assert "no_frame_lines" in file_flags(ws)


def test_file_with_neither_frame_line_nor_summary_is_refused_naming_the_quarantined_lines(tmp_path: Path):
    path = tmp_path / HUMAN.name
    path.write_text("\n".join(ln[:200] for ln in HUMAN.read_text().splitlines()[:3]) + "\n")
    ws, report = ingest(tmp_path, path)
    with ws:
        assert report.files[0].status == "rejected"
        assert "3 line(s) were quarantined (invalid_json x3; lines 1, 2, 3)" in report.files[0].message
        assert ws.row_count("quarantine") == 4


# ------------------------------------------------------------------------------------------- recorder defects
def test_toolkit_file_without_the_opening_reset_counts_as_the_toolkit_card(tmp_path: Path):
    path = write(tmp_path / BT11.name, lines_of(BT11)[1:])
    card, problems = scored_card(path)
    assert problems == []
    expected = sidecar(BT11)
    assert card.to_dict() == expected["card"]  # make()'s RESET opened play 1 and was never counted
    assert_scores_like_sidecar(card, expected)
    ws, report = ingest(tmp_path / "db", path)
    with ws:
        assert report.files[0].status == "loaded" and not report.has_rejections
        plays = ws.read("SELECT has_leading_reset, flags FROM core_arc3__plays ORDER BY play_index")
        assert "no_opening_reset_line" in plays["flags"][0]
        assert plays["has_leading_reset"].to_list() == [False, True]
        assert "no_opening_reset_line" in file_flags(ws)


@pytest.mark.parametrize("lost_id", ["RESET", 0])
def test_toolkit_file_with_lost_action_ids_is_flagged_and_scored_only_when_recovered(tmp_path: Path, lost_id):
    original = lines_of(BT11)
    lost = json.loads(json.dumps(original))
    for ln in lost:
        ln["data"]["action_input"] = {"id": lost_id, "data": {}, "reasoning": None}
    path = write(tmp_path / BT11.name, lost)
    card, _ = scored_card(path)
    assert card is None  # excluded from scoring, as for the benchmarking recorder
    recovered = [ln["data"]["action_input"]["id"] for ln in original if ln["data"]["win_levels"] != 0]
    card, _ = scored_card(path, {path.name: recovered})
    assert card.to_dict() == sidecar(BT11)["card"]
    ws, report = ingest(tmp_path / "db", path)
    with ws:
        assert report.files[0].status == "loaded"
        plays = ws.read("SELECT is_action_ids_lost, flags FROM core_arc3__plays")
        assert plays["is_action_ids_lost"].to_list() == [True]
        assert "action_ids_lost" in plays["flags"][0]


@pytest.mark.parametrize(("max_actions", "flagged"), [(2, True), (3, False)])
def test_more_actions_than_the_file_names_max_actions_is_flagged(tmp_path: Path, max_actions: int, flagged: bool):
    game, agent, guid = BENCH.name.split(".")[0], "randomagent", BENCH.name.split(".")[-3]
    path = Path(shutil.copy(BENCH, tmp_path / f"{game}.{agent}.{max_actions}.{guid}.recording.jsonl"))
    ws, report = ingest(tmp_path, path)
    with ws:
        assert report.files[0].status == "loaded"
        assert ws.row_count("core_arc3__steps") == 3  # the lines are counted as they are
        assert ("over_max_actions" in file_flags(ws)) == flagged


def test_repeated_opening_reset_opens_an_empty_play_as_on_the_toolkit_card(tmp_path: Path):
    lines = lines_of(BT11)
    again = json.loads(json.dumps(lines[0]))
    again["timestamp"] = lines[1]["timestamp"]  # sent (or written) again just before the first action
    path = write(tmp_path / BT11.name, [lines[0], again, *lines[1:]])
    card, problems = scored_card(path)
    assert problems == []
    expected = sidecar(BT11)
    assert card.plays[0] == CardPlay(guid=expected["guid"], actions=0, resets=0, state="NOT_FINISHED",
                                     levels_completed=0)
    assert card.to_dict()["actions"][1:] == expected["card"]["actions"]
    assert_scores_like_sidecar(card, expected)  # an empty play scores 0: the best play is unchanged
    ws, report = ingest(tmp_path / "db", path)
    with ws:
        assert not report.has_rejections
        assert {"leading_reset_repeated", "doubled_reset"} <= file_flags(ws)


def test_level_reset_written_twice_counts_once(tmp_path: Path):
    lines = lines_of(BT11)
    assert lines[8]["data"]["action_input"]["id"] == "RESET" and lines[8]["data"]["full_reset"] is False
    again = json.loads(json.dumps(lines[8]))
    again["timestamp"] = lines[9]["timestamp"]
    path = write(tmp_path / BT11.name, [*lines[:9], again, *lines[9:]])
    card, problems = scored_card(path)
    assert card.to_dict() == sidecar(BT11)["card"]
    assert [p.split(": ")[1] for p in (msg for _, msg in problems)] == ["doubled_reset"]
    ws, report = ingest(tmp_path / "db", path)
    with ws:
        q = ws.read("SELECT source_location, check_name, reason FROM quarantine").row(0, named=True)
        assert q["source_location"] == "line 10" and "counted it once" in q["reason"]
        assert "doubled_reset" in file_flags(ws)


# ------------------------------------------------------------------------------------------- size bounds
def test_oversized_identifiers_quarantine_their_line_naming_field_size_and_limit(tmp_path: Path):
    lines = lines_of(BT11)
    lines[4]["data"]["guid"] = "g" * 1_000_000
    lines[6]["data"]["game_id"] = "bt11-" + "f" * 5000
    path = write(tmp_path / BT11.name, lines)
    ws, report = ingest(tmp_path, path)
    with ws:
        q = ws.read("SELECT source_location, column_name, check_name, reason, failing_value FROM quarantine "
                    "ORDER BY source_location")
        guid = q.row(0, named=True)
        assert guid["source_location"] == "line 5" and guid["column_name"] == "guid"
        assert f"1000000 bytes, over the {FIELDS['guid'].max_bytes}-byte limit" in guid["reason"]
        assert len(guid["failing_value"]) < 5000  # the value is not stored whole
        game = q.row(1, named=True)
        assert game["source_location"] == "line 7" and game["check_name"] == "bad_game_id"
        assert "5005 bytes" in game["reason"]
        assert ws.row_count("core_arc3__steps") == len(lines) - 2
        assert ws.read("SELECT max(length(raw_json)) AS n FROM raw_arc3__recording_lines")["n"][0] < 5000


def test_oversized_reasoning_and_assistant_text_are_left_out_and_the_step_still_counts(tmp_path: Path):
    lines = lines_of(BT11)
    lines[3]["data"]["action_input"]["reasoning"] = {"thought": "x" * 20_000}
    path = write(tmp_path / BT11.name, lines)
    bench = lines_of(BENCH)
    usage = next(i for i, ln in enumerate(bench) if "tokens" in ln["data"])
    bench[usage]["data"]["assistant"] = "y" * (FIELDS["assistant_text"].max_bytes + 1)
    bench_path = write(tmp_path / BENCH.name, bench)
    ws, report = ingest(tmp_path, path, bench_path)
    with ws:
        q = ws.read("SELECT file_path, source_location, column_name, check_name, reason FROM quarantine "
                    "ORDER BY file_path")
        reasons = {r["column_name"]: r for r in q.iter_rows(named=True)}
        assert set(reasons) == {"reasoning_json", "assistant_text"}
        assert reasons["reasoning_json"]["source_location"] == "line 4"
        assert "over the 16384-byte limit" in reasons["reasoning_json"]["reason"]
        assert reasons["assistant_text"]["source_location"] == f"line {usage + 1}"
        step = ws.read("SELECT reasoning_json, flags, is_counted FROM core_arc3__steps WHERE line_number = 4 "
                       f"AND file_id = (SELECT file_id FROM raw_ingest__files WHERE file_name = '{BT11.name}')")
        assert step.rows() == [(None, ["reasoning_over_16kib"], True)]
        assert ws.read("SELECT assistant_text FROM core_arc3__usage WHERE line_number = ?",
                       [usage + 1])["assistant_text"].to_list() == [None]
        assert ws.row_count("core_arc3__steps") == len(lines) + len(bench) - 3  # bench: 3 usage lines
