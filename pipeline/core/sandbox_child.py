"""The confined child of `pipeline.core.sandbox`: confine this process, then run calls sent over a pipe.

Started by `Sandbox` as ``python -P -m pipeline.core.sandbox_child`` in its own process group, with the request
pipe on stdin, the reply pipe on stdout and stderr on a log file in the scratch folder (its cwd). Before any
code from outside runs, it confines itself (each layer where the system allows it):

1. resource limits: address space, open files, file size, no core files (CPU is re-armed by the parent per call);
2. a new network namespace (no interface but a down loopback) and a new IPC namespace;
3. no capabilities (bounding, ambient, effective, permitted and inheritable sets emptied);
4. Landlock: every write-type filesystem right (and execute) only beneath the scratch folder, TCP bind and
   connect denied, signals and abstract unix sockets scoped to the sandbox;
5. a seccomp filter: no fork, exec, sockets, ptrace, mounts, namespaces, signals to other processes, new
   resource limits, io_uring, bpf, kernel keyrings, chmod/chown/xattrs, ... (see `_deny_rules`);
6. a Python audit hook refusing the same at the Python level (a second layer only).

Then it reports which layers are active and serves requests: ``(fn, arg)`` pickled by the parent, ``fn(arg)``
pickled back (its large numpy arrays out of band, in memory shared with the parent), or an error tag. Messages
are framed as one tag byte and an 8-byte big-endian length.
"""

from __future__ import annotations

import ctypes
import dis
import errno
import json
import os
import pickle
import platform
import resource
import signal
import struct
import sys
import threading
import time
import traceback
from time import monotonic

HEADER = struct.Struct(">cQ")  # tag, payload length
TAG_READY = b"B"   # payload: JSON {"layers": [...], "problems": [...]}
TAG_RESULT = b"R"  # payload: the pickled result
TAG_BUFFERS = b"O"  # payload: n (8 bytes), n buffer lengths (8 bytes each), the pickled result, the n buffers
#                     (the result's large buffers, out of band: `_pickle_result`), when they do not fit in
#                     the shared memory
TAG_SHARED = b"M"  # payload: n, the n buffer lengths, the pickled result; the n buffers are in the shared memory
#                    (the parent's memory file, `Sandbox._open_shared`), one after the other from its start
BUFFER_MIN_BYTES = 1 << 16  # buffers (numpy arrays) from this size travel out of band
MAX_BUFFERS = 1 << 16
LENGTH = struct.Struct(">Q")
TAG_ERROR = b"E"   # payload: JSON {"kind", "detail", "exc_type"}
TAG_CALL = b"C"    # parent -> child: pickled (fn, arg, output_bytes)
TAG_PROGRESS = b"P"  # empty: the code made progress (see `heartbeat`)
HEARTBEAT_EVERY_S = 0.25

# --- Linux constants -------------------------------------------------------------------------------------
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
CLONE_NEWNET = 0x40000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_THREAD = 0x00010000

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# Landlock (numbers are the same on every architecture)
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
FS_EXECUTE, FS_WRITE_FILE = 1 << 0, 1 << 1
FS_REMOVE_DIR, FS_REMOVE_FILE, FS_MAKE_CHAR, FS_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
FS_MAKE_REG, FS_MAKE_SOCK, FS_MAKE_FIFO, FS_MAKE_BLOCK, FS_MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

