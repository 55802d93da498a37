"""The H-ARC task editor: a state machine reproducing the collection page (harc-editor.md §1, §3, §5).

``Editor`` holds everything the page tracked (the output grid G, the height/width drop-downs DD, the
colour, the tool radio and the palette handler's separate copy of it, the selection record, the
visible highlight, the clipboard, the unlimited undo stack, attempt/solved flags) and exposes one
method per logged action. Every method that the page would log returns the row it logs (a dict with
the CSV's replay-relevant columns, see ``ROW_KEYS``) and appends it to ``Editor.log``.

Two layers of methods:

- *Action methods* (``edit``, ``floodfill``, ``select_cells``, ``select_paste``, ``undo``, ``submit``, ...)
  apply one logged action. They raise ``ActionRejected`` when the page could not have logged that row in
  the current state for a reason visible in the grid data (editing a cell to the colour it already has,
  undo on an empty stack, a cell outside the grid, an empty clipboard, a drop-down set to the value it
  already shows), and ``InvalidInput`` when an argument is malformed (a symbol outside 0-9, an unknown
  tool, a cell that is not [row, col]). Conditions that depend only on the highlight model (which
  cells are highlighted, spec §9 Q-D) are not enforced when the caller supplies the logged inputs;
  predicates such as ``can_paste`` and ``palette_action`` expose them.
- *Interface methods* (``palette_click``, ``press_submit``, ``send_first_description``, ``end_task``)
  model what a click does, including the clicks that log nothing, and return the list of rows logged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .grid import Grid, as_grid, flood_fill, format_grid, grid_size, parse_grid, resized, zeros

TOOLS = ("edit", "select", "floodfill")
LOCATIONS = ("test_input", "test_output")
MAX_ATTEMPTS = 3
PLACEHOLDER_INPUT = "|000|000|000|"
_DIGIT = {str(d): d for d in range(10)}  # a grid string's character -> its symbol
_PLACEHOLDER_GRID = as_grid(PLACEHOLDER_INPUT)  # copied for each task start, never handed out itself
_EMPTY_3X3 = "|000|000|000|"  # Z(3, 3) as a grid string

ROW_KEYS = (
    "action_id",
    "attempt_number",
    "solved",
    "action",
    "action_x",
    "action_y",
    "select_loc",
    "selected_data",
    "selected_symbol",
    "selected_tool",
    "copy_paste_data",
    "test_output_grid",
    "test_output_size_x",
    "test_output_size_y",
    "test_input_grid",
    "test_input_size_x",
    "test_input_size_y",
)

Judgement = Literal["correct", "wrong", "error"]
Row = dict[str, Any]


class EditorError(Exception):
    """Base class for editor errors."""


class ActionRejected(EditorError):
    """The page would not log this action in the current state (the message says why)."""


class InvalidInput(EditorError, ValueError):
    """An action argument is malformed (symbol outside 0-9, unknown tool, a cell that is not [row, col])."""


class OpaqueSnapshotError(EditorError):
    """Undo reached a snapshot whose grid is unknown (spec Q3) and no grid to adopt was given."""


class _OpaqueSnapshot:
    """Marker for an undo-stack entry whose grid is unknown, e.g. the previous task's final grid."""

    def __repr__(self) -> str:
        return "OPAQUE_SNAPSHOT"


OPAQUE_SNAPSHOT = _OpaqueSnapshot()


@dataclass(frozen=True)
class Highlight:
    """The visibly highlighted cells (``vis``): on one grid at a time, row-major as selected."""

    location: str
    cells: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class EditorState:
    """A comparable snapshot of the whole editor state (for determinism and invariant tests)."""

    grid: str
    dropdown: tuple[int, int]
    symbol: int
    tool: str
    tool_var: str | None
    selection_record: tuple[tuple[int, int], ...]
    highlight: Highlight | None
    selectable_active: bool
    clipboard: tuple[tuple[int, int, int], ...]
    undo_stack: tuple[str, ...]
    attempt: int
    solved: bool
    first_pending: bool
    writing: bool
    previous_submission: str | None
    action_count: int


