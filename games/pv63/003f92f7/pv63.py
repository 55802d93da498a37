"""PV63 "Paver" - an original arcstudy game (MIT licence).

Keyboard only: ACTION1 up, ACTION2 down, ACTION3 left, ACTION4 right, ACTION7 undo.

Walk over every bare tile to pave it. Paved tiles cannot be entered again, so the route must
cover the whole floor in one stroke. Later levels add:
  * gates: a gate in a wall opens once every tile on the walker's side of it is paved, and the
    walker may then step through (paving the gate);
  * ice: stepping on ice paves it and the walker keeps sliding the same way while the next tile
    is open (the slide paves every tile it crosses);
  * thick tiles: the first crossing only cracks them (they turn into bare tiles), a second
    crossing paves them, so routes may cross there.
Every move and every undo spends one unit of energy (the bar along the top edge). Running out of
energy before the floor is paved loses the game (GAME_OVER); RESET restarts the level with full
energy. Undo takes back moves one at a time, as far back as the level start, but does not give
the energy back.
"""

import numpy as np
from arcengine import ARCBaseGame, Camera, GameAction, Level, RenderableUserDisplay, Sprite

# cell codes of the logical board
VOID, WALL, BARE, PAVED, ICE, THICK, GATE = range(7)
OPEN = (BARE, ICE, THICK)  # tiles the walker may enter (a gate only when it is open)
UNPAVED = (BARE, ICE, THICK, GATE)

COLOURS = {VOID: 0, WALL: 5, BARE: 9, PAVED: 4, ICE: 8, THICK: 6, GATE: 12}
PLAYER_COLOUR = 2
ENERGY_COLOUR = 3
ENERGY_EMPTY = 5
LETTERBOX = 0

LEGEND = {" ": VOID, "#": WALL, ".": BARE, "S": PAVED, "~": ICE, "=": THICK, "|": GATE}

DIRECTIONS = {
    GameAction.ACTION1: (0, -1),
    GameAction.ACTION2: (0, 1),
    GameAction.ACTION3: (-1, 0),
    GameAction.ACTION4: (1, 0),
}


def parse(rows):
    """A map (list of equal-length strings) -> (width, height, cells tuple, start index)."""
    width, height = len(rows[0]), len(rows)
    cells = []
    start = None
    for y, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"row {y} has length {len(row)}, expected {width}")
        for x, ch in enumerate(row):
            cells.append(LEGEND[ch])
            if ch == "S":
                start = y * width + x
    if start is None:
        raise ValueError("map has no start tile 'S'")
    return width, height, tuple(cells), start


def side_paved(cells, width, pos):
    """True when every tile connected to the walker (gates and walls excepted) is paved."""
    height = len(cells) // width
    seen = {pos}
    todo = [pos]
    while todo:
        i = todo.pop()
        if cells[i] in (BARE, ICE, THICK):
            return False
        x, y = i % width, i // width
        for lx, ly in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            j = ly * width + lx
            if 0 <= lx < width and 0 <= ly < height and j not in seen and cells[j] not in (VOID, WALL, GATE):
                seen.add(j)
                todo.append(j)
    return True


def move(cells, width, pos, dx, dy):
    """Apply one move; returns (new cells tuple, new position) or None when the move is blocked."""
    height = len(cells) // width
    x, y = pos % width, pos // width
    nx, ny = x + dx, y + dy
    if not (0 <= nx < width and 0 <= ny < height):
        return None
    target = cells[ny * width + nx]
    if target == GATE:
        if not side_paved(cells, width, pos):
            return None
        board = list(cells)
        board[ny * width + nx] = PAVED
        return tuple(board), ny * width + nx
    if target not in OPEN:
        return None
    board = list(cells)
    while True:
        i = ny * width + nx
        kind = board[i]
        if kind == THICK:
            board[i] = BARE
            return tuple(board), i
        board[i] = PAVED
        if kind != ICE:
            return tuple(board), i
        tx, ty = nx + dx, ny + dy
        if not (0 <= tx < width and 0 <= ty < height) or board[ty * width + tx] not in OPEN:
            return tuple(board), i
        nx, ny = tx, ty


def solved(cells):
    return not any(c in UNPAVED for c in cells)


