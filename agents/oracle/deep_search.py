"""Deep-search oracle: decomposes with the mini-wiki grammar, searches, reads pages, answers.

It uses only the observation text plus the generator's ground truth about language (how questions
are composed from relations and how pages state facts: `parse_question`, `extract_fact`), never
the environment's answer. The planner delegates one subtask per hop, "Who directed X?", with X the
previous worker's conclusion; each worker searches for the subtask, fetches the subject's page,
reads the fact and writes MATPO's four-heading summary. In the single-agent variant the one agent
does the same searches and fetches itself. Replies always parse.

It plays mini-wiki questions only: a MuSiQue/HotpotQA question (`dataset=`, or a record given as
`options={"instance": ...}`) is outside the grammar, and the oracle refuses it with a ValueError
rather than answering "unknown" to every question.
"""

from __future__ import annotations

import json
import re
from typing import Any

from llm_marl_envs.deep_search.prompts import PLANNER_SERVER, PLANNER_TOOL
from llm_marl_envs.search.miniwiki import RELATIONS, extract_fact, parse_hop_question, parse_question
from llm_marl_envs.search.tools import SERVER_NAME

from ..base import Agent

_HIT = re.compile(r"^\d+\. (?P<title>.+)\n\s+URL: (?P<url>\S+)", re.M)
_CONCLUSION = re.compile(r"#+\s*Conclusion:?\s*\n+\s*\*\*(?P<value>.+?)\*\*", re.I)
UNKNOWN = "unknown"


def tool_call(server: str, tool: str, arguments: dict[str, Any]) -> str:
    return (f"<use_mcp_tool>\n<server_name>{server}</server_name>\n<tool_name>{tool}</tool_name>\n"
            f"<arguments>\n{json.dumps(arguments)}\n</arguments>\n</use_mcp_tool>")


def question_of(user_text: str) -> str:
    return user_text.split("\n\nYou should follow", 1)[0].strip()


def not_mini_wiki(env: str, what: str) -> ValueError:
    """The oracles' one refusal: they know the mini-wiki's grammar (and MASS's its world), nothing else."""
    return ValueError(f"the {env} oracle plays only mini-wiki questions (it parses them with the generator's grammar) "
                      f"and cannot play {what}; use another agent for MuSiQue/HotpotQA questions")


def _mini_wiki_question(messages: list[dict[str, str]]) -> tuple[str, list[str]]:
    question = question_of(messages[1]["content"]) if len(messages) > 1 else ""
    parsed = parse_question(question)
    if parsed is None:
        raise not_mini_wiki("deep_search", f"the question {question[:80]!r}")
    return parsed


def hits_of(response: str) -> list[tuple[str, str]]:
    """(title, url) of each result in a rendered search response."""
    if not response.startswith("Search results for"):
        return []
    return [(m.group("title").strip(), m.group("url")) for m in _HIT.finditer(response)]


def page_of(response: str) -> tuple[str, str] | None:
    """(title, text) when the tool response is a fetched page."""
    if response.startswith(("Search results for", "No results", "Error", "Tool call error", "[SYSTEM]")):
        return None
    title, _, text = response.partition("\n\n")
    return title.strip(), text


def summary(subtask: str, subject: str, value: str | None, page: str) -> str:
    found = value is not None
    support = next((s.strip() + "." for s in page.split(".") if found and value in s), "no statement found")
    return (f"# Final Response: {subtask}\n\n## Conclusion:\n**{value if found else UNKNOWN}**\n\n"
            f"## Supporting Information:\n- Page \"{subject}\": {support}\n\n"
            f"## Observations:\n{'Read directly from the page of ' + subject + '.' if found else 'The page did not state it.'}\n\n"
            "## Contribution to Main Task:\nThis resolves one hop of the main question; the planner can use it for the next step.")


