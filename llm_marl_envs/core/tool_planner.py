"""The tool-agent + planner workflow of AT-GRPO's puzzle tasks (appendix A.2.2 and A.3).

Each turn k = 0..T-1:

1. `tool` writes one Python program (a single ```python block) that prints a proposal (an action
   list or a grid). The program runs in the sandbox; its printed output is parsed into the
   proposal. The proposal is *simulated* from the current state, never applied, so the tool's
   reward is known at its own step (AT-GRPO Alg. 1 line 10 scores every candidate before the
   transition; the team term is the one the proposal would earn if adopted).
2. `planner` sees the task with the current state, the tool's code, its execution output and the
   parsed proposal, and gives the final answer after `####`. The answer is applied to the state.

Later turns carry the history (previous code, outputs, answers and what they did). The episode
terminates when the task is solved and is truncated after `max_turns` turns.

Single-agent variants (the papers' baselines) are the `mode` option: `"planner"` (the planner
alone, answering from the task) and `"tool"` (the tool alone; its proposal is the answer).

A task subclasses `ToolPlannerEnv` and implements the domain hooks below; prompts live in the
task's `prompts` module and receive a `TurnContext`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Union

from .base import Message, Play, TextAECEnv
from .clock import tool_wait
from .records import fast_init
from .rewards import RewardBreakdown
from .text import compile_error, extract_code, extract_final_answer, format_moves, parse_moves

Mode = Literal["mas", "planner", "tool"]
MODES: dict[str, tuple[str, ...]] = {"mas": ("tool", "planner"), "planner": ("planner",), "tool": ("tool",)}
_SHOWN_OUTPUT_CHARS = 2_000


@fast_init
@dataclass(frozen=True)
class ToolRun:
    """The tool's attempt at this turn. Immutable once made, so forks share it."""

    code: str | None
    status: str
    """Sandbox status ("ok", "error", "timeout", ...) or "no_code" when no block was found."""
    output: str
    """Printed output (stdout; stderr appended when the program failed), capped for prompts."""
    proposal: Any = None
    proposal_text: str = ""
    error: str | None = None

    def __deepcopy__(self, memo: dict) -> ToolRun:
        return self  # immutable


Feedback = Union[str, Callable[[], str]]
"""What an answer did, in words: the text, or a function of values (not of the environment, which
moves on) that writes it. A turn's feedback is only read by a later prompt, and most branches of a
sampling tree are dropped before that, so the environments write it when it is first read."""


@fast_init
@dataclass(frozen=True, eq=False)
class TurnRecord:
    turn: int
    tool: ToolRun | None
    answer_text: str | None
    write_feedback: Feedback

    @functools.cached_property
    def feedback(self) -> str:
        """What the answer did, in words, as the next turns' history shows it."""
        write = self.write_feedback
        return write if isinstance(write, str) else write()

    def __deepcopy__(self, memo: dict) -> TurnRecord:
        return self  # immutable


@dataclass
class TurnContext:
    """Everything a prompt template may show."""

    task: str
    """The task with the *current* state."""
    turn: int
    max_turns: int
    tool: ToolRun | None = None
    history: list[TurnRecord] = field(default_factory=list)


@dataclass
class Applied:
    breakdown: RewardBreakdown
    success: bool
    feedback: Feedback
    """What the answer did, in words, for the next turn's history (see `Feedback`)."""


