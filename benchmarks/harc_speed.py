"""H-ARC end to end at the paper's scale: ingest + replay-harc + harc-analyses, time per stage.

Data: a synthetic H-ARC study of 1,729 participants (783 training, 946 evaluation; 5 tasks each, 10 for the
first 241 training participants; withdrawals leave tasks unfinished) on 400 + 400 synthetic ARC tasks, about
the release's 586k event rows. Every row is logged by engine.harc.Editor, so the traces replay consistently
(benchmarks/harc_ingest_data.py's rows are random-valid and would mostly diverge, which is a different
workload). The synthetic H-ARC study generator (pipeline/simulate/harc.py, `simulate_harc_study`) is used when
present (--generator auto/simulate: its paper design scaled to --participants, current release only); this
file's own editor-driven generator is the fallback (--generator editor).

Stages, each run as the CLI runs it (its own `python -m pipeline.cli` process, --workers as given) and timed:
  generate   write data.csv and the ARC task JSON files (not part of the pipeline, reported for context)
  ingest     arcstudy ingest of the study folder (data.csv and the task files)
  replay     arcstudy replay-harc (all traces)
  analyses   arcstudy harc-analyses (every table, 1,000 bound simulations, figures), with its own stage split

Per stage: wall seconds, CPU seconds (the stage's process and the worker processes it reaped: the fairer
figure on a loaded machine), the largest single-process RSS, and the peak memory of the stage's whole process
tree (sum of proportional set sizes, sampled every 50 ms, workers included). The last line is the headline: end-to-end seconds against the
30 s goal, ingest's share, and the pipeline's peak RSS (the largest tree of any stage) against 1.5 GB.

    .venv/bin/python benchmarks/harc_speed.py                       # paper scale, 2 workers
    .venv/bin/python benchmarks/harc_speed.py --participants 200    # quick look
    .venv/bin/python benchmarks/harc_speed.py --workers 1           # serial, no Dask
    .venv/bin/python benchmarks/harc_speed.py --keep DIR --skip-ingest   # again on DIR's database: replay + analyses

No assertion on time: machines here are noisy. Prints what dominates.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.harc import Editor, format_grid  # noqa: E402
from pipeline.ingest.harc import DATA_CURRENT  # noqa: E402

N_TRAINING, N_EVALUATION, N_TEN_TASK = 783, 946, 241
DATA_COLUMNS = list(DATA_CURRENT)  # the current release's data.csv header, as the reader defines it


# ---------------------------------------------------------------------------------------------------------
# fallback generator: random ARC-like tasks and participants playing them through the editor
# ---------------------------------------------------------------------------------------------------------
def _grid(rng: random.Random, h: int, w: int, density: float = 0.35) -> list[list[int]]:
    return [[rng.randrange(1, 10) if rng.random() < density else 0 for _ in range(w)] for _ in range(h)]


def make_tasks(split: str, n: int, seed: int) -> list[dict]:
    """Tasks whose answer is the test input recoloured (colour c -> c+1) on a maybe resized canvas."""
    rng = random.Random(f"{seed}-{split}")
    tasks = []
    for i in range(n):
        task_id = hashlib.md5(f"{seed}-{split}-{i}".encode()).hexdigest()[:8]
        h, w = rng.randint(3, 7), rng.randint(3, 7)

        def pair(h=h, w=w):
            inp = _grid(rng, h, w)
            out = [[(v % 9) + 1 if v else 0 for v in row] for row in inp]
            return {"input": inp, "output": out}
        tasks.append({"task_id": task_id, "split": split, "difficulty": rng.gauss(0, 1.2),
                      "json": {"train": [pair(), pair(), pair()], "test": [pair()]}})
    return tasks


def _build(ed: Editor, target: list[list[int]], rng: random.Random, noise: float) -> None:
    """Drive the editor from its grid to `target`: copy the input or resize, then paint cell by cell."""
    h, w = len(target), len(target[0])
    if rng.random() < 0.6:
        ed.copy_from_input()
    if ed.dropdown[0] != h:
        ed.change_height(h)
    if ed.dropdown[1] != w:
        ed.change_width(w)
    if ed.tool != "edit":
        ed.change_tool("edit")
    cells = [(r, c) for r in range(h) for c in range(w)]
    for r, c in cells:
        if rng.random() < noise and ed.grid.shape == (h, w):  # a misclick, then undo
            wrong = (target[r][c] + 1) % 10
            if ed.symbol != wrong:
                ed.palette_click(wrong)
            if int(ed.grid[r, c]) != ed.symbol:
                ed.edit(r, c)
                ed.undo()
        if ed.grid.shape == (h, w) and int(ed.grid[r, c]) != target[r][c]:
            if ed.symbol != target[r][c]:
                ed.palette_click(target[r][c])
            ed.edit(r, c)


def play_participant(rng: random.Random, tasks: list[dict], skill: float, withdraw_after: int | None) -> list[dict]:
    """The participant's logged rows (engine ROW_KEYS plus task bookkeeping) over its task sequence."""
    ed = Editor(block_duplicate_submissions=True)
    rows = []
    for number, task in enumerate(tasks, 1):
        test = task["json"]["test"][0]
        answer = format_grid(test["output"])
        start = len(ed.log)
        ed.load_task(test["input"])
        p = 1 / (1 + pow(2.718281828, -(skill - task["difficulty"])))
        stop_at = None if withdraw_after is None or number <= withdraw_after else 0
        for _try in range(12):  # a blocked resubmission logs nothing: try again until 3 attempts are used
            if ed.solved or ed.attempt > 3:
                break
            if rng.random() < p and _try < 6:
                target = test["output"]
            else:  # a wrong hypothesis: a few cells off, or a copy of a train output / the input
                pick = rng.random()
                if pick < 0.15 and _try < 6:
                    target = task["json"]["train"][0]["output"]
                elif pick < 0.25 and _try < 6:
                    target = test["input"]
                else:
                    target = [list(r) for r in test["output"]]
                    for _ in range(1 + _try):
                        r, c = rng.randrange(len(target)), rng.randrange(len(target[0]))
                        target[r][c] = (target[r][c] + rng.randint(1, 9)) % 10
            _build(ed, target, rng, noise=0.05)
            if stop_at is not None:
                break
            ed.press_submit(answer)
            if ed.first_pending:
                ed.send_first_description(answer)
        if stop_at is not None:  # withdrew in the middle of this task: truncated trace, no terminal row
            rows.extend(_tag(ed.log[start:], task, number))
            break
        ed.end_task(final_description=True)
        rows.extend(_tag(ed.log[start:], task, number))
    return rows


