"""`api` engine: any OpenAI-compatible `/v1/chat/completions` endpoint, for evaluation only.

Requests go through the `openai` SDK (its timeouts and retries with backoff), with the client the
judges use too (`llm_marl_envs.core.openai_client`): the key is the `api_key` argument, else
`OPENAI_API_KEY`, else the placeholder "EMPTY" that local servers (vLLM, SGLang) accept. The
server applies its own chat template and tokenizer, so token ids are not available: completions carry text, no token ids, and log-probs only when the server returns them
(`logprobs: true`). Adapters are not supported -- the endpoint serves whatever model it serves --
and a request naming one is a ValueError rather than a silent base-model answer. `n` is sent as
the `n` field; servers that return fewer choices are asked again for the rest. An error of `generate`
carries `.answered`: the results of the requests answered before it (None for the others), which the
rollout driver keeps.

A request the server refuses for its context window is not an error, as with the other engines: a
prompt that fits but whose `max_tokens` would pass the window is asked again with the room left
(the reply ends where the window is full, as vLLM ends it), and a prompt that does not fit gets
`no_room` replies. The window and the prompt's length are read from the error message of vLLM,
SGLang or OpenAI; where they cannot be read, the prompt counts as one that does not fit.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from llm_marl_envs.core.openai_client import DeadlinePassed, make_client, tries, within

from .base import Completion, GenerationRequest, GenerationResult, SamplingParams, no_room, split_reasoning


class APIError(RuntimeError):
    """The endpoint could not be reached or answered with an error; the message names the URL and the fix."""


class _ContextFull(Exception):
    """The server refused a request for its context window; `room` is how many tokens the reply may still have
    (0: the prompt does not fit, or the message did not say)."""

    def __init__(self, room: int):
        self.room = room


class APIEngine:
    """Engine over an OpenAI-compatible server (`base_url` like `http://127.0.0.1:8000/v1`).

    `timeout_s` bounds the wait to connect and for each part of an answer (seconds); `max_retries` is how many times the SDK retries a
    connection error, timeout, 429 or 5xx answer (with exponential backoff) before giving up; `deadline_s` bounds
    a request's whole time, its retries included (a server that sends its answer a byte at a time is never
    timed out by `timeout_s`).
    `thinking` (True/False) asks the server to render its chat template with `enable_thinking` set so
    (`chat_template_kwargs`, which vLLM, SGLang and llama.cpp read); roles (a tuple) ask it on for their
    requests and off for the others'; None leaves the server's default.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 60.0,
                 max_retries: int = 2, max_concurrency: int = 4, request_logprobs: bool = False,
                 thinking: bool | tuple[str, ...] | None = None, deadline_s: float = 1800.0):
        try:
            import openai
        except ImportError:
            raise APIError("the api engine needs the openai package: pip install openai (or `make install`)") from None
        if not model:
            raise ValueError("the api engine needs --model: the model name the server serves")
        if not 0 < timeout_s < math.inf:  # nan and inf too: the socket layer would raise its own error mid-request
            raise ValueError(f"--api-timeout must be a number of seconds > 0, got {timeout_s}")
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.model = model
        self.timeout_s = timeout_s
        if not 0 < deadline_s < math.inf:
            raise ValueError(f"--api-deadline must be a number of seconds > 0, got {deadline_s}")
        self.deadline_s = deadline_s
        if max_retries < 0:  # once quietly taken for 0
            raise ValueError(f"--api-retries must be a whole number >= 0, got {max_retries}")
        self.max_retries = max_retries
        self.max_concurrency = max(1, max_concurrency)
        self.request_logprobs = request_logprobs
        self.thinking = thinking
        self.max_tokens_field = "max_tokens"  # or "max_completion_tokens", once the server asks for it
        self._openai = openai
        self.client = make_client(self.base_url, api_key, timeout_s, self.max_retries)

    def generate(self, requests: list[GenerationRequest], sampling: SamplingParams) -> list[GenerationResult]:
        for r in requests:
            if r.adapter is not None:
                raise ValueError(f"the api engine serves no LoRA adapters (request asked for {r.adapter!r}); "
                                 "evaluate adapters with --engine hf or vllm")
        answered: list[GenerationResult | None] = [None] * len(requests)

        def answer(i: int) -> None:
            answered[i] = GenerationResult(request=requests[i], prompt_ids=[], completions=self._complete(requests[i], sampling))

        try:
            _in_threads(answer, range(len(requests)), self.max_concurrency)
        except Exception as exc:
            exc.answered = list(answered)  # type: ignore[attr-defined]  # what the rollout keeps of this call (None: not answered)
            raise
        return answered  # type: ignore[return-value]

    def sync_adapters(self) -> None:
        pass

    def close(self) -> None:
        self.client.close()

    # ------------------------------------------------------------------ HTTP
    def _complete(self, request: GenerationRequest, sampling: SamplingParams) -> list[Completion]:
        out: list[Completion] = []
        max_tokens = sampling.max_new_tokens
        while len(out) < request.n:
            body: dict[str, Any] = {
                "model": self.model, "messages": request.messages, "n": request.n - len(out),
                "temperature": sampling.temperature, "top_p": sampling.top_p, self.max_tokens_field: max_tokens,
            }
            extra: dict[str, Any] = {}  # extensions (vLLM, SGLang): OpenAI itself has neither
            if sampling.top_k > 0:
                extra["top_k"] = sampling.top_k
            if self.thinking is not None:
                thinks = request.role in self.thinking if isinstance(self.thinking, tuple) else self.thinking
                extra["chat_template_kwargs"] = {"enable_thinking": thinks}
            if extra:
                body["extra_body"] = extra
            if sampling.seed is not None:
                body["seed"] = sampling.seed + len(out)
            if self.request_logprobs:
                body["logprobs"] = True
            try:
                choices = self._create(body)
            except _ContextFull as full:
                if 0 < full.room < max_tokens:
                    max_tokens = full.room
                    continue
                out.extend(no_room() for _ in range(request.n - len(out)))
                break
            out.extend(_completion(c) for c in sorted(choices, key=lambda c: getattr(c, "index", 0) or 0))
        return out[:request.n]

    def _create(self, body: dict[str, Any]) -> list[Any]:
        """The choices the server answered `body` with; APIError when it answered none or no chat completion."""
        openai = self._openai
        sent = tries(self.max_retries)
        try:
            raw = within(self.deadline_s, self.client.chat.completions.with_raw_response.create, **body)  # its text says what came instead
        except DeadlinePassed:
            raise APIError(f"{self.url} did not finish answering within {self.deadline_s:g} s, a request's whole time "
                           "(--api-deadline); raise it or check the server") from None
        except openai.APITimeoutError:
            raise APIError(f"{self.url} did not answer within {self.timeout_s:g} s ({sent}); "
                           "raise --api-timeout or check the server") from None
        except openai.APIConnectionError as exc:
            raise APIError(f"cannot reach {self.url} ({exc.__cause__ or exc}); start the server or fix --base-url") from None
        except openai.NotFoundError:
            raise APIError(f"{self.url} answered 404 Not Found; --base-url must end in /v1 and --model must be "
                           "a model the server serves") from None
        except openai.AuthenticationError:
            raise APIError(f"{self.url} refused the API key (HTTP 401); set OPENAI_API_KEY or --api-key") from None
        except openai.APIStatusError as exc:
            detail = " ".join(exc.response.text.split())
            room = _room_left(detail) if exc.status_code in (400, 413, 422) else None
            if room is not None:
                raise _ContextFull(room) from None
            if exc.param == "max_tokens" and "max_completion_tokens" in detail and "max_tokens" in body:
                # OpenAI's reasoning models (o-series, gpt-5) take the reply's length only under its newer name,
                # which vLLM and other servers do not all read: it is sent once asked for.
                self.max_tokens_field = "max_completion_tokens"
                renamed = {k: v for k, v in body.items() if k != "max_tokens"}
                return self._create({**renamed, "max_completion_tokens": body["max_tokens"]})
            hint = ("; it does not take chat_template_kwargs: drop --thinking/--no-thinking (the server's default applies)"
                    if "chat_template_kwargs" in detail and "chat_template_kwargs" in body.get("extra_body", {}) else "")
            raise APIError(f"{self.url} answered HTTP {exc.status_code}: {detail[:300]}{hint}") from None
        try:
            response = raw.parse()
        except (ValueError, openai.APIResponseValidationError):  # a JSON content type over a body that is no JSON
            response = None
        # A proxy's HTML page, plain text or other JSON is returned as it came (the SDK does not validate), and
        # would otherwise end in an AttributeError traceback.
        detail = " ".join(raw.text.split())[:300]
        choices = getattr(response, "choices", None)
        if not isinstance(response, openai.BaseModel) or not isinstance(choices, (list, type(None))) or not all(
                isinstance(c, openai.BaseModel) for c in choices or []):
            raise APIError(f"{self.url} did not answer an OpenAI chat completion: {detail or 'an empty body'}; "
                           "--base-url must be the server's OpenAI-compatible endpoint (ending in /v1)")
        if not choices:  # with what came instead: a proxy's error object, say
            raise APIError(f"{self.url} returned no choices ({detail}); check that --model names a chat model the server serves")
        return choices


