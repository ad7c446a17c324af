"""The hf engine's CPU decoding speed-ups: native GQA attention with a padding mask
(`llm_marl.models.attention`) and the preallocated KV cache (`llm_marl.engines.hf.PreallocatedLayer`)
change no number; the shared prompt prefix (`HFEngine(share_prefix=True)`) changes no token and moves
log-probs only by float rounding."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
from transformers.cache_utils import DynamicLayer

from llm_marl.engines import GenerationRequest, SamplingParams
from llm_marl.engines.hf import MIN_SHARED_PREFIX, HFEngine, PreallocatedLayer, chat_prompt_ids, common_prefix_length
from llm_marl.models import attention, resolve_model
from llm_marl.policies import LoRAConfig, PolicySet


@pytest.fixture(scope="module")
def gqa_policy(tmp_path_factory) -> PolicySet:
    """A tiny grouped-query Llama (4 query heads over 2 KV heads) with tiny-random's tokenizer, loaded
    from its folder as a user's model is (tiny-random itself has one KV head per query head)."""
    folder = tmp_path_factory.mktemp("tiny-gqa")
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("tiny-random"))
    tokenizer.save_pretrained(folder)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=True,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        LlamaForCausalLM(config).save_pretrained(folder)
    ps = PolicySet.from_pretrained(str(folder), roles=["tool", "planner"], policy="per-role", lora=LoRAConfig(r=4, alpha=8))
    return _with_random_adapters(ps)


