"""Failures said, not hidden: what the CLI says when input is wrong, through the command line.

- a play of a game that nothing knows (no game files, no baseline) is left out of the score with its reason
  (exit 3), unless --include-unknown-games; a game with a known baseline but no game files is still scored
  unverified;
- "no plays to score" says why for each file; `view` of a mistyped path says "no such file";
- configuration errors name the section ("[baselines]"), which rich markup used to swallow;
- no --help shows `<bool>` after a flag;
- the README tour's read-only commands find the demo database when ./arcstudy.duckdb does not exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import COMMANDS, app
from pipeline.scoring.run import UNKNOWN_GAME_REASON

ROOT = Path(__file__).resolve().parents[2]
LOSE = ROOT / "games" / "pv63" / "003f92f7" / "solutions" / "lose.jsonl"
UNKNOWN = "zz99-0badc0de"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--plain", *args], catch_exceptions=False)
    return result.exit_code, result.output


def cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "ARCSTUDY_DB"} | {"PYTHONPATH": str(ROOT)} | (env or {})
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture()
def unknown_recording(tmp_path) -> Path:
    """A real recording relabelled to a game id no game folder and no baseline source knows (a typo)."""
    path = tmp_path / "typo.jsonl"
    path.write_text(LOSE.read_text().replace("pv63-003f92f7", UNKNOWN))
    return path


def scorecard(out: Path) -> dict:
    return json.loads((out / "scorecard__arc-agi-3_2026-04.json").read_text())


def test_unknown_game_is_left_out_with_its_reason(unknown_recording, tmp_path):
    out = tmp_path / "out"
    code, text = run("score", str(unknown_recording), "--db", str(tmp_path / "a.duckdb"), "--out", str(out),
                     "--no-figures")
    assert code == 3, text
    assert "replay: 1 play: 1 unverified" in text and "left out of the score: 1 play\n" in text
    assert "unknown game" in text and "--include-unknown-games" in text
    card = scorecard(out)
    assert UNKNOWN not in json.dumps({k: v for k, v in card.items() if k != "verification"})
    checks = card["verification"]["replay_checks"]
    assert [(c["game_id"], c["status"], c["excluded"]) for c in checks] == [(UNKNOWN, "unverified", True)]
    assert "unknown game" in checks[0]["exclusion_reason"]


def test_unknown_game_is_scored_when_asked(unknown_recording, tmp_path):
    out = tmp_path / "out"
    code, text = run("score", str(unknown_recording), "--db", str(tmp_path / "a.duckdb"), "--out", str(out),
                     "--no-figures", "--include-unknown-games")
    assert code == 3, text  # scored, but nothing could be replay-verified (issue 27): said, exit 3
    assert "No Matching EnvironmentInfo" in text and "nothing could be verified" in text
    checks = scorecard(out)["verification"]["replay_checks"]
    assert [(c["status"], c["excluded"]) for c in checks] == [("unverified", False)]


def test_known_baseline_without_game_files_is_scored_unverified(unknown_recording, tmp_path):
    meta = tmp_path / "meta" / "zz99" / "0badc0de"
    meta.mkdir(parents=True)
    (meta / "metadata.json").write_text(json.dumps({"game_id": UNKNOWN, "baseline_actions": [5, 5, 5, 5, 5, 5]}))
    out = tmp_path / "out"
    code, text = run("score", str(unknown_recording), "--baselines", str(tmp_path / "meta"), "--db",
                     str(tmp_path / "a.duckdb"), "--out", str(out), "--no-figures")
    assert code == 3, text  # scored, but nothing could be replay-verified (issue 27): said, exit 3
    assert "1 play scored unverified: game not loadable" in text and "nothing could be verified" in text
    checks = scorecard(out)["verification"]["replay_checks"]
    assert [(c["status"], c["excluded"]) for c in checks] == [("unverified", False)]


def test_unknown_game_in_the_database_is_left_out(unknown_recording, tmp_path):
    db = tmp_path / "a.duckdb"
    code, text = run("ingest", str(unknown_recording), "--db", str(db))
    assert code == 0, text
    code, text = run("score", "--db", str(db), "--out", str(tmp_path / "out"), "--no-figures")
    assert code == 3, text
    assert "unknown game" in text
    code, text = run("score", "--db", str(db), "--game", "pv63-003f92f7")
    assert code == 1, text
    assert f"no plays of pv63-003f92f7 in the database {db}" in text


def _page_data(page: Path) -> dict:
    import re

    text = page.read_text()
    return json.loads(re.search(r'<script type="application/json" id="viewer-data">(.*?)</script>', text, re.S)
                      .group(1))


def test_view_says_what_score_says_of_an_unknown_game(unknown_recording, tmp_path):
    """view once wrote its page of a play of a game nothing knows with exit 0 and no word of it, where score
    leaves the play out (exit 3). The page is still written (the recording is shown), with the score's reason
    as a note, and the exit code is 3, from the recording file and from the database alike; with
    --include-unknown-games, or a baseline that knows the game, 0 as for the score."""
    code, score_text = run("score", str(unknown_recording), "--db", str(tmp_path / "s.duckdb"), "--out",
                           str(tmp_path / "out"), "--no-figures")
    assert code == 3 and UNKNOWN_GAME_REASON in " ".join(score_text.split()), score_text
    db = tmp_path / "a.duckdb"
    assert run("ingest", str(unknown_recording), "--db", str(db))[0] == 0
    guid = json.loads(unknown_recording.read_text().splitlines()[0])["data"]["guid"]
    for target, extra in ((str(unknown_recording), ()), (guid, ("--db", str(db))),
                          (str(unknown_recording), ("--no-verify",))):
        page = tmp_path / "v.html"
        code, text = run("view", target, "--out", str(page), *extra)
        assert code == 3, text
        assert f"note: left out of the score: {UNKNOWN_GAME_REASON}" in text and "Traceback" not in text
        assert _page_data(page)["notes"] == [f"left out of the score: {UNKNOWN_GAME_REASON}"]
        manifest = json.loads(page.with_name("v.manifest.json").read_text())
        assert manifest["exit_code"] == 3 and manifest["notes"]["viewer"]["left_out_of_score"] == UNKNOWN_GAME_REASON
    code, text = run("view", str(unknown_recording), "--out", str(tmp_path / "v.html"), "--include-unknown-games")
    assert code == 0 and "unknown game" not in text, text
    meta = tmp_path / "meta" / "zz99" / "0badc0de"
    meta.mkdir(parents=True)
    (meta / "metadata.json").write_text(json.dumps({"game_id": UNKNOWN, "baseline_actions": [5, 5, 5, 5, 5, 5]}))
    for baselines in (str(tmp_path / "meta"), "5,5,5,5,5,5"):
        code, text = run("view", str(unknown_recording), "--out", str(tmp_path / "v.html"), "--baselines", baselines)
        assert code == 0 and "unknown game" not in text, text
    code, text = run("view", str(LOSE), "--out", str(tmp_path / "v.html"))  # a game of games/: verified
    assert code == 0 and "replay: verified" in text, text


def test_odd_entries_of_a_folder_are_reported_not_skipped(tmp_path):
    """A FIFO, a dangling symlink and a symlink loop named *.jsonl in a folder given to score once vanished
    without a word (only regular files were listed); an empty file was 'not an ARC-AGI-3 recording'. Each is
    now rejected input with its reason, the good recording is scored, exit 3."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "good.jsonl").write_bytes(LOSE.read_bytes())
    (runs / "empty.jsonl").write_bytes(b"")
    os.mkfifo(runs / "pipe.jsonl")
    (runs / "dangling.jsonl").symlink_to(runs / "nowhere.jsonl")
    (runs / "loop-a.jsonl").symlink_to(runs / "loop-b.jsonl")
    (runs / "loop-b.jsonl").symlink_to(runs / "loop-a.jsonl")
    code, text = run("score", str(runs), "--db", str(tmp_path / "a.duckdb"), "--out", str(tmp_path / "out"),
                     "--no-figures")
    assert code == 3, text
    assert "replay: 1 play: 1 verified" in text
    for name, reason in (("empty.jsonl", "the file is empty"),
                         ("pipe.jsonl", "a FIFO (named pipe), not a regular file"),
                         ("dangling.jsonl", "unreadable: cannot read the file: [Errno 2]"),
                         ("loop-a.jsonl", "unreadable: cannot read the file: [Errno 40]"),
                         ("loop-b.jsonl", "unreadable: cannot read the file: [Errno 40]")):
        assert f"rejected input: {name}: {reason}" in text, (name, text)
    code, text = run("score", str(runs / "empty.jsonl"), "--db", str(tmp_path / "a.duckdb"))
    assert code == 2 and "empty.jsonl: the file is empty" in text, text


