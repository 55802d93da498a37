"""H-ARC ingest speed: `arcstudy ingest` of a data.csv against DuckDB's read_csv of the same file, and the cost
of each small ARC task file.

1. Writes a data.csv of --rows rows (benchmarks/harc_ingest_data.py, in a child process, so its Python lists
   do not count in this process's peak RSS) and --tasks ARC task JSON files (benchmarks/harc_speed.py's task
   generator) into a temporary folder (or --data, reused when it already holds them).
2. Ingests data.csv into a fresh workspace (`pipeline.ingest.ingest_paths`, one file: detection, reading,
   every validator rule, pandera, the transaction) and reads the process's peak RSS right after.
3. Anchor, same process, same (warm) file: DuckDB `read_csv` of data.csv into an in-memory table. Beside it, a
   floor: DuckDB alone writing only the raw layer of the file (each row's fields as JSON plus its sha256, the
   contract of the raw table) into a new database file (`raw_layer_floor`).
4. Ingests the task files into the same workspace; per-file cost = ingest time / files, and the overhead per
   file = that minus a bare `json.loads` of the file.

The last line is the headline: ingest time / DuckDB read_csv time (wall clock, with CPU time alongside) and
the per-small-file overhead in ms. No assertion on time (machines here are shared and noisy):

    python benchmarks/harc_ingest_speed.py [--rows 600000] [--tasks 800] [--data DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def write_tasks(folder: Path, n: int, seed: int) -> list[Path]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from harc_speed import make_tasks

    folder.mkdir(parents=True, exist_ok=True)
    tasks = make_tasks("training", n // 2, seed) + make_tasks("evaluation", n - n // 2, seed)
    random.Random(seed).shuffle(tasks)
    paths = []
    for t in tasks:
        path = folder / f"{t['task_id']}.json"
        path.write_text(json.dumps(t["json"]))
        paths.append(path)
    return sorted(paths)


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - t0, time.process_time() - c0


def raw_layer_floor(ws, csv_path: Path, root: Path, repeat: int) -> tuple[float, float]:
    """What DuckDB itself takes to write just the H-ARC raw layer of the file: every row as a JSON object of its
    fields (`to_json`) with the sha256 of that text, into a new database file, in a table made with the
    workspace's own DDL (zstd for row_json). No checks and no typed tables: a floor for any ingest that keeps
    the raw layer's contract (schemas/harc.py row_json), measured beside the read_csv anchor. Fastest of
    `repeat` runs."""
    import duckdb

    ddl = ws.con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = 'raw_harc__csv_rows'").fetchall()[0][0]
    runs = []
    for _ in range(repeat):
        target = root / "raw_floor.duckdb"
        target.unlink(missing_ok=True)
        con = duckdb.connect(str(target))
        con.execute(ddl)
        runs.append(timed(lambda con=con: con.execute(
            "INSERT INTO raw_harc__csv_rows SELECT 'bench', row_number() OVER (), sha256(j), j "
            "FROM (SELECT to_json(r)::VARCHAR AS j FROM read_csv(?, all_varchar = true) AS r)",
            [str(csv_path)]).fetchone()))
        con.close()
        target.unlink(missing_ok=True)
    _, t_raw, c_raw = min(runs, key=lambda r: r[1])
    return t_raw, c_raw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=600_000)
    ap.add_argument("--tasks", type=int, default=800)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", type=Path, default=None, help="keep the generated files here (reused when present)")
    ap.add_argument("--repeat", type=int, default=1, help="time the data.csv ingest and the anchor N times each, "
                    "keep the fastest of each")
    args = ap.parse_args()

    root = args.data or Path(tempfile.mkdtemp(prefix="harc_ingest_speed_"))
    csv_path = root / "data.csv"
    try:
        if not csv_path.exists():
            subprocess.run([sys.executable, str(REPO / "benchmarks" / "harc_ingest_data.py"), "--rows",
                            str(args.rows), "--seed", str(args.seed), "--out", str(csv_path)], check=True)
        task_dir = root / "tasks"
        tasks = sorted(task_dir.glob("*.json")) if task_dir.is_dir() else []
        if len(tasks) != args.tasks:
            shutil.rmtree(task_dir, ignore_errors=True)
            tasks = write_tasks(task_dir, args.tasks, args.seed)
        csv_path.read_bytes()  # warm the page cache for both readers

        import duckdb

        from pipeline.core.console import out
        from pipeline.core.workspace import Workspace
        from pipeline.ingest import ingest_paths

        out.set_plain(True)
        mb = csv_path.stat().st_size / 1e6
        with Workspace(root / "bench.duckdb") as ws:
            ws.ensure_tables()
            # --repeat: the fastest of N runs of each (a shared machine's load only ever adds time); the peak RSS
            # is the first run's (later runs in the same process would add the allocators' retained memory)
            runs = [timed(lambda: ingest_paths(ws, [csv_path], run_id="bench", force=True))]
            rss = peak_rss_mb()
            runs += [timed(lambda: ingest_paths(ws, [csv_path], run_id="bench", force=True))
                     for _ in range(args.repeat - 1)]
            report, t_ingest, c_ingest = min(runs, key=lambda r: r[1])
            f = report.files[0]
            print(f"arcstudy ingest of data.csv ({mb:.0f} MB): {t_ingest:.2f} s (CPU {c_ingest:.2f} s), {f.status}, "
                  f"{f.n_loaded:,} records loaded, {f.n_quarantined} quarantined; peak RSS {rss:,.0f} MB")

            con = duckdb.connect()
            n_duck, t_duck, c_duck = min((timed(lambda: con.execute(
                "CREATE OR REPLACE TABLE t AS SELECT * FROM read_csv(?)", [str(csv_path)]).fetchone()[0])
                for _ in range(args.repeat)), key=lambda r: r[1])
            con.close()
            print(f"DuckDB read_csv of the same file: {t_duck:.2f} s (CPU {c_duck:.2f} s), {n_duck:,} rows")
            t_raw, c_raw = raw_layer_floor(ws, csv_path, root, args.repeat)
            print(f"DuckDB alone writing only the raw layer (row_json + sha256 per row, the table's own DDL, a new "
                  f"database file): {t_raw:.2f} s (CPU {c_raw:.2f} s) = {t_raw / t_duck:.1f}x read_csv")

            _, t_bare, _ = timed(lambda: [json.loads(p.read_text()) for p in tasks])
            report, t_small, c_small = timed(lambda: ingest_paths(ws, tasks, run_id="bench", force=True))
            loaded = sum(r.status in ("loaded", "replaced") for r in report.files)
            per_file = 1000 * t_small / len(tasks)
            overhead = 1000 * (t_small - t_bare) / len(tasks)
            cpu_per_file = 1000 * c_small / len(tasks)
            print(f"arcstudy ingest of {len(tasks)} ARC task files: {t_small:.2f} s (CPU {c_small:.2f} s), {loaded} "
                  f"loaded; {per_file:.1f} ms per file ({cpu_per_file:.1f} ms CPU), of which "
                  f"{1000 * t_bare / len(tasks):.2f} ms json.loads")
        print(f"headline: H-ARC CSV ingest is {t_ingest / t_duck:.1f}x DuckDB read_csv (wall; CPU "
              f"{c_ingest / max(c_duck, 1e-9):.1f}x), peak RSS {rss:,.0f} MB; small-file overhead {overhead:.1f} ms per "
              f"file (wall; {cpu_per_file:.1f} ms CPU per file)")
    finally:
        if args.data is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
