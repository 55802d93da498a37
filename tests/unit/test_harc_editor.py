"""H-ARC editor engine: grid strings and every action's effect, hand-computed (harc-editor.md §1-§5, §7)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.harc import (
    OPAQUE_SNAPSHOT,
    ActionRejected,
    Editor,
    GridFormatError,
    InvalidInput,
    OpaqueSnapshotError,
    as_grid,
    flood_fill,
    format_grid,
    is_grid_string,
    judge_submission,
    parse_grid,
    resized,
)

WORKED_INPUT = "|0000|0660|0600|"
PREV = "|12|21|"


def started(test_input: str = WORKED_INPUT, previous: str | None = PREV) -> Editor:
    editor = Editor()
    editor.load_task(test_input, previous_grid=previous)
    return editor


def select_mode(editor: Editor) -> Editor:
    editor.change_tool("select")
    return editor


# ---------------------------------------------------------------------- grid strings


def test_parse_grid_reads_rows_top_to_bottom():
    grid = parse_grid("|0800|0800|8000|")
    assert grid.shape == (3, 4)
    assert grid.dtype == np.uint8
    assert grid.tolist() == [[0, 8, 0, 0], [0, 8, 0, 0], [8, 0, 0, 0]]
    assert format_grid(grid) == "|0800|0800|8000|"


def test_parse_grid_single_cell_and_max_size():
    assert parse_grid("|7|").tolist() == [[7]]
    big = "|" + "|".join(["9" * 30] * 30) + "|"
    assert parse_grid(big).shape == (30, 30)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("077|777|", "must start with '|'"),
        ("|077|777", "must end with '|'"),
        ("|", "must end with '|'"),
        ("||", "row 0 is empty"),
        ("|077||777|", "row 1 is empty"),
        ("|077|77|", "row 0 has 3 cells, row 1 has 2"),
        ("|0a7|", "cell (0, 1) is 'a'"),
        ("| 07|", "cell (0, 0) is ' '"),
        ("|077|777|\n", "must end with '|'"),
        ("|" + "|".join(["0"] * 31) + "|", "height 31 is outside 1-30"),
        ("|" + "0" * 31 + "|", "width 31 is outside 1-30"),
    ],
)
def test_parse_grid_errors_say_what_is_wrong(text, message):
    with pytest.raises(GridFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_grid(text)


def test_parse_grid_rejects_non_strings():
    with pytest.raises(GridFormatError, match="must be a str"):
        parse_grid(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([[1, 2], [3]], "uneven"),
        ([[1, 10]], r"cell \(0, 1\) is 10"),
        ([[-1]], r"cell \(0, 0\) is -1"),
        ([1, 2, 3], "2-D"),
        ([[]], "width 0"),
        ([["1"]], "integers"),
    ],
)
def test_as_grid_validates_nested_lists(value, message):
    with pytest.raises(GridFormatError, match=message):
        as_grid(value)


@st.composite
def grid_strings(draw):
    height = draw(st.integers(1, 30))
    width = draw(st.integers(1, 30))
    digits = st.text(alphabet="0123456789", min_size=width, max_size=width)
    rows = draw(st.lists(digits, min_size=height, max_size=height))
    return "|" + "|".join(rows) + "|"


@settings(max_examples=150, deadline=None)
@given(grid_strings())
def test_format_parse_round_trip(text):
    grid = parse_grid(text)
    assert format_grid(grid) == text
    assert np.array_equal(parse_grid(format_grid(grid)), grid)


@settings(max_examples=400, deadline=None)
@given(st.one_of(grid_strings(), st.text(alphabet="0123456789|a \u0661", max_size=40),
                 grid_strings().map(lambda t: t[:-2] + t[-1]), grid_strings().map(lambda t: t[1:]),
                 grid_strings().map(lambda t: "|" + "0" + t)))
def test_is_grid_string_accepts_exactly_what_parse_grid_accepts(text):
    try:
        shape = parse_grid(text).shape
    except GridFormatError:
        shape = None
    assert is_grid_string(text) == (shape is not None)
    if shape is not None:
        assert format_grid(parse_grid(text)) == text


# ---------------------------------------------------------------------- pure grid operations


def test_resized_keeps_top_left_and_pads_with_zero():
    grid = parse_grid("|123|456|")
    assert format_grid(resized(grid, 3, 4)) == "|1230|4560|0000|"
    assert format_grid(resized(grid, 1, 2)) == "|12|"
    assert format_grid(resized(grid, 2, 3)) == "|123|456|"


def test_flood_fill_is_four_connected():
    # The worked example's row 8: (1,0) touches (2,1) only diagonally, so the outer zeros stay.
    grid = parse_grid("|0800|0800|8000|")
    assert format_grid(flood_fill(grid, 0, 0, 8)) == "|8800|8800|8000|"
    # A diagonal chain of 1s is not one region.
    diagonal = parse_grid("|100|010|001|")
    assert format_grid(flood_fill(diagonal, 0, 0, 5)) == "|500|010|001|"


def test_flood_fill_changes_only_the_clicked_region():
    grid = parse_grid("|1101|0001|1111|")
    assert format_grid(flood_fill(grid, 0, 0, 3)) == "|3301|0001|1111|"
    assert format_grid(flood_fill(grid, 2, 0, 3)) == "|1103|0003|3333|"
    assert format_grid(flood_fill(grid, 1, 0, 1)) == "|1111|1111|1111|"
    assert format_grid(flood_fill(grid, 1, 0, 0)) == "|1101|0001|1111|"  # same colour: unchanged


# ---------------------------------------------------------------------- task start (§1.2)


def test_load_task_logs_reset_row_with_placeholder_input():
    editor = Editor()
    row = editor.load_task(WORKED_INPUT, previous_grid=PREV)
    assert row["action"] == "reset_grid"
    assert row["action_id"] == 1
    assert row["test_output_grid"] == "|000|000|000|"
    assert (row["test_output_size_x"], row["test_output_size_y"]) == (3, 3)
    assert row["test_input_grid"] == "|000|000|000|"  # the real input is drawn after the row
    assert (row["selected_symbol"], row["selected_tool"]) == (0, "edit")
    assert row["selected_data"] == [] and row["copy_paste_data"] == []
    assert (row["attempt_number"], row["solved"]) == (1, False)
    assert editor.state().undo_stack == ("|000|000|000|", PREV)
    assert format_grid(editor.test_input) == WORKED_INPUT


def test_load_task_without_previous_grid_pushes_current_grid():
    editor = Editor()
    editor.load_task("|5|")
    editor.change_color(4)
    editor.edit(1, 1)
    editor.load_task("|6|")
    assert editor.state().undo_stack == ("|000|000|000|", "|000|040|000|")
    assert editor.action_count == 1 and editor.symbol == 0


def test_tutorial_start_has_no_z33_below():
    editor = Editor()
    editor.load_task("|1|", tutorial=True)
    assert editor.undo_depth == 1


def test_micro_example_b_undo_at_task_start_reaches_previous_task():
    editor = started()
    row = editor.undo()
    assert row["test_output_grid"] == PREV
    assert (row["test_output_size_x"], row["test_output_size_y"]) == (3, 3)  # drop-downs lag (Q4)
    assert editor.undo()["test_output_grid"] == "|000|000|000|"
    with pytest.raises(ActionRejected, match="empty undo stack"):
        editor.undo()
    assert len(editor.log) == 3  # the alert logs nothing


def test_opaque_previous_grid_must_be_adopted():
    editor = started(previous=OPAQUE_SNAPSHOT)
    assert editor.next_undo_is_opaque
    with pytest.raises(OpaqueSnapshotError):
        editor.undo()
    assert editor.undo_depth == 2 and len(editor.log) == 1  # nothing changed
    assert editor.undo(adopt="|4|")["test_output_grid"] == "|4|"
    assert not editor.next_undo_is_opaque


# ---------------------------------------------------------------------- edit, floodfill, colour


def test_edit_paints_one_cell_and_pushes_one_snapshot():
    editor = started()
    editor.change_color(8)
    depth = editor.undo_depth
    row = editor.edit(0, 1)
    assert row["test_output_grid"] == "|080|000|000|"
    assert (row["action_x"], row["action_y"]) == (0.0, 1.0)
    assert editor.undo_depth == depth + 1
    editor.edit(1, 1)  # drag painting: one row and one snapshot per cell
    assert editor.undo_depth == depth + 2
    assert editor.undo()["test_output_grid"] == "|080|000|000|"


def test_edit_with_the_cells_own_colour_logs_nothing():
    editor = started()
    with pytest.raises(ActionRejected, match="already has colour 0"):
        editor.edit(0, 0)
    with pytest.raises(ActionRejected, match="outside the 3x3 grid"):
        editor.edit(3, 0)
    assert len(editor.log) == 1


def test_change_color_logs_even_the_same_colour_and_does_not_push():
    editor = started()
    depth = editor.undo_depth
    assert editor.change_color(0)["selected_symbol"] == 0
    assert editor.change_color(5)["selected_symbol"] == 5
    assert editor.undo_depth == depth and editor.grid_string == "|000|000|000|"
    with pytest.raises(InvalidInput, match="outside 0-9"):
        editor.change_color(10)


def test_floodfill_fills_region_and_no_op_still_pushes():
    editor = started("|12|", previous=None)
    editor.change_tool("floodfill")
    editor.change_color(8)
    editor.edit(1, 1)  # tool does not gate action methods; the page would need edit mode for this
    depth = editor.undo_depth
    assert editor.floodfill(0, 0)["test_output_grid"] == "|888|888|888|"
    assert editor.floodfill(0, 0)["test_output_grid"] == "|888|888|888|"  # micro-example E
    assert editor.undo_depth == depth + 2
    assert editor.undo()["test_output_grid"] == "|888|888|888|"
    assert editor.undo()["test_output_grid"] == "|000|080|000|"


# ---------------------------------------------------------------------- tool and selection


def test_change_tool_clears_highlight_and_keeps_record_only_into_select():
    editor = select_mode(started())
    editor.select_cells("test_output", [[0, 0], [0, 1]])
    row = editor.change_tool("select")
    assert editor.highlight is None
    assert row["selected_data"] == [[0, 0], [0, 1]]
    editor.select_cells("test_output", [[1, 1]])
    row = editor.change_tool("edit")
    assert row["selected_data"] == [] and editor.highlight is None
    assert (editor.tool, editor.tool_var, editor.selectable_active) == ("edit", "edit", False)


def test_select_cells_sets_record_and_highlight():
    editor = select_mode(started())
    row = editor.select_cells("test_input", [[1, 1], [1, 2], [2, 1], [2, 2]])
    assert row["select_loc"] == "test_input"
    assert (row["action_x"], row["action_y"]) == (1.0, 1.0)
    assert row["selected_data"] == [[1, 1], [1, 2], [2, 1], [2, 2]]
    assert editor.highlight.location == "test_input"
    # the input is 3x4, the output 3x3: (0, 3) exists only on the input
    editor.select_cells("test_input", [[0, 3]])
    with pytest.raises(ActionRejected, match="outside the 3x3 grid"):
        editor.select_cells("test_output", [[0, 3]])


def test_empty_selection_logs_nulls_and_clears_highlight():
    editor = select_mode(started())
    editor.select_cells("test_output", [[0, 0]])
    row = editor.select_cells(None, [])
    assert (row["select_loc"], row["action_x"], row["action_y"], row["selected_data"]) == (
        None,
        None,
        None,
        [],
    )
    assert editor.highlight is None


def test_select_copy_freezes_symbols_at_copy_time():
    editor = select_mode(started())
    editor.select_cells("test_input", [[1, 1], [1, 2], [2, 1], [2, 2]])
    row = editor.select_copy()
    assert row["copy_paste_data"] == [[1, 1, 6], [1, 2, 6], [2, 1, 6], [2, 2, 0]]
    assert editor.highlight is not None  # the highlight stays
    editor.change_color(3)
    editor.select_cells("test_output", [[0, 0]])
    editor.select_change_color(3)
    assert editor.clipboard == [(1, 1, 6), (1, 2, 6), (2, 1, 6), (2, 2, 0)]
    assert editor.select_copy()["copy_paste_data"] == [[0, 0, 3]]  # output symbols after the recolour


def test_select_copy_without_highlight_logs_nothing():
    editor = started()
    with pytest.raises(ActionRejected, match="nothing highlighted"):
        editor.select_copy()


def test_paste_anchors_bounding_box_clips_and_overwrites_zeros():
    editor = started("|1111|1111|1111|", previous=None)
    editor.copy_from_input()
    select_mode(editor)
    # a non-contiguous clipboard: bounding box corner (5, 7)
    editor.clipboard = [(5, 7, 0), (6, 9, 2)]
    editor.select_cells("test_output", [[1, 1]])
    depth = editor.undo_depth
    row = editor.select_paste()
    # (5,7)->(1,1)=0 (zeros overwrite); (6,9)->(2,3)=2
    assert row["test_output_grid"] == "|1111|1011|1112|"
    assert (row["action_x"], row["action_y"]) == (1.0, 1.0)
    assert editor.undo_depth == depth  # paste pushes no snapshot
    # clipped at the bottom/right edge
    editor.select_cells("test_output", [[2, 2]])
    assert editor.select_paste()["test_output_grid"] == "|1111|1011|1102|"
    assert editor.highlighted_output_cells == ((2, 2),)  # target stays highlighted: V repeats
    assert editor.select_paste()["test_output_grid"] == "|1111|1011|1102|"


def test_paste_needs_clipboard_and_exactly_one_highlighted_output_cell():
    editor = select_mode(started())
    editor.select_cells("test_output", [[0, 0]])
    with pytest.raises(ActionRejected, match="empty clipboard"):
        editor.select_paste()
    editor.select_cells("test_input", [[0, 0]])
    editor.select_copy()
    assert not editor.can_paste()
    with pytest.raises(ActionRejected, match="exactly one highlighted output cell, 0"):
        editor.select_paste()
    editor.select_cells("test_output", [[0, 0], [0, 1]])
    with pytest.raises(ActionRejected, match="exactly one highlighted output cell, 2"):
        editor.select_paste()
    editor.select_cells("test_output", [[0, 1]])
    assert editor.can_paste()


def test_micro_example_d_selection_recolour_keeps_highlight():
    editor = Editor()
    editor.load_task("|5|")
    editor.change_tool("select")
    editor.select_cells("test_output", [[0, 0], [0, 1], [1, 0], [1, 1]])
    depth = editor.undo_depth
    rows = editor.palette_click(2)
    assert [r["action"] for r in rows] == ["select_change_color"]
    assert rows[0]["test_output_grid"] == "|220|220|000|"
    assert rows[0]["selected_symbol"] == 2
    rows = editor.palette_click(2)  # highlight stays: recolours again, pushes again
    assert rows[0]["action"] == "select_change_color" and editor.undo_depth == depth + 2


def test_palette_click_is_change_color_unless_output_highlight_and_select_tool_var():
    editor = select_mode(started())
    assert editor.palette_click(4)[0]["action"] == "change_color"  # nothing highlighted
    editor.select_cells("test_input", [[0, 0]])
    assert editor.palette_click(4)[0]["action"] == "change_color"  # an input highlight does not count
    editor.select_cells("test_output", [[0, 0]])
    assert editor.palette_click(4)[0]["action"] == "select_change_color"
    with pytest.raises(ActionRejected, match="logs change_color"):
        started().select_change_color(1)


# ---------------------------------------------------------------------- resizing, copy, reset, undo


def test_resize_uses_both_dropdowns_and_pads_or_discards():
    editor = started()
    editor.change_color(7)
    editor.edit(2, 2)
    assert editor.change_width(4)["test_output_grid"] == "|0000|0000|0070|"
    assert editor.change_height(2)["test_output_grid"] == "|0000|0000|"
    row = editor.change_height(4)
    assert row["test_output_grid"] == "|0000|0000|0000|0000|"  # the discarded 7 does not come back
    assert (row["test_output_size_x"], row["test_output_size_y"]) == (4, 4)
    with pytest.raises(ActionRejected, match="already show 4x4"):
        editor.change_width(4)
    with pytest.raises(InvalidInput, match="outside the drop-down options"):
        editor.change_height(31)


def test_resize_clears_selection_record_even_in_select_mode():
    editor = select_mode(started())
    editor.select_cells("test_output", [[0, 0]])
    assert editor.change_height(4)["selected_data"] == []
    assert editor.highlight is None


def test_micro_example_a_dropdown_lags_after_undo_and_width_change_snaps_height():
    editor = Editor()
    editor.load_task("|5|")
    editor.change_height(5)
    row = editor.undo()
    assert row["test_output_grid"] == "|000|000|000|"
    assert (row["test_output_size_x"], row["test_output_size_y"]) == (5, 3)
    row = editor.change_width(4)
    assert row["test_output_grid"] == "|0000|0000|0000|0000|0000|"
    assert (row["test_output_size_x"], row["test_output_size_y"]) == (5, 4)


def test_copy_from_input_resizes_silently_and_keeps_colour_tool_clipboard():
    editor = select_mode(started())
    editor.change_color(3)
    editor.select_cells("test_input", [[0, 0]])
    editor.select_copy()
    row = editor.copy_from_input()
    assert row["test_output_grid"] == WORKED_INPUT
    assert (row["test_output_size_x"], row["test_output_size_y"]) == (3, 4)
    assert (row["selected_symbol"], row["selected_tool"]) == (3, "select")
    assert row["copy_paste_data"] == [[0, 0, 0]] and row["selected_data"] == []
    assert editor.undo()["test_output_grid"] == "|000|000|000|"


def test_reset_grid_restores_defaults_and_is_undoable():
    editor = started()
    editor.change_color(4)
    editor.change_width(5)
    editor.edit(0, 4)
    row = editor.reset_grid()
    assert row["test_output_grid"] == "|000|000|000|"
    assert (row["test_output_size_x"], row["test_output_size_y"], row["selected_symbol"]) == (3, 3, 0)
    assert row["copy_paste_data"] == []
    assert editor.undo()["test_output_grid"] == "|00004|00000|00000|"


def test_reset_in_select_mode_leaves_selection_widgets_and_tool_var_select():
    # §3.12 quirk / Q9: the radio says edit, selection still works and the palette recolours.
    editor = select_mode(started())
    row = editor.reset_grid()
    assert row["selected_tool"] == "edit"
    assert (editor.tool, editor.tool_var, editor.selectable_active) == ("edit", "select", True)
    row = editor.select_cells("test_output", [[1, 1]])
    assert row["selected_tool"] == "edit"
    rows = editor.palette_click(6)
    assert rows[0]["action"] == "select_change_color" and rows[0]["selected_tool"] == "edit"
    assert rows[0]["test_output_grid"] == "|000|060|000|"


def test_undo_restores_size_and_keeps_stale_record_in_select_mode():
    editor = select_mode(started())
    editor.change_width(4)
    editor.select_cells("test_output", [[1, 3]])
    row = editor.undo()
    assert row["test_output_grid"] == "|000|000|000|"
    assert (row["test_output_size_x"], row["test_output_size_y"]) == (3, 4)
    assert row["selected_data"] == [[1, 3]]  # stale record (Q8) ...
    assert editor.highlight is None  # ... while the highlight is gone
    editor.change_tool("edit")
    editor.change_color(1)
    editor.edit(0, 0)
    assert editor.undo()["selected_data"] == []  # in edit mode the rebuild clears it


def test_undo_after_paste_reverts_paste_and_previous_action():
    # Worked example rows 8-14 (Q5): paste has no snapshot of its own.
    editor = started()
    editor.change_width(4)
    editor.change_color(8)
    for cell in [(0, 1), (1, 1), (2, 0)]:
        editor.edit(*cell)
    editor.change_tool("floodfill")
    editor.floodfill(0, 0)
    editor.change_tool("select")
    editor.select_cells("test_input", [[1, 1], [1, 2], [2, 1], [2, 2]])
    editor.select_copy()
    editor.select_cells("test_output", [[1, 3]])
    assert editor.select_paste()["test_output_grid"] == "|8800|8806|8006|"
    assert editor.undo()["test_output_grid"] == "|0800|0800|8000|"


def test_micro_example_c_recolouring_paste_target_is_undoable_to_the_paste():
    editor = select_mode(started())
    editor.change_width(4)
    editor.select_cells("test_input", [[1, 1], [1, 2], [2, 1], [2, 2]])
    editor.select_copy()
    editor.select_cells("test_output", [[1, 3]])
    editor.select_paste()
    assert editor.grid_string == "|0000|0006|0006|"
    assert editor.palette_click(2)[0]["test_output_grid"] == "|0000|0002|0006|"
    assert editor.undo()["test_output_grid"] == "|0000|0006|0006|"


# ---------------------------------------------------------------------- submission (§5)


@pytest.mark.parametrize(
    ("grid", "expected"),
    [
        ("|12|34|", "correct"),
        ("|12|35|", "wrong"),
        ("|12|34|00|", "wrong"),  # taller: overlap matches, size check fails
        ("|120|340|", "wrong"),  # wider
        ("|1|3|", "wrong"),  # narrower: a missing column differs
        ("|12|", "error"),  # fewer rows, all matching: the page throws (Q11)
        ("|13|", "wrong"),  # fewer rows, a mismatch comes first
    ],
)
def test_judge_submission(grid, expected):
    assert judge_submission(parse_grid(grid), parse_grid("|12|34|")) == expected


def page_judgement(grid: np.ndarray, answer: np.ndarray) -> str:
    """harc-editor.md §5.2 as the page runs it: cell by cell, row-major over the answer."""
    for r in range(answer.shape[0]):
        if r >= grid.shape[0]:
            return "error"
        for c in range(answer.shape[1]):
            if c >= grid.shape[1] or grid[r, c] != answer[r, c]:
                return "wrong"
    return "correct" if grid.shape == answer.shape else "wrong"


@st.composite
def related_grids(draw) -> tuple[np.ndarray, np.ndarray]:
    """An answer and a submission cut, grown and changed from it, so every outcome is common."""
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    answer = np.array(draw(st.lists(st.lists(st.integers(0, 3), min_size=w, max_size=w), min_size=h, max_size=h)),
                      dtype=np.uint8)
    gh, gw = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    grid = np.zeros((gh, gw), dtype=np.uint8)
    grid[:min(h, gh), :min(w, gw)] = answer[:min(h, gh), :min(w, gw)]
    if draw(st.booleans()):
        grid[draw(st.integers(0, gh - 1)), draw(st.integers(0, gw - 1))] = draw(st.integers(0, 3))
    return grid, answer


@settings(max_examples=300, deadline=None)
@given(related_grids())
def test_judge_submission_walks_the_grid_like_the_page(pair):
    grid, answer = pair
    assert judge_submission(grid, answer) == page_judgement(grid, answer)


def test_flow_wrong_then_blocked_duplicate_then_three_failures():
    answer = "|1|"
    editor = started("|1|", previous=None)
    assert editor.press_submit(answer) == []  # first press only opens the description box
    assert editor.writing
    rows = editor.send_first_description(answer)
    assert [(r["action"], r["attempt_number"], r["solved"]) for r in rows] == [
        ("write_first_description", 1, False),
        ("submit", 1, False),
    ]
    assert editor.attempt == 2 and not editor.writing
    assert editor.press_submit(answer) == []  # same grid as the previous submission: blocked (Q12)
    editor.change_color(2)
    editor.edit(0, 0)
    assert editor.press_submit(answer)[0]["attempt_number"] == 2
    editor.edit(1, 1)
    assert editor.press_submit(answer)[0]["attempt_number"] == 3
    assert editor.attempt == 4 and editor.writing
    editor.edit(2, 2)  # Q10: the grid stays editable while the box is open
    assert editor.log[-1]["attempt_number"] == 4
    assert editor.end_task(final_description=False) == []  # empty final description: error, no row
    rows = editor.end_task(final_description=True)
    assert [(r["action"], r["attempt_number"]) for r in rows] == [("write_last_description", 4)]
    assert editor.attempt == 1


def test_flow_solved_at_first_attempt_ends_with_no_last_description():
    editor = started("|1|", previous=None)
    editor.copy_from_input()
    editor.press_submit("|1|")
    rows = editor.send_first_description("|1|")
    assert [(r["action"], r["solved"]) for r in rows] == [
        ("write_first_description", False),
        ("submit", True),
    ]
    assert not editor.writing
    assert [r["action"] for r in editor.end_task(final_description=False)] == ["no_last_description"]


def test_flow_solved_at_second_attempt_opens_final_description():
    editor = started("|1|", previous=None)
    editor.press_submit("|1|")
    editor.send_first_description("|1|")
    editor.copy_from_input()
    row = editor.press_submit("|1|")[0]
    assert (row["attempt_number"], row["solved"]) == (2, True)
    assert editor.writing
    assert editor.end_task(final_description=False)[0]["action"] == "no_last_description"


def test_submit_clears_selection_before_logging():
    editor = select_mode(started())
    editor.select_cells("test_output", [[0, 0]])
    editor.press_submit("|1|")
    rows = editor.send_first_description("|1|")
    assert rows[0]["selected_data"] == [[0, 0]]
    assert rows[1]["selected_data"] == [] and editor.highlight is None


def test_micro_example_j_judging_throws_no_submit_row():
    editor = select_mode(started("|1|", previous=None))
    editor.select_cells("test_output", [[0, 0]])
    editor.press_submit("|000|000|000|000|")
    rows = editor.send_first_description("|000|000|000|000|")
    assert [r["action"] for r in rows] == ["write_first_description"]
    assert editor.attempt == 1 and editor.selection_record == []
    assert editor.press_submit("|000|000|000|000|") == []  # resubmitting throws again


def test_duplicate_submissions_allowed_before_the_block():
    editor = Editor(block_duplicate_submissions=False)
    editor.load_task("|1|")
    editor.press_submit("|1|")
    editor.send_first_description("|1|")
    assert editor.press_submit("|1|")[0]["attempt_number"] == 2


# ---------------------------------------------------------------------- worked example (§7)


def test_worked_example_state_after_every_row():
    editor = Editor()
    steps = [
        (lambda: editor.load_task(WORKED_INPUT, previous_grid=PREV), "|000|000|000|", (3, 3), 2),
        (lambda: editor.change_width(4), "|0000|0000|0000|", (3, 4), 3),
        (lambda: editor.palette_click(8)[0], "|0000|0000|0000|", (3, 4), 3),
        (lambda: editor.edit(0, 1), "|0800|0000|0000|", (3, 4), 4),
        (lambda: editor.edit(1, 1), "|0800|0800|0000|", (3, 4), 5),
        (lambda: editor.edit(2, 0), "|0800|0800|8000|", (3, 4), 6),
        (lambda: editor.change_tool("floodfill"), "|0800|0800|8000|", (3, 4), 6),
        (lambda: editor.floodfill(0, 0), "|8800|8800|8000|", (3, 4), 7),
        (lambda: editor.change_tool("select"), "|8800|8800|8000|", (3, 4), 7),
        (
            lambda: editor.select_cells("test_input", [[1, 1], [1, 2], [2, 1], [2, 2]]),
            "|8800|8800|8000|",
            (3, 4),
            7,
        ),
        (lambda: editor.select_copy(), "|8800|8800|8000|", (3, 4), 7),
        (lambda: editor.select_cells("test_output", [[1, 3]]), "|8800|8800|8000|", (3, 4), 7),
        (lambda: editor.select_paste(), "|8800|8806|8006|", (3, 4), 7),
        (lambda: editor.undo(), "|0800|0800|8000|", (3, 4), 6),
    ]
    for number, (step, grid, dropdown, depth) in enumerate(steps, start=1):
        row = step()
        assert row["action_id"] == number
        assert (editor.grid_string, editor.dropdown, editor.undo_depth) == (grid, dropdown, depth), number
    assert editor.log[-1]["selected_data"] == [[1, 3]]
    assert editor.log[10]["copy_paste_data"] == [[1, 1, 6], [1, 2, 6], [2, 1, 6], [2, 2, 0]]
    assert editor.press_submit("|1|") == []
    rows = editor.send_first_description("|1|")
    assert [(r["action"], r["selected_data"]) for r in rows] == [
        ("write_first_description", [[1, 3]]),
        ("submit", []),
    ]
    assert editor.attempt == 2


# ---------------------------------------------------------------------- undo invariants (property)

UNDOABLE = ("edit", "floodfill", "change_height", "change_width", "copy_from_input", "reset_grid", "recolour")


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_undo_walks_back_every_undoable_action_in_reverse(data):
    test_input = data.draw(grid_strings().filter(lambda s: len(s) < 60), label="input")
    editor = started(test_input, previous=None)
    editor.change_tool("select")
    history = [editor.grid_string]
    for _ in range(data.draw(st.integers(1, 12), label="n_actions")):
        kind = data.draw(st.sampled_from(UNDOABLE), label="action")
        height, width = editor.grid.shape
        r = data.draw(st.integers(0, height - 1), label="row")
        c = data.draw(st.integers(0, width - 1), label="col")
        symbol = data.draw(st.integers(0, 9), label="symbol")
        before = editor.grid_string
        if kind == "edit":
            editor.symbol = symbol
            if int(editor.grid[r, c]) == symbol:
                continue
            editor.edit(r, c)
        elif kind == "floodfill":
            editor.symbol = symbol
            editor.floodfill(r, c)
        elif kind in ("change_height", "change_width"):
            size = data.draw(st.integers(1, 6), label="size")
            current = editor.dropdown[0 if kind == "change_height" else 1]
            if size == current:
                continue
            getattr(editor, kind)(size)
        elif kind == "recolour":
            editor.select_cells("test_output", [[r, c]])
            editor.select_change_color(symbol)
        else:
            getattr(editor, kind)()
        assert editor.undo_stack[-1] is not None and format_grid(editor.undo_stack[-1]) == before
        history.append(editor.grid_string)
    dropdown = editor.dropdown
    for expected in reversed(history[:-1]):
        assert editor.undo()["test_output_grid"] == expected
        assert editor.dropdown == dropdown  # undo never moves the drop-downs
