"""ARCBaseGame: the action loop, resets and progress (spec §7; checklist C34-C48)."""

import numpy as np
import pytest

from engine import (
    ActionInput,
    ARCBaseGame,
    BlockingMode,
    Camera,
    FrameData,
    FrameDataRaw,
    GameAction,
    GameState,
    Level,
    PlaceableArea,
    RenderableUserDisplay,
    Sprite,
)

RESET = ActionInput(id=GameAction.RESET)


def act(action_id, **data):
    return ActionInput(id=GameAction.from_id(action_id), data=data)


class Toy(ARCBaseGame):
    """The checklist's toy game: ACTION1 moves p right, ACTION2 next_level, ACTION3 lose."""

    def __init__(self, levels=3, **kwargs):
        self.calls = []
        self.saw_actions_attr = None
        level_list = [Level([Sprite([[i + 1]], name="p")], grid_size=(2, 2)) for i in range(levels)]
        super().__init__("toy", level_list, Camera(background=0, letter_box=9), **kwargs)

    def on_set_level(self, level):
        self.calls.append(("on_set_level", self._current_level_index))
        if self.saw_actions_attr is None:
            self.saw_actions_attr = hasattr(self, "_available_actions")

    def step(self):
        self.calls.append(("step", self.action.id))
        if self.action.id is GameAction.ACTION1:
            self.current_level.get_sprites_by_name("p")[0].move(1, 0)
        elif self.action.id is GameAction.ACTION2:
            self.next_level()
        elif self.action.id is GameAction.ACTION3:
            self.lose()
        self.complete_action()


def test_construction():  # C34
    game = Toy()
    assert game.calls == [("on_set_level", 0)] and game.saw_actions_attr is False
    assert game._state is GameState.NOT_PLAYED and game._available_actions == [1, 2, 3, 4, 5, 6]
    assert game._available_actions is Toy()._available_actions  # the shared default list (Q13)
    with pytest.raises(ValueError, match="at least one level"):
        ARCBaseGame("x", [])


def test_first_reset():  # C35
    game = Toy()
    game.calls.clear()
    result = game.perform_action(RESET)
    assert result.full_reset and result.state is GameState.NOT_FINISHED and len(result.frame) == 1
    assert game.calls == [("on_set_level", 0), ("step", GameAction.RESET)]


def test_level_then_full_reset():  # C36
    game = Toy()
    game.perform_action(RESET)
    game.perform_action(act(1))
    assert game.perform_action(RESET).full_reset is False
    assert game.perform_action(RESET).full_reset is True


def test_level_advance_takes_two_frames():  # C37, C38
    game = Toy()
    game.perform_action(RESET)
    result = game.perform_action(act(2), raw=False)
    assert len(result.frame) == 2 and result.frame[0][0][0] == 1 and result.frame[1][0][0] == 2
    assert result.levels_completed == 1 and game.level_index == 1 and game._action_count == 0
    after = game.perform_action(RESET)
    assert after.full_reset and game.level_index == 0 and after.levels_completed == 0


def test_win_and_rejections():  # C39, C40, C41
    game = Toy()
    game.perform_action(RESET)
    for _ in range(3):
        last = game.perform_action(act(2))
    assert last.state is GameState.WIN and last.levels_completed == 3 and last.win_levels == 3
    assert len(last.frame) == 1 and game.level_index == 2
    count, action = game._action_count, game.action
    rejected = game.perform_action(act(1), raw=True)
    assert type(rejected) is FrameData and rejected.frame == [] and rejected.levels_completed == 0
    assert rejected.win_levels == 0 and rejected.full_reset is False and rejected.state is GameState.WIN
    assert game._action_count == count and game.action is action
    assert game.perform_action(RESET).full_reset
    game.perform_action(act(2))
    game.perform_action(act(3))
    level_reset = game.perform_action(RESET)
    assert not level_reset.full_reset and level_reset.levels_completed == 1 and game.level_index == 1


def test_only_reset_levels_env(monkeypatch):  # C42
    monkeypatch.setenv("ONLY_RESET_LEVELS", "true")
    assert Toy().perform_action(RESET).full_reset is False
    monkeypatch.setenv("ONLY_RESET_LEVELS", "True")
    assert Toy().perform_action(RESET).full_reset is True


def test_frame_cap():  # C43
    class Slow(Toy):
        def __init__(self, needed):
            self.needed = needed
            super().__init__()

        def step(self):
            self.needed -= 1
            if self.needed == 0:
                self.complete_action()

    assert len(Slow(1001).perform_action(RESET, raw=True).frame) == 1001
    with pytest.raises(ValueError, match="Action took too many frames"):
        Slow(1002).perform_action(RESET, raw=True)


def test_unavailable_actions_are_processed():  # C44
    game = Toy(available_actions=[1])
    game.perform_action(RESET)
    result = game.perform_action(act(7))
    assert len(result.frame) == 1 and game._action_count == 1


@pytest.mark.parametrize(("win_score", "expected"), [(0, 3), (1, 3), (2, 2), (9, 9)])
def test_win_score(win_score, expected):  # C45
    assert Toy(win_score=win_score).win_score == expected


def test_raw_and_plain_results():  # C46
    game = Toy()
    raw = game.perform_action(RESET, raw=True)
    assert type(raw) is FrameDataRaw and raw.available_actions is game._available_actions
    assert raw.frame[0].dtype == np.int8 and raw.frame[0].shape == (64, 64)
    plain = game.perform_action(act(1), raw=False)
    assert type(plain) is FrameData and plain.available_actions is not game._available_actions
    assert type(plain.frame[0][0][0]) is int


