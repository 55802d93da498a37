"""`arcstudy simulate`: a whole synthetic study on our games, at a chosen scale, from one seed.

Layout written under OUT (what `arcstudy ingest` reads is under `arc3/human`, `arc3/study.json` and
`harc/current`; agent runs are scored from their files; ground truth is kept apart from the data):

    OUT/SIMULATION.json                      scale, seed, games, counts, arcstudy version
    OUT/arc3/human/<game>/<guid>.recording.jsonl   official human-dataset shape (frames, trailing scorecard)
    OUT/arc3/study.json                      session manifest (participants, sessions, plays)
    OUT/arc3/agents/<agent>/<card_id>/<game_id>-<guid>.jsonl   toolkit recordings
    OUT/arc3/agents/agents-repo/<game_id>.<agent>.<max>.<guid>.recording.jsonl   agents-repository format
    OUT/harc/current/... OUT/harc/tasks/...  H-ARC release-format CSVs and the ARC tasks (see simulate.harc)
    OUT/ground_truth/arc3_participants.csv   low-effort labels, skills (never ingested)

Same seed, same bytes: every random draw descends from `seed`, and nothing reads the clock.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pipeline
from pipeline.core.outputs import output_folder, public_json, write_text
from pipeline.simulate.agents import AGENTS, run_agent, write_agents_repo, write_toolkit
from pipeline.simulate.arc3 import Arc3StudyPlan, GameSpec, simulate_arc3_study
from pipeline.simulate.specs import game_specs, verify_specs


@dataclass(frozen=True)
class Scale:
    name: str
    participants: int
    games_per_session: int
    human_frames: bool
    agent_repeats: int
    harc_scale: str | None
    exploration: float = 1.0  # Arc3StudyPlan.exploration: 1 is the paper's calibration, above it longer attempts


SCALES = {
    # Small enough that `make demo` (simulate + ingest + build + score + reports) runs in ~2 minutes.
    "demo": Scale("demo", participants=16, games_per_session=9, human_frames=True, agent_repeats=1,
                  harc_scale="demo"),
    # The paper's human study: 486 participants (attempts = participants x games each, capped by our games).
    "arc3": Scale("arc3", participants=486, games_per_session=9, human_frames=False, agent_repeats=3,
                  harc_scale="paper"),
    # Ten times the paper, for benchmarks.
    "large": Scale("large", participants=4860, games_per_session=9, human_frames=False, agent_repeats=10,
                   harc_scale="paper"),
    # The size of the official ARC-AGI-3 human release, for benchmarking ingest and verified scoring: 85
    # participants x our 4 games = 340 recordings with frames (every step's 64x64 frames), about 210,000
    # lines and 2.7 GB at seed 0. Attempts are lengthened (3x the calibrated exploration before each level's
    # winning line: about 620 lines a recording on average, up to about 2,000) so the files weigh what the
    # release's do; one run per agent; no H-ARC study (the release is ARC-AGI-3 only).
    "release": Scale("release", participants=85, games_per_session=9, human_frames=True, agent_repeats=1,
                     harc_scale=None, exploration=3.0),
}


def _baselines(spec: GameSpec, environments_dir: Path) -> list[int]:
    from engine.loader import resolve_game

    info = resolve_game(spec.game_id, environments_dir)
    baseline = info.baseline_actions
    if not baseline:
        # No baseline yet: the harness budget falls back to 3x the winning line per level.
        baseline = [3 * len(line) for line in spec.solutions]
    return baseline


# What simulate_study writes at the top of its folder: --overwrite removes these and nothing else.
STUDY_LAYOUT = ("arc3", "harc", "ground_truth", "SIMULATION.json", "static")


def simulate_study(out_dir: Path, *, scale: str = "demo", seed: int = 0, environments_dir: Path,
                   specs: list[GameSpec] | None = None, with_harc: bool = True, overwrite: bool = False,
                   progress=None, workers: int | None = None, scheduler: str | None = None,
                   with_static: bool = True, left_out: list[str] | None = None) -> dict[str, Any]:
    """Write the study under `out_dir`. `workers` / `scheduler`: the fan-out of the H-ARC participants
    (simulate_harc_study; None: its default); the files do not depend on them. A game whose solution recordings
    cannot be read, or whose code fails when its winning lines are played in its own sandbox (raises, or ends
    abnormally: time, memory, exit, crash), is left out of the study: "game_id: reason" is appended to
    `left_out` (and listed in SIMULATION.json), and the other games are simulated. NoGameLeft when none is."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; one of {', '.join(SCALES)}")
    cfg = SCALES[scale]
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{out_dir} is not empty (pass overwrite=True / --overwrite to replace it)")
        # Only an earlier simulation is replaced: `--out ~ --overwrite` must not delete a home folder.
        foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in STUDY_LAYOUT)
        if foreign:
            raise FileExistsError(f"{out_dir} holds files a simulation did not write ({', '.join(foreign[:5])}"
                                  f"{', ...' if len(foreign) > 5 else ''}): --overwrite replaces only an earlier "
                                  "simulation; choose a new or empty folder")
    left_out = left_out if left_out is not None else []
    # metadata and recordings: no code run
    specs = specs if specs is not None else game_specs(environments_dir, left_out)
    if not specs and not left_out:
        raise ValueError(f"no game under {environments_dir} ships solution recordings (games/<id>/<v>/solutions)")
    specs = _games_that_run(specs, Path(environments_dir), left_out)
    if not specs:
        raise NoGameLeft(f"no game under {environments_dir} can be simulated: " + "; ".join(left_out))
    # The folder is written whole (pipeline.core.outputs.output_folder): an interrupted or failed simulation
    # leaves the earlier one as it was, never a partial study that `ingest` would take for a smaller one.
    with output_folder(out_dir) as stage:
        for name in STUDY_LAYOUT:  # the earlier simulation, in the stage's copy
            path = stage / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        description = _simulate_into(stage, cfg, scale=scale, seed=seed, environments_dir=environments_dir,
                                     specs=specs, with_harc=with_harc, workers=workers, scheduler=scheduler,
                                     with_static=with_static)
        if left_out:
            description["games_left_out"] = list(left_out)
        description = public_json(description)  # paths under the stage read as their final place
        write_text(stage / "SIMULATION.json", json.dumps(description, indent=1, default=str) + "\n")
    return description


