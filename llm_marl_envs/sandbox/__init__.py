"""Sandboxed execution of untrusted Python (tool agents' programs, coder submissions).

    from llm_marl_envs.sandbox import Sandbox, SandboxLimits, default_sandbox
    result = default_sandbox().run("print(sum(range(10)))")   # ExecResult(stdout="45\\n", status="ok", ...)

Each execution runs in its own process, forked from a warm worker (a fork server, so a run costs
milliseconds, not an interpreter start-up), with wall-clock, CPU, memory, file-size and output
limits, in the worker's run directory (emptied after every run: a run finds nothing of an earlier
one), and is killed with its whole process group. Nor is anything of an earlier run in its memory,
which is a copy of the fork server's: the server keeps jobs' bytes only in memory that its children
do not inherit (`_protocol`), and where a program can read its memory (Landlock and seccomp), a
janitor process empties the run directory, so that the server never reads the names of what a
run left there (`_server`). Isolation comes in independent layers, so that
a hole in one is not a way out:

1. resource limits, and no privileges: `nobody`, or uid 0 with every capability dropped when
   `nobody` cannot reach the interpreter (`_kernel`);
2. where permitted (root): an empty network namespace, a private IPC namespace, the run directory
   on a size-capped in-memory file system, and a PID namespace whose init is the fork server:
   nothing outside is visible, and everything dies with it (`_kernel`);
3. Landlock: the kernel lets the program read only the Python installation and system libraries
   and write only the run directory, and (newer kernels) refuses TCP and signals to other
   processes (`_landlock`);
4. seccomp: the kernel refuses process creation, execve, network sockets, and access to other
   processes (`_seccomp`);
5. an audit hook that stops the program at its first forbidden operation and reports why, the
   "blocked" status (`_guard`). On its own (no Landlock or seccomp on the machine) it still
   contains every program: there it also refuses C extensions outside the standard library,
   SQLite, code objects not made by the compiler, and `..` inside the run directory.
`Sandbox.isolation()` says which layers this machine provides. Success is judged by exit status,
not by stderr (warnings on stderr are not failures). Programs see only the standard library and the installed packages
(numpy imports; ctypes does not), an environment with no secrets, and their own stdin.

Nothing of the sandbox's own machinery is reachable from a program: a worker is a supervisor
(`_supervisor`, which uses ctypes for the system calls above and answers the seccomp filter's
questions about who may fork or signal whom) and the fork server it executes once confined
(`_server`, a fresh interpreter that never loads ctypes); the program's stack starts at a runner
that holds only standard modules (`_run`), and the server leaves no globals, modules or classes
behind for it (`_child`). Workers die with the process that owns the Sandbox.

Modules: `limits` (SandboxLimits, ExecResult), `pool` (Sandbox, default_sandbox; our process);
`_protocol` (what crosses the pipes between our process and a fork server);
`_supervisor`, `_kernel`, `_landlock`, `_seccomp` (the worker's supervisor); `_server`, `_child`,
`_run`, `_guard` (the fork server and its programs); `_paths` (both). Standard library only.
"""

from .limits import STATUSES, ExecResult, SandboxLimits
from .pool import Sandbox, WorkerError, default_sandbox

__all__ = ["STATUSES", "ExecResult", "Sandbox", "SandboxLimits", "WorkerError", "default_sandbox"]
