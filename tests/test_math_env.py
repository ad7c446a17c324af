"""Math env (AT-GRPO A.1.1): workflow, rewards computed by hand, observations, datasets, parallel API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pettingzoo.test import parallel_api_test

from agents import run_episode
from agents.oracle import make_oracle
from agents.oracle.math import MathOracle
from llm_marl_envs import math_v2
from llm_marl_envs.math.datasets import load_dataset
from llm_marl_envs.math.problems import MathInstance

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEM = MathInstance(question="What is 6 times 7?", answer="42", source="test")
LAM = 0.7

RIGHT = "**Reasoning Steps:** 6 x 7.\n#### \\boxed{42}"
WRONG = "**Reasoning Steps:** 6 x 7.\n#### \\boxed{41}"
NO_ANSWER = "I think it is forty-two."


def program(body: str) -> str:
    return f"**Code:**\n```python\n{body}\n```"


@pytest.fixture(scope="module")
def sandbox():
    from llm_marl_envs.sandbox import Sandbox, SandboxLimits

    with Sandbox(SandboxLimits(wall_time_s=1.0, cpu_time_s=1.0, memory_mb=256)) as box:
        yield box


@pytest.fixture
def fresh(sandbox):
    def make(mode="mas", instance=PROBLEM, **kw):
        env = math_v2.raw_env(mode=mode, sandbox=sandbox, **kw)
        env.reset(seed=0, options={"instance": instance})
        return env

    return make


# ------------------------------------------------------------------ rewards, by hand

# (reply, team, fmt, step, reward) with λ = 0.7, c = (0.2, 0.8): r = 0.7·team + 0.3·(0.2·fmt + 0.8·step)
REASONER_CASES = [
    (RIGHT, 1, 1, 1, 1.0),
    ("#### 42", 1, 1, 1, 1.0),
    ("#### \\boxed{42.0}", 1, 1, 1, 1.0),
    ("#### \\boxed{\\frac{84}{2}}", 1, 1, 1, 1.0),
    (WRONG, 0, 1, 0, 0.3 * 0.2),
    ("#### \\boxed{41.9999}", 0, 1, 0, 0.3 * 0.2),  # |Δ| = 1e-4 > δ
    (NO_ANSWER, 0, 0, 0, 0.0),
    ("\\boxed{}", 0, 0, 0, 0.0),
]


@pytest.mark.parametrize("reply,team,fmt,step,reward", REASONER_CASES)
@pytest.mark.parametrize("mode", ["mas", "reasoner"])
def test_reasoner_reward_terms(fresh, mode, reply, team, fmt, step, reward):
    env = fresh(mode=mode)
    env.step(reply)
    info = env.infos["reasoner"]
    assert info["team_reward"] == team
    assert info["local_terms"] == {"fmt": fmt, "step": step}
    assert info["mask"] == 1.0 and info["lambda"] == LAM
    assert info["reward"] == pytest.approx(reward)
    assert env.rewards["reasoner"] == pytest.approx(reward)  # known at the reasoner's own step
    assert (info["parse_error"] is None) == bool(fmt)


# (reasoner reply, tool reply, team, fmt, tool, step, mask, reward)
# r = 0.7·team + 0.3·m·(0.1·fmt + 0.1·tool + 0.8·step); the team term is the reasoner's answer's check.
TOOL_CASES = [
    (RIGHT, program("print(6 * 7)"), 1, 1, 1, 1, 1, 1.0),
    (RIGHT, program("print(41)"), 1, 1, 1, 0, 1, 0.7 + 0.3 * 0.2),
    (WRONG, program("print(6 * 7)"), 0, 1, 1, 1, 1, 0.3 * 1.0),
    (WRONG, program("print(41)"), 0, 1, 1, 0, 1, 0.3 * 0.2),
    (RIGHT, program("from fractions import Fraction\nprint(Fraction(84, 2))"), 1, 1, 1, 1, 1, 1.0),
    (RIGHT, program("print('debug')\nprint(42.0)"), 1, 1, 1, 1, 1, 1.0),  # the last printed line counts
    (RIGHT, program("raise ValueError('bug')"), 1, 1, 0, 0, 1, 0.7 + 0.3 * 0.1),
    (RIGHT, program("while True:\n    pass"), 1, 1, 0, 0, 1, 0.7 + 0.3 * 0.1),  # timeout
    (RIGHT, program("x = 42"), 1, 1, 1, 0, 1, 0.7 + 0.3 * 0.2),  # printed nothing
    (RIGHT, program("print(42"), 1, 0, 0, 0, 1, 0.7),  # does not compile
    (RIGHT, program("print(42)\n" + "#" * 16_001), 1, 0, 0, 0, 1, 0.7),  # over the code budget
    (RIGHT, "The answer is 42.", 1, 0, 0, 0, 0, 0.7),  # no code block: no logs, mask 0
    (WRONG, "The answer is 42.", 0, 0, 0, 0, 0, 0.0),
]


@pytest.mark.parametrize("reasoner,tool,team,fmt,ran,step,mask,reward", TOOL_CASES)
def test_tool_reward_terms(fresh, reasoner, tool, team, fmt, ran, step, mask, reward):
    env = fresh()
    env.step(reasoner)
    env.step(tool)
    info = env.infos["tool"]
    assert info["team_reward"] == team
    assert info["local_terms"] == {"fmt": fmt, "tool": ran, "step": step}
    assert info["mask"] == mask
    assert info["reward"] == pytest.approx(reward)
    assert env.rewards["tool"] == pytest.approx(reward)


FLUSH = program("x = 6 * 7\nif x:\n    print(x)")


@pytest.mark.parametrize("tool", [
    "**Code:**\n\n1. Multiply:\n\n   ```python\n   x = 6 * 7\n   if x:\n       print(x)\n   ```\n",
    "- Multiply:\n\n\t```python\n\tx = 6 * 7\n\tif x:\n\t    print(x)\n\t```",
    FLUSH.replace("\n", "\r\n"),
], ids=["list-item-spaces", "list-item-tab", "crlf"])
def test_an_indented_or_crlf_tool_block_earns_what_the_flush_one_does(fresh, tool):
    """v0: the list item's program was an IndentationError (fmt = tool = step = 0) and a CRLF fence no code (mask 0)."""
    flush, other = fresh(), fresh()
    for env, reply in ((flush, FLUSH), (other, tool)):
        env.step(RIGHT)
        env.step(reply)
    assert other.infos["tool"] == flush.infos["tool"] and other.rewards["tool"] == pytest.approx(1.0)
    assert other.infos["tool"]["local_terms"] == {"fmt": 1, "tool": 1, "step": 1}


