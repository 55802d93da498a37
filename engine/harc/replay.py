"""Replay one H-ARC participant-task trace through the editor and check it row by row (§4, §6).

A trace is a sequence of row mappings with the CSV's columns as parsed (see ``ROW_KEYS`` in editor.py;
``selected_data`` / ``copy_paste_data`` may be parsed lists or the raw JSON text; coordinates may be
floats; nulls may be None or NaN). Rows are replayed in the order given: the caller sorts by
``action_id``, and an ``action_id`` that does not increase is itself reported as a divergence.

Checks after each row (spec §4.3):

- V1 grid: the editor's grid equals ``test_output_grid``, and V2 sizes: the drop-downs equal
  ``test_output_size_x/_y``. A failure of either, or a row the page could not have logged in the
  replayed state (an ``ActionRejected``), ends the replay as ``divergent``.
- V3-V6 (colour, tool, clipboard, selection record, highlight-dependent preconditions, attempt,
  solved, test input) are recorded as notes; with ``strict=True`` the first one is a divergence too.
  They are secondary by default because the highlight model rests on spec §9 Q-D.

Documented logging quirks are modelled rather than reported: the task-start ``reset_grid`` with the 3x3
placeholder input, undo into the previous task's grid (Q3, adopted when that grid is unknown), the
drop-down lag after undo (Q4), unundoable paste (Q5), attempt 4 (Q6), stale ``selected_data`` (Q8),
select rows logged with tool ``edit`` (Q9), a ``write_first_description`` without a ``submit`` and a later
Submit press that logs nothing but clears the selection (Q11),
pre-block duplicate resubmissions (Q12) and rows after a solve (Q15). Notes name them by code.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from .editor import (
    OPAQUE_SNAPSHOT,
    PLACEHOLDER_INPUT,
    ActionRejected,
    Editor,
    InvalidInput,
    judge_submission,
)
from .grid import Grid, GridFormatError, as_grid, format_grid, grid_size

Status = Literal["consistent", "divergent", "not_replayable"]

# Rows the page logs that change nothing in the editor model (beyond what their handler does).
GRID_ACTIONS = (
    "edit",
    "floodfill",
    "select_cells",
    "select_copy",
    "select_paste",
    "select_change_color",
    "copy_from_input",
    "change_height",
    "change_width",
    "reset_grid",
    "undo",
)
INTERFACE_ACTIONS = (
    "change_color",
    "change_tool",
    "submit",
    "write_first_description",
    "write_last_description",
    "no_last_description",
    "write_description",
    "Help",
    "auto_solve",
)
# Tutorial and feedback rows are not part of a task trace (§3.14): skipped with a note.
SKIPPED_ACTIONS = (
    "submit_tutorial",
    "write_first_tutorial_description",
    "write_last_tutorial_description",
    "submit_feedback",
)
KNOWN_ACTIONS = GRID_ACTIONS + INTERFACE_ACTIONS + SKIPPED_ACTIONS
_KNOWN = frozenset(KNOWN_ACTIONS)
_SKIPPED = frozenset(SKIPPED_ACTIONS)
# Rows that neither set nor clear the selection record and need no highlight (spec §3.6, "Not clearing"; undo
# keeps a stale record in select mode, Q8): one that logs the record empty while the replay holds one follows
# a Submit press that logged nothing (`_unseen_submit_threw`).
_KEEPS_SELECTION = frozenset({"edit", "change_color", "Help", "undo"})


@dataclass(frozen=True)
class ReplayNote:
    """Something worth knowing about a row that is not a divergence (or, in strict mode, became one).

    Codes: ``Q3`` ``Q4`` ``Q9`` ``Q11`` ``Q12`` (spec quirks), ``V3`` colour/tool, ``V4`` clipboard and
    selection record, ``V5`` attempt/solved, ``V6`` test input, ``V7`` action_id gap, ``selection``
    highlight-dependent preconditions, ``late_start``, ``skipped``, ``auto_solve``.
    """

    row_index: int
    action_id: int | None
    action: str
    code: str
    message: str
    is_mismatch: bool = False  # a disagreement between the row and the replayed state (V3-V6, selection)


@dataclass(frozen=True)
class Divergence:
    """The first row where the trace and the editor disagree."""

    row_index: int  # 0-based position in the trace as given
    action_id: int | None
    action: str
    kind: Literal["grid", "size", "action", "order", "state"]
    reason: str
    expected_grid: str | None  # the recorded test_output_grid
    got_grid: str  # the editor's grid after applying (or failing to apply) the row
    expected_size: tuple[int, int] | None
    got_size: tuple[int, int]  # the editor's drop-downs


@dataclass(frozen=True)
class ReplayResult:
    status: Status
    n_rows: int
    n_rows_replayed: int  # rows applied and checked, including a diverging row
    divergence: Divergence | None = None
    reason: str | None = None  # why the trace is not replayable
    row_index: int | None = None  # the row that made it not replayable
    notes: tuple[ReplayNote, ...] = ()
    # Rows whose grid was taken from the log instead of verified (Q3, late start, auto_solve).
    adopted_rows: tuple[int, ...] = ()
    grids: tuple[str, ...] = ()  # the editor's grid after each replayed row (skipped rows excluded)

    @property
    def is_consistent(self) -> bool:
        return self.status == "consistent"

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


class _NotReplayable(Exception):
    pass


class _Diverged(Exception):
    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def replay_trace(
    rows: Sequence[Mapping[str, Any]],
    *,
    previous_grid: Grid | str | None = None,
    test_input: Grid | str | Sequence[Sequence[int]] | None = None,
    answer: Grid | str | Sequence[Sequence[int]] | None = None,
    strict: bool = False,
) -> ReplayResult:
    """Replay one participant-task trace and report whether every row is reproduced.

    ``previous_grid``: the previous task's final grid (PREV, §1.2): the last row's grid of task k-1, or
    the tutorial's final grid for task 1. Unknown (None) makes the start-of-task stack entry opaque: an
    undo reaching it adopts the logged grid and the row is listed in ``adopted_rows`` (Q3).
    ``test_input``: the ARC task's ``test[0].input``; by default taken from the first row after row 1
    (row 1 carries the placeholder). ``answer``: ``test[0].output``; when given, submissions are re-judged
    and disagreements noted (V5). ``strict``: secondary mismatches (V3-V6) become divergences.
    """
    replayer = _TraceReplayer(rows, previous_grid, test_input, answer, strict)
    try:
        return replayer.run()
    finally:
        # The handlers close over the replayer: without them it is freed by reference counting at once, with
        # the editor and its log, instead of waiting for the cyclic collector to find it.
        replayer.handlers = None


def replay_participant(
    traces: Sequence[Sequence[Mapping[str, Any]]],
    *,
    tutorial_grid: Grid | str | None = None,
    **kwargs: Any,
) -> list[ReplayResult]:
    """Replay a participant's task traces in task order, chaining PREV from each trace's last row (§6).

    ``tutorial_grid`` is PREV for the first task (the release has no tutorial rows; None = opaque).
    Extra keyword arguments (``strict``) go to every ``replay_trace`` call.
    """
    results = []
    previous: Grid | str | None = tutorial_grid
    for rows in traces:
        results.append(replay_trace(rows, previous_grid=previous, **kwargs))
        previous = rows[-1].get("test_output_grid") if rows else None
    return results


class _TraceReplayer:
    def __init__(self, rows, previous_grid, test_input, answer, strict) -> None:
        self.rows = list(rows)
        self.previous_grid_arg = previous_grid
        self.test_input_arg = test_input
        self.answer_arg = answer
        self.strict = strict
        self.notes: list[ReplayNote] = []
        self.adopted: list[int] = []
        self.grids: list[str] = []
        self.editor: Editor | None = None
        self.handlers: dict[str, Callable[[Mapping[str, Any]], None]] | None = None
        self.input_known = False
        self.answer: Grid | None = None
        self.solved_grid: Grid | None = None  # the grid of the first correct submit row
        # Context of the row being replayed, for notes and errors.
        self.index = 0
        self.action_id: int | None = None
        self.action = ""

    # ------------------------------------------------------------------ driver

    def run(self) -> ReplayResult:
        if not self.rows:
            return self._result("not_replayable", reason="empty trace: no rows")
        try:
            self._prepare()
            last_action_id: int | None = None
            previous_action: str | None = None
            started = False
            grids = self.grids
            for index, row in enumerate(self.rows):
                self.index = index
                action = row.get("action")
                if type(action) is not str or action not in _KNOWN:
                    action = self._action(row)
                self.action = action
                action_id = row.get("action_id")
                if type(action_id) is not int or not -_EXACT_INT <= action_id <= _EXACT_INT:
                    action_id = _opt_int(row, "action_id", self._where)
                self.action_id = action_id
                if action in _SKIPPED:
                    self._note("skipped", f"{action} is not part of a task trace; row skipped")
                    continue
                try:
                    if action_id is None or last_action_id is None or action_id != last_action_id + 1:
                        last_action_id = self._check_order(last_action_id)
                    else:  # the next action_id: in order, nothing to note
                        last_action_id = action_id
                    if not started:
                        late_start = self._start(row)
                        started = True
                    else:
                        late_start = False
                        if previous_action == "write_first_description" and action != "submit":
                            self._judging_threw()
                        elif action in _KEEPS_SELECTION and self.editor.selection_record:
                            self._unseen_submit_threw(row)
                        if action == "edit":  # four rows in five: straight to the handler
                            self._edit(row)
                        else:
                            self._apply(row)
                    self._verify(row, not late_start)
                except InvalidInput as exc:
                    raise _NotReplayable(f"{self._where()}: {exc}") from exc
                except (_Diverged, ActionRejected) as exc:
                    kind, reason = (
                        (exc.kind, exc.reason) if isinstance(exc, _Diverged) else ("action", str(exc))
                    )
                    return self._diverged(row, kind, reason)
                grids.append(self.editor.grid_string)
                previous_action = action
        except _NotReplayable as exc:
            return self._result("not_replayable", reason=str(exc), row_index=self.index)
        return self._result("consistent")

    def _prepare(self) -> None:
        # The grids are checked here (a malformed one makes the trace not replayable, with its message); the
        # editor is then given the checked grid strings themselves, which it need not format again.
        self.index = -1
        if self.test_input_arg is not None:
            self.test_input = self._grid(self.test_input_arg, "test_input argument")
            self.test_input_given = self._checked(self.test_input_arg, self.test_input)
            self.input_known = True
        else:
            self.test_input = self.test_input_given = as_grid(PLACEHOLDER_INPUT)
            # Row 1 of a task carries the 3x3 placeholder input; a trace starting late has no such row.
            first = 1 if _opt(self.rows[0], "action") == "reset_grid" else 0
            for row in self.rows[first:]:
                value = _opt(row, "test_input_grid")
                if value is not None:
                    self.test_input = self._grid(value, "test_input_grid")
                    self.test_input_given = self._checked(value, self.test_input)
                    self.input_known = True
                    break
        if self.answer_arg is not None:
            self.answer = self._grid(self.answer_arg, "answer argument")
        if self.previous_grid_arg is not None:
            self.previous_grid = self._checked(self.previous_grid_arg,
                                               self._grid(self.previous_grid_arg, "previous_grid argument"))
        else:
            self.previous_grid = None

    @staticmethod
    def _checked(value: Any, grid: Grid) -> Grid | str:
        """A checked grid as the editor takes it best: its grid string when given as one, else the array."""
        return value if isinstance(value, str) else grid

    def _start(self, row: Mapping[str, Any]) -> bool:
        """Set up the editor from the first row; True when the trace starts late (row adopted)."""
        if self.action == "reset_grid":
            self.editor = Editor(block_duplicate_submissions=False)
            previous = OPAQUE_SNAPSHOT if self.previous_grid is None else self.previous_grid
            self.editor.load_task(self.test_input_given, previous_grid=previous)
            return False
        # §6: a trace that does not begin with the task-start reset is initialised from its first row.
        where = self._where  # formatted only when a message needs it
        self.editor = Editor.resume(
            grid=self._recorded_grid(row),
            dropdown=self._recorded_size(row),
            test_input=self.test_input,
            symbol=_opt_int(row, "selected_symbol", where) or 0,
            tool=_opt(row, "selected_tool") or "edit",
            clipboard=_json_list(row, "copy_paste_data", where) or [],
            selection_record=_json_list(row, "selected_data", where) or [],
            attempt=_opt_int(row, "attempt_number", where) or 1,
            solved=bool(_opt_bool(row, "solved", where)),
            action_count=self.action_id or 0,
            block_duplicate_submissions=False,
        )
        self.adopted.append(self.index)
        self._note("late_start", "trace does not start with reset_grid: state initialised from this row")
        return True

    def _check_order(self, last_action_id: int | None) -> int | None:
        if self.action_id is None:
            return last_action_id
        if last_action_id is not None:
            if self.action_id <= last_action_id:
                raise _Diverged(
                    "order", f"action_id {self.action_id} does not increase (previous {last_action_id})"
                )
            if self.action_id > last_action_id + 1:
                self._note("V7", f"action_id jumps from {last_action_id} to {self.action_id}: rows missing?")
        return self.action_id

    def _judging_threw(self) -> None:
        """Q11: write_first_description without a submit row: judging threw after clearing the selection."""
        ed = self.editor
        message = "write_first_description not followed by submit: judging assumed to have thrown"
        if self.answer is not None and judge_submission(ed.grid, self.answer) != "error":
            message += " (but the answer says it would not throw: a submit row may be missing)"
            self._note("Q11", message, mismatch=True)
        else:
            self._note("Q11", message)
        ed.abort_judging()

    def _unseen_submit_threw(self, row: Mapping[str, Any]) -> None:
        """Q11 again, later: a Submit press whose judging throws logs no row but clears the selection (and
        re-submitting the same grid throws again). Seen as a row of `_KEEPS_SELECTION` logging an empty selection
        record while the replay holds one, once the first description is written and the task is unsolved; the
        replay then clears it too. When the answer is known, a grid whose judging would not throw leaves the
        mismatch to be reported."""
        ed = self.editor
        if ed.first_pending or ed.solved or (self.action == "undo" and ed.tool != "select"):
            return  # no judging yet, or none after a solve; undo in edit or floodfill mode clears it itself
        if _json_list(row, "selected_data", self._where) != []:
            return
        answer = self.answer if self.answer is not None else self.solved_grid
        if answer is not None and judge_submission(ed.grid, answer) != "error":
            return
        self._note("Q11", "the selection record was cleared with no row: a Submit press whose judging threw")
        ed.abort_judging()

    # ------------------------------------------------------------------ per-action handlers

    def _apply(self, row: Mapping[str, Any]) -> None:
        if self.handlers is None:
            self.handlers = self._handlers()
        handler = self.handlers.get(self.action)
        if handler is None:  # unreachable: _action() rejects unknown names
            raise _NotReplayable(f"{self._where()}: no handler for action {self.action!r}")
        handler(row)

    def _handlers(self) -> dict[str, Callable[[Mapping[str, Any]], None]]:
        ed = self.editor
        return {
            "reset_grid": lambda row: ed.reset_grid(),
            "edit": self._edit,
            "floodfill": lambda row: ed.floodfill(*self._coords(row)),
            "change_color": lambda row: ed.change_color(self._req_int(row, "selected_symbol")),
            "select_change_color": self._select_change_color,
            "change_tool": lambda row: ed.change_tool(self._req(row, "selected_tool")),
            "select_cells": self._select_cells,
            "select_copy": self._select_copy,
            "select_paste": self._select_paste,
            "change_height": lambda row: ed.change_height(self._req_int(row, "test_output_size_x")),
            "change_width": lambda row: ed.change_width(self._req_int(row, "test_output_size_y")),
            "copy_from_input": self._copy_from_input,
            "undo": self._undo,
            "write_first_description": lambda row: ed.write_first_description(),
            "submit": self._submit,
            "no_last_description": lambda row: ed.no_last_description(),
            "write_last_description": lambda row: ed.write_last_description(),
            "write_description": lambda row: ed.write_description(),
            "Help": lambda row: ed.help(),
            "auto_solve": self._auto_solve,
        }

    def _edit(self, row: Mapping[str, Any]) -> None:
        x, y = row.get("action_x"), row.get("action_y")
        if type(x) is not int or type(y) is not int or not (-_EXACT_INT <= x <= _EXACT_INT
                                                            and -_EXACT_INT <= y <= _EXACT_INT):
            x, y = self._coords(row)  # the general parse (floats, text, nulls), with its messages
        self.editor.edit(x, y)

    def _select_change_color(self, row: Mapping[str, Any]) -> None:
        ed = self.editor
        symbol = self._req_int(row, "selected_symbol")
        if _opt(row, "selected_tool") == "edit":
            self._note("Q9", "select_change_color with tool edit: reset quirk, dispatched by action name")
        if ed.highlighted_output_cells:
            ed.select_change_color(symbol)
        else:
            self._selection_mismatch(
                "select_change_color but no output cell is highlighted in the replay; nothing recoloured"
            )
            ed.select_change_color(symbol, cells=())

    def _select_cells(self, row: Mapping[str, Any]) -> None:
        cells = _json_list(row, "selected_data", self._where)
        if cells is None:
            raise _NotReplayable(f"{self._where()}: selected_data is missing")
        location = _opt(row, "select_loc")
        if _opt(row, "selected_tool") not in (None, "select"):
            self._note("Q9", "select_cells with tool edit: reset quirk, dispatched by action name")
        if location == "test_input" and not self.input_known:
            raise _NotReplayable(f"{self._where()}: selection on the test input, which is unknown")
        self.editor.select_cells(location, cells)
        logged_first = (_opt_int(row, "action_x", self._where), _opt_int(row, "action_y", self._where))
        if cells and logged_first != (None, None) and list(logged_first) != list(cells[0]):
            self._note("V4", f"action_x/y {logged_first} is not the first selected cell {cells[0]}", True)

    def _select_copy(self, row: Mapping[str, Any]) -> None:
        ed = self.editor
        logged = _json_list(row, "copy_paste_data", self._where)
        derived = [list(entry) for entry in ed.derive_clipboard()]
        if logged is None:
            ed.select_copy()
            return
        if _normalise(logged) != derived:
            self._selection_mismatch(
                f"copy_paste_data {_short(logged)} differs from the highlighted cells {_short(derived)}"
            )
        ed.select_copy(logged)

    def _select_paste(self, row: Mapping[str, Any]) -> None:
        ed = self.editor
        if _opt(row, "action_x") is None and _opt(row, "action_y") is None:
            self._note("selection", "select_paste without a logged target: pasting at the highlighted cell")
            ed.select_paste()
            return
        target = self._coords(row)
        highlighted = ed.highlighted_output_cells
        if highlighted != (target,):
            self._selection_mismatch(
                f"paste target {target} but the replay highlights {list(highlighted)} on the output"
            )
        ed.select_paste(target)

    def _copy_from_input(self, row: Mapping[str, Any]) -> None:
        if not self.input_known:
            raise _NotReplayable(f"{self._where()}: copy_from_input needs the test input, which is unknown")
        self.editor.copy_from_input()

    def _undo(self, row: Mapping[str, Any]) -> None:
        ed = self.editor
        if ed.next_undo_is_opaque:
            ed.undo(adopt=self._recorded_grid(row))
            self.adopted.append(self.index)
            self._note("Q3", "undo reached the unknown previous-task grid: logged grid adopted, not verified")
        else:
            ed.undo()
        if ed.dropdown != grid_size(ed.grid):
            self._note("Q4", f"drop-downs stay {ed.dropdown} while the restored grid is {grid_size(ed.grid)}")

    def _submit(self, row: Mapping[str, Any]) -> None:
        ed = self.editor
        logged = _opt_bool(row, "solved", self._where)
        # Once a submission was correct its grid is the answer. A later submit in the same task (Q15) must be
        # judged against it: the logged flag stays true whatever that submission was.
        answer = self.answer if self.answer is not None else self.solved_grid
        judged = None if answer is None else judge_submission(ed.grid, answer)
        if judged == "error":
            self._note("V5", "submit row although judging this grid throws in the page (Q11)", True)
        elif judged is not None and logged is not None and not ed.solved and logged != (judged == "correct"):
            self._note("V5", f"logged solved={logged} but the answer judges the grid {judged}", True)
        if ed.attempt > 1 and ed.grid_string == ed.previous_submission:
            self._note("Q12", "resubmission of the previous grid: participant predates the 2023-12-01 block")
        if judged is not None and (ed.solved or logged is None):
            correct = judged == "correct"
        else:
            correct = bool(logged)
        ed.submit(correct)
        if correct and self.solved_grid is None:
            self.solved_grid = ed.grid.copy()

    def _auto_solve(self, row: Mapping[str, Any]) -> None:
        self.editor.auto_solve(self._recorded_grid(row))
        self.adopted.append(self.index)
        self._note("auto_solve", "developer auto_solve: logged grid adopted")

    # ------------------------------------------------------------------ verification

    def _verify(self, row: Mapping[str, Any], secondary: bool) -> None:
        ed = self.editor
        produced = ed.log[-1] if secondary else None  # a late start's editor has logged nothing
        produced_grid = produced["test_output_grid"] if secondary else ed.grid_string
        if row.get("test_output_grid") != produced_grid:  # equal text is well-formed: parse only otherwise
            self._req(row, "test_output_grid")
            expected = self._recorded_grid(row)
            if format_grid(expected) != produced_grid:
                raise _Diverged("grid", _grid_reason(ed.grid, expected))
        expected_size = (row.get("test_output_size_x"), row.get("test_output_size_y"))
        if expected_size != ed.dropdown or type(expected_size[0]) is not int or type(expected_size[1]) is not int:
            expected_size = self._recorded_size(row)  # the drop-downs are small ints: equal ones are valid
        if ed.dropdown != expected_size:
            raise _Diverged(
                "size",
                f"drop-downs are {ed.dropdown[0]}x{ed.dropdown[1]}, row logs "
                f"{expected_size[0]}x{expected_size[1]}",
            )
        if secondary and not _agrees(row, produced):
            self._compare_secondary(row, produced)

    def _compare_secondary(self, row: Mapping[str, Any], produced: Mapping[str, Any]) -> None:
        where = self._where  # formatted only when a message needs it
        checks: list[tuple[str, str, Any, Any]] = [
            ("V3", "selected_symbol", _opt_int(row, "selected_symbol", where), produced["selected_symbol"]),
            ("V3", "selected_tool", _opt(row, "selected_tool"), produced["selected_tool"]),
            ("V4", "copy_paste_data", _json_list(row, "copy_paste_data", where), produced["copy_paste_data"]),
            ("V4", "selected_data", _json_list(row, "selected_data", where), produced["selected_data"]),
            ("V5", "attempt_number", _opt_int(row, "attempt_number", where), produced["attempt_number"]),
            ("V5", "solved", _opt_bool(row, "solved", where), produced["solved"]),
        ]
        recorded_input = _opt(row, "test_input_grid")
        if recorded_input is not None and (self.index == 0 or self.input_known):
            if recorded_input != produced["test_input_grid"]:  # parse only when the text differs
                recorded_input = format_grid(self._grid(recorded_input, "test_input_grid"))
            checks.append(("V6", "test_input_grid", recorded_input, produced["test_input_grid"]))
        for code, column, logged, replayed in checks:
            if logged is None:
                continue
            if isinstance(logged, list):
                logged = _normalise(logged)
            if logged != replayed:
                self._note(code, f"{column}: row logs {_short(logged)}, replay has {_short(replayed)}", True)

    # ------------------------------------------------------------------ helpers

    def _note(self, code: str, message: str, mismatch: bool = False) -> None:
        self.notes.append(ReplayNote(self.index, self.action_id, self.action, code, message, mismatch))
        if mismatch and self.strict:
            raise _Diverged("state", f"[{code}] {message}")

    def _selection_mismatch(self, message: str) -> None:
        """The replay's selection disagrees with what the row logs (diverges in strict mode)."""
        self._note("selection", message, mismatch=True)

    def _diverged(self, row: Mapping[str, Any], kind: str, reason: str) -> ReplayResult:
        ed = self.editor
        try:
            expected_grid = format_grid(self._recorded_grid(row))
        except _NotReplayable:
            expected_grid = _opt(row, "test_output_grid")
        try:
            expected_size = self._recorded_size(row)
        except _NotReplayable:
            expected_size = None
        if ed is None:  # the very first row failed the order check: impossible, kept for safety
            got_grid, got_size = "", (0, 0)
        else:
            got_grid, got_size = ed.grid_string, ed.dropdown
        divergence = Divergence(
            row_index=self.index,
            action_id=self.action_id,
            action=self.action,
            kind=kind,
            reason=reason,
            expected_grid=expected_grid,
            got_grid=got_grid,
            expected_size=expected_size,
            got_size=got_size,
        )
        return self._result("divergent", divergence=divergence, replayed=len(self.grids) + 1)

    def _result(self, status: Status, *, replayed: int | None = None, **kwargs: Any) -> ReplayResult:
        return ReplayResult(
            status=status,
            n_rows=len(self.rows),
            n_rows_replayed=len(self.grids) if replayed is None else replayed,
            notes=tuple(self.notes),
            adopted_rows=tuple(self.adopted),
            grids=tuple(self.grids),
            **kwargs,
        )

    def _where(self) -> str:
        if self.index < 0:
            return "trace"
        aid = "" if self.action_id is None else f", action_id {self.action_id}"
        return f"row {self.index} ({self.action or '?'}{aid})"

    def _action(self, row: Mapping[str, Any]) -> str:
        action = _opt(row, "action")
        if action is None:
            raise _NotReplayable(f"row {self.index}: the action column is missing")
        if action not in _KNOWN:
            raise _NotReplayable(f"row {self.index}: unknown action {action!r}")
        return str(action)

    def _grid(self, value: Any, what: str) -> Grid:
        try:
            return as_grid(value)
        except GridFormatError as exc:
            raise _NotReplayable(f"{self._where()}: malformed {what}: {exc}") from exc

    def _recorded_grid(self, row: Mapping[str, Any]) -> Grid:
        return self._grid(self._req(row, "test_output_grid"), "test_output_grid")

    def _recorded_size(self, row: Mapping[str, Any]) -> tuple[int, int]:
        return self._req_int(row, "test_output_size_x"), self._req_int(row, "test_output_size_y")

    def _req(self, row: Mapping[str, Any], key: str) -> Any:
        value = _opt(row, key)
        if value is None:
            raise _NotReplayable(f"{self._where()}: {key} is missing")
        return value

    def _req_int(self, row: Mapping[str, Any], key: str) -> int:
        value = _opt_int(row, key, self._where)
        if value is None:
            raise _NotReplayable(f"{self._where()}: {key} is missing")
        return value

    def _coords(self, row: Mapping[str, Any]) -> tuple[int, int]:
        return self._req_int(row, "action_x"), self._req_int(row, "action_y")


