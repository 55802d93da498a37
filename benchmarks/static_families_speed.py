"""How long the static-task build steps take at the size of the public ARC-TGI repository and an ARC-AGI-2 log.

Generates (seeded; nothing is committed or downloaded) an ARC-TGI export with one folder per benchmark split and
`--generators` generators spread over them (547 in the public repository, 4 names repeated across folders),
`--tasks` tasks each with 3-5 pairs of random grids up to 30 x 30; an ARC-AGI-2-layout audit of every family;
and an ARC-AGI-2 attempt log of `--log-rows` rows. Ingests everything into a fresh DuckDB file, then times

    ingest          the files into the database (the baseline of the ratio)
    build           arc2_calibration and arctgi_families (the other steps have no input here)

    .venv/bin/python benchmarks/static_families_speed.py                      # 547 generators x 3 tasks
    .venv/bin/python benchmarks/static_families_speed.py --generators 60      # quick

The last line is the headline: build seconds per ingest second.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import tempfile
import time
from pathlib import Path

from pipeline.core.config import load_config
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.transforms.build import build

FOLDERS = ("ARC-AGI-1-Train", "ARC-AGI-1-Eval", "ARC-AGI-2-Train", "ARC-AGI-2-Eval")
TGI_HEADER = ["task_id", "created_at", "generator_name", "input_reasoning_chain", "transformation_reasoning_chain",
              "task_variables", "code", "data"]
ARC2_HEADER = ["task_ID", "task_set", "test_index", "session_ID", "start_time_seconds", "duration_seconds",
               "submissions", "correct_submissions"]


def _grid(rng: random.Random) -> list[list[int]]:
    h, w = rng.randint(3, 30), rng.randint(3, 30)
    k = rng.randint(2, 6)
    colours = rng.sample(range(1, 10), k - 1)
    return [[0 if rng.random() < 0.6 else rng.choice(colours) for _ in range(w)] for _ in range(h)]


def write_inputs(root: Path, generators: int, tasks: int, log_rows: int, seed: int) -> list[Path]:
    rng = random.Random(seed)
    names = [f"task{rng.getrandbits(32):08x}" for _ in range(generators)]
    task_ids: list[str] = []
    for i, folder in enumerate(FOLDERS):
        mine = names[i::len(FOLDERS)] + (names[:1] if i == 1 else [])  # a repeated name, as in the repository
        path = root / "tgi" / folder / f"{folder}.csv"
        path.parent.mkdir(parents=True)
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(TGI_HEADER)
            for name in mine:
                for t in range(tasks):
                    pairs = [{"input": (g := _grid(rng)), "output": [row[::-1] for row in g]}
                             for _ in range(rng.randint(3, 5))]
                    tid = f"{folder}-{name}-{t}"
                    task_ids.append(tid)
                    w.writerow([tid, "2025-01-01T00:00:00", name, "[]", "[]", "{}", "def transform_input(g):\n  return g",
                                json.dumps({"train": pairs[:-1], "test": pairs[-1:]})])
    audit = root / "audit.csv"
    with open(audit, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(ARC2_HEADER)
        for tid in task_ids:
            for s in range(3):
                subs = rng.randint(0, 3)
                w.writerow([tid, "ARC-TGI", 0, f"a{s}", 0, round(rng.uniform(20, 300), 1), subs,
                            int(subs > 0 and rng.random() < 0.7)])
    log = root / "arc2.csv"
    with open(log, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(ARC2_HEADER)
        for r in range(log_rows):
            subs = rng.randint(0, 3)
            w.writerow([names[r % len(names)][4:], "Public Eval" if r % 3 else "Public Train", r % 2,
                        f"s{rng.randint(0, 400)}", 0, round(rng.uniform(20, 600), 1), subs,
                        int(subs > 0 and rng.random() < 0.6)])
    return [root / "tgi", audit, log]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generators", type=int, default=547)
    ap.add_argument("--tasks", type=int, default=3)
    ap.add_argument("--log-rows", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        inputs = write_inputs(root, args.generators, args.tasks, args.log_rows, args.seed)
        with Workspace(root / "b.duckdb") as ws:
            t0 = time.perf_counter()
            ingest_paths(ws, inputs, run_id="bench", workers=1)
            ingest_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            report = build(ws, load_config(), figures=False)
            build_s = time.perf_counter() - t0
            steps = {k: round(v, 2) for k, v in report.timings_s.items()}
            n_fam = ws.row_count("out_arctgi__family_diversity")
    print(f"generators {args.generators}, tasks each {args.tasks}, families {n_fam}, log rows {args.log_rows}")
    print(f"ingest {ingest_s:.2f} s; build {build_s:.2f} s; steps {steps}")
    print(f"build / ingest = {build_s / ingest_s:.2f}")


if __name__ == "__main__":
    main()
