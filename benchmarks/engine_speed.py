"""Engine speed on the conformance games, as a ratio to the reference engine.

    python benchmarks/engine_speed.py [--games DIR] [--golden DIR] [--reference README] [--repeat N]

Replays every golden trace (the same actions, RNG seeds, ONLY_RESET_LEVELS settings and
``start_level`` jumps that ``check.py`` uses) and times the engine calls only:

* with frames: ``perform_action(action, raw=<as recorded>)``, i.e. what ``check.py --timing`` measures
  (about 40% of the recorded steps use ``raw=False``, whose nested-list frames cost about as much
  as ``ndarray.tolist()`` on a 64x64 grid);
* frames as arrays: ``perform_action(action, raw=True)`` for every step (how the toolkit calls it);
* without frames: the environment API's ``frames="none"`` mode (no composition, no frame lists).

Best of ``--repeat`` replays per game and mode.  Ratios are the reference engine's ms/step (the table
in the conformance README, measured the same way on this machine kind) divided by ours: ``5.0x``
means five times the reference speed.  Machines are noisy; nothing here asserts on time.

A second table puts the nested-list frames in proportion.  Whatever the engine, a ``raw=False``
frame is 64 new lists of 64 ints that the caller later frees; the cheapest way to make them is
``list.copy`` of cached row lists.  ``list floor`` times exactly that (create and free, for the
recorded list frames of each game) outside any engine, and sets it against the time per step a 5x
ratio allows (reference ms/step / 5).
"""

from __future__ import annotations

import argparse
import gzip
import inspect
import json
import os
import random
import re
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO))

from engine import ActionInput, GameAction  # noqa: E402
from engine.base_game import FRAMES_NONE  # noqa: E402
from engine.loader import find_games, load_game_class  # noqa: E402


