"""The sandbox for outside code: every failure kind, the confinement layers, reuse, clean-up."""

from __future__ import annotations

import errno
import os
import pickle
import signal
import socket
import time

import pytest

from pipeline.core.sandbox import Limits, Sandbox, SandboxFailure, confined, describe_layers
from tests.unit import sandbox_targets as t

SMALL = Limits(wall_s=3, cpu_s=2, memory_bytes=512 << 20, output_bytes=1 << 20)


@pytest.fixture(scope="module")
def box():
    with Sandbox(SMALL) as sandbox:
        yield sandbox


def _gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _failure(sandbox: Sandbox, fn, arg) -> SandboxFailure:
    with pytest.raises(SandboxFailure) as info:
        sandbox.call(fn, arg)
    return info.value


def test_a_call_returns_the_functions_result_and_the_child_is_reused(box):
    assert box.call(t.echo, {"a": [1, 2.5, "x"], "b": (None, b"\x00")}) == {"a": [1, 2.5, "x"], "b": (None, b"\x00")}
    first = box.call(t.pid, None)
    assert first != os.getpid()
    assert box.call(t.pid, None) == first


def test_numpy_and_threads_work_under_confinement(box):
    total, small, scalar = box.call(t.numpy_sum, 1000)
    assert total == 499500 and small.tolist() == [0, 1, 2] and str(small.dtype) == "uint8" and scalar == 7
    assert box.call(t.threads, 8) == list(range(8))


def test_an_exception_of_the_code_is_kind_error_and_keeps_the_child(box):
    before = box.call(t.pid, None)
    failure = _failure(box, t.raise_value_error, "bad level 3")
    assert failure.kind == "error"
    assert failure.detail == "ValueError: bad level 3"
    assert failure.exc_type == "ValueError"
    assert box.call(t.pid, None) == before


def test_wall_clock_kills_the_process_group_and_the_next_call_gets_a_new_child():
    with Sandbox(Limits(wall_s=0.5, cpu_s=5)) as sandbox:
        pid = sandbox.call(t.pid, None)
        started = time.monotonic()
        failure = _failure(sandbox, t.sleep, 30)
        assert failure.kind == "timeout" and "0.5 s" in failure.detail
        assert time.monotonic() - started < 15
        assert _gone(pid)
        assert sandbox.call(t.pid, None) != pid


def test_cpu_limit():
    with Sandbox(Limits(wall_s=20, cpu_s=1)) as sandbox:
        failure = _failure(sandbox, t.spin, None)
    assert failure.kind == "cpu"


def test_memory_limit():
    with Sandbox(Limits(wall_s=10, cpu_s=5, memory_bytes=256 << 20)) as sandbox:
        failure = _failure(sandbox, t.allocate, 1 << 30)
        assert failure.kind == "memory"
        assert sandbox.call(t.allocate, 1 << 20) == 1 << 20  # a fresh child after the failure


def test_a_memory_error_the_code_raises_itself_is_its_own_exception_not_the_memory_limit():
    with Sandbox(Limits(wall_s=10, cpu_s=5, memory_bytes=256 << 20)) as sandbox:
        pid = sandbox.call(t.pid, None)
        failure = _failure(sandbox, t.raise_memory_error, "fake")
        assert (failure.kind, failure.detail, failure.exc_type) == ("error", "MemoryError: fake", "MemoryError")
        assert sandbox.call(t.pid, None) == pid  # an ordinary exception: the child is kept
        for fn in (t.allocate, t.reraise_memory_error):  # an allocation that failed, even if raised again
            failure = _failure(sandbox, fn, 1 << 30)
            assert failure.kind == "memory" and "memory limit of 256 MiB" in failure.detail, failure.detail


def test_signalling_its_own_process_group_is_allowed_and_another_group_refused(box):
    assert box.call(t.killpg, 0) == "sent"  # group 0: its own, a group of itself alone
    failure = _failure(box, t.killpg, os.getpgrp())
    assert failure.kind == "refused" and f"os.killpg of process group {os.getpgrp()}, not its own" in failure.detail


def test_a_signal_is_crashed_and_an_exit_without_result_is_exited(box):
    failure = _failure(box, t.abort, None)
    assert failure.kind == "crashed" and "SIGABRT" in failure.detail
    failure = _failure(box, t.hard_exit, 0)
    assert failure.kind == "exited" and "exit code 0" in failure.detail
    assert box.call(t.echo, 1) == 1


def test_a_result_over_the_output_limit_is_refused(box):
    failure = _failure(box, t.big_result, 2 << 20)
    assert failure.kind == "output_too_large"
    assert box.call(t.big_result, 10) == b"x" * 10