def _in_threads(fn: Callable[[Any], Any], items: Sequence[Any], workers: int) -> list[Any]:
    """[fn(x) for x in items], on up to `workers` daemon threads; the first error is raised.

    Not a ThreadPoolExecutor: its caller waits on a lock that a Ctrl-C or SIGTERM does not wake until a request
    ends, and its exit and the interpreter's wait for the requests in flight, each up to --api-timeout times the
    tries. Here the caller wakes every 0.1 s, and after an error or an interrupt no request is started and those
    in flight are left to daemon threads, which do not hold the process open."""
    results: list[Any] = [None] * len(items)
    failures: list[BaseException] = []
    left = iter(range(len(items)))
    lock = threading.Lock()

    def work() -> None:
        while not failures:
            with lock:
                i = next(left, None)
            if i is None:
                return
            try:
                results[i] = fn(items[i])
            except BaseException as exc:  # noqa: BLE001 -- raised in the caller's thread
                failures.append(exc)

    alive = [threading.Thread(target=work, daemon=True) for _ in range(min(workers, len(items)))]
    for thread in alive:
        thread.start()
    try:
        while alive and not failures:
            alive[0].join(0.1)
            alive = [t for t in alive if t.is_alive()]
    except BaseException as exc:  # Ctrl-C, SIGTERM: the workers start nothing more
        failures.append(exc)
        raise
    if failures:
        raise failures[0]
    return results


