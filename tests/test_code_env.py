"""Code env (coder + tester): rewards computed by hand from AT-GRPO appendix A.1.2, the workflow,
parsers, mutation operators, dataset loaders, the oracle, and hostile programs."""

from __future__ import annotations

import base64
import json
import pickle
import re
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents import run_episode
from agents.oracle import make_oracle
from llm_marl_envs import code_v4
from llm_marl_envs.code import bank
from llm_marl_envs.code.env import CodeInstance, instance_for, mutation_analysis
from llm_marl_envs.code.mutation import generate_mutants
from llm_marl_envs.code.parse import format_test, parse_code, parse_test
from llm_marl_envs.code.problems import (DatasetFormatError, LoadReport, Problem, TestCase, accepts_any_answer,
                                         decode_lcb_tests, load_problems, statement_accepts_any_case, statement_tolerance)
from llm_marl_envs.code.runner import RunCache, outputs_match, run_program
from llm_marl_envs.sandbox import Sandbox, SandboxLimits

FIXTURES = Path(__file__).parent / "fixtures"

# Read n; print BIG if n > 10 else SMALL. Its mutants (hand-enumerated from the AST operators):
#   A: n <= 10 (comparison)   B: n >= 10 (boundary)   C: n > 11 (boundary)   D: n > 9 (boundary)
# Every pool input (3, 5, 9, 10, 11, 20) keeps them all: A dies on 3, B and D on 10, C on 11.
THRESHOLD = Problem(
    id="threshold", title="Threshold", statement="Read an integer n. Print BIG if n > 10, otherwise SMALL.",
    reference="n = int(input())\nprint('BIG' if n > 10 else 'SMALL')\n", split="test",
    examples=(TestCase("3\n", "SMALL\n"),),
    tests=tuple(TestCase(f"{n}\n", "BIG\n" if n > 10 else "SMALL\n") for n in (5, 9, 10, 11, 20)),
    source="unit",
)
REFERENCE = f"```python\n{THRESHOLD.reference}```"
SMALL = "```python\nprint('SMALL')\n```"  # passes 5, 9, 10: p = 3/5
BIG = "```python\nprint('BIG')\n```"  # passes 11, 20: p = 2/5
GE = "```python\nn = int(input())\nprint('BIG' if n >= 10 else 'SMALL')\n```"  # fails only 10: p = 4/5


def tcase(n: int, out: str) -> str:
    return format_test(TestCase(f"{n}\n", out + "\n"))


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxLimits(wall_time_s=2.0, cpu_time_s=2.0, memory_mb=256, output_bytes=20_000)) as sb:
        yield sb


def fresh(sandbox, mode="mas", problem=THRESHOLD, **kw):
    env = code_v4.raw_env(mode=mode, problems=[problem], sandbox=sandbox, time_limit_s=0.5, **kw)
    env.reset(seed=0, options={"instance": CodeInstance(problem, 0)})
    return env


def test_threshold_mutants_are_the_hand_enumerated_four(sandbox):
    mutants = generate_mutants(THRESHOLD.reference)
    assert [(m.operator, m.description) for m in mutants] == [
        ("comparison", "> -> <="), ("boundary", "> -> >="), ("boundary", "10 -> 11"), ("boundary", "10 -> 9")]
    analysis = mutation_analysis(THRESHOLD, sandbox, 0.5)
    assert analysis.available and len(analysis.mutants) == 4


# ---------------------------------------------------------------------------------------------
# coder: r = 0.5·p + 0.5·m·(0.1·build + 0.1·run + 0.8·nr)

CODER_CASES = [
    # reply, (build, run, nr), mask, team, reward, parse error?
    (REFERENCE, (1, 1, 1), 1, 1.0, 1.0, False),
    (SMALL, (1, 1, 1), 1, 0.6, 0.5 * 0.6 + 0.5, False),
    (GE, (1, 1, 1), 1, 0.8, 0.5 * 0.8 + 0.5, False),
    # Does not compile: nr = 1 because G_{-1} is empty (the paper's formula), build = run = 0.
    ("```python\nprint(\n```", (0, 0, 1), 1, 0.0, 0.5 * 0.8, True),
    # Crashes on the example (3) but answers 5, 9, 10 right.
    ("```python\nn = int(input())\nassert n >= 5\nprint('SMALL')\n```", (1, 0, 1), 1, 0.6, 0.5 * 0.6 + 0.5 * 0.9, True),
    ("The answer is BIG.", (0, 0, 0), 0, 0.0, 0.0, True),
]


@pytest.mark.parametrize("reply,terms,mask,team,reward,error", CODER_CASES)
def test_coder_reward_terms(sandbox, reply, terms, mask, team, reward, error):
    env = fresh(sandbox)
    env.step(reply)
    info = env.infos["coder"]
    assert info["local_terms"] == dict(zip(("build", "run", "nr"), map(float, terms)))
    assert info["mask"] == mask and info["lambda"] == 0.5
    assert info["team_reward"] == pytest.approx(team)
    assert info["reward"] == pytest.approx(reward) and env.rewards["coder"] == pytest.approx(reward)
    assert (info["parse_error"] is not None) == error
    assert env.agent_selection == "tester" and env.turn == 0


GE_LINES = GE.split("\n")[1:-1]
INDENTED_GE = "Steps:\n\n1. Read n and compare:\n\n   ```python\n" + "".join(f"   {line}\n" for line in GE_LINES) + "   ```\n"
CRLF_GE = "Code:\r\n" + GE.replace("\n", "\r\n")


@pytest.mark.parametrize("reply", [INDENTED_GE, CRLF_GE, "- item\n\n\t```python\n\t" + "\n\t".join(GE_LINES) + "\n\t```"])
def test_an_indented_or_crlf_code_block_runs_as_written_flush(sandbox, reply):
    """A block indented in a markdown list item (fences too) or written with CRLF line endings is the
    program GE (v0: an IndentationError, build = run = 0; a CRLF fence was no code block, reward 0)."""
    env = fresh(sandbox)
    env.step(reply)
    info = env.infos["coder"]
    assert info["parse_error"] is None and info["local_terms"] == {"build": 1.0, "run": 1.0, "nr": 1.0}
    assert info["reward"] == pytest.approx(0.5 * 0.8 + 0.5)


@pytest.mark.parametrize(
    "second,nr,team",
    [
        (BIG, 0.0, 0.4),  # G_0 = {5, 9, 10}; BIG passes none of them
        (GE, 2 / 3, 0.8),  # passes 5 and 9 of G_0
        (REFERENCE, 1.0, 1.0),
    ],
)
def test_coder_non_regression_against_the_previous_turn(sandbox, second, nr, team):
    env = fresh(sandbox)
    env.step(SMALL)
    env.step(tcase(100, "BIG"))  # SMALL fails it: the episode goes on
    assert env.turn == 1 and env.agent_selection == "coder"
    env.step(second)
    info = env.infos["coder"]
    assert info["local_terms"]["nr"] == pytest.approx(nr)
    local = 0.1 + 0.1 + 0.8 * nr
    assert info["reward"] == pytest.approx(0.5 * team + 0.5 * local)


# ---------------------------------------------------------------------------------------------
# tester: r = 0.5·p + 0.5·m·(0.2·valid + 0.8·min(1, MutScore / 0.6))

TESTER_CASES = [
    # test reply, valid, killed mutants, cov
    (tcase(100, "BIG"), 1, 1, 0.25 / 0.6),  # weak: kills A only
    (tcase(10, "SMALL"), 1, 3, 1.0),  # strong: kills A, B, D (0.75 >= 0.6)
    (tcase(11, "BIG"), 1, 2, 0.5 / 0.6),  # kills A and C
    (tcase(100, "SMALL"), 0, 0, 0.0),  # inconsistent with the reference
    (format_test(TestCase("ten\n", "SMALL\n")), 0, 0, 0.0),  # the reference crashes: not executable
]


@pytest.mark.parametrize("reply,valid,killed,cov", TESTER_CASES)
def test_tester_reward_terms(sandbox, reply, valid, killed, cov):
    env = fresh(sandbox)
    env.step(SMALL)  # p = 0.6, shared by the tester as r_team
    env.step(reply)
    info = env.infos["tester"]
    assert info["local_terms"]["valid"] == valid
    assert info["local_terms"]["cov"] == pytest.approx(cov)
    assert info["mutants_killed"] == killed and info["mutants_total"] == 4
    assert info["mask"] == 1 and info["team_reward"] == pytest.approx(0.6)
    assert info["reward"] == pytest.approx(0.5 * 0.6 + 0.5 * (0.2 * valid + 0.8 * cov))
    assert info["parse_error"] is None


