"""`--micro-batch-size`: a minibatch's forward/backward passes split into smaller ones, gradients accumulated, for
the same optimiser step (less activation memory for long replies)."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from llm_marl.config import OptimConfig
from llm_marl.loss import LossConfig
from llm_marl.trainer import update_policy
from llm_marl.update import micro_batches
from tests.support.update_samples import adapter_weights, synthetic_samples, tiny_policy


def _update(samples, optim, loss, segment):
    # float64, so that what is left of the difference (summation order) is far below the tolerance.
    policy = tiny_policy(dtype="float64")
    passes = []
    forward = policy.response_logprobs

    def counted(prompts, *args, **kwargs):
        passes.append(len(prompts))
        return forward(prompts, *args, **kwargs)

    policy.response_logprobs = counted
    optimizers = {a: torch.optim.AdamW(policy.trainable_parameters(a), lr=optim.lr) for a in policy.adapters}
    metrics = update_policy(policy, optimizers, copy.deepcopy(samples), optim, loss, 1.0, segment, np.random.default_rng(7))
    return adapter_weights(policy), metrics, passes


@pytest.mark.parametrize("aggregation, segment, ratio, beta", [
    ("token-mean", "sample", "token", 0.0), ("seq-mean", "episode", "token", 0.0), ("seq-sum", "sample", "token", 0.0),
    ("seq-mean", "episode", "sequence", 0.0), ("token-mean", "sample", "token", 0.04)])
@pytest.mark.parametrize("micro", [1, 3])
def test_micro_batches_take_the_same_step(aggregation, segment, ratio, beta, micro):
    optim = OptimConfig(lr=5e-2, minibatch_size=6, epochs=2, kl_beta=beta, ratio_level=ratio, loss_agg=aggregation)
    loss = LossConfig(aggregation=aggregation, ratio_level=ratio, beta=beta)
    samples = synthetic_samples(tiny_policy().tokenizer, np.random.default_rng(1))
    whole, expected, passes = _update(samples, optim, loss, segment)
    split, got, micro_passes = _update(samples, dataclasses.replace(optim, micro_batch_size=micro), loss, segment)
    assert sum(passes) == sum(micro_passes) and max(micro_passes) <= max(micro, 2)  # episodes of 2 samples stay whole
    assert len(micro_passes) > len(passes)  # the minibatches were split
    for name in whole:
        torch.testing.assert_close(split[name], whole[name], atol=1e-9, rtol=1e-9)
    assert got.keys() == expected.keys()
    for key in expected:
        assert got[key] == pytest.approx(expected[key], rel=1e-6, abs=1e-9), key


def test_micro_batches_keep_loss_units_whole():
    from llm_marl.rollout import Sample

    def sample(i, prompt, episode):
        return Sample(sample_id=i, task_id="t", episode_id=episode, decision_id=i, candidate=0, role="tool", turn=0, step=0,
                      adapter="tool", messages=[], text="", prompt_ids=prompt, response_ids=[5], old_logprobs=[-1.0])

    samples = [sample(0, [1], "a"), sample(1, [1], "b"), sample(2, [2], "c"), sample(3, [3], "d"), sample(4, [3], "e")]
    ids = lambda batches: [[s.sample_id for s in b] for b in batches]  # noqa: E731
    assert ids(micro_batches(samples, 0, "sample", True)) == [[0, 1, 2, 3, 4]]
    assert ids(micro_batches(samples, 2, "sample", True)) == [[0, 1], [2], [3, 4]]  # a shared prompt is one unit
    assert ids(micro_batches(samples, 1, "sample", True)) == [[0, 1], [2], [3, 4]]  # a unit larger than the size
    assert ids(micro_batches(samples, 2, "sample", False)) == [[0, 1], [2, 3], [4]]
    assert micro_batches([], 2, "sample", True) == []


def test_micro_batch_size_must_not_be_negative():
    with pytest.raises(ValueError, match="--micro-batch-size must be >= 0"):
        OptimConfig(micro_batch_size=-1)


@pytest.mark.parametrize("aggregation, ratio", [("seq-mean", "token"), ("seq-mean", "sequence"), ("seq-sum", "sequence")])
def test_a_zero_advantage_reply_left_out_of_the_update_leaves_its_segment_s_gradient_unchanged(aggregation, ratio):
    """A reply with advantage 0 is left out only with its whole loss segment: its tokens count in the segment's
    normaliser (seq-mean) and in its sequence-level ratio, so leaving it out would reweight or change the rest."""
    from llm_marl.rollout import Sample

    def sample(i, episode, advantage, n):
        return Sample(sample_id=i, task_id="t", episode_id=episode, decision_id=i, candidate=0, role="tool", turn=0, step=0,
                      adapter="tool", messages=[], text="", prompt_ids=[3 + i, 4 + i], response_ids=[10 + i] * n,
                      old_logprobs=[-5.0] * n, advantage=advantage)

    def step(zero):  # SGD: a reweighted gradient shows in the step (AdamW's first step would hide a common scale)
        policy = tiny_policy(dtype="float64")
        optimizers = {a: torch.optim.SGD(policy.trainable_parameters(a), lr=1.0) for a in policy.adapters}
        # e0: one informative reply and one with advantage `zero`, of different lengths; e1: one informative reply.
        samples = [sample(0, "e0", 1.0, 2), sample(1, "e0", zero, 6), sample(2, "e1", -0.5, 3)]
        optim = OptimConfig(lr=1.0, minibatch_size=8, epochs=1, ratio_level=ratio, loss_agg=aggregation, grad_clip=1e9)
        metrics = update_policy(policy, optimizers, samples, optim, LossConfig(aggregation=aggregation, ratio_level=ratio),
                                1.0, "episode", np.random.default_rng(0))
        return adapter_weights(policy), metrics

    dropped, metrics = step(0.0)
    kept, _ = step(1e-300)  # not left out, and its own policy gradient is ~0
    for name in kept:
        torch.testing.assert_close(dropped[name], kept[name], atol=1e-12, rtol=1e-9)
    assert metrics["update/tool/skipped_zero_advantage"] == 0.0  # e0 has an informative reply: it is trained whole


@pytest.mark.parametrize("micro", [0, 1])
def test_ratio_mean_of_overflowing_ratios_stays_finite_over_micro_batches(micro):
    """Every token's ratio past exp's range (old log-probs 1000 nats below the policy's) logged loss/.../ratio_mean
    inf; it is at most float32's largest value now, also as the token-weighted sum over micro-batches."""
    from llm_marl.loss import RATIO_MAX_LOGGED

    samples = synthetic_samples(tiny_policy().tokenizer, np.random.default_rng(1))
    for sample in samples:
        sample.old_logprobs = [-1000.0] * len(sample.response_ids)
    optim = OptimConfig(lr=5e-2, minibatch_size=6, epochs=1, micro_batch_size=micro)
    _, metrics, passes = _update(samples, optim, LossConfig(), "sample")
    assert max(passes) == (1 if micro else 6)  # one sample per pass, or the minibatch in one
    for adapter in ("tool", "planner"):
        assert metrics[f"loss/{adapter}/ratio_mean"] == pytest.approx(RATIO_MAX_LOGGED, rel=1e-12)
        assert metrics[f"loss/{adapter}/ratio_mean"] <= RATIO_MAX_LOGGED
