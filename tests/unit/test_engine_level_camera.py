"""Level queries and camera geometry/rendering (spec §4, §5; checklist C18-C29, C32, C33, C50)."""

import copy

import numpy as np
import pytest

from engine import (
    BlockingMode,
    Camera,
    InteractionMode,
    Level,
    PlaceableArea,
    RenderableUserDisplay,
    Sprite,
    ToggleableUserDisplay,
)

S = Sprite
PP, BB, NB = BlockingMode.PIXEL_PERFECT, BlockingMode.BOUNDING_BOX, BlockingMode.NOT_BLOCKED


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ((64, 64), (1, 0, 0)), ((8, 8), (8, 0, 0)), ((20, 20), (3, 2, 2)), ((21, 21), (3, 0, 0)),
        ((45, 45), (1, 9, 9)), ((11, 11), (5, 4, 4)), ((64, 48), (1, 0, 8)), ((32, 19), (2, 0, 13)),
        ((27, 32), (2, 5, 0)), ((39, 31), (1, 12, 16)), ((30, 15), (2, 2, 17)), ((3, 2), (21, 0, 11)), ((1, 1), (64, 0, 0)),
    ],
)
def test_scale_and_offset(size, expected):  # C18
    assert Camera(width=size[0], height=size[1])._calculate_scale_and_offset() == expected


def test_display_to_grid():  # C24
    camera = Camera(width=30, height=30)
    assert [camera.display_to_grid(x, 10) for x in (0, 1, 2, 3, 4, 61, 62, 63)] == [
        None, None, (0, 4), (0, 4), (1, 4), (29, 4), None, None,
    ]
    assert Camera(3, 5, 8, 8).display_to_grid(9, 9) == (4, 6)
    narrow = Camera(width=32, height=19)
    assert [narrow.display_to_grid(*p) for p in ((0, 12), (0, 13), (63, 50), (63, 51))] == [None, (0, 0), (31, 18), None]


def test_camera_validation():  # C50
    with pytest.raises(ValueError):
        Camera().resize(65, 10)
    with pytest.raises(ZeroDivisionError):
        Camera(width=0).render([])
    with pytest.raises(ValueError):
        Camera(width=65)
    camera = Camera()
    camera.x = 2.9
    assert camera.x == 2


def test_every_cell_is_a_uniform_block():  # C19
    sprites = [S([[row * 8 + col % 16 if (row * 8 + col) % 16 else 1]], x=col, y=row) for row in range(8) for col in range(8)]
    frame = Camera(width=8, height=8).render(sprites)
    for row in range(8):
        for col in range(8):
            block = frame[row * 8 : row * 8 + 8, col * 8 : col * 8 + 8]
            assert (block == block[0, 0]).all()


def test_letterbox_and_transparency():  # C20
    camera = Camera(width=3, height=2, background=1, letter_box=9)
    frame = camera.render([S([[2, -1], [3, 4]], x=1, y=0)])
    assert (frame[:11] == 9).all() and (frame[53:] == 9).all() and (frame[:, 63] == 9).all()
    assert (frame[11][0], frame[11][21], frame[11][42], frame[32][21], frame[32][42]) == (1, 2, 1, 3, 4)


def test_draw_order_and_modes():  # C21, C22
    a = S([[1]], layer=1)
    b = S([[2]], layer=1)
    low = S([[3]], layer=0)
    frame = Camera(width=1, height=1, background=0).render([low, a, b])
    assert frame[0, 0] == 2
    assert Camera(width=1, height=1, background=0).render([S([[5]], interaction=InteractionMode.INVISIBLE)])[0, 0] == 0
    assert Camera(width=1, height=1, background=0).render([S([[5]], interaction=InteractionMode.INTANGIBLE)])[0, 0] == 5
    assert Camera(width=2, height=1, background=0)._raw_render([S([[-2, 7]])]).tolist() == [[0, 7]]


def test_clipping():  # C23
    view = Camera(width=4, height=4, background=0)._raw_render([S([[1, 2, 3], [4, 5, 6]], x=-1, y=3)])
    assert view[3].tolist() == [2, 3, 0, 0] and (view[:3] == 0).all()


def test_get_sprite_at_order_and_modes():  # C25-C29
    a, b = S([[1]], name="A"), S([[2]], name="B")
    level = Level([a, b])
    assert level.get_sprite_at(0, 0) is a
    assert Camera(width=1, height=1).render(level.get_sprites())[0, 0] == 2
    assert Level([S([[-1]])]).get_sprite_at(0, 0) is None
    hit_box = S([[-1]], blocking=BB)
    assert Level([hit_box]).get_sprite_at(0, 0) is hit_box
    hit_nb = S([[-1]], blocking=NB)
    assert Level([hit_nb]).get_sprite_at(0, 0) is hit_nb
    glass = S([[-2]])
    assert Level([glass]).get_sprite_at(0, 0) is glass
    mid = S([[1]], layer=3, tags=["y"])
    top = S([[1]], layer=5, tags=["x"])
    tagged = Level([mid, top])
    assert tagged.get_sprite_at(0, 0, "y") is mid and tagged.get_sprite_at(0, 0, "zz") is None
    ghost = S([[1]], interaction=InteractionMode.INTANGIBLE)
    assert Level([ghost]).get_sprite_at(0, 0) is None
    assert Level([ghost]).get_sprite_at(0, 0, ignore_collidable=True) is ghost
    hidden = S([[1]], interaction=InteractionMode.INVISIBLE)
    assert Level([hidden]).get_sprite_at(0, 0) is hidden


