"""Simulated agents playing our games, written the way real agent runs are written.

- `random`: uniform over the available actions (clicks uniform over the 64x64 display), like the
  toolkit's random agent;
- `explorer`: learns by graph search *in the environment*: it tries every untried action of the states it
  has seen, returns to the frontier by level resets and known transitions, and once it has found a win
  replays the shortest known line. All of that exploration is paid for in actions, as an agent would pay;
- `near-optimal`: follows a winning line with rare slips.

Every agent stops a level at the benchmarking harness's budget, ceil(5 x baseline) actions per level
(spec/scoring.md §B.6), and a run ends at WIN or when the budget runs out. Runs are written as toolkit
recordings (`<card>/<game_id>-<guid>.jsonl`, action names, with or without frames) or, for one agent, in the
agents-repository format (`<game_id>.<agent>.<max_actions>.<guid>.recording.jsonl`, integer ids, LLM usage
lines, the opening RESET not recorded).
"""

from __future__ import annotations

import json
import math
import random
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import engine
from engine.recording import response_to_record
from pipeline.core.outputs import open_output
from pipeline.simulate.arc3 import Action, GameSpec

AGENTS = ("random", "explorer", "near-optimal")
BUDGET_MULTIPLIER = 5.0


def level_budgets(baselines: Sequence[int]) -> list[int]:
    return [math.ceil(BUDGET_MULTIPLIER * b) for b in baselines]


@dataclass
class AgentRun:
    agent: str
    game_id: str
    guid: str
    lines: list[dict]
    levels_completed: int
    n_actions: int


class _Recorder:
    def __init__(self, guid: str, start: datetime, rng: random.Random, *, frames: bool, action_ids: str):
        self.guid, self.rng, self.frames, self.action_ids = guid, rng, frames, action_ids
        self.now = start
        self.lines: list[dict] = []

    def write(self, response: Any) -> None:
        self.now += timedelta(seconds=self.rng.uniform(0.05, 0.4))
        data = response_to_record(response, include_frames=self.frames, action_ids=self.action_ids)
        self.lines.append({"timestamp": self.now.isoformat(timespec="microseconds"), "data": data})


def _state(env: Any) -> str:
    return str(getattr(env.state, "value", env.state))


def _random_action(env: Any, rng: random.Random) -> Action:
    action = rng.choice(list(env.available_actions))
    if action == 6:
        return 6, {"x": rng.randrange(64), "y": rng.randrange(64)}
    return action, None


