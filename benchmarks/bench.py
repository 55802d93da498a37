"""`make bench`: the benchmarks at a small size, one after the other, each headline printed beside its goal.

Asserts nothing about time (the machines this runs on are shared; a ratio measured under load is noisier,
so the 1-minute load average is printed and recorded). Each benchmark appends its headline ratio to
benchmarks/results/results.csv (when, commit, ratio, goal, load, note), so that a change that slows a
path shows in review as a worse ratio beside the earlier lines. Corpora are made under benchmarks/data/
(git-ignored) or in temporary folders, never committed.

    python benchmarks/bench.py [--results CSV] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "results.csv"

# name, script and its small-size arguments, the goal the headline is held against
BENCHMARKS = (
    ("ingest_speed", ["ingest_speed.py", "--max-files", "12", "--repeat", "2"],
     "ingest of engine-made recordings <= 1.0x DuckDB read_ndjson full parse, peak RSS < 1 GB"),
    ("harc_ingest_speed", ["harc_ingest_speed.py", "--rows", "60000", "--tasks", "50", "--repeat", "2"],
     "H-ARC data.csv ingest <= 3x DuckDB read_csv, peak RSS < 1 GB"),
    ("score_workers", ["score_workers.py", "--studies", "1", "--repeat", "1"],
     "score --workers 2 >= 1.6x --workers 1 on four studies (one study here: the cluster's start weighs more, so "
     "expect less), identical scorecards"),
    ("transitions_speed", ["transitions_speed.py", "--copies", "10", "--repeat", "1"],
     "export-transitions >= 0.5x the engine's raw replay rate (wall clock, start-up included; 160 files here: "
     "the start-up weighs more, so expect less), peak RSS < 1 GB"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--only", nargs="+", default=None, help="run only these benchmarks")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))}
    summary = []
    for name, command, goal in BENCHMARKS:
        if args.only and name not in args.only:
            continue
        load = os.getloadavg()[0]
        print(f"== {name} (1-minute load {load:.1f} at the start)", flush=True)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, str(HERE / command[0]), *command[1:], "--results", str(args.results)],
                              capture_output=True, text=True, env=env, cwd=HERE.parent)
        lines = done.stdout.strip().splitlines()
        headline = lines[-1] if done.returncode == 0 and lines else f"FAILED (exit {done.returncode}): " + \
            (done.stderr.strip().splitlines() or ["no output"])[-1]
        print("\n".join(lines[:-1]))
        summary.append((name, headline, goal, time.perf_counter() - started, load))
    print("\n== make bench: headlines (ratios; no time is asserted)")
    for name, headline, goal, seconds, load in summary:
        print(f"{name}: {headline}\n    goal: {goal}; took {seconds:.0f} s, load {load:.1f} at the start")
    print(f"results appended to {args.results}")


if __name__ == "__main__":
    main()