def test_tool_alone_is_scored_on_its_own_answer(fresh):
    env = fresh(mode="tool")
    env.step(program("print(42)"))
    assert env.infos["tool"]["team_reward"] == 1 and env.rewards["tool"] == pytest.approx(1.0)
    env = fresh(mode="tool")
    env.step(program("print(41)"))
    assert env.infos["tool"]["team_reward"] == 0 and env.rewards["tool"] == pytest.approx(0.3 * 0.2)
    assert env.terminations["tool"] and not env.success  # an answer was given: the task's natural end


# ------------------------------------------------------------------ workflow


def test_agreement_on_the_right_answer_ends_with_success(fresh):
    env = fresh()
    env.step(RIGHT)
    assert env.agent_selection == "tool" and env.turn == 0
    env.step(program("print(42)"))
    assert env.success and all(env.terminations.values())
    assert env.infos["tool"]["agreed"] and env.infos["tool"]["final_answer"] == "42"
    assert all(info["success"] for info in env.infos.values())


def test_agreement_on_a_wrong_answer_ends_without_success(fresh):
    env = fresh()
    env.step(WRONG)
    env.step(program("print(41)"))
    # Agreement is a terminal state (same convention as code_v4), not a time limit.
    assert not env.success and all(env.terminations.values()) and not any(env.truncations.values())
    assert env.infos["tool"]["final_answer"] == "41"


def test_equivalent_forms_count_as_agreement(fresh):
    env = fresh(instance=MathInstance("Half of one?", "1/2"))
    env.step("#### \\boxed{\\frac{1}{2}}")
    env.step(program("print(0.5)"))
    assert env.success and env.turn == 1


def test_mismatch_continues_and_both_see_the_history(fresh):
    env = fresh()
    env.step(RIGHT)
    env.step(program("print(41)"))
    assert env.turn == 1 and env.agent_selection == "reasoner" and not env.infos["tool"]["agreed"]
    for role in ("reasoner", "tool"):
        text = env.observe(role)["messages"][-1]["content"]
        assert "Problem:\nWhat is 6 times 7?" in text
        assert "#### \\boxed{42}" in text  # the reasoner's previous reply
        assert "print(41)" in text and "Execution [ok]: 41" in text
        assert "Mismatch: the boxed answer 42 and the printed answer 41 differ." in text
    assert env.observe("reasoner")["turn"] == 1