# System call numbers that differ between architectures (the generic table serves aarch64).
_SYSCALLS = {
    "x86_64": dict(
        fork=57, vfork=58, clone=56, clone3=435, execve=59, execveat=322, socket=41, ptrace=101, mount=165,
        umount2=166, pivot_root=155, chroot=161, unshare=272, setns=308, kill=62, tkill=200, tgkill=234,
        rt_sigqueueinfo=129, rt_tgsigqueueinfo=297, rt_sigaction=13, setrlimit=160, prlimit64=302,
        io_uring_setup=425, io_uring_enter=426, io_uring_register=427, bpf=321, perf_event_open=298,
        process_vm_readv=310, process_vm_writev=311, keyctl=250, add_key=248, request_key=249, kexec_load=246,
        kexec_file_load=320, init_module=175, finit_module=313, delete_module=176, reboot=169, swapon=167,
        swapoff=168, acct=163, settimeofday=164, clock_settime=227, adjtimex=159, clock_adjtime=305,
        sethostname=170, setdomainname=171, iopl=172, ioperm=173, open_by_handle_at=304, name_to_handle_at=303,
        userfaultfd=323, fsopen=430, fsconfig=431, fsmount=432, fspick=433, move_mount=429, open_tree=428,
        mount_setattr=442, pidfd_send_signal=424, pidfd_getfd=438, quotactl=179, quotactl_fd=443,
        personality=135, mknod=133, mknodat=259, chmod=90, fchmod=91, fchmodat=268, fchmodat2=452, chown=92,
        fchown=93, lchown=94, fchownat=260, setxattr=188, lsetxattr=189, fsetxattr=190, removexattr=197,
        lremovexattr=198, fremovexattr=199, setxattrat=463, removexattrat=466, utime=132, utimes=235,
        futimesat=261, utimensat=280, link=86, linkat=265, symlink=88, symlinkat=266, setpgid=109, setsid=112, ioctl=16, setpriority=141,
        sched_setparam=142, sched_setscheduler=144, sched_setaffinity=203, sched_setattr=314, ioprio_set=251,
        migrate_pages=256, move_pages=279, process_madvise=440, fanotify_init=300, syslog=103, vhangup=153,
        modify_ldt=154, uselib=134, lookup_dcookie=212, capset=126, lsm_set_self_attr=460, open_tree_attr=467,
        mq_open=240, msgget=68, semget=64, shmget=29, landlock_create_ruleset=444,
    ),
    "aarch64": dict(
        clone=220, clone3=435, execve=221, execveat=281, socket=198, ptrace=117, mount=40, umount2=39,
        pivot_root=41, chroot=51, unshare=97, setns=268, kill=129, tkill=130, tgkill=131, rt_sigqueueinfo=138,
        rt_tgsigqueueinfo=240, rt_sigaction=134, setrlimit=164, prlimit64=261, io_uring_setup=425,
        io_uring_enter=426, io_uring_register=427, bpf=280, perf_event_open=241, process_vm_readv=270,
        process_vm_writev=271, keyctl=219, add_key=217, request_key=218, kexec_load=104, kexec_file_load=294,
        init_module=105, finit_module=273, delete_module=106, reboot=142, swapon=224, swapoff=225, acct=89,
        settimeofday=170, clock_settime=112, adjtimex=171, clock_adjtime=266, sethostname=161,
        setdomainname=162, open_by_handle_at=265, name_to_handle_at=264, userfaultfd=282, fsopen=430,
        fsconfig=431, fsmount=432, fspick=433, move_mount=429, open_tree=428, mount_setattr=442,
        pidfd_send_signal=424, pidfd_getfd=438, quotactl=60, quotactl_fd=443, personality=92, mknodat=33,
        fchmod=52, fchmodat=53, fchmodat2=452, fchown=55, fchownat=54, setxattr=5, lsetxattr=6, fsetxattr=7,
        removexattr=14, lremovexattr=15, fremovexattr=16, setxattrat=463, removexattrat=466, utimensat=88,
        linkat=37, symlinkat=36, setpgid=154, setsid=157, ioctl=29, setpriority=140, sched_setparam=118,
        sched_setscheduler=119, sched_setaffinity=122, sched_setattr=274, ioprio_set=30, migrate_pages=238,
        move_pages=239, process_madvise=440, fanotify_init=262, syslog=116, vhangup=58, capset=91,
        lsm_set_self_attr=460, open_tree_attr=467, mq_open=180, msgget=186, semget=190, shmget=194,
        landlock_create_ruleset=444,
    ),
}
_ALWAYS_DENIED = (
    "fork", "vfork", "execve", "execveat", "socket", "ptrace", "mount", "umount2", "pivot_root", "chroot",
    "unshare", "setns", "tkill", "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf",
    "perf_event_open", "process_vm_readv", "process_vm_writev", "keyctl", "add_key", "request_key",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon",
    "swapoff", "acct", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "sethostname",
    "setdomainname", "iopl", "ioperm", "open_by_handle_at", "name_to_handle_at", "userfaultfd", "fsopen",
    "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr", "pidfd_send_signal",
    "pidfd_getfd", "quotactl", "quotactl_fd", "personality", "mknod", "mknodat", "chmod", "fchmod", "fchmodat",
    "fchmodat2", "chown", "fchown", "lchown", "fchownat", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
    "lremovexattr", "fremovexattr", "setxattrat", "removexattrat", "utime", "utimes", "futimesat", "utimensat",
    "link", "linkat", "symlink", "symlinkat", "setpgid", "setsid", "setpriority", "ioprio_set", "migrate_pages", "move_pages",
    "process_madvise", "fanotify_init", "syslog", "vhangup", "modify_ldt", "uselib", "lookup_dcookie",
    "capset", "lsm_set_self_attr", "open_tree_attr", "mq_open", "msgget", "semget", "shmget",
    "landlock_create_ruleset",
)
# Of those, the calls whose every Python way in is refused by the audit hook first (os.fork, subprocess, os.exec*,
# os.symlink, os.link, os.mkfifo, ...): code that reaches the kernel with one went around the hook on purpose
# (ctypes, a raw system call), so the filter ends the process (SIGSYS), and the parent reports the refusal. The
# rest answer EPERM: C libraries may try them and go on (a socket to nscd, a chmod), which is harmless.
_FATAL = frozenset({
    "fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2",
    "pivot_root", "chroot", "unshare", "setns", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "bpf", "symlink", "symlinkat", "link", "linkat", "mknod", "mknodat",
})
# Calls allowed only when their first argument is this process (or 0, "myself").
_OWN_PID_ONLY = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sched_setparam",
                 "sched_setscheduler", "sched_setaffinity", "sched_setattr")
