"""Thinking models (Qwen3, DeepSeek-R1): the no-thinking prompts the papers train with, and reasoning kept out of
the reply an environment reads.

Qwen3's chat template thinks unless it is rendered with `enable_thinking=False`; AT-GRPO trains Qwen3 in that
no-thinking mode. Until 2026-11 the prompts left the switch unset, so a Qwen3 run reasoned at length before every
reply (cut off at --max-new-tokens, scored as malformed), and the `<think>` text reached the environments' parsers.
"""

from __future__ import annotations

import json
from functools import partial

import pytest

from llm_marl.engines.base import GenerationRequest, SamplingParams, split_reasoning
from llm_marl.engines.hf import HFEngine, chat_prompt_ids
from llm_marl.engines.scripted import ScriptedEngine
from llm_marl.models.tiny_random import CHAT_TEMPLATE
from llm_marl.policies import LoRAConfig, PolicySet
from llm_marl.rollout import Task, parallel, rollout
from llm_marl_envs import plan_path_v2

# As Qwen3's template writes them: the generation prompt closes an empty <think> block when enable_thinking is
# false, and the last assistant reply is written after an empty block.
SWITCH_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' and loop.last %}"
    "{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)
EMPTY_BLOCK = "<think>\n\n</think>\n\n"
CHAT = [{"role": "system", "content": "You are the planner."}, {"role": "user", "content": "Move to the goal."}]


@pytest.fixture(scope="module")
def policy():
    policy = PolicySet.from_pretrained("tiny-random", roles=["planner"], policy="shared", lora=LoRAConfig(r=4, alpha=8))
    policy.tokenizer.chat_template = SWITCH_TEMPLATE
    return policy


@pytest.mark.parametrize("text, reasoning, reply", [
    ("#### U", "", "#### U"),
    ("<think>\nGo up first.\n</think>\n\n#### U", "Go up first.", "#### U"),
    ("<think>\n\n</think>\n\n#### U", "", "#### U"),  # Qwen3's empty block
    ("Go up first.\n</think>\n\n#### U", "Go up first.", "#### U"),  # R1's template opens the block in the prompt
    ("<think>a</think>b</think>#### U", "a</think>b", "#### U"),  # the reply follows the last close
    ("<think>\nGo up, then", "Go up, then", ""),  # cut off while reasoning: no reply
    ("", "", ""),
])
def test_split_reasoning(text, reasoning, reply):
    assert split_reasoning(text) == (reasoning, reply)


def test_prompts_are_no_thinking_unless_asked(policy):
    tokenizer = policy.tokenizer
    off, on = chat_prompt_ids(tokenizer, CHAT), chat_prompt_ids(tokenizer, CHAT, thinking=True)
    assert tokenizer.decode(off).endswith("<|im_start|>assistant\n" + EMPTY_BLOCK)
    assert tokenizer.decode(on).endswith("<|im_start|>assistant\n")
    plain = type(tokenizer).from_pretrained(policy.model_path)
    plain.chat_template = CHAT_TEMPLATE  # a template without the switch renders the same either way
    assert chat_prompt_ids(plain, CHAT) == chat_prompt_ids(plain, CHAT, thinking=True)


def test_hf_engine_prompts_as_the_policy_set_says(policy):
    request = GenerationRequest(CHAT, adapter="shared")
    params = SamplingParams(temperature=0.0, max_new_tokens=2)
    try:
        for thinking in (False, True):
            policy.thinking = thinking
            result = HFEngine(policy).generate([request], params)[0]
            assert result.prompt_ids == chat_prompt_ids(policy.tokenizer, CHAT, thinking)
    finally:
        policy.thinking = False


def _planner_task():
    from llm_marl_envs.plan_path.generator import PlanPathInstance
    from llm_marl_envs.plan_path.rules import Grid

    instance = PlanPathInstance(Grid(3, 4, frozenset({(0, 2), (1, 2)})), (0, 0), (1, 3), 6)
    return Task("t", partial(plan_path_v2.raw_env, mode="planner", max_turns=1), seed=0, options={"instance": instance})


@pytest.mark.parametrize("thought, solved", [("<think>\nThe wall is in column 2: go down first.\n</think>\n\n", True),
                                             ("", True),
                                             ("<think>\nThe wall is in column 2, so", False)])
