"""``engine``: a clean-room, drop-in compatible reimplementation of the ARC-AGI-3 game engine API.

Game files written for the reference engine (``from arcengine import ...``) run on this package
unmodified when loaded through ``engine.loader`` (or with ``arcengine`` aliased to ``engine``).
On top of the reference API it offers a Gymnasium-style environment (``engine.make``), toolkit
recordings (``engine.recording``) and replay verification (``engine.replay``).

Only numpy and the standard library are used.
"""

from __future__ import annotations

from typing import Any

from .base_game import ARCBaseGame
from .camera import Camera
from .enums import (
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
from .interfaces import RenderableUserDisplay, ToggleableUserDisplay
from .level import Level
from .sprites import Sprite

__version__ = "0.1.0"  # the reference reports 0.1.0 too (it does not track its distribution version)

__all__ = [
    "Sprite",
    "BlockingMode",
    "InteractionMode",
    "PlaceableArea",
    "Camera",
    "Level",
    "GameAction",
    "GameState",
    "SimpleAction",
    "ComplexAction",
    "FrameData",
    "FrameDataRaw",
    "ARCBaseGame",
    "ActionInput",
    "RenderableUserDisplay",
    "ToggleableUserDisplay",
    "MAX_REASONING_BYTES",
]

# Environment API, loaded on first use so that importing the game API stays light.
_LAZY = {"make": "env", "GameEnv": "env", "Snapshot": "env"}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(f".{module_name}", __name__)
    return getattr(module, name)
