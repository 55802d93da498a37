"""Module-level functions the sandbox tests run in the confined child (picklable by reference)."""

from __future__ import annotations

import os
import platform
import signal
import threading
import time

from pipeline.core import sandbox_child

_X86 = platform.machine() == "x86_64"
SYS = {"fork": 57 if _X86 else None, "clone": 56 if _X86 else 220, "execve": 59 if _X86 else 221,
       "socket": 41 if _X86 else 198, "kill": 62 if _X86 else 129, "openat": 257 if _X86 else 56,
       "setrlimit": 160 if _X86 else 164, "ptrace": 101 if _X86 else 117, "symlinkat": 266 if _X86 else 36}
AT_FDCWD = -100


def echo(arg):
    return arg


def pid(_arg=None):
    return os.getpid()


def raise_value_error(message):
    raise ValueError(message)


def sleep(seconds):
    time.sleep(seconds)
    return "woke"


def spin(_arg=None):
    while True:
        pass


def allocate(n_bytes):
    return len(bytearray(n_bytes))


def abort(_arg=None):
    os.abort()


def hard_exit(code):
    os._exit(code)


def big_result(n_bytes):
    return b"x" * n_bytes


def return_function(_arg=None):
    return os.system


def numpy_sum(n):
    import numpy as np

    return int(np.arange(n).sum()), np.arange(3, dtype=np.uint8), np.int64(7)


def threads(n):
    out = []
    workers = [threading.Thread(target=out.append, args=(i,)) for i in range(n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sorted(out)


def write_scratch(name):
    with open(name, "w") as fh:
        fh.write("inside")
    return os.path.abspath(name)


def write_file_python(path):
    """Writing through Python's open (the audit hook and Landlock both stand in the way)."""
    with open(path, "w") as fh:
        fh.write("escaped")
    return "written"


def raw_syscall(args):
    """A raw system call through the child's own ctypes handle (past the audit hook): the kernel's answer."""
    name, *rest = args
    try:
        return sandbox_child._syscall(SYS[name], *rest)
    except OSError as err:
        return f"errno {err.errno}"


def raw_open_write(path):
    import ctypes

    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        fd = sandbox_child._syscall(SYS["openat"], ctypes.c_int(AT_FDCWD), os.fsencode(path), ctypes.c_int(flags),
                                    ctypes.c_int(0o644))
    except OSError as err:
        return f"errno {err.errno}"
    os.write(fd, b"escaped")
    os.close(fd)
    return "written"


def python_fork(_arg=None):
    return os.fork()


def python_system(command):
    return os.system(command)


def python_socket(_arg=None):
    import socket

    return socket.socket(socket.AF_INET, socket.SOCK_STREAM).fileno()


def kill_parent(_arg=None):
    os.kill(os.getppid(), signal.SIGTERM)
    return "sent"


def busy_with_heartbeats(seconds):
    """Works for `seconds`, reporting progress as it goes."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.05)
        sandbox_child.heartbeat()
    return "done"


def swallowed_write(path):
    try:
        with open(path, "w") as fh:
            fh.write("escaped")
    except Exception:  # noqa: BLE001 - hostile code that goes on as if nothing happened
        pass
    return "carried on"


def leave_thread(seconds):
    threading.Thread(target=time.sleep, args=(seconds,), name="lingering").start()
    return "returned"


def n_levels(info):
    from engine.env import GameEnv

    return len(GameEnv(info).game._levels)


class _Payload:
    """Pickles as a call of os.system: what hostile code would send to make the parent run a command."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def forge_result(command):
    """Writes a forged result straight to the reply pipe, as code in the child can."""
    import pickle

    sandbox_child._send(sandbox_child._reply_fd, sandbox_child.TAG_RESULT, pickle.dumps(_Payload(command)))
    time.sleep(5)


def forge_error(_arg=None):
    sandbox_child._send(sandbox_child._reply_fd, sandbox_child.TAG_ERROR, b"{not json")
    time.sleep(5)


def arrays(sizes):
    """uint8 arrays of these sizes, array i filled with i: the large ones travel out of band."""
    import numpy as np

    return [np.full(n, i, dtype=np.uint8) for i, n in enumerate(sizes)]


def forge_shared(lengths):
    """Writes a forged result straight to the reply pipe that says its buffers, of these lengths, are in the
    memory shared with the parent."""
    import pickle

    head = sandbox_child.LENGTH.pack(len(lengths)) + b"".join(sandbox_child.LENGTH.pack(n) for n in lengths)
    sandbox_child._send(sandbox_child._reply_fd, sandbox_child.TAG_SHARED, head + pickle.dumps(None))
    time.sleep(5)



def deep_scratch_tree(depth):
    """A chain of `depth` folders in the scratch folder (each made through its parent's descriptor, so the path
    may grow past PATH_MAX), a file at the bottom; the chain's length."""
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    with open(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as fh:
        fh.write("deep")
    os.close(fd)
    return depth


def forge_pickle(payload):
    """What a hostile game can do: replace the child's pickler, so that its result is `payload` (raw pickle
    bytes, no out-of-band buffers)."""
    from pipeline.core import sandbox_child

    sandbox_child._pickle_result = lambda _result: (payload, [])
    return None


def raw_symlink(name):
    """symlinkat(2) in the scratch folder through the child's own ctypes handle (past the audit hook)."""
    import ctypes

    try:
        return sandbox_child._syscall(SYS["symlinkat"], b"/etc", ctypes.c_int(AT_FDCWD), os.fsencode(name))
    except OSError as err:
        return f"errno {err.errno}"


def python_symlink(name):
    try:
        os.symlink("/etc", name)
    except PermissionError:
        return "caught"
    return "made"


def leave_daemon_thread(spin):
    """A daemon thread left running: sleeping, or spinning for good."""
    def forever():
        while True:
            if not spin:
                time.sleep(1)

    threading.Thread(target=forever, name="lingering-daemon", daemon=True).start()
    return "returned"


def leave_raw_thread(_arg=None):
    """A thread started below the threading module (no Thread object), then an ordinary exception."""
    import _thread

    _thread.start_new_thread(time.sleep, (60,))
    raise ValueError("and raised")


def pid_and_threads(_arg=None):
    return os.getpid(), sorted(int(n) for n in os.listdir("/proc/self/task"))


def killpg(group):
    os.killpg(group, 0)  # signal 0: nothing is delivered, the target is only checked
    return "sent"


def raise_memory_error(message):
    raise MemoryError(message)


def reraise_memory_error(n_bytes):
    """A real allocation failure, caught and raised again as the code's own: the limit was reached all the same."""
    try:
        return len(bytearray(n_bytes))
    except MemoryError:
        raise MemoryError("could not allocate") from None


_held_open: list[int] = []


def use_up_files(_arg=None):
    """Holds every file descriptor it can get past its call (the thread check then cannot list the threads)."""
    try:
        while True:
            _held_open.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    return len(_held_open)
