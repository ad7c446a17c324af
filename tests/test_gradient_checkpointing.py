"""`--gradient-checkpointing`: the update's (and sft's) passes with gradient recompute each decoder layer's activations
in the backward pass instead of keeping them: the same steps with less memory, and sampling untouched."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from llm_marl.config import OptimConfig
from llm_marl.loss import LossConfig
from llm_marl.trainer import update_dpo, update_policy
from tests.support.update_samples import adapter_weights, synthetic_samples, tiny_policy


def _shared_prompt_samples(tokenizer):
    """`synthetic_samples` where pairs of replies answer one prompt (a decision's candidates), so that the update
    shares prompts when it can."""
    samples = synthetic_samples(tokenizer, np.random.default_rng(1))
    for i in range(1, 10, 2):
        samples[i].prompt_ids = list(samples[i - 1].prompt_ids)
    return samples


@pytest.fixture
def recomputed(monkeypatch):
    """`recomputed(policy)`: a list that gets one entry per decoder-layer call made inside `backward()`, i.e. by a
    checkpointed layer running again (a layer whose activations were kept never runs there)."""
    inside = []
    backward = torch.Tensor.backward

    def flagged(self, *args, **kwargs):
        inside.append(True)
        try:
            return backward(self, *args, **kwargs)
        finally:
            inside.pop()

    monkeypatch.setattr(torch.Tensor, "backward", flagged)

    def watch(policy):
        calls = []
        for layer in policy.checkpoint_layers():
            layer.register_forward_pre_hook(lambda module, args: calls.append(1) if inside else None)
        return calls

    return watch


def _update(samples, optim, loss, segment, recomputed):
    policy = tiny_policy(dtype="float64")  # float64: what is left of a difference is summation order only
    calls = recomputed(policy)
    optimizers = {a: torch.optim.AdamW(policy.trainable_parameters(a), lr=optim.lr) for a in policy.adapters}
    metrics = update_policy(policy, optimizers, copy.deepcopy(samples), optim, loss, 1.0, segment, np.random.default_rng(7))
    return adapter_weights(policy), metrics, len(calls), policy


@pytest.mark.parametrize("aggregation, segment, ratio, beta", [
    ("token-mean", "sample", "token", 0.0), ("seq-mean", "episode", "sequence", 0.0), ("token-mean", "sample", "token", 0.04)])
@pytest.mark.parametrize("micro", [0, 1])
@pytest.mark.parametrize("shared", [False, True], ids=["own prompts", "shared prompts"])
def test_checkpointing_takes_the_same_step(aggregation, segment, ratio, beta, micro, shared, recomputed):
    """Both runs do the same arithmetic, also where replies share a prompt (its keys and values replayed)."""
    optim = OptimConfig(lr=5e-2, minibatch_size=6, epochs=2, micro_batch_size=micro, kl_beta=beta, ratio_level=ratio,
                        loss_agg=aggregation)
    loss = LossConfig(aggregation=aggregation, ratio_level=ratio, beta=beta)
    tokenizer = tiny_policy().tokenizer
    samples = _shared_prompt_samples(tokenizer) if shared else synthetic_samples(tokenizer, np.random.default_rng(1))
    kept, expected, kept_calls, _ = _update(samples, optim, loss, segment, recomputed)
    again, got, calls, policy = _update(samples, dataclasses.replace(optim, gradient_checkpointing=True), loss, segment, recomputed)
    assert kept_calls == 0 and calls > 0  # the layers ran again in the backward passes
    initial = tiny_policy(dtype="float64").model.state_dict()
    assert any(not torch.equal(kept[name], initial[name]) for name in kept)  # steps were taken
    for name in kept:
        torch.testing.assert_close(again[name], kept[name], atol=1e-9, rtol=1e-9)
    assert got.keys() == expected.keys()
    for key in expected:
        assert got[key] == pytest.approx(expected[key], rel=1e-6, abs=1e-9), key
    assert all(not layer.training and not layer.gradient_checkpointing for layer in policy.checkpoint_layers())


@pytest.mark.parametrize("replayable", [True, False], ids=["replayed cache", "no replay"])
def test_checkpointing_runs_only_inside_its_block(recomputed, monkeypatch, replayable):
    """Inside the block each layer runs again in backward(); a shared prompt runs once where its cache can be
    replayed, else with every row. Outside nothing is recomputed and the cache is transformers' own (sampling)."""
    import llm_marl.models.kv_replay

    monkeypatch.setattr(llm_marl.models.kv_replay, "replayable", lambda config: replayable)
    policy = tiny_policy()
    again, calls = recomputed(policy), []
    for layer in policy.checkpoint_layers():
        layer.register_forward_pre_hook(lambda module, args: calls.append(1))
    prompts, replies = [[5, 6, 7, 8], [5, 6, 7, 8], [9, 10]], [[11, 12, 13], [14], [15, 16]]
    layers = len(policy.checkpoint_layers())

    def passes(checkpointing):
        calls.clear(), again.clear()
        with policy.checkpointing(checkpointing):
            logprobs = policy.response_logprobs(prompts, replies, "tool", grad=True)
        logprobs.sum().backward()
        return logprobs.detach(), len(calls) - len(again), len(again)

    inside, forward, backward = passes(True)
    passes_inside = 2 if replayable else 1  # the prompts' pass and the replies' pass over their cache, or one of every row
    assert (forward, backward) == (passes_inside * layers, passes_inside * layers)
    outside, forward, backward = passes(False)
    assert (forward, backward) == (2 * layers, 0)
    torch.testing.assert_close(inside, outside)
    assert not policy._checkpointing
    assert all(not layer.training and not layer.gradient_checkpointing and "_can_checkpoint_with_cache" not in vars(layer)
               for layer in policy.checkpoint_layers())


def test_only_caches_of_dynamic_layers_are_replayed():
    from transformers import Qwen2Config, Qwen3NextConfig

    from llm_marl.models.kv_replay import replayable

    assert replayable(tiny_policy().model.get_base_model().config)
    assert replayable(Qwen2Config(num_hidden_layers=2, use_sliding_window=True, sliding_window=4, max_window_layers=0))
    assert not replayable(Qwen3NextConfig(num_hidden_layers=2, layer_types=["linear_attention", "full_attention"]))


def test_sliding_window_prompts_are_replayed(recomputed):
    """A model with a sliding-window layer (a window shorter than the prompts, so that the prompt's cache keeps only
    its last tokens there) runs a shared prompt once, under checkpointing too, and gets the log-probs and gradients
    of every reply run with its own prompt, without checkpointing."""
    from tests.support.update_samples import tiny_sliding_policy

    policy = tiny_sliding_policy(window=3, dtype="float64")
    assert policy._replays_cache()
    with torch.no_grad():  # adapters that change the replies' log-probs, so that their gradients reach every layer
        for name, parameter in policy.model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.linspace(-0.05, 0.05, parameter.numel(), dtype=parameter.dtype).view_as(parameter))
    again, calls = recomputed(policy), []
    for layer in policy.checkpoint_layers():
        layer.register_forward_pre_hook(lambda module, args: calls.append(1))
    prompts = [[5, 6, 7, 8, 9, 10, 11], [5, 6, 7, 8, 9, 10, 11], [9, 10], [12, 13, 14, 15, 16]]
    replies = [[11, 12, 13, 20, 21], [14], [15, 16, 17, 18, 19, 22], [30, 31]]

    def passes(checkpointing, share):
        policy.model.zero_grad(set_to_none=True)
        calls.clear(), again.clear()
        with policy.checkpointing(checkpointing):
            logprobs = policy.response_logprobs(prompts, replies, "tool", grad=True, share_prompts=share)
        logprobs.sum().backward()
        grads = {name: p.grad.clone() for name, p in policy.model.named_parameters() if p.grad is not None}
        return logprobs.detach(), grads, len(calls) - len(again), len(again)

    layers = len(policy.checkpoint_layers())
    expected, expected_grads, _, _ = passes(False, share=False)
    for checkpointing in (True, False):  # transformers' own cache without checkpointing
        got, grads, forward, backward = passes(checkpointing, share=True)
        # the prompts' pass and the replies' pass, each run again under checkpointing
        assert (forward, backward) == (2 * layers, 2 * layers if checkpointing else 0)
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)
        # the tool adapter's A and B in q, k, v, o, gate, up and down
        assert grads.keys() == expected_grads.keys() and len(grads) == layers * 7 * 2
        for name in grads:
            torch.testing.assert_close(grads[name], expected_grads[name], atol=1e-6, rtol=1e-6)
    # The window bites: the same weights attending to every token give other log-probs.
    full = tiny_policy(dtype="float64")
    full.model.load_state_dict(policy.model.state_dict())
    assert not torch.allclose(full.response_logprobs(prompts, replies, "tool", share_prompts=False), expected, atol=1e-3)


