"""Optional LLM-as-a-judge for answer accuracy through any OpenAI-compatible endpoint (urllib only).

MATPO scores accuracy with a GPT-4o-mini judge; the environments default to normalised exact
match (deterministic, offline) and use a judge only when one is configured:

    JudgeConfig(base_url="http://localhost:8000/v1", model="Qwen2.5-7B-Instruct", api_key_env="OPENAI_API_KEY")

A judge that fails (unreachable, malformed reply) never breaks an episode: the caller falls back
to exact match and reports the error in `infos`.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass

JUDGE_PROMPT = """You are grading an answer to a question against the ground-truth answer.

Question: {question}
Ground-truth answer: {gold}
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
    """Environment variable holding the API key (none sent when unset)."""
    timeout_s: float = 30.0

    @classmethod
    def from_any(cls, value: JudgeConfig | dict | None) -> JudgeConfig | None:
        if value is None or isinstance(value, JudgeConfig):
            return value
        if isinstance(value, dict):
            return cls(**value)
        raise ValueError(f"judge must be a JudgeConfig, a dict of its fields or None, got {type(value).__name__}")


def chat_completion(config: JudgeConfig, prompt: str, max_tokens: int = 8) -> tuple[str | None, str | None]:
    """(reply text, None) or (None, error) from one greedy chat completion; never raises on I/O."""
    body = {"model": config.model, "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": max_tokens}
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(config.api_key_env)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(config.base_url.rstrip("/") + "/chat/completions", json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=config.timeout_s) as response:  # noqa: S310 (user-configured URL)
            reply = json.loads(response.read().decode())
        return str(reply["choices"][0]["message"]["content"]), None
    except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError, TypeError) as e:
        return None, f"judge failed: {type(e).__name__}: {e}"


def judge(config: JudgeConfig, question: str, gold: str, prediction: str) -> tuple[bool | None, str | None]:
    """(verdict, None) or (None, error)."""
    reply, error = chat_completion(config, JUDGE_PROMPT.format(question=question, gold=gold, prediction=prediction))
    if reply is None:
        return None, error
    text = reply.strip().upper()
    if text.startswith("INCORRECT"):
        return False, None
    if text.startswith("CORRECT"):
        return True, None
    return None, f"judge replied {text[:40]!r}, expected CORRECT or INCORRECT"
