"""Export rate of `arcstudy export-transitions` against the engine's raw replay rate, on the shipped games.

    python benchmarks/transitions_speed.py [--copies N] [--workers W] [--repeat R] [--large-steps S]

Inputs, made in a temporary folder by playing the shipped games on the engine: per game, `--copies` times two
plays, each the game's winning actions (`games/<id>/<version>/solutions/win.jsonl`) up to a random point, so
that plays reach every level, then as many actions again chosen at random among those the game offers (`_walk`,
seeded: the same corpus in every run). Each play is written as a toolkit recording without frames (its own
guid, so every play is its own session) and as a playback script (action-only, spec/formats.md §A.7). Every
export row needs the engine's frames for it, so both kinds are replayed with frames. The frames are as varied as
the plays: the run prints the share of distinct frames and rows (each play is written twice, so at most about
half the rows are distinct). Until the seventeenth sitting the corpus was 50 copies of each game's recorded win
and loss: 1% of its frames were distinct, which let every cache absorb the work.

Measured in the same run, interleaved `--repeat` times (replay, export, replay, export, ...; best of each):

- raw replay: every file's actions sent to a fresh `engine.env.GameEnv` with every frame rendered
  (`frames="all"`), in this process, nothing read or written; steps per second;
- export: the `arcstudy export-transitions` command in a subprocess (`--workers`, default 1: one process
  exporting, beside the sandbox children that run the games' code, two on two cores: they replay the next groups
  of files while the command writes the one before), from start to exit (the interpreter's and the command's
  start, the sandbox children's start, reading, replaying, comparing, hashing, compressing and writing the
  shards, card and manifest); rows per second, and the subprocess's peak RSS;
- start-up: the same command exporting one playback script of the corpus (its fixed cost: imports, the
  sandbox child, the card and manifest), so the marginal rate (the corpus minus that file, per CPU second
  beyond the start-up) is printed apart from the end-to-end one.

Both are timed in wall time and in CPU time (this process's for the replay; the subprocess's and its sandbox
children's for the export); each figure is the best of the `--repeat` interleaved runs in its own clock. The corpus is the same in every run (the guids are derived from the game, the file and
the copy). The command runs with its compiled bytecode cached, as an installed package has it: a warm-up export
of one file first, with PYTHONPYCACHEPREFIX in the temporary folder (this machine sets PYTHONDONTWRITEBYTECODE,
which would otherwise make every run compile arcstudy's modules again, ~0.4 s).
With ``--large-steps S`` it also exports one playback script of S actions (a shipped game's winning actions,
each run followed by a RESET, repeated; the frames come from the engine as it replays them: about 4 KB or more
a step) and prints the export's peak RSS (the largest process: the command or its sandbox child). The export
streams a file in bounded batches, so this stays far under 1 GB whatever S is (2,000,000 steps: 8 GB of frames).
The file is made in a temporary folder and removed.

The machine is shared and noisy; nothing here asserts, and every figure is printed with the 1-minute load
average. The LAST line is the headline: the export's rows per second, end to end (start-up included), divided by
the raw replay's steps per second, both in wall-clock time, the rates a researcher sees (goal: at least 0.5x).
The raw replay is one process, the engine's own rate; the export runs the games in sandbox children beside the
command by design and uses the machine's cores for them. So the CPU efficiency (rows per CPU second of the
command and its children against the raw replay's steps per CPU second: what the ratio would be on one core)
and the marginal ratio are printed above it, and belong with it in any report.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.base_game import FRAMES_ALL, FRAMES_NONE  # noqa: E402
from engine.enums import ActionInput, GameAction  # noqa: E402
from engine.env import GameEnv  # noqa: E402
from engine.loader import find_games  # noqa: E402


def _actions(lines: list[dict]) -> list[tuple[int, dict]]:
    out = []
    for line in lines:
        action = line["data"]["action_input"]
        aid = action["id"] if isinstance(action["id"], int) else GameAction[action["id"]].value
        data = {k: v for k, v in (action.get("data") or {}).items() if k in ("x", "y")}
        out.append((aid, data))
    return out


def _walk(info, win: list[tuple[int, dict]], rng: random.Random) -> list[tuple[dict, tuple[int, dict]]]:
    """One play as a person might make it: the winning actions up to a random point (so plays reach every level),
    then as many actions again chosen at random among those the game offers (a click at a random cell; a RESET
    after a GAME_OVER), until a WIN. Returns (the response's recorded fields, the action) per step, the
    opening RESET first."""
    env = GameEnv(info)

    def fields(response) -> dict:
        return {"state": response.state.name, "levels_completed": response.levels_completed,
                "win_levels": response.win_levels, "full_reset": bool(response.full_reset),
                "available_actions": [int(a) for a in response.available_actions]}

    response = env.reset(frames=FRAMES_NONE)
    steps = [(fields(response), (0, {}))]
    tail = [None] * len(win)
    for planned in [*win[:rng.randrange(len(win) + 1)], *tail]:
        if response.state.name == "WIN":
            break
        if planned is not None:
            action = planned
        elif response.state.name == "GAME_OVER":
            action = (0, {})
        else:
            aid = rng.choice([int(a) for a in response.available_actions] or [0])
            action = (aid, {"x": rng.randrange(64), "y": rng.randrange(64)} if aid == 6 else {})
        response = env.step(ActionInput(id=GameAction.from_id(action[0]), data=dict(action[1])),
                            frames=FRAMES_NONE)
        steps.append((fields(response), action))
    return steps


def make_inputs(folder: Path, copies: int) -> tuple[list[tuple[object, list[tuple[int, dict]]]], int]:
    """Write the inputs; return (game info, actions after the opening RESET) per file, and the rows expected.
    Per shipped game and copy, two plays (`_walk`, seeded by the game, the copy and the play: the same corpus in
    every run), each written twice: as a toolkit recording without frames and as a playback script."""
    plays = []
    rows = 0
    for info in find_games([ROOT / "games"]):
        src = info.directory / "solutions" / "win.jsonl"
        if not src.is_file():
            continue
        win = _actions([json.loads(x) for x in src.read_text().splitlines() if x.strip()])[1:]
        for copy in range(copies):
            for name in ("a", "b"):
                key = f"{info.game_id}/{name}/{copy}"
                steps = _walk(info, win, random.Random(key))
                actions = [action for _, action in steps[1:]]  # the opening RESET is make()'s
                guid = str(uuid.UUID(bytes=hashlib.sha256(key.encode()).digest()[:16], version=4))
                with open(folder / f"{info.game_id}-{guid}.jsonl", "w") as fh:
                    for i, (recorded, (aid, data)) in enumerate(steps):
                        fh.write(json.dumps({"timestamp": f"2026-01-01T00:00:{i // 1000:02d}.{i % 1000:03d}000+00:00",
                                             "data": {"game_id": info.game_id, **recorded, "action_input": {
                                                 "id": GameAction.from_id(aid).name, "data": data, "reasoning": None},
                                                 "guid": guid}}) + "\n")
                with open(folder / f"{info.short_id}_{name}_{copy}.playback.jsonl", "w") as fh:
                    # (the first action's reasoning names the play: two walks that made the same actions are
                    # still two files, which the export reads once each; the same content twice it reads once)
                    for i, (aid, data) in enumerate(actions):
                        fh.write(json.dumps({"data": {"action_input": {"id": aid, "data": {
                            "game_id": info.game_id, **data}, "reasoning": None if i else key}}}) + "\n")
                plays += [(info, actions), (info, actions)]
                rows += 2 * (len(actions) + 1)
    return plays, rows


def distinct_shares(data: Path) -> tuple[float, float, int]:
    """(distinct frames / frames, distinct rows / rows, frames) of an export's shards: a row is its game, action
    and frames' hashes (the step's transition as a world model sees it)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(data, columns=["game_id", "action_id", "x", "y", "frame_sha256s"])
    hashes = pc.list_flatten(table.column("frame_sha256s"))
    rows = {(g, a, x, y, tuple(h)) for g, a, x, y, h in zip(*(table.column(c).to_pylist() for c in table.column_names),
                                                                strict=True)}
    return len(pc.unique(hashes)) / max(1, len(hashes)), len(rows) / max(1, table.num_rows), len(hashes)


