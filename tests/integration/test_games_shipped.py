"""arcstudy's own games: layout, metadata, design rules, and their shipped solution recordings."""

from __future__ import annotations

import csv
import hashlib
import json
import re

import pytest

from engine import GameEnv
from engine.recording import iter_recording
from games import GAMES_DIR, list_games
from pipeline.explore import Session, resolve
from pipeline.recordings.toolkit_writer import read_recording, replay_recording, steps_of

GAMES = list_games()
FIXTURE_IDS = {"mz41", "ck17", "tf62", "ly28", "an53", "ud74", "pl39", "cm86"}


def _ids(shared_dir):
    with open(shared_dir / "reference" / "arc-agi-3-public-games.csv", newline="") as fh:
        return {row["game"] for row in csv.DictReader(fh)}


def test_there_are_at_least_four_games():
    assert len(GAMES) >= 4
    assert len({g.short_id for g in GAMES}) == len(GAMES), "one version per game"


def test_ids_are_new(shared_dir):
    public = _ids(shared_dir)
    for g in GAMES:
        assert re.fullmatch(r"[a-z0-9]{4}", g.short_id)
        assert g.short_id not in public, f"{g.short_id} collides with a public game"
        assert g.short_id not in FIXTURE_IDS



def fresh_game(game_id):
    """A new instance of the game, with the full resets the recordings were made with."""
    return GameEnv(resolve(game_id, GAMES_DIR), only_reset_levels=False).new_game()


@pytest.mark.parametrize("entry", GAMES, ids=[g.short_id for g in GAMES])
def test_layout_and_metadata(entry):
    source = entry.source
    assert source.is_file()
    assert entry.version == hashlib.sha256(source.read_bytes()).hexdigest()[:8]
    assert entry.directory == GAMES_DIR / entry.short_id / entry.version
    meta = entry.metadata
    assert meta["game_id"] == f"{entry.short_id}-{entry.version}"
    assert meta["class_name"] == entry.short_id[:1].upper() + entry.short_id[1:]
    assert meta["title"] and isinstance(meta["default_fps"], int)
    assert set(meta["tags"]) <= {"keyboard", "click", "keyboard_click"}
    facts = entry.level_facts
    # one positive baseline per level: published as ceil(1.5 x optimal), later recomputed from a study
    # (`arcstudy baselines --write-metadata games`), so only the shape is fixed here
    assert len(meta["baseline_actions"]) == len(facts) >= 6
    assert all(isinstance(b, int) and b >= row["optimal_actions"]
               for b, row in zip(meta["baseline_actions"], facts, strict=True))
    # written against the public API only, like official games
    text = source.read_text()
    imports = re.findall(r"^(?:from|import) (\S+)", text, flags=re.M)
    assert set(imports) <= {"arcengine", "numpy", "copy", "math"}, imports


@pytest.mark.parametrize("entry", GAMES, ids=[g.short_id for g in GAMES])
def test_level_facts_meet_the_design_rules(entry):
    facts = entry.level_facts
    assert all(row["complete"] for row in facts), "every level's graph is fully explored"
    for row in facts[1:]:
        assert row["random_win_upper"] <= 1e-4, f"level {row['level']} is too easy for a random policy"
        assert row["nodes"] <= 300_000
    assert facts[0]["optimal_actions"] < min(r["optimal_actions"] for r in facts[1:]), "level 1 is the tutorial"


def test_the_set_covers_the_required_kinds():
    kinds = {}
    for g in GAMES:
        session = Session(resolve(g.game_id, GAMES_DIR))
        session.start(0)
        actions = set(session.available_actions)
        kinds[g.short_id] = actions
    assert any(a <= {1, 2, 3, 4, 5} for a in kinds.values()), "a keyboard-only game"
    assert any(a == {6} for a in kinds.values()), "a click-only game"
    assert any(6 in a and a & {1, 2, 3, 4, 5} for a in kinds.values()), "a keyboard + click game"
    assert any(7 in a for a in kinds.values()), "a game with undo"
    assert any((g.solutions_dir / "lose.jsonl").is_file() for g in GAMES), "a game that can be lost"


@pytest.mark.parametrize("entry", GAMES, ids=[g.short_id for g in GAMES])
def test_winning_recording_replays_to_win(entry):
    path = entry.solutions_dir / "win.jsonl"
    lines = read_recording(path)
    replay_recording(fresh_game(entry.game_id), lines)
    assert lines[0]["data"]["full_reset"] is True and lines[0]["data"]["action_input"]["id"] == "RESET"
    assert lines[-1]["data"]["state"] == "WIN"
    # the recording is the concatenation of every level's optimal path
    completed = [line["data"]["levels_completed"] for line in lines]
    per_level, start = [], 0
    for n in range(1, len(entry.level_facts) + 1):
        end = completed.index(n)
        per_level.append(end - start)
        start = end
    assert per_level == [row["optimal_actions"] for row in entry.level_facts]
    # the engine's own reader accepts the file as a toolkit recording
    parsed = list(iter_recording(path))
    assert len(parsed) == len(lines) and parsed[-1].state == "WIN"


@pytest.mark.parametrize("entry", [g for g in GAMES if (g.solutions_dir / "lose.jsonl").is_file()],
                         ids=lambda g: g.short_id)
def test_losing_recording_replays_to_game_over(entry):
    lines = read_recording(entry.solutions_dir / "lose.jsonl")
    replay_recording(fresh_game(entry.game_id), lines)
    assert lines[-1]["data"]["state"] == "GAME_OVER"
    assert all(line["data"]["state"] == "NOT_FINISHED" for line in lines[:-1])


def test_a_tampered_recording_is_caught(tmp_path):
    entry = GAMES[0]
    lines = read_recording(entry.solutions_dir / "win.jsonl")
    steps = steps_of(lines)
    assert steps
    lines[3]["data"]["levels_completed"] += 1
    with pytest.raises(AssertionError, match="line 4: levels_completed"):
        replay_recording(fresh_game(entry.game_id), lines)


def test_level_facts_files_name_their_game():
    for g in GAMES:
        data = json.loads((g.solutions_dir / "levels.json").read_text())
        assert data["game_id"] == g.game_id
