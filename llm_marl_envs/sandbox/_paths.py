"""Which files a sandboxed program may read (standard library only; used on both sides of the exec).

One policy, enforced twice: by the audit hook (`_guard`) and by the kernel (`_landlock`).
A program may read the Python installation (to import the standard library and installed
packages) and the system's shared libraries (for extension modules), never the project's own
packages: environments keep hidden tests and reference answers there, and a regular install puts
them inside site-packages, which is otherwise readable.

The fork server itself runs under the same Landlock domain as its programs (it is confined before
it starts), so the kernel also grants it what it needs and a program does not: reading this
directory (its own code, which holds no secret) and executing the interpreter once, to start.
"""

from __future__ import annotations

import os
import stat
import struct
import sys
import sysconfig

SYSTEM_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/usr/share/zoneinfo")
"""Shared libraries that extension modules load, and the time-zone database (zoneinfo)."""

READ_FILES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/etc/ld.so.cache")
WRITE_FILES = ("/dev/null",)
PROJECT_PACKAGES = ("llm_marl", "llm_marl_envs", "agents", "baselines")


def _real(path: str) -> str:
    return os.path.realpath(path)


def sandbox_dir() -> str:
    """This package's directory: the fork server's own code."""
    return os.path.dirname(_real(__file__))


def python_roots() -> list[str]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= {os.path.join(sys.base_prefix, "lib"), os.path.join(sys.prefix, "lib")}
    return sorted({_real(r) for r in roots if os.path.isdir(r)})


def extension_dirs() -> list[str]:
    """Where the standard library's own extension modules live (lib-dynload)."""
    dirs = {sysconfig.get_config_var("DESTSHARED") or "", os.path.join(sysconfig.get_path("platstdlib"), "lib-dynload")}
    return sorted({_real(d) for d in dirs if d and os.path.isdir(d)})


def read_roots() -> list[str]:
    """Directories a program may read, as real paths, without nesting duplicates."""
    roots = sorted(set(python_roots()) | {_real(d) for d in SYSTEM_DIRS if os.path.isdir(d)})
    return [r for r in roots if not any(r != o and r.startswith(o + os.sep) for o in roots)]


def read_files() -> list[str]:
    """Single files a program may read: devices, the loader cache, and the virtual environment's
    configuration (the interpreter reads it at start-up to find its site-packages)."""
    venv = os.path.join(sys.prefix, "pyvenv.cfg")
    return [f for f in (*READ_FILES, venv) if os.path.exists(f)]


def write_files() -> list[str]:
    return [f for f in WRITE_FILES if os.path.exists(f)]


def deny_roots(sandbox: str) -> list[str]:
    """The project's packages, found next to the package that holds this sandbox."""
    parent = os.path.dirname(os.path.dirname(_real(sandbox)))
    return sorted(_real(os.path.join(parent, n)) for n in PROJECT_PACKAGES if os.path.isdir(os.path.join(parent, n)))


def expand(roots: list[str], deny: list[str]) -> list[str]:
    """`roots` minus the `deny` hierarchies, as a list of paths that only add up.

    Landlock rules can only grant, so a root that contains a denied directory is replaced by its
    entries (recursively down to the denied one).
    """
    out: list[str] = []
    for root in roots:
        if any(root == d or root.startswith(d + os.sep) for d in deny):
            continue
        if not any(d.startswith(root + os.sep) for d in deny):
            out.append(root)
            continue
        try:
            names = sorted(os.listdir(root))
        except OSError:
            continue
        out += expand([os.path.join(root, n) for n in names], deny)
    return out


def interpreter_files() -> list[str]:
    """The files the kernel opens to execute this interpreter: the binary and its ELF loader."""
    binary = _real(sys.executable)
    files = [binary]
    loader = _elf_interpreter(binary)
    if loader and os.path.exists(loader):
        files.append(_real(loader))
    return files


def _elf_interpreter(binary: str) -> str | None:
    """The PT_INTERP path of a 64-bit little-endian ELF file, None if it has none."""
    try:
        with open(binary, "rb") as f:
            header = f.read(64)
            if header[:6] != b"\x7fELF\x02\x01":
                return None
            phoff, = struct.unpack_from("<Q", header, 32)
            phentsize, phnum = struct.unpack_from("<HH", header, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for i in range(phnum):
                p_type, _, p_offset = struct.unpack_from("<IIQ", table, i * phentsize)
                if p_type == 3:  # PT_INTERP
                    p_filesz, = struct.unpack_from("<Q", table, i * phentsize + 32)
                    f.seek(p_offset)
                    return f.read(p_filesz).rstrip(b"\0").decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


def reachable_by_others(path: str) -> bool:
    """Whether an unprivileged user can reach `path` (every directory on the way world-searchable)."""
    path = _real(path)
    while True:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return False
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent
