"""ARC-TGI witness checks (`arcstudy check-witnesses`): run each stored witness, in the sandbox, on every input
of its task and compare its outputs exactly with the stored ones; one row per task in
out_arctgi__witness_checks.

An ARC-TGI export stores, per task, the transform that made its outputs (`code`: a `transform_input(self, grid)`
partially evaluated by the generator). Here each witness runs in a confined child process
(pipeline/core/sandbox.py) whose preload imports the user's checkout's `Framework.transformation_library` once
per child, and which serves many tasks (pipeline/qualify/witness_child.py says what is in scope and what comes
back). The tasks are cut into batches (witness_batches): at most BATCH_TASKS tasks of one export (file_id), in
task_id order, a cut that depends on the tasks alone. A batch is one piece of work on the one executor: its tasks
run one after the other in a fresh child (the framework's import is paid once a batch), closed at the batch's end
(WitnessChildren, check_batch). So what ran before a task in its child is the same whatever --workers or the
cluster, and tasks of different exports never share a child. Within a batch, a child is also closed (the next task
gets a fresh one) after a witness that changed a module (witness_child.changed_modules: a name of numpy, of the
framework, of arcstudy's code in the child now stands for another object, or a module was imported), after a
forged reply, and after any failure of the sandbox. A change the check does not see (an object changed in place:
os.environ, a list, a class attribute, numpy's error settings; or code that disables the check, which runs beside
it) reaches the later tasks of its batch: the same in every run, but a hostile witness can still change what later
witnesses of its own batch see, never another export's verdicts.

Each input (train and test) is run twice; a task's status, the first rule that holds:

1. the sandbox stopped the call: `timeout` (wall clock or CPU limit), `refused` (a forbidden operation, the memory
   limit, an oversized result; or the witness printed more than witness_child.MAX_PRINTED_BYTES or wrote past the
   sandbox's file limit: the reason says the output was too large, and the limit), `error` (the child crashed or
   was ended by the code);
2. `error`: the code does not compile, raised while defining its names, or defines no `transform_input`;
3. `nondeterministic`: an input's two runs gave different results (grids, or a grid and an exception);
4. `error`: the witness raised on an input, or returned None (no grid at all);
5. `mismatch`: an output is not an ARC grid (2-D, integers 0-9, 1x1 to 30x30: a float grid is one) or differs
   from the stored output;
6. `pass`: every stored output reproduced, both times.

Both runs happen in the same child, one after the other: randomness (`random`, `np.random`, the clock) and state
kept between calls show; a dependence on the hash seed (iterating a set of strings) does not, since one
interpreter has one seed: every witness child runs with PYTHONHASHSEED=0, so it is the same in every run too.

`n_pairs` counts the pairs with a stored output (ARC-TGI stores them all), `n_match` those whose two outputs
both equal it; a test input without a stored output still runs (its output must be a grid, the same twice).
`seconds` is the wall time of the task's check, including a fresh child when the task is its batch's first or the
previous task ended its child.
The reason names the first pair that failed (`train[1]`, `test[0]`) and what to look at. Every reason is one line
of at most MAX_REASON_CHARS characters, control characters shown as escapes (`\\x1b`), whatever the child sent.
A reply the child's run_witness does not make (another shape, a text longer than witness_child.MAX_TEXT: code in the
child replaced arcstudy's) is that task's `error`, and the child is closed, so that the export's next task gets a
fresh one.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core import sandbox
from pipeline.core.sandbox import Limits, Sandbox, SandboxFailure, limits_from_env
from pipeline.core.textfiles import storable, visible
from pipeline.ingest.harc_arc import tgi_task_copies
from pipeline.qualify.witness_child import (
    FRAMEWORK_ENV,
    MAX_SIDE,
    MAX_TEXT,
    RUNS,
    load_framework,
    run_witness,
)
from pipeline.transforms.arctgi import families

TABLE = "out_arctgi__witness_checks"
PRELOAD = f"{load_framework.__module__}:{load_framework.__name__}"
LIBRARY = Path("Framework") / "transformation_library.py"
DEFAULT_TIMEOUT_S = 10.0
MAX_REASON_CHARS = 500  # a stored and printed reason, at most (one line)
KINDS = ("grid", "invalid", "none", "raised")  # what run_witness says of one input's run
# The floor of the sandbox's start-up limits (wall clock and CPU: a fresh Python, its confinement and the preload
# get the larger of it and the call's limit), said when the framework's import is stopped at it.
START_LIMIT_S = sandbox.START_WALL_S

_HINT = {"timeout": "; if the witness is only slow, raise --timeout",
         "cpu": "; if the witness is only slow, raise --timeout",
         "memory": "; the memory limit is ARCSTUDY_SANDBOX_MEMORY_MB",
         "output_too_large": "; the output limit is ARCSTUDY_SANDBOX_OUTPUT_MB"}
_KIND_STATUS = {"timeout": "timeout", "cpu": "timeout", "memory": "refused", "output_too_large": "refused",
                "refused": "refused", "crashed": "error", "exited": "error", "error": "error"}


class FrameworkError(ValueError):
    """The checkout cannot serve witnesses (no Framework/transformation_library.py, or it does not import)."""


@dataclass(frozen=True)
class WitnessTask:
    """One task to check: what the sandbox gets (code, inputs) and what stays here (the stored outputs)."""

    file_id: str
    task_id: str
    family_id: str
    code: str
    labels: tuple[str, ...]            # "train[0]", ..., "test[0]", ...
    inputs: tuple[Any, ...]            # lists of rows
    outputs: tuple[Any, ...]           # tuples of rows, or None where the task stores no output


def check_framework_dir(framework: Path) -> Path:
    """The checkout's absolute path; FrameworkError unless it holds Framework/transformation_library.py."""
    if not (framework / LIBRARY).is_file():
        raise FrameworkError(f"--framework {framework} holds no {LIBRARY}: give the ARC-TGI checkout (the folder that "
                             "holds Framework/)")
    return framework.resolve()


