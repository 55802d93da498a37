"""H-ARC trace replay and visited-state graph (harc-editor.md §4, §6, §7; H-ARC paper Figure 1)."""

from __future__ import annotations

import copy
import csv
import io
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.harc import (
    Editor,
    build_state_graph,
    format_grid,
    parse_grid,
    replay_participant,
    replay_trace,
)

# harc-editor.md §7.1, verbatim (test_worked_example_matches_the_spec checks it did not drift).
WORKED_CSV = """\
action_id,time,attempt_number,solved,action,action_x,action_y,select_loc,selected_data,selected_symbol,selected_tool,copy_paste_data,test_output_grid,test_output_size_x,test_output_size_y,test_input_grid,test_input_size_x,test_input_size_y
1,2024-03-05T10:00:00.000000,1,false,reset_grid,,,,[],0,edit,[],|000|000|000|,3,3,|000|000|000|,3,3
2,2024-03-05T10:00:19.000000,1,false,change_width,,,,[],0,edit,[],|0000|0000|0000|,3,4,|0000|0660|0600|,3,4
3,2024-03-05T10:00:25.000000,1,false,change_color,,,,[],8,edit,[],|0000|0000|0000|,3,4,|0000|0660|0600|,3,4
4,2024-03-05T10:00:27.000000,1,false,edit,0.0,1.0,,[],8,edit,[],|0800|0000|0000|,3,4,|0000|0660|0600|,3,4
5,2024-03-05T10:00:27.000000,1,false,edit,1.0,1.0,,[],8,edit,[],|0800|0800|0000|,3,4,|0000|0660|0600|,3,4
6,2024-03-05T10:00:28.000000,1,false,edit,2.0,0.0,,[],8,edit,[],|0800|0800|8000|,3,4,|0000|0660|0600|,3,4
7,2024-03-05T10:00:33.000000,1,false,change_tool,,,,[],8,floodfill,[],|0800|0800|8000|,3,4,|0000|0660|0600|,3,4
8,2024-03-05T10:00:35.000000,1,false,floodfill,0.0,0.0,,[],8,floodfill,[],|8800|8800|8000|,3,4,|0000|0660|0600|,3,4
9,2024-03-05T10:00:41.000000,1,false,change_tool,,,,[],8,select,[],|8800|8800|8000|,3,4,|0000|0660|0600|,3,4
10,2024-03-05T10:00:44.000000,1,false,select_cells,1.0,1.0,test_input,"[[1,1],[1,2],[2,1],[2,2]]",8,select,[],|8800|8800|8000|,3,4,|0000|0660|0600|,3,4
11,2024-03-05T10:00:45.000000,1,false,select_copy,,,,"[[1,1],[1,2],[2,1],[2,2]]",8,select,"[[1,1,6],[1,2,6],[2,1,6],[2,2,0]]",|8800|8800|8000|,3,4,|0000|0660|0600|,3,4
12,2024-03-05T10:00:49.000000,1,false,select_cells,1.0,3.0,test_output,"[[1,3]]",8,select,"[[1,1,6],[1,2,6],[2,1,6],[2,2,0]]",|8800|8800|8000|,3,4,|0000|0660|0600|,3,4
13,2024-03-05T10:00:50.000000,1,false,select_paste,1.0,3.0,,"[[1,3]]",8,select,"[[1,1,6],[1,2,6],[2,1,6],[2,2,0]]",|8800|8806|8006|,3,4,|0000|0660|0600|,3,4
14,2024-03-05T10:00:58.000000,1,false,undo,,,,"[[1,3]]",8,select,"[[1,1,6],[1,2,6],[2,1,6],[2,2,0]]",|0800|0800|8000|,3,4,|0000|0660|0600|,3,4
15,2024-03-05T10:01:40.000000,1,false,write_first_description,,,,"[[1,3]]",8,select,"[[1,1,6],[1,2,6],[2,1,6],[2,2,0]]",|0800|0800|8000|,3,4,|0000|0660|0600|,3,4
16,2024-03-05T10:01:40.000000,1,false,submit,,,,[],8,select,"[[1,1,6],[1,2,6],[2,1,6],[2,2,0]]",|0800|0800|8000|,3,4,|0000|0660|0600|,3,4
"""
PREV = "|12|21|"
WORKED_INPUT = "|0000|0660|0600|"


def worked_rows() -> list[dict]:
    """The worked example as raw CSV text values (empty string = null)."""
    return list(csv.DictReader(io.StringIO(WORKED_CSV)))


def typed(rows: list[dict]) -> list[dict]:
    """The same rows as a dataframe library would parse them: numbers, bools, NaN/None nulls, JSON lists."""
    result = []
    for row in rows:
        out: dict = {}
        for key, value in row.items():
            if key in ("action_x", "action_y"):
                out[key] = float(value) if value else math.nan
            elif key in ("selected_data", "copy_paste_data"):
                out[key] = json.loads(value)
            elif key == "solved":
                out[key] = value == "true"
            elif key.endswith(("_size_x", "_size_y")) or key in (
                "action_id",
                "attempt_number",
                "selected_symbol",
            ):
                out[key] = int(value)
            else:
                out[key] = value or None
        result.append(out)
    return result


