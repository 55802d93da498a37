"""Ingest throughput and memory, as ratios against DuckDB's own parse of the same files in the same run.

Corpus (the headline): recordings made the way users' files are made, by the engine: `arcstudy simulate
--no-harc --no-static --seed S --scale demo` (80 recordings, about 350 MB, frames as varied as simulated
play), generated under benchmarks/data/ (git-ignored) and reused; `--max-files N` ingests N of them spread
evenly over the sorted list (humans and agents, every game) for a quick run. The corpus's share of distinct frames and of distinct frame rows is
printed: the reader caches decoded frame rows per process, so a corpus whose frames repeat more than real
play does measures that cache rather than the reader. A synthetic corpus (a pool of 64 random frames, every
frame row almost always a cache hit: a best case, labelled as such) can be added as a second line with
--synthetic-gb.

Each measurement runs in a fresh process, interleaved: ingest, DuckDB's full parse, ingest, full parse, ... for
--repeat rounds, so both see the same load; the headline is the median of the rounds' ratios. DuckDB's full parse is
the anchor issue 30 defines: `read_ndjson` of the same files with every column materialised into a table
(`CREATE TABLE t AS SELECT * FROM read_ndjson(...)`, in memory: the nested frame arrays as BIGINT[][][], the
envelope and every data field as their inferred types). Beside it, a stricter figure: DuckDB reading only what a
count and the frame arrays' lengths need (`SELECT count(*), sum(len(data.frame))`: projection pushdown leaves the
other columns unmaterialised), about half the work, printed as a second ratio, never the headline. The ingest
measured is the public command with its defaults, `arcstudy ingest <study folder>`, run as the console script
runs it (`python -m pipeline`: its automatic workers: one process on two cores below 2 GB, with a helper process
when a core is free, started before the program's imports), timed from the command's start to
its exit: its interpreter start-up, imports, the creation of a fresh database, the run manifest and the printed
report are in the figure. DuckDB's parse is timed in its process after `import duckdb` (its start-up is left out:
a conservative ratio). With --max-files the command is given the files themselves. Peak RSS is the command's own.
No assertion on time (machines here are shared and noisy); the
1-minute load average is printed with each round:

    python benchmarks/ingest_speed.py [--max-files N] [--repeat 2] [--synthetic-gb 0.2] [--single-gb 1.5]
                                      [--results CSV]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
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
        "def peak_mib():  # this process's own high-water mark: VmHWM starts afresh at exec, ru_maxrss does not\n"
        "    try:\n"
        "        return next(int(ln.split()[1]) for ln in open('/proc/self/status') if ln.startswith('VmHWM')) / 1024\n"
        "    except (OSError, StopIteration):\n"
        "        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
        "print('__RESULT__', dt, peak_mib(), cpu, q)\n"
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


def simulated_corpus(scale: str, seed: int) -> Path:
    """`arcstudy simulate` (recordings only) under benchmarks/data/, made once per (scale, seed)."""
    out = DATA / f"simulated-{scale}-seed{seed}"
    if not (out / "SIMULATION.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "simulate", "--out", str(out), "--scale", scale,
                        "--seed", str(seed), "--no-harc", "--no-static"], check=True, cwd=REPO,
                       stdout=subprocess.DEVNULL)
    return out


def corpus_shape(files: list[Path]) -> str:
    """Lines, the share of distinct frames among frame lines, and of distinct 64-cell frame rows among rows."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TEMP TABLE f AS SELECT json_extract(json, '$.data.frame') AS frame FROM read_json_objects(?, "
                "format = 'newline_delimited', maximum_object_size = 100000000)", [[str(f) for f in files]])
    lines, frames, distinct = con.execute(
        "SELECT count(*), count(frame), count(DISTINCT md5(frame::VARCHAR)) FROM f").fetchone()
    rows, distinct_rows = con.execute(
        "SELECT count(*), count(DISTINCT md5(r::VARCHAR)) FROM (SELECT unnest(json_extract(frame, '$[*][*]')) AS r "
        "FROM f WHERE frame IS NOT NULL)").fetchone()
    con.close()
    return (f"{lines:,} lines, {frames:,} frames: distinct frames {distinct / max(frames, 1):.1%}, distinct frame rows "
            f"{distinct_rows / max(rows, 1):.1%} of {rows:,}")