def test_a_result_holding_a_foreign_function_is_refused_not_built(box):
    failure = _failure(box, t.return_function, None)
    assert failure.kind == "refused" and "system" in failure.detail


def test_python_level_escapes_are_refused(box, tmp_path):
    sentinel = tmp_path / "sentinel.txt"
    for fn, arg, what in ((t.python_fork, None, "os.fork"), (t.python_system, f"touch {sentinel}", "os.system"),
                          (t.python_socket, None, "socket"), (t.write_file_python, str(sentinel), "writing outside"),
                          (t.kill_parent, None, "os.kill of another process")):
        failure = _failure(box, fn, arg)
        assert failure.kind == "refused" and what in failure.detail, (fn, failure)
    assert not sentinel.exists()


def test_a_refusal_the_code_swallows_is_still_its_failure(box, tmp_path):
    sentinel = tmp_path / "sentinel.txt"
    failure = _failure(box, t.swallowed_write, str(sentinel))
    assert failure.kind == "refused" and "writing outside the scratch folder" in failure.detail
    assert not sentinel.exists()
    assert box.call(t.echo, 2) == 2


def test_a_thread_left_running_after_the_call_is_refused_and_ends_with_the_child():
    with Sandbox(SMALL) as sandbox:
        pid = sandbox.call(t.pid, None)
        failure = _failure(sandbox, t.leave_thread, 60)
        assert failure.kind == "refused" and "thread" in failure.detail
        assert _gone(pid)
        assert sandbox.call(t.threads, 2) == [0, 1]  # threads that end with the call are fine


@pytest.mark.parametrize("spin", [False, True], ids=["sleeping", "spinning"])
def test_a_daemon_thread_left_running_is_refused_too_and_the_child_is_not_reused(spin):
    with Sandbox(SMALL) as sandbox:
        pid = sandbox.call(t.pid, None)
        failure = _failure(sandbox, t.leave_daemon_thread, spin)
        assert failure.kind == "refused" and "daemon thread 'lingering-daemon'" in failure.detail, failure.detail
        assert _gone(pid)  # the thread cannot be stopped: its process is ended
        new_pid, threads = sandbox.call(t.pid_and_threads, None)
        assert new_pid != pid
        assert sandbox.call(t.pid_and_threads, None) == (new_pid, threads)  # the sandbox's own threads are no failure


def test_the_thread_check_fails_closed_when_the_code_left_it_no_file_to_list_threads_with():
    with Sandbox(SMALL) as sandbox:
        failure = _failure(sandbox, t.use_up_files, None)
        assert failure.kind == "refused" and "could not list its threads" in failure.detail, failure.detail
        assert sandbox.call(t.echo, 3) == 3  # a fresh child


def test_a_thread_started_below_threading_fails_the_call_even_when_the_code_raised():
    with Sandbox(SMALL) as sandbox:
        pid = sandbox.call(t.pid, None)
        failure = _failure(sandbox, t.leave_raw_thread, None)
        assert failure.kind == "refused" and "outside Python's threading module" in failure.detail, failure.detail
        assert _gone(pid)


def test_the_kernel_refuses_escapes_past_the_audit_hook(box, tmp_path):
    box.call(t.pid, None)  # the layers are known once the child has started (this test may run first)
    layers = " ".join(box.layers)
    if "seccomp" not in layers:
        pytest.fail(f"seccomp is not active on this machine: {box.problems}")
    eperm = f"errno {errno.EPERM}"
    # what only code going around the audit hook can reach ends the child: refused, not an error it may ignore
    fatal = [("clone", signal.SIGCHLD, 0, 0, 0, 0), ("execve", b"/bin/true", None, None),
             ("ptrace", 16, os.getpid(), 0, 0), ("symlinkat", b"/etc", -100, b"to-etc")]  # -100: AT_FDCWD
    if t.SYS["fork"] is not None:
        fatal.append(("fork",))
    for call in fatal:
        failure = _failure(box, t.raw_syscall, call)
        assert failure.kind == "refused" and "system call the sandbox forbids" in failure.detail, call
    assert box.call(t.raw_syscall, ("socket", socket.AF_INET, socket.SOCK_STREAM, 0)) == eperm
    assert box.call(t.raw_syscall, ("socket", socket.AF_UNIX, socket.SOCK_STREAM, 0)) == eperm
    assert box.call(t.raw_syscall, ("kill", os.getpid(), 0)) == eperm  # this test process is the parent
    assert box.call(t.raw_syscall, ("setrlimit", 9, b"\xff" * 16)) == eperm  # RLIMIT_AS, a new limit
    sentinel = tmp_path / "raw.txt"
    assert box.call(t.raw_open_write, str(sentinel)) == f"errno {errno.EACCES}"  # Landlock
    assert not sentinel.exists()
    assert box.call(t.raw_syscall, ("kill", 0, 0)) == 0  # its own process group is fine
    # no symbolic links, even in the scratch folder: arcstudy reads and writes there after the code has run
    # (its log; simulate's study), and a link made there sent those reads and writes anywhere
    assert _failure(box, t.raw_symlink, "to-etc").kind == "refused"
    failure = _failure(box, t.python_symlink, "to-etc-too")  # refused, even though the code caught the error
    assert failure.kind == "refused" and "os.symlink" in failure.detail