def test_get_sprite_at_cache_is_stale_until_add():  # C29, quirk Q4
    lo, hi = S([[1]], layer=0, name="lo"), S([[1]], layer=5, name="hi")
    level = Level([lo, hi])
    assert level.get_sprite_at(0, 0) is hi
    lo.set_layer(10)
    assert level.get_sprite_at(0, 0) is hi
    level.add_sprite(S([[1]], x=5))
    assert level.get_sprite_at(0, 0) is lo
    replacement = [S([[1]], layer=0, name="new") for _ in level._sprites]
    old_order = list(level._engine_order)
    level._sprites = replacement
    assert level.get_sprite_at(0, 0) in old_order  # same length: the cached objects answer


def test_queries_return_fresh_lists():
    sprites = [S([[1]], name="n", tags=["a"]), S([[1]], name="m", tags=["a", "b"])]
    level = Level(sprites)
    assert level.get_sprites_by_tag("a") is not level.get_sprites_by_tag("a")
    assert level.get_sprites() == sprites and level.get_sprites() is not level._sprites
    assert level.get_sprites_by_tags(["a", "b"]) == [sprites[1]] and level.get_sprites_by_tags([]) == []
    assert level.get_sprites_by_any_tag(["b", "z"]) == [sprites[1]]
    assert level.get_sprites_by_name("n") == [sprites[0]] and level.get_all_tags() == {"a", "b"}
    level.remove_sprite(S([[1]]))
    assert len(level.get_sprites()) == 2


def test_clone_semantics():  # C32
    areas = [PlaceableArea(0, 0, 2, 2)]
    level = Level([S([[1]])], grid_size=(4, 4), data={"k": [1]}, name="L", placeable_areas=areas)
    twin = level.clone()
    assert twin._sprites[0] is not level._sprites[0]
    assert twin.get_data("k") == [1] and twin.get_data("k") is not level.get_data("k")
    assert twin.placeable_areas is areas and twin.grid_size is level.grid_size and twin.name == "L"
    assert Level().get_data("anything") is None
    assert Level()._data is Level()._data


def test_sys_static_merge():  # C33
    first = S([[1, -1, -1]], tags=["sys_static"], name="st1")
    plain = S([[5]], name="plain")
    second = S([[2, 2, 2]], tags=["sys_static"], name="st2")
    level = Level([first, plain, second])
    assert [s.name for s in level._sprites] == ["plain", "st1"]
    assert level._sprites[1].render().tolist() == [[1, 2, 2]]


def test_collides_with_and_interfaces():
    wall = S([[1]], x=1)
    level = Level([wall, S([[1]], x=1, blocking=NB)])
    assert level.collides_with(S([[1, 1]])) == [wall]

    class Marker(RenderableUserDisplay):
        def render_interface(self, frame):
            frame[0, 0] = 11
            return self.draw_sprite(frame, S([[3, -1]]), 62, 63)

    frame = Camera(width=8, height=8, background=0, letter_box=0, interfaces=[Marker()]).render([])
    assert frame[0, 0] == 11 and frame[63, 62] == 3 and frame[63, 63] == 0
    with pytest.raises(TypeError):
        RenderableUserDisplay()


def test_toggleable_display():
    pairs = [(S([[1]], x=0, y=0, tags=["t"]), S([[2]], x=0, y=0, tags=["t"])), (S([[3]], x=1), S([[4]], x=1))]
    toggles = ToggleableUserDisplay(pairs)
    assert toggles._sprite_pairs[0][0] is not pairs[0][0]
    toggles.disable(0)
    frame = toggles.render_interface(np.zeros((64, 64), dtype=np.int8))
    assert frame[0, 0] == 2 and frame[0, 1] == 4
    assert not toggles.is_enabled(0) and toggles.enable_first_by_tag("t") and toggles.is_enabled(0)
    assert toggles.disabled_first_by_tag("t") and not toggles.is_enabled(0)
    with pytest.raises(ValueError, match="Index 5 is out of bounds"):
        toggles.enable(5)


def test_level_deepcopy_keeps_sprite_aliasing():
    player = Sprite([[1]], name="player", x=2, tags=["p"])
    wall = Sprite([[2, 2]], name="wall", x=4)
    level = Level(sprites=[player, wall])
    level.get_sprite_at(2, 0)  # builds the (observable, Q4) draw order, a second list of the same sprites
    holder = {"level": level, "player": player}
    copied = copy.deepcopy(holder)
    new_level = copied["level"]
    new_player = copied["player"]
    assert new_level._sprites[0] is new_player and new_player is not player
    assert new_level._engine_order is not None and set(map(id, new_level._engine_order)) == set(map(id, new_level._sprites))
    assert (new_player.x, new_player.name, new_player.tags) == (2, "player", ["p"]) and new_player.tags is not player.tags
    new_player.move(1, 0)
    assert (player.x, new_player.x) == (2, 3)
    assert new_level.get_sprite_at(3, 0) is new_player
