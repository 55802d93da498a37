"""A playback script's actions are held as columns (`ScriptActions`): about 11 bytes an action where a list of
`ScriptAction`s took about 110, so one script of millions of actions stays small in every command that reads it
(an export of 7 million actions reached 1 GB in the reader alone). Each action is made as it is asked for, equal to
what the list held."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from pipeline.recordings.playback import ScriptAction, ScriptActions, read_playback_file, replay_items

GAME = "bg41-a6ea70d5"


def _line(action_id: int, data: dict | None = None, reasoning=None) -> str:
    action = {"id": action_id, "data": {"game_id": GAME, **(data or {})}}
    if reasoning is not None:
        action["reasoning"] = reasoning
    return json.dumps({"data": {"action_input": action}}) + "\n"


def test_the_actions_read_are_the_script_actions_as_they_were(tmp_path: Path):
    path = tmp_path / "bg41_mixed.playback.jsonl"
    path.write_text(_line(0) + _line(6, {"x": 0, "y": 63}) + '{"data": {"note": 1}}\n' + _line(3, reasoning={"why": [1, 2.5]})
                    + _line(6, {"x": 63, "y": 0}, reasoning="click") + _line(7))
    actions = read_playback_file(path).actions
    expected = [ScriptAction(1, 0), ScriptAction(2, 6, 0, 63), ScriptAction(4, 3, reasoning={"why": [1, 2.5]}),
                ScriptAction(5, 6, 63, 0, "click"), ScriptAction(6, 7)]
    assert isinstance(actions, ScriptActions) and len(actions) == 5
    assert list(actions) == expected and actions == expected and expected == actions
    assert actions[1] == expected[1] and actions[-1] == expected[-1] and actions[1:4] == expected[1:4]
    assert actions[::2] == expected[::2] and actions[10:] == []
    # what a replay in the sandbox is sent: the same from the columns as from the objects
    assert replay_items(actions, 0, 5) == replay_items(expected, 0, 5) == [
        (0, {}, None, 1, "RESET"), (6, {"x": 0, "y": 63}, None, 2, "ACTION6"), (3, {}, {"why": [1, 2.5]}, 4, "ACTION3"),
        (6, {"x": 63, "y": 0}, "click", 5, "ACTION6"), (7, {}, None, 6, "ACTION7")]
    assert replay_items(actions, 3, 99) == replay_items(expected, 3, 99)


def test_a_long_script_is_held_in_a_few_bytes_an_action(tmp_path: Path):
    n = 20_000
    path = tmp_path / "bg41_long.playback.jsonl"
    path.write_text("".join(_line(6, {"x": i % 64, "y": i // 64 % 64}) if i % 3 == 0 else _line(1 + i % 4)
                            for i in range(n)))
    tracemalloc.start()
    try:
        script = read_playback_file(path, keep_lines=False)
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(script.actions) == n and script.actions[3] == ScriptAction(4, 6, 3, 0)
    assert held / n < 20, f"{held / n:.0f} bytes an action"  # a list of ScriptAction: about 110


def test_a_long_script_whose_columns_wait_on_disk_reads_the_same(tmp_path: Path, monkeypatch):
    """Past `HELD_ITEMS` actions a script's columns (and its skipped lines) keep only their newest items in
    memory, the rest on disk (`SpillArray`): made tiny here, the same script reads as the same actions, skipped
    lines and replay items."""
    from pipeline.core import spill
    from pipeline.core.spill import SpillArray

    path = tmp_path / "bg41_long.playback.jsonl"
    lines = []
    for i in range(3_000):
        lines.append(_line(6, {"x": i % 64, "y": (i // 64) % 64}) if i % 3 else _line(i % 8, reasoning=f"r{i}"
                                                                                         if i % 7 == 0 else None))
        if i % 5 == 0:
            lines.append('{"data": {"note": 1}}\n')
    path.write_text("".join(lines))
    held = read_playback_file(path)
    monkeypatch.setattr(spill, "HELD_ITEMS", 256)
    monkeypatch.setattr(spill, "BLOCK_ITEMS", 64)
    spilled = read_playback_file(path)
    assert isinstance(spilled.actions.line_number, SpillArray) and spilled.actions.line_number.spilled() > 2_000
    assert isinstance(spilled.skipped_lines, SpillArray) and spilled.skipped_lines.spilled() > 0
    assert list(spilled.actions) == list(held.actions) and list(spilled.skipped_lines) == list(held.skipped_lines)
    assert replay_items(spilled.actions, 100, 2_900) == replay_items(held.actions, 100, 2_900)
    actions = list(held.actions)  # a stored script's columns come a block of lines at a time
    columns = ScriptActions.of_column_parts(([a.line_number for a in part], [a.action_id for a in part],
                                             [a.x for a in part], [a.y for a in part])
                                            for part in (actions[at:at + 500] for at in range(0, len(actions), 500)))
    assert isinstance(columns.x, SpillArray) and columns.x.spilled() > 2_000
    assert [(a.line_number, a.action_id, a.x, a.y) for a in columns] == [(a.line_number, a.action_id, a.x, a.y)
                                                                          for a in actions]
