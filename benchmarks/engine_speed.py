"""Engine speed on a folder of games, as a ratio to the reference engine.

    python benchmarks/engine_speed.py [--games DIR] [--golden DIR] [--repeat N] [--only ID ...]
                                      [--reference-engine PATH | --reference README]

What is replayed, per game found under ``--games`` (any layout ``engine.loader`` finds):

* its golden trace ``<golden>/<game_id>.jsonl[.gz]`` if there is one: the same actions, RNG seeds,
  ONLY_RESET_LEVELS settings and ``start_level`` jumps that ``check.py`` uses, each episode with its
  recorded ``raw`` flag;
* else the toolkit recordings (``*.jsonl`` whose lines carry ``data.action_input``) next to the game,
  e.g. ``games/<id>/<version>/solutions/win.jsonl``, one episode each with ``raw=True`` as the
  toolkit calls it;
* else one seeded random episode (``--random-steps`` actions drawn from ``available_actions``, ACTION6
  at random cells), chosen once on this engine and replayed identically everywhere.

Only the engine calls are timed, in three modes:

* with frames: ``perform_action(action, raw=<as recorded>)``, i.e. what ``check.py --timing`` measures
  (about 40% of the golden steps use ``raw=False``, whose nested-list frames cost about as much
  as ``ndarray.tolist()`` on a 64x64 grid);
* frames as arrays: ``perform_action(action, raw=True)`` for every step (how the toolkit calls it);
* without frames: the environment API's ``frames="none"`` mode (no composition, no frame lists;
  this engine only).

Best of ``--repeat`` replays per game and mode, timed in wall time like ``check.py --timing`` or, with
``--clock cpu``, in this thread's CPU time (far steadier on a machine shared with other work).  Ratios are the reference's ms/step divided by ours
(``5.0x`` means five times the reference speed).  The reference is either

* ``--reference-engine PATH``: a package providing the arcengine API (the package directory itself,
  or a directory containing ``arcengine/``), imported as ``arcengine`` and timed the same way in the
  same run, replays alternating with ours so that machine load hits both alike; or
* the ``| <game_id> | <ms/step> |`` table of a README (default: the conformance kit's README, measured
  on a quiet machine; only meaningful when this machine is quiet too).

Machines are noisy; nothing here asserts on time.  The LAST line printed is the headline: the median
of the per-game ratios with frames as recorded.

A second table puts the nested-list frames in proportion.  Whatever the engine, a ``raw=False``
frame is 64 new lists of 64 ints that the caller later frees; the cheapest way to make them is
``list.copy`` of cached row lists.  ``list floor`` times exactly that (create and free, for the
recorded list frames of each game) outside any engine, and sets it against the time per step a 5x
ratio allows (reference ms/step / 5).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import importlib.util
import inspect
import json
import os
import random
import re
import statistics
import sys
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO))

from engine import ActionInput, GameAction  # noqa: E402
from engine.base_game import FRAMES_NONE  # noqa: E402
from engine.loader import GameInfo, find_games, load_game_class  # noqa: E402

# ----------------------------------------------------------------------------------------------
# What to replay
# ----------------------------------------------------------------------------------------------

@dataclass
class Episode:
    """One episode to replay: settings as ``check.py`` applies them, and (action id, data) steps."""

    raw: bool = True
    only_reset_levels: bool = False
    rng_seed: int | None = None
    constructor_seed: int | None = None
    start_level: int | None = None
    steps: list[tuple[int, dict]] = field(default_factory=list)


def read_trace(path: Path) -> list[Episode]:
    """The episodes of a golden trace (``check.py`` format)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    episodes: list[Episode] = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for text in handle:
            if not text.strip():
                continue
            record = json.loads(text)
            if record.get("kind") == "episode":
                episodes.append(
                    Episode(
                        raw=bool(record.get("raw", True)),
                        only_reset_levels=bool(record.get("only_reset_levels")),
                        rng_seed=record.get("rng_seed"),
                        constructor_seed=record.get("constructor_seed"),
                        start_level=record.get("start_level"),
                    )
                )
            elif record.get("kind") == "step":
                episodes[-1].steps.append((int(record["action"]), dict(record.get("data") or {})))
    return episodes


