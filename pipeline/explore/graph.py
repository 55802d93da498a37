"""Breadth-first construction of the state graph of one level (study-protocol.md §2).

Algorithm
---------
1. Start a fresh game at the level (``Session.start``: the state a player sees after restarting
   the level) and make it node 0.
2. Pop nodes in FIFO order. For each node, restore its snapshot, enumerate its *action targets*
   (below) and step each one from the node's state. The successor's identity is its state key
   (sha256 of the last frame + hidden state + game state + level-won flag), so different
   trajectories reaching the same state merge into one node.
3. A successor equal to the node itself is a self-loop (an invalid or no-op action: the paper's
   "transitions that do not change the state"); after a self-loop the live game is reused without
   restoring (same key = same state by definition). A new successor joins the queue unless it is
   terminal: ``win`` (the level was completed; also game WIN) or ``lose`` (GAME_OVER). Terminal
   nodes are never expanded.

States are reused, not rebuilt: a queued node keeps the very game object that reached it (handed
over uncopied, as many at a time as fit in ``LIVE_BYTES``, else pickled), so expanding it needs no snapshot:
its targets step deep copies of it (``Session.restore(..., keep=True)``; a copy starts from the
held game's frame cache) and the last target that needs a fresh game steps the held game itself.
Targets are stepped in an order of their own (``execution_order``: self-loops at the parent and
those most often self-loops so far first, so that a self-loop's game serves the next target and
the state changes come last) and recorded in target order, so node numbers and edges do not
depend on it. A successor whose
key bytes equal its node's is a self-loop found without hashing. Every restore hands the camera's
render caches on from the outgoing game, so the next frame redraws only what differs. Games the
explorer discards (and the frontier's at the end) are released at once (``_release``) rather than
left to the cycle collector. The graph is the one a naive explorer builds that restores a fresh
copy before every transition and steps the targets in order (tests/unit/test_explore_reuse.py).
4. Stop when the queue is empty (the reachable graph is *complete*) or at a node, edge or time
   budget; nodes left in the queue are *frontier* nodes (discovered, not expanded).

Because nodes are expanded in BFS order, the depth at which a node is first discovered is its exact
distance from the start, and the first win found is an optimal playthrough -- also when the budget
stops the search early.

Action targets
--------------
Per state, the actions are the game's ``available_actions`` at that state (RESET is never in
them). Each simple action is one target. ACTION6 (click) is expanded into a finite set of click
targets by partitioning the 64x64 display pixels into classes and clicking one representative
pixel per class (the class pixel nearest the class centroid). Rules (``click_rule``):

* ``objects`` (default): pixels are in the same class when they map (``display_to_grid`` geometry)
  to grid cells covered by the same set of sprites (every sprite that is not REMOVED, using the
  solidity rule: rendered value != -1 for PIXEL_PERFECT sprites, the whole box otherwise). Empty
  cells form one class ("a representative empty cell") and the letterbox another. Exact for games
  whose click handling depends only on which sprites are under the clicked cell.
* ``cells``: one class per grid cell in view (plus the letterbox). Exact for any game that
  resolves clicks with ``display_to_grid`` (it cannot tell two pixels of one cell apart).
* ``pixels``: all 4096 pixels (exact for everything; for tiny graphs only).
* ``engine``: the reference graph-builder list (``_get_valid_actions``: first opaque pixel of
  each ``sys_click``/``sys_place`` sprite, or the placeable lattice), weighted uniformly.

Each target carries the probability the *uniform random policy* gives it: 1/|available actions|
per action id, and for ACTION6 that share times the class's pixel count / 4096 (the toolkit's
random agent draws x and y uniformly), so random-play probabilities are exact under the first
three rules.

Undo and reset
--------------
ACTION7 (undo) is excluded from the targets by default, as in the reference graph builder
(``_get_valid_actions`` skips 7): undo only returns to a state already on the trajectory, so it
adds no reachable state and never shortens a winning path; the random-policy probabilities are
those of the policy that never undoes. ``include_undo=True`` adds ACTION7 edges taken from each
node's own snapshot (the history of the path that discovered it) and marks them ``undo``; they are
approximate when the state key does not include the undo history, and are left out of shortest
paths. RESET is not an edge: from every node it leads back to node 0 (a level reset), and it is
not part of the random policy.
"""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine import BlockingMode, InteractionMode, Sprite
from engine.sprites import image_of

