"""Sprite behaviour (spec §3; checklist C8-C17, C22, C30) and the exactness of its image cache."""

import copy
import pickle
import random

import numpy as np
import pytest

from engine import BlockingMode, InteractionMode, Sprite

S = Sprite
PP, BB, NB = BlockingMode.PIXEL_PERFECT, BlockingMode.BOUNDING_BOX, BlockingMode.NOT_BLOCKED


def grid(sprite):
    return sprite.render().tolist()


def test_defaults():  # C8
    sprite = S([[1, 2, 3], [4, 5, 6]])
    assert sprite.blocking is PP and sprite.interaction is InteractionMode.TANGIBLE
    assert sprite.layer == 0 and sprite.scale == 1 and sprite.rotation == 0
    assert len(sprite.name) == 36 and sprite.pixels.dtype == np.int8
    assert (sprite.width, sprite.height) == (3, 2)
    assert S([[1]]).name != S([[1]]).name


def test_rotation_and_mirrors():  # C9, C10
    base = [[1, 2, 3], [4, 5, 6]]
    assert grid(S(base, rotation=90)) == [[4, 1], [5, 2], [6, 3]]
    assert grid(S(base, rotation=270)) == [[3, 6], [2, 5], [1, 4]]
    assert grid(S(base, rotation=180)) == [[6, 5, 4], [3, 2, 1]]
    assert grid(S(base, rotation=90, mirror_lr=True)) == [[1, 4], [2, 5], [3, 6]]
    assert grid(S(base, rotation=90, mirror_ud=True)) == [[6, 3], [5, 2], [4, 1]]


def test_scaling():  # C11, C12, C13
    assert grid(S([[1, 2]], scale=2)) == [[1, 1, 2, 2], [1, 1, 2, 2]]
    tall = S([[1, 2, 3], [4, 5, 6]], scale=2, rotation=90)
    assert (tall.width, tall.height) == (4, 6)
    assert grid(S([[1, 1, 2, 2], [1, 3, 2, -1], [-1, -1, 4, 4], [-1, 5, 4, 4]], scale=-1)) == [[1, 2], [-1, 4]]
    assert grid(S([[1, 2], [2, 1]], scale=-1)) == [[2]]
    assert grid(S([[-1, 3], [-1, 3]], scale=-1)) == [[3]]
    assert grid(S([[-1, 3], [-1, -1]], scale=-1)) == [[-1]]
    with pytest.raises(ValueError):
        S([[1] * 4] * 3, scale=-1)
    with pytest.raises(ValueError):
        S([[1]]).set_scale(0)


def test_adjust_scale_steps_over_zero():
    sprite = S([[1, 2], [3, 4]])
    sprite.adjust_scale(-2)
    assert sprite.scale == -1
    sprite.adjust_scale(2)
    assert sprite.scale == 1
    sprite.adjust_scale(2)
    assert sprite.scale == 3


def test_rotation_validation():  # C14
    sprite = S([[1]])
    assert sprite.rotate(-90).rotation == 270
    with pytest.raises(ValueError):
        sprite.set_rotation(45)
    assert sprite.rotation == 270
    assert S([[1]], rotation=450).rotation == 90


def test_color_remap():  # C15
    sprite = S([[-1, 0, 3], [3, 5, -2]])
    assert grid(sprite.color_remap(None, 7)) == [[-1, 7, 7], [7, 7, -2]]
    assert grid(S([[-1, 0, 3]]).color_remap(3, 9)) == [[-1, 0, 9]]
    assert S([[1]]).color_remap(1, np.int64(2)).pixels.dtype == np.int64


def test_aliasing_quirks():  # C16 and Q13
    first, second = S([[1]]), S([[2]])
    assert first.tags is second.tags
    tags = ["a"]
    assert S([[1]], tags=tags).tags is tags
    array = np.array([[1, 2]], dtype=np.int8)
    assert S(array).pixels is array
    assert S(np.array([[1.7]])).pixels.dtype == np.int8


def test_public_state_names_follow_every_write_channel():  # §3.2, §3.3
    sprite = S([[1, 2]], x=1, y=2, tags=["a"])
    sprite.move(2, 3)
    assert (sprite.x, sprite.y) == (3, 5)
    sprite.set_position(7.9, -1)
    assert (sprite.x, sprite.y) == (7, -1)
    sprite._x, sprite._y = 500, 6  # games park sprites by writing the state attributes
    assert (sprite.x, sprite.y) == (500, 6)
    sprite.set_layer(3)
    sprite.set_name("n")
    assert (sprite.layer, sprite.name) == (3, "n")
    sprite._layer, sprite._name = 4, "m"
    assert (sprite.layer, sprite.name) == (4, "m")
    replacement = ["b"]
    sprite._tags = replacement
    assert sprite.tags is replacement
    sprite.tags.append("c")
    assert sprite._tags == ["b", "c"]
    copies = [copy.copy(sprite), copy.deepcopy(sprite), sprite.clone(), pickle.loads(pickle.dumps(sprite))]
    for other in copies:
        assert (other.x, other.y, other.tags, other.layer, other.name) == (500, 6, ["b", "c"], 4, "m")
        assert other.tags is other._tags
    deep = copies[1]
    deep.move(1, 1)
    assert (deep.x, sprite.x) == (501, 500)
    fresh = copy.deepcopy(sprite)  # written before its first read
    fresh._y = 9
    assert (fresh.x, fresh.y) == (500, 9)
    assert not hasattr(fresh, "speed") and getattr(fresh, "speed", 3) == 3


