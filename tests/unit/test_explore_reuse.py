"""The explorer's reused states (live games handed over uncopied, render caches moved between
restores, self-loops without a restore) give the graph a naive explorer gives that restores a fresh
copy of the node before every single transition.

Metrics, random-win probabilities, the within-N-actions DP and the exports are functions of the
graph's fields, so equal fields mean equal results.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

import pytest

from games import GAMES_DIR, list_games
from pipeline.explore import Session, resolve
from pipeline.explore import graph as graph_module
from pipeline.explore.graph import ERROR, LOSE, NORMAL, WIN, action_targets, explore_level

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explore"
SMALL_LEVEL_NODES = 320  # levels of the shipped games small enough to explore twice here

FIELDS = ("keys", "depth", "kind", "expanded", "parent", "parent_edge", "src", "dst", "action", "click_x",
          "click_y", "prob", "is_undo", "complete", "stop_reason", "errors", "win_levels")


def naive_graph(session: Session, level: int, *, max_nodes: int, click_rule: str = "objects",
                include_undo: bool = False) -> dict:
    """Breadth-first exploration the plain way: every transition starts from a freshly unpickled
    snapshot of its node (no live game kept, no render caches carried over)."""
    env = session.env
    first = session.start(level)
    g: dict = {name: [] for name in FIELDS[:13]}
    index: dict[bytes, int] = {}
    snaps, actions_at = {}, {}
    errors: list[dict] = []

    def add_node(key: bytes, depth: int, kind: str, parent: int, parent_edge: int) -> int:
        index[key] = len(g["keys"])
        for name, value in (("keys", key), ("depth", depth), ("kind", kind), ("expanded", False),
                            ("parent", parent), ("parent_edge", parent_edge)):
            g[name].append(value)
        return len(g["keys"]) - 1

    def add_edge(v: int, u: int, t) -> None:
        for name, value in (("src", v), ("dst", u), ("action", t.action_id), ("click_x", -1 if t.x is None else t.x),
                            ("click_y", -1 if t.y is None else t.y), ("prob", float(t.prob)),
                            ("is_undo", t.action_id == 7)):
            g[name].append(value)

    def kind_of(result) -> str:
        return WIN if session.won(result) else LOSE if session.lost(result) else NORMAL

    start_kind = kind_of(first)
    add_node(session.state_key(), 0, start_kind, -1, -1)
    queue: deque[int] = deque()
    if start_kind == NORMAL:
        snaps[0], actions_at[0] = env.snapshot(global_rng=False), list(first.available_actions)
        queue.append(0)
    stop_reason = "complete"
    while queue:
        if len(g["keys"]) >= max_nodes:
            stop_reason = f"node budget ({max_nodes:,})"
            break
        v = queue.popleft()
        snap = snaps.pop(v)
        env.restore(snap)
        for t in action_targets(session, actions_at.pop(v), click_rule, include_undo):
            env.restore(snap)
            try:
                result = session.step(t.action_id, t.data)
            except Exception as err:  # noqa: BLE001 - as the explorer records it
                errors.append({"error": f"{type(err).__name__}: {err}"})
                u = add_node(b"error:%d" % len(errors), g["depth"][v] + 1, ERROR, v, len(g["src"]))
                g["expanded"][u] = True
                add_edge(v, u, t)
                continue
            if not result.frames:
                add_edge(v, v, t)
                continue
            key = session.state_key()
            u = index.get(key)
            if u is None:
                kind = kind_of(result)
                u = add_node(key, g["depth"][v] + 1, kind, v, len(g["src"]))
                if kind == NORMAL:
                    snaps[u], actions_at[u] = env.snapshot(global_rng=False), list(result.available_actions)
                    queue.append(u)
            add_edge(v, u, t)
        g["expanded"][v] = True
    g.update(complete=not queue, stop_reason=stop_reason, errors=errors, win_levels=session.n_levels)
    return g


def explored(session: Session, level: int, **kw) -> dict:
    graph = explore_level(session, level, **kw)
    fields = {name: getattr(graph, name) for name in FIELDS}
    fields["errors"] = [{"error": e["error"]} for e in graph.errors]
    return fields


def assert_same_graph(a: dict, b: dict) -> None:
    assert len(a["keys"]) == len(b["keys"]) and len(a["src"]) == len(b["src"])
    for name in FIELDS:
        assert a[name] == b[name], name


def small_levels() -> list[tuple[str, Path, int]]:
    cases = [(entry.game_id, GAMES_DIR, row["level"] - 1) for entry in list_games(GAMES_DIR)
             for row in entry.level_facts if row["nodes"] <= SMALL_LEVEL_NODES]
    cases += [(game, FIXTURES, level) for game in ("cr01", "lv02", "ck03", "dm04")
              for level in range(Session(resolve(game, FIXTURES)).n_levels)]
    return cases


@pytest.mark.parametrize(("game_id", "root", "level"), small_levels(),
                         ids=lambda value: value if isinstance(value, (str, int)) else "")
def test_reused_states_give_the_naive_graph(game_id: str, root: Path, level: int) -> None:
    info = resolve(game_id, root)
    expected = naive_graph(Session(info), level, max_nodes=100_000)
    assert expected["complete"] and len(expected["keys"]) > 1
    assert_same_graph(explored(Session(info), level, max_nodes=100_000), expected)


def test_the_live_games_held_are_as_many_as_fit_in_the_memory_budget(monkeypatch) -> None:
    """Without a LIVE_GAMES count, queued states are held live while LIVE_BYTES allows (a live game taken as
    LIVE_PER_PICKLED_BYTE times its pickle) and pickled past that; the graph is the same either way."""
    info = resolve("pv63", GAMES_DIR)
    probe = Session(info)
    probe.start(2)
    pickled = len(probe.snapshot().game[1])
    expected = naive_graph(Session(info), 2, max_nodes=150)
    monkeypatch.setattr(graph_module, "LIVE_BYTES", graph_module.LIVE_PER_PICKLED_BYTE * pickled * 20)
    session = Session(info)
    session.start(2)  # as explore_level asks, at the level's start
    assert graph_module.live_games(session) == 20
    tight = explore_level(session, 2, max_nodes=150)
    assert tight.n_snapshots > 0  # past 20 queued states, the rest were pickled
    monkeypatch.setattr(graph_module, "LIVE_BYTES", 128 << 20)
    roomy = explore_level(Session(info), 2, max_nodes=150)
    assert roomy.n_snapshots == 0
    for graph in (tight, roomy):
        assert graph.keys == expected["keys"] and graph.src == expected["src"] and graph.dst == expected["dst"]


@pytest.mark.parametrize("live_games", [0, 3, graph_module.LIVE_GAMES])
def test_same_graph_with_few_or_no_live_games_and_a_node_budget(monkeypatch, live_games: int) -> None:
    """Queued states partly live, partly pickled (or all pickled), and a stop at the node budget
    with live games still queued; the session can step again afterwards."""
    monkeypatch.setattr(graph_module, "LIVE_GAMES", live_games)
    info = resolve("pv63", GAMES_DIR)
    for max_nodes in (2, 150):
        expected = naive_graph(Session(info), 2, max_nodes=max_nodes)
        session = Session(info)
        got = explored(session, 2, max_nodes=max_nodes)
        assert not got["complete"] and got["stop_reason"] == expected["stop_reason"]
        assert_same_graph(got, expected)
        assert session.step(session.available_actions[0]).frames  # not left detached


@pytest.mark.parametrize(("game", "root", "level", "rule", "max_nodes"),
                         [("ck03", FIXTURES, 0, "cells", 100_000), ("ck03", FIXTURES, 0, "pixels", 100_000),
                          ("dm04", FIXTURES, 0, "objects", 100_000), ("pv63", GAMES_DIR, 0, "objects", 100_000),
                          ("pv63", GAMES_DIR, 2, "objects", 250)])
def test_same_graph_for_other_click_rules_and_undo(game: str, root: Path, level: int, rule: str,
                                                   max_nodes: int) -> None:
    """pv63 offers undo (ACTION7): its edges come from each node's own game, live or pickled."""
    info = resolve(game, root)
    expected = naive_graph(Session(info), level, max_nodes=max_nodes, click_rule=rule, include_undo=True)
    got = explored(Session(info), level, max_nodes=max_nodes, click_rule=rule, include_undo=True)
    assert_same_graph(got, expected)
    assert any(got["is_undo"]) == (game == "pv63")


