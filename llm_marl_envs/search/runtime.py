"""`SearchRuntime`: one persistent search session shared by an environment, its forks and callers.

Transports:

- `"subprocess"` (default for real runs): the MCP server (`search.server`) runs as a child
  process and is reached over stdio by `mcp.Client`; one session stays open for the runtime's
  life and serves every call, concurrent ones included (the reference code started a server per
  call and ran calls one after another).
- `"inprocess"`: the same MCP server object in this process (`mcp.Client(server)`), for tests.
- `"direct"`: the backend is called without MCP (same tool code, same results, no IPC).

The MCP client lives on a private asyncio loop in a daemon thread; the public methods are
synchronous and thread-safe. Nothing can hang a caller: the server start, every call and the
shutdown have timeouts. Before the first server start, the runtime builds the BM25 index into the disk
cache in the caller's thread (or finds it there), outside the start timeout: the server then only
loads it, so `start_timeout_s` bounds a start, not an index build (minutes for HotpotQA's train
set, which outlasted the timeout on every retry when the server built it). A tool error (bad arguments, unknown URL) comes back as a `ToolResult`
with status `tool_error`. A crashed or hung server gives `server_error` / `timeout` results; the
session is torn down (the process killed if it lingers) and the next call starts a new server.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from .backends import MAX_K, ToolInputError, cache_root
from .tools import SERVER_FAULT, ToolResult, check_arguments, check_hits, check_page, run_tool

TRANSPORTS = ("subprocess", "inprocess", "direct")
_START_RETRY_S = 5.0
"""After a failed server start, calls within this many seconds fail at once with the same reason."""
# The server imports this package as `llm_marl_envs.search`, but with empty stand-ins for the
# `llm_marl_envs` and `llm_marl_envs.core` packages, so their `__init__` files (which import
# PettingZoo and gymnasium: ~0.7 s of every server start) do not run; a module of `core` that the
# search package needs (the stdlib-only `core.rows`) still imports by its real name.
_LAUNCH = (
    "import sys, types\n"
    "from pathlib import Path\n"
    "root = Path(sys.argv[1]).parent\n"
    "for name, path in (('llm_marl_envs', root), ('llm_marl_envs.core', root / 'core')):\n"
    "    stand_in = types.ModuleType(name)\n"
    "    stand_in.__path__ = [str(path)]\n"
    "    sys.modules[name] = stand_in\n"
    "from llm_marl_envs.search.server import main\n"
    "main(sys.argv[2:])\n"
)


def _call_key(tool: str, arguments: Any) -> str:
    return json.dumps([tool, arguments], sort_keys=True, default=repr)


class _LoopThread:
    """A private asyncio loop running in a daemon thread."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        """Stop the loop and, once its thread has ended, close it (its selector and wake-up sockets).
        The stop is queued even when the loop is not running yet: `run_forever` then returns at once."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class SearchRuntime:
    """Search and fetch through one MCP session (or directly); see the module docstring."""

    def __init__(self, spec: dict[str, Any], transport: str = "subprocess", *, call_timeout_s: float = 30.0,
                 start_timeout_s: float = 60.0, log_path: str | Path | None = None):
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown search transport {transport!r}; use one of {', '.join(TRANSPORTS)}")
        if call_timeout_s <= 0 or start_timeout_s <= 0:
            raise ValueError("call_timeout_s and start_timeout_s must be > 0")
        self.spec = json.loads(json.dumps(spec))
        self.transport = transport
        self.call_timeout_s = float(call_timeout_s)
        self.start_timeout_s = float(start_timeout_s)
        self.log_path = Path(log_path) if log_path else cache_root() / "logs" / "search-server.log"
        self.starts = 0
        """Sessions started so far; `restarts` = starts after the first."""
        self.server_info: dict[str, Any] = {}
        """The current server's `ping` answer (pid, backend, documents, built) once a session is open."""
        self.closed = False
        self._backend = None
        self._direct_lock = threading.Lock()
        self._prepared = transport != "subprocess" or self.spec.get("backend", "bm25") != "bm25"
        self._prepare_lock = threading.Lock()
        self._prefetched: dict[str, list[ToolResult]] = {}
        self._prefetch_lock = threading.Lock()
        self._loop: _LoopThread | None = None
        self._loop_lock = threading.Lock()
        # Loop-side state (touched only on the loop thread).
        self._client = None
        self._session_task: asyncio.Task | None = None
        self._stop: asyncio.Event | None = None
        self._start_lock: asyncio.Lock | None = None
        self._inflight: set[asyncio.Task] = set()
        self._pid: int | None = None
        self._failed: tuple[float, str] | None = None
        self._log_file = None
        if spec.get("backend") == "live" and transport != "direct":
            # Fail fast here, in the caller's process, rather than at every call (direct: the backend checks).
            from .live import preflight  # noqa: PLC0415

            preflight(min(float(spec.get("timeout", 5.0)), 5.0), spec.get("probe_host", "duckduckgo.com"))
        if transport == "direct":
            self._backend = self._make_backend()

    # A fork of an environment shares its runtime.
    def __deepcopy__(self, memo: dict) -> SearchRuntime:
        return self

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A pickled environment carries its runtime as its settings (a session, a loop thread and a server
        # process cannot travel): the process-wide one for (spec, transport) loads as that process's.
        shared = _SHARED.get((json.dumps(self.spec, sort_keys=True), self.transport)) is self
        return _unpickled_runtime, (self.spec, self.transport, self.call_timeout_s, self.start_timeout_s,
                                    str(self.log_path), shared)

    def __enter__(self) -> SearchRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SearchRuntime(transport={self.transport!r}, backend={self.spec.get('backend', 'bm25')!r})"

    @property
    def restarts(self) -> int:
        return max(0, self.starts - 1)

    @property
    def server_pid(self) -> int | None:
        """The server process id (subprocess transport, while a session is open)."""
        return self._pid if self.transport == "subprocess" else None

    @property
    def backend(self):
        """The backend object in this process (direct and inprocess transports)."""
        if self._backend is None and self.transport != "subprocess":
            self._backend = self._make_backend()
        return self._backend

    def _make_backend(self):
        from . import make_backend  # noqa: PLC0415

        return make_backend(self.spec)

    # ------------------------------------------------------------------ public API
    def search(self, query: str, k: int = 5) -> ToolResult:
        return self.call("search", {"query": query, "k": k})

    def fetch(self, url: str) -> ToolResult:
        return self.call("fetch", {"url": url})

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one tool call; never raises for tool or server failures (they are results)."""
        return self.call_many([(tool, arguments)])[0]

    @contextlib.contextmanager
    def prefetched(self, calls: list[tuple[str, dict[str, Any]]]):
        """Make `calls` now, concurrently (`call_many`), and let the `call`s made inside the block with
        the same tool and arguments take their results, once each and in order, instead of calling
        again. What is not taken is dropped when the block ends (see `Sandbox.prefetched`)."""
        calls = list(calls)
        results = self.call_many(calls) if calls else []
        keys = [_call_key(tool, arguments) for tool, arguments in calls]
        with self._prefetch_lock:
            for key, result in zip(keys, results):
                self._prefetched.setdefault(key, []).append(result)
        try:
            yield
        finally:
            with self._prefetch_lock:
                for key, result in zip(keys, results):
                    left = [r for r in self._prefetched.get(key, []) if r is not result]
                    if left:
                        self._prefetched[key] = left
                    else:
                        self._prefetched.pop(key, None)

    def call_many(self, calls: list[tuple[str, dict[str, Any]]]) -> list[ToolResult]:
        """Run independent calls concurrently over the one session; results in order."""
        if self.closed:
            raise RuntimeError("this SearchRuntime is closed")
        if self._prefetched:  # calls made ahead by `prefetched`: take their results
            with self._prefetch_lock:
                ready = [self._prefetched.get(_call_key(tool, arguments)) for tool, arguments in calls]
                taken = [r.pop(0) if r else None for r in ready]
            if any(r is not None for r in taken):
                rest = [i for i, r in enumerate(taken) if r is None]
                for i, result in zip(rest, self.call_many([calls[i] for i in rest]) if rest else []):
                    taken[i] = result
                return taken
        results: list[ToolResult | None] = [None] * len(calls)
        pending: list[tuple[int, str, dict[str, Any]]] = []
        for i, (tool, arguments) in enumerate(calls):
            try:
                pending.append((i, tool, check_arguments(tool, arguments)))
            except ToolInputError as e:
                results[i] = ToolResult(tool, arguments if isinstance(arguments, dict) else {}, "tool_error", error=str(e))
        if self.transport == "direct":
            for i, tool, args in pending:
                results[i] = self._call_direct(tool, args)
        elif pending:
            self._prepare()
            futures = [(i, tool, args, self._loop_thread().submit(self._call(tool, args))) for i, tool, args in pending]
            # The loop enforces the per-call and start timeouts; this outer bound only catches a stuck loop.
            outer = self.start_timeout_s + self.call_timeout_s + 15.0
            for i, tool, args, fut in futures:
                try:
                    results[i] = fut.result(timeout=outer)
                except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError, RuntimeError) as e:
                    fut.cancel()
                    results[i] = ToolResult(tool, args, "timeout", error=f"the search runtime did not answer ({type(e).__name__})")
        return [r for r in results if r is not None]

    def close(self) -> None:
        """End the session, stop the server and the loop thread. Idempotent."""
        if self.closed:
            return
        self.closed = True
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(Exception):
                loop.submit(self._teardown()).result(timeout=15)
            loop.stop()
        self._kill_pid()

    # ------------------------------------------------------------------ direct transport
    def _call_direct(self, tool: str, args: dict[str, Any]) -> ToolResult:
        try:
            with self._direct_lock:
                value = run_tool(self.backend, tool, args)
        except ToolInputError as e:
            return ToolResult(tool, args, "tool_error", error=str(e))
        except Exception as e:  # a backend failure (e.g. no network) is not the agent's doing
            return ToolResult(tool, args, "server_error", error=f"{type(e).__name__}: {e}")
        return _result(tool, args, value)

    # ------------------------------------------------------------------ subprocess transport (caller's thread)
    def _prepare(self) -> None:
        """Once, before the first server start and outside its timeout: build the BM25 index into the disk
        cache, or find it there (concurrent callers wait here). A backend that cannot be made is left to the
        server, whose failed start reports the reason; an unwritable cache leaves the build to the server."""
        if self._prepared:
            return
        with self._prepare_lock:
            if self._prepared:
                return
            with contextlib.suppress(Exception):
                self._make_backend()  # dropped at once: only its cached index matters
            self._prepared = True

    # ------------------------------------------------------------------ MCP transports (loop thread)
    def _loop_thread(self) -> _LoopThread:
        with self._loop_lock:
            if self._loop is None:
                self._loop = _LoopThread(f"llm-marl-search-{id(self):x}")
            return self._loop

    def _target(self):
        if self.transport == "inprocess":
            from .server import build_server  # noqa: PLC0415

            self._log_file = None
            return build_server(self.backend)
        from mcp import StdioServerParameters  # noqa: PLC0415
        from mcp.client.stdio import stdio_client  # noqa: PLC0415

        params = StdioServerParameters(command=sys.executable, env=dict(os.environ), args=[
            "-c", _LAUNCH, str(Path(__file__).resolve().parent), "--spec", json.dumps(self.spec, sort_keys=True)])
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 (closed when the session ends)
        except OSError:  # an unwritable cache folder must not stop the server
            log = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
        self._log_file = log
        return stdio_client(params, errlog=log)

    async def _session(self, ready: asyncio.Future, stop: asyncio.Event) -> None:
        from mcp import Client  # noqa: PLC0415

        me = asyncio.current_task()
        inflight: set[asyncio.Task] = set()
        self._inflight = inflight  # this session's calls: cancelled if it ends under them
        log = None
        try:
            target = self._target()
            log = self._log_file
            async with Client(target) as client:
                ping = await client.call_tool("ping", {})
                info = (ping.structured_content or {}).get("result", ping.structured_content) or {}
                self.server_info = dict(info) if isinstance(info, dict) else {}
                self._pid = self.server_info.get("pid")
                self._client = client
                if not ready.done():
                    ready.set_result(client)
                await stop.wait()
        except BaseException as e:  # noqa: BLE001 (reported through `ready` or to the in-flight calls)
            if not ready.done():
                ready.set_exception(RuntimeError(f"{type(e).__name__}: {e}"))
            if isinstance(e, asyncio.CancelledError):
                raise
        finally:
            if self._session_task in (None, me):  # a newer session may already be serving
                self._client = None
            for task in list(inflight):
                task.cancel()
            if log is not None:
                with contextlib.suppress(OSError):
                    log.close()

    async def _ensure_client(self):
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._client is not None and self._session_task is not None and not self._session_task.done():
                return self._client
            loop = asyncio.get_running_loop()
            if self._failed is not None and loop.time() - self._failed[0] < _START_RETRY_S:
                raise RuntimeError(self._failed[1])
            await self._teardown()
            ready: asyncio.Future = loop.create_future()
            self._stop = asyncio.Event()
            self._session_task = asyncio.create_task(self._session(ready, self._stop))
            try:
                client = await asyncio.wait_for(asyncio.shield(ready), self.start_timeout_s)
            except BaseException as e:
                ready.cancel()  # nobody waits on it now: an exception the session sets later was logged as never retrieved
                reason = f"the search server did not start ({_short(e)}); {self._log_hint()}"
                self._failed = (loop.time(), reason)
                await self._teardown()
                raise RuntimeError(reason) from None
            self._failed = None
            self.starts += 1
            return client

    async def _call(self, tool: str, args: dict[str, Any]) -> ToolResult:
        try:
            client = await self._ensure_client()
        except Exception as e:
            return ToolResult(tool, args, "server_error", error=str(e))
        session = self._session_task
        task = asyncio.ensure_future(client.call_tool(tool, args))
        inflight = self._inflight
        inflight.add(task)
        try:
            done, _ = await asyncio.wait({task}, timeout=self.call_timeout_s)
        finally:
            inflight.discard(task)
        if not done:
            task.cancel()
            if self._session_task is session:  # not a newer session another call already started
                await self._teardown(kill=True)
            return ToolResult(tool, args, "timeout", error=f"no answer within {self.call_timeout_s:g} s; the search server "
                                                           "was restarted, the call may be retried")
        if task.cancelled() or task.exception() is not None:
            if self._session_task is session:
                await self._teardown(kill=True)
            return ToolResult(tool, args, "server_error", error="the search server stopped during the call (crash); it "
                                                                 "is being restarted, the call may be retried")
        return _parse(tool, args, task.result())

    async def _teardown(self, kill: bool = False) -> None:
        """Close the current session (if any) and make sure its server process is gone.

        `kill=True` (after a crash or a timeout) kills the server first instead of waiting for a
        graceful exit: a hung server would only make the caller wait."""
        task, self._session_task = self._session_task, None
        self._client = None
        if kill:
            self._kill_pid()
        if task is not None and not task.done():
            if self._stop is not None:
                self._stop.set()
            _, pending = await asyncio.wait({task}, timeout=5.0)
            if pending:
                task.cancel()
                await asyncio.wait({task}, timeout=5.0)
        self._kill_pid()

    def _kill_pid(self) -> None:
        pid, self._pid = self._pid, None
        if pid is None or self.transport != "subprocess":
            return
        with contextlib.suppress(ProcessLookupError, PermissionError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)

    def _log_hint(self) -> str:
        try:
            lines = [ln for ln in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
        except OSError:
            lines = []
        last = next((ln for ln in reversed(lines) if "cannot start" in ln), None)
        return last.strip() if last else f"see the server log {self.log_path}"


def _short(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def _result(tool: str, args: dict[str, Any], value: Any) -> ToolResult:
    """A checked backend answer as a result (MalformedResult when it is not what the tool promises)."""
    if tool == "search":
        return ToolResult(tool, args, hits=check_hits(value, args.get("k", MAX_K)))
    return ToolResult(tool, args, page=check_page(value))


def _parse(tool: str, args: dict[str, Any], result: Any) -> ToolResult:
    text = "".join(getattr(c, "text", "") for c in (result.content or []))
    if result.is_error:
        prefix = f"Error executing tool {tool}: "
        message = text[len(prefix):] if text.startswith(prefix) else text
        status = "server_error" if message.startswith(SERVER_FAULT) else "tool_error"
        return ToolResult(tool, args, status, error=message[len(SERVER_FAULT):].strip() if status == "server_error" else message)
    structured = result.structured_content or {}
    value = structured.get("result", text) if isinstance(structured, dict) else text
    try:
        if tool == "search" and not isinstance(value, list):
            value = json.loads(text)
        return _result(tool, args, value)
    except ValueError as e:  # MalformedResult, or JSON that does not parse
        return ToolResult(tool, args, "server_error", error=f"malformed {tool} result from the server ({e})")


# ---------------------------------------------------------------------------------------- sharing
_SHARED: dict[tuple[str, str], SearchRuntime] = {}
_UNPICKLED: dict[tuple[Any, ...], SearchRuntime] = {}
_SHARED_LOCK = threading.Lock()


def shared_runtime(spec: dict[str, Any], transport: str = "subprocess") -> SearchRuntime:
    """The process-wide runtime for (spec, transport): every environment asking for the same
    backend shares one session (and one server process). Closed at interpreter exit."""
    key = (json.dumps(spec, sort_keys=True), transport)
    with _SHARED_LOCK:
        rt = _SHARED.get(key)
        if rt is None or rt.closed:
            rt = SearchRuntime(spec, transport)
            _SHARED[key] = rt
        return rt


def _unpickled_runtime(spec: dict[str, Any], transport: str, call_timeout_s: float, start_timeout_s: float,
                       log_path: str, shared: bool) -> SearchRuntime:
    """What a pickled SearchRuntime loads as (`SearchRuntime.__reduce__`): the shared one, or one per process
    and settings (a session each, not one per env loaded), closed at exit."""
    if shared:
        return shared_runtime(spec, transport)
    key = (json.dumps(spec, sort_keys=True), transport, call_timeout_s, start_timeout_s, log_path)
    with _SHARED_LOCK:
        rt = _UNPICKLED.get(key)
        if rt is None or rt.closed:
            rt = _UNPICKLED[key] = SearchRuntime(spec, transport, call_timeout_s=call_timeout_s,
                                                 start_timeout_s=start_timeout_s, log_path=log_path)
        return rt


@atexit.register
def _close_shared() -> None:
    for rt in [*_SHARED.values(), *_UNPICKLED.values()]:
        with contextlib.suppress(Exception):
            rt.close()
