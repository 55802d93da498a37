"""Ingest throughput and memory, as ratios against DuckDB's own scan of the same files in the same run.

Generates (deterministically, under benchmarks/data/, git-ignored) a corpus of ARC-AGI-3 recordings with
frames of at least --gb gigabytes, and an H-ARC-sized data.csv (~600k action rows) when the H-ARC reader is
available. Then, each in a fresh process so peak RSS is the command's own:
  1. arcstudy ingest of the recordings (frames hashed, not stored),
  2. DuckDB's bare scan of the same JSONL files (read_json_objects: split + validate JSON),
  3. DuckDB's full parse of the same files (read_ndjson with the nested frame arrays),
  4. arcstudy ingest of the H-ARC CSV and DuckDB's read_csv of it (--harc-rows 0 skips it),
  5. with --single-gb G, arcstudy ingest of ONE recording file of G gigabytes (read in chunks inside its
     transaction): its peak RSS must stay flat whatever G is.
Ingest runs in one process (workers=1), as the anchors' single query does; like DuckDB's, it may use several
threads (its writer thread commits a file while the next is parsed). Prints MB/s, rows/s, peak RSS and the
ratios; the last line is the headline: ingest time / DuckDB full parse, with peak RSS. No assertion on
time: machines here are noisy (compare CPU time, or wall time on a quiet machine).

    python benchmarks/ingest_speed.py [--gb 1.0] [--single-gb 1.5] [--harc-rows 600000] [--keep-data]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "benchmarks" / "data" / "ingest"
ARCSTUDY_IMPORTS = ("from pathlib import Path\nfrom pipeline.core.workspace import Workspace\n"
                    "from pipeline.ingest import ingest_paths")


def make_recordings(folder: Path, target_bytes: int, seed: int = 7) -> tuple[int, int]:
    """Toolkit-format recordings with one frame per line; returns (bytes, lines)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    # A pool of pre-serialised frames keeps generation fast; each line still carries a full 64x64 grid.
    pool = []
    for _ in range(64):
        grid = [[rng.randrange(16) if rng.random() < 0.3 else 0 for _ in range(64)] for _ in range(64)]
        pool.append(json.dumps([grid]))
    total, n_lines, file_no = 0, 0, 0
    while total < target_bytes:
        guid = str(uuid.UUID(int=rng.getrandbits(128)))
        path = folder / f"bm{file_no % 10:02d}-0123abcd-{guid}.jsonl"
        lines = []
        for i in range(2000):
            action = "RESET" if i == 0 else rng.choice(["ACTION1", "ACTION2", "ACTION3", "ACTION4", "ACTION6"])
            data = {"x": rng.randrange(64), "y": rng.randrange(64)} if action == "ACTION6" else {}
            head = json.dumps({"game_id": f"bm{file_no % 10:02d}-0123abcd"})[:-1]
            tail = json.dumps({"state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 5,
                               "action_input": {"id": action, "data": data, "reasoning": None}, "guid": guid,
                               "full_reset": i == 0, "available_actions": [1, 2, 3, 4, 6]})[1:]
            ts = f"2026-05-01T10:{(i // 60) % 60:02d}:{i % 60:02d}.{i:06d}+00:00"
            lines.append(f'{{"timestamp": "{ts}", "data": {head}, "frame": {pool[rng.randrange(64)]}, {tail}}}\n')
        text = "".join(lines)
        path.write_text(text)
        total += len(text.encode())
        n_lines += len(lines)
        file_no += 1
    return total, n_lines


