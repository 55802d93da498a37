"""arcstudy installed from its wheel works outside the repository.

Installed from a wheel, `arcstudy score` once stopped at "data/reference/arc-agi-3-public-games.csv: no such
file or folder": the published baselines were not package data. This builds the wheel (with the build
requirements pyproject.toml declares, from the package index as `make install` does), installs it into a
fresh venv that borrows the test interpreter's dependencies, and scores a recording of a public game from an
empty folder, and runs `arcstudy demo` in another: from an installed package the demo writes ./data/demo and
./reports/demo in the current folder, never into site-packages.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
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


def run(*args: str | Path, cwd: Path | None = None, timeout: float = 600, codes: tuple[int, ...] = (0,)
        ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ARCSTUDY_DB", "VIRTUAL_ENV")}
    res = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    assert res.returncode in codes, f"{args}: exit {res.returncode}\n{res.stdout}\n{res.stderr}"
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


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The `arcstudy` script of a fresh venv holding the built wheel (one build for this module's tests)."""
    tmp = tmp_path_factory.mktemp("wheel")
    arcstudy = install(build_wheel(tmp), tmp / "venv")
    python = arcstudy.parent / "python"
    where = run(python, "-c", "import pipeline; print(pipeline.__file__)", cwd=tmp).stdout.strip()
    assert where.startswith(str(tmp / "venv")), where  # the installed copy, not the checkout
    return arcstudy


def site_packages_listing(arcstudy: Path) -> dict[str, tuple[int, int]]:
    """Every file of the venv's own site-packages with its size and mtime, bytecode caches aside (Python's)."""
    python = arcstudy.parent / "python"
    purelib = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    return {str(p.relative_to(purelib)): (p.stat().st_size, p.stat().st_mtime_ns) for p in purelib.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.slow
def test_wheel_scores_a_public_game_with_the_shipped_baselines(installed: Path, tmp_path: Path, shared_dir: Path):
    arcstudy = installed
    work = tmp_path / "empty"
    work.mkdir()
    recording = shared_dir / "samples" / "arc-agi-3" / "toolkit" / RECORDING
    # tu93 is not among those game files: scored from the recording alone, and said (nothing verified: exit 3).
    res = run(arcstudy, "--plain", "score", recording, "--games", shared_dir / "conformance" / "environment_files",
              "--out", "scores", cwd=work, codes=(3,))
    assert "nothing could be verified" in res.stdout

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


@pytest.mark.slow
def test_wheel_demo_writes_into_the_current_folder_not_site_packages(installed: Path, tmp_path: Path):
    before = site_packages_listing(installed)
    work = tmp_path / "empty"
    work.mkdir()
    res = run(installed, "--plain", "demo", cwd=work, timeout=1800)

    index = work / "reports" / "demo" / "index.html"
    assert index.is_file(), res.stdout[-3000:]
    assert (work / "data" / "demo" / "SIMULATION.json").is_file()
    assert f"Open {index}" in res.stdout
    hrefs = re.findall(r'href="([^"#:]+)"', index.read_text())
    for name in ("calibration.html", "scores.html", "harc.html"):
        assert name in hrefs and (index.parent / name).is_file()
    after = site_packages_listing(installed)
    assert after == before, sorted(set(after.items()) ^ set(before.items()))[:20]


def test_demo_defaults_are_the_checkout_from_source_and_the_current_folder_when_installed(tmp_path, monkeypatch):
    from pipeline.commands.demo import DEFAULT_DATA, DEFAULT_OUT, default_base

    assert (DEFAULT_DATA, DEFAULT_OUT) == (REPO / "data" / "demo", REPO / "reports" / "demo")  # `make demo`
    site_packages, work = tmp_path / "site-packages", tmp_path / "work"
    (site_packages / "pipeline").mkdir(parents=True)
    work.mkdir()
    monkeypatch.chdir(work)
    assert default_base(site_packages) == work
    (site_packages / "pyproject.toml").write_text("")
    assert default_base(site_packages) == site_packages
