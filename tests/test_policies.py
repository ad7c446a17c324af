"""Policy set: σ parsing, per-adapter parameters, log-probs (with/without adapters), save/load."""

from __future__ import annotations

import json

import pytest
import torch

from llm_marl.policies import LoRAConfig, PolicySet, parse_policy, policy_flag, set_deterministic

ROLES = ["tool", "planner"]


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny models run fastest on one thread; on a busy 2-core machine two threads spin-wait (~14x slower matmuls)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def perturb(policy: PolicySet, seed: int = 1, scale: float = 0.3, adapters=None) -> None:
    """LoRA B starts at zero (adapter == base); give adapters distinct non-zero updates."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name and (adapters is None or any(f".{a}." in name for a in adapters)):
                p.copy_(torch.randn(p.shape, generator=g) * scale)


@pytest.fixture
def policy() -> PolicySet:
    ps = PolicySet.from_pretrained("tiny-random", roles=ROLES, policy="per-role", lora=LoRAConfig(r=4, alpha=8))
    perturb(ps)
    return ps


# ---------------------------------------------------------------------------------------------- σ
@pytest.mark.parametrize("spec, roles, expected", [
    ("shared", ROLES, {"tool": "shared", "planner": "shared"}),
    ("shared", None, {}),
    ("per-role", ["planner", "worker_0", "worker_1"], {"planner": "planner", "worker_0": "worker_0", "worker_1": "worker_1"}),
    ("tool=a,planner=b", ROLES, {"tool": "a", "planner": "b"}),
    (" tool = a , planner = a ", ROLES, {"tool": "a", "planner": "a"}),
    ("tool=a,planner=b,worker_0=b", None, {"tool": "a", "planner": "b", "worker_0": "b"}),
])
def test_parse_policy(spec, roles, expected):
    assert parse_policy(spec, roles) == expected
    if expected:  # and the --policy that a message names for σ gives it back
        assert parse_policy(policy_flag(expected), list(expected)) == expected


def test_a_role_without_an_adapter_names_the_policy_it_has():
    """A role outside σ (adapters of another environment) once got advice to add 'role=<adapter>' to --policy, which
    --policy refuses for a role the environment lacks."""
    policy = PolicySet.from_pretrained("tiny-random", roles=ROLES, policy="per-role")
    with pytest.raises(ValueError, match=r"role 'worker_0' has no adapter: these adapters serve the roles \['planner', "
                                         r"'tool'\] \(--policy per-role\); use adapters trained on an environment"):
        policy.adapter_for("worker_0")


@pytest.mark.parametrize("spec, roles, message", [
    ("separate", ROLES, "use 'shared', 'per-role', or an explicit map"),
    ("tool=a,planner", ROLES, "write role=adapter pairs"),
    ("tool=,planner=b", ROLES, "write role=adapter pairs"),
    ("tool=a,tool=b", None, "twice"),
    ("tool=a", ROLES, r"missing \['planner'\]"),
    ("tool=a,planner=b,coder=c", ROLES, r"unknown \['coder'\]"),
    ("tool=a.b,planner=b", ROLES, "letters, digits"),
    ("per-role", None, "needs the environment's roles"),
])
def test_parse_policy_errors_name_the_fix(spec, roles, message):
    with pytest.raises(ValueError, match=message):
        parse_policy(spec, roles)


def test_lora_config_validates():
    with pytest.raises(ValueError):
        LoRAConfig(r=0)
    with pytest.raises(ValueError):
        LoRAConfig(dropout=1.0)
    assert set(LoRAConfig().target_modules) >= {"q_proj", "v_proj", "down_proj"}


def test_shared_policy_maps_every_role_to_one_adapter():
    ps = PolicySet.from_pretrained("tiny-random", roles=ROLES, policy="shared", lora=LoRAConfig(r=4, alpha=8))
    assert ps.adapters == ("shared",)
    assert ps.adapter_for("tool") == ps.adapter_for("worker_7") == "shared"


def test_per_role_adapters_and_unknown_role(policy):
    assert policy.adapters == ("tool", "planner")
    assert policy.adapter_for("planner") == "planner"
    with pytest.raises(ValueError, match="no adapter"):
        policy.adapter_for("coder")


# ------------------------------------------------------------------------------ parameters & grads
def test_trainable_parameters_are_one_adapters_lora_weights(policy):
    tool, planner = policy.trainable_parameters("tool"), policy.trainable_parameters("planner")
    assert {id(p) for p in tool}.isdisjoint({id(p) for p in planner})
    cfg = policy.model.get_base_model().config
    n_modules = 7 * cfg.num_hidden_layers
    assert len(tool) == 2 * n_modules  # lora_A and lora_B per target module
    lora_ids = {id(p) for p in tool + planner}
    for name, p in policy.model.named_parameters():
        assert p.requires_grad == (id(p) in lora_ids), name
    with pytest.raises(ValueError, match="unknown adapter"):
        policy.trainable_parameters("coder")


def test_gradients_reach_only_the_adapter_used(policy):
    lp = policy.response_logprobs([[1, 2, 3, 4]], [[5, 6, 7]], adapter="planner", temperature=1.0, grad=True)
    assert lp.requires_grad
    lp.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.trainable_parameters("planner"))
    assert all(p.grad is None for p in policy.trainable_parameters("tool"))
    assert all(p.grad is None for name, p in policy.model.named_parameters() if "lora_" not in name)


def test_lora_init_is_seeded_and_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a = PolicySet.from_pretrained("tiny-random", roles=ROLES, policy="per-role", lora=LoRAConfig(r=4), seed=3)
    b = PolicySet.from_pretrained("tiny-random", roles=ROLES, policy="per-role", lora=LoRAConfig(r=4), seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    for pa, pb in zip(a.trainable_parameters("tool"), b.trainable_parameters("tool")):
        assert torch.equal(pa, pb)


# --------------------------------------------------------------------------------------- log-probs
def _manual_logprobs(model, ids: list[int], start: int, temperature: float) -> torch.Tensor:
    """Reference: full forward of one unpadded sequence, log softmax(logits / T) of each next token."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    logits = logits / temperature if temperature > 0 else logits
    lp = torch.log_softmax(logits[:-1], -1).gather(-1, torch.tensor(ids[1:]).unsqueeze(-1)).squeeze(-1)
    return lp[start - 1:]