def raw_replay(plays, repeat: int) -> tuple[int, float, float]:
    """(steps, best wall seconds, best CPU seconds) of replaying every play."""
    best = best_cpu = float("inf")
    steps = 0
    for _ in range(repeat):
        steps = 0
        t0, c0 = time.perf_counter(), time.process_time()
        for info, actions in plays:
            env = GameEnv(info)
            env.reset(frames=FRAMES_ALL)
            steps += 1
            for aid, data in actions:
                env.step(ActionInput(id=GameAction.from_id(aid), data=dict(data)), frames=FRAMES_ALL)
                steps += 1
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return steps, best, best_cpu


def make_large_script(folder: Path, steps: int) -> tuple[Path, int, object, list[tuple[int, dict]]]:
    """A playback script of `steps` actions: the winning actions of the first shipped game that has some, each
    run followed by a RESET (a full reset after the win), repeated. Returns (path, rows expected, the game, one
    run of actions)."""
    for info in find_games([ROOT / "games"]):
        src = info.directory / "solutions" / "win.jsonl"
        if src.is_file():
            break
    else:
        raise SystemExit("no shipped game has a solutions/win.jsonl")
    lines = [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
    run = [*_actions(lines)[1:], (0, {})]
    path = folder / f"{info.short_id}_large.playback.jsonl"
    encoded = [json.dumps({"data": {"action_input": {"id": aid, "data": {"game_id": info.game_id, **data}}}}) + "\n"
               for aid, data in run]
    with open(path, "w") as fh:
        for i in range(steps):
            fh.write(encoded[i % len(encoded)])
    return path, steps + 1, info, run


# Runs the command and reports what it and its own children used: the CPU time and the peak RSS of its largest
# process, of that run alone (this process's RUSAGE_CHILDREN keeps the largest process of every run so far). The
# wrapper's own start (~0.03 s) is in the export's wall time.
_TIMER = ("import json, resource, subprocess, sys\n"
          "code = subprocess.run(sys.argv[2:]).returncode\n"
          "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
          "with open(sys.argv[1], 'w') as fh:\n"
          "    json.dump([usage.ru_utime + usage.ru_stime, usage.ru_maxrss], fh)\n"
          "sys.exit(code)\n")


def run_export(inputs: list[Path], out: Path, workers: int, pycache: Path) -> tuple[float, float, float, dict]:
    """The command in a subprocess: (wall s, CPU s of it and its sandbox children, peak RSS MB of its largest
    process, the manifest's notes). Its bytecode is cached under ``pycache`` (written by the first run)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "PYTHONPYCACHEPREFIX": str(pycache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    usage_file = out.parent / f"{out.name}.usage.json"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _TIMER, str(usage_file), sys.executable, "-m", "pipeline.cli",
                           "--plain", "export-transitions", *(str(p) for p in inputs), "--out", str(out),
                           "--workers", str(workers)], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-2000:])
        raise SystemExit(f"export failed with exit code {proc.returncode}")
    cpu, max_rss = json.loads(usage_file.read_text())
    notes = json.loads((out / "manifest.json").read_text())["notes"]["transitions"]
    return wall, cpu, max_rss / 1024, notes


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=50,
                    help="copies per game, of two plays each (`_walk`), each play a recording and a script; 50: 800 files, 127,996 rows")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--results", type=Path, default=None, help="append the headline to this CSV (make bench's)")
    ap.add_argument("--large-steps", type=int, default=0,
                    help="also export one generated playback script of this many actions and print peak RSS")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="transitions-speed-") as tmp:
        inputs = Path(tmp) / "in"
        inputs.mkdir()
        pycache = Path(tmp) / "pycache"
        plays, expected_rows = make_inputs(inputs, args.copies)
        one = sorted(inputs.glob("*.playback.jsonl"))[0]
        print(f"inputs: {len(plays)} files ({len(plays) // 2} recordings, {len(plays) // 2} playback scripts) of "
              f"{len({p[0].game_id for p in plays})} shipped games, {expected_rows:,} responses; "
              f"{os.cpu_count()} cores, the machine may be shared ({load()})")
        run_export([one], Path(tmp) / "warm-up", args.workers, pycache)  # compiles the bytecode once
        raws, exports, starts = [], [], []
        for r in range(max(1, args.repeat)):
            raws.append(raw_replay(plays, 1))
            starts.append(run_export([one], Path(tmp) / f"one-{r}", args.workers, pycache))
            exports.append(run_export([inputs], Path(tmp) / f"out-{r}", args.workers, pycache))
            size = sum(p.stat().st_size for p in (Path(tmp) / f"out-{r}" / "data").glob("*.parquet"))
        # the best of each side, in each clock: the machine's noise only ever slows a run down
        steps, raw_s, raw_cpu = raws[0][0], min(x[1] for x in raws), min(x[2] for x in raws)
        start = min(starts, key=lambda x: x[1])
        export = min(exports, key=lambda x: x[1])
        best_wall = min(x[0] for x in exports)
        raw_rate, raw_cpu_rate = steps / raw_s, steps / raw_cpu
        print(f"raw replay (GameEnv, every frame rendered): {steps:,} steps in {raw_s:.2f} s wall = {raw_rate:,.0f} "
              f"steps/s; {raw_cpu:.2f} s CPU = {raw_cpu_rate:,.0f} steps/s ({load()})")
        wall_1, cpu_1, _rss, notes_1 = start
        print(f"start-up (the command exporting 1 playback script, {notes_1['rows']} rows): {wall_1:.2f} s wall, "
              f"{cpu_1:.2f} s CPU ({load()})")
        _, cpu, rss, notes = export
        wall = best_wall
        rows = notes["rows"]
        rate, cpu_rate = rows / wall, rows / cpu
        marginal = (rows - notes_1["rows"]) / max(1e-9, cpu - cpu_1)
        print(f"export ({args.workers} worker(s), the command end to end, start-up included): {rows:,} rows in "
              f"{wall:.2f} s wall = {rate:,.0f} rows/s; {cpu:.2f} s CPU = {cpu_rate:,.0f} rows/s; "
              f"{notes['shards']} shard(s), {size / 1e6:.1f} MB; peak RSS {rss:.0f} MB ({load()})")
        frames_share, rows_share, n_frames = distinct_shares(Path(tmp) / f"out-{len(exports) - 1}" / "data")
        print(f"corpus: {frames_share:.0%} of its {n_frames:,} frames distinct, {rows_share:.0%} of its rows "
              "(game, action, frames) distinct")
        print(f"marginal (beyond the start-up): {marginal:,.0f} rows per CPU second = {marginal / raw_cpu_rate:.2f}x "
              "the raw replay rate")
        if args.large_steps > 0:
            big_in = Path(tmp) / "large"
            big_in.mkdir()
            path, big_rows, game, run = make_large_script(big_in, args.large_steps)
            print(f"large input: one playback script of {args.large_steps:,} actions of {game.game_id} "
                  f"({path.stat().st_size / 1e6:.0f} MB)")
            # the same game's raw rate, on as many of the script's actions as the small inputs hold (a rate)
            n_runs = max(1, min(args.large_steps, expected_rows) // len(run))
            big_steps, _, big_raw_cpu = raw_replay([(game, run * n_runs)], 1)
            wall_l, cpu_l, rss_l, notes_l = run_export([path], Path(tmp) / "out-large", args.workers, pycache)
            big_rate = notes_l["rows"] / cpu_l
            print(f"large export: {notes_l['rows']:,} rows (expected {big_rows:,}) in {wall_l:.1f} s wall, "
                  f"{cpu_l:.1f} s CPU = {big_rate:,.0f} rows/s = {big_rate / (big_steps / big_raw_cpu):.2f}x the "
                  f"raw replay of the same actions ({big_steps / big_raw_cpu:,.0f} steps/s); peak RSS "
                  f"{rss_l:.0f} MB (largest process; goal: under 1024 MB) ({load()})")
        print(f"CPU efficiency: export rows per CPU second (the command and its sandbox children) / raw replay "
              f"steps per CPU second, end to end: {cpu_rate / raw_cpu_rate:.2f}x (what the ratio would be on one "
              "core)")
        # headline: the rates a researcher sees, in wall-clock time, start-up included: the export's rows per
        # second against the engine's raw replay of the same actions (one process: the engine's rate). The
        # export runs the games in sandbox children beside the command by design, and uses the cores it has for
        # them; the CPU line above says what that costs
        if args.results:
            from results import append

            append(args.results, "transitions_speed", rate / raw_rate, 0.5,
                   f"{len(plays)} files, {rows:,} rows, {args.workers} worker(s); wall, start-up included; CPU "
                   f"{cpu_rate / raw_cpu_rate:.2f}x; peak RSS {rss:.0f} MB")
        print(f"export rate / raw replay rate (wall clock, end to end, {len(plays)} files, "
              f"{os.cpu_count()} cores): {rate / raw_rate:.2f}x")


if __name__ == "__main__":
    main()
