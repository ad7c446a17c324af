"""Every reply parser is linear in its input (issue 11 #7): the worst cases at 200,000 characters
finish within a generous timeout, and the linear rewrites agree with the regular expressions they
replace (kept here as the reference definitions)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_marl_envs.code.parse import parse_code, parse_test
from llm_marl_envs.core.text import extract_code, extract_final_answer, parse_moves, tag_spans
from llm_marl_envs.deep_search.parse import extract_boxed, find_tool_call, missing_headings, unwrap_text_commands
from llm_marl_envs.deep_search.prompts import SUMMARY_HEADINGS
from llm_marl_envs.mass.parse import parse_answer, parse_rewrite, parse_selection, parse_single
from llm_marl_envs.math.verify import answers_match, extract_answer, extract_printed_answer
from llm_marl_envs.search.text import exact_match, normalize_answer, token_f1, tokenize
from llm_marl_envs.sudoku.parse import parse_answer as parse_sudoku
from tests.envs.adversarial import WORST_CASES

N = 200_000

PARSERS = {
    "core.extract_code": extract_code,
    "core.extract_final_answer": extract_final_answer,
    "core.parse_moves": parse_moves,
    "sudoku.parse_answer": lambda t: parse_sudoku(t, 4),
    "code.parse_code": parse_code,
    "code.parse_test": parse_test,
    "math.extract_answer": extract_answer,
    "math.extract_printed_answer": extract_printed_answer,
    "math.answers_match": lambda t: answers_match(t, "3"),
    "deep_search.find_tool_call": find_tool_call,
    "deep_search.extract_boxed": extract_boxed,
    "deep_search.missing_headings": missing_headings,
    "deep_search.unwrap_text_commands": unwrap_text_commands,
    "mass.parse_rewrite": lambda t: parse_rewrite(t, "Who?"),
    "mass.parse_selection": lambda t: parse_selection(t, 10),
    "mass.parse_answer": parse_answer,
    "mass.parse_single": parse_single,
    "search.normalize_answer": normalize_answer,
    "search.scores": lambda t: (exact_match(t, ["x"]), token_f1(t, ["x y"])),
    "search.tokenize": tokenize,
}


@pytest.mark.timeout(20)
@pytest.mark.parametrize("case", sorted(WORST_CASES))
@pytest.mark.parametrize("parser", sorted(PARSERS))
def test_worst_cases_at_200k_characters(parser, case):
    """Quadratic parsers took minutes on these (70 s for 16,000 newlines); linear ones take
    milliseconds. No timing assertion: the timeout is the bound."""
    text = WORST_CASES[case](N)
    assert len(text) == N
    PARSERS[parser](text)


# ------------------------------------------------------------------ the regex definitions replaced

def _findall_tag(text: str, tag: str) -> list[str]:
    return re.findall(f"<{tag}>(.*?)</{tag}>", text, re.S | re.I)


def _old_heading_missing(text: str) -> list[str]:
    return [h for h in SUMMARY_HEADINGS
            if not re.search(rf"^\s*#{{1,6}}\s*\**\s*{re.escape(h)}\s*\**\s*:?", text, re.I | re.M)]


def _old_extract_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    while start >= 0:
        depth, i = 0, start + len("\\boxed")
        for j in range(i, len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    return text[i + 1:j].strip()
        start = text.rfind("\\boxed{", 0, start)
    return None


def _pieces(*tokens: str) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(tokens), max_size=24).map("".join)


TAGGED = _pieces("<a>", "</a>", "<A>", "</A >", "</a>", "x", "\n", " ", "<", ">", "/")
HEADED = _pieces("#", "##", "#######", " ", "\t", "\n", "\r", "\x0b", "*", "**", ":", "x", "\u00a0",
                 *SUMMARY_HEADINGS, "conclusion", "CONCLUSION")
BOXED = _pieces("\\boxed{", "{", "}", "x", " ", "\\", "boxed")
TESTS = _pieces("**Test Input:**", "**Test Output:**", "\n", "\n\n", " ", "  \n", "1 2", "Note that",
                "(x)", "```", "```\n", "x", "\t")


@settings(max_examples=400, derandomize=True, deadline=None)
@given(TAGGED)
def test_tag_spans_is_findall(text):
    assert [text[a:b] for a, b in tag_spans(text, "a")] == _findall_tag(text, "a")


@settings(max_examples=400, derandomize=True, deadline=None)
@given(HEADED)
def test_heading_check_matches_the_regex_definition(text):
    assert missing_headings(text) == _old_heading_missing(text)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(BOXED)
def test_extract_boxed_matches_the_scan_definition(text):
    assert extract_boxed(text) == _old_extract_boxed(text)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(_pieces("<use_mcp_tool>", "</use_mcp_tool>", "<server_name>s</server_name>", "<tool_name>t</tool_name>",
               "<arguments>", "</arguments>", '{"a": 1}', "x", "\n", "<USE_MCP_TOOL>"))
def test_find_tool_call_matches_the_regex_definition(text):
    call = find_tool_call(text)
    blocks = _findall_tag(text, "use_mcp_tool")
    if not re.search("<use_mcp_tool>", text, re.I):
        assert call is None
        return
    if not blocks:
        assert call.error.startswith("unterminated")
        return
    assert call.extra_blocks == len(blocks) - 1
    fields = {name: _findall_tag(blocks[0], name) for name in ("server_name", "tool_name", "arguments")}
    assert call.server == (fields["server_name"][0].strip() if fields["server_name"] else "")
    assert call.tool == (fields["tool_name"][0].strip() if fields["tool_name"] else "")
    if call.arguments is not None:
        assert call.arguments == json.loads(fields["arguments"][0])


@settings(max_examples=300, derandomize=True, deadline=None)
@given(_pieces("<answer>", "</answer>", "<search>", "</search>", "x", " ", "\n"))
def test_parse_single_matches_the_regex_definition(text):
    answers, searches = _findall_tag(text, "answer"), _findall_tag(text, "search")
    expected = ("answer", answers[0].strip()) if answers else (
        ("search", searches[0].strip()) if searches and searches[0].strip() else None)
    assert parse_single(text) == expected


def _old_cut(body: str) -> str:
    if re.match(r"```[^\n`]*\n(.*?)(?:```|\Z)", body.lstrip("\n \t"), re.S):
        return body
    lines = body.strip("\n").split("\n")
    kept: list[str] = []
    for i, line in enumerate(lines):
        if not line.strip() and kept:
            rest = "\n".join(lines[i + 1:]).strip()
            if rest and re.match(r"[A-Za-z(]", rest) and " " in rest.split("\n")[0].strip():
                break
        kept.append(line)
    return "\n".join(kept)


def _old_trim_lines(text: str) -> str:
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(line.rstrip() for line in lines)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(TESTS)
def test_test_case_sections_match_the_line_scan_definition(text):
    from llm_marl_envs.code import parse as code_parse

    assert code_parse._cut_output(text) == _old_cut(text)
    assert code_parse._trim_lines(text) == _old_trim_lines(text)
