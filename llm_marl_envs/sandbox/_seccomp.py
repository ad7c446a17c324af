"""Seccomp filter: the kernel refuses process creation, networking and access to other processes.

The audit hook stops (and reports) these operations at the Python level; this filter makes the
kernel refuse them too, so a program that gets past the hook (a C extension, a bug in the hook)
still cannot start a process or another program, open a network socket, connect to a UNIX socket
on the file system, signal, trace, renice or re-limit a process other than itself, or set an
extended attribute or a file's flags.

One filter confines the fork server and, by inheritance, every program it forks: it is installed
right before the fork server is executed, since the fork server never loads ctypes (see `_kernel`).
The server and its programs differ only in who they are, which a filter cannot see, so the few
system calls where that matters go to the supervisor (seccomp user notification, Linux >= 5.6
here): process creation (only the fork server may fork), execve (only the one that starts the fork
server), and the calls that name another process (kill, tgkill, prlimit64, sched_*...: a program
may name only itself). Everything else is decided in the kernel; denied calls fail with EPERM
(clone3 with ENOSYS, so that threads fall back to clone, which is allowed for threads).

Only x86_64 has a system call table here; elsewhere `supported()` is False and the server says so.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import platform
import struct
from typing import NamedTuple

from _guard import INODE_ATTRIBUTE_IOCTLS  # imported by name, as the supervisor does (see `_supervisor`)

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_CLONE_THREAD = 0x00010000
_CLONE_NAMESPACES = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_AF_UNIX = 1
_PRIO_PROCESS = 0

_LD_ABS, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_RET_ALLOW, _RET_NOTIFY, _RET_ERRNO, _RET_KILL_PROCESS = 0x7FFF0000, 0x7FC00000, 0x00050000, 0x80000000
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data; args[i] starts at 16 + 8 * i (low word first)

_SYS_SECCOMP, _SET_MODE_FILTER, _FLAG_NEW_LISTENER = 317, 1, 1 << 3
_NOTIF_RECV, _NOTIF_SEND, _NOTIF_ID_VALID = 0xC0502100, 0xC0182101, 0x80082102
_FLAG_CONTINUE = 1
_NOTIF = struct.Struct("=QIIiIQ6Q")  # struct seccomp_notif: id, pid, flags, then seccomp_data
_RESP = struct.Struct("=QqiI")  # struct seccomp_notif_resp: id, val, error, flags

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

NR = {  # x86_64
    "ioctl": 16, "socket": 41, "connect": 42, "accept": 43, "sendto": 44, "sendmsg": 46, "bind": 49, "listen": 50,
    "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "kill": 62, "ptrace": 101, "rt_sigqueueinfo": 129,
    "setpriority": 141, "sched_setparam": 142, "sched_setscheduler": 144, "iopl": 172, "ioperm": 173,
    "pivot_root": 155, "chroot": 161, "acct": 163, "mount": 165, "umount2": 166, "swapon": 167,
    "swapoff": 168, "reboot": 169, "init_module": 175, "delete_module": 176, "setxattr": 188,
    "lsetxattr": 189, "fsetxattr": 190, "tkill": 200,
    "sched_setaffinity": 203, "tgkill": 234, "kexec_load": 246, "add_key": 248, "request_key": 249,
    "keyctl": 250, "ioprio_set": 251, "migrate_pages": 256, "unshare": 272, "move_pages": 279,
    "accept4": 288, "rt_tgsigqueueinfo": 297, "perf_event_open": 298, "prlimit64": 302,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "sendmmsg": 307, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "finit_module": 313, "sched_setattr": 314,
    "kexec_file_load": 320, "bpf": 321, "execveat": 322, "userfaultfd": 323, "pidfd_send_signal": 424,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "clone3": 435, "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442, "setxattrat": 463,
    "file_setattr": 469,
}

DENIED = (
    # processes (glibc's fork uses clone, decided below)
    "fork", "vfork",
    # network, and UNIX sockets on the file system (socketpair stays allowed: asyncio needs it)
    "connect", "bind", "listen", "accept", "accept4", "sendmsg", "sendmmsg",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "tkill",
    "pidfd_send_signal", "pidfd_getfd", "ioprio_set",
    # namespaces, mounts and kernel attack surface
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "iopl", "ioperm", "name_to_handle_at", "open_by_handle_at",
    # extended attributes: the fork server tells that a run left nothing in its directory without
    # reading a name the program chose (see `_server._left_nothing`), and there is no such way for
    # extended attributes; programs have no need to set any
    "setxattr", "lsetxattr", "fsetxattr", "setxattrat",
    # a file's own attributes (its flags: also the ioctls of _guard.INODE_ATTRIBUTE_IOCTLS, below),
    # which would outlive the emptying of the run directory
    "file_setattr",
)
SELF_ONLY = ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "prlimit64", "sched_setaffinity",
             "sched_setparam", "sched_setscheduler", "sched_setattr", "migrate_pages", "move_pages")
"""System calls whose first argument names a process: 0 (the caller) is decided in the kernel,
any other value by the supervisor (the caller itself, or anything for the fork server)."""


def supported() -> bool:
    """An x86_64 kernel with seccomp (PR_GET_SECCOMP fails where it is compiled out) and
    pidfd_getfd (Linux >= 5.6, which also brings the user-notification features used here)."""
    if platform.machine() != "x86_64" or _libc.prctl(ctypes.c_int(21), *(ctypes.c_ulong(0),) * 4) < 0:
        return False
    _libc.syscall(ctypes.c_long(NR["pidfd_getfd"]), ctypes.c_long(-1), ctypes.c_long(0), ctypes.c_long(0))
    return ctypes.get_errno() == errno.EBADF  # ENOSYS on older kernels


def _arg(i: int, high: bool = False) -> int:
    return 16 + 8 * i + (4 if high else 0)


def build() -> bytes:
    """The BPF program (struct sock_filter[]), assembled with labels."""
    code: list[tuple | str] = [
        (_LD_ABS, 0, 0, _ARCH), (_JEQ, 0, "kill", _AUDIT_ARCH_X86_64),
        (_LD_ABS, 0, 0, _NR), (_JSET, "eperm", 0, _X32_SYSCALL_BIT),
        *[(_JEQ, "eperm", 0, NR[name]) for name in DENIED],
        (_JEQ, "enosys", 0, NR["clone3"]),
        (_JEQ, "clone", 0, NR["clone"]),
        (_JEQ, "notify", 0, NR["execve"]),
        (_JEQ, "notify", 0, NR["execveat"]),
        (_JEQ, "socket", 0, NR["socket"]),
        (_JEQ, "sendto", 0, NR["sendto"]),
        (_JEQ, "setpriority", 0, NR["setpriority"]),
        (_JEQ, "ioctl", 0, NR["ioctl"]),
        *[(_JEQ, "self_only", 0, NR[name]) for name in ("kill", *SELF_ONLY)],
        (_RET, 0, 0, _RET_ALLOW),
        "clone", (_LD_ABS, 0, 0, _arg(0)), (_JSET, "eperm", 0, _CLONE_NAMESPACES),
        (_JSET, "allow", "notify", _CLONE_THREAD),
        "socket", (_LD_ABS, 0, 0, _arg(0)), (_JEQ, "allow", "eperm", _AF_UNIX),
        # sendto with a destination address reaches a socket the program did not connect to
        "sendto", (_LD_ABS, 0, 0, _arg(4)), (_JEQ, 0, "eperm", 0), (_LD_ABS, 0, 0, _arg(4, high=True)),
        (_JEQ, "allow", "eperm", 0),
        "setpriority", (_LD_ABS, 0, 0, _arg(1)), (_JEQ, "allow", "notify", 0),
        # the kernel takes an ioctl's request as 32 bits
        "ioctl", (_LD_ABS, 0, 0, _arg(1)), *[(_JEQ, "eperm", 0, request) for request in INODE_ATTRIBUTE_IOCTLS],
        (_RET, 0, 0, _RET_ALLOW),
        # kill(0, sig) is the caller's own process group; for the others 0 is the caller itself
        "self_only", (_LD_ABS, 0, 0, _arg(0)), (_JEQ, 0, "notify", 0), (_LD_ABS, 0, 0, _arg(0, high=True)),
        (_JEQ, "allow", "notify", 0),
        "allow", (_RET, 0, 0, _RET_ALLOW),
        "notify", (_RET, 0, 0, _RET_NOTIFY),
        "eperm", (_RET, 0, 0, _RET_ERRNO | errno.EPERM),
        "enosys", (_RET, 0, 0, _RET_ERRNO | errno.ENOSYS),
        "kill", (_RET, 0, 0, _RET_KILL_PROCESS),
    ]
    labels: dict[str, int] = {}
    instructions: list[tuple] = []
    for item in code:
        if isinstance(item, str):
            labels[item] = len(instructions)
        else:
            instructions.append(item)
    out = bytearray()
    for i, (op, jt, jf, k) in enumerate(instructions):
        jumps = [labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if not all(0 <= j <= 255 for j in jumps):
            raise ValueError(f"seccomp jump out of range at instruction {i}")
        out += struct.pack("=HBBI", op, jumps[0], jumps[1], k)
    return bytes(out)


def install() -> int:
    """Install the filter on this process (irreversible; needs no_new_privs) and return the
    listener descriptor on which its notifications arrive (close-on-exec: the caller hands it to
    the supervisor before it executes anything)."""
    program = build()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = ctypes.create_string_buffer(struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(buffer)), 16)
    fd = _libc.syscall(ctypes.c_long(_SYS_SECCOMP), ctypes.c_long(_SET_MODE_FILTER), ctypes.c_long(_FLAG_NEW_LISTENER), fprog)
    if fd < 0:
        raise OSError(ctypes.get_errno(), f"seccomp(SET_MODE_FILTER): {os.strerror(ctypes.get_errno())}")
    return int(fd)


# ----------------------------------------------------------------------------------- supervisor

class Notification(NamedTuple):
    """One system call waiting for the supervisor's decision."""

    id: int
    tid: int
    """The calling thread, as the supervisor's PID namespace sees it."""
    nr: int
    args: tuple[int, ...]


