"""How long `arcstudy build` takes on an ARC-AGI-3-scale study, and what dominates.

The paper's study: 486 participants, 414 candidate environments, 2,893 attempts. This script generates a
synthetic study of that size deterministically (seeded; nothing is committed or downloaded): by default 500
participants playing 6 games each out of 400 (3,000 human-dataset recordings with trailing cards, a session
manifest, about 2 % rapid cyclers), with per-level costs drawn around per-level difficulties, level RESETs,
undo, give-ups and timestamps, loads it into a fresh DuckDB file, and times

    read core      reading the five core input tables into polars (the floor: the baseline of the ratios)
    build          a full build, per step (plays_levels, attempts, ...), validation+write, figures
    validate       pandera validation of every out table alone (part of validation+write)
    no-op          a second build with nothing changed (fingerprints only)
    config change  a build after changing one solvability key (one step reruns)

    .venv/bin/python benchmarks/build_speed.py                  # the full size (about a minute)
    .venv/bin/python benchmarks/build_speed.py --participants 50 --games 40   # quick
"""

from __future__ import annotations

import argparse
import random
import resource
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from pipeline.core.config import load_config, resolve
from pipeline.core.workspace import Workspace
from pipeline.transforms.build import OUT_TABLES, build
from pipeline.transforms.plays_levels import step_effects
from pipeline.transforms.synthetic import EPOCH, SyntheticStudy
from schemas.validate import validate_frame

CORE_INPUTS = ("core_arc3__steps", "core_arc3__plays", "core_arc3__card_plays", "core_arc3__environments",
               "core_study__session_plays")