def witness_limits(timeout_s: float = DEFAULT_TIMEOUT_S) -> Limits:
    """The sandbox's limits per task: wall clock and CPU `timeout_s`; memory and output size the sandbox's defaults
    or ARCSTUDY_SANDBOX_MEMORY_MB / _OUTPUT_MB (pipeline/core/sandbox.py)."""
    return limits_from_env(wall_s=timeout_s, cpu_s=timeout_s)


# --- the children: one export at a time per worker thread -----------------------------------------------------

_held = threading.local()  # this thread's child: .ident (pid, export, framework, limits) and .box
_boxes: set[Sandbox] = set()  # every child held by a thread of this process, for close_children
_boxes_lock = threading.Lock()


@dataclass(frozen=True)
class WitnessChildren:
    """run_witness in a sandbox child with the checkout's framework preloaded, one child per export (file_id) at a
    time in each thread of each process: a task of another export than the thread's child served last closes
    that child and starts a fresh one. Picklable (two plain fields): the executor sends it to its workers."""

    framework: str
    limits: Limits

    def _box(self, key: str) -> Sandbox:
        ident = (os.getpid(), key, self.framework, self.limits)
        if getattr(_held, "ident", None) != ident or _held.box not in _boxes:  # another batch, or closed
            self.discard()
            # PYTHONHASHSEED: the same seed in every child, serial or on Dask workers (whose nanny sets one)
            box = Sandbox(self.limits, preload=PRELOAD, env={FRAMEWORK_ENV: self.framework, "PYTHONHASHSEED": "0"})
            with _boxes_lock:
                _boxes.add(box)
            _held.ident, _held.box = ident, box
        return _held.box

    def start(self, key: str) -> None:
        """Start the child for batch `key`'s tasks now; SandboxFailure if it cannot start."""
        self._box(key).start()

    def run(self, key: str, job: dict[str, Any]) -> Any:
        """run_witness(job) in this thread's child for batch `key`; SandboxFailure as the sandbox raises it."""
        return self._box(key).call(run_witness, job)

    @staticmethod
    def discard() -> None:
        """Close this thread's child (the next task starts a fresh one)."""
        box = getattr(_held, "box", None)
        _held.ident = _held.box = None
        if box is not None:
            with _boxes_lock:
                _boxes.discard(box)
            box.close()


