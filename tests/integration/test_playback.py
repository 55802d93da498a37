"""Playback files (action scripts, spec/formats.md §A.7) end to end: score, ingest, view and replay.

The shared samples (shared/samples/playback-arc-agi-3) each have a sidecar with the toolkit's card and scored
entry when the file is replayed the playback agent's way (make(), then every action) on the conformance games.
A script's replay gets its own session guid (the toolkit's is random), so guids are compared for consistency,
not with the sidecar's.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.recordings.playback import read_playback_file, script_guid
from pipeline.scoring.plays import read_recording_files, recordings_from_tables, replay_scripts
from pipeline.scoring.storage import read_db_plays
from tests.sidecars import TOL, assert_close

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
PLAYBACK = SHARED / "samples" / "playback-arc-agi-3"
GAMES = SHARED / "conformance" / "environment_files"
SCRIPTS = sorted(PLAYBACK.glob("*.playback.jsonl"))
SLUG = "scorecard__arc-agi-3_2026-04.json"


def sidecar(script: Path) -> dict:
    return json.loads(script.with_name(script.name.replace(".jsonl", ".expected.json")).read_text())


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--plain", *args], catch_exceptions=False)
    return result.exit_code, result.output




def without_guids(entry: dict) -> dict:
    return {**entry, "runs": [{k: v for k, v in run.items() if k != "guid"} for run in entry["runs"]]}


def assert_card(card: dict, expected: dict, guid: str) -> None:
    assert card["guids"] == [guid] * expected["total_plays"]
    assert {k: v for k, v in card.items() if k != "guids"} == {k: v for k, v in expected.items() if k != "guids"}


def assert_scorecard(doc: dict, expected: dict, guid: str) -> None:
    (env,) = [e for e in doc["environments"] if e["id"] == expected["game_id"]]
    assert {run["guid"] for run in env["runs"]} == {guid}
    assert_close(without_guids(env), without_guids(expected["scored"]["environment"]))
    best = max(range(len(env["runs"])), key=lambda i: env["runs"][i]["score"])
    assert math.isclose(env["runs"][best]["score"], expected["scored"]["game_score"], abs_tol=TOL)


def test_the_playback_samples_are_there():
    assert len(SCRIPTS) == 4
    quirks = {sidecar(s).get("playback_quirk") for s in SCRIPTS}
    assert "other-version-id" in quirks


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_score_file_matches_the_sidecar(tmp_path: Path, script: Path):
    expected = sidecar(script)
    code, output = cli("score", str(script), "--games", str(GAMES), "--db", str(tmp_path / "s.duckdb"),
                       "--out", str(tmp_path / "out"), "--no-figures")
    assert code == 0, output
    guid = script_guid(read_playback_file(script).file_sha256)
    doc = json.loads((tmp_path / "out" / SLUG).read_text())
    assert_scorecard(doc, expected, guid)
    checks = doc["verification"]["replay_checks"]
    assert {c["status"] for c in checks} == {"verified"}
    assert {c["game_id"] for c in checks} == {expected["game_id"]}  # the version played is recorded
    assert {c["replayed_from_script"]["game_id_used"] for c in checks} == {expected["game_id"]}
    assert "replayed from an action script" in output

    # the card, read the way score reads the file
    steps, plays, files, problems = read_recording_files([script])
    assert problems == []
    replayed = replay_scripts(steps, plays, files, [GAMES])
    (rec,) = recordings_from_tables(replayed.steps, replayed.plays, replayed.files, scripts=replayed.scripts)
    assert_card(rec.card.to_dict(), expected["card"], guid)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("playback") / "playback.duckdb"
    with Workspace(db) as ws:
        report = ingest_paths(ws, SCRIPTS, run_id="test-playback")
        assert [f.status for f in report.files] == ["loaded"] * len(SCRIPTS)
        assert report.n_quarantined == 0
    return db


def test_ingest_auto_detects_and_stores_actions(ingested: Path):
    with Workspace(ingested, read_only=True) as ws:
        for script in SCRIPTS:
            parsed = read_playback_file(script)
            fid = parsed.file_sha256
            plays = ws.read("SELECT * FROM core_arc3__plays WHERE file_id = ?", [fid])
            steps = ws.read("SELECT * FROM core_arc3__steps WHERE file_id = ? ORDER BY line_number", [fid])
            raw = ws.read("SELECT * FROM raw_arc3__recording_lines WHERE file_id = ?", [fid])
            assert plays.height == 1 and plays["is_replay_needed"].to_list() == [True]
            assert plays["recording_variant"].to_list() == ["playback"]
            assert plays["game_id"].to_list() == [parsed.game_id]  # as the script names it
            assert steps.height == len(parsed.actions) and steps["state"].is_null().all()
            assert steps["action_id"].to_list() == [a.action_id for a in parsed.actions]
            assert raw.height == sidecar(script)["line_count"]
            files = ws.read("SELECT source_format, flags FROM raw_ingest__files WHERE file_id = ?", [fid])
            assert files["source_format"].to_list() == ["arc3-recording"]  # detected without --format
            assert "needs_replay" in files["flags"][0]


def test_score_from_the_database_matches_the_files(ingested: Path, tmp_path: Path):
    db = tmp_path / "copy.duckdb"
    shutil.copy(ingested, db)
    code, output = cli("score", "--games", str(GAMES), "--db", str(db), "--out", str(tmp_path / "out"),
                       "--no-figures")
    assert code == 0, output
    doc = json.loads((tmp_path / "out" / SLUG).read_text())
    for script in SCRIPTS:
        assert_scorecard(doc, sidecar(script), script_guid(read_playback_file(script).file_sha256))
    assert "1 line(s) without action_input skipped" in output  # an53's trailing test line, counted from the db

    with Workspace(db, read_only=True) as ws:
        steps, plays, files = read_db_plays(ws, [])
        stored = ws.read("SELECT game_id, replay_detail FROM out_arc3__replay_checks")
    replayed = replay_scripts(steps, plays, files, [GAMES])
    recs = {r.game_id: r for r in recordings_from_tables(replayed.steps, replayed.plays, replayed.files,
                                                          scripts=replayed.scripts)}
    for script in SCRIPTS:
        expected = sidecar(script)
        guid = script_guid(read_playback_file(script).file_sha256)
        assert_card(recs[expected["game_id"]].card.to_dict(), expected["card"], guid)
    ly28 = stored.filter(stored["game_id"] == "ly28-b026aa01")["replay_detail"].to_list()
    assert ly28 and all("names ly28-0badc0de" in d for d in ly28)


def test_unknown_version_resolves_by_code_and_is_recorded(tmp_path: Path):
    (script,) = [s for s in SCRIPTS if sidecar(s).get("playback_quirk") == "other-version-id"]
    assert read_playback_file(script).game_id == "ly28-0badc0de"
    code, output = cli("score", str(script), "--games", str(GAMES), "--db", str(tmp_path / "s.duckdb"),
                       "--out", str(tmp_path / "out"), "--no-figures")
    assert code == 0, output
    assert "version ly28-b026aa01 used" in output and "ly28-0badc0de" in output
    doc = json.loads((tmp_path / "out" / SLUG).read_text())
    for check in doc["verification"]["replay_checks"]:
        assert check["game_id"] == "ly28-b026aa01"
        assert check["replayed_from_script"] == {"script_game_id": "ly28-0badc0de", "game_id_used": "ly28-b026aa01",
                                                 "resolved_by_code": True, "n_actions": 29, "n_lines_skipped": 0}
    # --game-version pins a version: one that does not exist cannot be played
    code, output = cli("score", str(script), "--games", str(GAMES), "--db", str(tmp_path / "s.duckdb"),
                       "--out", str(tmp_path / "out2"), "--no-figures", "--game-version", "deadbeef")
    assert code == 3
    assert "version deadbeef of ly28 is not among the games" in output
    code, output = cli("score", str(script), "--games", str(GAMES), "--db", str(tmp_path / "s.duckdb"),
                       "--out", str(tmp_path / "out3"), "--no-figures", "--game-version", "b026aa01")
    assert code == 0, output


def test_line_without_action_input_is_skipped_and_counted(tmp_path: Path):
    (script,) = [s for s in SCRIPTS if s.name.startswith("an53")]
    parsed = read_playback_file(script)
    n_lines = sidecar(script)["line_count"]
    assert list(parsed.skipped_lines) == [n_lines] and len(parsed.actions) == n_lines - 1
    # one more annotation in the middle: skipped and counted, the score does not change
    lines = script.read_text().splitlines()
    edited = tmp_path / "an53_annotated.jsonl"
    edited.write_text("\n".join([*lines[:5], '{"data": {"note": "checkpoint"}}', *lines[5:]]) + "\n")
    assert len(read_playback_file(edited).skipped_lines) == 2
    code, output = cli("score", str(edited), "--games", str(GAMES), "--db", str(tmp_path / "s.duckdb"),
                       "--out", str(tmp_path / "out"), "--no-figures")
    assert code == 0, output
    assert "2 line(s) without action_input skipped" in output
    doc = json.loads((tmp_path / "out" / SLUG).read_text())
    expected = sidecar(script)
    (env,) = doc["environments"]
    assert_close(without_guids(env), without_guids(expected["scored"]["environment"]))


def test_unknown_game_is_refused_with_a_reason(tmp_path: Path):
    script = tmp_path / "zz99.jsonl"
    script.write_text('{"data": {"action_input": {"id": 1, "data": {"game_id": "zz99-12345678"}, '
                      '"reasoning": null}}}\n')
    code, output = cli("score", str(script), "--games", str(GAMES), "--db", str(tmp_path / "s.duckdb"),
                       "--out", str(tmp_path / "out"), "--no-figures")
    assert code == 3
    assert "no version of game zz99" in output and "cannot replay" in output
    assert not (tmp_path / "out" / SLUG).exists()  # no scorecard of zeros
    code, output = cli("replay", str(script), "--games", str(GAMES), "--out", str(tmp_path / "r.jsonl"))
    assert code == 3 and "no version of game zz99" in output
    code, output = cli("view", str(script), "--games", str(GAMES), "--out", str(tmp_path / "v.html"))
    assert code == 3 and "no version of game zz99" in output  # as score and replay (it once exited 1)
    assert not (tmp_path / "v.html").exists()


def _reasoning_too_large(line: str) -> bytes:
    obj = json.loads(line)
    obj["data"]["action_input"]["reasoning"] = "x" * 20_000  # over the toolkit's 16 KiB
    return json.dumps(obj).encode()


# name -> (bad line's bytes from a good one, check, the line's action still replayed?)
BAD_SCRIPT_LINES = {
    "nested_too_deeply": (lambda line: b'{"data": ' * 5000 + b"1" + b"}" * 5000, "invalid_json", False),
    "not_utf8": (lambda line: line.encode().replace(b'"reasoning":null', b'"reasoning":"\xff\xfe"'), "not_utf8",
                 False),
    "reasoning_too_large": (_reasoning_too_large, "reasoning_too_large", True),
    # a bare action id or a list is no record: it was skipped as an annotation, the action silently unplayed
    "bare_action_id": (lambda line: b"5", "not_a_record", False),
    "array": (lambda line: b'[{"data": {"action_input": {"id": 5}}}]', "not_a_record", False),
    # an escaped lone surrogate: json reads it into a string no UTF-8 output can hold (it refused the whole file,
    # and `view` crashed with a traceback)
    "lone_surrogate": (lambda line: line.encode().replace(b'"reasoning":null', b'"reasoning":"a\\ud800b"'),
                       "lone_surrogate", False),
}


@pytest.mark.parametrize("name", list(BAD_SCRIPT_LINES))
def test_a_bad_script_line_is_reported_and_the_rest_replays(tmp_path: Path, name: str):
    """Each once refused the whole file on ingest and crashed `replay` with a traceback (or, for bytes that are
    not UTF-8, was silently altered): now the line is reported with its check, the others still count."""
    (script,) = [s for s in SCRIPTS if s.name.startswith("ly28")]
    lines = script.read_text().splitlines()
    mutate, check, kept = BAD_SCRIPT_LINES[name]
    bad = tmp_path / f"ly28_{name}.playback.jsonl"
    bad.write_bytes(b"\n".join([lines[0].encode(), mutate(lines[1]), *(ln.encode() for ln in lines[2:])]) + b"\n")
    assert bad.read_bytes() != script.read_bytes()  # (the mutation took)
    parsed = read_playback_file(bad)
    assert [(i.location, i.check) for i in parsed.issues] == [("line 2", check)]
    assert len(parsed.actions) == len(read_playback_file(script).actions) - (0 if kept else 1)
    assert all(a.reasoning is None or len(a.reasoning) < 16 * 1024 for a in parsed.actions)
    code, output = cli("replay", str(bad), "--games", str(GAMES), "--out", str(tmp_path / "r.jsonl"))
    assert code == 3, output
    assert "Traceback" not in output and f"line 2: {check}" in output
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [bad], run_id="t", workers=1)
        assert report.files[0].status == "loaded" and report.has_rejections
        assert ws.read("SELECT source_location, check_name FROM quarantine").rows() == [("line 2", check)]
        assert ws.row_count("core_arc3__steps") == len(parsed.actions)


@pytest.mark.parametrize("frames", [True, False], ids=["frames", "no-frames"])
def test_replay_writes_a_recording_that_scores_like_the_script(tmp_path: Path, frames: bool):
    (script,) = [s for s in SCRIPTS if s.name.startswith("ly28")]
    out = tmp_path / "ly28.jsonl"
    code, output = cli("replay", str(script), "--games", str(GAMES), "--out", str(out),
                       "--frames" if frames else "--no-frames")
    assert code == 0, output
    lines = [json.loads(t) for t in out.read_text().splitlines()]
    assert lines[0]["data"]["action_input"]["id"] == "RESET" and lines[0]["data"]["full_reset"] is True
    assert len(lines) == len(read_playback_file(script).actions) + 1
    assert all(("frame" in ln["data"]) is frames for ln in lines)
    assert (tmp_path / "ly28.manifest.json").is_file()

    scores = []
    for target in (script, out):
        folder = tmp_path / f"out_{target.stem}"
        code, output = cli("score", str(target), "--games", str(GAMES), "--db", str(tmp_path / "s.duckdb"),
                           "--out", str(folder), "--no-figures")
        assert code == 0, output
        doc = json.loads((folder / SLUG).read_text())
        doc.pop("verification")
        scores.append(doc)
    assert scores[0] == scores[1]
    assert "playback script" not in output  # the written recording is an ordinary toolkit recording


def test_view_replays_a_script(tmp_path: Path, ingested: Path):
    (script,) = [s for s in SCRIPTS if s.name.startswith("ly28")]
    code, output = cli("view", str(script), "--games", str(GAMES), "--out", str(tmp_path / "v.html"))
    assert code == 0, output
    assert "replay: verified" in output and "version ly28-b026aa01 used" in output
    page = (tmp_path / "v.html").read_text()
    assert "ly28-b026aa01" in page
    guid = script_guid(read_playback_file(script).file_sha256)
    code, output = cli("view", f"{guid}/1", "--db", str(ingested), "--games", str(GAMES),
                       "--out", str(tmp_path / "v2.html"))
    assert code == 0, output
    assert "3 play(s)" in output and "replay: verified" in output


def test_scripts_among_recordings_score_alike_on_two_workers(tmp_path: Path):
    # Workers read and replay the recorded files; the scripts are replayed after (replay_scripts), whatever the
    # number of workers.
    recorded = SHARED / "samples" / "arc-agi-3" / "fixtures"
    cards = {}
    for workers in ("1", "2"):
        out = tmp_path / workers
        code, output = cli("score", *map(str, SCRIPTS), str(recorded), "--games", str(GAMES), "--workers", workers,
                           "--db", str(tmp_path / f"{workers}.duckdb"), "--out", str(out), "--no-figures")
        assert code == 0, output
        doc = json.loads((out / SLUG).read_text())
        assert {c["status"] for c in doc["verification"]["replay_checks"]} == {"verified"}
        scripts = {c["replayed_from_script"]["script_game_id"] for c in doc["verification"]["replay_checks"]
                   if c.get("replayed_from_script")}
        assert len(scripts) == len(SCRIPTS)  # one game each: every script was replayed and verified
        cards[workers] = {k: v for k, v in doc.items() if k not in ("created_at", "run", "manifest")}
    assert cards["1"] == cards["2"]


@pytest.mark.parametrize("command", ["score", "export-transitions", "view"])
def test_a_file_whose_first_line_is_nested_too_deeply_is_refused_with_a_reason(tmp_path: Path, command: str):
    """The first line decides what a file is: thousands of nested brackets there made the sniffers raise, so
    `score` and `export-transitions` refused the file as "RecursionError" and `view` as an unreadable input."""
    (script,) = [s for s in SCRIPTS if s.name.startswith("ly28")]
    bad = tmp_path / "ly28_deep.playback.jsonl"
    bad.write_text('{"data": ' * 5000 + "1" + "}" * 5000 + "\n" + script.read_text())
    out = tmp_path / ("v.html" if command == "view" else "out")
    code, output = cli(command, str(bad), "--games", str(GAMES), "--out", str(out))
    assert code in (2, 3), output  # (score and view: nothing to read; the export: a file rejected)
    assert "Recursion" not in output and "Traceback" not in output and "nested too deeply to read (thousands" not in output
    assert "ly28_deep.playback.jsonl" in output and ("first line" in output or "line 1" in output), output


def test_a_script_line_over_the_size_limit_is_reported_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from pipeline.recordings import reader

    monkeypatch.setattr(reader, "MAX_LINE_BYTES", 64 * 1024)
    (script,) = [s for s in SCRIPTS if s.name.startswith("ly28")]
    lines = script.read_text().splitlines()
    long_line = '{"data": {"action_input": {"id": 1, "reasoning": "' + "x" * 200_000 + '"}}}'
    bad = tmp_path / "ly28_long.playback.jsonl"
    bad.write_text("\n".join([long_line, *lines]) + "\n")
    parsed = read_playback_file(bad)
    assert [(i.location, i.check) for i in parsed.issues] == [("line 1", "line_too_long")]
    assert len(parsed.actions) == len(read_playback_file(script).actions)
    assert parsed.file_sha256 == __import__("hashlib").sha256(bad.read_bytes()).hexdigest()


def test_a_game_whose_code_cannot_load_is_named_with_the_loaders_reason(tmp_path: Path):
    """score said only "no version ... is loadable": the loader's reason (here: no game file) is kept."""
    games = tmp_path / "games"
    shutil.copytree(GAMES / "an53", games / "an53")
    (source,) = [p for p in (games / "an53").rglob("*.py")]
    source.rename(source.with_suffix(".txt"))
    script = PLAYBACK / "an53_scripted-lose.playback.jsonl"
    code, output = cli("score", str(script), "--games", str(games), "--db", str(tmp_path / "s.duckdb"),
                       "--out", str(tmp_path / "out"), "--no-figures")
    assert code == 3, output
    assert "no version of game an53" in output and "no an53.py or" in output


