"""No silent non-learning (issue 10, item 3): a step without reward variance, an adapter without an
optimiser step, and a reply cut off by the token limit are all reported, in metrics and in words."""

from __future__ import annotations

import json
from functools import partial

import pytest

from llm_marl.algorithms import assign_advantages, get
from llm_marl.engines.base import Completion, SamplingParams
from llm_marl.engines.scripted import ScriptedEngine
from llm_marl.evaluate import evaluate
from llm_marl.rollout import Task, make_tasks, parallel, rollout
from llm_marl.signal import groups_with_variance, run_counts, signal_metrics, step_messages
from llm_marl.trainer import step_metrics, trajectory_records
from llm_marl_envs import plan_path_v2

QUICK = {"height": 4, "width": 4, "wall_density": 0.15, "min_path_length": 2, "max_path_length": 4, "max_turns": 1}


def test_a_step_without_variance_says_so_once_with_the_fix():
    metrics = {"advantage/groups": 4, "advantage/zero_std_groups": 4, "advantage/singleton_groups": 0,
               "reward/parse_error/planner": 1.0, "reward/truncated/planner": 0.0,
               "update/shared/samples": 8, "update/shared/skipped_zero_advantage": 8}
    hints: set[str] = set()
    first = step_messages(metrics, ["shared"], hints, env="plan_path")
    assert first[0].startswith("no learning signal: none of the 4 groups had reward variance")
    assert "no reply followed the answer format" in first[0]
    assert any("llm-marl sft --env plan_path" in m for m in first)
    assert first[-1] == "adapter 'shared' took no optimiser step: all its 8 samples had advantage 0"
    again = step_messages(metrics, ["shared"], hints, env="plan_path")
    assert not any("hint" in m for m in again)  # advice is given once per run
    assert signal_metrics(metrics) == {"signal/groups_with_variance": 0.0, "signal/frac_groups_with_variance": 0.0}
    warm = step_messages(metrics, ["shared"], set(), env="plan_path", warm_started=True)
    hint = next(m for m in warm if m.startswith("hint"))  # a run that was warm-started needs a larger warm start
    assert "--demos" in hint and "--init-adapters RUN_DIR" not in hint


def test_a_learning_step_has_no_messages_and_counts_per_adapter():
    learning = {"advantage/groups": 4, "advantage/zero_std_groups": 1, "advantage/singleton_groups": 1,
                "update/tool/optimizer_steps": 2, "update/planner/samples": 3}
    assert groups_with_variance(learning) == (2, 4)
    assert step_messages(learning, ["tool", "planner"], set()) == [
        "adapter 'planner' took no optimiser step: all its 3 samples had advantage 0"]
    dead = {"advantage/groups": 2, "advantage/zero_std_groups": 2}
    assert run_counts([learning, dead, learning], ["tool", "planner"]) == {
        "steps": 3, "steps_without_signal": 1, "adapter_steps_without_update": {"tool": 1, "planner": 3}}


def _cut_tool_reply(request, k):
    """The tool's program is cut off by the token limit; the planner answers in the format."""
    if "Propose Python code" in request.messages[-1]["content"]:
        text = "```python\nprint('[R, "
        return Completion(text=text, token_ids=list(range(1, 12)), logprobs=[0.0] * 11, finish_reason="length")
    return "#### [R]"


@pytest.mark.parametrize("tokens, reason", [
    ([0, 0, 0], "none of its 3 samples had a reply token"),
    ([0, 2, 2], "its 3 samples had advantage 0 (2) or no reply token (1)")])
def test_an_adapter_whose_replies_had_no_tokens_is_not_said_to_have_advantage_0(tokens, reason):
    import numpy as np

    from llm_marl.config import OptimConfig
    from llm_marl.loss import LossConfig
    from llm_marl.rollout import Sample
    from llm_marl.update import plan_update

    # An empty reply (the engine stopped at once, or the prompt filled the context) keeps its nonzero advantage.
    samples = [Sample(i, "t", f"e{i}", i, 0, "worker", 0, 0, "worker", [], "", [1], [5] * n, [-1.0] * n,
                      advantage=1.0 if n == 0 else 0.0) for i, n in enumerate(tokens)]
    shards, counts = plan_update(samples, OptimConfig(), LossConfig(), "sample", np.random.default_rng(0))
    assert shards == [[]]
    assert counts["update/worker/skipped_empty"] == 1 + (tokens[1] == 0) * 2
    assert step_messages({"advantage/groups": 1, **counts}, ["worker"], set()) == [
        f"adapter 'worker' took no optimiser step: {reason}"]


