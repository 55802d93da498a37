"""The render shortcuts (camera draw-list patching, pre-drawn first layer, fresh result arrays, the
ToggleableUserDisplay overlay) give the same frames as naive drawing (spec §5.3-§5.4, §6)."""

import copy

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Camera, InteractionMode, Level, Sprite, ToggleableUserDisplay
from tests.unit.test_engine_render_cache import naive_frame

MODES = list(InteractionMode)
small_pixels = st.integers(1, 3).flatmap(
    lambda width: st.lists(st.lists(st.integers(-2, 9), min_size=width, max_size=width), min_size=1, max_size=3)
)


def backdrop(width, height, holes):
    """A level-sized sprite at the bottom layer, opaque except at ``holes``."""
    pixels = np.full((height, width), 4, dtype=np.int8)
    for x, y in holes:
        pixels[y % height, x % width] = -1
    return Sprite(pixels.tolist(), name="backdrop", layer=-5)


camera_operation = st.one_of(
    st.tuples(st.just("move"), st.integers(0, 4), st.integers(-3, 3), st.integers(-3, 3)),
    st.tuples(st.just("layer"), st.integers(0, 4), st.integers(-6, 2)),
    st.tuples(st.just("mode"), st.integers(0, 4), st.integers(0, 3)),
    st.tuples(st.just("write"), st.integers(0, 4), st.integers(-2, 9)),
    st.tuples(st.just("remap"), st.integers(0, 4), st.integers(0, 9)),
    st.tuples(st.just("camera"), st.integers(-2, 2), st.integers(-2, 2)),
    st.tuples(st.just("background"), st.integers(0, 9)),
    st.tuples(st.just("resize"), st.integers(6, 12), st.integers(6, 12)),
    st.tuples(st.just("outside"),),
    st.tuples(st.just("reorder"),),
    st.tuples(st.just("raw_x"), st.integers(0, 4), st.integers(-4, 14)),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 9)), max_size=8),
    st.lists(st.tuples(small_pixels, st.integers(-2, 11), st.integers(-2, 9), st.integers(-1, 3)), min_size=1, max_size=4),
    st.lists(camera_operation, min_size=1, max_size=30),
)
def test_patched_frames_match_naive_renderer(holes, movers, operations):
    sprites = [backdrop(12, 10, holes)] + [Sprite(p, x=x, y=y, layer=layer) for p, x, y, layer in movers]
    level = Level(sprites, grid_size=(12, 10))
    held = [sprite.pixels for sprite in sprites[1:]]  # arrays a game keeps and writes through
    outsider = Sprite([[1]], name="outsider")  # a sprite that is never drawn (HUD templates, undo copies)
    camera = Camera(0, 0, 12, 10, background=0, letter_box=5)
    for op in operations:
        pick = level._sprites[op[1] % len(level._sprites)] if op[0] in ("move", "layer", "mode", "remap", "raw_x") else None
        kind = op[0]
        if kind == "move":
            pick.move(op[2], op[3])
        elif kind == "layer":
            pick.set_layer(op[2])
        elif kind == "mode":
            pick.set_interaction(MODES[op[2]])
        elif kind == "write":
            array = held[op[1] % len(held)]
            array[0, 0] = op[2]
        elif kind == "remap":
            pick.color_remap(None, op[2])
        elif kind == "camera":
            camera.move(op[1], op[2])
        elif kind == "background":
            camera.background = op[1]
        elif kind == "resize":
            camera.resize(op[1], op[2])
        elif kind == "outside":
            outsider.move(1, 0)
        elif kind == "reorder":
            level._sprites.reverse()  # same objects, another order: equal layers swap
        elif kind == "raw_x":
            pick._x = op[2]
        expected_frame, expected_view = naive_frame(camera, level.get_sprites())
        frame = camera.render(level.get_sprites())
        assert np.array_equal(frame, expected_frame), op
        frame[...] = 7  # the caller owns the result
        view = camera._raw_render(level.get_sprites())
        assert np.array_equal(view, expected_view), op
        view[...] = 7
        assert np.array_equal(camera._raw_render(level.get_sprites()), expected_view), op
        assert np.array_equal(camera.render(level.get_sprites()), expected_frame), op