def row(action_id: int, action: str, grid: str, size: tuple[int, int], **columns) -> dict:
    """A hand-written row with only the columns a micro-example shows."""
    return {
        "action_id": action_id,
        "action": action,
        "test_output_grid": grid,
        "test_output_size_x": size[0],
        "test_output_size_y": size[1],
        **columns,
    }


# ---------------------------------------------------------------------- the worked example


def test_worked_example_matches_the_spec(shared_dir):
    text = (shared_dir / "spec" / "harc-editor.md").read_text()
    block = text.split("### 7.1", 1)[1].split("```", 2)[1]
    assert block.strip().splitlines() == WORKED_CSV.strip().splitlines()


@pytest.mark.parametrize("previous", [PREV, None])
def test_worked_example_replays_exactly(previous):
    rows = worked_rows()
    result = replay_trace(rows, previous_grid=previous, strict=True)
    assert result.status == "consistent", result
    assert result.n_rows == result.n_rows_replayed == 16
    assert list(result.grids) == [r["test_output_grid"] for r in rows]
    assert result.adopted_rows == ()
    assert [n for n in result.notes if n.is_mismatch] == []


def test_worked_example_typed_rows_and_known_input_and_answer():
    result = replay_trace(
        typed(worked_rows()), previous_grid=PREV, test_input=WORKED_INPUT, answer="|1111|", strict=True
    )
    assert result.status == "consistent", result


def test_editor_reproduces_the_worked_example_rows():
    editor = Editor()
    editor.load_task(WORKED_INPUT, previous_grid=PREV)
    editor.change_width(4)
    editor.palette_click(8)
    for cell in [(0, 1), (1, 1), (2, 0)]:
        editor.edit(*cell)
    editor.change_tool("floodfill")
    editor.floodfill(0, 0)
    editor.change_tool("select")
    editor.select_cells("test_input", [[1, 1], [1, 2], [2, 1], [2, 2]])
    editor.select_copy()
    editor.select_cells("test_output", [[1, 3]])
    editor.select_paste()
    editor.undo()
    editor.press_submit("|1111|")
    editor.send_first_description("|1111|")
    recorded = typed(worked_rows())
    for produced, expected in zip(editor.log, recorded, strict=True):
        for key, value in produced.items():
            if isinstance(value, float) or isinstance(expected[key], float):
                assert (value is None and math.isnan(expected[key])) or value == expected[key], key
            else:
                assert value == expected[key], (expected["action_id"], key)


# ---------------------------------------------------------------------- corrupted traces


def test_changed_cell_is_the_first_divergence():
    rows = worked_rows()
    rows[7]["test_output_grid"] = "|8800|8800|8001|"
    result = replay_trace(rows, previous_grid=PREV)
    assert result.status == "divergent"
    d = result.divergence
    assert (d.row_index, d.action_id, d.action, d.kind) == (7, 8, "floodfill", "grid")
    assert d.expected_grid == "|8800|8800|8001|"
    assert d.got_grid == "|8800|8800|8000|"
    assert d.reason == "1 cell differs; first at (2, 3): row logs 1, replay has 0"
    assert result.n_rows_replayed == 8


def test_dropped_colour_change_diverges_at_the_next_edit():
    rows = worked_rows()
    del rows[2]  # change_color -> 8
    result = replay_trace(rows, previous_grid=PREV)
    d = result.divergence
    assert (d.row_index, d.action_id, d.action, d.kind) == (2, 4, "edit", "action")
    assert "already has colour 0" in d.reason
    assert d.got_grid == "|0000|0000|0000|" and d.expected_grid == "|0800|0000|0000|"
    assert any(n.code == "V7" and n.row_index == 2 for n in result.notes)


def test_dropped_edit_diverges_at_the_following_row():
    rows = worked_rows()
    del rows[4]  # edit (1, 1)
    d = replay_trace(rows, previous_grid=PREV).divergence
    assert (d.row_index, d.action_id, d.action, d.kind) == (4, 6, "edit", "grid")
    assert d.got_grid == "|0800|0000|8000|"
    assert d.expected_grid == "|0800|0800|8000|"


def test_swapped_edits_diverge_at_the_first_swapped_row():
    rows = worked_rows()
    rows[3], rows[4] = rows[4], rows[3]
    d = replay_trace(rows, previous_grid=PREV).divergence
    assert (d.row_index, d.action_id, d.kind) == (3, 5, "grid")
    assert d.got_grid == "|0000|0800|0000|"


