"""Does a game's play depend on PYTHONHASHSEED? Replays action scripts in child interpreters, one per seed.

String hashes are salted per interpreter (``PYTHONHASHSEED``), so a game that iterates over a set of strings
(lf52 does) may draw other frames in another process, while its outcome does not change. The seed is fixed
when an interpreter starts, hence one child process per seed (``python -m pipeline.qualify.hash_seeds``, a JSON
request on stdin, per-step observations on stdout). Every child plays the same scripts: the game's shipped
solutions (``solutions/*.jsonl``) and a random walk drawn from ``random.Random(seed)`` over the available
actions (RESET after WIN or GAME_OVER), which is the same walk in every child as long as the outcomes agree.
Each step is observed as its outcome (state, levels_completed, win_levels, available_actions) and the sha256
of each frame; `compare` says at which steps the seeds disagree.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["compare", "observe", "observe_under_seeds"]

REPO = Path(__file__).resolve().parents[2]  # the folder holding `pipeline` and `engine`, for the children


def _observation(response: Any) -> dict[str, Any]:
    state = response.state
    return {"outcome": [getattr(state, "value", state), int(response.levels_completed), int(response.win_levels),
                        [int(a) for a in response.available_actions]],
            "frames": [hashlib.sha256(np.ascontiguousarray(f, dtype=np.int8).tobytes()).hexdigest()
                       for f in (response.frame or [])]}


def _step(env: Any, action: int, data: dict[str, int] | None) -> dict[str, Any]:
    try:
        return _observation(env.step(action, data or {}))
    except Exception as err:  # noqa: BLE001 - a crash is an observation too (the fuzz check reports crashes)
        return {"outcome": [f"exception {type(err).__name__}: {err}"], "frames": []}


def observe(environments: str, game_id: str, scripts: dict[str, list[list[Any]]], random_steps: int,
            seed: int) -> dict[str, list[dict[str, Any]]]:
    """In this interpreter: per script name, the observation of every step (the opening RESET is step 0).
    ``scripts``: name -> [[action, data or None], ...]; plus ``random`` with ``random_steps`` steps."""
    from engine import GameEnv, GameState
    from engine.loader import resolve_game

    info = resolve_game(game_id, [Path(environments)])
    out: dict[str, list[dict[str, Any]]] = {}
    for name, actions in scripts.items():
        env = GameEnv(info, only_reset_levels=False)  # as recorded by the toolkit (full resets)
        out[name] = [_step(env, 0, None)] + [_step(env, int(a), d) for a, d in actions]
    if random_steps:
        env = GameEnv(info, only_reset_levels=False)
        rng = random.Random(seed)
        seen = [_step(env, 0, None)]
        while len(seen) <= random_steps:
            if env.state in (GameState.WIN, GameState.GAME_OVER):
                seen.append(_step(env, 0, None))
                continue
            action = rng.choice([a for a in env.available_actions if a != 0] or [1])
            data = {"x": rng.randrange(64), "y": rng.randrange(64)} if action == 6 else None
            seen.append(_step(env, action, data))
        out["random"] = seen
    return out


def observe_under_seeds(environments: Path, game_id: str, scripts: dict[str, list[list[Any]]], random_steps: int,
                        seed: int, hash_seeds: Sequence[int]) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """`observe` in one child interpreter per PYTHONHASHSEED."""
    request = json.dumps({"environments": str(environments), "game_id": game_id, "scripts": scripts,
                          "random_steps": random_steps, "seed": seed})
    path = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    out = {}
    for hash_seed in hash_seeds:
        env = {**os.environ, "PYTHONHASHSEED": str(hash_seed), "PYTHONPATH": path}
        # -P: `-m` would otherwise put the working folder first on the child's sys.path (a stray json.py there
        # would be imported); the child imports only from the interpreter's paths and PYTHONPATH
        done = subprocess.run([sys.executable, "-P", "-m", "pipeline.qualify.hash_seeds"], input=request, env=env,
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"replay under PYTHONHASHSEED={hash_seed} failed: {done.stderr.strip()[-2000:]}")
        out[hash_seed] = json.loads(done.stdout)
    return out


def compare(runs: dict[int, dict[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Per script: its steps, the steps whose frames differ between seeds while the outcomes agree, and the
    first step whose outcome differs (after it the scripts no longer play the same game)."""
    seeds = sorted(runs)
    rows = []
    for name in runs[seeds[0]]:
        per_seed = [runs[s][name] for s in seeds]
        frames, outcome = [], None
        for index in range(max(len(steps) for steps in per_seed)):
            seen = [steps[index] if index < len(steps) else None for steps in per_seed]
            if any(s is None or s["outcome"] != seen[0]["outcome"] for s in seen):
                outcome = index
                break
            if any(s["frames"] != seen[0]["frames"] for s in seen):
                frames.append(index)
        rows.append({"script": name, "steps": len(per_seed[0]), "frame_steps": frames, "outcome_step": outcome})
    return rows


def main() -> None:
    request = json.loads(sys.stdin.read())
    sys.stdout.write(json.dumps(observe(**request)))


if __name__ == "__main__":
    main()
