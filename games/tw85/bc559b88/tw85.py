"""TW85 "Twin Walkers" - an original arcstudy game (MIT licence).

Keyboard only: ACTION1 up, ACTION2 down, ACTION3 left, ACTION4 right.

Two walkers obey every key press at the same time; bring each one onto the ring of its own
colour, at the same moment. A walker that is blocked (by a wall, a closed door or the other
walker) stays put while the other one moves, which is how the two get out of step. Later levels
add:
  * pits: a walker that steps into a pit falls, and the level is lost (GAME_OVER);
  * the mirrored twin: in levels with a purple frame the second walker mirrors left and right
    (it goes left when the first goes right);
  * plates and doors: every door is open while a walker stands on a plate; if the plate is
    released while the other walker stands in a doorway, the closing door crushes it (GAME_OVER).
RESET restarts the level.
"""

import numpy as np
from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite

FLOOR, WALL, PIT, PLATE, DOOR = range(5)
LEGEND = {".": FLOOR, "#": WALL, "_": PIT, "p": PLATE, "d": DOOR, "A": FLOOR, "B": FLOOR, "a": FLOOR, "b": FLOOR}

FLOOR_COLOUR = 0
WALL_COLOUR = 3
PIT_COLOUR = 5
PLATE_COLOUR = 13
DOOR_COLOUR = 12
DOOR_OPEN_COLOUR = 2
WALKER_A = 9
WALKER_B = 12
RING_A = 10
RING_B = 7
MIRROR_FRAME = 15
LETTERBOX = 5

DIRECTIONS = {
    GameAction.ACTION1: (0, -1),
    GameAction.ACTION2: (0, 1),
    GameAction.ACTION3: (-1, 0),
    GameAction.ACTION4: (1, 0),
}


def parse(rows):
    """A map -> (width, cells, a, b, goal_a, goal_b) with positions as cell indices."""
    width = len(rows[0])
    cells, found = [], {}
    for y, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"row {y} has length {len(row)}, expected {width}")
        for x, ch in enumerate(row):
            cells.append(LEGEND[ch])
            if ch in "ABab":
                found[ch] = y * width + x
    return width, tuple(cells), found["A"], found["B"], found["a"], found["b"]


def doors_open(cells, a, b):
    return cells[a] == PLATE or cells[b] == PLATE


def walk(cells, width, a, b, dx, dy, mirrored):
    """Move both walkers; returns (a, b, fallen) where fallen is True if a walker fell or was crushed."""
    height = len(cells) // width
    open_now = doors_open(cells, a, b)

    def target(pos, mx):
        x, y = pos % width + mx, pos // width + dy
        if not (0 <= x < width and 0 <= y < height):
            return pos
        t = cells[y * width + x]
        if t == WALL or (t == DOOR and not open_now):
            return pos
        return y * width + x

    ta = target(a, dx)
    tb = target(b, -dx if mirrored else dx)
    if ta == tb:
        ta, tb = a, b
    else:
        if ta == b and tb == b:
            ta = a
        if tb == a and ta == a:
            tb = b
        if ta == b and tb == a:
            ta, tb = a, b
    fallen = cells[ta] == PIT or cells[tb] == PIT
    if not fallen and not doors_open(cells, ta, tb) and (cells[ta] == DOOR or cells[tb] == DOOR):
        fallen = True  # a door shut on a walker
    return ta, tb, fallen


COLOURS = {FLOOR: FLOOR_COLOUR, WALL: WALL_COLOUR, PIT: PIT_COLOUR, PLATE: PLATE_COLOUR, DOOR: DOOR_COLOUR}

