"""ARC task-family generators in the ARC-TGI style (spec/formats.md §E task JSON, §F ARC-TGI export CSV).

A *family* is a parameterised ARC rule. Generating a task from it:

1. sample the episode-level *task variables* (the rule parameters every pair shares: a colour mapping, an
   axis, a fill colour, a scale factor, ...);
2. sample inputs with randomised nuisance factors (grid size, colours that do not matter to the rule,
   object counts and positions), scaled by a difficulty ``level`` in [0, 1];
3. compute each output with the family's deterministic transformation, a pure function of the grid and
   the task variables written in plain Python (no imports) so that its source text is the ARC-TGI
   ``code`` column;
4. enforce the episode constraints (every output differs from its input, sides 1-30, inputs pairwise
   distinct, plus the family's own: at least one enclosed region, at least one point pair, counts that
   vary, ...), resampling a pair or the whole episode when they fail;
5. run the *executable witness* (:func:`witness_check`): after a JSON round trip, the registered
   transformation and the exported ``code`` text (executed in a fresh namespace) must reproduce every
   stored output, train and test. Generation fails loudly otherwise.

Families (``FAMILIES``): ``recolor_by_rule``, ``flip_grid``, ``fill_enclosed``, ``gravity``,
``scale_up``, ``connect_points``, ``count_to_bar``. Each family also knows plausible *wrong* outputs a
person who misread the rule might build (used by the participant simulation) and a few plain-English
descriptions of its rule.

Everything is deterministic per seed: :func:`generate_task_pool` derives one ``random.Random`` per task
from ``(seed, split, index)``, and task ids are 8 hex characters derived from the same material.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import inspect
import io
import json
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pipeline.core.outputs import write_text

Grid = list[list[int]]

MAX_SIDE = 30
COLOR_NAMES = ("black", "blue", "red", "green", "yellow", "grey", "pink", "orange", "light blue", "dark red")
TGI_COLUMNS = ("task_id", "created_at", "generator_name", "input_reasoning_chain",
               "transformation_reasoning_chain", "task_variables", "code", "data")
# ARC-TGI `created_at` of the first generated task; later tasks are one second apart (deterministic).
TGI_EPOCH = datetime(2025, 1, 6, 9, 0, 0)


class WitnessError(AssertionError):
    """A stored output is not what the family's transformation computes from its input."""


class TaskInvalid(ValueError):
    """A task violates the ARC task JSON rules (§E) or a family constraint."""


# ---------------------------------------------------------------------------------------------------------
# The transformations. Plain Python on lists of lists, self-contained: their source is the ARC-TGI `code`.


def recolor_by_rule(grid, mapping):
    table = {source: target for source, target in mapping}
    return [[table.get(value, value) for value in row] for row in grid]


def flip_grid(grid, axis, mode):
    if axis == "horizontal":
        flipped = [list(reversed(row)) for row in grid]
    else:
        flipped = [list(row) for row in reversed(grid)]
    if mode == "flip":
        return flipped
    if axis == "horizontal":
        return [list(row) + mirrored for row, mirrored in zip(grid, flipped, strict=True)]
    return [list(row) for row in grid] + flipped


def fill_enclosed(grid, fill_color):
    height, width = len(grid), len(grid[0])
    out = [list(row) for row in grid]
    outside = [[False] * width for _ in range(height)]
    stack = [(r, c) for r in range(height) for c in range(width)
             if (r in (0, height - 1) or c in (0, width - 1)) and grid[r][c] == 0]
    for r, c in stack:
        outside[r][c] = True
    while stack:
        r, c = stack.pop()
        for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= nr < height and 0 <= nc < width and not outside[nr][nc] and grid[nr][nc] == 0:
                outside[nr][nc] = True
                stack.append((nr, nc))
    for r in range(height):
        for c in range(width):
            if grid[r][c] == 0 and not outside[r][c]:
                out[r][c] = fill_color
    return out


def gravity(grid, direction):
    height, width = len(grid), len(grid[0])
    out = [[0] * width for _ in range(height)]
    if direction in ("down", "up"):
        for c in range(width):
            cells = [grid[r][c] for r in range(height) if grid[r][c] != 0]
            rows = range(height - len(cells), height) if direction == "down" else range(len(cells))
            for r, value in zip(rows, cells, strict=True):
                out[r][c] = value
    else:
        for r in range(height):
            cells = [value for value in grid[r] if value != 0]
            cols = range(width - len(cells), width) if direction == "right" else range(len(cells))
            for c, value in zip(cols, cells, strict=True):
                out[r][c] = value
    return out


def scale_up(grid, factor):
    return [[value for value in row for _ in range(factor)] for row in grid for _ in range(factor)]


