"""The program ends without the interpreter's teardown (pipeline.cli.end_process) only when nothing is lost by it:
its exit code, its buffered output and its exit functions are kept, and a running non-daemon thread or a
message as exit code takes the normal way out."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(body: str, tmp_path: Path) -> subprocess.CompletedProcess:
    script = textwrap.dedent(f"""
        import atexit, sys, threading, time
        from pathlib import Path
        from pipeline.cli import end_process
        out = Path({str(tmp_path)!r})
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60)


def test_the_code_the_buffered_output_and_the_exit_functions_are_kept(tmp_path):
    done = run("""
        atexit.register(lambda: (out / "atexit").write_text("ran"))
        sys.stdout.write("said before the end, not flushed")  # stdout to a pipe is block-buffered
        end_process(SystemExit(3))
        (out / "after").write_text("never")
    """, tmp_path)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "said before the end, not flushed"
    assert (tmp_path / "atexit").read_text() == "ran" and not (tmp_path / "after").exists()


def test_a_running_non_daemon_thread_is_waited_for(tmp_path):
    done = run("""
        def late():
            time.sleep(0.3)
            (out / "thread").write_text("finished")
        threading.Thread(target=late).start()
        end_process(SystemExit(0))
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "thread").read_text() == "finished"


def test_a_message_as_exit_code_is_printed_and_exits_1(tmp_path):
    done = run("""
        end_process(SystemExit("cannot go on: a reason"))
    """, tmp_path)
    assert done.returncode == 1
    assert "cannot go on: a reason" in done.stderr


def test_the_program_exits_with_its_commands_code(tmp_path):
    """Run as the program, the app's exit codes are kept: 2 for a usage error, 0 for --version."""
    bad = subprocess.run([sys.executable, "-m", "pipeline.cli", "no-such-verb"], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert bad.returncode == 2 and "no-such-verb" in bad.stderr
    version = subprocess.run([sys.executable, "-m", "pipeline.cli", "--version"], capture_output=True, text=True,
                             cwd=REPO, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("arcstudy ")
