"""The part of `arcstudy check-witnesses` that runs inside the sandbox child (pipeline/core/sandbox.py).

`load_framework` is the sandbox's preload: once per child, after the child has confined itself, it imports
`Framework.transformation_library` from the ARC-TGI checkout named by the environment variable FRAMEWORK_ENV
and builds the names a witness finds in scope, the same as ARC-TGI's own executor gives it: `np`,
`defaultdict`, the typing names `Dict`, `List`, `Any`, `Tuple`, and every public name of that library.

`run_witness` runs one task's witness: the `code` text is compiled and executed in a fresh copy of that
namespace, and its `transform_input(self, grid)` is called on every input, twice over (two passes, each input a
fresh integer array). It sends back plain data only, never an object of the witness: per pass and input, either
the output grid as a tuple of rows of ints (when it is a 2-D integer array-like within ARC's bounds), or why it
is not a grid, or the exception the witness raised. The parent (pipeline/qualify/witnesses.py) checks the grids
again and compares them with the stored outputs, which are never sent here.

What a witness prints (sys.stdout, sys.stderr) is counted and dropped: it once went to the sandbox's log file,
whose size limit then made a later `print` raise `OSError: File too large` (a loud witness was called
nondeterministic, its first inputs passing and the later ones raising). A task that prints more than
MAX_PRINTED_BYTES, or writes past the sandbox's file limit some other way, is stopped and sent back as
`too_large` with that limit.

Every text sent back (a reason, an exception's message) is one line of at most MAX_TEXT characters: the parent
reads a longer one, or a reply of any other shape, as forged by code in this child (witnesses.reply_problem).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from typing import Any

from pipeline.core.sandbox_child import memory_limit_reached

FRAMEWORK_ENV = "ARCSTUDY_WITNESS_FRAMEWORK"
MAX_SIDE = 30
RUNS = 2
TYPING_NAMES = ("Dict", "List", "Any", "Tuple")
MAX_PRINTED_BYTES = 16 << 20  # what one task's witness may print over its two passes (read by nobody: dropped)
MAX_TEXT = 300  # the longest text the child sends back (one line); the parent treats a longer one as forged

_namespace: dict[str, Any] | None = None


class _NoGenerator:
    """What `self` is in a witness: the export does not carry the generator instance."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"the witness reads self.{name} (the generator instance), which an export does not "
                             "carry; a witness must use its grid argument only")


def load_framework() -> None:
    """Import the checkout's Framework.transformation_library and build the witness namespace (once)."""
    global _namespace
    import typing
    from collections import defaultdict

    import numpy as np

    root = os.environ.get(FRAMEWORK_ENV)
    if not root:
        raise RuntimeError(f"{FRAMEWORK_ENV} is not set: the checkout holding Framework/ is unknown")
    sys.path.insert(0, root)
    import importlib

    tlib = importlib.import_module("Framework.transformation_library")
    namespace: dict[str, Any] = {"np": np, "defaultdict": defaultdict}
    namespace.update({name: getattr(typing, name) for name in TYPING_NAMES})
    namespace.update({name: getattr(tlib, name) for name in dir(tlib) if not name.startswith("_")})
    _namespace = namespace


class _TooLoud(BaseException):
    """Raised into a witness that printed past MAX_PRINTED_BYTES (a BaseException: `except Exception` in the
    witness does not hide it; one that catches everything is stopped after its call)."""


class _Printed(io.TextIOBase):
    """sys.stdout and sys.stderr of a witness: counts the UTF-8 bytes written (also through ``.buffer``), keeps
    nothing."""

    def __init__(self) -> None:
        self.n_bytes = 0
        self.buffer = _PrintedBytes(self)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.count(len(str(text).encode("utf-8", "surrogatepass")))
        return len(text)

    def count(self, n: int) -> None:
        self.n_bytes += n
        if self.n_bytes > MAX_PRINTED_BYTES:
            raise _TooLoud


class _PrintedBytes(io.RawIOBase):
    def __init__(self, text: _Printed) -> None:
        self._text = text

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        n = memoryview(data).nbytes
        self._text.count(n)
        return n


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def _too_large(printed: _Printed, err: BaseException | None) -> str | None:
    """Why the task's output is too large, or None: printed past MAX_PRINTED_BYTES, or a write past the
    sandbox's file size limit (RLIMIT_FSIZE; the child's log counts)."""
    if printed.n_bytes > MAX_PRINTED_BYTES:
        return (f"the witness printed more than {_mib(MAX_PRINTED_BYTES)} to stdout/stderr (the limit per task); "
                "remove its prints or debug output")
    if isinstance(err, OSError) and err.errno == errno.EFBIG:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        shown = "" if limit == resource.RLIM_INFINITY else f" of {_mib(limit)}"
        return (f"the witness wrote past the sandbox's file size limit{shown} (its output, the child's log "
                "included): remove its prints or writes")
    return None


def _one_line(text: str, limit: int = MAX_TEXT) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _raised(err: BaseException) -> str:
    return _one_line(f"{type(err).__name__}: {err}")


def as_grid(value: Any) -> tuple[str, Any]:
    """("grid", rows) for a 2-D integer array-like within ARC's bounds, ("none", why) for no value at all, else
    ("invalid", why)."""
    kind, what = _as_grid(value)
    return (kind, what) if kind == "grid" else (kind, _one_line(what))