def test_view_exits_as_score_does_on_rejected_lines_and_non_recordings(tmp_path):
    """view of a recording with a line left out once exited 0 (score: 3), and of a file that is not a
    recording 1 (score: 2, no plays to score)."""
    lines = LOSE.read_text().splitlines(keepends=True)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join([*lines[:5], "{broken json\n", *lines[5:]]))
    page = tmp_path / "v.html"
    code, text = run("view", str(broken), "--out", str(page))
    assert code == 3, text
    assert "note: line 6: invalid_json" in text and "replay: verified" in text
    assert json.loads((tmp_path / "v.manifest.json").read_text())["notes"]["viewer"]["rejected_input"][0].startswith(
        "line 6: invalid_json")
    code, score_text = run("score", str(broken), "--db", str(tmp_path / "a.duckdb"), "--out", str(tmp_path / "o"),
                           "--no-figures")
    assert code == 3 and "line 6: invalid_json" in score_text
    for content in (b"", b'{"hello": 1}\n'):
        odd = tmp_path / "odd.jsonl"
        odd.write_bytes(content)
        code, text = run("view", str(odd), "--out", str(tmp_path / "odd.html"))
        assert code == 2 and f"cannot read recording {odd}" in text, text
        assert not (tmp_path / "odd.html").exists()


