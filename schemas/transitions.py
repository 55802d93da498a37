"""The columns of a transitions dataset (`arcstudy export-transitions`): one Parquet row per engine response.

This is a file layout, not a database table: it is not in `tables.toml` (the workspace never creates it), but
its columns are defined here, once, like every table's. `ARROW_SCHEMA` is the Parquet schema the shards are
written with; the dataset card's column list is generated from `COLUMNS`.

Frames are `list<binary>`: one 4096-byte value per frame (64x64 uint8, row-major, the bytes the frame hash is
taken of), with `frame_shape` [64, 64] beside them. polars reads it as `List(Binary)`, DuckDB as `BLOB[]`, the
Hugging Face `datasets` Parquet loader as a list of `binary` values, with no conversion; `np.frombuffer(f,
np.uint8).reshape(64, 64)` gives a frame. A nested `list<list<list<uint8>>>` was the first choice: Parquet
stores a repetition and a definition level for every one of its 4096 cells a frame, which made writing (and
reading) it cost more than replaying the game.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from schemas.model import Field
from schemas.vocabulary import ACTION_NAMES, GAME_STATES

TRANSITION_SOURCES = ("human", "agent", "playback")
ACTIONS = ACTION_NAMES
STATES = GAME_STATES

# (field, arrow type): the field carries the name, meaning and checks; polars types are those arrow maps to.
_COLUMNS: list[tuple[Field, pa.DataType]] = [
    (Field("game_id", pl.String, "game and version played (`<code>-<version>`), as the recording or the replay named "
           "it"), pa.string()),
    (Field("play_id", pl.String, "`<session guid>/<play index>`: the play (a session is cut into plays at every full "
           "reset), as `arcstudy score` and ingest name it"), pa.string()),
    (Field("source", pl.String, "who played: `human` (official human-dataset recordings), `agent` (toolkit and "
           "agents-recorder recordings) or `playback` (action-only scripts, every response made by the replay)",
           isin=TRANSITION_SOURCES), pa.string()),
    (Field("step", pl.Int64, "the response's place in its session: 0 = the response to make()'s opening RESET, "
           "then 1, 2, ... one per action sent (the action script's k-th action is step k); it goes on across "
           "full resets, where play_id changes", ge=0), pa.int32()),
    (Field("action", pl.String, "the action that produced this response (RESET, ACTION1-ACTION7)", isin=ACTIONS),
     pa.string()),
    (Field("action_id", pl.Int64, "the same action as its id (0 = RESET, 1-7 = ACTION1-ACTION7)", ge=0, le=7),
     pa.int8()),
    (Field("x", pl.Int64, "ACTION6 click column (0-63); null for other actions", nullable=True, ge=0, le=63),
     pa.int8()),
    (Field("y", pl.Int64, "ACTION6 click row (0-63); null for other actions", nullable=True, ge=0, le=63), pa.int8()),
    (Field("frames", pl.List(pl.Binary), "the response's frames, one 4096-byte value per frame: 64 rows of 64 "
           "colour indexes 0-15, uint8, row-major (`np.frombuffer(f, np.uint8).reshape(frame_shape)`); the last "
           "is the settled screen, earlier ones the animation. Empty for a post-terminal echo"),
     pa.list_(pa.binary())),
    (Field("frame_shape", pl.List(pl.Int16), "the shape of every frame of the row: [64, 64] (rows, columns)"),
     pa.list_(pa.int16())),
    (Field("frame_sha256s", pl.List(pl.String), "sha256 of each frame's 4096 uint8 cells, row-major (the conformance kit's "
           "frame hash), one per frame"), pa.list_(pa.string())),
    (Field("levels_completed", pl.Int64, "levels completed after this response", ge=0), pa.int32()),
    (Field("win_levels", pl.Int64, "levels the game has (as the response says)", nullable=True, ge=0), pa.int32()),
    (Field("state", pl.String, "game state after this response", isin=STATES), pa.string()),
    (Field("available_actions", pl.List(pl.Int8), "action ids the game accepts after this response", nullable=True),
     pa.list_(pa.int8())),
    (Field("is_level_change", pl.Boolean, "the toolkit's card records a level change here (levels_completed differs "
           "from the play's previous step)"), pa.bool_()),
    (Field("is_counted", pl.Boolean, "the toolkit counts this action on the card (false for the opening RESET and "
           "post-terminal echoes)"), pa.bool_()),
    (Field("verified", pl.Boolean, "the row was replayed on the engine and agrees with the recording (state, levels, "
           "available actions and, where the recording had frames, every frame); rows of playback scripts are "
           "the engine's own. False: the game could not be loaded (frames from the file, unchecked) or this "
           "step's frames differed while the replay reconverged later (the file's frames are kept)"), pa.bool_()),
    (Field("recovered", pl.Boolean, "the action was recovered (--recovered-actions) because the recorder lost it"),
     pa.bool_()),
    (Field("file_id", pl.String, "sha256 of the input file (or the database's file_id): where the row came from"),
     pa.string()),
    (Field("line_number", pl.Int64, "1-based line of the input file holding this response; null for a response "
           "the file does not hold (the opening RESET a recording lacks)", nullable=True, ge=1), pa.int32()),
]

COLUMNS: tuple[Field, ...] = tuple(f for f, _ in _COLUMNS)
COLUMN_NAMES: tuple[str, ...] = tuple(f.name for f in COLUMNS)
ARROW_SCHEMA = pa.schema([pa.field(f.name, t, nullable=f.nullable) for f, t in _COLUMNS])
FRAME_SHAPE = (64, 64)
