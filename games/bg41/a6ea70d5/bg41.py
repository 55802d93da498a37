"""BG41 "Bridge Keeper" - an original arcstudy game (MIT licence).

Keyboard and click: ACTION1 up, ACTION2 down, ACTION3 left, ACTION4 right move the walker;
ACTION6 clicks a lever.

The walker crosses islands over a chasm to reach the flag. Stepping into the chasm is a fall and
the level is lost (GAME_OVER). Later levels add:
  * bridges and levers: every bridge has a colour, and clicking the lever of that colour (the
    boxes under the board) extends or retracts all bridges of the colour at once; a bridge that
    retracts under the walker drops it into the chasm;
  * cracked tiles: they hold the walker once and crumble into the chasm when it steps off;
  * gems: the flag only opens (turns bright) once every gem has been picked up by walking over it.
RESET restarts the level.
"""

import numpy as np
from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite

PIT, FLOOR, CRACKED, FLAG = range(4)
BRIDGE = 10  # + colour index (0..3)
GEM_CHAR = "*"

LEGEND = {"_": PIT, ".": FLOOR, "x": CRACKED, "F": FLAG, "S": FLOOR, GEM_CHAR: FLOOR}
BRIDGE_CHARS = {"r": 0, "b": 1, "g": 2, "y": 3}  # lower case: extended at start; upper case: retracted

PIT_COLOUR = 5
FLOOR_COLOUR = 3
CRACKED_COLOUR = 4
FLAG_SHUT = 2
FLAG_OPEN = 14
WALKER_COLOUR = 0
GEM_COLOUR = 15
BRIDGE_COLOURS = {0: 8, 1: 9, 2: 10, 3: 11}
BRIDGE_GONE = 5
LEVER_BACK = 5
LETTERBOX = 5

DIRECTIONS = {
    GameAction.ACTION1: (0, -1),
    GameAction.ACTION2: (0, 1),
    GameAction.ACTION3: (-1, 0),
    GameAction.ACTION4: (1, 0),
}


def parse(rows):
    """A map -> (width, cells, extended colours, start, gems)."""
    width = len(rows[0])
    cells, gems = [], []
    extended = set()
    start = None
    for y, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"row {y} has length {len(row)}, expected {width}")
        for x, ch in enumerate(row):
            i = y * width + x
            if ch.lower() in BRIDGE_CHARS:
                colour = BRIDGE_CHARS[ch.lower()]
                cells.append(BRIDGE + colour)
                if ch.islower():
                    extended.add(colour)
            else:
                cells.append(LEGEND[ch])
            if ch == "S":
                start = i
            elif ch == GEM_CHAR:
                gems.append(i)
    return width, tuple(cells), frozenset(extended), start, frozenset(gems)


def colours_in(cells):
    return sorted({c - BRIDGE for c in cells if c >= BRIDGE})


def standable(cells, extended, i):
    c = cells[i]
    if c >= BRIDGE:
        return (c - BRIDGE) in extended
    return c != PIT


def walk(cells, width, extended, pos, gems, dx, dy):
    """Move the walker; returns (cells, pos, gems, fell) or None when the move leaves the board."""
    height = len(cells) // width
    x, y = pos % width + dx, pos // width + dy
    if not (0 <= x < width and 0 <= y < height):
        return None
    target = y * width + x
    board = list(cells)
    if board[pos] == CRACKED:
        board[pos] = PIT
    fell = not standable(board, extended, target)
    return tuple(board), target, gems - {target}, fell


def toggle(cells, extended, pos, colour):
    """Flip a colour's bridges; returns (extended, fell)."""
    extended = extended ^ {colour}
    return extended, not standable(cells, extended, pos)


LEVEL_MAPS = [
    # 1: tutorial - walk to the flag
    [
        "_______",
        "_S...F_",
        "_______",
    ],
    # 2: a red bridge and its lever
    [
        "._F_Rr.",
        "_RR.r_.",
        "_..__..",
        ".__SRR_",
        "__R___.",
    ],
    # 3: two colours
    [
        "..r..__.",
        "R___R_b_",
        "Fb_.r.S.",
        "..._.___",
        "._..___.",
        "B._._...",
    ],
    # 4: cracked tiles
    [
        "__.x_xx",
        "F.x_.xx",
        "._xx._.",
        "___.._S",
        "._.___.",
        "_.x.._.",
    ],
    # 5: gems open the flag
    [
        "_.._.R.r",
        "__*r*_Sr",
        "_._____r",
        "_.._._.F",
        "..._r.__",
        "R_R._.._",
    ],
    # 6: cracked tiles and two colours
    [
        ".b.xr.__",
        "x__...__",
        "B.__.___",
        "_.x_bbr_",
        "_..__rr.",
        "_.FxR_.S",
    ],
    # 7: everything
    [
        "._.x__.x.",
        "_.x*_FB..",
        "._.xS._R_",
        "_....x_R_",
        "._rb.._.R",
        "_______.*",
    ],
]


