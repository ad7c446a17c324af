"""Prompts of the deep-search roles, after MATPO's appendix (planner, worker, worker summary).

The tool-use instructions, the planner's `search_and_browse` schema, the worker's search tools and
the four-heading summary request follow MATPO's prompts; "Today is" and the Serper-specific tool
arguments are dropped (the tools here are `search` and `fetch` of the llm-marl MCP server).
"""

from __future__ import annotations

import json

from ..search.tools import SERVER_NAME, TOOL_SCHEMAS

PLANNER_SERVER = "browsing_agent"
PLANNER_TOOL = "search_and_browse"
PLANNER_TOOL_SCHEMA = {
    "properties": {"subtask": {"title": "Subtask", "type": "string"}},
    "required": ["subtask"],
    "title": "search_and_browseArguments",
    "type": "object",
}
SUMMARY_HEADINGS = ("Conclusion", "Supporting Information", "Observations", "Contribution to Main Task")

TOOL_USE_FORMAT = """In this environment you have access to a set of tools you can use to answer the user's question.

You only have access to the tools provided below. You can only use one tool per message, and will receive the result of that tool in the user's next response. You use tools step-by-step to accomplish a given task, with each tool-use informed by the result of the previous tool-use.

# Tool-Use Formatting Instructions

Tool-use is formatted using XML-style tags. The tool-use is enclosed in <use_mcp_tool></use_mcp_tool> and each parameter is similarly enclosed within its own set of tags.

The Model Context Protocol (MCP) connects to servers that provide additional tools and resources to extend your capabilities. You can use the server's tools via the `use_mcp_tool`.

Description:
Request to use a tool provided by a MCP server. Each MCP server can provide multiple tools with different capabilities. Tools have defined input schemas that specify required and optional parameters.

Parameters:
- server_name: (required) The name of the MCP server providing the tool
- tool_name: (required) The name of the tool to execute
- arguments: (required) A JSON object containing the tool's input parameters, following the tool's input schema, quotes within string must be properly escaped, ensure it's valid JSON

Usage:
<use_mcp_tool>
<server_name>server name here</server_name>
<tool_name>tool name here</tool_name>
<arguments>
{
"param1": "value1",
"param2": "value2 \\"escaped string\\""
}
</arguments>
</use_mcp_tool>

Important Notes:
- Tool-use must be placed **at the end** of your response, **top-level**, and not nested within other tags.
- Always adhere to this format for the tool use to ensure proper parsing and execution.

String and scalar parameters should be specified as is, while lists and objects should use JSON format. Note that spaces for string values are not stripped. The output is not expected to be valid XML and is parsed with regular expressions.

Here are the functions available in JSONSchema format:
"""

GENERAL_OBJECTIVE = """# General Objective

You accomplish a given task iteratively, breaking it down into clear steps and working through them methodically.

## Task Strategy

1. Analyze the user's request and set clear, achievable sub-goals. Prioritize these sub-goals in a logical order.
2. Start with a concise, numbered, step-by-step plan outlining how you will solve the task before taking any action.
3. Work through these sub-goals sequentially. After each step, adjust your plan as needed.
4. Use tools strategically to accomplish each sub-goal.
5. Revise earlier steps if new information emerges.

## Tool-Use Guidelines

1. Each step must involve a single tool call, unless the task is already solved.
2. Before each tool call:
   - Summarize what is known.
   - Identify what is missing.
   - Choose the most relevant tool.
   - Verify all required parameters.
3. All tool queries must include full context.
4. Avoid vague queries. Each call should retrieve actionable information.
5. Extract and summarize partial information if a tool result is incomplete.

## Tool-Use Communication Rules

1. Do not include tool results in your response.
2. Do not present the final answer until the entire task is complete.
3. Do not mention tool names.
4. Do not engage in unnecessary back-and-forth.
5. Do not use non-existent tools.
6. Respond in the same language as the user's message.
7. If the task does not require tool use, answer directly.
"""


def _planner_tools() -> str:
    return (
        f"## Server name: {PLANNER_SERVER}\n### Tool name: {PLANNER_TOOL}\n"
        "Description: This tool is an agent that performs the subtask of searching and browsing for specific missing "
        "information and generating the desired answer. The subtask should be clearly defined, include relevant "
        "background, and focus on factual gaps. It does not perform vague or speculative subtasks.\n"
        "Args:\n    subtask: the subtask to be performed.\nReturns:\n    the result of the subtask.\n"
        f"Input JSON schema: {json.dumps(PLANNER_TOOL_SCHEMA)}\n"
    )


