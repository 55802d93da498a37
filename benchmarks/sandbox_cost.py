"""What the sandbox costs `arcstudy score`: the demo's agent recordings scored with the games' code in the sandbox
(as arcstudy always runs it) and, in the same run, in this process (the sandbox bypassed, for comparison only).

1. Uses a demo study (`--data`, default data/demo; `arcstudy simulate --out DIR` writes one) and scores each agent
   folder under `arc3/agents/` the way `arcstudy demo` does (`score DIR --policy all --games games --no-figures`,
   one worker), each into a fresh database.
2. Runs every folder both ways, alternating, `--rounds` times, and prints per way the wall clock and the CPU time
   of this process plus its children (the sandboxes), and checks the scorecards are byte-identical.

The last line is the headline: the sandboxed run's wall-clock and CPU cost relative to the in-process run. No
assertion on time (machines here are shared and noisy):

    python benchmarks/sandbox_cost.py [--data data/demo] [--rounds 2]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core import game_code, sandbox

REPO = Path(__file__).resolve().parents[1]


def _in_process(fn, arg, *, key=None, source=None, writable=(), limits=None):
    """`run_game_code` without the sandbox (this benchmark's baseline only)."""
    status, value = game_code._call_game((fn, arg, None if source is None else str(source)))
    if status == "raised":
        raise game_code._game_error(*value)
    return value


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def score_all(agent_dirs: list[Path], work: Path, sandboxed: bool) -> tuple[float, float, dict[str, bytes]]:
    runner = CliRunner()
    original = game_code.run_game_code
    if not sandboxed:
        game_code.run_game_code = _in_process
    cards: dict[str, bytes] = {}
    wall0, cpu0 = time.perf_counter(), _cpu()
    try:
        for agent_dir in agent_dirs:
            out = work / agent_dir.name
            result = runner.invoke(app, ["--plain", "score", str(agent_dir), "--policy", "all", "--games",
                                         str(REPO / "games"), "--db", str(work / f"{agent_dir.name}.duckdb"),
                                         "--out", str(out), "--no-figures", "--workers", "1"])
            if result.exit_code not in (0, 3):
                sys.exit(f"score {agent_dir} failed ({result.exit_code}): {result.output[-2000:]}")
            cards.update({f"{agent_dir.name}/{p.name}": p.read_bytes() for p in sorted(out.glob("scorecard__*.json"))})
        sandbox.close_all()  # the children's CPU is counted once they are reaped
    finally:
        game_code.run_game_code = original
    return time.perf_counter() - wall0, _cpu() - cpu0, cards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO / "data" / "demo")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    agents = args.data / "arc3" / "agents"
    if not agents.is_dir():
        sys.exit(f"no demo study at {args.data}: run `arcstudy simulate --out {args.data} --no-harc` first")
    agent_dirs = sorted(p for p in agents.iterdir() if p.is_dir())
    # the modules that score imports from the sandbox must be imported here too, as in a real run
    import pipeline.recordings.playback  # noqa: F401
    import pipeline.scoring.verify  # noqa: F401

    totals = {True: [0.0, 0.0], False: [0.0, 0.0]}
    reference: dict[str, bytes] | None = None
    for round_ in range(args.rounds):
        for sandboxed in (False, True) if round_ % 2 == 0 else (True, False):
            work = Path(tempfile.mkdtemp(prefix="sandbox-cost-"))
            try:
                wall, cpu, cards = score_all(agent_dirs, work, sandboxed)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            if reference is None:
                reference = cards
            elif cards != reference:
                sys.exit("the scorecards differ between the sandboxed and the in-process runs")
            totals[sandboxed][0] += wall
            totals[sandboxed][1] += cpu
            print(f"round {round_ + 1}, {'sandboxed ' if sandboxed else 'in-process'}: {wall:6.2f} s wall, "
                  f"{cpu:6.2f} s CPU ({len(agent_dirs)} agent folders, {len(cards)} scorecards)")
    (w0, c0), (w1, c1) = totals[False], totals[True]
    print(f"sandbox cost on the demo's scoring: wall {w1 / args.rounds:.2f} s vs {w0 / args.rounds:.2f} s in-process "
          f"(x{w1 / w0:.2f}), CPU {c1 / args.rounds:.2f} s vs {c0 / args.rounds:.2f} s (x{c1 / c0:.2f}); "
          "scorecards identical")


if __name__ == "__main__":
    main()