def test_swapped_grid_neutral_rows_diverge_on_order():
    rows = worked_rows()
    rows[14], rows[15] = rows[15], rows[14]  # write_first_description <-> submit
    d = replay_trace(rows, previous_grid=PREV).divergence
    assert (d.row_index, d.action_id, d.action, d.kind) == (15, 15, "write_first_description", "order")
    assert d.reason == "action_id 15 does not increase (previous 16)"


def test_size_mismatch_is_a_size_divergence():
    rows = worked_rows()
    rows[3]["test_output_size_y"] = "5"
    d = replay_trace(rows, previous_grid=PREV).divergence
    assert (d.row_index, d.kind, d.expected_size, d.got_size) == (3, "size", (3, 5), (3, 4))


def test_undo_beyond_the_stack_is_a_divergence():
    rows = [
        row(1, "reset_grid", "|000|000|000|", (3, 3)),
        row(2, "undo", PREV, (3, 3)),
        row(3, "undo", "|000|000|000|", (3, 3)),
        row(4, "undo", "|000|000|000|", (3, 3)),
    ]
    d = replay_trace(rows, previous_grid=PREV).divergence
    assert (d.row_index, d.kind) == (3, "action")
    assert "empty undo stack" in d.reason


def test_secondary_mismatch_is_a_note_unless_strict():
    rows = worked_rows()
    rows[13]["selected_data"] = "[]"  # the undo row should keep the stale [[1,3]] (Q8)
    relaxed = replay_trace(rows, previous_grid=PREV)
    assert relaxed.status == "consistent"
    [note] = [n for n in relaxed.notes if n.is_mismatch]
    assert (note.row_index, note.code) == (13, "V4")
    strict = replay_trace(rows, previous_grid=PREV, strict=True)
    assert (strict.status, strict.divergence.kind, strict.divergence.row_index) == ("divergent", "state", 13)


def test_wrong_copy_source_is_a_selection_mismatch():
    rows = worked_rows()
    for r in rows[10:]:
        r["copy_paste_data"] = r["copy_paste_data"].replace("[2,2,0]", "[2,2,6]")
    rows[12]["test_output_grid"] = "|8800|8806|8006|"  # (2,2) is dropped by clipping: grid unchanged
    result = replay_trace(rows, previous_grid=PREV)
    assert result.status == "consistent"
    assert [(n.row_index, n.code) for n in result.notes if n.is_mismatch] == [(10, "selection")]


# ---------------------------------------------------------------------- micro-examples and quirks


def test_micro_a_dropdown_lag_is_not_a_divergence():
    rows = [
        row(1, "reset_grid", "|000|000|000|", (3, 3)),
        row(2, "change_height", "|000|000|000|000|000|", (5, 3)),
        row(3, "undo", "|000|000|000|", (5, 3)),
        row(4, "change_width", "|0000|0000|0000|0000|0000|", (5, 4)),
    ]
    result = replay_trace(rows, strict=True)
    assert result.status == "consistent"
    assert [(n.row_index, n.code) for n in result.notes] == [(2, "Q4")]


def micro_b() -> list[dict]:
    return [
        row(1, "reset_grid", "|000|000|000|", (3, 3)),
        row(2, "undo", PREV, (3, 3)),
        row(3, "undo", "|000|000|000|", (3, 3)),
    ]


def test_micro_b_undo_into_previous_task():
    result = replay_trace(micro_b(), previous_grid=PREV, strict=True)
    assert result.status == "consistent" and result.adopted_rows == ()


def test_micro_b_with_unknown_previous_grid_adopts_it():
    result = replay_trace(micro_b(), strict=True)
    assert result.status == "consistent"
    assert result.adopted_rows == (1,)
    assert [n.code for n in result.notes if n.row_index == 1] == ["Q3", "Q4"]


def test_micro_b_with_wrong_previous_grid_diverges():
    d = replay_trace(micro_b(), previous_grid="|11|11|").divergence
    assert (d.row_index, d.kind, d.got_grid) == (1, "grid", "|11|11|")


def test_micro_c_recolouring_the_paste_target():
    rows = worked_rows()[:13]
    rows.append(dict(rows[12], action_id="14", action="select_change_color", selected_symbol="2"))
    rows[-1]["test_output_grid"] = "|8800|8802|8006|"
    rows.append(dict(rows[-1], action_id="15", action="undo", test_output_grid="|8800|8806|8006|"))
    rows[-1]["action_x"] = rows[-1]["action_y"] = ""
    rows[-2]["action_x"] = rows[-2]["action_y"] = ""
    result = replay_trace(rows, previous_grid=PREV, strict=True)
    assert result.status == "consistent", result


