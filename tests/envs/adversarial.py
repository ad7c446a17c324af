"""Hostile replies for the robustness tests: replies that once raised from `env.step`, and the
worst cases of each parser, built to a given length."""

from __future__ import annotations

import json
from collections.abc import Callable

import llm_marl_envs
from agents.oracle import make_oracle

RECURSING_SOURCE = "a." * 32_000 + "a"
"""`compile` raises RecursionError on it (issue 11 #6): nested deeper than the compiler allows on
every supported Python (3.13 compiles 3,000 levels, which 3.11 and 3.12 refuse; it refuses 10,000;
3.14, whose limit is the C stack's room, compiles about 27,000 with an 8 MiB stack), and still an
action of at most 65,536 characters in its code block."""
RECURSING_PROGRAM = "```python\n" + RECURSING_SOURCE + "\n```"
PARSER_OVERFLOW_SOURCE = "-" * 8_000 + "1"
"""`compile` raises MemoryError on it (the parser's stack overflows) on every supported Python,
and it is short enough for the math tool's 16,000-character budget, which RECURSING_SOURCE is not."""
PARSER_OVERFLOW_PROGRAM = "```python\n" + PARSER_OVERFLOW_SOURCE + "\n```"

POISON: dict[str, str] = {
    "compile_recursion": RECURSING_PROGRAM,
    "compile_memory": PARSER_OVERFLOW_PROGRAM,
    "deep_brackets": "#### " + "[" * 30_000 + "]" * 30_000,
    "lone_surrogate_json": ('<use_mcp_tool>\n<server_name>llm-marl-search</server_name>\n<tool_name>search</tool_name>\n'
                            '<arguments>{"query": "\\ud800"}</arguments>\n</use_mcp_tool>'),
    "lone_surrogate_subtask": ('<use_mcp_tool>\n<server_name>browsing_agent</server_name>\n<tool_name>search_and_browse'
                               '</tool_name>\n<arguments>{"subtask": "\\udfff"}</arguments>\n</use_mcp_tool>'),
    "raw_surrogate": "\ud800 #### [U] \\boxed{\udfff} Document0 ```python\nprint('\udc80')\n```",
    "nul_program": "```python\nprint('\x00')\n```",
    "newlines": "\n" * 20_000,
    "open_boxes": "\\boxed{" * 4_000,
}


def _repeat(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


WORST_CASES: dict[str, Callable[[int], str]] = {
    # Each: a text of n characters that made some parser quadratic or backtrack (issue 11 #7).
    "newlines": lambda n: "\n" * n,
    "spaces_then_hash": lambda n: _repeat(" \t\n", n - 1) + "#",
    "open_boxes": lambda n: _repeat("\\boxed{", n),
    "boxed_tokens": lambda n: _repeat("\\boxed x ", n),
    "open_tool_calls": lambda n: _repeat("<use_mcp_tool>", n),
    "open_fields": lambda n: "<use_mcp_tool>" + _repeat("<arguments>", n - 29) + "</use_mcp_tool>",
    "open_answers": lambda n: _repeat("<answer><search>", n),
    "open_fences": lambda n: _repeat("```python\n", n),
    "indented_crlf_block": lambda n: "  ```python\r\n" + _repeat("   x\r\n  \t\r\n \t \r\n", n - 18) + "  ```",
    "backticks": lambda n: "`" * n,
    "hashes": lambda n: "#" * n,
    "brackets": lambda n: "[" * n,
    "closed_brackets": lambda n: "[" * (n // 2) + "]" * (n // 2),
    "test_markers": lambda n: _repeat("**Test Input:**\n**Test Output:**\n\n", n),
    "blank_output_lines": lambda n: "**Test Input:**\n1\n**Test Output:**\n1\n" + _repeat(" \n", n - 37),
    "blank_input_lines": lambda n: "**Test Input:**\n" + _repeat(" \n", n - 37) + "1\n**Test Output:**\n1\n",
    "headings": lambda n: _repeat("## Conclusion\n#", n),
    "digits": lambda n: "9" * n,
    "document_ids": lambda n: _repeat("Document9,", n),
    "json_nesting": lambda n: _repeat('{"a":[', n),
    "words": lambda n: _repeat("the ", n),
}


def reach(env, role: str, seed: int = 0, max_steps: int = 64):
    """Reset `env` (raw) and play the oracle until it is `role`'s turn; None if it never comes."""
    name = env.metadata["name"].rsplit("_v", 1)[0]
    oracle = make_oracle(name)
    env.reset(seed=seed, options={"split": "test"})
    oracle.reset(seed)
    for _ in range(max_steps):
        if all(env.terminations.values()) or all(env.truncations.values()):
            return None
        agent = env.agent_selection
        if agent == role:
            return env
        env.step(oracle.act(agent, env.observe(agent)))
    return None


def snapshot(env) -> str:
    """Everything an agent or an algorithm can read from `env`, as one comparable string."""
    state = {
        "agent": env.agent_selection,
        "observations": {a: env.observe(a) for a in env.agents},
        "rewards": env.rewards, "cumulative": env._cumulative_rewards, "infos": env.infos,
        "terminations": env.terminations, "truncations": env.truncations,
        "render": env.render() if env.render_mode != "human" else "",
    }
    return json.dumps(state, sort_keys=True, default=repr, ensure_ascii=True)


def env_names() -> list[str]:
    return sorted(llm_marl_envs.registry.available())
