"""Copy-on-write pixels and cached ``color_remap`` results (engine/sprites.py) are unobservable:
sprites behave as if every deep copy, clone and remap made a private array (spec §3.9, §8.6)."""

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import BlockingMode, InteractionMode, Level, Sprite
from engine.sprites import colliding_sprites


def plain(rows):
    return Sprite(rows, name="s")  # built from lists: the engine's own (unexposed) array


def stored(sprite):
    """The sprite's array as the engine holds it, read without exposing it."""
    return sprite.__dict__["pixels"]


small = st.lists(st.lists(st.integers(-2, 9), min_size=2, max_size=2), min_size=2, max_size=2)
operation = st.one_of(
    st.tuples(st.just("deepcopy"), st.integers(0, 7)),
    st.tuples(st.just("deepcopy_all"),),
    st.tuples(st.just("clone"), st.integers(0, 7)),
    st.tuples(st.just("copy"), st.integers(0, 7)),
    st.tuples(st.just("remap"), st.integers(0, 7), st.one_of(st.none(), st.integers(-2, 9)), st.integers(-2, 9)),
    st.tuples(st.just("write"), st.integers(0, 7), st.integers(0, 1), st.integers(0, 1), st.integers(-2, 9)),
    st.tuples(st.just("pickle"), st.integers(0, 7)),
    st.tuples(st.just("level_clone"),),
)

GROWING = frozenset(("deepcopy", "deepcopy_all", "clone", "copy", "pickle", "level_clone"))


@settings(max_examples=80, deadline=None)
@given(st.lists(small, min_size=1, max_size=3), st.lists(operation, min_size=1, max_size=30))
def test_copies_and_remaps_behave_like_private_arrays(initial, operations):
    # Model: each sprite's reference-engine array, with the same aliasing as in the reference
    # (copy.copy shares one array, deep copies of a list keep shared arrays shared).
    sprites = [plain(rows) for rows in initial]
    truth = [np.array(rows, dtype=np.int8) for rows in initial]
    for op in operations:
        i = op[1] % len(sprites) if len(op) > 1 else 0
        kind = op[0]
        if kind in GROWING and len(sprites) > 12:
            continue
        if kind == "deepcopy":
            sprites.append(copy.deepcopy(sprites[i]))
            truth.append(truth[i].copy())
        elif kind == "deepcopy_all":
            sprites, truth = sprites + copy.deepcopy(sprites), truth + copy.deepcopy(truth)
        elif kind == "clone":
            sprites.append(sprites[i].clone())
            truth.append(truth[i].astype(np.int8))
        elif kind == "copy":
            sprites.append(copy.copy(sprites[i]))
            truth.append(truth[i])
        elif kind == "remap":
            sprites[i].color_remap(op[2], op[3])
            mask = truth[i] >= 0 if op[2] is None else truth[i] == op[2]
            truth[i] = np.where(mask, op[3], truth[i])
        elif kind == "write":
            sprites[i].pixels[op[2], op[3]] = op[4]
            truth[i][op[2], op[3]] = op[4]
        elif kind == "pickle":
            sprites.append(pickle.loads(pickle.dumps(sprites[i])))
            truth.append(truth[i].copy())
        elif kind == "level_clone":
            sprites = sprites + Level(list(sprites)).clone()._sprites
            truth = truth + [array.astype(np.int8) for array in truth]
        for sprite, expected in zip(sprites, truth, strict=True):
            assert stored(sprite).tolist() == expected.tolist(), op
            assert stored(sprite).dtype == expected.dtype, op
            assert sprite.render().tolist() == expected.tolist(), op


def test_copies_have_their_own_array_objects():
    # Identity is observable (aliasing in deep copies, back-references in state hashes).
    sprite = plain([[1, 2]])
    deep = copy.deepcopy(sprite)
    clone = sprite.clone()
    remapped = [plain([[1, 2]]).color_remap(1, 3) for _ in range(2)]
    arrays = [stored(sprite), stored(deep), stored(clone)] + [stored(s) for s in remapped]
    assert len({id(array) for array in arrays}) == len(arrays)
    for holder in (sprite, deep, clone, *remapped):
        exposed = holder.pixels
        assert exposed.flags.owndata and exposed.flags.writeable
        assert all(not np.shares_memory(exposed, stored(other)) for other in (sprite, deep, clone, *remapped) if other is not holder)


def test_deepcopy_keeps_aliasing_and_copies_game_attributes():
    first, second = plain([[1]]), plain([[2]])  # both use the shared default tags list (Q13)
    first.extra = {"hits": [1]}
    copies = copy.deepcopy([first, second, first])
    assert copies[0] is copies[2] and copies[0].tags is copies[1].tags and copies[0].tags is not first.tags
    assert copies[0].extra == {"hits": [1]} and copies[0].extra["hits"] is not first.extra["hits"]
    memo = {}
    copied = copy.deepcopy(second, memo)
    assert memo[id(second.__dict__["_tags"])] is copied.tags
    assert memo[id(stored(second))] is stored(copied)