def _search_step(subject: str, hop_question: str, responses: list[str], server: str) -> tuple[str, str | None]:
    """Next action for one hop given the tool responses so far for it: a tool call, or (None, value)."""
    searched = 0
    for response in responses:
        page = page_of(response)
        if page is not None and page[0] == subject:
            return "", page[1]
        if response.startswith(("Search results for", "No results")):
            searched += 1
    last_hits = hits_of(responses[-1]) if responses else []
    match = next((url for title, url in last_hits if title == subject), None)
    if match is not None:
        return tool_call(server, "fetch", {"url": match}), None
    if searched == 0:
        return tool_call(server, "search", {"query": hop_question, "k": 5}), None
    if searched == 1:
        return tool_call(server, "search", {"query": subject, "k": 10}), None
    return "", ""  # gave up: the page was not found


class DeepSearchOracle(Agent):
    env_options = ("dataset",)
    """Options of the environment the oracle must know (`make_oracle` takes them from the env's)."""

    def __init__(self, dataset: str | None = None):
        if dataset is not None:
            raise not_mini_wiki("deep_search", f"dataset={str(dataset)!r}")

    def act(self, role: str, observation: dict[str, Any]) -> str:
        messages = observation["messages"]
        system = messages[0]["content"] if messages else ""
        if role.startswith("worker_"):
            return self._worker(messages)
        if PLANNER_TOOL in system:
            return self._planner(messages)
        return self._single(messages)

    # ------------------------------------------------------------------ MAS planner
    def _planner(self, messages: list[dict[str, str]]) -> str:
        start, rels = _mini_wiki_question(messages)
        conclusions = []
        for m in messages[2:]:
            if m["role"] == "user":
                c = _CONCLUSION.search(m["content"])
                if c:
                    conclusions.append(c.group("value").strip())
        hop = len(conclusions)
        if hop >= len(rels) or (conclusions and conclusions[-1] == UNKNOWN):
            answer = conclusions[-1] if conclusions else UNKNOWN
            return f"All {len(rels)} hops are resolved.\n\\boxed{{{answer}}}"
        subject = start if hop == 0 else conclusions[-1]
        subtask = RELATIONS[rels[hop]].question.format(s=subject)
        plan = f"Hop {hop + 1} of {len(rels)}: {subtask}"
        return f"{plan}\n\n" + tool_call(PLANNER_SERVER, PLANNER_TOOL, {"subtask": subtask})

    # ------------------------------------------------------------------ worker
    def _worker(self, messages: list[dict[str, str]]) -> str:
        subtask = messages[1]["content"] if len(messages) > 1 else ""
        parsed = parse_hop_question(subtask)
        responses = [m["content"] for m in messages[2:] if m["role"] == "user"]
        if parsed is None:
            return summary(subtask, "?", None, "")
        rel, subject = parsed
        if responses and "[SYSTEM]" in responses[-1]:  # the summary was requested
            page = next((p for r in responses if (p := page_of(r)) and p[0] == subject), None)
            text = page[1] if page else ""
            return summary(subtask, subject, extract_fact(rel, text) if page else None, text)
        action, page = _search_step(subject, subtask, responses, SERVER_NAME)
        if action:
            return action
        return summary(subtask, subject, extract_fact(rel, page) if page else None, page or "")

    # ------------------------------------------------------------------ single agent
    def _single(self, messages: list[dict[str, str]]) -> str:
        subject, rels = _mini_wiki_question(messages)
        responses = [m["content"] for m in messages[2:] if m["role"] == "user"]
        hop, since = 0, 0  # responses[since:] belong to the current hop
        for i, response in enumerate(responses):
            page = page_of(response)
            if page is not None and page[0] == subject and hop < len(rels):
                value = extract_fact(rels[hop], page[1])
                if value is None:
                    return f"\\boxed{{{UNKNOWN}}}"
                subject, hop, since = value, hop + 1, i + 1
        if hop >= len(rels):
            return f"All {len(rels)} hops are resolved.\n\\boxed{{{subject}}}"
        action, _ = _search_step(subject, RELATIONS[rels[hop]].question.format(s=subject), responses[since:], SERVER_NAME)
        return action or f"\\boxed{{{UNKNOWN}}}"
