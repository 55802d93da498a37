"""Scoring and replay speed: the set-based scorer against a per-play Python loop, and replay throughput.

1. Generates N synthetic plays (default 1,000,000; seeded) over a few hundred games with baselines of 3-10
   levels: levels completed 0..n (a few plays complete more levels than the baseline lists, a few games have
   no baseline or no metadata), per-level actions from 1 to ~5x the baseline.
2. Scores them with ``pipeline.scoring.vectorized.score_plays_frame`` (numpy, set-based) and with a
   straightforward loop of the pure functions (``pipeline.scoring.rhae.score_game`` per game over
   ``CardPlay`` objects) under the same policy, in the same run; checks that both give the same numbers
   (bit for bit: every run score, every game score, the total; exit 1 otherwise) and prints the times, the
   CPU times and the peak RSS of the set-based scorer.
3. Replays the conformance fixture recordings (shared/samples/arc-agi-3/fixtures on
   shared/conformance/environment_files) through ``pipeline.scoring.verify`` from the files (pixels compared)
   and from their ingested steps (frame hashes compared), and prints steps/s for each.

The last line is the headline: the set-based scorer's speed-up over the per-play loop in CPU time (per-core
speed; wall clock alongside), its peak RSS, and whether the numbers are identical. No assertion on time
(machines here are shared and noisy):

    python benchmarks/score_speed.py [--plays 1000000] [--policy arc-agi-3/2026-04] [--replay-rounds 3]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.scoring import CardPlay, get_policy
from pipeline.scoring.rhae import score_game
from pipeline.scoring.vectorized import score_plays_frame

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def synthetic(n_plays: int, n_games: int = 400, seed: int = 7) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 11, n_games)
    games = []
    for g in range(n_games):
        game_id = f"s{g:03d}-0123abcd"
        if g % 97 == 5:
            continue  # no metadata
        values = None if g % 89 == 3 else rng.integers(5, 200, lengths[g]).tolist()
        games.append({"game_id": game_id, "baseline_actions": values})
    game_of = rng.integers(0, n_games, n_plays)
    n_levels = lengths[game_of]
    k = np.minimum(rng.integers(0, n_levels + 2), n_levels + 1)  # sometimes one level more than the baseline
    offsets = np.concatenate([[0], np.cumsum(k)])
    per_level = rng.integers(1, 900, int(offsets[-1]))
    # cumulative counts inside each play: global cumsum minus the play's starting total
    cum = np.cumsum(per_level)
    start = np.concatenate([[0], cum])[offsets[:-1]]
    cumulative = cum - np.repeat(start, k)
    last = np.where(k > 0, np.concatenate([[0], cum])[offsets[1:]] - start, 0)
    actions = last + rng.integers(0, 60, n_plays)
    lists = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(cumulative, pa.int64()))
    plays = pl.DataFrame({
        "play_id": [f"p{i:07d}" for i in range(n_plays)],
        "game_id": [f"s{g:03d}-0123abcd" for g in game_of],
        "actions": actions.astype(np.int64),
        "cumulative": pl.from_arrow(lists),
    }).with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("game_id").alias("run_order"))
    return plays, pl.DataFrame(games, schema={"game_id": pl.String, "baseline_actions": pl.List(pl.Int64)})


def loop_scores(plays: pl.DataFrame, games: pl.DataFrame, policy) -> tuple[dict, dict, float, float, float, float]:
    """The per-play Python loop: CardPlay objects, then score_game per game (rhae). Returns run scores, game
    scores, total, the seconds spent building objects and scoring, and the CPU seconds of the scoring."""
    t0 = time.perf_counter()
    baselines = {g: v for g, v in games.iter_rows()}
    by_game: dict[str, list[tuple[str, CardPlay]]] = {}
    for pid, gid, actions, cumulative in plays.sort("game_id", "run_order").select(
            "play_id", "game_id", "actions", "cumulative").iter_rows():
        by_game.setdefault(gid, []).append((pid, CardPlay(
            guid=pid, actions=actions, resets=0, state="NOT_FINISHED", levels_completed=len(cumulative),
            actions_by_level=tuple((i + 1, c) for i, c in enumerate(cumulative)))))
    t1, c1 = time.perf_counter(), time.process_time()
    runs, game_scores = {}, {}
    for gid in sorted(by_game):
        pairs = by_game[gid]
        result = score_game(gid, [p for _, p in pairs], baselines.get(gid), policy, has_metadata=gid in baselines)
        game_scores[gid] = result.score
        for (pid, _), run in zip(pairs, result.plays, strict=True):
            runs[pid] = run.score
    total = sum(game_scores[g] for g in sorted(game_scores)) / len(game_scores)
    t2, c2 = time.perf_counter(), time.process_time()
    return runs, game_scores, total, t1 - t0, t2 - t1, c2 - c1


def replay_throughput(rounds: int) -> None:
    from pipeline.scoring.plays import read_recording_files, recordings_from_tables
    from pipeline.scoring.verify import verify_recording

    fixtures = sorted((SHARED / "samples" / "arc-agi-3" / "fixtures").glob("*.jsonl"))
    games = [SHARED / "conformance" / "environment_files"]
    if not fixtures:
        print("replay: ../shared/samples not found, skipped")
        return
    steps, plays, files, _ = read_recording_files(fixtures)
    recs = recordings_from_tables(steps, plays, files)
    n_steps = sum(r.steps.height for r in recs)
    n_frame_steps = sum(r.steps.height for r in recs if r.steps["n_frames"].is_not_null().any())
    verify_recording(recs[0], games, from_file=True)  # load the game modules once
    for from_file, label in ((True, "recording files (pixels compared)"), (False, "database steps (hashes)")):
        t0 = time.perf_counter()
        for _ in range(rounds):
            for rec in recs:
                checks = verify_recording(rec, games, from_file=from_file)
                assert {c.status for c in checks} == {"verified"}
        dt = time.perf_counter() - t0
        print(f"replay, {label}: {rounds * n_steps:,} steps ({rounds * n_frame_steps:,} with frames) in "
              f"{dt:.2f} s = {rounds * n_steps / dt:,.0f} steps/s")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plays", type=int, default=1_000_000)
    parser.add_argument("--policy", default="arc-agi-3/2026-04")
    parser.add_argument("--replay-rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    policy = get_policy(args.policy)

    t0 = time.perf_counter()
    plays, games = synthetic(args.plays, seed=args.seed)
    print(f"generated {plays.height:,} plays over {plays['game_id'].n_unique()} games "
          f"({plays['cumulative'].list.len().sum():,} completed levels) in {time.perf_counter() - t0:.1f} s; "
          f"peak RSS so far {peak_rss_mb():,.0f} MB")

    t0, c0 = time.perf_counter(), time.process_time()
    v = score_plays_frame(plays, games, policy)
    t_set, c_set = time.perf_counter() - t0, time.process_time() - c0
    rss_set = peak_rss_mb()
    print(f"set-based (numpy), {policy.policy_id}: {t_set:.2f} s = {plays.height / t_set:,.0f} plays/s "
          f"(CPU {c_set:.2f} s over all threads); peak RSS {rss_set:,.0f} MB")
    t0, c0 = time.perf_counter(), time.process_time()
    n_level_rows = v.levels.height
    t_lv, c_lv = time.perf_counter() - t0, time.process_time() - c0
    print(f"  + levels table ({n_level_rows:,} rows, built on first access): {t_lv:.2f} s (CPU {c_lv:.2f} s); "
          f"peak RSS {peak_rss_mb():,.0f} MB")

    c0 = time.process_time()
    runs, game_scores, total, t_build, t_loop, c_loop = loop_scores(plays, games, policy)
    print(f"per-play loop (rhae.score_game): {t_loop:.2f} s = {plays.height / t_loop:,.0f} plays/s (CPU {c_loop:.2f} s; "
          f"+ {t_build:.2f} s building CardPlay objects, not counted)")

    # Equality, not closeness: every run score, every game score and the total, bit for bit.
    mine = dict(v.runs.select("play_id", "score").iter_rows())
    n_run_diff = sum(mine[p] != s for p, s in runs.items())
    n_game_diff = sum(s != game_scores[g] for g, s in v.games.select("game_id", "score").iter_rows())
    equal = n_run_diff == 0 and n_game_diff == 0 and v.total == total and len(mine) == len(runs)
    print(f"agreement: {len(runs):,} run scores ({n_run_diff} differ), {len(game_scores)} game scores "
          f"({n_game_diff} differ), total {v.total!r} vs {total!r}: {'identical' if equal else 'DIFFERENT'}")

    replay_throughput(args.replay_rounds)
    # Headline last: per-core speed is CPU time (polars may use a second thread; the machine is shared, so
    # wall clock is printed too).
    print(f"headline: set-based scoring of {plays.height:,} plays is {c_loop / c_set:.1f}x the per-play loop in CPU "
          f"time ({t_loop / t_set:.1f}x wall clock; {c_loop / (c_set + c_lv):.1f}x CPU with the levels table), "
          f"peak RSS {rss_set:,.0f} MB, numbers {'identical' if equal else 'DIFFERENT'}")
    if not equal:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