def close_children() -> None:
    """Close every witness child of this process (registered at exit)."""
    with _boxes_lock:
        boxes = list(_boxes)
        _boxes.clear()
    for box in boxes:
        box.close()
    _held.ident = _held.box = None


atexit.register(close_children)


def witness_children(framework: Path, limits: Limits) -> WitnessChildren:
    return WitnessChildren(str(framework), limits)


def _import_failure(framework: Path, failure: SandboxFailure, limits: Limits, elapsed_s: float) -> str:
    """What went wrong when the sandbox's start, which imports the checkout's library, failed: which limit stopped
    it, or that the import itself ended the process, or what it raised."""
    lib = framework / LIBRARY
    detail = failure.detail.removeprefix("the sandbox did not start: ").removeprefix(f"preload {PRELOAD}: ")
    detail = reason_text(detail, MAX_TEXT)
    what = f"the import of {lib} in the sandbox did not finish"
    if failure.kind == "timeout":
        limit = max(limits.wall_s, START_LIMIT_S)
        return (f"{what}: it was stopped after {elapsed_s:.0f} s at the sandbox's start-up limit of {limit:g} s "
                f"(the larger of --timeout and {START_LIMIT_S:g} s; --timeout limits each witness, the start-up "
                "limit the start of a child: a fresh Python, its confinement and the import); the Framework's code, "
                "or something it imports, waits or loops at import time")
    if failure.kind == "cpu":
        limit = max(limits.cpu_s, START_LIMIT_S)
        return (f"{what}: it used more than the sandbox's start-up CPU limit of {limit:g} s (the larger of --timeout "
                f"and {START_LIMIT_S:g} s); the Framework's code, or something it imports, computes at import time")
    if failure.kind in ("exited", "crashed"):
        return (f"{what}: the sandbox process ended during it ({detail}); the Framework's code, or something it "
                "imports, ends the process at import time")
    if failure.kind == "memory":
        return (f"{what}: it ran out of the sandbox's memory limit ({detail}); the limit is "
                "ARCSTUDY_SANDBOX_MEMORY_MB")
    if failure.kind == "error" and failure.exc_type in ("ImportError", "ModuleNotFoundError"):
        return (f"cannot import {lib} in the sandbox: {detail}; install the checkout's requirements "
                f"(pip install -r {framework / 'requirements.txt'}) into arcstudy's Python")
    return f"{what} ({failure.kind}): {detail}"


def probe_framework(framework: Path, limits: Limits, children: WitnessChildren | None = None,
                    key: str = "") -> None:
    """Start the child that will serve batch `key`'s tasks in this thread (a serial run reuses it), with the
    framework preloaded; FrameworkError saying what happened if it cannot start."""
    children = children or witness_children(framework, limits)
    started = time.monotonic()
    try:
        children.start(key)
    except SandboxFailure as failure:
        children.discard()
        raise FrameworkError(_import_failure(framework, failure, limits, time.monotonic() - started)) from None


# --- the tasks ----------------------------------------------------------------------------------------------

def _rows(grid: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(row) for row in grid)


def witness_tasks(tgi_tasks: pl.DataFrame) -> list[WitnessTask]:
    """One WitnessTask per row of core_arctgi__tasks (columns file_id, task_id, row_number, family_prefix and
    harc_arc.TGI_INSTANCE), with the family_id of the task it is (pipeline.transforms.arctgi). Every file's copy
    of a task is checked, in its own export's child: were identical copies checked once, the copy kept could be
    another export's, and a hostile export holding a copy of a trusted task would give it its verdict."""
    if tgi_tasks.height == 0:
        return []
    fam = families(tgi_tasks).select(pl.col("file_id").alias("kept_file_id"), pl.col("task_id").alias("kept_task_id"),
                                     "family_id")
    rows = (tgi_task_copies(tgi_tasks).select("file_id", "task_id", "kept_file_id", "kept_task_id")
            .join(fam, on=["kept_file_id", "kept_task_id"], how="left")
            .join(tgi_tasks.select("file_id", "task_id", "code_text", "task_json"), on=["file_id", "task_id"],
                  how="left").sort("file_id", "task_id"))
    tasks = []
    for rec in rows.iter_rows(named=True):
        data = json.loads(rec["task_json"])
        labels, inputs, outputs = [], [], []
        for split in ("train", "test"):
            for i, pair in enumerate(data.get(split) or []):
                labels.append(f"{split}[{i}]")
                inputs.append(pair["input"])
                outputs.append(_rows(pair["output"]) if pair.get("output") is not None else None)
        tasks.append(WitnessTask(rec["file_id"], rec["task_id"], rec["family_id"], rec["code_text"] or "",
                                 tuple(labels), tuple(inputs), tuple(outputs)))
    return tasks


