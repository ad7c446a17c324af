"""Landlock: the kernel confines a sandboxed program's file access (Linux >= 5.13).

Unlike the audit hook, Landlock cannot be talked out of its decision from inside the process: it
checks every path the kernel resolves (symlinks, `dir_fd`, C libraries, io_uring...), and it
applies to root as well. The supervisor's child applies the ruleset to itself right before it
executes the fork server, so the server and every program it forks run under it (a domain is
inherited and can only be narrowed). Newer kernels add layers that the ruleset then also uses:
TCP bind/connect (ABI 4) and scoping of abstract UNIX sockets and signals to the sandbox's own
processes (ABI 6).
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # the rights that apply to a file itself
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(number: int, *args: object) -> int:
    """syscall(2) with every integer passed as a full register (the call is variadic)."""
    return _libc.syscall(ctypes.c_long(number), *(ctypes.c_ulong(a) if isinstance(a, int) else a for a in args))


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 when unavailable (old kernel, disabled, seccomp'd)."""
    try:
        version = _syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    except (AttributeError, OSError):
        return 0
    return max(0, int(version))


def _handled_fs(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def build_ruleset(read_paths: list[str], write_dirs: list[str], read_files: list[str],
                  write_files: list[str], exec_files: list[str]) -> tuple[int, dict[str, bool]] | None:
    """A ruleset fd granting read on `read_paths`/`read_files`, read-write (no execute, no device
    nodes) under `write_dirs` and on `write_files`, read and execute on `exec_files` (the
    interpreter and its loader: the execve that starts the fork server happens under the ruleset;
    seccomp refuses any later one), and nothing else; None if Landlock is missing.

    Returns (fd, {layer name: active}) so the server can report what the kernel enforces.
    """
    abi = abi_version()
    if abi < 1:
        return None
    handled = _handled_fs(abi)
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("=QQQ", handled, net, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = _syscall(_CREATE_RULESET, buf, size, 0)
    if fd < 0:
        return None
    read = READ_FILE | READ_DIR
    write = handled & ~(EXECUTE | MAKE_CHAR | MAKE_BLOCK)
    for paths, rights in ((read_paths, read), (read_files, READ_FILE), (write_dirs, write),
                          (write_files, READ_FILE | WRITE_FILE | (handled & TRUNCATE)),
                          (exec_files, READ_FILE | EXECUTE)):
        for path in paths:
            _add_rule(fd, path, rights & handled)
    layers = {"landlock_fs": True, "landlock_tcp": bool(net), "landlock_scope": bool(scoped)}
    return fd, layers


def _add_rule(ruleset_fd: int, path: str, rights: int) -> None:
    try:
        parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a root that does not exist on this machine grants nothing
    try:
        if not stat.S_ISDIR(os.fstat(parent).st_mode):
            rights &= FILE_RIGHTS
        rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, parent), 12)
        if _syscall(_ADD_RULE, ruleset_fd, _RULE_PATH_BENEATH, rule, 0) < 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(parent)


def restrict_self(ruleset_fd: int) -> None:
    """Apply the ruleset to this process and everything it starts (irreversible; the caller has
    set no_new_privs, see `_kernel.no_new_privs`)."""
    if _syscall(_RESTRICT_SELF, ruleset_fd, 0) < 0:
        raise OSError(ctypes.get_errno(), f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