def test_a_script_with_a_byte_order_mark_is_read_as_without_it(tmp_path: Path):
    """A UTF-8 BOM (Windows tools write one) made the first line unreadable as JSON: the script was refused as
    "not a playback file" (replay) or as a recording with no frame line (score, ingest, export)."""
    script = SCRIPTS[0]
    bom = tmp_path / script.name
    bom.write_bytes(b"\xef\xbb\xbf" + script.read_bytes())
    read = read_playback_file(bom)
    assert read.has_bom and read.actions == read_playback_file(script).actions and read.issues == []
    expected = sidecar(script)
    code, output = cli("score", str(bom), "--games", str(GAMES), "--out", str(tmp_path / "out"), "--no-figures")
    assert code == 0, output
    assert_scorecard(json.loads((tmp_path / "out" / SLUG).read_text()), expected,
                     script_guid(read.file_sha256))
    with Workspace(tmp_path / "s.duckdb") as ws:
        report = ingest_paths(ws, [bom], run_id="test-bom")
        assert [f.status for f in report.files] == ["loaded"] and report.n_quarantined == 0
        (flags,) = ws.read("SELECT flags FROM raw_ingest__files")["flags"].to_list()
        assert "utf8_bom" in flags and "needs_replay" in flags


def test_a_scripts_replay_keeps_its_line_numbers_beside_narrow_stored_steps(tmp_path: Path):
    """`score --db` reads the stored steps in the narrowest types that hold them (`storage.read_narrow_steps`:
    two million steps of one file read in the stored types kept it over 1 GB). A script's replay has one line more
    than the script (make()'s opening RESET): 127 actions and a recording of 20 lines are read as bytes (Int8),
    and the replay's line 128 must not be cast into them."""
    (mz41,) = [s for s in SCRIPTS if s.name.startswith("mz41")]
    script = tmp_path / "mz41_first127.playback.jsonl"
    script.write_text("".join(mz41.read_text().splitlines(keepends=True)[:127]))
    (ck17,) = [s for s in SCRIPTS if s.name.startswith("ck17")]
    recording = tmp_path / "ck17.jsonl"
    code, output = cli("replay", str(ck17), "--games", str(GAMES), "--out", str(recording), "--no-frames")
    assert code == 0, output
    db = tmp_path / "s.duckdb"
    code, output = cli("ingest", str(script), str(recording), "--db", str(db))
    assert code == 0, output
    with Workspace(db, read_only=True) as ws:
        steps, _, _ = read_db_plays(ws, [])
        assert ws.read("SELECT max(line_number) FROM core_arc3__steps").item() == 127
    assert steps.schema["line_number"] == pl.Int8 and steps.schema["file_id"] == pl.Categorical
    cards = []
    for source in (["--db", str(db)], [str(script), str(recording), "--db", str(tmp_path / "files.duckdb")]):
        out = tmp_path / f"out{len(cards)}"
        code, output = cli("score", *source, "--games", str(GAMES), "--out", str(out), "--no-figures")
        assert code == 0, output
        doc = json.loads((out / SLUG).read_text())
        assert {c["status"] for c in doc["verification"]["replay_checks"]} == {"verified"}
        cards.append(sorted(doc["environments"], key=lambda e: e["id"]))
    assert cards[0] == cards[1] and len(cards[0]) == 2


def test_a_scripts_replay_is_read_without_its_lines_text(tmp_path: Path):
    """A script is scored from the recording its replay writes, read back by the one reader: nothing stores that
    recording's lines, so their text is not kept (it held about 0.3 KB a step: `score` of a 500,000-action script
    peaked at 0.92 GB)."""
    from pipeline.recordings.playback import replay_script_tables
    from pipeline.scoring.plays import STEP_COLUMNS

    (mz41,) = [s for s in SCRIPTS if s.name.startswith("mz41")]
    steps, plays, files, problems = read_recording_files([mz41], step_columns=STEP_COLUMNS)
    _, _, parsed, how, failed = replay_script_tables(steps, plays, [GAMES])
    assert not failed and list(how.values())[0].n_actions == len(read_playback_file(mz41).actions)
    (recording,) = parsed.values()
    assert len(recording.lines) == how[recording.file_sha256].n_actions + 1
    assert {line.raw_json for line in recording.lines} == {""}