def test_a_truncated_reply_is_labelled_truncated_not_a_format_error():
    tasks = make_tasks("plan_path", [0, 1], env_kwargs=QUICK)
    out = rollout(tasks, parallel(2), ScriptedEngine(_cut_tool_reply), sampling=SamplingParams(seed=0))
    tool = [s for s in out.samples if s.role == "tool"]
    assert tool and all(s.info["parse_error"] for s in tool)  # the environment cannot parse it...
    metrics = step_metrics(out)
    assert metrics["reward/truncated/tool"] == 1.0  # ...and it is reported as truncated,
    assert metrics["reward/parse_error/tool"] == 0.0  # not as a format error
    assert metrics["reward/truncated/planner"] == 0.0
    records = trajectory_records(out)
    assert {r["truncated"] for r in records if r["role"] == "tool"} == {True}
    assert {r["finish_reason"] for r in records if r["role"] == "planner"} == {"stop"}
    result = evaluate(ScriptedEngine(_cut_tool_reply), "plan_path", n=2, env_kwargs=QUICK)
    assert result["truncated_rate"]["tool"] == 1.0 and result["format_error_rate"]["tool"] == 0.0


class NanOnSeed0(plan_path_v2.raw_env):
    """An environment bug in the episode of seed 0: NaN reward and team_reward, an infinite local term."""

    def step(self, action):
        agent = self.agent_selection
        super().step(action)
        if self.instance_seed == 0:
            self.rewards[agent] = float("nan")
            self.infos[agent]["team_reward"] = float("nan")
            self.infos[agent]["local_terms"] = {**self.infos[agent]["local_terms"], "fmt": float("inf")}


def test_eval_leaves_a_non_finite_reward_out_of_its_means_and_counts_it(monkeypatch):
    """An environment bug in one episode (seed 0: NaN reward and team_reward) made every mean NaN; the means are now
    those of the other episodes, and nonfinite_rewards counts the replies left out."""
    import llm_marl_envs.registry as registry

    engine = ScriptedEngine(lambda request, k: "#### [R]")
    clean = evaluate(engine, "plan_path", n=2, seed=1, env_kwargs=QUICK)  # seeds 1 and 2
    real = registry.make_raw
    monkeypatch.setattr(registry, "make_raw", lambda name, **kw: NanOnSeed0(**kw) if name == "plan_path" else real(name, **kw))
    result = evaluate(engine, "plan_path", n=3, seed=0, env_kwargs=QUICK)  # seeds 0, 1 and 2
    means = ("mean_reward", "final_team_reward", "mean_return")
    assert {k: result[k] for k in means} == {k: clean[k] for k in means}
    assert result["nonfinite_rewards"] == {"planner": 1, "tool": 1} and clean["nonfinite_rewards"] == {}
    json.dumps(result, allow_nan=False)  # every number finite


def _refuse(constant):
    raise ValueError(f"{constant} is not JSON")


def test_a_trajectories_file_is_json_with_a_non_finite_reward_as_null(tmp_path):
    """A NaN reward no credit reads lets the step train; its trajectories file held a bare NaN (and Infinity), which
    jq, JavaScript and strict parsers refuse. Now null, which the run report shows as a missing value."""
    from llm_marl.report import sample_rows
    from llm_marl.runs import RunDir

    tasks = [Task("plan_path/train/0", partial(NanOnSeed0, **QUICK), seed=0, options={"split": "train"})]
    out = rollout(tasks, parallel(1), ScriptedEngine(lambda request, k: "#### [R]"), sampling=SamplingParams(seed=0))
    run = RunDir.create(tmp_path, "plan_path", "grpo", 0)
    run.write_trajectories(1, trajectory_records(out))
    lines = (run.path / "trajectories" / "step_000001.jsonl").read_text().splitlines()
    records = [json.loads(line, parse_constant=_refuse) for line in lines]
    assert len(records) == len(out.samples) == 2
    for record in records:
        assert record["reward"] is None and record["info"]["team_reward"] is None
        terms = record["info"]["local_terms"]
        assert terms.pop("fmt") is None and terms and all(isinstance(v, float) for v in terms.values())
        assert isinstance(record["info"]["local_reward"], float) and record["text"] == "#### [R]"
    assert "<td>–</td>" in sample_rows("run", run.path)  # the project's reader shows a missing reward


