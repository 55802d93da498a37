"""Simulated ARC-AGI-3 human studies, played through our engine on real game files.

Protocol (spec/study-protocol.md §3): sessions of up to 90 minutes; several environments per session in a
per-participant order; a 20-minute soft limit and a 30-minute hard cutoff per environment; level resets
allowed (humans played with ONLY_RESET_LEVELS=true, so every RESET restarts the level); no revisiting a
completed level; first runs only.

Participant model. Each participant has a skill in (0, 1) and a pace. On every level they first *explore*
(random available actions: presses and clicks that teach the rules), sometimes restart the level, then
*exploit*: they follow a winning line for the level (the game's shipped solution, or the explorer's
shortest path), making mistakes with a skill-dependent probability. A mistake that changes the state sends
them back to the level start (a counted RESET), as people do when they realise they broke something; a
GAME_OVER is answered the same way. On each game they either get stuck (less often the more skilled) and give
up after a few minutes, or persist until they solve it or the 20-minute prompt makes them conclude (the
30-minute cutoff at the latest). Inter-action times are log-normal around a personal pace, with longer
"reading" pauses at each new level. These parameters are calibrated so that `--scale arc3 --seed 0` lands on
the paper's attempt durations (pipeline.simulate.targets).

Low-effort participants (a minority, labelled only in the ground-truth file) cycle rapidly through
environments: a few quick actions on each, abandoning anything not solved at once — the pattern the paper
excluded. Their labels are written apart from the data, so the detector can be evaluated honestly.

Everything is drawn from one seeded `random.Random` (per participant: a child seed), so the same seed gives
the same bytes.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import numpy as np

import engine
from engine.recording import response_to_record
from pipeline.core.outputs import open_output, write_text
from pipeline.recordings.counting import CountingOptions, StepRecord, rebuild_card

Action = tuple[int, dict[str, int] | None]  # (action id, click data)

SOFT_LIMIT_S = 20 * 60
HARD_CUTOFF_S = 30 * 60
SESSION_LIMIT_S = 90 * 60

# Calibration to the paper's study (pipeline.simulate.targets; tests/integration/test_simulate_calibration.py).
# On each game a participant either gets stuck (more often the less skilled), and gives up after a few minutes,
# or persists until they solve it or the soft limit prompts them to conclude. Unsuccessful attempts are therefore
# mostly short with a tail past 20 minutes, as in the paper's Figure 5 (unsuccessful 5.9 min, 4.7 under 20).
STUCK_SHARE = 0.5  # chance of getting stuck on a game for a participant of skill 0 (falls linearly with skill)
STUCK_SHARE_AT_SKILL_1 = 0.1
GIVE_UP_MEDIAN_S = 335.0  # when stuck: log-normal time until giving up
GIVE_UP_SIGMA = 0.6
SOFT_LIMIT_OVERRUN_S = 150.0  # mean time between the soft-limit prompt and concluding


@dataclass(frozen=True)
class Participant:
    participant_id: str
    skill: float  # 0..1
    pace_s: float  # median seconds between actions
    is_low_effort: bool
    cohort: str


@dataclass
class PlayLog:
    """One first-run play of one game by one participant, as written to disk (`path`)."""

    guid: str
    game_id: str
    participant_id: str
    session_id: str
    order_in_session: int
    started_at: datetime
    ended_at: datetime
    path: Path
    n_lines: int = 0
    levels_completed: int = 0
    n_actions: int = 0
    gave_up: bool = False


@dataclass(frozen=True)
class GameSpec:
    game_id: str
    n_levels: int
    solutions: list[list[Action]]  # one winning line per level, from that level's start


def _guid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def make_participants(n: int, rng: random.Random, low_effort_share: float) -> list[Participant]:
    people = []
    n_low = round(n * low_effort_share)
    low_ids = set(rng.sample(range(n), n_low)) if n_low else set()
    for i in range(n):
        low = i in low_ids
        skill = rng.betavariate(1.2, 3.0) if low else rng.betavariate(3.0, 2.0)
        # Median seconds between actions: keyboard and click play is quick (427.9 hours over 2,893 attempts
        # of a few hundred actions in the paper), low-effort cyclers quicker still.
        pace = math.exp(rng.gauss(math.log(1.03 if not low else 0.6), 0.3))
        people.append(Participant(f"p{i + 1:04d}", round(skill, 4), round(pace, 3), low,
                                  rng.choice(["online-a", "online-b", "lab"])))
    return people


class _Clock:
    """Synthetic wall clock for one play."""

    def __init__(self, start: datetime):
        self.now = start

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=max(0.05, seconds))
        return self.now


def _random_action(env: Any, rng: random.Random) -> Action:
    available = [a for a in env.available_actions if a != 7] or list(env.available_actions)
    action = rng.choice(available)
    if action == 6:
        return 6, {"x": rng.randrange(64), "y": rng.randrange(64)}
    return action, None


def _line_json(line: dict) -> str:
    return json.dumps(line, separators=(", ", ": "))


class FramesJson:
    """The JSON text of a step's frames, byte for byte what ``json.dumps(frames.tolist())`` writes, built from
    cached row texts: successive frames of a play share most rows, so a long recording with frames is written
    at the engine's pace rather than the JSON encoder's (encoding 4,096 cells a frame dominated otherwise)."""

    MAX_ROWS = 1 << 16  # cached row texts (a few MB); the cache starts over when full

    def __init__(self) -> None:
        self._rows: dict[bytes, str] = {}

    def _row(self, row: np.ndarray) -> str:
        key = row.tobytes()
        text = self._rows.get(key)
        if text is None:
            if len(self._rows) >= self.MAX_ROWS:
                self._rows.clear()
            text = self._rows[key] = "[" + ", ".join(map(str, row.tolist())) + "]"
        return text

    def __call__(self, frames: Sequence[np.ndarray]) -> str:
        # A row's bytes identify it only together with the dtype and width: both are fixed within a frame.
        return "[" + ", ".join("[" + ", ".join(self._row(row) for row in np.asarray(frame)) + "]"
                               for frame in frames) + "]"


class _HumanRecorder:
    """Writes the official human-dataset shape: integer ids, `action_input.data` carrying the game id,
    `full_reset` false (the REST server never passes it on), a trailing scorecard line. Each line goes to the
    file as it is played (a long play with frames is never held in memory)."""

    def __init__(self, play: PlayLog, clock: _Clock, fh: IO[str], frames: bool = True,
                 frames_json: FramesJson | None = None):
        self.play, self.clock, self.fh, self.frames = play, clock, fh, frames
        self.frames_json = frames_json or FramesJson()
        self.steps: list[StepRecord] = []

    def record(self, response: Any, seconds: float) -> None:
        data = response_to_record(response, include_frames=False, action_ids="int")
        payload = dict(data["action_input"]["data"] or {})
        payload["game_id"] = self.play.game_id
        data["action_input"]["data"] = payload
        data["full_reset"] = False
        ts = self.clock.advance(seconds)
        text = _line_json({"timestamp": ts.isoformat(timespec="microseconds"), "data": data})
        frames = list(response.frame) if self.frames else None
        if frames is not None:  # "frame" is the last key of `data`, itself the last key of the line
            text = f'{text[:-2]}, "frame": {self.frames_json(frames)}}}}}'
        self._write(text)
        self.steps.append(StepRecord(action_id=int(data["action_input"]["id"]), state=data["state"],
                                     levels_completed=data["levels_completed"], full_reset=False,
                                     win_levels=data["win_levels"],
                                     frame_count=len(frames) if frames is not None else None,
                                     guid=self.play.guid))

    def _write(self, text: str) -> None:
        self.fh.write(text + "\n")
        self.play.n_lines += 1

    def finish(self) -> None:
        card = rebuild_card(self.steps, CountingOptions.human_dataset(), self.play.game_id).to_dict()
        won = int("WIN" in card["states"])
        summary = {"won": won, "played": 1, "total_actions": card["total_actions"],
                   "levels_completed": max(card["levels_completed"] or [0]), "cards": {self.play.game_id: card}}
        self._write(_line_json({"timestamp": self.clock.now.isoformat(timespec="microseconds"), "data": summary}))
        self.play.n_actions = card["total_actions"]
        self.play.levels_completed = max(card["levels_completed"] or [0])


def play_game(spec: GameSpec, person: Participant, rng: random.Random, *, environments_dir: Path, human_dir: Path,
              started_at: datetime, session_id: str, order: int, low_effort_budget: int | None = None,
              frames: bool = True, exploration: float = 1.0, frames_json: FramesJson | None = None) -> PlayLog:
    """One participant's first run of one game, written to `human_dir/<game code>/<guid>.recording.jsonl` as it
    is played. `exploration` scales the random exploration before each level's winning line (1: the paper's
    calibration; longer attempts above it)."""
    guid = _guid(rng)
    path = human_dir / spec.game_id.split("-")[0] / f"{guid}.recording.jsonl"
    play = PlayLog(guid, spec.game_id, person.participant_id, session_id, order, started_at, started_at, path)
    clock = _Clock(started_at)
    with open_output(path) as fh:
        _play(spec, person, rng, play, clock, fh, environments_dir=environments_dir,
              low_effort_budget=low_effort_budget, frames=frames, exploration=exploration, frames_json=frames_json)
    play.ended_at = clock.now
    return play


def _play(spec: GameSpec, person: Participant, rng: random.Random, play: PlayLog, clock: _Clock, fh: IO[str], *,
          environments_dir: Path, low_effort_budget: int | None, frames: bool, exploration: float,
          frames_json: FramesJson | None) -> None:
    started_at = play.started_at
    env = engine.make(spec.game_id, environments_dir=environments_dir, only_reset_levels=True,
                      frames="all" if frames else "none", guid=play.guid)
    rec = _HumanRecorder(play, clock, fh, frames, frames_json)
    rec.record(env.reset(), rng.uniform(2, 6))

    def pause() -> float:
        return math.exp(rng.gauss(math.log(person.pace_s), 0.55))

    def act(action: Action) -> Any:
        response = env.step(action[0], action[1])
        rec.record(response, pause())
        return response

    def elapsed() -> float:
        return (clock.now - started_at).total_seconds()

    give_up_at = min(HARD_CUTOFF_S, SOFT_LIMIT_S + rng.expovariate(1 / SOFT_LIMIT_OVERRUN_S))
    if rng.random() < STUCK_SHARE + (STUCK_SHARE_AT_SKILL_1 - STUCK_SHARE) * person.skill:
        give_up_at = min(give_up_at, math.exp(rng.gauss(math.log(GIVE_UP_MEDIAN_S), GIVE_UP_SIGMA)))

    for level, solution in enumerate(spec.solutions):
        if env.levels_completed != level or str(env.state.value if hasattr(env.state, "value") else env.state) == "WIN":
            break
        clock.advance(rng.uniform(3, 25) * (1.5 - person.skill))  # reading the new level
        if low_effort_budget is not None:
            # Rapid cycling: a handful of quick actions, then on to the next environment unless it fell.
            for _ in range(low_effort_budget):
                act(_random_action(env, rng))
                if env.levels_completed > level or _state(env) in ("GAME_OVER", "WIN"):
                    break
            if env.levels_completed <= level:
                play.gave_up = True
                break
            continue
        difficulty = 1.0 + 0.35 * level
        n_explore = int(rng.expovariate(1.0) * len(solution) * (0.3 + 2.2 * (1 - person.skill)) * difficulty
                        * exploration)
        for _ in range(n_explore):
            if elapsed() >= give_up_at:
                break
            act(_random_action(env, rng))
            if env.levels_completed > level or _state(env) == "WIN":
                break
            if _state(env) == "GAME_OVER":
                act((0, None))
        if env.levels_completed > level:
            continue
        if n_explore and _state(env) != "GAME_OVER" and rng.random() < 0.6:
            act((0, None))  # start the level over before solving it for real
        p_mistake = 0.01 + 0.03 * (1 - person.skill) * difficulty
        solved = False
        while not solved and elapsed() < give_up_at:
            if _state(env) == "GAME_OVER":
                act((0, None))
            for action in solution:
                if elapsed() >= give_up_at:
                    break
                if rng.random() < p_mistake:
                    before = env.state_hash()
                    act(_random_action(env, rng))
                    if env.levels_completed > level:
                        solved = True
                        break
                    if env.state_hash() != before:
                        act((0, None))  # the mistake changed something: restart the level
                        break
                act(action)
                if env.levels_completed > level or _state(env) in ("GAME_OVER", "WIN"):
                    break
            if env.levels_completed > level:
                solved = True
            elif _state(env) != "GAME_OVER" and not solved:
                act((0, None))  # the line did not work out from here: restart and retry
        if not solved:
            play.gave_up = True
            break
        if elapsed() >= HARD_CUTOFF_S:
            break
    rec.finish()


def _state(env: Any) -> str:
    state = env.state
    return str(getattr(state, "value", state))


@dataclass
class Arc3StudyPlan:
    n_participants: int
    low_effort_share: float = 0.12
    games_per_session: int = 9
    seed: int = 0
    study_id: str = "arcstudy-synthetic"
    exploration: float = 1.0
    start: datetime = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def simulate_arc3_study(plan: Arc3StudyPlan, games: Sequence[GameSpec], *, environments_dir: Path,
                        out_dir: Path, progress: Callable | None = None, frames: bool = True) -> dict[str, Any]:
    """Write human-dataset recordings (`human/<game>/<guid>.recording.jsonl`), the session manifest
    (`study.json`) and, apart from the data, the ground truth (`../ground_truth/arc3_participants.csv`).
    Returns a summary of what was written."""
    rng = random.Random(plan.seed)
    people = make_participants(plan.n_participants, rng, plan.low_effort_share)
    seeds = [rng.getrandbits(64) for _ in people]
    human_dir = out_dir / "human"
    frames_json = FramesJson()
    participants, sessions, plays_index = [], [], []
    n_plays = n_lines = 0
    iterator = list(zip(people, seeds, strict=True))
    for person, seed in (progress(iterator, "simulating participants", len(iterator)) if progress else iterator):
        prng = random.Random(seed)
        session_id = f"s{person.participant_id[1:]}"
        start = plan.start + timedelta(days=prng.randrange(0, 21), hours=prng.randrange(0, 9),
                                       minutes=prng.randrange(0, 60))
        order = list(games)
        prng.shuffle(order)
        order = order[: plan.games_per_session]
        t = start
        for i, spec in enumerate(order, 1):
            if (t - start).total_seconds() > SESSION_LIMIT_S - 5 * 60:
                break
            budget = prng.randint(4, 22) if person.is_low_effort else None
            play = play_game(spec, person, prng, environments_dir=environments_dir, human_dir=human_dir,
                             started_at=t, session_id=session_id, order=i, low_effort_budget=budget,
                             frames=frames, exploration=plan.exploration, frames_json=frames_json)
            n_plays += 1
            n_lines += play.n_lines
            plays_index.append({"guid": play.guid, "session_id": session_id, "participant_id": person.participant_id,
                                "game_id": spec.game_id, "order_in_session": i, "is_first_run": True})
            t = play.ended_at + timedelta(seconds=prng.uniform(10, 90))
        participants.append({"participant_id": person.participant_id, "cohort": person.cohort})
        sessions.append({"session_id": session_id, "participant_id": person.participant_id,
                         "started_at": start.isoformat(), "ended_at": t.isoformat(), "site": person.cohort,
                         "cohort": person.cohort, "protocol": "arc-agi-3-2026"})
    manifest = {"format": "arcstudy-study-manifest/1", "study_id": plan.study_id, "participants": participants,
                "sessions": sessions, "plays": plays_index}
    write_text(out_dir / "study.json", json.dumps(manifest, indent=1) + "\n")
    truth_dir = out_dir.parent / "ground_truth"
    with open_output(truth_dir / "arc3_participants.csv") as fh:
        fh.write("participant_id,session_id,is_low_effort,skill,pace_s\n")
        for p in people:
            fh.write(f"{p.participant_id},s{p.participant_id[1:]},{str(p.is_low_effort).lower()},{p.skill},{p.pace_s}\n")
    return {"participants": len(people), "low_effort": sum(p.is_low_effort for p in people), "plays": n_plays,
            "lines": n_lines}
