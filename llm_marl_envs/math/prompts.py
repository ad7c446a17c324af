"""Math prompts: AT-GRPO appendix A.2.2, "Math MAS Workflow" (Phase 1 generation, Phase 2
refinement with the mismatch history), plus the single-agent variants' retry prompts.

The problem is always shown on its own lines after "Problem:"; replies and programs of earlier turns
are capped so the prompt stays within the paper's 8192-token prompt budget for T = 4.
"""

from __future__ import annotations

from .records import MathContext, ReasonerAttempt, ToolAttempt, TurnRecord

Message = dict[str, str]
_REPLY_CHARS = 3_000
_OUTPUT_CHARS = 1_000

REASONER_SYSTEM = "You are a helpful assistant that solves math problems via careful reasoning."
REASONER_REFINE_SYSTEM = "You are a helpful assistant that refines mathematical solutions through reasoning."
TOOL_SYSTEM = "You are a helpful programming assistant that writes Python to solve the math problem."
TOOL_REFINE_SYSTEM = "You are a helpful programming assistant that refines Python solutions for math problems."

_REASONER_FORMAT = """Rules:
* The boxed value must be a single number or expression (simplified if possible).
* Do not add words after the box; only the final value goes after ####.
* If multiple answers exist, list them in a single \\boxed{} separated by commas.
Output format:
1. Your reasoning (short and clear).
2. The final line must contain only the boxed answer, e.g., #### \\boxed{123}"""

_TOOL_FORMAT = """Requirements
Write correct, readable Python that computes the final answer. Think step by step in comments if helpful.
Use only the standard library and deterministic math (no internet, no randomness; use fractions.Fraction for exact values).
At the end, PRINT ONLY the final numeric or symbolic answer (nothing else): a fraction as a/b, several answers separated by commas, an ordered pair as (x, y).
Respond in the format:
**Code:**
```python
# your code here
# print ONLY the final answer on the last line
```"""


def _cap(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else "[...] " + text[-limit:]


def _problem(ctx: MathContext) -> str:
    return f"Problem:\n{ctx.problem}\n"


def reasoner_text(attempt: ReasonerAttempt | None) -> list[str]:
    if attempt is None:
        return ["- Reasoning Agent: (no reply)"]
    return [
        f"- Reasoning Agent's solution:\n{_cap(attempt.reply, _REPLY_CHARS) or '(empty reply)'}",
        f"- Reasoning Agent's extracted answer: {attempt.answer if attempt.answer is not None else f'(none: {attempt.error})'}",
    ]


def tool_text(attempt: ToolAttempt | None) -> list[str]:
    if attempt is None:
        return ["- Python Tool Agent: (no reply)"]
    code = f"```python\n{_cap(attempt.code, _REPLY_CHARS)}\n```" if attempt.code else "(no code block)"
    return [
        f"- Python Tool Agent's code:\n{code}",
        f"- Execution [{attempt.status}]: {_cap(attempt.output, _OUTPUT_CHARS) or '(no output)'}",
        f"- Python Tool Agent's printed answer: {attempt.answer if attempt.answer is not None else f'(none: {attempt.error})'}",
    ]


def mismatch_line(record: TurnRecord) -> str:
    r, t = record.reasoner, record.tool
    if record.agreed:
        return "- The boxed answer and the printed answer agree."
    if r is None or r.answer is None or t is None or t.answer is None:
        return "- Mismatch: at least one agent gave no answer."
    return f"- Mismatch: the boxed answer {r.answer} and the printed answer {t.answer} differ."


def history_text(ctx: MathContext) -> str:
    """The mismatch history (A.2.2 {mismatch_history}): every previous turn of both roles."""
    if not ctx.history:
        return "(no previous turns)"
    parts = []
    for record in ctx.history:
        lines = [f"Turn {record.turn + 1}:"]
        if ctx.mode in ("mas", "reasoner"):
            lines += reasoner_text(record.reasoner)
        if ctx.mode in ("mas", "tool"):
            lines += tool_text(record.tool)
        if ctx.mode == "mas":
            lines.append(mismatch_line(record))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def reasoner_messages(ctx: MathContext) -> list[Message]:
    if ctx.turn == 0 or not ctx.history:
        user = (
            f"{_problem(ctx)}\n"
            "First, outline the key reasoning steps. Then carry out the full solution. After solving, present the final "
            "answer in a LaTeX box.\nBefore giving the full reasoning, summarize the steps clearly in:\n"
            "**Reasoning Steps:**\n(reasoning steps here)\n"
            "Then provide your complete solution concisely. Put your final answer in \\boxed{<answer>}.\n"
            f"{_REASONER_FORMAT}"
        )
        return [{"role": "system", "content": REASONER_SYSTEM}, {"role": "user", "content": user}]
    if ctx.mode == "mas":
        guidance = (
            "First, compare your previous boxed answer with the Python Tool Agent's printed output.\n"
            "* If the code output corrects a computational slip in your reasoning, adopt the corrected value.\n"
            "* If the code likely has a bug (e.g., mishandled edge cases, precision, domains), keep the mathematically "
            "correct answer and explain briefly.\nThen solve the problem again, more robustly."
        )
    else:
        guidance = "Your previous reply had no usable final answer (see above). Solve the problem again and follow the output format exactly."
    user = (
        f"{_problem(ctx)}\nHistory (previous attempts and outputs):\n{history_text(ctx)}\n\n{guidance}\n"
        "Before giving the full reasoning, summarize the key steps clearly:\n**Reasoning Steps:**\n(reasoning steps here)\n"
        "Finish with the final answer after ####, as #### \\boxed{<answer>}. The final line must contain only the boxed "
        f"value (no extra text).\n{_REASONER_FORMAT}"
    )
    return [{"role": "system", "content": REASONER_REFINE_SYSTEM}, {"role": "user", "content": user}]


def tool_messages(ctx: MathContext) -> list[Message]:
    if ctx.turn == 0 or not ctx.history:
        user = f"{_problem(ctx)}\n{_TOOL_FORMAT}"
        return [{"role": "system", "content": TOOL_SYSTEM}, {"role": "user", "content": user}]
    if ctx.mode == "mas":
        tasks = (
            "Tasks:\n1. Judge whether the Reasoning Agent's boxed answer or your previous printed result is more likely "
            "correct (consider numerical stability, edge cases, exact vs. float).\n"
            "2. Fix or rewrite the code so it reliably computes the correct final answer.\n"
            "* Prefer exact arithmetic (fractions, integers, rational simplification) when possible.\n"
            "* Add minimal checks for domain/edge cases.\n* Keep outputs deterministic."
        )
        heading = "History (reasoning vs. execution mismatches)"
    else:
        tasks = "Your previous program did not print a usable answer (see above). Fix or rewrite it."
        heading = "History (previous programs and their execution)"
    user = f"{_problem(ctx)}\n{heading}:\n{history_text(ctx)}\n\n{tasks}\n\n{_TOOL_FORMAT}"
    return [{"role": "system", "content": TOOL_REFINE_SYSTEM}, {"role": "user", "content": user}]