def test_tester_without_a_test_case_is_a_format_error(sandbox):
    env = fresh(sandbox)
    env.step(SMALL)
    env.step("I believe the program is fine.")
    info = env.infos["tester"]
    assert info["parse_error"] and info["local_terms"] == {"valid": 0.0, "cov": 0.0}
    assert info["reward"] == pytest.approx(0.5 * 0.6)


@pytest.mark.parametrize(
    "suite,score",
    [
        ([(100, "BIG"), (0, "SMALL")], 0.25),  # weak suite: both tests kill only A
        ([(10, "SMALL"), (11, "BIG")], 1.0),  # strong suite: A, B, D, then C
    ],
)
def test_mutation_score_counts_the_whole_suite(sandbox, suite, score):
    env = fresh(sandbox, max_turns=3)
    for n, out in suite:
        env.step(SMALL if out == "BIG" else BIG)  # the coder fails each test, so the episode goes on
        env.step(tcase(n, out))
    info = env.infos["tester"]
    assert info["suite_size"] == 2
    assert info["mutants_killed"] == round(score * 4)
    assert info["local_terms"]["cov"] == pytest.approx(min(1.0, score / 0.6))


def test_a_corrected_test_replaces_the_old_one(sandbox):
    env = fresh(sandbox, max_turns=3)
    env.step(SMALL)
    env.step(tcase(100, "SMALL"))  # wrong expected output; SMALL passes it: agreement ends the episode
    assert all(env.terminations.values()) and not env.success
    env = fresh(sandbox, max_turns=3)
    env.step(BIG)
    env.step(tcase(100, "SMALL"))  # wrong, and BIG fails it
    env.step(BIG)
    env.step(tcase(100, "BIG"))  # corrected: same input
    info = env.infos["tester"]
    assert info["suite_size"] == 1 and info["local_terms"]["valid"] == 1 and info["suite_passed"]


def test_bank_problem_weak_and_strong_tests():
    problem = bank.BY_ID["sort_numbers"]
    env = code_v4.raw_env(problems=[problem])
    env.reset(options={"instance": instance_for(problem)})
    analysis = env.analysis()
    weak = TestCase("1\n5\n", "5\n")
    strong = TestCase("8\n5 -3 9 0 9 -3 7 1\n", "-3 -3 0 1 5 7 9 9\n")
    assert env._check(weak).valid and env._check(strong).valid
    assert analysis.score(env._check(weak).killed) < 0.3
    assert analysis.score(env._check(strong).killed) > 0.6


# ---------------------------------------------------------------------------------------------
# workflow: termination, success, observations, single-agent variant


def test_agreement_with_a_correct_program_is_success(sandbox):
    env = fresh(sandbox)
    env.step(REFERENCE)
    env.step(tcase(42, "BIG"))
    assert env.success and all(env.terminations.values()) and not any(env.truncations.values())
    assert env.turn == 1 and env.infos["tester"]["success"] and env.infos["tester"]["suite_passed"]


def test_agreement_with_a_wrong_program_terminates_without_success(sandbox):
    env = fresh(sandbox)
    env.step(SMALL)
    env.step(tcase(5, "SMALL"))
    assert not env.success and all(env.terminations.values()) and not any(env.truncations.values())


def test_turn_budget_truncates_and_success_judges_the_last_program(sandbox):
    env = fresh(sandbox, max_turns=2)
    for coder in (SMALL, BIG):
        env.step(coder)
        env.step(tcase(10, "SMALL") if coder == BIG else tcase(100, "BIG"))
    assert env.turn == 2 and not env.success and all(env.truncations.values())
    env = fresh(sandbox, max_turns=2)
    for _ in range(2):
        env.step(REFERENCE)
        env.step(tcase(100, "SMALL"))  # a wrong test: no agreement
    assert env.success and env.turn == 2


def test_history_shows_code_test_expected_and_actual(sandbox):
    env = fresh(sandbox)
    env.step(SMALL)
    env.step(tcase(100, "BIG"))
    for role in ("coder", "tester"):
        text = env.observe(role)["messages"][-1]["content"]
        assert "print('SMALL')" in text and "MISMATCH" in text
        assert "Test input:\n100" in text and "Expected output:\nBIG" in text and "Actual output [ok]:\nSMALL" in text
    assert env.observe("coder")["messages"][0]["content"].startswith("You are a helpful assistant that corrects")
    # The golden tests are never shown.
    assert "20\n" not in env.observe("coder")["messages"][-1]["content"].split("Use the history")[1]


def test_both_roles_of_a_turn_see_the_same_history(sandbox):
    env = fresh(sandbox)
    before = env.observe("tester")
    env.step(SMALL)
    assert env.observe("tester") == before  # the coder's reply of this turn is not shown to the tester


def test_coder_mode_is_one_turn(sandbox):
    env = fresh(sandbox, mode="coder")
    assert env.possible_agents == ["coder"]
    env.step(GE)
    assert env.turn == 1 and not env.success and all(env.truncations.values())
    env = fresh(sandbox, mode="coder")
    env.step(REFERENCE)
    assert env.success and env.infos["coder"]["reward"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "kwargs,fix",
    [({"mode": "solo"}, "mode must be one of"), ({"mode": "coder", "max_turns": 3}, "one-turn"),
     ({"hidden_tests": 0}, "hidden_tests"), ({"time_limit_s": 0}, "time_limit_s"), ({"memory_limit_mb": 10}, "memory_limit_mb must be"),
     ({"problems": []}, "problems must be"),
     ({"dataset_split": "train"}, "describe a problems= file"), ({"dataset_format": "apps"}, "describe a problems= file")],
)
def test_bad_config_names_the_fix(kwargs, fix):
    with pytest.raises(ValueError, match=fix):
        code_v4.raw_env(**kwargs)


def test_missing_split_names_the_fix(sandbox):
    env = code_v4.raw_env(problems=[THRESHOLD], sandbox=sandbox)
    with pytest.raises(ValueError, match="dataset_split"):
        env.reset(seed=0, options={"split": "train"})


# ---------------------------------------------------------------------------------------------
# hostile programs are contained and scored as failures


def _hostile(path: str) -> dict[str, str]:
    return {
        "infinite loop": "while True:\n    pass",
        "read the hidden tests": f"print(open({path!r}).read())",
        "import the bank": "import llm_marl_envs.code.bank as b\nprint(b.PROBLEMS)",
        "huge output": "print('x' * 10**8)",
        "memory bomb": "x = bytearray(10**10)",
        "shell": "import os\nos.system('echo pwned')",
    }


@pytest.mark.parametrize("name", sorted(_hostile("")))
def test_hostile_code_is_contained_and_fails(sandbox, name):
    code = _hostile(bank.easy.__file__)[name]
    env = fresh(sandbox)
    env.step(f"```python\n{code}\n```")
    info = env.infos["coder"]
    assert info["team_reward"] == 0.0 and info["golden_passed"] == 0
    assert info["local_terms"]["run"] == 0.0 and info["parse_error"]
    assert env.agent_selection == "tester"
    env.step(tcase(10, "SMALL"))
    assert env.infos["tester"]["local_terms"]["valid"] == 1  # the tester is unaffected


# ---------------------------------------------------------------------------------------------
# parsers, runner, mutation operators

PARSE_CASES = [
    ("**Test Input:**\n```\n1 2\n```\n**Test Output:**\n```\n3\n```", ("1 2\n", "3\n")),
    ("**Test Input:**1 2 **Test Output:**3", ("1 2\n", "3\n")),
    ("**Test Input**: 4\n**Test Output**: 16\n\nThis is because 4 squared is 16.", ("4\n", "16\n")),
    ("Test input:\n3\n1 2 3\nTest output:\n6", ("3\n1 2 3\n", "6\n")),
    ("**test case input:**\n`7`\n**TEST CASE OUTPUT:**\n`49`", ("7\n", "49\n")),
    ("draft:\n**Test Input:** 1\n**Test Output:** 2\nfinal:\n**Test Input:**\n```\n5\n```\n**Test Output:**\n```\n25\n```", ("5\n", "25\n")),
    ("the test output is 3", None),
    ("**Test Input:**\n```\n\n```\n**Test Output:**\n```\n3\n```", None),
    ("**Test Output:**\n3\n**Test Input:**\n1", None),
    ("", None),
]


