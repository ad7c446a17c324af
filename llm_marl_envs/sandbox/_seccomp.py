"""Seccomp filter: the kernel refuses process creation, networking and access to other processes.

The audit hook stops (and reports) these operations at the Python level; this filter makes the
kernel refuse them too, so a program that gets past the hook (a C extension, a bug in the hook)
still cannot start a process, open a network socket, connect to a UNIX socket on the file system,
or signal, trace, renice or re-limit a process other than itself. Denied calls fail with EPERM
(clone3 with ENOSYS, so that threads fall back to clone, which is allowed for threads only).

Only x86_64 has a system call table here; elsewhere `supported()` is False and the server says so.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_CLONE_THREAD = 0x00010000
_AF_UNIX = 1

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO, _RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data; args[i] starts at 16 + 8 * i (low word first)

_PR_GET_SECCOMP, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 21, 22, 2
_libc = ctypes.CDLL(None, use_errno=True)

NR = {  # x86_64
    "socket": 41, "connect": 42, "accept": 43, "sendto": 44, "sendmsg": 46, "bind": 49, "listen": 50,
    "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "kill": 62, "ptrace": 101, "rt_sigqueueinfo": 129,
    "setpriority": 141, "sched_setparam": 142, "sched_setscheduler": 144, "iopl": 172, "ioperm": 173,
    "pivot_root": 155, "chroot": 161, "acct": 163, "mount": 165, "umount2": 166, "swapon": 167,
    "swapoff": 168, "reboot": 169, "init_module": 175, "delete_module": 176, "tkill": 200,
    "sched_setaffinity": 203, "tgkill": 234, "kexec_load": 246, "add_key": 248, "request_key": 249,
    "keyctl": 250, "ioprio_set": 251, "migrate_pages": 256, "unshare": 272, "move_pages": 279,
    "accept4": 288, "rt_tgsigqueueinfo": 297, "perf_event_open": 298, "prlimit64": 302,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "sendmmsg": 307, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "finit_module": 313, "sched_setattr": 314,
    "kexec_file_load": 320, "bpf": 321, "execveat": 322, "userfaultfd": 323, "pidfd_send_signal": 424,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_open": 434,
    "clone3": 435, "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442,
}

DENIED = (
    # processes and programs
    "fork", "vfork", "execve", "execveat",
    # network, and UNIX sockets on the file system (socketpair stays allowed: asyncio needs it)
    "connect", "bind", "listen", "accept", "accept4", "sendmsg", "sendmmsg",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "tkill", "pidfd_open",
    "pidfd_send_signal", "pidfd_getfd", "ioprio_set",
    # namespaces, mounts and kernel attack surface
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "iopl", "ioperm", "name_to_handle_at", "open_by_handle_at",
)
SELF_ONLY = ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "prlimit64", "sched_setaffinity",
             "sched_setparam", "sched_setscheduler", "sched_setattr", "migrate_pages", "move_pages")
"""System calls whose first argument names a process: allowed for 0 (itself) or its own pid."""


def supported() -> bool:
    """An x86_64 kernel with seccomp (PR_GET_SECCOMP fails where it is compiled out)."""
    return platform.machine() == "x86_64" and _libc.prctl(ctypes.c_int(_PR_GET_SECCOMP), *(ctypes.c_ulong(0),) * 4) >= 0


def _arg(i: int, high: bool = False) -> int:
    return 16 + 8 * i + (4 if high else 0)


def build(pid: int) -> bytes:
    """The BPF program for the process `pid` (struct sock_filter[]), assembled with labels."""
    me, group = pid & 0xFFFFFFFF, -pid & 0xFFFFFFFF
    code: list[tuple] = [
        (_LD_ABS, 0, 0, _ARCH), (_JEQ, 0, "kill", _AUDIT_ARCH_X86_64),
        (_LD_ABS, 0, 0, _NR), (_JGE, "eperm", 0, _X32_SYSCALL_BIT),
        *[(_JEQ, "eperm", 0, NR[name]) for name in DENIED],
        (_JEQ, "enosys", 0, NR["clone3"]),
        (_JEQ, "clone", 0, NR["clone"]),
        (_JEQ, "socket", 0, NR["socket"]),
        (_JEQ, "sendto", 0, NR["sendto"]),
        (_JEQ, "setpriority", 0, NR["setpriority"]),
        (_JEQ, "kill_syscall", 0, NR["kill"]),
        *[(_JEQ, "self_only", 0, NR[name]) for name in SELF_ONLY],
        (_RET, 0, 0, _RET_ALLOW),
        "clone", (_LD_ABS, 0, 0, _arg(0)), (_JSET, "allow", "eperm", _CLONE_THREAD),
        "socket", (_LD_ABS, 0, 0, _arg(0)), (_JEQ, "allow", "eperm", _AF_UNIX),
        # sendto with a destination address reaches a socket the program did not connect to
        "sendto", (_LD_ABS, 0, 0, _arg(4)), (_JEQ, 0, "eperm", 0), (_LD_ABS, 0, 0, _arg(4, high=True)),
        (_JEQ, "allow", "eperm", 0),
        "setpriority", (_LD_ABS, 0, 0, _arg(0)), (_JEQ, 0, "eperm", 0), (_LD_ABS, 0, 0, _arg(1)),
        (_JEQ, "allow", 0, 0), (_JEQ, "allow", "eperm", me),
        "kill_syscall", (_LD_ABS, 0, 0, _arg(0)), (_JEQ, "allow", "self_only", group),
        "self_only", (_LD_ABS, 0, 0, _arg(0)), (_JEQ, "allow", 0, 0), (_JEQ, "allow", "eperm", me),
        "allow", (_RET, 0, 0, _RET_ALLOW),
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


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Filter:
    """The filter, assembled once in the fork server; a child only writes its pid into it."""

    _PROBE = 1_000_003  # a pid that no other constant of the program equals

    def __init__(self) -> None:
        program = build(self._PROBE)
        me, group = self._PROBE, -self._PROBE & 0xFFFFFFFF
        # (offset of the k field, whether it holds -pid) for every pid-dependent constant
        self._slots = [(i + 4, k == group) for i in range(0, len(program), 8)
                       for k in struct.unpack_from("=I", program, i + 4) if k in (me, group)]
        self._buffer = ctypes.create_string_buffer(program, len(program))
        self._prog = _SockFprog(len(program) // 8, ctypes.cast(self._buffer, ctypes.c_void_p))

    def _patch(self, pid: int) -> None:
        for offset, negated in self._slots:
            struct.pack_into("=I", self._buffer, offset, (-pid if negated else pid) & 0xFFFFFFFF)

    def apply(self, pid: int) -> None:
        """Install the filter on this process, `pid` (irreversible; needs no_new_privs)."""
        self._patch(pid)
        if _libc.prctl(ctypes.c_int(_PR_SET_SECCOMP), ctypes.c_ulong(_SECCOMP_MODE_FILTER), ctypes.byref(self._prog),
                       ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
