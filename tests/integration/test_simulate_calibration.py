"""The simulated ARC-AGI-3 study lands on the paper's human-study numbers (pipeline.simulate.targets), measured
the pipeline's way: ingest the simulated recordings and session manifest, build, and read the analysis attempts
(out_arc3__attempts) and the median durations by outcome (out_arc3__durations_summary, scope all).

Medians do not depend on the number of participants, so the fast check runs a fraction of the paper's 486 and
holds them to the same tolerances; the attempt count scales with participants and is capped by the games at
hand (one attempt per participant and game). The full `--scale arc3` check is marked slow."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.core.config import load_config
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.simulate.arc3 import Arc3StudyPlan, simulate_arc3_study
from pipeline.simulate.specs import game_specs
from pipeline.simulate.study import SCALES
from pipeline.simulate.targets import ATTEMPTS, MEDIAN_MINUTES, PAPER_PARTICIPANTS
from pipeline.transforms.build import build

GAMES = Path(__file__).resolve().parents[2] / "games"


def measure(n_participants: int, seed: int, tmp: Path) -> tuple[int, int, dict[str, float]]:
    """(analysis attempts, genuine participants, median minutes by outcome group) of a simulated study."""
    specs = game_specs(GAMES)
    out = tmp / "arc3"
    simulate_arc3_study(Arc3StudyPlan(n_participants=n_participants, seed=seed), specs, environments_dir=GAMES,
                        out_dir=out, frames=False)
    truth = pl.read_csv(tmp / "ground_truth" / "arc3_participants.csv")
    with Workspace(tmp / "study.duckdb") as ws:
        report = ingest_paths(ws, [out], run_id="calibration")
        assert not report.has_rejections
        build(ws, load_config(), figures=False)
        n_attempts = ws.read("SELECT count(*) AS n FROM out_arc3__attempts WHERE is_analysis_attempt")["n"][0]
        medians = ws.read("SELECT outcome_group, median_duration_s FROM out_arc3__durations_summary "
                          "WHERE scope_id = 'all'")
    minutes = {g: s / 60 for g, s in medians.iter_rows()}
    return n_attempts, truth.filter(~pl.col("is_low_effort")).height * len(specs), minutes


def assert_calibrated(n_attempts: int, reachable: int, n_participants: int, minutes: dict[str, float]) -> None:
    for group, target in MEDIAN_MINUTES.items():
        assert target.within(minutes[group]), (group, minutes[group], target)
    # The paper's attempts at this scale, unless the games at hand allow fewer (one per participant and game).
    expected = min(ATTEMPTS.paper * n_participants / PAPER_PARTICIPANTS, reachable)
    assert abs(n_attempts - expected) <= ATTEMPTS.tolerance * expected, (n_attempts, expected, reachable)


def test_a_fraction_of_the_paper_lands_on_its_medians(tmp_path: Path):
    n = 100
    n_attempts, reachable, minutes = measure(n, 0, tmp_path)
    assert_calibrated(n_attempts, reachable, n, minutes)


@pytest.mark.slow
def test_scale_arc3_seed_0_lands_on_the_paper(tmp_path: Path):
    n = SCALES["arc3"].participants
    assert n == PAPER_PARTICIPANTS
    n_attempts, reachable, minutes = measure(n, 0, tmp_path)
    assert_calibrated(n_attempts, reachable, n, minutes)
