"""One training step of MHGPO (each sampling) on mass_v4 and of SHARP on deep_search_v3 with tiny-random,
`--credit shapley` with the DPO failure route, and the CLI's paper defaults (issue 6).

MHGPO runs through the real HF engine. tiny-random's replies earn nearly constant rewards, so
the SHARP and Shapley steps sample from scripted agents (the paper's case studies) through the
trainer's `engine_factory`, with the policy's own tokenizer: the update then sees real credit
differences, and the trainer recomputes the old log-probs with its model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from llm_marl.algorithms.mhgpo import Config as MHGPOConfig
from llm_marl.algorithms.mhgpo import ForkOn
from llm_marl.config import ModelConfig, OptimConfig, RunConfig, SamplingConfig
from llm_marl.credit.team import CreditConfig
from llm_marl.rollout import make_tasks
from llm_marl.trainer import TrainConfig, step_seeds, train
from llm_marl_envs import mass_v4
from tests.test_credit_team import engine_for
from tests.test_sharp import case_study_engine, gold_of


def config(out: Path, env: str, algo: str, envs: int = 2, env_args: dict | None = None, credit: CreditConfig | None = None,
           **algo_kw) -> TrainConfig:
    return TrainConfig(
        model=ModelConfig(model="tiny-random", lora_r=4, lora_alpha=8),
        sampling=SamplingConfig(temperature=1.0, max_new_tokens=24),
        optim=OptimConfig(lr=5e-3, minibatch_size=16, kl_beta=0.001 if algo == "mhgpo" else 0.0,
                          ratio_level="sequence" if algo == "sharp" else "token", loss_agg="seq-mean"),
        run=RunConfig(env=env, env_args=env_args or {}, algo=algo, steps=1, envs_per_step=envs, seed=0, out_dir=str(out),
                      progress=False),
        algo=algo_kw or None, credit=credit or CreditConfig(),
    )


def lora_b_moved(run_path: Path) -> bool:
    tensors = load_file(str(run_path / "adapters" / "shared" / "adapter_model.safetensors"))
    return any(float(t.abs().sum()) > 0 for name, t in tensors.items() if "lora_B" in name)


def expected_completions(sampling: str, G: int, tasks) -> int:
    """Replies sampled by fork_on on the 3-agent chain: j prefix replies before the fork agent (index j), then G per agent."""
    env = mass_v4.raw_env()
    env.reset(seed=0)
    plan = ForkOn(MHGPOConfig(G=G, sampling=sampling))
    return sum(j + G * (3 - j) for t in tasks for j in (["rewriter", "reranker", "answerer"].index(f) for f in plan.fork_agents(t, env)))


@pytest.mark.parametrize("sampling", ["is", "fof", "rr"])
def test_one_mhgpo_step_per_sampling_on_mass(tmp_path, sampling):
    run = train(config(tmp_path, "mass", "mhgpo", G=2, sampling=sampling), log=lambda *_: None)
    [metrics] = run.metrics()
    tasks = make_tasks("mass", step_seeds(0, 1, 2), split="train")
    assert metrics["rollout/completions"] == expected_completions(sampling, 2, tasks)
    assert metrics["samples/trainable"] == 2 * 3 * 2  # IS: n × G per query; FoF/RR: every reply of the G lines
    assert metrics["rollout/counterfactual_completions"] == 0
    # β = 0.001 > 0: every sample enters the loss (the KL term), none is skipped.
    assert metrics["update/shared/skipped_zero_advantage"] == 0 and "loss/shared/kl_ref" in metrics
    records = [json.loads(line) for line in (run.path / "trajectories" / "step_000001.jsonl").read_text().splitlines()]
    assert sum(r["trainable"] for r in records) == 12 and all(r["group_key"] != "None" for r in records if r["trainable"])


def test_one_sharp_step_on_deep_search_logs_counterfactual_generations(tmp_path):
    cfg = config(tmp_path, "deep_search", "sharp", envs=1, env_args={"max_calls": 2}, G=2)
    tasks = make_tasks("deep_search", step_seeds(0, 1, 1), split="train", env_kwargs={"max_calls": 2})
    gold = {t.task_id: gold_of(t) for t in tasks}
    run = train(cfg, log=lambda *_: None, engine_factory=lambda policy: case_study_engine(gold, policy.tokenizer))
    [metrics] = run.metrics()
    assert metrics["rollout/counterfactual_episodes"] == 2
    assert metrics["rollout/counterfactual_completions"] == 2 and metrics["rollout/counterfactual_fixed_replies"] == 2
    assert metrics["reward/success_rate"] == 0.5  # replays are not counted as played episodes
    assert metrics["advantage/members"] == 4 and metrics["advantage/zero_std_groups"] == 0
    assert lora_b_moved(run.path)


def test_credit_shapley_with_the_dpo_failure_route(tmp_path):
    cfg = config(tmp_path, "mass", "mhgpo", envs=1, G=2, sampling="fof",
                 credit=CreditConfig(credit="shapley", credit_level="agent", dpo_beta=0.1))
    [task] = make_tasks("mass", step_seeds(0, 1, 1), split="train")
    run = train(cfg, log=lambda *_: None, engine_factory=lambda policy: _tokenized(engine_for(task, bad_reranker_on="g1"), policy))
    [metrics] = run.metrics()
    assert metrics["rollout/counterfactual_episodes"] == 2 * 7  # exact Shapley: 2^3 - 1 replays per episode
    assert metrics["dpo/pairs"] == 1 and metrics["dpo/failed_episodes"] == 1
    # The DPO step runs after the policy-gradient step, so π already differs from the reference: loss ≠ log 2.
    assert 0 < metrics["dpo/shared/loss"] < 2 and metrics["dpo/shared/loss"] != pytest.approx(float(torch.log(torch.tensor(2.0))))
    assert lora_b_moved(run.path)
    saved = json.loads((run.path / "config.json").read_text())
    assert saved["credit"]["credit"] == "shapley"


def _tokenized(engine, policy):
    engine.tokenizer = policy.tokenizer
    return engine


def test_cli_applies_each_papers_loss_defaults(tmp_path):
    from llm_marl.cli import main

    for algo, env, extra, expected in [
        ("mhgpo", "mass", ["--sampling", "rr", "--G", "2"], {"kl_beta": 0.001, "loss_agg": "seq-mean"}),
        ("sharp", "deep_search", ["--G", "2", "--env-arg", "max_calls=1"], {"ratio_level": "sequence", "loss_agg": "seq-mean"}),
        ("matpo", "mass", ["--G", "2", "--planner-role", "answerer"], {"kl_beta": 0.0, "ratio_level": "token"}),
    ]:
        assert main(["train", "--algo", algo, "--env", env, "--model", "tiny-random", "--steps", "1", "--max-new-tokens", "8",
                     "--out-dir", str(tmp_path), "--run-name", algo, "--no-progress", *extra]) == 0
        saved = json.loads((tmp_path / algo / "config.json").read_text())
        assert {k: saved["optim"][k] for k in expected} == expected
    assert main(["train", "--algo", "mhgpo", "--env", "mass", "--model", "tiny-random", "--kl-beta", "0", "--steps", "1",
                 "--max-new-tokens", "8", "--out-dir", str(tmp_path), "--run-name", "flag", "--no-progress"]) == 0
    assert json.loads((tmp_path / "flag" / "config.json").read_text())["optim"]["kl_beta"] == 0.0  # a flag wins
    assert main(["train", "--algo", "sharp", "--env", "mass", "--model", "tiny-random"]) == 2  # no delegation
    assert main(["train", "--algo", "matpo", "--env", "mass", "--model", "tiny-random"]) == 2  # no planner: name the role


def test_readme_credit_commands_run_with_a_tiny_model(tmp_path):
    """The README's MHGPO / SHARP / --credit shapley lines, run as written plus a tiny model and one short step."""
    import re
    import shlex

    from llm_marl.cli import main

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    lines = [line for line in re.findall(r"^llm-marl train .*$", readme, re.M)
             if re.search(r"--algo (mhgpo|sharp)|--credit shapley", line)]
    assert len(lines) == 3
    for i, line in enumerate(lines):
        argv = shlex.split(line)[1:] + ["--model", "tiny-random", "--steps", "1", "--G", "2", "--max-new-tokens", "8",
                                        "--out-dir", str(tmp_path), "--run-name", f"r{i}", "--no-progress"]
        assert main(argv) == 0, line
        assert json.loads((tmp_path / f"r{i}" / "metrics.jsonl").read_text().splitlines()[0])["step"] == 1


