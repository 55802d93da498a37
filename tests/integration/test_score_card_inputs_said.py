"""Card inputs that were scored as the wrong thing, or whose differences were not said (`arcstudy score` and
`ingest` of official scorecards, spec/formats.md §B and §C).

- a card wrapper `cards: {KEY: Card}` whose Card names another game_id was scored as KEY's game against KEY's
  baselines (exit 0) and ingested without a word: which game was played cannot be known, so the card is refused
  by the one card reader, for score and ingest alike, naming both ids;
- a baseline shorter than the game's levels was flagged `baseline_length_differs_from_levels` for a recording
  only: a scored summary states its level count, a bare card's game may load from --games;
- the "states a total" line was missing when a run of the card was left out;
- when every play is left out the table said "total 0.000" and the reason did not name the version of the game
  that is known.

The cards are the toolkit's official tu93 card and scored summary (samples/arc-agi-3/toolkit), and copies of them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.recordings.cards import card_rows

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SIDECAR = json.loads((SHARED / "samples" / "arc-agi-3" / "toolkit" /
                      "tu93_explore_reset_solve_5levels.noframes.expected.json").read_text())
CARD = SIDECAR["card"]  # tu93-0768757b: one play, 5 of its 9 levels completed
ENV = SIDECAR["scored"]["environment"]
TU93 = CARD["game_id"]
LS20 = "ls20-9607627b"
GAMES = SHARED / "conformance" / "environment_files"
SLUG = "scorecard__arc-agi-3_2026-04.json"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--plain", *args], catch_exceptions=False)
    return result.exit_code, result.output


def _write(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _scorecard(out: Path) -> dict:
    return json.loads((out / SLUG).read_text())


def _wrapper(key: str) -> dict:
    return {"won": 0, "played": 1, "total_actions": sum(CARD["actions"]), "levels_completed": 5,
            "cards": {key: copy.deepcopy(CARD)}}


# ------------------------------------------------------------------------------------------------------
# 1. a wrapper's key and its card's game_id
# ------------------------------------------------------------------------------------------------------
def test_the_card_reader_refuses_a_card_filed_under_another_games_id():
    rows, issues, _ = card_rows(None, {LS20: copy.deepcopy(CARD)}, None, None, [])
    assert rows == []
    assert [i.check for i in issues] == ["card_game_id_mismatch"]
    assert LS20 in issues[0].reason and TU93 in issues[0].reason
    # a key that is the card's game_id, or a card that names none, is the key's game as before
    rows, issues, _ = card_rows(None, {TU93: copy.deepcopy(CARD)}, None, None, [])
    assert issues == [] and {r["game_id"] for r in rows} == {TU93}
    unnamed = {k: v for k, v in copy.deepcopy(CARD).items() if k != "game_id"}
    rows, issues, _ = card_rows(None, {TU93: unnamed}, None, None, [])
    assert issues == [] and {r["game_id"] for r in rows} == {TU93}


def test_score_leaves_out_a_card_filed_under_another_game_and_says_both_ids(tmp_path):
    bad = _write(tmp_path / "wrapper.json", _wrapper(LS20))
    good = _write(tmp_path / "summary.json", {"card_id": "c", "score": ENV["score"], "environments": [ENV]})
    code, output = run("score", str(bad), str(good), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 3, output
    line = next(ln for ln in output.splitlines() if "wrapper.json" in ln and "game_id" in ln)
    assert LS20 in line and TU93 in line
    card = _scorecard(tmp_path / "o")
    assert [e["id"] for e in card["environments"]] == [TU93]  # not scored as ls20 against ls20's baselines
    assert [r["file_name"] for r in card["card_inputs"]["runs"]] == ["summary.json"]

    # the same card under its own id scores as the toolkit scored it
    fixed = _write(tmp_path / "fixed.json", _wrapper(TU93))
    code, output = run("score", str(fixed), "--out", str(tmp_path / "f"), "--no-figures")
    assert code == 0, output
    assert _scorecard(tmp_path / "f")["environments"][0]["score"] == pytest.approx(ENV["score"], abs=1e-9)


def test_ingest_quarantines_a_card_filed_under_another_game_with_the_same_reason(tmp_path):
    bad = _write(tmp_path / "wrapper.json", _wrapper(LS20))
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [bad], run_id="t", workers=1)
        quarantine = ws.read("SELECT check_name, reason FROM quarantine").rows()
        stored = ws.read("SELECT game_id FROM core_arc3__card_plays").rows() \
            if ws.has_table("core_arc3__card_plays") else []
    assert report.has_rejections  # exit 3
    assert [q[0] for q in quarantine] == ["card_game_id_mismatch"]
    assert LS20 in quarantine[0][1] and TU93 in quarantine[0][1]
    assert stored == []
    code, output = run("score", str(bad), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 3, output
    assert " ".join(quarantine[0][1].split()) in " ".join(output.split())  # score FILE: the same reason


# ------------------------------------------------------------------------------------------------------
# 2. a baseline of another length than the game's levels, for cards
# ------------------------------------------------------------------------------------------------------
def _long_csv(path: Path, game_id: str, values: list[int]) -> Path:
    rows = ["game_id,level_index,baseline_rule,baseline_value,n_completers"]
    rows += [f"{game_id},{i},upper-median,{v},3" for i, v in enumerate(values, 1)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _flags(out: Path, game_id: str) -> list[str]:
    return _scorecard(out)["verification"]["baseline_sources"][game_id].get("flags") or []


def test_a_short_baseline_is_flagged_for_a_scored_summary_and_named_as_the_cause(tmp_path):
    summary = _write(tmp_path / "tu93.summary.json", {"card_id": "c", "score": ENV["score"], "environments": [ENV]})
    short = _long_csv(tmp_path / "bl.csv", TU93, [25, 16, 40, 42, 123])  # 5 of its 9 levels
    code, output = run("score", str(summary), "--baselines", str(short), "--out", str(tmp_path / "o"),
                       "--no-figures")
    assert code == 0, output
    assert _flags(tmp_path / "o", TU93) == ["baseline_length_differs_from_levels"]
    line = next(ln for ln in output.splitlines() if "run score" in ln)
    assert "levels 6-9" in line and "5 of the card's 9 levels" in line, line
    env = next(ln for ln in output.splitlines() if "environment score" in ln)
    assert "levels 6-9" in env, env
    # all nine levels: no flag, and no such cause
    full = _long_csv(tmp_path / "full.csv", TU93, [25, 16, 40, 42, 123, 10, 10, 10, 10])
    code, output = run("score", str(summary), "--baselines", str(full), "--out", str(tmp_path / "f"),
                       "--no-figures")
    assert code == 0, output
    assert _flags(tmp_path / "f", TU93) == [] and "levels 6-9" not in output


def test_a_short_baseline_is_flagged_for_a_bare_card_whose_game_loads(tmp_path):
    game = "an53-6f5f2264"  # its metadata lists 4 levels, as many as the game has
    card = _write(tmp_path / "an53.card.json", {
        "game_id": game, "total_plays": 1, "guids": ["00000000-0000-4000-8000-000000000001"],
        "levels_completed": [2], "states": ["NOT_FINISHED"], "actions": [30],
        "actions_by_level": [[[1, 3], [2, 25]]], "resets": [0], "total_actions": 30})
    short = _long_csv(tmp_path / "bl.csv", game, [2, 19])
    code, output = run("score", str(card), "--games", str(GAMES), "--baselines", str(short), "--out",
                       str(tmp_path / "o"), "--no-figures")
    assert code == 0, output
    assert _flags(tmp_path / "o", game) == ["baseline_length_differs_from_levels"]
    code, output = run("score", str(card), "--games", str(GAMES), "--out", str(tmp_path / "g"), "--no-figures")
    assert code == 0, output
    assert _flags(tmp_path / "g", game) == []


def test_a_short_baseline_is_flagged_for_a_bare_card_of_a_published_game_without_running_it(tmp_path):
    """tu93 is not in any games folder given: its level count (9) is the published reference's, so the bare card
    is flagged without loading the game."""
    card = _write(tmp_path / "tu93.card.json", copy.deepcopy(CARD))
    short = _long_csv(tmp_path / "bl.csv", TU93, [25, 16, 40, 42, 123])
    code, output = run("score", str(card), "--baselines", str(short), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 0, output
    assert _flags(tmp_path / "o", TU93) == ["baseline_length_differs_from_levels"]


# ------------------------------------------------------------------------------------------------------
# 3. the stated total when a run is left out
# ------------------------------------------------------------------------------------------------------
def _two_games_one_unknown() -> dict:
    """tu93 as scored by the toolkit, and tu93-deadbeef, which the toolkit could not score (score 0): the card's
    total is the mean of both (formats.md C.2)."""
    unknown = copy.deepcopy(ENV)
    unknown["id"] = "tu93-deadbeef"
    r = unknown["runs"][0]
    r.update(guid="99999999-0000-0000-0000-000000000001", level_baseline_actions=[-1] * 9, level_scores=[0.0] * 9,
             score=0.0, message="No Matching EnvironmentInfo found for tu93-deadbeef")
    unknown["score"] = 0.0
    return {"card_id": "u2", "score": (ENV["score"] + 0.0) / 2, "environments": [copy.deepcopy(ENV), unknown]}


def test_the_stated_total_is_compared_when_a_run_is_left_out(tmp_path):
    card = _write(tmp_path / "two.summary.json", _two_games_one_unknown())
    stated = f"{(ENV['score'] + 0.0) / 2:.3f}"
    code, output = run("score", str(card), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 3, output
    lines = [ln for ln in output.splitlines() if "states a total" in ln]
    assert len(lines) == 1, output
    assert f"states a total of {stated}; recomputed {ENV['score']:.3f}" in lines[0]
    assert "tu93-deadbeef" in lines[0] and "as 0" in lines[0] and f"total is {stated} (the same)" in lines[0]
    code, output = run("score", str(card), "--include-unknown-games", "--out", str(tmp_path / "i"), "--no-figures")
    assert code == 0, output
    assert f"states a total of {stated}; recomputed {stated} (the same)" in output


# ------------------------------------------------------------------------------------------------------
# 4. nothing scored; an unknown version of a known game
# ------------------------------------------------------------------------------------------------------
def test_nothing_scored_is_said_and_the_known_version_is_named(tmp_path):
    card = _write(tmp_path / "card.json", {**copy.deepcopy(CARD), "game_id": "tu93-deadbeef"})
    code, output = run("score", str(card), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 3, output
    total = next(ln for ln in output.splitlines() if ln.lstrip("│ ").startswith("total"))
    assert "nothing scored" in total and "0.000" not in total
    reason = next(ln for ln in output.splitlines() if "unknown game" in ln)
    assert "tu93-deadbeef" in reason and TU93 in reason
    doc = _scorecard(tmp_path / "o")
    assert doc["environments"] == [] and "nothing_scored" in doc["verification"]
    assert doc["score"] == 0.0  # the toolkit shape keeps its number; verification says it is no result
    # a scorecard that scored something carries no such note
    known = _write(tmp_path / "known.json", copy.deepcopy(CARD))
    code, output = run("score", str(known), "--out", str(tmp_path / "k"), "--no-figures")
    assert code == 0, output
    assert "nothing_scored" not in _scorecard(tmp_path / "k")["verification"]
    assert "nothing scored" not in output