def test_grpo_group_without_variance_is_counted():
    tasks = make_tasks("plan_path", [0], env_kwargs={**QUICK, "mode": "planner"})
    out = rollout(tasks, parallel(3), ScriptedEngine(lambda r, k: "no answer"), sampling=SamplingParams(seed=0))
    metrics = step_metrics(out)
    metrics.update(assign_advantages(out, get("grpo"), get("grpo").config_cls(G=3)))
    assert signal_metrics(metrics)["signal/groups_with_variance"] == 0.0
    assert step_messages(metrics, ["shared"], set())[0].startswith("no learning signal")


@pytest.mark.slow
def test_training_reports_a_step_without_signal_in_metrics_log_and_summary(tmp_path):
    """tiny-random writes noise cut off at the token limit: every group is flat, no adapter steps."""
    from llm_marl.config import ModelConfig, OptimConfig, RunConfig, SamplingConfig
    from llm_marl.trainer import TrainConfig, train

    config = TrainConfig(model=ModelConfig(model="tiny-random", lora_r=4, lora_alpha=8),
                         sampling=SamplingConfig(max_new_tokens=8), optim=OptimConfig(lr=1e-3),
                         run=RunConfig(env="plan_path", env_args=QUICK, algo="at-grpo", steps=2, out_dir=str(tmp_path),
                                       run_name="r", progress=False))
    lines: list[str] = []
    run = train(config, log=lines.append)
    metrics = run.metrics()
    assert [m["signal/groups_with_variance"] for m in metrics] == [0.0, 0.0]
    assert all(m["reward/truncated/planner"] == 1.0 for m in metrics)
    assert sum("no learning signal" in line for line in lines) == 2
    assert sum("took no optimiser step" in line for line in lines) == 2
    assert any(line.startswith("step 1/2: success 0.00") for line in lines)
    summary = json.loads((run.path / "summary.json").read_text())
    assert summary["steps_without_signal"] == 2 and summary["adapter_steps_without_update"] == {"shared": 2}
    assert any("steps without learning signal: 2" in line for line in lines)


DEAD_STEP = {"advantage/groups": 4, "advantage/zero_std_groups": 4, "advantage/singleton_groups": 0,
             "reward/parse_error/planner": 0.0, "reward/truncated/planner": 1.0,
             "update/shared/samples": 8, "update/shared/skipped_zero_advantage": 8}


@pytest.mark.parametrize("usable, stepped, blamed", [(0.75, True, True), (0.25, True, False), (0.75, False, False)])
def test_replies_that_turn_unusable_after_an_update_blame_the_update(usable, stepped, blamed):
    """Every reply cut off right after a step whose update had mostly usable replies: that update moved the policy too
    far (seen with --lr 10 from the main job's warm start), and a larger warm start, the usual advice, would not help."""
    before = {"advantage/groups": 4, "advantage/zero_std_groups": 1, "reward/parse_error/planner": 1.0 - usable - 0.05,
              "reward/truncated/planner": 0.05, **({"update/shared/optimizer_steps": 2} if stepped else {})}
    messages = step_messages(DEAD_STEP, ["shared"], set(), warm_started=True, previous=before)
    hints = [m for m in messages if m.startswith("hint")]
    assert len(hints) == 1
    if blamed:
        assert hints[0] == ("hint: in the step before, 75% or more of every role's replies were usable, and its update left "
                            "none: it moved the policy too far; lower --lr and start again")
    else:
        assert "--demos" in hints[0]


def test_an_update_with_a_nonfinite_gradient_is_reported_not_taken():
    metrics = {"advantage/groups": 4, "advantage/zero_std_groups": 1, "update/tool/optimizer_steps": 1,
               "update/tool/skipped_nonfinite": 1, "update/planner/samples": 3, "update/planner/skipped_nonfinite": 2}
    assert step_messages(metrics, ["tool", "planner"], set()) == [
        "adapter 'tool': 1 update(s) skipped because the gradient was not finite (NaN or inf); its weights were kept. Lower --lr",
        "adapter 'planner': 2 update(s) skipped because the gradient was not finite (NaN or inf); its weights were kept. Lower --lr"]


