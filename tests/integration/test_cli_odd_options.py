"""Option values outside what a command can use are usage errors (exit 2) said before any work, never a
traceback after it nor a run that quietly means something else."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app

HUGE = str(2**70)


@pytest.mark.parametrize("args, option", [
    (["harc-analyses", "--seed", "-1"], "--seed"),
    (["harc-analyses", "--seed", HUGE], "--seed"),  # stored as BIGINT in the manifest
    (["harc-analyses", "--simulations", HUGE], "--simulations"),
    (["harc-analyses", "--release", "nope"], "--release"),
    (["harc-analyses", "--release", ""], "--release"),
    (["harc-graph", "aa000001", "--release", "../x"], "--release"),
    (["qualify", "pv63", "--regime", "quick", "--tutorial-levels", "-1"], "--tutorial-levels"),
], ids=lambda v: v if isinstance(v, str) else "_".join(v))
def test_unusable_option_values_are_usage_errors(tmp_path: Path, args: list[str], option: str):
    db = tmp_path / "study.duckdb"
    db_args = [] if args[0] == "qualify" else ["--db", str(db)]
    res = CliRunner().invoke(app, ["--plain", *args, *db_args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 2, res.output
    assert f"Invalid value for '{option}'" in res.output
    assert not db.exists()


@pytest.mark.parametrize("verb", [["explore", "pv63", "--max-nodes", "5"], ["qualify", "pv63", "--regime", "quick"],
                                  ["simulate", "--out", "{tmp}/study"]], ids=lambda v: v[0])
def test_a_huge_worker_count_is_refused_not_started(tmp_path: Path, verb: list[str]):
    args = [a.replace("{tmp}", str(tmp_path)) for a in verb]
    res = CliRunner().invoke(app, ["--plain", *args, "--workers", HUGE])
    assert res.exit_code == 2, res.output
    assert "Invalid value for '--workers'" in res.output
    assert not (tmp_path / "study").exists()
