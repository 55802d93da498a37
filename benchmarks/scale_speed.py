"""Scale-out speed: the same ingest, H-ARC replay and scoring with 1..N workers, as speed-up and efficiency.

1. `arcstudy simulate --scale <scale>` writes a synthetic study into a temporary folder (deterministic).
2. For each worker count 1..N (serial at 1, a local Dask cluster from 2 on: pipeline.core.executor): a fresh
   database, `ingest_paths` of the study's inputs (the demo's list: ARC-AGI-3 human recordings and study
   manifest, H-ARC current release and tasks), then `run_trace_checks` (replay of every H-ARC trace), then
   what `arcstudy score <study>/arc3` does before writing (every recording file, human and agent, read and
   replay-verified against the repository's games, then scored). Wall clock includes starting and stopping
   the cluster: that is what a user waits for. The tables written and the scorecard must be identical for
   every count (checked).
3. Prints seconds, speed-up (time at 1 / time at n) and efficiency (speed-up / n) per stage, the peak
   resident memory and the CPU seconds of the whole process tree per stage (this process plus its workers,
   sampled every 0.1 s with psutil), and as its LAST line the speed-up of all stages together at the highest worker count, with
   the seconds and the peak memory at that count.

A study without H-ARC (`--scale release`, the size of the official ARC-AGI-3 human release: 340 long
recordings with frames, about 2.7 GB) has no replay-harc stage. No assertion on time (the machines here are
shared and noisy):

    python benchmarks/scale_speed.py [--max-workers 2] [--scale demo|arc3|large|release] [--study DIR] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGES = ("ingest", "replay-harc", "score")
# Tables whose content must not depend on the worker count (columns that hold run times excluded; the
# digest sorts the rows).
DIGESTED = {
    "core_arc3__steps": "SELECT * EXCLUDE (frames_file) FROM core_arc3__steps",
    "core_arc3__plays": "SELECT * FROM core_arc3__plays",
    "core_harc__actions": "SELECT * FROM core_harc__actions",
    "raw_ingest__files": "SELECT file_path, file_id, n_records_loaded, n_records_quarantined FROM "
                         "raw_ingest__files",
    "quarantine": "SELECT * FROM quarantine",
    "out_harc__trace_checks": "SELECT * FROM out_harc__trace_checks",
}


def simulate(data_dir: Path, scale: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "simulate", "--scale", scale, "--seed", "0",
                    "--out", str(data_dir), "--overwrite"], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def inputs_of(data_dir: Path) -> list[Path]:
    """The demo's ingest inputs that the study has (a `release` study has no H-ARC)."""
    wanted = [data_dir / "arc3" / "human", data_dir / "arc3" / "study.json", data_dir / "harc" / "current",
              data_dir / "harc" / "tasks"]
    return [p for p in wanted if p.exists()]


class TreeUsage:
    """Peak resident memory and CPU seconds of this process and all its descendants (Dask workers included),
    sampled every `interval_s` (a worker's CPU after its last sample is missed: at most one interval each)."""

    def __init__(self, interval_s: float = 0.1):
        import psutil

        self.interval_s, self.me = interval_s, psutil.Process()
        self.peak, self.cpu_s = 0, 0.0
        self._cpu: dict[int, float] = {}
        self._stop = threading.Event()

    def _sample(self) -> None:
        import psutil

        total = 0
        for proc in [self.me, *self.me.children(recursive=True)]:
            try:
                with proc.oneshot():
                    total += proc.memory_info().rss
                    times = proc.cpu_times()
                self._cpu[proc.pid] = times.user + times.system
            except psutil.Error:  # a worker that ended between listing and reading
                pass
        self.peak = max(self.peak, total)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)

    @contextmanager
    def measure(self):
        """Peak bytes (`self.peak`) and CPU seconds (`self.cpu_s`) over the block."""
        self.peak, self._cpu = 0, {}
        self._sample()
        before = dict(self._cpu)
        self._stop.clear()
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
            self._sample()
            self.cpu_s = sum(t - before.get(pid, 0.0) for pid, t in self._cpu.items())


def run_once(db: Path, inputs: list[Path], workers: int
             ) -> tuple[dict[str, float], dict[str, tuple[int, float]], dict[str, str]]:
    """Seconds per stage, (peak bytes, CPU seconds) per stage, and the digests."""
    from pipeline.core.workspace import Workspace
    from pipeline.harc.build import run_trace_checks, table_digest
    from pipeline.ingest import ingest_paths

    times, peaks, memory = {}, {}, TreeUsage()
    with Workspace(db) as ws:
        t0 = time.perf_counter()
        with memory.measure():
            ingest_paths(ws, inputs, run_id="bench", workers=workers)
        times["ingest"], peaks["ingest"] = time.perf_counter() - t0, (memory.peak, memory.cpu_s)
        if any(p.parent.name == "harc" for p in inputs):
            t0 = time.perf_counter()
            with memory.measure():
                run_trace_checks(ws, workers=workers)
            times["replay-harc"], peaks["replay-harc"] = time.perf_counter() - t0, (memory.peak, memory.cpu_s)
        digests = {name: table_digest(ws.read(sql)) for name, sql in DIGESTED.items() if ws.has_table(name)}
    t0 = time.perf_counter()
    with memory.measure():
        digests["scorecard"] = score_study(inputs[0].parent, workers)
    times["score"], peaks["score"] = time.perf_counter() - t0, (memory.peak, memory.cpu_s)
    return times, peaks, digests


