"""The command line when its streams or its run are cut short.

- stdout closed by its reader (`arcstudy ... | head`), full (`> /dev/full`) or not open at all (`>&-`): rich's
  answer to a closed pipe was SystemExit(1) midway, which arcstudy then blamed on game code ("code run by arcstudy
  called exit"); a full device or a missing stdout was a traceback. Messages that cannot be written are now
  dropped and the command finishes its work (an ingest loads everything); a result that cannot be written (the
  rows of `query`, the `schema`) is an error in one line, unless its reader stopped reading (exit 0).
- Ctrl-C while DuckDB runs a query surfaced as `RuntimeError: Query interrupted`, a traceback with exit 1: it is
  the interruption it is (exit 130, one line).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SCHEMA = [sys.executable, "-m", "pipeline", "--plain", "schema"]  # a long output, no database needed


def test_a_reader_that_stops_reading_does_not_stop_the_command(tmp_path):
    proc = subprocess.Popen(SCHEMA, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=tmp_path)
    assert proc.stdout is not None
    proc.stdout.read(200)  # `| head -c 200`
    proc.stdout.close()
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.wait(timeout=120) == 0, stderr
    assert "Traceback" not in stderr and "called exit" not in stderr, stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="/dev/full is a Linux device")
def test_a_result_that_cannot_be_written_is_an_error_in_one_line(tmp_path):
    with open("/dev/full", "w") as full:
        done = subprocess.run(SCHEMA, stdout=full, stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path,
                              timeout=120)
    assert done.returncode == 1, done.stderr
    assert "cannot write the result to stdout (No space left on device)" in done.stderr
    assert "Traceback" not in done.stderr
    done = subprocess.run(SCHEMA, stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path, timeout=120,
                          preexec_fn=lambda: os.close(1))  # `>&-`
    assert done.returncode == 1 and "there is no stdout" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="/dev/full is a Linux device")
@pytest.mark.parametrize("stdout", ["full", "closed"])
def test_an_ingest_whose_messages_cannot_be_written_still_loads_everything(tmp_path, stdout):
    recording = ROOT.parent / "shared" / "samples" / "arc-agi-3" / "fixtures" / "an53_scripted-win.frames.jsonl"
    db = tmp_path / "s.duckdb"
    args = [sys.executable, "-m", "pipeline", "--plain", "ingest", str(recording), "--db", str(db)]
    with open("/dev/full", "w") as full:
        done = subprocess.run(args, stdout=full if stdout == "full" else None, stderr=subprocess.PIPE, text=True,
                              env=ENV, cwd=tmp_path, timeout=300,
                              preexec_fn=(lambda: os.close(1)) if stdout == "closed" else None)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM core_arc3__plays").fetchone()[0] >= 1


def test_ctrl_c_during_a_duckdb_query_is_an_interruption(tmp_path, monkeypatch, empty_db):
    from pipeline.core import workspace

    def interrupted(*args, **kwargs):
        raise RuntimeError("Query interrupted")  # what DuckDB raises when SIGINT arrives mid-query

    monkeypatch.setattr(workspace, "describe_tables", interrupted)
    monkeypatch.setattr("pipeline.commands.tables.describe_tables", interrupted)
    result = CliRunner().invoke(app, ["--plain", "tables", "--db", str(empty_db)])
    assert result.exit_code == 130, result.output
    assert "interrupted (Ctrl-C)" in result.output


def test_another_runtime_error_is_not_taken_for_an_interruption(tmp_path, monkeypatch, empty_db):
    def broken(*args, **kwargs):
        raise RuntimeError("something else")

    monkeypatch.setattr("pipeline.commands.tables.describe_tables", broken)
    result = CliRunner().invoke(app, ["--plain", "tables", "--db", str(empty_db)])
    assert result.exit_code != 130
    assert isinstance(result.exception, RuntimeError) and str(result.exception) == "something else"


def test_too_few_file_descriptors_is_one_line(tmp_path):
    """`ulimit -n 10`: the sandbox could not start its child (EMFILE), a traceback."""
    import resource

    script = ROOT.parent / "shared" / "samples" / "playback-arc-agi-3" / "an53_scripted-lose.playback.jsonl"
    games = ROOT.parent / "shared" / "conformance" / "environment_files"
    done = subprocess.run([sys.executable, "-m", "pipeline", "--plain", "score", str(script), "--games", str(games),
                           "--out", str(tmp_path / "out"), "--no-figures"], capture_output=True, text=True, env=ENV,
                          cwd=tmp_path, timeout=300,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (10, 10)))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "too many open files (this process may open 10" in done.stderr and "Traceback" not in done.stderr


def test_too_few_file_descriptors_to_import_the_app_is_one_line(tmp_path):
    """Every descriptor taken before the app is imported (by a parent that handed its own down, or a helper): the
    import of typer raised EMFILE, a traceback."""
    code = ("import os, resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
            "del sys.modules['resource']  # imported again by the program, as it would be\n"
            "import pipeline.__main__, pipeline.commands.early\n"
            "held = []\n"
            "while True:\n"
            "    try:\n"
            "        held.append(os.open(os.devnull, os.O_RDONLY))\n"
            "    except OSError:\n"
            "        break\n"
            "sys.argv = ['arcstudy', '--plain', 'tables']\n"
            "pipeline.__main__.main()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith("error: too many open files (this process may open 64") and \
        "Traceback" not in done.stderr, done.stderr


# a run of the program in which this process cannot start the sandbox child that runs a game (subprocess.Popen
# raises `errno`), as when `ulimit -n` is reached as the sandbox opens that child's pipes, or `ulimit -u` as it
# forks; the child that only reports the sandbox's layers (`describe_layers`), started outside any input's work,
# still starts, as it did in the runs where this was seen
_NO_GAME_CHILD = """
import errno, subprocess, sys, traceback
code = getattr(errno, sys.argv[1])
class Refusing(subprocess.Popen):
    def __init__(self, *args, **kwargs):
        callers = {(frame.name, frame.filename.rsplit("/", 1)[-1]) for frame in traceback.extract_stack()}
        if ("_start", "sandbox.py") in callers and ("describe_layers", "sandbox.py") not in callers:
            raise OSError(code, "refused by the test")
        super().__init__(*args, **kwargs)