# (map, mirrored)
LEVEL_MAPS = [
    # 1: tutorial - both walkers go the same way
    (
        [
            "#######",
            "#A...a#",
            "#######",
            "#B...b#",
            "#######",
        ],
        False,
    ),
    # 2: walls put the walkers out of step; pits
    (
        [
            "########",
            "#.A._..#",
            "#......#",
            "#b..a__#",
            "#_B##..#",
            "########",
        ],
        False,
    ),
    # 3: a bigger yard
    (
        [
            "#########",
            "#..A....#",
            "#_##.#._#",
            "#b...#..#",
            "#B#_..a.#",
            "#._.....#",
            "#########",
        ],
        False,
    ),
    # 4: the mirrored twin
    (
        [
            "########",
            "#_#Bb..#",
            "#..._..#",
            "#..#..##",
            "#_A..a##",
            "########",
        ],
        True,
    ),
    # 5: a plate and a door
    (
        [
            "#########",
            "#.bd..#p#",
            "#_..._a.#",
            "#.A_..B.#",
            "#._...#.#",
            "#########",
        ],
        False,
    ),
    # 6: mirrored, with a plate and a door
    (
        [
            "#########",
            "#b..#...#",
            "#pAa....#",
            "#..._.#.#",
            "#..#Bd#_#",
            "#.._....#",
            "#########",
        ],
        True,
    ),
    # 7: mirrored, two plates and two doors
    (
        [
            "##########",
            "#p.#.._.##",
            "#...db._.#",
            "#__..#.A.#",
            "#._..a_..#",
            "#.._d.B.p#",
            "##########",
        ],
        True,
    ),
]


def build_level(rows, mirrored, name):
    width, cells, _, _, _, _ = parse(rows)
    height = len(cells) // width
    return Level(sprites=[], grid_size=(width, height), data={"map": rows, "mirrored": mirrored}, name=name)


levels = [build_level(rows, mirrored, f"twins-{n + 1}") for n, (rows, mirrored) in enumerate(LEVEL_MAPS)]


class Tw85(ARCBaseGame):
    def __init__(self):
        self.width = 1
        self.cells = ()
        self.a = self.b = self.goal_a = self.goal_b = 0
        self.mirrored = False
        camera = Camera(background=FLOOR_COLOUR, letter_box=LETTERBOX)
        super().__init__(game_id="tw85", levels=levels, camera=camera, available_actions=[1, 2, 3, 4])

    def on_set_level(self, level):
        self.width, self.cells, self.a, self.b, self.goal_a, self.goal_b = parse(level.get_data("map"))
        self.mirrored = bool(level.get_data("mirrored"))
        self.camera.letter_box = MIRROR_FRAME if self.mirrored else LETTERBOX
        level = self.current_level
        for sprite in level.get_sprites():
            level.remove_sprite(sprite)
        self.board = Sprite([[FLOOR_COLOUR]], name="board", layer=0, tags=["board"])
        self.ring_a = Sprite([[RING_A]], name="ring_a", layer=1, tags=["goal"])
        self.ring_b = Sprite([[RING_B]], name="ring_b", layer=1, tags=["goal"])
        self.walker_a = Sprite([[WALKER_A]], name="walker_a", layer=2, tags=["walker"])
        self.walker_b = Sprite([[WALKER_B]], name="walker_b", layer=2, tags=["walker"])
        for sprite in (self.board, self.ring_a, self.ring_b, self.walker_a, self.walker_b):
            level.add_sprite(sprite)
        self.redraw()

    def place(self, sprite, pos):
        sprite.set_position(pos % self.width, pos // self.width)

    def redraw(self):
        height = len(self.cells) // self.width
        colours = [COLOURS[c] for c in self.cells]
        if doors_open(self.cells, self.a, self.b):
            colours = [DOOR_OPEN_COLOUR if c == DOOR else k for c, k in zip(self.cells, colours, strict=True)]
        self.board.pixels = np.array(colours, dtype=np.int8).reshape(height, self.width)
        self.place(self.ring_a, self.goal_a)
        self.place(self.ring_b, self.goal_b)
        self.place(self.walker_a, self.a)
        self.place(self.walker_b, self.b)

    def step(self):
        if self.action.id in DIRECTIONS:
            dx, dy = DIRECTIONS[self.action.id]
            a, b, fallen = walk(self.cells, self.width, self.a, self.b, dx, dy, self.mirrored)
            if (a, b) != (self.a, self.b) or fallen:
                self.a, self.b = a, b
                self.redraw()
                if fallen:
                    self.walker_a.set_visible(self.cells[a] not in (PIT, DOOR))
                    self.walker_b.set_visible(self.cells[b] not in (PIT, DOOR))
                    self.lose()
                elif a == self.goal_a and b == self.goal_b:
                    self.next_level()
        self.complete_action()
