"""What crosses the pipes between the owner (`pool`) and a fork server (`_server`), and what the
owner makes of an answer (standard library only; it imports nothing of the sandbox, so that both
sides can import it: the owner as part of the package, the fork server's modules by name).

A job is a 4-byte length, a JSON header {"limits", "ahead", "payload": N}, then N bytes that the
server passes to its child's stdin as they are: the child's order (an 8-byte length, then
{"code", "compiled", "limits", "guard"} as marshal data, which the child reads with one C call:
`_child.receive_job`) followed by the program's stdin. The server answers {"started": true} at
once and, when the job is done, a line that says how the child ended, {"status", "exit_code",
"note", "output": [n_stdout, n_stderr]}, followed by the n_stdout + n_stderr bytes that the program
wrote (up to the output cap). The server keeps a job's bytes, those it passes on and those it
collects, only in memory that no child inherits: a program finds nothing of an earlier run's code,
input or output in its copy of the server's memory.
"""

from __future__ import annotations

import json
import marshal

BLOCKED_EXIT = 97
MARK = "[sandbox] blocked: "
"""A program that the audit hook stopped exits with BLOCKED_EXIT, the last line of its stderr
starting with MARK and the reason (`_guard`)."""
SETUP_FAILED_EXIT = 96
SETUP_MARK = "[sandbox] setup failed: "
"""A child that could not be confined exits with SETUP_FAILED_EXIT before the program runs,
having written SETUP_MARK and the error to its stderr (`_child`)."""
HEADER_BYTES = 4
"""The size of the length that comes before a job's header."""


def job_bytes(job: dict) -> bytes:
    """A job as the owner writes it: {"code", "stdin", "limits"}, and optionally "compiled",
    "guard" (for the child) and "ahead" (for the server)."""
    order = marshal.dumps({key: job[key] for key in ("code", "compiled", "limits", "guard") if key in job})
    stdin = job["stdin"].encode("utf-8", "replace")
    header = json.dumps({"limits": job["limits"], "ahead": job.get("ahead", True),
                         "payload": 8 + len(order) + len(stdin)}).encode()
    return b"".join((len(header).to_bytes(HEADER_BYTES, "little"), header,
                     len(order).to_bytes(8, "little"), order, stdin))


def split_answer(data: bytes) -> tuple[bool, dict | None, bytes]:
    """Take the first message from what a server wrote: (complete, message, what follows). A
    message is a line of JSON, and for the end of a job, its output after that line (the message
    is then the job's result, `result`). Not complete: more must be read first. A line that is
    not a message gives None (the server is broken)."""
    line, newline, rest = data.partition(b"\n")
    if not newline:
        return False, None, data
    try:
        message = json.loads(line)
    except ValueError:
        return True, None, rest
    if not isinstance(message, dict) or "output" not in message:
        return True, message, rest
    try:
        n_stdout, n_stderr = (int(n) for n in message["output"])
    except (TypeError, ValueError):
        return True, None, rest
    if len(rest) < n_stdout + n_stderr:
        return False, None, data
    stdout, stderr = rest[:n_stdout], rest[n_stdout:n_stdout + n_stderr]
    return True, result(message, stdout, stderr), rest[n_stdout + n_stderr:]


def result(end: dict, stdout: bytes, stderr: bytes) -> dict:
    """A job's result ({"stdout", "stderr", "exit_code", "status"}) from how the server says its
    child ended (a limit it enforced or the signal that killed it, with a note for stderr, or
    the exit code) and what the program wrote: a program that exited is judged by its code and the
    last line of its stderr."""
    out, err = stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")
    status, exit_code = end.get("status"), end.get("exit_code")
    if status is None:
        last_line = err.rstrip("\n").rpartition("\n")[2]
        if exit_code == 0:
            status = "ok"
        elif exit_code == BLOCKED_EXIT and last_line.startswith(MARK):
            status = "blocked"
        elif exit_code == SETUP_FAILED_EXIT and SETUP_MARK in err:
            status = "crash"
        elif exit_code == 1 and last_line.startswith("MemoryError"):
            status = "memory"
        else:
            status = "error"
    return {"stdout": out, "stderr": err + end.get("note", ""), "exit_code": exit_code, "status": status}