def test_micro_d_selection_recolour():
    rows = [
        row(1, "reset_grid", "|000|000|000|", (3, 3), selected_data=[], selected_symbol=0),
        row(2, "change_tool", "|000|000|000|", (3, 3), selected_tool="select"),
        row(
            3,
            "select_cells",
            "|000|000|000|",
            (3, 3),
            select_loc="test_output",
            selected_data=[[0, 0], [0, 1], [1, 0], [1, 1]],
            action_x=0.0,
            action_y=0.0,
        ),
        row(4, "select_change_color", "|220|220|000|", (3, 3), selected_symbol=2),
    ]
    assert replay_trace(rows, strict=True).status == "consistent"


def test_micro_e_no_op_floodfill_pushes():
    rows = [
        row(1, "reset_grid", "|000|000|000|", (3, 3)),
        row(2, "change_tool", "|000|000|000|", (3, 3), selected_tool="floodfill"),
        row(3, "floodfill", "|000|000|000|", (3, 3), action_x=0.0, action_y=0.0),
        row(4, "undo", "|000|000|000|", (3, 3)),
        row(5, "undo", PREV, (3, 3)),
    ]
    assert replay_trace(rows, previous_grid=PREV, strict=True).status == "consistent"


def test_q11_missing_submit_clears_selection():
    editor = Editor()
    editor.load_task("|1|", previous_grid=PREV)
    editor.change_tool("select")
    editor.select_cells("test_output", [[0, 0]])
    answer = "|000|000|000|000|"  # the 3x3 grid matches its top rows: judging throws
    editor.press_submit(answer)
    editor.send_first_description(answer)
    editor.change_color(3)  # logged with selected_data []
    rows = editor.log
    assert [r["action"] for r in rows][-2:] == ["write_first_description", "change_color"]
    result = replay_trace(rows, previous_grid=PREV, answer=answer, strict=True)
    assert result.status == "consistent", result
    assert [n.code for n in result.notes] == ["Q11"]
    other = replay_trace(rows, previous_grid=PREV, answer="|5|")
    assert [(n.code, n.is_mismatch) for n in other.notes] == [("Q11", True)]


def test_q11_a_later_submit_that_throws_clears_the_selection_with_no_row():
    """Found by the property test below: after a first description whose judging threw, the participant selects a
    cell and presses Submit again on the same grid; judging throws again (no row) and clears the selection, so
    the next palette click logs change_color with selected_data []."""
    editor = Editor()
    editor.load_task("|1|", previous_grid=PREV)
    editor.change_tool("select")
    answer = "|000|000|000|000|"  # the 3x3 grid matches its top rows: judging throws
    editor.press_submit(answer)
    editor.send_first_description(answer)
    editor.select_cells("test_output", [[0, 0]])
    assert editor.press_submit(answer) == []  # threw again: no row
    editor.palette_click(3)
    rows = editor.log
    assert [r["action"] for r in rows][-3:] == ["write_first_description", "select_cells", "change_color"]
    assert rows[-2]["selected_data"] == [[0, 0]] and rows[-1]["selected_data"] == []
    for known in (answer, None):  # the answer known (judging throws) or not (assumed)
        result = replay_trace(rows, previous_grid=PREV, answer=known, strict=True)
        assert result.status == "consistent", result
        assert [n.code for n in result.notes] == ["Q11", "Q11"]
    # once the grid is one the known answer judges without throwing, an emptied record stays a mismatch
    editor = Editor()
    editor.load_task("|1|", previous_grid=PREV)
    editor.change_tool("select")
    editor.press_submit(answer)
    editor.send_first_description(answer)
    editor.copy_from_input()  # |1|: judged (wrong), no throw
    editor.select_cells("test_input", [[0, 0]])
    editor.palette_click(3)
    rows = [dict(r) for r in editor.log]
    assert rows[-1]["action"] == "change_color" and rows[-1]["selected_data"] == [[0, 0]]
    rows[-1]["selected_data"] = []  # emptied with no row the answer could explain
    other = replay_trace(rows, previous_grid=PREV, answer=answer, strict=True)
    assert other.status == "divergent" and "selected_data" in other.divergence.reason


def test_q9_select_rows_with_tool_edit_after_a_select_mode_task_end():
    editor = Editor()
    editor.load_task("|1|")
    editor.change_tool("select")
    editor.press_submit("|1|")
    editor.send_first_description("|1|")
    editor.copy_from_input()
    editor.press_submit("|1|")
    editor.end_task(final_description=True)
    first_task_end = len(editor.log)
    editor.load_task("|23|")
    editor.select_cells("test_output", [[1, 1]])
    editor.palette_click(5)
    task2 = editor.log[first_task_end:]
    assert [(r["action"], r["selected_tool"]) for r in task2[1:]] == [
        ("select_cells", "edit"),
        ("select_change_color", "edit"),
    ]
    result = replay_trace(task2, previous_grid="|1|", strict=True)
    assert result.status == "consistent", result
    assert [n.code for n in result.notes] == ["Q9", "Q9"]


