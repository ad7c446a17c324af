"""Hypothesis strategies for model replies: random text, and near misses built from each role's real
format (`####` answers, ```python blocks, `\\boxed{}`, `<use_mcp_tool>` XML with JSON arguments,
`Document3,Document1`, `**Test Input:**` sections...), so that fuzzing reaches the deep branches of
every parser and not only its first rejection."""

from __future__ import annotations

import json

from hypothesis import strategies as st

# Characters that broke parsers or transports: lone surrogates, NUL, bidi controls, escapes.
ODD = ["\ud800", "\udfff", "\x00", "\x1b", "\u202e", "\u200b", "\r", "\t", "\x0b", "\\", "\\u", '"', "'", "`", "é", "🙂"]
odd = st.sampled_from(ODD)
junk = st.text(max_size=40)


def soup(*atoms: str, size: int = 16) -> st.SearchStrategy[str]:
    """A sequence of format fragments, odd characters and junk: the near misses of a grammar."""
    return st.lists(st.one_of(st.sampled_from(atoms), odd, st.text(max_size=6)), max_size=size).map("".join)


def framed(core: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """`core` with random text around it, as a model writes reasoning before and after its answer."""
    return st.tuples(st.one_of(st.just(""), junk), core, st.one_of(st.just(""), junk)).map("".join)


def reply(core: st.SearchStrategy[str], *atoms: str) -> st.SearchStrategy[str]:
    """A role's replies: mostly grammar-built (framed or bare), plus soup and random text."""
    return st.one_of(framed(core), core, soup(*atoms), st.text(max_size=200))


def joined(items: st.SearchStrategy[str], seps: tuple[str, ...] = (",", ", ", " ", ";", "\n", "")) -> st.SearchStrategy[str]:
    return st.tuples(st.lists(items, max_size=12), st.sampled_from(seps)).map(lambda t: t[1].join(t[0]))


def bracketed(body: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(st.sampled_from(["[", "(", "", "[[", "{"]), body, st.sampled_from(["]", ")", "", "]]", "}"])).map("".join)


# ------------------------------------------------------------------ values
INTS = st.one_of(st.integers(-3, 12), st.integers(), st.sampled_from([10**400, -0, 2**63]))
json_scalars = st.one_of(st.none(), st.booleans(), INTS, st.floats(allow_nan=True), st.text(max_size=8), odd)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                                  st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                           max_leaves=20)


def json_text(value: st.SearchStrategy) -> st.SearchStrategy[str]:
    """JSON (or Python-literal-ish) text for a value, sometimes broken."""
    dumped = value.map(lambda v: json.dumps(v, ensure_ascii=False, default=str))
    ascii_dumped = value.map(lambda v: json.dumps(v, default=str))  # keeps \\ud800 escapes
    deep = st.tuples(st.integers(1, 5000), st.sampled_from(["[", "{\"a\":", "(", "[[1,"])).map(lambda t: t[1] * t[0])
    return st.one_of(dumped, ascii_dumped, value.map(repr), deep, deep.map(lambda d: d + "]" * len(d)),
                     st.tuples(dumped, st.integers(0, 40)).map(lambda t: t[0][: t[1]]))  # truncated


# ------------------------------------------------------------------ programs
PRINTED = st.one_of(st.text(max_size=30), json_text(json_values), joined(st.sampled_from(list("UDLR") + ["up", "x"])))
PROGRAM_LINES = st.sampled_from([
    "print(input())", "x = 1", "import sys", "print(1/0)", "for i in range(3): print(i)", "def f(:", "   bad indent",
    "print('\\x00')", "a." * 40 + "a", "(" * 50, "raise SystemExit(0)", "print([[1,2,3,4]] * 4)", "import os",
    "a." * 3000 + "a", "-" * 20_000 + "1", "x = " + "[" * 5000 + "]" * 5000,  # compile() recursion and parser limits
])
program_lines = st.one_of(PRINTED.map(lambda s: f"print({s!r})"), PROGRAM_LINES, st.text(max_size=30))
program = st.one_of(PROGRAM_LINES, st.lists(program_lines, min_size=1, max_size=4).map("\n".join))
code_block = st.tuples(st.sampled_from(["```python\n", "```py\n", "```\n", "``` python \n", "```python", "```js\n", "~~~python\n"]),
                       program, st.sampled_from(["\n```", "```", "", "\n``", "\n```\n```python\nprint(2)\n```"])).map("".join)
runnable_lines = st.one_of(PRINTED.map(lambda s: f"print({s!r})"), st.sampled_from([
    "print(input())", "print(input().split())", "x = 1", "import sys", "print(1/0)", "for i in range(3): print(i)",
    "raise SystemExit(0)", "raise SystemExit(2)", "print([[1,2,3,4]] * 4)", "print('[U, R, D, L]')", "print('\\\\boxed{3}')",
    "print(sum(map(int, input().split())))", "print('x' * 100000)", "import os; print(os.getcwd())"]))
runnable_block = st.lists(runnable_lines, min_size=1, max_size=3).map(lambda lines: "```python\n" + "\n".join(lines) + "\n```")
RUNNABLE = framed(runnable_block)
"""Replies whose program compiles, so that they reach the sandbox."""
CODE_ATOMS = ("```python\n", "```", "\n", "print(", ")", "'", "[U, R]", "import ", "while True: pass", "#")

# ------------------------------------------------------------------ puzzles
moves = bracketed(joined(st.sampled_from(["U", "D", "L", "R", "up", "LEFT", "'U'", '"D"', "u", "UU", "X", "7", "", "`R`", "r."])))
move_answer = st.tuples(st.sampled_from(["#### ", "####", "#### \n", "### ", ""]), moves).map("".join)
MOVE_ATOMS = ("####", "[", "]", "U", "D", "L", "R", ",", " ", "up", "\n")

cells = st.one_of(st.integers(-1, 10), st.none(), st.sampled_from(["1", ".", "12.4", "1234", True, 1.5]))
grid_rows = st.lists(st.lists(cells, max_size=5), max_size=5)
sudoku_value = st.one_of(grid_rows, st.lists(st.tuples(INTS, INTS, INTS).map(list), max_size=6), json_values)
sudoku_answer = st.tuples(st.sampled_from(["#### ", "####", ""]), json_text(sudoku_value)).map("".join)
SUDOKU_ATOMS = ("####", "[", "]", "[[", "]]", ",", "1", "2", "3", "4", "null", "(", ")", "'12.4'", "\n")

# ------------------------------------------------------------------ math
numbers = st.one_of(st.integers(-100, 100).map(str), st.sampled_from(["1/2", "0.5", "1,000", "3.", ".5", "-0", "1e3", "9" * 500]))
expressions = st.recursive(numbers | st.sampled_from(["x", "\\pi", "sqrt(2)", "\\infty", ""]), lambda e: st.one_of(
    st.tuples(e, st.sampled_from(["+", "-", "*", "/", "^", "**", ", ", " = "]), e).map("".join),
    e.map(lambda s: f"\\frac{{{s}}}{{2}}"), e.map(lambda s: f"({s})"), e.map(lambda s: f"{{{s}}}"), e.map(lambda s: f"\\sqrt{{{s}}}"),
    e.map(lambda s: f"{s}!")), max_leaves=6)
boxed_answer = st.tuples(st.sampled_from(["\\boxed{", "\\boxed {", "\\fbox{", "\\boxed ", "#### ", "$\\boxed{"]), expressions,
                         st.sampled_from(["}", "", "}}", "}$", "} and \\boxed{", "\n"])).map("".join)
MATH_ATOMS = ("\\boxed{", "}", "{", "####", "$", "\\frac", "\\sqrt", "^", "!", "1", "2", ",", "x=", "Fraction(1, 3)")

# ------------------------------------------------------------------ code tester
markers = st.sampled_from(["**Test Input:**", "**Test Output:**", "**Test Input**:", "Test Output:", "__Test Input:__",
                           "**Test Case Input 2:**", "**test output**", "Input:", "**Test Input:** ", "> Test Output:"])
section = st.one_of(st.text(max_size=20), st.sampled_from(["1 2\n", "```\n3\n```", "`4`", "\n\nThe output is 3 because", "\n \n"]))
test_case = st.lists(st.tuples(markers, section).map("\n".join), max_size=5).map("\n".join)
TEST_ATOMS = ("**Test Input:**", "**Test Output:**", "\n", "```", "1", " ", "\n\n", "Note that x")

# ------------------------------------------------------------------ deep search
servers = st.sampled_from(["browsing_agent", "llm-marl-search", "", "Browsing_Agent", "x"])
tools = st.sampled_from(["search_and_browse", "search", "fetch", "", "browse"])
arguments = st.one_of(
    st.fixed_dictionaries({"subtask": st.one_of(st.text(max_size=30), odd, INTS)}),
    st.fixed_dictionaries({"query": st.one_of(st.text(max_size=30), odd, st.just("x" * 1001), INTS)},
                          optional={"k": st.one_of(INTS, st.text(max_size=3)), "extra": json_scalars}),
    st.fixed_dictionaries({"url": st.one_of(st.sampled_from(["wiki://mini-wiki/Nowhere", "http://127.0.0.1/", "file:///etc/passwd",
                                                             "x" * 3000]), st.text(max_size=20), odd)}),
    json_values)
tool_call = st.builds(
    lambda s, t, a, cut: ("<use_mcp_tool>\n<server_name>" + s + "</server_name>\n<tool_name>" + t + "</tool_name>\n<arguments>\n"
                          + a + "\n</arguments>\n</use_mcp_tool>")[:cut],
    servers, tools, json_text(arguments), st.sampled_from([10_000, 10_000, 10_000, 30, 90, 150]))
headings = st.lists(st.tuples(st.sampled_from(["## ", "#", "### **", "####### ", "  ## ", "\n## "]),
                              st.sampled_from(["Conclusion", "Supporting Information", "Observations", "Contribution to Main Task",
                                               "conclusion", "Summary"]),
                              st.sampled_from([":\n", "**\n", "\n", ""]), st.text(max_size=15)).map("".join), max_size=5).map("".join)
deep_answer = st.one_of(boxed_answer, tool_call, headings, st.tuples(tool_call, tool_call).map("".join))
DEEP_ATOMS = ("<use_mcp_tool>", "</use_mcp_tool>", "<server_name>", "</server_name>", "<tool_name>", "</tool_name>",
              "<arguments>", "</arguments>", '{"query": "', '"}', "\\boxed{", "}", "## Conclusion", "\n")

# ------------------------------------------------------------------ MASS
words = st.sampled_from(["who", "what", "the", "of", "is", "film", "director", "born", "city", "Copper", "Compass", "", "#1", "x" * 400])
sub_queries = joined(st.lists(words, max_size=6).map(" ".join), (";", "; ", "\n", "\n- ", "\n1. "))
rewrite = st.tuples(st.sampled_from(["### ", "###", "", "<query1>"]), sub_queries, st.sampled_from([" ###", "", "###", "\n"])).map("".join)
doc_ids = joined(st.one_of(st.integers(-1, 12).map(lambda i: f"Document{i}"), st.integers(0, 99999).map(str),
                           st.sampled_from(["Document", "Doc1", "None", "document 3", "[2]", "Document01"])))
short_answer = st.one_of(st.lists(words, max_size=40).map(" ".join), st.tuples(st.sampled_from(["Answer: ", "Final answer: ", ""]),
                                                                                 st.text(max_size=20)).map("".join))
single_action = st.tuples(st.sampled_from(["<search>", "<answer>", "<SEARCH>", "<search> ", "<answer>\n"]), short_answer,
                          st.sampled_from(["</search>", "</answer>", "", "</ANSWER>"])).map("".join)
MASS_ATOMS = ("###", ";", "\n", "Document", "0", "3", ",", "<search>", "</search>", "<answer>", "</answer>", "the", "who")

REPLIES = {
    "moves": reply(st.one_of(move_answer, code_block), *MOVE_ATOMS, *CODE_ATOMS),
    "sudoku": reply(st.one_of(sudoku_answer, code_block), *SUDOKU_ATOMS, *CODE_ATOMS),
    "math": reply(st.one_of(boxed_answer, code_block), *MATH_ATOMS, *CODE_ATOMS),
    "coder": reply(code_block, *CODE_ATOMS),
    "tester": reply(test_case, *TEST_ATOMS),
    "deep_search": reply(deep_answer, *DEEP_ATOMS),
    "rewriter": reply(rewrite, *MASS_ATOMS),
    "reranker": reply(doc_ids, *MASS_ATOMS),
    "answerer": reply(st.one_of(short_answer, single_action), *MASS_ATOMS),
}
"""Reply strategies by format."""

PRINTED_OUTPUT = st.one_of(PRINTED, moves, json_text(sudoku_value), expressions, st.text(max_size=80))
"""What a tool program may print (its output is parsed too)."""


# ------------------------------------------------------------------ mutations
ATOMS = sorted({*MOVE_ATOMS, *SUDOKU_ATOMS, *MATH_ATOMS, *CODE_ATOMS, *TEST_ATOMS, *DEEP_ATOMS, *MASS_ATOMS, *ODD})


def mutate(rnd, seeds: list[str]) -> str:
    """A near miss of one of `seeds` (hypothesis draws them from a grammar, and `rnd` from its
    seeded `st.randoms()`): splices, inserted format fragments or odd characters, deletions,
    repetitions, truncations. Cheap, so that a role gets 10,000 replies in seconds."""
    text = rnd.choice(seeds)
    for _ in range(rnd.choice((0, 1, 1, 2, 3))):
        i = rnd.randint(0, len(text))
        j = rnd.randint(i, len(text))
        op = rnd.randrange(6)
        if op == 0:  # splice with another seed
            other = rnd.choice(seeds)
            text = text[:i] + other[rnd.randint(0, len(other)):]
        elif op == 1:  # insert a format fragment or an odd character
            text = text[:i] + rnd.choice(ATOMS) + text[i:]
        elif op == 2:  # delete a slice
            text = text[:i] + text[j:]
        elif op == 3:  # repeat a slice
            text = text[:i] + text[i:j] * rnd.randint(2, 8) + text[j:]
        elif op == 4:  # truncate
            text = text[:i]
        else:  # change case
            text = text[:i] + text[i:j].swapcase() + text[j:]
    return text