@pytest.mark.parametrize("shared", [False, True], ids=["own prompts", "shared prompts"])
def test_the_lm_head_runs_in_chunks_where_it_can(monkeypatch, recomputed, shared):
    """Without gradient, and with it under checkpointing, the LM head's rows run a chunk at a time (the logits of
    the others are not held); the log-probs and gradients are those of one pass."""
    import llm_marl.policies

    policy = tiny_policy(dtype="float64")
    head = policy.model.get_base_model().get_output_embeddings()
    rows, again = [], recomputed(policy)
    head.register_forward_pre_hook(lambda module, args: rows.append(args[0].shape[0]))
    prompts = [[5, 6, 7, 8], [5, 6, 7, 8] if shared else [9, 8, 7], [9, 10]]
    replies = [[11, 12, 13, 14, 15], [14, 16], [15, 16, 17, 18]]

    def run(grad, checkpointing):
        policy.model.zero_grad(set_to_none=True)
        rows.clear(), again.clear()
        with policy.checkpointing(checkpointing):
            logprobs = policy.response_logprobs(prompts, replies, "tool", grad=grad)
        if grad:
            (logprobs * torch.arange(logprobs.numel()).reshape(logprobs.shape)).sum().backward()
        gradient = [p.grad.clone() for p in policy.trainable_parameters("tool")] if grad else []
        return logprobs.detach(), gradient, list(rows)

    whole, whole_grad, whole_rows = run(True, True)
    assert whole_rows == [11]  # 11 rows fit in a chunk: one pass, its logits kept for backward()
    monkeypatch.setattr(llm_marl.policies, "LOGIT_CHUNK_BYTES", 4 * head.weight.shape[0] * 3)  # 3 rows a chunk
    assert run(True, False)[2] == [11]  # the backward pass needs every row's log-softmax: no chunks
    plain, _, plain_rows = run(False, False)
    assert plain_rows == [3, 3, 3, 2]
    torch.testing.assert_close(plain, whole, atol=1e-12, rtol=0)
    chunked, chunked_grad, chunked_rows = run(True, True)
    assert chunked_rows[:4] == [3, 3, 3, 2] and sorted(chunked_rows[4:]) == [2, 3, 3, 3]  # each chunk again in backward()
    torch.testing.assert_close(chunked, whole, atol=1e-12, rtol=0)
    for got, expected in zip(chunked_grad, whole_grad):
        torch.testing.assert_close(got, expected, atol=1e-9, rtol=1e-7)


