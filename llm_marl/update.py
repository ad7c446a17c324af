"""The policy update in two halves: plan the minibatches (once, on the driver), then run them (on each rank).

    shards, counts = plan_update(samples, optim, loss_config, segment, rng, ranks=T)
    metrics = apply_update(policy, optimizers, shards[r], optim, loss_config, temperature, distributed=T > 1)

`plan_update` draws the seeded permutation of loss units per adapter, packs minibatches, and deals
each minibatch's whole units to the T ranks (a unit is never split, so MATPO's per-rollout
normaliser and SHARP's sequence-level ratio stay whole). Every shard carries the normaliser of the
WHOLE minibatch: its token count (token-mean) or its segment count (seq-mean, seq-sum). Each rank
scales its loss by that global normaliser and the gradients are summed by all-reduce, so the sum is
the gradient of one process on the whole minibatch; averaging per-rank means would be wrong as soon
as shards differ in tokens. Clipping and AdamW run after the all-reduce on identical gradients, so
the replicated optimizers stay identical. Every rank takes every optimiser step, with zero
gradients when its shard of a minibatch is empty. With T = 1 this is exactly the single-process
update (`llm_marl.trainer.update_policy` calls it that way). For the same reason a rank may run its shard
in several forward/backward passes (`--micro-batch-size`, whole units each) and accumulate their gradients,
and recompute each layer's activations in the backward pass (`--gradient-checkpointing`): the same steps.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from llm_marl.loss import LossConfig, policy_loss
from llm_marl.rollout import Sample, batches_by_adapter, collate


@dataclass
class MinibatchShard:
    """One rank's part of one optimiser step of one adapter."""

    adapter: str
    samples: list[Sample]
    """This rank's whole loss units of the minibatch (may be empty: the rank still joins the all-reduce)."""
    normalizer: float
    """Denominator of the whole minibatch's loss: response tokens (token-mean) or segments (seq-mean, seq-sum)."""
    tokens: float
    """Response tokens of the whole minibatch (weights the per-token metrics)."""


def loss_units(samples: list[Sample], segment: str, share_prompts: bool = True) -> list[list[Sample]]:
    """Samples grouped into units that a minibatch never splits, in first-appearance order.

    A loss segment shares one normaliser (MATPO) or one sequence-level ratio (SHARP), so it is one
    unit. With `share_prompts`, units whose samples share a prompt are joined too (the K candidates
    of a decision, the G first replies of a group), so the update runs that prompt once
    (`PolicySet.response_logprobs`).
    """
    keys = [segment_key(s, segment) for s in samples]
    parent = list(range(len(samples)))  # union-find over samples

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[Any, int] = {}
    for i, (s, key) in enumerate(zip(samples, keys)):
        for link in ([("segment", key)] + ([("prompt", tuple(s.prompt_ids))] if share_prompts and s.prompt_ids else [])):
            j = first.setdefault(link, i)
            parent[root(i)] = root(j)
    units: dict[int, list[Sample]] = {}
    for i, s in enumerate(samples):
        units.setdefault(root(i), []).append(s)
    return list(units.values())


def segment_key(s: Sample, segment: str) -> Any:
    return s.sample_id if segment == "sample" else s.episode_id if segment == "episode" else (s.episode_id, s.role)


def minibatches(units: list[list[Sample]], order: Any, size: int) -> list[list[Sample]]:
    """Whole units in `order`, packed into minibatches of at least `size` samples (the last may be smaller)."""
    out: list[list[Sample]] = [[]]
    for i in order:
        if len(out[-1]) >= size:
            out.append([])
        out[-1].extend(units[i])
    return [mb for mb in out if mb]


def normalizer(samples: list[Sample], loss_config: LossConfig, segment: str) -> float:
    """The loss denominator of a whole minibatch (`llm_marl.loss.aggregate`'s `normalizer`)."""
    if loss_config.aggregation == "token-mean":
        return float(sum(len(s.response_ids) for s in samples))
    return float(len({segment_key(s, segment) for s in samples if s.response_ids}))