def test_the_log_tail_never_follows_a_link_nor_opens_a_fifo(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-LINE\n")
    for kind in ("link", "fifo"):
        scratch = tmp_path / kind
        scratch.mkdir()
        if kind == "link":
            (scratch / "sandbox.log").symlink_to(secret)
        else:
            os.mkfifo(scratch / "sandbox.log")  # opened for reading, it blocked arcstudy for good
        sandbox = Sandbox(SMALL)
        sandbox._scratch = scratch
        assert sandbox._log_tail() == ""
    scratch = tmp_path / "plain"
    scratch.mkdir()
    (scratch / "sandbox.log").write_text("first\nlast words\n")
    sandbox = Sandbox(SMALL)
    sandbox._scratch = scratch
    assert sandbox._log_tail() == " (its last output: last words)"


def test_writes_inside_the_scratch_folder_work_and_it_is_removed_at_close():
    sandbox = Sandbox(SMALL)
    written = sandbox.call(t.write_scratch, "note.txt")
    scratch = sandbox.scratch
    assert scratch is not None and os.path.dirname(written) == str(scratch)
    assert (scratch / "note.txt").read_text() == "inside"
    pid = sandbox.pid
    sandbox.close()
    assert not scratch.exists()
    assert _gone(pid)


def test_confined_is_picklable_and_reuses_one_child_per_process():
    fn = confined(t.pid, SMALL)
    again = pickle.loads(pickle.dumps(fn))
    assert fn(None) == again(None) != os.getpid()
    failure = None
    try:
        confined(t.raise_value_error, SMALL)("x")
    except SandboxFailure as err:
        failure = err
    assert failure is not None and failure.kind == "error"
    assert pickle.loads(pickle.dumps(failure)).kind == "error"


def test_the_layers_are_reported():
    layers, _problems = describe_layers()
    assert "resource limits" in layers and "audit hook" in layers


def test_idle_limit_kills_only_code_that_stops_reporting_progress():
    with Sandbox(Limits(wall_s=20, cpu_s=5, idle_s=0.6)) as sandbox:
        assert sandbox.call(t.busy_with_heartbeats, 1.5) == "done"  # longer than idle_s, with progress
        failure = _failure(sandbox, t.sleep, 10)
    assert failure.kind == "timeout" and "no progress for 0.6 s" in failure.detail


def test_a_forged_result_is_not_built_and_a_forged_error_is_refused(box, tmp_path):
    sentinel = tmp_path / "forged.txt"
    failure = _failure(box, t.forge_result, f"touch {sentinel}")
    assert failure.kind == "refused" and "system" in failure.detail
    assert not sentinel.exists()  # the pickle's os.system was never called here
    failure = _failure(box, t.forge_error, None)
    assert failure.kind == "refused" and "unreadable" in failure.detail
    assert box.call(t.echo, 3) == 3


def test_large_arrays_come_back_whole_through_shared_memory_or_else_the_pipe():
    """numpy arrays of 64 KiB or more leave the child out of band: in the memory it shares with this process
    (`Sandbox._open_shared`) when they fit there, else through the pipe after the pickle."""
    with Sandbox(Limits(wall_s=20, cpu_s=10, memory_bytes=1 << 30, output_bytes=128 << 20)) as box:
        sizes = [10, 1 << 16, 3 << 20]
        got = box.call(t.arrays, sizes)
        assert box._shm is not None and len(box._shm) >= sum(sizes)
        assert [a.tolist() == [i] * n for i, (a, n) in enumerate(zip(got, sizes, strict=True))] == [True] * 3
        big = [1 << 16, len(box._shm) + 1]  # more than the shared memory holds: by the pipe
        got = box.call(t.arrays, big)
        assert [len(a) for a in got] == big and int(got[0].max()) == 0 and int(got[1].min()) == 1
        got = box.call(t.arrays, sizes)  # and the shared memory again
        assert [len(a) for a in got] == sizes and int(got[2].min()) == int(got[2].max()) == 2


def test_a_forged_shared_result_past_the_shared_memory_or_unreadable_is_refused(box):
    assert box.call(t.echo, 0) == 0 and box._shm is not None  # a child (and its shared memory) is running
    failure = _failure(box, t.forge_shared, [len(box._shm) + 1])
    assert failure.kind == "output_too_large"
    failure = _failure(box, t.forge_shared, [])
    assert failure.kind == "refused" and "unreadable" in failure.detail
    assert box.call(t.echo, 4) == 4


def test_the_shared_memory_cannot_be_resized():
    """Its size is sealed before the child gets it: shrinking it would make this process's reads fault."""
    import fcntl

    box = Sandbox(SMALL)
    fd = box._open_shared()
    try:
        assert fd is not None and box._shm is not None and len(box._shm) == SMALL.output_bytes
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        assert seals & fcntl.F_SEAL_SHRINK and seals & fcntl.F_SEAL_GROW and seals & fcntl.F_SEAL_SEAL
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)
        box.close()