def _tag(log: list[dict], task: dict, number: int) -> list[dict]:
    return [{**row, "__task": task, "__number": number} for row in log]


def write_study(root: Path, *, seed: int = 0, n_training: int = N_TRAINING, n_evaluation: int = N_EVALUATION,
                n_ten_task: int = N_TEN_TASK, n_tasks: int = 400) -> dict[str, int]:
    """data.csv plus one ARC task JSON per task under root; returns counts."""
    rng = random.Random(seed)
    pools = {s: make_tasks(s, n_tasks, seed) for s in ("training", "evaluation")}
    (root / "arc").mkdir(parents=True, exist_ok=True)
    for pool in pools.values():
        for t in pool:
            (root / "arc" / f"{t['task_id']}.json").write_text(json.dumps(t["json"]))
    n_rows = 0
    path = root / "data.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(DATA_COLUMNS)
        people = [("training", i) for i in range(n_training)] + [("evaluation", i) for i in range(n_evaluation)]
        for split, i in people:
            hashed = hashlib.md5(f"p-{seed}-{split}-{i}".encode()).hexdigest()
            ten = split == "training" and i < n_ten_task
            exp = ("expv0" if ten else "expv2") if split == "training" else "expv6_1"
            tasks = rng.sample(pools[split], 10 if ten else 5)
            withdraw_after = rng.randrange(len(tasks)) if rng.random() < 0.15 else None
            rows = play_participant(rng, tasks, rng.gauss(1.0, 1.0), withdraw_after)
            complete = withdraw_after is None
            clock = datetime(2023, 8, 1) + timedelta(hours=i)
            for row in rows:
                clock += timedelta(seconds=rng.choice((0, 1, 1, 2, 3, 4, 6, 9, 15)))
                writer.writerow(_csv_row(row, exp, split, hashed, clock, complete))
                n_rows += 1
    return {"rows": n_rows, "participants": n_training + n_evaluation, "tasks": 2 * n_tasks}


