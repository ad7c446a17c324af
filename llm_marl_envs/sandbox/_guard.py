"""Audit hook (PEP 578) that ends a sandboxed program at its first forbidden operation.

It is the first layer, and the one that gives the "blocked" status a clear reason: reads outside
the Python installation and the working directory, writes outside the working directory, network,
process creation, signals to other processes, ctypes/cffi, ioctls that set a file's own
attributes (`INODE_ATTRIBUTE_IOCTLS`), and the introspection that could reach
this hook's own state (gc.get_objects, sys.settrace...). A violation writes `MARK` + the reason to
stderr and exits with `BLOCKED_EXIT` at once, so the program cannot catch it.

Where the kernel layers are missing it must still contain every program, so it refuses what it
cannot check exactly there. Without Landlock: `..` inside the working directory (a symbolic link
the program swaps under it could change where it leads) and SQLite (which opens files in C:
ATTACH, VACUUM INTO). Without Landlock and seccomp both: whatever could corrupt the interpreter's
memory, that is C extensions outside the standard library (numpy's array interface, for one,
reads and writes any address), code objects not made by the compiler (code.replace) and marshal
data that is not a compiled file of the installation. Everywhere: a `..` relative to a directory
descriptor (the hook cannot see which directory a descriptor names, and os.open does not even
report that it got one; every other directory descriptor a program can hold is inside its own
directory).

A Python-level hook shares the interpreter with the program it watches, so it is written to give
the program no handle on it:
- nothing of the sandbox is reachable from the program (see `_child`): not this module, not the
  hook function, not the frames below the program;
- everything it uses is bound when it is made (closure cells), never looked up in module
  globals or builtins at call time: the program may replace `os.path.realpath` or `builtins.any`;
- it calls only C functions and methods of exact built-in types (path resolution is done here with
  `os.lstat`/`os.readlink`), so no program code ever runs inside it and none of its frames can be
  captured; a `str` subclass is copied to a plain `str` before any method is called on it;
- any exception inside it (RecursionError, MemoryError, a bad argument) blocks.
The kernel layers (`_landlock`, `_seccomp`) hold even if it is bypassed anyway; where Landlock is
active, paths the hook cannot read without running program code (an `io.FileIO(PathLike)`) are
left to the kernel, elsewhere they are blocked.
"""

from __future__ import annotations

import os
import stat
import sys

from _protocol import BLOCKED_EXIT, MARK  # how the owner tells that the hook stopped a program

_READ, _WRITE, _INSIDE, _LINK = 1, 2, 3, 4  # what a path argument needs
_PROCESS_EVENTS = ("os.fork", "os.forkpty", "os.system", "os.exec", "os.spawn", "os.posix_spawn",
                   "subprocess.Popen", "pty.spawn", "os.startfile",
                   "sys.remote_exec")  # Python >= 3.14: runs a script in another Python process
_INTROSPECTION_EVENTS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace",
                         "sys.setprofile", "sys._current_frames", "sys._current_exceptions",
                         "sys._settraceallthreads", "sys._setprofileallthreads",
                         "cpython.PyInterpreterState_New", "sqlite3.enable_load_extension",
                         "sqlite3.load_extension", "marshal.load")
STUBBED_EVENTS = ("os.mknod", "os.mkfifo", "os.sched_setaffinity", "os.sched_setscheduler",
                  "os.sched_setparam", "os.setpriority", "signal.pidfd_send_signal", "os.unshare", "os.setns",
                  "_posixsubprocess.fork_exec", "os.posix_openpt", "sys.activate_stack_trampoline")
"""Operations with no audit event of their own: `_child` replaces them with stubs that raise these
(mknod/mkfifo create files anywhere; posix_openpt, Python >= 3.13, opens /dev/ptmx;
activate_stack_trampoline, Python >= 3.12, makes the interpreter write /tmp/perf-PID.map, which
outlives the run; fork_exec starts a process; the others act on another process). os.unshare and
os.setns (Python >= 3.12) have events of these names."""
_BLOCKED_PREFIXES = ("socket.", "ctypes.", "syslog.")
BLOCKED_MODULES = ("ctypes", "_ctypes", "cffi", "_cffi_backend", "_xxsubinterpreters", "_xxinterpchannels",
                   "_interpreters", "_interpqueues", "_interpchannels",
                   "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase", "_testclinic",
                   "_testimportmultiple", "_ctypes_test", "_xxtestfuzz", "_testsinglephase", "_testlimitedcapi",
                   "_testclinic_limited", "_testexternalinspection", "_remote_debugging", "_posixsubprocess",
                   "readline", "_dbm", "_gdbm", "_curses", "_curses_panel", "_multiprocessing", "_posixshmem",
                   "_ssl", "_tkinter", "pwd", "grp", "spwd", "nis", "ossaudiodev")
