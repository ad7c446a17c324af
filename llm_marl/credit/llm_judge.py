"""An LLM-as-judge for message labels (Shapley-PRM Eq. 6) through any OpenAI-compatible endpoint.

    judge = LLMJudge(JudgeConfig(base_url="http://localhost:8000/v1", model="Qwen2.5-7B-Instruct"))
    message_rewards(messages, phi, judge)

The judge sees the conversation before the message (H_{t-1}) and the message, and answers ALIGNED
(+1: it advances the agent's own work), COUNTER (-1: it undoes or contradicts it) or NEUTRAL (0).
A failed call or an unreadable reply is labelled 0 and counted in `errors`, so an unreachable judge
degrades to the uniform fallback of Eq. 8 instead of stopping training.
"""

from __future__ import annotations

from collections.abc import Sequence

from llm_marl_envs.search.judge import JudgeConfig, chat_completion

from .message import Message

LABEL_PROMPT = """You are labelling one message of a multi-agent LLM system for credit assignment.

Conversation so far (most recent last):
{history}

Message of agent "{agent}":
{message}

Does this message advance the agent's own work (ALIGNED), pull against it by undoing, contradicting or
derailing it (COUNTER), or neither, e.g. filler or repetition (NEUTRAL)? Reply with exactly one word:
ALIGNED, COUNTER or NEUTRAL."""
LABELS = {"ALIGNED": 1, "COUNTER": -1, "NEUTRAL": 0}
MAX_CHARS = 2_000
"""Each message is cut to this length in the prompt (judges have finite context)."""


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + " [...]"


class LLMJudge:
    """A `Judge` (llm_marl.credit.message) backed by an OpenAI-compatible chat endpoint."""

    def __init__(self, config: JudgeConfig):
        self.config = config
        self.calls = 0
        self.errors: list[str] = []

    def __call__(self, history: Sequence[Message], message: Message) -> int:
        prompt = LABEL_PROMPT.format(history="\n\n".join(f"[{m.agent}] {_cut(m.text)}" for m in history) or "(nothing yet)",
                                     agent=message.agent, message=_cut(message.text))
        self.calls += 1
        reply, error = chat_completion(self.config, prompt, max_tokens=4)
        word = (reply or "").strip().upper().split(maxsplit=1)[0] if reply and reply.strip() else ""
        if word.strip(".") in LABELS:
            return LABELS[word.strip(".")]
        self.errors.append(error or f"judge replied {(reply or '')[:40]!r}, expected ALIGNED, COUNTER or NEUTRAL")
        return 0