def test_tool_does_not_see_the_reasoners_reply_of_the_same_turn(fresh):
    env = fresh()
    before = env.observe("tool")
    env.step(RIGHT)
    assert env.observe("tool") == before
    env.step(program("print(41)"))
    env.step("#### \\boxed{43}")
    assert "43" not in env.observe("tool")["messages"][-1]["content"]


def test_final_answer_is_the_reasoners_answer_of_the_last_turn(fresh):
    env = fresh(max_turns=2)
    env.step(RIGHT)
    env.step(program("print(41)"))  # mismatch: go on
    env.step(WRONG)
    env.step(program("print(42)"))  # mismatch again; budget spent
    assert env.turn == 2 and not env.success and all(env.truncations.values())
    assert env.infos["tool"]["final_answer"] == "41"

    env = fresh(max_turns=2)
    env.step(WRONG)
    env.step(program("print(42)"))
    env.step(RIGHT)
    env.step(program("print(40)"))
    assert env.success and all(env.terminations.values()) and env.final_answer() == "42"


def test_single_reasoner_retries_only_when_no_answer(fresh):
    env = fresh(mode="reasoner", max_turns=3)
    env.step(NO_ANSWER)
    assert env.turn == 1 and env.agent_selection == "reasoner"
    text = env.observe("reasoner")["messages"][-1]["content"]
    assert "forty-two" in text and "no usable final answer" in text and "Python Tool Agent" not in text
    env.step(WRONG)
    assert env.turn == 2 and not env.success and all(env.terminations.values())  # answered: a natural end


def test_single_tool_retries_after_a_crash(fresh):
    env = fresh(mode="tool")
    env.step(program("raise ValueError('bug')"))
    assert env.turn == 1 and env.infos["tool"]["parse_error"] == "program failed (error)"
    text = env.observe("tool")["messages"][-1]["content"]
    assert "ValueError: bug" in text and "Reasoning Agent" not in text
    env.step(program("print(6 * 7)"))
    assert env.success and env.turn == 2


def test_parse_errors_are_reported_in_infos(fresh):
    env = fresh()
    env.step(NO_ANSWER)
    assert env.infos["reasoner"]["parse_error"].startswith("no final answer")
    env.step("no code")
    assert env.infos["tool"]["parse_error"] == "no ```python code block found"
    assert env.infos["tool"]["tool_status"] == "no_code"


def test_render_shows_problem_reference_and_answers(fresh):
    env = fresh(render_mode="ansi")
    env.step(RIGHT)
    text = env.render()
    assert "What is 6 times 7?" in text and "reference answer: 42" in text and "waiting for the tool" in text
    env.step(program("print(41)"))
    assert "reasoner='42' (right) tool='41' [ok] mismatch" in env.render()


def test_fork_mid_turn_is_independent_and_shares_the_sandbox(fresh):
    env = fresh()
    env.step(RIGHT)
    child = env.fork()
    child.step(program("print(42)"))
    assert child.success and env.agent_selection == "tool" and not env.history
    assert child._sandbox is env._sandbox and child.instance is env.instance
    env.step(program("print(41)"))
    assert env.turn == 1 and not env.success


# ------------------------------------------------------------------ problems and datasets


def test_generated_problem_options(sandbox):
    env = math_v2.raw_env(difficulty=3, topics=["probability"], sandbox=sandbox)
    for seed in range(5):
        env.reset(seed=seed, options={"split": "val"})
        assert env.instance.difficulty == 3 and env.instance.topic == "probability"


def test_dataset_mode_draws_from_the_file_by_split(sandbox, tmp_path):
    path = tmp_path / "gsm.jsonl"
    rows = [f'{{"question": "What is {i} plus {i}?", "answer": "{i} + {i} = {2 * i}\\n#### {2 * i}"}}' for i in range(40)]
    path.write_text("\n".join(rows))
    env = math_v2.raw_env(mode="reasoner", dataset=path, sandbox=sandbox)
    assert len(env.dataset_instances()) == 40
    seen = {}
    for split in ("train", "val", "test"):
        for seed in range(10):
            env.reset(seed=seed, options={"split": split})
            assert env.instance.source == "gsm8k" and env.instance in env.dataset_instances(split)
            seen.setdefault(split, set()).add(env.instance.question)
    assert not seen["train"] & seen["test"] and not seen["val"] & seen["test"]
    oracle = MathOracle({i.question: i.answer for i in env.dataset_instances()})
    assert run_episode(env, oracle, seed=0, split="test").success


