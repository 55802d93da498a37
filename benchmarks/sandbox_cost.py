"""What the sandbox costs `arcstudy score`: the demo's agent recordings scored with the games' code in the sandbox
(as arcstudy always runs it) and, in the same run, in this process (the sandbox bypassed, for comparison only).

1. Uses a demo study (`--data`, default data/demo; `arcstudy simulate --out DIR` writes one) and scores each agent
   folder under `arc3/agents/` the way `arcstudy demo` does (`score DIR --policy all --games games --no-figures`,
   one worker), each into a fresh database.
2. Runs every folder both ways (one `arcstudy score` process per folder), alternating, `--rounds` times, and
   prints per way the wall clock and the CPU time of the score processes and their children (the sandboxes), and
   checks the scorecards are byte-identical.

The last line is the headline: the sandboxed run's wall-clock and CPU cost relative to the in-process run. No
assertion on time (machines here are shared and noisy):

    python benchmarks/sandbox_cost.py [--data data/demo] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.cli import app
from pipeline.core import game_code

REPO = Path(__file__).resolve().parents[1]


def _in_process(fn, arg, *, key=None, source=None, writable=(), limits=None):
    """`run_game_code` without the sandbox (this benchmark's baseline only)."""
    status, value = game_code._call_game((fn, arg, None if source is None else str(source)))
    if status == "raised":
        raise game_code._game_error(*value)
    return value


def cli_without_sandbox() -> None:
    """`arcstudy` with the games' code run in its own process: the baseline (`python -c` entry below)."""
    game_code.run_game_code = _in_process
    app(prog_name="arcstudy")


def _cpu_children() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # the score processes and, reaped by them, their sandboxes
    return kids.ru_utime + kids.ru_stime


def score_all(agent_dirs: list[Path], work: Path, sandboxed: bool) -> tuple[float, float, dict[str, bytes]]:
    """Each agent folder scored by its own `arcstudy score` process, as `arcstudy demo` does."""
    entry = (["-m", "pipeline.cli"] if sandboxed else
             ["-c", f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); sys.argv[0] = 'arcstudy'; "
                    "import sandbox_cost; sandbox_cost.cli_without_sandbox()"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    cards: dict[str, bytes] = {}
    wall0, cpu0 = time.perf_counter(), _cpu_children()
    for agent_dir in agent_dirs:
        out = work / agent_dir.name
        done = subprocess.run([sys.executable, *entry, "--plain", "score", str(agent_dir), "--policy", "all",
                               "--games", str(REPO / "games"), "--db", str(work / f"{agent_dir.name}.duckdb"), "--out",
                               str(out), "--no-figures", "--workers", "1"], capture_output=True, text=True, env=env,
                              check=False)
        if done.returncode not in (0, 3):
            sys.exit(f"score {agent_dir} failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}")
        cards.update({f"{agent_dir.name}/{p.name}": p.read_bytes() for p in sorted(out.glob("scorecard__*.json"))})
    return time.perf_counter() - wall0, _cpu_children() - cpu0, cards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO / "data" / "demo")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    agents = args.data / "arc3" / "agents"
    if not agents.is_dir():
        sys.exit(f"no demo study at {args.data}: run `arcstudy simulate --out {args.data} --no-harc` first")
    agent_dirs = sorted(p for p in agents.iterdir() if p.is_dir())
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