# ---------------------------------------------------------------------- row value parsing


Where = str | Callable[[], str]  # where a row value sits, for messages; a callable is formatted only on error


def _place(where: Where) -> str:
    return where() if callable(where) else where


def _opt(row: Mapping[str, Any], key: str) -> Any:
    """The value, or None when absent or null (None / NaN)."""
    value = row.get(key)
    kind = type(value)
    if kind is int or kind is bool:  # the common cases first: values from a typed table
        return value
    if value is None or (isinstance(value, str) and value == ""):  # raw CSV text has "" for null
        return None
    if isinstance(value, float | np.floating) and math.isnan(value):
        return None
    return value


def _from_text(
    cell: Any, parse: Callable[[str], Any], error: type[Exception], reason: Callable[[Exception], str]
) -> Any:
    """A raw-CSV text cell parsed by ``parse`` (other values pass through); text that fails with
    ``error`` makes the row unreplayable, ``reason`` wording why."""
    if not isinstance(cell, str):
        return cell
    try:
        return parse(cell)
    except error as exc:
        raise _NotReplayable(reason(exc)) from None


_EXACT_INT = 1 << 53  # ints up to here convert to float exactly: no whole-number check needed


def _opt_int(row: Mapping[str, Any], key: str, where: Where) -> int | None:
    cell = row.get(key)
    if type(cell) is int and -_EXACT_INT <= cell <= _EXACT_INT:
        return cell
    cell = _opt(row, key)
    if cell is None:
        return None
    if type(cell) is int and -_EXACT_INT <= cell <= _EXACT_INT:
        return cell
    value = _from_text(cell, float, ValueError, lambda _: f"{_place(where)}: {key} is not a number: {cell!r}")
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        raise _NotReplayable(f"{_place(where)}: {key} is not a number: {value!r}")
    if not math.isfinite(float(value)) or float(value) != int(value):
        raise _NotReplayable(f"{_place(where)}: {key} is not a whole number: {value!r}")
    return int(value)


