"""How many ingest workers one DuckDB writer can serve: per-file parse time against per-file commit time.

Ingest splits into two parts (pipeline/ingest/runner.py, commit.py): `prepare_file` (hash, detect, parse, validate:
what a worker does) and `commit_file` (one transaction appending the file's rows: what the calling process,
the only writer, does). While the writer's time per file is below a worker's parse time divided by N, N
workers keep one writer busy without queueing; past that the writer is the bottleneck. This script times
both parts on the same files in one process, one after the other, and prints the ratio

    workers one writer can serve = (median parse time per MB) / (median commit time per MB)

as its last line. The study comes from `arcstudy simulate` (a temporary folder, or --study DIR).

    python benchmarks/writer_capacity.py [--study DIR] [--files 40]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _study(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "simulate", "--scale", "demo", "--seed", "0",
                    "--out", str(folder)], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", type=Path, help="a simulated study folder (default: simulate one)")
    parser.add_argument("--files", type=int, default=40, help="recordings to time (default 40)")
    args = parser.parse_args()

    from pipeline.core.workspace import Workspace
    from pipeline.ingest.commit import commit_file
    from pipeline.ingest.runner import prepare_file

    with tempfile.TemporaryDirectory() as tmp:
        study = args.study or _study(Path(tmp) / "study")
        files = sorted((study / "arc3").rglob("*.jsonl"))[: args.files]
        if not files:
            raise SystemExit(f"no recordings under {study}/arc3")
        parse_s, commit_s, megabytes = [], [], []
        with Workspace(Path(tmp) / "bench.duckdb") as ws:
            for path in files:
                t0 = time.perf_counter()
                prepared = prepare_file(path, run_id="bench")
                t1 = time.perf_counter()
                commit_file(ws, prepared)
                t2 = time.perf_counter()
                size = path.stat().st_size / 1e6
                parse_s.append((t1 - t0) / size)
                commit_s.append((t2 - t1) / size)
                megabytes.append(size)
    parse, commit = statistics.median(parse_s), statistics.median(commit_s)
    print(f"{len(files)} recordings, {sum(megabytes):.1f} MB")
    print(f"parse (a worker): median {parse * 1000:.1f} ms/MB = {1 / parse:.1f} MB/s per worker")
    print(f"commit (the writer): median {commit * 1000:.1f} ms/MB = {1 / commit:.1f} MB/s")
    print(f"workers one writer can serve: {parse / commit:.1f}")


if __name__ == "__main__":
    main()