def _csv_row(row: dict, exp: str, split: str, hashed: str, clock: datetime, complete: bool) -> list[str]:
    task = row["__task"]
    name = f"{task['task_id']}.json"

    def text(v):
        if v is None:
            return ""
        if isinstance(v, bool):
            return str(v)
        if isinstance(v, list):
            return json.dumps(v)
        return str(v)

    values = {
        "exp_name": exp, "task_type": split, "hashed_id": hashed, "joint_id_task": f"{hashed}_{name}",
        "task_name": name, "task_number": str(row["__number"]), "is_tutorial": "False",
        "time": clock.strftime("%Y-%m-%dT%H:%M:%S.000000"), "done": "False",
        "first_written_solution": "recolour each cell", "last_written_solution": "",
        "withdraw": str(not complete), "complete": str(complete),
        **{k: text(row[k]) for k in ("attempt_number", "action_id", "solved", "action", "select_loc",
                                     "selected_data", "selected_symbol", "selected_tool", "copy_paste_data",
                                     "test_output_grid", "test_output_size_x", "test_output_size_y",
                                     "test_input_grid", "test_input_size_x", "test_input_size_y")},
        "action_x": "" if row["action_x"] is None else f"{float(row['action_x']):.1f}",
        "action_y": "" if row["action_y"] is None else f"{float(row['action_y']):.1f}",
    }
    return [values.get(c, "") for c in DATA_COLUMNS]


# ---------------------------------------------------------------------------------------------------------
# the benchmark
# ---------------------------------------------------------------------------------------------------------
def _generate(root: Path, args: argparse.Namespace) -> dict[str, int]:
    scale = args.participants / (N_TRAINING + N_EVALUATION)
    n_training = max(1, round(N_TRAINING * scale))
    n_evaluation = max(1, args.participants - n_training)
    n_ten = round(N_TEN_TASK * scale)
    generator = args.generator
    if generator == "auto":
        try:
            from pipeline.simulate.harc import simulate_harc_study  # noqa: F401
            generator = "simulate"
        except ImportError:
            generator = "editor"
    print(f"generator: {generator}")
    if generator == "simulate":
        from pipeline.simulate.harc import StudyDesign, simulate_harc_study

        n_tasks = max(1, round(400 * min(1.0, scale * 4))) if scale < 1 else 400
        design = StudyDesign("benchmark", n_training=n_training, n_training_ten=n_ten, n_evaluation=n_evaluation,
                             n_incomplete_training=round(90 * scale), n_incomplete_evaluation=round(242 * scale),
                             n_tasks_training=n_tasks, n_tasks_evaluation=n_tasks)
        summary = simulate_harc_study(root, scale=design, seed=args.seed, generation="current",
                                      workers=args.workers, arc_tgi=False)
        return {"rows": summary.n_rows, "participants": summary.n_participants, "tasks": summary.n_tasks}
    return write_study(root, seed=args.seed, n_training=n_training, n_evaluation=n_evaluation, n_ten_task=n_ten)


GOAL_S = 30.0
GOAL_RSS_MB = 1536


def run_stage(args: list[str]) -> dict[str, float]:
    """Run `python -m pipeline.cli <args>` and measure it: wall and CPU seconds, largest process RSS (MB, from
    wait4: the process and the descendants it reaped) and the peak memory of its process tree (sum of PSS, sampled)."""
    import psutil

    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "--plain", *args], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peak_tree = [0]
    done = threading.Event()

    def sample() -> None:
        try:
            root = psutil.Process(proc.pid)
        except psutil.NoSuchProcess:
            return
        while not done.is_set():
            total = 0
            try:
                for p in [root, *root.children(recursive=True)]:
                    try:  # PSS: a child forked to exec git would otherwise count its parent's pages twice
                        total += p.memory_full_info().pss
                    except (psutil.NoSuchProcess, psutil.AccessDenied):
                        pass
            except psutil.NoSuchProcess:
                break
            peak_tree[0] = max(peak_tree[0], total)
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = proc.stdout.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    if proc.returncode != 0:
        print(output)
        raise SystemExit(f"stage {args[0]} failed with exit code {proc.returncode}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024,
            "tree_mb": peak_tree[0] / 2**20}


