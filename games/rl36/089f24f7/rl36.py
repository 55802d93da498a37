"""RL36 "Rail Switches" - an original arcstudy game (MIT licence).

Click only (ACTION6). A cart runs on rails; every click is one tick of time, and on each tick
the cart rolls one tile along the rails (its dark front pixel shows which way it faces). Bring the cart
to the station (the framed tile). Later levels add:
  * switches: clicking a switch flips it before the cart moves; a switch sends the cart down the
    branch its bright arm points to (a cart arriving along that branch leaves by the other one);
  * broken rails and dead ends: a cart that rolls onto a broken tile or off the end of a line
    crashes, and the level is lost (GAME_OVER);
  * crossings: where two lines cross, the cart keeps going straight;
  * longer networks where several switches must be set in time, some of them right before the
    cart reaches them.
RESET restarts the level.
"""

import numpy as np
from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite

EMPTY, RAIL, BROKEN, STATION, SWITCH = range(5)
DIRS = {"N": (0, -1), "E": (1, 0), "S": (0, 1), "W": (-1, 0)}
REVERSE = {"N": "S", "S": "N", "E": "W", "W": "E"}
ORDER = "NESW"

GRASS = 0
RAIL_COLOUR = 3
BROKEN_COLOUR = 5
STATION_COLOUR = 11
SWITCH_COLOUR = 9
SWITCH_ARM = 14
CART = 12
CART_FRONT = 13
LETTERBOX = 5
T = 3  # every tile is a 3x3 block of grid cells
CLEAR = -1  # transparent


def parse(rows, switches):
    """A map -> (width, tiles, switch exits, start).

    Map characters: '.' grass, '=' rail, 'S' start (a rail), 'G' station, '!' broken rail,
    letters switches described in ``switches`` as (first exit, second exit, index of the active exit).
    """
    width = len(rows[0])
    tiles, exits, active = [], {}, {}
    start = None
    for y, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"row {y} has length {len(row)}, expected {width}")
        for x, ch in enumerate(row):
            i = y * width + x
            if ch == ".":
                tiles.append(EMPTY)
            elif ch in "=S":
                tiles.append(RAIL)
                if ch == "S":
                    start = i
            elif ch == "G":
                tiles.append(STATION)
            elif ch == "!":
                tiles.append(BROKEN)
            else:
                tiles.append(SWITCH)
                first, second, on = switches[ch]
                exits[i] = (first, second)
                active[i] = on
    return width, tuple(tiles), exits, active, start


def step_cart(tiles, width, exits, active, pos, heading):
    """One tick: (new position, new heading, crashed, arrived)."""
    height = len(tiles) // width
    x, y = pos % width, pos // width
    back = REVERSE[heading]
    if tiles[pos] == SWITCH:
        first, second = exits[pos]
        out = (first, second)[active[pos]]
        if out == back:
            out = (second, first)[active[pos]]
    else:
        options = []
        for d in ORDER:
            if d == back:
                continue
            dx, dy = DIRS[d]
            nx, ny = x + dx, y + dy
            if 0 <= nx < width and 0 <= ny < height and tiles[ny * width + nx] != EMPTY:
                options.append(d)
        out = heading if heading in options or not options else options[0]
    dx, dy = DIRS[out]
    nx, ny = x + dx, y + dy
    if not (0 <= nx < width and 0 <= ny < height):
        return pos, out, True, False
    nxt = ny * width + nx
    kind = tiles[nxt]
    if kind in (EMPTY, BROKEN):
        return nxt, out, True, False
    return nxt, out, False, kind == STATION


def tile_pixels(tiles, width, i):
    """3x3 picture of a rail tile: centre plus an arm toward every neighbouring non-grass tile."""
    height = len(tiles) // width
    x, y = i % width, i // width
    px = [[CLEAR] * T for _ in range(T)]
    colour = BROKEN_COLOUR if tiles[i] == BROKEN else RAIL_COLOUR
    px[1][1] = colour if tiles[i] != BROKEN else CLEAR
    for dx, dy in DIRS.values():
        nx, ny = x + dx, y + dy
        if 0 <= nx < width and 0 <= ny < height and tiles[ny * width + nx] != EMPTY:
            px[1 + dy][1 + dx] = colour
    return px


def switch_pixels(exits, on):
    px = [[CLEAR, CLEAR, CLEAR], [CLEAR, SWITCH_COLOUR, CLEAR], [CLEAR, CLEAR, CLEAR]]
    for k, d in enumerate(exits):
        dx, dy = DIRS[d]
        px[1 + dy][1 + dx] = SWITCH_ARM if k == on else SWITCH_COLOUR
    return px


def cart_pixels(heading):
    """The cart covers the centre of its tile and one pixel on its front side, so the arms of a
    switch it stands on stay readable (the frame shows the whole state)."""
    px = [[CLEAR] * T for _ in range(T)]
    px[1][1] = CART
    dx, dy = DIRS[heading]
    px[1 + dy][1 + dx] = CART_FRONT
    return px