class _Explorer:
    """Online graph search over the states it has actually visited (keyed by the engine's state hash)."""

    def __init__(self, rng: random.Random, click_grid: int = 8):
        self.rng = rng
        self.edges: dict[str, dict[Action, str]] = {}
        self.untried: dict[str, list[Action]] = {}
        self.click_grid = click_grid
        self.route: deque[Action] = deque()

    def _candidates(self, env: Any) -> list[Action]:
        """Untried actions of a new state, in the order they will be tried (popped from the end): key presses
        first, then clicks on a coarse grid -- cheap probes before expensive ones, as a sensible agent does."""
        simple: list[Action] = [(a, None) for a in env.available_actions if a not in (6, 7)]
        clicks: list[Action] = []
        if 6 in env.available_actions:
            step = 64 // self.click_grid
            clicks = [(6, {"x": x, "y": y}) for y in range(step // 2, 64, step) for x in range(step // 2, 64, step)]
        self.rng.shuffle(simple)
        self.rng.shuffle(clicks)
        return clicks + simple

    def observe(self, key: str, env: Any) -> None:
        if key not in self.untried:
            self.untried[key] = self._candidates(env)
            self.edges.setdefault(key, {})

    def _path(self, start: str, goal_has_untried: bool = True) -> list[Action] | None:
        seen, queue = {start: []}, deque([start])
        while queue:
            node = queue.popleft()
            if goal_has_untried and self.untried.get(node):
                return seen[node]
            for action, nxt in self.edges.get(node, {}).items():
                if nxt not in seen:
                    seen[nxt] = seen[node] + [_freeze(action)]
                    queue.append(nxt)
        return None

    def choose(self, key: str) -> Action | None:
        """The next action, or None when the level start should be restored (a RESET)."""
        if self.route:
            return _thaw(self.route.popleft())
        if self.untried.get(key):
            return self.untried[key].pop()
        path = self._path(key)
        if path:
            self.route.extend(path[1:])
            return _thaw(path[0])
        return None


def _freeze(action: Action) -> Any:
    return (action[0], None if action[1] is None else (action[1]["x"], action[1]["y"]))


def _thaw(frozen: Any) -> Action:
    return (frozen[0], None if frozen[1] is None else {"x": frozen[1][0], "y": frozen[1][1]})


def run_agent(agent: str, spec: GameSpec, baselines: Sequence[int], rng: random.Random, *, environments_dir: Path,
              frames: bool, action_ids: str = "name", start: datetime | None = None) -> AgentRun:
    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r}; one of {AGENTS}")
    guid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    env = engine.make(spec.game_id, environments_dir=environments_dir, frames="all" if frames else "last",
                      guid=guid, only_reset_levels=False)
    rec = _Recorder(guid, start or datetime(2026, 4, 1, tzinfo=UTC), rng, frames=frames, action_ids=action_ids)
    rec.write(env.reset())
    budgets = level_budgets(baselines)
    explorer = _Explorer(rng)
    n_actions = 0
    for level in range(spec.n_levels):
        if env.levels_completed != level or _state(env) == "WIN" or level >= len(budgets):
            break
        spent, line_pos, prev_key, slipped = 0, 0, None, False
        solution = spec.solutions[level]
        while spent < budgets[level] and env.levels_completed == level and _state(env) != "WIN":
            key = env.state_hash()
            if agent == "random":
                action = _random_action(env, rng) if _state(env) != "GAME_OVER" else (0, None)
            elif agent == "near-optimal":
                if _state(env) == "GAME_OVER" or line_pos >= len(solution):
                    action, line_pos = (0, None), 0  # restart the level and the line
                elif rng.random() < 0.03:
                    action, slipped = _random_action(env, rng), True
                else:
                    action, line_pos = solution[line_pos], line_pos + 1
            else:
                explorer.observe(key, env)
                action = explorer.choose(key) if _state(env) != "GAME_OVER" else None
                if action is None:
                    explorer.route.clear()
                    action = (0, None)
                prev_key = key
            response = env.step(*action)
            rec.write(response)
            spent += 1
            if slipped and env.state_hash() != key:
                line_pos = len(solution)  # the slip changed something: start the level over
            slipped = False
            if agent == "explorer" and action[0] != 0 and prev_key is not None:
                explorer.edges.setdefault(prev_key, {})[_freeze(action)] = env.state_hash()
        n_actions += spent
        if env.levels_completed == level:
            break
        explorer = _Explorer(rng)
    return AgentRun(agent, spec.game_id, guid, rec.lines, env.levels_completed, n_actions)


def write_toolkit(run: AgentRun, folder: Path, card_id: str) -> Path:
    path = folder / card_id / f"{run.game_id}-{run.guid}.jsonl"
    with open_output(path) as fh:
        for line in run.lines:
            fh.write(json.dumps(line) + "\n")
    return path


def write_agents_repo(run: AgentRun, folder: Path, rng: random.Random, max_actions: int) -> Path:
    """The agents-repository recorder: no opening RESET line, an LLM usage line before each frame line."""
    recorder_guid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    path = folder / f"{run.game_id}.{run.agent}.{max_actions}.{recorder_guid}.recording.jsonl"
    total = 0
    with open_output(path) as fh:
        for line in run.lines[1:]:
            tokens = rng.randint(800, 4000)
            total += tokens
            usage = {"timestamp": line["timestamp"], "data": {"tokens": tokens, "total_tokens": total,
                                                               "conversation_length": 2, "assistant": ""}}
            fh.write(json.dumps(usage) + "\n")
            fh.write(json.dumps(line) + "\n")
    return path