TIOCSTI, TIOCLINUX = 0x5412, 0x541C

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int


def _syscall(nr: int, *args) -> int:
    ctypes.set_errno(0)
    result = _libc.syscall(ctypes.c_long(nr), *args)
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _prctl(option: int, *args) -> int:
    values = [ctypes.c_ulong(a) if isinstance(a, int) else a for a in args]
    values += [ctypes.c_ulong(0)] * (4 - len(values))
    result = _libc.prctl(ctypes.c_int(option), *values)
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


# --- the layers ------------------------------------------------------------------------------------------

def set_limits(config: dict) -> None:
    def lower(which: int, value: int) -> None:
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))

    lower(resource.RLIMIT_CORE, 0)
    lower(resource.RLIMIT_NOFILE, int(config["open_files"]))
    lower(resource.RLIMIT_FSIZE, int(config["file_bytes"]))
    lower(resource.RLIMIT_AS, int(config["memory_bytes"]))
    # CPU: a soft limit for the start-up (the parent re-arms it before each call); the hard limit stays where the
    # parent can move it (infinite unless the parent may raise limits, then a margin above the soft limit).
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (max(1, int(config["cpu_s"]) + 1), hard))


def unshare_namespaces() -> str | None:
    """A new network and IPC namespace: directly as root, else inside a new user namespace mapping our ids."""
    libc_unshare = _libc.unshare
    if libc_unshare(ctypes.c_int(CLONE_NEWNET | CLONE_NEWIPC)) == 0:
        return "network namespace"
    uid, gid = os.getuid(), os.getgid()
    if libc_unshare(ctypes.c_int(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC)) != 0:
        return None
    try:
        for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                           ("/proc/self/gid_map", f"{gid} {gid} 1")):
            with open(path, "w") as fh:
                fh.write(text)
    except OSError:
        pass
    return "network namespace (in a user namespace)"


def drop_capabilities() -> bool:
    _capset = _SYSCALLS.get(platform.machine(), {}).get("capset")
    try:
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass
    for cap in range(64):
        try:
            _prctl(PR_CAPBSET_DROP, cap)
        except OSError as err:
            if err.errno == errno.EINVAL:  # past the last capability
                break
    if _capset is None:
        return False
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # two (effective, permitted, inheritable) sets, all empty
    try:
        _syscall(_capset, header, data)
    except OSError:
        return False
    return True


def landlock_abi() -> int:
    try:
        return _syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    except OSError:
        return 0