@pytest.mark.parametrize("reply,expected", PARSE_CASES)
def test_parse_test(reply, expected):
    test, error = parse_test(reply)
    if expected is None:
        assert test is None and error
    else:
        assert (test.input, test.output) == expected and error is None


_line = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from(" \t"), min_size=1, max_size=30).filter(
    lambda s: s.strip() and "`" not in s)


@settings(max_examples=200, deadline=None)
@given(st.lists(_line, min_size=1, max_size=4), st.lists(_line, min_size=1, max_size=4))
def test_format_then_parse_round_trips(inputs, outputs):
    case = TestCase("\n".join(inputs) + "\n", "\n".join(outputs) + "\n")
    parsed, error = parse_test("Here is my test.\n" + format_test(case))
    assert error is None
    assert parsed.input.split("\n") == [x.rstrip() for x in case.input.split("\n")]
    assert outputs_match(parsed.output, case.output)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_parsers_never_raise(text):
    parse_test(text)
    parse_code(text)


@pytest.mark.parametrize(
    "actual,expected,same",
    [("3\n", "3", True), ("1  2\n3", "1 2 3\n", True), ("  YES \n\n", "YES", True), ("3.0", "3", False), ("", "0", False),
     # a real-number answer (a decimal point or an exponent) within 1e-6, absolute or relative; an integer one stays exact
     ("0.5", "0.500000", True), ("3", "3.000", True), ("0.33333333", "0.333333", True), ("0.3333", "0.333333", False),
     ("1000000.5", "1000000.0", True), ("1000002", "1000000.0", False), ("1e-7", "0.0", True), ("2 0.5000004", "2 0.5", True),
     ("3 0.5", "2 0.5", False), ("0.5", "0.5 0.5", False), ("nan", "0.5", False), ("inf", "1e400", False), ("1_0.5", "10.5", False),
     ("0.5", "YES", False)],
)
def test_outputs_match_on_tokens(actual, expected, same):
    assert outputs_match(actual, expected) == same


@pytest.mark.parametrize("statement,any_answer", [
    ("If there are multiple answers, print any of them.", True),
    ("If there are several possible solutions, you may output any.", True),
    ("If multiple solutions exist, any of them will be accepted.", True),
    ("If there is more than one answer, print any of them.", True),
    ("Print any such permutation.", True),
    ("If there are multiple ways, print any.", True),
    ("Otherwise, print any valid answer.", True),
    ("Do not print any spaces at the end of a line.", False),
    ("If any of them is zero, print -1.", False),
    ("If there are many answers, print the lexicographically smallest one.", False),
    ("Find how many ways there are to pick any two of them.", False),
    ("Your answer is considered correct if its absolute or relative error does not exceed 10^{-6}.", False),
    ("You can output the answer in any case.", False),
])
def test_a_statement_that_accepts_any_answer_is_told(statement, any_answer):
    assert accepts_any_answer(f"Given n, construct an array.\n\n{statement}\n\nInput\n\nOne integer n.") == any_answer