@pytest.mark.parametrize(
    "write",
    [
        lambda sprite: setattr(sprite, "_mirror_ud", [True]),
        lambda sprite: setattr(sprite, "_x", [3]),
        lambda sprite: sprite.set_mirror_lr([True]),
        lambda sprite: sprite.set_name(["named"]),
    ],
)
def test_deepcopy_sees_mutable_values_written_after_an_earlier_copy(write):
    # Sprites remember that their state was checked plain (all immutable but pixels and tags);
    # any later write of a mutable value must send the next copy through the general path.
    sprite = plain([[1]])
    copy.deepcopy(sprite)
    copy.deepcopy(copy.deepcopy(sprite))  # copies of copies are remembered as plain too
    write(sprite)
    copied = copy.deepcopy(sprite)
    before = {key: value for key, value in sprite.__dict__.items() if type(value) is list}
    after = {key: copied.__dict__[key] for key in before}
    assert after == before and all(after[key] is not before[key] for key in before)
    assert len(before) == 2  # the tags and the written value


@pytest.mark.parametrize(
    "pixels",
    [
        np.array([[1, 2, -1], [3, 1, -2]], dtype=np.int8),
        np.asfortranarray(np.array([[1, 2, -1], [3, 1, -2]], dtype=np.int8)),
        np.array([[1, 2, -1], [3, 1, -2]], dtype=np.int8)[:, ::2],
        np.array([[1.5, 2.0]]),
    ],
)
@pytest.mark.parametrize("old", [None, 1, 2, 300, np.int64(1), True])
@pytest.mark.parametrize("new", [7, 127, -128, 200, np.int64(5), np.int8(3), True, 2.5])
def test_color_remap_matches_np_where(pixels, old, new):
    for _ in range(2):  # the second round is answered from the result cache
        sprite = Sprite(np.array([[0]], dtype=np.int8))
        sprite.pixels = pixels.copy(order="K")
        expected = np.where(pixels >= 0 if old is None else pixels == old, new, pixels)
        result = sprite.color_remap(old, new).pixels
        assert result.tolist() == expected.tolist()
        assert result.dtype == expected.dtype and result.strides == expected.strides
        result[0, 0] = 99  # private: later remaps of the same content are unaffected


def naive_collides(a, b, ignore_mode=False):
    """spec §3.8 from scratch: both collidable and blocking (unless ``ignore_mode``), then bounding
    boxes, then cells."""
    collidable = (InteractionMode.TANGIBLE, InteractionMode.INVISIBLE)
    if a is b:
        return False
    if not ignore_mode and (a.interaction not in collidable or b.interaction not in collidable):
        return False
    if not ignore_mode and BlockingMode.NOT_BLOCKED in (a.blocking, b.blocking):
        return False
    cells_a = {(a.x + c, a.y + r): v for r, row in enumerate(a.render().tolist()) for c, v in enumerate(row)}
    cells_b = {(b.x + c, b.y + r): v for r, row in enumerate(b.render().tolist()) for c, v in enumerate(row)}
    shared = cells_a.keys() & cells_b.keys()
    if BlockingMode.PIXEL_PERFECT not in (a.blocking, b.blocking):
        return bool(shared)
    return any(cells_a[cell] != -1 and cells_b[cell] != -1 for cell in shared)


shape = st.lists(st.lists(st.sampled_from([-1, -1, 0, 3]), min_size=3, max_size=3), min_size=1, max_size=3)
placed = st.tuples(
    shape,
    st.integers(-3, 3),
    st.integers(-3, 3),
    st.sampled_from(list(BlockingMode)),
    st.sampled_from(list(InteractionMode)),
    st.sampled_from([0, 90]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(placed, min_size=2, max_size=5), st.lists(st.tuples(st.integers(0, 4), st.integers(-2, 2), st.integers(-2, 2)), max_size=6))
def test_collisions_match_the_spec_across_moves(specs, moves):
    # Cached overlap answers (keyed on images and offsets) stay exact as sprites move and turn.
    sprites = [Sprite(p, x=x, y=y, blocking=blocking, interaction=mode, rotation=turn) for p, x, y, blocking, mode, turn in specs]
    for index, dx, dy in [(0, 0, 0), *moves]:
        sprites[index % len(sprites)].move(dx, dy)
        level = Level(sprites)
        for a in sprites:
            for ignore_mode in (False, True):
                expected = [b for b in sprites if naive_collides(a, b, ignore_mode)]
                assert [b for b in sprites if a.collides_with(b, ignore_mode)] == expected
                assert colliding_sprites(a, sprites, ignore_mode) == expected
                assert level.collides_with(a, ignore_mode) == expected


@pytest.mark.parametrize("blocking", [BlockingMode.PIXEL_PERFECT, BlockingMode.BOUNDING_BOX])
def test_collision_answers_follow_the_offset(blocking):
    ring = Sprite([[1, 1, 1], [1, -1, 1], [1, 1, 1]], name="ring")
    dot = Sprite([[5]], name="dot", x=1, y=1, blocking=blocking)
    for x, y, expected in [(1, 1, False), (1, 0, True), (1, 1, False), (0, 1, True), (2, 2, True), (1, 1, False), (3, 1, False)]:
        dot.set_position(x, y)
        assert dot.collides_with(ring) == expected and ring.collides_with(dot) == expected
        assert colliding_sprites(dot, [ring]) == ([ring] if expected else [])
        assert colliding_sprites(ring, [dot]) == ([dot] if expected else [])