class ToolPlannerEnv(TextAECEnv):
    """Base of plan_path, sokoban and sudoku. See the module docstring for the workflow."""

    prompts: Any = None
    """The task's prompts module: tool_messages(ctx), planner_messages(ctx), single_planner_messages(ctx)."""
    fork_shared = (*TextAECEnv.fork_shared, "config", "mode", "_sandbox", "tool_run", "_prompt_cache")
    fork_shallow = (*TextAECEnv.fork_shallow, "history")

    def __init__(self, *, mode: Mode = "mas", max_turns: int = 4, render_mode: str | None = None, sandbox: Any = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)} (mas = tool + planner), got {mode!r}")
        self.mode = mode
        self._sandbox = sandbox
        super().__init__(MODES[mode], max_turns=max_turns, render_mode=render_mode)

    # ------------------------------------------------------------------ domain hooks
    def describe_task(self) -> str:
        """The task text, showing the current state."""
        raise NotImplementedError

    def parse_proposal(self, output: str) -> tuple[Any, str | None]:
        """Parse the tool program's printed output. Returns (proposal, None) or (None, error)."""
        raise NotImplementedError

    def parse_answer(self, answer: str) -> tuple[Any, str | None]:
        """Parse the planner's text after ####. Returns (answer, None) or (None, error)."""
        raise NotImplementedError

    def score_tool(self, run: ToolRun) -> RewardBreakdown:
        """The tool's reward: simulate `run.proposal` from the current state without applying it."""
        raise NotImplementedError

    def apply_answer(self, answer: Any, error: str | None) -> Applied:
        """Apply the planner's parsed answer (None with `error` when it did not parse)."""
        raise NotImplementedError

    def format_proposal(self, proposal: Any) -> str:
        return str(proposal)

    def is_solved(self) -> bool:
        raise NotImplementedError

    # ------------------------------------------------------------------ workflow
    def _start(self) -> None:
        self.history: list[TurnRecord] = []
        self.tool_run: ToolRun | None = None
        self._prompt_cache: dict[str, tuple[tuple[str, str], ...]] = {}
        """(role, content) of each agent's messages at the current state, built on first `observe`."""
        self._start_task()

    def _start_task(self) -> None:
        """Set up the task's per-episode state from `self.instance`."""
        raise NotImplementedError

    def _shared_runtimes(self) -> list[Any]:
        return [self._sandbox] if self._sandbox is not None else []

    @property
    def sandbox(self) -> Any:
        if self._sandbox is None:
            from llm_marl_envs.sandbox import default_sandbox

            self._sandbox = default_sandbox()
        return self._sandbox

    def context(self) -> TurnContext:
        return TurnContext(task=self.describe_task(), turn=self.turn, max_turns=self.max_turns, tool=self.tool_run, history=list(self.history))

    def _messages(self, agent: str) -> list[Message]:
        # The text depends only on the state, which only `_start` and `_play` change; both start a new
        # cache (a new dict, so a fork sharing the old one keeps text that is right for its state).
        cached = self._prompt_cache.get(agent)
        if cached is None:
            cached = self._prompt_cache[agent] = tuple((m["role"], m["content"]) for m in self._build_messages(agent))
        return [{"role": role, "content": content} for role, content in cached]

    def _build_messages(self, agent: str) -> list[Message]:
        ctx = self.context()
        if agent == "tool":
            return self.prompts.tool_messages(ctx)
        if self.mode == "planner":
            return self.prompts.single_planner_messages(ctx)
        return self.prompts.planner_messages(ctx)

    def planned_calls(self, agent: str, reply: str) -> list[tuple[Any, tuple[Any, ...]]]:
        if agent != "tool":
            return []
        code, _ = extract_code(reply)
        if code is None or compile_error(code) is not None:
            return []
        return [(self.sandbox, (code, ""))]

    def run_tool(self, reply: str) -> ToolRun:
        code, error = extract_code(reply)
        if code is None:
            return ToolRun(code=None, status="no_code", output="", error=error)
        exc = compile_error(code)
        if exc is not None:
            # Not worth a process: report like the interpreter would.
            return ToolRun(code=code, status="error", output=f"{_error_name(exc)}: {exc}", error="program does not compile")
        with tool_wait():
            result = self.sandbox.run(code)
        output = result.stdout if result.ok else (result.stdout + result.stderr)
        shown = output[-_SHOWN_OUTPUT_CHARS:]
        if not result.ok:
            return ToolRun(code=code, status=result.status, output=shown, error=f"program failed ({result.status})")
        proposal, error = self.parse_proposal(result.stdout)
        return ToolRun(code=code, status=result.status, output=shown, proposal=proposal, error=error,
                       proposal_text=self.format_proposal(proposal) if proposal is not None else "")

    def _play(self, agent: str, reply: str) -> Play:
        self._prompt_cache = {}
        if agent == "tool":
            return self._play_tool(reply)
        return self._play_planner(reply)

    def _play_tool(self, reply: str) -> Play:
        run = self.run_tool(reply)
        self.tool_run = run
        breakdown = self.score_tool(run)
        details = {"tool_status": run.status, "proposal": run.proposal_text}
        if self.mode == "tool":
            # Single-agent tool baseline: the proposal is the final answer.
            applied = self.apply_answer(run.proposal, run.error)
            return self._end_turn(run, None, applied, breakdown, run.error, details)
        return Play(breakdown=breakdown, next_agent="planner", parse_error=run.error, details=details)

    def _play_planner(self, reply: str) -> Play:
        text, error = extract_final_answer(reply)
        answer = None
        if text is not None:
            answer, error = self.parse_answer(text)
        applied = self.apply_answer(answer, error)
        return self._end_turn(self.tool_run, text, applied, applied.breakdown, error, {"answer": text or ""})

    def _end_turn(self, run: ToolRun | None, answer_text: str | None, applied: Applied,
                  breakdown: RewardBreakdown, error: str | None, details: dict[str, Any]) -> Play:
        self.history.append(TurnRecord(turn=self.turn, tool=run, answer_text=answer_text, write_feedback=applied.feedback))
        self.tool_run = None
        self.turn += 1
        done = applied.success or self.turn >= self.max_turns
        return Play(
            breakdown=breakdown,
            next_agent=None if done else self.possible_agents[0],
            success=applied.success,
            parse_error=error,
            details=details,
        )


