"""The explorer against tiny hand-built games whose graphs and probabilities are known in closed form.

Fixtures live in tests/fixtures/explore/<id>/<version>/ (written with the public game API):
cr01 a corridor with a pit and a goal (gambler's ruin), lv02 a lock with three lives,
ck03 a click-only pick between a small winning tile and a big losing bar, dm04 a one-way grid.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from pipeline.explore import Session, explore, resolve
from pipeline.explore.analysis import random_win_within, transition_matrix
from pipeline.explore.graph import LOSE, WIN, click_targets

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explore"


def run(game: str, level: int = 1, **kw):
    return explore(game, level, environments_dir=FIXTURES, **kw)


def test_corridor_graph_optimum_and_gamblers_ruin():
    r = run("cr01")
    m, g = r.metrics, r.graph
    # positions 1..5 plus the goal (win) and the pit (lose)
    assert m.nodes == 7 and m.complete
    assert sorted(g.kind) == sorted(["normal"] * 5 + [WIN, LOSE])
    assert m.optimal_actions == 4
    assert [step["action"] for step in m.optimal_path] == [4, 4, 4, 4]
    # 5 positions x 3 actions; ACTION1 is always a self-loop
    assert m.edges == 15 and m.self_loops == 5
    assert m.has_cycles and m.cyclic_components == 1 and m.nodes_in_cycles == 5
    assert m.max_depth == 4  # the goal is 4 steps away, the pit only 2
    assert m.random_win_exact
    assert m.random_win_lower == pytest.approx(2 / 6, rel=1e-12)
    assert m.random_win_upper == m.random_win_lower


def test_corridor_second_level_starts_where_that_level_starts():
    m = run("cr01", 2).metrics
    assert m.optimal_actions == 5
    assert m.random_win_upper == pytest.approx(1 / 6, rel=1e-12)


def test_win_within_budget_matches_counting_paths():
    g = run("cr01").graph
    P = transition_matrix(g)
    # exactly four rights in a row, each 1/3
    assert random_win_within(g, 4, P)[0] == pytest.approx(float(Fraction(1, 81)), rel=1e-12)
    # ... or one no-op among the first four of five actions
    assert random_win_within(g, 5, P)[0] == pytest.approx(float(Fraction(1, 81) + Fraction(4, 243)), rel=1e-12)
    assert random_win_within(g, 3, P) == (0.0, 0.0)
    # the finite-horizon probability increases towards the absorbing one
    assert random_win_within(g, 5000, P)[0] == pytest.approx(1 / 3, rel=1e-9)


def test_three_lives_lock():
    m = run("lv02").metrics
    # (notch, lives) for notch 0..1 and lives 3..1, three winning frames (one per lives left), one loss
    assert m.nodes == 10 and m.win_nodes == 3 and m.lose_nodes == 1
    assert m.optimal_actions == 2
    assert m.random_win_upper == pytest.approx(37 / 64, rel=1e-12)
    assert not m.has_cycles  # every action either advances or spends a life


def test_click_classes_are_weighted_by_pixels():
    r = run("ck03")
    m = r.metrics
    assert m.nodes == 3 and m.optimal_actions == 1
    assert m.optimal_path[0]["action"] == 6
    assert m.random_win_upper == pytest.approx(0.25, rel=1e-12)
    assert random_win_within(r.graph, 1)[0] == pytest.approx(1 / 64, rel=1e-12)
    # the winning click really hits the green tile (grid cell 1,1 -> display 8..15)
    x, y = m.optimal_path[0]["x"], m.optimal_path[0]["y"]
    assert 8 <= x < 16 and 8 <= y < 16


@pytest.mark.parametrize("rule, n_targets", [("objects", 3), ("cells", 64), ("engine", 2)])
def test_click_rules(rule, n_targets):
    session = Session(resolve("ck03", FIXTURES))
    session.start(0)
    targets = click_targets(session, rule, 1.0)
    assert len(targets) == n_targets
    assert sum(t.prob for t in targets) == pytest.approx(1.0)
    r = run("ck03", click_rule=rule)
    expected = 0.5 if rule == "engine" else 0.25  # the reference list is one click per sprite, uniform
    assert r.metrics.random_win_upper == pytest.approx(expected, rel=1e-12)


def test_pixels_rule_is_exhaustive():
    session = Session(resolve("ck03", FIXTURES))
    session.start(0)
    targets = click_targets(session, "pixels", 1.0)
    assert len(targets) == 4096 and len({(t.x, t.y) for t in targets}) == 4096


def test_one_way_grid_merges():
    m = run("dm04").metrics
    assert m.nodes == 9 and m.complete and m.optimal_actions == 4
    assert not m.has_cycles and m.self_loops == 4
    assert m.merge_density == pytest.approx(1 / 3)
    assert m.random_win_upper == pytest.approx(1.0)
    assert m.dead_end_nodes == 0


def test_budget_gives_bounds_that_bracket_the_exact_value():
    exact = run("cr01").metrics.random_win_upper
    partial = run("cr01", max_nodes=3).metrics
    assert not partial.complete and partial.frontier_nodes > 0
    assert partial.random_win_lower <= exact <= partial.random_win_upper
    assert not partial.random_win_exact


def test_engine_identity_splits_what_the_frame_merges():
    frame = run("dm04").metrics
    engine = run("dm04", identity="engine", max_nodes=300).metrics
    # _action_count is part of the engine's hash: a blocked move is a new state there, so the graph
    # never closes; BFS still finds the same optimum
    assert engine.self_loops == 0 and not engine.complete and engine.nodes >= 300
    assert engine.optimal_actions == frame.optimal_actions == 4


def test_exceptions_in_a_game_are_recorded(tmp_path):
    src = (next((FIXTURES / "cr01").glob("*/cr01.py"))).read_text()
    broken = src.replace("self.walker.move(dx, 0)", "self.walker.move(dx, 0)\n            if self.walker.x == 4:\n"
                                                  "                raise RuntimeError('boom')")
    d = tmp_path / "cr01" / "broken"
    d.mkdir(parents=True)
    (d / "cr01.py").write_text(broken)
    (d / "metadata.json").write_text('{"game_id": "cr01-broken"}')
    m = explore("cr01-broken", 1, environments_dir=tmp_path).metrics
    assert m.error_nodes == 1 and "boom" in m.errors[0]["error"]
    assert [s["action"] for s in m.errors[0]["path"]] == [4]
    assert m.optimal_actions is None


def test_undo_is_left_out_by_default_and_marked_when_followed():
    from games import GAMES_DIR

    plain = explore("pv63", 1, environments_dir=GAMES_DIR).graph
    assert 7 not in set(plain.action)
    with_undo = explore("pv63", 1, environments_dir=GAMES_DIR, include_undo=True)
    g = with_undo.graph
    undo = [e for e in range(g.n_edges) if g.action[e] == 7]
    assert undo and all(g.is_undo[e] for e in undo)
    # undo spends energy, so it leads to new states, but never to a shorter win
    assert with_undo.metrics.optimal_actions == explore("pv63", 1, environments_dir=GAMES_DIR).metrics.optimal_actions


def test_exploring_leaves_the_process_alone(monkeypatch):
    """Level starts are per environment: the explorer neither writes ONLY_RESET_LEVELS nor registers
    game modules, and what the variable says does not change the graph (every level starts afresh)."""
    import os
    import sys

    monkeypatch.delenv("ONLY_RESET_LEVELS", raising=False)
    modules = set(sys.modules)
    unset = run("lv02", max_nodes=50).graph
    assert "ONLY_RESET_LEVELS" not in os.environ
    assert not any(name.startswith("arc_agi_3") for name in set(sys.modules) - modules)
    monkeypatch.setenv("ONLY_RESET_LEVELS", "true")
    levels_only = run("lv02", max_nodes=50).graph
    assert os.environ["ONLY_RESET_LEVELS"] == "true"
    assert (levels_only.keys, levels_only.src, levels_only.dst) == (unset.keys, unset.src, unset.dst)


def test_every_exploration_stops_at_the_edge_bound_unless_given_another(monkeypatch):
    """No caller passed an edge bound: `explore bg41 --clicks pixels` kept 6M edges after 60 s (about 100 bytes
    each) and its sandbox child passed 1.2 GB. The bound (DEFAULT_MAX_EDGES) now applies to every exploration,
    checked between states (a state's own clicks, at most 4,096, may pass it)."""
    from pipeline.explore import graph

    whole = run("dm04")
    assert whole.graph.stop_reason == "complete" and len(whole.graph.src) == 16
    monkeypatch.setattr(graph, "DEFAULT_MAX_EDGES", 5)
    bounded = run("dm04")
    assert bounded.graph.stop_reason == "edge budget (5)" and 5 <= len(bounded.graph.src) < 16
    assert len(bounded.graph.keys) < len(whole.graph.keys)