def judge_submission(grid: Grid, answer: Grid) -> Judgement:
    """Judge a submission the way the page did (§5.2): cells over the answer's extent first, then size.

    Row-major over the answer; the first differing cell (a missing column counts as differing) makes it
    ``wrong``. Reaching a row the submission does not have throws in the page: ``error`` (spec Q11,
    nothing is logged). If every cell matches, the sizes must be equal too.
    """
    answer_h, answer_w = grid_size(answer)
    grid_h, grid_w = grid_size(grid)
    # The page's row-major walk, a row block at a time: a missing column ends it in row 0, a differing cell in
    # the rows both grids have, and only then a missing row throws.
    if answer_h and answer_w > grid_w:
        return "wrong"
    common = min(answer_h, grid_h)
    if not np.array_equal(grid[:common, :answer_w], answer[:common, :answer_w]):
        return "wrong"
    if answer_h > grid_h:
        return "error"
    return "correct" if (grid_h, grid_w) == (answer_h, answer_w) else "wrong"


class Editor:
    """State of the H-ARC collection page for one participant; see the module docstring."""

    def __init__(self, *, block_duplicate_submissions: bool = True) -> None:
        # Participants before 2023-12-01 15:43:10 could resubmit the previous grid (§5.3a).
        self.block_duplicate_submissions = block_duplicate_submissions
        self.grid: Grid = zeros(3, 3)
        self.dropdown: tuple[int, int] = (3, 3)
        self.symbol = 0
        self.tool = "edit"
        self.tool_var: str | None = None  # the palette handler's copy; set only by change_tool
        self.selection_record: list[tuple[int, int]] = []
        self.highlight: Highlight | None = None
        self.selectable_active = False
        self.clipboard: list[tuple[int, int, int]] = []
        # Snapshots as grid strings: the string of the current grid usually exists already (every logged row
        # carries it), so a push copies nothing.
        self.undo_stack: list[str | _OpaqueSnapshot] = []
        # True when the trace began mid-task: the stack below what we pushed is unknown, not empty.
        self.unknown_history = False
        self._show_input(_PLACEHOLDER_GRID.copy(), PLACEHOLDER_INPUT)
        self.attempt = 1
        self.solved = False
        self.first_pending = True
        self.previous_submission: str | None = None
        self.writing = False
        self.action_count = 0
        self.log: list[Row] = []
        # The grid string of the array `_text_of` (formatted once per grid, patched by edit): every logged
        # row carries it. Any assignment of a new array to `grid` invalidates it by identity.
        self._text: str = ""
        self._text_of: Grid | None = None

    # ------------------------------------------------------------------ task start and state

    def load_task(
        self,
        test_input: Grid | str | Sequence[Sequence[int]],
        *,
        previous_grid: Grid | str | _OpaqueSnapshot | None = None,
        tutorial: bool = False,
    ) -> Row:
        """Start a task as the page does (§1.2) and return the logged ``reset_grid`` row.

        ``previous_grid`` is the grid left by the previous task (``PREV``); by default the editor's current
        grid. Pass ``OPAQUE_SNAPSHOT`` when it is unknown: an undo reaching it must then adopt a grid.
        """
        real_input = as_grid(test_input)
        # A grid string that parses is its own canonical form: only other values need formatting.
        real_text = test_input if isinstance(test_input, str) else format_grid(real_input)
        self.undo_stack = [] if tutorial else [_EMPTY_3X3]
        self.unknown_history = False
        self.attempt = 1
        self.solved = False
        self.first_pending = True
        self.writing = False
        self.previous_submission = None
        self.action_count = 0
        self._show_input(_PLACEHOLDER_GRID.copy(), PLACEHOLDER_INPUT)
        if previous_grid is OPAQUE_SNAPSHOT:
            snapshot: str | _OpaqueSnapshot = OPAQUE_SNAPSHOT
        else:
            if previous_grid is not None:
                self.grid = as_grid(previous_grid)
                if isinstance(previous_grid, str):
                    self._text, self._text_of = previous_grid, self.grid
            snapshot = self.grid_string
        row = self._reset(snapshot)
        # The real input is drawn only after the reset row is logged; redrawing drops input highlights.
        self._show_input(real_input, real_text)
        self.highlight = None
        return row

    @classmethod
    def resume(
        cls,
        *,
        grid: Grid | str,
        dropdown: tuple[int, int],
        test_input: Grid | str,
        symbol: int = 0,
        tool: str = "edit",
        clipboard: Iterable[Sequence[int]] = (),
        selection_record: Iterable[Sequence[int]] = (),
        attempt: int = 1,
        solved: bool = False,
        action_count: int = 0,
        block_duplicate_submissions: bool = True,
    ) -> Editor:
        """An editor in the middle of a task whose earlier history is unknown (a trace that starts late).

        Highlights are unknown and taken as none; undo below the known stack pops opaque snapshots.
        """
        editor = cls(block_duplicate_submissions=block_duplicate_submissions)
        editor.grid = as_grid(grid)
        editor.dropdown = (int(dropdown[0]), int(dropdown[1]))
        editor.test_input = as_grid(test_input)
        editor.symbol = _check_symbol(symbol)
        editor.tool = editor.tool_var = _check_tool(tool)
        editor.selectable_active = tool == "select"
        editor.clipboard = [_clip_entry(entry) for entry in clipboard]
        editor.selection_record = [_cell(entry) for entry in selection_record]
        editor.attempt = int(attempt)
        editor.solved = bool(solved)
        editor.first_pending = attempt == 1 and not solved
        editor.action_count = int(action_count)
        editor.unknown_history = True
        return editor

    def state(self) -> EditorState:
        return EditorState(
            grid=format_grid(self.grid),
            dropdown=self.dropdown,
            symbol=self.symbol,
            tool=self.tool,
            tool_var=self.tool_var,
            selection_record=tuple(self.selection_record),
            highlight=self.highlight,
            selectable_active=self.selectable_active,
            clipboard=tuple(self.clipboard),
            undo_stack=tuple(
                repr(s) if isinstance(s, _OpaqueSnapshot) else s for s in self.undo_stack
            ),
            attempt=self.attempt,
            solved=self.solved,
            first_pending=self.first_pending,
            writing=self.writing,
            previous_submission=self.previous_submission,
            action_count=self.action_count,
        )

    @property
    def test_input(self) -> Grid:
        """The test input shown beside the output (the 3x3 placeholder while a task starts)."""
        return self._test_input

    @test_input.setter
    def test_input(self, value: Grid | str) -> None:
        grid = as_grid(value)
        self._show_input(grid, value if isinstance(value, str) else format_grid(grid))

    def _show_input(self, grid: Grid, text: str) -> None:
        """Show a validated input grid whose grid string is `text` (logged on every row: formatted once)."""
        self._test_input = grid
        self._test_input_text = text
        self._test_input_size = grid_size(grid)

    @property
    def grid_string(self) -> str:
        if self._text_of is not self.grid:
            self._text = format_grid(self.grid)
            self._text_of = self.grid
        return self._text

    @property
    def undo_depth(self) -> int:
        return len(self.undo_stack)

    @property
    def highlighted_output_cells(self) -> tuple[tuple[int, int], ...]:
        if self.highlight is None or self.highlight.location != "test_output":
            return ()
        return self.highlight.cells

    # ------------------------------------------------------------------ grid edits

    def edit(self, row: int, col: int) -> Row:
        """Paint one output cell with the selected colour (§3.1); one undo snapshot per cell."""
        grid, symbol = self.grid, self.symbol
        height, width = grid.shape
        if not (0 <= row < height and 0 <= col < width):
            self._check_in_grid(row, col, grid, "edit")  # raises, with the message every action uses
        # The cell is read from the grid string when it is current (a character, not a numpy scalar) and the
        # string patched at that one digit rather than formatted again.
        at = 1 + row * (width + 1) + col if self._text_of is grid and type(row) is int and type(col) is int else -1
        current = _DIGIT[self._text[at]] if at >= 0 else int(grid[row, col])
        if current == symbol:
            raise ActionRejected(f"edit ({row}, {col}): the cell already has colour {symbol}, the page logs no row")
        self.undo_stack.append(self._text if at >= 0 else self.grid_string)
        grid[row, col] = symbol
        if at >= 0:
            text = self._text
            self._text = text[:at] + "0123456789"[symbol] + text[at + 1:]
        return self._log("edit", x=row, y=col)

    def floodfill(self, row: int, col: int) -> Row:
        """4-connected fill from (row, col) with the selected colour (§3.2); pushes even when a no-op."""
        self._check_in_grid(row, col, self.grid, "floodfill")
        self._push()
        self.grid = flood_fill(self.grid, row, col, self.symbol)
        self._rebuild_output()
        return self._log("floodfill", x=row, y=col)

    def change_height(self, height: int) -> Row:
        """Height drop-down changed (§3.9): resize to (new height, width drop-down)."""
        return self._resize_dropdown(_check_side("height", height), self.dropdown[1], "change_height")

    def change_width(self, width: int) -> Row:
        """Width drop-down changed (§3.9): resize to (height drop-down, new width)."""
        return self._resize_dropdown(self.dropdown[0], _check_side("width", width), "change_width")

    def copy_from_input(self) -> Row:
        """G := the test input, drop-downs follow silently (§3.10)."""
        self._push()
        self.grid = self.test_input.copy()
        self.dropdown = grid_size(self.grid)
        self._rebuild_output()
        self.selection_record = []
        return self._log("copy_from_input")

    def reset_grid(self) -> Row:
        """The Reset button (§3.12): G := Z(3,3), colour 0, tool edit (silently), clipboard cleared."""
        return self._reset(self.grid_string)

    def undo(self, *, adopt: Grid | str | None = None) -> Row:
        """Pop one snapshot (§3.11). The drop-downs are NOT updated; there is no redo.

        If the popped snapshot is opaque (unknown previous-task grid, or history before a late trace
        start), ``adopt`` supplies the grid to use; without it ``OpaqueSnapshotError`` is raised and
        nothing changes.
        """
        if not self.undo_stack and not self.unknown_history:
            raise ActionRejected("undo with an empty undo stack: the page shows an alert and logs no row")
        top = self.undo_stack[-1] if self.undo_stack else OPAQUE_SNAPSHOT
        if isinstance(top, _OpaqueSnapshot):
            if adopt is None:
                raise OpaqueSnapshotError("undo reached an opaque snapshot and no grid was given to adopt")
            self.grid = as_grid(adopt)
        else:
            self.grid = parse_grid(top)
            self._text, self._text_of = top, self.grid  # the snapshot is the new grid's string
        if self.undo_stack:
            self.undo_stack.pop()
        self._rebuild_output()
        return self._log("undo")

    @property
    def next_undo_is_opaque(self) -> bool:
        """Whether the next undo would pop a snapshot whose grid is unknown."""
        if self.undo_stack:
            return isinstance(self.undo_stack[-1], _OpaqueSnapshot)
        return self.unknown_history

    # ------------------------------------------------------------------ colour and tool

    def change_color(self, symbol: int) -> Row:
        """Palette click that is not a selection recolour (§3.3); logged even for the same colour."""
        self.symbol = _check_symbol(symbol)
        return self._log("change_color")

    def select_change_color(self, symbol: int, cells: Iterable[Sequence[int]] | None = None) -> Row:
        """Palette click recolouring the highlighted output cells (§3.4); always pushes a snapshot.

        ``cells`` defaults to the highlighted output cells; the highlight stays.
        """
        symbol = _check_symbol(symbol)
        if cells is None:
            if not self.highlighted_output_cells:
                raise ActionRejected(
                    "select_change_color with no highlighted output cell: the page logs change_color"
                )
            targets = list(self.highlighted_output_cells)
        else:
            targets = [_cell(cell) for cell in cells]
        for r, c in targets:
            self._check_in_grid(r, c, self.grid, "select_change_color")
        self.symbol = symbol
        self._push()
        for r, c in targets:
            self.grid[r, c] = symbol
        self._text_of = None
        return self._log("select_change_color")

    def palette_action(self) -> str:
        """Which action a palette click logs now: the palette handler's tool copy decides (§3.3-3.4)."""
        if self.tool_var == "select" and self.highlighted_output_cells:
            return "select_change_color"
        return "change_color"

    def palette_click(self, symbol: int) -> list[Row]:
        if self.palette_action() == "select_change_color":
            return [self.select_change_color(symbol)]
        return [self.change_color(symbol)]

    def change_tool(self, tool: str) -> Row:
        """Tool radio changed (§3.5): highlights cleared; the selection record survives only into select."""
        self.tool = self.tool_var = _check_tool(tool)
        self.highlight = None
        self.selectable_active = self.tool == "select"
        if self.tool != "select":
            self.selection_record = []
        return self._log("change_tool")

    # ------------------------------------------------------------------ selection and clipboard

    def select_cells(self, location: str | None, cells: Iterable[Sequence[int]]) -> Row:
        """A selection on the test input or output (§3.6); an empty selection clears the highlight."""
        cell_list = [_cell(cell) for cell in cells]
        if not cell_list:
            self.selection_record = []
            self.highlight = None
            return self._log("select_cells")
        if location not in LOCATIONS:
            raise InvalidInput(f"select_cells: select_loc must be one of {LOCATIONS}, got {location!r}")
        source = self.test_input if location == "test_input" else self.grid
        for r, c in cell_list:
            self._check_in_grid(r, c, source, f"select_cells on {location}")
        self.selection_record = cell_list
        self.highlight = Highlight(location, tuple(cell_list))
        first_r, first_c = cell_list[0]
        return self._log("select_cells", x=first_r, y=first_c, select_loc=location)

    def derive_clipboard(self) -> list[tuple[int, int, int]]:
        """What pressing C copies now: highlighted cells row-major with symbols from their grid (§3.7)."""
        if self.highlight is None:
            return []
        source = self.test_input if self.highlight.location == "test_input" else self.grid
        return [(r, c, int(source[r, c])) for r, c in sorted(self.highlight.cells)]

    def select_copy(self, clipboard: Iterable[Sequence[int]] | None = None) -> Row:
        """Key C (§3.7): the clipboard becomes the highlighted cells with their current symbols.

        ``clipboard`` is the logged ``copy_paste_data`` (authoritative when given).
        """
        entries = self.derive_clipboard() if clipboard is None else [_clip_entry(e) for e in clipboard]
        if not entries:
            what = "nothing highlighted" if clipboard is None else "an empty clipboard"
            raise ActionRejected(f"select_copy with {what}: C with no highlighted cell logs no row")
        self.clipboard = entries
        return self._log("select_copy")

    def can_paste(self) -> bool:
        """Key V works only with a clipboard and exactly one highlighted output cell (§3.8)."""
        return bool(self.clipboard) and len(self.highlighted_output_cells) == 1 and not self.writing

    def select_paste(self, target: Sequence[int] | None = None) -> Row:
        """Key V (§3.8): the clipboard's bounding-box corner lands on the target; no undo snapshot.

        Entries falling outside G are dropped; every symbol overwrites (0 too). ``target`` defaults to
        the single highlighted output cell; when given (the logged action_x/action_y) it becomes the
        highlight, as it was on the page.
        """
        if not self.clipboard:
            raise ActionRejected("select_paste with an empty clipboard: the page logs no row")
        if target is None:
            cells = self.highlighted_output_cells
            if len(cells) != 1:
                raise ActionRejected(
                    f"select_paste needs exactly one highlighted output cell, {len(cells)} highlighted"
                )
            x, y = cells[0]
        else:
            x, y = _cell(target)
        self._check_in_grid(x, y, self.grid, "select_paste target")
        min_r = min(r for r, _, _ in self.clipboard)
        min_c = min(c for _, c, _ in self.clipboard)
        height, width = grid_size(self.grid)
        for r, c, s in self.clipboard:
            dest_r, dest_c = r - min_r + x, c - min_c + y
            if dest_r < height and dest_c < width:
                self.grid[dest_r, dest_c] = s
        self._text_of = None
        self.highlight = Highlight("test_output", ((x, y),))
        return self._log("select_paste", x=x, y=y)

    # ------------------------------------------------------------------ submission and descriptions

    def write_first_description(self) -> Row:
        """The first description was sent (§5.3 step 2); logged before the submission is judged."""
        row = self._log("write_first_description")
        self.first_pending = False
        self.writing = False
        return row

    def submit(self, solved: bool) -> Row:
        """Log an evaluated submission with the given judgement (§5.3 steps 3b-3f)."""
        self.previous_submission = self.grid_string
        self._clear_selection()
        self.solved = self.solved or bool(solved)
        row = self._log("submit")
        if not solved:
            self.attempt += 1
            if self.attempt > MAX_ATTEMPTS:
                self.writing = True
        elif self.attempt > 1:
            self.writing = True
        return row

    def abort_judging(self) -> None:
        """Judging threw (spec Q11): no row, no attempt consumed, but the selection is already cleared."""
        self.previous_submission = self.grid_string
        self._clear_selection()

    def no_last_description(self) -> Row:
        """Task ended solved (§5.3 step 4)."""
        return self._end_task_row("no_last_description")

    def write_last_description(self) -> Row:
        """Task ended unsolved after the third wrong submit; logged at attempt 4 (§5.3 step 4)."""
        return self._end_task_row("write_last_description")

    def write_description(self) -> Row:
        """The single final description of the 2020 predecessor interface (§8.2)."""
        return self._end_task_row("write_description")

    def help(self) -> Row:
        return self._log("Help")

    def auto_solve(self, answer: Grid | str) -> Row:
        """Developer helper (§3.14): G := answer, drop-downs follow, no undo snapshot."""
        self.grid = as_grid(answer)
        self.dropdown = grid_size(self.grid)
        return self._log("auto_solve")

    def press_submit(self, answer: Grid | str) -> list[Row]:
        """The Submit button. The first press of a task opens the description box and logs nothing."""
        if self.first_pending:
            self.previous_submission = self.grid_string
            self.writing = True
            return []
        return self._judge_and_log(as_grid(answer))

    def send_first_description(self, answer: Grid | str) -> list[Row]:
        """Send a non-empty first description: log it, then judge the grid (§5.3 steps 2-3)."""
        rows = [self.write_first_description()]
        return rows + self._judge_and_log(as_grid(answer))

    def end_task(self, *, final_description: bool) -> list[Row]:
        """Finish the task: solved tasks log no_last_description; unsolved need a final description."""
        if self.solved:
            rows = [self.no_last_description()]
        elif not final_description:
            return []  # empty description: an error message, nothing logged
        else:
            rows = [self.write_last_description()]
        self.attempt = 1
        return rows

    # ------------------------------------------------------------------ internals

    def _judge_and_log(self, answer: Grid) -> list[Row]:
        if (
            self.block_duplicate_submissions
            and self.attempt > 1
            and self.grid_string == self.previous_submission
        ):
            return []  # "already submitted": no row, no attempt consumed
        judgement = judge_submission(self.grid, answer)
        if judgement == "error":
            self.abort_judging()
            return []
        return [self.submit(judgement == "correct")]

    def _end_task_row(self, action: str) -> Row:
        row = self._log(action)
        self.writing = False
        return row

    def _resize_dropdown(self, height: int, width: int, action: str) -> Row:
        if (height, width) == self.dropdown:
            raise ActionRejected(
                f"{action}: the drop-downs already show {height}x{width}; picking the same value fires nothing"
            )
        self._push()
        self.dropdown = (height, width)
        self.grid = resized(self.grid, height, width)
        self._rebuild_output()
        self.selection_record = []
        return self._log(action)

    def _reset(self, snapshot: str | _OpaqueSnapshot) -> Row:
        self.undo_stack.append(snapshot)
        self.grid = zeros(3, 3)
        self._text, self._text_of = _EMPTY_3X3, self.grid
        # The rebuild runs while the radio still shows the old tool: selection widgets may stay attached
        # although the tool becomes edit (spec §3.12 quirk, Q9).
        self._rebuild_output()
        self.dropdown = (3, 3)
        self.symbol = 0
        self.tool = "edit"  # silently: the palette handler's tool_var keeps its value
        self.clipboard = []
        self.selection_record = []
        return self._log("reset_grid")

    def _rebuild_output(self) -> None:
        """Output rebuild R1-R3 (§3.6): every highlight goes; the record survives only in select mode."""
        self.highlight = None
        self.selectable_active = self.tool == "select"
        if self.tool != "select":
            self.selection_record = []

    def _clear_selection(self) -> None:
        self.highlight = None
        self.selection_record = []

    def _push(self) -> None:
        self.undo_stack.append(self.grid_string)

    @staticmethod
    def _check_in_grid(row: int, col: int, grid: Grid, what: str) -> None:
        height, width = grid_size(grid)
        if not (0 <= row < height and 0 <= col < width):
            raise ActionRejected(f"{what}: cell ({row}, {col}) is outside the {height}x{width} grid")

    def _log(self, action: str, *, x: int | None = None, y: int | None = None, select_loc=None) -> Row:
        self.action_count += 1
        in_h, in_w = self._test_input_size
        row: Row = {
            "action_id": self.action_count,
            "attempt_number": self.attempt,
            "solved": self.solved,
            "action": action,
            # The release stores coordinates as floats (null when not a cell event).
            "action_x": None if x is None else float(x),
            "action_y": None if y is None else float(y),
            "select_loc": select_loc,
            "selected_data": [[r, c] for r, c in self.selection_record] if self.selection_record else [],
            "selected_symbol": self.symbol,
            "selected_tool": self.tool,
            "copy_paste_data": [[r, c, s] for r, c, s in self.clipboard] if self.clipboard else [],
            "test_output_grid": self._text if self._text_of is self.grid else self.grid_string,
            "test_output_size_x": self.dropdown[0],
            "test_output_size_y": self.dropdown[1],
            "test_input_grid": self._test_input_text,
            "test_input_size_x": in_h,
            "test_input_size_y": in_w,
        }
        self.log.append(row)
        return row