def _error_name(exc: Exception) -> str:
    """How the output names a compile failure: as SyntaxError when the interpreter would (null bytes
    and lone surrogates raise ValueError here), else by its own name (RecursionError, MemoryError)."""
    return "SyntaxError" if isinstance(exc, (SyntaxError, ValueError)) else type(exc).__name__


class MoveListAnswers:
    """Mixin for tasks whose proposals and answers are move lists such as `[U, R, D, L]`
    (Plan-Path, Sokoban)."""

    def parse_proposal(self, output: str) -> tuple[Any, str | None]:
        return parse_moves(output)

    def parse_answer(self, answer: str) -> tuple[Any, str | None]:
        return parse_moves(answer)

    def format_proposal(self, proposal: Any) -> str:
        return format_moves(proposal)


def history_text(history: list[TurnRecord]) -> str:
    """Previous turns as the refinement prompts show them (A.3.1 "action_state_history")."""
    if not history:
        return "(no previous turns)"
    parts = []
    for rec in history:
        lines = [f"Turn {rec.turn + 1}:"]
        if rec.tool is not None:
            lines.append(f"- Tool code:\n```python\n{(rec.tool.code or '').strip()}\n```" if rec.tool.code else "- Tool code: (none)")
            lines.append(f"- Tool execution ({rec.tool.status}): {rec.tool.output.strip() or '(no output)'}")
            if rec.tool.error:
                lines.append(f"- Tool problem: {rec.tool.error}")
        if rec.answer_text is not None or rec.tool is None:
            lines.append(f"- Final answer: {rec.answer_text if rec.answer_text is not None else '(none)'}")
        lines.append(f"- Result: {rec.feedback}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def tool_run_text(run: ToolRun | None) -> tuple[str, str, str]:
    """(code, execution output, proposal) as the planner prompt shows them."""
    if run is None:
        return "(no tool this turn)", "(none)", "(none)"
    code = run.code.strip() if run.code else "(the tool gave no code block)"
    output = f"[{run.status}] " + (run.output.strip() or "(no output)")
    proposal = run.proposal_text or f"(none: {run.error})"
    return code, output, proposal