def broken_corridor(root: Path) -> Path:
    """cr01 with a game that raises on reaching x == 4 (an error node per such step)."""
    src = (next((FIXTURES / "cr01").glob("*/cr01.py"))).read_text()
    broken = src.replace("self.walker.move(dx, 0)", "self.walker.move(dx, 0)\n            if self.walker.x == 4:\n"
                                                  "                raise RuntimeError('boom')")
    folder = root / "cr01" / "broken"
    folder.mkdir(parents=True)
    (folder / "cr01.py").write_text(broken)
    (folder / "metadata.json").write_text('{"game_id": "cr01-broken"}')
    return root


@pytest.mark.parametrize("order", ["reversed", "shuffled"])
@pytest.mark.parametrize(("game", "root", "level", "max_nodes"),
                         [("bg41", GAMES_DIR, 3, 100_000), ("rl36", GAMES_DIR, 2, 100_000), ("pv63", GAMES_DIR, 2, 150),
                          ("cr01-broken", None, 0, 100_000)])
def test_any_execution_order_gives_the_graph_in_target_order(monkeypatch, tmp_path: Path, order: str, game: str,
                                                             root: Path | None, level: int, max_nodes: int) -> None:
    """Targets are stepped in an order of their own (likely self-loops first) but recorded in target
    order: whatever the order, node numbers, edges, errors and the states queued are the naive
    explorer's (bg41 and rl36 have sibling targets reaching one new state, cr01-broken errors)."""
    import random

    rng = random.Random(5)

    def other_order(targets, history, parent_loops):
        indices = list(range(len(targets)))
        if order == "reversed":
            return indices[::-1]
        rng.shuffle(indices)
        return indices

    monkeypatch.setattr(graph_module, "execution_order", other_order)
    monkeypatch.setattr(graph_module, "LIVE_GAMES", 40)  # some queued states pickled too
    info = resolve(game, root or broken_corridor(tmp_path))
    expected = naive_graph(Session(info), level, max_nodes=max_nodes)
    assert_same_graph(explored(Session(info), level, max_nodes=max_nodes), expected)
    assert expected["errors"] or game != "cr01-broken"


