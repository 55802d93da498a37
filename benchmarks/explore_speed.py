"""State-graph exploration speed on arcstudy's games, compared with the engine's raw step rate.

    python benchmarks/explore_speed.py [--games DIR] [--max-nodes N] [--raw-steps N] [--json]

For every game (its largest level within --max-nodes, else the level closest to it), measured in the
same run on the same machine:

* raw steps/s: ``perform_action(..., raw=True)`` on one live game, uniformly random available
  actions, restarting the level after WIN/GAME_OVER (what the engine can do without branching);
* explorer: states/s and transitions/s of ``explore_level`` (BFS over reused states: queued nodes keep
  their live game and their targets step deep copies of it, restores carry the render caches over,
  games the explorer discards are released at once; see ``pipeline.explore.graph``);
* floor: transitions/s of the explorer's copies and steps alone (``floor_rate``: the same restores
  and steps over the same targets in the same order at a sample of the graph's nodes, without
  state keys, targets or bookkeeping) -- what the explorer would reach if all it did cost nothing;
* the cost of the explorer's primitives, timed separately per call: snapshot (pickle), restore
  (unpickle), copy (a deep copy of a held game: ``restore(..., keep=True)``), state key (sha256 of
  the frame), and a step right after a restore.

Rates are CPU time (``time.process_time``: the machine is shared). The ratio "explorer transitions/s /
raw steps/s" shows what branching costs: per transition the explorer pays a copy of the node (except
for a node's last target and after self-loops; an unpickle for nodes held as pickles), a step on the
copy, a state key and, per expanded node, its click partition. The floor ratio (copies and steps
only / raw steps/s) is printed just before it: the gap between the two is the explorer's own
overhead, the gap from the floor to 1 the copies and the slower steps on copies. The last line is
the explorer's ratio per game (the headline). Machines are noisy: nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from games import GAMES_DIR, list_games  # noqa: E402
from pipeline.explore import Session, resolve  # noqa: E402
from pipeline.explore.graph import NORMAL, StateGraph, action_targets, execution_order, explore_level  # noqa: E402


def raw_rate(session: Session, level: int, steps: int, seed: int = 0) -> float:
    rng = random.Random(seed)
    session.start(level)
    t_total = 0.0
    done = 0
    while done < steps:
        actions = [a for a in session.available_actions if a != 0]
        a = rng.choice(actions)
        data = {"x": rng.randrange(64), "y": rng.randrange(64)} if a == 6 else None
        action = session.action_input(a, data)
        t0 = time.process_time()
        session.game.perform_action(action, raw=True)
        t_total += time.process_time() - t0
        if session.game._state.name in ("WIN", "GAME_OVER") or session.game._score > 0:
            session.start(level)
        done += 1
    return steps / t_total


def _release(game) -> None:
    """What the explorer does with a game it is done with (``graph._release``)."""
    game.__dict__.clear()


def floor_rate(session: Session, level: int, graph: StateGraph, nodes: int = 600) -> tuple[float, int]:
    """Transitions/s of the copies and steps alone: for up to ``nodes`` of the graph's expanded
    nodes (evenly spread over the BFS order), reach the node (untimed), then time exactly the
    explorer's restores and steps over the node's targets, in the explorer's execution order -- a
    copy of the held game (``restore(keep=True)``, render caches moved on) before each target except
    after a self-loop (known from the graph) and the last one, which steps the held game itself --
    releasing every game once it is done with, as the explorer does; no state keys, targets or
    bookkeeping.
    Returns (rate, transitions timed)."""
    env = session.env
    session.start(level)
    start = session.snapshot()
    first_edge: dict[int, int] = {}
    for e, v in enumerate(graph.src):
        first_edge.setdefault(v, e)
    n_edges = Counter(graph.src)
    expanded = [v for v in range(graph.n_nodes) if graph.expanded[v] and graph.kind[v] == NORMAL]
    sample = expanded[:: max(1, len(expanded) // nodes)]
    # The explorer's execution order at the sampled nodes: its self-loop history, replayed in BFS order.
    history: dict[tuple, list] = {}
    orders: dict[int, list[int]] = {}
    loops_at: dict[int, frozenset] = {}
    wanted = set(sample)
    for v in expanded:
        edges = range(first_edge[v], first_edge[v] + n_edges[v])
        targets = [graph.edge_target(e) for e in edges]
        loops_at[v] = frozenset((t.action_id, t.x, t.y) for e, t in zip(edges, targets, strict=True)
                                if graph.dst[e] == v)
        if v in wanted:
            orders[v] = execution_order(targets, history, loops_at.get(graph.parent[v], frozenset()))
        for e, t in zip(edges, targets, strict=True):
            seen = history.setdefault((t.action_id, t.x, t.y), [None, 0, 0])
            seen[1] += graph.dst[e] == v
            seen[2] += 1
    cpu, done = 0.0, 0
    for v in sample:
        env.restore(start, reuse_render_caches=False)
        for t in graph.path_to(v):
            session.step(t.action_id, t.data)
        targets = action_targets(session, session.available_actions, graph.click_rule, graph.include_undo)
        e0 = first_edge[v]
        assert [(t.action_id, -1 if t.x is None else t.x) for t in targets] == [
            (graph.action[e], graph.click_x[e]) for e in range(e0, e0 + len(targets))], "targets differ from the graph's"
        loops = [graph.dst[e] == v for e in range(e0, e0 + len(targets))]
        inputs = [session.action_input(t.action_id, t.data) for t in targets]
        last = len(inputs) - 1
        t0 = time.process_time()
        held = env.detach() if last > 0 else None
        dirty = held is not None
        for j, i in enumerate(orders[v]):
            if dirty:
                outgoing = None if env.detached else env.game
                env.restore(held, reuse_render_caches=True, keep=j < last)
                if outgoing is not None and outgoing is not env.game:
                    _release(outgoing)
            try:
                env.step(inputs[i])
            except Exception:  # noqa: BLE001 - a crashing game, as the explorer records it
                dirty = True
                continue
            dirty = not loops[i]
        if held is not None and held.game[1]:
            _release(held.game[1].pop())
        _release(env.game)
        cpu += time.process_time() - t0
        done += len(inputs)
    session.start(level)  # the session's game was released above
    return done / cpu, done


def primitives(session: Session, level: int, repeat: int = 200) -> dict[str, float]:
    session.start(level)
    snap = session.snapshot()
    out = {}
    t0 = time.process_time()
    for _ in range(repeat):
        session.snapshot()
    out["snapshot_ms"] = (time.process_time() - t0) / repeat * 1e3
    t0 = time.process_time()
    for _ in range(repeat):
        session.restore(snap)
    out["restore_ms"] = (time.process_time() - t0) / repeat * 1e3
    session.restore(snap)
    held = session.detach()
    t0 = time.process_time()
    for _ in range(repeat):
        session.restore(held, keep=True)
    out["copy_ms"] = (time.process_time() - t0) / repeat * 1e3
    session.restore(held)
    t0 = time.process_time()
    for _ in range(repeat):
        session.state_key()
    out["state_key_ms"] = (time.process_time() - t0) / repeat * 1e3
    target = action_targets(session, session.available_actions, "objects", False)[0]
    cold = []
    for _ in range(repeat // 4):
        session.restore(snap)
        t0 = time.process_time()
        session.step(target.action_id, target.data)
        cold.append(time.process_time() - t0)
    out["cold_step_ms"] = statistics.median(cold) * 1e3
    warm = []
    session.restore(snap)
    for _ in range(repeat // 4):
        t0 = time.process_time()
        session.step(target.action_id, target.data)
        warm.append(time.process_time() - t0)
        if session.won() or session.lost():
            session.restore(snap)
    out["warm_step_ms"] = statistics.median(warm) * 1e3
    out["snapshot_bytes"] = len(snap.game[1]) if snap.game[0] == "pickle" else -1
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=Path, default=GAMES_DIR)
    parser.add_argument("--max-nodes", type=int, default=6000)
    parser.add_argument("--raw-steps", type=int, default=20000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for entry in list_games(args.games):
        facts = entry.level_facts
        fitting = [r for r in facts if r["nodes"] <= args.max_nodes]
        level_row = max(fitting, key=lambda r: r["nodes"]) if fitting else min(facts, key=lambda r: r["nodes"])
        level = level_row["level"] - 1
        session = Session(resolve(entry.game_id, args.games))
        raw = raw_rate(session, level, args.raw_steps)
        cpu0 = time.process_time()
        graph = explore_level(session, level, max_nodes=args.max_nodes)
        cpu = time.process_time() - cpu0
        prims = primitives(session, level)
        floor, floor_transitions = floor_rate(session, level, graph)
        rows.append({
            "game_id": entry.game_id, "level": level + 1, "states": graph.n_nodes, "transitions": graph.n_steps,
            "complete": graph.complete, "seconds": round(graph.elapsed_s, 3), "cpu_seconds": round(cpu, 3),
            "states_per_s": round(graph.n_nodes / cpu, 1),
            "transitions_per_s": round(graph.n_steps / cpu, 1),
            "restores": graph.n_restores, "snapshots": graph.n_snapshots,
            "raw_steps_per_s": round(raw, 1),
            "explorer_over_raw": round(graph.n_steps / cpu / raw, 3),
            "floor_transitions_per_s": round(floor, 1), "floor_transitions": floor_transitions,
            "floor_over_raw": round(floor / raw, 3),
            "explorer_over_floor": round(graph.n_steps / cpu / floor, 3),
            **{k: round(v, 4) for k, v in prims.items()},
        })
    per_game = " ".join(f"{r['game_id'].split('-')[0]}={r['explorer_over_raw']:.2f}" for r in rows)
    worst = min(r["explorer_over_raw"] for r in rows)
    floors = " ".join(f"{r['game_id'].split('-')[0]}={r['floor_over_raw']:.2f}" for r in rows)
    floor_line = (f"floor: copy + step only (the explorer's restores and targets, no keys or bookkeeping) / raw steps/s: "
                  f"{floors}; min {min(r['floor_over_raw'] for r in rows):.2f}")
    headline = f"explorer transitions/s / raw steps/s (CPU time, same run): {per_game}; min {worst:.2f}"
    if args.json:
        print(json.dumps(rows, indent=1))
        print(floor_line)
        print(headline)
        return 0
    head = (f"{'game':15s} {'lvl':>3s} {'states':>7s} {'states/s':>9s} {'trans/s':>9s} {'raw steps/s':>11s} "
            f"{'ratio':>6s} {'floor':>6s} {'snap ms':>8s} {'restore':>8s} {'copy ms':>8s} {'key ms':>7s} {'cold step':>9s} {'warm step':>9s}")
    print(head)
    for r in rows:
        print(f"{r['game_id']:15s} {r['level']:3d} {r['states']:7d} {r['states_per_s']:9.0f} "
              f"{r['transitions_per_s']:9.0f} {r['raw_steps_per_s']:11.0f} {r['explorer_over_raw']:6.2f} {r['floor_over_raw']:6.2f} "
              f"{r['snapshot_ms']:8.3f} {r['restore_ms']:8.3f} {r['copy_ms']:8.3f} {r['state_key_ms']:7.3f} {r['cold_step_ms']:9.3f} "
              f"{r['warm_step_ms']:9.3f}")
    print(floor_line)
    print(headline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