BATCH_TASKS = 128  # tasks of one export that share a child, one after the other (a child start, ~0.5 s, a batch)


@dataclass(frozen=True)
class WitnessBatch:
    """Tasks of one export checked one after the other in one fresh child (`check_batch`): one piece of work."""

    key: str                           # file_id#n: the n-th batch of that export
    tasks: tuple[WitnessTask, ...]


def witness_batches(tasks: list[WitnessTask], size: int = BATCH_TASKS) -> list[WitnessBatch]:
    """The tasks (in witness_tasks' order: by export, then task_id) cut into batches of at most `size` tasks of one
    export. The cut depends on the tasks only, never on --workers: so does what each task's child has run before."""
    by_export: dict[str, list[WitnessTask]] = {}
    for task in tasks:
        by_export.setdefault(task.file_id, []).append(task)
    return [WitnessBatch(f"{file_id}#{n}", tuple(mine[at:at + size]))
            for file_id, mine in by_export.items() for n, at in enumerate(range(0, len(mine), size))]


# --- one task -----------------------------------------------------------------------------------------------

def reason_text(text: Any, limit: int = MAX_REASON_CHARS) -> str:
    """`text` as a reason a table holds and a terminal shows: one line (runs of white space made one space),
    control characters as escapes (`\\x1b`), lone surrogates escaped, at most `limit` characters (cut with "…").
    Cheap on a text of any length: only its first characters are looked at."""
    text = str(text)
    cut = len(text) > 2 * limit
    text = storable(visible(" ".join(text[: 2 * limit].split())))
    if cut or len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def _text_problem(name: str, value: Any) -> str | None:
    if type(value) is not str or not value:
        return f"its {name} is a {type(value).__name__}, not text" if type(value) is not str else f"an empty {name}"
    if len(value) > MAX_TEXT:
        return f"its {name} is {len(value)} characters long; the child never sends more than {MAX_TEXT}"
    return None


def reply_problem(reply: Any, n_inputs: int) -> str | None:
    """Why `reply` is not one that witness_child.run_witness makes for a task of `n_inputs` inputs (code in the
    child replaced arcstudy's there); None if it is one. Grids are checked later (_grid_problem)."""
    if type(reply) is not dict:
        return f"a {type(reply).__name__} instead of a dict"
    if unknown := set(reply) - {"compile", "runs", "too_large", "changed"}:
        return f"{len(unknown)} key(s) it never sends"
    for name in ("compile", "too_large", "changed"):
        if reply.get(name) is not None and (problem := _text_problem(name, reply[name])):
            return problem
    runs = reply.get("runs")
    if type(runs) is not list or any(type(run) is not list for run in runs):
        return "its runs are not a list of lists"
    if reply.get("compile"):
        return "runs beside a compile failure" if runs else None
    partial = reply.get("too_large") is not None  # stopped part way: fewer runs and inputs
    if (len(runs) > RUNS or any(len(run) > n_inputs for run in runs)) if partial else \
            (len(runs) != RUNS or any(len(run) != n_inputs for run in runs)):
        return f"not {RUNS} runs of every one of the task's {n_inputs} inputs"
    for run in runs:
        for entry in run:
            if type(entry) is not tuple or len(entry) != 2 or entry[0] not in KINDS:
                return "an input's result that is not (kind, value) with a kind run_witness uses"
            if entry[0] != "grid" and (problem := _text_problem(f"{entry[0]} text", entry[1])):
                return problem
    return None


def _cell_text(cell: Any) -> str:
    if type(cell) is int:
        return repr(cell) if abs(cell) < 10**12 else f"an integer of {cell.bit_length()} bits"
    if type(cell) in (bool, float):
        return repr(cell)
    return f"a {type(cell).__name__}"