def test_dataset_fixture_problems_through_the_oracle_table(sandbox):
    items = load_dataset(FIXTURES / "math_math.jsonl")
    env = math_v2.raw_env(dataset=items, sandbox=sandbox)
    oracle = MathOracle({i.question: i.answer for i in items})
    for item in items:
        env.reset(seed=0, options={"instance": item})
        for role in env.agent_iter(10):
            _, _, term, trunc, _ = env.last()
            env.step(None if term or trunc else oracle.act(role, env.observe(role)))
        assert env.success, item.question


@pytest.mark.parametrize("fixture", ["math_gsm8k.jsonl", "math_math.jsonl", "math_aime.jsonl", "math_polaris.jsonl"])
def test_the_oracle_of_a_dataset_env_knows_its_problems(fixture, sandbox):
    """`make_oracle("math", env_kwargs)` ignored the env's dataset=: `play --agent oracle` failed every row, and
    `llm-marl sft --env-arg dataset=...` trained on "I cannot solve this problem." for every reply."""
    from agents.demonstrations import oracle_demonstrations

    kwargs = {"dataset": str(FIXTURES / fixture)}
    env, oracle = math_v2.raw_env(**kwargs, sandbox=sandbox), make_oracle("math", kwargs)
    for item in env.dataset_instances():
        assert run_episode(env, oracle, instance=item).success, item.question
    split = next(s for s in ("train", "val", "test") if env.dataset_instances(s))
    records = list(oracle_demonstrations("math", 1, split=split, env_kwargs=kwargs))
    assert records and all(r["reward"] == 1.0 for r in records)


def test_the_oracle_finds_a_dataset_problem_with_blank_lines(sandbox):
    """The table was looked up by the problem's first paragraph only (MATH's problems hold blank lines)."""
    item = MathInstance(question="Let x = 3.\n\nWhat is 2x + 1?", answer="7", source="jsonl")
    env = math_v2.raw_env(dataset=[item], sandbox=sandbox)
    assert run_episode(env, MathOracle({item.question: item.answer}), instance=item).success


def test_a_math_percentage_answer_written_as_a_decimal_earns_the_right_answers_reward(fresh, tmp_path):
    """MATH's reference `12.5\\%` (from its solution's box): v1 scored the reasoner's 12.5 and the tool's
    printed 12.5 wrong (Math-Verify's unevaluated 1/100 failed the NumEq stage), so neither agreed nor won."""
    row = '{"problem": "What percent of 8 is 1?", "solution": "$\\\\frac18 = \\\\boxed{12.5\\\\%}$.", "level": "Level 2", "type": "Prealgebra"}'
    (tmp_path / "math.jsonl").write_text(row + "\n")
    (item,) = load_dataset(tmp_path / "math.jsonl")
    assert item.answer == "12.5\\%"
    env = fresh(instance=item)
    env.step("#### \\boxed{12.5}")
    assert env.infos["reasoner"]["reward"] == pytest.approx(1.0)
    env.step(program("print(1 / 8 * 100)"))
    assert env.infos["tool"]["reward"] == pytest.approx(1.0) and env.infos["tool"]["agreed"] and env.success


@pytest.mark.parametrize("answer, reply", [
    ("1,234.5", "She earns $1,234.50.\n#### \\boxed{1,234.50}"),  # v1: the list {1, 234.50} (money, GSM8K)
    ("18", "Nine and nine.\n#### **18**"),  # v1: the answer `**18**` (chat models write the final line in bold)
])
def test_gsm8k_final_answers_as_models_write_them_are_right(fresh, tmp_path, answer, reply):
    (tmp_path / "gsm8k.jsonl").write_text(json.dumps({"question": "How much?", "answer": f"#### {answer}"}) + "\n")
    (item,) = load_dataset(tmp_path / "gsm8k.jsonl")
    env = fresh(mode="reasoner", instance=item)
    env.step(reply)
    assert env.infos["reasoner"]["reward"] == pytest.approx(1.0) and env.success