def apply_landlock(scratch: str, writable: tuple[str, ...] = ()) -> str | None:
    abi = landlock_abi()
    if abi < 1:
        return None
    write_rights = (FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SYM
                    | FS_MAKE_FIFO)
    handled = write_rights | FS_EXECUTE | FS_MAKE_CHAR | FS_MAKE_BLOCK | FS_MAKE_SOCK
    if abi >= 2:
        handled |= FS_REFER  # handled and never granted: no links or renames across folders
    if abi >= 3:
        handled |= FS_TRUNCATE
        write_rights |= FS_TRUNCATE
    if abi >= 5:
        handled |= FS_IOCTL_DEV
    fields = [handled]
    if abi >= 4:
        fields.append(NET_BIND_TCP | NET_CONNECT_TCP)
    if abi >= 6:
        fields.append(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    attr = (ctypes.c_uint64 * len(fields))(*fields)
    ruleset = _syscall(SYS_LANDLOCK_CREATE_RULESET, attr, ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    try:
        for folder in (scratch, *writable):
            fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
            try:
                rule = struct.pack("=Qi", write_rights, fd)  # struct landlock_path_beneath_attr (packed)
                buf = ctypes.create_string_buffer(rule, len(rule))
                _syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                         buf, ctypes.c_uint32(0))
            finally:
                os.close(fd)
        _syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    extra = ", TCP denied" if abi >= 4 else ""
    extra += ", signals scoped" if abi >= 6 else ""
    where = "the scratch folder" + (f" and {', '.join(writable)}" if writable else "")
    return f"Landlock ABI {abi} (writes only in {where}{extra})"


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


_LD_W_ABS, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_NR, _ARCH = 0, 4


def _arg_lo(i: int) -> int:
    return 16 + 8 * i


def _arg_hi(i: int) -> int:
    return 20 + 8 * i


def seccomp_program(machine: str, pid: int) -> list[tuple[int, int, int, int]]:
    """The BPF program: (code, jt, jf, k) instructions. Unknown architecture: KeyError."""
    nrs = _SYSCALLS[machine]
    arch = AUDIT_ARCH[machine]
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    allow = SECCOMP_RET_ALLOW
    prog: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, _ARCH), (_JEQ, 1, 0, arch), (_RET, 0, 0, SECCOMP_RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if machine == "x86_64":  # the x32 ABI's numbers (bit 30) would bypass the table
        prog += [(_JSET, 0, 1, 0x40000000), (_RET, 0, 0, eperm)]

    def block(nr: int, body: list[tuple[int, int, int, int]]) -> None:
        # if nr matches: the body, which ends in RET (so a skipped body leaves the accumulator holding nr)
        prog.append((_JEQ, 0, len(body), nr))
        prog.extend(body)

    own_pid_checks = [(_LD_W_ABS, 0, 0, _arg_lo(0)), (_JEQ, 3, 0, pid), (_JEQ, 2, 0, 0),
                      (_JEQ, 1, 0, (-pid) & 0xFFFFFFFF), (_RET, 0, 0, eperm), (_RET, 0, 0, allow)]

    kill = SECCOMP_RET_KILL_PROCESS
    for name in _ALWAYS_DENIED:
        if name in nrs:
            block(nrs[name], [(_RET, 0, 0, kill if name in _FATAL else eperm)])
    # clone: threads only (CLONE_THREAD in the flags, args[0] on both architectures); a process is a fork
    block(nrs["clone"], [(_LD_W_ABS, 0, 0, _arg_lo(0)), (_JSET, 0, 1, CLONE_THREAD), (_RET, 0, 0, allow),
                         (_RET, 0, 0, kill)])
    # clone3: ENOSYS, so the C library falls back to clone, whose flags can be checked
    block(nrs["clone3"], [(_RET, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS)])
    for name in _OWN_PID_ONLY:
        block(nrs[name], own_pid_checks)
    # setrlimit(resource, new) / prlimit64(pid, resource, new, old): reading is fine, setting is not
    for name, arg in (("setrlimit", 1), ("prlimit64", 2)):
        block(nrs[name], [(_LD_W_ABS, 0, 0, _arg_lo(arg)), (_JEQ, 0, 3, 0), (_LD_W_ABS, 0, 0, _arg_hi(arg)),
                          (_JEQ, 0, 1, 0), (_RET, 0, 0, allow), (_RET, 0, 0, eperm)])
    # rt_sigaction(SIGXCPU, new != NULL, ...): the CPU limit's signal cannot be caught or ignored
    block(nrs["rt_sigaction"], [(_LD_W_ABS, 0, 0, _arg_lo(0)), (_JEQ, 0, 5, int(signal.SIGXCPU)),
                                (_LD_W_ABS, 0, 0, _arg_lo(1)), (_JEQ, 0, 2, 0), (_LD_W_ABS, 0, 0, _arg_hi(1)),
                                (_JEQ, 1, 0, 0), (_RET, 0, 0, eperm), (_RET, 0, 0, allow)])
    # ioctl: no faking terminal input
    block(nrs["ioctl"], [(_LD_W_ABS, 0, 0, _arg_lo(1)), (_JEQ, 1, 0, TIOCSTI), (_JEQ, 0, 1, TIOCLINUX),
                         (_RET, 0, 0, eperm), (_RET, 0, 0, allow)])
    prog.append((_RET, 0, 0, allow))
    return prog


def apply_seccomp(pid: int) -> str | None:
    machine = platform.machine()
    if machine not in _SYSCALLS:
        return None
    prog = seccomp_program(machine, pid)
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), ctypes.cast(filters, ctypes.POINTER(_SockFilter)))
    try:
        _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog))
    except OSError:
        return None
    return "seccomp (no fork, exec, sockets, ptrace, mounts or signals to other processes)"


