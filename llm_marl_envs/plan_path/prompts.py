"""Plan-Path prompts: AT-GRPO appendix A.3 (Phase 1 generation, Phase 2 refinement), adapted so the
task always shows the *current* position (the reference kept showing the start)."""

from __future__ import annotations

from ..core.tool_planner import TurnContext, history_text, tool_run_text

TOOL_SYSTEM = "You are an AI assistant designed to be helpful. Utilize your programming expertise to address the task."
PLANNER_SYSTEM = "You are a planning and reasoning agent."

_TOOL_FORMAT = """Propose Python code (within a single python code block) for the user to run. Ensure each response contains only ONE code block. Use the 'print' function to output the action list that moves from the current position to the goal. You may output the full action list if you can reach the target, or a partial list if uncertain.
Formatting requirements:
* Begin the Python block with ```python and end with ```.
* The program's output IS the action list (e.g., [U,R,D,L]).
* Print ONLY the action list (no extra text)."""

_PLANNER_FORMAT = """FORMATTING IS MANDATORY. Give the final action list AFTER the line that begins with ####.
Example:
#### [U,R,D,L]"""


def tool_messages(ctx: TurnContext) -> list[dict[str, str]]:
    if ctx.turn == 0:
        user = f"{_TOOL_FORMAT}\n\nTask:\n{ctx.task}\n\nOutput: Code (program prints an action list, e.g., [U,R,D,L])."
    else:
        user = (
            "Refine your Python solution to produce a correct, executable action list.\n\n"
            f"Task:\n{ctx.task}\n\nHistory (previous attempts, planner answers, and their effect):\n{history_text(ctx.history)}\n\n"
            "Requirements:\n* Output must be an action list that reaches the goal from the CURRENT position without "
            "violating constraints (stay in-bounds, avoid walls).\n* If certain, print the full list; if uncertain, "
            "print a safe partial prefix.\n* Single python code block only; program output IS the action list.\n\n"
            f"{_TOOL_FORMAT}\n\nOutput: Refined code (program prints an action list)."
        )
    return [{"role": "system", "content": TOOL_SYSTEM}, {"role": "user", "content": user}]


def planner_messages(ctx: TurnContext) -> list[dict[str, str]]:
    code, output, proposal = tool_run_text(ctx.tool)
    user = (
        "You will receive:\n* The original task description\n* The Code Agent's (Tool Agent's) code\n"
        "* The code execution output\n"
        "Your job is to reason carefully, decide the final action list, and format your response EXACTLY as specified.\n"
        "Instructions:\n* Read the task, inspect the code, and verify the execution output against the task requirements "
        "and environment constraints (bounds, walls, goal).\n* If the code/output is correct and sufficient, adopt it.\n"
        "* Otherwise, improve or override it with your own reasoning.\n"
        "* Keep reasoning concise but explicit: justify why the final action is correct.\n\n"
        f"Task:\n{ctx.task}\n\nTool code:\n```python\n{code}\n```\n\nTool execution output:\n{output}\n\n"
        f"Tool proposed action list: {proposal}\n\n"
        + (f"History:\n{history_text(ctx.history)}\n\n" if ctx.history else "")
        + _PLANNER_FORMAT
    )
    return [{"role": "system", "content": PLANNER_SYSTEM}, {"role": "user", "content": user}]


def single_planner_messages(ctx: TurnContext) -> list[dict[str, str]]:
    user = (
        "Reason carefully about the task below, decide the action list that reaches the goal, and format your "
        "response EXACTLY as specified.\n\n"
        f"Task:\n{ctx.task}\n\n"
        + (f"History:\n{history_text(ctx.history)}\n\n" if ctx.history else "")
        + _PLANNER_FORMAT
    )
    return [{"role": "system", "content": PLANNER_SYSTEM}, {"role": "user", "content": user}]
