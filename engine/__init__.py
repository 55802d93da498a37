"""``engine``: a clean-room, drop-in compatible reimplementation of the ARC-AGI-3 game engine API
(arcengine 0.9.3, as specified in shared/spec/engine-api.md).

Game files written for the reference engine (``from arcengine import ...``) run unmodified when
loaded through ``engine.loader`` (or with ``arcengine`` aliased to ``engine``, as the conformance
kit does).  Only numpy and the standard library are used.

Modules:

* reference API - ``enums`` (actions, states, FrameData models on a small pydantic-compatible base in
  ``_model``), ``sprites``, ``level``, ``camera``, ``interfaces``, ``base_game``;
* ``loader`` - finds ``<id>/<version>/<id>.py`` + ``metadata.json`` under named directories, picks a
  version, executes the game with ``arcengine`` imports resolved to this package (scoped to the game
  module, ``sys.modules`` untouched), and only code inside the game's own version folder;
* ``env`` - ``make(game_id, environments_dir)`` -> ``GameEnv`` (``reset``, ``step``, ``start_level``,
  frame modes, ``state_hash``, ``snapshot``/``restore``/``share_levels``, ``only_reset_levels`` per
  environment);
* ``statehash`` - what the state hash covers;
* ``recording`` - toolkit JSONL writer and reader; ``replay`` - re-run a recording, first divergence.
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