_refusals: list[str] = []  # what the audit hook refused during the current call


def _short(path) -> str:
    text = repr(os.fsdecode(path)) if isinstance(path, (str, bytes, os.PathLike)) else repr(path)
    return text if len(text) <= 120 else text[:119] + "…"


def install_audit_hook(scratch: str, writable: tuple[str, ...] = ()) -> None:
    """Refuse, at the Python level, what the kernel layers refuse too (a second layer only)."""
    allowed = [os.path.realpath(p) for p in (scratch, *writable)]
    pid = os.getpid()
    own_group = os.getpgrp() == pid  # it leads its own process group (not its parent's)
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    refused = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
               "pty.spawn", "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo",
               "socket.gethostbyname", "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata",
               "ctypes.cdata/buffer", "resource.setrlimit", "resource.prlimit", "os.setpgid", "os.setsid",
               "os.chmod", "os.chown", "os.link", "os.symlink", "os.utime", "os.startfile", "webbrowser.open",
               "sys.remote_exec"}
    path_events = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.truncate", "os.replace",
                   "shutil.rmtree", "shutil.move", "shutil.copyfile", "os.mkfifo", "os.mknod"}

    def outside(path) -> bool:
        if isinstance(path, int):
            return False
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return True
        return not any(real == root or real.startswith(root + os.sep) for root in allowed)

    def refuse(what: str) -> None:
        if len(_refusals) < 20:
            _refusals.append(what)
        raise PermissionError(f"sandbox: {what} is refused")

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = (list(args) + [None, None, 0])[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & write_flags)
            if writing and path is not None and outside(path):
                refuse(f"writing outside the scratch folder ({_short(path)})")
        elif event in refused:
            refuse(event)
        elif event in path_events:
            for path in args[:2]:
                if isinstance(path, (str, bytes, os.PathLike)) and outside(path):
                    refuse(f"{event} outside the scratch folder ({_short(path)})")
        elif event == "os.killpg":
            # group 0 is the caller's own: a group of this process alone, since it leads it (the sandbox starts it
            # in a session of its own, and it can neither fork nor change groups), so the same as os.kill(0)
            target = args[0] if args else None
            if not (target == 0 and own_group):
                refuse(f"os.killpg of process group {target!r}, not its own")
        elif event == "os.kill":
            target = args[0] if args else None
            if isinstance(target, int) and target not in (0, pid):
                refuse("os.kill of another process")

    sys.addaudithook(hook)


# --- serving ---------------------------------------------------------------------------------------------

def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _send(fd: int, tag: bytes, payload: bytes) -> None:
    with _reply_lock:
        _send_unlocked(fd, tag, payload)


