"""H-ARC ingest speed: `arcstudy ingest` of a data.csv against DuckDB's read_csv of the same file, and the cost
of each small ARC task file.

1. Corpus (the headline): the current-release data.csv of an H-ARC study made by the H-ARC simulator
   (`pipeline.simulate.harc.simulate_harc_study`, the paper's design scaled to about --rows rows, in a child
   process so its memory does not count in this process's peak RSS). `--corpus synthetic` instead writes
   benchmarks/harc_ingest_data.py's generated file (random grids, every row valid: a labelled second case).
   The corpus's share of distinct rows and of distinct output grids is printed. Plus --tasks ARC task JSON
   files (benchmarks/harc_speed.py's task generator). All in a temporary folder (or --data, reused).
2. Ingests data.csv into a new workspace each round (`pipeline.ingest.ingest_paths`, one file: detection,
   reading, every validator rule, pandera, the transaction) and reads the process's peak RSS right after the
   first.
3. Anchor, same process, same (warm) file: DuckDB `read_csv` of data.csv into an in-memory table, interleaved
   with the ingest (ingest, anchor, ingest, anchor, ... for --repeat rounds), so that both see the same load;
   the headline is the median of the rounds' ratios. Beside it, two floors: DuckDB alone writing only the raw
   layer of the file (each field as text, the raw table's own DDL) into a new database file; and DuckDB alone
   appending exactly the rows the first round wrote (every H-ARC table, from Arrow tables in memory, in one
   transaction, into a new workspace): no ingest that writes these tables in one transaction can take less.
4. Ingests the task files into the same workspace; per-file cost = ingest time / files, and the overhead per
   file = that minus a bare `json.loads` of the file.

The last line is the headline: ingest time / DuckDB read_csv time (wall clock, with CPU time alongside) and
the per-small-file overhead in ms. No assertion on time (machines here are shared and noisy):

    python benchmarks/harc_ingest_speed.py [--rows 600000] [--tasks 800] [--corpus sim|synthetic] [--data DIR]
                                           [--repeat N] [--results CSV]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
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


def append_result(path: Path, benchmark: str, ratio: float, floor: float, note: str) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from results import append

    append(path, benchmark, ratio, floor, note)


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - t0, time.process_time() - c0


def raw_layer_floor(ws, csv_path: Path, root: Path) -> tuple[float, float]:
    """What DuckDB itself takes to write just the H-ARC raw layer of the file (every field as text under its
    `csv_` column, file id and row number) into a new database file, in a table made with the workspace's own
    DDL. No checks and no typed tables: a floor for any ingest that keeps the raw layer's contract."""
    import duckdb

    from pipeline.ingest.harc_csv import read_header
    from schemas.harc import raw_csv_column

    ddl = ws.con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = 'raw_harc__csv_rows'").fetchall()[0][0]
    target = root / "raw_floor.duckdb"
    target.unlink(missing_ok=True)
    con = duckdb.connect(str(target))
    con.execute(ddl)
    fields = ", ".join(f'"{h}" AS {raw_csv_column(h)}' for h in read_header(csv_path))
    result = timed(lambda: con.execute(
        f"INSERT INTO raw_harc__csv_rows BY NAME SELECT 'bench' AS file_id, row_number() OVER () AS row_number, "
        f"{fields} FROM read_csv(?, all_varchar = true)", [str(csv_path)]).fetchone())
    con.close()
    target.unlink(missing_ok=True)
    return result[1], result[2]


def written_tables_floor(db: Path, root: Path) -> tuple[float, float, int, int]:
    """What DuckDB itself takes to append exactly the rows an ingest of the file wrote (every H-ARC table it
    filled: the raw layer, the events, the participant tasks), from Arrow tables already in memory (nothing to
    read, parse or check), into a new workspace's own tables, in one transaction as the ingest writes a file, at
    the ingest's DuckDB memory limit for these appends. A floor for any ingest that writes these tables in one
    transaction: (wall s, CPU s, rows, tables)."""
    import duckdb

    from pipeline.core.workspace import Workspace
    from pipeline.ingest.commit import PIECES_INSERT_MEMORY

    src = duckdb.connect(str(db), read_only=True)
    names = [t for (t,) in src.execute("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'raw_harc%' "
                                       "OR table_name LIKE 'core_harc%' ORDER BY table_name").fetchall()]
    data = {t: src.sql(f'SELECT * FROM "{t}"').to_arrow_table() for t in names}
    src.close()
    data = {t: table for t, table in data.items() if table.num_rows}
    target = root / "tables_floor.duckdb"
    for old in (target, target.with_name(target.name + ".wal")):
        old.unlink(missing_ok=True)
    with Workspace(target) as ws:
        ws.ensure_tables()
        ws.con.execute(f"SET memory_limit = '{PIECES_INSERT_MEMORY}'")

        def append() -> None:
            ws.con.execute("BEGIN")
            for name, table in data.items():
                ws.con.register("rows_in_memory", table)
                ws.con.execute(f'INSERT INTO "{name}" BY NAME SELECT * FROM rows_in_memory')
                ws.con.unregister("rows_in_memory")
            ws.con.execute("COMMIT")

        _, wall, cpu = timed(append)
    for old in (target, target.with_name(target.name + ".wal")):
        old.unlink(missing_ok=True)
    return wall, cpu, sum(t.num_rows for t in data.values()), len(data)