def test_loss_segments_are_never_split_across_minibatches():
    import numpy as np

    from llm_marl.rollout import Sample
    from llm_marl.trainer import loss_units, minibatches

    def sample(i, episode, role):
        return Sample(i, "t", episode, i, 0, role, 0, 0, "shared", [], "", [], [1], [0.0])

    samples = [sample(0, "e0", "planner"), sample(1, "e0", "worker_0"), sample(2, "e0", "planner"), sample(3, "e1", "planner"),
               sample(4, "e1", "worker_0"), sample(5, "e1", "worker_0")]
    units = loss_units(samples, "episode-agent")
    assert [[s.sample_id for s in u] for u in units] == [[0, 2], [1], [3], [4, 5]]
    for seed in range(20):
        batches = minibatches(units, np.random.default_rng(seed).permutation(len(units)), 2)
        keys = [{(s.episode_id, s.role) for s in b} for b in batches]
        assert sum(len(b) for b in batches) == 6 and all(len(a & b) == 0 for i, a in enumerate(keys) for b in keys[i + 1:])
    assert [len(b) for b in minibatches(loss_units(samples, "sample"), range(6), 4)] == [4, 2]


def test_replies_to_one_prompt_share_a_minibatch():
    """The K candidates of a decision (one prompt) form one unit, so the update runs their prompt once."""
    import numpy as np

    from llm_marl.rollout import Sample
    from llm_marl.trainer import loss_units, minibatches

    def sample(i, prompt, episode):
        return Sample(i, "t", episode, i, 0, "tool", 0, 0, "shared", [], "", prompt, [1], [0.0])

    samples = [sample(0, [7, 8], "e0"), sample(1, [9], "e0"), sample(2, [7, 8], "e1"), sample(3, [7, 8], "e2"), sample(4, [5], "e2")]
    assert [[s.sample_id for s in u] for u in loss_units(samples, "sample")] == [[0, 2, 3], [1], [4]]
    assert [[s.sample_id for s in u] for u in loss_units(samples, "sample", share_prompts=False)] == [[0], [1], [2], [3], [4]]
    # Episode segments and prompts join transitively: e0 and e1 share [7, 8], e2 too.
    assert [[s.sample_id for s in u] for u in loss_units(samples, "episode")] == [[0, 1, 2, 3, 4]]
    for seed in range(5):
        batches = minibatches(loss_units(samples, "sample"), np.random.default_rng(seed).permutation(3), 2)
        assert any({0, 2, 3} <= {s.sample_id for s in b} for b in batches)