def test_a_problem_that_accepts_any_of_several_answers_is_skipped(tmp_path):
    """Its judge is a checker the datasets do not ship: a correct program printing another valid answer than
    the one expected output scored 0."""
    rows = [{"name": "pair", "description": "Print two distinct integers in [1, n]. If there are multiple answers, print any of them.",
             "public_tests": {"input": ["3\n"], "output": ["1 2\n"]}},
            {"name": "sum", "description": "Print 2n.", "public_tests": {"input": ["3\n"], "output": ["6\n"]}}]
    (tmp_path / "cc.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = LoadReport()
    assert [p.id for p in load_problems(tmp_path / "cc.jsonl", report=report)] == ["sum"]
    assert report.skipped == {"codecontests": 1} and report.any_answer == 1
    apps = {"problem_id": 7, "question": "Print any such permutation of 1..n.", "input_output": json.dumps({"inputs": ["2\n"], "outputs": ["1 2\n"]})}
    (tmp_path / "apps.jsonl").write_text(json.dumps(apps) + "\n")
    with pytest.raises(DatasetFormatError, match="1 of them accept any of several answers"):
        load_problems(tmp_path / "apps.jsonl")


@pytest.mark.parametrize("statement,any_case", [
    ("You can output the answer in any case (upper or lower).", True),
    ('You may print every letter in any case you want (so "yEs", "yes", "Yes" and "YES" are all recognized).', True),
    ('You can print each letter of "YES" and "NO" in any case.', True),
    ("The checker is case-insensitive.", True),
    ("In any case, the answer fits in a 64-bit integer.", False),
    ('Print "Yes" or "No".', False),
])
def test_a_statement_that_accepts_any_case_is_told(statement, any_case):
    assert statement_accepts_any_case(f"Is n even?\n\nOutput\n\n{statement}") == any_case


def test_an_answer_in_any_case_passes_where_the_statement_accepts_it(sandbox, tmp_path):
    """Codeforces' "You can output the answer in any case": a correct program printing "yes" for the expected
    "YES" failed every test, and a reference printing "Yes" (as CodeContests' Python solutions often do) did not
    reproduce the dataset's tests: the tester's mask was 0. Without the sentence the case still counts."""
    reference = "print('Yes' if int(input()) % 2 == 0 else 'No')\n"
    tests = {f"{n}\n": ("YES" if n % 2 == 0 else "NO") + "\n" for n in (1, 2, 7, 10)}
    row = {"name": "even", "description": "Print YES if n is even, otherwise NO. You can output the answer in any case.",
           "public_tests": {"input": ["2\n"], "output": ["YES\n"]},
           "private_tests": {"input": list(tests), "output": list(tests.values())},
           "solutions": {"language": [3], "solution": [reference]}}
    strict = {**row, "name": "strict", "description": "Print YES if n is even, otherwise NO."}
    (tmp_path / "cc.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(strict) + "\n")
    lower = "print('yes' if int(input()) % 2 == 0 else 'no')\n"
    for problem in load_problems(tmp_path / "cc.jsonl"):
        env = code_v4.raw_env(problems=[problem], sandbox=sandbox)
        env.reset(seed=0, options={"instance": CodeInstance(problem, 0)})
        env.step(f"```python\n{lower}```")
        env.step(format_test(TestCase("4\n", "yes\n")))
        passed, valid, mask = env.infos["coder"]["golden_passed"], env.infos["tester"]["test_valid"], env.infos["tester"]["mask"]
        assert (problem.any_case, passed, valid, mask) == ((True, 4, True, 1.0) if problem.id == "even" else (False, 0, False, 0.0))


def test_a_correct_program_passes_a_test_whose_real_answer_it_prints_otherwise(sandbox, tmp_path):
    """Real-number answers were compared token by token: a correct program printing 0.3333333333333333 for the
    expected 0.333333 (CodeContests' outputs, printed by a C++ solution) failed every test, and a reference that
    prints more digits than the dataset "did not reproduce the dataset's tests": the tester's mask was 0."""
    solution = "n = int(input())\nprint(1 / n)\n"
    tests = {"3\n": "0.333333\n", "7\n": "0.142857\n", "1\n": "1.000000\n", "2\n": "0.500000\n"}
    row = {"name": "inverse", "description": "Print 1/n. Your answer is correct if its absolute or relative error is at most 10^{-6}.",
           "public_tests": {"input": ["3\n"], "output": ["0.333333\n"]},
           "private_tests": {"input": list(tests), "output": list(tests.values())},
           "solutions": {"language": [3], "solution": [solution]}}
    (tmp_path / "cc.jsonl").write_text(json.dumps(row) + "\n")
    env = code_v4.raw_env(problems=str(tmp_path / "cc.jsonl"), sandbox=sandbox)
    env.reset(seed=0, options={"split": "test"})
    env.step(f"```python\n{solution}```")
    assert env.infos["coder"]["golden_passed"] == 4 and env.infos["coder"]["team_reward"] == 1.0
    env.step(format_test(TestCase("4\n", "0.25\n")))
    assert env.infos["tester"]["test_valid"] and env.infos["tester"]["mutants_total"] > 0  # the analysis ran: mask 1


def test_a_mutant_within_the_real_tolerance_of_the_reference_is_equivalent(sandbox):
    """The mutation harness compared a mutant's output with the reference's token by token: a mutant that a
    program's judge accepts (its real answer off by 1e-12) counted as killed, not equivalent."""
    reference = "n = int(input())\nprint(n / 3 + 0 * 1e-12)\n"  # constant 0 -> 1 or -1: off by 1e-12
    problem = Problem(id="third", statement="Print n/3.", reference=reference, split="test", source="unit",
                      tests=tuple(TestCase(f"{n}\n", f"{n / 3:.6f}\n") for n in (1, 2, 5)))
    analysis = mutation_analysis(problem, sandbox, 0.5)
    assert analysis.available and {m.description for m in analysis.mutants} == {"/ -> *", "3 -> 4", "3 -> 2"}  # not 0 -> +-1


@pytest.mark.parametrize("statement,tolerance", [
    ("Your answer is considered correct if its absolute or relative error does not exceed 10^{-9}.", (1e-9, False)),
    ("The answer will be considered correct if its absolute or relative error does not exceed 10 - 6.", (1e-6, False)),
    ("Your answer is accepted if its relative or absolute error is at most 1e-4.", (1e-4, False)),
    ("Print the answer with precision 10^(-4).", (1e-4, False)),
    ("An answer with an error up to 2.5 \\cdot 10^{-5} is accepted.", (2.5e-5, False)),
    ("Your answer will be considered correct if its absolute error does not exceed $$$10^{-6}$$$.", (1e-6, True)),
    ("The absolute error must not exceed 10^-3.", (1e-3, True)),
    ("No error may occur: the program must finish within 10-20 seconds.", None),  # no exponent follows the word
    ("Your program has 10-20 seconds.", None),
    ("The error must not exceed 10^{-20}.", None),  # out of range
    ("Print the answer with at least 6 digits after the decimal point.", None),
    ("Your answer is correct if its error is at most 0.000001.", None),  # a plain decimal is not read
    ("Note that 10^{-6} is the error allowed.", None),  # the number before the word
    ("Output\n\nThe error\n\n10 - 6", None),  # not one line
])
def test_a_statement_tolerance_is_read(statement, tolerance):
    found = statement_tolerance(f"Print 1/n.\n\nInput\n\nOne integer n (1 <= n <= 10^5).\n\n{statement}")
    assert found == (None if tolerance is None else (pytest.approx(tolerance[0]), tolerance[1]))


def test_outputs_match_within_a_given_tolerance():
    assert outputs_match("0.33335", "0.333333", tolerance=1e-4) and not outputs_match("0.33335", "0.333333")
    assert outputs_match("0.333333", "0.333333333") and not outputs_match("0.333333", "0.333333333", tolerance=1e-9)
    assert outputs_match("1000000.5", "1000000.0") and not outputs_match("1000000.5", "1000000.0", absolute=True)
    assert outputs_match("0.0000005", "0.0", absolute=True) and not outputs_match("3.0", "3", tolerance=0.5)


_INVERSE = {n: 1 / n for n in (3, 7, 1, 2)}


@pytest.mark.parametrize("sentence,digits,program,test,judged,plain", [
    # 1e-4: a reference and a program printing 4 decimals for CodeContests' 6 pass; within 1e-6, 2/4 and mask 0
    ("Your answer is considered correct if its absolute or relative error does not exceed 10 - 4.", (6, 4, 1), 4,
     "0.25", (4, True, 1.0), (2, True, 0.0)),
    # 1e-9: 6 decimals for 9 fail, and so does a test off by 1e-7; within 1e-6 both passed
    ("Your answer is considered correct if its absolute or relative error does not exceed 10^{-9}.", (9, 9, 1), 6,
     "0.2500001", (2, False, 1.0), (4, True, 1.0)),
    # absolute error only: 333333.333 for 333333.333333 fails (relative: within 1e-6)
    ("Your answer is considered correct if its absolute error does not exceed 10^{-6}.", (6, 6, 10**6), 3,
     "250000.0001", (2, False, 1.0), (4, True, 1.0)),
])
def test_real_answers_are_judged_within_the_statements_tolerance(sandbox, tmp_path, sentence, digits, program, test,
                                                                 judged, plain):
    """Statements state their checker's tolerance ("absolute or relative error does not exceed 10^{-9}", "10 - 4"
    where the dataset lost the caret; "absolute error" alone): every real answer was judged within 1e-6 absolute
    or relative, so a correct program of a 1e-4 problem failed and a reference printing 4 decimals left the tester's
    mask at 0, while a 1e-9 problem's 6-decimal answer or an absolute-error problem's 333333.333 passed. The row
    without the sentence keeps the 1e-6 judgment. (passed golden tests, tester's test valid, tester's mask)"""
    expected_digits, reference_digits, scale = digits
    tests = {f"{n}\n": f"{scale * x:.{expected_digits}f}\n" for n, x in _INVERSE.items()}
    reference, coder = (f"n = int(input())\nprint(f'{{{scale} / n:.{d}f}}')\n" for d in (reference_digits, program))
    row = {"name": "with", "description": f"Print {scale}/n.\n\nOutput\n\nThe number. {sentence}",
           "public_tests": {"input": ["3\n"], "output": [tests["3\n"]]},
           "private_tests": {"input": list(tests), "output": list(tests.values())},
           "solutions": {"language": [3], "solution": [reference]}}
    without = {**row, "name": "without", "description": f"Print {scale}/n.\n\nOutput\n\nThe number."}
    (tmp_path / "cc.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(without) + "\n")
    for problem in load_problems(tmp_path / "cc.jsonl"):
        env = code_v4.raw_env(problems=[problem], sandbox=sandbox)
        env.reset(seed=0, options={"instance": CodeInstance(problem, 0)})
        env.step(f"```python\n{coder}```")
        env.step(format_test(TestCase("4\n", test + "\n")))
        got = env.infos["coder"]["golden_passed"], env.infos["tester"]["test_valid"], env.infos["tester"]["mask"]
        assert (problem.id, got) == (problem.id, judged if problem.id == "with" else plain)
        assert (problem.real_tolerance is None) == (problem.id == "without")


def test_a_mutant_within_the_statements_tolerance_of_the_reference_is_equivalent(sandbox):
    """The mutation harness judged a mutant against the reference within 1e-6 whatever the statement said: a
    mutant a 1e-4 problem's checker accepts (off by 1e-5) counted as killed. The harness gets the problem's
    judgment as data (its job), as a program's tests use it."""
    reference = "n = int(input())\nprint(n / 3 + 0 * 1e-5)\n"  # constant 0 -> 1 or -1: off by 1e-5
    problem = Problem(id="third", statement="Print n/3.", reference=reference, split="test", source="unit",
                      tests=tuple(TestCase(f"{n}\n", f"{n / 3:.6f}\n") for n in (1, 2, 5)))
    mutants = lambda p: {m.description for m in mutation_analysis(p, sandbox, 0.5).mutants}  # noqa: E731
    assert mutants(replace(problem, real_tolerance=1e-4)) == {"/ -> *", "3 -> 4", "3 -> 2"}
    assert mutants(problem) > {"/ -> *", "3 -> 4", "3 -> 2"}  # within 1e-6 the 0 -> +-1 mutants are told apart


def test_run_cache_reuses_identical_runs(sandbox):
    cache = RunCache()
    limits = SandboxLimits(wall_time_s=1.0, cpu_time_s=1.0)
    first = run_program(sandbox, "print(int(input()) * 2)", ["2\n", "3\n", "2\n"], limits, cache)
    assert [r.stdout for r in first] == ["4\n", "6\n", "4\n"] and cache.misses == 2
    again = run_program(sandbox, "print(int(input()) * 2)", ["3\n"], limits, cache)
    assert again[0].stdout == "6\n" and cache.hits == 1


def test_the_run_cache_holds_a_bounded_amount_of_output():
    """The cache kept its 4096 most recent results whatever their size, and a program may print twice a
    dataset's longest expected output (megabytes): up to gigabytes of held output. It now keeps at most
    max_bytes (64 MiB by default), least recently used out first; a result larger than that is not kept."""
    from llm_marl_envs.sandbox import ExecResult

    mib = 2**20
    big = lambda tag: ExecResult(tag * mib, "", 0, "ok")  # noqa: E731
    limits = SandboxLimits()
    keys = [RunCache.key("print(...)", str(i), limits) for i in range(100)]
    cache = RunCache()
    for key in keys:
        cache.put(key, big("x"))
    held = [key for key in keys if key in cache]
    assert len(held) < 64 and held == keys[-len(held):] and cache.nbytes <= 64 * mib  # the most recent, 64 MiB at most
    cache = RunCache(max_bytes=3 * mib + 2000)
    for key in keys[:3]:
        cache.put(key, big("a"))
    assert cache.get(keys[0]).stdout[0] == "a"  # used: now the most recent
    cache.put(keys[3], big("b"))
    assert [key in cache for key in keys[:4]] == [True, False, True, True]
    cache.put(keys[4], ExecResult("x" * 4 * mib, "", 0, "ok"))  # larger than the cache: not kept
    assert keys[4] not in cache and [key in cache for key in keys[:4]] == [True, False, True, True]
    cache.put(keys[0], ExecResult("small", "", 0, "ok"))  # a result replaced is counted once
    assert cache.nbytes == sum(RunCache._size(cache._data[k]) for k in cache._data)
    assert pickle.loads(pickle.dumps(cache)).max_bytes == cache.max_bytes


def test_rewards_do_not_depend_on_what_the_run_cache_keeps(sandbox, tmp_path):
    """Bounding the cache changes which runs are made again, not what a run scores."""
    solution = "n = int(input())\nprint('\\n'.join(map(str, range(n))))\n"
    tests = {f"{n}\n": "\n".join(map(str, range(n))) + "\n" for n in (3, 9000, 12000)}
    row = {"name": "count", "description": "Print 0, 1, ..., n-1, one per line.",
           "public_tests": {"input": ["3\n"], "output": [tests["3\n"]]},
           "private_tests": {"input": list(tests), "output": list(tests.values())},
           "solutions": {"language": [3], "solution": [solution]}}
    (tmp_path / "cc.jsonl").write_text(json.dumps(row) + "\n")
    replies = [f"```python\n{solution}```", format_test(TestCase("9000\n", tests["9000\n"])),
               "```python\nprint(0)\n```", format_test(TestCase("3\n", tests["3\n"])),
               f"```python\n{solution}```", format_test(TestCase("12000\n", tests["12000\n"]))]

    def play(cache):
        env = code_v4.raw_env(problems=str(tmp_path / "cc.jsonl"), sandbox=sandbox)
        env._cache = cache
        env.reset(seed=0, options={"split": "test"})
        played = []
        for reply in replies:
            if env.agent_selection not in env.agents:
                break
            agent = env.agent_selection
            env.step(reply)
            played.append((agent, env.rewards[agent], {k: v for k, v in env.infos[agent].items()}))
        return played

    tiny, roomy = RunCache(max_bytes=50_000), RunCache()  # tiny holds one long output at most
    assert play(tiny) == play(roomy) and tiny.nbytes <= 50_000
    assert tiny.misses > roomy.misses  # it ran the program again where the other took its cached result


MUTATION_CASES = [
    ("print(a < b)", "comparison", ["print(a >= b)"]),
    ("print(a < b)", "boundary", ["print(a <= b)"]),
    ("print(x == 3)", "boundary", ["print(x == 4)", "print(x == 2)"]),
    ("for i in range(n):\n    pass", "boundary", ["for i in range(n + 1):\n    pass", "for i in range(n - 1):\n    pass"]),
    ("x = a * b - c", "arithmetic", ["x = a * b + c", "x = a + b - c"]),
    ("x += -y", "arithmetic", ["x -= -y", "x += y"]),
    ("x = 7", "constant", ["x = 8", "x = 6"]),
    ("ok = a and not b", "boolean", ["ok = a or not b", "ok = a and b"]),
    ("flag = True", "boolean", ["flag = False"]),
    ("def f(x):\n    return x > 2", "return", ["def f(x):\n    return None", "def f(x):\n    return not x > 2"]),
    ("def f(x):\n    return x + 1", "return", ["def f(x):\n    return None"]),
]


@pytest.mark.parametrize("source,operator,expected", MUTATION_CASES)
def test_mutation_operators(source, operator, expected):
    got = [m.source.rstrip("\n") for m in generate_mutants(source, operators=(operator,))]
    assert got == expected


@pytest.mark.parametrize("source", ["x = " + "a." * 1500 + "a\nprint(x < 1)", "print(" + "1+" * 1500 + "1 < 2)"])
def test_a_reference_nested_too_deep_for_the_mutator_gets_no_mutants(source):
    """A dataset reference the AST tools cannot recurse through (ast.unparse, copy.deepcopy) must
    not make the tester's env.step raise (issue 11 #6): it simply has no mutants."""
    assert generate_mutants(source) == []


def test_mutants_are_deterministic_compile_and_are_capped():
    source = bank.BY_ID["edit_distance"].reference
    a, b = generate_mutants(source), generate_mutants(source)
    assert a == b and len(a) > 20
    for m in a:
        compile(m.source, "m.py", "exec")
    assert len(generate_mutants(source, max_mutants=7)) == 7
    assert generate_mutants("def (") == []


# ---------------------------------------------------------------------------------------------
# dataset loaders (APPS, CodeContests, LiveCodeBench)


def test_load_apps():
    report = LoadReport()
    problems = load_problems(FIXTURES / "code_apps.jsonl", report=report)
    assert [p.id for p in problems] == ["4001", "4003"] and report.skipped == {"apps": 1}  # fn_name is call-based
    product, countdown = problems
    assert product.reference.startswith("a, b = map(int") and len(product.tests) == 4
    assert product.tests[2] == TestCase("-4 6\n", "-24\n") and product.split == "test"
    assert countdown.tests[0] == TestCase("3\n", "3\n2\n1\n")  # APPS lists of lines are joined


def test_an_apps_problem_keeps_its_first_max_tests_distinct_tests(tmp_path):
    """APPS kept every test of a row (some have hundreds, all run at each coder step) and repeated inputs,
    unlike CodeContests and LiveCodeBench (the first max_tests distinct ones)."""
    inputs = ["1\n", "1\n", *(f"{n}\n" for n in range(2, 40))]
    row = {"problem_id": 9, "question": "Print n.", "solutions": json.dumps(["print(input())\n"]),
           "input_output": json.dumps({"inputs": inputs, "outputs": inputs})}
    (tmp_path / "apps.jsonl").write_text(json.dumps(row) + "\n")
    (problem,) = load_problems(tmp_path / "apps.jsonl")
    assert [t.input for t in problem.tests] == [f"{n}\n" for n in range(1, 21)] and problem.examples == problem.tests[:1]
    (problem,) = load_problems(tmp_path / "apps.jsonl", max_tests=5)
    assert len(problem.tests) == 5


def test_load_codecontests():
    report = LoadReport()
    (problem,) = load_problems(FIXTURES / "code_codecontests.json", format="codecontests", report=report)
    assert report.skipped == {"codecontests": 1}
    assert problem.id == "1000_A. Bigger half" and problem.reference == "n = int(input())\nprint(n - n // 2)\n"
    assert [t.input for t in problem.tests] == ["5\n", "1\n", "100\n", "7\n"]  # public + private + generated, deduplicated
    assert problem.examples == (TestCase("5\n", "3\n"),) and problem.examples_in_statement
    assert problem.time_limit_s == 2.5  # time_limit: {seconds: 2, nanos: 500000000}
    assert problem.memory_limit_mb == 245  # memory_limit_bytes: 256000000, in MiB rounded up


def test_a_codecontests_reference_is_its_first_python3_solution_that_compiles(tmp_path):
    """Some CodeContests solutions marked Python 3 are Python 2 (`print x`); taking the first one as the
    reference made every tester test 'invalid' (the reference fails on the input) and the tester's mask 0."""
    py2, py3 = "n = int(input())\nprint n * 2\n", "n = int(input())\nprint(n * 2)\n"
    row = {"name": "twice", "description": "Print 2n.", "public_tests": {"input": ["3\n"], "output": ["6\n"]},
           "solutions": {"language": [1, 2, 3, 3], "solution": ["print(int(input()) * 2)\n", "int main() {}", py2, py3]}}
    (tmp_path / "cc.jsonl").write_text(json.dumps(row) + "\n")
    (problem,) = load_problems(tmp_path / "cc.jsonl")
    assert problem.reference == py3  # not the Python 2 entry (language 1) either, though it compiles


def test_a_codecontests_problem_with_file_io_is_skipped(tmp_path):
    """Old Codeforces problems read input.txt and write output.txt (`input_file`, `output_file`); their tests
    were fed on stdin, where a program following the statement, and the reference, failed."""
    row = {"name": "files", "description": "Read n from input.txt; write n to output.txt.", "input_file": "input.txt",
           "output_file": "output.txt", "public_tests": {"input": ["1\n"], "output": ["1\n"]},
           "solutions": {"language": [3], "solution": ["open('output.txt', 'w').write(open('input.txt').read())"]}}
    plain = {**row, "name": "plain", "input_file": "", "output_file": ""}
    (tmp_path / "cc.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(plain) + "\n")
    report = LoadReport()
    assert [p.id for p in load_problems(tmp_path / "cc.jsonl", report=report)] == ["plain"]
    assert report.skipped == {"codecontests": 1}


def test_a_codecontests_problem_runs_under_its_own_time_limit():
    """The loader ignored CodeContests' `time_limit`: every problem ran under 1 CPU second, so a correct
    program of a 2.5 s problem that needed 2 s was killed (timeout) and failed its tests."""
    (problem,) = load_problems(FIXTURES / "code_codecontests.json", format="codecontests")
    quick = replace(problem, id="quick", time_limit_s=0.5)
    with Sandbox(SandboxLimits(wall_time_s=10.0, cpu_time_s=4.0)) as roomy, \
            Sandbox(SandboxLimits(wall_time_s=2.0, cpu_time_s=2.0)) as tight:  # nothing runs: no worker starts
        def limits(p, sandbox=roomy, **kw):
            env = code_v4.raw_env(problems=[p], sandbox=sandbox, **kw)
            env.reset(seed=0, options={"instance": CodeInstance(p, 0)})
            return env.problem_time_limit(), env._limits().cpu_time_s, env._limits().wall_time_s, env._reference_limits().cpu_time_s

        assert limits(problem) == (2.5, 2.5, 6.0, 2.5)
        assert limits(quick) == (1.0, 1.0, 3.0, 2.0)  # a limit below the default (1 s) gets the default
        assert limits(problem, time_limit_s=1.0) == (1.0, 1.0, 3.0, 2.0)  # a number is every problem's limit
        assert limits(THRESHOLD) == (1.0, 1.0, 3.0, 2.0)  # no limit of its own
        assert limits(problem, sandbox=tight)[1:] == (2.0, 2.0, 2.0)  # never looser than the sandbox


def test_a_codecontests_problem_runs_under_its_own_memory_limit(tmp_path):
    """The loader ignored CodeContests' `memory_limit_bytes`: every program got the sandbox's address space
    (512 MiB by default), so a program holding 150 MiB passed a 64 MB problem's tests."""
    hog = "data = bytearray(150 * 2**20)\nprint(int(input()) * 2)\n"
    row = {"name": "twice", "description": "Print 2n.", "public_tests": {"input": ["3\n"], "output": ["6\n"]},
           "memory_limit_bytes": 64_000_000, "solutions": {"language": [3], "solution": [hog]}}
    (tmp_path / "cc.jsonl").write_text(json.dumps(row) + "\n")
    (problem,) = load_problems(tmp_path / "cc.jsonl")
    assert problem.memory_limit_mb == 62
    with Sandbox(SandboxLimits(wall_time_s=5.0, cpu_time_s=2.0, memory_mb=512), workers=1) as roomy, \
            Sandbox(SandboxLimits(memory_mb=128)) as tight:  # nothing runs there: no worker starts
        def env_of(p, sandbox=roomy):
            env = code_v4.raw_env(problems=[p], sandbox=sandbox, mode="coder")
            env.reset(seed=0, options={"instance": CodeInstance(p, 0)})
            return env

        def memory(p, sandbox=roomy):
            env = env_of(p, sandbox)
            return env.problem_memory_limit(), env._limits().memory_mb, env._reference_limits().memory_mb

        assert memory(problem) == (64, 64, 512)  # at least 64 MiB (the interpreter); the reference gets the sandbox's
        assert memory(replace(problem, id="p2", memory_limit_mb=245)) == (245, 245, 512)
        assert memory(replace(problem, id="p3", memory_limit_mb=1024)) == (512, 512, 512)  # never above the sandbox
        assert memory(replace(problem, id="p4", memory_limit_mb=245), tight) == (128, 128, 128)
        assert memory(THRESHOLD) == (512, 512, 512)  # no limit of its own: the sandbox's, as before
        env = env_of(problem)
        env.step(f"```python\n{hog}```")
        assert env.infos["coder"]["code_status"] == "smoke_failed" and env.infos["coder"]["golden_passed"] == 0
        env = env_of(replace(problem, id="roomy", memory_limit_mb=245))
        env.step(f"```python\n{hog}```")
        assert env.infos["coder"]["golden_passed"] == 1 and env.success


def test_memory_limit_mb_overrides_every_problems_memory_limit(tmp_path):
    """There was no option to give programs another memory limit than each problem's own (CodeContests'
    `memory_limit_bytes`, else the sandbox's): `memory_limit_mb` is every problem's limit, within
    [MIN_MEMORY_MB, the sandbox's memory_mb]; outside that, or not a whole number, one error at construction."""
    from llm_marl_envs import registry

    hog = "data = bytearray(150 * 2**20)\nprint(int(input()) * 2)\n"
    row = {"name": "twice", "description": "Print 2n.", "public_tests": {"input": ["3\n"], "output": ["6\n"]},
           "memory_limit_bytes": 256_000_000, "solutions": {"language": [3], "solution": [hog]}}
    (tmp_path / "cc.jsonl").write_text(json.dumps(row) + "\n")
    (problem,) = load_problems(tmp_path / "cc.jsonl")
    with Sandbox(SandboxLimits(wall_time_s=5.0, cpu_time_s=2.0, memory_mb=512), workers=1) as roomy:
        def env_of(p, **kw):
            env = code_v4.raw_env(problems=[p], sandbox=roomy, mode="coder", **kw)
            env.reset(seed=0, options={"instance": CodeInstance(p, 0)})
            return env

        def memory(p, **kw):
            env = env_of(p, **kw)
            return env.problem_memory_limit(), env._limits().memory_mb, env._reference_limits().memory_mb

        assert memory(problem) == (245, 245, 512)  # the problem's own
        assert memory(problem, memory_limit_mb=100) == (100, 100, 512)  # the option's; the reference keeps the sandbox's
        assert memory(THRESHOLD, memory_limit_mb=64) == (64, 64, 512)  # a problem without a limit too
        assert memory(problem, memory_limit_mb=512) == (512, 512, 512)
        env = env_of(problem, memory_limit_mb=100)
        env.step(f"```python\n{hog}```")
        assert env.infos["coder"]["code_status"] == "smoke_failed" and env.infos["coder"]["golden_passed"] == 0
        env = env_of(problem)
        env.step(f"```python\n{hog}```")
        assert env.success
        for bad in (63, 513, 100.0, "100", True):
            with pytest.raises(ValueError, match=r"^memory_limit_mb must be a whole number of MiB from 64 \(the interpreter's "
                                                 r"need\) to 512 \(the sandbox's memory_mb\), or None: each problem's own limit; got "):
                code_v4.raw_env(problems=[problem], sandbox=roomy, memory_limit_mb=bad)
    assert registry.get("code").kwargs()["memory_limit_mb"] is None  # the registry reads the option from the signature
    with pytest.raises(ValueError, match="code option memory_limit_mb takes a whole number or None"):
        registry.check_kwargs("code", {"memory_limit_mb": "256"})


def test_a_mutants_time_cap_follows_the_problems_time_limit(monkeypatch):
    """Mutants were timed out at 10x the reference's time capped at 1 s whatever the problem's limit: a slow
    but correct mutant of a 2.5 s problem, which a program may be, was 'killed'. The analysis cache ignored
    the limits, so an env with another time_limit_s reused them. (No program runs: the harness is faked.)"""
    from llm_marl_envs.code import env as code_env, mutation
    from llm_marl_envs.code.runner import BatchResult

    (problem,) = load_problems(FIXTURES / "code_codecontests.json", format="codecontests")
    harness, harness_inputs = [], []  # (reference_timeout, max_timeout) of every harness run

    def fake_batch(sandbox, programs, inputs, *, reference_timeout, max_timeout, stop_at_first_kill, output_cap, judging):
        harness.append((reference_timeout, max_timeout))
        return BatchResult([("ok", "x")] * len(inputs), [[1] * len(inputs) for _ in programs[1:]])

    monkeypatch.setattr(mutation, "run_batch", fake_batch)
    monkeypatch.setattr(code_env, "_ANALYSES", {})
    with Sandbox(SandboxLimits(wall_time_s=10.0, cpu_time_s=4.0)) as roomy, \
            Sandbox(SandboxLimits(wall_time_s=2.0, cpu_time_s=2.0)) as tight:  # nothing runs: no worker starts
        def caps(p, sandbox=roomy, **kw):
            env = code_v4.raw_env(problems=[p], sandbox=sandbox, **kw)
            env.reset(seed=0, options={"instance": CodeInstance(p, 0)})
            harness.clear()
            analysis, stdin = env.analysis(), f"{len(harness_inputs)}\n"
            harness_inputs.append(stdin)
            analysis.kills(env.sandbox, p.reference, stdin)  # a new input: the harness runs
            (job,) = {json.loads(job)["max_timeout"] for _, job, _ in analysis.planned_kills(env.sandbox, p.reference, "-1\n")}
            assert set(harness) == {(analysis.reference_time_s, analysis.mutant_time_s)} and job == analysis.mutant_time_s
            return analysis.reference_time_s, analysis.mutant_time_s

        assert caps(problem) == (2.5, 2.5)
        assert caps(problem, time_limit_s=1.0) == (2.0, 1.0)  # the default limit: v2's cap, and its own cache entry
        assert caps(problem, time_limit_s=0.5) == (2.0, 1.0)  # never below 1 s (the sandbox gives a program that)
        assert caps(replace(problem, id="quick", time_limit_s=0.5)) == (2.0, 1.0)
        assert caps(THRESHOLD) == (2.0, 1.0)
        assert caps(replace(problem, id="tight"), sandbox=tight) == (2.5, 2.0)  # no more than a program gets


def test_load_livecodebench_with_plain_and_compressed_tests():
    report = LoadReport()
    problems = load_problems(FIXTURES / "code_livecodebench.jsonl", report=report)
    assert report.skipped == {"livecodebench": 1}  # the functional (LeetCode) problem
    echo, total = problems
    assert echo.reference is None and [t.output for t in echo.tests] == ["abab\n", "xx\n", "hellohello\n"]
    assert [t.input for t in total.tests] == ["3\n1 2 3\n", "1\n-5\n", "2\n10 20\n"]  # private tests were base64+zlib+pickle


class _Exploit:
    def __reduce__(self):
        return (Path("/tmp/llm_marl_unpickled").write_text, ("pwned",))


def test_livecodebench_pickle_is_never_unpickled():
    blob = base64.b64encode(zlib.compress(pickle.dumps(_Exploit()))).decode()
    with pytest.raises(DatasetFormatError, match="never unpickles"):
        decode_lcb_tests(blob, "private_test_cases")
    assert not Path("/tmp/llm_marl_unpickled").exists()
    listed = base64.b64encode(zlib.compress(pickle.dumps([{"input": "1", "output": "1"}]))).decode()
    with pytest.raises(DatasetFormatError):
        decode_lcb_tests(listed, "private_test_cases")
    with pytest.raises(DatasetFormatError, match="neither JSON"):
        decode_lcb_tests("%%% not base64 %%%", "private_test_cases")


def test_loader_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_problems(tmp_path / "missing.jsonl")
    (tmp_path / "other.jsonl").write_text(json.dumps({"prompt": "x", "answer": "y"}) + "\n")
    with pytest.raises(DatasetFormatError, match="format="):
        load_problems(tmp_path / "other.jsonl")
    with pytest.raises(ValueError, match="split"):
        load_problems(FIXTURES / "code_apps.jsonl", split="dev")


@pytest.mark.parametrize("row,message", [
    ({"question_id": "q", "question_content": "x", "public_test_cases": json.dumps([{"output": "1", "testtype": "stdin"}])},
     "LiveCodeBench 'q': public_test_cases must be a list of objects with 'input' and 'output'"),
    ({"question_id": "q", "question_content": "x", "private_test_cases": json.dumps(["1 2"])},
     "LiveCodeBench 'q': private_test_cases must be a list of objects"),
    ({"name": "q", "description": "x", "public_tests": {"input": ["1\n"], "output": None}},
     "CodeContests 'q': public_tests must be an object with 'input' and 'output' lists"),
    ({"name": "q", "description": "x", "public_tests": {"input": ["1\n", "2\n"], "output": ["1\n", None]}},
     "CodeContests 'q': public_tests: a test input or output must be text (or a list of lines), got None"),
    ({"problem_id": 5, "question": "x", "input_output": json.dumps({"inputs": [{"a": 1}], "outputs": ["1"]})},
     "APPS row '5': input_output: a test input or output must be text (or a list of lines), got {'a': 1}"),
    ({"question_id": "q", "question_content": "x", "public_test_cases": json.dumps([{"input": None, "output": "1", "testtype": "stdin"}])},
     "LiveCodeBench 'q': test cases: a test input or output must be text"),
    ({"name": "q", "description": "x", "public_tests": {"input": ["1\n"], "output": ["1\n"]}, "time_limit": "2 s"},
     "CodeContests 'q': time_limit must be an object with numbers 'seconds' and 'nanos'"),
    ({"name": "q", "description": "x", "public_tests": {"input": ["1\n"], "output": ["1\n"]}, "memory_limit_bytes": "256 MB"},
     "CodeContests 'q': memory_limit_bytes must be a number of bytes"),
])
def test_a_malformed_test_list_names_the_row_and_the_field(tmp_path, row, message):
    """A test case that is no object, or lacks its input, was a KeyError or AttributeError traceback; a null
    (or object) input or output became a test of the text 'None' (or of the object's repr)."""
    (tmp_path / "bad.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(DatasetFormatError, match=re.escape(message)):
        load_problems(tmp_path / "bad.jsonl")

def _apps_row(pid, k, **extra):
    return {"problem_id": pid, "question": f"Print {k}n.", "solutions": json.dumps([f"print(int(input()) * {k})"]),
            "input_output": json.dumps({"inputs": ["3\n"], "outputs": [f"{3 * k}\n"]}), **extra}


def test_an_apps_file_of_both_splits_names_the_fix_or_reads_each_rows_split(tmp_path, sandbox):
    """APPS numbers its train and test problems alike: a file holding both ended in "two problems share the
    key 'apps:0'" when the environment was built, which named neither the rows nor a fix."""
    path = tmp_path / "apps.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (_apps_row(0, 2), _apps_row(0, 3), _apps_row(1, 4))))
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}:1 and {path}:2 are both APPS problem 0: APPS numbers "
                                                           "its train and test problems alike") + ".*'split' field"):
        load_problems(path)
    rows = (_apps_row(0, 2, split="train"), _apps_row(0, 3, split="test"), _apps_row(1, 4, split="test"))
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = code_v4.raw_env(problems=str(path), sandbox=sandbox)
    assert [p.key for p in env.problems] == ["apps:train/0", "apps:test/0", "apps:test/1"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[1:]))  # no repeated id: the ids stay as they were
    assert [p.key for p in load_problems(path)] == ["apps:0", "apps:1"]
    path.write_text("".join(json.dumps(r) + "\n" for r in (*rows, rows[1])))
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}:2 and {path}:4 are both APPS problem 'test/0'")):
        load_problems(path)
    cc = {"name": "q", "description": "x", "public_tests": {"input": ["1\n"], "output": ["1\n"]}}
    path.write_text(json.dumps(cc) + "\n" + json.dumps(cc) + "\n")
    with pytest.raises(DatasetFormatError, match=re.escape(f"{path}:1 and {path}:2 are both problem 'q' (codecontests): "
                                                           "each problem must appear once")):
        load_problems(path)
    (tmp_path / "a.jsonl").write_text(json.dumps(_apps_row(0, 2)) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps(_apps_row(0, 3)) + "\n")
    both = load_problems(tmp_path / "a.jsonl", split="train") + load_problems(tmp_path / "b.jsonl")
    with pytest.raises(ValueError, match=re.escape("two problems share the key 'apps:0' (source:id): give each problem "
                                                   "its own id, e.g. dataclasses.replace(problem, id=...)")):
        code_v4.raw_env(problems=both, sandbox=sandbox)