def first_ingest(db: Path, csv_path: Path, keep: bool = False):
    """`ingest_paths` of the file into a new workspace (its tables made before the clock starts): every round is
    the first ingest of the file, as a user's is (a re-ingest into the same workspace would delete the previous
    round's 1.2M rows first). ``keep``: the workspace stays (for `written_tables_floor`), else it is removed."""
    from pipeline.core.workspace import Workspace
    from pipeline.ingest import ingest_paths

    for old in (db, db.with_name(db.name + ".wal")):
        old.unlink(missing_ok=True)
    try:
        with Workspace(db) as ws:
            ws.ensure_tables()
            return timed(lambda: ingest_paths(ws, [csv_path], run_id="bench"))
    finally:
        for old in (db, db.with_name(db.name + ".wal")):
            if not keep:
                old.unlink(missing_ok=True)


def simulate_corpus(folder: Path, rows: int, seed: int) -> Path:
    """An H-ARC study from the simulator, the paper's design scaled to about `rows` event rows (the release:
    586,266 rows from 1,729 participants); returns its current-release data.csv."""
    code = f"""
import sys; sys.path.insert(0, {str(REPO)!r})
from dataclasses import replace
from pipeline.simulate.harc import DESIGNS, simulate_harc_study
paper = DESIGNS["paper"]
f = min(1.0, {rows} / 586266)
n = lambda v: max(1, round(v * f))
design = replace(paper, name="bench", n_training=n(paper.n_training), n_training_ten=n(paper.n_training_ten),
                 n_evaluation=n(paper.n_evaluation), n_incomplete_training=n(paper.n_incomplete_training),
                 n_incomplete_evaluation=n(paper.n_incomplete_evaluation))
simulate_harc_study({str(folder)!r}, scale=design, seed={seed}, generation="current", arc_tgi=False, overwrite=True)
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    return folder / "current" / "data" / "data.csv"


def corpus_shape(csv_path: Path) -> str:
    """The share of distinct rows and of distinct output grids: how much a cache keyed by value could save.
    Worked out in a child process: its DISTINCT over every row of the file takes about 1 GB at 573k rows,
    which would otherwise be this process's peak RSS before the ingest even starts."""
    code = f"""
import duckdb
con = duckdb.connect()
path = {str(csv_path)!r}
n, grids = con.execute("SELECT count(*), count(DISTINCT test_output_grid) FROM read_csv(?, all_varchar = true)",
                       [path]).fetchone()
rows = con.execute("SELECT count(*) FROM (SELECT DISTINCT * FROM read_csv(?, all_varchar = true))", [path]).fetchone()[0]
print(f"{{n:,}} rows: distinct rows {{rows / max(n, 1):.1%}}, distinct output grids {{grids / max(n, 1):.1%}}")
"""
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1]


