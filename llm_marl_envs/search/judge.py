"""Optional LLM-as-a-judge for answer accuracy through any OpenAI-compatible endpoint (the `openai` SDK).

MATPO scores accuracy with a GPT-4o-mini judge; the environments default to normalised exact
match (deterministic, offline) and use a judge only when one is configured:

    JudgeConfig(base_url="http://localhost:8000/v1", model="Qwen2.5-7B-Instruct", api_key_env="OPENAI_API_KEY")

Requests use the client of the `api` engine (`llm_marl_envs.core.openai_client`), with the config's
timeout, retries and deadline. A judge that fails (unreachable, too slow, malformed reply, `openai` not
installed) never breaks an episode: the caller falls back to exact match and reports the error in
`infos`. `openai` is imported on the first call, so the search MCP server starts without it.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from typing import Any

from ..core.openai_client import DeadlinePassed, make_client, tries, within

JUDGE_PROMPT = """You are grading an answer to a question against the ground-truth answer.

Question: {question}
Ground-truth answer: {gold}{aliases}
Predicted answer: {prediction}

The prediction is correct if it refers to the same entity, value or fact as the ground truth, allowing for
differences in wording, abbreviations and formatting. Extra details do not make it wrong unless they contradict
the ground truth. Reply with exactly one word: CORRECT or INCORRECT."""


@dataclass(frozen=True)
class JudgeConfig:
    base_url: str
    """OpenAI-compatible API root, e.g. http://localhost:8000/v1 (POST {base_url}/chat/completions)."""
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key; unset: `OPENAI_API_KEY`, else the placeholder "EMPTY"
    (local servers need none). The key itself is never a field, so it stays out of saved configs."""
    timeout_s: float = 30.0
    """Seconds the HTTP client waits to connect and for each part of an answer."""
    max_retries: int = 2
    """Retries of a request that failed to connect, timed out or got 429/5xx (with backoff)."""
    deadline_s: float = 120.0
    """Seconds a verdict may take in all, its retries included (a server that answers a byte at a time is never
    timed out by `timeout_s`, and held the episode for ever)."""

    def __post_init__(self) -> None:
        # Checked when the env is made: a field of the wrong kind would otherwise fail inside the episode's
        # last step (a base_url that is no text raised there), or quietly turn every verdict into exact match.
        for name in ("base_url", "model", "api_key_env"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"judge {name} must be text, got {getattr(self, name)!r}")
        for name in ("timeout_s", "deadline_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"judge {name} must be a number of seconds > 0, got {value!r}")
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"judge max_retries must be a whole number >= 0, got {self.max_retries!r}")

    @classmethod
    def from_any(cls, value: JudgeConfig | dict | None) -> JudgeConfig | None:
        if value is None or isinstance(value, JudgeConfig):
            return value
        if isinstance(value, dict):
            return cls(**value)
        raise ValueError(f"judge must be a JudgeConfig, a dict of its fields or None, got {type(value).__name__}")


@functools.lru_cache(maxsize=16)
def _client(base_url: str, api_key: str | None, timeout_s: float, max_retries: int) -> Any:
    """One client (and its connection pool) per endpoint and settings, shared by every call."""
    return make_client(base_url, api_key, timeout_s, max_retries)


def chat_completion(config: JudgeConfig, prompt: str, max_tokens: int = 8) -> tuple[str | None, str | None]:
    """(reply text, None) or (None, "judge failed: ...") from one greedy chat completion; never raises on
    I/O, a bad reply or a missing `openai` package."""
    url = config.base_url.rstrip("/") + "/chat/completions"
    try:
        import openai
    except ImportError:
        return None, "judge failed: the LLM judge needs the openai package: pip install openai"
    try:
        client = _client(config.base_url, os.environ.get(config.api_key_env) or None, config.timeout_s, config.max_retries)
        reply = within(config.deadline_s, client.chat.completions.create, model=config.model,
                       messages=[{"role": "user", "content": prompt}], temperature=0, max_tokens=max_tokens)
        text = reply.choices[0].message.content
    except DeadlinePassed:
        return None, f"judge failed: {url} did not finish answering within {config.deadline_s:g} s (deadline_s)"
    except openai.APITimeoutError:
        return None, f"judge failed: {url} did not answer within {config.timeout_s:g} s ({tries(config.max_retries)})"
    except openai.APIConnectionError as exc:
        return None, f"judge failed: cannot reach {url} ({exc.__cause__ or exc})"
    except openai.APIStatusError as exc:
        return None, f"judge failed: {url} answered HTTP {exc.status_code}: {' '.join(exc.response.text.split())[:200]}"
    except (openai.OpenAIError, AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        return None, f"judge failed: {url} did not answer a chat completion ({type(exc).__name__}: {exc})"
    if not isinstance(text, str):
        return None, f"judge failed: {url} answered no text"
    return text, None


def judge_prompt(question: str, gold: str, prediction: str, aliases: tuple[str, ...] = ()) -> str:
    """The judge's prompt; the answer's aliases (other names exact match accepts) follow it on its line,
    else a right answer given by an alias ("Kessling town" for "Kessling") could be judged wrong."""
    others = [a for a in dict.fromkeys(aliases) if a != gold]
    line = f" (also given as: {'; '.join(others)})" if others else ""
    return JUDGE_PROMPT.format(question=question, gold=gold, aliases=line, prediction=prediction)


def judge(config: JudgeConfig, question: str, gold: str, prediction: str,
          aliases: tuple[str, ...] = ()) -> tuple[bool | None, str | None]:
    """(verdict, None) or (None, error)."""
    reply, error = chat_completion(config, judge_prompt(question, gold, prediction, aliases))
    if reply is None:
        return None, error
    text = reply.strip().upper()
    if text.startswith("INCORRECT"):
        return False, None
    if text.startswith("CORRECT"):
        return True, None
    return None, f"judge replied {text[:40]!r}, expected CORRECT or INCORRECT"