def generate(seed: int, participants: int, games: int, per_participant: int, chunk: int = 50):
    """Yields SyntheticStudy chunks of `chunk` participants (environments in the first), so the generator
    never holds the whole study in Python objects."""
    rng = random.Random(seed)
    catalogue = []
    for i in range(games):
        n_levels = rng.randint(6, 9)
        costs = [int(rng.uniform(8, 25) * (1 + 0.35 * lvl)) for lvl in range(n_levels)]
        catalogue.append((f"g{i:03d}-{seed:04x}{i:04x}", n_levels, costs))
    st = SyntheticStudy(namespace=f"{0x8000:04x}")
    for g, _, costs in catalogue:
        st.add_environment(g, costs)
    for p in range(participants):
        if p and p % chunk == 0:
            yield st
            st = SyntheticStudy(namespace=f"{0x8000 + p // chunk:04x}")
        pid, sid = f"p{p:04d}", f"s{p:04d}"
        cycler = p % 50 == 0  # 2 %: rapid cycling through many environments
        st.add_session(sid, pid, EPOCH + timedelta(days=p // 20))
        chosen = rng.sample(catalogue, min(games, 12 if cycler else per_participant))
        skill = rng.lognormvariate(0, 0.3)
        start = EPOCH + timedelta(days=p // 20, hours=p % 20)
        for k, (g, n_levels, costs) in enumerate(chosen, start=1):
            if cycler:
                script, step_s = "R" + "a" * rng.randint(3, 15), rng.uniform(2, 5)
            else:
                script, step_s = _play(rng, n_levels, costs, skill), rng.uniform(1.5, 4.0)
            st.add_recording(g, script, n_levels=n_levels, session_id=sid, order_in_session=k, start=start,
                             step_s=step_s)
            start += timedelta(seconds=len(script) * step_s + 60)
    yield st


def _play(rng: random.Random, n_levels: int, costs: list[int], skill: float) -> str:
    """One first run: levels at a cost drawn around their difficulty, sometimes a level RESET or an undo,
    giving up when the action budget runs out."""
    budget = int(sum(costs) * skill * rng.uniform(0.4, 1.6))
    parts, used = ["R"], 0
    for lvl in range(n_levels):
        cost = max(2, int(costs[lvl] * skill * rng.lognormvariate(0, 0.5)))
        if used + cost > budget:
            parts.append("a" * max(0, budget - used))
            break
        body = "a" * (cost - 1)
        if rng.random() < 0.15 and cost > 4:  # a level RESET mid-level (charged to the level)
            cut = rng.randint(1, cost - 3)
            body = "a" * cut + "r" + "a" * (cost - cut - 2)
        if rng.random() < 0.2:  # some undo (counted by the toolkit, not by human cards)
            body = body[:-1] + "u"
        parts.append(body + "L")
        used += cost
    return "".join(parts)


def _timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--participants", type=int, default=500)
    ap.add_argument("--games", type=int, default=400)
    ap.add_argument("--per-participant", type=int, default=6)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--no-figures", action="store_true")
    args = ap.parse_args()

    def warm_imports() -> None:  # import costs are paid once per process: measured apart from the build
        import altair  # noqa: F401
        import pandera.polars  # noqa: F401
        import statsmodels.stats.proportion  # noqa: F401
        import vl_convert  # noqa: F401

    _, t_imports = _timed(warm_imports)
    with tempfile.TemporaryDirectory(prefix="arcstudy-bench-") as tmp:
        db, out_dir = Path(tmp) / "bench.duckdb", Path(tmp) / "bench.build"
        with Workspace(db) as ws:
            t_gen = t_load = 0.0
            chunks = generate(args.seed, args.participants, args.games, args.per_participant)
            while True:
                t0 = time.perf_counter()
                chunk = next(chunks, None)
                t1 = time.perf_counter()
                t_gen += t1 - t0
                if chunk is None:
                    break
                chunk.load(ws, validate=False)
                t_load += time.perf_counter() - t1
            sizes = {t: ws.row_count(t) for t in CORE_INPUTS}
            n_actions = ws.read("SELECT count(*) AS n FROM core_arc3__steps WHERE action_id > 0 "
                                "AND NOT is_post_terminal")["n"][0]
            t0 = time.perf_counter()
            core = {t: ws.read(f"SELECT * FROM {t}") for t in CORE_INPUTS}
            t_read = time.perf_counter() - t0
            t0 = time.perf_counter()
            step_effects(core["core_arc3__steps"], core["core_arc3__plays"])
            t_classify = time.perf_counter() - t0
            del core
            report, t_build = _timed(lambda: build(ws, load_config(), out_dir=out_dir, figures=not args.no_figures))
            outs = {t: ws.read(f"SELECT * FROM {t}") for t in OUT_TABLES}
            _, t_validate = _timed(lambda: [validate_frame(t, df) for t, df in outs.items()])
            noop, t_noop = _timed(lambda: build(ws, load_config(), out_dir=out_dir, figures=not args.no_figures))
            changed, t_change = _timed(lambda: build(ws, resolve({"solvability": {"min_full_solvers": 3}}),
                                                     out_dir=out_dir, figures=not args.no_figures))
            attempts = ws.read("SELECT count(*) AS n, sum(is_analysis_attempt::INT) AS a, "
                               "sum(is_low_effort_excluded::INT) AS x FROM out_arc3__attempts").row(0)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"study: {args.participants} participants, {args.games} games, {sizes['core_arc3__plays']:,} recordings, "
          f"{sizes['core_arc3__steps']:,} steps ({n_actions:,} actions), {attempts[1]:,} analysis attempts, "
          f"{attempts[2]:,} recordings excluded as low effort")
    print(f"generate {t_gen:6.2f} s   load into DuckDB {t_load:6.2f} s   import altair/pandera/statsmodels/vl-convert "
          f"{t_imports:5.2f} s   (setup, not part of the build)")
    print(f"\n{'what':<26}{'seconds':>9}{'x read core':>13}")
    print(f"{'read core (baseline)':<26}{t_read:9.2f}{1.0:13.1f}")
    print(f"{'full build':<26}{t_build:9.2f}{t_build / t_read:13.1f}")
    for name, secs in sorted(report.timings_s.items(), key=lambda kv: -kv[1]):
        print(f"{'  ' + name:<26}{secs:9.2f}{secs / t_read:13.1f}")
    print(f"{'  (step classification)':<26}{t_classify:9.2f}{t_classify / t_read:13.1f}   "
          "part of plays_levels: the Python loop of pipeline.recordings.counting.classify_steps")
    print(f"{'  (pandera validation)':<26}{t_validate:9.2f}{t_validate / t_read:13.1f}   part of validate_and_write")
    print(f"{'no-op rebuild':<26}{t_noop:9.2f}{t_noop / t_read:13.1f}   rebuilt: {noop.rebuilt or 'nothing'}")
    print(f"{'one config key changed':<26}{t_change:9.2f}{t_change / t_read:13.1f}   rebuilt: {changed.rebuilt}")
    dominant = max((kv for kv in report.timings_s.items() if kv[0] != "plan"), key=lambda kv: kv[1])
    print(f"\ndominant: {dominant[0]} ({dominant[1]:.2f} s, {100 * dominant[1] / t_build:.0f} % of the build); "
          f"peak RSS {rss_mb:,.0f} MB")


if __name__ == "__main__":
    main()