def load() -> str:
    """The 1-minute load average, printed with every figure (a busy machine shifts both sides of a ratio)."""
    return f"load {os.getloadavg()[0]:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=600_000)
    ap.add_argument("--tasks", type=int, default=800)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corpus", choices=("sim", "synthetic"), default="sim",
                    help="sim: the H-ARC simulator's data.csv (the headline); synthetic: generated rows (a best case)")
    ap.add_argument("--data", type=Path, default=None, help="keep the generated files here (reused when present)")
    ap.add_argument("--repeat", type=int, default=2, help="rounds of (ingest, anchor), interleaved")
    ap.add_argument("--results", type=Path, default=None, help="append the headline to this CSV")
    args = ap.parse_args()

    root = args.data or Path(tempfile.mkdtemp(prefix="harc_ingest_speed_"))
    try:
        if args.corpus == "sim":
            csv_path = root / "sim" / "current" / "data" / "data.csv"
            if not csv_path.exists():
                simulate_corpus(root / "sim", args.rows, args.seed)
        else:
            csv_path = root / "data.csv"
            if not csv_path.exists():
                subprocess.run([sys.executable, str(REPO / "benchmarks" / "harc_ingest_data.py"), "--rows",
                                str(args.rows), "--seed", str(args.seed), "--out", str(csv_path)], check=True)
        task_dir = root / "tasks"
        tasks = sorted(task_dir.glob("*.json")) if task_dir.is_dir() else []
        if len(tasks) != args.tasks:
            shutil.rmtree(task_dir, ignore_errors=True)
            tasks = write_tasks(task_dir, args.tasks, args.seed) if args.tasks else []
        with open(csv_path, "rb") as fh:  # warm the page cache for both readers (in pieces: not in the peak RSS)
            while fh.read(16 << 20):
                pass
        label = "H-ARC simulator" if args.corpus == "sim" else "SYNTHETIC best case (generated rows)"
        print(f"corpus: {label}, {csv_path.stat().st_size / 1e6:.0f} MB; {corpus_shape(csv_path)}")

        import duckdb

        from pipeline.core.console import out
        from pipeline.core.workspace import Workspace
        from pipeline.ingest import ingest_paths

        out.set_plain(True)
        with Workspace(root / "bench.duckdb") as ws:
            ws.ensure_tables()
            con = duckdb.connect()
            ratios, cpu_ratios, duck_times, rss = [], [], [], 0.0
            for i in range(args.repeat):  # interleaved: ingest, anchor, ingest, anchor
                report, t_ingest, c_ingest = first_ingest(root / f"round-{i + 1}.duckdb", csv_path, keep=i == 0)
                rss = rss or peak_rss_mb()  # the first ingest's (later rounds add the allocators' retained memory)
                n_duck, t_duck, c_duck = timed(lambda: con.execute(
                    "CREATE OR REPLACE TABLE t AS SELECT * FROM read_csv(?)", [str(csv_path)]).fetchone()[0])
                f = report.files[0]
                duck_times.append(t_duck)
                ratios.append(t_ingest / t_duck)
                cpu_ratios.append(c_ingest / max(c_duck, 1e-9))
                print(f"round {i + 1}: arcstudy ingest {t_ingest:.2f} s (CPU {c_ingest:.2f} s, {f.status}, "
                      f"{f.n_loaded:,} records, {f.n_quarantined} quarantined); DuckDB read_csv {t_duck:.2f} s "
                      f"(CPU {c_duck:.2f} s, {n_duck:,} rows); ratio {t_ingest / t_duck:.2f}x (CPU "
                      f"{c_ingest / max(c_duck, 1e-9):.2f}x); {load()}")
            con.close()
            t_raw, c_raw = raw_layer_floor(ws, csv_path, root)
            print(f"DuckDB alone writing only the raw layer (text columns, the table's own DDL, a new database "
                  f"file): {t_raw:.2f} s (CPU {c_raw:.2f} s); {load()}")
            kept = root / "round-1.duckdb"
            t_tables, c_tables, n_rows, n_tables = written_tables_floor(kept, root)
            for old in (kept, kept.with_name(kept.name + ".wal")):
                old.unlink(missing_ok=True)
            print(f"DuckDB alone appending the rows the ingest wrote ({n_rows:,} rows of {n_tables} tables, from "
                  f"Arrow in memory, one transaction, a new workspace): {t_tables:.2f} s (CPU {c_tables:.2f} s) = "
                  f"{t_tables / statistics.median(duck_times):.2f}x read_csv: the floor of any ingest that writes "
                  f"these tables in one transaction; {load()}")
            overhead = cpu_per_file = 0.0
            if tasks:
                _, t_bare, _ = timed(lambda: [json.loads(p.read_text()) for p in tasks])
                report, t_small, c_small = timed(lambda: ingest_paths(ws, tasks, run_id="bench", force=True))
                loaded = sum(r.status in ("loaded", "replaced") for r in report.files)
                overhead = 1000 * (t_small - t_bare) / len(tasks)
                cpu_per_file = 1000 * c_small / len(tasks)
                print(f"arcstudy ingest of {len(tasks)} ARC task files: {t_small:.2f} s (CPU {c_small:.2f} s), "
                      f"{loaded} loaded; {1000 * t_small / len(tasks):.1f} ms per file")
        ratio = statistics.median(ratios)
        if args.results:
            append_result(args.results, "harc_ingest_speed", ratio, 3.0, f"{args.corpus} {args.rows} rows; "
                          f"peak RSS {rss:.0f} MB")
        print(f"headline: H-ARC CSV ingest ({label}) is {ratio:.2f}x DuckDB read_csv (wall, median of "
              f"{len(ratios)} interleaved rounds; goal <= 3x; CPU {statistics.median(cpu_ratios):.2f}x, the "
              f"figure to compare on a busy machine), peak RSS {rss:,.0f} MB (goal < 1000); small-file "
              f"overhead {overhead:.1f} ms per file ({cpu_per_file:.1f} ms CPU); {load()}")
    finally:
        if args.data is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
