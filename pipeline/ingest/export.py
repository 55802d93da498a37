"""Export ingested recordings back to the toolkit JSONL shape (without frame pixels).

Used to prove ingest is lossless for what counts (every action, click and reasoning blob comes back
exactly), and by researchers who want a cleaned recording of one file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pipeline.core.outputs import write_with
from pipeline.core.workspace import Workspace


def export_recording_lines(ws: Workspace, file_id: str) -> Iterator[dict]:
    """The file's frame lines as toolkit-format line objects, in file order (quarantined lines are absent)."""
    steps = ws.read(
        "SELECT * FROM core_arc3__steps WHERE file_id = ? ORDER BY line_number", [file_id]
    )
    for row in steps.iter_rows(named=True):
        data: dict = {}
        if row["action_id"] == 6:
            data = {"x": row["click_x"], "y": row["click_y"]}
        frame_record = {
            "game_id": row["game_id"],
            "state": row["state"],
            "levels_completed": row["levels_completed"],
            "win_levels": row["win_levels"],
            "action_input": {
                "id": row["action_name"],
                "data": data,
                "reasoning": None if row["reasoning_json"] is None else json.loads(row["reasoning_json"]),
            },
            "guid": row["guid"],
            "full_reset": row["is_full_reset"],
            "available_actions": row["available_actions"],
        }
        yield {"timestamp": row["recorded_at"].isoformat() if row["recorded_at"] else None, "data": frame_record}


def write_recording(ws: Workspace, file_id: str, path: Path) -> int:
    """Write the recording of `file_id` to `path` whole (pipeline.core.outputs); the number of lines."""
    n = 0

    def write(tmp: Path) -> None:
        nonlocal n
        with open(tmp, "w", encoding="utf-8") as fh:
            for line in export_recording_lines(ws, file_id):
                fh.write(json.dumps(line) + "\n")
                n += 1

    write_with(path, write)
    return n
