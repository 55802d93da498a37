"""`arcstudy simulate --environments`: a game folder whose metadata.json cannot be read is named with the reason,
the other games are still simulated, and the exit code (3) says something was skipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from games import GAMES_DIR
from pipeline.cli import app


def test_a_game_whose_metadata_cannot_be_read_is_named_and_the_run_exits_3(tmp_path: Path):
    envs = tmp_path / "envs"
    shutil.copytree(GAMES_DIR / "pv63", envs / "pv63", ignore=shutil.ignore_patterns("__pycache__"))
    (broken,) = (shutil.copytree(GAMES_DIR / "tw85", envs / "tw85",
                                 ignore=shutil.ignore_patterns("__pycache__")).glob("*/metadata.json"))
    broken.write_text('{"game_id": ', encoding="utf-8")  # cut short
    res = CliRunner().invoke(app, ["--plain", "simulate", "--out", str(tmp_path / "study"), "--no-harc",
                                   "--no-static", "--environments", str(envs)])
    text = " ".join(res.output.split())
    assert res.exit_code == 3, res.output
    assert f"skipped a game: {broken}: not valid JSON" in text, res.output
    assert "1 game folder(s) skipped" in text, res.output
    played = json.loads((tmp_path / "study" / "SIMULATION.json").read_text())["games"]
    assert [g["game_id"] for g in played] == ["pv63-003f92f7"]
