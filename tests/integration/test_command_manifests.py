"""Run manifests record the command line of the verb that ran, even when another verb ran it in-process (the
steps of `arcstudy demo`), not the process's sys.argv."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import typer

from pipeline.cli import app
from pipeline.commands.common import command_line
from pipeline.commands.demo import run_command
from pipeline.core.workspace import Workspace

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "fixtures"


def test_a_verb_run_in_process_records_its_own_command(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["arcstudy", "demo", "--out", "/somewhere/else"])  # what the demo sees
    recording = sorted(SAMPLES.glob("*.jsonl"))[0]
    db = tmp_path / "study db.duckdb"  # a space: the command is shell-quoted
    root = typer.main.get_command(app)
    assert run_command(root, ["ingest", str(recording), "--db", str(db)]) == 0
    with Workspace(db, read_only=True) as ws:
        commands = ws.read("SELECT command FROM runs")["command"].to_list()
    assert commands == [shlex.join(["arcstudy", "ingest", str(recording), "--db", str(db)])]
    manifests = [json.loads(p.read_text()) for p in (tmp_path / "study db.runs").rglob("*.json")]
    assert [m["command"] for m in manifests] == commands
    assert all("demo" not in c for c in commands)


def test_command_line_writes_only_what_was_typed():
    probe = typer.Typer()
    seen: list[str] = []

    @probe.command("probe")
    def probe_command(ctx: typer.Context, target: str, flag: bool = typer.Option(False, "--flag"),
                      color: bool = typer.Option(True, "--color/--no-color"),
                      ratio: float = typer.Option(0.5, "--ratio"), tag: list[str] = typer.Option([], "--tag")) -> None:
        seen.append(command_line(ctx))

    @probe.command("other")
    def other() -> None:  # a second command, so "probe" is a subcommand as in arcstudy
        pass

    root = typer.main.get_command(probe)
    root.main(["probe", "a b", "--no-color", "--tag", "x", "--tag", "y"], standalone_mode=False)
    root.main(["probe", "t", "--flag", "--ratio", "2"], standalone_mode=False)
    assert seen == ["arcstudy probe 'a b' --no-color --tag x --tag y", "arcstudy probe t --flag --ratio 2"]