from .session import Session, StepResult, node_key

__all__ = ["Target", "StateGraph", "explore_level", "click_targets", "CLICK_RULES", "action_targets"]

CLICK_RULES = ("objects", "cells", "pixels", "engine")
FRAME = 64

NORMAL, WIN, LOSE, ERROR = "normal", "win", "lose", "error"
# Queued states are kept as live game objects instead of pickles (see explore_level) while they fit in
# LIVE_BYTES, a live game taken as LIVE_PER_PICKLED_BYTE times its pickle (5-6x on the shipped games, whose live
# games are 9-15 KB); LIVE_GAMES, when set, is the count instead.
LIVE_BYTES = 128 << 20
LIVE_PER_PICKLED_BYTE = 6
LIVE_GAMES: int | None = None


def live_games(session: Session) -> int:
    """How many queued states to hold as live games in this exploration (see LIVE_BYTES)."""
    if LIVE_GAMES is not None:
        return LIVE_GAMES
    saved = session.snapshot().game
    if saved[0] != "pickle":  # a game that cannot be pickled is deep-copied: no size to go by
        return 512
    return max(16, LIVE_BYTES // (LIVE_PER_PICKLED_BYTE * max(1, len(saved[1]))))


@dataclass(frozen=True)
class Target:
    """One action to try from a state: an action id, click coordinates, its random-policy probability."""

    action_id: int
    x: int | None = None
    y: int | None = None
    prob: float = 0.0
    label: str = ""

    @property
    def data(self) -> dict[str, int] | None:
        return None if self.x is None else {"x": int(self.x), "y": int(self.y)}

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action_id}
        if self.x is not None:
            out["x"], out["y"] = int(self.x), int(self.y)
        return out


@dataclass
class StateGraph:
    """The explored graph. Node 0 is the start; arrays are indexed by node id."""

    game_id: str
    level: int
    click_rule: str
    include_undo: bool
    keys: list[bytes] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    expanded: list[bool] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    parent_edge: list[int] = field(default_factory=list)
    # edges (parallel lists)
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    action: list[int] = field(default_factory=list)
    click_x: list[int] = field(default_factory=list)  # -1 for simple actions
    click_y: list[int] = field(default_factory=list)
    prob: list[float] = field(default_factory=list)
    is_undo: list[bool] = field(default_factory=list)
    complete: bool = False
    stop_reason: str = ""
    elapsed_s: float = 0.0
    n_steps: int = 0
    n_restores: int = 0
    n_snapshots: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    win_levels: int = 0

    @property
    def n_nodes(self) -> int:
        return len(self.keys)

    @property
    def n_edges(self) -> int:
        return len(self.src)

    def node_id(self, i: int) -> str:
        return self.keys[i].hex()[:16]

    def frontier(self) -> list[int]:
        return [i for i, (k, e) in enumerate(zip(self.kind, self.expanded, strict=True)) if k == NORMAL and not e]

    def edge_target(self, e: int) -> Target:
        x = self.click_x[e]
        return Target(self.action[e], None if x < 0 else x, None if x < 0 else self.click_y[e], self.prob[e])

    def path_to(self, node: int) -> list[Target]:
        """The BFS-tree action sequence from the start to ``node`` (a shortest path)."""
        steps: list[Target] = []
        while node != 0:
            e = self.parent_edge[node]
            steps.append(self.edge_target(e))
            node = self.parent[node]
        steps.reverse()
        return steps


# ---------------------------------------------------------------------- click targets
# Display pixel coordinates in row-major order (constants of every click partition).
_PIXEL_YS, _PIXEL_XS = np.divmod(np.arange(FRAME * FRAME), FRAME)
_SPRITE_RENDER = Sprite.render
_LETTERBOX = -1  # class value of letterbox pixels (sprite signatures and cell indices are >= 0)


