"""Does a game's play depend on PYTHONHASHSEED? Replays action scripts in child interpreters, one per seed.

String hashes are salted per interpreter (``PYTHONHASHSEED``), so a game that iterates over a set of strings
(lf52 does) may draw other frames in another process, while its outcome does not change. The seed is fixed
when an interpreter starts, hence one child process per seed, each a sandbox (pipeline.core.sandbox). Every child
plays the same scripts: the game's shipped solutions (``solutions/*.jsonl``) and a random walk drawn from
``random.Random(seed)`` over the available actions (RESET after WIN or GAME_OVER), which is the same walk in every
child as long as the outcomes agree. Each step is observed as its outcome (state, levels_completed, win_levels,
available_actions) and the sha256 of each frame; `compare` says at which steps the seeds disagree.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["compare", "observe", "observe_under_seeds"]


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
    """`observe` in one sandboxed child interpreter per PYTHONHASHSEED (pipeline.core.sandbox: a fresh process
    for each seed, since the seed is fixed when an interpreter starts). RuntimeError when one failed."""
    from pipeline.core.game_code import PRELOAD, game_child_env, game_limits
    from pipeline.core.sandbox import Sandbox, SandboxFailure

    request = {"environments": str(Path(environments).absolute()), "game_id": game_id, "scripts": scripts,
               "random_steps": random_steps, "seed": seed}
    out = {}
    for hash_seed in hash_seeds:
        env = {**game_child_env(), "PYTHONHASHSEED": str(hash_seed)}
        try:
            with Sandbox(game_limits(), preload=PRELOAD, env=env) as box:
                out[hash_seed] = box.call(_observe_request, request)
        except SandboxFailure as err:
            raise RuntimeError(f"replay under PYTHONHASHSEED={hash_seed} failed ({err.kind}): {err.detail}") from err
    return out


def _observe_request(request: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return observe(**request)


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