def _simulate_into(out_dir: Path, cfg: Any, *, scale: str, seed: int, environments_dir: Path,
                   specs: list[GameSpec], with_harc: bool, workers: int | None, scheduler: str | None,
                   with_static: bool) -> dict[str, Any]:
    """Write the study's files under `out_dir` (the stage); its description."""
    # The games' code runs in the sandbox (pipeline.core.game_code), which may write the study's folder only.
    from pipeline.core.game_code import SandboxFailure, game_limits, run_game_code
    from pipeline.core.result_shape import expect, list_of, pair

    limits = dataclasses.replace(game_limits(), file_bytes=max(game_limits().file_bytes, 4 << 30))
    try:
        human, agent_runs = expect(run_game_code(_play_games, (out_dir.absolute(), scale, seed,
                                                               Path(environments_dir).absolute(), specs),
                                                 key="simulate", writable=[out_dir], limits=limits),
                                   pair(dict, list_of(dict)), "(the human study's summary, the agent runs)")
    except SandboxFailure as err:  # each game's lines ran in its own sandbox first: this is play beyond them
        games = ", ".join(s.game_id for s in specs)
        raise SandboxFailure(err.kind, f"{err.detail} (while the participants and agents played {games})",
                             err.exc_type) from None

    harc = None
    if with_harc and cfg.harc_scale:
        from pipeline.simulate.harc import simulate_harc_study

        summary = simulate_harc_study(out_dir / "harc", scale=cfg.harc_scale, seed=seed, generation="current",
                                      workers=workers, scheduler=scheduler)
        # Wall time and the absolute folder vary between runs: left out so the same seed gives the same bytes.
        harc = {k: v for k, v in summary.to_dict().items() if k not in ("elapsed_s", "out_dir")}

    static = None
    if with_static:
        from pipeline.simulate.static_audit import simulate_static_study

        static = simulate_static_study(out_dir / "static", seed=seed)

    return {
        "generator": "arcstudy simulate",
        "arcstudy_version": pipeline.__version__,
        "scale": scale,
        "seed": seed,
        "games": [{"game_id": s.game_id, "levels": s.n_levels, "solution_lengths": [len(x) for x in s.solutions]}
                  for s in specs],
        "arc3_human": human,
        "agents": agent_runs,
        "harc": harc,
        "static": static,
    }