def read_recording(path: Path) -> Episode | None:
    """A toolkit recording (spec formats §A.1) as one ``raw=True`` episode; None if it is not one."""
    steps: list[tuple[int, dict]] = []
    try:
        with open(path, encoding="utf-8") as handle:
            for text in handle:
                if not text.strip():
                    continue
                action = (json.loads(text).get("data") or {}).get("action_input")
                if not isinstance(action, dict):
                    return None
                ident = action.get("id")
                ident = GameAction.from_name(ident).value if isinstance(ident, str) else int(ident)
                steps.append((ident, dict(action.get("data") or {})))
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    if not steps or steps[0][0] != GameAction.RESET.value:
        return None
    return Episode(raw=True, rng_seed=0, constructor_seed=0, steps=steps)


def random_episode(game_class: type, steps: int, seed: int = 0) -> Episode:
    """A seeded random play chosen once on this engine: actions from ``available_actions`` (ACTION6
    at a random display cell), RESET after GAME_OVER or WIN."""
    chooser = random.Random(seed)
    episode = Episode(raw=True, rng_seed=seed, constructor_seed=0, steps=[(0, {})])
    for _, game, _, action in episode_steps(OURS, game_class, [episode]):
        frame = game.perform_action(action, raw=True)
        if len(episode.steps) >= steps:
            continue
        if frame.state.name in ("GAME_OVER", "WIN"):
            episode.steps.append((0, {}))
        else:
            ident = chooser.choice(list(frame.available_actions) or [0])
            data = {"x": chooser.randrange(64), "y": chooser.randrange(64)} if ident == 6 else {}
            episode.steps.append((ident, data))
    return episode


def plan_for(info: GameInfo, golden: Path | None, game_class: type, random_steps: int) -> tuple[str, list[Episode]]:
    """(source description, episodes) for one game: golden trace, else recordings, else random play."""
    if golden is not None:
        for name in (f"{info.game_id}.jsonl.gz", f"{info.game_id}.jsonl"):
            if (golden / name).is_file():
                return "golden", read_trace(golden / name)
    recordings = [read_recording(path) for path in sorted(info.directory.rglob("*.jsonl"))]
    recordings = [episode for episode in recordings if episode is not None]
    if recordings:
        return f"{len(recordings)} rec", recordings
    return "random", [random_episode(game_class, random_steps)]


# ----------------------------------------------------------------------------------------------
# Engines under test
# ----------------------------------------------------------------------------------------------

@dataclass
class Engine:
    """An engine as the benchmark drives it: game classes, action objects, and (ours only) the
    frame-less step."""

    label: str
    load: Callable[[GameInfo], type]
    action_input: type
    game_action: type
    no_frames: Callable[[Any, Any], Any] | None = None


OURS = Engine(
    label="engine",
    load=load_game_class,
    action_input=ActionInput,
    game_action=GameAction,
    no_frames=lambda game, action: game._engine_perform(action, True, FRAMES_NONE),
)