PLAYBACK = ROOT.parent / "shared" / "samples" / "playback-arc-agi-3" / "an53_scripted-lose.playback.jsonl"


@pytest.mark.parametrize(("verb", "where"), [(verb, where) for verb in ("score", "view", "replay", "query")
                                              for where in ("under-a-file", "symlink-loop")
                                              # a file output replaces a link (never written through)
                                              if (verb, where) not in (("view", "symlink-loop"),
                                                                       ("replay", "symlink-loop"),
                                                                       ("query", "symlink-loop"))])
def test_an_output_that_cannot_be_written_is_said_not_a_traceback(tmp_path, verb: str, where: str):
    """--out under a regular file (not a folder) or on a symlink loop once ended each of these verbs with a
    traceback (FileNotFoundError, NotADirectoryError, RuntimeError 'Symlink loop'): now one line naming the
    output and the OS's reason, exit 1."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder\n")
    target = blocker / "out.html"
    if where == "symlink-loop":
        (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
        (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
        target = tmp_path / "loop-a"
    db = tmp_path / "a.duckdb"
    if verb == "query":
        assert run("score", str(LOSE), "--db", str(db), "--no-figures", "--out", str(tmp_path / "o"))[0] == 0
    games = ROOT.parent / "shared" / "conformance" / "environment_files"
    args = {"score": ("score", str(LOSE), "--db", str(db), "--no-figures"),
            "view": ("view", str(LOSE)),
            "replay": ("replay", str(PLAYBACK), "--games", str(games)),
            "query": ("query", "SELECT 42 AS answer", "--db", str(db), "--format", "csv")}[verb]
    code, text = run(*args, "--out", str(target))
    assert code == 1, text
    assert "cannot write" in text and str(target) in " ".join(text.split()), text


def test_a_script_without_a_good_action_line_says_which_lines_were_bad(tmp_path):
    """A playback file whose only action line is bad (an action id past 64 bits, a click at infinity) was
    refused as 'no line with an action_input', the line's own reason lost; score, view and replay now name it."""
    games = ROOT.parent / "shared" / "conformance" / "environment_files"
    cases = {"unknown_action: unknown action id 99999999999999999999999":
             '{"data": {"action_input": {"id": 99999999999999999999999, "data": {"game_id": "an53-6f5f2264"}}}}',
             "bad_click: ACTION6 needs integer x in 0-63, got inf":
             '{"data": {"action_input": {"id": 6, "data": {"game_id": "an53-6f5f2264", "x": 1e999, "y": 3}}}}'}
    for reason, line in cases.items():
        script = tmp_path / "script.jsonl"
        script.write_text(line + "\n")
        for args in (("score", str(script), "--db", str(tmp_path / "a.duckdb")),
                     ("view", str(script), "--out", str(tmp_path / "v.html")),
                     ("replay", str(script), "--out", str(tmp_path / "r.jsonl"))):
            code, text = run(*args, "--games", str(games))
            assert code == 2, text
            assert "no_action_line" in text and f"line 1: {reason}" in text, text