def test_resume_repeats_rr_draws_regrouping_and_mc_permutations(tmp_path):
    """A run stopped after step 1 and resumed equals an uninterrupted one: RR's fork draws, the
    regrouping shuffle and the Monte Carlo permutations derive from task and episode ids."""
    from llm_marl.cli import main

    def args(name: str, steps: int) -> list[str]:
        return ["train", "--algo", "mhgpo", "--env", "mass", "--sampling", "rr", "--G", "2", "--model", "tiny-random",
                "--credit", "shapley", "--shapley-estimator", "mc", "--shapley-permutations", "2", "--envs-per-step", "3",
                "--steps", str(steps), "--max-new-tokens", "8", "--lr", "5e-3", "--deterministic", "--no-progress",
                "--out-dir", str(tmp_path), "--run-name", name]

    assert main(args("whole", 2)) == 0
    assert main(args("cut", 1)) == 0
    assert main(["train", "--resume", str(tmp_path / "cut"), "--steps", "2", "--no-progress"]) == 0

    def metrics(name: str) -> list[dict]:
        rows = [json.loads(x) for x in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in m.items() if not k.startswith("perf/")} for m in rows]

    whole, cut = metrics("whole"), metrics("cut")
    assert len(whole) == len(cut) == 2 and cut == whole
    assert whole[1]["rollout/counterfactual_episodes"] > 0
