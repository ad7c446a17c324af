"""Which files a sandboxed program may read (fork-server side; standard library only).

One policy, enforced twice: by the audit hook (`_guard`) and by the kernel (`_landlock`).
A program may read the Python installation (to import the standard library and installed
packages) and the system's shared libraries (for extension modules), never the project's own
packages: environments keep hidden tests and reference answers there, and a regular install puts
them inside site-packages, which is otherwise readable.
"""

from __future__ import annotations

import os
import stat
import sys
import sysconfig

SYSTEM_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/usr/share/zoneinfo")
"""Shared libraries that extension modules load, and the time-zone database (zoneinfo)."""

READ_FILES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/etc/ld.so.cache")
WRITE_FILES = ("/dev/null",)
PROJECT_PACKAGES = ("llm_marl", "llm_marl_envs", "agents", "baselines")


def _real(path: str) -> str:
    return os.path.realpath(path)


def python_roots() -> list[str]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= {os.path.join(sys.base_prefix, "lib"), os.path.join(sys.prefix, "lib")}
    return sorted({_real(r) for r in roots if os.path.isdir(r)})


def read_roots() -> list[str]:
    """Directories a program may read, as real paths, without nesting duplicates."""
    roots = sorted(set(python_roots()) | {_real(d) for d in SYSTEM_DIRS if os.path.isdir(d)})
    return [r for r in roots if not any(r != o and r.startswith(o + os.sep) for o in roots)]


def deny_roots(sandbox_dir: str) -> list[str]:
    """The project's packages, found next to the package that holds this sandbox."""
    parent = os.path.dirname(os.path.dirname(_real(sandbox_dir)))
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