def _as_grid(value: Any) -> tuple[str, Any]:
    import numpy as np

    if value is None:
        return "none", "returned None instead of a grid"
    try:
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    except Exception as err:  # noqa: BLE001 - whatever the witness returned
        return "invalid", f"returned {type(value).__name__}, which is not a grid ({_raised(err)})"
    if arr.ndim != 2:
        return "invalid", f"returned a {arr.ndim}-D {type(value).__name__} of shape {tuple(arr.shape)}, not a 2-D grid"
    height, width = (int(n) for n in arr.shape)
    if not (1 <= height <= MAX_SIDE and 1 <= width <= MAX_SIDE):
        return "invalid", f"returned a {height} x {width} grid; ARC grids are 1 x 1 to 30 x 30"
    if arr.dtype.kind not in "iu":
        return "invalid", f"returned a grid of {arr.dtype} values; ARC grids hold integers 0-9"
    return "grid", tuple(tuple(int(v) for v in row) for row in arr.tolist())


# (name, module dict, its keys, its values) of every module, and of sys.modules itself, as this child's first task
# began (a list changed in place: assigning it would change this module's own dict)
_baseline: list[tuple[str, dict, tuple, tuple]] = []


def _modules_now() -> list[tuple[str, dict, tuple, tuple]]:
    import types

    found = [("sys.modules", sys.modules, tuple(sys.modules), tuple(sys.modules.values()))]
    for name, module in list(sys.modules.items()):
        if isinstance(module, types.ModuleType):
            namespace = module.__dict__
            found.append((name, namespace, tuple(namespace), tuple(namespace.values())))
    return found


def changed_modules() -> list[str]:
    """The modules whose names now stand for other objects than as this child's first task began (a function
    replaced, a name added or removed; sys.modules itself: a module imported), by identity: a monkeypatch of
    numpy, of arcstudy's code in this child, of anything a later witness can reach by name. Objects changed in
    place (a list, a class attribute, numpy's error settings) are not seen."""
    import operator

    same = operator.is_
    return [name for name, namespace, keys, values in _baseline
            if len(namespace) != len(keys) or not all(map(same, namespace, keys))
            or not all(map(same, namespace.values(), values))]


def run_witness(job: dict[str, Any]) -> dict[str, Any]:
    """job: {"code": str, "inputs": [grid, ...]}. Returns {"compile": None | why, "runs": [[(kind, value), ...]
    per input] per pass}; kind is "grid", "invalid", "none" or "raised"; with "too_large": why, the task was
    stopped because its output was too large (module docstring) and "runs" holds what ran before; with
    "changed": which modules the code changed (`changed_modules`), after which the parent ends this child, so that
    the next task does not see them."""
    if not _baseline:
        _baseline[:] = _modules_now()
    reply = _run_witness(job)
    if changed := changed_modules():
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        reply["changed"] = _one_line(", ".join(changed[:3]) + more)
    return reply


def _run_witness(job: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    if _namespace is None:
        raise RuntimeError("the ARC-TGI framework was not loaded in this sandbox (preload missing)")
    try:
        code = compile(job["code"], "<witness>", "exec")
    except (SyntaxError, ValueError) as err:
        where = f" (line {err.lineno})" if isinstance(err, SyntaxError) and err.lineno else ""
        return {"compile": _one_line(f"the code does not compile{where}: {_raised(err)}"), "runs": []}
    namespace = dict(_namespace)
    try:
        exec(code, namespace)  # noqa: S102 - inside the sandbox child, the reason it exists
    except Exception as err:  # noqa: BLE001 - the witness's own failure, reported
        if isinstance(err, MemoryError) and memory_limit_reached(err):
            raise  # the memory limit, as for the calls below: the sandbox reports it and replaces this child
        return {"compile": _one_line(f"running the code's definitions raised {_raised(err)}"), "runs": []}
    transform = namespace.get("transform_input")
    if not callable(transform):
        return {"compile": "the code defines no function transform_input", "runs": []}
    me = _NoGenerator()
    printed = _Printed()
    runs: list[list[tuple[str, Any]]] = []
    for _ in range(RUNS):
        results: list[tuple[str, Any]] = []
        runs.append(results)
        for grid in job["inputs"]:
            failure: BaseException | None = None
            try:
                with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
                    value = transform(me, np.array(grid, dtype=np.int64))
            except _TooLoud:
                pass
            except Exception as err:  # noqa: BLE001 - the witness's own failure, reported per input
                if isinstance(err, MemoryError) and memory_limit_reached(err):
                    raise  # the sandbox reports its memory limit, and replaces this child; a MemoryError the
                    #        witness raised itself (no failed allocation behind it) is its own exception
                failure = err
            if (too_large := _too_large(printed, failure)) is not None:
                return {"compile": None, "runs": runs, "too_large": _one_line(too_large)}
            if failure is not None:
                results.append(("raised", _raised(failure)))
                continue
            try:
                results.append(as_grid(value))
            except Exception as err:  # noqa: BLE001 - a returned object whose conversion raised
                if isinstance(err, MemoryError) and memory_limit_reached(err):
                    raise
                results.append(("invalid", _one_line(f"returned {type(value).__name__}, which is not a grid "
                                                     f"({_raised(err)})")))
    return {"compile": None, "runs": runs}