def test_close_ends_a_call_under_way_on_another_thread_instead_of_waiting_for_it():
    """An export makes its sandbox calls ahead on a background thread; when the program ends early, closing the
    sandbox must not wait for the game (up to the call's limits): the child is killed and the call fails."""
    import threading

    sandbox = Sandbox(Limits(wall_s=60, cpu_s=30))
    pid = sandbox.call(t.pid, None)
    failures: list[BaseException] = []

    def call() -> None:
        try:
            sandbox.call(t.sleep, 30)
        except BaseException as err:  # noqa: BLE001 - kept for the assertion
            failures.append(err)

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(0.5)  # the call is under way in the child
    started = time.monotonic()
    sandbox.close()
    worker.join(15)
    assert time.monotonic() - started < 10 and not worker.is_alive()
    assert len(failures) == 1 and isinstance(failures[0], SandboxFailure)
    assert _gone(pid)


def _started(box: Sandbox, timeout: float = 20.0) -> int:
    """The pid of a sandbox started on another thread, once it is up."""
    deadline = time.monotonic() + timeout
    while box.pid is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert box.pid is not None, "the spare child did not start"
    return box.pid


def test_a_spare_child_is_taken_by_the_first_key_that_needs_one_and_an_untaken_one_closed_at_exit():
    """`start_spare` (started by the program before its imports for commands that replay games): the first sandbox
    of that configuration, whatever its key, gets the spare child (no code ever ran in it); the next key gets a
    child of its own; a spare that nothing takes is closed with the cached ones."""
    from pipeline.core import sandbox

    limits = Limits(wall_s=30, cpu_s=30, output_bytes=1 << 20)
    sandbox.start_spare(confined(t.pid, limits))
    sandbox.start_spare(confined(t.pid, limits))  # one spare per configuration
    spares = [box for ident, box in sandbox._spares.items() if ident[1] == limits]
    assert len(spares) == 1
    spare = _started(spares[0])
    first, second = confined(t.pid, limits, key="game-a"), confined(t.pid, limits, key="game-b")
    assert first(None) == spare and first(None) == spare
    assert second(None) not in (spare, None)
    assert not [ident for ident in sandbox._spares if ident[1] == limits]
    unused = Limits(wall_s=31, cpu_s=30, output_bytes=1 << 20)
    sandbox.start_spare(confined(t.pid, unused))
    unused_pid = _started(next(box for ident, box in sandbox._spares.items() if ident[1] == unused))
    sandbox.close_all()
    assert _gone(spare) and _gone(unused_pid) and not sandbox._spares


def test_a_held_or_busy_child_is_not_closed_to_make_room(monkeypatch):
    """Past `MAX_CACHED` children the least recently used one is closed, but never one that is held (`hold`: an
    export's replay lives in it between calls) nor one answering a call on another thread (closing it killed the
    call); a released hold lets it go as before."""
    import threading

    from pipeline.core import sandbox

    monkeypatch.setattr(sandbox, "MAX_CACHED", 1)
    limits = Limits(wall_s=30, cpu_s=30, output_bytes=1 << 20)
    a = confined(t.pid, limits, key="held-a")
    b = confined(t.pid, limits, key="held-b")
    slow = confined(t.sleep, limits, key="held-slow")
    try:
        first = a(None)
        release = sandbox.hold(a)
        b(None)  # one child too many: a is held, b is the one in use
        assert a(None) == first
        release()
        release()  # once only
        b(None)
        assert a(None) != first  # released: closed to make room for b, a new child now
        answer: list[str] = []
        call = threading.Thread(target=lambda: answer.append(slow(1.5)))
        call.start()
        time.sleep(0.5)  # the slow call is under way in its child
        a(None)
        b(None)
        call.join(30)
        assert answer == ["woke"]  # not killed by the calls that needed room
    finally:
        sandbox.close_all()