def test_q12_duplicate_resubmission_before_the_block_and_q6_attempt_four():
    editor = Editor(block_duplicate_submissions=False)
    editor.load_task("|1|", previous_grid=PREV)
    editor.press_submit("|5|")
    editor.send_first_description("|5|")
    editor.change_color(4)  # before the third wrong submit: the toolbar is hidden afterwards
    editor.press_submit("|5|")
    editor.press_submit("|5|")
    editor.edit(0, 0)  # Q10: edits while the final description box is open carry attempt 4
    editor.end_task(final_description=True)
    assert [(r["action"], r["attempt_number"]) for r in editor.log[-3:]] == [
        ("submit", 3),
        ("edit", 4),
        ("write_last_description", 4),
    ]
    result = replay_trace(editor.log, previous_grid=PREV, answer="|5|", strict=True)
    assert result.status == "consistent", result
    assert [n.code for n in result.notes] == ["Q12", "Q12"]


def test_q15_second_submit_after_a_first_attempt_solve():
    editor = Editor()
    editor.load_task("|1|", previous_grid=PREV)
    editor.copy_from_input()
    editor.press_submit("|1|")
    editor.send_first_description("|1|")
    editor.press_submit("|1|")  # within the 1-s window
    editor.end_task(final_description=False)
    assert [r["action"] for r in editor.log[-3:]] == ["submit", "submit", "no_last_description"]
    result = replay_trace(editor.log, previous_grid=PREV, answer="|1|", strict=True)
    assert result.status == "consistent"


def test_logged_solved_disagreeing_with_answer_is_noted():
    rows = worked_rows()
    result = replay_trace(rows, previous_grid=PREV, answer="|0800|0800|8000|")
    assert result.status == "consistent"
    assert [(n.row_index, n.code) for n in result.notes if n.is_mismatch] == [(15, "V5")]


def test_trace_starting_late_is_initialised_from_its_first_row():
    rows = worked_rows()[5:]
    result = replay_trace(rows, strict=True)
    assert result.status == "consistent", result
    assert result.adopted_rows == (0,)
    assert result.notes[0].code == "late_start"


def test_tutorial_and_feedback_rows_are_skipped():
    rows = worked_rows()
    rows.append(dict(rows[-1], action_id="17", action="submit_feedback"))
    result = replay_trace(rows, previous_grid=PREV, strict=True)
    assert result.status == "consistent" and result.n_rows_replayed == 16
    assert result.notes[-1].code == "skipped"


def test_auto_solve_adopts_the_logged_grid():
    rows = [
        row(1, "reset_grid", "|000|000|000|", (3, 3)),
        row(2, "auto_solve", "|12|", (1, 2)),
        row(3, "submit", "|12|", (1, 2), solved=True),
        row(4, "no_last_description", "|12|", (1, 2), solved=True),
    ]
    result = replay_trace(rows, strict=True)
    assert result.status == "consistent" and result.adopted_rows == (1,)


def test_replay_participant_chains_previous_grids():
    first = micro_b()  # ends on the 3x3 zero grid
    second = [
        row(1, "reset_grid", "|000|000|000|", (3, 3)),
        row(2, "undo", "|000|000|000|", (3, 3)),
    ]
    results = replay_participant([first, second], tutorial_grid=PREV, strict=True)
    assert [r.status for r in results] == ["consistent", "consistent"]
    assert [r.adopted_rows for r in results] == [(), ()]


# ---------------------------------------------------------------------- not replayable


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda rows: rows.__setitem__(slice(None), []), "empty trace"),
        (lambda rows: rows[3].__setitem__("action", "paint"), "row 3: unknown action 'paint'"),
        (lambda rows: rows[3].__setitem__("action", ""), "row 3: the action column is missing"),
        (
            lambda rows: rows[4].__setitem__("test_output_grid", "|0800|080|0000|"),
            "row 4 (edit, action_id 5)",
        ),
        (lambda rows: rows[4].__setitem__("action_x", ""), "row 4 (edit, action_id 5): action_x is missing"),
        (lambda rows: rows[9].__setitem__("selected_data", "[[1,1"), "selected_data is not valid JSON"),
        (lambda rows: rows[2].__setitem__("selected_symbol", "12"), "symbol 12 is outside 0-9"),
        (lambda rows: rows[6].__setitem__("selected_tool", "brush"), "tool must be one of"),
    ],
)
def test_not_replayable_reasons(mutate, reason):
    rows = worked_rows()
    mutate(rows)
    result = replay_trace(rows, previous_grid=PREV)
    assert result.status == "not_replayable"
    assert reason in result.reason


def test_malformed_grid_reason_names_the_problem():
    rows = worked_rows()
    rows[4]["test_output_grid"] = "|0800|080|0000|"
    result = replay_trace(rows, previous_grid=PREV)
    assert result.row_index == 4
    assert "malformed test_output_grid: rows have uneven lengths" in result.reason


