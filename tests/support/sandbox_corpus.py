"""An adversarial corpus for the sandbox: programs that try to get out, and how to tell if they did.

Used by `tests/test_sandbox_escapes.py` (every attempt must be contained, with the kernel layers
on and with them off) and `benchmarks/sandbox_escapes.py` (contained / tried per category).

An attempt is contained when none of its effects shows outside the run: the program printed no
`ESCAPED` (it prints it when it got something it must not: a handle on the sandbox's machinery, a
child process...) and not the secret's text, the secret file outside is unchanged and nothing new
appeared next to it or in /tmp, none of the listeners (TCP and UDP on 127.0.0.1, a UNIX socket
on the file system, an abstract one) heard from it, the canary process and the fork server are
alive, no process outlived the run, and the next run on the same worker finds nothing of it.
Every attempt targets this machine only (loopback at most). Memory tricks that stay inside the
program's own process (crafted bytecode, numpy's array interface) are not escapes by themselves:
where the kernel layers are on, the hook lets them run and they then try to read the secret; on
its own, the hook refuses them.

Placeholders in the programs: @OUTSIDE@ (a directory outside the sandbox), @SECRET@ (a file in
it holding @TOKEN@), @PORT@ / @UDP@ (loopback listeners), @UNIX@ / @ABSTRACT@ (UNIX socket
listeners), @CANARY@ (the pid of a process outside), @SANDBOX@ (the sandbox's own code).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from llm_marl_envs.sandbox import Sandbox, SandboxLimits
from tests.support.processes import running

LIMITS = SandboxLimits(wall_time_s=1.5, cpu_time_s=1.5, memory_mb=256, output_bytes=20_000, file_bytes=8 * 1024 * 1024)
CATEGORIES = ("file system", "process", "network", "introspection", "ctypes and memory", "resources",
              "signals", "persistence")


@dataclass(frozen=True)
class Attempt:
    name: str
    category: str
    code: str
    then: str | None = None
    """A second program run next on the same worker (persistence): it must find nothing."""


@dataclass
class Verdict:
    contained: bool
    status: str
    why: str = ""


# --------------------------------------------------------------------------------- the corpus

_FIND_MACHINERY = r'''
import sys
SANDBOX = @SANDBOX@
PRIVATE = ("ctypes", "_ctypes", "_guard", "_child", "_kernel", "_seccomp", "_landlock", "_server", "_supervisor", "_paths")
def suspicious(value):
    # _run is the program's own entry point (the frame below it): it holds standard modules only
    if getattr(value, "__name__", None) in ("_run", "run") and getattr(value, "__module__", "_run") == "_run":
        return False
    try:
        code = getattr(value, "__code__", value)
        where = str(getattr(code, "co_filename", "")) + "|" + str(getattr(value, "__file__", ""))
        if SANDBOX in where and "_run.py" not in where:
            return True
        if isinstance(value, dict) and value.get("__name__") != "_run" and any(k in value for k in ("read_roots", "BLOCKED_MODULES")):
            return True
        names = (getattr(value, "__name__", "") or "", getattr(value, "__module__", "") or "")
        return any(isinstance(n, str) and n.split(".")[0] in PRIVATE for n in names)
    except Exception:
        return False
def scan(where, namespace):
    try:
        items = list(namespace.items())
    except Exception:
        return
    for key, value in items:
        if suspicious(value) or key in ("BLOCKED_MODULES", "_RULES"):
            print("ESCAPED:", where, key)
            raise SystemExit
'''

_SUBCLASSES = r'''
def subclasses(root=object):
    seen, todo = set(), [root, type]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        yield cls
        try:
            todo.extend(type.__subclasses__(cls))
        except TypeError:
            pass
'''

_CTYPES_BY_SUBCLASSES = _SUBCLASSES + r'''
found = {c.__name__: c for c in subclasses() if c.__module__ == "_ctypes"}
if found:
    SimpleCData, Union, Pointer = found["_SimpleCData"], found["Union"], found["_Pointer"]
    class c_char(SimpleCData): _type_ = "c"
    class c_void_p(SimpleCData): _type_ = "P"
    class P(Pointer): _type_ = c_char
    class U(Union): _fields_ = [("a", c_void_p), ("b", P)]
    text = b"immutable bytes"
    u = U()
    u.a = id(text) + 32
    u.b[0] = b"X"
    if text.startswith(b"X"):
        print("ESCAPED: wrote memory through ctypes types found by a subclass walk")
'''

_FRAME_WALK = _FIND_MACHINERY + r'''
frame = sys._getframe()
while frame is not None:
    scan("globals of " + frame.f_code.co_name, frame.f_globals)
    scan("locals of " + frame.f_code.co_name, frame.f_locals)
    frame = frame.f_back
'''

_FINALIZER_WALK = _FIND_MACHINERY + r'''
def walk():
    frame = sys._getframe()
    while frame is not None:
        scan("exit-time globals of " + frame.f_code.co_name, frame.f_globals)
        scan("exit-time locals of " + frame.f_code.co_name, frame.f_locals)
        frame = frame.f_back
'''

_CRAFTED = r'''
import dis
def f():
    return None
code = bytearray(f.__code__.co_code)
for i in range(0, len(code), 2):  # LOAD_CONST 0 -> LOAD_CONST 200: a constant far past the tuple
    if code[i] == dis.opmap["LOAD_CONST"]:
        code[i + 1] = 200
crafted = f.__code__.replace(co_code=bytes(code))
'''
_READ_SECRET = "print(open('@SECRET@').read())"

SET_DIRECTORY_FLAGS = "import array, fcntl, os\nfcntl.ioctl(os.open('.', os.O_RDONLY), 0x40086602, array.array('l', [0x40]), True)"
"""A program that sets the nodump flag on its run directory (FS_IOC_SETFLAGS)."""

MEMORY_SCAN = r'''
import os, sys
import numpy as np
# Reads this process's memory (numpy's array interface takes any address; the kernel layers let
# numpy run): every page within 8 MiB of the heap and of pymalloc's arenas, each one copied through
# a pipe, so that an unmapped page is an EFAULT, not a crash. Prints what follows each MARKER found,
# also across the end of a page (the end of one is searched again with the next, if mapped).
MARKER = b"@@earlier" + b"-run:"
class Raw:
    def __init__(self, address):
        self.__array_interface__ = {"data": (address, True), "shape": (4096,), "typestr": "|u1", "version": 3}
own = b"".join([MARKER, b"self-", sys.stdin.read().encode()])  # made at run time: only here, in the heap
r, w = os.pipe()
anchors = {id(own), *(np.frombuffer(b, np.uint8).__array_interface__["data"][0] for b in (bytearray(5000), bytearray(300_000)))}
pages, found = set(), set()
for anchor in anchors:
    pages.update((anchor & ~4095) + i * 4096 for i in range(-2048, 2048))
tail = b""
for page in sorted(pages):
    try:
        os.write(w, np.asarray(Raw(page)))
    except OSError:
        tail = b""
        continue
    data, at = tail + os.read(r, 4096), 0
    while (at := data.find(MARKER, at) + 1):
        found.add(data[at - 1 + len(MARKER):at + 40].decode("latin-1"))
    tail = data[-(len(MARKER) + 40):]
print(sorted(found))
'''
"""A program that reads its own memory (where the kernel layers let numpy run: elsewhere the hook
refuses numpy's array interface) and prints what follows each "@@earlier-run:" it finds there,
"self-" and its stdin among them (made at run time: a caller can tell that the scan works)."""

_KILL_CANARY = "import os, signal\nos.kill(@CANARY@, signal.SIGKILL)\nprint('ESCAPED')"

ATTEMPTS: list[Attempt] = [
    # ----------------------------------------------------------------------- file system
    Attempt("read /etc/passwd", "file system", "print('ESCAPED' if 'root:' in open('/etc/passwd').read() else '')"),
    Attempt("read a secret outside", "file system", "print(open('@SECRET@').read())"),
    Attempt("list a directory outside", "file system", "import os\nprint('ESCAPED' if 'secret.txt' in os.listdir('@OUTSIDE@') else '')"),
    Attempt("read /proc/self/status", "file system", "open('/proc/self/status').read()\nprint('ESCAPED')"),
    Attempt("read another process's /proc", "file system", "open('/proc/@CANARY@/cmdline').read()\nprint('ESCAPED')"),
    Attempt("read the sandbox's own code", "file system", "open(@SANDBOX@ + '/_guard.py').read()\nprint('ESCAPED')"),
    Attempt("write outside", "file system", "open('@OUTSIDE@/written.txt', 'w').write('x')"),
    Attempt("write /tmp", "file system", "open('/tmp/llm_marl_escape_@TOKEN@', 'w').write('x')"),
    Attempt("truncate the secret", "file system", "import os\nos.truncate('@SECRET@', 0)"),
    Attempt("chmod the secret", "file system", "import os\nos.chmod('@SECRET@', 0o777)"),
    Attempt("utime the secret", "file system", "import os\nos.utime('@SECRET@', (0, 0))"),
    Attempt("xattr on the secret", "file system", "import os\nos.setxattr('@SECRET@', 'user.x', b'1')"),
    Attempt("rename into the outside", "file system", "import os\nopen('f', 'w').write('x')\nos.rename('f', '@OUTSIDE@/moved')"),
    Attempt("symlink to the secret", "file system", "import os\nos.symlink('@SECRET@', 'l')\nprint(open('l').read())"),
    Attempt("symlink to the outside directory", "file system",
            "import os\nos.symlink('@OUTSIDE@', 'd')\nopen('d/through_link', 'w').write('x')"),
    Attempt("relative symlink that climbs", "file system",
            "import os\nos.makedirs('a/b')\nos.symlink('../../..', 'a/b/up')\nprint(os.listdir('a/b/up'))\n"
            "open('a/b/up/climbed', 'w').write('x')"),
    Attempt("symlink moved to climb", "file system",
            "import os\nos.makedirs('a/b')\nos.symlink('..', 'a/b/up')\nos.rename('a/b/up', 'up')\n"
            "print(os.listdir('up'))\nopen('up/moved_link', 'w').write('x')"),
    Attempt("symlink swapped under '..' (race)", "file system", r'''
import os, threading
os.makedirs("p/q/r")
os.symlink("p/q/r", "s")
stop = False
def swap():
    while not stop:
        try:
            os.rename("s", "t"); os.mkdir("s"); os.rmdir("s"); os.rename("t", "s")
        except OSError:
            pass
threading.Thread(target=swap, daemon=True).start()
for _ in range(3000):
    try:
        open("s/../../../raced", "w").write("x")
    except OSError:
        pass
stop = True
'''),
    Attempt("hard link to the secret", "file system", "import os\nos.link('@SECRET@', 'h')\nprint(open('h').read())"),
    Attempt("hard link to /etc/passwd", "file system", "import os\nos.link('/etc/passwd', 'h')\nprint('ESCAPED' if 'root:' in open('h').read() else '')"),
    Attempt("dir_fd of the outside directory", "file system",
            "import os\nfd = os.open('@OUTSIDE@', os.O_RDONLY)\nprint(os.read(os.open('secret.txt', os.O_RDONLY, dir_fd=fd), 100))"),
    Attempt("O_PATH dir_fd of the outside directory", "file system",
            "import os\nfd = os.open('@OUTSIDE@', os.O_PATH)\nprint(os.read(os.open('secret.txt', os.O_RDONLY, dir_fd=fd), 100))"),
    Attempt("dir_fd with '..' out of the run directory", "file system",
            "import os\nos.makedirs('a/b')\nfd = os.open('.', os.O_RDONLY)\nos.chdir('a/b')\n"
            "os.write(os.open('../climbed_dirfd', os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd), b'x')\n"
            "print('ESCAPED' if 'climbed_dirfd' in os.listdir('/proc/self/fd/%d/..' % fd) else '')"),
    Attempt("unlink relative to a dir_fd with '..'", "file system",
            "import os\nos.makedirs('a/b')\nfd = os.open('a/b', os.O_RDONLY)\nos.unlink('../../../../../../@OUTSIDE@/secret.txt', dir_fd=fd)"),
    Attempt("mknod outside", "file system", "import os, stat\nos.mknod('@OUTSIDE@/node', stat.S_IFREG | 0o644)"),
    Attempt("mkfifo outside", "file system", "import os\nos.mkfifo('@OUTSIDE@/fifo')"),
    Attempt("a pseudo-terminal (os.posix_openpt, Python 3.13+)", "file system",
            "import os\nfd = os.posix_openpt(os.O_RDWR | os.O_NOCTTY)\nprint('ESCAPED: /dev/ptmx opened', fd)"),
    Attempt("sqlite ATTACH outside", "file system",
            "import sqlite3\nc = sqlite3.connect(':memory:')\nc.execute(\"ATTACH '@OUTSIDE@/attached.db' AS x\")\n"
            "c.execute('CREATE TABLE x.t (a)')\nc.commit()"),
    Attempt("sqlite VACUUM INTO outside", "file system",
            "import sqlite3\nc = sqlite3.connect(':memory:')\nc.execute('CREATE TABLE t (a)')\nc.execute(\"VACUUM INTO '@OUTSIDE@/vacuum.db'\")"),
    Attempt("sqlite on a file outside", "file system", "import sqlite3\nsqlite3.connect('@OUTSIDE@/direct.db').execute('CREATE TABLE t (a)')"),
    Attempt("open via /dev/fd", "file system",
            "import os\nfd = os.open('.', os.O_RDONLY)\nopen('/dev/fd/%d/../devfd_escape' % fd, 'w').write('x')"),
    Attempt("open via /proc/self/cwd", "file system", "open('/proc/self/cwd/../procself_escape', 'w').write('x')"),
    Attempt("open via /proc/self/root", "file system", "print(open('/proc/self/root@SECRET@').read())"),
    Attempt("chdir outside", "file system", "import os\nos.chdir('@OUTSIDE@')\nprint(open('secret.txt').read())"),
    Attempt("fchdir outside", "file system", "import os\nos.fchdir(os.open('@OUTSIDE@', os.O_RDONLY))\nprint(open('secret.txt').read())"),
    Attempt("path object", "file system",
            "class P:\n    def __fspath__(self):\n        return '@SECRET@'\nprint(open(P()).read())"),
    Attempt("str subclass path", "file system",
            "class S(str):\n    def startswith(self, *a):\n        return True\n    def __str__(self):\n        return 'x'\n"
            "print(open(S('@SECRET@')).read())"),
    Attempt("bytes path", "file system", "print(open(b'@SECRET@').read())"),
    Attempt("io.open_code", "file system", "import io\nprint(io.open_code('@SECRET@').read())"),
    Attempt("shutil.copy out", "file system", "import shutil\nopen('f', 'w').write('x')\nshutil.copy('f', '@OUTSIDE@/copied')"),
    Attempt("tempfile outside", "file system", "import tempfile\ntempfile.mkstemp(dir='@OUTSIDE@')"),
    Attempt("zip slip", "file system", r'''
import io, zipfile
data = io.BytesIO()
with zipfile.ZipFile(data, "w") as z:
    z.writestr("../../../../../../../../@OUTSIDE@/zipslip", "x")
    z.writestr("@OUTSIDE@/zipslip_abs", "x")
with zipfile.ZipFile(data) as z:
    for info in z.infolist():
        with open(info.filename, "wb") as out:
            out.write(z.read(info))
'''),
    # ----------------------------------------------------------------------- process
    Attempt("os.system", "process", "import os\nos.system('touch @OUTSIDE@/by_system')"),
    Attempt("subprocess", "process", "import subprocess\nsubprocess.run(['touch', '@OUTSIDE@/by_subprocess'])"),
    Attempt("os.fork", "process", "import os\nif os.fork() == 0:\n    print('ESCAPED: forked')"),
    Attempt("os.forkpty", "process", "import os\npid, fd = os.forkpty()\nif pid == 0:\n    print('ESCAPED: forked')"),
    Attempt("os.execv", "process", "import os\nos.execv('/bin/sh', ['sh', '-c', 'touch @OUTSIDE@/by_exec'])"),
    Attempt("os.execve of a memfd", "process",
            "import os\nfd = os.memfd_create('x')\nos.write(fd, open('/bin/true', 'rb').read() if os.path.exists('/bin/true') else b'')\n"
            "os.execve(fd, ['true'], {})"),
    Attempt("os.posix_spawn", "process", "import os\nos.posix_spawn('/bin/touch', ['touch', '@OUTSIDE@/by_spawn'], {})"),
    Attempt("os.spawnv", "process", "import os\nos.spawnv(os.P_WAIT, '/bin/touch', ['touch', '@OUTSIDE@/by_spawnv'])"),
    Attempt("pty.spawn", "process", "import pty\npty.spawn(['touch', '@OUTSIDE@/by_pty'])"),
    Attempt("multiprocessing", "process",
            "import multiprocessing as mp\np = mp.Process(target=print, args=('ESCAPED: a process',))\np.start()\np.join()"),
    Attempt("process pool", "process",
            "from concurrent.futures import ProcessPoolExecutor\nwith ProcessPoolExecutor(1) as ex:\n    print(ex.submit(str, 'ESCAPED: pool').result())"),
    Attempt("asyncio subprocess", "process",
            "import asyncio\nasync def main():\n    p = await asyncio.create_subprocess_exec('touch', '@OUTSIDE@/by_asyncio')\n    await p.wait()\n"
            "asyncio.run(main())"),
    Attempt("_posixsubprocess.fork_exec", "process",
            "import _posixsubprocess, os\n_posixsubprocess.fork_exec(['touch', '@OUTSIDE@/by_fork_exec'], [b'/bin/touch'], True, (), None, None,"
            " -1, -1, -1, -1, -1, -1, *os.pipe(), False, False, -1, None, None, None, -1, None, False)"),
    Attempt("the real _posixsubprocess through importlib", "process",
            "import importlib.util, sys\ndel sys.modules['_posixsubprocess']\nspec = importlib.util.find_spec('_posixsubprocess')\n"
            "m = importlib.util.module_from_spec(spec)\nprint('ESCAPED: loaded', m)"),
    # ----------------------------------------------------------------------- network
    Attempt("TCP to 127.0.0.1", "network",
            "import socket\nsocket.create_connection(('127.0.0.1', @PORT@), timeout=1).sendall(b'ESCAPED')"),
    Attempt("HTTP to 127.0.0.1", "network", "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:@PORT@/', timeout=1)"),
    Attempt("UDP to 127.0.0.1", "network",
            "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'ESCAPED', ('127.0.0.1', @UDP@))"),
    Attempt("UNIX socket on the file system", "network",
            "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('@UNIX@')\ns.sendall(b'ESCAPED')"),
    Attempt("abstract UNIX socket", "network",
            "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('\\0@ABSTRACT@')\ns.sendall(b'ESCAPED')"),
    Attempt("name lookup", "network", "import socket\nsocket.getaddrinfo('localhost', @PORT@)\nprint('ESCAPED')"),
    Attempt("raw packet socket", "network", "import socket\nsocket.socket(socket.AF_PACKET, socket.SOCK_RAW)\nprint('ESCAPED')"),
    Attempt("socket.fromfd on stdin", "network",
            "import socket\ns = socket.fromfd(0, socket.AF_INET, socket.SOCK_STREAM)\ns.connect(('127.0.0.1', @PORT@))"),
    # ----------------------------------------------------------------------- introspection
    Attempt("sys._getframe and f_back", "introspection", _FRAME_WALK),
    Attempt("frames of a traceback", "introspection", _FIND_MACHINERY + r'''
try:
    raise ValueError
except ValueError as exc:
    frame = exc.__traceback__.tb_frame
while frame is not None:
    scan("traceback", frame.f_globals); scan("traceback locals", frame.f_locals); frame = frame.f_back
'''),
    Attempt("generator frame", "introspection", _FIND_MACHINERY + r'''
def gen():
    yield sys._getframe().f_back
frame = next(gen())
while frame is not None:
    scan("generator", frame.f_globals); frame = frame.f_back
'''),
    Attempt("signal handler frame", "introspection", _FIND_MACHINERY + r'''
import signal
def handler(signum, frame):
    while frame is not None:
        scan("signal handler", frame.f_globals); scan("signal handler locals", frame.f_locals); frame = frame.f_back
signal.signal(signal.SIGUSR1, handler)
signal.raise_signal(signal.SIGUSR1)
'''),
    Attempt("atexit handler frames", "introspection", _FINALIZER_WALK + "import atexit\natexit.register(walk)"),
    Attempt("finalizer frames", "introspection", _FINALIZER_WALK + r'''
class Late:
    def __del__(self):
        walk()
keep = Late()
'''),
    Attempt("gc callback frames", "introspection", _FINALIZER_WALK + "import gc\ngc.callbacks.append(lambda *a: walk())"),
    Attempt("thread excepthook frames", "introspection", _FINALIZER_WALK + r'''
import threading
threading.excepthook = lambda args: walk()
t = threading.Thread(target=lambda: 1 / 0)
t.start(); t.join()
'''),
    Attempt("inspect.stack", "introspection", _FIND_MACHINERY + "import inspect\nfor info in inspect.stack():\n    scan('inspect', info.frame.f_globals)"),
    Attempt("gc.get_objects", "introspection",
            "import gc\nprint('ESCAPED' if [o for o in gc.get_objects() if getattr(o, '__name__', '') == 'hook'] else '')"),
    Attempt("gc.get_referrers", "introspection",
            "import gc, sys\nfor r in gc.get_referrers(sys.modules):\n    print('ESCAPED', type(r))"),
    Attempt("sys._current_frames", "introspection", _FIND_MACHINERY + r'''
for frame in sys._current_frames().values():
    while frame is not None:
        scan("current frames", frame.f_globals); frame = frame.f_back
'''),
    Attempt("sys.settrace", "introspection", "import sys\nsys.settrace(lambda *a: None)\nprint('ESCAPED')"),
    Attempt("threading.settrace", "introspection",
            "import threading\nthreading.settrace(lambda *a: None)\nt = threading.Thread(target=print, args=('ESCAPED: traced',))\nt.start(); t.join()"),
    Attempt("subclass walk for the sandbox's classes", "introspection", _FIND_MACHINERY + _SUBCLASSES + r'''
for cls in subclasses():
    if suspicious(cls):
        print("ESCAPED:", cls)
        break
'''),
    Attempt("func.__globals__ of every reachable function", "introspection", _FIND_MACHINERY + _SUBCLASSES + r'''
import types
for cls in subclasses():
    for value in list(vars(cls).values()):
        value = getattr(value, "__func__", value)
        if isinstance(value, types.FunctionType):
            scan(f"{cls.__qualname__}.{value.__name__}.__globals__", value.__globals__)
'''),
    Attempt("sys.modules", "introspection", _FIND_MACHINERY + "scan('sys.modules', sys.modules)\n"
            "for m in list(sys.modules.values()):\n    scan('module ' + getattr(m, '__name__', '?'), getattr(m, '__dict__', {}))"),
    Attempt("re-import the sandbox's modules", "introspection",
            "import sys\nsys.path.insert(0, @SANDBOX@)\nimport _guard\nprint('ESCAPED', _guard.BLOCKED_MODULES)"),
    Attempt("reload posix for the real mknod", "introspection",
            "import importlib, posix, stat\nimportlib.reload(posix)\nposix.mknod('@OUTSIDE@/after_reload', stat.S_IFREG | 0o644)"),
    Attempt("a fresh posix module for the real mknod", "introspection",
            "import _imp, importlib.machinery, stat\nspec = importlib.machinery.ModuleSpec('posix', importlib.machinery.BuiltinImporter)\n"
            "_imp.create_builtin(spec).mknod('@OUTSIDE@/fresh_posix', stat.S_IFREG | 0o644)"),
    Attempt("a fresh pwd module", "introspection",
            "import importlib.machinery\nspec = importlib.machinery.ModuleSpec('pwd', importlib.machinery.BuiltinImporter)\n"
            "m = importlib.machinery.BuiltinImporter.create_module(spec)\nprint('ESCAPED' if m.getpwall() else '')"),
    Attempt("code object tampering", "introspection", _CRAFTED + "f.__code__ = crafted\nprint('RAN', f())\n" + _READ_SECRET),
    Attempt("marshal.loads of crafted code", "introspection",
            _CRAFTED + "import marshal\nf.__code__ = marshal.loads(marshal.dumps(crafted))\nprint('RAN', f())\n" + _READ_SECRET),
    Attempt("frozen-module loader with crafted data", "introspection",
            _CRAFTED + "import _imp, marshal\nf.__code__ = _imp.get_frozen_object('os', marshal.dumps(crafted))\n"
            "print('RAN', f())\n" + _READ_SECRET),
    Attempt("patched builtins and os.path", "introspection",
            "import builtins, os.path\nbuiltins.any = lambda x: True\nbuiltins.isinstance = lambda *a: True\n"
            "os.path.realpath = lambda p: '/usr'\nos.getcwd = lambda: '@OUTSIDE@'\nprint(open('@SECRET@').read())"),
    Attempt("patched str methods through a subclass", "introspection",
            "class Evil(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
            "import os\nprint(open(Evil('@SECRET@')).read())"),
    Attempt("a second audit hook", "introspection",
            "import sys\nsys.addaudithook(lambda *a: None)\nprint(open('@SECRET@').read())"),
    # ----------------------------------------------------------------------- ctypes and memory
    Attempt("import ctypes", "ctypes and memory", "import ctypes\nctypes.CDLL(None).system(b'touch @OUTSIDE@/by_ctypes')"),
    Attempt("ctypes smuggled back", "ctypes and memory", "import sys\ndel sys.modules['ctypes']\nimport ctypes\nprint('ESCAPED')"),
    Attempt("_ctypes through _imp.create_dynamic", "ctypes and memory",
            "import _imp, importlib.util, sys\ndel sys.modules['_ctypes']\n"
            "spec = importlib.util.spec_from_file_location('_ctypes', [p for p in __import__('glob').glob(sys.base_prefix + '/lib/python3*/lib-dynload/_ctypes.*')][0])\n"
            "m = _imp.create_dynamic(spec)\nprint('ESCAPED', m)"),
    Attempt("ctypes types found by a subclass walk", "ctypes and memory", _CTYPES_BY_SUBCLASSES),
    Attempt("cffi", "ctypes and memory", "import cffi\nffi = cffi.FFI()\nprint('ESCAPED', ffi.dlopen(None))"),
    Attempt("_cffi_backend", "ctypes and memory", "import sys\nsys.modules.pop('_cffi_backend', None)\nimport _cffi_backend\nprint('ESCAPED')"),
    Attempt("_testcapi", "ctypes and memory", "import sys\nsys.modules.pop('_testcapi', None)\nimport _testcapi\nprint('ESCAPED')"),
    Attempt("subinterpreter", "ctypes and memory",
            "import sys\nsys.modules.pop('_xxsubinterpreters', None)\nimport _xxsubinterpreters\nprint('ESCAPED')"),
    Attempt("subinterpreter (_interpreters, Python 3.13+)", "ctypes and memory",  # its create raises no audit event
            "import sys\nsys.modules.pop('_interpreters', None)\nimport _interpreters\ni = _interpreters.create()\n"
            "_interpreters.run_string(i, \"open('@OUTSIDE@/by_subinterpreter', 'w').write('x')\")\nprint('ESCAPED', i)"),
    Attempt("the fork server's stack (_testexternalinspection, Python 3.13+)", "ctypes and memory",
            "import os, sys\nsys.modules.pop('_testexternalinspection', None)\nimport _testexternalinspection\n"
            "print('ESCAPED', _testexternalinspection.get_stack_trace(os.getppid()))"),
    Attempt("the fork server's stack (_remote_debugging, Python 3.14+)", "ctypes and memory",
            "import os, sys\nsys.modules.pop('_remote_debugging', None)\nimport _remote_debugging\n"
            "print('ESCAPED', _remote_debugging.RemoteUnwinder(os.getppid()).get_stack_trace())"),
    Attempt("a subinterpreter (concurrent.interpreters, Python 3.14+)", "ctypes and memory",
            "from concurrent import interpreters\n"
            "interpreters.create().exec(\"open('@OUTSIDE@/by_interpreters', 'w').write('x')\")\nprint('ESCAPED')"),
    Attempt("a script run by the fork server (sys.remote_exec, Python 3.14+)", "process",
            "import os, sys, time\nopen('s.py', 'w').write(\"open('@OUTSIDE@/by_remote_exec', 'w').write('x')\")\n"
            "sys.remote_exec(os.getppid(), os.path.abspath('s.py'))\ntime.sleep(0.5)\nprint('ESCAPED')"),
    Attempt("/proc/self/mem", "ctypes and memory", "f = open('/proc/self/mem', 'r+b')\nprint('ESCAPED')"),
    Attempt("mmap of /proc/self/mem", "ctypes and memory",
            "import mmap, os\nfd = os.open('/proc/self/mem', os.O_RDWR)\nmmap.mmap(fd, 4096)\nprint('ESCAPED')"),
    Attempt("numpy raw pointer", "ctypes and memory", r'''
import numpy as np
text = b"immutable bytes"
class Raw:
    __array_interface__ = {"data": (id(text) + 32, False), "shape": (len(text),), "typestr": "|u1", "version": 3}
view = np.asarray(Raw())
view[0] = ord("X")
print("MEMORY", text)
''' + _READ_SECRET),
    # ----------------------------------------------------------------------- resources
    Attempt("fork bomb", "resources", "import os\nwhile True:\n    os.fork()"),
    Attempt("memory bomb", "resources", "x = bytearray(10 ** 10)"),
    Attempt("growing memory", "resources", "chunks = []\nwhile True:\n    chunks.append(' ' * 10 ** 6)"),
    Attempt("disk: one huge file", "resources", "with open('big', 'wb') as f:\n    while True:\n        f.write(b'x' * 10 ** 6)"),
    Attempt("disk: many files", "resources",
            "i = 0\nwhile i < 40:\n    open(f'f{i}', 'wb').write(b'x' * 4 * 10 ** 6)\n    i += 1"),
    Attempt("output flood", "resources", "while True:\n    print('spam' * 100)"),
    Attempt("stderr flood", "resources", "import sys\nwhile True:\n    sys.stderr.write('spam' * 100)"),
    Attempt("infinite loop", "resources", "while True:\n    pass"),
    Attempt("sleep forever", "resources", "import time\ntime.sleep(10 ** 6)"),
    Attempt("ignore SIGXCPU", "resources", "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass"),
    Attempt("thread bomb", "resources",
            "import threading, time\nfor _ in range(100000):\n    threading.Thread(target=time.sleep, args=(100,), daemon=True).start()"),
    Attempt("file descriptor exhaustion", "resources", "fds = [open('/dev/null') for _ in range(100000)]"),
    Attempt("raise a limit", "resources",
            "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))\nprint('ESCAPED')"),
    Attempt("recursion to a crash", "resources", "import sys\nsys.setrecursionlimit(10 ** 7)\ndef f(n):\n    return f(n + 1)\nf(0)"),
    # ----------------------------------------------------------------------- signals
    Attempt("kill the parent", "signals", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('ESCAPED')"),
    Attempt("kill a process outside", "signals", _KILL_CANARY),
    Attempt("kill everything", "signals", "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('ESCAPED')"),
    Attempt("kill pid 1", "signals", "import os, signal\nos.kill(1, signal.SIGKILL)\nprint('ESCAPED')"),
    Attempt("killpg of the parent's group", "signals",
            "import os, signal\nos.killpg(os.getpgid(os.getppid()), signal.SIGKILL)\nprint('ESCAPED')"),
    Attempt("pidfd_send_signal", "signals",
            "import os, signal\nsignal.pidfd_send_signal(os.pidfd_open(@CANARY@), signal.SIGKILL)\nprint('ESCAPED')"),
    Attempt("prlimit of another process", "signals",
            "import resource\nresource.prlimit(@CANARY@, resource.RLIMIT_NOFILE, (0, 0))\nprint('ESCAPED')"),
    Attempt("renice another process", "signals", "import os\nos.setpriority(os.PRIO_PROCESS, @CANARY@, 19)\nprint('ESCAPED')"),
    Attempt("pin another process", "signals", "import os\nos.sched_setaffinity(@CANARY@, {0})\nprint('ESCAPED')"),
    Attempt("signal the parent's threads", "signals",
            "import os, signal\nsignal.pthread_kill(os.getppid(), signal.SIGKILL)\nprint('ESCAPED')"),
    # ----------------------------------------------------------------------- persistence
    Attempt("a file in the run directory", "persistence", "open('left.txt', 'w').write('@TOKEN@')",
            then="import os\nprint([open(f).read() for f in os.listdir('.') if os.path.isfile(f)])"),
    Attempt("a hidden, unreadable directory", "persistence",
            "import os\nos.makedirs('.h/i')\nopen('.h/i/t', 'w').write('@TOKEN@')\nos.chmod('.h/i', 0)\nos.chmod('.h', 0)",
            then="import os\nprint(os.listdir('.'))\nos.chmod('.h', 0o700)\nos.chmod('.h/i', 0o700)\nprint(open('.h/i/t').read())"),
    Attempt("deeply nested directories", "persistence",
            "import os\nfor i in range(300):\n    os.mkdir('d')\n    os.chdir('d')\nopen('t', 'w').write('@TOKEN@')",
            then="import os\nprint(os.listdir('.'))\nwhile os.path.isdir('d'):\n    os.chdir('d')\nprint(open('t').read())"),
    Attempt("an extended attribute on the run directory", "persistence", "import os\nos.setxattr('.', 'user.t', b'@TOKEN@')",
            then="import os\nprint([os.getxattr('.', n) for n in os.listxattr('.')])"),
    Attempt("flags on the run directory (FS_IOC_SETFLAGS)", "persistence", SET_DIRECTORY_FLAGS,
            then="import array, fcntl, os\nflags = array.array('l', [0])\nfcntl.ioctl(os.open('.', os.O_RDONLY), 0x80086601, flags, True)\n"
                 "print('ESCAPED' if flags[0] & 0x40 else '')"),
    Attempt("the run directory's times and mode", "persistence",
            "import os\nos.utime('.', (1234567, 7654321))\nos.chmod('.', 0o751)",
            then="import os\ns = os.stat('.')\nprint('ESCAPED' if s.st_mtime == 7654321 or s.st_mode & 0o777 == 0o751 else '')"),
    Attempt("a file next to the run directory (dir_fd)", "persistence",
            "import os\nos.makedirs('a/b')\nfd = os.open('.', os.O_RDONLY)\nos.chdir('a/b')\n"
            "os.write(os.open('../next_to_run', os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd), b'@TOKEN@')",
            then="import os\nos.makedirs('a/b')\nfd = os.open('.', os.O_RDONLY)\nos.chdir('a/b')\n"
                 "print(os.read(os.open('../next_to_run', os.O_RDONLY, dir_fd=fd), 100))"),
    Attempt("a file next to the run directory ('..')", "persistence", "open('../next_to_run2', 'w').write('@TOKEN@')",
            then="print(open('../next_to_run2').read())"),
    Attempt("/dev/shm", "persistence", "open('/dev/shm/llm_marl_escape_@TOKEN@', 'w').write('@TOKEN@')",
            then="print(open('/dev/shm/llm_marl_escape_@TOKEN@').read())"),
    Attempt("a perf map in /tmp (sys.activate_stack_trampoline, Python 3.12+)", "persistence",
            "import sys\nsys.activate_stack_trampoline('perf')\ndef left_@TOKEN@(): pass\nleft_@TOKEN@()"),
    Attempt("patched modules in memory", "persistence",
            "import json, os\njson.dumps = lambda *a, **k: '@TOKEN@'\nos.environ['T'] = '@TOKEN@'",
            then="import json, os\nprint(json.dumps(1), os.environ.get('T'))"),
    Attempt("a thread left running", "persistence",
            "import threading, time\ndef keep():\n    while True:\n        open('from_thread', 'w').write('@TOKEN@'); time.sleep(0.01)\n"
            "threading.Thread(target=keep, daemon=True).start()\ntime.sleep(0.1)",
            then="import os, time\ntime.sleep(0.2)\nprint(os.listdir('.'))"),
    Attempt("an earlier run's code, output and file names in memory", "persistence",  # stderr: its own stdout must not show the token
            "import os, sys\nprint('@@earlier-run:@TOKEN@', file=sys.stderr)\nopen('@@earlier' + '-run:@TOKEN@', 'w').close()",
            then=MEMORY_SCAN),
]


# --------------------------------------------------------------------------------- the harness

def with_sandbox_dir(code: str) -> str:
    """`code` with @SANDBOX@ replaced by (a literal of) the sandbox package's directory."""
    return code.replace("@SANDBOX@", repr(str(Path(sys.modules[Sandbox.__module__].__file__).resolve().parent)))


def attempt(name: str) -> Attempt:
    return next(a for a in ATTEMPTS if a.name == name)


@dataclass
class Outside:
    """What lies outside the sandbox, and what it noticed."""

    directory: Path
    secret: Path
    token: str
    port: int = 0
    udp_port: int = 0
    unix_path: str = ""
    abstract: str = ""
    canary: subprocess.Popen | None = None
    heard: list[str] = field(default_factory=list)
    _sockets: list[socket.socket] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def substitute(self, code: str) -> str:
        values = {"@OUTSIDE@": str(self.directory), "@SECRET@": str(self.secret), "@TOKEN@": self.token,
                  "@PORT@": str(self.port), "@UDP@": str(self.udp_port), "@UNIX@": self.unix_path,
                  "@ABSTRACT@": self.abstract, "@CANARY@": str(self.canary.pid if self.canary else 0)}
        for key, value in values.items():
            code = code.replace(key, value)
        return with_sandbox_dir(code)

    def snapshot(self) -> tuple:
        stat = self.secret.stat()
        try:
            xattrs = tuple(os.listxattr(self.secret))
        except OSError:
            xattrs = ()
        entries = tuple(sorted(p.name for p in self.directory.iterdir()))
        in_tmp = tuple(sorted(p for p in os.listdir("/tmp") if p.startswith(("llm_marl_escape_", "perf-"))))
        in_shm = tuple(sorted(p for p in os.listdir("/dev/shm") if p.startswith("llm_marl_escape_"))) if os.path.isdir("/dev/shm") else ()
        return (self.secret.read_text(), stat.st_mode, stat.st_mtime_ns, xattrs, entries, in_tmp, in_shm)


def start_outside() -> Outside:
    # In /tmp, not $TMPDIR: the listening socket's path must fit AF_UNIX's 107 bytes.
    directory = Path(tempfile.mkdtemp(prefix="llm_marl_outside_", dir="/tmp"))
    directory.chmod(0o755)
    token = "tok" + secrets.token_hex(8)
    secret = directory / "secret.txt"
    secret.write_text(token)
    secret.chmod(0o644)
    outside = Outside(directory, secret, token)
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX)
    outside.unix_path = str(directory / "listener.sock")
    unix.bind(outside.unix_path)
    unix.listen()
    abstract = socket.socket(socket.AF_UNIX)
    outside.abstract = "llm_marl_escape_" + token
    abstract.bind("\0" + outside.abstract)
    abstract.listen()
    outside.port, outside.udp_port = tcp.getsockname()[1], udp.getsockname()[1]
    outside._sockets = [tcp, udp, unix, abstract]
    for sock in outside._sockets:
        threading.Thread(target=_listen, args=(outside, sock), daemon=True).start()
    outside.canary = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    return outside


