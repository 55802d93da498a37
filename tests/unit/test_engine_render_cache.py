"""The camera's cached, incremental drawing equals a naive from-scratch renderer (spec §3.5, §5.3-§5.4)
under random sequences of every mutation channel games use (spec §8.6)."""

import copy

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Camera, InteractionMode, Level, Sprite

MODES = list(InteractionMode)


def naive_image(sprite):
    image = np.array(sprite.__dict__["pixels"]).tolist()
    for _ in range(int(sprite.rotation) % 360 // 90):
        image = [[image[len(image) - 1 - j][i] for j in range(len(image))] for i in range(len(image[0]))] if image and image[0] else image
    if sprite.mirror_ud:
        image = image[::-1]
    if sprite.mirror_lr:
        image = [row[::-1] for row in image]
    scale = sprite.scale
    if scale > 1:
        image = [[value for value in row for _ in range(scale)] for row in image for _ in range(scale)]
    return image


def naive_frame(camera, sprites):
    width, height = camera.width, camera.height
    view = [[camera.background] * width for _ in range(height)]
    visible = sorted((s for s in sprites if s.interaction in (InteractionMode.TANGIBLE, InteractionMode.INTANGIBLE)), key=lambda s: s.layer)
    for sprite in visible:
        for row, values in enumerate(naive_image(sprite)):
            for col, value in enumerate(values):
                y, x = sprite.y - camera.y + row, sprite.x - camera.x + col
                if value >= 0 and 0 <= y < height and 0 <= x < width:
                    view[y][x] = int(np.int8(value))
    scale = min(64 // width, 64 // height)
    x_off, y_off = (64 - width * scale) // 2, (64 - height * scale) // 2
    frame = np.full((64, 64), camera.letter_box, dtype=np.int8)
    big = np.kron(np.array(view, dtype=np.int8), np.ones((scale, scale), dtype=np.int8))
    frame[y_off : y_off + big.shape[0], x_off : x_off + big.shape[1]] = big
    return frame, np.array(view, dtype=np.int8)


small_pixels = st.lists(st.lists(st.integers(-2, 9), min_size=2, max_size=2), min_size=2, max_size=2)
operation = st.one_of(
    st.tuples(st.just("move"), st.integers(0, 5), st.integers(-3, 3), st.integers(-3, 3)),
    st.tuples(st.just("layer"), st.integers(0, 5), st.integers(-2, 2)),
    st.tuples(st.just("mode"), st.integers(0, 5), st.integers(0, 3)),
    st.tuples(st.just("write"), st.integers(0, 5), st.integers(0, 1), st.integers(0, 1), st.integers(-2, 9)),
    st.tuples(st.just("remap"), st.integers(0, 5), st.integers(0, 9)),
    st.tuples(st.just("rotate"), st.integers(0, 5), st.sampled_from([0, 90, 180, 270])),
    st.tuples(st.just("mirror"), st.integers(0, 5), st.booleans()),
    st.tuples(st.just("scale"), st.integers(0, 5), st.integers(1, 3)),
    st.tuples(st.just("replace"), st.integers(0, 5), small_pixels),
    st.tuples(st.just("share"), st.integers(0, 5), st.integers(0, 5)),
    st.tuples(st.just("add"), small_pixels, st.integers(-2, 9), st.integers(-2, 9)),
    st.tuples(st.just("remove"), st.integers(0, 5)),
    st.tuples(st.just("camera"), st.integers(-3, 3), st.integers(-3, 3)),
    st.tuples(st.just("resize"), st.integers(1, 16), st.integers(1, 16)),
    st.tuples(st.just("colors"), st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.just("undo"),),
    st.tuples(st.just("raw_x"), st.integers(0, 5), st.integers(-4, 12)),
)


class Scene:
    """A level, a camera and the pixel arrays a game holds (and may write through), changed by
    ``apply``: every mutation channel games use."""

    def __init__(self, level, camera, held):
        self.level = level
        self.camera = camera
        self.held = held
        self.saved = None  # sprites saved by an "undo" op (a deep copy), put back by the next

    def apply(self, op):
        level, camera, held = self.level, self.camera, self.held
        sprites = level._sprites
        pick = sprites[op[1] % len(sprites)] if sprites and len(op) > 1 and isinstance(op[1], int) and op[0] not in ("camera", "resize", "colors") else None
        kind = op[0]
        if kind == "move" and pick:
            pick.move(op[2], op[3])
        elif kind == "layer" and pick:
            pick._layer = op[2]  # direct attribute write, as some games do
        elif kind == "mode" and pick:
            pick.set_interaction(MODES[op[2]])
        elif kind == "write" and held:
            array = held[op[1] % len(held)]
            if array.shape[0] > op[2] and array.shape[1] > op[3]:
                array[op[2], op[3]] = op[4]
        elif kind == "remap" and pick:
            pick.color_remap(None, op[2])
        elif kind == "rotate" and pick:
            pick.set_rotation(op[2])
        elif kind == "mirror" and pick:
            pick.set_mirror_lr(op[2])
        elif kind == "scale" and pick:
            pick.set_scale(op[2])
        elif kind == "replace" and pick:
            pick.pixels = np.array(op[2], dtype=np.int8)
            held.append(pick.pixels)
        elif kind == "share" and pick and sprites:
            pick.pixels = sprites[op[2] % len(sprites)].pixels
        elif kind == "add":
            sprite = Sprite(op[1], x=op[2], y=op[3])
            level.add_sprite(sprite)
            held.append(sprite.pixels)
        elif kind == "remove" and pick:
            level.remove_sprite(pick)
        elif kind == "camera":
            camera.move(op[1], op[2])
        elif kind == "resize":
            camera.resize(op[1], op[2])
        elif kind == "colors":
            camera.background, camera.letter_box = op[1], op[2]
        elif kind == "undo":
            if self.saved is None:
                self.saved = copy.deepcopy(level._sprites)
            else:
                level._sprites, self.saved = self.saved, None
        elif kind == "raw_x" and pick:
            pick._x = op[2]

    def check(self, op):
        """Both renders equal the naive renderer's."""
        sprites = self.level.get_sprites()
        expected_frame, expected_view = naive_frame(self.camera, sprites)
        assert np.array_equal(self.camera.render(sprites), expected_frame), op
        assert np.array_equal(self.camera._raw_render(self.level.get_sprites()), expected_view), op


def new_scene(initial):
    level = Level([Sprite(pixels, x=x, y=y, layer=layer) for pixels, x, y, layer in initial], grid_size=(10, 8))
    camera = Camera(0, 0, 10, 8, background=0, letter_box=5)
    held = [sprite.pixels for sprite in level._sprites]  # references a game might keep and write through
    return Scene(level, camera, held)


initial_sprites = st.lists(st.tuples(small_pixels, st.integers(-2, 9), st.integers(-2, 9), st.integers(0, 3)), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(initial_sprites, st.lists(operation, min_size=1, max_size=25))
def test_render_matches_naive_renderer(initial, operations):
    scene = new_scene(initial)
    for op in operations:
        scene.apply(op)
        scene.check(op)