def naive_overlay(pairs, frame):
    for pair in pairs:
        for sprite in pair:
            if sprite.interaction is InteractionMode.REMOVED:
                continue
            image = sprite.render()
            for row in range(image.shape[0]):
                for col in range(image.shape[1]):
                    y, x = sprite.y + row, sprite.x + col
                    if image[row, col] >= 0 and 0 <= y < 64 and 0 <= x < 64:
                        frame[y, x] = image[row, col]
    return frame


overlay_operation = st.one_of(
    st.tuples(st.just("enable"), st.integers(0, 5)),
    st.tuples(st.just("disable"), st.integers(0, 5)),
    st.tuples(st.just("move"), st.integers(0, 11), st.integers(-3, 3), st.integers(-3, 3)),
    st.tuples(st.just("write"), st.integers(0, 11), st.integers(-2, 9)),
    st.tuples(st.just("remap"), st.integers(0, 11), st.integers(0, 9)),
    st.tuples(st.just("rotate"), st.integers(0, 11)),
    st.tuples(st.just("swap"), st.integers(0, 5)),
    st.tuples(st.just("append"), small_pixels, st.integers(-2, 63), st.integers(-2, 63)),
    st.tuples(st.just("deepcopy"),),
    st.tuples(st.just("fortran"),),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(small_pixels, small_pixels, st.integers(-2, 63), st.integers(-2, 63)), min_size=1, max_size=6),
    st.lists(overlay_operation, min_size=1, max_size=30),
)
def test_toggleable_overlay_matches_naive_drawing(pairs, operations):
    display = ToggleableUserDisplay([(Sprite(a, x=x, y=y), Sprite(b, x=x + 1, y=y)) for a, b, x, y in pairs])
    base = np.arange(64 * 64, dtype=np.int64).reshape(64, 64).astype(np.int8) % 10
    held = [sprite.pixels for pair in display._sprite_pairs for sprite in pair]  # written through later
    for op in operations:
        current = display._sprite_pairs
        sprites = [sprite for pair in current for sprite in pair]
        kind = op[0]
        fortran = False
        if kind == "enable":
            display.enable(op[1] % len(current))
        elif kind == "disable":
            display.disable(op[1] % len(current))
        elif kind == "move":
            sprites[op[1] % len(sprites)].move(op[2], op[3])
        elif kind == "write":
            held[op[1] % len(held)][0, 0] = op[2]
        elif kind == "remap":
            sprites[op[1] % len(sprites)].color_remap(None, op[2])
        elif kind == "rotate":
            sprites[op[1] % len(sprites)].rotate(90)
        elif kind == "swap":
            index = op[1] % len(current)
            current[index] = (current[index][1], current[index][0])  # the list changed in place
        elif kind == "append":
            current.append((Sprite(op[1], x=op[2], y=op[3]), Sprite(op[1], x=op[3], y=op[2])))
        elif kind == "deepcopy":
            display = copy.deepcopy(display)
            held = [sprite.pixels for pair in display._sprite_pairs for sprite in pair]
        elif kind == "fortran":
            fortran = True
        frame = np.asfortranarray(base) if fortran else base.copy()
        result = display.render_interface(frame)
        assert result is frame, op
        assert np.array_equal(result, naive_overlay(display._sprite_pairs, base.copy())), op


# Frames built from a few rows (with trailing zeros, so "S64" keys that drop them are exercised),
# in sequences that repeat frames, reuse rows elsewhere and bring new ones.
frame_rows = st.lists(
    st.lists(st.sampled_from([0, 0, 0, 1, 5, -1, 127, -128]), min_size=64, max_size=64), min_size=1, max_size=4
)


@settings(max_examples=60, deadline=None)
@given(frame_rows, st.lists(st.lists(st.integers(0, 3), min_size=64, max_size=64), min_size=1, max_size=6))
def test_frame_lists_equal_tolist_and_are_private(palette, choices):
    from engine.base_game import _RowLists

    converter = _RowLists()
    for choice in choices:
        frame = np.array([palette[index % len(palette)] for index in choice], dtype=np.int8)
        lists = converter.convert(frame)
        assert lists == frame.tolist()
        assert all(type(value) is int for value in lists[0])
        lists[0][0] = 99  # the caller owns its lists: nothing cached may change
        lists[1].append(3)
    again = converter.convert(frame)
    assert again == frame.tolist()