def _search_tools() -> str:
    out = f"## Server name: {SERVER_NAME}\n"
    for name, schema in TOOL_SCHEMAS.items():
        out += f"### Tool name: {name}\nDescription: {schema['description']}\nInput JSON schema: {json.dumps(schema['input_schema'])}\n\n"
    return out


def planner_system(max_calls: int) -> str:
    return (
        TOOL_USE_FORMAT + "\n" + _planner_tools() + "\n" + GENERAL_OBJECTIVE + "\n# Agent Specific Objective\n\n"
        "You are a task-solving agent that uses tools step-by-step to answer the user's question. Your goal is to "
        "provide complete, accurate and well-reasoned answers using additional tools. You cannot search yourself: "
        f"delegate each missing fact as a subtask (at most {max_calls} subtasks in total). When the task is solved, "
        "reply without a tool call and wrap the final answer in \\boxed{}."
    )


def worker_system(main_task: str) -> str:
    return (
        TOOL_USE_FORMAT + "\n" + _search_tools() + GENERAL_OBJECTIVE + "\n# Agent Specific Objective\n\n"
        "You are an agent that performs the task of searching and browsing for specific information and generating "
        "the desired answer. Your task should follow the instructions and be completed step by step, using search "
        "results and page contents as evidence. When you have the answer, reply without a tool call.\n\n"
        f"The main task, which your subtask is part of, is: \"{main_task}\""
    )


def single_system() -> str:
    return (
        TOOL_USE_FORMAT + "\n" + _search_tools() + GENERAL_OBJECTIVE + "\n# Agent Specific Objective\n\n"
        "You are a task-solving agent that uses tools step-by-step to answer the user's question. Your goal is to "
        "provide complete, accurate and well-reasoned answers using additional tools. When the task is solved, reply "
        "without a tool call and wrap the final answer in \\boxed{}."
    )


def answer_only_system() -> str:
    """The single agent's system prompt when its only turn is its final one (`max_single_turns=1`): a tool's
    result could never be read, so no tool is offered."""
    return ("You are a task-solving agent that answers the user's question. No tools are available, and this is your "
            "only turn: answer from what you know and wrap the final answer in \\boxed{}.")


def question_message(question: str) -> str:
    return (f"{question}\n\nYou should follow the format instruction in the request strictly and wrap the final answer "
            "in \\boxed{}.")


def subtask_message(subtask: str) -> str:
    return subtask


def summary_request(main_task: str, subtask: str, failed: bool) -> str:
    """MATPO's worker summary prompt (its final, tool-free turn)."""
    failed_instruction = (
        "You did not finish the subtask within the allowed number of tool calls. Report what you found and state "
        "clearly what is still missing.\n\n" if failed else "")
    return (
        "[SYSTEM]\nThis is a direct instruction to you. This is your final turn. You MUST NOT use any tools.\n"
        "Your task is to provide a final, structured report summarizing all the information you have gathered to "
        "answer your assigned subtask.\n\n[CONTEXT]\n"
        f"The main task was: \"{main_task}\"\nYour assigned subtask was: \"{subtask}\"\n"
        "Your assigned subtask was intended to help solve the main task.\n\n[INSTRUCTIONS]\n\n"
        f"{failed_instruction}"
        "Your final response MUST be a clear, complete, and structured report in markdown format.\n"
        "Organize the content into logical sections with the following headings: `## Conclusion`, "
        "`## Supporting Information`, `## Observations`, and `## Contribution to Main Task`.\n\n"
        "- **CRITICAL**: Do NOT include raw URLs. Replace any URLs with `([link])`.\n"
        "- Your response should only contain factual, specific, and well-organized information based on your "
        "previous actions.\n- Do not include speculative filler, vague summaries, or conversational text.\n\n"
        "Here is an example of the required format:\n\n# Final Response: [Title summarizing the subtask]\n\n"
        "## Conclusion:\n[A concise summary of your findings and the final answer for the subtask. Bold key "
        "information.]\n\n## Supporting Information:\n[Detailed supporting facts, data, or quotes you discovered.]\n"
        "- Source 1: Brief description of finding 1.\n\n## Observations:\n[Any additional context, confidence level, "
        "or notes on how the conclusion was reached.]\n\n## Contribution to Main Task:\n[Explain how the answer to "
        "your subtask helps solve the overall main task. What are the next steps the main agent should consider?]"
    )


def calls_left_note(left: int) -> str:
    if left <= 0:
        return "[No subtask calls are left: give your final answer now, wrapped in \\boxed{}.]"
    return f"[Subtask calls left: {left}]"


def final_turn_note() -> str:
    return "[This is your final turn: do not use tools; give your final answer now, wrapped in \\boxed{}.]"