def plan_update(samples: list[Sample], optim: Any, loss_config: LossConfig, segment: str, rng: np.random.Generator,
                ranks: int = 1) -> tuple[list[list[MinibatchShard]], dict[str, float]]:
    """Minibatches of every adapter for `optim.epochs` epochs, dealt to `ranks` ranks.

    Returns (one list of shards per rank, all in the same step order; the update's sample counts).
    The permutation draws are those of the single-process update, in the same order, so a run's
    minibatches do not depend on the number of ranks.
    """
    counts: dict[str, float] = {}
    per_rank: list[list[MinibatchShard]] = [[] for _ in range(ranks)]
    for adapter, batch in sorted(batches_by_adapter(samples).items(), key=lambda kv: str(kv[0])):
        if adapter is None:
            continue  # replies of the frozen base model (no adapter) are not trained
        # A reply with advantage 0 has no policy gradient of its own, but its tokens count in its loss segment's
        # normaliser (seq-mean) and ratio (sequence level): it is left out only with its whole segment.
        keyed = [(s, segment_key(s, segment)) for s in batch if s.response_ids]
        live = {key for s, key in keyed if loss_config.beta > 0 or s.advantage != 0.0}
        informative = [s for s, key in keyed if key in live]
        counts[f"update/{adapter}/samples"] = float(len(batch))
        empty = sum(1 for s in batch if not s.response_ids)  # no tokens to train (an empty or cut-off reply)
        counts[f"update/{adapter}/skipped_empty"] = float(empty)
        counts[f"update/{adapter}/skipped_zero_advantage"] = float(len(batch) - empty - len(informative))
        if not informative:
            continue
        units = loss_units(informative, segment, share_prompts=optim.share_prompts)
        for _ in range(optim.epochs):
            order = rng.permutation(len(units))
            for minibatch in minibatches(units, order, optim.minibatch_size):
                norm = normalizer(minibatch, loss_config, segment)
                tokens = float(sum(len(s.response_ids) for s in minibatch))
                parts: list[list[Sample]] = [minibatch] if ranks == 1 else [[] for _ in range(ranks)]
                if ranks > 1:
                    for k, unit in enumerate(loss_units(minibatch, segment, share_prompts=optim.share_prompts)):
                        parts[k % ranks].extend(unit)
                for r in range(ranks):
                    per_rank[r].append(MinibatchShard(adapter, parts[r], norm, tokens))
    return per_rank, counts


_SUMMED = ("total", "policy", "kl_ref")
"""Loss terms already divided by the global normaliser: the ranks' parts add up to the whole."""
_TOKEN_WEIGHTED = ("clip_frac", "approx_kl", "ratio_mean", "entropy")
"""Per-token means of a shard: weighted by its share of the minibatch's tokens, then added up."""


def apply_update(policy: Any, optimizers: dict[str, torch.optim.Optimizer], shards: list[MinibatchShard], optim: Any,
                 loss_config: LossConfig, temperature: float, segment: str, distributed: bool = False) -> dict[str, float]:
    """Run this rank's shards: one optimiser step each, gradients all-reduced when `distributed`.

    `distributed` needs an initialised `torch.distributed` default group whose ranks call this with
    their shards of the same plan. Returns the minibatch metrics (identical on every rank).
    """
    sums: dict[str, list[float]] = defaultdict(list)
    for shard in shards:
        adapter = shard.adapter
        optimizer = optimizers[adapter]
        params = policy.trainable_parameters(adapter)
        optimizer.zero_grad(set_to_none=True)
        local: dict[str, float] = {}
        ratio_max = float("-inf")
        micro = micro_batches(shard.samples, optim.micro_batch_size, segment, optim.share_prompts)
        parts = [_backward(policy, samples, shard, optim, loss_config, temperature, segment) for samples in micro]
        masked = sum(tokens for tokens, _ in parts)
        for tokens, metrics in parts:  # what one pass over the shard would have measured
            for key, value in metrics.items():
                name = key.removeprefix("loss/")
                if name == "ratio_max":
                    ratio_max = max(ratio_max, value)
                elif name in _TOKEN_WEIGHTED and len(parts) > 1:
                    local[name] = local.get(name, 0.0) + value * tokens / max(masked, 1.0)
                else:
                    local[name] = local.get(name, 0.0) + value
        if distributed:
            share = masked / max(shard.tokens, 1.0)
            local = {name: value * share if name in _TOKEN_WEIGHTED else value for name, value in local.items()}
            local, ratio_max = _all_reduce(params, local, ratio_max)
        grad_norm = clipped_step(optimizer, params, optim.grad_clip)
        if grad_norm is None:
            sums[f"update/{adapter}/skipped_nonfinite"].append(1.0)
        else:
            sums[f"update/{adapter}/optimizer_steps"].append(1.0)
            sums[f"loss/{adapter}/grad_norm"].append(grad_norm)
        if ratio_max > float("-inf"):
            sums[f"loss/{adapter}/ratio_max"].append(ratio_max)
        for name, value in local.items():
            sums[f"loss/{adapter}/{name}"].append(value)
    return {k: (sum(v) if k.startswith("update/") else sum(v) / len(v)) for k, v in sums.items()}


