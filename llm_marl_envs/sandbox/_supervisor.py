"""Supervisor: `python -I -S _supervisor.py BASE PREFIX [--no-kernel-layers]` (standard library and ctypes).

What the owning process (`pool`) starts for each worker. In order:
1. here, the isolation that needs system calls: namespaces (network, IPC, mount with a tmpfs on
   BASE, PID: the fork server becomes the init of its own), and the run directory BASE/run;
2. in one child: no capabilities (or `nobody`), death with this process, no_new_privs, the
   Landlock ruleset (`_landlock`) and the seccomp filter (`_seccomp`), then the execve of the fork
   server (`_server.py`): a fresh interpreter, so that ctypes, loaded here, never reaches a program;
3. here again, until the fork server exits: answer the seccomp filter's questions (who may fork,
   execute, signal whom), kill the fork server when the owner goes away (our stdin hangs up) or
   asks (SIGTERM), kill whatever it leaves behind (this process is the subreaper of its
   descendants), and remove BASE.
The fork server speaks the protocol on the stdin/stdout it inherits; this process writes there
only an error line, if the fork server could not be started.

`--no-kernel-layers` (tests and benchmarks only: `Sandbox(_kernel_layers=False)`, a private
argument of the owning process, which no program can reach) skips the namespaces, Landlock and
seccomp, leaving resource limits, dropped privileges and the audit hook.
"""

import sys

# Started without `site` (it would import the editable-install finder: tens of milliseconds on every
# worker start); the installation's paths (`_paths`, through sysconfig) need the environment's
# prefix, which `site` would have set: the owner passes its own.
sys.prefix = sys.exec_prefix = sys.argv[2]

import json  # noqa: E402
import os  # noqa: E402
import select  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _kernel  # noqa: E402
import _landlock  # noqa: E402
import _paths  # noqa: E402
import _seccomp  # noqa: E402

sys.path.pop(0)

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_server.py")
SCRATCH_MB = 256
"""Size of the in-memory file system that holds the run directory (where permitted)."""
_NO_NAMESPACES = {"network_namespace": False, "ipc_namespace": False, "scratch_tmpfs": False, "pid_namespace": False}
_NO_LANDLOCK = {"landlock_fs": False, "landlock_tcp": False, "landlock_scope": False}


class _Stop(Exception):
    """SIGTERM: the owner asks this worker to go now."""


def _stop(signum: int, frame: object) -> None:
    raise _Stop()


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal reaches the whole group
    signal.signal(signal.SIGTERM, _stop)
    base, kernel_layers = sys.argv[1], "--no-kernel-layers" not in sys.argv[3:]
    run_dir = os.path.join(base, "run")
    server = None
    try:
        layers = _kernel.unshare_namespaces(base, SCRATCH_MB) if kernel_layers else dict(_NO_NAMESPACES)
        to_nobody = os.geteuid() == 0 and all(map(_paths.reachable_by_others, [*_paths.python_roots(), _paths.sandbox_dir()]))
        os.mkdir(run_dir, 0o700)
        if to_nobody:
            os.chown(run_dir, _kernel.NOBODY, _kernel.NOBODY)
        _kernel.become_subreaper()
        seccomp = kernel_layers and _seccomp.supported()
        report_r, report_w = os.pipe()
        server = os.fork()
        if server == 0:
            _start_server(run_dir, layers, kernel_layers, to_nobody, seccomp, report_r, report_w)
        os.close(report_w)
        listener = _take_listener(server, report_r)
        return _serve(server, listener, layers["pid_namespace"])
    except (_Stop, BrokenPipeError, KeyboardInterrupt):
        return 0
    except Exception as exc:  # pragma: no cover (depends on the machine)
        if server is None:
            _say({"error": repr(exc)})
        return 1
    finally:  # leave nothing behind
        _kill_everything(server)
        shutil.rmtree(base, ignore_errors=True)
        _kernel.release_scratch(base)


