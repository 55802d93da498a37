"""Run code arcstudy did not write (game folders, task generators) in a confined, reusable child process.

    from pipeline.core.sandbox import Limits, Sandbox, SandboxFailure, confined

    with Sandbox(Limits(wall_s=30)) as box:
        result = box.call(replay_one, item)          # replay_one: a module-level function of one argument
    # or, for the one executor (serial runs and Dask workers alike):
    ex.map_unordered(confined(replay_one, Limits(wall_s=30)), items)

The child is a fresh interpreter (``python -P -m pipeline.core.sandbox_child``) in its own process group, with
no inherited file descriptors, talking to this process over two pipes (framed messages, see sandbox_child). It
confines itself before any outside code runs (resource limits, network and IPC namespaces, no capabilities,
Landlock, seccomp, an audit hook: each where the system allows, see docs/security.md) and is reused for many
calls, so imports are paid once; after a failure of the child itself it is replaced at the next call.

Here, in the parent:
- the wall clock of each call: at `Limits.wall_s` the child's whole process group is killed (SIGKILL);
- the CPU limit of each call (RLIMIT_CPU of the child, re-armed before each call from the CPU it has used);
- the result: refused past `Limits.output_bytes`, and unpickled by a restricted unpickler that builds only plain
  data (builtins, numpy arrays, datetimes, paths) and the dataclasses, named tuples, enums and exceptions of
  arcstudy's own already-imported modules, never a class or function from the outside code;
- every abnormal end becomes a `SandboxFailure` whose `kind` says what happened and whose `detail` is one line.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import enum
import errno
import io
import json
import mmap
import os
import pickle
import resource
import select
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core.sandbox_child import (
    HEADER,
    LENGTH,
    MAX_BUFFERS,
    TAG_BUFFERS,
    TAG_CALL,
    TAG_ERROR,
    TAG_PROGRESS,
    TAG_READY,
    TAG_RESULT,
    TAG_SHARED,
)
from pipeline.core.special_files import remove_tree

__all__ = ["KINDS", "Limits", "Sandbox", "SandboxFailure", "confined", "describe_layers", "hold", "limits_from_env"]

KINDS = ("timeout", "cpu", "memory", "crashed", "exited", "output_too_large", "refused", "error", "wrong_shape")
_SCRATCH_PREFIX = "arcstudy-sandbox-"
START_WALL_S = 30.0  # a fresh interpreter, its confinement and the preload, at most (or wall_s if longer)


@dataclass(frozen=True)
class Limits:
    wall_s: float = 60.0            # wall clock per call; at it the child's whole process group is killed
    cpu_s: float = 60.0             # CPU seconds per call (RLIMIT_CPU, re-armed per call)
    memory_bytes: int = 2 << 30     # address space of the child (RLIMIT_AS)
    output_bytes: int = 64 << 20    # largest pickled result the child may send back
    open_files: int = 64            # RLIMIT_NOFILE
    file_bytes: int = 64 << 20      # largest file the child may write (in its scratch folder; RLIMIT_FSIZE)
    confine: bool = True            # False: limits only (namespaces, Landlock, seccomp, audit hook off): tests
    idle_s: float | None = None     # if set, a call is also killed when the code reports no progress
    #                                 (sandbox_child.heartbeat) for this long, even within wall_s


def limits_from_env(**overrides: Any) -> Limits:
    """`Limits` with the person's overrides: ARCSTUDY_SANDBOX_WALL_S, _CPU_S, _MEMORY_MB, _OUTPUT_MB."""
    values: dict[str, Any] = {}
    for field, env, scale in (("wall_s", "ARCSTUDY_SANDBOX_WALL_S", 1.0), ("cpu_s", "ARCSTUDY_SANDBOX_CPU_S", 1.0),
                              ("memory_bytes", "ARCSTUDY_SANDBOX_MEMORY_MB", 1 << 20),
                              ("output_bytes", "ARCSTUDY_SANDBOX_OUTPUT_MB", 1 << 20)):
        text = os.environ.get(env)
        if text:
            try:
                value = float(text) * scale
            except ValueError:
                continue
            if value > 0:
                values[field] = int(value) if field.endswith("_bytes") else value
    values.update(overrides)
    return Limits(**values)


CLOSE_WAIT_S = 0.2  # `Sandbox.close`: how long a call under way on another thread may finish before its child is killed