def _listen(outside: Outside, sock: socket.socket) -> None:
    sock.settimeout(0.2)
    while not outside._stop.is_set():
        try:
            if sock.type == socket.SOCK_DGRAM:
                data, _ = sock.recvfrom(100)
                outside.heard.append(f"udp: {data!r}")
            else:
                conn, _ = sock.accept()
                outside.heard.append(f"{sock.family.name} connection")
                conn.close()
        except OSError:
            continue


def stop_outside(outside: Outside) -> None:
    outside._stop.set()
    for sock in outside._sockets:
        sock.close()
    if outside.canary is not None and outside.canary.poll() is None:
        outside.canary.kill()
        outside.canary.wait()
    shutil.rmtree(outside.directory, ignore_errors=True)
    for directory in ("/tmp", "/dev/shm"):
        if os.path.isdir(directory):
            for name in os.listdir(directory):
                if name.startswith("llm_marl_escape_"):
                    Path(directory, name).unlink(missing_ok=True)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc, any depth; one that exits meanwhile is skipped)."""
    out = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            out += [child, *descendants(child)]
    return out


def janitor(server: int) -> int | None:
    """The fork server's janitor, where it has one (`_server._start_janitor`): its first child,
    which closed the owner's pipes. None where it has none: its first child is then a spare or a
    program, whose descriptors 0 and 1 are pipes (the owner's, or their own). Not "descriptors 0
    to 2 closed": while the janitor empties the run directory, the directory it lists is one of
    them (the lowest free descriptor), which made a busy janitor count as a leftover process."""
    first = next(iter(descendants(server)), None)  # depth first: the first child comes first
    if first is None:
        return None

    def pipe(fd: int) -> bool:
        try:
            return os.readlink(f"/proc/{first}/fd/{fd}").startswith("pipe:")
        except FileNotFoundError:
            return False

    return first if not pipe(0) and not pipe(1) and Path(f"/proc/{first}/fd").exists() else None  # (not gone meanwhile)


def sandboxed(supervisor: int) -> list[int]:
    """The fork server below `supervisor` and every process below it, less its janitor (the
    server's own helper, not a program's): its spare, a run's child and what a run left."""
    pids = descendants(supervisor)
    helper = janitor(pids[0]) if pids else None
    return [pid for pid in pids if pid != helper]


def left_behind(supervisor: int, wait: float = 5.0) -> list[int]:
    """The processes below a worker's fork server, less its janitor and its spare: a child forked
    for the next job that waits for it (blocked reading its stdin; one still preparing is given
    `wait` seconds to get there). A program that outlived its run sleeps, spins or writes instead;
    one that has ended by then (gone, or a zombie its server is reaping) did not outlive it."""
    server, *below = sandboxed(supervisor) or [None]
    spares = [pid for pid in below if _waits_for_a_job(pid, server, wait)]
    return [pid for pid in below if pid not in spares[:1] and running(pid)]


def describe(pid: int) -> str:
    """A process as /proc shows it, for a failing test's message: state, parent, syscall, command line."""
    def read(name: str) -> str:
        try:
            return Path(f"/proc/{pid}/{name}").read_text(errors="replace")
        except OSError as exc:
            return f"<{type(exc).__name__}>"
    stat = read("stat").rpartition(")")[2].split()[:2]
    return (f"{pid}: state and parent {stat}, syscall {read('syscall').split()[:2]}, "
            f"command line {read('cmdline').replace(chr(0), ' ')[:120]!r}")


def _waits_for_a_job(pid: int, server: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            parent = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
            call = Path(f"/proc/{pid}/syscall").read_text().split()
        except OSError:
            return False  # gone meanwhile
        if parent != server:
            return False
        if call[:2] == ["0", "0x0"]:  # read(0, ...)
            return True
        time.sleep(0.01)
    return False


def _server_of(sandbox: Sandbox) -> tuple[int, ...]:
    """(supervisor, fork server) of the sandbox's one worker, started if need be."""
    pids = sandbox._worker_pids()
    if not pids:
        sandbox.run("pass")
        pids = sandbox._worker_pids()
    return tuple(pids + descendants(pids[0])[:1])


def try_attempt(sandbox: Sandbox, outside: Outside, attempt: Attempt) -> Verdict:
    """Run one attempt on a one-worker sandbox and judge whether it stayed inside."""
    before, servers = outside.snapshot(), _server_of(sandbox)
    heard = len(outside.heard)
    result = sandbox.run(outside.substitute(attempt.code))
    results = [result]
    if attempt.then is not None:
        results.append(sandbox.run(outside.substitute(attempt.then)))
    time.sleep(0.05)  # a datagram or connection in flight
    why = []
    for r in results:
        if "ESCAPED" in r.stdout or outside.token in r.stdout:
            why.append(f"printed {r.stdout.strip()[:200]!r}")
    if outside.snapshot() != before:
        why.append(f"changed the outside: {before} -> {outside.snapshot()}")
    if len(outside.heard) > heard:
        why.append(f"reached a listener: {outside.heard[heard:]}")
    if outside.canary is None or outside.canary.poll() is not None:
        why.append("killed the canary")
        outside.canary = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    if servers != _server_of(sandbox):
        why.append("killed its server")
    leftovers = left_behind(sandbox._worker_pids()[0]) if sandbox._worker_pids() else []
    if leftovers:
        why.append(f"left processes {leftovers}")
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
    after = sandbox.run("import os\nprint(sorted(os.listdir('.')))")
    if after.stdout != "[]\n":
        why.append(f"left files for the next run: {after.stdout.strip()[:200]}")
    return Verdict(not why, "/".join(r.status for r in results), "; ".join(why))


def corpus_sandbox(kernel_layers: bool) -> Sandbox:
    return Sandbox(LIMITS, workers=1, _kernel_layers=kernel_layers)


def results_by_category(verdicts: dict[str, Verdict]) -> dict[str, tuple[int, int]]:
    """category -> (contained, tried)."""
    by: dict[str, list[bool]] = {c: [] for c in CATEGORIES}
    for attempt in ATTEMPTS:
        if attempt.name in verdicts:
            by[attempt.category].append(verdicts[attempt.name].contained)
    return {c: (sum(v), len(v)) for c, v in by.items()}


def run_corpus(kernel_layers: bool, attempts: list[Attempt] = ATTEMPTS) -> dict[str, Verdict]:
    outside = start_outside()
    try:
        with corpus_sandbox(kernel_layers) as sandbox:
            return {a.name: try_attempt(sandbox, outside, a) for a in attempts}
    finally:
        stop_outside(outside)