def _with_random_adapters(ps: PolicySet) -> PolicySet:
    """Adapters that change what the model samples (B starts at zero)."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in ps.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return ps


@pytest.fixture(scope="module")
def tiny_policy() -> PolicySet:
    return PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role", lora=LoRAConfig(r=4, alpha=8))


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You are the planner."}, {"role": "user", "content": text}]


REQUESTS = [  # prompts of different lengths (left padding), shared prompts (n > 1), two adapters and the base
    GenerationRequest(chat("Move to the goal."), adapter="tool", n=3),
    GenerationRequest(chat("Grid:\n#..@\n.$.G\nYour move? Think about the walls first, then answer."), adapter="planner", n=2),
    GenerationRequest(chat("Base model, please."), adapter=None, n=2),
    GenerationRequest(chat("A longer tool prompt that pads every shorter row of its batch to its width."), adapter="tool", n=1),
]


def _generate(policy: PolicySet, implementation: str, params: SamplingParams, eos_bias: float = 0.0):
    policy.model.set_attn_implementation(implementation)
    head = policy.model.get_base_model().get_output_embeddings()
    bias = torch.zeros(head.out_features)
    bias[policy.tokenizer.eos_token_id] = eos_bias  # rows that stop leave the batch and the cache
    handle = head.register_forward_hook(lambda module, args, out: out + bias)
    try:
        results = HFEngine(policy, max_batch_size=4).generate(REQUESTS, params)
    finally:
        handle.remove()
        policy.model.set_attn_implementation(attention.ATTENTION)
    return [(c.token_ids, c.logprobs, c.finish_reason) for r in results for c in r.completions]


def test_a_gqa_model_loads_with_the_gqa_attention(gqa_policy):
    assert gqa_policy.model.config._attn_implementation == attention.ATTENTION
    assert gqa_policy.model.get_base_model().model.layers[0].self_attn.num_key_value_groups == 2


@pytest.mark.parametrize("params, eos_bias", [
    (SamplingParams(temperature=1.0, max_new_tokens=24, seed=3), 0.0),
    (SamplingParams(temperature=0.0, max_new_tokens=16), 0.0),
    (SamplingParams(temperature=1.0, max_new_tokens=40, seed=5), 4.0),
])
def test_gqa_attention_samples_exactly_what_stock_sdpa_samples(gqa_policy, params, eos_bias):
    fast = _generate(gqa_policy, attention.ATTENTION, params, eos_bias)
    stock = _generate(gqa_policy, "sdpa", params, eos_bias)
    assert [(ids, finish) for ids, _, finish in fast] == [(ids, finish) for ids, _, finish in stock]
    for (_, fast_lp, _), (_, stock_lp, _) in zip(fast, stock):  # equal on the machines measured; rounding may differ elsewhere
        torch.testing.assert_close(torch.tensor(fast_lp), torch.tensor(stock_lp), rtol=0, atol=1e-6)
    if eos_bias:
        finished = [f for _, _, f in fast]
        assert "stop" in finished and "length" in finished


def test_gqa_path_runs_without_grad_and_the_stock_path_with_grad(gqa_policy, monkeypatch):
    calls = []
    stock = attention.sdpa_attention_forward
    monkeypatch.setattr(attention, "sdpa_attention_forward", lambda *a, **k: calls.append(1) or stock(*a, **k))
    ids = torch.tensor([[0, 0, 5, 6, 7], [3, 4, 5, 6, 7]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    with gqa_policy.use("tool") as model:
        with torch.no_grad():
            no_grad = model(input_ids=ids, attention_mask=mask).logits
        assert calls == []
        with_grad = model(input_ids=ids, attention_mask=mask).logits
        assert len(calls) == 2  # one per layer
    torch.testing.assert_close(no_grad, with_grad.detach(), rtol=0, atol=1e-6)


RULES = ("You are the planner of a two-agent team. Read the grid, think about the walls, and answer with the list of "
         "moves (U, D, L, R) that takes the agent to the goal, after ####.")
SHARED = [  # one long system prompt, rests of different lengths, one prompt the others' prefix plus a token or two
    GenerationRequest([{"role": "system", "content": RULES}, {"role": "user", "content": text}], adapter=adapter, n=n)
    for text, adapter, n in (("Grid:\n#..@\n.$.G", "tool", 2), ("Grid:\n#..@\n.$.G\n....\nYour move, please?", "tool", 1),
                             ("G", "tool", 1), ("Grid:\n#.", "planner", 3), ("Grid:\n#.@.\nG...", "planner", 1))
]


def test_common_prefix_length():
    assert common_prefix_length([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert common_prefix_length([[5, 6], [5, 6]]) == 2 and common_prefix_length([[1], [2]]) == 0


def _generate_shared(policy: PolicySet, params: SamplingParams):
    """`SHARED` sampled with `share_prefix`, and the shapes of the token batches that the model ran."""
    shapes = []
    embed = policy.model.get_base_model().get_input_embeddings()
    handle = embed.register_forward_pre_hook(lambda module, args: shapes.append(tuple(args[0].shape)))
    try:
        return HFEngine(policy, share_prefix=True).generate(SHARED, params), shapes
    finally:
        handle.remove()


@pytest.mark.parametrize("model", ["tiny-random", "gqa"])
@pytest.mark.parametrize("params", [SamplingParams(temperature=0.0, max_new_tokens=12),
                                    SamplingParams(temperature=1.0, max_new_tokens=12, seed=4)])
def test_a_shared_prefix_prefilled_once_samples_what_whole_prompts_sample(model, params, gqa_policy, tiny_policy):
    policy = gqa_policy if model == "gqa" else tiny_policy
    prompts = [chat_prompt_ids(policy.tokenizer, r.messages) for r in SHARED if r.adapter == "tool"]
    assert common_prefix_length(prompts) >= MIN_SHARED_PREFIX  # the case under test: the prefix runs on its own
    shared, shapes = _generate_shared(policy, params)
    assert (1, common_prefix_length(prompts)) in shapes  # the tool's prefix ran on its own, as one row
    whole = HFEngine(policy, share_prefix=False).generate(SHARED, params)
    assert [c.token_ids for r in shared for c in r.completions] == [c.token_ids for r in whole for c in r.completions]
    for a, b in zip([c for r in shared for c in r.completions], [c for r in whole for c in r.completions]):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), rtol=0, atol=1e-5)
    for result in shared:  # and they are the policy's own log-probs, recomputed by the update's forward pass
        for c in result.completions:
            recomputed = policy.response_logprobs([result.prompt_ids], [c.token_ids], result.request.adapter, params.temperature)[0]
            torch.testing.assert_close(recomputed, torch.tensor(c.logprobs), atol=1e-4, rtol=0)


@pytest.mark.parametrize("params", [SamplingParams(temperature=0.0, max_new_tokens=12),
                                    SamplingParams(temperature=1.0, max_new_tokens=12, seed=4)])
def test_a_sliding_window_model_prefills_whole_prompts(params):
    """Padding between a shared prefix and a prompt's rest would push real tokens out of a sliding window (which
    counts the cache's slots): a model with a sliding-window layer prefills every prompt whole, and samples its
    own log-probs."""
    from tests.support.update_samples import tiny_sliding_policy

    policy = _with_random_adapters(tiny_sliding_policy(window=64))  # reaches from a rest back into the prefix
    results, shapes = _generate_shared(policy, params)
    prompts = [chat_prompt_ids(policy.tokenizer, r.messages) for r in SHARED if r.adapter == "tool"]
    assert (1, common_prefix_length(prompts)) not in shapes
    for result in results:
        for c in result.completions:
            recomputed = policy.response_logprobs([result.prompt_ids], [c.token_ids], result.request.adapter, params.temperature)[0]
            torch.testing.assert_close(recomputed, torch.tensor(c.logprobs), atol=1e-4, rtol=0)


def test_preallocated_layer_holds_what_a_dynamic_layer_holds():
    g = torch.Generator().manual_seed(0)
    kv = lambda batch, length: (torch.randn(batch, 2, length, 8, generator=g), torch.randn(batch, 2, length, 8, generator=g))  # noqa: E731
    dynamic = DynamicLayer()
    dynamic.update(*kv(4, 5))
    fast = PreallocatedLayer(dynamic, capacity=9)
    for step in range(4):
        new = kv(fast.keys.shape[0], 1)
        expected, got = dynamic.update(*new), fast.update(*new)
        assert torch.equal(expected[0], got[0]) and torch.equal(expected[1], got[1])
        assert fast.get_seq_length() == dynamic.get_seq_length() == 6 + step
        if step == 1:  # rows 0 and 2 finished
            keep = torch.tensor([1, 3])
            dynamic.batch_select_indices(keep)
            fast.batch_select_indices(keep)
    with pytest.raises(RuntimeError, match="capacity 9 exceeded"):
        fast.update(*kv(2, 1))


def test_decode_speed_benchmark_runs_end_to_end(tmp_path):
    """benchmarks/decode_speed.py end to end on tiny-random (a smoke run: the numbers mean nothing)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "bench.md"
    proc = subprocess.run([sys.executable, "benchmarks/decode_speed.py", "--model", "tiny-random", "--base", "HEAD", "--rounds", "1",
                           "--new-tokens", "3", "--write", str(out)], cwd=root, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text()
    assert "<!-- bench:decode-speed -->" in text
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith(("| base tree (HEAD) |", "| this tree"))]
    assert len(rows) == 4 and all(row[6] in ("yes", "no") for row in rows)
    assert rows[0][6:] == ["yes", "0.0e+00 |"]  # the base against its own first round
    assert "of which the first" in text
