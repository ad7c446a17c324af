"""The bottom of a sandboxed program's stack (fork server side, standard library only).

`run` is what the fork server's child calls last, with nothing of the sandbox's own below it: the
program can walk up to this frame (sys._getframe().f_back) and read this module's globals, so
they hold only standard-library modules. Whatever the program does to them changes nothing but
how it reports its own exit.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import traceback


def run(program, namespace: dict, stdout, stderr, blocked: tuple[str, ...], mark: str, blocked_exit: int) -> None:
    """Run `program` (its source, compiled here, or the code object the owner compiled from it) as
    `__main__`, then exit the way the interpreter would (never returns)."""
    code = 0
    try:
        if isinstance(program, str):
            program = compile(program, "main.py", "exec", dont_inherit=True)
        exec(program, namespace)
    except SystemExit as exc:
        code = _exit_code(exc, stderr)
    except BaseException as exc:
        code = 1
        _print_exception(exc)
        name = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
        if isinstance(name, str) and name.partition(".")[0] in blocked:
            code = blocked_exit  # a module the sandbox withholds
            os.write(2, f"{mark}import {name}\n".encode())
    try:  # what the interpreter does at exit: join threads, atexit, free the module's objects
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
        atexit._run_exitfuncs()
        namespace.clear()  # e.g. flushes a file the program left open
        gc.collect()
    except BaseException:
        pass
    for stream in (stdout, stderr):
        try:
            stream.flush()
        except BaseException:
            code = code or 1
    os._exit(code & 0xFF)


def _exit_code(exc: SystemExit, stderr) -> int:
    """What the interpreter would exit with for `sys.exit(exc.code)`."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    try:
        print(exc.code, file=stderr)
    except BaseException:
        pass
    return 1


def _print_exception(exc: BaseException) -> None:
    # The first frame is run()'s exec: the program sees only its own frames.
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    try:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
    except BaseException:  # e.g. MemoryError again while formatting
        text = f"{type(exc).__name__}: {exc}\n"
    try:
        os.write(2, text.encode("utf-8", "backslashreplace"))
    except BaseException:
        pass
