"""Fork server: `python -I _server.py RUN_DIR LAYERS` (standard library only; never loads ctypes).

Started by the supervisor (`_supervisor`), already confined: it runs as the user the programs run
as, under the Landlock ruleset and the seccomp filter they run under. It speaks on stdin/stdout:
it first says {"layers": {...}} (the isolation layers this machine gives it), then serves jobs as
`_protocol` describes.

Each job runs in a child forked from this warm interpreter (a few milliseconds instead of an
interpreter start-up), in RUN_DIR: the one directory a program may write, emptied (and its
metadata reset) after every job, so a run finds nothing of an earlier one there. Nor in its
memory, which is a copy of this process's: the server parses only a job's header, and holds the
rest of the job (the child's order, the program's stdin) and what the program writes only in
buffers that no child inherits (`_private`); and where a program can read its own memory (Landlock
and seccomp both on: see `_guard`), what a program left in the run directory is removed by another
process, the janitor (`_start_janitor`), so that the names it chose are never read into this
process either (whether it left anything, this process tells without reading a name where it can:
`_left_nothing`). A child reads its job at the start of its stdin
(`_child.receive_job`). It may be forked ahead of its job, at start-up or while the previous job
runs (when its "ahead" says that a core is free for it): a spare that prepares the program's
interpreter, then waits for its job (it enters the run directory only then: the run before may
take the directory's permissions, which are reset before the next job is handed out); the next
job then does not wait for a fork and a preparation. Without a spare, a job's child is forked
when it comes. This process supervises the child: it feeds stdin, enforces the wall clock and
the output cap, kills the child's process group, and kills it and exits at once when its owner
goes away (its end of the pipes closes).

The child returns from every function of this module (`_fork_child` -> `supervise` -> `main` ->
module level), so that nothing of the server is left below the program's frame; this module
defines no class, so that a subclass walk finds nothing of it either (see `_child`).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _child  # noqa: E402
import _guard  # noqa: E402

_child.withhold_modules(_guard.BLOCKED_MODULES)  # before any other import (see BLOCKED_MODULES)
import _paths  # noqa: E402
import _protocol  # noqa: E402
import _run  # noqa: E402

sys.path.pop(0)

import gc  # noqa: E402
import json  # noqa: E402
import mmap  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import stat  # noqa: E402
import time  # noqa: E402

# Pre-imported so that programs start warm (a fork shares them), and not bound here: a child drops
# this module's globals one by one (see `_child`), a write to each one's memory, which the child
# must then copy (page by page) from the server's. Not threading (nor queue, which imports it): its
# at-fork hook runs in every child, which costs more than the import in the few programs that use
# it. random's hook runs in every child too (in a bare forked interpreter about 40 page copies; a
# sandbox child without random measured no fewer in all), and a program that imports random itself
# pays about 3 ms; tempfile and statistics import it anyway.
for _module in ("bisect", "collections", "dataclasses", "decimal", "fractions", "functools", "heapq", "itertools",
                "math", "random", "re", "statistics", "string", "tempfile", "typing"):
    __import__(_module)

_layers = json.loads(sys.argv[2])
if not (_layers.get("landlock_fs") and _layers.get("seccomp")):  # asyncio makes code objects at import,
    import asyncio  # noqa: E402,F401                             # which the guard alone refuses

for _name in sys.builtin_module_names:  # the import system cannot create them in a program (see _child)
    if _name not in _guard.BLOCKED_MODULES:
        __import__(_name)
_child.seal_interpreter()

_CHUNK = 65536
# What a job costs the server is mostly the pages of its memory that it writes between one fork and
# the next (each one a copy): the job's header is read and the answer written without the json
# module's Python layers and the io stack: fewer pages a job than json.loads, json.dumps and sys.stdout.
_read_json = json.JSONDecoder().scan_once  # json.loads but for its check of the text after the object
_quote = json.encoder.encode_basestring_ascii  # what json.dumps does to a str


def main() -> tuple | None:
    """Serve jobs until the end of input (returns None). In a forked child, returns what the
    child needs to prepare and run its program."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal reaches the whole group
    run_dir, layers = sys.argv[1], dict(json.loads(sys.argv[2]), audit_hook=True)
    try:
        policy = _policy(run_dir, layers)
        prepared = _child.prepare_server(policy)
        _empty(run_dir)
        # A janitor only where a program can read its memory (elsewhere the audit hook refuses
        # what would read it), and so never in the init of a PID namespace without the seccomp
        # layer, which must have no child but the program's (see below).
        janitor = _start_janitor(run_dir) if policy["kernel_contains_code"] else None
    except Exception as exc:  # pragma: no cover (depends on the machine)
        _say((json.dumps({"error": repr(exc)}) + "\n").encode())
        return None
    _say((json.dumps({"layers": layers}) + "\n").encode())
    # Nothing allocated so far needs collecting: keep the collector from touching (and so
    # copying, page by page) the server's objects in every child.
    gc.collect()
    gc.freeze()
    # The init of a PID namespace without the seccomp layer must find and kill whatever a program
    # left behind, which it tells by having no child left once the program's is reaped: no spare
    # there. Elsewhere a program cannot leave a process behind (seccomp refuses its forks) or
    # what it leaves is in its own process group, which a spare is not.
    state = {"ahead": bool(layers.get("seccomp")) or os.getpid() != 1, "spare": None, "janitor": janitor,
             "emptying": False, "last": False, "run_dir": run_dir,
             # the size and links of the empty run directory (see _left_nothing)
             "empty": _size_and_links(run_dir) if janitor and layers.get("scratch_tmpfs") else None}
    in_child, state["spare"] = _fork_child() if state["ahead"] else (False, None)
    if in_child:
        return (policy, prepared, *state["spare"])
    while (job := _next_job(state)) is not None:
        _say(b'{"started": true}\n')  # the job reached a live server (safe to retry if not)
        try:
            outcome, value = supervise(job, state)
        except Exception as exc:  # the server must answer every job
            outcome, value = "result", ({"status": "crash", "exit_code": None, "note": f"[sandbox] internal error: {exc!r}"}, ())
        if outcome == "child":
            _child._KEPT.append((job, layers, state))  # not freed on the way out (see _child._KEPT)
            return (policy, prepared, *value)
        if outcome != "result":
            break  # the owner is gone
        _answer(*value)
        if state["last"]:  # the janitor is gone (see _emptied)
            break
        # After answering: off the caller's path, before the next job.
        if state["janitor"] is None:
            _empty(run_dir)
        elif not _left_nothing(state):
            try:
                os.write(state["janitor"][0], b"e")  # it empties the directory while we wait for a job
            except OSError:  # it is gone: no more jobs (the owner gives the next one to a new worker)
                break
            state["emptying"] = True
    _discard(state["spare"])
    return None


