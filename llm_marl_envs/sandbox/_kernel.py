"""Process-level confinement: namespaces, resource limits, privileges (fork-server side).

Resource limits only bind an unprivileged process (root may raise them again, and RLIMIT_NPROC
does not apply to uid 0 at all), so a child started by root either becomes `nobody` or, when
`nobody` could not even import the standard library (an interpreter under /root), stays uid 0
with every capability dropped: it can then neither raise a limit nor mount, trace or reconfigure
anything, and Landlock/seccomp confine what uid 0 could still reach.
"""

from __future__ import annotations

import ctypes
import math
import os
import resource
import signal
import struct

NOBODY = 65534
_CLONE_NEWNET, _CLONE_NEWIPC, _CLONE_NEWNS = 0x40000000, 0x08000000, 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 1, 24, 38
_CAPABILITY_VERSION_3 = 0x20080522
_LAST_CAP = 63

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int) -> int:
    return _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))


def unshare_namespaces(scratch_dir: str, scratch_mb: int) -> dict[str, bool]:
    """Move the calling process (the fork server, hence every child) into an empty network
    namespace (no interface but a down loopback), a private SysV IPC namespace, and a private
    mount namespace where `scratch_dir` is a tmpfs of `scratch_mb` MiB: the programs' working
    directories then live in memory and cannot fill the disk (RLIMIT_FSIZE caps one file only).

    Needs CAP_SYS_ADMIN; without it nothing changes, and seccomp/Landlock/the audit hook still
    refuse network access.
    """
    layers = {name: _libc.unshare(ctypes.c_int(flag)) == 0
              for name, flag in (("network_namespace", _CLONE_NEWNET), ("ipc_namespace", _CLONE_NEWIPC))}
    layers["scratch_tmpfs"] = False
    if _libc.unshare(ctypes.c_int(_CLONE_NEWNS)) == 0:
        # Private propagation first, so that the tmpfs never shows in the parent's namespace.
        if _libc.mount(None, b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None) == 0:
            options = f"size={int(scratch_mb)}m,mode=0711".encode()
            layers["scratch_tmpfs"] = _libc.mount(b"tmpfs", os.fsencode(scratch_dir), b"tmpfs",
                                                  ctypes.c_ulong(_MS_NOSUID | _MS_NODEV | _MS_NOEXEC), options) == 0
    return layers


def set_limits(cpu_time_s: float, memory_mb: int, file_bytes: int, *, no_processes: bool) -> None:
    """CPU seconds (SIGXCPU at the soft limit), address space, largest file, no core dumps, and
    with `no_processes` no new process or thread for an unprivileged user."""
    cpu = max(1, math.ceil(cpu_time_s))
    memory = int(memory_mb) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(file_bytes), int(file_bytes)))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    if no_processes:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))


def drop_privileges(workdir: str, to_nobody: bool) -> str:
    """Give up root: become `nobody` (owning `workdir`), or stay uid 0 without capabilities.
    Returns what the process now runs as."""
    if os.geteuid() != 0:
        return "unprivileged user"
    if to_nobody:
        os.chown(workdir, NOBODY, NOBODY)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        return "nobody"
    header = ctypes.create_string_buffer(struct.pack("=Ii", _CAPABILITY_VERSION_3, 0), 8)
    data = ctypes.create_string_buffer(bytes(24), 24)  # effective, permitted, inheritable: all empty
    if _libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    return "root without capabilities"


def release_scratch(scratch_dir: str) -> None:
    """Unmount the tmpfs (in this namespace only), so that removing `scratch_dir` removes it for
    every process, and remove it."""
    _libc.umount2(os.fsencode(scratch_dir), ctypes.c_int(_MNT_DETACH))
    try:
        os.rmdir(scratch_dir)
    except OSError:
        pass


def drop_bounding_set() -> bool:
    """Empty the capability bounding set (fork server, once; children inherit it): no capability
    can come back through execve. The server keeps its own capabilities for the children's setup."""
    dropped = False
    for cap in range(_LAST_CAP + 1):
        if _prctl(_PR_CAPBSET_DROP, cap) != 0:
            break  # past the kernel's last capability (or not permitted: unprivileged)
        dropped = True
    return dropped


def no_new_privs() -> None:
    """Required by Landlock and seccomp for an unprivileged process; also stops setuid binaries."""
    if _prctl(_PR_SET_NO_NEW_PRIVS, 1) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when the fork server dies (a child in its own session
    would otherwise outlive a killed server). Must come after any change of user, which clears it."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        raise RuntimeError("the fork server exited before the program started")