# (map, switches, start heading); a switch is (first exit, second exit, index of the active exit)
LEVEL_MAPS = [
    # 1: tutorial - every click moves the cart one tile
    (["S===G"], {}, "E"),
    # 2: two switches set the wrong way
    (
        [
            "S==a====b==G",
            "...=....=...",
            "...!....!...",
        ],
        {"a": ("E", "S", 1), "b": ("E", "S", 1)},
        "E",
    ),
    # 3: three switches in quick succession
    (
        [
            "S=a==b==c=G",
            "..=..=..=..",
            "..!..!..!..",
        ],
        {"a": ("E", "S", 1), "b": ("E", "S", 1), "c": ("E", "S", 1)},
        "E",
    ),
    # 4: a longer line with branches that rejoin
    (
        [
            "S===a===.",
            "....=...=",
            "....b===c",
            "....=...=",
            "G===d===!",
        ],
        {"a": ("E", "S", 0), "b": ("E", "S", 0), "c": ("N", "S", 1), "d": ("W", "E", 1)},
        "E",
    ),
    # 5: a crossing
    (
        [
            "S==a==b===.",
            "...=..=...=",
            "...=..c=d=e",
            "...=....=.=",
            "...!....G.!",
        ],
        {"a": ("E", "S", 1), "b": ("E", "S", 1), "c": ("E", "S", 0), "d": ("E", "S", 0), "e": ("N", "S", 0)},
        "E",
    ),
    # 6: six switches, two of them merges
    (
        [
            "..=====b==G",
            "..=....=...",
            "S=a==c=d==!",
            "..=..=.....",
            "..===e==f=!",
        ],
        {"a": ("N", "S", 1), "b": ("E", "S", 1), "c": ("E", "S", 0), "d": ("E", "N", 0), "e": ("E", "W", 0),
         "f": ("E", "N", 1)},
        "E",
    ),
]


def build_level(rows, switches, heading, name):
    width = len(rows[0])
    return Level(sprites=[], grid_size=(width * T, len(rows) * T),
                 data={"map": rows, "switches": {k: list(v) for k, v in switches.items()}, "heading": heading},
                 name=name)


levels = [build_level(rows, sw, h, f"rails-{n + 1}") for n, (rows, sw, h) in enumerate(LEVEL_MAPS)]


class Rl36(ARCBaseGame):
    def __init__(self):
        self.width = 1
        self.tiles = ()
        self.exits = {}
        self.active = {}
        self.pos = 0
        self.heading = "E"
        camera = Camera(background=GRASS, letter_box=LETTERBOX)
        super().__init__(game_id="rl36", levels=levels, camera=camera, available_actions=[6])

    def on_set_level(self, level):
        switches = {k: tuple(v) for k, v in level.get_data("switches").items()}
        self.width, self.tiles, self.exits, self.active, self.pos = parse(level.get_data("map"), switches)
        self.heading = level.get_data("heading")
        level = self.current_level
        for sprite in level.get_sprites():
            level.remove_sprite(sprite)
        height = len(self.tiles) // self.width
        rails = [[CLEAR] * (self.width * T) for _ in range(height * T)]
        self.switch_sprites = {}
        for i, kind in enumerate(self.tiles):
            x, y = (i % self.width) * T, (i // self.width) * T
            if kind in (RAIL, BROKEN):
                for r, row in enumerate(tile_pixels(self.tiles, self.width, i)):
                    for c, v in enumerate(row):
                        if v != CLEAR:
                            rails[y + r][x + c] = v
            elif kind == STATION:
                for r in range(T):
                    for c in range(T):
                        if r != 1 or c != 1:
                            rails[y + r][x + c] = STATION_COLOUR
            elif kind == SWITCH:
                sprite = Sprite(switch_pixels(self.exits[i], self.active[i]), name=f"switch{i}", x=x, y=y, layer=1,
                                tags=["switch", "sys_click"])
                self.switch_sprites[i] = sprite
                level.add_sprite(sprite)
        level.add_sprite(Sprite(rails, name="rails", layer=0, tags=["rails"]))
        self.cart = Sprite(cart_pixels(self.heading), name="cart", layer=2, tags=["cart"])
        level.add_sprite(self.cart)
        self.redraw()

    def redraw(self):
        for i, sprite in self.switch_sprites.items():
            sprite.pixels = np.array(switch_pixels(self.exits[i], self.active[i]), dtype=np.int8)
        self.cart.pixels = np.array(cart_pixels(self.heading), dtype=np.int8)
        self.cart.set_position((self.pos % self.width) * T, (self.pos // self.width) * T)

    def step(self):
        if self.action.id == GameAction.ACTION6:
            spot = self.camera.display_to_grid(self.action.data.get("x", 0), self.action.data.get("y", 0))
            hit = self.current_level.get_sprite_at(spot[0], spot[1], "sys_click") if spot is not None else None
            if hit is not None:
                i = (hit.y // T) * self.width + hit.x // T
                if i in self.active:
                    self.active[i] = 1 - self.active[i]
            self.pos, self.heading, crashed, arrived = step_cart(
                self.tiles, self.width, self.exits, self.active, self.pos, self.heading)
            self.redraw()
            if crashed:
                self.cart.set_visible(False)
                self.lose()
            elif arrived:
                self.next_level()
        self.complete_action()