def build_level(rows, name):
    width, cells, _, _, _ = parse(rows)
    height = len(cells) // width
    return Level(sprites=[], grid_size=(width, height + 2), data={"map": rows}, name=name)


levels = [build_level(rows, f"bridges-{n + 1}") for n, rows in enumerate(LEVEL_MAPS)]


class Bg41(ARCBaseGame):
    def __init__(self):
        self.width = 1
        self.cells = ()
        self.extended = frozenset()
        self.pos = 0
        self.gems = frozenset()
        camera = Camera(background=PIT_COLOUR, letter_box=LETTERBOX)
        super().__init__(game_id="bg41", levels=levels, camera=camera, available_actions=[1, 2, 3, 4, 6])

    def on_set_level(self, level):
        self.width, self.cells, self.extended, self.pos, self.gems = parse(level.get_data("map"))
        height = len(self.cells) // self.width
        level = self.current_level
        for sprite in level.get_sprites():
            level.remove_sprite(sprite)
        self.board = Sprite([[PIT_COLOUR]], name="board", layer=0, tags=["board"])
        level.add_sprite(self.board)
        self.gem_sprites = {}
        for i in sorted(self.gems):
            gem = Sprite([[GEM_COLOUR]], name=f"gem{i}", x=i % self.width, y=i // self.width, layer=1, tags=["gem"])
            self.gem_sprites[i] = gem
            level.add_sprite(gem)
        self.walker = Sprite([[WALKER_COLOUR]], name="walker", layer=2, tags=["walker"])
        level.add_sprite(self.walker)
        for k, colour in enumerate(colours_in(self.cells)):
            lever = Sprite([[BRIDGE_COLOURS[colour]]], name=f"lever{colour}", x=1 + 2 * k, y=height + 1, layer=1,
                           tags=["lever", "sys_click"])
            level.add_sprite(lever)
        self.redraw()

    def redraw(self):
        height = len(self.cells) // self.width
        px = np.full((height, self.width), PIT_COLOUR, dtype=np.int8)
        for i, c in enumerate(self.cells):
            y, x = divmod(i, self.width)
            if c == FLOOR:
                px[y, x] = FLOOR_COLOUR
            elif c == CRACKED:
                px[y, x] = CRACKED_COLOUR
            elif c == FLAG:
                px[y, x] = FLAG_SHUT if self.gems else FLAG_OPEN
            elif c >= BRIDGE:
                px[y, x] = BRIDGE_COLOURS[c - BRIDGE] if (c - BRIDGE) in self.extended else BRIDGE_GONE
        self.board.pixels = px
        for i, gem in self.gem_sprites.items():
            gem.set_visible(i in self.gems)
        self.walker.set_position(self.pos % self.width, self.pos // self.width)

    def step(self):
        action = self.action.id
        fell = False
        changed = False
        if action in DIRECTIONS:
            dx, dy = DIRECTIONS[action]
            result = walk(self.cells, self.width, self.extended, self.pos, self.gems, dx, dy)
            if result is not None:
                self.cells, self.pos, self.gems, fell = result
                changed = True
        elif action == GameAction.ACTION6:
            spot = self.camera.display_to_grid(self.action.data.get("x", 0), self.action.data.get("y", 0))
            if spot is not None:
                lever = self.current_level.get_sprite_at(spot[0], spot[1], "lever")
                if lever is not None:
                    self.extended, fell = toggle(self.cells, self.extended, self.pos, int(lever.name[5:]))
                    changed = True
        if changed:
            self.redraw()
            if fell:
                self.walker.set_visible(False)
                self.lose()
            elif self.cells[self.pos] == FLAG and not self.gems:
                self.next_level()
        self.complete_action()
