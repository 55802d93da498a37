"""H-ARC task editor engine and trace replay (shared/spec/harc-editor.md).

Self-contained: numpy and the standard library only; nothing from the game engine, pipeline/ or
schemas/.

- ``grid``: grid strings (``"|077|777|077|"``) <-> arrays, resize and 4-connected flood fill.
- ``editor``: ``Editor``, the collection page's state machine, one method per logged action.
- ``replay``: ``replay_trace`` checks a participant-task trace row by row against the editor.
- ``graph``: ``build_state_graph``, the visited-state graph of a task's traces.
"""

from .editor import (
    LOCATIONS,
    MAX_ATTEMPTS,
    OPAQUE_SNAPSHOT,
    PLACEHOLDER_INPUT,
    ROW_KEYS,
    TOOLS,
    ActionRejected,
    Editor,
    EditorError,
    EditorState,
    Highlight,
    InvalidInput,
    OpaqueSnapshotError,
    judge_submission,
)
from .graph import SKIPPED_ACTIONS as GRAPH_SKIPPED_ACTIONS
from .graph import StateEdge, StateGraph, StateNode, build_state_graph
from .grid import (
    MAX_SIDE,
    Grid,
    GridFormatError,
    as_grid,
    flood_fill,
    format_grid,
    grid_size,
    is_grid_string,
    parse_grid,
    resized,
    zeros,
)
from .replay import (
    KNOWN_ACTIONS,
    Divergence,
    ReplayNote,
    ReplayResult,
    replay_participant,
    replay_trace,
)

# The tutorial shown to evaluation participants (e9afcf9a) normally ends on its answer; a candidate
# PREV for task 1 when undo reaches into the tutorial (spec §1.2, Q3). Not certain, so not a default.
EVALUATION_TUTORIAL_ANSWER = "|626262|262626|"

__all__ = [
    "EVALUATION_TUTORIAL_ANSWER",
    "GRAPH_SKIPPED_ACTIONS",
    "KNOWN_ACTIONS",
    "LOCATIONS",
    "MAX_ATTEMPTS",
    "MAX_SIDE",
    "OPAQUE_SNAPSHOT",
    "PLACEHOLDER_INPUT",
    "ROW_KEYS",
    "TOOLS",
    "ActionRejected",
    "Divergence",
    "Editor",
    "EditorError",
    "EditorState",
    "Grid",
    "GridFormatError",
    "Highlight",
    "InvalidInput",
    "OpaqueSnapshotError",
    "ReplayNote",
    "ReplayResult",
    "StateEdge",
    "StateGraph",
    "StateNode",
    "as_grid",
    "build_state_graph",
    "flood_fill",
    "format_grid",
    "grid_size",
    "is_grid_string",
    "judge_submission",
    "parse_grid",
    "replay_participant",
    "replay_trace",
    "resized",
    "zeros",
]