def connect_points(grid, line_color):
    height, width = len(grid), len(grid[0])
    out = [list(row) for row in grid]
    where = {}
    for r in range(height):
        for c in range(width):
            if grid[r][c] != 0:
                where.setdefault(grid[r][c], []).append((r, c))
    for color, cells in sorted(where.items()):
        if len(cells) != 2:
            continue
        (r1, c1), (r2, c2) = cells
        paint = color if line_color is None else line_color
        if r1 == r2:
            for c in range(min(c1, c2) + 1, max(c1, c2)):
                out[r1][c] = paint
        elif c1 == c2:
            for r in range(min(r1, r2) + 1, max(r1, r2)):
                out[r][c1] = paint
    return out


def count_to_bar(grid, color, orientation):
    n = sum(1 for row in grid for value in row if value == color)
    if orientation == "row":
        return [[color] * n]
    return [[color] for _ in range(n)]


# ---------------------------------------------------------------------------------------------------------
# Grid helpers for the samplers (not part of any exported code).


def blank(height: int, width: int, value: int = 0) -> Grid:
    return [[value] * width for _ in range(height)]


def copy_grid(grid: Sequence[Sequence[int]]) -> Grid:
    return [list(row) for row in grid]


def grid_shape(grid: Sequence[Sequence[int]]) -> tuple[int, int]:
    return len(grid), len(grid[0]) if grid else 0


def _side(rng: random.Random, level: float, lo: int = 3, hi: int = MAX_SIDE, spread: float = 2.5) -> int:
    """A grid side for a difficulty level: about 5 cells at level 0, about 20 at level 1."""
    return max(lo, min(hi, round(rng.gauss(5 + 15 * level, spread))))


def _colors(rng: random.Random, k: int, exclude: Sequence[int] = ()) -> list[int]:
    pool = [c for c in range(1, 10) if c not in exclude]
    return rng.sample(pool, k)


def _free(grid: Grid, cells: Sequence[tuple[int, int]], margin: int = 0) -> bool:
    height, width = grid_shape(grid)
    for r, c in cells:
        for dr in range(-margin, margin + 1):
            for dc in range(-margin, margin + 1):
                rr, cc = r + dr, c + dc
                if 0 <= rr < height and 0 <= cc < width and grid[rr][cc] != 0:
                    return False
    return True


def _blob(rng: random.Random, max_cells: int) -> list[tuple[int, int]]:
    """A random 4-connected shape of 1..max_cells cells, anchored at (0, 0)-relative offsets >= 0."""
    if rng.random() < 0.45:
        h, w = rng.randint(1, 3), rng.randint(1, 3)
        cells = [(r, c) for r in range(h) for c in range(w)]
        return cells[:max_cells] if len(cells) > max_cells else cells
    cells = {(0, 0)}
    target = rng.randint(2, max(2, max_cells))
    while len(cells) < target:
        r, c = rng.choice(sorted(cells))
        dr, dc = rng.choice(((1, 0), (-1, 0), (0, 1), (0, -1)))
        cells.add((r + dr, c + dc))
    min_r = min(r for r, _ in cells)
    min_c = min(c for _, c in cells)
    return sorted((r - min_r, c - min_c) for r, c in cells)


def _place(rng: random.Random, grid: Grid, shape: list[tuple[int, int]], color: int, *, margin: int = 1,
           tries: int = 40) -> bool:
    height, width = grid_shape(grid)
    sh = max(r for r, _ in shape) + 1
    sw = max(c for _, c in shape) + 1
    if sh > height or sw > width:
        return False
    for _ in range(tries):
        r0, c0 = rng.randint(0, height - sh), rng.randint(0, width - sw)
        cells = [(r0 + r, c0 + c) for r, c in shape]
        if _free(grid, cells, margin):
            for r, c in cells:
                grid[r][c] = color
            return True
    return False


def _color_list(colors: Sequence[int]) -> str:
    names = [COLOR_NAMES[c] for c in colors]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# ---------------------------------------------------------------------------------------------------------
# Families