def micro_batches(samples: list[Sample], size: int, segment: str, share_prompts: bool) -> list[list[Sample]]:
    """A shard's samples in forward/backward passes of at most `size` samples (0: one pass), whole loss units each:
    every term of the loss is divided by the minibatch's normaliser, so the passes' gradients add up to the one
    pass's (up to rounding)."""
    if not samples:
        return []
    if size <= 0 or len(samples) <= size:
        return [samples]
    out: list[list[Sample]] = [[]]
    for unit in loss_units(samples, segment, share_prompts):
        if out[-1] and len(out[-1]) + len(unit) > size:  # a unit larger than `size` gets a pass of its own
            out.append([])
        out[-1].extend(unit)
    return out


def _backward(policy: Any, samples: list[Sample], shard: MinibatchShard, optim: Any, loss_config: LossConfig,
              temperature: float, segment: str) -> tuple[float, dict[str, float]]:
    """One forward/backward pass over `samples` (gradients accumulate): (their generated tokens, the loss metrics)."""
    batch_t = collate(samples, segment=segment, pad_id=policy.tokenizer.pad_token_id or 0)
    with policy.checkpointing(optim.gradient_checkpointing):
        logprobs = policy.response_logprobs(batch_t["prompt_ids"], batch_t["response_ids"], shard.adapter, temperature,
                                            grad=True, response_mask=batch_t["response_mask"], share_prompts=optim.share_prompts)
    ref = None
    if loss_config.beta > 0:
        ref = policy.reference_logprobs(batch_t["prompt_ids"], batch_t["response_ids"], temperature,
                                        response_mask=batch_t["response_mask"], share_prompts=optim.share_prompts)
    loss, metrics = policy_loss(logprobs, batch_t["old_logprobs"].to(logprobs.device),
                                batch_t["advantages"].to(logprobs.device), batch_t["response_mask"].to(logprobs.device),
                                loss_config, ref_logprobs=ref, segment_ids=batch_t["segment_ids"], normalizer=shard.normalizer)
    loss.backward()
    return float(batch_t["response_mask"].sum()), {"total": float(loss.detach()), **{k: float(v) for k, v in metrics.items()}}


def clipped_step(optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter], grad_clip: float) -> float | None:
    """Clip the gradients' norm to `grad_clip` and take the optimiser step; returns the norm before clipping.

    A NaN or inf gradient (a loss that overflowed) would make every weight of the adapter NaN for good,
    so that step is not taken: the gradients are dropped and None is returned.
    """
    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, grad_clip))
    if not math.isfinite(grad_norm):
        optimizer.zero_grad(set_to_none=True)
        return None
    optimizer.step()
    return grad_norm


def _all_reduce(params: list[torch.nn.Parameter], local: dict[str, float], ratio_max: float) -> tuple[dict[str, float], float]:
    """Sum the gradients of `params` and the loss metrics over the ranks (one flat buffer), max of ratio_max.

    A rank without samples adds zeros; afterwards every parameter holds the summed gradient, so
    AdamW steps every parameter on every rank alike.
    """
    import torch.distributed as dist

    names = _SUMMED + _TOKEN_WEIGHTED
    device, dtype = params[0].device, params[0].dtype
    # Gradients are summed in their own dtype (a float32 round trip of float64 or bf16 grads would differ from one process).
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).to(dtype) for p in params])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n
    stats = torch.tensor([local.get(n, 0.0) for n in names] + [float(n in local) for n in names], dtype=torch.float64, device=device)
    dist.all_reduce(stats, op=dist.ReduceOp.SUM)
    values, present = stats[:len(names)].tolist(), stats[len(names):].tolist()
    top = torch.tensor([ratio_max], dtype=torch.float32, device=device)
    dist.all_reduce(top, op=dist.ReduceOp.MAX)
    return {n: v for n, v, seen in zip(names, values, present) if seen > 0}, float(top.item())