def score_study(arc3_dir: Path, workers: int) -> str:
    """`arcstudy score <arc3_dir>` up to its outputs: the sha256 of the scorecard and replay checks."""
    import hashlib

    from engine.loader import default_environments_dir
    from pipeline.commands.score import expand_recordings
    from pipeline.scoring import baseline_sources as bs
    from pipeline.scoring.parallel import read_and_verify
    from pipeline.scoring.plays import recordings_from_tables
    from pipeline.scoring.policies import DEFAULT_POLICY_ID, get_policy
    from pipeline.scoring.run import ScoreRequest, score_recordings

    games = [default_environments_dir()]
    steps, plays, files, _, checks = read_and_verify(expand_recordings([arc3_dir]), games, workers=workers)
    sources = [s for s in (bs.source_from_games_dirs(games), bs.reference_source()) if s is not None]
    request = ScoreRequest(policies=[get_policy(DEFAULT_POLICY_ID)], baseline_sources=sources, game_dirs=games,
                           from_files=True, workers=workers)
    result = score_recordings(recordings_from_tables(steps, plays, files), request, checks=checks)
    text = "\n".join(pr.scorecard_json for pr in result.policies)
    return hashlib.sha256(text.encode()).hexdigest()


def main() -> None:
    from pipeline.core.executor import default_workers

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-workers", type=int, default=max(2, default_workers()))
    ap.add_argument("--scale", default="demo", help="arcstudy simulate --scale (demo, arc3, large, release)")
    ap.add_argument("--study", type=Path, default=None, help="an already simulated study (skips simulating)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary study and databases")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="arcstudy-scale-"))
    try:
        data = args.study or root / "study"
        if args.study is None:
            print(f"simulate --scale {args.scale}: {simulate(data, args.scale):.1f} s -> {data}", flush=True)
        inputs = inputs_of(data)
        n_bytes = sum(f.stat().st_size for p in inputs for f in ([p] if p.is_file() else p.rglob("*"))
                      if f.is_file())
        print(f"inputs: {n_bytes / 1e6:.1f} MB; usable cores here: {default_workers()}")
        results: dict[int, dict[str, float]] = {}
        peaks: dict[int, dict[str, tuple[int, float]]] = {}
        digests = {}
        for n in range(1, args.max_workers + 1):
            results[n], peaks[n], digests[n] = run_once(root / f"w{n}.duckdb", inputs, n)
            print(f"  {n} worker(s): " + ", ".join(f"{s} {results[n][s]:.2f} s (CPU {peaks[n][s][1]:.1f} s, peak "
                                                 f"{peaks[n][s][0] / 1e9:.2f} GB)" for s in results[n]), flush=True)
        stages = [s for s in STAGES if s in results[1]]
        differ = sorted({t for d in digests.values() for t in d if d[t] != digests[1].get(t)})
        if differ:
            raise SystemExit(f"tables differ between worker counts: {', '.join(differ)}")
        print("tables identical for every worker count")
        print(f"{'stage':<14}{'workers':>8}{'seconds':>10}{'speed-up':>10}{'efficiency':>12}{'CPU s':>9}"
              f"{'peak RSS':>11}")
        for stage in (*stages, "total"):
            for n, times in results.items():
                t = sum(times.values()) if stage == "total" else times[stage]
                base = sum(results[1].values()) if stage == "total" else results[1][stage]
                usage = list(peaks[n].values()) if stage == "total" else [peaks[n][stage]]
                peak, cpu = max(u[0] for u in usage), sum(u[1] for u in usage)
                print(f"{stage:<14}{n:>8}{t:>10.2f}{base / t:>9.2f}x{base / t / n:>11.0%}{cpu:>9.1f}"
                      f"{peak / 1e9:>8.2f} GB")
        top = args.max_workers
        stage_text = ", ".join(f"{s} {results[1][s] / results[top][s]:.2f}x" for s in stages)
        top_peak = max(u[0] for u in peaks[top].values())
        print(f"speed-up at {top} workers: {sum(results[1].values()) / sum(results[top].values()):.2f}x "
              f"({stage_text}; {sum(results[top].values()):.1f} s, peak RSS {top_peak / 1e9:.2f} GB)")
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