class Family(ABC):
    """One ARC rule family. Subclasses define the samplers, wrong outputs and texts; ``transform`` is one of
    the plain functions above."""

    name: str = ""
    transform: Callable[..., Grid]
    # Logit offset of how easily people infer the rule (participant simulation): higher is easier.
    ease: float = 0.0
    min_train, max_train = 2, 4

    @abstractmethod
    def sample_variables(self, rng: random.Random, level: float) -> dict[str, Any]:
        ...

    @abstractmethod
    def sample_input(self, rng: random.Random, variables: dict[str, Any], level: float) -> Grid:
        ...

    def accept_pair(self, grid: Grid, output: Grid, variables: dict[str, Any]) -> bool:
        return output != grid

    def accept_episode(self, pairs: list[tuple[Grid, Grid]], variables: dict[str, Any]) -> bool:
        return True

    def wrong_outputs(self, grid: Grid, variables: dict[str, Any], rng: random.Random) -> list[Grid]:
        """Outputs a person who misread the rule might build for this input (may include duplicates)."""
        return []

    @abstractmethod
    def describe(self, variables: dict[str, Any], rng: random.Random) -> str:
        """A participant's plain-English description of the rule."""
        ...

    @abstractmethod
    def input_chain(self, variables: dict[str, Any]) -> list[str]:
        ...

    @abstractmethod
    def transformation_chain(self, variables: dict[str, Any]) -> list[str]:
        ...

    # --- shared machinery

    def rule_args(self, variables: dict[str, Any]) -> dict[str, Any]:
        """The task variables the transformation takes (the others only shape the inputs)."""
        params = inspect.signature(type(self).transform).parameters
        return {k: v for k, v in variables.items() if k in params}

    def apply(self, grid: Grid, variables: dict[str, Any]) -> Grid:
        return type(self).transform(copy_grid(grid), **self.rule_args(variables))

    def code_text(self, variables: dict[str, Any]) -> str:
        """ARC-TGI `code`: the transformation's source and a `transform_input` with the variables inlined, with
        the generator's signature `transform_input(self, grid)` (formats.md §F: `self` unused), as
        `check-witnesses` calls it."""
        fn = type(self).transform
        args = ", ".join(f"{k}={v!r}" for k, v in self.rule_args(variables).items())
        return (inspect.getsource(fn).rstrip() + "\n\n\ndef transform_input(self, grid):\n"
                f"    return {fn.__name__}(grid, {args})\n")


class RecolorByRule(Family):
    name = "recolor_by_rule"
    transform = recolor_by_rule
    ease = 1.2

    def sample_variables(self, rng, level):
        n_pairs = 1 if rng.random() < 0.7 - 0.4 * level else 2
        colors = _colors(rng, 2 * n_pairs)
        mapping = [[colors[2 * i], colors[2 * i + 1]] for i in range(n_pairs)]
        distractors = _colors(rng, 1 + round(2 * level), exclude=colors)
        return {"mapping": mapping, "distractor_colors": distractors}

    def sample_input(self, rng, variables, level):
        h, w = _side(rng, level, lo=4), _side(rng, level, lo=4)
        grid = blank(h, w)
        sources = [s for s, _ in variables["mapping"]]
        palette = sources + variables["distractor_colors"]
        n_objects = rng.randint(2, 3 + round(5 * level))
        for i in range(n_objects):
            color = sources[i % len(sources)] if i < len(sources) else rng.choice(palette)
            _place(rng, grid, _blob(rng, 2 + round(5 * level)), color)
        return grid

    def wrong_outputs(self, grid, variables, rng):
        mapping = variables["mapping"]
        target = mapping[0][1]
        used = {v for row in grid for v in row if v}
        other = rng.choice([c for c in range(1, 10) if c not in used and c != target] or [target])
        wrong = [
            recolor_by_rule(grid, mapping[:1]) if len(mapping) > 1 else recolor_by_rule(grid, [[mapping[0][0], other]]),
            [[target if v else 0 for v in row] for row in grid],
            recolor_by_rule(grid, [[t, s] for s, t in mapping] + [[s, t] for s, t in mapping]),
        ]
        return wrong

    def describe(self, variables, rng):
        s, t = variables["mapping"][0]
        texts = [
            f"Change every {COLOR_NAMES[s]} shape to {COLOR_NAMES[t]}, leave everything else the same.",
            f"The {COLOR_NAMES[s]} objects become {COLOR_NAMES[t]}.",
            f"copy the input and recolor the {COLOR_NAMES[s]} cells {COLOR_NAMES[t]}",
        ]
        if len(variables["mapping"]) > 1:
            s2, t2 = variables["mapping"][1]
            texts.append(f"{COLOR_NAMES[s]} turns {COLOR_NAMES[t]} and {COLOR_NAMES[s2]} turns {COLOR_NAMES[t2]}.")
        return rng.choice(texts)

    def input_chain(self, variables):
        sources = [s for s, _ in variables["mapping"]]
        return ["Input grids have a black background with several small objects.",
                f"Some objects are {_color_list(sources)}; others are "
                f"{_color_list(variables['distractor_colors'])}."]

    def transformation_chain(self, variables):
        return ["The output grid is a copy of the input grid."] + [
            f"Every {COLOR_NAMES[s]} cell is recoloured {COLOR_NAMES[t]}." for s, t in variables["mapping"]
        ] + ["All other cells keep their colour."]


