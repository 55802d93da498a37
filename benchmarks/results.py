"""The results CSV of `make bench` (benchmarks/results/): one line per benchmark run, appended."""

from __future__ import annotations

import csv
import datetime
import os
import subprocess
from pathlib import Path

HEADER = ("utc", "commit", "benchmark", "headline_ratio", "goal", "load_1min", "note")


def append(path: Path, benchmark: str, ratio: float, goal: float, note: str) -> None:
    """Append one result: when, which commit, the headline ratio, the goal it is held against, the machine's
    1-minute load average (a busy machine's ratios are less trustworthy) and a note."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    with open(path, "a", newline="") as fh:
        w = csv.writer(fh)
        if new:
            w.writerow(HEADER)
        w.writerow((datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), commit, benchmark,
                    f"{ratio:.3f}", f"{goal:g}", f"{os.getloadavg()[0]:.1f}", note))