def test_names_too_long_for_the_os_are_said_not_a_traceback(tmp_path):
    """A TARGET or --out longer than the OS allows (ENAMETOOLONG) once ended `view` and `query` with an OSError
    traceback (Path.is_file and Path.exists raise it)."""
    long = "g" * 5000
    db = tmp_path / "a.duckdb"
    assert run("ingest", str(LOSE), "--db", str(db))[0] == 0
    code, text = run("view", str(tmp_path / f"{long}.jsonl"), "--out", str(tmp_path / "v.html"))
    assert code == 2 and "no such file" in text, text
    code, text = run("view", long, "--db", str(db), "--out", str(tmp_path / "v.html"))
    assert code == 1 and "no play with guid or play_id" in text, text
    code, text = run("query", "SELECT 1", "--db", str(db), "--format", "csv", "--out", str(tmp_path / f"{long}.csv"))
    assert code == 1 and "cannot write --out" in text and "File name too long" in " ".join(text.split()), text


@pytest.mark.parametrize(("verb", "suffix"), [("view", ".html"), ("recover-actions", ".json"), ("replay", ".jsonl")])
def test_an_output_whose_manifest_name_would_be_too_long_is_refused_before_the_work(tmp_path, verb, suffix):
    """A 245-character --out fits; `<stem>.manifest.json` beside it does not: the output was written, then the
    manifest failed (exit 1), leaving a complete-looking page of a failed run."""
    shared = Path(__file__).resolve().parents[2].parent / "shared"
    games = ["--games", str(shared / "conformance" / "environment_files")]
    given = {"view": [str(LOSE), *games], "recover-actions": [str(LOSE)],
             "replay": [str(shared / "samples" / "playback-arc-agi-3" / "an53_scripted-lose.playback.jsonl"), *games]}
    out = tmp_path / ("a" * 245 + suffix)
    code, text = run(verb, *given[verb], "--out", str(out))
    assert code == 1 and "File name too long" in " ".join(text.split()) and "choose a shorter name" in text, text
    assert list(tmp_path.iterdir()) == []