def test_a_tool_that_prints_a_float_in_scientific_notation_is_right(fresh, tmp_path):
    """Python prints a float from 1e16 on (and below 1e-4) with an exponent: v1 read the tool's `1e+20` as no
    number, so a right program earned no answer reward and no agreement."""
    (tmp_path / "gsm8k.jsonl").write_text('{"question": "What is ten to the twentieth?", "answer": "#### 100000000000000000000"}\n')
    (item,) = load_dataset(tmp_path / "gsm8k.jsonl")
    env = fresh(instance=item)
    env.step("#### \\boxed{100000000000000000000}")
    env.step(program("print(10.0 ** 20)"))
    assert env.infos["tool"]["reward"] == pytest.approx(1.0) and env.infos["tool"]["agreed"] and env.success


def test_dataset_with_an_empty_split_names_the_fix(sandbox):
    env = math_v2.raw_env(dataset=[PROBLEM], sandbox=sandbox)
    from llm_marl_envs.core.instances import split_of

    other = next(s for s in ("train", "val", "test") if s != split_of(PROBLEM.key()))
    with pytest.raises(ValueError, match="has no"):
        env.reset(seed=0, options={"split": other})


@pytest.mark.parametrize(
    "kwargs,fix",
    [
        ({"mode": "solo"}, "mode must be one of"),
        ({"max_turns": 0}, "max_turns"),
        ({"difficulty": 5}, "difficulty must be one of"),
        ({"topics": ["geometry"]}, "unknown topics"),
        ({"dataset": "/nonexistent.jsonl"}, "dataset file not found"),
        ({"dataset": [PROBLEM], "difficulty": 1}, "drop them"),
        ({"dataset": []}, "non-empty list"),
        ({"dataset_format": "csv"}, "dataset_format must be one of"),
        ({"dataset_format": "gsm8k"}, "describes a dataset= file"),
        ({"dataset": [PROBLEM], "dataset_format": "gsm8k"}, "describes a dataset= file"),
    ],
)
def test_bad_config_names_the_fix(kwargs, fix):
    with pytest.raises(ValueError, match=fix):
        math_v2.raw_env(**kwargs)


# ------------------------------------------------------------------ parallel API and the oracle


@pytest.mark.parametrize("mode", ["mas", "reasoner", "tool"])
def test_parallel_api(mode, sandbox):
    parallel_api_test(math_v2.parallel_env(mode=mode, sandbox=sandbox), num_cycles=20)


def test_parallel_episode_with_the_oracle(sandbox):
    env = math_v2.parallel_env(sandbox=sandbox)
    oracle = make_oracle("math")
    observations, _ = env.reset(seed=4, options={"split": "test"})
    observations, rewards, terminations, _, infos = env.step({r: oracle.act(r, o) for r, o in observations.items()})
    assert rewards == {"reasoner": pytest.approx(1.0), "tool": pytest.approx(1.0)}
    assert all(terminations.values()) and infos["tool"]["success"]
    assert not env.agents



def test_the_parallel_env_forks(sandbox):
    """`fork()`, which every environment offers, was missing from `parallel_env()` (PettingZoo's AEC-to-parallel
    wrapper has none): the fork is an independent copy at the same state that shares the sandbox."""
    env = math_v2.parallel_env(sandbox=sandbox)
    observations, _ = env.reset(seed=4)
    child = env.fork()
    assert type(child) is type(env) and child.unwrapped is not env.unwrapped
    assert child.unwrapped.sandbox is env.unwrapped.sandbox
    replies = {"reasoner": "#### \\boxed{0}", "tool": "```python\nprint(1)\n```"}
    stepped = child.step(replies)[0]
    assert env.unwrapped.turn == 0 and child.unwrapped.turn == 1
    assert env.step(replies)[0] == stepped


def test_oracle_earns_the_maximum_reward_at_every_difficulty(sandbox):
    oracle = make_oracle("math")
    for difficulty in (1, 2, 3):
        env = math_v2.env(difficulty=difficulty, sandbox=sandbox)
        for seed in range(10):
            result = run_episode(env, oracle, seed=seed, split="test")
            assert result.success and result.turns == 1
            assert result.returns == {"reasoner": pytest.approx(1.0), "tool": pytest.approx(1.0)}
