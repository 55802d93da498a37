"""Enums and data models of ``engine.enums`` (spec §2, checklist C1-C7, C46)."""

import importlib
import json

import pytest

import engine
from engine import (
    MAX_REASONING_BYTES,
    ActionInput,
    BlockingMode,
    ComplexAction,
    FrameData,
    FrameDataRaw,
    GameAction,
    GameState,
    InteractionMode,
    PlaceableArea,
    SimpleAction,
)
from engine._model import ValidationError


def test_top_level_names_and_version():
    assert sorted(engine.__all__) == sorted(
        [
            "Sprite", "BlockingMode", "InteractionMode", "PlaceableArea", "Camera", "Level", "GameAction",
            "GameState", "SimpleAction", "ComplexAction", "FrameData", "FrameDataRaw", "ARCBaseGame",
            "ActionInput", "RenderableUserDisplay", "ToggleableUserDisplay", "MAX_REASONING_BYTES",
        ]
    )
    assert engine.__version__ == "0.1.0"
    modules = {name: importlib.import_module(f"engine.{name}") for name in ("enums", "sprites", "level", "camera", "interfaces", "base_game")}
    assert modules["enums"].ActionInput is engine.ActionInput
    assert modules["sprites"].Sprite is engine.Sprite
    assert modules["level"].Level is engine.Level
    assert modules["camera"].Camera is engine.Camera
    assert modules["interfaces"].RenderableUserDisplay is engine.RenderableUserDisplay
    assert modules["base_game"].ARCBaseGame is engine.ARCBaseGame
    assert modules["base_game"].MAX_FRAME_PER_ACTION == 1000


def test_engine_package_does_not_import_harc_or_pipeline():
    source = (engine.__file__.rsplit("/", 1)[0]) + "/__init__.py"
    text = open(source, encoding="utf-8").read()
    assert "harc" not in text and "pipeline" not in text and "schemas" not in text


def test_game_action_members_values_and_kinds():  # C1
    assert [(m.name, m.value) for m in GameAction] == [(f"ACTION{i}" if i else "RESET", i) for i in range(8)]
    assert [m for m in GameAction if m.is_complex()] == [GameAction.ACTION6]
    assert GameAction.all_simple() == [m for m in GameAction if m is not GameAction.ACTION6]
    assert GameAction.all_complex() == [GameAction.ACTION6]
    assert GameAction.ACTION6.action_type is ComplexAction
    assert isinstance(GameAction.ACTION1.action_data, SimpleAction)
    assert GameAction["ACTION3"] is GameAction.ACTION3


def test_game_action_lookup():  # C2, C3
    assert GameAction.from_name("action3") is GameAction.ACTION3
    with pytest.raises(ValueError, match="No GameAction with id 8"):
        GameAction.from_id(8)
    with pytest.raises(ValueError, match="No GameAction with name 'jump'"):
        GameAction.from_name("jump")
    assert (GameAction.ACTION6 == 6) is False
    assert GameAction.ACTION1.validate_data({"x": 99}) is True
    with pytest.raises(ValidationError):
        GameAction.ACTION6.validate_data({"x": 64})


def test_set_data_is_process_wide_and_returns_model():
    try:
        data = GameAction.ACTION6.set_data({"x": 3, "y": 4})
        assert (data.x, data.y) == (3, 4)
        assert GameAction.ACTION6.action_data is data
    finally:
        GameAction.ACTION6.set_data({})


def test_action_input_ids_and_data():  # C4, C6
    assert ActionInput(id=6).id is GameAction.ACTION6
    assert ActionInput().id is GameAction.RESET
    with pytest.raises(ValidationError):
        ActionInput(id="ACTION1")
    raw = {"x": 100}
    action = ActionInput(id=6, data=raw)
    assert action.data == {"x": 100} and action.data is not raw
    assert ActionInput(id=6, data={"x": -5}).data == {"x": -5}
    with pytest.raises(ValidationError):
        ComplexAction(x=64)
    assert ComplexAction(x="5", unknown=1).x == 5
    assert ActionInput(id=6, data={"x": 1, "y": 2}).model_dump_json() == '{"id":6,"data":{"x":1,"y":2},"reasoning":null}'


def test_reasoning_size_limit():  # C5
    assert MAX_REASONING_BYTES == 16384
    assert ActionInput(reasoning="x" * 16382).reasoning == "x" * 16382
    with pytest.raises(ValidationError):
        ActionInput(reasoning="x" * 16383)
    with pytest.raises(ValidationError):
        ActionInput(reasoning={1})
    assert ActionInput(reasoning={"a": [1, 2]}) == ActionInput(reasoning={"a": [1, 2]})


def test_frame_data_defaults_and_validation():  # C7
    frame = FrameData()
    assert frame.game_id == "" and frame.frame == [] and frame.state is GameState.NOT_PLAYED
    assert frame.levels_completed == 0 and frame.win_levels == 0 and frame.guid is None
    assert frame.full_reset is False and frame.available_actions == [] and frame.action_input == ActionInput()
    assert frame.is_empty()
    with pytest.raises(ValidationError):
        FrameData(levels_completed=255)
    assert FrameData(score=3).levels_completed == 0
    actions = [1, 2]
    assert FrameData(available_actions=actions).available_actions is not actions
    action = ActionInput(id=1)
    assert FrameData(action_input=action).action_input is action
    assert json.loads(str(FrameData(state="WIN")))["state"] == "WIN"


def test_frame_data_round_trips_through_json():
    original = FrameData(
        game_id="g-1", frame=[[[1, 2], [3, 4]]], state=GameState.WIN, levels_completed=2, win_levels=3,
        action_input=ActionInput(id=6, data={"x": 1, "y": 2}), guid="abc", full_reset=True, available_actions=[6],
    )
    restored = FrameData.model_validate_json(original.model_dump_json())
    assert restored == original
    assert original.model_dump(mode="json")["action_input"]["id"] == 6
    assert original.model_dump()["state"] is GameState.WIN


def test_frame_data_raw_has_private_frame():
    raw = FrameDataRaw()
    assert "frame" not in raw.model_dump()
    assert raw.frame == [] and raw.is_empty()
    raw.frame = ["x"]
    assert not raw.is_empty()
    assert FrameDataRaw(levels_completed=999).levels_completed == 999


def test_enum_shapes():
    assert GameState.WIN == "WIN" and isinstance(GameState.WIN, str)
    assert [m.value for m in BlockingMode] == [1, 2, 3]
    assert [m.value for m in InteractionMode] == [1, 2, 3, 4]
    area = PlaceableArea(1, 2, 3, 4)
    assert (area.x, area.y, area.width, area.height, area.x_scale, area.y_scale) == (1, 2, 3, 4, 1, 1)