def test_pixels_reads_return_the_current_array_after_every_change():
    # ``pixels`` reads are served from a slot that mirrors __dict__["pixels"] once exposed.
    sprite = S([[1, 2], [3, 4]])
    first = sprite.pixels
    assert first is sprite.__dict__["pixels"] and sprite.pixels is first
    replacement = np.array([[5]], dtype=np.int8)
    sprite.pixels = replacement
    assert sprite.pixels is replacement
    sprite.color_remap(5, 6)
    assert sprite.pixels is sprite.__dict__["pixels"] and sprite.pixels.tolist() == [[6]]
    for other in (sprite.clone(), copy.deepcopy(sprite), pickle.loads(pickle.dumps(sprite))):
        assert other.pixels is other.__dict__["pixels"] and other.pixels.tolist() == [[6]]
        other.pixels[0, 0] = 7  # in-place writes through the read array are drawn
        assert grid(other) == [[7]]
    assert grid(sprite) == [[6]]
    shallow = copy.copy(sprite)  # shares the array
    assert shallow.pixels is sprite.pixels
    sprite.__init__([[8, 9]])
    assert sprite.pixels.tolist() == [[8, 9]] and sprite.pixels is sprite.__dict__["pixels"]
    del sprite.pixels
    with pytest.raises(AttributeError):
        sprite.pixels  # noqa: B018
    bare = S.__new__(S)
    with pytest.raises(AttributeError):
        bare.pixels  # noqa: B018


def test_public_state_names_are_read_only():  # §3.3: no setters, as in the reference
    sprite = S([[1]], x=4)
    for name, value in (("x", 1), ("y", 1), ("tags", []), ("name", "n"), ("layer", 2)):
        with pytest.raises(AttributeError, match="has no setter"):
            setattr(sprite, name, value)
        with pytest.raises(AttributeError):
            delattr(sprite, name)
    assert (sprite.x, sprite.y, sprite.tags) == (4, 0, [])
    del sprite._x  # the property would fail on the missing state attribute
    with pytest.raises(AttributeError):
        sprite.x  # noqa: B018


def test_clone_normalises_pixels():  # C17
    sprite = S([[1]], name="orig", tags=["t"])
    sprite.pixels = np.array([[3.7, -1.0]])
    copy_ = sprite.clone()
    assert copy_.pixels.dtype == np.int8 and copy_.pixels.tolist() == [[3, -1]]
    assert copy_.name == "orig" and copy_.tags == ["t"] and copy_.tags is not sprite.tags
    assert sprite.clone("m").name == "m"
    plain = S([[1, 2]], x=3, y=4, layer=2, rotation=90, scale=2, mirror_lr=True, blocking=BB, tags=["k"])
    twin = plain.clone()
    assert twin.pixels is not plain.pixels and twin.pixels.tolist() == plain.pixels.tolist()
    assert (twin.x, twin.y, twin.layer, twin.rotation, twin.scale, twin.mirror_lr, twin.blocking) == (3, 4, 2, 90, 2, True, BB)
    assert grid(twin) == grid(plain)


def test_visibility_and_collidability():
    removed = S([[1]], visible=False, collidable=False)
    assert removed.interaction is InteractionMode.REMOVED
    assert removed.set_visible(True).interaction is InteractionMode.INTANGIBLE
    assert S([[1]]).set_collidable(False).interaction is InteractionMode.INTANGIBLE
    with pytest.raises(ValueError):
        S([[1]]).set_blocking("box")
    with pytest.raises(ValueError):
        S([[1]]).set_name("")


def test_constructor_validation():
    with pytest.raises(ValueError):
        S([])
    with pytest.raises(ValueError):
        S([1, 2])
    with pytest.raises(ValueError):
        S([[1, 2], [3]])
    with pytest.raises(OverflowError):
        S([[200]])
    empty = S([[]])
    assert (empty.width, empty.height) == (0, 1)
    assert S([[1]], x=-1.9).x == -1