def test_the_environment_reads_the_reply_after_the_reasoning(thought, solved):
    from agents.oracle import make_oracle

    oracle = make_oracle("plan_path")
    answers = []

    def reply(request, k):
        answers.append(oracle.act("planner", {"messages": request.messages, "turn": 0}))
        return thought + answers[-1]

    from llm_marl.trainer import trajectory_records

    engine = ScriptedEngine(reply)
    out = rollout([_planner_task()], parallel(1), engine, sigma={"planner": "p"})
    sample = out.samples[0]
    assert trajectory_records(out)[0]["reasoning"] == sample.reasoning
    assert bool(sample.info.get("success")) is solved and bool(sample.info.get("parse_error")) is not solved
    if solved:
        assert sample.text == answers[0]
        assert sample.reasoning == ("The wall is in column 2: go down first." if thought else "")
    else:
        assert sample.text == "" and sample.reasoning == "The wall is in column 2, so" + answers[0]
    assert len(sample.response_ids) == len(engine._encode(thought + answers[0]))  # the update trains on every token


def test_sft_targets_follow_the_switch(policy):
    from llm_marl.sft import reply_tokens

    messages = [*CHAT, {"role": "assistant", "content": "#### D"}]
    tokenizer = policy.tokenizer
    prompt, target = reply_tokens(tokenizer, messages)
    assert tokenizer.decode(prompt).endswith(EMPTY_BLOCK) and tokenizer.decode(target) == "#### D<|im_end|>"
    prompt, target = reply_tokens(tokenizer, messages, thinking=True)
    assert tokenizer.decode(prompt).endswith("assistant\n") and tokenizer.decode(target) == EMPTY_BLOCK + "#### D<|im_end|>"


def test_a_saved_set_says_how_it_was_prompted_and_eval_follows(policy, tmp_path):
    from llm_marl.train_cli import load_policy

    policy.thinking = True
    try:
        policy.save(tmp_path / "on")
    finally:
        policy.thinking = False
    policy.save(tmp_path / "off")
    assert json.loads((tmp_path / "on" / "policy_set.json").read_text())["thinking"] is True
    load = partial(load_policy, "tiny-random", ["planner"])
    assert load(adapters=tmp_path / "on").thinking is True
    assert load(adapters=tmp_path / "on", thinking=False).thinking is False
    assert load(adapters=tmp_path / "off").thinking is False
    assert load(thinking=True).thinking is True and load().thinking is False
    manifest = json.loads((tmp_path / "off" / "policy_set.json").read_text())
    del manifest["thinking"]  # a set saved before the switch existed was prompted without thinking
    (tmp_path / "off" / "policy_set.json").write_text(json.dumps(manifest))
    assert load(adapters=tmp_path / "off").thinking is False


def test_thinking_flags():
    from llm_marl.cli import build_parser
    from llm_marl.config import ModelConfig, from_args

    args = build_parser().parse_args(["train", "--env", "plan_path", "--thinking"])
    assert from_args(ModelConfig, args).thinking is True
    assert from_args(ModelConfig, build_parser().parse_args(["sft", "--env", "plan_path", "--thinking"])).thinking is True
    assert from_args(ModelConfig, build_parser().parse_args(["train", "--env", "plan_path"])).thinking is False
    for argv, value in ((["--thinking"], True), (["--no-thinking"], False), ([], None)):
        assert build_parser().parse_args(["eval", "--env", "plan_path", *argv]).thinking is value
        assert build_parser().parse_args(["play", "--env", "plan_path", *argv]).thinking is value


# ------------------------------------------------------------------------------ per role
def test_thinking_roles_are_checked_against_the_environment():
    from llm_marl.policies import parse_thinking

    roles = ["tool", "planner"]
    assert parse_thinking(False, "", roles) is False and parse_thinking(True, " ", roles) is True
    assert parse_thinking(False, "planner, planner", roles) == ("planner",)
    assert parse_thinking(False, "tool,planner", roles) == ("tool", "planner")
    with pytest.raises(ValueError, match=r"--thinking-roles names \['reasoner'\].*its roles are \['tool', 'planner'\]"):
        parse_thinking(False, "reasoner", roles)
    with pytest.raises(ValueError, match="give one of them"):
        parse_thinking(True, "planner", roles)