def receive(listener: int) -> Notification | None:
    """The next notification, None if it vanished (the caller was killed meanwhile)."""
    buffer = bytearray(_NOTIF.size)
    try:
        fcntl.ioctl(listener, _NOTIF_RECV, buffer, True)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EINTR):
            return None
        raise
    nid, tid, _, nr, _, _, *args = _NOTIF.unpack(buffer)
    return Notification(nid, tid, nr, tuple(args))


def respond(listener: int, notification: Notification, allow: bool) -> None:
    """Let the call run as made, or fail it with EPERM."""
    reply = _RESP.pack(notification.id, 0, 0 if allow else -errno.EPERM, _FLAG_CONTINUE if allow else 0)
    try:
        fcntl.ioctl(listener, _NOTIF_SEND, reply)
    except OSError as exc:
        if exc.errno != errno.ENOENT:  # the caller is gone
            raise


def own_ids(tid: int) -> tuple[int, int] | None:
    """(process id, thread id) of a thread as its own PID namespace numbers them, from /proc."""
    try:
        with open(f"/proc/{tid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields["NStgid"].split()[-1]), int(fields["NSpid"].split()[-1])
    except (OSError, KeyError, ValueError, IndexError):
        return None


def _signed(value: int) -> int:
    """A pid_t argument (an int widened to a register) as a signed number."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def program_may(nr: int, args: tuple[int, ...], me: tuple[int, int]) -> bool:
    """Whether a sandboxed program (process `me[0]`, thread `me[1]`) may make this notified call:
    only on itself. Process creation and execve never."""
    pid, tid = me
    target = _signed(args[0])
    if nr == NR["kill"]:
        return target in (pid, -pid)  # itself, or its own process group (it leads its session)
    if nr == NR["setpriority"]:
        return args[0] == _PRIO_PROCESS and _signed(args[1]) in (pid, tid)
    if nr in {NR[n] for n in SELF_ONLY}:
        return target in (pid, tid)
    return False


def server_may(nr: int, args: tuple[int, ...], init: bool) -> bool:
    """Whether the fork server may make this notified call: fork (not into new namespaces), and
    signal or limit any process of its own; kill(-1) only as the init of its own PID namespace,
    where it reaches nothing but its programs. Never execve."""
    if nr == NR["clone"]:
        return not args[0] & _CLONE_NAMESPACES
    if nr in (NR["execve"], NR["execveat"]):
        return False
    if nr == NR["kill"] and _signed(args[0]) == -1:
        return init
    return True