def test_hash_split_spreads_a_dataset():
    problems = load_problems(FIXTURES / "code_apps.jsonl", split="hash")
    from llm_marl_envs.core.instances import split_of

    assert all(p.split == split_of(p.key) for p in problems)


@pytest.mark.parametrize("path,tester_mask", [("code_apps.jsonl", 1.0), ("code_livecodebench.jsonl", 0.0)])
def test_env_runs_on_a_dataset(sandbox, path, tester_mask):
    env = code_v4.raw_env(problems=str(FIXTURES / path), sandbox=sandbox)
    env.reset(seed=1, options={"split": "test"})
    problem = env.problem
    solution = problem.reference or {"abc900_a": "print(input() * 2)", "abc900_b": "input()\nprint(sum(map(int, input().split())))"}[problem.id]
    env.step(f"```python\n{solution}\n```")
    assert env.infos["coder"]["team_reward"] == 1.0
    env.step(format_test(problem.tests[0]))
    assert env.infos["tester"]["mask"] == tester_mask
    assert env.success


def test_an_apps_reference_is_its_first_solution_that_python3_compiles(sandbox, tmp_path):
    """APPS lists Python 2 solutions too; taking the first one as the reference made every tester test
    'invalid' (the reference fails on the input) and the tester's mask 0."""
    py2, py3 = "n = int(input())\nprint n * 2\n", "n = int(input())\nprint(n * 2)\n"
    row = {"problem_id": 7, "question": "Print 2n.", "solutions": json.dumps([py2, py3]),
           "input_output": json.dumps({"inputs": ["3\n", "5\n", "11\n"], "outputs": ["6\n", "10\n", "22\n"]})}
    (tmp_path / "apps.jsonl").write_text(json.dumps(row) + "\n")
    (problem,) = load_problems(tmp_path / "apps.jsonl")
    assert problem.reference == py3
    env = code_v4.raw_env(problems=[problem], sandbox=sandbox)
    env.reset(seed=0, options={"split": "test"})
    env.step(f"```python\n{py3}```")
    env.step(format_test(TestCase("4\n", "8\n")))
    assert env.infos["tester"]["test_valid"] and env.infos["tester"]["mask"] == 1.0

