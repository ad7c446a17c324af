"""A tiny policy set and synthetic samples for tests that compare two ways of running one update."""

from __future__ import annotations

import numpy as np
import torch


def tiny_policy(policy="per-role", seed=0, dtype="float32"):
    from llm_marl.policies import LoRAConfig, PolicySet

    return PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy=policy, lora=LoRAConfig(r=4, alpha=8), seed=seed,
                                     dtype=dtype)


def tiny_sliding_policy(window: int, dtype="float32"):
    """`tiny_policy`'s weights in a model whose second layer attends to the last `window` tokens only (sliding-window
    attention, as in Gemma 3 or Mistral), the first to all of them."""
    from transformers import AutoModelForCausalLM

    from llm_marl.models import load_model_and_tokenizer, resolve_model
    from llm_marl.models.attention import use_gqa_attention
    from llm_marl.policies import LoRAConfig, PolicySet, parse_policy

    base, tokenizer = load_model_and_tokenizer(resolve_model("tiny-random"), dtype=dtype)
    config = type(base.config).from_dict({**base.config.to_dict(), "layer_types": ["full_attention", "sliding_attention"],
                                          "use_sliding_window": True, "sliding_window": window})
    model = AutoModelForCausalLM.from_config(config, dtype=base.dtype)
    model.load_state_dict(base.state_dict())
    use_gqa_attention(model)
    model.eval()
    return PolicySet.build(model, tokenizer, parse_policy("per-role", ["tool", "planner"]), lora=LoRAConfig(r=4, alpha=8))


def synthetic_samples(tokenizer, rng: np.random.Generator):
    """Samples of two adapters with prompts and replies of unequal lengths and non-zero advantages."""
    from llm_marl.rollout import Sample

    vocab = min(tokenizer.vocab_size, 200)
    samples = []
    for i in range(11):
        adapter = "planner" if i == 10 else "tool"  # one planner sample: rank 1's planner shard is empty
        prompt = [int(x) for x in rng.integers(3, vocab, size=4 + i % 5)]
        response = [int(x) for x in rng.integers(3, vocab, size=2 + (i * 7) % 11)]
        samples.append(Sample(sample_id=i, task_id=f"t{i // 2}", episode_id=f"t{i // 2}", decision_id=i, candidate=0, role=adapter,
                              turn=0, step=0, adapter=adapter, messages=[], text="", prompt_ids=prompt, response_ids=response,
                              old_logprobs=[float(-x) for x in rng.uniform(3, 6, size=len(response))],
                              advantage=float(rng.normal())))
    return samples


def adapter_weights(policy) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in policy.model.named_parameters() if "lora_" in k}