@pytest.mark.parametrize("temperature", [1.0, 0.6, 0.0])
def test_response_logprobs_match_a_plain_forward(policy, temperature):
    prompts = [[5, 9, 12, 40, 41], [7, 8]]
    responses = [[100, 101, 102], [300, 301, 302, 303, 304]]
    lp = policy.response_logprobs(prompts, responses, adapter="tool", temperature=temperature)
    assert lp.shape == (2, 5)
    with policy.use("tool") as model:
        for b in range(2):
            ref = _manual_logprobs(model, prompts[b] + responses[b], len(prompts[b]), temperature)
            torch.testing.assert_close(lp[b, :len(responses[b])], ref, atol=1e-5, rtol=0)
    assert lp[0, 3:].abs().sum() == 0  # padding positions are 0


def test_shared_prompts_run_once_and_give_the_same_logprobs_and_gradients(policy):
    """Rows that share a prompt (a decision's K candidates) reuse one prompt pass, with its gradient:
    the log-probs and every LoRA gradient equal the row-by-row computation."""
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(1))
    pa, pb = [5, 9, 12, 40, 41, 42, 43], [7, 8, 30]
    prompts = [pa, pa, pb, pa, pb, [60, 61]]
    responses = [[100, 101], [102, 103, 104, 105], [106], [107, 108, 109], [110, 111, 112, 113, 114], [115, 116]]
    width = max(map(len, responses))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in responses])
    mask = torch.tensor([[1.0] * len(r) + [0.0] * (width - len(r)) for r in responses])
    mask[1, 1] = 0.0  # a context-only token (tool output) inside a response
    weights = torch.linspace(-1, 1, ids.numel()).reshape(ids.shape)
    results = {}
    for share in (False, True):
        params = policy.trainable_parameters("tool")
        for p in params:
            p.grad = None
        lp = policy.response_logprobs(prompts, ids, "tool", 0.7, grad=True, response_mask=mask, share_prompts=share)
        (lp * weights).sum().backward()
        results[share] = (lp.detach(), torch.cat([p.grad.flatten() for p in params]))
    torch.testing.assert_close(results[True][0], results[False][0], atol=1e-5, rtol=0)
    torch.testing.assert_close(results[True][1], results[False][1], atol=1e-5, rtol=1e-4)
    assert results[True][1].abs().max() > 0 and bool((results[True][0][mask == 0] == 0).all())


