"""Help and exits in a user's first hour (issue 29): help reads at 80 columns without cutting option names, `-h`
is `--help` everywhere, an option on the wrong side of the command gets a hint, and `report` on a database never
built fails with one line instead of writing pages that say so."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from pipeline.cli import COMMANDS, app

REPO = Path(__file__).resolve().parents[2]


def _help(*args: str, width: int = 80) -> str:
    result = CliRunner().invoke(app, [*args], terminal_width=width)
    assert result.exit_code == 0, (args, result.output)
    return result.output


def test_every_help_reads_at_80_columns_with_every_option_name_whole():
    for verb in ["", *COMMANDS]:
        args = [verb] if verb else []
        text = _help(*args, "--help")
        assert "…" not in text, (verb, text)
        cut = [line for line in text.splitlines() if re.search(r"\w\.\.\.\s*$", line)]  # click's cut summaries
        assert not cut, (verb, cut)
        assert max(len(line) for line in text.splitlines()) <= 80, verb
        command = app_command(verb)
        for param in command.params:
            for opt in (*param.opts, *param.secondary_opts):
                if opt.startswith("-"):
                    assert opt in text, (verb, opt)


def app_command(verb: str):
    import typer.main

    group = typer.main.get_command(app)
    return group.commands[verb] if verb else group


def test_help_through_a_real_terminal_width():
    """COLUMNS=80 as a terminal of 80 columns sets it: the widest option of `view` is whole."""
    env = {**os.environ, "COLUMNS": "80"}
    res = subprocess.run([sys.executable, "-m", "pipeline.cli", "view", "--help"], capture_output=True, text=True,
                         env=env, timeout=120, cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert "--only-reset-levels / --no-only-reset-levels" in res.stdout and "--include-unknown-games" in res.stdout
    assert "…" not in res.stdout and max(map(len, res.stdout.splitlines())) <= 80


def test_dash_h_is_help_everywhere():
    for verb in ["", *COMMANDS]:
        args = [verb] if verb else []
        assert _help(*args, "-h", width=100) == _help(*args, "--help", width=100), verb


def test_a_command_option_before_the_command_gets_a_hint(tmp_path):
    result = CliRunner().invoke(app, ["--db", str(tmp_path / "x.duckdb"), "tables"])
    assert result.exit_code == 2
    assert "--db is an option of the command" in result.output and "put it after the command" in result.output
    unknown = CliRunner().invoke(app, ["--no-such-thing", "tables"])
    assert unknown.exit_code == 2 and "No such option: --no-such-thing" in unknown.output


def test_a_global_option_after_the_command_is_accepted_or_gets_a_hint(tmp_path):
    db = tmp_path / "a.duckdb"
    from pipeline.core.workspace import Workspace

    Workspace(db).close()
    plain = CliRunner().invoke(app, ["tables", "--db", str(db), "--plain"])
    assert plain.exit_code == 0, plain.output  # --plain only changes how output looks: accepted on either side
    version = CliRunner().invoke(app, ["tables", "--version"])
    assert version.exit_code == 2
    assert "--version is a global option: put it before the command (arcstudy --version)" in version.output


def test_report_on_a_database_never_built_fails_with_one_line(tmp_path):
    bare = tmp_path / "bare.duckdb"
    duckdb.connect(str(bare)).close()
    from pipeline.core.workspace import Workspace

    empty = tmp_path / "empty.duckdb"
    Workspace(empty).close()  # every arcstudy table, no rows: made, never built
    (tmp_path / "was-here").mkdir()  # an empty folder of the user's, above --out: left alone
    for db in (bare, empty):
        out = tmp_path / "was-here" / f"{db.stem}-reports" / "deeper"
        res = subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "report", "all", "--db", str(db),
                              "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=REPO)
        assert res.returncode == 1, res.stdout + res.stderr
        said = [line for line in (res.stdout + res.stderr).splitlines() if line.strip()]
        assert len(said) == 1 and "has nothing to report" in said[0] and "arcstudy build" in said[0], said
        assert "Traceback" not in res.stderr
        assert not out.exists() and not out.parent.exists() and (tmp_path / "was-here").is_dir()
    one = subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "report", "scores", "--db", str(empty),
                          "--out", str(tmp_path / "one")], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert one.returncode == 1 and "run arcstudy score" in one.stdout + one.stderr
