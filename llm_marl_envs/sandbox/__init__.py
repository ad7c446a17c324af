"""Sandboxed execution of untrusted Python (tool agents' programs, coder submissions).

    from llm_marl_envs.sandbox import Sandbox, SandboxLimits, default_sandbox
    result = default_sandbox().run("print(sum(range(10)))")   # ExecResult(stdout="45\\n", status="ok", ...)

Each execution runs in its own process, forked from a warm worker (a fork server, so a run costs
milliseconds, not an interpreter start-up), with wall-clock, CPU, memory, file-size and output
limits, in a throwaway working directory, and is killed with its whole process group. Isolation
comes in independent layers, so that a hole in one is not a way out:

1. resource limits, and no privileges: `nobody`, or uid 0 with every capability dropped when
   `nobody` cannot reach the interpreter (`_kernel`);
2. where permitted (root): an empty network namespace, a private IPC namespace, and working
   directories on a size-capped in-memory file system (`_kernel`);
3. Landlock: the kernel lets the program read only the Python installation and system libraries
   and write only its own directory, and (newer kernels) refuses TCP and signals to other
   processes (`_landlock`);
4. seccomp: the kernel refuses process creation, network sockets, and access to other processes
   (`_seccomp`);
5. an audit hook that stops the program at its first forbidden operation and reports why, the
   "blocked" status (`_guard`).
`Sandbox.isolation()` says which layers this machine provides. Success is judged by exit status,
not by stderr (pitfalls #7). Programs see only the standard library and the installed packages
(numpy imports; ctypes does not), an environment with no secrets, and their own stdin.

Modules: `limits` (SandboxLimits, ExecResult), `pool` (Sandbox, default_sandbox; our process);
`_server`, `_child`, `_guard`, `_kernel`, `_landlock`, `_seccomp`, `_paths` run in the fork server,
with the standard library only.
"""

from .limits import STATUSES, ExecResult, SandboxLimits
from .pool import Sandbox, WorkerError, default_sandbox

__all__ = ["STATUSES", "ExecResult", "Sandbox", "SandboxLimits", "WorkerError", "default_sandbox"]