# Runs the measured command from a small process of its own: a child forked from this one (which holds DuckDB's
# corpus statistics) would be charged this process's pages as its peak RSS.
TIMER = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
dt = time.perf_counter() - t0
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stdout.write(done.stdout + done.stderr)
print("__TIMED__", json.dumps([dt, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, done.returncode]))
"""


def run_command(args: list[str]) -> tuple[float, float, float, int, str]:
    """Run a command; (wall seconds from its start to its exit, CPU seconds of it and its children, its peak RSS
    MiB, exit code, its output)."""
    res = subprocess.run([sys.executable, "-c", TIMER, *args], cwd=REPO, capture_output=True, text=True)
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("__TIMED__"))
    dt, cpu, rss, code = json.loads(line.split(" ", 1)[1])
    return dt, cpu, rss, code, res.stdout


def compare(files: list[Path], label: str, repeat: int, target: list[Path] | None = None) -> tuple[float, float, float]:
    """Interleaved rounds of (`arcstudy ingest TARGET`, DuckDB full parse of `files`); prints each round, returns
    the median ratio, the median CPU ratio and the first ingest's peak RSS (MiB). TARGET: the study folder (the
    command finds the recordings below it), else the files."""
    import os
    import statistics

    mb = sum(f.stat().st_size for f in files) / 1e6
    listing = [str(f) for f in files]
    print(f"\n{label}: {len(files)} recording files, {mb:,.0f} MB; {corpus_shape(files)}")
    ratios, cpu_ratios, light_ratios, rss = [], [], [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            db = Path(tmp) / f"bench{i}.duckdb"
            ours, ours_cpu, ours_rss, code, out = run_command(
                [sys.executable, "-m", "pipeline", "--plain", "ingest", *[str(p) for p in target or files],
                 "--db", str(db)])
            if code not in (0, 3):
                raise RuntimeError(f"arcstudy ingest failed ({code}): {out[-3000:]}")
            summary = next((ln for ln in out.splitlines() if " files: " in ln and "loaded" in ln), "").strip()
            load = os.getloadavg()[0]
            parse, parse_rss, _ = run_measured(
                f"duckdb.sql(\"CREATE TABLE t AS SELECT * FROM read_ndjson({listing!r}, "
                "maximum_object_size=100000000)\")\n", setup="import duckdb")
            parse_cpu = CPU_SECONDS[-1]
            light, _, _ = run_measured(
                f"n = duckdb.sql(\"SELECT count(*), sum(len(data.frame)) FROM read_ndjson({listing!r}, "
                "maximum_object_size=100000000)\").fetchall()\n", setup="import duckdb")
            rss = rss or ours_rss
            ratios.append(ours / parse)
            cpu_ratios.append(ours_cpu / parse_cpu)
            light_ratios.append(ours / light)
            print(f"round {i + 1} (load {load:.2f}): arcstudy ingest {ours:.1f} s (CPU {ours_cpu:.1f} s, {mb / ours:.0f} "
                  f"MB/s, peak RSS {ours_rss:,.0f} MiB; {summary}); DuckDB read_ndjson into a table {parse:.1f} s (CPU "
                  f"{parse_cpu:.1f} s, peak {parse_rss:,.0f} MiB); ratio {ours / parse:.2f}x (CPU "
                  f"{ours_cpu / parse_cpu:.2f}x); stricter: DuckDB counting the frames only {light:.1f} s, "
                  f"ratio {ours / light:.2f}x")
    print(f"stricter second figure (not the headline): against DuckDB reading only a count and the frame arrays' "
          f"lengths, {statistics.median(light_ratios):.2f}x (median)")
    return statistics.median(ratios), statistics.median(cpu_ratios), rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="demo", help="arcstudy simulate --scale of the corpus")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--max-files", type=int, default=0, help="ingest N recordings spread over the corpus (0: all)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of (ingest, full parse), interleaved")
    parser.add_argument("--synthetic-gb", type=float, default=0.0,
                        help="also measure a SYNTHETIC best case of this size (64 distinct frames), as a second line")
    parser.add_argument("--single-gb", type=float, default=0.0,
                        help="also ingest one (synthetic) recording file of this size and report its peak RSS")
    parser.add_argument("--keep-data", action="store_true", help="keep the synthetic corpora for the next run")
    parser.add_argument("--results", type=Path, default=None, help="append the headline to this CSV")
    args = parser.parse_args()

    sim = simulated_corpus(args.scale, args.seed)
    files = sorted(sim.rglob("*.jsonl"))
    target = [sim]  # the study folder, as a user gives it
    if args.max_files and len(files) > args.max_files:  # spread over the corpus: humans and agents, every game
        step = len(files) / args.max_files
        files = [files[int(i * step)] for i in range(args.max_files)]
        target = files
    ratio, cpu_ratio, rss = compare(files, f"engine-made recordings (arcstudy simulate --scale {args.scale} --seed "
                                    f"{args.seed})", args.repeat, target)

    synthetic = ""
    if args.synthetic_gb:
        rec_dir = DATA / f"recordings-{args.synthetic_gb:g}gb"
        if not rec_dir.exists():
            make_recordings(rec_dir, int(args.synthetic_gb * 1e9))
        s_ratio, _, _ = compare(sorted(rec_dir.glob("*.jsonl")), "SYNTHETIC best case (a pool of 64 frames)",
                                args.repeat)
        synthetic = f"; synthetic best case (64 distinct frames, not the headline) {s_ratio:.2f}x"
        if not args.keep_data:
            shutil.rmtree(rec_dir)

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
        print(f"\none (synthetic) recording file of {big.stat().st_size / 1e6:,.0f} MB: arcstudy ingest {s_dt:.1f} s, "
              f"peak RSS {s_rss:,.0f} MiB")
        if not args.keep_data:
            shutil.rmtree(big.parent)

    if args.results:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from results import append

        append(args.results, "ingest_speed", ratio, 1.0, f"simulate {args.scale} seed {args.seed}, {len(files)} files; "
               f"CPU {cpu_ratio:.2f}x; peak RSS {rss:.0f} MiB")
    print(f"HEADLINE arcstudy ingest (the command, defaults) of engine-made recordings / DuckDB read_ndjson, every column "
          f"materialised into a table: "
          f"{ratio:.2f}x the time "
          f"(median of {args.repeat} interleaved rounds; CPU {cpu_ratio:.2f}x; goal <= 1.0x), peak RSS {rss:,.0f} MiB "
          f"(goal < 1024){synthetic}")


if __name__ == "__main__":
    main()