def test_collisions():  # C22, C30
    assert not S([[1, -1]]).collides_with(S([[-1, 1]], blocking=BB))
    assert S([[1, -1]], blocking=BB).collides_with(S([[-1, 1]], blocking=BB))
    assert not S([[1]]).collides_with(S([[1]], blocking=NB))
    assert S([[1]], blocking=NB).collides_with(S([[1]], blocking=NB), ignoreMode=True)
    assert not S([[1]]).collides_with(S([[1]], x=1))
    solo = S([[1]])
    assert not solo.collides_with(solo, ignoreMode=True)
    assert S([[-2]]).collides_with(S([[1]]))
    assert not S([[1]]).collides_with(S([[1]], interaction=InteractionMode.INTANGIBLE))
    assert S([[1]]).collides_with(S([[1]], interaction=InteractionMode.INVISIBLE))


def test_merge():
    top = S([[1, -1]], name="top", x=0, y=0, layer=1, tags=["a"])
    bottom = S([[2, 2]], name="bottom", x=1, y=0, layer=3, blocking=BB, tags=["b", "a"])
    merged = top.merge(bottom)
    assert merged.name == "top" and (merged.x, merged.y) == (0, 0) and merged.layer == 3
    assert grid(merged) == [[1, 2, 2]]
    assert sorted(merged.tags) == ["a", "b"] and merged.blocking is PP


def test_image_cache_follows_every_mutation_channel():
    sprite = S([[1, 2], [3, 4]])
    assert grid(sprite) == [[1, 2], [3, 4]]
    sprite.pixels[0, 0] = 9  # in place, through the property
    assert grid(sprite) == [[9, 2], [3, 4]]
    held = sprite.pixels
    sprite.set_rotation(180)
    held[1][1] = 7  # a reference kept from earlier
    assert grid(sprite) == [[7, 3], [2, 9]]
    sprite.rotation = 0  # direct attribute write
    sprite.pixels = np.array([[5, 6, 7]], dtype=np.float64)  # replaced, another dtype
    assert grid(sprite) == [[5, 6, 7]] and sprite.width == 3
    other = S([[0]])
    other.pixels = sprite.pixels  # shared between two sprites
    sprite.pixels[0, 2] = 8
    assert grid(other) == [[5, 6, 8]]
    twin = copy.copy(sprite)
    twin.pixels[0, 0] = 1
    assert grid(sprite)[0][0] == 1
    deep = copy.deepcopy([sprite, other])
    assert deep[0].pixels is deep[1].pixels and deep[0].pixels is not sprite.pixels
    deep[0].pixels[0, 1] = 4
    assert grid(deep[1]) == [[1, 4, 8]] and grid(sprite) == [[1, 6, 8]]


def naive_render(pixels, rotation, mirror_ud, mirror_lr, scale):
    """Straight from spec §3.5/§3.6, without any caching."""
    image = np.array(pixels)
    for _ in range(rotation // 90):
        image = np.array([[image[len(image) - 1 - j][i] for j in range(len(image))] for i in range(len(image[0]))])
    if mirror_ud:
        image = image[::-1]
    if mirror_lr:
        image = image[:, ::-1]
    if scale > 1:
        image = np.kron(image, np.ones((scale, scale), dtype=image.dtype))
    return image.tolist()


def test_render_matches_a_naive_renderer_under_random_mutations():
    rng = random.Random(7)
    sprite = S([[rng.randrange(-1, 5) for _ in range(3)] for _ in range(2)])
    for _ in range(300):
        op = rng.randrange(6)
        if op == 0:
            sprite.set_rotation(rng.choice([0, 90, 180, 270]))
        elif op == 1:
            sprite.set_mirror_lr(rng.random() < 0.5)
        elif op == 2:
            sprite.set_scale(rng.choice([1, 2, 3]))
        elif op == 3:
            pixels = sprite.pixels
            pixels[rng.randrange(pixels.shape[0]), rng.randrange(pixels.shape[1])] = rng.randrange(-2, 9)
        elif op == 4:
            sprite.color_remap(None if rng.random() < 0.3 else rng.randrange(5), rng.randrange(9))
        else:
            rows, cols = rng.randrange(1, 4), rng.randrange(1, 4)
            sprite.pixels = np.array([[rng.randrange(-1, 5) for _ in range(cols)] for _ in range(rows)], dtype=np.int8)
        expected = naive_render(sprite.pixels, sprite.rotation, sprite.mirror_ud, sprite.mirror_lr, sprite.scale)
        assert grid(sprite) == expected


class Tile(Sprite):
    def __init__(self, kind):
        self.kind = kind
        super().__init__([[1, 2]], name="tile", x=1)
        self.visits = [0]


def test_subclass_attributes_survive_construction_and_copies():
    # The constructor installs a fresh instance dict; attributes a subclass sets before calling
    # it, and after, must stay, and copies must carry them.
    tile = Tile("door")
    assert (tile.kind, tile.visits, tile.x, tile._x) == ("door", [0], 1, 1)
    tile._x = 4
    for other in (copy.copy(tile), copy.deepcopy(tile), pickle.loads(pickle.dumps(tile))):
        assert type(other) is Tile and (other.kind, other.visits, other.x, other._x) == ("door", [0], 4, 4)
        assert other.render().tolist() == [[1, 2]]
