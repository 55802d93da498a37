"""`arcstudy score --workers 2` against `--workers 1` on simulated studies: the speed-up, and that the scorecard
is the same.

Corpus: --studies studies made by `arcstudy simulate --no-harc --no-static --seed S` (seeds 1..N; 80 engine-made
recordings and about 350 MB each; four of them are the issue's 1.4 GB, 320 recordings), generated under
benchmarks/data/ (git-ignored) and reused; `--max-files N` scores N recordings spread over them. Each run is
`arcstudy --plain score RECORDINGS --workers W --no-figures` in a fresh process into a fresh database,
interleaved: 1, 2, 1, 2, ... for --repeat rounds; the headline is the median of the rounds' speed-ups (wall of
--workers 1 / wall of --workers 2). The scorecards (scorecard__*.json) of every run must be byte-identical.
No assertion on time:

    python benchmarks/score_workers.py [--studies 4] [--max-files N] [--repeat 2] [--results CSV]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "benchmarks" / "data" / "ingest"


def study(seed: int) -> Path:
    out = DATA / f"simulated-demo-seed{seed}"
    if not (out / "SIMULATION.json").exists():
        subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "simulate", "--out", str(out), "--seed",
                        str(seed), "--no-harc", "--no-static", "--overwrite"], check=True, cwd=REPO,
                       stdout=subprocess.DEVNULL)
    return out


def score(files: list[Path], workers: int, folder: Path, checkout: Path = REPO) -> tuple[float, str, str]:
    """Wall seconds, the digest of the scorecards, and the command's last output line."""
    out = folder / "out"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "score", *map(str, files), "--workers",
                           str(workers), "--no-figures", "--db", str(folder / "score.duckdb"), "--out", str(out)],
                          capture_output=True, text=True, cwd=checkout,
                          env={**os.environ, "PYTHONPATH": str(checkout)})
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 3):
        sys.exit(f"score --workers {workers} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    cards = sorted(out.glob("scorecard__*.json"))
    digest = hashlib.sha256(b"".join(c.name.encode() + c.read_bytes() for c in cards)).hexdigest()[:16]
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return seconds, digest, last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--studies", type=int, default=4)
    ap.add_argument("--max-files", type=int, default=0, help="score N recordings spread over the studies (0: all)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--results", type=Path, default=None, help="append the headline to this CSV")
    ap.add_argument("--reference", type=Path, default=None,
                    help="another checkout (e.g. before a change) measured in the same rounds, interleaved")
    args = ap.parse_args()
    files = sorted(p for seed in range(1, args.studies + 1) for p in study(seed).rglob("*.jsonl"))
    if args.max_files and len(files) > args.max_files:
        step = len(files) / args.max_files
        files = [files[int(i * step)] for i in range(args.max_files)]
    mb = sum(f.stat().st_size for f in files) / 1e6
    print(f"corpus: {args.studies} simulated studies (arcstudy simulate, seeds 1-{args.studies}), {len(files)} "
          f"engine-made recordings, {mb:,.0f} MB")
    speedups, digests, reference = [], set(), []
    checkouts = [REPO] + ([args.reference.resolve()] if args.reference else [])
    with tempfile.TemporaryDirectory(prefix="score_workers_") as tmp:
        for i in range(args.repeat):
            for c, checkout in enumerate(checkouts):
                times = {}
                for w in (1, 2):
                    folder = Path(tmp) / f"r{i}c{c}w{w}"
                    folder.mkdir()
                    times[w], digest, last = score(files, w, folder, checkout)
                    digests.add((c, digest))  # within a checkout: one digest for every run
                    print(f"round {i + 1}: {'reference ' if c else ''}--workers {w}: {times[w]:.1f} s (load "
                          f"{os.getloadavg()[0]:.1f}); scorecards {digest}; {last[:100]}")
                (reference if c else speedups).append(times[1] / times[2])
    same = ("identical scorecards" if len(digests) == len(checkouts)
            else f"DIFFERENT scorecards ({len(digests)} digests for {len(checkouts)} checkouts)")
    ratio = statistics.median(speedups)
    if args.results:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from results import append

        append(args.results, "score_workers", ratio, 1.6, f"{args.studies} studies, {len(files)} files; {same}")
    if reference:
        print(f"reference checkout {args.reference}: --workers 2 is {statistics.median(reference):.2f}x as fast as "
              f"--workers 1 (rounds: {', '.join(f'{s:.2f}x' for s in reference)})")
    print(f"headline: score --workers 2 is {ratio:.2f}x as fast as --workers 1 (median of {len(speedups)} interleaved "
          f"rounds: {', '.join(f'{s:.2f}x' for s in speedups)}; goal >= 1.6x) on {mb:,.0f} MB; {same}")


if __name__ == "__main__":
    main()
