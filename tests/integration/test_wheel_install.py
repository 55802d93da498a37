"""arcstudy installed from its wheel works outside the repository.

Installed from a wheel, `arcstudy score` once stopped at "data/reference/arc-agi-3-public-games.csv: no such
file or folder": the published baselines were not package data. This builds the wheel (with the build
requirements pyproject.toml declares, from the package index as `make install` does), installs it into a
fresh venv that borrows the test interpreter's dependencies, and scores a recording of a public game from an
empty folder.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "engine", "games", "schemas", "pipeline")
RECORDING = "tu93_explore_reset_solve_5levels.noframes.jsonl"
GAME_ID = "tu93-0768757b"


def run(*args: str | Path, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ARCSTUDY_DB", "VIRTUAL_ENV")}
    res = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    assert res.returncode == 0, f"{args}: exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res


def build_wheel(tmp: Path) -> Path:
    # A copy, so the build's build/ and *.egg-info never land in the checkout.
    src = tmp / "src"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", tmp / "dist", src)
    (wheel,) = (tmp / "dist").glob("arcstudy-*.whl")
    return wheel


def install(wheel: Path, venv: Path) -> Path:
    """A venv with only the wheel installed; its dependencies come from the test interpreter's site-packages,
    added after the venv's own (so the wheel's `pipeline` wins over any editable install there)."""
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    purelib = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (purelib / "_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--quiet", wheel)
    return venv / "bin" / "arcstudy"


@pytest.mark.slow
def test_wheel_scores_a_public_game_with_the_shipped_baselines(tmp_path: Path, shared_dir: Path):
    arcstudy = install(build_wheel(tmp_path), tmp_path / "venv")
    python = arcstudy.parent / "python"
    where = run(python, "-c", "import pipeline; print(pipeline.__file__)", cwd=tmp_path).stdout.strip()
    assert where.startswith(str(tmp_path / "venv")), where  # the installed copy, not the checkout

    work = tmp_path / "empty"
    work.mkdir()
    recording = shared_dir / "samples" / "arc-agi-3" / "toolkit" / RECORDING
    run(arcstudy, "--plain", "score", recording, "--games", shared_dir / "conformance" / "environment_files",
        "--out", "scores", cwd=work)

    (card_path,) = (work / "scores").rglob("scorecard__*.json")
    card = json.loads(card_path.read_text())
    shipped = REPO / "pipeline" / "scoring" / "reference" / "arc-agi-3-public-games.csv"
    source = card["verification"]["baseline_sources"][GAME_ID]
    assert source["source"] == "reference-csv"
    assert source["sha256"] == hashlib.sha256(shipped.read_bytes()).hexdigest()
    with open(shipped, newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if r["game_id"] == GAME_ID and r["baseline_rule"] == source["rule"])
    (env,) = card["environments"]
    assert env["runs"][0]["level_baseline_actions"] == json.loads(row["baseline_actions"])
    assert card["score"] > 0
