"""Peak memory and wall time of `arcstudy ingest` of one ARC-AGI-2 attempt log, read in pieces against read whole.

A log of `pipeline.ingest.arc2.PIECES_FROM_BYTES` or more is read in pieces (`_AttemptLog`); the anchor is the same
command in the same checkout with that threshold set out of reach, so the log is read whole (the path every log took
before). Each case runs ours, anchor, ours, anchor (`--repeat` rounds), each command in a fresh process with a fresh
database; the child's peak RSS comes from getrusage. A small log (`--small-rows`, below the threshold) is read whole
both ways: `--reference DIR` times another checkout on it too (e.g. the commit before the change), to show that the
small-file path did not get slower. The log is generated into a temporary folder (never into the repository), shaped
like the public file: one row per (task, test pair, session), 8-hex task ids, a few hundred sessions per task set,
submission counts of 0-3.

    PYTHONPATH=. .venv/bin/python benchmarks/arc2_memory.py --rows 1000000 --repeat 2
    PYTHONPATH=. .venv/bin/python benchmarks/arc2_memory.py --rows 3000000 --repeat 1 --reference ../main

Last line: the big log's peak RSS read in pieces, and the ratio to the anchor's.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = "task_ID,task_set,test_index,session_ID,start_time_seconds,duration_seconds,submissions,correct_submissions"
BOUND_BYTES = 1 << 30


def write_log(path: Path, rows: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    tasks = [f"{rng.randrange(16**8):08x}" for _ in range(max(1, rows // 40))]
    with path.open("w") as f:
        f.write(HEADER + "\n")
        batch = []
        for i in range(rows):
            s = rng.randint(0, 3)
            c = rng.randint(0, s)
            task = tasks[i % len(tasks)]
            batch.append(f"{task},{'Public Eval' if i % 3 else 'Public Train'},{i % 3},S{i % 5000},"
                         f"{rng.randint(0, 3600)}.{rng.randint(0, 9)},{rng.randint(1, 600)},{s},{c}\n")
            if len(batch) == 100_000:
                f.writelines(batch)
                batch.clear()
        f.writelines(batch)


def run(checkout: Path, log: Path, folder: Path, whole: bool) -> tuple[int, int, float, float]:
    """(exit code, peak RSS in bytes, seconds, CPU seconds) of `arcstudy ingest LOG` in a fresh process and
    database."""
    force = "import pipeline.ingest.arc2 as a; a.PIECES_FROM_BYTES = 1 << 62; " if whole else ""
    code = (f"import resource, subprocess, sys; r = subprocess.run([sys.executable, '-c', "
            f"\"{force}from pipeline.cli import app; app()\", *sys.argv[1:]]).returncode; "
            "u = resource.getrusage(resource.RUSAGE_CHILDREN); print(u.ru_utime + u.ru_stime); print(u.ru_maxrss); "
            "sys.exit(r)")
    db = folder / f"run-{time.monotonic_ns()}.duckdb"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, "--plain", "ingest", str(log), "--db", str(db),
                           "--workers", "1"], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(checkout)})
    seconds = time.perf_counter() - t0
    for p in folder.glob(f"{db.name}*"):
        if p.is_file():
            p.unlink()
    cpu, peak = proc.stdout.strip().splitlines()[-2:]
    return proc.returncode, int(peak) * 1024, seconds, float(cpu)


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the big log (42 bytes each)")
    parser.add_argument("--small-rows", type=int, default=20_000, help="rows of the small log (read whole)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--reference", type=Path, help="another checkout, timed on the small log")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="arcstudy-arc2mem-") as tmp:
        folder = Path(tmp)
        big, small = folder / "big" / "arc2.csv", folder / "small" / "arc2.csv"
        for path, rows in ((big, opts.rows), (small, opts.small_rows)):
            path.parent.mkdir()
            write_log(path, rows)
        print(f"big log {opts.rows:,} rows, {big.stat().st_size / 1e6:.0f} MB; small log {opts.small_rows:,} rows, "
              f"{small.stat().st_size / 1e6:.2f} MB; machine load shown with each run")
        peaks: dict[str, list[int]] = {"pieces": [], "whole": []}
        for _ in range(opts.repeat):
            for name, whole in (("pieces", False), ("whole", True)):
                rc, peak, seconds, cpu = run(ROOT, big, folder, whole)
                peaks[name].append(peak)
                print(f"big   {name:<10} exit {rc}  peak RSS {peak / 1e6:6.0f} MB  {seconds:6.1f} s  CPU {cpu:6.1f} s  "
                      f"load {load()}", flush=True)
            for name, checkout in (("ours", ROOT), *((("reference", opts.reference.resolve()),)
                                                    if opts.reference else ())):
                rc, peak, seconds, cpu = run(checkout, small, folder, False)
                print(f"small {name:<10} exit {rc}  peak RSS {peak / 1e6:6.0f} MB  {seconds:6.1f} s  CPU {cpu:6.1f} s  "
                      f"load {load()}", flush=True)
    ours, anchor = max(peaks["pieces"]), max(peaks["whole"])
    print(f"arc2 log of {opts.rows:,} rows: peak RSS {ours / BOUND_BYTES:.2f} GB in pieces, "
          f"{anchor / BOUND_BYTES:.2f} GB read whole ({ours / anchor:.2f}x)")


if __name__ == "__main__":
    main()