def test_view_baselines_are_checked_as_score_checks_them(tmp_path):
    """view's --baselines once took a metadata.json's 1.5 as 1 and a count past 64 bits as it came, and a
    folder it could not use exited 1 where score says 2; both now share score's check (exit 2, reason)."""
    meta = tmp_path / "metadata.json"
    for values, words in (([1.5, 2], "1.5 is not a whole number of actions"),
                          ([10**23, 2], f"{10**23} is above 1,000,000,000 actions")):
        meta.write_text(json.dumps({"game_id": "pv63-003f92f7", "baseline_actions": values}))
        for given in (str(meta), ",".join(map(str, values))):
            code, text = run("view", str(LOSE), "--out", str(tmp_path / "v.html"), "--baselines", given)
            if given != str(meta) and values[0] == 1.5:
                assert code == 2 and "give comma-separated integers" in text, text
                continue
            assert code == 2 and words in text, text
    empty = tmp_path / "empty"
    empty.mkdir()
    for verb in ("view", "score"):
        code, text = run(verb, str(LOSE), "--out", str(tmp_path / ("v.html" if verb == "view" else "o")),
                         "--baselines", str(empty), *(("--db", str(tmp_path / "a.duckdb")) if verb == "score" else ()))
        assert code == 2 and "no metadata.json with a game_id below this folder" in text, (verb, text)


@pytest.mark.parametrize(("sql", "formats"), [
    ("SELECT INTERVAL 3 DAY AS i", ("table", "csv", "json")),  # polars cannot import an interval
    ("SELECT map([1], [2]) AS m", ("csv",)),  # nested values in a CSV
    ("SELECT TIMESTAMP '294247-01-10 04:00:54' AS t", ("table", "csv", "json")),  # past Python's datetimes
])
def test_query_results_polars_cannot_show_are_said_not_a_traceback(tmp_path, sql: str, formats: tuple):
    """Each once ended `query` with a polars ComputeError or a Rust panic (PanicException) traceback."""
    db = tmp_path / "a.duckdb"
    assert run("ingest", str(LOSE), "--db", str(db))[0] == 0
    for fmt in formats:
        code, text = run("query", sql, "--db", str(db), "--format", fmt)
        assert code == 1, (fmt, text)
        assert "the result cannot be" in text and "::VARCHAR" in text, (fmt, text)
    code, text = run("query", sql.replace(" AS ", "::VARCHAR AS "), "--db", str(db), "--format", "csv")
    assert code == 0, text


def test_odd_numbers_for_query_and_score_options(tmp_path):
    """--lock-timeout nan waited forever on a locked database (no clock is ever past NaN) and a negative one
    said 'waited -5 s'; both are usage errors now. --limit past 64 bits was an OverflowError traceback."""
    db = tmp_path / "a.duckdb"
    assert run("ingest", str(LOSE), "--db", str(db))[0] == 0
    for verb in (("query", "SELECT 1 AS a"), ("score",), ("ingest", str(LOSE))):
        for value in ("nan", "-5"):
            code, text = run(*verb, "--db", str(db), "--lock-timeout", value)
            assert code == 2 and "give a number of seconds >= 0" in text, (verb, value, text)
    code, text = run("query", "SELECT 7 AS a", "--db", str(db), "--limit", str(2**70))
    assert code == 0 and "7" in text, text


def test_empty_folder_is_named(tmp_path):
    empty = tmp_path / "runs"
    empty.mkdir()
    code, text = run("score", str(empty), "--db", str(tmp_path / "a.duckdb"))
    assert code == 2, text
    assert f"no *.jsonl recording found in {empty}" in text


def test_no_plays_says_why_for_each_file(tmp_path):
    not_recording = tmp_path / "notes.jsonl"
    not_recording.write_text('{"hello": 1}\n')
    human = sorted((ROOT.parent / "shared" / "samples" / "arc-agi-3" / "human").rglob("*.jsonl"))[0]
    card_only = tmp_path / "card-only.jsonl"  # a human recording's trailing scorecard line, without its frames
    card_only.write_text(human.read_text().splitlines()[-1] + "\n")
    code, text = run("score", str(not_recording), str(card_only), "--db", str(tmp_path / "a.duckdb"))
    assert code == 2, text
    assert "no plays to score in the recordings given:\n" in text
    assert "notes.jsonl: not an ARC-AGI-3 recording" in text
    # a summary without frame lines ingests (its card is baseline evidence) but holds no step to score
    assert "card-only.jsonl: no frame line (a recording without steps has nothing to score)" in text


