"""One simulated H-ARC participant solving a sequence of ARC tasks through the engine's editor.

Every logged row comes from ``engine.harc.Editor`` (the collection page's state machine), so traces are
exactly what the page would log and replay consistently; this module only decides *what the participant
does and when*.

Participant model
- ``skill`` (logit scale) against the task's ``difficulty``: the chance of inferring the rule before the
  first submission is ``sigmoid(skill - difficulty)``; after a wrong submission without the rule it is
  ``sigmoid(skill - difficulty + RETRY_LOGIT[k])`` (feedback is only correct/incorrect, so it helps little).
- With the rule, the participant builds the correct output but may *slip* (1-3 cells wrong), more often on
  outputs with many cells to change and for less careful people; a slip is usually fixed next attempt.
- Without the rule the participant builds a wrong hypothesis: the family's plausible misreadings (other
  axis, wrong colour, wrong factor, ...), a partial application, a copy of the test input or of a train
  output (copy errors), or the right content at a wrong size (dimension errors). Sometimes the same wrong
  grid is submitted again: logged before the 2023-12-01 block, silently refused after it.
- How a grid is built (``Style``): ``copy_from_input`` then edits, or resizing with the drop-downs (now and
  then with arrow keys, one row per step); flood fills of regions; selections with copy/paste from the
  test input and selection recolouring; drag painting (several ``edit`` rows in the same second);
  misclicks, fixed by ``undo`` or by painting over; the odd Help click or undo into the previous task.
- Time: participant speed times action-specific gaps (seconds, 1-s resolution as logged); at least 5 s of
  thinking before the first action and after each wrong submission; description writing before the first
  submit row (the description and submit rows share a second); ``no_last_description`` 1 s after a
  first-attempt solve.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from engine.harc import Editor, as_grid, judge_submission
from pipeline.simulate.arc_tasks import FAMILIES, GeneratedTask

# After a wrong submission without the rule, the logit of finding it at attempt 2 and 3.
RETRY_LOGIT = {2: -0.8, 3: -1.5}
SLIP_FIX = 0.8  # a participant who slipped notices and fixes it on the next attempt
TUTORIAL_GRID = "|626262|262626|"  # e9afcf9a's answer: the tutorial's final grid, PREV for task 1

GENERIC_GUESSES = (
    "I think the shapes move or change colour, I tried to copy the pattern.",
    "copy the input and change a few squares",
    "Not sure. The colours seem to swap somehow.",
    "The output looks like the input but some parts are filled in.",
    "I followed the examples as best as I could.",
    "Make the grid match the pattern in the examples",
    "some cells get a new colour depending on where they are",
    "Guessing: it repeats the picture.",
)
GIVE_UP = (
    "I could not figure out the rule.",
    "I don't know, I tried several ideas.",
    "No idea, sorry.",
    "I thought it was about the colours but it was not.",
)


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


@dataclass(frozen=True)
class Style:
    """How a participant works the editor (probabilities per opportunity; speed multiplies every gap)."""

    speed: float = 1.0
    p_copy: float = 0.7
    p_flood: float = 0.5
    p_select: float = 0.2
    p_mistake: float = 0.03
    p_undo_fix: float = 0.6
    p_arrow: float = 0.1
    carefulness: float = 1.0  # multiplies the slip probability
    think: float = 1.0  # multiplies thinking pauses


@dataclass
class ParticipantSpec:
    index: int
    hashed_id: str
    split: str
    exp_name: str
    task_ids: list[str]
    skill: float
    style: Style
    start: datetime
    block_duplicates: bool
    complete: bool = True
    stop_task: int | None = None  # 0-based index of the task where an incomplete participant stops
    stop_inside: bool = False  # stop in the middle of that task (truncated trace) or before it
    stop_fraction: float = 0.5
    withdraw: bool = False
    withdraw_reason: str | None = None
    withdraw_comment: str | None = None
    survey: dict[str, str | None] | None = None
    feedback: str | None = None


@dataclass
class TaskTrace:
    task_id: str
    task_number: int
    rows: list[dict[str, Any]]
    seconds: list[int]  # participant-clock second of each row
    first_description: str | None
    last_description: str | None
    solved: bool
    truncated: bool = False


class _Session:
    """A participant at the editor: the clock, the decisions and the rows of the current task."""

    def __init__(self, spec: ParticipantSpec, rng: random.Random) -> None:
        self.spec = spec
        self.style = spec.style
        self.rng = rng
        self.ed = Editor(block_duplicate_submissions=spec.block_duplicates)
        self.clock = 0.0
        self.rows: list[dict[str, Any]] = []
        self.seconds: list[int] = []
        self.patches: list[tuple[np.ndarray, int, int]] = []
        self.target_boxes: list[tuple[int, int, int, int, int]] = []
        self.use_select = False
        self.use_flood = False
        self.careless = True
        self.level = 0.0  # the current task's difficulty level (bigger tasks, longer pauses)

    # ------------------------------------------------------------------ logging and time

    def wait(self, seconds: float) -> None:
        self.clock += max(0.0, seconds) * self.style.speed

    def think(self, median: float, minimum: float = 5.0) -> None:
        """A thinking pause of at least ``minimum`` seconds (the H-ARC thinking-time threshold)."""
        gap = minimum + median * self.style.think * math.exp(self.rng.gauss(0.0, 0.6))
        self.clock += max(minimum, gap)

    def write(self, seconds: float) -> None:
        """Writing a description: never under 5 s."""
        self.clock += max(5.0, seconds * self.style.speed * self.style.think)

    def log(self, rows: list[dict[str, Any]] | dict[str, Any], gap: float = 0.0) -> list[dict[str, Any]]:
        self.wait(gap)
        rows = [rows] if isinstance(rows, dict) else rows
        for row in rows:
            self.rows.append(row)
            self.seconds.append(int(self.clock))
        return rows

    def click_gap(self) -> float:
        return self.rng.uniform(0.6, 2.8)

    # ------------------------------------------------------------------ small interface helpers

    def ensure_tool(self, tool: str) -> None:
        if self.ed.tool != tool:
            self.log(self.ed.change_tool(tool), self.rng.uniform(0.8, 3.0))

    def set_color(self, color: int) -> list[dict[str, Any]]:
        if self.ed.symbol == color:
            if self.rng.random() < 0.03:  # a redundant palette click is logged all the same
                return self.log(self.ed.palette_click(color), self.click_gap())
            return []
        return self.log(self.ed.palette_click(color), self.rng.uniform(0.8, 3.0))

    # ------------------------------------------------------------------ building a target grid

    def build(self, target: np.ndarray) -> None:
        """Drive the editor until its grid equals ``target`` (misclicks included, then repaired)."""
        ed = self.ed
        self.use_select = self.rng.random() < self.style.p_select
        self.use_flood = self.rng.random() < self.style.p_flood
        self.patches = self._input_patches() if self.use_select else []
        self.target_boxes = _filled_rectangles(target) if self.use_select else []
        self.careless = True
        for step in range(600):
            if step == 300:
                self.careless = False  # no more misclicks: finish the grid
            grid = ed.grid
            if grid.shape != target.shape:
                self._fix_size(target)
                continue
            diff = grid != target
            n_diff = int(diff.sum())
            if n_diff == 0:
                return
            if self.use_select and n_diff >= 4 and self._try_paste(target, diff):
                continue
            if self.use_flood and n_diff >= 4 and self._try_flood(target, diff):
                continue
            if self.use_select and n_diff >= 4 and self._try_select_recolor(target, diff):
                continue
            self._edit_stroke(target, diff)
        raise RuntimeError("the simulated participant could not build its target grid")  # pragma: no cover

    def _fix_size(self, target: np.ndarray) -> None:
        ed = self.ed
        h, w = target.shape
        inp = ed.test_input
        ih, iw = inp.shape
        if ed.grid.shape != inp.shape and ih <= h and iw <= w:
            # The input as a starting point: an output of the same size, or one that starts with the input.
            if inp.shape == target.shape:
                p = self.style.p_copy * (1.0 if float((inp == target).mean()) >= 0.5 else 0.7)
            else:
                p = self.style.p_copy * float(np.array_equal(target[:ih, :iw], inp))
            if self.rng.random() < p:
                self.log(ed.copy_from_input(), self.rng.uniform(1.5, 5.0))
                return
        if ed.dropdown == (h, w):
            # The drop-downs already show the size but the grid has another (an undo restored it).
            self.log(ed.reset_grid(), self.rng.uniform(1.5, 4.0))
            return
        order = ["h", "w"] if self.rng.random() < 0.6 else ["w", "h"]
        arrows = self.rng.random() < self.style.p_arrow
        for which in order:
            current = ed.dropdown[0] if which == "h" else ed.dropdown[1]
            wanted = h if which == "h" else w
            if current == wanted:
                continue
            change = ed.change_height if which == "h" else ed.change_width
            if arrows and abs(wanted - current) <= 6:
                step = 1 if wanted > current else -1
                for i, value in enumerate(range(current + step, wanted + step, step)):
                    self.log(change(value), self.rng.uniform(1.0, 3.0) if i == 0 else self.rng.uniform(0.0, 0.9))
            else:
                self.log(change(wanted), self.rng.uniform(1.5, 4.5))

    def _input_patches(self) -> list[tuple[np.ndarray, int, int]]:
        """Rectangles of the test input worth copying: the whole input and each object's bounding box."""
        inp = self.ed.test_input
        patches = [(inp, 0, 0)]
        for r0, c0, r1, c1 in _object_boxes(inp)[:6]:
            if (r1 - r0 + 1) * (c1 - c0 + 1) >= 4:
                patches.append((inp[r0:r1 + 1, c0:c1 + 1], r0, c0))
        return patches

    def _try_paste(self, target: np.ndarray, diff: np.ndarray) -> bool:
        ed = self.ed
        best = None
        for index, (patch, _, _) in enumerate(self.patches):
            ph, pw = patch.shape
            if ph > target.shape[0] or pw > target.shape[1]:
                continue
            windows = np.lib.stride_tricks.sliding_window_view(target, patch.shape)
            match = (windows == patch).all(axis=(2, 3))
            if not match.any():
                continue
            gains = np.lib.stride_tricks.sliding_window_view(diff, patch.shape).sum(axis=(2, 3))
            gains = np.where(match, gains, -1)
            r, c = np.unravel_index(int(np.argmax(gains)), gains.shape)
            gain = int(gains[r, c])
            if gain >= max(4, patch.size // 3) and (best is None or gain > best[0]):
                best = (gain, index, int(r), int(c))
        if best is None:
            return False
        _, index, r, c = best
        patch, r0, c0 = self.patches[index]
        ph, pw = patch.shape
        self.ensure_tool("select")
        wanted = [(r0 + i, c0 + j, int(patch[i, j])) for i in range(ph) for j in range(pw)]
        if ed.clipboard != wanted:
            cells = [[r0 + i, c0 + j] for i in range(ph) for j in range(pw)]
            self.log(ed.select_cells("test_input", cells), self.rng.uniform(1.5, 4.0))
            self.log(ed.select_copy(), self.rng.uniform(0.5, 2.0))
        self.log(ed.select_cells("test_output", [[r, c]]), self.rng.uniform(1.0, 3.5))
        self.log(ed.select_paste(), self.rng.uniform(0.4, 1.5))
        if self.rng.random() < 0.05:  # key auto-repeat: the same paste again, nothing changes
            self.log(ed.select_paste(), 0.0)
        return True

    def _try_flood(self, target: np.ndarray, diff: np.ndarray) -> bool:
        ed = self.ed
        grid = ed.grid
        best = None
        need = set(int(v) for v in np.unique(target[diff]))
        for component, value in _components(grid):
            rows, cols = component
            wanted = target[rows, cols]
            for color in need:
                if color == value:
                    continue
                gain = int((wanted == color).sum()) - int((wanted == value).sum())
                if gain >= 4 and (best is None or gain > best[0]):
                    best = (gain, color, rows, cols)
        if best is None:
            return False
        _, color, rows, cols = best
        hits = [(int(r), int(c)) for r, c in zip(rows, cols, strict=True) if target[r, c] == color]
        r, c = hits[self.rng.randrange(len(hits))]
        self.ensure_tool("floodfill")
        self.set_color(color)
        self.log(ed.floodfill(r, c), self.click_gap())
        return True

    def _try_select_recolor(self, target: np.ndarray, diff: np.ndarray) -> bool:
        ed = self.ed
        best = None
        for color, r0, r1, c0, c1 in self.target_boxes:
            gain = int(diff[r0:r1 + 1, c0:c1 + 1].sum())
            if gain >= 3 and (best is None or gain > best[0]):
                best = (gain, color, r0, r1, c0, c1)
        if best is None:
            return False
        _, color, r0, r1, c0, c1 = best
        self.ensure_tool("select")
        cells = [[r, c] for r in range(r0, r1 + 1) for c in range(c0, c1 + 1)]
        self.log(ed.select_cells("test_output", cells), self.rng.uniform(1.5, 4.0))
        self.log(ed.palette_click(color), self.rng.uniform(0.8, 2.5))
        return True

    def _edit_stroke(self, target: np.ndarray, diff: np.ndarray) -> None:
        ed = self.ed
        self.ensure_tool("edit")
        colors, counts = np.unique(target[diff], return_counts=True)
        color = int(ed.symbol) if ed.symbol in colors else int(colors[int(np.argmax(counts))])
        self.set_color(color)
        cells = np.argwhere(diff & (target == color))
        if self.rng.random() < 0.5:  # serpentine order: drag back and forth
            cells = sorted(map(tuple, cells), key=lambda rc: (rc[0], rc[1] if rc[0] % 2 == 0 else -rc[1]))
        else:
            cells = [tuple(rc) for rc in cells]
        previous = None
        for r, c in cells:
            r, c = int(r), int(c)
            if ed.grid[r, c] == ed.symbol:
                continue
            adjacent = previous is not None and max(abs(previous[0] - r), abs(previous[1] - c)) <= 1
            gap = self.rng.uniform(0.0, 0.7) if adjacent else self.click_gap()
            if self.careless and self.rng.random() < self.style.p_mistake:
                self._misclick(r, c, gap)
                gap = self.click_gap()
            self.log(ed.edit(r, c), gap)
            previous = (r, c)
            if self.rng.random() < 0.03 * self.style.think:
                self.think(10.0 + 20.0 * self.level)  # a pause in the middle of painting

    def _misclick(self, r: int, c: int, gap: float) -> None:
        ed = self.ed
        h, w = ed.grid.shape
        options = [(r + dr, c + dc) for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0))
                   if 0 <= r + dr < h and 0 <= c + dc < w and ed.grid[r + dr, c + dc] != ed.symbol]
        if not options:
            return
        wr, wc = options[self.rng.randrange(len(options))]
        self.log(ed.edit(wr, wc), gap)
        if self.rng.random() < self.style.p_undo_fix:
            self.log(ed.undo(), self.rng.uniform(0.8, 3.0))


