"""The restricted unpickler of sandbox results builds plain data only, and no more of it than the result holds.

A hostile game owns its child process: it can send any bytes as its result. A few bytes calling an allowed
constructor with a size (bytearray(2e9), list(range(N)), an ndarray of a huge shape, numpy.void(N)) made
arcstudy's own process allocate gigabytes; calling one of arcstudy's dataclasses ran its __post_init__ (one
opens a path: a FIFO hung the command); a result nested 100,000 deep made a RecursionError end the whole command.
"""

from __future__ import annotations

import collections
import datetime as dt
import io
import pickle
import resource
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.sandbox import Limits, Sandbox, SandboxFailure, _loads
from tests.unit import sandbox_targets as t

GIB = 1 << 30


def _global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _int(n: int) -> bytes:
    return b"I" + str(n).encode() + b"\n"


def _call(module: str, name: str, *args: bytes) -> bytes:
    """A protocol-0 pickle calling module.name(*args) (REDUCE)."""
    return _global(module, name) + b"(" + b"".join(args) + b"tR."


def _range(n: int) -> bytes:
    return _global("builtins", "range") + b"(" + _int(n) + b"tR"


BOMBS = {
    "bytearray": _call("builtins", "bytearray", _int(2 * GIB)),
    "bytes": _call("builtins", "bytes", _int(2 * GIB)),
    "list of a range": _call("builtins", "list", _range(10**9)),
    "set of a range": _call("builtins", "set", _range(10**9)),
    "deque of a range": _call("collections", "deque", _range(10**9)),
    "Counter of a range": _call("collections", "Counter", _range(10**9)),
    "ndarray of a shape": _global("numpy", "ndarray") + b"((" + _int(10**10) + b"ttR.",
    "_reconstruct of a shape": _call("numpy._core.multiarray", "_reconstruct", _global("numpy", "ndarray"),
                                     b"(" + _int(10**10) + b"t", b"S'b'\n"),
    "numpy.void of a size": _call("numpy", "void", _int(2 * GIB)),
    "a dataclass with __post_init__": _call("pipeline.ingest.harc_csv", "CsvSource", b"S'/nonexistent'\n",
                                            b"(l", b"S'x'\n"),
}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_result_that_would_build_more_than_it_holds_is_refused(name):
    import pipeline.ingest.harc_csv  # noqa: F401 - imported, as in `score`: the class is within reach

    before = _peak_mb()
    with pytest.raises((pickle.UnpicklingError, TypeError)):
        _loads(BOMBS[name])
    assert _peak_mb() - before < 200  # nothing near the sizes asked for was allocated


def test_a_deeply_nested_result_is_refused():
    deep = b"\x80\x05" + b"]" * 100_000 + b"a" * 99_999 + b"."  # a list in a list ..., 100,000 deep, in 200 KB
    with pytest.raises(pickle.UnpicklingError, match="nests more than"):
        _loads(deep)
    shallow = [[[{"a": (1, [2, {"b": 3}])}]]]
    assert _loads(pickle.dumps(shallow, protocol=5)) == shallow


def _dumps(value) -> bytes:
    """As the child pickles (protocol 5), without the reducers other libraries register in this process (Dask's
    tblib pickles exceptions through a function of its own once it is imported)."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=5)
    pickler.dispatch_table = {}
    pickler.dump(value)
    return buffer.getvalue()


def test_the_plain_data_results_are_made_of_still_round_trips():
    from pipeline.core.sandbox import SandboxFailure as Failure  # an exception of arcstudy's
    from pipeline.explore.recover import StepFound  # a dataclass of arcstudy's

    frames = np.arange(3 * 64 * 64, dtype=np.uint8).reshape(3, 64, 64)
    value = {
        "frames": frames, "strided": frames[:, ::2, ::3], "objects": np.array([1, "a", None], dtype=object),
        "scalar": np.int64(7), "flag": np.bool_(True), "float": np.float32(1.5),
        "deque": collections.deque([1, 2], maxlen=5), "counter": collections.Counter("abca"),
        "ordered": collections.OrderedDict(a=1), "set": {1, 2}, "frozen": frozenset({3}),
        "when": dt.datetime(2026, 4, 1, tzinfo=dt.UTC), "span": dt.timedelta(seconds=3), "path": Path("/x/y"),
        "range": range(3), "complex": 1 + 2j, "bytes": b"abc", "bytearray": bytearray(b"xy"),
        "step": StepFound(1, 2, 0, None, None, n_fit=2, ambiguous=True, alternatives=("ACTION5",)),
        "failure": Failure("error", "detail", "ValueError"),
    }
    got = _loads(_dumps(value))
    for key in ("frames", "strided", "objects"):
        assert got[key].dtype == value[key].dtype and np.array_equal(got[key], value[key])
    rest = {k: v for k, v in value.items() if k not in ("frames", "strided", "objects", "failure")}
    assert {k: got[k] for k in rest} == rest
    assert got["failure"].kind == "error" and got["failure"].detail == "detail"
    assert type(got["deque"]) is collections.deque and got["deque"].maxlen == 5


def test_a_game_that_forges_its_result_fails_alone_and_arcstudy_allocates_nothing():
    sandbox = Sandbox(Limits(wall_s=20, cpu_s=10, memory_bytes=512 << 20, output_bytes=1 << 20))
    try:
        before = _peak_mb()
        with pytest.raises(SandboxFailure) as err:
            sandbox.call(t.forge_pickle, BOMBS["bytearray"])
        assert err.value.kind == "refused" and "builtins.bytearray" in err.value.detail
        assert _peak_mb() - before < 200
        assert sandbox.call(t.pid, None) > 0  # a fresh child answers the next call
    finally:
        sandbox.close()