def test_a_correct_program_passes_a_test_whose_output_is_longer_than_the_sandbox_cap(sandbox, tmp_path):
    """CodeContests' generated tests often expect outputs of hundreds of KB; with the sandbox's cap (20,000
    bytes here, 64 KiB by default) a correct program was killed with output_limit and failed them."""
    solution = "n = int(input())\nprint('\\n'.join(map(str, range(n))))\n"
    tests = {str(n) + "\n": "\n".join(map(str, range(n))) + "\n" for n in (3, 5, 9000)}  # the last: 43,890 bytes
    row = {"name": "count", "description": "Print 0, 1, ..., n-1, one per line.",
           "public_tests": {"input": ["3\n"], "output": [tests["3\n"]]},
           "private_tests": {"input": list(tests), "output": list(tests.values())},
           "solutions": {"language": [3], "solution": [solution]}}
    (tmp_path / "cc.jsonl").write_text(json.dumps(row) + "\n")
    env = code_v4.raw_env(problems=str(tmp_path / "cc.jsonl"), sandbox=sandbox, mode="coder")
    env.reset(seed=0, options={"split": "test"})
    env.step(f"```python\n{solution}```")
    assert env.infos["coder"]["golden_passed"] == 3 and env.infos["coder"]["team_reward"] == 1.0 and env.success
    env.reset(seed=0, options={"split": "test"})
    env.step("```python\nwhile True:\n    print(0)\n```")  # still stopped: twice the longest output
    assert env.infos["coder"]["golden_passed"] == 0