def _check_symbol(symbol: Any) -> int:
    value = _as_int(symbol, "symbol")
    if not 0 <= value <= 9:
        raise InvalidInput(f"symbol {value} is outside 0-9")
    return value


def _check_tool(tool: Any) -> str:
    if tool not in TOOLS:
        raise InvalidInput(f"tool must be one of {TOOLS}, got {tool!r}")
    return str(tool)


def _check_side(name: str, value: Any) -> int:
    size = _as_int(value, name)
    if not 1 <= size <= 30:
        raise InvalidInput(f"{name} {size} is outside the drop-down options 1-30")
    return size


def _cell(value: Sequence[int]) -> tuple[int, int]:
    if len(value) != 2:
        raise InvalidInput(f"a cell must be [row, col], got {list(value)!r}")
    return _as_int(value[0], "row"), _as_int(value[1], "col")


def _clip_entry(value: Sequence[int]) -> tuple[int, int, int]:
    if len(value) != 3:
        raise InvalidInput(f"a clipboard entry must be [row, col, symbol], got {list(value)!r}")
    r, c = _as_int(value[0], "row"), _as_int(value[1], "col")
    if r < 0 or c < 0:
        raise InvalidInput(f"clipboard entry {list(value)!r} has a negative coordinate")
    return r, c, _check_symbol(value[2])


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InvalidInput(f"{name} must be a number, got {value!r}")
    if not math.isfinite(float(value)) or float(value) != int(value):
        raise InvalidInput(f"{name} must be a whole number, got {value!r}")
    return int(value)