def read_trace(path: Path) -> tuple[dict, list[dict]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    header: dict = {}
    episodes: list[dict] = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for text in handle:
            if not text.strip():
                continue
            record = json.loads(text)
            if record.get("kind") == "header":
                header = record
            elif record.get("kind") == "episode":
                record["steps"] = []
                episodes.append(record)
            elif record.get("kind") == "step":
                episodes[-1]["steps"].append(record)
    return header, episodes


def reference_timings(readme: Path) -> dict[str, float]:
    """The ``| <game_id> | <ms/step> |`` rows of the conformance README's reference table."""
    timings: dict[str, float] = {}
    if not readme.is_file():
        return timings
    for line in readme.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\|\s*([a-z0-9]+(?:-[0-9a-f]+)?)\s*\|\s*([0-9.]+)\s*\|\s*$", line)
        if match:
            timings[match.group(1)] = float(match.group(2))
    return timings


def episode_steps(game_class: type, episodes: list[dict]) -> Iterator[tuple[dict, Any, dict, ActionInput]]:
    """(episode, game, step, action) for every recorded step, each episode set up as ``check.py``
    does (ONLY_RESET_LEVELS, RNG seeds, constructor seed, ``start_level`` after step 0)."""
    takes_seed = "seed" in inspect.signature(game_class).parameters
    try:
        for episode in episodes:
            if episode.get("only_reset_levels"):
                os.environ["ONLY_RESET_LEVELS"] = "true"
            else:
                os.environ.pop("ONLY_RESET_LEVELS", None)
            seed = episode.get("rng_seed")
            if seed is not None:
                random.seed(seed)
                np.random.seed(seed % (2**32))
            constructor_seed = episode.get("constructor_seed")
            game = game_class(seed=constructor_seed) if takes_seed and constructor_seed is not None else game_class()
            for step in episode["steps"]:
                action = ActionInput(id=GameAction.from_id(step["action"]), data=dict(step.get("data") or {}))
                yield episode, game, step, action
                if step["step"] == 0 and episode.get("start_level") is not None:
                    game.set_level(int(episode["start_level"]))
    finally:
        os.environ.pop("ONLY_RESET_LEVELS", None)


def replay_seconds(game_class: type, episodes: list[dict], frames: bool, force_raw: bool = False) -> float:
    """Seconds spent inside the engine for one replay of every episode."""
    spent = 0.0
    for episode, game, _, action in episode_steps(game_class, episodes):
        if frames:
            raw = True if force_raw else bool(episode.get("raw", True))
            start = time.perf_counter()
            game.perform_action(action, raw=raw)
        else:
            start = time.perf_counter()
            game._engine_perform(action, True, FRAMES_NONE)
        spent += time.perf_counter() - start
    return spent


def list_frames(game_class: type, episodes: list[dict]) -> list[np.ndarray]:
    """The frames the ``raw=False`` episodes return, as arrays (one replay with ``raw=True``)."""
    as_lists = [episode for episode in episodes if not episode.get("raw", True)]
    collected: list[np.ndarray] = []
    for _, game, _, action in episode_steps(game_class, as_lists):
        collected.extend(np.array(frame) for frame in game.perform_action(action, raw=True).frame)
    return collected


def list_floor_seconds(frames: list[np.ndarray]) -> float:
    """Seconds to make (by ``list.copy`` of ready row lists) and free every frame's nested lists."""
    templates = [frame.tolist() for frame in frames]
    start = time.perf_counter()
    for rows in templates:
        made = list(map(list.copy, rows))
        del made
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=Path, default=SHARED / "conformance" / "environment_files")
    parser.add_argument("--golden", type=Path, default=SHARED / "conformance" / "golden")
    parser.add_argument("--reference", type=Path, default=None, help="README with the reference ms/step table")
    parser.add_argument("--repeat", type=int, default=3, help="replays per game and mode; the best is kept")
    parser.add_argument("--only", nargs="+", default=None, help="game ids (short or full) to run")
    args = parser.parse_args(argv)

    readme = args.reference or args.golden.parent / "README.md"
    reference = reference_timings(readme)
    games = {info.game_id: info for info in find_games(args.games)}
    traces = sorted(p for p in args.golden.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz")))
    if not traces:
        print(f"no golden traces in {args.golden}")
        return 1

    print(f"engine speed vs reference (best of {args.repeat}; reference table: {readme})")
    header = (
        f"{'game':<15} {'steps':>6} | {'frames ms/step':>14} {'steps/s':>8} {'ratio':>7} | "
        f"{'arrays ms/step':>14} {'ratio':>7} | {'no-frames ms/step':>17} {'steps/s':>8} {'ratio':>7}"
    )
    print(header)
    print("-" * len(header))
    with_ms: list[float] = []
    arrays_ms: list[float] = []
    without_ms: list[float] = []
    ratios_with: list[float] = []
    ratios_arrays: list[float] = []
    ratios_without: list[float] = []
    floors: list[tuple[str, float, float, float, float | None]] = []
    for path in traces:
        trace_header, episodes = read_trace(path)
        game_id = trace_header.get("game_id") or path.name.split(".")[0]
        if args.only and not any(game_id == item or game_id.split("-")[0] == item for item in args.only):
            continue
        info = games.get(game_id)
        if info is None:
            print(f"{game_id:<15} game files not found under {args.games}")
            continue
        game_class = load_game_class(info)
        steps = sum(len(episode["steps"]) for episode in episodes)
        best_with = min(replay_seconds(game_class, episodes, True) for _ in range(args.repeat))
        best_arrays = min(replay_seconds(game_class, episodes, True, force_raw=True) for _ in range(args.repeat))
        best_without = min(replay_seconds(game_class, episodes, False) for _ in range(args.repeat))
        ms_with = 1000 * best_with / steps
        ms_arrays = 1000 * best_arrays / steps
        ms_without = 1000 * best_without / steps
        with_ms.append(ms_with)
        arrays_ms.append(ms_arrays)
        without_ms.append(ms_without)
        ref = reference.get(game_id)
        ratio_with = ref / ms_with if ref else None
        ratio_arrays = ref / ms_arrays if ref else None
        ratio_without = ref / ms_without if ref else None
        if ref:
            ratios_with.append(ratio_with)
            ratios_arrays.append(ratio_arrays)
            ratios_without.append(ratio_without)
        frames_as_lists = list_frames(game_class, episodes)
        floor_ms = 1000 * min(list_floor_seconds(frames_as_lists) for _ in range(args.repeat)) / steps
        floors.append((game_id, len(frames_as_lists) / steps, floor_ms, ms_with - ms_arrays, ref))
        print(
            f"{game_id:<15} {steps:>6} | {ms_with:>14.4f} {1000 / ms_with:>8.0f} {_fmt(ratio_with):>7} | "
            f"{ms_arrays:>14.4f} {_fmt(ratio_arrays):>7} | "
            f"{ms_without:>17.4f} {1000 / ms_without:>8.0f} {_fmt(ratio_without):>7}",
            flush=True,
        )
    if with_ms:
        ref_median = reference.get("median")
        med_with = statistics.median(with_ms)
        med_arrays = statistics.median(arrays_ms)
        med_without = statistics.median(without_ms)
        print("-" * len(header))
        print(
            f"{'median':<15} {'':>6} | {med_with:>14.4f} {1000 / med_with:>8.0f} {_fmt(ref_median / med_with if ref_median else None):>7} | "
            f"{med_arrays:>14.4f} {_fmt(ref_median / med_arrays if ref_median else None):>7} | "
            f"{med_without:>17.4f} {1000 / med_without:>8.0f} {_fmt(ref_median / med_without if ref_median else None):>7}"
        )
        if ratios_with:
            print(
                f"median of per-game ratios: with frames {statistics.median(ratios_with):.2f}x, "
                f"frames as arrays {statistics.median(ratios_arrays):.2f}x, "
                f"without frames {statistics.median(ratios_without):.2f}x"
            )
    if floors:
        print()
        print("nested-list frames (raw=False steps): floor = list.copy of ready rows + free, outside any engine")
        print(f"{'game':<15} {'list frames/step':>16} {'floor ms/step':>14} {'ours ms/step':>12} {'5x budget':>10} {'floor share':>11}")
        for game_id, per_step, floor_ms, ours_ms, ref in floors:
            budget = ref / 5 if ref else None
            share = f"{100 * floor_ms / budget:.0f}%" if budget else "n/a"
            budget_text = f"{budget:.4f}" if budget else "n/a"
            print(f"{game_id:<15} {per_step:>16.2f} {floor_ms:>14.4f} {ours_ms:>12.4f} {budget_text:>10} {share:>11}")
        print("(ours = with-frames minus arrays ms/step; the share is of the time per step a 5x ratio allows)")
    return 0


def _fmt(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}x"


if __name__ == "__main__":
    sys.exit(main())