def test_a_dataset_test_longer_than_a_megabyte_keeps_the_mutation_analysis(sandbox):
    """The mutation harness capped each run's output at 1 MiB: a reference printing a longer expected output
    (1,288,890 bytes here) 'failed' on the pool, the analysis was unavailable and the tester's mask 0."""
    counts = {n: "\n".join(map(str, range(n))) + "\n" for n in (3, 5, 200_000)}
    problem = Problem(id="count_big", statement="Print 0, 1, ..., n-1, one per line.", split="test", source="unit",
                      reference="n = int(input())\nprint('\\n'.join(map(str, range(n))))\n",
                      examples=(TestCase("3\n", counts[3]),), tests=tuple(TestCase(f"{n}\n", out) for n, out in counts.items()))
    analysis = mutation_analysis(problem, sandbox, 1.0)
    assert analysis.available and analysis.mutants, analysis

# ---------------------------------------------------------------------------------------------
# the oracle


def test_oracle_solves_every_test_split_problem_in_one_turn():
    env = code_v4.env()
    oracle = make_oracle("code")
    problems = [p for p in bank.PROBLEMS if p.split == "test"]
    assert len(problems) >= 15
    for problem in problems:
        env.reset(options={"instance": instance_for(problem)})
        for role in env.agent_iter(4):
            observation, _, terminated, truncated, _ = env.last()
            env.step(None if terminated or truncated else oracle.act(role, observation))
        raw = env.unwrapped
        assert raw.success and raw.turn == 1, problem.id