def _say(line: bytes) -> None:
    """Write a line to the owner (our stdout), whole."""
    view = memoryview(line)
    while view:
        view = view[os.write(1, view):]


def _next_job(state: dict) -> dict | None:
    """The next job's header, once its payload is in `state["input"]`; None at the end of input
    (the owner is done, or gone)."""
    try:
        size = int.from_bytes(_child._read_exactly(0, _protocol.HEADER_BYTES), "little")
        job = _read_json(_child._read_exactly(0, size).decode(), 0)[0]
        view = memoryview(_private(state, "input", int(job["payload"])))[:int(job["payload"])]
        while view:
            got = os.readv(0, [view])
            if not got:
                raise EOFError
            view = view[got:]
    except EOFError:
        return None
    return job


def _private(state: dict, name: str, size: int) -> mmap.mmap:
    """`state[name]`, a buffer of at least `size` bytes (made anew if it is smaller) in memory that
    no child inherits (MADV_DONTFORK): what the server holds of a job's bytes is there only, so that
    no program finds them in its copy of the server's memory. In a child the object must never be
    freed (its memory is not mapped there: see `_child._KEPT`)."""
    buffer = state.get(name)
    if buffer is None or len(buffer) < size:
        buffer = state[name] = mmap.mmap(-1, max(size, _CHUNK), flags=mmap.MAP_PRIVATE)
        buffer.madvise(mmap.MADV_DONTFORK)
    return buffer