def test_only_the_thinking_roles_prompts_think(policy):
    """The engines ask the policy set role by role (`thinks`); the rollout names the role of each request."""
    params = SamplingParams(temperature=0.0, max_new_tokens=2)
    policy.thinking = ("planner",)
    try:
        assert policy.thinks("planner") and not policy.thinks("tool") and not policy.thinks(None)
        requests = [GenerationRequest(CHAT, adapter="shared", role=role) for role in ("planner", "tool", None)]
        results = HFEngine(policy).generate(requests, params)
        assert [r.prompt_ids for r in results] == [chat_prompt_ids(policy.tokenizer, CHAT, thinking) for thinking in
                                                   (True, False, False)]
    finally:
        policy.thinking = False
    engine = ScriptedEngine(lambda request, k: "#### U")
    rollout([Task("t", plan_path_v2.raw_env, seed=0)], parallel(1), engine, sigma={"tool": "a", "planner": "b"})
    roles = [(r.role, r.tag.agent) for call in engine.calls for r in call]
    assert {role for role, _ in roles} == {"tool", "planner"} and all(role == agent for role, agent in roles)


def test_sft_targets_follow_the_switch_role_by_role(policy):
    from llm_marl.sft import build_examples

    transcripts = [{"messages": [*CHAT, {"role": "assistant", "content": "#### D"}], "agent": role} for role in ("planner", "tool")]
    policy.thinking = ("planner",)
    try:
        examples, _ = build_examples(policy, transcripts)
    finally:
        policy.thinking = False
    decode = policy.tokenizer.decode
    assert [e.role for e in examples] == ["planner", "tool"]
    assert decode(examples[0].prompt_ids).endswith("assistant\n") and decode(examples[1].prompt_ids).endswith(EMPTY_BLOCK)


def test_a_set_saved_with_thinking_roles_keeps_them_and_eval_follows(policy, tmp_path, capsys):
    from llm_marl.cli import main
    from llm_marl.train_cli import load_policy

    policy.thinking = ("planner",)
    try:
        policy.save(tmp_path / "some")
    finally:
        policy.thinking = False
    assert json.loads((tmp_path / "some" / "policy_set.json").read_text())["thinking"] == ["planner"]
    assert load_policy("tiny-random", ["planner"], adapters=tmp_path / "some").thinking == ("planner",)
    out = tmp_path / "eval.json"
    assert main(["eval", "--env", "plan_path", "--adapters", str(tmp_path / "some"), "--n", "1", "--max-new-tokens", "2",
                 "--out", str(out)]) == 0
    assert json.loads(out.read_text())["thinking"] == ["planner"]
    assert main(["eval", "--env", "plan_path", "--adapters", str(tmp_path / "some"), "--n", "1", "--max-new-tokens", "2",
                 "--thinking-roles", "tool", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["thinking"] == ["tool"]
    assert main(["eval", "--env", "plan_path", "--thinking-roles", "reasoner", "--n", "1"]) == 2
    assert "--thinking-roles names ['reasoner']" in capsys.readouterr().err


def test_train_and_sft_take_thinking_roles(tmp_path, capsys):
    from llm_marl.cli import main
    from tests.test_progress import ARGS

    assert main(["train", *ARGS, "--steps", "1", "--thinking-roles", "planner", "--out-dir", str(tmp_path), "--run-name", "r"]) == 0
    assert json.loads((tmp_path / "r" / "adapters" / "policy_set.json").read_text())["thinking"] == ["planner"]
    assert main(["train", *ARGS, "--steps", "1", "--thinking", "--thinking-roles", "planner", "--out-dir", str(tmp_path)]) == 2
    assert "give one of them" in capsys.readouterr().err
    assert main(["sft", "--env", "plan_path", "--model", "tiny-random", "--demos", "1", "--heldout-demos", "0", "--epochs", "1",
                 "--thinking-roles", "planner", "--out-dir", str(tmp_path), "--run-name", "s"]) == 0
    assert json.loads((tmp_path / "s" / "adapters" / "policy_set.json").read_text())["thinking"] == ["planner"]