class FlipGrid(Family):
    name = "flip_grid"
    transform = flip_grid
    ease = 1.0

    def sample_variables(self, rng, level):
        return {"axis": rng.choice(("horizontal", "vertical")),
                "mode": "mirror_extend" if rng.random() < 0.3 + 0.3 * level else "flip"}

    def sample_input(self, rng, variables, level):
        limit = MAX_SIDE // 2 if variables["mode"] == "mirror_extend" else MAX_SIDE
        h, w = _side(rng, level, lo=3, hi=limit), _side(rng, level, lo=3, hi=limit)
        colors = _colors(rng, rng.randint(1, 3))
        density = rng.uniform(0.2, 0.5)
        return [[rng.choice(colors) if rng.random() < density else 0 for _ in range(w)] for _ in range(h)]

    def accept_pair(self, grid, output, variables):
        # The input must not be symmetric about the axis, or flipping shows nothing.
        return flip_grid(grid, variables["axis"], "flip") != grid

    def wrong_outputs(self, grid, variables, rng):
        other = "vertical" if variables["axis"] == "horizontal" else "horizontal"
        rotated = [list(reversed(row)) for row in reversed(grid)]
        wrong = [flip_grid(grid, other, variables["mode"]), rotated]
        if variables["mode"] == "mirror_extend":
            wrong.append(flip_grid(grid, variables["axis"], "flip"))
            tiled = ([list(row) * 2 for row in grid] if variables["axis"] == "horizontal"
                     else copy_grid(grid) + copy_grid(grid))
            wrong.append(tiled)
        return wrong

    def describe(self, variables, rng):
        side = "left to right" if variables["axis"] == "horizontal" else "upside down"
        if variables["mode"] == "flip":
            return rng.choice([f"Flip the picture {side}.", f"mirror image of the input ({side})",
                               f"The output is the input flipped {side}."])
        where = "on the right" if variables["axis"] == "horizontal" else "underneath"
        return rng.choice([f"Keep the input and add its mirror image {where}.",
                           f"make it twice as big by reflecting the pattern {where}"])

    def input_chain(self, variables):
        return ["Input grids are filled with a random pattern of one to three colours on black.",
                "The pattern is not symmetric."]

    def transformation_chain(self, variables):
        axis = "left-right" if variables["axis"] == "horizontal" else "top-bottom"
        if variables["mode"] == "flip":
            return [f"The output is the input reflected {axis}."]
        return [f"The output is the input followed by its {axis} reflection, doubling that side."]


class FillEnclosed(Family):
    name = "fill_enclosed"
    transform = fill_enclosed
    ease = 0.4

    def sample_variables(self, rng, level):
        wall, fill = _colors(rng, 2)
        return {"wall_color": wall, "fill_color": fill, "open_boxes": level > 0.45}

    def sample_input(self, rng, variables, level):
        h, w = _side(rng, level, lo=6), _side(rng, level, lo=6)
        grid = blank(h, w)
        wall = variables["wall_color"]
        n_boxes = rng.randint(1, 2 + round(3 * level))
        for i in range(n_boxes):
            bh, bw = rng.randint(3, max(3, min(h, 3 + round(5 * level)))), rng.randint(3, max(3, min(w, 3 + round(5 * level))))
            shape = [(r, c) for r in range(bh) for c in range(bw) if r in (0, bh - 1) or c in (0, bw - 1)]
            if variables["open_boxes"] and i > 0 and rng.random() < 0.4:
                side = rng.choice([cell for cell in shape if cell not in
                                   ((0, 0), (0, bw - 1), (bh - 1, 0), (bh - 1, bw - 1))])
                shape.remove(side)
            _place(rng, grid, shape, wall, margin=1)
        return grid

    def accept_pair(self, grid, output, variables):
        return output != grid

    def wrong_outputs(self, grid, variables, rng):
        fill, wall = variables["fill_color"], variables["wall_color"]
        inside = fill_enclosed(grid, fill)
        outside_filled = [[fill if (v == 0 and inside[r][c] == 0) else v for c, v in enumerate(row)]
                          for r, row in enumerate(grid)]
        wrong = [fill_enclosed(grid, wall), outside_filled]
        # only the first enclosed region filled
        first = copy_grid(grid)
        cells = [(r, c) for r, row in enumerate(inside) for c, v in enumerate(row) if v == fill and grid[r][c] == 0]
        if cells:
            seed = cells[0]
            stack, seen = [seed], {seed}
            while stack:
                r, c = stack.pop()
                first[r][c] = fill
                for n in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                    if n in set(cells) and n not in seen:
                        seen.add(n)
                        stack.append(n)
            wrong.append(first)
        return wrong

    def describe(self, variables, rng):
        f, w = COLOR_NAMES[variables["fill_color"]], COLOR_NAMES[variables["wall_color"]]
        return rng.choice([f"Fill the inside of each closed {w} box with {f}.",
                           f"color the holes inside the {w} shapes {f}",
                           f"Anything completely enclosed by {w} becomes {f}; boxes with a gap stay empty."])

    def input_chain(self, variables):
        chain = [f"Input grids contain hollow rectangles drawn in {COLOR_NAMES[variables['wall_color']]} "
                 "on a black background."]
        if variables["open_boxes"]:
            chain.append("Some rectangles have a gap in their outline.")
        return chain

    def transformation_chain(self, variables):
        return ["Black cells that cannot reach the border through black cells are enclosed.",
                f"Every enclosed black cell is filled with {COLOR_NAMES[variables['fill_color']]}."]