def _answer(end: dict, output: tuple) -> None:
    """Say how the job's child ended, followed by what it wrote (`output`: a buffer and how many of
    its bytes, for stdout then stderr), as `_protocol` describes: in one write where it fits the
    pipe, so that the owner wakes once for the whole answer."""
    status, exit_code = end["status"], end["exit_code"]
    sizes = [size for _, size in output] or [0, 0]
    line = (f'{{"status": {"null" if status is None else _quote(status)}, '
            f'"exit_code": {"null" if exit_code is None else int(exit_code)}, "note": {_quote(end["note"])}, '
            f'"output": [{sizes[0]}, {sizes[1]}]}}\n').encode()
    views = [memoryview(line), *(memoryview(buffer)[:size] for buffer, size in output if size)]
    while views:
        written = os.writev(1, views)
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if views:
            views[0] = views[0][written:]


def _policy(run_dir: str, layers: dict) -> dict:
    """What every child of this server gets: the guard's policy and the child's settings."""
    loaded = [name for name in _guard.BLOCKED_MODULES if getattr(sys.modules.get(name), "__spec__", None) is not None]
    if loaded:  # not a shim: the real module (see BLOCKED_MODULES)
        raise RuntimeError(f"the fork server loaded {loaded}: programs could re-create them")
    sandbox = _paths.sandbox_dir()
    return {
        "run_dir": os.path.realpath(run_dir), "sandbox_dir": sandbox, "read_roots": _paths.read_roots(),
        "deny_roots": _paths.deny_roots(sandbox), "read_files": _paths.read_files(),
        "write_files": _paths.write_files(), "extension_dirs": _paths.extension_dirs(),
        "blocked_modules": tuple(_guard.BLOCKED_MODULES),
        "kernel_enforces_files": bool(layers.get("landlock_fs")),
        "kernel_contains_code": bool(layers.get("landlock_fs") and layers.get("seccomp")),
        "no_processes": layers.get("user") == "nobody" and not layers.get("seccomp"),
    }


def supervise(job: dict, state: dict) -> tuple[str, object]:
    """Run one job in the spare child, or in a child forked for it if there is none (or it died),
    and fork the next spare while it runs (`state["ahead"]` and the job's "ahead"). Returns
    ("result", how it ended and what it wrote: see `_answer`) here, ("gone", None) if the owner went
    away meanwhile, and ("child", what `_child.enter` needs) in a forked child."""
    child = state["spare"]
    if child is not None and os.waitpid(child["pid"], os.WNOHANG)[0] != 0:  # it died while waiting
        _discard(child)
        child = None
    state["spare"] = None
    if child is None:
        in_child, child = _fork_child()
        if in_child:
            return "child", child
    try:
        if state["emptying"]:
            _emptied(state)  # before the program can start (its child gets its job below)
        watch = _watch(child, job, state)
    except BaseException:  # a malformed job, or no emptied directory: its child goes, the server answers (`main`)
        _discard(child)
        raise
    # The owner says whether a core is free for a spare; none after the last job (see _emptied).
    if state["ahead"] and job.get("ahead", True) and not state["last"]:
        try:
            in_child, state["spare"] = _fork_child()
        except OSError:  # no spare now: the next job forks its own
            in_child = False
        if in_child:
            _child._KEPT.append((job, watch))  # the running job's: not freed (see _child._KEPT)
            return "child", state["spare"]
    try:
        _wait(watch)
    finally:
        _finish(watch, sweep=not state["ahead"])
    if watch["status"] == "gone":
        return "gone", None
    # Pairs written out: a tuple built from a generator is allocated larger and shrunk, and its
    # freeing then grows a free list by one tuple a job (up to 2,000), objects every child touches.
    out_r, err_r = watch["out_r"], watch["err_r"]
    return "result", (_end(watch, job["limits"]), ((watch["output"][out_r], watch["kept"][out_r]),
                                                   (watch["output"][err_r], watch["kept"][err_r])))