def test_copy_from_input_without_known_input_is_not_replayable():
    rows = [
        {k: v for k, v in row(1, "reset_grid", "|000|000|000|", (3, 3)).items()},
        row(2, "copy_from_input", "|12|", (1, 2)),
    ]
    result = replay_trace(rows)
    assert result.status == "not_replayable" and "test input, which is unknown" in result.reason
    assert replay_trace(rows, test_input="|12|").status == "consistent"


def test_result_is_json_serialisable():
    rows = worked_rows()
    rows[7]["test_output_grid"] = "|8800|8800|8001|"
    payload = replay_trace(rows).to_dict()
    assert json.loads(json.dumps(payload))["divergence"]["kind"] == "grid"


# ---------------------------------------------------------------------- generated traces (property)


@st.composite
def small_grids(draw, max_side: int = 4) -> str:
    height = draw(st.integers(1, max_side))
    width = draw(st.integers(1, max_side))
    rows = draw(st.lists(st.text("0123", min_size=width, max_size=width), min_size=height, max_size=height))
    return "|" + "|".join(rows) + "|"


def play_task(data, editor: Editor, test_input: str, answer: str, n_steps: int) -> None:
    """Drive the editor like a participant: only clicks the page would accept (some log nothing)."""
    editor.load_task(test_input)
    if data.draw(st.booleans(), label="select_first"):  # otherwise clipboard work is too rare to test
        editor.change_tool("select")
    lingered = False
    for _ in range(n_steps):
        if editor.solved and not editor.writing:
            # Solved at attempt 1: the task ends 1 s later; one more click may slip in (Q15).
            if lingered or not data.draw(st.booleans(), label="linger"):
                editor.end_task(final_description=False)
                return
            lingered = True
        if editor.writing and (editor.solved or editor.attempt > 3):
            editor.end_task(final_description=True)
            return
        options = ["palette", "tool", "height", "width", "copy_input", "reset", "submit", "help"]
        if editor.tool == "edit":
            options += ["edit"] * 4
        if editor.tool == "floodfill":
            options += ["floodfill"] * 2
        if editor.selectable_active:
            options += ["select"] * 3 + ["select_one"] * 3 + ["palette"] * 2
        if editor.highlight is not None:
            options += ["copy"] * 4
        if editor.can_paste():
            options += ["paste"] * 8
        if editor.undo_depth:
            options += ["undo"] * 2
        choice = data.draw(st.sampled_from(options), label="click")
        height, width = editor.grid.shape
        if choice in ("edit", "floodfill", "select_one"):
            r = data.draw(st.integers(0, height - 1), label="row")
            c = data.draw(st.integers(0, width - 1), label="col")
            if choice == "floodfill":
                editor.floodfill(r, c)
            elif choice == "select_one":
                editor.select_cells("test_output", [[r, c]])
            elif int(editor.grid[r, c]) != editor.symbol:
                editor.edit(r, c)
        elif choice == "palette":
            editor.palette_click(data.draw(st.integers(0, 3), label="colour"))
        elif choice == "tool":
            tools = [t for t in ("edit", "select", "floodfill") if t != editor.tool]
            editor.change_tool(data.draw(st.sampled_from(tools), label="tool"))
        elif choice in ("height", "width"):
            axis = 0 if choice == "height" else 1
            size = data.draw(st.integers(1, 5), label="size")
            if size != editor.dropdown[axis]:
                (editor.change_height if axis == 0 else editor.change_width)(size)
        elif choice == "select":
            location = data.draw(st.sampled_from(["test_input", "test_output"]), label="where")
            grid = editor.test_input if location == "test_input" else editor.grid
            h, w = grid.shape
            r0, r1 = sorted(data.draw(st.lists(st.integers(0, h - 1), min_size=2, max_size=2), label="rows"))
            c0, c1 = sorted(data.draw(st.lists(st.integers(0, w - 1), min_size=2, max_size=2), label="cols"))
            editor.select_cells(location, [[r, c] for r in range(r0, r1 + 1) for c in range(c0, c1 + 1)])
        elif choice == "copy":
            editor.select_copy()
        elif choice == "paste":
            editor.select_paste()
        elif choice == "copy_input":
            editor.copy_from_input()
        elif choice == "reset":
            editor.reset_grid()
        elif choice == "undo":
            editor.undo()
        elif choice == "help":
            editor.help()
        elif choice == "submit":
            editor.press_submit(answer)
            if editor.first_pending:
                editor.send_first_description(answer)


def split_tasks(log: list[dict]) -> list[list[dict]]:
    traces: list[list[dict]] = []
    for entry in log:
        if entry["action"] == "reset_grid" and entry["action_id"] == 1:
            traces.append([])
        traces[-1].append(entry)
    return traces


class _Drawer:
    """Adapts a composite ``draw`` to the ``data.draw(strategy, label=...)`` calls of play_task."""

    def __init__(self, draw) -> None:
        self.draw = draw