class NoGameLeft(ValueError):
    """Every game was left out (its solutions cannot be read, or its code failed): nothing to simulate."""


def _games_that_run(specs: list[GameSpec], environments_dir: Path, left_out: list[str]) -> list[GameSpec]:
    """The specs whose winning lines win their levels when played in the game's own sandbox (`verify_specs`, one
    game per call): a game whose code raises, or ends abnormally there, is that game's failure alone ("game_id
    (file): reason" appended to `left_out`), never the study's."""
    from engine.loader import resolve_game
    from pipeline.core.game_code import (
        GameCodeError,
        SandboxFailure,
        describe_failure,
        game_key,
        portable_info,
        run_game_code,
    )

    kept = []
    for spec in specs:
        info = resolve_game(spec.game_id, environments_dir)
        label = f"{spec.game_id} ({info.source})"
        try:
            run_game_code(_verify_in_sandbox, (spec, environments_dir.absolute()), key=game_key(info),
                          source=portable_info(info).source)
        except SandboxFailure as err:
            left_out.append(describe_failure(err, label))
            continue
        except GameCodeError as err:
            left_out.append(f"{label}: its code raised {type(err).__name__}: {err}")
            continue
        kept.append(spec)
    return kept


def _verify_in_sandbox(arg: tuple) -> None:
    """In a game's sandbox: its winning lines played once (`verify_specs`)."""
    spec, environments_dir = arg
    verify_specs([spec], environments_dir)


def _play_games(arg: tuple) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """In the sandbox: the verified specs (`_games_that_run`) played by the simulated participants and agents,
    written under the study's folder; (the human study's summary, the agent runs)."""
    out_dir, scale, seed, environments_dir, specs = arg
    cfg = SCALES[scale]
    arc3_dir = out_dir / "arc3"
    plan = Arc3StudyPlan(n_participants=cfg.participants, games_per_session=cfg.games_per_session, seed=seed,
                         exploration=cfg.exploration)
    human = simulate_arc3_study(plan, specs, environments_dir=environments_dir, out_dir=arc3_dir,
                                frames=cfg.human_frames)
    rng = random.Random(seed + 1)
    agent_runs = []
    for spec in specs:
        baseline = _baselines(spec, environments_dir)
        for agent in AGENTS:
            for repeat in range(cfg.agent_repeats):
                frames = agent == "random" and repeat == 0  # one agent with frames, the others without
                run = run_agent(agent, spec, baseline, rng, environments_dir=environments_dir, frames=frames)
                path = write_toolkit(run, arc3_dir / "agents" / agent, f"card-{agent}-{seed}")
                agent_runs.append({"agent": agent, "game_id": spec.game_id, "file": str(path.relative_to(out_dir)),
                                   "levels_completed": run.levels_completed, "actions": run.n_actions})
        run = run_agent("near-optimal", spec, baseline, rng, environments_dir=environments_dir, frames=True,
                        action_ids="int")
        path = write_agents_repo(run, arc3_dir / "agents" / "agents-repo", rng, max_actions=sum(baseline) * 5)
        agent_runs.append({"agent": "near-optimal (agents-repo format)", "game_id": spec.game_id,
                           "file": str(path.relative_to(out_dir)), "levels_completed": run.levels_completed,
                           "actions": run.n_actions})
    return human, agent_runs
