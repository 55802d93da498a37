"""Generate an H-ARC-sized data.csv (current 40-column release) for the ingest benchmark.

Deterministic for a given --rows and --seed: 1,729 participants, 5 tasks each, about 70 events per task
(586,266 rows in the real release), grid sizes 3-20 per side, descriptions repeated on every row as in
the release. Every row passes the D.9 validator, so the benchmark measures the clean path.

    .venv/bin/python benchmarks/harc_ingest_data.py            # -> benchmarks/data/harc/data.csv
    .venv/bin/python benchmarks/harc_ingest_data.py --rows 60000 --out /tmp/harc_small/data.csv
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))

from pipeline.ingest.harc import DATA_CURRENT  # noqa: E402

DEFAULT_OUT = ROOT / "data" / "harc" / "data.csv"
N_PARTICIPANTS = 1729
TASKS_PER_PARTICIPANT = 5
REAL_ROWS = 586_266

COLUMNS = list(DATA_CURRENT)  # the current release's data.csv header, as the reader defines it
WORDS = ("copy", "the", "shape", "colour", "fill", "each", "row", "with", "blue", "red", "pattern", "mirror",
         "grid", "object", "largest", "move", "left", "count", "cells", "border")
MIDDLE = ("edit", "edit", "edit", "floodfill", "change_color", "change_tool", "select_cells", "undo", "Help")


def grid(rng: random.Random, h: int, w: int) -> str:
    return "|" + "|".join("".join(rng.choice("0000123456789") for _ in range(w)) for _ in range(h)) + "|"


def generate(n_rows: int, seed: int) -> pl.DataFrame:
    rng = random.Random(seed)
    n_tasks = N_PARTICIPANTS * TASKS_PER_PARTICIPANT
    per_task = max(4, round(n_rows / n_tasks))
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    made = 0
    for p in range(N_PARTICIPANTS):
        hashed = hashlib.md5(f"participant-{seed}-{p}".encode()).hexdigest()
        split = "training" if p < 783 else "evaluation"
        complete = rng.random() > 0.15
        minute = 0
        for t, task_index in enumerate(rng.sample(range(400), TASKS_PER_PARTICIPANT)):
            if made >= n_rows:
                break
            task = hashlib.md5(f"task-{split}-{task_index}".encode()).hexdigest()[:8] + ".json"
            h, w = rng.randint(3, 20), rng.randint(3, 20)
            inp, out = grid(rng, h, w), grid(rng, h, w)
            first = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 25)))
            solved_at = rng.choice((1, 2, 3, None))
            n = min(per_task + rng.randint(-3, 3), n_rows - made)
            n = max(n, 4) if n_rows - made >= 4 else n_rows - made
            for k in range(1, n + 1):
                last_row = k == n
                attempt = min(1 + ((k - 1) * 3) // n, solved_at or 3)
                if k == 1:
                    action, g, gh, gw, ig, ih, iw = "reset_grid", "|000|000|000|", 3, 3, "|000|000|000|", 3, 3
                elif k == 2:
                    action, g, gh, gw, ig, ih, iw = "copy_from_input", inp, h, w, inp, h, w
                elif last_row:
                    action = "no_last_description" if solved_at else "write_last_description"
                    attempt = 4 if not solved_at else attempt
                    g, gh, gw, ig, ih, iw = out, h, w, inp, h, w
                else:
                    action = "submit" if k == n - 1 else rng.choice(MIDDLE)
                    g, gh, gw, ig, ih, iw = out, h, w, inp, h, w
                is_cell = action in ("edit", "floodfill", "select_cells")
                minute += 1
                row = {
                    "exp_name": "expv2" if split == "training" else "expv4", "task_type": split,
                    "hashed_id": hashed, "joint_id_task": f"{hashed}_{task}", "task_name": task,
                    "task_number": str(t + 1), "is_tutorial": "False",
                    "time": f"2023-{8 + p % 4:02d}-{1 + p % 28:02d}T{(minute // 3600) % 24:02d}:"
                            f"{(minute // 60) % 60:02d}:{minute % 60:02d}.000000",
                    "attempt_number": str(attempt), "action_id": str(k),
                    "solved": str(bool(solved_at) and k >= n - 1), "done": str(last_row),
                    "test_input_grid": ig, "test_input_size_x": str(ih), "test_input_size_y": str(iw),
                    "test_output_grid": g, "test_output_size_x": str(gh), "test_output_size_y": str(gw),
                    "action": action, "action_x": f"{rng.randrange(gh)}.0" if is_cell else "",
                    "action_y": f"{rng.randrange(gw)}.0" if is_cell else "",
                    "select_loc": "test_output" if action == "select_cells" else "",
                    "selected_data": "[[0,1],[0,2]]" if action == "select_cells" else "[]",
                    "selected_symbol": str(rng.randrange(10)), "selected_tool": "edit",
                    "copy_paste_data": "[]", "first_written_solution": first,
                    "last_written_solution": "" if solved_at else first[::-1],
                    "withdraw": str(not complete), "withdraw_reason": "", "withdraw_comment": "",
                    "age": "", "gender": "", "race": "", "education_level": "", "household_income": "",
                    "normal_vision": "", "color_blind": "", "fluent_english": "", "complete": str(complete),
                }
                for c in COLUMNS:
                    cols[c].append(row[c])
            made += n
    # pandas wrote missing values as empty fields; polars would quote empty strings, so use nulls
    return pl.DataFrame(cols, schema={c: pl.String for c in COLUMNS}).with_columns(
        [pl.when(pl.col(c) != "").then(pl.col(c)).alias(c) for c in COLUMNS])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=REAL_ROWS, help="rows to write (default: the release's count)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    df = generate(args.rows, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    df.write_csv(args.out)
    print(f"wrote {df.height} rows, {args.out.stat().st_size / 1e6:.1f} MB to {args.out}")


if __name__ == "__main__":
    main()