class Gravity(Family):
    name = "gravity"
    transform = gravity
    ease = 0.5

    def sample_variables(self, rng, level):
        return {"direction": rng.choice(("down", "down", "up", "left", "right"))}

    def sample_input(self, rng, variables, level):
        h, w = _side(rng, level, lo=4), _side(rng, level, lo=4)
        colors = _colors(rng, rng.randint(1, 3))
        density = rng.uniform(0.08, 0.25)
        return [[rng.choice(colors) if rng.random() < density else 0 for _ in range(w)] for _ in range(h)]

    def accept_pair(self, grid, output, variables):
        return output != grid and any(any(row) for row in grid)

    def wrong_outputs(self, grid, variables, rng):
        opposite = {"down": "up", "up": "down", "left": "right", "right": "left"}[variables["direction"]]
        perpendicular = "left" if variables["direction"] in ("down", "up") else "down"
        return [gravity(grid, opposite), gravity(grid, perpendicular)]

    def describe(self, variables, rng):
        d = variables["direction"]
        edge = {"down": "bottom", "up": "top", "left": "left side", "right": "right side"}[d]
        return rng.choice([f"Everything falls {d} as if by gravity.", f"move all coloured squares to the {edge}",
                           f"The blocks slide {d} until they hit the {edge} or another block."])

    def input_chain(self, variables):
        return ["Input grids have coloured cells scattered over a black background."]

    def transformation_chain(self, variables):
        return [f"Every coloured cell moves {variables['direction']} as far as it can.",
                "Cells keep their order along the direction of motion."]