def _fork_child() -> tuple[bool, object]:
    """Fork a child, which prepares and then reads its job. Returns (False, its pid and our ends
    of its pipes) here and (True, what `_child.enter` needs: its ends: stdin, stdout, stderr,
    lifeline) in the child. The lifeline is never written: its closing tells the child that the
    server is gone."""
    fds = [*os.pipe(), *os.pipe(), *os.pipe(), *os.pipe()]
    in_r, in_w, out_r, out_w, err_r, err_w, life_r, life_w = fds
    try:
        pid = os.fork()
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    if pid == 0:
        try:
            for fd in (in_w, out_r, err_r, life_w):
                os.close(fd)
        except BaseException:
            os._exit(_child.SETUP_FAILED_EXIT)
        return True, (in_r, out_w, err_w, life_r)
    for fd in (in_r, out_w, err_w, life_r):
        os.close(fd)
    try:
        exit_fd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        exit_fd = None  # old kernel: poll for the exit instead
    return False, {"pid": pid, "in_w": in_w, "out_r": out_r, "err_r": err_r, "life_w": life_w, "exit_fd": exit_fd}


def _discard(child: dict | None) -> None:
    """Kill a spare that no job will use, reap it and close our ends of its pipes."""
    if child is None:
        return
    try:
        os.kill(child["pid"], signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.waitpid(child["pid"], 0)
    except ChildProcessError:  # reaped already
        pass
    for fd in (child["in_w"], child["out_r"], child["err_r"], child["life_w"], child["exit_fd"]):
        if fd is not None:
            os.close(fd)


def _watch(child: dict, job: dict, state: dict) -> dict:
    """Start feeding `child` the job's payload (its order, then the program's stdin: see
    `_protocol`) and return the state of its run: what is left to feed it, what it wrote (kept in
    `_private` buffers, up to the output cap), how it ended."""
    out_r, err_r, cap = child["out_r"], child["err_r"], int(job["limits"]["output_bytes"])
    watch = {**child, "input": state["input"], "size": int(job["payload"]), "sent": 0,
             # a read lands after what was kept (at most `cap` bytes), so a buffer needs cap + _CHUNK
             "output": {out_r: _private(state, "stdout", cap + _CHUNK), err_r: _private(state, "stderr", cap + _CHUNK)},
             "kept": {out_r: 0, err_r: 0}, "open": {out_r, err_r}, "cap": cap, "total": 0, "status": None,
             "wait_status": None, "cpu_s": 0.0, "deadline": time.monotonic() + float(job["limits"]["wall_time_s"])}
    os.set_blocking(child["in_w"], False)
    _feed(watch)  # what fits the pipe is written at once (nearly always all of it)
    return watch


def _wait(watch: dict) -> None:
    """Feed stdin and collect output until the child has exited and closed its output, or a limit
    is hit, or the owner goes away (the end of our stdin hangs up)."""
    poller = select.poll()
    for fd in watch["open"]:
        poller.register(fd, select.POLLIN)
    if watch["in_w"] is not None:
        poller.register(watch["in_w"], select.POLLOUT)
    if watch["exit_fd"] is not None:
        poller.register(watch["exit_fd"], select.POLLIN)
    poller.register(0, 0)  # reports only a hang-up
    while watch["open"] or watch["wait_status"] is None:
        left = watch["deadline"] - time.monotonic()
        if left <= 0:
            watch["status"] = "timeout"
            return
        polling = watch["exit_fd"] is None and watch["wait_status"] is None
        events = poller.poll(max(1, int(min(left, 0.005 if polling else left) * 1000)))
        if polling:
            _reap(watch, os.WNOHANG)
        for fd, _ in events:
            if fd == 0:
                watch["status"] = "gone"
                return
            if fd == watch["exit_fd"]:
                poller.unregister(fd)
                _reap(watch, os.WNOHANG)
            elif fd == watch["in_w"]:
                if not _feed(watch):
                    poller.unregister(fd)
            elif not _read(watch, fd):
                poller.unregister(fd)
        if watch["total"] > watch["cap"]:
            watch["status"] = "output_limit"
            return


def _read(watch: dict, fd: int) -> bool:
    """Read what the child wrote on `fd` (into its buffer, keeping what is under the cap); False
    at its end."""
    kept = watch["kept"][fd]
    got = os.readv(fd, [memoryview(watch["output"][fd])[kept:kept + _CHUNK]])
    if not got:
        watch["open"].discard(fd)
        return False
    watch["kept"][fd] = kept + min(got, max(0, watch["cap"] - watch["total"]))
    watch["total"] += got
    return True


def _feed(watch: dict) -> bool:
    """Write more of stdin; False once it is all written (or unwanted) and closed."""
    sent, size = watch["sent"], watch["size"]
    try:
        watch["sent"] += os.write(watch["in_w"], memoryview(watch["input"])[sent:min(size, sent + _CHUNK)])
    except BlockingIOError:
        return True
    except BrokenPipeError:
        watch["sent"] = size  # the program closed its stdin: the rest is not wanted
    if watch["sent"] >= size:
        _close_stdin(watch)
        return False
    return True


def _close_stdin(watch: dict) -> None:
    if watch["in_w"] is not None:
        os.close(watch["in_w"])
        watch["in_w"] = None


def _reap(watch: dict, flags: int) -> None:
    pid, wait_status, usage = os.wait4(watch["pid"], flags)
    if pid == watch["pid"]:
        watch["wait_status"] = wait_status
        watch["cpu_s"] = usage.ru_utime + usage.ru_stime


def _finish(watch: dict, sweep: bool) -> None:
    """Kill the child and everything it may have left, reap it and close the pipes.

    As the init of our own PID namespace (`sweep`: without a spare, see `main`), every process the
    run left is a child of ours once the child is reaped (orphans come back to the init): none
    means nothing to kill, which spares the supervisor the questions that each kill asks it (see
    `_seccomp`). Elsewhere, what the child left is in its process group (its own session), which
    is killed whole."""
    init = os.getpid() == 1
    if watch["wait_status"] is None:  # still running (a limit, or the owner is gone)
        for kill in (os.killpg, os.kill):
            try:
                kill(watch["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _reap(watch, 0)
    elif not init:  # reaped: its pid may be reused, its process group not while anything is in it
        try:
            os.killpg(watch["pid"], signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if sweep and init and _left_behind():
        _sweep()
    _close_stdin(watch)
    for fd in (watch["out_r"], watch["err_r"], watch["exit_fd"], watch["life_w"]):
        if fd is not None:
            os.close(fd)


def _left_behind() -> bool:
    """As the init of our PID namespace, with the child reaped: whether any process is left in it."""
    try:
        os.waitpid(-1, os.WNOHANG)  # a zombie reaped here counts as left behind too
    except ChildProcessError:
        return False
    return True


def _sweep() -> None:
    """Kill every process in our PID namespace but ourselves, and reap them."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break


def _start_janitor(run_dir: str) -> tuple[int, int]:
    """Fork the janitor: a process that empties the run directory (`_empty`) when told to, so that
    the names a program left there (of files, directories, extended attributes) are read into its
    memory, not into ours, which every later child inherits (where the kernel layers let a program
    read its own memory). Forked before any job, it holds nothing of one. Returns our ends of its
    pipes: (orders, answers); each order is one byte, each answer b"1" once the directory is empty.
    It exits at the end of its orders (we are gone) or when it could not empty the directory.
    Its first answer says that it has closed the owner's pipes: from the first job on, it is the
    child with them closed (which is how the tests find it)."""
    orders_r, orders_w = os.pipe()
    answers_r, answers_w = os.pipe()
    if os.fork() == 0:
        try:
            for fd in range(3):  # not the owner's pipes: their ends must close when we exit
                os.close(fd)
            os.close(orders_w)
            os.close(answers_r)
            os.write(answers_w, b"1")
            while os.read(orders_r, 1):
                _empty(run_dir)
                os.write(answers_w, b"1")
        finally:
            os._exit(0)
    os.close(orders_r)
    os.close(answers_w)
    if os.read(answers_r, 1) != b"1":
        raise RuntimeError("the janitor exited as it started")
    return orders_w, answers_r


def _emptied(state: dict) -> None:
    """Wait until the janitor has emptied the run directory after the last job: nearly always done
    by now, as it works while we read the job and fork its child. If it could not (or is gone),
    empty the directory here, this once: the job's child, forked already, does not inherit what we
    read, and we take no job after this one (`main`), so that no later child does either."""
    state["emptying"] = False
    if os.read(state["janitor"][1], 1) != b"1":
        state["last"] = True
        _empty(state["run_dir"])


def _size_and_links(directory: str) -> tuple[int, int]:
    status = os.stat(directory)
    return status.st_size, status.st_nlink


def _left_nothing(state: dict) -> bool:
    """Whether the run left its directory empty (then its mode and times are reset here, with
    nothing read), told without reading a name the program chose: on the scratch tmpfs a
    directory's size counts its entries, and the seccomp filter lets no program set an extended
    attribute. Elsewhere (`state["empty"]` None) the janitor is asked every time."""
    if state["empty"] is None or _size_and_links(state["run_dir"]) != state["empty"]:
        return False
    os.chmod(state["run_dir"], 0o700)
    os.utime(state["run_dir"], (0, 0))
    return True


def _empty(directory: str) -> None:
    """Remove everything in `directory` and reset what a program could have set on it (mode,
    times, extended attributes), so that nothing carries over to the next run. Walks with relative
    names from the current directory: a tree of any depth, with modes that deny us, is removed."""
    os.chmod(directory, 0o700)  # first: a program may have taken our search permission
    os.chdir(directory)
    parents: list[str] = []  # the names we descended through
    while True:
        below = None
        for name in os.listdir("."):
            if stat.S_ISDIR(os.lstat(name).st_mode):
                below = name
            else:
                os.unlink(name)
        if below is not None:
            os.chmod(below, 0o700)
            os.chdir(below)
            parents.append(below)
        elif parents:
            os.chdir("..")  # nothing runs in the tree any more: '..' is where we came from
            os.rmdir(parents.pop())
        else:
            break
    for name in os.listxattr("."):
        os.removexattr(".", name)
    os.utime(".", (0, 0))
    os.chdir("/")


def _end(watch: dict, limits: dict) -> dict:
    """How the child ended, as the owner needs it (`_protocol.result`): the limit that stopped it
    or the signal that killed it (a status, a note for its stderr), or (status None) its exit code,
    which the owner judges with what the program wrote, which the server does not read."""
    status, wait_status = watch["status"], watch["wait_status"]
    if status == "timeout":
        note = f"\n[sandbox] killed: wall-clock limit of {limits['wall_time_s']} s\n"
    elif status == "output_limit":
        note = f"\n[sandbox] killed: more than {limits['output_bytes']} bytes of output\n"
    elif os.WIFEXITED(wait_status):
        return {"status": None, "exit_code": os.WEXITSTATUS(wait_status), "note": ""}
    else:
        sig = os.WTERMSIG(wait_status)
        # SIGXCPU at the soft CPU limit; SIGKILL at the hard one (soft + 1 s) if SIGXCPU was ignored.
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and watch["cpu_s"] >= float(limits["cpu_time_s"])):
            status, note = "timeout", f"\n[sandbox] killed: CPU-time limit of {limits['cpu_time_s']} s\n"
        else:
            status, note = "crash", f"\n[sandbox] killed by signal {signal.Signals(sig).name}\n"
    return {"status": status, "exit_code": None, "note": note}


if __name__ == "__main__":
    # Evaluated left to right: both functions are loaded before main() returns; in a child,
    # enter() then clears this module's globals and _run.run runs the program.
    _run.run(*_child.enter(main()))