def test_a_nonfinite_gradient_skips_the_step_and_keeps_the_weights(monkeypatch):
    """A loss that overflows (NaN) would write NaN into every weight of the adapter for good: its step is not taken, and
    the metrics count it. The other adapter's steps go on."""
    import math

    import numpy as np
    import torch

    import llm_marl.update as update
    from llm_marl.config import OptimConfig
    from llm_marl.loss import LossConfig
    from llm_marl.policies import LoRAConfig, PolicySet
    from llm_marl.rollout import Sample
    from llm_marl.trainer import update_policy

    policy = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role", lora=LoRAConfig(r=4, alpha=8))
    with torch.no_grad():  # B starts at zero, which makes the first gradients of A zero: move B off it
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01)
    rng = np.random.default_rng(0)
    samples = [Sample(sample_id=i, task_id=f"t{i}", episode_id=f"t{i}", decision_id=i, candidate=0, role=role, turn=0, step=0,
                      adapter=role, messages=[], text="", prompt_ids=[int(x) for x in rng.integers(3, 200, size=5)],
                      response_ids=[int(x) for x in rng.integers(3, 200, size=4)], old_logprobs=[-5.0] * 4,
                      advantage=1.0 if i % 2 else -1.0)
               for i, role in enumerate(["planner"] * 2 + ["tool"] * 8)]
    before = {k: v.detach().clone() for k, v in policy.model.named_parameters() if "lora_" in k}
    real, calls = update.policy_loss, []

    def planner_overflows(*args, **kwargs):
        loss, metrics = real(*args, **kwargs)
        calls.append(1)
        return (loss * float("nan") if len(calls) == 1 else loss), metrics  # adapters go in name order: planner's first

    monkeypatch.setattr(update, "policy_loss", planner_overflows)
    optim = OptimConfig(lr=1e-2, minibatch_size=4, epochs=1, kl_beta=0.0)
    optimizers = {a: torch.optim.AdamW(policy.trainable_parameters(a), lr=optim.lr) for a in policy.adapters}
    metrics = update_policy(policy, optimizers, samples, optim, LossConfig(), 1.0, "sample", np.random.default_rng(0))
    assert metrics["update/planner/skipped_nonfinite"] == 1 and "update/planner/optimizer_steps" not in metrics
    assert metrics["update/tool/optimizer_steps"] == 2 and math.isfinite(metrics["loss/tool/grad_norm"])
    after = {k: v.detach() for k, v in policy.model.named_parameters() if "lora_" in k}
    assert all(torch.equal(after[k], before[k]) for k in before if ".planner." in k)
    assert all(torch.isfinite(v).all() for v in after.values())
    assert any(not torch.equal(after[k], before[k]) for k in before if ".tool." in k)


def test_a_prompt_without_room_is_counted_and_said_not_a_format_error():
    from llm_marl.engines.base import no_room

    def reply(request, k):
        return no_room() if "Propose Python code" in request.messages[-1]["content"] else "#### [R]"

    tasks = make_tasks("plan_path", [0, 1], env_kwargs=QUICK)
    out = rollout(tasks, parallel(2), ScriptedEngine(reply), sampling=SamplingParams(seed=0))
    metrics = step_metrics(out)
    assert metrics["reward/context_overflow/tool"] == 1.0 and metrics["reward/context_overflow/planner"] == 0.0
    assert metrics["reward/parse_error/tool"] == 0.0 and metrics["reward/truncated/tool"] == 0.0
    assert all(s.response_ids == [] and s.info["parse_error"] for s in out.samples if s.role == "tool")
    assert ("prompts longer than the model's context window got no reply (penalised as malformed): tool 100%; shorten the "
            "episodes (fewer turns, smaller instances) or use a model with a longer context") in step_messages(metrics, ["shared"], set())
    result = evaluate(ScriptedEngine(reply), "plan_path", n=2, env_kwargs=QUICK)
    assert result["context_overflow_rate"] == {"planner": 0.0, "tool": 1.0} and result["format_error_rate"]["tool"] == 0.0


def test_a_step_whose_prompts_all_overflow_gets_the_overflow_fix_only():
    """Neither a larger warm start nor a lower --lr makes a prompt fit the context window."""
    dead = {**DEAD_STEP, "reward/truncated/planner": 0.0, "reward/context_overflow/planner": 1.0}
    before = {"advantage/groups": 4, "advantage/zero_std_groups": 1, "reward/parse_error/planner": 0.1,
              "reward/truncated/planner": 0.0, "update/shared/optimizer_steps": 2}
    for previous in (None, before):
        messages = step_messages(dead, ["shared"], set(), previous=previous)
        assert "no prompt fit the model's context window" in messages[0]
        assert not any(m.startswith("hint") for m in messages)
        assert any(m.startswith("prompts longer than the model's context window got no reply") for m in messages)