def test_token_logprobs_agree_for_left_and_right_padding(policy):
    seq = [11, 12, 13, 14, 15, 16]
    pad = 0
    right = torch.tensor([seq + [pad, pad]])
    left = torch.tensor([[pad, pad] + seq])
    mask_r = torch.tensor([[1] * 6 + [0, 0]])
    mask_l = torch.tensor([[0, 0] + [1] * 6])
    resp_r = torch.tensor([[0, 0, 0, 1, 1, 1, 0, 0]])
    resp_l = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1]])
    a = policy.token_logprobs(right, mask_r, resp_r, "planner", 0.8)
    b = policy.token_logprobs(left, mask_l, resp_l, "planner", 0.8)
    torch.testing.assert_close(a[0, 3:6], b[0, 5:8], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="first position"):
        policy.token_logprobs(right, mask_r, torch.ones_like(right), "planner")


def test_response_mask_keeps_context_tokens_untrained(policy):
    """Tool output inside a response is context (mask 0): no log-prob, but it conditions later tokens."""
    prompts = [[5, 6, 7]]
    ids = torch.tensor([[20, 21, 22, 23]])
    mask = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    lp = policy.response_logprobs(prompts, ids, "tool", 1.0, response_mask=mask)
    full = policy.response_logprobs(prompts, [[20, 21, 22, 23]], "tool", 1.0)
    assert lp[0, 1] == 0 and lp[0, 2] == 0
    torch.testing.assert_close(lp[0, [0, 3]], full[0, [0, 3]])


def test_reference_is_the_base_model_with_adapters_disabled(policy):
    from llm_marl.models import load_model_and_tokenizer

    prompts, responses = [[3, 4, 5, 6]], [[50, 60, 70, 80]]
    ref = policy.reference_logprobs(prompts, responses, temperature=1.0)
    base, _ = load_model_and_tokenizer("tiny-random")
    expected = _manual_logprobs(base, prompts[0] + responses[0], 4, 1.0)
    torch.testing.assert_close(ref[0], expected, atol=1e-5, rtol=0)
    adapted = policy.response_logprobs(prompts, responses, "tool", 1.0)
    assert (adapted - ref).abs().max() > 1e-3  # the perturbed adapter is a different policy
    assert not ref.requires_grad


# ------------------------------------------------------------------------------------- persistence
def test_save_load_roundtrip_in_peft_format(policy, tmp_path):
    from peft import PeftModel

    from llm_marl.models import load_model_and_tokenizer

    prompts, responses = [[3, 4, 5]], [[9, 10, 11, 12]]
    before = {a: policy.response_logprobs(prompts, responses, a) for a in policy.adapters}
    policy.save(tmp_path)
    for a in policy.adapters:
        assert (tmp_path / a / "adapter_model.safetensors").is_file()
        assert json.loads((tmp_path / a / "adapter_config.json").read_text())["r"] == 4
    fresh = PolicySet.from_pretrained("tiny-random", roles=ROLES, policy="shared", lora=LoRAConfig(r=4, alpha=8), seed=9)
    fresh.load(tmp_path)
    assert set(fresh.adapters) >= {"tool", "planner"} and fresh.sigma == policy.sigma
    for a in policy.adapters:
        torch.testing.assert_close(fresh.response_logprobs(prompts, responses, a), before[a], atol=1e-6, rtol=0)
    # The folders are plain PEFT adapters: PEFT's own loader reads them (as vLLM's LoRARequest does).
    base, _ = load_model_and_tokenizer("tiny-random")
    peft_model = PeftModel.from_pretrained(base, str(tmp_path / "tool"))
    ids = torch.tensor([prompts[0] + responses[0]])
    with torch.no_grad(), policy.use("tool") as model:
        torch.testing.assert_close(peft_model(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-5, rtol=0)
    with pytest.raises(FileNotFoundError, match="PolicySet.save"):
        fresh.load(tmp_path / "nope")


def test_deterministic_switch():
    try:
        set_deterministic(True, seed=0)
        assert torch.are_deterministic_algorithms_enabled()
        a = torch.rand(3)
        set_deterministic(True, seed=0)
        assert torch.equal(a, torch.rand(3))
    finally:
        set_deterministic(False)
    assert not torch.are_deterministic_algorithms_enabled()