@st.composite
def generated(draw) -> list[list[dict]]:
    """Two consecutive tasks of one participant, played at random; one trace per task."""
    editor = Editor(block_duplicate_submissions=draw(st.booleans()))
    drawer = _Drawer(lambda strategy, label=None: draw(strategy))
    for _ in range(2):
        test_input = draw(small_grids())
        answer = draw(st.one_of(st.just(test_input), small_grids()))
        play_task(drawer, editor, test_input, answer, draw(st.integers(0, 50)))
    return split_tasks(editor.log)


PROPERTY_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(generated())
def test_replay_of_editor_generated_traces_is_consistent(traces):
    for previous in ("|000|000|000|", None):
        results = replay_participant(traces, tutorial_grid=previous, strict=True)
        for trace, result in zip(traces, results, strict=True):
            assert result.status == "consistent", (result, trace)
            assert list(result.grids) == [r["test_output_grid"] for r in trace]
            assert all(not n.is_mismatch for n in result.notes)


@PROPERTY_SETTINGS
@given(generated(), st.data())
def test_changing_any_recorded_cell_diverges_at_that_row(traces, data):
    trace = traces[1]
    index = data.draw(st.integers(0, len(trace) - 1), label="row")
    corrupted = copy.deepcopy(trace)
    grid = parse_grid(corrupted[index]["test_output_grid"])
    r = data.draw(st.integers(0, grid.shape[0] - 1), label="r")
    c = data.draw(st.integers(0, grid.shape[1] - 1), label="c")
    grid[r, c] = (int(grid[r, c]) + 1) % 10
    corrupted[index]["test_output_grid"] = format_grid(grid)
    result = replay_trace(corrupted, previous_grid=traces[0][-1]["test_output_grid"])
    assert result.status == "divergent"
    assert (result.divergence.row_index, result.divergence.kind) == (index, "grid")


@PROPERTY_SETTINGS
@given(generated(), st.data())
def test_swapping_adjacent_rows_diverges_at_the_swap(traces, data):
    trace = traces[1]
    if len(trace) < 3:
        return
    index = data.draw(st.integers(1, len(trace) - 2), label="row")
    swapped = list(trace)
    swapped[index], swapped[index + 1] = swapped[index + 1], swapped[index]
    result = replay_trace(swapped, previous_grid=traces[0][-1]["test_output_grid"])
    assert result.status == "divergent"
    assert result.divergence.row_index in (index, index + 1)


@PROPERTY_SETTINGS
@given(generated(), st.data())
def test_dropping_a_row_never_diverges_earlier(traces, data):
    trace = traces[1]
    if len(trace) < 2:
        return
    index = data.draw(st.integers(1, len(trace) - 1), label="row")
    dropped = trace[:index] + trace[index + 1 :]
    result = replay_trace(dropped, previous_grid=traces[0][-1]["test_output_grid"], strict=True)
    assert result.n_rows_replayed >= index
    assert result.status != "not_replayable"
    if result.status == "divergent":
        assert result.divergence.row_index >= index
    elif index < len(dropped):
        assert any(n.code == "V7" for n in result.notes)


# ---------------------------------------------------------------------- visited-state graph

A = "|0800|0000|0000|"
B = "|0800|0800|0000|"
C = "|0800|0800|8000|"
D = "|8800|8800|8000|"
E = "|8800|8806|8006|"
Z33 = "|000|000|000|"
Z34 = "|0000|0000|0000|"


def with_ids(rows: list[dict], joint_id: str, task: str = "x0000000.json") -> list[dict]:
    return [dict(r, joint_id_task=joint_id, task_name=task) for r in rows]


def test_state_graph_of_the_worked_example():
    graph = build_state_graph([with_ids(worked_rows(), "p1_x")])
    assert graph.n_unique_states == 7
    assert graph.unique_states_per_trace == {"p1_x": 7}
    assert list(graph.nodes) == [Z33, Z34, A, B, C, D, E]
    assert {(e.source, e.target): (e.count, dict(e.actions)) for e in graph.edges.values()} == {
        (Z33, Z34): (1, {"change_width": 1}),
        (Z34, A): (1, {"edit": 1}),
        (A, B): (1, {"edit": 1}),
        (B, C): (1, {"edit": 1}),
        (C, D): (1, {"floodfill": 1}),
        (D, E): (1, {"select_paste": 1}),
        (E, C): (1, {"undo": 1}),
    }
    assert graph.nodes[Z33].n_starts == 1
    assert graph.nodes[C].n_visits == 5
    assert (graph.nodes[C].n_incorrect_submissions, graph.nodes[C].n_correct_submissions) == (1, 0)
    assert (graph.nodes[Z34].height, graph.nodes[Z34].width) == (3, 4)