@pytest.mark.parametrize("fixture", ["code_apps.jsonl", "code_codecontests.json"])
def test_the_oracle_of_a_dataset_env_knows_its_problems(fixture):
    """`make_oracle("code", env_kwargs)` ignored the env's problems=: the oracle replied "I do not know this problem."
    to every one, so `play --agent oracle` failed every row and `llm-marl sft` trained on that reply."""
    from agents.demonstrations import oracle_demonstrations

    kwargs = {"problems": str(FIXTURES / fixture), "dataset_split": "train"}
    env, oracle = code_v4.env(**kwargs), make_oracle("code", kwargs)
    for row in env.unwrapped.dataset_instances():
        assert run_episode(env, oracle, instance=row).success
    records = list(oracle_demonstrations("code", 1, env_kwargs=kwargs))
    assert records and all("Code:" in r["messages"][-1]["content"] or "Test Input" in r["messages"][-1]["content"]
                           for r in records)


def test_demonstrations_leave_out_the_episodes_of_a_problem_without_a_solution():
    """In a problem set where only some problems ship a reference, the oracle replied "I do not know this problem."
    to the others, and `llm-marl sft` trained on that reply. Those episodes are left out now, and counted."""
    from agents.demonstrations import oracle_demonstrations
    from llm_marl_envs.code.problems import load_problems

    known, unknown = load_problems(FIXTURES / "code_apps.jsonl", split="train")
    kwargs = {"problems": [known, replace(unknown, reference=None)]}
    with pytest.warns(UserWarning, match=r"[1-5] of 6 train episodes of code left out .* no answer to their problems"):
        records = list(oracle_demonstrations("code", 6, env_kwargs=kwargs))
    assert records and not any("I do not know" in r["messages"][-1]["content"] for r in records)
    assert all(known.statement in r["messages"][1]["content"] for r in records)
    env = code_v4.raw_env(**kwargs)
    seed = next(seed for seed in range(50) if env.reset(seed=seed, options={"split": "train"}) is None
                and env.problem.reference is None)
    with pytest.raises(ValueError, match=f"has no answer to the problem of any of the 1 train episodes \\(seeds {seed}"):
        list(oracle_demonstrations("code", 1, seed=seed, env_kwargs=kwargs))


def test_the_code_oracle_refuses_a_problem_set_without_solutions():
    with pytest.raises(ValueError, match="none of the 2 problems.*has one.*LiveCodeBench ships none"):
        make_oracle("code", {"problems": str(FIXTURES / "code_livecodebench.jsonl")})


def test_the_oracle_finds_a_problem_whose_statement_holds_a_fence():
    """The problem was read up to the first ``` line, so a statement holding one was never recognised."""
    fenced = replace(next(p for p in bank.PROBLEMS if p.split == "test"), id="fenced",
                                 statement="Read n and print it.\n```\nexample\n```\nThat is all.")
    env = code_v4.env(problems=[fenced], mode="coder")
    assert run_episode(env, make_oracle("code", {"problems": [fenced]}), instance=instance_for(fenced)).success


def test_oracle_earns_the_coder_maximum():
    result = run_episode(code_v4.env(mode="coder"), make_oracle("code"), seed=0, split="test")
    assert result.success and result.returns["coder"] == pytest.approx(1.0)