def _components(grid: np.ndarray) -> list[tuple[tuple[np.ndarray, np.ndarray], int]]:
    """4-connected same-value regions of a grid: ((rows, cols), value), in row-major order of first cell."""
    h, w = grid.shape
    flat = grid.ravel().tolist()
    seen = [False] * (h * w)
    out = []
    for start in range(h * w):
        if seen[start]:
            continue
        value = flat[start]
        seen[start] = True
        stack = [start]
        members = []
        while stack:
            i = stack.pop()
            members.append(i)
            r, c = divmod(i, w)
            if r > 0 and not seen[i - w] and flat[i - w] == value:
                seen[i - w] = True
                stack.append(i - w)
            if r < h - 1 and not seen[i + w] and flat[i + w] == value:
                seen[i + w] = True
                stack.append(i + w)
            if c > 0 and not seen[i - 1] and flat[i - 1] == value:
                seen[i - 1] = True
                stack.append(i - 1)
            if c < w - 1 and not seen[i + 1] and flat[i + 1] == value:
                seen[i + 1] = True
                stack.append(i + 1)
        idx = np.array(sorted(members))
        out.append(((idx // w, idx % w), value))
    return out


def _filled_rectangles(grid: np.ndarray) -> list[tuple[int, int, int, int, int]]:
    """Same-colour regions that are solid rectangles of at least 4 cells: (colour, r0, r1, c0, c1)."""
    boxes = []
    for (rows, cols), color in _components(grid):
        r0, r1, c0, c1 = int(rows.min()), int(rows.max()), int(cols.min()), int(cols.max())
        area = (r1 - r0 + 1) * (c1 - c0 + 1)
        if area == len(rows) and area >= 4:
            boxes.append((int(color), r0, r1, c0, c1))
    return boxes


def _object_boxes(grid: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Bounding boxes of the non-black 8-connected objects, largest first."""
    h, w = grid.shape
    seen = np.zeros_like(grid, dtype=bool)
    boxes = []
    for r in range(h):
        for c in range(w):
            if grid[r, c] == 0 or seen[r, c]:
                continue
            stack = [(r, c)]
            seen[r, c] = True
            cells = []
            while stack:
                a, b = stack.pop()
                cells.append((a, b))
                for da in (-1, 0, 1):
                    for db in (-1, 0, 1):
                        x, y = a + da, b + db
                        if 0 <= x < h and 0 <= y < w and not seen[x, y] and grid[x, y] != 0:
                            seen[x, y] = True
                            stack.append((x, y))
            rs = [a for a, _ in cells]
            cs = [b for _, b in cells]
            boxes.append((min(rs), min(cs), max(rs), max(cs)))
    boxes.sort(key=lambda b: (-(b[2] - b[0] + 1) * (b[3] - b[1] + 1), b))
    return boxes


# ---------------------------------------------------------------------- hypotheses


@dataclass
class _Plan:
    target: np.ndarray
    kind: str  # correct | slip | wrong | copy | repeat


class Participant:
    """Runs a participant's task sequence; ``run`` returns one TaskTrace per task reached."""

    def __init__(self, spec: ParticipantSpec, tasks: dict[str, GeneratedTask], difficulty: dict[str, float],
                 rng: random.Random) -> None:
        self.spec = spec
        self.tasks = tasks
        self.difficulty = difficulty
        self.rng = rng
        self.session = _Session(spec, rng)

    def run(self) -> list[TaskTrace]:
        traces = []
        s = self.session
        for position, task_id in enumerate(self.spec.task_ids):
            if self.spec.stop_task == position and not self.spec.stop_inside:
                break
            stop = self.spec.stop_task == position and self.spec.stop_inside
            trace = self._run_task(self.tasks[task_id], position + 1, truncate=stop)
            traces.append(trace)
            if stop:
                break
            s.wait(self.rng.uniform(0.0, 1.5))
        return traces

    # ------------------------------------------------------------------ one task

    def _run_task(self, task: GeneratedTask, number: int, *, truncate: bool) -> TaskTrace:
        s, ed, rng = self.session, self.session.ed, self.rng
        s.rows, s.seconds = [], []
        answer = as_grid(task.test_output)
        test_input = as_grid(task.test_input)
        s.level = task.level
        s.log(ed.load_task(test_input, previous_grid=TUTORIAL_GRID if number == 1 else None))
        s.think(50.0 + 200.0 * task.level)
        if rng.random() < 0.03:
            s.log(ed.help(), 0.0)
            s.think(6.0)
        if rng.random() < 0.15:  # picking a colour before anything else
            colors = sorted({int(v) for v in test_input.ravel() if v})
            if colors:
                s.set_color(rng.choice(colors))
        if rng.random() < 0.02:  # exploring Undo at the start: the previous task's grid comes back
            s.log(ed.undo(), s.click_gap())
            if rng.random() < 0.6 and ed.undo_depth:
                s.log(ed.undo(), s.click_gap())

        logit = self.spec.skill - self.difficulty[task.task_id]
        fam = FAMILIES[task.family]
        insight = False
        slipped = False
        first_description: str | None = None
        last_description: str | None = None
        submitted: list[str] = []
        solved = False
        attempt = 1
        while attempt <= 3 and not solved:
            if attempt > 1:
                s.think(35.0 + 130.0 * task.level)
                if not insight and rng.random() < sigmoid(logit + RETRY_LOGIT[attempt]):
                    insight = True
            elif rng.random() < sigmoid(logit):
                insight = True
            plan = self._plan(task, answer, test_input, attempt, insight, slipped, submitted)
            logged = False
            for retry in range(4):
                if plan.kind != "repeat":
                    if attempt > 1 and rng.random() < 0.2 and not np.array_equal(ed.grid, plan.target):
                        # start over: copy the input again or reset
                        if ed.test_input.shape == plan.target.shape and rng.random() < 0.6:
                            s.log(ed.copy_from_input(), s.click_gap())
                        else:
                            s.log(ed.reset_grid(), s.click_gap())
                    s.build(plan.target)
                s.wait(rng.uniform(2.0, 9.0))  # looking over the grid before Submit
                if ed.first_pending:
                    ed.press_submit(answer)  # opens the description box: no row
                    first_description = (fam.describe(task.variables, rng) if insight
                                         else rng.choice(GENERIC_GUESSES))
                    s.write(rng.uniform(30.0, 120.0) * (1.0 + 0.6 * task.level))
                    rows = s.log(ed.send_first_description(answer))
                else:
                    rows = s.log(ed.press_submit(answer))
                submit_rows = [r for r in rows if r["action"] == "submit"]
                if submit_rows:
                    logged = True
                    submitted.append(submit_rows[0]["test_output_grid"])
                    solved = bool(submit_rows[0]["solved"])
                    slipped = plan.kind == "slip"
                    break
                # Nothing judged: a blocked resubmission, or the page threw (spec Q11). Try something else.
                s.think(6.0)
                plan = self._plan(task, answer, test_input, attempt, insight, slipped, submitted,
                                  must_differ=ed.grid_string, retry=retry + 1)
            if not logged:  # pragma: no cover - the last fallback always differs and judges
                raise RuntimeError("no submission could be judged")
            if not solved:
                attempt += 1
        if solved and ed.attempt == 1:
            if rng.random() < 0.005:  # Submit pressed again within the 1-s window (spec Q15)
                s.log(ed.press_submit(answer), 0.3)
            last_description = first_description  # the box was never cleared
            s.log(ed.end_task(final_description=False), 1.0)
        elif solved:
            s.write(rng.uniform(10.0, 50.0))
            if rng.random() < 0.85:
                last_description = fam.describe(task.variables, rng)
            s.log(ed.end_task(final_description=True))
        else:
            s.write(rng.uniform(10.0, 60.0))
            last_description = rng.choice(GIVE_UP) if rng.random() < 0.6 else rng.choice(GENERIC_GUESSES)
            s.log(ed.end_task(final_description=True))
        trace = TaskTrace(task.task_id, number, s.rows, s.seconds, first_description, last_description, solved)
        if truncate:
            cut = max(1, min(len(trace.rows) - 1, round(self.spec.stop_fraction * len(trace.rows))))
            trace.rows, trace.seconds = trace.rows[:cut], trace.seconds[:cut]
            trace.truncated = True
            if not any(r["action"] == "write_first_description" for r in trace.rows):
                trace.first_description = None
            trace.last_description = None
            trace.solved = any(r["solved"] for r in trace.rows)
        return trace

    # ------------------------------------------------------------------ what to build next

    def _plan(self, task: GeneratedTask, answer: np.ndarray, test_input: np.ndarray, attempt: int,
              insight: bool, slipped: bool, submitted: list[str], *, must_differ: str | None = None,
              retry: int = 0) -> _Plan:
        rng = self.rng
        ed = self.session.ed

        def ok(grid: np.ndarray) -> bool:
            text = _text(grid)
            if must_differ is not None and text == must_differ:
                return False
            return judge_submission(grid, answer) != "error" or (retry == 0 and rng.random() < 0.5)

        if retry >= 2:
            return _Plan(self._slip(answer, test_input, must_differ), "slip")
        if insight:
            if slipped and not retry and rng.random() >= SLIP_FIX:
                return _Plan(self._slip(answer, test_input, must_differ), "slip")
            slip_p = min(0.3, 0.03 + 0.0015 * _n_changes(answer, test_input)) * self.spec.style.carefulness
            if not slipped and rng.random() < slip_p:
                return _Plan(self._slip(answer, test_input, must_differ), "slip")
            return _Plan(answer.copy(), "correct")
        if attempt > 1 and submitted and must_differ is None and rng.random() < 0.2:
            return _Plan(ed.grid.copy(), "repeat")
        for _ in range(8):
            grid, kind = self._wrong(task, answer, test_input)
            if not np.array_equal(grid, answer) and _text(grid) not in submitted[-1:] and ok(grid):
                return _Plan(grid, kind)
        return _Plan(self._slip(answer, test_input, must_differ), "slip")

    def _wrong(self, task: GeneratedTask, answer: np.ndarray, test_input: np.ndarray) -> tuple[np.ndarray, str]:
        rng = self.rng
        roll = rng.random()
        if roll < 0.05:
            return test_input.copy(), "copy"
        if roll < 0.065:
            return as_grid(task.train[rng.randrange(len(task.train))][1]), "copy"
        if roll < 0.60:
            options = FAMILIES[task.family].wrong_outputs(task.test_input, task.variables, rng)
            options = [as_grid(o) for o in options if _valid(o)]
            if options:
                return options[rng.randrange(len(options))], "wrong"
        if roll < 0.88:
            return self._partial(answer, test_input), "wrong"
        return self._resized(answer), "wrong"

    def _partial(self, answer: np.ndarray, test_input: np.ndarray) -> np.ndarray:
        """The rule applied to only part of the grid (some changes forgotten or made elsewhere)."""
        rng = self.rng
        grid = answer.copy()
        if test_input.shape == answer.shape:
            changed = np.argwhere(answer != test_input)
            if len(changed) >= 2:
                keep = rng.uniform(0.2, 0.8)
                for r, c in changed:
                    if rng.random() > keep:
                        grid[r, c] = test_input[r, c]
                return grid
        cells = np.argwhere(grid != 0)
        for r, c in cells:
            if rng.random() < 0.3:
                grid[r, c] = 0
        return grid

    def _resized(self, answer: np.ndarray) -> np.ndarray:
        """Right content, wrong size: one row or column too many or too few."""
        rng = self.rng
        h, w = answer.shape
        if rng.random() < 0.5:
            h = h + 1 if h < 30 and (h == 1 or rng.random() < 0.6) else h - 1
        else:
            w = w + 1 if w < 30 and (w == 1 or rng.random() < 0.6) else w - 1
        grid = np.zeros((h, w), dtype=np.uint8)
        kh, kw = min(h, answer.shape[0]), min(w, answer.shape[1])
        grid[:kh, :kw] = answer[:kh, :kw]
        return grid

    def _slip(self, answer: np.ndarray, test_input: np.ndarray, must_differ: str | None = None) -> np.ndarray:
        """The correct output with 1-3 cells wrong (a colour slip or a forgotten cell); never the answer and
        never ``must_differ`` (a grid the page just refused to judge)."""
        rng = self.rng
        h, w = answer.shape
        while True:
            grid = answer.copy()
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                r, c = rng.randrange(h), rng.randrange(w)
                if test_input.shape == answer.shape and test_input[r, c] != answer[r, c] and rng.random() < 0.5:
                    grid[r, c] = test_input[r, c]
                else:
                    grid[r, c] = (int(grid[r, c]) + rng.randint(1, 9)) % 10
            if not np.array_equal(grid, answer) and _text(grid) != must_differ:
                return grid


def _text(grid: np.ndarray) -> str:
    return "|" + "|".join("".join(str(int(v)) for v in row) for row in grid) + "|"


def _valid(grid: Sequence[Sequence[int]]) -> bool:
    return 1 <= len(grid) <= 30 and 1 <= len(grid[0]) <= 30


def _n_changes(answer: np.ndarray, test_input: np.ndarray) -> int:
    if answer.shape == test_input.shape:
        return int((answer != test_input).sum())
    return int((answer != 0).sum())