def _grid_problem(value: Any) -> str | None:
    """Why a returned grid (rows of ints, as the child sends them) is not an ARC grid; None if it is one."""
    if type(value) is not tuple or not value or len(value) > MAX_SIDE or not all(type(r) is tuple for r in value):
        if type(value) is tuple and value and all(type(r) is tuple for r in value):
            return f"returned a grid of {len(value)} rows; ARC grids are 1 x 1 to 30 x 30"
        return "returned something that is not a grid of rows"
    height, width = len(value), len(value[0])
    if not (1 <= height <= MAX_SIDE and 1 <= width <= MAX_SIDE) or any(len(r) != width for r in value):
        return f"returned a {height} x {width} grid that is not rectangular or not within 1 x 1 to 30 x 30"
    for i, row in enumerate(value):
        for j, cell in enumerate(row):
            if type(cell) is not int or not 0 <= cell <= 9:
                return f"returned a grid with {_cell_text(cell)} at ({i}, {j}); ARC colours are integers 0-9"
    return None


def _differs(got: tuple, want: tuple) -> str:
    if len(got) != len(want) or len(got[0]) != len(want[0]):
        return f"output is {len(got)} x {len(got[0])}, the stored one {len(want)} x {len(want[0])}"
    cells = sum(a != b for rg, rw in zip(got, want, strict=True) for a, b in zip(rg, rw, strict=True))
    return f"output differs from the stored one in {cells} of {len(want) * len(want[0])} cells"


def _show(result: tuple[str, Any]) -> str:
    kind, value = result
    return "a grid" if kind == "grid" else ("raised " + value if kind == "raised" else str(value))


def _more(n: int) -> str:
    return f" (and {n} more input(s))" if n else ""


FORGED = ("the sandbox child sent back a reply that arcstudy's code in it does not make ({}): code in the child "
          "replaced arcstudy's; the child was closed, the export's next task gets a fresh one")


def judge(task: WitnessTask, reply: Any) -> tuple[str, str | None, int]:
    """(status, reason, n_match) of a task from the child's reply (run_witness) and the stored outputs. A reply
    run_witness does not make (reply_problem) is an `error` saying so."""
    if (problem := reply_problem(reply, len(task.inputs))) is not None:
        return "error", FORGED.format(problem), 0
    if reply.get("compile"):
        return "error", reply["compile"], 0
    if reply.get("too_large"):  # stopped in the child: not a difference between the two runs
        return "refused", f"output too large: {reply['too_large']}", 0
    first, second = reply["runs"]
    checked = []  # per input: (kind, value, why-not-a-grid)
    nondet, raised, mismatched = [], [], []  # each in input order: a reason names the first pair that failed
    n_match = 0
    for i, label in enumerate(task.labels):
        a, b = first[i], second[i]
        if a[0] == "grid" and (problem := _grid_problem(a[1])) is not None:
            a = ("invalid", problem)
        if b[0] == "grid" and (problem := _grid_problem(b[1])) is not None:
            b = ("invalid", problem)
        checked.append(a)
        if a != b:
            nondet.append(f"{label}: the two runs gave different results ({_show(a)}, then {_show(b)})"
                          if a[0] != "grid" or b[0] != "grid" else
                          f"{label}: the two runs returned different grids ({_differs(b[1], a[1])})")
        elif a[0] == "raised":
            raised.append(f"{label}: the witness raised {a[1]}")
        elif a[0] == "none":
            raised.append(f"{label}: the witness {a[1]}")
        elif a[0] == "invalid":
            mismatched.append(f"{label}: the witness {a[1]}")
        elif task.outputs[i] is not None:
            if a[1] == task.outputs[i]:
                n_match += 1
            else:
                mismatched.append(f"{label}: {_differs(a[1], task.outputs[i])}")
    for status, found in (("nondeterministic", nondet), ("error", raised), ("mismatch", mismatched)):
        if found:
            return status, found[0] + _more(len(found) - 1), n_match
    return "pass", None, n_match