class SandboxFailure(Exception):
    """The confined code did not return a result: `kind` (one of KINDS) says how, `detail` in one line."""

    def __init__(self, kind: str, detail: str, exc_type: str = "") -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.exc_type = exc_type  # for kind "error": the qualified name of the exception the code raised

    def __reduce__(self):  # survives a trip through Dask
        return (SandboxFailure, (self.kind, self.detail, self.exc_type))


# errors of this process (not the child's code) that stop it starting a child: a limit on open files or processes,
# memory, or a full disk under its scratch folder
HOST_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM, errno.ENOSPC, errno.EDQUOT})


class SandboxCannotStart(BaseException):
    """This process could not start a sandbox child (`error`, one of HOST_ERRNOS): the machine's failure, not the
    failure of the input whose code was to run. A BaseException, as Ctrl-C is, so that the `except Exception` that
    reports one input's failure and goes on to the next does not blame each input in turn: the command stops and
    says why (pipeline.commands.common)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


# --- restricted unpickling of results ---------------------------------------------------------------------

# What protocol 5 (the child's pickler) names by reference. Containers, strings and bytes have opcodes of their
# own: the builtins that build them are not here, since called on a range() they build any amount from a few bytes.
_SAFE_BUILTINS = {"complex", "slice", "range", "object"}
_SAFE_GLOBALS = {
    ("datetime", "datetime"), ("datetime", "date"), ("datetime", "time"), ("datetime", "timedelta"),
    ("datetime", "timezone"), ("decimal", "Decimal"), ("fractions", "Fraction"), ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"), ("pathlib", "Path"), ("uuid", "UUID"), ("numpy", "dtype"),
    ("numpy._core.multiarray", "scalar"), ("numpy._core.numeric", "_frombuffer"), ("numpy.core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
}
_OWN_PACKAGES = ("pipeline.", "engine.", "schemas.")
MAX_RESULT_DEPTH = 100  # containers inside containers: arcstudy's results nest a few levels


def _filled_from(cls: type) -> Callable[..., Any]:
    """``cls`` as a pickle calls it (deque, Counter, OrderedDict: with an empty or concrete container, which the
    pickle holds), refusing an argument that would make the unpickler build more than the pickle holds."""
    concrete = (list, tuple, dict, str, bytes, int, float, type(None))

    def build(*args: Any) -> Any:
        if not all(isinstance(a, concrete) for a in args):
            raise pickle.UnpicklingError(f"the result builds a {cls.__name__} from a {type(args[0]).__name__}")
        return cls(*args)

    return build


class _ArrayType:
    """Stands for numpy.ndarray in a result: its only use is as `_reconstruct`'s first argument. The class itself
    is not handed out, since ndarray(shape) allocates any amount from a few bytes."""


def _reconstruct(subtype: Any, shape: Any, dtype: Any) -> Any:
    """numpy's `_reconstruct`, as its arrays' pickles call it: an empty array that the pickle's state then fills
    (shape (0,)); any other shape would allocate memory the pickle does not hold."""
    import numpy as np

    if subtype is not _ArrayType or not isinstance(shape, tuple) or any(dim != 0 for dim in shape):
        raise pickle.UnpicklingError("the result makes an array other than numpy's own empty one")
    return np.ndarray.__new__(np.ndarray, shape, dtype)


def _is_plain_class(obj: Any) -> bool:
    """A class of arcstudy's whose construction has no side effects: an exception, an enum, a named tuple, or a
    dataclass without __post_init__ (one opens a file: a pickle may call the class with arguments of its own)."""
    if not isinstance(obj, type):
        return False
    if dataclasses.is_dataclass(obj):
        return not any("__post_init__" in vars(c) for c in obj.__mro__)
    if issubclass(obj, (enum.Enum, BaseException)):
        return True
    return issubclass(obj, tuple) and hasattr(obj, "_fields")  # a NamedTuple


class _ResultUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _SAFE_BUILTINS:
            return super().find_class(module, name)
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        if module == "collections" and name in ("deque", "Counter", "OrderedDict"):
            return _filled_from(super().find_class(module, name))
        if (module, name) == ("numpy", "ndarray"):
            return _ArrayType
        if module in ("numpy._core.multiarray", "numpy.core.multiarray") and name == "_reconstruct":
            return _reconstruct
        if module.startswith("numpy") and module in sys.modules:  # numpy's number types, e.g. numpy.int64 (not
            numpy = sys.modules["numpy"]  # np.void or np.bytes_, which a size builds from nothing)
            obj = getattr(sys.modules[module], name, None)
            if isinstance(obj, type) and issubclass(obj, (numpy.number, numpy.bool_)):
                return obj
        if module.startswith(_OWN_PACKAGES) and module in sys.modules and "." not in name:
            # arcstudy's own modules, already imported here (never imported on the child's say-so)
            obj = getattr(sys.modules[module], name, None)
            if _is_plain_class(obj):
                return obj
        raise pickle.UnpicklingError(f"the result holds {module}.{name}, which the sandbox does not accept")


def _check_depth(result: Any) -> None:
    """Refuse a result whose containers nest past MAX_RESULT_DEPTH: the code that reads results recurses into
    them, and a RecursionError there would end the whole command (the unpickler itself does not recurse)."""
    stack = [(result, 1)]
    while stack:
        obj, depth = stack.pop()
        if isinstance(obj, (str, bytes, bytearray, int, float, bool, type(None))):
            continue
        if depth > MAX_RESULT_DEPTH:
            raise pickle.UnpicklingError(f"the result nests more than {MAX_RESULT_DEPTH} levels deep")
        if isinstance(obj, dict):
            stack.extend((v, depth + 1) for v in obj.values())
            stack.extend((k, depth + 1) for k in obj if not isinstance(k, (str, int)))
        elif isinstance(obj, (list, tuple, set, frozenset, collections.deque)):
            stack.extend((v, depth + 1) for v in obj if not isinstance(v, (str, bytes, int, float)))
        elif isinstance(obj, BaseException):
            stack.extend((v, depth + 1) for v in obj.args)
            stack.extend((v, depth + 1) for v in vars(obj).values())
        elif dataclasses.is_dataclass(obj):
            stack.extend((v, depth + 1) for v in vars(obj).values())


def _loads(payload: bytes, buffers: list[bytearray] | None = None) -> Any:
    """The result, built by the restricted unpickler; ``buffers``: its out-of-band buffers (TAG_BUFFERS), each
    used where the pickle names the next one (a pickle that names more or other than these is refused)."""
    result = _ResultUnpickler(io.BytesIO(payload), buffers=buffers).load()
    _check_depth(result)
    return result


# --- the child ----------------------------------------------------------------------------------------------

def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a live process has used, from /proc; 0 if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _may_raise_limits() -> bool:
    """Whether this process may raise another's hard limits (CAP_SYS_RESOURCE)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << 24))
    except (OSError, ValueError):
        pass
    return False


