"""The closed lists of names the whole project shares, each defined exactly once.

Everything above (tables in schemas/, readers, scoring, transforms, reports) imports these; nothing spells
them out again. The engine stays independent of schemas/: it keeps its own `engine.GameAction` enum, and a
unit test asserts that `ACTION_NAMES` equals its member names in id order.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "ACTION_NAMES", "ActionName", "BASELINE_RULES", "BaselineRule", "GAME_STATES", "HARC_RELEASES",
    "HARC_SPLITS", "HARC_TERMINAL_ACTIONS", "PLAY_STATES", "RECORDING_VARIANTS", "RecordingVariant",
]

# ARC-AGI-3 actions, indexed by action id (0 RESET, 1-5 ACTION1-5, 6 click, 7 undo).
ActionName = Literal["RESET", "ACTION1", "ACTION2", "ACTION3", "ACTION4", "ACTION5", "ACTION6", "ACTION7"]
ACTION_NAMES: tuple[ActionName, ...] = get_args(ActionName)

# Game states as the engine reports them; a play ends in one of the last three.
GAME_STATES = ("NOT_PLAYED", "NOT_FINISHED", "WIN", "GAME_OVER")
PLAY_STATES = GAME_STATES[1:]

# The shapes an ARC-AGI-3 recording file comes in (spec/formats.md §A).
# `playback`: an action script (formats.md §A.7), no engine output: it is replayed to be counted.
RecordingVariant = Literal["toolkit", "human-dataset", "benchmarking", "preview-2025", "playback"]
RECORDING_VARIANTS: tuple[RecordingVariant, ...] = get_args(RecordingVariant)

# Rules that pick a level's human baseline among completers' costs (spec/scoring.md §C).
BaselineRule = Literal["upper-median", "second-best", "median", "best"]
BASELINE_RULES: tuple[BaselineRule, ...] = get_args(BaselineRule)

# H-ARC: release generations (preferred first), ARC splits, and the events that end a task.
HARC_RELEASES = ("osf-current", "2024")
HARC_SPLITS = ("training", "evaluation")
HARC_TERMINAL_ACTIONS = ("no_last_description", "write_description", "write_last_description")
