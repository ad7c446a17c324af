"""vLLM engine against the HF engine on tiny-random with LoRA adapters (runs when `vllm` imports).

vLLM is an optional extra (`llm-marl[vllm]` / `llm-marl[vllm-cpu]`); without it this module is
skipped, honestly. One engine is built per module: starting vLLM costs seconds.
"""

from __future__ import annotations

import os
import types

import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine: no __main__ guard needed
vllm = pytest.importorskip("vllm")

import torch  # noqa: E402

from llm_marl.engines import GenerationRequest, SamplingParams, make_engine  # noqa: E402
from llm_marl.engines.hf import HFEngine  # noqa: E402
from llm_marl.policies import LoRAConfig, PolicySet  # noqa: E402

pytestmark = pytest.mark.vllm


def perturb(policy: PolicySet, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def setup():
    policy = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role", lora=LoRAConfig(r=8, alpha=16))
    perturb(policy, 0)
    engine = make_engine("vllm", None, policy)
    yield policy, engine
    engine.close()


# Both adapters AND the base model in one batch: vLLM-cpu once gave base rows the last adapter.
MIXED = [
    GenerationRequest(chat("Move to the goal."), adapter="tool", n=2),
    GenerationRequest(chat("Grid:\n#..@\n.$.G\nYour move?"), adapter="planner"),
    GenerationRequest(chat("Base model, please."), adapter=None),
    GenerationRequest(chat("Another tool prompt, a little longer than the others."), adapter="tool"),
]


def token_ids(results):
    return [c.token_ids for r in results for c in r.completions]


def test_greedy_matches_hf_token_for_token_in_a_mixed_batch(setup):
    policy, engine = setup
    assert engine.llm.model_config.dtype == policy.model.dtype == torch.float32  # the update's dtype (see test_dtype)
    params = SamplingParams(temperature=0.0, max_new_tokens=16)
    ours, theirs = engine.generate(MIXED, params), HFEngine(policy).generate(MIXED, params)
    assert [r.prompt_ids for r in ours] == [r.prompt_ids for r in theirs]
    assert token_ids(ours) == token_ids(theirs)
    for a, b in zip(ours, theirs):
        for ca, cb in zip(a.completions, b.completions):
            torch.testing.assert_close(torch.tensor(ca.logprobs), torch.tensor(cb.logprobs), atol=1e-4, rtol=0)


def test_sampled_logprobs_are_the_policys(setup):
    policy, engine = setup
    results = engine.generate(MIXED, SamplingParams(temperature=0.8, max_new_tokens=16, seed=3))
    for r in results:
        for c in r.completions:
            assert len(c.token_ids) == len(c.logprobs)
            lp = policy.response_logprobs([r.prompt_ids], [c.token_ids], r.request.adapter, temperature=0.8)[0]
            torch.testing.assert_close(lp, torch.tensor(c.logprobs), atol=1e-4, rtol=0)


def test_seeded_sampling_is_reproducible_and_samples_differ(setup):
    _, engine = setup
    requests = [GenerationRequest(chat("same prompt"), adapter="tool", n=3), GenerationRequest(chat("same prompt"), adapter="tool", n=3)]
    params = SamplingParams(temperature=1.0, max_new_tokens=10, seed=11)
    first, again = engine.generate(requests, params), engine.generate(requests, params)
    assert token_ids(first) == token_ids(again)
    assert len({tuple(ids) for ids in token_ids(first)}) == 6  # no two samples share a seed


def test_a_prompt_longer_than_the_context_window_gets_no_reply_and_the_batch_goes_on(setup):
    """vLLM refuses a whole batch for one prompt longer than max_model_len (VLLMValidationError): that prompt is
    left out with an empty reply, as the HF engine does."""
    _, engine = setup
    window = engine.llm.llm_engine.model_config.max_model_len
    params = SamplingParams(temperature=0.0, max_new_tokens=8)
    ours = engine.generate([*MIXED, GenerationRequest(chat("word " * window), adapter="planner", n=2)], params)
    assert len(ours[-1].prompt_ids) >= window
    assert [(c.finish_reason, c.token_ids) for c in ours[-1].completions] == [("context", [])] * 2
    assert token_ids(ours[:-1]) == token_ids(engine.generate(MIXED, params))


def test_sync_adapters_pushes_new_weights_without_leaking(setup):
    policy, engine = setup
    params = SamplingParams(temperature=0.0, max_new_tokens=12)
    before = token_ids(engine.generate(MIXED, params))
    for seed in (1, 2, 3):
        perturb(policy, seed)
        engine.sync_adapters()
        engine.generate(MIXED, params)
        assert len(engine.loaded_lora_ids()) <= len(policy.adapters)
    after = engine.generate(MIXED, params)
    assert token_ids(after) != before
    assert token_ids(after) == token_ids(HFEngine(policy).generate(MIXED, params))


@pytest.mark.parametrize("indices", [[0] * 7, [0, 1, -1, 1, 0, -1, 2], [2] * 7])
def test_grouped_lora_ops_compute_what_vllms_own_ops_compute(indices):
    """The engine's CPU LoRA ops (one matmul per adapter) against vLLM's (a per-token copy of the weights):
    shrink, expand and expand-slice, one or several adapters, -1 ("no LoRA" = the last slot), 4-d weights."""
    from vllm.lora.ops.torch_ops import lora_ops

    from llm_marl.engines import vllm_cpu_lora

    assert vllm_cpu_lora.install(), "the grouped ops no longer match this vLLM's LoRA op signatures"
    original = vllm_cpu_lora._ORIGINAL
    g = torch.Generator().manual_seed(0)
    idx = torch.tensor(indices)
    x, a = torch.randn(7, 12, generator=g), torch.randn(3, 1, 4, 12, generator=g)  # 3 slots, rank 4, hidden 12
    h, b = torch.randn(7, 4, generator=g), torch.randn(3, 20, 4, generator=g)  # expand to 20 outputs
    ours, theirs = torch.zeros(7, 4), torch.zeros(7, 4)
    vllm_cpu_lora.bgmv_shrink(x, a, ours, idx, 0.5)
    original["bgmv_shrink"](x, a, theirs, idx, 0.5)
    torch.testing.assert_close(ours, theirs)
    for add in (False, True):
        base = torch.randn(7, 20, generator=g)
        ours, theirs = base.clone(), base.clone()
        vllm_cpu_lora.bgmv_expand(h, b, ours, idx, add)
        original["bgmv_expand"](h, b, theirs, idx, add)
        torch.testing.assert_close(ours, theirs)
        wide = torch.randn(7, 50, generator=g)
        ours, theirs = wide.clone(), wide.clone()
        vllm_cpu_lora.bgmv_expand_slice(h, b, ours, idx, 30, 20, add)
        original["bgmv_expand_slice"](h, b, theirs, idx, 30, 20, add)
        torch.testing.assert_close(ours, theirs)
    assert lora_ops.bgmv_shrink is vllm_cpu_lora.bgmv_shrink  # the prefill ops (sgmv_*) reach the grouped ones too


@pytest.mark.parametrize("rope", [None, {"rope_type": "linear", "factor": 4.0}, {"rope_type": "dynamic", "factor": 2.0},
                                  {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}])
def test_hf_engine_context_window_is_vllms(rope, tmp_path):
    """Both engines leave the same prompts without room: the hf engine's window is vLLM's max_model_len, also for
    a model whose config scales RoPE (tiny-random's files, with the scaling written into its config)."""
    import json
    import shutil

    from transformers import AutoConfig, AutoTokenizer

    from llm_marl.engines.hf import context_window
    from llm_marl.models import resolve_model

    folder = shutil.copytree(resolve_model("tiny-random"), tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    config["rope_scaling"] = rope
    (folder / "config.json").write_text(json.dumps(config))
    window = context_window(AutoConfig.from_pretrained(folder), AutoTokenizer.from_pretrained(folder))
    assert window == vllm.config.ModelConfig(model=str(folder)).max_model_len


def test_prompts_follow_the_thinking_switch_as_the_hf_engines(tmp_path):
    """vLLM samples from the same no-thinking prompts as the hf engine (Qwen3's template's enable_thinking): a copy
    of tiny-random whose template has the switch."""
    import shutil

    from transformers import AutoTokenizer

    from llm_marl.engines.hf import chat_prompt_ids
    from llm_marl.models import resolve_model
    from tests.test_thinking import CHAT, SWITCH_TEMPLATE

    folder = shutil.copytree(resolve_model("tiny-random"), tmp_path / "model")
    (folder / "chat_template.jinja").write_text(SWITCH_TEMPLATE)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    engine = make_engine("vllm", str(folder))
    try:
        prompts = {}
        for thinking in (False, True):
            engine.thinking = thinking
            result = engine.generate([GenerationRequest(CHAT)], SamplingParams(temperature=0.0, max_new_tokens=2))[0]
            prompts[thinking] = result.prompt_ids
            assert result.prompt_ids == chat_prompt_ids(tokenizer, CHAT, thinking)
        assert tokenizer.decode(prompts[False]).endswith("<think>\n\n</think>\n\n") and prompts[False] != prompts[True]
        engine.thinking = None  # as the policy set says, role by role (--thinking-roles)
        engine.policy_set = types.SimpleNamespace(thinks=lambda role: role == "planner")
        results = engine.generate([GenerationRequest(CHAT, role="planner"), GenerationRequest(CHAT, role="tool")],
                                  SamplingParams(temperature=0.0, max_new_tokens=2))
        assert [r.prompt_ids for r in results] == [prompts[True], prompts[False]]
    finally:
        engine.policy_set = None
        engine.close()
