"""`--workers` / `--scheduler` on every verb whose work splits; explore (levels) and qualify (games) give the
same results on two local workers as serially. Timings (`elapsed_s`, `nodes_per_s`) are left out: they are
measurements, not results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app

REPO = Path(__file__).resolve().parents[2]
EXPLORE_FIXTURES = REPO / "tests" / "fixtures" / "explore"
TIMINGS = ("elapsed_s", "nodes_per_s")


def invoke(*args: str):
    return CliRunner().invoke(app, ["--plain", *args], terminal_width=200)


def without_timings(value):
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


@pytest.mark.parametrize("verb", ["ingest", "score", "replay-harc", "explore", "qualify", "simulate",
                                  "export-transitions", "check-witnesses"])
def test_every_verb_whose_work_splits_lists_workers_and_scheduler(verb):
    result = invoke(verb, "--help")
    assert result.exit_code == 0, result.output
    assert "--workers" in result.output and "--scheduler" in result.output


def test_explore_levels_on_two_workers_match_the_serial_run(tmp_path):
    runs = {}
    for n in ("1", "2"):
        result = invoke("explore", "pv63", "--max-nodes", "300", "--json", "--no-figure", "--workers", n,
                        "--out", str(tmp_path / n))
        assert result.exit_code == 0, result.output
        runs[n] = without_timings(json.loads(result.stdout))
        summary = tmp_path / n / runs[n][0]["game_id"]
        manifest = json.loads((summary / "manifest.json").read_text())
        assert manifest["config"]["workers"] == int(n)
        runs[n + "-files"] = sorted(p.relative_to(tmp_path / n).as_posix() for p in (tmp_path / n).rglob("*"))
        runs[n + "-graphml"] = [p.read_bytes() for p in sorted(summary.rglob("graph.graphml"))]
    assert len(runs["1"]) > 1 and [r["level"] for r in runs["2"]] == list(range(1, len(runs["1"]) + 1))
    assert runs["1"] == runs["2"]
    assert runs["1-files"] == runs["2-files"] and runs["1-graphml"] == runs["2-graphml"]


def test_qualify_games_on_two_workers_match_the_serial_run(tmp_path):
    reports = {}
    for n in ("1", "2"):
        result = invoke("qualify", "all", "--environments", str(EXPLORE_FIXTURES), "--regime", "quick", "--json",
                        "--workers", n, "--out", str(tmp_path / n))
        assert result.exit_code == 1, result.output  # cr01 fails the threshold check (test_qualify_quick.py)
        reports[n] = without_timings(json.loads(result.stdout.strip().splitlines()[-1]))
        for report in reports[n]:
            assert (tmp_path / n / report["game_id"] / "qualification.md").is_file()
    assert [r["game_id"] for r in reports["1"]] == sorted(r["game_id"] for r in reports["1"])
    assert len(reports["1"]) == 4 and reports["1"] == reports["2"]


@pytest.mark.parametrize("address", ["notaurl", "tcp://127.0.0.1:1"])
def test_a_scheduler_that_cannot_be_used_is_one_line(tmp_path, address):
    """`--scheduler` with no scheduler there (or no address at all) was a hundred-line traceback after 30 s. (Run
    as a program: a second failed client in one process trips over distributed's loop.)"""
    import os
    import subprocess
    import sys

    scripts = REPO.parent / "shared" / "samples" / "playback-arc-agi-3"
    code = ("import sys; from pipeline.core import executor; executor.CONNECT_TIMEOUT_S = 1; "
            "sys.argv = ['arcstudy', *sys.argv[1:]]; from pipeline.__main__ import main; main()")
    done = subprocess.run([sys.executable, "-c", code, "--plain", "score",
                           str(scripts / "an53_scripted-lose.playback.jsonl"),
                           str(scripts / "ck17_scripted-win.playback.jsonl"), "--games",
                           str(REPO.parent / "shared" / "conformance" / "environment_files"), "--out",
                           str(tmp_path / "out"), "--no-figures", "--scheduler", address], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"error: cannot use the Dask scheduler at --scheduler {address}: " in done.stderr
    assert "leave --scheduler out" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()
