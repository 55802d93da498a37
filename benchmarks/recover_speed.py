"""Speed of recovering lost action ids from frames (`arcstudy recover-actions`), against a 30 s target.

    python benchmarks/recover_speed.py [--game bg41] [--steps 1000] [--seed 7] [--files 1] [--workers 1]

Makes a recording by playing a shipped game (games/) with the engine: a seeded random agent (uniform over the
available actions, clicks uniform over the 64x64 display, RESET after GAME_OVER or WIN), written as the agents
repository's recorder writes it with its defects (every action id 0 with empty data, ARC-AGI-3-Agents #91; no
line for make()'s RESET, #92; an LLM usage line before each frame line). Then recovers it with
`pipeline.explore.recover.recover_files` and checks that the recovered actions replay the recording.

With --files N, N such recordings (seeds seed..seed+N-1) are recovered on --workers processes through the one
executor (pipeline/core/executor.py); the time per recording is the wall time divided by N, times the workers.

Times are wall clock (the search runs in the game's sandbox, a child process), so a busy machine reads slow. The
last line is the headline: the
seconds per 1,000-step recording on one core divided by the 30 s target (<= 1.0 meets it).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TARGET_S = 30.0


def make_recording(game: str, steps: int, seed: int, folder: Path) -> Path:
    import engine
    from engine.recording import response_to_record

    rng = random.Random(seed)
    env = engine.make(game, frames="all", only_reset_levels=False,
                      guid=str(uuid.UUID(int=rng.getrandbits(128), version=4)))
    env.reset()  # make()'s RESET: not recorded (#92)
    recorder = uuid.UUID(int=rng.getrandbits(128), version=4)
    path = folder / f"{env.game_id}.random.{steps}.{recorder}.recording.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(steps):
            state = getattr(env.state, "value", env.state)
            if state in ("GAME_OVER", "WIN"):
                action, data = 0, None
            else:
                action = rng.choice([*env.available_actions, 0] if rng.random() < 0.01 else env.available_actions)
                data = {"x": rng.randrange(64), "y": rng.randrange(64)} if action == 6 else None
            record = response_to_record(env.step(action, data), action_ids="int")
            record["action_input"] = {"id": 0, "data": {}, "reasoning": None}  # the recorder's default (#91)
            stamp = f"2026-04-01T03:{i // 3600 % 60:02d}:{i // 60 % 60:02d}.{i % 60:06d}+00:00"
            fh.write(json.dumps({"timestamp": stamp, "data": {"tokens": 1000, "total_tokens": 1000 * (i + 1),
                                                              "conversation_length": 2, "assistant": ""}}) + "\n")
            fh.write(json.dumps({"timestamp": stamp, "data": record}) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--game", default="bg41")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--files", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)

    from engine.loader import default_environments_dir
    from pipeline.explore.recover import recover_files, recovered_mapping
    from pipeline.scoring.plays import read_recording_files, recordings_from_tables
    from pipeline.scoring.verify import verify_recording

    games = default_environments_dir()
    with tempfile.TemporaryDirectory(prefix="recover-speed-") as tmp:
        folder = Path(tmp)
        paths = [make_recording(args.game, args.steps, args.seed + k, folder) for k in range(args.files)]
        wall = time.perf_counter()
        results = recover_files(paths, [games], workers=args.workers)
        wall = time.perf_counter() - wall
        for r in results:
            print(r.summary())
        if not all(r.ok for r in results):
            print("recovery FAILED")
            return 1
        steps, plays, files, _ = read_recording_files(paths)
        recs = recordings_from_tables(steps, plays, files, recovered_mapping(results))
        statuses = {c.status for rec in recs for c in verify_recording(rec, [games], from_file=True)}
        print(f"replay of the recovered actions: {', '.join(sorted(statuses))}")
        if statuses != {"verified"}:
            return 1
    per_file = wall * args.workers / args.files  # core-seconds per recording
    per_1000 = per_file * 1000 / args.steps
    print(f"{args.files} recording(s) of {args.steps} steps of {results[0].game_id} on {args.workers} worker(s): "
          f"{wall:.2f} s wall (the search runs in the game's sandbox); {per_file:.2f} core-s per recording, "
          f"{per_1000:.2f} s per 1,000 steps; target {TARGET_S:.0f} s")
    print(f"ratio to the 30 s target (1,000 steps, one core): {per_1000 / TARGET_S:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