def test_sft_takes_the_same_steps_with_checkpointing(monkeypatch, recomputed):
    """sft trains with dropout (train mode): the recompute draws the same dropout masks. Distinct prompts, so that
    both runs draw their masks for the same passes. SGD, so that the step is proportional to the gradient."""
    from llm_marl.policies import LoRAConfig, PolicySet
    from llm_marl.sft import Example, supervised_finetune

    monkeypatch.setattr(torch.optim, "AdamW", lambda params, lr, weight_decay: torch.optim.SGD(params, lr=lr))
    rng = np.random.default_rng(3)
    examples = [Example("shared", "tool", [int(x) for x in rng.integers(3, 200, size=5 + i)],
                        [int(x) for x in rng.integers(3, 200, size=3 + i)]) for i in range(4)]
    weights, calls = [], []
    for checkpointing in (False, True):
        policy = PolicySet.from_pretrained("tiny-random", roles=["tool"], policy="shared", seed=0, dtype="float64",
                                           lora=LoRAConfig(dropout=0.3))
        calls.append(recomputed(policy))
        initial = torch.cat([p.detach().flatten() for p in policy.trainable_parameters("shared")])
        torch.manual_seed(5)
        supervised_finetune(policy, examples, epochs=2, batch_size=4, micro_batch_size=4, gradient_checkpointing=checkpointing)
        weights.append(torch.cat([p.detach().flatten() for p in policy.trainable_parameters("shared")]))
        assert policy.model.training is False
    assert not calls[0] and calls[1]
    assert not torch.equal(weights[0], initial)
    torch.testing.assert_close(weights[1], weights[0], rtol=1e-9, atol=1e-12)