def test_execution_order_puts_likely_self_loops_first() -> None:
    targets = [graph_module.Target(a) for a in (1, 2, 3, 4)]
    assert graph_module.execution_order(targets, {}) == [0, 1, 2, 3]
    history = {(2, None, None): [None, 9, 10], (4, None, None): [None, 1, 10], (3, None, None): [None, 5, 8]}
    assert graph_module.execution_order(targets, history) == [1, 2, 0, 3]
    # self-loops at the parent come first, then by history
    assert graph_module.execution_order(targets, history, frozenset({(4, None, None), (1, None, None)})) == [0, 3, 1, 2]


def naive_signatures(game, camera):
    """Per view cell, the xor of the codes of the sprites covering it, from each sprite's
    ``render()`` (solid: != -1 for PIXEL_PERFECT sprites, the whole box otherwise)."""
    import numpy as np

    from engine import BlockingMode, InteractionMode

    width, height = int(camera.width), int(camera.height)
    sig = np.zeros((height, width), dtype=np.uint64)
    sprites = game.current_level._sprites
    codes = graph_module._sprite_codes(len(sprites))
    for i, sprite in enumerate(sprites):
        if sprite.interaction is InteractionMode.REMOVED:
            continue
        image = np.asarray(sprite.render())
        solid = image != -1 if sprite.blocking is BlockingMode.PIXEL_PERFECT else np.ones(image.shape, dtype=bool)
        for row, col in zip(*np.nonzero(solid), strict=True):
            y, x = sprite.y - camera.y + row, sprite.x - camera.x + col
            if 0 <= x < width and 0 <= y < height:
                sig[y, x] ^= codes[i]
    return sig


