"""A small demo-like database for the report and notebook tests, built once per test session.

`report_db` simulates a study the way `arcstudy demo` does, at a size that takes seconds: seven participants
on four conformance fixture games (winning lines from the toolkit's scripted-win recordings), two of them
low-effort cyclers; three agents (random and near-optimal toolkit runs, one agents-repository run carrying LLM
usage lines); a tiny H-ARC study. It ingests everything (plus the games' metadata.json, so published baselines
exist), builds, scores each agent's recordings as its own scorecard under every policy, replays the H-ARC traces
and runs the H-ARC analyses. With pytest-xdist the first worker that needs it builds it under a file lock and the others reuse it
(the directory is per test run, so nothing leaks between runs).
"""

from __future__ import annotations

import fcntl
import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
ENVS = SHARED / "conformance" / "environment_files"
FIXTURE_GAMES = ("mz41", "ly28", "tf62", "pl39")


@dataclass(frozen=True)
class ReportDb:
    db: Path
    ground_truth: Path
    games_dir: Path
    agents_dir: Path


def _specs():
    from pipeline.simulate.arc3 import GameSpec
    from pipeline.simulate.specs import solutions_from_recording, verify_specs

    specs = []
    for code in FIXTURE_GAMES:
        rec = next((SHARED / "samples" / "arc-agi-3" / "fixtures").glob(f"{code}_scripted-win.*.jsonl"))
        game_id, lines = solutions_from_recording(rec)
        specs.append(GameSpec(game_id, len(lines), lines))
    verify_specs(specs, ENVS)
    return specs


def build_report_db(root: Path) -> ReportDb:
    from typer.testing import CliRunner

    from pipeline.cli import app
    from pipeline.core.config import load_config
    from pipeline.core.workspace import Workspace
    from pipeline.harc.build import run_analyses, run_trace_checks
    from pipeline.ingest import ingest_paths
    from pipeline.simulate.agents import run_agent, write_agents_repo, write_toolkit
    from pipeline.simulate.arc3 import Arc3StudyPlan, simulate_arc3_study
    from pipeline.simulate.harc import StudyDesign, simulate_harc_study
    from pipeline.transforms.build import build

    sim = root / "sim"
    specs = _specs()
    simulate_arc3_study(Arc3StudyPlan(n_participants=7, games_per_session=4, seed=3, low_effort_share=0.3), specs,
                        environments_dir=ENVS, out_dir=sim / "arc3", frames=False)
    rng = random.Random(1)
    agents = sim / "arc3" / "agents"
    by_code = {s.game_id.split("-")[0]: s for s in specs}
    for code in ("tf62", "pl39"):
        spec = by_code[code]
        baseline = [3 * len(line) for line in spec.solutions]
        for agent in ("random", "near-optimal"):
            write_toolkit(run_agent(agent, spec, baseline, rng, environments_dir=ENVS, frames=False),
                          agents / agent, f"card-{agent}")
    spec = by_code["tf62"]
    run = run_agent("near-optimal", spec, [3 * len(x) for x in spec.solutions], rng, environments_dir=ENVS,
                    frames=True, action_ids="int")
    write_agents_repo(run, agents / "agents-repo", rng, max_actions=200)
    design = StudyDesign("reports-test", n_training=6, n_training_ten=0, n_evaluation=6, n_incomplete_training=1,
                         n_incomplete_evaluation=1, n_tasks_training=6, n_tasks_evaluation=6)
    simulate_harc_study(sim / "harc", scale=design, seed=0, generation="current", arc_tgi=False)
    metadata = sorted(p for code in FIXTURE_GAMES for p in (ENVS / code).rglob("metadata.json"))

    db = root / "demo.duckdb"
    with Workspace(db) as ws:
        report = ingest_paths(ws, [sim / "arc3", sim / "harc" / "current", sim / "harc" / "tasks", *metadata],
                              run_id="reports-test-ingest", workers=1)
        assert not report.has_rejections, [f.message for f in report.files if f.status != "loaded"]
        build(ws, load_config(), out_dir=root / "demo.build", figures=False)
    for agent in ("random", "near-optimal", "agents-repo"):  # one scorecard per agent, as the demo scores them
        result = CliRunner().invoke(app, ["--plain", "score", str(agents / agent), "--policy", "all", "--games",
                                          str(ENVS), "--db", str(db), "--out", str(root / "scores" / agent)])
        assert result.exit_code == 0, result.output
    with Workspace(db) as ws:
        run_trace_checks(ws)
        run_analyses(ws, n_simulations=50, figures=False)
    return ReportDb(db=db, ground_truth=sim / "ground_truth" / "arc3_participants.csv", games_dir=ENVS,
                    agents_dir=agents)


def built_once(tmp_path_factory, name: str, build: Callable[[Path], dict[str, str]]) -> dict[str, str]:
    """`build(folder)` once per test run: in-process without xdist; with xdist, by the first worker that asks,
    under a file lock, the others reading its JSON result (basetemp's parent is this run's folder)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return build(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent / name
    shared.mkdir(exist_ok=True)
    done = shared / "done.json"
    with open(shared / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.is_file():
                done.write_text(json.dumps(build(shared)))
            return json.loads(done.read_text())
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def report_db(tmp_path_factory) -> ReportDb:
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED}: tests need it beside the checkout")
    paths = built_once(tmp_path_factory, "report-db",
                       lambda folder: {k: str(v) for k, v in build_report_db(folder).__dict__.items()})
    return ReportDb(**{k: Path(v) for k, v in paths.items()})


@pytest.fixture(scope="module")
def empty_db(tmp_path_factory) -> Path:
    """A database with every table created (creating the tables costs about a second; copying the file is
    instant): tests copy its bytes into a fresh file of their own."""
    from pipeline.core.workspace import Workspace

    path = tmp_path_factory.mktemp("empty_db") / "empty.duckdb"
    Workspace(path).close()
    return path


@pytest.fixture
def parser_start_overs(monkeypatch) -> list[str]:
    """The parser modes a batched CSV read started over with (`PiecesStartOver` raised by `CsvSource.scan_iter`),
    filled as the test's ingests run: proof that a test file really made a read start over."""
    from pipeline.ingest.base import PiecesStartOver
    from pipeline.ingest.harc_csv import CsvSource

    starts: list[str] = []
    real = CsvSource.scan_iter

    def counted(self, **kwargs):
        try:
            yield from real(self, **kwargs)
        except PiecesStartOver:
            starts.append(self.mode)
            raise

    monkeypatch.setattr(CsvSource, "scan_iter", counted)
    return starts