def _say(message: dict) -> None:
    try:
        os.write(1, (json.dumps(message) + "\n").encode())
    except OSError:
        pass


def _start_server(run_dir: str, layers: dict, kernel_layers: bool, to_nobody: bool, seccomp: bool,
                  unused: int, report: int) -> None:
    """In the child: confine this process, then become the fork server (never returns)."""
    try:
        os.close(unused)
        parent = os.getppid()
        layers["capability_bounding_set"] = _kernel.drop_bounding_set()
        layers["user"] = _kernel.drop_privileges(to_nobody)
        _kernel.die_with_parent(parent)
        _kernel.no_new_privs()
        layers.update(_confine_files(run_dir) if kernel_layers else _NO_LANDLOCK)
        layers["seccomp"] = seccomp
        if seccomp:
            # Last: from here on the supervisor decides this process's execve, which it lets
            # through once, once it holds the listener.
            os.write(report, b"%d\n" % _seccomp.install())
        os.execv(sys.executable, [sys.executable, "-I", SERVER, run_dir, json.dumps(layers)])
    except BaseException as exc:
        _say({"error": f"the sandbox could not confine its fork server: {exc!r}"})
    os._exit(1)


def _confine_files(run_dir: str) -> dict:
    sandbox = _paths.sandbox_dir()
    readable = _paths.expand(_paths.read_roots(), _paths.deny_roots(sandbox)) + [sandbox]
    ruleset = _landlock.build_ruleset(readable, [run_dir], _paths.read_files(), _paths.write_files(),
                                      _paths.interpreter_files())
    if ruleset is None:
        return dict(_NO_LANDLOCK)
    fd, layers = ruleset
    _landlock.restrict_self(fd)
    os.close(fd)
    return layers


def _take_listener(server: int, report: int) -> int | None:
    """The seccomp listener of the child, copied out of it while it waits for its execve; None
    when it installed no filter (or failed first)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(report, 64)
        if not chunk:
            break
        line += chunk
    os.close(report)
    if not line.endswith(b"\n"):
        return None
    pidfd = os.pidfd_open(server)
    try:
        return _kernel.pidfd_getfd(pidfd, int(line))
    finally:
        os.close(pidfd)


def _serve(server: int, listener: int | None, init: bool) -> int:
    """Until the fork server exits (returns its exit status) or the owner goes away (returns 0)."""
    exited = os.pidfd_open(server)
    poller = select.poll()
    poller.register(exited, select.POLLIN)
    poller.register(0, 0)  # reports only a hang-up: the owner is gone
    if listener is not None:
        poller.register(listener, select.POLLIN)
    started = False
    while True:
        for fd, events in poller.poll():
            if fd == exited:
                return os.waitstatus_to_exitcode(os.waitpid(server, 0)[1])
            if fd == 0:
                return 0
            if not events & select.POLLIN:  # no process is left under the filter
                poller.unregister(fd)
                continue
            call = _seccomp.receive(listener)
            if call is None:
                continue
            if call.tid == server:
                first_exec = not started and call.nr == _seccomp.NR["execve"]
                started = started or first_exec
                allow = first_exec or _seccomp.server_may(call.nr, call.args, init)
            else:
                me = _seccomp.own_ids(call.tid)
                allow = me is not None and _seccomp.program_may(call.nr, call.args, me)
            _seccomp.respond(listener, call, allow)


def _kill_everything(server: int | None) -> None:
    """Kill the fork server and every process it left (re-parented to us), and reap them."""
    for _ in range(100):
        pids = ([server] if server else []) + _children()
        server = None
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while True:
            try:
                if os.waitpid(-1, 0)[0] == 0:
                    break
            except ChildProcessError:
                break


def _children() -> list[int]:
    try:
        return [int(p) for p in open(f"/proc/self/task/{os.getpid()}/children").read().split()]
    except (OSError, ValueError):
        return []


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main())  # nothing to finalize: every resource is released by now