def board_pixels(cells, width):
    return [[COLOURS[c] for c in cells[y * width : (y + 1) * width]] for y in range(len(cells) // width)]


# ----------------------------------------------------------------------------- levels
# (map, energy). Energy = moves of the shortest solution + slack for a few undos.
LEVEL_MAPS = [
    # 1: tutorial - one winding path
    (
        [
            "#######",
            "#S...##",
            "####.##",
            "#....##",
            "#.#####",
            "#....##",
            "#######",
        ],
        16,
    ),
    # 2: gates - pave the first room completely, ending next to the gate
    (
        [
            "###########",
            "#...##....#",
            "#....|...##",
            "#S...#....#",
            "#....#....#",
            "#....#....#",
            "###########",
        ],
        48,
    ),
    # 3: ice
    (
        [
            "###########",
            "#S...#~~#.#",
            "#.~..|....#",
            "#~.~##.~~.#",
            "#....#....#",
            "#..~.#.~~.#",
            "###########",
        ],
        42,
    ),
    # 4: thick tiles
    (
        [
            "###########",
            "#S...#....#",
            "#....|.=.##",
            "#....#.=..#",
            "#.=..#....#",
            "###########",
        ],
        43,
    ),
    # 5: ice and thick tiles
    (
        [
            "###########",
            "#S...#..==#",
            "#..=~|~..~#",
            "#=~=~#~...#",
            "#...~#~..~#",
            "###########",
        ],
        44,
    ),
    # 6: ice and thick tiles, denser
    (
        [
            "###########",
            "#S=..#.~..#",
            "#==.=|.~.~#",
            "#..=~#.~..#",
            "#...~#=...#",
            "###########",
        ],
        43,
    ),
]


def build_level(rows, energy, name):
    width, height, cells, start = parse(rows)
    board = Sprite(board_pixels(cells, width), name="board", layer=0, tags=["board"])
    x, y = start % width, start // width
    walker = Sprite([[PLAYER_COLOUR]], name="walker", x=x, y=y, layer=2, tags=["walker"])
    return Level(sprites=[board, walker], grid_size=(width, height), data={"energy": energy, "map": rows}, name=name)


levels = [build_level(rows, energy, f"paver-{n + 1}") for n, (rows, energy) in enumerate(LEVEL_MAPS)]


class EnergyBar(RenderableUserDisplay):
    """One pixel per unit of energy along the top row of the display (grey: spent)."""

    def __init__(self, game):
        self.game = game

    def render_interface(self, frame):
        total = min(64, self.game.max_energy)
        left = max(0, min(total, self.game.energy))
        frame[0, :total] = ENERGY_EMPTY
        frame[0, :left] = ENERGY_COLOUR
        return frame


class Pv63(ARCBaseGame):
    def __init__(self):
        self.cells = ()
        self.width = 1
        self.pos = 0
        self.energy = 0
        self.max_energy = 0
        self.history = []
        camera = Camera(background=COLOURS[VOID], letter_box=LETTERBOX, interfaces=[EnergyBar(self)])
        super().__init__(game_id="pv63", levels=levels, camera=camera, available_actions=[1, 2, 3, 4, 7])

    def on_set_level(self, level):
        width, _, cells, start = parse(level.get_data("map"))
        self.cells = cells
        self.width = width
        self.pos = start
        self.energy = self.max_energy = level.get_data("energy")
        self.history = []
        self.board = level.get_sprites_by_name("board")[0]
        self.walker = level.get_sprites_by_name("walker")[0]
        self.redraw()

    def redraw(self):
        self.board.pixels = np.array(board_pixels(self.cells, self.width), dtype=np.int8)
        self.walker.set_position(self.pos % self.width, self.pos // self.width)

    def spend(self):
        self.energy -= 1
        if solved(self.cells):
            self.next_level()
        elif self.energy <= 0:
            self.lose()

    def step(self):
        action = self.action.id
        if action == GameAction.ACTION7:
            if self.history:
                self.cells, self.pos = self.history.pop()
                self.redraw()
                self.spend()
        elif action in DIRECTIONS:
            dx, dy = DIRECTIONS[action]
            result = move(self.cells, self.width, self.pos, dx, dy)
            if result is not None:
                self.history.append((self.cells, self.pos))
                self.cells, self.pos = result
                self.redraw()
                self.spend()
        self.complete_action()
