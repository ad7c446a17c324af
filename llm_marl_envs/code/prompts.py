"""Coder and tester prompts: AT-GRPO appendix A.2.2 "Code MAS Workflow" (Phase 1 generation,
Phase 2 refinement with the mismatch history). Both roles of turn k see the history of turns
0..k-1 only, so within a turn they act as in the paper, side by side."""

from __future__ import annotations

from dataclasses import dataclass, field

from .problems import TestCase

SHOWN_CHARS = 1_500
"""Longest code, input or output shown in a history entry (characters); the rest is elided."""

CODER_SYSTEM = "You are a helpful assistant that writes Python to solve the problem. Think step by step, then output code."
CODER_REFINE_SYSTEM = "You are a helpful assistant that corrects and refines code."
TESTER_SYSTEM = "You are a helpful assistant that creates unit test cases (input + expected output) for a coding task."
TESTER_REFINE_SYSTEM = "You are an assistant that checks and refines unit tests for a coding task."

_CODE_FORMAT = "Please answer in the following format:\nCode:\n```python\n(your code here)\n```"
_TEST_FORMAT = "Respond in the format:\n**Test Input:**\n```\ninput here\n```\n**Test Output:**\n```\noutput here\n```"


@dataclass
class TestRun:
    """One test of the tester's suite, run on the coder's program of that turn."""

    __test__ = False  # not a pytest class
    test: TestCase
    status: str
    """Sandbox status of the program on this input ("ok", "error", "timeout", ...), or "not run"."""
    actual: str
    passed: bool


@dataclass
class TurnRecord:
    turn: int
    code: str | None
    code_note: str
    """How the program fared: "compiled", "syntax error: ...", "no code block"."""
    tests: list[TestRun] = field(default_factory=list)
    tester_note: str = ""
    """What the tester did this turn ("added a test", "replaced ...", "no parsable test: ...")."""


def _clip(text: str) -> str:
    text = text.rstrip("\n")
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "\n[... truncated]"


def mismatch_history(history: list[TurnRecord]) -> str:
    """Previous code, test inputs, expected outputs and actual outputs, with the differences marked."""
    if not history:
        return "(no previous turns)"
    parts = []
    for rec in history:
        lines = [f"=== Turn {rec.turn + 1} ==="]
        if rec.code is None:
            lines.append(f"Coder's code: (none: {rec.code_note})")
        else:
            lines.append(f"Coder's code ({rec.code_note}):\n```python\n{_clip(rec.code)}\n```")
        if rec.tester_note:
            lines.append(f"Tester: {rec.tester_note}")
        if not rec.tests:
            lines.append("No test cases yet.")
        for i, run in enumerate(rec.tests, 1):
            verdict = "PASSED (outputs match)" if run.passed else "MISMATCH"
            actual = _clip(run.actual) if run.actual.strip() else "(no output)"
            lines.append(
                f"Test {i}: {verdict}\nTest input:\n{_clip(run.test.input)}\nExpected output:\n{_clip(run.test.output)}\n"
                f"Actual output [{run.status}]:\n{actual}"
            )
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def coder_messages(problem_text: str, turn: int, history: list[TurnRecord]) -> list[dict[str, str]]:
    if turn == 0:
        user = (
            "Important:\n- Read all inputs via input().\n- Print all results with print().\n"
            "- Do not hardcode or fabricate inputs.\n\n"
            f"Now solve:\nProblem:\n```\n{problem_text}\n```\n\n"
            "First, decide on the number and types of inputs required (e.g., x = int(input()), b = int(input())), "
            "then implement the solution and print the result.\n\n" + _CODE_FORMAT
        )
        return [{"role": "system", "content": CODER_SYSTEM}, {"role": "user", "content": user}]
    user = (
        "Important:\n- Read inputs via input(); output with print().\n- Do not hardcode inputs.\n\n"
        f"Problem:\n```\n{problem_text}\n```\n\n"
        f"Use the history below to guide your fixes:\n{mismatch_history(history)}\n\n"
        "If your previous code crashed, first fix the bug. If execution succeeded but outputs mismatched the "
        "expected output, decide if the test case is correct.\n- If the test is correct, refine your code to pass it.\n"
        "- If the test is wrong, verify your program's logic and keep it.\n\n"
        "Provide the final, corrected code. " + _CODE_FORMAT
    )
    return [{"role": "system", "content": CODER_REFINE_SYSTEM}, {"role": "user", "content": user}]


def tester_messages(problem_text: str, turn: int, history: list[TurnRecord]) -> list[dict[str, str]]:
    if turn == 0:
        user = (
            f"Problem:\n```\n{problem_text}\n```\n\n"
            "Provide one new high-quality test case. Before giving the test case, reason carefully to ensure the "
            "output is correct, then derive the output for your chosen input.\n\n" + _TEST_FORMAT
        )
        return [{"role": "system", "content": TESTER_SYSTEM}, {"role": "user", "content": user}]
    user = (
        f"Problem:\n```\n{problem_text}\n```\n\n"
        f"Analyze the history below:\n{mismatch_history(history)}\n\n"
        "First, decide whether your previous test case was correct (watch for misunderstandings of the task). "
        "If it was wrong or unclear, provide a corrected test case (a test with the same input replaces the old one). "
        "If it was correct, provide one new test case that checks a different situation.\n\n" + _TEST_FORMAT
    )
    return [{"role": "system", "content": TESTER_REFINE_SYSTEM}, {"role": "user", "content": user}]