def test_dpo_takes_the_same_step_with_checkpointing(recomputed):
    from types import SimpleNamespace

    samples = _shared_prompt_samples(tiny_policy().tokenizer)
    pairs = [SimpleNamespace(chosen=samples[i], rejected=dataclasses.replace(samples[i + 1], prompt_ids=samples[i].prompt_ids))
             for i in (0, 2, 4)]
    weights, calls = [], []
    for checkpointing in (False, True):
        policy = tiny_policy(dtype="float64")
        calls.append(recomputed(policy))
        optimizers = {a: torch.optim.SGD(policy.trainable_parameters(a), lr=5e-2) for a in policy.adapters}
        for _ in range(2):  # the second step moves LoRA's A too (B starts at zero)
            update_dpo(policy, optimizers, pairs, 0.1, OptimConfig(gradient_checkpointing=checkpointing), 1.0)
        weights.append(adapter_weights(policy))
    assert not calls[0] and calls[1]
    assert any(not torch.equal(weights[0][name], tiny_policy(dtype="float64").model.state_dict()[name]) for name in weights[0])
    for name in weights[0]:
        torch.testing.assert_close(weights[1][name], weights[0][name], atol=1e-7, rtol=1e-7)


def test_a_model_without_checkpointable_layers_is_refused(monkeypatch):
    import transformers.modeling_layers

    policy = tiny_policy()
    monkeypatch.setattr(transformers.modeling_layers, "GradientCheckpointingLayer", type("Unused", (torch.nn.Module,), {}))
    with pytest.raises(ValueError, match="run without --gradient-checkpointing"):
        policy.checkpoint_layers()
    with pytest.raises(ValueError, match="run without --gradient-checkpointing"), policy.checkpointing():
        pass
    assert not policy._checkpointing


@pytest.mark.slow
def test_train_and_sft_run_with_gradient_checkpointing(tmp_path):
    import json

    from llm_marl.cli import main
    from tests.test_sft import TINY_ARGS

    common = ["--env", "plan_path", *TINY_ARGS, "--model", "tiny-random", "--lora-r", "4", "--lora-alpha", "8", "--out-dir",
              str(tmp_path), "--gradient-checkpointing"]
    # The KL term trains replies whose advantage is 0 too, so the step takes an update whatever the rewards.
    assert main(["train", "--algo", "at-grpo", *common, "--steps", "1", "--max-new-tokens", "8", "--kl-beta", "0.04",
                 "--no-progress", "--run-name", "rl"]) == 0
    assert json.loads((tmp_path / "rl" / "config.json").read_text())["optim"]["gradient_checkpointing"] is True
    metrics = [json.loads(line) for line in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["update/shared/optimizer_steps"] > 0
    assert main(["sft", *common, "--demos", "2", "--heldout-demos", "0", "--epochs", "1", "--run-name", "sft"]) == 0
    assert json.loads((tmp_path / "sft" / "config.json").read_text())["sft"]["gradient_checkpointing"] is True


@pytest.mark.parametrize("command", [["train", "--algo", "at-grpo", "--steps", "1", "--no-progress"], ["sft", "--demos", "1"]])
def test_train_and_sft_refuse_a_model_they_cannot_checkpoint_at_once(tmp_path, monkeypatch, capsys, command):
    import transformers.modeling_layers

    from llm_marl.cli import main
    from tests.test_sft import TINY_ARGS

    tiny_policy()  # the model's classes exist (subclassing the real class) before the class is replaced
    monkeypatch.setattr(transformers.modeling_layers, "GradientCheckpointingLayer", type("Unused", (torch.nn.Module,), {}))
    code = main([*command, "--env", "plan_path", *TINY_ARGS, "--model", "tiny-random", "--out-dir", str(tmp_path),
                 "--gradient-checkpointing"])
    assert code != 0
    assert "Qwen2ForCausalLM has no layers transformers can checkpoint; run without --gradient-checkpointing" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # refused before a run directory was made