def _opt_bool(row: Mapping[str, Any], key: str, where: Where) -> bool | None:
    value = _opt(row, key)
    if value is None or type(value) is bool:
        return value
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, int | np.integer) and int(value) in (0, 1):
        return bool(value)
    raise _NotReplayable(f"{_place(where)}: {key} is not a boolean: {value!r}")


# Parsed JSON list cells by their text: most rows repeat a few ("[]", the same clipboard). The cached lists are
# private (compared by _agrees, never handed out): every call gets its own copies, since the editor's selection
# and clipboard are mutated in place, and a shared list once made a later row's "[]" read as an earlier
# selection.
_JSON_LISTS: dict[str, list[list[int]]] = {}
_JSON_LISTS_MAX = 100_000


def _json_list(row: Mapping[str, Any], key: str, where: Where) -> list | None:
    cell = _opt(row, key)
    if cell is None:
        return None
    if type(cell) is str:
        cached = _JSON_LISTS.get(cell)
        if cached is not None:
            return [list(item) for item in cached]
    value = _from_text(
        cell, json.loads, json.JSONDecodeError, lambda exc: f"{_place(where)}: {key} is not valid JSON: {exc}"
    )
    if not isinstance(value, list | tuple):
        raise _NotReplayable(f"{_place(where)}: {key} must be a JSON list, got {type(value).__name__}")
    try:
        result = _normalise(value)
    except (TypeError, ValueError):
        raise _NotReplayable(f"{_place(where)}: {key} must be a list of integer lists: {_short(value)}") from None
    if type(cell) is str:
        if len(_JSON_LISTS) >= _JSON_LISTS_MAX:
            _JSON_LISTS.clear()
        _JSON_LISTS[cell] = [list(item) for item in result]
    return result


