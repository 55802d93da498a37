"""Do two checkouts of arcstudy ingest the same files into the same tables? For changes that must not alter
the typed tables (a faster reader, a new raw layer): every core table both workspaces have, and the
quarantine, compared with `EXCEPT ALL` both ways.

Each checkout ingests PATHS in its own process (`PYTHONPATH=CHECKOUT python -m pipeline.cli ingest`) into its
own workspace; then both are attached to one DuckDB connection. Columns that differ by design are left out:
`ingested_at`-like times and run ids (not compared, they are never in core tables), and the quarantine's
`quarantine_id`/`run_id`/`quarantined_at`. A raw table whose columns are the same in both is compared like a core
table; one whose layout changed is listed with its row counts only (the H-ARC row_json layer against the text
columns: field by field).

    python benchmarks/compare_ingest.py --reference /path/to/old/checkout PATHS...

Prints one line per table and `identical: N tables` or the differing tables last; exit 1 when any differ.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUARANTINE_COLUMNS = ("file_path", "source_location", "check_name", "column_name", "failing_value", "reason",
                      "raw_text", "target_table")
VOLATILE_RAW_COLUMNS = ("run_id", "ingested_at")  # of a raw table, with --raw: the run's, not the file's


def ingest(checkout: Path, paths: list[str], db: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "ingest", *paths, "--db", str(db)],
                          env=env, cwd=checkout, capture_output=True, text=True)
    if done.returncode not in (0, 3):
        sys.exit(f"ingest with {checkout} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.returncode


def harc_raw_lossless(con) -> bool:
    """The old H-ARC raw layer (row_json) against the new one (a text column per CSV column): the same fields,
    row by row."""
    import json

    old = dict(((f, r), j) for f, r, j in con.execute(
        "SELECT file_id, row_number, row_json FROM a.raw_harc__csv_rows").fetchall())
    cur = con.execute("SELECT * FROM b.raw_harc__csv_rows")
    names = [d[0] for d in cur.description]
    new = {(row[0], row[1]): dict(zip(names, row, strict=True)) for row in cur.fetchall()}
    if old.keys() != new.keys():
        return False
    for key, text in old.items():
        fields = json.loads(text)
        extra = fields.pop("__extra_fields", None)
        row = new[key]
        if any(row["csv_" + k] != v for k, v in fields.items()) or row["extra_fields_json"] != extra:
            return False
        if sum(v is not None for k, v in row.items() if k.startswith("csv_")) != sum(v is not None for v in fields.values()):
            return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", type=Path, required=True, help="the other checkout (e.g. the main branch)")
    ap.add_argument("--candidate", type=Path, default=REPO, help="this checkout (default: the one holding me)")
    ap.add_argument("--raw", action="store_true",
                    help="compare raw_ingest__files too (its run ids and ingest times left out)")
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()

    import duckdb

    with tempfile.TemporaryDirectory(prefix="compare_ingest_") as tmp:
        ref_db, new_db = Path(tmp) / "reference.duckdb", Path(tmp) / "candidate.duckdb"
        codes = ingest(args.reference, args.paths, ref_db), ingest(args.candidate, args.paths, new_db)
        con = duckdb.connect()
        con.execute(f"ATTACH '{ref_db}' AS a (READ_ONLY)")
        con.execute(f"ATTACH '{new_db}' AS b (READ_ONLY)")

        def tables(db: str) -> dict[str, list[str]]:
            rows = con.execute("SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = ? "
                               "ORDER BY table_name, column_index", [db]).fetchall()
            out: dict[str, list[str]] = {}
            for t, c in rows:
                out.setdefault(t, []).append(c)
            return out

        a, b = tables("a"), tables("b")
        differing = []
        n_compared = 0
        print(f"exit codes: reference {codes[0]}, candidate {codes[1]}")
        if codes[0] != codes[1]:
            differing.append("exit code")
        for name in sorted(set(a) | set(b)):
            count = {db: con.execute(f"SELECT count(*) FROM {db}.{name}").fetchone()[0]
                     for db, have in (("a", a), ("b", b)) if name in have}
            if not any(count.values()):
                continue
            if name == "raw_harc__csv_rows" and "row_json" in a.get(name, []) and "row_json" not in b.get(name, []):
                same = harc_raw_lossless(con)
                print(f"{name}: rows {count.get('a', '-')} / {count.get('b', '-')}; the reference's row_json and the "
                      f"candidate's csv_* columns hold {'the same' if same else 'DIFFERENT'} fields")
                if not same:
                    differing.append(name)
                continue
            # a raw table whose layout did not change must hold the same rows too; raw_ingest__files holds times:
            # compared with --raw, its run ids and ingest times left out
            raw_compared = name.startswith("raw_") and a.get(name) == b.get(name) and (
                name != "raw_ingest__files" or args.raw)
            if not name.startswith("core_") and name != "quarantine" and not raw_compared:
                print(f"{name}: rows {count.get('a', '-')} / {count.get('b', '-')} (layout may differ; not compared)")
                continue
            if name not in a or name not in b or a[name] != b[name] and name != "quarantine":
                print(f"{name}: DIFFERENT columns: {a.get(name)} / {b.get(name)}")
                differing.append(name)
                continue
            cols = ", ".join(QUARANTINE_COLUMNS if name == "quarantine" else
                             [c for c in a[name] if c not in VOLATILE_RAW_COLUMNS] if raw_compared else a[name])
            n_compared += 1
            only = [con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM {x}.{name} EXCEPT ALL "
                                f"SELECT {cols} FROM {y}.{name})").fetchone()[0] for x, y in (("a", "b"), ("b", "a"))]
            same = only == [0, 0]
            print(f"{name}: rows {count['a']} / {count['b']}; only in reference {only[0]}, only in candidate "
                  f"{only[1]}{'' if same else '  <-- DIFFERENT'}")
            if not same:
                differing.append(name)
        con.close()
    if differing:
        print(f"DIFFERENT: {', '.join(differing)}")
        sys.exit(1)
    print(f"identical: {n_compared} tables (core tables, raw tables of the same layout and quarantine, EXCEPT ALL "
          "both ways)")


if __name__ == "__main__":
    main()
