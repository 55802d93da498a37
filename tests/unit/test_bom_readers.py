"""Files written by Windows tools start with a UTF-8 byte-order mark; the last readers that choked on one (issue 29,
"left open earlier"): the explorer's shipped facts (solutions/levels.json), the simulator's solution recordings, the
engine's metadata loader and its recording reader (the engine has its own utf-8-sig read: it imports no pipeline)."""

from __future__ import annotations

import shutil
from pathlib import Path

from games import GAMES_DIR

BOM = b"\xef\xbb\xbf"


def _copy_with_bom(tmp_path: Path, *names: str) -> Path:
    """A copy of the shipped pv63 folder whose named files (relative to the version folder) start with a BOM."""
    src = next(GAMES_DIR.glob("pv63/*/pv63.py")).parent
    dst = tmp_path / "games" / "pv63" / src.name
    shutil.copytree(src, dst)
    for name in names:
        path = dst / name
        path.write_bytes(BOM + path.read_bytes())
    return tmp_path / "games"


def test_engine_loads_metadata_with_a_bom(tmp_path):
    from engine.loader import find_games

    games = _copy_with_bom(tmp_path, "metadata.json")
    (info,) = find_games(games)
    assert info.game_id.startswith("pv63-") and info.baseline_actions


def test_engine_reads_a_recording_with_a_bom(tmp_path):
    from engine.recording import read_recording

    games = _copy_with_bom(tmp_path, "solutions/win.jsonl")
    plain = read_recording(next(GAMES_DIR.glob("pv63/*/solutions/win.jsonl")))
    with_bom = read_recording(next(games.glob("pv63/*/solutions/win.jsonl")))
    assert [ln.data for ln in with_bom.lines] == [ln.data for ln in plain.lines]
    with open(next(games.glob("pv63/*/solutions/win.jsonl")), encoding="utf-8") as handle:  # BOM left in the text
        assert read_recording(handle).lines[0].data == plain.lines[0].data


def test_simulator_specs_read_solutions_with_a_bom(tmp_path):
    from pipeline.simulate.specs import game_specs

    games = _copy_with_bom(tmp_path, "solutions/win.jsonl", "solutions/lose.jsonl")
    (spec,) = game_specs(games)
    (shipped,) = [s for s in game_specs(GAMES_DIR) if s.game_id == spec.game_id]
    assert spec.solutions == shipped.solutions


def test_explorer_reads_shipped_facts_with_a_bom(tmp_path):
    from engine.loader import find_games
    from pipeline.explore import _shipped_optimum

    games = _copy_with_bom(tmp_path, "solutions/levels.json")
    (info,) = find_games(games)
    (shipped,) = [g for g in find_games(GAMES_DIR) if g.game_id == info.game_id]
    assert [_shipped_optimum(info, lvl) for lvl in (1, 2)] == [_shipped_optimum(shipped, lvl) for lvl in (1, 2)]
    assert _shipped_optimum(shipped, 2) is not None


def test_explorer_takes_no_optimum_from_shipped_facts_it_cannot_use(tmp_path):
    """levels.json comes with a game folder from outside: a malformed one raised (AttributeError on a list,
    RecursionError, a float optimum or a string truncated by `int`); now it is no recorded optimum."""
    from engine.loader import find_games
    from pipeline.explore import _shipped_optimum

    games = _copy_with_bom(tmp_path)
    (info,) = find_games(games)
    path = info.directory / "solutions" / "levels.json"
    good = path.read_text()
    assert _shipped_optimum(info, 2) is not None
    gid = info.game_id
    for content in ("[]", '"x"', "[" * 100_000 + "]" * 100_000, f'{{"game_id": "{gid}", "levels": 7}}',
                    f'{{"game_id": "{gid}", "levels": [1, "a", null]}}',
                    f'{{"game_id": "{gid}", "levels": [{{"level": 2, "optimal_actions": 3.5}}]}}',
                    f'{{"game_id": "{gid}", "levels": [{{"level": 2, "optimal_actions": "4"}}]}}',
                    f'{{"game_id": "{gid}", "levels": [{{"level": 2, "optimal_actions": -1}}]}}',
                    f'{{"game_id": "{gid}", "levels": [{{"level": 2, "optimal_actions": true}}]}}'):
        path.write_text(content)
        assert _shipped_optimum(info, 2) is None, content
    path.write_text(good.replace('"optimal_actions"', '"optimal_actions_"', 1))  # level 1's entry has none
    assert _shipped_optimum(info, 1) is None and _shipped_optimum(info, 2) is not None


def test_a_json_error_is_said_once_with_its_place(tmp_path):
    """json's message for a control character ends in " at" itself: a task file's reason read "Invalid control
    character at at line 1 column 4504"."""
    from pipeline.ingest.base import FileContext, FileRejected
    from pipeline.ingest.harc_arc import read_task_json

    path = tmp_path / "189da87a.json"
    path.write_text('{"train": [{"input": [[1]], "output": [[1]]}], "test": [{"input": "a\x00b"}]}')
    try:
        read_task_json(FileContext(path, "f" * 64, "t", None))
    except FileRejected as err:
        assert "Invalid control character at line 1 column" in err.reason and "at at" not in err.reason, err.reason
    else:
        raise AssertionError("a raw NUL in a JSON string is not valid JSON")