def test_view_of_a_missing_path_says_no_such_file(tmp_path):
    code, text = run("view", str(tmp_path / "nonexistent.jsonl"), "--out", str(tmp_path / "v.html"))
    assert code == 2, text
    assert "no such file" in text and "guid" not in text


def test_config_errors_name_the_section(tmp_path):
    typo = tmp_path / "typo.toml"
    typo.write_text('[baselines]\nrul = "second-best"\n')
    code, text = run("build", "--dry-run", "--config", str(typo), "--db", str(tmp_path / "a.duckdb"))
    assert code == 2, text
    assert "valid keys in [baselines]: rule" in text
    top = tmp_path / "top.toml"
    top.write_text('rule = "second-best"\n')
    code, text = run("build", "--dry-run", "--config", str(top), "--db", str(tmp_path / "a.duckdb"))
    assert code == 2, text
    assert "'rule' is outside any section (it belongs under [baselines])" in text


def test_build_of_a_missing_database_stops(tmp_path):
    missing = tmp_path / "typo.duckdb"
    code, text = run("build", "--db", str(missing))
    assert code == 1, text
    assert f"database {missing} does not exist" in text
    assert not missing.exists()


def test_baselines_out_cannot_overwrite_the_database(tmp_path):
    from pipeline.core.workspace import Workspace

    db = tmp_path / "study.duckdb"
    with Workspace(db):
        pass
    before = db.read_bytes()
    code, text = run("baselines", "--db", str(db), "--out", str(db))
    assert code == 2, text
    assert "is the database" in text
    assert db.read_bytes() == before


def test_no_help_shows_a_bool_type():
    commands = list(COMMANDS)
    assert "score" in commands and "view" in commands
    for args in ([], *([name] for name in commands)):
        result = CliRunner().invoke(app, [*args, "--help"], terminal_width=200)
        assert result.exit_code == 0, (args, result.output)
        assert "--help" in result.output
        assert "<bool>" not in result.output, (args, result.output)


def test_readme_tour_reads_the_demo_database(tmp_path):
    """After `make demo`, `arcstudy tables` and `query` run as the README writes them (no --db)."""
    demo = tmp_path / "reports" / "demo"
    demo.mkdir(parents=True)
    code, text = run("ingest", str(LOSE), "--db", str(demo / "demo.duckdb"))
    assert code == 0, text
    tables = cli("tables", cwd=tmp_path)
    assert tables.returncode == 0, tables.stderr
    assert "core_arc3__steps" in tables.stdout
    assert "using the demo database reports/demo/demo.duckdb" in tables.stderr
    query = cli("query", "SELECT * FROM runs", "--format", "csv", "--out", "runs.csv", cwd=tmp_path)
    assert query.returncode == 0, query.stderr
    assert (tmp_path / "runs.csv").read_text().startswith("run_id")
    # a database of one's own, or $ARCSTUDY_DB, wins; writers never fall back to the demo database
    env_db = cli("tables", cwd=tmp_path, env={"ARCSTUDY_DB": str(tmp_path / "missing.duckdb")})
    assert env_db.returncode == 1 and "missing.duckdb does not exist" in env_db.stderr
    ingest = cli("ingest", str(LOSE), cwd=tmp_path)
    assert ingest.returncode == 0, ingest.stderr
    assert (tmp_path / "arcstudy.duckdb").is_file()
    own = cli("tables", cwd=tmp_path)
    assert own.returncode == 0 and "using the demo database" not in own.stderr


@pytest.mark.parametrize("verb", ["score", "replay", "baselines", "query", "score --baselines", "build --optimal",
                                  "build --config", "report --ground-truth", "baselines --compare",
                                  "score --recovered-actions", "recover-actions"])
