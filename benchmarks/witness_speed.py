"""How long `arcstudy check-witnesses` takes on one task from every generator of an ARC-TGI checkout.

Generates, into a temporary folder (nothing is committed), an export with ARC-TGI's own dataset generator
(`python -m Framework.dataset_generator -n 1`, run in the checkout: one task per generator, one CSV per
benchmark folder), ingests the folder CSVs (not all.csv, which repeats them) into a fresh database, then times

    arcstudy check-witnesses --framework CHECKOUT --workers 2

as a user runs it (a fresh process: interpreter, Dask cluster, sandboxes with the framework preloaded, the
checks and the write). The goal (issue 28): the 547 generators of the public repository in 60 s on 2 cores.

    .venv/bin/python benchmarks/witness_speed.py --arctgi ~/ARC-TGI
    ARCTGI_DIR=~/ARC-TGI .venv/bin/python benchmarks/witness_speed.py --generator-python ~/arctgi-venv/bin/python

The checkout's generators need its requirements (numpy, scipy, matplotlib, shortuuid, tqdm) in the Python that
runs them (--generator-python, default this one); many of their text templates need Python 3.12 or newer
(nested quotes in f-strings), so on an older arcstudy Python give a newer one there. The witnesses themselves
run in arcstudy's Python, which needs the framework's imports too (scipy, matplotlib).

The last line is the headline: check seconds / 60 s goal (under 1 meets it).

    .venv/bin/python benchmarks/witness_speed.py --arctgi ~/ARC-TGI --exports a/Eval.csv b/Train.csv \
        --anchor ../arcstudy-before --repeat 2

times exports you already have (--exports: ARC-TGI CSVs, not generated) and, with --anchor, another arcstudy
checkout on the same database in the same run, the two interleaved (load shifts both); the headline is then this
checkout's median seconds / the anchor's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 60.0
ROOT = Path(__file__).resolve().parents[1]


def _arcstudy(*args: str, root: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", *args], capture_output=True, text=True,
                          env=env)


def generate(checkout: Path, out: Path, python: str) -> list[Path]:
    """One task per generator with the checkout's own dataset generator; the folder CSVs it wrote."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg"}
    res = subprocess.run([python, "-m", "Framework.dataset_generator", "-n", "1", "-o", str(out)], cwd=checkout,
                         capture_output=True, text=True, env=env)
    errors = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.startswith("Error processing")]
    if errors:
        print(f"the generator failed on {len(errors)} generator(s), e.g. {errors[0]}")
    csvs = sorted(p for p in out.glob("*.csv") if p.name != "all.csv")
    if res.returncode != 0 or not csvs:
        sys.exit(f"the dataset generator failed (exit {res.returncode}): {res.stderr.strip()[-500:]}")
    return csvs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arctgi", type=Path, default=os.environ.get("ARCTGI_DIR"),
                    help="the ARC-TGI checkout (default: $ARCTGI_DIR)")
    ap.add_argument("--generator-python", default=sys.executable,
                    help="Python that runs the checkout's generators (default: this one)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--exports", type=Path, nargs="+", help="ARC-TGI export CSVs to check (default: generate one)")
    ap.add_argument("--anchor", type=Path, help="another arcstudy checkout, timed on the same database in the same run")
    ap.add_argument("--repeat", type=int, default=1, help="timings of each side (interleaved with --anchor)")
    args = ap.parse_args()
    if args.arctgi is None or not (Path(args.arctgi) / "Framework" / "transformation_library.py").is_file():
        sys.exit("give the ARC-TGI checkout (the folder holding Framework/ and Generators/) with --arctgi or "
                 "$ARCTGI_DIR")
    checkout = Path(args.arctgi).resolve()
    if args.anchor is not None:
        compare(checkout, args)
        return
    n_generators = sum(1 for p in (checkout / "Generators").rglob("*.py") if not p.name.startswith("__"))
    with tempfile.TemporaryDirectory(prefix="witness-speed-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        csvs = list(args.exports) if args.exports else generate(checkout, root / "export", args.generator_python)
        gen_s = time.perf_counter() - t0
        db = root / "w.duckdb"
        res = _arcstudy("ingest", *map(str, csvs), "--db", str(db))
        if res.returncode not in (0, 3):
            sys.exit(f"ingest failed: {res.stderr.strip()[-500:]}")
        t0 = time.perf_counter()
        res = _arcstudy("check-witnesses", "--framework", str(checkout), "--db", str(db), "--workers",
                        str(args.workers))
        check_s = time.perf_counter() - t0
        if res.returncode not in (0, 3):
            sys.exit(f"check-witnesses failed (exit {res.returncode}): {res.stderr.strip()[-800:]}")
        counts = _arcstudy("query", "SELECT status, count(*) AS n FROM out_arctgi__witness_checks GROUP BY status "
                           "ORDER BY status", "--db", str(db), "--format", "csv").stdout.strip().splitlines()[1:]
        total = _arcstudy("query", "SELECT count(*) AS n FROM out_arctgi__witness_checks", "--db", str(db),
                          "--format", "csv").stdout.strip().splitlines()[-1]
        failed = _arcstudy("query", "SELECT family_id, status, reason FROM out_arctgi__witness_checks WHERE status "
                           "<> 'pass' ORDER BY family_id LIMIT 10", "--db", str(db), "--format", "csv").stdout
    print(f"generators in the checkout: {n_generators}; export generated in {gen_s:.1f} s; tasks checked: {total}")
    print("statuses: " + ", ".join(f"{s} {n}" for s, n in (line.split(",") for line in counts)))
    if failed.strip().count("\n"):
        print("first tasks that did not pass:\n" + failed.strip())
    print(f"check-witnesses --workers {args.workers}: {check_s:.1f} s for {total} tasks (os.cpu_count() "
          f"{os.cpu_count()}, load average {os.getloadavg()[0]:.1f})")
    print(f"witness check time / {GOAL_S:.0f} s goal = {check_s / GOAL_S:.2f}")


def _check_seconds(checkout: Path, db: Path, workers: int, root: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    res = _arcstudy("check-witnesses", "--framework", str(checkout), "--db", str(db), "--workers", str(workers),
                    root=root)
    seconds = time.perf_counter() - t0
    if res.returncode not in (0, 3):
        sys.exit(f"check-witnesses ({root}) failed (exit {res.returncode}): {res.stderr.strip()[-800:]}")
    counts = _arcstudy("query", "SELECT status, count(*) AS n FROM out_arctgi__witness_checks GROUP BY status "
                       "ORDER BY status", "--db", str(db), "--format", "csv").stdout.strip().splitlines()[1:]
    return seconds, ", ".join(f"{s} {n}" for s, n in (line.split(",") for line in counts))


def compare(checkout: Path, args: argparse.Namespace) -> None:
    """This checkout against --anchor on the same exports, interleaved, --repeat times each."""
    import statistics

    anchor = args.anchor.resolve()
    with tempfile.TemporaryDirectory(prefix="witness-speed-") as tmp:
        root = Path(tmp)
        csvs = list(args.exports) if args.exports else generate(checkout, root / "export", args.generator_python)
        db = root / "w.duckdb"
        res = _arcstudy("ingest", *map(str, csvs), "--db", str(db))
        if res.returncode not in (0, 3):
            sys.exit(f"ingest failed: {res.stderr.strip()[-500:]}")
        times: dict[str, list[float]] = {"this": [], "anchor": []}
        for i in range(args.repeat):
            for side, code in (("anchor", anchor), ("this", ROOT)) if i % 2 == 0 else (("this", ROOT),
                                                                                        ("anchor", anchor)):
                seconds, statuses = _check_seconds(checkout, db, args.workers, code)
                times[side].append(seconds)
                print(f"{side:6} ({code}): {seconds:.1f} s, {statuses} (load average {os.getloadavg()[0]:.1f})")
    this, base = statistics.median(times["this"]), statistics.median(times["anchor"])
    print(f"check-witnesses --workers {args.workers} on {len(csvs)} export(s): this checkout / anchor = "
          f"{this:.1f} s / {base:.1f} s = {this / base:.2f}")


if __name__ == "__main__":
    main()