_CONTEXT_ERROR = re.compile(r"context[ _]?(length|size|window)", re.I)
_WINDOW = re.compile(r"context length\D{0,12}?(\d+)", re.I)
# How vLLM, OpenAI and SGLang say the prompt's length in that error.
_PROMPT_TOKENS = re.compile(r"(?:has|contains|contains at least) (\d+) input tokens|(\d+) in the messages"
                            r"|messages resulted in (\d+) tokens|(\d+) tokens from the input|input \((\d+) tokens\)", re.I)


def _room_left(detail: str) -> int | None:
    """None when an error message is not about the context window, else the tokens a reply may have (0: none)."""
    if not _CONTEXT_ERROR.search(detail):
        return None
    window, prompt = _WINDOW.search(detail), _PROMPT_TOKENS.search(detail)
    if window is None or prompt is None:
        return 0
    return max(0, int(window.group(1)) - int(next(g for g in prompt.groups() if g)))


def _completion(choice: Any) -> Completion:
    message = choice.message
    content = message.content if message is not None else None
    if isinstance(content, list):  # content parts, as Mistral's reasoning models answer: the reply is their text
        content = "".join(p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text"
                          and isinstance(p.get("text"), str))
    # Any other content that is no text is a malformed reply, for the environment to penalise.
    reasoning, text = split_reasoning(content if isinstance(content, str) else "")
    # A server with a reasoning parser (vLLM's --reasoning-parser, SGLang) returns the reasoning apart.
    served = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    reasoning = served if isinstance(served, str) and served else reasoning
    content = (choice.logprobs.content if choice.logprobs is not None else None) or []
    logprobs = [float(t.logprob) for t in content if getattr(t, "logprob", None) is not None]
    finish = "length" if choice.finish_reason == "length" else "stop"
    return Completion(text=text, token_ids=[], logprobs=logprobs, finish_reason=finish, reasoning=reasoning)