subprocess.Popen = Refusing
sys.argv = ["arcstudy", *sys.argv[2:]]
from pipeline.__main__ import main
main()
"""


@pytest.mark.parametrize(("verb", "err", "says"), [
    ("score", "EMFILE", "too many open files (this process may open"),
    ("export-transitions", "EMFILE", "too many open files (this process may open"),
    ("replay", "ENFILE", "too many open files on this machine (the system's limit"),
    ("score", "EAGAIN", "could not start the sandbox that runs code from outside (too many processes"),
])
def test_a_sandbox_this_machine_cannot_start_stops_the_command_not_the_input(tmp_path, verb, err, says):
    """The sandbox's pipes or fork failing in this process was each input's failure: `score` said "cannot replay
    the playback script: ... Too many open files" and exited 3 (rejected input), as if the script were bad."""
    script = ROOT.parent / "shared" / "samples" / "playback-arc-agi-3" / "an53_scripted-lose.playback.jsonl"
    games = ROOT.parent / "shared" / "conformance" / "environment_files"
    out = tmp_path / ("out.jsonl" if verb == "replay" else "out")
    done = subprocess.run([sys.executable, "-c", _NO_GAME_CHILD, err, "--plain", verb, str(script), "--games",
                           str(games), "--out", str(out)], capture_output=True, text=True, env=ENV, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"error: {says}" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "cannot replay" not in done.stderr + done.stdout and not out.exists()


def test_out_of_memory_is_one_line(monkeypatch, empty_db):
    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr("pipeline.commands.tables.describe_tables", exhausted)
    result = CliRunner().invoke(app, ["--plain", "tables", "--db", str(empty_db)])
    assert result.exit_code == 1 and "out of memory" in result.output
