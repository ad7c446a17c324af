"""What each role did in a turn: the records the environment keeps and the prompts show."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ReasonerAttempt:
    reply: str
    answer: str | None
    """ŷ_k: the extracted final answer (last \\boxed{}, else the line after ####), or None."""
    error: str | None
    correct: bool
    """CheckFinal(ŷ_k, y*)."""


@dataclass
class ToolAttempt:
    code: str | None
    status: str
    """Sandbox status ("ok", "error", "timeout", "memory", "output_limit", "blocked", "crash"), or
    "no_code" (no code block), "syntax_error" (does not compile), "over_budget" (code too long):
    the last three are never run."""
    output: str
    """What the program printed (stdout; stderr appended when it failed), capped for prompts."""
    answer: str | None
    """ỹ_k: the last non-empty printed line, or None."""
    error: str | None
    fmt: bool
    """s_fmt: a code block that compiles, within the size budget."""
    ran_ok: bool
    """s_tool: the program exited normally (status "ok")."""
    correct: bool
    """CheckFinal(ỹ_k, y*)."""


@dataclass
class TurnRecord:
    turn: int
    reasoner: ReasonerAttempt | None
    tool: ToolAttempt | None
    agreed: bool
    """Both answers exist and are equivalent (the MAS stopping rule)."""


@dataclass
class MathContext:
    """Everything a prompt may show."""

    problem: str
    turn: int
    max_turns: int
    mode: str
    history: list[TurnRecord] = field(default_factory=list)