def check_task(task: WitnessTask, children: Any, key: str | None = None) -> dict[str, Any]:
    """The out_arctgi__witness_checks row of one task, its witness run by `children` (a WitnessChildren: `run`,
    `discard`) in the child of batch `key` (default: the task's export). Never raises for anything the witness
    does: the sandbox's failures and forged replies become the row's status (so the executor never retries a
    hostile witness). The child is closed after a forged reply, after an exception that got past run_witness,
    and after a witness that changed modules (run_witness's "changed"), so that the next task gets a fresh one."""
    started = time.monotonic()
    n_pairs = sum(o is not None for o in task.outputs)
    try:
        reply = children.run(task.file_id if key is None else key, {"code": task.code, "inputs": list(task.inputs)})
    except SandboxFailure as failure:
        status, n_match = _KIND_STATUS.get(failure.kind, "error"), 0
        reason = (f"the sandbox stopped the witness ({failure.kind}): {reason_text(failure.detail, MAX_TEXT)}"
                  f"{_HINT.get(failure.kind, '')}")
        if failure.kind == "error":  # past run_witness (a KeyboardInterrupt, say): the sandbox keeps such a child
            children.discard()
    else:
        try:
            forged = reply_problem(reply, len(task.inputs))
            status, reason, n_match = judge(task, reply)
        except Exception as err:  # noqa: BLE001 - a reply that passed reply_problem and still broke judge
            forged = f"judging it raised {type(err).__name__}"
            status, reason, n_match = "error", FORGED.format(forged), 0
        if forged is not None or reply.get("changed"):
            children.discard()  # what the child runs is no longer what it was: the next task gets a fresh one
    return {"file_id": task.file_id, "task_id": task.task_id, "family_id": task.family_id, "status": status,
            "reason": None if reason is None else reason_text(reason),
            "n_pairs": n_pairs, "n_match": n_match, "seconds": time.monotonic() - started}


def failed_row(task: WitnessTask, error: BaseException) -> dict[str, Any]:
    """The row of a task whose check itself failed (a worker died, the cluster lost it): an error, said."""
    detail = " ".join(str(error).split())[:300] or type(error).__name__
    return {"file_id": task.file_id, "task_id": task.task_id, "family_id": task.family_id, "status": "error",
            "reason": f"the check did not complete ({type(error).__name__}: {detail}); run check-witnesses again",
            "n_pairs": sum(o is not None for o in task.outputs), "n_match": 0, "seconds": 0.0}


def check_batch(batch: WitnessBatch, children: Any) -> list[dict[str, Any]]:
    """The rows of a batch's tasks, checked one after the other in a fresh child, which is closed at the end (a
    worker's next batch, of any export, starts its own)."""
    try:
        return [check_task(task, children, batch.key) for task in batch.tasks]
    finally:
        children.discard()


def check_witnesses(tasks: list[WitnessTask], framework: Path, limits: Limits, executor: Any, *,
                    progress: Any = None) -> Iterator[dict[str, Any]]:
    """One row per task, a batch at a time (witness_batches) as the batches complete on `executor`
    (pipeline.core.executor)."""
    piece = functools.partial(check_batch, children=witness_children(framework, limits))
    by_key = dict(enumerate(witness_batches(tasks)))
    for outcome in executor.map_unordered(piece, by_key.items(), progress=progress,
                                          description=f"checking witnesses (batches of up to {BATCH_TASKS})"):
        if outcome.error is not None:
            yield from (failed_row(task, outcome.error) for task in by_key[outcome.key].tasks)
        else:
            yield from outcome.value


def tasks_digest(tasks: list[WitnessTask]) -> str:
    """sha256 of what was checked (task ids, code, inputs and stored outputs), for the run manifest."""
    digest = hashlib.sha256()
    for task in tasks:
        digest.update(json.dumps([task.file_id, task.task_id, task.code, task.inputs, task.outputs]).encode())
    return digest.hexdigest()


def rows_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    schema = {"file_id": pl.String, "task_id": pl.String, "family_id": pl.String, "status": pl.String,
              "reason": pl.String, "n_pairs": pl.Int64, "n_match": pl.Int64, "seconds": pl.Float64}
    return pl.DataFrame(rows, schema=schema).sort("file_id", "task_id")