@functools.lru_cache(maxsize=64)
def _pixel_cells(width: int, height: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """For every display pixel (``display_to_grid`` geometry): grid x, grid y, the pixel's view
    cell as a row-major index into the ``height x width`` view (-1 in the letterbox), and whether
    the frame has a letterbox at all."""
    scale = min(FRAME // width, FRAME // height)
    pad_x = (FRAME - width * scale) // 2
    pad_y = (FRAME - height * scale) // 2
    d = np.arange(FRAME)
    gx = np.where(d - pad_x >= 0, (d - pad_x) // scale, -1)
    gy = np.where(d - pad_y >= 0, (d - pad_y) // scale, -1)
    in_x = (gx >= 0) & (gx < width)
    in_y = (gy >= 0) & (gy < height)
    in_view = in_y[:, None] & in_x[None, :]
    cell = np.where(in_view, gy[:, None] * width + gx[None, :], -1).ravel()
    for array in (gx, gy, cell):
        array.flags.writeable = False
    return gx, gy, cell, not bool(in_view.all())


@functools.lru_cache(maxsize=256)
def _sprite_codes(n: int) -> np.ndarray:
    """Random 63-bit codes of sprite list positions 0..n-1 (fixed seed: the same every run)."""
    codes = np.random.default_rng(12345).integers(1, 2**63 - 1, size=max(1, n), dtype=np.uint64)
    codes.flags.writeable = False
    return codes


def _sprite_signatures(game: Any, camera: Any) -> np.ndarray:
    """Per view cell, an xor-hash of the sprites covering it (0 = empty)."""
    width, height = int(camera.width), int(camera.height)
    sig = np.zeros((height, width), dtype=np.uint64)
    cam_x, cam_y = int(camera.x), int(camera.y)
    sprites = game.current_level._sprites
    codes = _sprite_codes(len(sprites))
    zero = np.uint64(0)
    for i, sprite in enumerate(sprites):
        if sprite.interaction is InteractionMode.REMOVED:
            continue
        if type(sprite).render is _SPRITE_RENDER:
            # The engine's cached image of the sprite and its solidity mask (None: all solid),
            # what render() would copy and "!= -1" recompute.
            cached = image_of(sprite)
            h, w, solid = cached.h, cached.w, cached.solid
        else:  # a sprite class with its own render(): ask it
            image = np.asarray(sprite.render())
            if image.ndim != 2:
                continue
            (h, w), solid = image.shape, image != -1
        x0, y0 = int(sprite.x) - cam_x, int(sprite.y) - cam_y
        vx0, vy0 = max(0, x0), max(0, y0)
        vx1, vy1 = min(width, x0 + w), min(height, y0 + h)
        if vx0 >= vx1 or vy0 >= vy1:
            continue
        if solid is not None and sprite.blocking is BlockingMode.PIXEL_PERFECT:
            sub = solid[vy0 - y0 : vy1 - y0, vx0 - x0 : vx1 - x0]
            sig[vy0:vy1, vx0:vx1] ^= np.where(sub, codes[i], zero)
        else:  # the whole box is solid
            sig[vy0:vy1, vx0:vx1] ^= codes[i]
    return sig


def _cell_classes(game: Any, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """The partition of the display pixels under ``rule`` ("objects" or "cells"), per view cell:
    each cell's class index (plus a leading letterbox slot when the frame has a letterbox), and
    per pixel (row-major) its slot in that array.  Classes are numbered in the order of their
    values (letterbox -1 first, then cells by sprite signature or cell index), as ``np.unique``
    over the per-pixel values numbers them: every view cell has pixels, so ranking the cell values
    ranks the pixel values."""
    camera = game.camera
    width, height = int(camera.width), int(camera.height)
    _, _, slot, letterboxed = _pixel_cells(width, height)
    if rule == "cells":
        cell_values = np.arange(width * height, dtype=np.int64)
    else:
        cell_values = _sprite_signatures(game, camera).ravel().view(np.int64)
    if letterboxed:
        cell_values = np.concatenate(([_LETTERBOX], cell_values))
        slot = slot + 1  # slot 0 is the letterbox
    _, rank = np.unique(cell_values, return_inverse=True)
    return rank.ravel(), slot


def _representatives(inverse: np.ndarray) -> tuple[list[int], list[int], list[int]]:
    """Per class of the pixel partition ``inverse`` (class index per pixel, classes 0..n-1), in
    class order: the x and y of the class pixel nearest to the class centroid (ties: first in
    row-major order) and the class's pixel count."""
    xs, ys = _PIXEL_XS, _PIXEL_YS
    n_classes = int(inverse.max()) + 1
    counts = np.bincount(inverse, minlength=n_classes)
    cx_mean = np.bincount(inverse, weights=xs, minlength=n_classes) / counts
    cy_mean = np.bincount(inverse, weights=ys, minlength=n_classes) / counts
    dist = (xs - cx_mean[inverse]) ** 2 + (ys - cy_mean[inverse]) ** 2
    nearest = np.full(n_classes, np.inf)
    np.minimum.at(nearest, inverse, dist)
    candidates = np.flatnonzero(dist == nearest[inverse])  # row-major order
    _, first = np.unique(inverse[candidates], return_index=True)  # per class, in class order
    reps = candidates[first]
    return xs[reps].tolist(), ys[reps].tolist(), counts[inverse[reps]].tolist()


class _Partition:
    """A click partition's representatives (per class, in class order: x, y, pixel count) and
    the targets made from them, per (rule, share): ``Target`` is immutable, so states with the
    same partition share one list of them."""

    __slots__ = ("reps", "targets")

    def __init__(self, reps: tuple[list[int], list[int], list[int]]) -> None:
        self.reps = reps
        self.targets: dict[tuple[str, float], tuple[Target, ...]] = {}

    def targets_for(self, rule: str, share: float) -> tuple[Target, ...]:
        found = self.targets.get((rule, share))
        if found is None:
            total = FRAME * FRAME
            found = self.targets[(rule, share)] = tuple(
                Target(6, x, y, share * count / total, rule) for x, y, count in zip(*self.reps, strict=True))
        return found


# Partitions by their classes (camera size + per-cell class ranks): states that differ only in
# colours or in what the partition does not see share one.  And partitions by sprite layout (the
# ``objects`` rule's inputs, ``_layout_key``), so that most states need neither the per-cell
# signatures nor their ranking.  Both bounded; clearing only costs recomputation.
_PARTITIONS: dict[tuple, _Partition] = {}
_LAYOUTS: dict[tuple, _Partition] = {}
_CACHE_LIMIT = 4096
# Per sprite image (``_Image.token``: unique per image object, never reused), its solidity mask
# as a hashable value: images with equal masks give equal layout keys.
_MASKS: dict[int, tuple[int, int, bytes]] = {}
_MASKS_LIMIT = 50_000


def _layout_key(game: Any) -> tuple | None:
    """Everything ``_sprite_signatures`` reads, as a hashable value (None when a sprite has its own
    ``render()``, which only the computation itself may call): the camera's size and position, the
    number of sprites (the codes), and per sprite that is not REMOVED its list position, position
    and solid footprint -- the box (h, w) or, for a PIXEL_PERFECT sprite with transparent cells,
    its mask.  Equal keys give equal signatures, hence the same partition."""
    camera = game.camera
    sprites = game.current_level._sprites
    key: list = [int(camera.width), int(camera.height), int(camera.x), int(camera.y), len(sprites)]
    removed, pixel_perfect = InteractionMode.REMOVED, BlockingMode.PIXEL_PERFECT
    masks = _MASKS
    for i, sprite in enumerate(sprites):
        if sprite.interaction is removed:
            continue
        if type(sprite).render is not _SPRITE_RENDER:
            return None
        image = image_of(sprite)
        if image.solid is None or sprite.blocking is not pixel_perfect:
            footprint: tuple = (image.h, image.w)
        else:
            footprint = masks.get(image.token)
            if footprint is None:
                if len(masks) >= _MASKS_LIMIT:
                    masks.clear()
                footprint = masks[image.token] = (image.h, image.w, image.solid.tobytes())
        key += (i, int(sprite.x), int(sprite.y), footprint)
    return tuple(key)


def _partition(game: Any, rule: str) -> _Partition:
    """The click partition of the current state under ``rule`` ("objects", "cells" or "pixels")."""
    camera = game.camera
    if rule == "objects":
        layout = _layout_key(game)
    else:
        layout = (rule,) if rule == "pixels" else (rule, int(camera.width), int(camera.height))
    found = _LAYOUTS.get(layout) if layout is not None else None
    if found is not None:
        return found
    if rule == "pixels":
        key: tuple = (rule,)
        rank = slot = None
    else:
        rank, slot = _cell_classes(game, rule)
        key = (int(camera.width), int(camera.height), rank.tobytes())
    found = _PARTITIONS.get(key)
    if found is None:
        found = _Partition(_representatives(np.arange(FRAME * FRAME) if rank is None else rank[slot]))
        if len(_PARTITIONS) >= _CACHE_LIMIT:
            _PARTITIONS.clear()
        _PARTITIONS[key] = found
    if layout is not None:
        if len(_LAYOUTS) >= _CACHE_LIMIT:
            _LAYOUTS.clear()
        _LAYOUTS[layout] = found
    return found


def click_targets(session: Session, rule: str, share: float) -> list[Target]:
    """The click targets of the current state under ``rule``; probabilities sum to ``share``."""
    if rule not in CLICK_RULES:
        raise ValueError(f"unknown click rule {rule!r}; one of {', '.join(CLICK_RULES)}")
    game = session.game
    if rule == "engine":
        found = [a for a in game._get_valid_actions() if a.id.value == 6]
        if not found:
            return []
        p = share / len(found)
        return [Target(6, int(a.data["x"]), int(a.data["y"]), p, "engine") for a in found]
    return list(_partition(game, rule).targets_for(rule, share))


# The simple targets of an action list (and where its clicks go), by (actions, include_undo).
_PLANS: dict[tuple, tuple[float, tuple[Target | None, ...]]] = {}


def action_targets(session: Session, actions: list[int], rule: str, include_undo: bool) -> list[Target]:
    """Targets of one state: simple actions, click classes, optionally undo (see module docstring)."""
    plan_key = (tuple(actions), include_undo)
    plan = _PLANS.get(plan_key)
    if plan is None:
        policy = [a for a in dict.fromkeys(actions) if a != 0 and (include_undo or a != 7)]
        share = 1.0 / len(policy) if policy else 0.0
        plan = (share, tuple(None if a == 6 else Target(a, None, None, share, "undo" if a == 7 else "")
                             for a in policy))
        if len(_PLANS) >= _CACHE_LIMIT:
            _PLANS.clear()
        _PLANS[plan_key] = plan
    share, simple = plan
    if None not in simple:
        return list(simple)
    targets: list[Target] = []
    for t in simple:
        if t is None:
            targets.extend(click_targets(session, rule, share))
        else:
            targets.append(t)
    return targets


# ---------------------------------------------------------------------- BFS
def execution_order(targets: list[Target], history: dict[tuple, list], parent_loops: frozenset = frozenset()
                    ) -> list[int]:
    """The order in which the explorer steps a node's targets (indices into ``targets``): likely
    self-loops first -- those that were self-loops at the node's parent (``parent_loops``: their
    (action, x, y)), then by how often each was a self-loop so far (``history``: per (action, x, y),
    [ActionInput, self-loops, steps]) -- ties in target order.  A self-loop leaves the game in the
    node's state for the next target, so loops first and state changes last lets the last change
    step the held game itself instead of a copy; the graph records the outcomes in target order
    whatever the order."""
    if len(targets) < 3:  # one copy at most either way
        return list(range(len(targets)))
    scores = []
    for t in targets:
        key = (t.action_id, t.x, t.y)
        seen = history.get(key)
        scores.append((key in parent_loops, 0.5 if seen is None else (seen[1] + 1) / (seen[2] + 2)))
    return sorted(range(len(targets)), key=scores.__getitem__, reverse=True)  # stable


def _release(game: Any) -> None:
    """Drop a game object the explorer is done with by clearing its attributes: games whose HUD
    interfaces refer back to the game (game -> camera -> interface -> game) form reference cycles,
    and thousands of such discarded copies would otherwise wait for the cyclic garbage collector
    (whose full collections also walk every held game)."""
    state = getattr(game, "__dict__", None)
    if type(state) is dict:
        state.clear()


# States per level the explorer visits unless told otherwise (`arcstudy explore --max-nodes`, the calibration
# report's --explore-nodes): enough for every level of the shipped games (the largest has 10,597).
DEFAULT_MAX_NODES = 200_000
# Edges kept per level: about 100 bytes each (seven parallel columns), so about 0.5 GB at the bound. Without one,
# `--clicks pixels` (4,096 clicks a state) on bg41 held 6M edges after 60 s and its sandbox child passed 1.2 GB.
DEFAULT_MAX_EDGES = 5_000_000


def explore_level(
    session: Session,
    level: int,
    *,
    max_nodes: int = DEFAULT_MAX_NODES,
    max_edges: int | None = None,
    max_seconds: float | None = None,
    click_rule: str = "objects",
    include_undo: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> StateGraph:
    """Explore level ``level`` breadth-first; see the module docstring for the rules. ``max_edges``: None for
    DEFAULT_MAX_EDGES (every exploration is bounded in memory)."""
    max_edges = DEFAULT_MAX_EDGES if max_edges is None else max_edges
    if click_rule not in CLICK_RULES:
        raise ValueError(f"unknown click rule {click_rule!r}; one of {', '.join(CLICK_RULES)}")
    t0 = time.perf_counter()
    first = session.start(level)
    graph = StateGraph(session.src.game_id, level, click_rule, include_undo)
    graph.win_levels = session.n_levels
    index: dict[bytes, int] = {}
    snaps: dict[int, Any] = {}
    actions_at: dict[int, list[int]] = {}
    # Key bytes of queued nodes held live (at most live_games()): a successor with the same bytes is a
    # self-loop, found without hashing.
    key_bytes_at: dict[int, bytes] = {}
    # Per (action, x, y): its ActionInput, how often it was a self-loop, how often stepped.
    history: dict[tuple[int, int | None, int | None], list] = {}
    parent_loops: dict[int, frozenset] = {}  # per queued node: its parent's self-loop targets

    def add_node(key: bytes, depth: int, kind: str, parent: int, parent_edge: int) -> int:
        i = len(graph.keys)
        index[key] = i
        graph.keys.append(key)
        graph.depth.append(depth)
        graph.kind.append(kind)
        graph.expanded.append(False)
        graph.parent.append(parent)
        graph.parent_edge.append(parent_edge)
        return i

    edge_appends = (graph.src.append, graph.dst.append, graph.action.append, graph.click_x.append,
                    graph.click_y.append, graph.prob.append, graph.is_undo.append)

    def add_edge(v: int, u: int, t: Target) -> None:
        add_src, add_dst, add_action, add_x, add_y, add_prob, add_undo = edge_appends
        add_src(v)
        add_dst(u)
        add_action(t.action_id)
        add_x(-1 if t.x is None else int(t.x))
        add_y(-1 if t.y is None else int(t.y))
        add_prob(float(t.prob))
        add_undo(t.action_id == 7)

    def classify(result: StepResult) -> str:
        if session.won(result):
            return WIN
        if session.lost(result):
            return LOSE
        return NORMAL

    # A queued node holds the game that reached it, handed over uncopied (``Session.detach``) while
    # fewer than live_games() are held, else a pickled snapshot.  Expanding a held game takes no
    # snapshot: its targets step copies of it and the last one steps the game itself.
    held_live = 0
    live_limit = live_games(session)

    def hold() -> Any:
        """The current game as a queued node's state: handed over, or pickled past the live limit."""
        nonlocal held_live
        if held_live < live_limit:
            held_live += 1
            return session.detach()
        graph.n_snapshots += 1
        return session.snapshot()

    def drop(snapshot: Any) -> None:
        nonlocal held_live
        if snapshot.game[0] == "live":
            _release(snapshot.game[1].pop())
            held_live -= 1

    def restore(snapshot: Any, keep: bool = False) -> None:
        """``session.restore``, releasing the outgoing game when nothing holds it any more (it was
        not handed over with ``detach``): the explorer made it and is its only user."""
        outgoing = None if session.env.detached else session.game
        session.restore(snapshot, keep=keep)
        if outgoing is not None and outgoing is not session.game:
            _release(outgoing)

    start_kind = classify(first)
    start_bytes = session.key_bytes()
    add_node(node_key(start_bytes), 0, start_kind, -1, -1)
    queue: deque[int] = deque()
    if start_kind == NORMAL:
        snaps[0] = hold()
        key_bytes_at[0] = start_bytes
        actions_at[0] = list(first.available_actions)
        queue.append(0)

    graph.stop_reason = "complete"
    last_report = 0.0
    while queue:
        if len(graph.keys) >= max_nodes:
            graph.stop_reason = f"node budget ({max_nodes:,})"
            break
        if max_edges is not None and len(graph.src) >= max_edges:
            graph.stop_reason = f"edge budget ({max_edges:,})"
            break
        if max_seconds is not None and time.perf_counter() - t0 >= max_seconds:
            graph.stop_reason = f"time budget ({max_seconds:g} s)"
            break
        v = queue.popleft()
        snap = snaps.pop(v)
        restore(snap)
        key_v = graph.keys[v]
        bytes_v = key_bytes_at.pop(v, None)
        targets = action_targets(session, actions_at.pop(v), click_rule, include_undo)
        # A held game is detached again and kept as the node's state: its targets step copies of it
        # (``keep``), and the last target that needs a fresh game steps the game itself.
        live = snap.game[0] == "live"
        dirty = False
        if live:
            held_live -= 1
            if len(targets) > 1:
                snap = session.detach()
                dirty = True
        else:
            graph.n_restores += 1
        last = len(targets) - 1
        # Step in execution order, record in target order: per target its successor node (v for a
        # self-loop), an error message, or a new state (key, key bytes, result), numbered below.
        outcomes: list[Any] = [None] * len(targets)
        first_of: dict[bytes, int] = {}  # a new state's key -> the first target (in target order) reaching it
        games: dict[int, Any] = {}  # that target -> its game (if the state is to be expanded)
        for j, i in enumerate(execution_order(targets, history, parent_loops.pop(v, frozenset()))):
            t = targets[i]
            if dirty:
                keep = live and j < last
                restore(snap, keep=keep)
                graph.n_restores += keep or not live
            seen = history.get((t.action_id, t.x, t.y))
            if seen is None:
                seen = history[(t.action_id, t.x, t.y)] = [session.action_input(t.action_id, t.data), 0, 0]
            seen[2] += 1
            try:
                result = session.play(seen[0])
            except MemoryError:  # the sandbox's memory limit: the game's failure (SandboxFailure "memory"), not a
                raise  # finding of the graph
            except Exception as err:  # noqa: BLE001 - a crashing game is a finding, not a tool failure
                outcomes[i] = f"{type(err).__name__}: {err}"
                dirty = True
                continue
            graph.n_steps += 1
            dirty = True
            if not result.frames:
                # rejected action (state was terminal): cannot happen for expanded nodes
                dirty = False
            else:
                key_bytes = session.key_bytes()
                if key_bytes == bytes_v:  # equal key bytes, equal keys: no need to hash them
                    dirty = False
                else:
                    key = node_key(key_bytes)
                    dirty = key != key_v
            if not dirty:
                outcomes[i] = v
                seen[1] += 1
                continue
            u = index.get(key)
            if u is not None:
                outcomes[i] = u
                continue
            outcomes[i] = (key, key_bytes, result)
            first = first_of.get(key)
            if first is None or i < first:
                if first is not None and first in games:
                    drop(games.pop(first))
                first_of[key] = i
                if classify(result) == NORMAL:
                    games[i] = hold()
        depth = graph.depth[v] + 1
        loops = frozenset((t.action_id, t.x, t.y) for t, outcome in zip(targets, outcomes, strict=True)
                          if outcome == v)
        for i, t in enumerate(targets):
            outcome = outcomes[i]
            if type(outcome) is int:
                add_edge(v, outcome, t)
            elif type(outcome) is str:
                graph.errors.append({"node": v, "path": [s.as_dict() for s in graph.path_to(v)],
                                     "action": t.as_dict(), "error": outcome})
                u = add_node(b"error:%d" % len(graph.errors), depth, ERROR, v, len(graph.src))
                graph.expanded[u] = True
                add_edge(v, u, t)
            else:
                key, key_bytes, result = outcome
                u = index.get(key)
                if u is None:
                    kind = classify(result)
                    u = add_node(key, depth, kind, v, len(graph.src))
                    if kind == NORMAL:
                        snaps[u] = games.pop(i)
                        if snaps[u].game[0] == "live":
                            key_bytes_at[u] = key_bytes
                        actions_at[u] = list(result.available_actions)
                        parent_loops[u] = loops
                        queue.append(u)
                add_edge(v, u, t)
        if live and snap.game[1]:  # the held game was not needed by the last target
            _release(snap.game[1].pop())
        graph.expanded[v] = True
        if progress is not None:
            now = time.perf_counter()
            if now - last_report > 0.25:
                last_report = now
                progress(len(graph.keys), len(queue))
    graph.complete = not queue
    if session.env.detached:  # stopped right after handing over the live game: take it back
        session.restore(snaps[queue[-1]])
    for snap in snaps.values():  # frontier nodes' games (a budget stop): nobody can restore them now
        if snap.game[0] == "live" and snap.game[1]:
            _release(snap.game[1].pop())
    if not session.shared_state_intact():
        graph.errors.append({"node": None, "path": [], "action": None,
                             "error": "the game mutated clean levels or other levels during exploration; "
                                      "snapshots that share them may be wrong"})
    graph.elapsed_s = time.perf_counter() - t0
    if progress is not None:
        progress(len(graph.keys), len(queue))
    return graph