def run_notes(db: Path, command: str) -> dict:
    """The manifest notes of the last run of `command` recorded in the database."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute("SELECT manifest_json FROM runs WHERE command LIKE ? ORDER BY started_at DESC LIMIT 1",
                          [f"%{command}%"]).fetchone()
    finally:
        con.close()
    return json.loads(row[0]).get("notes", {}) if row else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--participants", type=int, default=N_TRAINING + N_EVALUATION)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--simulations", type=int, default=1000)
    ap.add_argument("--generator", choices=("auto", "editor", "simulate"), default="auto",
                    help="auto: pipeline/simulate/harc.py when present, else this file's editor-driven generator")
    ap.add_argument("--keep", type=Path, default=None, help="keep the data and database in this folder (a folder "
                    "kept earlier is reused: the study is not generated again)")
    ap.add_argument("--skip-ingest", action="store_true", help="with --keep: reuse the database an earlier run "
                    "ingested there and time only replay and analyses (for iterating on those two stages)")
    args = ap.parse_args()
    if args.skip_ingest and not (args.keep and (args.keep / "harc.duckdb").exists()):
        ap.error("--skip-ingest needs --keep DIR holding the harc.duckdb of an earlier run")

    root = args.keep or Path(tempfile.mkdtemp(prefix="harc_speed_"))
    root.mkdir(parents=True, exist_ok=True)
    stages: dict[str, dict[str, float]] = {}
    try:
        if (root / "files").is_dir():  # --keep of an earlier run: same study, no regeneration
            print(f"reusing the study in {root / 'files'}")
        else:
            t0 = time.perf_counter()
            counts = _generate(root / "files", args)
            generated = time.perf_counter() - t0
            print(f"study: {counts}; generated in {generated:.1f} s (not part of the pipeline)")
        db = root / "harc.duckdb"
        if not args.skip_ingest:
            db.unlink(missing_ok=True)
        workers = ["--workers", str(args.workers)]
        print(f"load average before: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        if args.skip_ingest:
            print(f"ingest skipped: reusing {db}")
        else:
            stages["ingest"] = run_stage(["ingest", "--db", str(db), *workers, str(root / "files")])
        stages["replay"] = run_stage(["replay-harc", "--db", str(db), *workers])
        replay = run_notes(db, "replay-harc")
        print(f"replay: {replay.get('counts')} sub-stages {_fmt(replay.get('timings_s', {}))}")
        stages["analyses"] = run_stage(["harc-analyses", "--db", str(db), "--seed", str(args.seed),
                                        "--simulations", str(args.simulations), "--out", str(root / "out")])
        print(f"analyses: sub-stages {_fmt(run_notes(db, 'harc-analyses').get('timings_s', {}))}")
        print(f"load average after: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")

        total = sum(st["wall"] for st in stages.values())
        print("\nstage        wall s   share    CPU s   max process RSS MB   peak tree PSS MB")
        for name, st in stages.items():
            print(f"{name:10s} {st['wall']:8.1f} {100 * st['wall'] / total:6.1f} % {st['cpu']:8.1f} "
                  f"{st['rss_mb']:20.0f} {st['tree_mb']:18.0f}")
        print(f"{'total':10s} {total:8.1f}          {sum(st['cpu'] for st in stages.values()):8.1f}")
        after_ingest = stages["replay"]["wall"] + stages["analyses"]["wall"]
        print(f"dominant stage: {max(stages, key=lambda k: stages[k]['wall'])}; replay + analyses "
              f"{after_ingest:.1f} s")
        peak = max(st["tree_mb"] for st in stages.values())
        if "ingest" not in stages:
            print(f"H-ARC replay + analyses at {args.participants} participants, {args.workers} worker(s): "
                  f"{total:.1f} s wall, {sum(st['cpu'] for st in stages.values()):.1f} s CPU (ingest skipped: no "
                  f"end-to-end figure); peak RSS {peak:.0f} MB")
            return
        print(f"H-ARC end to end at {args.participants} participants, {args.workers} worker(s): {total:.1f} s "
              f"(goal {GOAL_S:.0f} s: {'met' if total <= GOAL_S else 'not met'}, {total / GOAL_S:.2f}x), ingest "
              f"{100 * stages['ingest']['wall'] / total:.0f} % of it; peak RSS {peak:.0f} MB "
              f"(goal {GOAL_RSS_MB} MB: {'met' if peak <= GOAL_RSS_MB else 'not met'})")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def _fmt(timings: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())


if __name__ == "__main__":
    main()