class ScaleUp(Family):
    name = "scale_up"
    transform = scale_up
    ease = 1.4
    min_train, max_train = 2, 3

    def sample_variables(self, rng, level):
        return {"factor": rng.choice((2, 2, 3)) if level < 0.5 else rng.choice((2, 3, 3, 4))}

    def sample_input(self, rng, variables, level):
        top = min(MAX_SIDE // variables["factor"], 3 + round(5 * level))
        h, w = rng.randint(2, max(2, top)), rng.randint(2, max(2, top))
        colors = _colors(rng, rng.randint(1, 3)) + [0]
        return [[rng.choice(colors) for _ in range(w)] for _ in range(h)]

    def accept_pair(self, grid, output, variables):
        return any(any(row) for row in grid)

    def wrong_outputs(self, grid, variables, rng):
        f = variables["factor"]
        other = f + 1 if (f + 1) * max(grid_shape(grid)) <= MAX_SIDE else f - 1
        tiled = [list(row) * f for _ in range(f) for row in grid]
        wrong = [tiled]
        if other >= 2:
            wrong.append(scale_up(grid, other))
        return wrong

    def describe(self, variables, rng):
        f = variables["factor"]
        return rng.choice([f"Make every square a {f} by {f} block.", f"scale the picture up {f} times",
                           f"Each cell becomes a {f}x{f} square of the same colour."])

    def input_chain(self, variables):
        return ["Input grids are small patterns of a few colours."]

    def transformation_chain(self, variables):
        f = variables["factor"]
        return [f"Each input cell becomes a {f} x {f} block of its colour.",
                f"The output is {f} times taller and wider than the input."]


class ConnectPoints(Family):
    name = "connect_points"
    transform = connect_points
    ease = 0.6

    def sample_variables(self, rng, level):
        line = None if rng.random() < 0.6 else _colors(rng, 1)[0]
        return {"line_color": line, "lonely_points": level > 0.5}

    def sample_input(self, rng, variables, level):
        h, w = _side(rng, level, lo=5), _side(rng, level, lo=5)
        grid = blank(h, w)
        exclude = [] if variables["line_color"] is None else [variables["line_color"]]
        pool = [c for c in range(1, 10) if c not in exclude]
        rng.shuffle(pool)
        n_segments = rng.randint(1, 2 + round(4 * level))
        taken: set[tuple[int, int]] = set()
        for color in pool[:n_segments]:
            for _ in range(30):
                horizontal = rng.random() < 0.5
                length = rng.randint(3, max(3, (w if horizontal else h)))
                if horizontal:
                    if length > w:
                        continue
                    r, c = rng.randrange(h), rng.randint(0, w - length)
                    cells = [(r, c + i) for i in range(length)]
                else:
                    if length > h:
                        continue
                    r, c = rng.randint(0, h - length), rng.randrange(w)
                    cells = [(r + i, c) for i in range(length)]
                halo = {(a + da, b + db) for a, b in cells for da in (-1, 0, 1) for db in (-1, 0, 1)}
                if halo & taken:
                    continue
                taken |= set(cells)
                grid[cells[0][0]][cells[0][1]] = color
                grid[cells[-1][0]][cells[-1][1]] = color
                break
        if variables["lonely_points"]:
            for color in pool[n_segments:n_segments + rng.randint(1, 2)]:
                free = [(r, c) for r in range(h) for c in range(w) if (r, c) not in taken and grid[r][c] == 0]
                if free:
                    r, c = rng.choice(free)
                    grid[r][c] = color
                    taken.add((r, c))
        return grid

    def accept_pair(self, grid, output, variables):
        return output != grid

    def wrong_outputs(self, grid, variables, rng):
        h, w = grid_shape(grid)
        extended = copy_grid(grid)
        line = variables["line_color"]
        where: dict[int, list[tuple[int, int]]] = {}
        for r in range(h):
            for c in range(w):
                if grid[r][c]:
                    where.setdefault(grid[r][c], []).append((r, c))
        horizontal_only = connect_points(grid, line)
        for color, cells in where.items():
            paint = color if line is None else line
            if len(cells) == 2 and cells[0][0] == cells[1][0]:
                for c in range(w):
                    if extended[cells[0][0]][c] == 0:
                        extended[cells[0][0]][c] = paint
            elif len(cells) == 2 and cells[0][1] == cells[1][1]:
                for r in range(h):
                    if extended[r][cells[0][1]] == 0:
                        extended[r][cells[0][1]] = paint
                    if horizontal_only[r][cells[0][1]] == paint and grid[r][cells[0][1]] == 0:
                        horizontal_only[r][cells[0][1]] = 0
        wrong_color = connect_points(grid, None if line is not None else rng.choice([c for c in range(1, 10)]))
        return [extended, horizontal_only, wrong_color]

    def describe(self, variables, rng):
        line = variables["line_color"]
        how = "in the same colour" if line is None else f"with a {COLOR_NAMES[line]} line"
        return rng.choice([f"Connect each pair of matching dots {how}.",
                           f"draw a straight line between the two squares of the same colour {how}",
                           f"Join the dots that line up, {how}."])

    def input_chain(self, variables):
        chain = ["Input grids contain pairs of same-coloured cells aligned on a row or a column."]
        if variables["lonely_points"]:
            chain.append("Some colours appear only once.")
        return chain

    def transformation_chain(self, variables):
        line = variables["line_color"]
        paint = "the pair's colour" if line is None else COLOR_NAMES[line]
        return [f"The cells strictly between the two cells of each pair are painted {paint}.",
                "Single cells stay as they are."]


class CountToBar(Family):
    name = "count_to_bar"
    transform = count_to_bar
    ease = -0.2

    def sample_variables(self, rng, level):
        color, *distractors = _colors(rng, 1 + rng.randint(1, 1 + round(2 * level)))
        return {"color": color, "orientation": rng.choice(("row", "column")), "distractor_colors": distractors}

    def sample_input(self, rng, variables, level):
        h, w = _side(rng, level, lo=4, hi=16), _side(rng, level, lo=4, hi=16)
        grid = blank(h, w)
        cells = [(r, c) for r in range(h) for c in range(w)]
        rng.shuffle(cells)
        n = rng.randint(1, min(4 + round(8 * level), len(cells) // 3))
        k = rng.randint(0, min(2 + round(8 * level), len(cells) // 3))
        for r, c in cells[:n]:
            grid[r][c] = variables["color"]
        for r, c in cells[n:n + k]:
            grid[r][c] = rng.choice(variables["distractor_colors"])
        return grid

    def accept_pair(self, grid, output, variables):
        return output != grid and 1 <= max(grid_shape(output)) <= MAX_SIDE

    def accept_episode(self, pairs, variables):
        counts = [max(grid_shape(out)) for _, out in pairs]
        return len(set(counts)) == len(counts)  # every pair a different count: the rule is identifiable

    def wrong_outputs(self, grid, variables, rng):
        color, orientation = variables["color"], variables["orientation"]
        n = sum(v == color for row in grid for v in row)
        total = sum(v != 0 for row in grid for v in row)
        other = "column" if orientation == "row" else "row"
        wrong = [count_to_bar(grid, color, other)]
        if total != n and total <= MAX_SIDE:
            wrong.append([[color] * total] if orientation == "row" else [[color] for _ in range(total)])
        m = n + 1 if n < MAX_SIDE else n - 1
        wrong.append([[color] * m] if orientation == "row" else [[color] for _ in range(m)])
        return wrong

    def describe(self, variables, rng):
        c = COLOR_NAMES[variables["color"]]
        shape = "one row" if variables["orientation"] == "row" else "one column"
        return rng.choice([f"Count the {c} squares and make a {shape} bar that long.",
                           f"the output is {shape} of {c}, one cell per {c} square in the input",
                           f"Number of {c} cells = length of the {c} line."])

    def input_chain(self, variables):
        return [f"Input grids have scattered {COLOR_NAMES[variables['color']]} cells and cells of other colours."]

    def transformation_chain(self, variables):
        c = COLOR_NAMES[variables["color"]]
        shape = "1 x n" if variables["orientation"] == "row" else "n x 1"
        return [f"Count the {c} cells: n.", f"The output is a {shape} grid filled with {c}."]


FAMILIES: dict[str, Family] = {f.name: f for f in (RecolorByRule(), FlipGrid(), FillEnclosed(), Gravity(),
                                                   ScaleUp(), ConnectPoints(), CountToBar())}


# ---------------------------------------------------------------------------------------------------------
# Generated tasks


@dataclass(frozen=True)
class GeneratedTask:
    task_id: str
    family: str
    split: str  # "training" | "evaluation": which pool of the simulated study it belongs to
    level: float
    variables: dict[str, Any]
    train: tuple[tuple[Grid, Grid], ...]
    test: tuple[tuple[Grid, Grid], ...]
    created_at: str = ""
    index: int = 0

    @property
    def file_name(self) -> str:
        return f"{self.task_id}.json"

    @property
    def test_input(self) -> Grid:
        return self.test[0][0]

    @property
    def test_output(self) -> Grid:
        return self.test[0][1]

    def to_arc_json(self) -> dict[str, Any]:
        return {"train": [{"input": i, "output": o} for i, o in self.train],
                "test": [{"input": i, "output": o} for i, o in self.test]}

    def code_text(self) -> str:
        return FAMILIES[self.family].code_text(self.variables)

    def tgi_row(self) -> dict[str, str]:
        fam = FAMILIES[self.family]
        return {
            "task_id": self.task_id, "created_at": self.created_at, "generator_name": self.family,
            "input_reasoning_chain": json.dumps(fam.input_chain(self.variables)),
            "transformation_reasoning_chain": json.dumps(fam.transformation_chain(self.variables)),
            "task_variables": json.dumps(self.variables, sort_keys=True),
            "code": self.code_text(), "data": json.dumps(self.to_arc_json(), separators=(",", ":")),
        }


def derive_rng(*material: Any) -> random.Random:
    """A ``random.Random`` seeded from a stable hash of ``material`` (independent of PYTHONHASHSEED)."""
    digest = hashlib.sha256(repr(material).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def task_id_for(*material: Any) -> str:
    """An ARC-style task id: 8 lowercase hex characters from a stable hash of ``material``."""
    return hashlib.sha256(repr(("task-id", *material)).encode()).hexdigest()[:8]


def generate_task(family: Family | str, rng: random.Random, *, level: float, task_id: str,
                  split: str = "training", n_train: int | None = None, created_at: str = "",
                  index: int = 0, max_episodes: int = 60) -> GeneratedTask:
    """Sample one task of ``family`` (see the module docstring) and run its witness check."""
    fam = FAMILIES[family] if isinstance(family, str) else family
    for _ in range(max_episodes):
        variables = fam.sample_variables(rng, level)
        count = n_train if n_train is not None else rng.randint(fam.min_train, fam.max_train)
        pairs: list[tuple[Grid, Grid]] = []
        inputs_seen: set[str] = set()
        for _ in range(count + 1):
            for _ in range(40):
                grid = fam.sample_input(rng, variables, level)
                key = json.dumps(grid)
                if key in inputs_seen:
                    continue
                output = fam.apply(grid, variables)
                if _sizes_ok(grid) and _sizes_ok(output) and fam.accept_pair(grid, output, variables):
                    pairs.append((grid, output))
                    inputs_seen.add(key)
                    break
            else:
                break
        if len(pairs) == count + 1 and fam.accept_episode(pairs, variables):
            task = GeneratedTask(task_id=task_id, family=fam.name, split=split, level=round(level, 4),
                                 variables=variables, train=tuple(pairs[:-1]), test=(pairs[-1],),
                                 created_at=created_at, index=index)
            validate_arc_task(task.to_arc_json())
            witness_check(task)
            return task
    raise TaskInvalid(f"{fam.name}: no valid episode in {max_episodes} tries at level {level:.2f}")


def _sizes_ok(grid: Grid) -> bool:
    h, w = grid_shape(grid)
    return 1 <= h <= MAX_SIDE and 1 <= w <= MAX_SIDE and all(len(row) == w for row in grid)


def validate_arc_task(obj: Any) -> None:
    """§E: `train` and `test` non-empty lists of pairs; grids rectangular, 1-30 per side, cells ints 0-9."""
    if not isinstance(obj, dict) or not {"train", "test"} <= set(obj):
        raise TaskInvalid("a task is an object with train and test")
    for split in ("train", "test"):
        pairs = obj[split]
        if not isinstance(pairs, list) or not pairs:
            raise TaskInvalid(f"{split} must be a non-empty list")
        for i, pair in enumerate(pairs):
            for key in ("input", "output"):
                grid = pair.get(key)
                where = f"{split}[{i}].{key}"
                if not isinstance(grid, list) or not grid or not all(isinstance(r, list) for r in grid):
                    raise TaskInvalid(f"{where} is not a list of rows")
                if not _sizes_ok(grid):
                    raise TaskInvalid(f"{where} is not rectangular with sides 1-30")
                if any(type(v) is not int or not 0 <= v <= 9 for row in grid for v in row):
                    raise TaskInvalid(f"{where} has a cell that is not an integer 0-9")


def witness_check(task: GeneratedTask) -> None:
    """Executable witness: the transformation reproduces every stored output, train and test.

    Runs twice on the task as it would be read back (JSON round trip of the task and of its variables):
    once through the registered family function, once by executing the exported ARC-TGI ``code`` text in a
    fresh namespace (our own generated source; ingest never executes it). Raises WitnessError.
    """
    fam = FAMILIES[task.family]
    data = json.loads(json.dumps(task.to_arc_json()))
    variables = json.loads(json.dumps(task.variables))
    namespace: dict[str, Any] = {"__builtins__": __builtins__}
    exec(compile(fam.code_text(variables), f"<code of {task.task_id}>", "exec"), namespace)  # noqa: S102
    from_code = functools.partial(namespace["transform_input"], None)  # (`self`, unused: formats.md §F)
    for split in ("train", "test"):
        for i, pair in enumerate(data[split]):
            for name, fn in (("family transform", lambda g: fam.apply(g, variables)), ("code text", from_code)):
                got = fn(copy_grid(pair["input"]))
                if got != pair["output"]:
                    raise WitnessError(f"task {task.task_id} ({task.family}) {split}[{i}]: the {name} gives "
                                       f"{got!r}, the stored output is {pair['output']!r}")
            if pair["output"] == pair["input"]:
                raise WitnessError(f"task {task.task_id} {split}[{i}]: the output equals the input")


# ---------------------------------------------------------------------------------------------------------
# Task pools and files

# Difficulty levels per split: evaluation tasks are larger and have more objects (the H-ARC paper finds
# larger output grids on evaluation tasks).
LEVELS = {"training": (0.05, 0.65), "evaluation": (0.3, 1.0)}


def generate_task_pool(seed: int, n_training: int, n_evaluation: int) -> list[GeneratedTask]:
    """``n_training`` + ``n_evaluation`` tasks, families in rotation, deterministic per seed; unique ids."""
    tasks: list[GeneratedTask] = []
    seen: set[str] = set()
    names = sorted(FAMILIES)
    for split, n in (("training", n_training), ("evaluation", n_evaluation)):
        order = derive_rng(seed, "family-order", split)
        rotation = names[:]
        order.shuffle(rotation)
        lo, hi = LEVELS[split]
        for i in range(n):
            rng = derive_rng(seed, "task", split, i)
            family = rotation[i % len(rotation)]
            level = rng.uniform(lo, hi)
            salt = 0
            task_id = task_id_for(seed, split, i, salt)
            while task_id in seen:
                salt += 1
                task_id = task_id_for(seed, split, i, salt)
            seen.add(task_id)
            created = (TGI_EPOCH + timedelta(seconds=len(tasks))).isoformat()
            tasks.append(generate_task(family, rng, level=level, task_id=task_id, split=split,
                                       created_at=created, index=len(tasks)))
    return tasks


def task_json_text(task: GeneratedTask) -> str:
    return json.dumps(task.to_arc_json(), separators=(",", ":")) + "\n"


def write_task_files(folder: Path, tasks: Sequence[GeneratedTask]) -> list[Path]:
    """One ARC task JSON file per task, named ``<task_id>.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for task in tasks:
        path = folder / task.file_name
        write_text(path, task_json_text(task))
        paths.append(path)
    return paths


def tgi_csv_text(tasks: Sequence[GeneratedTask]) -> str:
    """The ARC-TGI export CSV (§F) of the tasks: the code column is the transformation's source text."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=TGI_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for task in tasks:
        writer.writerow(task.tgi_row())
    return buf.getvalue()


def write_tgi_csv(path: Path, tasks: Sequence[GeneratedTask]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, tgi_csv_text(tasks))
    return path