def reference_engine(path: Path) -> Engine:
    """The arcengine-API package at ``path`` (its directory, or a directory holding ``arcengine/``),
    imported as ``arcengine``; games are executed against it with plain imports."""
    package_dir = path / "arcengine" if (path / "arcengine" / "__init__.py").is_file() else path
    init = package_dir / "__init__.py"
    if not init.is_file():
        raise SystemExit(f"--reference-engine {path}: no package (__init__.py) there or in {path}/arcengine")
    for name in [name for name in sys.modules if name == "arcengine" or name.startswith("arcengine.")]:
        del sys.modules[name]
    spec = importlib.util.spec_from_file_location("arcengine", init, submodule_search_locations=[str(package_dir)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["arcengine"] = module
    spec.loader.exec_module(module)
    importlib.import_module("arcengine.enums")  # games do ``from arcengine.enums import ...``
    classes: dict[str, type] = {}

    def load(info: GameInfo) -> type:
        if info.game_id not in classes:
            game_module = types.ModuleType(f"arc_agi_3.{info.game_id}")
            game_module.__file__ = str(info.source)
            exec(compile(info.source.read_bytes(), str(info.source), "exec"), game_module.__dict__)
            classes[info.game_id] = getattr(game_module, info.class_name)
        return classes[info.game_id]

    return Engine(label=str(package_dir), load=load, action_input=module.ActionInput, game_action=module.GameAction)


# ----------------------------------------------------------------------------------------------
# Replays
# ----------------------------------------------------------------------------------------------

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


def episode_steps(engine: Engine, game_class: type, episodes: list[Episode]) -> Iterator[tuple[Episode, Any, int, Any]]:
    """(episode, game, step index, action) for every step, each episode set up as ``check.py``
    does (ONLY_RESET_LEVELS, RNG seeds, constructor seed, ``start_level`` after step 0).  Steps
    are read as they are yielded, so a caller may append to ``episode.steps``."""
    takes_seed = "seed" in inspect.signature(game_class).parameters
    from_id = engine.game_action.from_id
    try:
        for episode in episodes:
            if episode.only_reset_levels:
                os.environ["ONLY_RESET_LEVELS"] = "true"
            else:
                os.environ.pop("ONLY_RESET_LEVELS", None)
            if episode.rng_seed is not None:
                random.seed(episode.rng_seed)
                np.random.seed(episode.rng_seed % (2**32))
            seed = episode.constructor_seed
            game = game_class(seed=seed) if takes_seed and seed is not None else game_class()
            index = 0
            while index < len(episode.steps):
                ident, data = episode.steps[index]
                yield episode, game, index, engine.action_input(id=from_id(ident), data=dict(data))
                if index == 0 and episode.start_level is not None:
                    game.set_level(int(episode.start_level))
                index += 1
    finally:
        os.environ.pop("ONLY_RESET_LEVELS", None)


# What the replays are timed with: wall time (as check.py --timing), or this thread's CPU time,
# which other processes on a loaded machine disturb far less (``--clock cpu``).
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


def replay_seconds(engine: Engine, game_class: type, episodes: list[Episode], mode: str, clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds spent inside the engine for one replay of every episode; ``mode`` is "recorded"
    (raw as recorded), "arrays" (raw=True) or "none" (no frames, ours only)."""
    spent = 0.0
    no_frames = engine.no_frames
    for episode, game, _, action in episode_steps(engine, game_class, episodes):
        if mode == "none":
            start = clock()
            no_frames(game, action)
        else:
            raw = True if mode == "arrays" else episode.raw
            start = clock()
            game.perform_action(action, raw=raw)
        spent += clock() - start
    return spent


def list_frames(game_class: type, episodes: list[Episode]) -> list[np.ndarray]:
    """The frames the ``raw=False`` episodes return, as arrays (one replay with ``raw=True``)."""
    as_lists = [episode for episode in episodes if not episode.raw]
    collected: list[np.ndarray] = []
    for _, game, _, action in episode_steps(OURS, game_class, as_lists):
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


def best_ms(
    engines: list[Engine], classes: list[type], episodes: list[Episode], mode: str, repeat: int, steps: int, clock: Callable[[], float]
) -> list[float | None]:
    """Best ms/step per engine; replays alternate between the engines (in turns) so that load hits
    all alike."""
    best: list[float | None] = [None] * len(engines)
    for round_ in range(repeat):
        order = list(range(len(engines)))
        if round_ % 2:
            order.reverse()  # neither engine always runs right after the other
        for index in order:
            engine = engines[index]
            if mode == "none" and engine.no_frames is None:
                continue
            gc.collect()  # each replay starts from the same heap state
            ms = 1000 * replay_seconds(engine, classes[index], episodes, mode, clock) / steps
            best[index] = ms if best[index] is None else min(best[index], ms)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=Path, default=SHARED / "conformance" / "environment_files")
    parser.add_argument("--golden", type=Path, default=None, help="golden traces (default: <games>/../golden if it exists)")
    parser.add_argument("--reference-engine", type=Path, default=None, help="arcengine-API package to time in the same run")
    parser.add_argument("--reference", type=Path, default=None, help="README with the reference ms/step table (fallback)")
    parser.add_argument("--repeat", type=int, default=3, help="replays per game, mode and engine; the best is kept")
    parser.add_argument("--only", nargs="+", default=None, help="game ids (short or full) to run")
    parser.add_argument("--random-steps", type=int, default=300, help="length of the random episode of a game with no trace")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="wall time (as check.py) or thread CPU time (loaded machines)")
    args = parser.parse_args(argv)

    golden = args.golden if args.golden is not None else args.games.parent / "golden"
    golden = golden if golden.is_dir() else None
    engines = [OURS]
    table: dict[str, float] = {}
    if args.reference_engine is not None:
        engines.append(reference_engine(args.reference_engine))
        source = f"timed in this run: {engines[1].label}"
    else:
        readme = args.reference or args.games.parent / "README.md"
        table = reference_timings(readme)
        source = f"table in {readme}"
    games = [
        info
        for info in find_games(args.games)
        if not args.only or any(info.game_id == item or info.short_id == item for item in args.only)
    ]
    if not games:
        print(f"no games under {args.games}")
        return 1

    print(f"engine speed vs reference (best of {args.repeat}, {args.clock} clock; reference {source})")
    header = (
        f"{'game':<15} {'replayed':>8} {'steps':>6} | {'frames ms/step':>14} {'ref':>8} {'ratio':>7} | "
        f"{'arrays ms/step':>14} {'ref':>8} {'ratio':>7} | {'no-frames ms/step':>17} {'ratio':>7}"
    )
    print(header)
    print("-" * len(header))
    rows: list[tuple[float, float, float, float | None, float | None, float | None]] = []
    floors: list[tuple[str, float, float, float, float | None]] = []
    for info in games:
        classes = [engine.load(info) for engine in engines]
        replayed, episodes = plan_for(info, golden, classes[0], args.random_steps)
        steps = sum(len(episode.steps) for episode in episodes)
        clock = CLOCKS[args.clock]
        with_ms = best_ms(engines, classes, episodes, "recorded", args.repeat, steps, clock)
        arrays_ms = best_ms(engines, classes, episodes, "arrays", args.repeat, steps, clock)
        without_ms = best_ms(engines, classes, episodes, "none", args.repeat, steps, clock)[0]
        if len(engines) > 1:
            ref_with, ref_arrays = with_ms[1], arrays_ms[1]
        else:
            ref_with = ref_arrays = table.get(info.game_id)
        ours_with, ours_arrays = with_ms[0], arrays_ms[0]
        ratio_with = ref_with / ours_with if ref_with else None
        ratio_arrays = ref_arrays / ours_arrays if ref_arrays else None
        # Without frames there is no reference mode: set it against the reference's arrays time.
        ratio_without = ref_arrays / without_ms if ref_arrays else None
        rows.append((ours_with, ours_arrays, without_ms, ratio_with, ratio_arrays, ratio_without))
        frames_as_lists = list_frames(classes[0], episodes)
        floor_ms = 1000 * min(list_floor_seconds(frames_as_lists) for _ in range(args.repeat)) / steps
        floors.append((info.game_id, len(frames_as_lists) / steps, floor_ms, ours_with - ours_arrays, ref_with))
        print(
            f"{info.game_id:<15} {replayed:>8} {steps:>6} | {ours_with:>14.4f} {_ms(ref_with):>8} {_fmt(ratio_with):>7} | "
            f"{ours_arrays:>14.4f} {_ms(ref_arrays):>8} {_fmt(ratio_arrays):>7} | "
            f"{without_ms:>17.4f} {_fmt(ratio_without):>7}",
            flush=True,
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
    print()
    print("-" * len(header))
    print(
        f"{'median ms/step':<32} | {statistics.median(r[0] for r in rows):>14.4f} | "
        f"{statistics.median(r[1] for r in rows):>14.4f} | {statistics.median(r[2] for r in rows):>17.4f}"
    )
    ratios = [r for r in rows if r[3] is not None]
    if not ratios:
        print("median per-game ratio, frames as recorded: n/a (no reference timings)")
        return 0
    print(
        f"median per-game ratio over {len(ratios)} games: frames as arrays {statistics.median(r[4] for r in ratios):.2f}x, "
        f"without frames {statistics.median(r[5] for r in ratios):.2f}x"
    )
    print(f"median per-game ratio, frames as recorded: {statistics.median(r[3] for r in ratios):.2f}x")
    return 0


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _fmt(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}x"


if __name__ == "__main__":
    sys.exit(main())
