"""Where a simulation's winning lines come from: a game's shipped solution recordings.

A game folder may ship `solutions/*.jsonl` (toolkit recordings that win the game, or one level each). The
actions are split into one line per level at every `levels_completed` increase; a line replayed from the
level's start wins the level (games here are deterministic), which `verify_specs` checks in the engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import engine
from engine.loader import find_games
from pipeline.core.textfiles import read_text_document
from pipeline.recordings.solution_files import solution_files
from pipeline.simulate.arc3 import Action, GameSpec
from schemas.vocabulary import ACTION_NAMES


def solutions_from_recording(path: Path) -> tuple[str, list[list[Action]]]:
    """(game_id, one action line per completed level) from a toolkit recording that starts with RESET."""
    frames = [json.loads(ln)["data"] for ln in read_text_document(path)[0].splitlines() if ln.strip()]
    frames = [d for d in frames if "game_id" in d]
    lines: list[list[Action]] = []
    current: list[Action] = []
    level = frames[0]["levels_completed"] if frames else 0
    for d in frames[1:]:
        raw = d["action_input"]["id"]
        action_id = ACTION_NAMES.index(raw) if isinstance(raw, str) else int(raw)
        data = {k: v for k, v in (d["action_input"].get("data") or {}).items() if k in ("x", "y")} or None
        current.append((action_id, data))
        if d["levels_completed"] > level:
            lines.append(current)
            current, level = [], d["levels_completed"]
        if d["state"] == "WIN":
            break
    return frames[0]["game_id"], lines


def game_specs(environments_dir: Path, skipped: list[str] | None = None) -> list[GameSpec]:
    """A spec per game under `environments_dir` that ships solution recordings covering every level. A game one
    of whose recordings cannot be read (not a regular file, larger than a solution may be, not a toolkit
    recording) is left out, and "game_id: path: reason" appended to `skipped`; the other games are kept."""
    specs = []
    for info in find_games(environments_dir):
        folder = Path(info.directory)
        by_level: dict[int, list[Action]] = {}
        recordings, refused = solution_files(folder)
        wins = [r for r in recordings if r.name.startswith("win")]  # a losing recording is no solution
        for rec in wins or recordings:
            if refused:
                break
            try:
                _, lines = solutions_from_recording(rec)
                start = _start_level(rec)
            except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError) as err:
                refused.append(f"{rec}: not a toolkit recording that can be read: {type(err).__name__}: {err}")
                break
            for i, line in enumerate(lines):
                by_level.setdefault(start + i, line)
        if refused:
            if skipped is not None:
                skipped.extend(f"{info.game_id}: {why}" for why in refused)
            continue
        if by_level and sorted(by_level) == list(range(len(by_level))):
            specs.append(GameSpec(info.game_id, len(by_level), [by_level[i] for i in range(len(by_level))]))
    return specs


def _start_level(path: Path) -> int:
    first = json.loads(read_text_document(path)[0].splitlines()[0])["data"]
    return int(first.get("levels_completed", 0))


def verify_specs(specs: list[GameSpec], environments_dir: Path) -> None:
    """Play every level's line once in the engine; raise if a line does not win its level."""
    for spec in specs:
        env = engine.make(spec.game_id, environments_dir=environments_dir, frames="none", only_reset_levels=True)
        env.reset()
        for level, line in enumerate(spec.solutions):
            for action_id, data in line:
                env.step(action_id, data)
            if env.levels_completed <= level:
                raise ValueError(f"{spec.game_id}: the shipped line for level {level + 1} does not win it")