"""Modules that give raw memory access or a second interpreter without this hook (audit hooks added
by `sys.addaudithook` are each interpreter's own; on Python 3.13 `_interpreters.create` raises no
audit event either), read other processes' memory (`_testexternalinspection`, 3.13, and
`_remote_debugging`, 3.14, which this project has not run on), start processes without an audit
event (_posixsubprocess), or open files, shared memory or the user database by name in C, where no
audit event shows the path (dbm falls back to its pure-Python backend, multiprocessing and
concurrent.futures' threads still import). CPython's own test modules are all here, the 3.12 and
3.13 ones included. None of them is ever loaded into the fork server: the import system re-creates
a loaded extension module without an audit event."""
_WRITE_PATH_ARGS = {  # event -> (indexes of path arguments, indexes of dir_fd arguments)
    "os.mkdir": ((0,), (2,)), "os.rmdir": ((0,), (1,)), "os.remove": ((0,), (1,)),
    "os.rename": ((0, 1), (2, 3)), "os.link": ((0, 1), (2, 3)), "os.chmod": ((0,), (2,)),
    "os.chown": ((0,), (3,)), "os.utime": ((0,), (3,)), "os.truncate": ((0,), ()),
    "os.chflags": ((0,), ()), "os.setxattr": ((0,), ()), "os.removexattr": ((0,), ()),
}
_READ_PATH_EVENTS = ("os.listdir", "os.scandir", "os.getxattr", "os.listxattr")
INODE_ATTRIBUTE_IOCTLS = (0x40086602, 0x401C5820, 0x40087602, 0x800C6613)
"""ioctl requests that set attributes of a file itself (FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR,
FS_IOC_SETVERSION, FS_IOC_SET_ENCRYPTION_POLICY): set on the run directory, they would outlive its
emptying and reach the next run. The seccomp filter refuses them too."""
_RULES: dict[str, tuple] = {
    "open": ("open",), "os.chdir": ("chdir",), "os.symlink": ("symlink",), "os.kill": ("kill",),
    "os.killpg": ("killpg",), "resource.prlimit": ("kill",), "import": ("import",),
    "socket.__new__": ("socket",), "sqlite3.connect": ("sqlite",), "marshal.loads": ("marshal",),
    "code.__new__": ("code",), "fcntl.ioctl": ("ioctl",),
    **{e: ("deny",) for e in _PROCESS_EVENTS + _INTROSPECTION_EVENTS + STUBBED_EVENTS},
    **{e: ("paths", paths, fds) for e, (paths, fds) in _WRITE_PATH_ARGS.items()},
    **{e: ("read",) for e in _READ_PATH_EVENTS},
}
"""event -> (what to check, details); events not here pass unless they start with a blocked prefix."""
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_AF_UNIX = 1
_PYC_HEADER = 16
_RECENT_PYC = 8
STDIO_ALIASES = frozenset(f"{d}/{fd}" for d in ("/dev/fd", "/proc/self/fd") for fd in (0, 1, 2)) | {
    "/dev/stdin", "/dev/stdout", "/dev/stderr"}
"""Paths of the program's own stdin/stdout/stderr pipes (`open('/dev/stdin')` is common in judged
code); Landlock lets them through too, since pipes have no place in the file system."""


