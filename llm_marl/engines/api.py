"""`api` engine: any OpenAI-compatible `/v1/chat/completions` endpoint, for evaluation only.

Plain `urllib` (no new dependency). The server applies its own chat template and tokenizer, so
token ids are not available: completions carry text, no token ids, and log-probs only when the
server returns them (`logprobs: true`). Adapters are not supported -- the endpoint serves whatever
model it serves -- and a request naming one is a ValueError rather than a silent base-model answer.
`n` is sent as the `n` field; servers that return fewer choices are asked again for the rest.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .base import Completion, GenerationRequest, GenerationResult, SamplingParams


class APIError(RuntimeError):
    """The endpoint could not be reached or answered with an error; the message names the URL."""


class APIEngine:
    """Engine over an OpenAI-compatible server (`base_url` like `http://127.0.0.1:8000/v1`)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 120.0,
                 max_concurrency: int = 4, request_logprobs: bool = False):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_concurrency = max(1, max_concurrency)
        self.request_logprobs = request_logprobs

    def generate(self, requests: list[GenerationRequest], sampling: SamplingParams) -> list[GenerationResult]:
        for r in requests:
            if r.adapter is not None:
                raise ValueError(f"the api engine serves no LoRA adapters (request asked for {r.adapter!r}); "
                                 "evaluate adapters with --engine hf or vllm")
        with ThreadPoolExecutor(self.max_concurrency) as pool:
            completions = list(pool.map(lambda r: self._complete(r, sampling), requests))
        return [GenerationResult(request=r, prompt_ids=[], completions=c) for r, c in zip(requests, completions)]

    def sync_adapters(self) -> None:
        pass

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ HTTP
    def _complete(self, request: GenerationRequest, sampling: SamplingParams) -> list[Completion]:
        out: list[Completion] = []
        while len(out) < request.n:
            body: dict[str, Any] = {
                "model": self.model, "messages": request.messages, "n": request.n - len(out),
                "temperature": sampling.temperature, "top_p": sampling.top_p, "max_tokens": sampling.max_new_tokens,
            }
            if sampling.top_k > 0:
                body["top_k"] = sampling.top_k  # an extension (vLLM, SGLang); OpenAI itself has no top-k
            if sampling.seed is not None:
                body["seed"] = sampling.seed + len(out)
            if self.request_logprobs:
                body["logprobs"] = True
            choices = self._post(body).get("choices") or []
            if not choices:
                raise APIError(f"{self.url} returned no choices")
            out.extend(_completion(c) for c in sorted(choices, key=lambda c: c.get("index", 0)))
        return out[:request.n]

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read().decode())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise APIError(f"{self.url} answered HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise APIError(f"cannot reach {self.url} ({exc}); start the server or fix --base-url") from None
        except json.JSONDecodeError as exc:
            raise APIError(f"{self.url} did not answer JSON ({exc})") from None


def _completion(choice: dict[str, Any]) -> Completion:
    text = (choice.get("message") or {}).get("content") or ""
    content = (choice.get("logprobs") or {}).get("content") or []
    logprobs = [float(t["logprob"]) for t in content if "logprob" in t]
    finish = "length" if choice.get("finish_reason") == "length" else "stop"
    return Completion(text=text, token_ids=[], logprobs=logprobs, finish_reason=finish)
