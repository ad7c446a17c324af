"""Process-level confinement through system calls (supervisor side only: it imports ctypes).

Everything here runs in the supervisor or in its child before that child executes the fork
server: `_ctypes` must never be loaded into the fork server, whose memory every program inherits.
Its types alone give arbitrary memory access without a single audit event, and the import
system re-creates a loaded extension module from its cache without one either.

Resource limits only bind an unprivileged process (root may raise them again, and RLIMIT_NPROC
does not apply to uid 0 at all), so a server started by root either becomes `nobody` or, when
`nobody` could not even import the standard library (an interpreter under /root), stays uid 0
with every capability dropped: it can then neither raise a limit nor mount, trace or reconfigure
anything, and Landlock/seccomp confine what uid 0 could still reach.
"""

from __future__ import annotations

import ctypes
import os
import signal
import struct

NOBODY = 65534
_CLONE_NEWNET, _CLONE_NEWIPC, _CLONE_NEWNS, _CLONE_NEWPID = 0x40000000, 0x08000000, 0x00020000, 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
_MNT_DETACH = 2
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 1, 24, 36, 38
_CAPABILITY_VERSION_3 = 0x20080522
_LAST_CAP = 63
_SYS_PIDFD_GETFD = 438  # the same on every architecture

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _prctl(option: int, arg: int) -> int:
    return _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def unshare_namespaces(scratch_dir: str, scratch_mb: int) -> dict[str, bool]:
    """Move the calling process (the supervisor, hence the fork server and every program) into an
    empty network namespace (no interface but a down loopback), a private SysV IPC namespace, a
    private mount namespace where `scratch_dir` is a tmpfs of `scratch_mb` MiB (the working
    directory lives in memory and cannot fill the disk: RLIMIT_FSIZE caps one file only), and a
    new PID namespace for its next child: the fork server becomes its init, so that every process
    it starts dies with it, and none can see or signal anything outside.

    Needs CAP_SYS_ADMIN; without it nothing changes, and seccomp/Landlock/the audit hook still
    refuse network access. The caller may fork only once afterwards (the PID namespace's init).
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
    layers["pid_namespace"] = _libc.unshare(ctypes.c_int(_CLONE_NEWPID)) == 0
    return layers


def release_scratch(scratch_dir: str) -> None:
    """Unmount the tmpfs (in this namespace only), so that removing `scratch_dir` removes it for
    every process, and remove it."""
    _libc.umount2(os.fsencode(scratch_dir), ctypes.c_int(_MNT_DETACH))
    try:
        os.rmdir(scratch_dir)
    except OSError:
        pass


def become_subreaper() -> None:
    """Orphaned descendants are re-parented to this process instead of init, so it can reap (and
    kill) whatever the fork server leaves behind when it dies."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def drop_bounding_set() -> bool:
    """Empty the capability bounding set (inherited by every descendant): no capability can come
    back through execve, so the fork server starts with none."""
    dropped = False
    for cap in range(_LAST_CAP + 1):
        if _prctl(_PR_CAPBSET_DROP, cap) != 0:
            break  # past the kernel's last capability (or not permitted: unprivileged)
        dropped = True
    return dropped


def drop_privileges(to_nobody: bool) -> str:
    """Give up root: become `nobody`, or stay uid 0 without capabilities (none in any set, and an
    empty bounding set: the execve that follows cannot bring them back). Returns what the process
    now runs as."""
    if os.geteuid() != 0:
        return "unprivileged user"
    if to_nobody:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        return "nobody"
    header = ctypes.create_string_buffer(struct.pack("=Ii", _CAPABILITY_VERSION_3, 0), 8)
    data = ctypes.create_string_buffer(bytes(24), 24)  # effective, permitted, inheritable: all empty
    _check(_libc.capset(header, data), "capset")
    return "root without capabilities"


def no_new_privs() -> None:
    """Required by Landlock and seccomp for an unprivileged process; also stops setuid binaries."""
    _check(_prctl(_PR_SET_NO_NEW_PRIVS, 1), "prctl(PR_SET_NO_NEW_PRIVS)")


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent (the supervisor, a single-threaded
    process) dies; kept across execve. Must come after any change of user, which clears it."""
    _check(_prctl(_PR_SET_PDEATHSIG, signal.SIGKILL), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent_pid:
        raise RuntimeError("the supervisor exited before the fork server started")


def pidfd_getfd(pidfd: int, fd: int) -> int:
    """A duplicate of descriptor `fd` of the process behind `pidfd` (Linux >= 5.6)."""
    new = _libc.syscall(ctypes.c_long(_SYS_PIDFD_GETFD), ctypes.c_long(pidfd), ctypes.c_long(fd), ctypes.c_long(0))
    if new < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"pidfd_getfd: {os.strerror(errno)}")
    return int(new)