def test_deep_copied_game_plays_on_like_the_original():
    # Snapshots deep-copy whole games; the copy drops the frame-list cache and must still
    # produce the same nested-list frames, independently of the original.
    import copy

    game = Toy()
    game.perform_action(RESET, raw=False)
    game.perform_action(act(1), raw=False)
    snapshot = copy.deepcopy(game)
    for action in (act(1), RESET, act(2)):
        mine, theirs = game.perform_action(action, raw=False), snapshot.perform_action(action, raw=False)
        assert mine.frame == theirs.frame and mine.levels_completed == theirs.levels_completed
    assert snapshot._engine_rows is not game._engine_rows


def test_interfaces_called_once_per_frame():  # C47
    class Paint(RenderableUserDisplay):
        def __init__(self, color):
            self.color = color
            self.calls = 0

        def render_interface(self, frame):
            self.calls += 1
            frame[0, 0] = self.color
            return frame

    class TwoFrames(Toy):
        def step(self):
            if not getattr(self, "half", False):
                self.half = True
                return
            self.half = False
            self.complete_action()

    game = TwoFrames()
    first, second = Paint(11), Paint(12)
    game.camera.replace_interface([first, second])
    result = game.perform_action(RESET, raw=True)
    assert first.calls == second.calls == 2 and all(frame[0, 0] == 12 for frame in result.frame)


def test_valid_actions_helper():  # C48
    class Clicky(ARCBaseGame):
        def __init__(self):
            sprites = [
                Sprite([[-1, 5], [6, 7]], x=2, y=1, tags=["sys_click"]),
                Sprite([[1, 1]], x=0, y=3, tags=["sys_click", "sys_every_pixel"]),
                Sprite([[9]], x=3, y=3, tags=["sys_place"], visible=False),
            ]
            super().__init__("c", [Level(sprites, grid_size=(8, 8))], available_actions=[1, 2, 6, 7, 5])

    got = [(a.id.name, a.data) for a in Clicky()._get_valid_actions()]
    assert got == [
        ("ACTION1", {}), ("ACTION2", {}), ("ACTION6", {"x": 24, "y": 8}), ("ACTION6", {"x": 0, "y": 24}),
        ("ACTION6", {"x": 8, "y": 24}), ("ACTION6", {"x": 24, "y": 24}), ("ACTION5", {}),
    ]


def test_placeable_actions():
    class Placer(ARCBaseGame):
        def __init__(self):
            level = Level([Sprite([[1]])], grid_size=(8, 8), placeable_areas=[PlaceableArea(0, 0, 4, 2, 2, 1)])
            super().__init__("p", [level], available_actions=[6])

    game = Placer()
    game.set_placeable_sprite(game.current_level.get_sprites()[0])
    assert [a.data for a in game._get_valid_actions()] == [
        {"x": 0, "y": 0}, {"x": 16, "y": 0}, {"x": 0, "y": 8}, {"x": 16, "y": 8},
    ]


def test_pixel_read_back():  # C49
    class Pix(ARCBaseGame):
        def __init__(self):
            super().__init__("p", [Level([Sprite([[1, 2], [3, 4]], x=1, y=1)], grid_size=(4, 4))], Camera(background=0))

    game = Pix()
    assert game.get_pixels(0, 0, 3, 3).tolist() == [[0, 0, 0], [0, 1, 2], [0, 3, 4]]
    assert game.get_pixels(-1, 0, 2, 2).shape == (2, 0)
    # The window is the caller's own array: writing into it changes neither the scene nor later reads.
    window = game.get_pixels(1, 1, 2, 2)
    window[...] = 7
    assert game.get_pixels(0, 0, 3, 3).tolist() == [[0, 0, 0], [0, 1, 2], [0, 3, 4]]
    # Python slicing semantics of the full view, negative and oversized bounds included.
    view = game.camera._raw_render(game.current_level.get_sprites())
    for x, y, w, h in [(-3, -2, 2, 3), (2, -1, 5, 9), (3, 3, 4, 4), (-1, -1, 1, 1)]:
        assert np.array_equal(game.get_pixels(x, y, w, h), view[y : y + h, x : x + w])


def test_try_move():  # C31
    class Mover(ARCBaseGame):
        def __init__(self):
            sprites = [
                Sprite([[1]], name="p"),
                Sprite([[2]], name="w1", x=1),
                Sprite([[3]], name="w2", x=1, blocking=BlockingMode.BOUNDING_BOX),
                Sprite([[4]], name="gh", x=1, visible=True, collidable=False),
            ]
            super().__init__("m", [Level(sprites, grid_size=(4, 4))])

    game = Mover()
    player = game.current_level.get_sprites_by_name("p")[0]
    hits = game.try_move_sprite(player, 1, 0)
    assert [s.name for s in hits] == ["w1", "w2"] and (player.x, player.y) == (0, 0)
    assert game.try_move("p", 0, 1) == [] and (player.x, player.y) == (0, 1)
    with pytest.raises(ValueError, match="No sprite found with name: zz"):
        game.try_move("zz", 0, 1)


def test_set_level_errors():
    game = Toy()
    with pytest.raises(IndexError, match=r"Level index 3 out of range \[0, 3\)"):
        game.set_level(3)
    with pytest.raises(ValueError):
        game.set_level_by_name("nope")