def test_state_graph_self_loops_on_request():
    graph = build_state_graph([worked_rows()], include_self_loops=True)
    assert graph.edges[(C, C)].count == 3
    assert dict(graph.edges[(C, C)].actions) == {"change_tool": 1, "write_first_description": 1, "submit": 1}
    assert graph.edges[(D, D)].count == 4
    assert graph.unique_states_per_trace == {"trace_0": 7}


def test_state_graph_merges_traces_of_one_task():
    other = [
        row(1, "reset_grid", Z33, (3, 3)),
        row(2, "change_width", Z34, (3, 4)),
        row(3, "copy_from_input", WORKED_INPUT, (3, 4)),
        row(4, "write_first_description", WORKED_INPUT, (3, 4)),
        row(5, "submit", WORKED_INPUT, (3, 4), solved=True),
        row(6, "no_last_description", WORKED_INPUT, (3, 4), solved=True),
    ]
    graph = build_state_graph([with_ids(worked_rows(), "p1_x"), with_ids(other, "p2_x")])
    assert graph.n_unique_states == 8
    assert graph.unique_states_per_trace == {"p1_x": 7, "p2_x": 3}
    assert graph.nodes[Z33].n_starts == 2
    assert graph.edges[(Z33, Z34)].count == 2 and len(graph.edges[(Z33, Z34)].trace_ids) == 2
    assert graph.nodes[WORKED_INPUT].n_correct_submissions == 1
    exported = json.loads(json.dumps(graph.to_dict()))
    assert exported["task_name"] == "x0000000.json"
    assert exported["n_unique_states"] == 8 and exported["n_traces"] == 2
    start = next(n for n in exported["nodes"] if n["grid"] == Z33)
    assert start["is_start"] and start["n_traces"] == 2
    correct = next(n for n in exported["nodes"] if n["grid"] == WORKED_INPUT)
    assert correct["is_correct_submission"] and not correct["is_incorrect_submission"]
    assert {
        "source": Z33,
        "target": Z34,
        "count": 2,
        "n_traces": 2,
        "actions": {"change_width": 2},
    } in exported["edges"]


def test_state_graph_rejects_mixed_tasks_and_bad_grids():
    with pytest.raises(ValueError, match="different tasks"):
        build_state_graph([with_ids(worked_rows(), "a", "t1.json"), with_ids(worked_rows(), "b", "t2.json")])
    bad = worked_rows()
    bad[2]["test_output_grid"] = "|00|0|"
    with pytest.raises(ValueError, match="row 2: malformed test_output_grid"):
        build_state_graph([bad])
    with pytest.raises(ValueError, match="given twice"):
        build_state_graph([with_ids(worked_rows(), "a"), with_ids(worked_rows(), "a")])


def test_paste_without_logged_target_uses_the_highlighted_cell():
    rows = worked_rows()
    rows[12]["action_x"] = rows[12]["action_y"] = ""
    result = replay_trace(rows, previous_grid=PREV, strict=True)
    assert result.status == "consistent"
    assert [(n.row_index, n.code) for n in result.notes] == [(12, "selection")]


def test_parsed_list_cells_are_never_shared_between_rows():
    # The editor mutates its selection and clipboard in place; a cached list handed to two rows once made a
    # later row's "[]" read as an earlier selection (found by the property test above).
    from engine.harc.replay import _json_list

    row = {"selected_data": "[[0, 1], [2, 3]]"}
    first = _json_list(row, "selected_data", None)
    first.append([9, 9])
    first[0].append(7)
    again = _json_list(row, "selected_data", None)
    assert again == [[0, 1], [2, 3]]
    assert again is not first and again[0] is not first[0]


def test_rows_whose_list_columns_already_agree_skip_the_full_comparison():
    # _agrees is the fast path of _verify: a row whose JSON-text lists parse to the replayed lists must agree
    # (once the text is cached), and any other list must send the row to the full comparison.
    from engine.harc.replay import _agrees, _json_list

    logged = {"selected_data": "[[1,3]]", "copy_paste_data": "[]", "selected_symbol": 8, "attempt_number": 1,
              "solved": False, "selected_tool": "select", "test_input_grid": WORKED_INPUT}
    for key in ("selected_data", "copy_paste_data"):
        _json_list(logged, key, None)
    produced = {"selected_data": [[1, 3]], "copy_paste_data": [], "selected_symbol": 8, "attempt_number": 1,
                "solved": False, "selected_tool": "select", "test_input_grid": WORKED_INPUT}
    assert _agrees(logged, produced)
    for key, other in (("selected_data", [[1, 4]]), ("selected_data", []), ("copy_paste_data", [[0, 0, 1]]),
                       ("selected_symbol", 7), ("solved", True)):
        assert not _agrees(logged, {**produced, key: other})
    assert not _agrees({**logged, "selected_data": "[[5, 5]]"}, produced)  # text never parsed: compare in full
