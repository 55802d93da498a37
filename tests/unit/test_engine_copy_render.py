"""Deep copies of engine objects (``engine._copying`` and the copiers sprites, levels, cameras and
models register) equal the generic copy, and a copied scene renders like its original.

The reference for sprites is a pickle round trip of the whole structure (``Sprite.__getstate__``/
``__setstate__``, aliasing kept): the copier's fast path must give the same attributes and the
same sharing.  A copied camera starts from its original's frame cache, translated to the copied
sprites, whose change stamps are their originals' (``sprites._copy_sprite``); every frame either
side draws afterwards must still equal the naive renderer's.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Camera, Level, Sprite
from engine._copying import deep_copy
from engine.enums import ActionInput, GameAction
from tests.unit.test_engine_render_cache import Scene, initial_sprites, new_scene, operation

tag_lists = st.lists(st.sampled_from(["a", "b", "sys_click"]), max_size=3)


recipe = st.lists(
    st.tuples(
        st.sampled_from(["own", "shared_tags", "shared_pixels", "clone", "copy"]),
        st.integers(-2, 5),
        st.integers(0, 3),
        tag_lists,
        st.sampled_from(["none", "read", "write", "move", "name"]),
        st.integers(0, 4),
    ),
    min_size=1,
    max_size=5,
)


def build(steps, pixels):
    """A few sprites, some sharing tag lists or pixel arrays, some with pixels read (exposed), copied
    (copy-on-write) or written in place, some moved or renamed since their last copy."""
    shared_tags = ["t"]
    shared_array = np.array(pixels[::-1], dtype=np.int8)
    sprites = []
    for how, x, layer, tags, action, pick in steps:
        if how in ("clone", "copy") and sprites:
            source = sprites[pick % len(sprites)]
            sprite = source.clone() if how == "clone" else copy.deepcopy(source)
        else:
            sprite = Sprite(pixels, x=x, layer=layer, tags=list(tags))
            if how == "shared_tags":
                sprite._tags = shared_tags  # a direct attribute write: the tag list is shared
            elif how == "shared_pixels":
                sprite.pixels = shared_array
        if action == "read":
            _ = sprite.pixels
        elif action == "write":
            sprite.pixels[0, 0] = 7
        elif action == "move":
            sprite.move(1, 1)
        elif action == "name":
            sprite.set_name("renamed")
        sprites.append(sprite)
    return sprites


def shape(value, seen):
    """Types, contents and which positions share one object (engine bookkeeping left out)."""
    if id(value) in seen:
        return ("ref", seen[id(value)])
    if isinstance(value, (list, dict, np.ndarray, Sprite, Level)):
        seen[id(value)] = len(seen)
    if isinstance(value, list):
        return ("list", [shape(item, seen) for item in value])
    if isinstance(value, dict):
        return ("dict", [(key, shape(item, seen)) for key, item in value.items()])
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.tolist())
    if isinstance(value, (Sprite, Level)):
        state = [(key, shape(item, seen)) for key, item in vars(value).items() if not key.startswith("_engine_")]
        return (type(value).__name__, state)
    return ("atom", type(value).__name__, value)


@settings(max_examples=150, deadline=None)
@given(recipe, st.lists(st.lists(st.integers(-1, 9), min_size=2, max_size=2), min_size=2, max_size=2), st.booleans())
def test_sprite_copies_equal_the_generic_copy(steps, pixels, in_level):
    sprites = build(steps, pixels)
    original = [Level(sprites=list(sprites), grid_size=(8, 8)) if in_level else list(sprites), sprites, sprites[0]]
    reference = pickle.loads(pickle.dumps(original))
    ours = deep_copy(original, {})
    assert shape(ours, {}) == shape(reference, {})
    assert shape(copy.deepcopy(original), {}) == shape(reference, {})
    # Independent of the original, whichever side changes.
    before = shape(original, {})
    for sprite in ours[1]:
        sprite.pixels[0, 0] = 3
        sprite.tags.append("new")
        sprite.move(2, 0)
    assert shape(original, {}) == before
    twins = copy.deepcopy(original)[1]
    for sprite, twin, kept in zip(original[1], twins, pickle.loads(pickle.dumps(original))[1], strict=True):
        sprite.pixels[1, 1] = 4  # written in place after the copy: not into the copy's array
        assert np.array_equal(twin.pixels, kept.pixels)
    # The copies render like sprites built from scratch in their state.
    for sprite in ours[1]:
        fresh = Sprite(sprite.pixels.tolist(), x=sprite.x, y=sprite.y, layer=sprite.layer)
        assert np.array_equal(sprite.render(), fresh.render())


@settings(max_examples=80, deadline=None)
@given(
    initial_sprites,
    st.lists(st.tuples(operation, st.booleans()), max_size=15),
    st.lists(operation, min_size=1, max_size=15),
)
def test_copied_scene_renders_like_the_original(initial, before, after):
    scene = new_scene(initial)
    scene.check(("start",))
    for op, render in before:  # rendered at some points only: the copy is made from a stale frame too
        scene.apply(op)
        if render:
            scene.check(op)
    # One copy of everything (the sprites before the camera, as in a game copy).
    level, camera, held, saved = copy.deepcopy((scene.level, scene.camera, scene.held, scene.saved))
    twin = Scene(level, camera, held)
    twin.saved = saved
    twin.check(("copied",))  # the copy's first frame, straight from the translated cache
    for op in after:
        twin.apply(op)
        twin.check(op)
        scene.apply(op)
        scene.check(op)


def test_copied_camera_starts_from_the_translated_frame():
    scene = new_scene([([[1, 2], [3, 4]], 0, 0, 0), ([[5, -1], [6, 7]], 3, 2, 1)])
    scene.check(("start",))
    level, camera = copy.deepcopy((scene.level, scene.camera))
    composite = camera._engine_composite
    assert composite is not None and composite is not scene.camera._engine_composite
    assert composite.sprites == level._sprites and composite.sprites != scene.level._sprites
    assert composite.canvas is not scene.camera._engine_composite.canvas
    assert [sprite._engine_stamp for sprite in level._sprites] == [sprite._engine_stamp for sprite in scene.level._sprites]
    level._sprites[0].move(1, 0)  # a change of the copy: a new stamp for it alone
    assert level._sprites[0]._engine_stamp != scene.level._sprites[0]._engine_stamp
    Scene(level, camera, []).check(("moved",))
    scene.check(("original",))


def test_copy_of_a_scene_changed_since_its_last_frame_redraws_the_change():
    scene = new_scene([([[1, 2], [3, 4]], 0, 0, 0), ([[5, -1], [6, 7]], 3, 2, 1)])
    scene.check(("start",))
    scene.apply(("move", 0, 2, 1))  # after the cached frame was drawn, before the copy
    level, camera, held = copy.deepcopy((scene.level, scene.camera, scene.held))
    assert camera._engine_composite is not None
    Scene(level, camera, held).check(("copied",))
    scene.check(("original",))


def test_models_and_cameras_copy_like_deepcopy_of_their_state():
    action = ActionInput(id=GameAction.ACTION6, data={"x": 3, "y": [4]})
    copied = deep_copy([action, action], {})
    assert copied[0] is copied[1] and copied[0] is not action
    assert copied[0] == action and copied[0].data["y"] is not action.data["y"]
    assert copied[0].model_fields_set == action.model_fields_set
    camera = Camera(1, 2, 10, 8, background=3, letter_box=4, interfaces=[])
    twin = deep_copy(camera, {})
    assert vars(twin) == {key: value for key, value in vars(camera).items() if not key.startswith("_engine_")}
    assert twin._interfaces is not camera._interfaces