def make_hook(workdir: str, policy: dict):
    """The hook for a program whose working directory is `workdir`; `sys.addaudithook(hook)`
    installs it (irreversible). Nothing in it depends on the process it ends up in (it asks for
    its own pid when it needs it), so the fork server builds it once and every child installs it.

    `policy`: read_roots, deny_roots, read_files, write_files, extension_dirs (lists of real
    paths), blocked_modules, and two booleans: kernel_enforces_files (Landlock) and
    kernel_contains_code (Landlock and seccomp: a C extension that defeats this hook meets them).
    """
    rule_of = dict(_RULES).get  # a private copy: the module's dict is reachable by the program

    # Bound now: the program may later replace any module attribute or builtin.
    _type, _issubclass, _len, _str, _bytes, _int = type, issubclass, len, str, bytes, int
    _str_copy, _bytes_copy, _decode, _encode = str.__str__, bytes.__bytes__, bytes.decode, str.encode
    _startswith, _endswith, _split, _partition, _join = str.startswith, str.endswith, str.split, str.partition, "/".join
    _lstat, _readlink, _getcwd, _islink, _isdir = os.lstat, os.readlink, os.getcwd, stat.S_ISLNK, stat.S_ISDIR
    _open, _read, _close, _fstat, _rdonly = os.open, os.read, os.close, os.fstat, os.O_RDONLY | os.O_CLOEXEC
    _write, _exit, _BaseException, _OSError, _getpid = os.write, os._exit, BaseException, OSError, os.getpid
    workdir = os.path.realpath(workdir)
    inside_prefix = workdir + "/"
    read_prefixes = tuple(r.rstrip("/") + "/" for r in policy["read_roots"])
    deny_prefixes = tuple(d.rstrip("/") + "/" for d in policy["deny_roots"])
    extension_prefixes = tuple(d.rstrip("/") + "/" for d in policy["extension_dirs"])
    readable_files, writable_files = frozenset(policy["read_files"]), frozenset(policy["write_files"])
    blocked_imports = frozenset(policy["blocked_modules"])
    stdio_aliases = STDIO_ALIASES
    modules_get = sys.modules.get  # the interpreter's own module dict, even if sys.modules is rebound
    mark, blocked_exit, write_flags, af_unix = MARK, BLOCKED_EXIT, _WRITE_FLAGS, _AF_UNIX
    opaque, contained = bool(policy["kernel_enforces_files"]), bool(policy["kernel_contains_code"])
    prefixes, pyc_header, recent_size = _BLOCKED_PREFIXES, _PYC_HEADER, _RECENT_PYC
    inode_ioctls = frozenset(INODE_ATTRIBUTE_IOCTLS)
    recent_pyc: list = []  # compiled files just opened under the read roots: what marshal.loads may read
    need_read, need_write, need_inside, need_link = _READ, _WRITE, _INSIDE, _LINK
    verbs = {_READ: "read", _WRITE: "write", _INSIDE: "chdir to", _LINK: "link to"}
    workdir_kept = frozenset({"os.rmdir", "os.rename", "os.remove"})  # the server empties it, it stays

    def hook(event, args):
        reason = None
        try:
            rule = rule_of(event)
            if rule is None:
                if not _startswith(event, prefixes):
                    return None
                rule = ("deny",)
            kind = rule[0]
            checks = []  # (path value, what it needs, directory a relative path starts from)
            if kind == "open":
                path, mode, flags = args
                if _type(path) is _int:
                    return None
                writing = (_type(mode) is _str and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)) \
                    or (_type(flags) is _int and flags & write_flags)
                # os.open (mode None) may have been given a dir_fd, which the event does not show
                checks.append((path, need_write if writing else need_read, False if mode is None else None))
            elif kind == "read":
                path = args[0]
                if path is None or _type(path) is _int:
                    return None
                checks.append((path, need_read, None))
            elif kind == "paths":
                relative_to = None
                for i in rule[2]:
                    if i < _len(args) and _type(args[i]) is _int and args[i] != -1:
                        relative_to = False  # relative to a directory fd this hook cannot name
                for i in rule[1]:
                    if i < _len(args) and args[i] is not None and _type(args[i]) is not _int:
                        checks.append((args[i], need_write, relative_to))
            elif kind == "chdir":
                if _type(args[0]) is not _int:
                    checks.append((args[0], need_inside, None))
                elif not opaque:
                    reason = "os.fchdir"
            elif kind == "symlink":
                checks.append((args[1], need_write, False if _type(args[2]) is _int and args[2] != -1 else None))
                checks.append((args[0], need_link, None))
            elif kind == "sqlite":
                name = args[0]
                if not opaque:
                    reason = "sqlite3 (it opens files in C: ATTACH, VACUUM INTO)"
                elif not (_type(name) is _str and (name == ":memory:" or name == "")):
                    checks.append((name, need_write, None))
            elif kind == "kill":
                if args[0] != 0 and args[0] != _getpid():
                    reason = event + " of another process"
            elif kind == "killpg":
                if args[0] != 0 and args[0] != _getpid():  # the child called setsid(): its group is its pid
                    reason = event + " of another process group"
            elif kind == "import":
                name, filename = args[0], args[1]
                if _type(name) is not _str:
                    name = _str_copy(name)
                top = _partition(name, ".")[0]
                # A module set to None in sys.modules fails to import (numpy copes with that) and
                # raises no event; one deleted from there, or loaded straight from its file
                # (importlib's create_dynamic), is blocked.
                if top in blocked_imports and (filename is not None or modules_get(top, modules_get) is not None):
                    reason = "import " + name
                elif filename is not None and not contained:
                    if _type(filename) is not _str:
                        filename = _str_copy(filename)
                    if "/../" in filename or not _startswith(filename, extension_prefixes):
                        reason = "import " + name + ": a C extension outside the standard library"
            elif kind == "code":
                if not contained:
                    reason = "code.__new__ (a code object not made by the compiler)"
            elif kind == "marshal":
                if contained:
                    return None
                data = args[0]
                reason = "marshal.loads of code that is not a compiled file of the installation"
                for path in recent_pyc[:]:  # a copy: opening it below re-enters this hook
                    fd = _open(path, _rdonly)
                    try:
                        size = _fstat(fd).st_size
                        if size - pyc_header != _len(data):
                            continue
                        chunks = []
                        got = 0
                        while got < size:
                            chunk = _read(fd, size - got)
                            if not chunk:
                                break
                            chunks.append(chunk)
                            got += _len(chunk)
                        if b"".join(chunks)[pyc_header:] == data:
                            reason = None
                            break
                    finally:
                        _close(fd)
            elif kind == "socket":
                if args[1] != af_unix:
                    reason = "network socket"
            elif kind == "ioctl":
                if args[1] & 0xFFFFFFFF in inode_ioctls:
                    reason = "fcntl.ioctl that sets a file's attributes"
            else:
                reason = event

            link_dir = None
            for value, need, base in checks:
                if reason is not None:
                    break
                t = _type(value)
                if t is not _str:
                    if t is _bytes or _issubclass(t, _bytes):
                        value = _decode(_bytes_copy(value), "utf-8", "surrogateescape")
                    elif _issubclass(t, _str):
                        value = _str_copy(value)
                    else:  # a path object: reading its path would run the program's code
                        if not opaque:
                            reason = event + " with a path object"
                        continue
                if value in stdio_aliases and need != need_link:  # the program's own pipes
                    continue
                if not _startswith(value, "/"):
                    if base is False:  # relative to a directory descriptor, perhaps
                        if ".." in _split(value, "/"):
                            reason = event + ": '..' relative to a directory descriptor"
                            break
                        if opaque and kind != "open":
                            continue  # the kernel checks it
                        base = None  # every directory fd the program holds is inside its directory
                    if need == need_link:
                        base = link_dir
                    value = (base if base is not None else _getcwd()) + "/" + value
                pending = _split(value, "/")
                pending.reverse()
                parts = []
                links = 0
                while pending:
                    part = pending.pop()
                    if part == "" or part == ".":
                        continue
                    if part == "..":
                        if not opaque and _startswith("/" + _join(parts) + "/", inside_prefix):
                            reason = event + ": '..' inside the working directory"
                            break
                        if parts:
                            parts.pop()
                        continue
                    parts.append(part)
                    here = "/" + _join(parts)
                    try:
                        mode = _lstat(here).st_mode
                    except _OSError:
                        continue  # does not exist (yet): resolved as written
                    if _islink(mode):
                        links += 1
                        if links > 40:
                            reason = event + ": too many symbolic links"
                            break
                        target = _readlink(here)
                        parts.pop()
                        if _startswith(target, "/"):
                            parts = []
                        more = _split(target, "/")
                        more.reverse()
                        pending.extend(more)
                if reason is not None:
                    break
                real = "/" + _join(parts)
                probe = real + "/"
                if need == need_write and link_dir is None:
                    link_dir = "/" + _join(parts[:-1])  # a symlink's target is relative to its directory
                if _startswith(probe, inside_prefix):
                    if probe == inside_prefix and event in workdir_kept:
                        reason = event + " of the working directory itself"
                        break
                    continue
                if need == need_write and real in writable_files:
                    continue
                if need == need_read and not _startswith(probe, deny_prefixes):
                    if real in readable_files:
                        continue
                    if _startswith(probe, read_prefixes):
                        if kind == "open":
                            if _endswith(real, ".pyc"):
                                if real in recent_pyc:
                                    recent_pyc.remove(real)
                                recent_pyc.insert(0, real)
                                del recent_pyc[recent_size:]
                            elif not opaque:
                                try:  # a directory fd would let os.open(..., dir_fd=) escape this check
                                    if _isdir(_lstat(real).st_mode):
                                        reason = "open a directory outside the working directory: " + real
                                        break
                                except _OSError:
                                    pass
                        continue
                what = verbs[need]
                reason = what + " outside the working directory: " + real
            if reason is None:
                return None
        except _BaseException:
            reason = event + " (refused: the guard could not check it)"
        try:
            _write(2, _encode(mark + reason + "\n", "utf-8", "backslashreplace"))
        except _BaseException:
            pass
        _exit(blocked_exit)

    return hook