def _sweep_stale_scratch() -> None:
    """Remove scratch folders left by sandboxes whose parent process is gone (a kill -9 of arcstudy)."""
    base = Path(tempfile.gettempdir())
    try:
        entries = list(base.glob(f"{_SCRATCH_PREFIX}*-*"))
    except OSError:
        return
    for path in entries:
        try:
            pid = int(path.name[len(_SCRATCH_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            remove_tree(path)
        except PermissionError:
            continue


class Sandbox:
    """One confined child process, reused for many calls (imports paid once); restarted after a failure."""

    def __init__(self, limits: Limits = Limits(), *, preload: str | None = None,  # noqa: B008
                 restart_after_error: bool = False, env: Mapping[str, str] | None = None,
                 writable: Iterable[str | os.PathLike] = ()) -> None:
        """`preload`: "package.module:function" (or a module) run once in the child after confinement.
        `restart_after_error`: start a fresh child after the code raised, too (no state carried over).
        `env`: variables set in the child's environment (over this process's).
        `writable`: folders (existing) the child may write beneath, besides its scratch folder."""
        self.limits = limits
        self.preload = preload
        self.env = dict(env or {})
        self.writable = tuple(str(Path(p).absolute()) for p in writable)
        self.restart_after_error = restart_after_error
        self.layers: tuple[str, ...] = ()
        self.problems: tuple[str, ...] = ()
        self._proc: subprocess.Popen | None = None
        self._scratch: Path | None = None
        self._lock = threading.Lock()
        self._hard_cpu = _may_raise_limits()
        self._started = self._progress = 0.0
        self._shm: mmap.mmap | None = None  # memory shared with the child, where it leaves a result's large buffers

    # context manager
    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def scratch(self) -> Path | None:
        return self._scratch

    def start(self) -> None:
        """Start the child now (else the first call starts it); raises SandboxFailure if it cannot start."""
        with self._lock:
            if self._proc is None:
                self._start()

    def _start(self) -> None:
        try:
            self._start_child()
        except OSError as err:
            if err.errno not in HOST_ERRNOS:
                raise
            self._close_child()  # its scratch folder and memory file, made before what failed
            raise SandboxCannotStart(err) from err

    def _start_child(self) -> None:
        _sweep_stale_scratch()
        self._scratch = Path(tempfile.mkdtemp(prefix=f"{_SCRATCH_PREFIX}{os.getpid()}-"))
        env = dict(os.environ)
        env.update(PYTHONDONTWRITEBYTECODE="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", POLARS_MAX_THREADS="1", PYTHONFAULTHANDLER="1",
                   POLARS_SKIP_CPU_CHECK="1")  # the check runs machine code through ctypes: refused here
        env.pop("PYTHONSTARTUP", None)
        env.update(TMPDIR=str(self._scratch), MPLCONFIGDIR=str(self._scratch / ".matplotlib"))  # writable there
        env.update(self.env)
        path = list(filter(None, env.get("PYTHONPATH", "").split(os.pathsep)))
        # the child imports this very package, wherever it was imported from
        root = str(Path(__file__).resolve().parents[2])
        if root not in path:
            env["PYTHONPATH"] = os.pathsep.join([root, *path])
        log = open(self._scratch / "sandbox.log", "wb")  # noqa: SIM115 - handed to the child
        shm_fd = self._open_shared()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "pipeline.core.sandbox_child"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, cwd=self._scratch, env=env, close_fds=True,
                pass_fds=() if shm_fd is None else (shm_fd,), start_new_session=True, bufsize=0)
        finally:
            log.close()
            if shm_fd is not None:
                os.close(shm_fd)  # the child has its copy, and this process its mapping
        for pipe in (self._proc.stdin, self._proc.stdout):
            _widen(pipe)
        config = {"memory_bytes": self.limits.memory_bytes, "open_files": self.limits.open_files,
                  "file_bytes": self.limits.file_bytes, "cpu_s": max(self.limits.cpu_s, START_WALL_S),
                  "confine": self.limits.confine, "preload": self.preload, "writable": list(self.writable),
                  "shm_fd": shm_fd, "shm_bytes": len(self._shm) if self._shm is not None else 0}
        end = time.monotonic() + max(self.limits.wall_s, START_WALL_S)

        def deadline() -> tuple[float, str]:
            return end, "wall"

        try:
            self._send(b"S", json.dumps(config).encode(), deadline)
            tag, payload = self._receive(deadline, what="start")
        except SandboxFailure as failure:
            self._close_child()
            raise SandboxFailure(failure.kind, f"the sandbox did not start: {failure.detail}",
                                 failure.exc_type) from None
        if tag == TAG_ERROR:
            self._close_child()
            raise _failure_from(payload)
        try:
            info = json.loads(payload)
            self.layers = tuple(str(x) for x in info.get("layers", ()))
            self.problems = tuple(str(x) for x in info.get("problems", ()))
        except (ValueError, TypeError, AttributeError):
            self._close_child()
            raise SandboxFailure("refused", "the sandbox sent an unreadable start message") from None

    def call(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        """fn(arg) in the child; raises SandboxFailure for the child's death, its limits, or fn's exception."""
        with self._lock:
            try:
                request = pickle.dumps((fn, arg, self.limits.output_bytes), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as err:  # noqa: BLE001 - the caller's mistake, not the child's
                raise SandboxFailure("refused", f"the call cannot be sent to the sandbox: {err}") from None
            if self._proc is None:
                self._start()
            self._arm_cpu()
            self._started = self._progress = time.monotonic()
            try:
                self._send(TAG_CALL, request, self._call_deadline)
                tag, payload = self._receive(self._call_deadline, what="call")
            except BaseException:  # a failure, or Ctrl-C here (the child, in its own session, never gets it)
                self._close_child()
                raise
            if tag in (TAG_RESULT, TAG_BUFFERS):
                try:
                    return _loads(*payload) if tag == TAG_BUFFERS else _loads(payload)
                except Exception as err:  # noqa: BLE001 - a result we will not build is refused
                    self._close_child()
                    raise SandboxFailure("refused", _one_line(str(err))) from None
            if tag == TAG_ERROR:
                failure = _failure_from(payload)
                if failure.kind != "error" or self.restart_after_error:
                    self._close_child()  # memory exhausted, sys.exit, ...: no state carried into the next call
                raise failure
            self._close_child()
            raise SandboxFailure("refused", f"the sandbox sent an unexpected message ({tag!r})")

    def close(self) -> None:
        """Kill the child's process group and remove its scratch folder. A call under way on another thread (an
        export's replay made ahead on its background thread, when the program ends early: Ctrl-C, a full disk)
        is ended, not waited for: its child is killed first, so the call fails at once and lets go."""
        if not self._lock.acquire(timeout=CLOSE_WAIT_S):
            self._kill()
            self._lock.acquire()
        try:
            self._close_child()
        finally:
            self._lock.release()

    # --- internals -------------------------------------------------------------------------------------------

    def _open_shared(self) -> int | None:
        """A memory file of SHARED_BYTES (or less, within the limits) mapped here, for the child to leave a result's
        large buffers in (TAG_SHARED) instead of writing them through the pipe, which costs both processes about
        ten times as much CPU; its fd, handed to the child, or None where the system has no memory files."""
        size = min(SHARED_BYTES, self.limits.output_bytes, self.limits.memory_bytes // 8)
        if size < 1 << 16 or not hasattr(os, "memfd_create"):
            return None
        import fcntl

        try:
            fd = os.memfd_create("arcstudy-sandbox-results", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except (OSError, AttributeError):
            return None
        try:
            os.ftruncate(fd, size)
            # its size sealed: the child cannot shrink it under this process's reads (which would raise SIGBUS here)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self._shm = mmap.mmap(fd, size)
        except (OSError, ValueError, AttributeError):
            os.close(fd)
            return None
        return fd

    def _call_deadline(self) -> tuple[float, str]:
        """When the running call is killed, and why ("wall" or "idle")."""
        wall = self._started + self.limits.wall_s
        if self.limits.idle_s is not None and self._progress + self.limits.idle_s < wall:
            return self._progress + self.limits.idle_s, "idle"
        return wall, "wall"

    def _arm_cpu(self) -> None:
        proc = self._proc
        assert proc is not None
        soft = int(_cpu_seconds(proc.pid) + self.limits.cpu_s + 0.999)
        try:
            _cur_soft, hard = resource.prlimit(proc.pid, resource.RLIMIT_CPU)
            if self._hard_cpu:
                hard = soft + 2  # SIGKILL 2 s past the soft limit, even if SIGXCPU is blocked
            elif hard != resource.RLIM_INFINITY:
                soft = min(soft, hard)
            resource.prlimit(proc.pid, resource.RLIMIT_CPU, (soft, hard))
        except (OSError, ValueError, AttributeError):
            pass  # the wall clock still holds

    def _send(self, tag: bytes, payload: bytes, deadline: Callable[[], tuple[float, str]]) -> None:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        fd = proc.stdin.fileno()
        view = memoryview(HEADER.pack(tag, len(payload)) + payload)
        os.set_blocking(fd, False)
        while view:
            end, why = deadline()
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise self._timeout(why)
            if not _ready(fd, select.POLLOUT, remaining):
                continue
            try:
                view = view[os.write(fd, view[: 1 << 16]):]
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError):
                raise self._death() from None

    def _read(self, fd: int, n: int, deadline: Callable[[], tuple[float, str]]) -> bytes:
        buf = bytearray(n)
        self._read_into(fd, buf, deadline)
        return bytes(buf)

    def _read_into(self, fd: int, buf: bytearray, deadline: Callable[[], tuple[float, str]]) -> None:
        view, got = memoryview(buf), 0
        while got < len(buf):
            end, why = deadline()
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise self._timeout(why)
            if not _ready(fd, select.POLLIN, remaining):
                continue
            n = os.readv(fd, [view[got:]])
            if not n:
                raise self._death()
            got += n

    def _receive(self, deadline: Callable[[], tuple[float, str]], *, what: str) -> tuple[bytes, Any]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        tag, size = HEADER.unpack(self._read(fd, HEADER.size, deadline))
        while tag == TAG_PROGRESS and what == "call" and size == 0:
            self._progress = time.monotonic()
            tag, size = HEADER.unpack(self._read(fd, HEADER.size, deadline))
        expected = (TAG_READY, TAG_ERROR) if what == "start" else (TAG_RESULT, TAG_BUFFERS, TAG_SHARED, TAG_ERROR)
        if tag not in expected or (tag == TAG_SHARED and self._shm is None):
            raise SandboxFailure("refused", f"the sandbox sent an unexpected message ({tag!r})")
        limit = self.limits.output_bytes if tag in (TAG_RESULT, TAG_BUFFERS, TAG_SHARED) else 1 << 20
        if size > limit:
            raise SandboxFailure("output_too_large", f"the result is {size:,} bytes, over the limit of "
                                 f"{self.limits.output_bytes:,}")
        if tag == TAG_SHARED:
            return TAG_BUFFERS, self._shared_result(self._read(fd, size, deadline))
        if tag != TAG_BUFFERS:
            return tag, self._read(fd, size, deadline)
        # n, the n lengths, the pickle, the n buffers: each checked against what the header announced
        (n,) = LENGTH.unpack(self._read(fd, LENGTH.size, deadline)) if size >= LENGTH.size else (-1,)
        if not 0 < n <= MAX_BUFFERS or LENGTH.size * (n + 1) > size:
            raise SandboxFailure("refused", "the sandbox sent an unreadable result")
        lengths = [LENGTH.unpack_from(head, i * LENGTH.size)[0]
                   for head in [self._read(fd, LENGTH.size * n, deadline)] for i in range(n)]
        rest = size - LENGTH.size * (n + 1) - sum(lengths)
        if rest < 0:
            raise SandboxFailure("refused", "the sandbox sent an unreadable result")
        payload = self._read(fd, rest, deadline)
        buffers = []
        for length in lengths:
            buf = bytearray(length)
            self._read_into(fd, buf, deadline)
            buffers.append(buf)
        return tag, (payload, buffers)

    def _shared_result(self, message: bytes) -> tuple[bytes, list[bytearray]]:
        """(pickle, buffers) of a TAG_SHARED message: n, the n lengths, the pickle; the buffers one after the other
        from the start of the shared memory, copied out of it (the child reuses it, and may write there at any
        time: only the lengths are trusted, once checked)."""
        shm = self._shm
        assert shm is not None
        n = LENGTH.unpack_from(message)[0] if len(message) >= LENGTH.size else -1
        if not 0 < n <= MAX_BUFFERS or LENGTH.size * (n + 1) > len(message):
            raise SandboxFailure("refused", "the sandbox sent an unreadable result")
        lengths = [LENGTH.unpack_from(message, LENGTH.size * (i + 1))[0] for i in range(n)]
        total = sum(lengths)
        if total > len(shm) or total + len(message) > self.limits.output_bytes:
            raise SandboxFailure("output_too_large", f"the result is {total + len(message):,} bytes, over the "
                                 f"limit of {self.limits.output_bytes:,}")
        view = memoryview(shm)
        buffers, at = [], 0
        try:
            for length in lengths:
                buffers.append(bytearray(view[at:at + length]))
                at += length
        finally:
            view.release()
        return message[LENGTH.size * (n + 1):], buffers

    def _timeout(self, why: str = "wall") -> SandboxFailure:
        self._kill()
        if why == "idle":
            return SandboxFailure("timeout", f"the code made no progress for {self.limits.idle_s:g} s (its process "
                                             "group was killed)")
        return SandboxFailure("timeout", f"the code ran longer than the wall-clock limit of {self.limits.wall_s:g} s "
                                         "(its process group was killed)")

    def _death(self) -> SandboxFailure:
        """The child closed its pipe: wait for its end (briefly; then kill it) and say how it ended."""
        proc = self._proc
        assert proc is not None
        try:
            status = proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._kill()
            return SandboxFailure("exited", "the code closed the sandbox's pipe (the process was killed)")
        if status < 0:
            sig = -status
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
            if sig == signal.SIGXCPU:
                return SandboxFailure("cpu", f"the code used more than the CPU limit of {self.limits.cpu_s:g} s")
            if sig == signal.SIGSYS:  # the seccomp filter ended it (sandbox_child._FATAL)
                return SandboxFailure("refused", "the code made a system call the sandbox forbids (a fork, an exec, "
                                                 "a link, a mount, ptrace, ...), around the Python-level checks: "
                                                 "the kernel ended it")
            if sig == signal.SIGKILL:
                return SandboxFailure("crashed", "the sandbox process was killed by SIGKILL (the CPU hard limit or "
                                                 f"the system's out-of-memory killer){self._log_tail()}")
            return SandboxFailure("crashed", f"the sandbox process was killed by {name}{self._log_tail()}")
        if status == 70:
            return SandboxFailure("crashed", "the sandbox process lost its parent")
        return SandboxFailure("exited", f"the code ended the sandbox process with exit code {status}"
                                        f"{self._log_tail()}")

    def _log_tail(self) -> str:
        if self._scratch is None:
            return ""
        try:  # a folder the child could write: never through a link, never a FIFO (it would block for good)
            fd = os.open(self._scratch / "sandbox.log", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return ""
        try:
            size = os.fstat(fd)
            if not stat.S_ISREG(size.st_mode):
                return ""
            os.lseek(fd, max(0, size.st_size - 2000), os.SEEK_SET)
            lines = [ln for ln in os.read(fd, 2000).decode("utf-8", "replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        finally:
            os.close(fd)
        return f" (its last output: {_one_line(lines[-1], 200)})" if lines else ""

    def _kill(self) -> None:
        proc = self._proc
        if proc is None:
            return
        for kill in (lambda: os.killpg(proc.pid, signal.SIGKILL), lambda: os.kill(proc.pid, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def _close_child(self) -> None:
        if self._proc is not None:
            self._kill()
            for pipe in (self._proc.stdin, self._proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
            self._proc = None
        if self._shm is not None:
            self._shm.close()
            self._shm = None
        if self._scratch is not None:
            remove_tree(self._scratch)
            self._scratch = None

    def __del__(self) -> None:
        try:
            self._close_child()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass


def _failure_from(payload: bytes) -> SandboxFailure:
    """The child's error message ({"kind", "detail", "exc_type"} as JSON), checked: it comes from outside code's
    process, so anything else is a refusal."""
    try:
        info = json.loads(payload)
        kind, detail, exc_type = info["kind"], info["detail"], info.get("exc_type", "")
        if kind not in KINDS or not isinstance(detail, str) or not isinstance(exc_type, str):
            raise ValueError(kind)
    except (ValueError, TypeError, KeyError):
        return SandboxFailure("refused", "the sandbox sent an unreadable error message")
    return SandboxFailure(kind, _one_line(detail, 1000), _one_line(exc_type, 200))


SHARED_BYTES = 64 << 20  # memory shared with the child for large results (at most output_bytes, memory_bytes / 8)
PIPE_BYTES = 1 << 20  # the pipes' capacity, where the system allows it (Linux's default is 64 KiB)


def _widen(pipe: Any) -> None:
    """Give a pipe to the child PIPE_BYTES of capacity (fewer, larger reads and writes, fewer switches between
    the two processes for a large result); left as it is where the system refuses."""
    import fcntl

    try:
        fcntl.fcntl(pipe.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (OSError, ValueError, AttributeError):
        pass


def _ready(fd: int, event: int, timeout_s: float) -> bool:
    """Whether `fd` is ready for `event` (or hung up / in error) within `timeout_s` (poll: any fd number)."""
    poller = select.poll()
    poller.register(fd, event)
    return bool(poller.poll(max(0, int(timeout_s * 1000) + 1)))


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- one cached sandbox per process, for the executor ----------------------------------------------------------

_cache: dict[tuple, Sandbox] = {}  # in order of last use
_cache_lock = threading.Lock()
MAX_CACHED = 8  # children kept alive per process; the least recently used one is closed past it (an export
# replays on two children per game: four games' worth)
_holds: dict[tuple, int] = {}  # cached children that must not be closed to make room (`hold`), and how often


def _cache_ident(limits: Limits, preload: str | None, key: str | None, env: tuple, writable: tuple) -> tuple:
    return os.getpid(), limits, preload, key, env, writable


def _cached(limits: Limits, preload: str | None, key: str | None, env: tuple = (), writable: tuple = ()
            ) -> Sandbox:
    ident = _cache_ident(limits, preload, key, env, writable)
    evicted: list[Sandbox] = []
    with _cache_lock:
        box = _cache.pop(ident, None)
        if box is None:  # a spare child of this configuration, started early and never used, else a new one
            box = _spares.pop(_spare_ident(limits, preload, env, writable), None) or \
                Sandbox(limits, preload=preload, env=dict(env), writable=writable)
        _cache[ident] = box
        while len(_cache) > MAX_CACHED:
            # the least recently used child that is neither held nor answering a call (on another thread):
            # closing it would end the state it keeps for its caller, or kill the call under way
            old = next((i for i, b in _cache.items() if i != ident and not _holds.get(i) and not b._lock.locked()),
                       None)
            if old is None:  # every other child is in use: more stay alive for now
                break
            evicted.append(_cache.pop(old))
    for old_box in evicted:
        old_box.close()
    return box


def hold(call: Callable[[Any], Any]) -> Callable[[], None]:
    """Keep the cached child `call` (made by `confined`) runs in from being closed to make room for others, until
    the returned function is called (once; later calls do nothing): for code that keeps state in the child
    between calls (an export's replay, fed a chunk a call), which another key's call would otherwise end."""
    if not isinstance(call, _Confined):
        raise TypeError("hold takes a callable made by confined()")
    ident = _cache_ident(call.limits, call.preload, call.key, call.env, call.writable)
    with _cache_lock:
        _holds[ident] = _holds.get(ident, 0) + 1
    released = False

    def release() -> None:
        nonlocal released
        with _cache_lock:
            if released:
                return
            released = True
            left = _holds.get(ident, 1) - 1
            if left > 0:
                _holds[ident] = left
            else:
                _holds.pop(ident, None)

    return release


_spares: dict[tuple, Sandbox] = {}  # children started before any call asked for them (`start_spare`), by configuration


def _spare_ident(limits: Limits, preload: str | None, env: tuple, writable: tuple) -> tuple:
    return os.getpid(), limits, preload, env, writable


def start_spare(call: Callable[[Any], Any]) -> None:
    """Start a child of the configuration `call` (made by `confined`) runs in, on a daemon thread, for the first
    cached sandbox of that configuration that needs one, whatever its key (a child no code has run in is as fresh
    as a new one): a command that will run game code starts it while it is still importing and reading, and its
    start (about 0.3 s of wall time) overlaps that work. The first call waits for the start to end (the sandbox's
    lock); a spare no call takes is closed at exit. A failed start is left to the first call, which starts the
    child again and raises what stops it."""
    if not isinstance(call, _Confined):
        raise TypeError("start_spare takes a callable made by confined()")
    ident = _spare_ident(call.limits, call.preload, call.env, call.writable)
    with _cache_lock:
        if ident in _spares:
            return
        box = _spares[ident] = Sandbox(call.limits, preload=call.preload, env=dict(call.env), writable=call.writable)

    def start() -> None:
        try:
            box.start()
        except (Exception, SandboxCannotStart):  # noqa: BLE001 - said by the first call, which starts it again
            pass

    threading.Thread(target=start, name="sandbox-spare", daemon=True).start()


def close_all() -> None:
    """Close every cached or spare sandbox of this process (registered at exit)."""
    with _cache_lock:
        boxes = [box for ident, box in [*_cache.items(), *_spares.items()] if ident[0] == os.getpid()]
        _cache.clear()
        _spares.clear()
    for box in boxes:
        box.close()


atexit.register(close_all)


@dataclass(frozen=True)
class _Confined:
    fn: Callable[[Any], Any]
    limits: Limits
    preload: str | None = None
    key: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    writable: tuple[str, ...] = ()

    @property
    def __name__(self) -> str:  # the executor names its pieces after the function
        return getattr(self.fn, "__name__", "confined")

    def __call__(self, arg: Any) -> Any:
        return _cached(self.limits, self.preload, self.key, self.env, self.writable).call(self.fn, arg)


def confined(fn: Callable[[Any], Any], limits: Limits, *, preload: str | None = None,
             key: str | None = None, env: Mapping[str, str] | None = None,
             writable: Iterable[str | os.PathLike] = ()) -> Callable[[Any], Any]:
    """A picklable callable: confined(fn, limits)(arg) == fn(arg) run in a per-process cached Sandbox.
    Give it to the one executor (pipeline/core/executor.py) so serial runs and Dask workers both confine
    outside code the same way. `key`: a separate cached sandbox per key (e.g. one per game); `env`: variables
    set in the child's environment; `writable`: folders it may write beneath besides its scratch folder."""
    return _Confined(fn, limits, preload, key, tuple(sorted((env or {}).items())),
                     tuple(str(Path(p).absolute()) for p in writable))


# --- what is active, said once ---------------------------------------------------------------------------------

_layers_cache: tuple[tuple[str, ...], tuple[str, ...]] | None = None


def describe_layers() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(active layers, problems) of a sandbox on this system: one probe child per process, cached."""
    global _layers_cache
    if _layers_cache is None:
        with Sandbox(Limits(wall_s=30, cpu_s=30)) as box:
            box.start()
            _layers_cache = (box.layers, box.problems)
    return _layers_cache
