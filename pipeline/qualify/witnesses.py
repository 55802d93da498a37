"""ARC-TGI witness checks (`arcstudy check-witnesses`): run each stored witness, in the sandbox, on every input
of its task and compare its outputs exactly with the stored ones; one row per task in
out_arctgi__witness_checks.

An ARC-TGI export stores, per task, the transform that made its outputs (`code`: a `transform_input(self, grid)`
partially evaluated by the generator). Here each witness runs in a confined child process
(pipeline/core/sandbox.py) whose preload imports the user's checkout's `Framework.transformation_library` once
per child, and which serves many tasks (pipeline/qualify/witness_child.py says what is in scope and what comes
back). The tasks fan out on the one executor: one cached sandbox per worker process.

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
interpreter has one seed.

`n_pairs` counts the pairs with a stored output (ARC-TGI stores them all), `n_match` those whose two outputs
both equal it; a test input without a stored output still runs (its output must be a grid, the same twice).
`seconds` is the wall time of the task's check, including a fresh child when the previous task ended its child.
The reason names the first pair that failed (`train[1]`, `test[0]`) and what to look at.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.sandbox import Limits, SandboxFailure, confined, limits_from_env
from pipeline.core.textfiles import storable
from pipeline.qualify.witness_child import FRAMEWORK_ENV, MAX_SIDE, load_framework, run_witness
from pipeline.transforms.arctgi import families

TABLE = "out_arctgi__witness_checks"
PRELOAD = f"{load_framework.__module__}:{load_framework.__name__}"
LIBRARY = Path("Framework") / "transformation_library.py"
DEFAULT_TIMEOUT_S = 10.0

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


def witness_runner(framework: Path, limits: Limits) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """run_witness in a cached sandbox of the calling process, with the checkout's framework preloaded."""
    return confined(run_witness, limits, preload=PRELOAD, env={FRAMEWORK_ENV: str(framework)})


def _noop(_arg: Any) -> None:
    return None


def probe_framework(framework: Path, limits: Limits) -> None:
    """Start one sandbox with the framework preloaded; FrameworkError with the child's reason if it cannot."""
    try:
        confined(_noop, limits, preload=PRELOAD, env={FRAMEWORK_ENV: str(framework)})(None)
    except SandboxFailure as failure:
        raise FrameworkError(f"cannot import {framework / LIBRARY} in the sandbox ({failure.kind}): {failure.detail}; "
                             f"install the checkout's requirements (pip install -r {framework / 'requirements.txt'}) "
                             "into arcstudy's Python") from None


# --- the tasks ----------------------------------------------------------------------------------------------

def _rows(grid: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(row) for row in grid)


def witness_tasks(tgi_tasks: pl.DataFrame) -> list[WitnessTask]:
    """One WitnessTask per distinct task of core_arctgi__tasks (columns file_id, task_id, row_number,
    family_prefix and harc_arc.TGI_INSTANCE), with its family_id (pipeline.transforms.arctgi): the copies of
    one task instance (all.csv beside the per-folder CSVs) run once."""
    if tgi_tasks.height == 0:
        return []
    fam = families(tgi_tasks).select("file_id", "task_id", "family_id")
    rows = fam.join(tgi_tasks.select("file_id", "task_id", "code_text", "task_json"), on=["file_id", "task_id"],
                    how="left").sort("file_id", "task_id")
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


# --- one task -----------------------------------------------------------------------------------------------

def _grid_problem(value: Any) -> str | None:
    """Why a returned grid (rows of ints, as the child sends them) is not an ARC grid; None if it is one."""
    if not isinstance(value, tuple) or not value or not all(isinstance(r, tuple) for r in value):
        return "returned something that is not a grid of rows"
    height, width = len(value), len(value[0])
    if not (1 <= height <= MAX_SIDE and 1 <= width <= MAX_SIDE) or any(len(r) != width for r in value):
        return f"returned a {height} x {width} grid that is not rectangular or not within 1 x 1 to 30 x 30"
    for i, row in enumerate(value):
        for j, cell in enumerate(row):
            if type(cell) is not int or not 0 <= cell <= 9:
                return f"returned a grid with {cell!r} at ({i}, {j}); ARC colours are integers 0-9"
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


def judge(task: WitnessTask, reply: dict[str, Any]) -> tuple[str, str | None, int]:
    """(status, reason, n_match) of a task from the child's reply (run_witness) and the stored outputs."""
    if reply.get("compile"):
        return "error", reply["compile"], 0
    if reply.get("too_large"):  # stopped in the child: not a difference between the two runs
        return "refused", f"output too large: {reply['too_large']}", 0
    runs = reply.get("runs") or []
    n = len(task.inputs)
    if len(runs) != 2 or any(len(r) != n for r in runs):
        return "error", "the sandbox sent back a reply of the wrong shape (not two runs of every input)", 0
    first, second = runs
    checked = []  # per input: (kind, value, why-not-a-grid)
    nondet, raised, invalid, differ = [], [], [], []
    n_match = 0
    for i, label in enumerate(task.labels):
        a, b = tuple(first[i]), tuple(second[i])
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
            invalid.append(f"{label}: the witness {a[1]}")
        elif task.outputs[i] is not None:
            if a[1] == task.outputs[i]:
                n_match += 1
            else:
                differ.append(f"{label}: {_differs(a[1], task.outputs[i])}")
    for status, found in (("nondeterministic", nondet), ("error", raised), ("mismatch", invalid + differ)):
        if found:
            return status, found[0] + _more(len(found) - 1), n_match
    return "pass", None, n_match


def check_task(task: WitnessTask, runner: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """The out_arctgi__witness_checks row of one task. Never raises for anything the witness does: the sandbox's
    failures become the row's status (so the executor never retries a hostile witness)."""
    started = time.monotonic()
    n_pairs = sum(o is not None for o in task.outputs)
    try:
        reply = runner({"code": task.code, "inputs": list(task.inputs)})
        status, reason, n_match = judge(task, reply)
    except SandboxFailure as failure:
        status, n_match = _KIND_STATUS.get(failure.kind, "error"), 0
        reason = f"the sandbox stopped the witness ({failure.kind}): {failure.detail}{_HINT.get(failure.kind, '')}"
    return {"file_id": task.file_id, "task_id": task.task_id, "family_id": task.family_id, "status": status,
            "reason": None if reason is None else storable(reason),  # the witness's messages: a lone surrogate, escaped
            "n_pairs": n_pairs, "n_match": n_match, "seconds": time.monotonic() - started}


def failed_row(task: WitnessTask, error: BaseException) -> dict[str, Any]:
    """The row of a task whose check itself failed (a worker died, the cluster lost it): an error, said."""
    detail = " ".join(str(error).split())[:300] or type(error).__name__
    return {"file_id": task.file_id, "task_id": task.task_id, "family_id": task.family_id, "status": "error",
            "reason": f"the check did not complete ({type(error).__name__}: {detail}); run check-witnesses again",
            "n_pairs": sum(o is not None for o in task.outputs), "n_match": 0, "seconds": 0.0}


def check_witnesses(tasks: list[WitnessTask], framework: Path, limits: Limits, executor: Any, *,
                    progress: Any = None) -> Iterator[dict[str, Any]]:
    """One row per task, as the tasks complete on `executor` (pipeline.core.executor)."""
    piece = functools.partial(check_task, runner=witness_runner(framework, limits))
    by_key = dict(enumerate(tasks))
    for outcome in executor.map_unordered(piece, by_key.items(), progress=progress, description="checking witnesses"):
        yield failed_row(by_key[outcome.key], outcome.error) if outcome.error is not None else outcome.value


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