def make_single_recording(path: Path, target_bytes: int, seed: int = 11) -> tuple[int, int]:
    """One toolkit-format recording of at least `target_bytes` (one long session); returns (bytes, lines)."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    pool = [json.dumps([[[rng.randrange(16) if rng.random() < 0.3 else 0 for _ in range(64)] for _ in range(64)]])
            for _ in range(64)]
    guid = str(uuid.UUID(int=rng.getrandbits(128)))
    total, i = 0, 0
    with open(path, "w") as fh:
        while total < target_bytes:
            action = "RESET" if i == 0 else rng.choice(["ACTION1", "ACTION2", "ACTION3", "ACTION4", "ACTION6"])
            data = {"x": rng.randrange(64), "y": rng.randrange(64)} if action == "ACTION6" else {}
            tail = json.dumps({"state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 5,
                               "action_input": {"id": action, "data": data, "reasoning": None}, "guid": guid,
                               "full_reset": i == 0, "available_actions": [1, 2, 3, 4, 6]})[1:]
            ts = f"2026-05-01T{10 + i // 3_600_000:02d}:{(i // 60_000) % 60:02d}:{(i // 1000) % 60:02d}.{i % 1000:03d}000+00:00"
            line = f'{{"timestamp": "{ts}", "data": {{"game_id": "bm00-0123abcd", "frame": {pool[rng.randrange(64)]}, {tail}}}\n'
            fh.write(line)
            total += len(line)
            i += 1
    return total, i


def run_measured(code: str, setup: str = "") -> tuple[float, float, str]:
    """Run python code in a fresh process, timing `code` only (imports go in `setup`);
    (seconds, peak RSS MiB, stdout). The CPU seconds of `code` (every thread) go to CPU_SECONDS."""
    wrapper = (
        "import resource, time, sys\n"
        "def runq():  # seconds this thread waited for a CPU (Linux schedstat), 0 elsewhere\n"
        "    try:\n"
        "        return int(open('/proc/thread-self/schedstat').read().split()[1]) / 1e9\n"
        "    except OSError:\n"
        "        return 0.0\n"
        f"{setup}\n"
        "t0, c0, q0 = time.perf_counter(), time.process_time(), runq()\n"
        f"{code}\n"
        "dt, cpu, q = time.perf_counter() - t0, time.process_time() - c0, runq() - q0\n"
        "print('__RESULT__', dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, cpu, q)\n"
    )
    res = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, cwd=REPO)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("__RESULT__"))
    _, dt, rss, cpu, runq = line.split()
    CPU_SECONDS.append(float(cpu))
    MAIN_RUNQUEUE_SECONDS.append(float(runq))
    return float(dt), float(rss), res.stdout


CPU_SECONDS: list[float] = []  # of each run_measured call, in order
# Of each run_measured call: how long its main thread waited for a CPU that other processes held. Ingest's
# critical path is its main thread (the parse; the writer thread overlaps it), so its wall time less this
# wait estimates its wall time on an idle machine; DuckDB's parse needs at least its CPU time over the cores.
MAIN_RUNQUEUE_SECONDS: list[float] = []


def ingest_code(db: Path, target: Path, check: str) -> str:
    """The code `run_measured` times: one single-process ingest of `target` into a fresh `db`, then `check`."""
    return (f"ws = Workspace(Path({str(db)!r}))\n"
            f"r = ingest_paths(ws, [Path({str(target)!r})], run_id='bench', workers=1)\n"
            f"assert {check}\n"
            "ws.close()\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0, help="size of the recording corpus to generate")
    parser.add_argument("--harc-rows", type=int, default=600_000, help="0 skips the H-ARC part")
    parser.add_argument("--single-gb", type=float, default=0.0,
                        help="also ingest one recording file of this size and report its peak RSS")
    parser.add_argument("--keep-data", action="store_true", help="keep the generated corpus for the next run")
    args = parser.parse_args()

    rec_dir = DATA / f"recordings-{args.gb:g}gb"
    if not rec_dir.exists():
        t = time.perf_counter()
        size, n_lines = make_recordings(rec_dir, int(args.gb * 1e9))
        print(f"generated {size / 1e6:,.0f} MB, {n_lines:,} lines in {time.perf_counter() - t:.0f} s")
    files = sorted(rec_dir.glob("*.jsonl"))
    size = sum(f.stat().st_size for f in files)
    n_lines = sum(1 for f in files for _ in open(f, "rb"))
    mb = size / 1e6
    glob = str(rec_dir / "*.jsonl")

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        ours, ours_rss, _ = run_measured(
            ingest_code(db, rec_dir, "not r.has_rejections, [f.message for f in r.files if f.n_quarantined]"),
            setup=ARCSTUDY_IMPORTS,
        )
        scan, scan_rss, _ = run_measured(
            f"n = duckdb.sql(\"SELECT count(*) FROM read_json_objects({glob!r}, format='newline_delimited')\").fetchall()\n",
            setup="import duckdb",
        )
        parse, parse_rss, _ = run_measured(
            f"n = duckdb.sql(\"SELECT count(*), sum(len(data.frame)) FROM read_ndjson({glob!r}, "
            "maximum_object_size=100000000)\").fetchall()\n", setup="import duckdb",
        )
    print(f"\nrecordings: {len(files)} files, {mb:,.0f} MB, {n_lines:,} lines (one 64x64 frame each)")
    ours_cpu, scan_cpu, parse_cpu = CPU_SECONDS[-3:]
    print(f"{'':34}{'seconds':>9}{'CPU s':>9}{'MB/s':>9}{'lines/s':>12}{'peak RSS MiB':>14}")
    for name, dt, cpu, rss in (("arcstudy ingest", ours, ours_cpu, ours_rss),
                               ("duckdb read_json_objects (scan)", scan, scan_cpu, scan_rss),
                               ("duckdb read_ndjson (full parse)", parse, parse_cpu, parse_rss)):
        print(f"{name:34}{dt:9.1f}{cpu:9.1f}{mb / dt:9.1f}{n_lines / dt:12,.0f}{rss:14,.0f}")
    print(f"ratio arcstudy / duckdb scan:       {ours / scan:.2f}x the time")
    print(f"ratio arcstudy / duckdb full parse: {ours / parse:.2f}x the time, {ours_cpu / parse_cpu:.2f}x the CPU time "
          "(duckdb's on every core)")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    ours_idle, parse_floor = ours - MAIN_RUNQUEUE_SECONDS[-3], parse_cpu / cores
    print(f"idle-machine estimate (a busy machine's wall times are noise): arcstudy {ours_idle:.1f} s (wall less its "
          f"main thread's {MAIN_RUNQUEUE_SECONDS[-3]:.1f} s wait for a CPU), duckdb full parse >= {parse_floor:.1f} s "
          f"(its CPU over {cores} cores): ratio <= {ours_idle / parse_floor:.2f}x")

    single = None
    if args.single_gb:
        big = DATA / f"single-{args.single_gb:g}gb" / "bm00-0123abcd-00000000-0000-4000-8000-000000000001.jsonl"
        if not big.exists():
            make_single_recording(big, int(args.single_gb * 1e9))
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "single.duckdb"
            s_dt, s_rss, _ = run_measured(
                ingest_code(db, big, "not r.has_rejections and r.files[0].status == 'loaded', r.files[0].message"),
                setup=ARCSTUDY_IMPORTS,
            )
        single = (big.stat().st_size / 1e6, s_dt, s_rss)
        print(f"\none recording file of {single[0]:,.0f} MB: arcstudy ingest {s_dt:.1f} s "
              f"({single[0] / s_dt:.1f} MB/s), peak RSS {s_rss:,.0f} MiB")
        if not args.keep_data:
            shutil.rmtree(big.parent)

    harc_gen = REPO / "benchmarks" / "harc_ingest_data.py"
    if not args.harc_rows:
        print("\n(H-ARC part skipped: --harc-rows 0)")
    elif harc_gen.exists():
        harc_dir = DATA / "harc"
        if not (harc_dir / "data.csv").exists():
            subprocess.run([sys.executable, str(harc_gen), "--rows", str(args.harc_rows), "--out",
                            str(harc_dir / "data.csv")],
                           check=True, cwd=REPO)
        csv = harc_dir / "data.csv"
        rows = sum(1 for _ in open(csv, "rb")) - 1
        csv_mb = csv.stat().st_size / 1e6
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "harc.duckdb"
            h_ours, h_rss, _ = run_measured(
                f"ws = Workspace(Path({str(db)!r}))\n"
                f"r = ingest_paths(ws, [Path({str(csv)!r})], run_id='bench')\n"
                "ws.close()\n", setup=ARCSTUDY_IMPORTS,
            )
            h_scan, h_scan_rss, _ = run_measured(
                f"n = duckdb.sql(\"SELECT count(*) FROM read_csv({str(csv)!r}, all_varchar=true)\").fetchall()\n",
                setup="import duckdb",
            )
        print(f"\nH-ARC data.csv: {rows:,} rows, {csv_mb:,.0f} MB")
        print(f"arcstudy ingest {h_ours:.1f} s ({rows / h_ours:,.0f} rows/s, {csv_mb / h_ours:.1f} MB/s, "
              f"peak {h_rss:,.0f} MiB); duckdb read_csv {h_scan:.1f} s; ratio {h_ours / h_scan:.2f}x")
    else:
        print("\n(H-ARC generator benchmarks/harc_ingest_data.py not present: CSV part skipped)")

    if not args.keep_data:
        shutil.rmtree(rec_dir)
    print(f"\nmachine: {resource.getpagesize()} B pages; python {sys.version.split()[0]}")
    single_text = f", single {single[0]:,.0f} MB file peak RSS {single[2]:,.0f} MiB" if single else ""
    print(f"HEADLINE arcstudy ingest / duckdb full parse: {ours / parse:.2f}x the time, {ours_cpu / parse_cpu:.2f}x "
          f"the CPU time ({mb:,.0f} MB corpus, peak RSS {ours_rss:,.0f} MiB{single_text})")


if __name__ == "__main__":
    main()
