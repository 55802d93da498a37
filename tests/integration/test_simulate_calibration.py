"""The simulated ARC-AGI-3 study lands on the paper's human-study numbers (pipeline.simulate.targets), measured
the pipeline's way: ingest the simulated recordings and session manifest, build, and read the analysis attempts
(out_arc3__attempts) and the median durations by outcome (out_arc3__durations_summary, scope all).

Medians do not depend on the number of participants, so the fast check runs a fraction of the paper's 486 and
holds them to the same tolerances; the attempt count scales with participants and is capped by the games at
hand (one attempt per participant and game). Ingest is the slow part, so the fast check applies the same
transforms (pipeline.transforms.attempts, durations) to plays read straight from the simulator's files: start
and end from the first and last line, actions and the win from the trailing scorecard the simulator counted by
the human-dataset rules. The full `--scale arc3` check goes through ingest and build, and is marked slow."""

from __future__ import annotations

import json
from datetime import datetime
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
from pipeline.transforms.attempts import apply_attempt_rules, finalize_attempts, participant_recordings
from pipeline.transforms.build import build
from pipeline.transforms.durations import durations_summary

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


def measure_from_files(n_participants: int, seed: int, tmp: Path) -> tuple[int, int, dict[str, float]]:
    """As measure(), without ingest: the attempt and duration transforms on plays read from the files."""
    specs = game_specs(GAMES)
    out = tmp / "arc3"
    simulate_arc3_study(Arc3StudyPlan(n_participants=n_participants, seed=seed), specs, environments_dir=GAMES,
                        out_dir=out, frames=False)
    manifest = json.loads((out / "study.json").read_text())
    levels = {s.game_id: s.n_levels for s in specs}
    plays = []
    for path in sorted((out / "human").rglob("*.recording.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        card = next(iter(lines[-1]["data"]["cards"].values()))
        game_id = lines[0]["data"]["game_id"]
        plays.append({"guid": path.name.split(".")[0], "play_index": 0, "game_id": game_id,
                      "recording_variant": "human-dataset", "n_actions": card["total_actions"],
                      "n_resets": card["resets"][0] if card.get("resets") else 0, "n_undo": 0,
                      "levels_completed": max(card["levels_completed"] or [0]), "n_levels": levels[game_id],
                      "is_fully_solved": "WIN" in card["states"],
                      "started_at": datetime.fromisoformat(lines[0]["timestamp"]),
                      "ended_at": datetime.fromisoformat(lines[-1]["timestamp"])})
    session_plays = pl.DataFrame(manifest["plays"]).select(
        "guid", "session_id", "participant_id", "order_in_session", "is_first_run", "game_id")
    config = load_config()
    rules = apply_attempt_rules(participant_recordings(pl.DataFrame(plays), session_plays, config), config)
    truth = pl.read_csv(tmp / "ground_truth" / "arc3_participants.csv")
    low = truth.filter(pl.col("is_low_effort"))["participant_id"]
    # The detector's decision is the ground truth here (build evaluates the detector itself).
    excluded = session_plays.filter(pl.col("participant_id").is_in(low.implode()))["guid"]
    attempts = finalize_attempts(rules, excluded)
    medians = durations_summary(attempts, config).filter(pl.col("scope_id") == "all")
    minutes = {g: s / 60 for g, s in medians.select("outcome_group", "median_duration_s").iter_rows()}
    n_genuine = truth.height - low.len()
    return attempts["is_analysis_attempt"].sum(), n_genuine * len(specs), minutes


def assert_calibrated(n_attempts: int, reachable: int, n_participants: int, minutes: dict[str, float]) -> None:
    for group, target in MEDIAN_MINUTES.items():
        assert target.within(minutes[group]), (group, minutes[group], target)
    # The paper's attempts at this scale, unless the games at hand allow fewer (one per participant and game).
    expected = min(ATTEMPTS.paper * n_participants / PAPER_PARTICIPANTS, reachable)
    assert abs(n_attempts - expected) <= ATTEMPTS.tolerance * expected, (n_attempts, expected, reachable)


def test_a_fraction_of_the_paper_lands_on_its_medians(tmp_path: Path):
    n = 243
    n_attempts, reachable, minutes = measure_from_files(n, 0, tmp_path)
    assert_calibrated(n_attempts, reachable, n, minutes)


@pytest.mark.slow
def test_scale_arc3_seed_0_lands_on_the_paper(tmp_path: Path):
    n = SCALES["arc3"].participants
    assert n == PAPER_PARTICIPANTS
    n_attempts, reachable, minutes = measure(n, 0, tmp_path)
    assert_calibrated(n_attempts, reachable, n, minutes)