def _send_unlocked(fd: int, tag: bytes, payload: bytes) -> None:
    view = memoryview(HEADER.pack(tag, len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


def _write_all(fd: int, parts: list) -> None:
    for part in parts:
        view = memoryview(part).cast("B")
        while view:
            view = view[os.write(fd, view):]


def _pickle_result(result) -> tuple[bytes, list]:
    """The pickled result, and the raw memory of its large buffers (numpy arrays of BUFFER_MIN_BYTES or more, say
    frames) kept out of the pickle: written as they are, not copied into it, and read by the parent straight into
    buffers of its own (pickle protocol 5)."""
    buffers: list = []

    def keep(buffer: pickle.PickleBuffer) -> bool:  # False: out of band
        raw = buffer.raw()
        if raw.nbytes < BUFFER_MIN_BYTES:
            return True
        buffers.append(raw)
        return False

    return pickle.dumps(result, protocol=5, buffer_callback=keep), buffers


_shared = None  # the memory shared with the parent (an mmap), if it gave one


def _send_result(fd: int, payload: bytes, buffers: list) -> None:
    if not buffers:
        _send(fd, TAG_RESULT, payload)
        return
    head = LENGTH.pack(len(buffers)) + b"".join(LENGTH.pack(b.nbytes) for b in buffers)
    size = sum(b.nbytes for b in buffers)
    with _reply_lock:
        if _shared is not None and size <= len(_shared):  # the buffers in the shared memory, the rest by the pipe
            at = 0
            for b in buffers:
                _shared[at:at + b.nbytes] = b
                at += b.nbytes
            _write_all(fd, [HEADER.pack(TAG_SHARED, len(head) + len(payload)), head, payload])
        else:
            _write_all(fd, [HEADER.pack(TAG_BUFFERS, len(head) + len(payload) + size), head, payload, *buffers])


def _error(kind: str, detail: str, exc_type: str = "") -> bytes:
    return json.dumps({"kind": kind, "detail": detail, "exc_type": exc_type}).encode()


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_RAISE = dis.opmap["RAISE_VARARGS"]


def _raised_by_statement(err: BaseException) -> bool:
    """Whether `err` was raised by a `raise` statement (its innermost traceback entry is one), not by an
    operation that failed (an allocation, a call into C)."""
    tb = err.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    raw = tb.tb_frame.f_code.co_code
    return 0 <= tb.tb_lasti < len(raw) and raw[tb.tb_lasti] == _RAISE


def memory_limit_reached(err: BaseException) -> bool:
    """Whether a MemoryError says the memory limit was reached: an allocation failed (Python's, numpy's, or a
    size no limit allows), here or in an exception it was raised from. One the code raised itself
    (`raise MemoryError("...")`, with no failed allocation behind it) is the code's own exception."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [err]
    while stack and len(seen) < 100:
        exc = stack.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, MemoryError) and not _raised_by_statement(exc):
            return True
        stack.extend((exc.__cause__, exc.__context__))
    return False


def _memory_limit_text() -> str:
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return "" if soft == resource.RLIM_INFINITY else f" of {soft / (1 << 20):g} MiB"


def _describe(err: BaseException) -> tuple[str, str, str]:
    cls = type(err)
    name = f"{cls.__module__}.{cls.__qualname__}" if cls.__module__ != "builtins" else cls.__qualname__
    if isinstance(err, MemoryError) and memory_limit_reached(err):
        said = f": {err}" if str(err) else ""
        return "memory", _one_line(f"the code ran out of its memory limit{_memory_limit_text()} "
                                   f"(MemoryError{said})"), name
    if isinstance(err, SystemExit):
        return "exited", _one_line(f"the code called sys.exit({err.code!r})"), name
    return "error", _one_line(f"{cls.__qualname__}: {err}"), name


THREADS_DIR = "/proc/self/task"  # one entry per thread of this process (Linux)
THREAD_GRACE_S = 0.5  # how long a thread the code started may take to finish its exit after the call ends
_lists_threads = False  # whether this system lists a process's threads (found before any outside code runs)


def os_threads(folder: str = THREADS_DIR) -> frozenset[int] | None:
    """The kernel's ids of a process's threads (every thread, however started: threading, _thread, C), or None
    where they cannot be listed."""
    try:
        return frozenset(int(name) for name in os.listdir(folder))
    except (OSError, ValueError):
        return None


def _thread_snapshot() -> tuple[list, frozenset[int] | None]:
    """The threads alive as a call starts (the sandbox's own: parent watcher, progress monitor, watchdog): the
    Python thread objects (kept referenced, so that their ids stay theirs) and the kernel's thread ids."""
    return list(threading.enumerate()), os_threads() if _lists_threads else None


def _threads_left(before: tuple[list, frozenset[int] | None]) -> str | None:
    """What the code left running: the threads that did not exist as its call started and are still alive after
    it (daemon or not), waiting up to THREAD_GRACE_S for those that are only finishing their exit (a thread
    the code joined ends in the kernel a moment after it ends for Python); None if there are none."""
    try:
        return _threads_left_unguarded(before)
    except MemoryError:
        return "the sandbox ran out of memory checking whether the code left a thread running after its call"


def _threads_left_unguarded(before: tuple[list, frozenset[int] | None]) -> str | None:
    py_before, os_before = before
    known = {id(t) for t in py_before}
    deadline, pause = monotonic() + THREAD_GRACE_S, 0.001
    while True:
        py_new = [t for t in threading.enumerate() if id(t) not in known and threading.Thread.is_alive(t)]
        os_now = os_threads() if _lists_threads else None
        if _lists_threads and (os_before is None or os_now is None):  # the code used up the open files: fail closed
            return ("the sandbox could not list its threads around the call (no file descriptor left?), so it "
                    "cannot tell whether the code left one running")
        os_new = os_now - os_before if os_now is not None and os_before is not None else frozenset()
        if not py_new and not os_new:
            return None
        if monotonic() >= deadline:
            break
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    names = []
    for t in py_new[:3]:
        try:
            kind = "daemon " if threading.Thread.daemon.fget(t) else ""
            names.append(f"{kind}thread {str(threading.Thread.name.fget(t))[:60]!r}")
        except Exception:  # noqa: BLE001 - a thread object of the code's own making
            names.append("a thread")
    n = max(len(py_new), len(os_new))
    if not names:
        names.append(f"{len(os_new)} thread(s) started outside Python's threading module")
    return (f"the code left {n} thread(s) running after its call ({', '.join(names)}): code run by arcstudy must "
            "not outlive its call (the process was ended; the next call gets a fresh one)")


def _refused(left: str | None = None) -> bytes | None:
    """The refusal report of the call that just ended: the code tried something refused, or `left` threads."""
    if _refusals:
        more = f" (and {len(_refusals) - 1} more refused attempt(s))" if len(_refusals) > 1 else ""
        return _error("refused", _one_line(f"the code tried {_refusals[0]}, which the sandbox refuses{more}"))
    if left:
        return _error("refused", _one_line(left))
    return None


def _watch_parent(fd: int) -> None:
    """End this process when the parent goes away (its end of the request pipe closes)."""
    import select

    poller = select.poll()
    poller.register(fd, 0)  # only POLLHUP / POLLERR are reported
    while True:
        for _fd, event in poller.poll():
            if event & (select.POLLHUP | select.POLLERR):
                os._exit(70)


_reply_fd: int | None = None
_reply_lock = threading.Lock()
_last_beat = 0.0
_in_call = False  # progress is reported only while a call runs (the parent reads it then)


def _set_in_call(value: bool) -> None:
    global _in_call
    with _reply_lock:  # no progress message is half-sent across the end of a call
        _in_call = value


def heartbeat() -> None:
    """Tell the parent the code is making progress (a game step finished): with `Limits.idle_s` the parent
    kills a call only when none came for that long. At most one message every HEARTBEAT_EVERY_S; nothing
    outside a sandbox, nor between calls."""
    global _last_beat
    if _reply_fd is None or not _in_call:
        return
    now = monotonic()  # runs after every game action: nothing here but the clock and a comparison
    if now - _last_beat < HEARTBEAT_EVERY_S:
        return
    _last_beat = now
    with _reply_lock:
        if _in_call:
            _send_unlocked(_reply_fd, TAG_PROGRESS, b"")


def _map_shared(config: dict) -> None:
    global _shared
    fd, size = config.get("shm_fd"), config.get("shm_bytes") or 0
    if not isinstance(fd, int) or not isinstance(size, int) or size <= 0:
        return
    import mmap

    try:
        _shared = mmap.mmap(fd, size)
    except (OSError, ValueError):
        _shared = None
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def main() -> None:
    global _reply_fd, _lists_threads
    # Run as __main__: the same module under its own name, so importing it (tests do) does not load it again.
    sys.modules.setdefault("pipeline.core.sandbox_child", sys.modules[__name__])
    # Protocol pipes away from fds 0/1, so that prints of outside code go to the log (fd 2), not the parent.
    rfd, wfd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    for fd in (rfd, wfd):
        os.set_inheritable(fd, False)
    tag, size = HEADER.unpack(_read_exact(rfd, HEADER.size))
    config = json.loads(_read_exact(rfd, size))
    _map_shared(config)
    scratch = os.getcwd()
    layers, problems = [], []
    try:
        set_limits(config)
        layers.append("resource limits")
    except (OSError, ValueError) as err:
        problems.append(f"resource limits: {err}")
    if config.get("confine", True):
        ns = unshare_namespaces()
        (layers.append(ns) if ns else problems.append("no network namespace (unshare refused)"))
        if drop_capabilities() and os.getuid() == 0:
            layers.append("no capabilities")
        try:
            _prctl(PR_SET_NO_NEW_PRIVS, 1)
        except OSError as err:
            problems.append(f"no_new_privs: {err}")
        try:
            ll = apply_landlock(scratch, tuple(config.get("writable") or ()))
        except OSError as err:
            ll = None
            problems.append(f"Landlock: {err}")
        (layers.append(ll) if ll else problems.append("no Landlock (writes are not confined by the kernel)"))
        sc = apply_seccomp(os.getpid())
        (layers.append(sc) if sc else problems.append("no seccomp filter"))
        # The engine's step watchdog calls this through ctypes; look it up before the audit hook refuses lookups.
        try:
            ctypes.pythonapi.PyThreadState_SetAsyncExc  # noqa: B018
        except AttributeError:
            pass
        install_audit_hook(scratch, tuple(config.get("writable") or ()))
        layers.append("audit hook")
    sys.dont_write_bytecode = True
    _lists_threads = os_threads() is not None  # before any outside code: the check below fails closed on it
    threading.Thread(target=_watch_parent, args=(rfd,), daemon=True, name="sandbox-parent-watch").start()
    preload = config.get("preload")
    if preload:
        try:
            import importlib

            module, _, func = preload.partition(":")
            target = importlib.import_module(module)
            if func:
                getattr(target, func)()
        except BaseException as err:  # noqa: BLE001 - reported to the parent as the start's failure
            kind, detail, name = _describe(err)
            _send(wfd, TAG_ERROR, _error(kind, f"preload {preload}: {detail}", name))
            os._exit(0)
    _refusals.clear()  # the preload is arcstudy's own code
    _send(wfd, TAG_READY, json.dumps({"layers": layers, "problems": problems}).encode())
    _reply_fd = wfd
    while True:
        try:
            tag, size = HEADER.unpack(_read_exact(rfd, HEADER.size))
            request = _read_exact(rfd, size)
        except EOFError:
            os._exit(0)
        _refusals.clear()
        before = None
        try:
            fn, arg, output_bytes = pickle.loads(request)
            before = _thread_snapshot()  # after arcstudy's own imports for fn, just before the code runs
            _set_in_call(True)
            try:
                result = fn(arg)
            finally:
                _set_in_call(False)
        except BaseException as err:  # noqa: BLE001 - every failure of the code goes back to the parent
            kind, detail, name = _describe(err)
            if os.environ.get("ARCSTUDY_SANDBOX_DEBUG"):
                traceback.print_exc()
            # a thread left is the call's failure too (the child is ended); after the memory limit the child is
            # ended anyway, and the memory limit is what is said
            left = _threads_left(before) if before is not None and kind != "memory" else None
            _send(wfd, TAG_ERROR, _refused(left) or _error(kind, detail, name))
            continue
        refused = _refused(_threads_left(before))
        if refused:  # the code tried what the sandbox refuses, even if it went on: that is its failure
            _send(wfd, TAG_ERROR, refused)
            continue
        try:
            payload, buffers = _pickle_result(result)
        except MemoryError:
            _send(wfd, TAG_ERROR, _error("memory", "the result did not fit in the memory limit", "MemoryError"))
            continue
        except Exception as err:  # noqa: BLE001
            _send(wfd, TAG_ERROR, _error("error", _one_line(f"the result cannot be sent back: {err}"),
                                         type(err).__qualname__))
            continue
        size = len(payload) + sum(b.nbytes for b in buffers)
        if size > output_bytes or len(buffers) > MAX_BUFFERS:
            _send(wfd, TAG_ERROR, _error("output_too_large", f"the result is {size:,} bytes, over the "
                                         f"limit of {output_bytes:,}"))
            continue
        _send_result(wfd, payload, buffers)


if __name__ == "__main__":
    main()