def test_a_fifo_given_to_any_command_is_refused_not_waited_on(tmp_path, verb):
    """Only ingest refused FIFOs: `score PIPE`, `replay PIPE`, `baselines --from-counts PIPE` and `--db PIPE`
    waited forever for a writer."""
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    args = {"score": ["score", str(fifo), "--db", str(tmp_path / "s.duckdb"), "--out", str(tmp_path / "o")],
            "replay": ["replay", str(fifo), "--out", str(tmp_path / "r.jsonl")],
            "baselines": ["baselines", "--from-counts", str(fifo)],
            "query": ["query", "SELECT 1", "--db", str(fifo)],
            "score --baselines": ["score", "--db", str(tmp_path / "s.duckdb"), "--baselines", str(fifo)],
            "build --optimal": ["build", "--db", str(tmp_path / "s.duckdb"), "--optimal", str(fifo)],
            "build --config": ["build", "--db", str(tmp_path / "s.duckdb"), "--config", str(fifo)],
            "report --ground-truth": ["report", "calibration", "--db", str(tmp_path / "s.duckdb"),
                                      "--ground-truth", str(fifo)],
            "baselines --compare": ["baselines", "--db", str(tmp_path / "s.duckdb"), "--compare", str(fifo)],
            "score --recovered-actions": ["score", "--db", str(tmp_path / "s.duckdb"), "--recovered-actions",
                                          str(fifo)],
            "recover-actions": ["recover-actions", str(fifo), "--out", str(tmp_path / "r.json")]}[verb]
    environ = {k: v for k, v in os.environ.items() if k != "ARCSTUDY_DB"} | {"PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", *args], cwd=tmp_path, env=environ,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode in (1, 2, 3), res.stdout + res.stderr
    assert "not a regular file" in res.stdout + res.stderr
    assert "Traceback" not in res.stderr


def test_score_of_a_file_that_fails_to_read_reports_it(tmp_path):
    """/proc/self/mem is a regular file whose reading fails (EIO): score once printed an OSError traceback while
    hashing it for the run manifest, after having reported it."""
    sample = ROOT.parent / "shared" / "samples" / "arc-agi-3" / "fixtures" / "an53_scripted-lose.noframes.jsonl"
    code, text = run("score", str(sample), "/proc/self/mem", "--games",
                     str(ROOT.parent / "shared" / "conformance" / "environment_files"), "--db",
                     str(tmp_path / "s.duckdb"), "--out", str(tmp_path / "o"), "--no-figures", "--workers", "1")
    assert code == 3, text
    assert "mem: unreadable" in text and "Traceback" not in text


def test_a_verb_imports_only_its_own_command_module():
    """`arcstudy <verb>` builds only that verb (the others' modules cost ~0.25 s of start-up per process);
    `--help` still lists every verb."""
    probe = ("import sys; from pipeline.cli import app\n"
             "try:\n    app(['tables', '--help'])\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.startswith('pipeline.commands.')))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[2])
    loaded = result.stdout.strip().splitlines()[-1]
    assert "pipeline.commands.tables" in loaded
    assert "pipeline.commands.score" not in loaded and "pipeline.commands.build" not in loaded, loaded
    listing = CliRunner().invoke(app, ["--help"], terminal_width=200).output
    assert all(verb in listing for verb in COMMANDS)


def test_a_database_cut_short_is_said_as_unreadable_not_as_a_write(tmp_path):
    """A database file cut short (a copy that stopped early) failed a read-only `tables` with "cannot write the
    database ... (free some space, or choose another --db)": nothing was being written, and space is not it."""
    db = tmp_path / "s.duckdb"
    samples = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"
    CliRunner().invoke(app, ["--plain", "ingest", str(samples), "--db", str(db)])
    data = db.read_bytes()
    outputs = []
    for share in (0.5, 0.6, 0.7, 0.8):  # some cuts fall past what opening the file reads
        cut = tmp_path / f"cut-{share}.duckdb"
        cut.write_bytes(data[:int(len(data) * share)])
        result = CliRunner().invoke(app, ["--plain", "tables", "--db", str(cut)])
        assert result.exit_code == 1 and "cannot write" not in result.output, result.output
        outputs.append(" ".join(result.output.split()))
    assert any("error: cannot read the database: IO Error: Could not read" in text and "damaged or cut short" in text
               for text in outputs), outputs
