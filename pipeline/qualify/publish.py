"""Publish a game file into ``games/<id>/<version>/`` with metadata and solution recordings.

    python -m pipeline.qualify.publish path/to/pv63.py [--games-dir games] [--max-nodes N]

Steps (deterministic: publishing the same file twice writes the same bytes):

1. ``version`` = first 8 hex digits of the file's sha256; the file is copied to
   ``<games>/<id>/<version>/<id>.py`` and older version folders of the same id are removed.
2. Every level is explored breadth-first from its start (pipeline.explore); the level must be
   winnable within the node budget. The shortest winning path of each level is kept.
3. ``solutions/win.jsonl``: a toolkit-format recording (formats.md §A.1, no frames) of the
   opening RESET followed by every level's shortest path, ending in WIN; it is replayed before it
   is written. ``solutions/lose.jsonl``: the winning paths of the levels before the first level
   that has a reachable GAME_OVER, then a shortest path into GAME_OVER there.
   ``solutions/levels.json``: per level, the explorer's facts (nodes, complete, optimal length,
   random-policy win probability bounds).
4. ``metadata.json`` with the official fields. ``baseline_actions`` is a documented placeholder,
   ``ceil(1.5 * optimal)`` per level (games/README.md), until a human study replaces it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

from engine import GameEnv
from games import GAMES_DIR
from pipeline.explore import Session, resolve
from pipeline.explore.analysis import analyse
from pipeline.explore.graph import LOSE, explore_level
from pipeline.recordings.toolkit_writer import Step, record_actions, replay_recording, write_recording

BASELINE_FACTOR = 1.5
PUBLISHED_AT = "2026-11-22T00:00:00+00:00"  # fixed, so re-publishing is byte-identical

GAME_INFO: dict[str, dict[str, Any]] = {
    # Paver cannot be lost without undo (every move paves a tile), so the explorer, which leaves undo out,
    # finds no GAME_OVER: the losing recording steps right and undoes until the energy runs out.
    "pv63": {"title": "PV63", "default_fps": 10, "tags": ["keyboard"], "lose_script": (0, [4, 7] * 8)},
    "rl36": {"title": "RL36", "default_fps": 10, "tags": ["click"]},
    "bg41": {"title": "BG41", "default_fps": 10, "tags": ["keyboard_click"]},
    "tw85": {"title": "TW85", "default_fps": 10, "tags": ["keyboard"]},
}


def _steps(path: list[dict[str, int]]) -> list[Step]:
    return [Step.from_dict(d) for d in path]


def publish(source: Path, games_dir: Path, *, max_nodes: int = 400_000, log: Any = print) -> Path:
    source = Path(source)
    short_id = source.stem
    code = source.read_bytes()
    version = hashlib.sha256(code).hexdigest()[:8]
    game_id = f"{short_id}-{version}"
    target = games_dir / short_id / version
    for old in (games_dir / short_id).glob("*"):
        if old.is_dir() and old.name != version:
            shutil.rmtree(old)
    target.mkdir(parents=True, exist_ok=True)
    (target / f"{short_id}.py").write_bytes(code)
    info = GAME_INFO.get(short_id, {"title": short_id.upper(), "default_fps": 10, "tags": []})
    class_name = short_id[:1].upper() + short_id[1:]
    meta: dict[str, Any] = {"game_id": game_id, "title": info["title"], "default_fps": info["default_fps"],
                            "tags": info["tags"], "baseline_actions": [], "date_downloaded": PUBLISHED_AT,
                            "class_name": class_name}
    (target / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")

    session = Session(resolve(game_id, games_dir))
    session.start(0)
    facts, wins, lose_path = [], [], None
    lose_level = None
    for level in range(session.n_levels):
        graph = explore_level(session, level, max_nodes=max_nodes)
        m = analyse(graph)
        if m.optimal_path is None:
            raise RuntimeError(f"{game_id} level {level + 1}: no win found ({m.nodes} nodes, {m.stop_reason})")
        log(f"{game_id} level {level + 1}: {m.nodes:,} nodes, complete={m.complete}, optimal={m.optimal_actions}, "
            f"random win {m.random_win_lower:.3g}..{m.random_win_upper:.3g}")
        facts.append({"level": level + 1, "nodes": m.nodes, "edges": m.edges, "complete": m.complete,
                      "optimal_actions": m.optimal_actions, "max_depth": m.max_depth,
                      "random_win_lower": m.random_win_lower, "random_win_upper": m.random_win_upper,
                      "lose_nodes": m.lose_nodes, "click_rule": m.click_rule})
        wins.append(_steps(m.optimal_path))
        if lose_path is None and m.lose_nodes:
            loses = [i for i, k in enumerate(graph.kind) if k == LOSE]
            best = min(loses, key=lambda i: (graph.depth[i], i))
            lose_path = [Step(t.action_id, t.x, t.y) for t in graph.path_to(best)]
            lose_level = level

    if lose_path is None and "lose_script" in info:
        lose_level, actions = info["lose_script"]
        lose_path = [Step(a) for a in actions]
    win_steps = [s for level_steps in wins for s in level_steps]
    player = GameEnv(session.src, only_reset_levels=False)  # recordings are made with full resets (toolkit default)
    lines = record_actions(player.new_game(), game_id, win_steps)
    if lines[-1]["data"]["state"] != "WIN":
        raise RuntimeError(f"{game_id}: the concatenated optimal paths do not win the game")
    replay_recording(player.new_game(), lines)
    write_recording(target / "solutions" / "win.jsonl", lines)
    if lose_path is not None:
        prefix = [s for level_steps in wins[:lose_level] for s in level_steps]
        lines = record_actions(player.new_game(), game_id, prefix + lose_path)
        if lines[-1]["data"]["state"] != "GAME_OVER":
            raise RuntimeError(f"{game_id}: the losing path does not end in GAME_OVER")
        write_recording(target / "solutions" / "lose.jsonl", lines)
    (target / "solutions" / "levels.json").write_text(
        json.dumps({"game_id": game_id, "levels": facts, "lose_level": None if lose_level is None else lose_level + 1},
                   indent=1) + "\n")
    meta["baseline_actions"] = [math.ceil(BASELINE_FACTOR * f["optimal_actions"]) for f in facts]
    (target / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", nargs="+", type=Path)
    parser.add_argument("--games-dir", type=Path, default=GAMES_DIR)
    parser.add_argument("--max-nodes", type=int, default=400_000)
    args = parser.parse_args(argv)
    for source in args.sources:
        print(publish(source, args.games_dir, max_nodes=args.max_nodes))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