def naive_click_targets(session: Session, rule: str, share: float) -> list[tuple]:
    """Click targets computed pixel by pixel: class values per display pixel, ``np.unique``, then
    per class the pixel nearest its centroid by a full lexsort (ties: first in row-major order)."""
    import numpy as np

    camera = session.game.camera
    width, height = int(camera.width), int(camera.height)
    scale = min(64 // width, 64 // height)
    pad_x, pad_y = (64 - width * scale) // 2, (64 - height * scale) // 2
    d = np.arange(64)
    gx = np.where(d - pad_x >= 0, (d - pad_x) // scale, -1)
    gy = np.where(d - pad_y >= 0, (d - pad_y) // scale, -1)
    in_view = ((gy >= 0) & (gy < height))[:, None] & ((gx >= 0) & (gx < width))[None, :]
    if rule == "pixels":
        classes = np.arange(4096).reshape(64, 64)
    else:
        if rule == "cells":
            cell = gy[:, None] * width + gx[None, :]
        else:
            sig = naive_signatures(session.game, camera)
            cell = sig[np.clip(gy, 0, height - 1)[:, None], np.clip(gx, 0, width - 1)[None, :]].view(np.int64)
        classes = np.where(in_view, cell, -1)
    values, inverse, counts = np.unique(classes.ravel(), return_inverse=True, return_counts=True)
    ys, xs = np.divmod(np.arange(4096), 64)
    cx = np.bincount(inverse, weights=xs, minlength=len(values)) / counts
    cy = np.bincount(inverse, weights=ys, minlength=len(values)) / counts
    dist = (xs - cx[inverse]) ** 2 + (ys - cy[inverse]) ** 2
    order = np.lexsort((np.arange(4096), dist, inverse))
    first = np.ones(order.size, dtype=bool)
    first[1:] = inverse[order[1:]] != inverse[order[:-1]]
    return [(6, int(xs[r]), int(ys[r]), float(share * counts[inverse[r]] / 4096), rule) for r in order[first]]


@pytest.mark.parametrize(("game_id", "root", "level"), [("bg41", GAMES_DIR, 5), ("rl36", GAMES_DIR, 3),
                                                        ("ck03", FIXTURES, 0)])
def test_click_targets_equal_the_pixel_by_pixel_partition(game_id: str, root: Path, level: int) -> None:
    """Ranking cells instead of pixels, the centroid pick without a lexsort and the partition cache
    change nothing, along a random walk (states revisited, so cached partitions are reused)."""
    import random

    session = Session(resolve(game_id, root))
    session.start(level)
    rng = random.Random(7)
    for _ in range(60):
        for rule in ("objects", "cells", "pixels"):
            got = [(t.action_id, t.x, t.y, t.prob, t.label) for t in graph_module.click_targets(session, rule, 0.25)]
            assert got == naive_click_targets(session, rule, 0.25), rule
        actions = [a for a in session.available_actions if a not in (0, 7)]
        action = rng.choice(actions)
        result = session.step(action, {"x": rng.randrange(64), "y": rng.randrange(64)} if action == 6 else None)
        if session.won(result) or session.lost(result):
            session.start(level)


def test_cached_click_partitions_follow_every_input_of_the_layout() -> None:
    """The partition cache (by sprite layout) gives a new partition whenever what the signatures
    read changes -- a sprite's position, mask (pixels written in place), blocking, removal, its
    own render(), the camera -- and the cached one again when the state comes back."""
    import numpy as np

    from engine import BlockingMode, InteractionMode, Sprite

    class OwnRender(Sprite):
        def render(self) -> np.ndarray:
            return np.array([[1, -1], [-1, 1]])

    session = Session(resolve("rl36", GAMES_DIR))
    session.start(3)
    game = session.game
    cart = next(s for s in game.current_level._sprites if s.name == "cart")
    seen = []

    def check() -> None:
        got = [(t.action_id, t.x, t.y, t.prob, t.label) for t in graph_module.click_targets(session, "objects", 0.5)]
        assert got == naive_click_targets(session, "objects", 0.5)
        seen.append(got)

    check()
    start = seen[-1]
    x, y, pixel = cart.x, cart.y, int(cart.pixels[1, 1])
    mutations = [
        lambda: cart.set_position(x + 3, y + 6),
        lambda: cart.pixels.__setitem__((1, 1), -1),  # a hole in the mask, same position
        lambda: cart.set_blocking(BlockingMode.BOUNDING_BOX),  # the hole no longer counts
        lambda: cart.set_blocking(BlockingMode.PIXEL_PERFECT),
        lambda: object.__setattr__(cart, "__class__", OwnRender),
        lambda: object.__setattr__(cart, "__class__", Sprite),
        lambda: cart.set_interaction(InteractionMode.REMOVED),
        lambda: game.camera.move(1, 0),
    ]
    for mutate in mutations:
        mutate()
        check()
    assert len({repr(t) for t in seen}) >= 5  # the mutations did change the partition
    game.camera.move(-1, 0)
    cart.set_interaction(InteractionMode.TANGIBLE)
    cart.pixels[1, 1] = pixel
    cart.set_position(x, y)
    check()
    assert seen[-1] == start


def test_discarded_games_are_freed_without_the_cycle_collector() -> None:
    """pv63's HUD refers back to its game (a reference cycle): the explorer releases every game it
    discards, the frontier's at a budget stop included, so none is left for the cycle collector
    (whose full collections would also walk every queued game)."""
    import gc

    info = resolve("pv63", GAMES_DIR)
    for max_nodes in (120, 100_000):
        session = Session(info)
        replaced = session.game  # the session's game before exploring: start() replaces it
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            graph = explore_level(session, 2, max_nodes=max_nodes)
            gc.collect()
            left = [obj for obj in gc.garbage if type(obj) is type(session.game) and obj is not replaced]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        del replaced
        assert graph.n_nodes > 100 and left == []
        assert session.step(session.available_actions[0]).frames  # the session's own game is intact
