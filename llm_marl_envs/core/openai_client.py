"""The `openai` SDK client every OpenAI-compatible caller builds the same way: the `api` engine and
agent (`llm_marl.engines.api`) and the LLM judges (`llm_marl_envs.search.judge`, which
`llm_marl.credit.llm_judge` calls).

The key is `api_key`, else `OPENAI_API_KEY`, else the placeholder "EMPTY" that local servers (vLLM,
SGLang) accept. `openai` is imported when a client is made, never at import time: the search MCP
server loads `llm_marl_envs` without it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any


def make_client(base_url: str, api_key: str | None = None, timeout_s: float = 60.0, max_retries: int = 2) -> Any:
    """An `openai.OpenAI` client for `base_url` (e.g. http://127.0.0.1:8000/v1): each request waits at most
    `timeout_s` seconds to connect and for each part of the answer (the HTTP client's timeout, not a total) and
    is retried `max_retries` times (connection errors, timeouts, 429, 5xx; with backoff). ImportError when the `openai` package is missing; ValueError for a key no HTTP header can carry."""
    import openai

    # The line break a key file or a paste leaves is dropped; what else a header cannot carry would fail each request
    # as "cannot reach" the server, printing the key, or as a bare UnicodeEncodeError.
    key = (api_key or os.environ.get("OPENAI_API_KEY") or "").strip() or "EMPTY"
    if not (key.isascii() and key.isprintable()):
        raise ValueError(f"the API key{'' if api_key else ' in $OPENAI_API_KEY'} has a character no HTTP header can carry "
                         "(non-ASCII, or a control character, as a copy may add): set it again")
    return openai.OpenAI(base_url=base_url.rstrip("/"), api_key=key, timeout=timeout_s, max_retries=max(0, max_retries))


def tries(max_retries: int) -> str:
    """How many times a request was sent with `max_retries` retries, in words: "1 try", "3 tries"."""
    return "1 try" if max_retries == 0 else f"{max_retries + 1} tries"


class DeadlinePassed(Exception):
    """`within`'s call did not end by its deadline."""


def within(deadline_s: float, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)`, waited for at most `deadline_s` seconds in all: its result, its error, or DeadlinePassed.

    The HTTP client's timeout bounds each wait for a part of an answer, not the answer, so a server that sends a
    byte every few seconds holds a request forever (httpx has no total timeout). The call runs on a daemon thread;
    past the deadline it is left there, where it holds no process open, until the server or the socket ends it."""
    done = threading.Event()
    outcome: list[Any] = []

    def call() -> None:
        try:
            outcome.append((True, fn(*args, **kwargs)))
        except BaseException as exc:  # noqa: BLE001 -- raised in the caller's thread
            outcome.append((False, exc))
        done.set()

    threading.Thread(target=call, daemon=True).start()
    if not done.wait(deadline_s):
        raise DeadlinePassed()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
