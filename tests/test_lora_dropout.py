"""`--lora-dropout` in RL: PEFT's dropout modules started in training mode, so updates dropped activations that
sampling kept and recomputed log-probs other than the sampled ones. A policy set is built in eval mode; `sft`
trains with its dropout."""

from __future__ import annotations

import pytest
import torch

from llm_marl.cli import main
from tests.test_progress import ARGS


def test_lora_dropout_is_said_to_have_no_effect_on_rl_updates(tmp_path, capsys):
    assert main(["train", *ARGS, "--steps", "1", "--lora-dropout", "0.5", "--out-dir", str(tmp_path), "--run-name", "r"]) == 0
    out = capsys.readouterr()
    assert "--lora-dropout 0.5 has no effect here: RL updates run without dropout" in out.out + out.err


def test_rl_updates_recompute_the_sampled_log_probs_despite_lora_dropout():
    """Ratio 1 in an update of one minibatch: its log-probs are those the replies were sampled with (eval mode)."""
    import numpy as np

    from llm_marl.config import OptimConfig
    from llm_marl.loss import LossConfig
    from llm_marl.policies import LoRAConfig, PolicySet
    from llm_marl.trainer import update_policy
    from tests.support.update_samples import synthetic_samples

    policy = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role",
                                       lora=LoRAConfig(r=4, alpha=8, dropout=0.5))
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # B starts at zero, where dropout on the adapter's input changes nothing
    samples = synthetic_samples(policy.tokenizer, np.random.default_rng(1))
    for s in samples:
        s.old_logprobs = policy.response_logprobs([s.prompt_ids], [s.response_ids], s.adapter)[0].tolist()
    optim = OptimConfig(minibatch_size=64, kl_beta=0.0, ratio_level="token", loss_agg="token-mean")
    optimizers = {a: torch.optim.AdamW(policy.trainable_parameters(a), lr=1e-2) for a in policy.adapters}
    metrics = update_policy(policy, optimizers, samples, optim, LossConfig(aggregation="token-mean"), 1.0, "sample",
                            np.random.default_rng(0))
    assert metrics["loss/tool/ratio_max"] == pytest.approx(1.0, abs=1e-5)


def test_a_policy_set_and_the_adapters_it_loads_are_in_eval_mode(tmp_path):
    from llm_marl.policies import LoRAConfig, PolicySet

    lora = LoRAConfig(r=4, alpha=8, dropout=0.5)
    PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role", lora=lora).save(tmp_path)
    policy = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="shared", lora=lora)
    policy.load(tmp_path)  # adds the adapters "tool" and "planner"
    assert set(policy.adapters) == {"shared", "tool", "planner"}
    assert [name for name, module in policy.model.named_modules() if module.training] == []
