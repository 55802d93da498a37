"""The simulated ARC-AGI-3 study and agents, on the conformance fixture games (their winning lines come
from the official toolkit's scripted-win recordings in ../shared/samples)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import statistics
from pathlib import Path

import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.simulate.agents import run_agent, write_agents_repo, write_toolkit
from pipeline.simulate.arc3 import Arc3StudyPlan, GameSpec, simulate_arc3_study
from pipeline.simulate.specs import solutions_from_recording, verify_specs

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
ENVS = SHARED / "conformance" / "environment_files"
GAMES = ("mz41", "ly28", "tf62", "pl39")


@pytest.fixture(scope="module")
def specs() -> list[GameSpec]:
    out = []
    for code in GAMES:
        rec = next((SHARED / "samples" / "arc-agi-3" / "fixtures").glob(f"{code}_scripted-win.*.jsonl"))
        game_id, lines = solutions_from_recording(rec)
        out.append(GameSpec(game_id, len(lines), lines))
    verify_specs(out, ENVS)
    return out


def digest_tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def study(specs, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sim") / "arc3"
    simulate_arc3_study(Arc3StudyPlan(n_participants=10, seed=3, low_effort_share=0.2), specs,
                        environments_dir=ENVS, out_dir=folder, frames=False)
    return folder


def test_same_seed_same_bytes_other_seed_other_bytes(specs, study: Path, tmp_path: Path):
    again = tmp_path / "again" / "arc3"
    simulate_arc3_study(Arc3StudyPlan(n_participants=10, seed=3, low_effort_share=0.2), specs,
                        environments_dir=ENVS, out_dir=again, frames=False)
    assert digest_tree(again) == digest_tree(study)
    other = tmp_path / "other" / "arc3"
    simulate_arc3_study(Arc3StudyPlan(n_participants=10, seed=4, low_effort_share=0.2), specs,
                        environments_dir=ENVS, out_dir=other, frames=False)
    assert digest_tree(other) != digest_tree(study)


def test_the_study_ingests_cleanly_and_looks_human(study: Path, tmp_path: Path):
    truth = {ln.split(",")[0]: ln.split(",")[2] == "true"
             for ln in (study.parent / "ground_truth" / "arc3_participants.csv").read_text().splitlines()[1:]}
    assert sum(truth.values()) == 2
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [study], run_id="sim")
        assert not report.has_rejections, [f.message for f in report.files if f.status != "loaded"]
        plays = ws.read("""
            SELECT p.play_id, s.participant_id, s.game_id, c.card_actions, c.levels_completed,
                   epoch(p.ended_at - p.started_at) AS seconds
            FROM core_arc3__plays p JOIN core_study__session_plays s USING (guid)
            JOIN core_arc3__card_plays c ON c.play_id = p.play_id""")
        assert plays.height == ws.row_count("core_study__session_plays")
        # Every play's card (written by the simulator) agrees with the counting rules applied to its lines.
        steps = ws.read("SELECT play_id, count(*) FILTER (WHERE action_name <> 'RESET' OR line_number > 1) AS n "
                        "FROM core_arc3__steps WHERE NOT is_post_terminal GROUP BY play_id")
        n_by_play = dict(zip(steps["play_id"], steps["n"], strict=True))
        for row in plays.iter_rows(named=True):
            assert row["card_actions"] == n_by_play[row["play_id"]]
    genuine = plays.filter(~plays["participant_id"].replace_strict(truth, return_dtype=bool))
    low = plays.filter(plays["participant_id"].replace_strict(truth, return_dtype=bool))
    # Genuine attempts take minutes and many actions; low-effort ones are quick and short.
    assert statistics.median(genuine["seconds"]) > 120
    assert statistics.median(low["seconds"]) < 60
    assert statistics.median(genuine["card_actions"]) > 30 > statistics.median(low["card_actions"])
    assert genuine["levels_completed"].mean() > low["levels_completed"].mean()


def test_people_spend_more_than_the_winning_line_and_differ(study: Path, specs):
    shortest = {s.game_id: sum(len(x) for x in s.solutions) for s in specs}
    full = []
    for rec in study.rglob("*.recording.jsonl"):
        last = json.loads(rec.read_text().splitlines()[-1])["data"]
        (game_id, card), = last["cards"].items()
        if "WIN" in card["states"]:
            full.append((game_id, card["actions"][0]))
    assert full, "someone should finish a game"
    assert all(actions >= shortest[g] for g, actions in full)
    assert len({a for _, a in full}) > 1


def test_agents_play_and_write_both_formats(specs, tmp_path: Path):
    spec = specs[0]
    baseline = [2 * len(x) for x in spec.solutions]
    best = run_agent("near-optimal", spec, baseline, random.Random(1), environments_dir=ENVS, frames=False)
    assert best.levels_completed == spec.n_levels
    rand = run_agent("random", spec, baseline, random.Random(1), environments_dir=ENVS, frames=True)
    assert rand.n_actions <= sum(5 * b for b in baseline)
    # Graph search pays for exploring, but finds short levels (tf62's first levels take 1-2 moves).
    tf62 = next(s for s in specs if s.game_id.startswith("tf62"))
    explorer = run_agent("explorer", tf62, [20 * len(x) for x in tf62.solutions], random.Random(2),
                         environments_dir=ENVS, frames=False)
    assert explorer.levels_completed >= 2
    assert explorer.n_actions > sum(len(x) for x in tf62.solutions[: explorer.levels_completed])
    toolkit = write_toolkit(best, tmp_path / "agents", "card-1")
    repo_run = run_agent("near-optimal", spec, baseline, random.Random(7), environments_dir=ENVS, frames=True,
                         action_ids="int")
    repo = write_agents_repo(repo_run, tmp_path / "repo", random.Random(5), max_actions=100)
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [toolkit, repo], run_id="agents")
        assert not report.has_rejections
        variants = ws.read("SELECT recording_variant, is_action_ids_lost FROM core_arc3__plays ORDER BY 1").rows()
        assert variants == [("benchmarking", False), ("toolkit", False)]
        assert ws.row_count("core_arc3__usage") == len(repo_run.lines) - 1


def test_recordings_with_frames_are_canonical_json_and_deterministic(specs, tmp_path: Path):
    """Lines are streamed with the frames' JSON built from cached row texts: every line must be exactly what
    json.dumps writes for its content, and longer attempts (exploration) must stay seed-determined."""
    plan = Arc3StudyPlan(n_participants=2, seed=5, low_effort_share=0.0, exploration=2.0)
    first = simulate_arc3_study(plan, specs, environments_dir=ENVS, out_dir=tmp_path / "a" / "arc3")
    simulate_arc3_study(plan, specs, environments_dir=ENVS, out_dir=tmp_path / "b" / "arc3")
    assert digest_tree(tmp_path / "a" / "arc3") == digest_tree(tmp_path / "b" / "arc3")
    n_lines = n_frames = 0
    for rec in sorted((tmp_path / "a" / "arc3" / "human").rglob("*.recording.jsonl")):
        for text in rec.read_text().splitlines():
            line = json.loads(text)
            assert json.dumps(line, separators=(", ", ": ")) == text
            n_lines += 1
            n_frames += len(line["data"].get("frame", []))
    assert n_lines == first["lines"] and n_frames >= n_lines - first["plays"]  # every step has its frames
    shorter = simulate_arc3_study(dataclasses.replace(plan, exploration=1.0), specs, environments_dir=ENVS,
                                  out_dir=tmp_path / "c" / "arc3", frames=False)
    assert shorter["lines"] < first["lines"]