def _agrees(row: Mapping[str, Any], produced: Mapping[str, Any]) -> bool:
    """True when every secondary column of the row is null or already equal, in its parsed type, to the
    replayed row's (so _compare_secondary would note nothing); False means: compare in full. Written out
    column by column: it runs on every row."""
    get = row.get
    value = get("selected_symbol")
    if value is not None and (type(value) is not int or value != produced["selected_symbol"]):
        return False
    value = get("attempt_number")
    if value is not None and (type(value) is not int or value != produced["attempt_number"]):
        return False
    value = get("solved")
    if value is not None and (type(value) is not bool or value != produced["solved"]):
        return False
    value = get("selected_tool")
    if value is not None and (type(value) is not str or value != produced["selected_tool"]):
        return False
    value = get("test_input_grid")
    if value is not None and (type(value) is not str or value != produced["test_input_grid"]):
        return False
    lists = _JSON_LISTS  # text -> parsed list; a text not parsed yet gives None, which never agrees
    value = get("copy_paste_data")
    if value is not None and (type(value) is not str or lists.get(value) != produced["copy_paste_data"]):
        return False
    value = get("selected_data")
    return value is None or (type(value) is str and lists.get(value) == produced["selected_data"])


def _normalise(entries: Sequence[Sequence[Any]]) -> list[list[int]]:
    result = []
    for entry in entries:
        if isinstance(entry, str | bytes) or not isinstance(entry, Sequence | np.ndarray):
            raise TypeError("entry is not a list")
        result.append([_whole(v) for v in entry])
    return result


def _whole(value: Any) -> int:
    if isinstance(value, bool) or float(value) != int(value):
        raise ValueError(f"not a whole number: {value!r}")
    return int(value)


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value) if isinstance(value, list) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _grid_reason(got: Grid, expected: Grid) -> str:
    if got.shape != expected.shape:
        return f"grid is {got.shape[0]}x{got.shape[1]}, row logs {expected.shape[0]}x{expected.shape[1]}"
    diff = np.argwhere(got != expected)
    r, c = (int(v) for v in diff[0])
    cells = f"{len(diff)} cell(s) differ" if len(diff) > 1 else "1 cell differs"
    return f"{cells}; first at ({r}, {c}): row logs {int(expected[r, c])}, replay has {int(got[r, c])}"


__all__ = [
    "Divergence",
    "KNOWN_ACTIONS",
    "ReplayNote",
    "ReplayResult",
    "replay_participant",
    "replay_trace",
]
