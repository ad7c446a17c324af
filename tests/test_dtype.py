"""`--dtype`: the base model's weights in bfloat16 on a GPU (as vLLM serves them and the papers train), float32 on
a CPU; the LoRA adapters stay float32. Until 2026-11 every path loaded float32, also on a GPU."""

from __future__ import annotations

import json
import types

import pytest
import torch

from llm_marl.cli import main
from llm_marl.models import resolve_dtype
from tests.test_progress import ARGS


def test_auto_is_bfloat16_on_a_gpu_that_supports_it(monkeypatch):
    assert resolve_dtype("auto", "cpu") == "float32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_dtype("auto", "cuda") == resolve_dtype("auto", "cuda:1") == "bfloat16"
    assert resolve_dtype("auto", "cpu") == "float32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)  # e.g. a V100
    assert resolve_dtype("auto", "cuda") == "float32"
    assert resolve_dtype("bfloat16", "cpu") == "bfloat16" and resolve_dtype("float32", "cuda") == "float32"


@pytest.fixture
def loaded_dtypes(monkeypatch):
    """The dtype of every model loaded."""
    from llm_marl import models

    seen, load = [], models.load_model_and_tokenizer

    def spy(name, dtype="float32", device=None):
        model, tokenizer = load(name, dtype=dtype, device=device)
        seen.append(str(model.dtype).removeprefix("torch."))
        return model, tokenizer

    monkeypatch.setattr(models, "load_model_and_tokenizer", spy)
    return seen


def test_train_and_eval_in_bfloat16(tmp_path, capsys, loaded_dtypes):
    assert main(["train", *ARGS, "--steps", "1", "--dtype", "bfloat16", "--out-dir", str(tmp_path), "--run-name", "r"]) == 0
    assert json.loads((tmp_path / "r" / "config.json").read_text())["model"]["dtype"] == "bfloat16"
    out = tmp_path / "eval.json"
    assert main(["eval", "--env", "plan_path", "--adapters", str(tmp_path / "r"), "--n", "1", "--max-new-tokens", "4",
                 "--dtype", "bfloat16", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["episodes"] == 1 and result["dtype"] == "bfloat16"
    assert loaded_dtypes == ["bfloat16", "bfloat16"]


def test_the_default_on_a_cpu_is_float32(tmp_path, capsys, loaded_dtypes):
    assert main(["train", *ARGS, "--steps", "1", "--out-dir", str(tmp_path), "--run-name", "r"]) == 0
    assert loaded_dtypes == ["float32"]


def test_adapters_over_a_bfloat16_base_stay_float32_and_sample_on_policy():
    """The hf engine's log-probs are the update's, in bfloat16 as in float32."""
    from llm_marl.engines.base import GenerationRequest, SamplingParams
    from llm_marl.engines.hf import HFEngine
    from llm_marl.policies import LoRAConfig, PolicySet

    policy = PolicySet.from_pretrained("tiny-random", roles=["planner"], lora=LoRAConfig(r=4, alpha=8), dtype="bfloat16")
    dtypes = {name: p.dtype for name, p in policy.model.named_parameters()}
    assert {d for n, d in dtypes.items() if "lora_" in n} == {torch.float32}
    assert {d for n, d in dtypes.items() if "lora_" not in n} == {torch.bfloat16}
    request = GenerationRequest([{"role": "user", "content": "Move to the goal."}], adapter="shared", n=3)
    result = HFEngine(policy).generate([request], SamplingParams(temperature=1.0, max_new_tokens=8, seed=1))[0]
    replies = [c.token_ids for c in result.completions]
    recomputed = policy.response_logprobs([result.prompt_ids] * 3, replies, "shared", temperature=1.0)
    for completion, row in zip(result.completions, recomputed):
        assert row[: len(completion.logprobs)].tolist() == pytest.approx(completion.logprobs, abs=1e-3)


def test_a_dtype_that_is_not_offered(capsys):
    with pytest.raises(SystemExit):
        main(["train", *ARGS, "--dtype", "float16"])
    assert "invalid choice: 'float16'" in capsys.readouterr().err


def test_vllm_samples_with_the_updates_dtype(monkeypatch):
    """The vllm engine is given the dtype the update recomputes log-probs with (`resolve_dtype`), never vLLM's own
    "auto", which serves a float16 checkpoint in float16 (the update: bfloat16) and, on a GPU without bfloat16, a
    float32 one in float16 (the update: float32). Until 2026-11 "auto" was passed on."""
    from llm_marl.engines import vllm as vllm_engine
    from llm_marl.engines.vllm import VLLMEngine

    class Built(Exception):
        pass

    def llm(**kwargs):
        seen.append(kwargs["dtype"])
        raise Built  # the arguments are all this test needs

    monkeypatch.setattr(vllm_engine, "import_vllm", lambda: types.SimpleNamespace(LLM=llm))
    for gpu, bf16, expected in ((False, False, ["float32", "float32", "float32", "bfloat16"]),
                                (True, True, ["bfloat16", "bfloat16", "float32", "bfloat16"]),
                                (True, False, ["float32", "float32", "float32", "bfloat16"])):  # e.g. a V100
        monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
        seen = []
        for dtype in (None, "auto", "float32", "bfloat16"):
            with pytest.raises(Built):
                VLLMEngine("tiny-random", dtype=dtype)
        assert seen == expected, (gpu, bf16)


def test_train_passes_its_dtype_to_vllm(monkeypatch):
    from llm_marl import engines
    from llm_marl.config import ModelConfig
    from llm_marl.trainer import TrainConfig, build_engine

    seen = []
    monkeypatch.setattr(engines, "make_engine", lambda kind, *args, **kwargs: seen.append((kind, kwargs.get("dtype"))))
    for dtype in ("auto", "float32", "bfloat16"):
        build_engine(TrainConfig(model=ModelConfig(engine="vllm", dtype=dtype)), policy=None)
    assert seen == [("vllm", "auto"), ("vllm", "float32"), ("vllm", "bfloat16")]


def test_eval_through_vllm_records_the_dtype_vllm_sampled_with(monkeypatch, tmp_path, capsys):
    """`eval --engine vllm` once gave vLLM no --dtype and recorded the CPU-side policy set's instead."""
    from llm_marl.engines import vllm as vllm_engine
    from llm_marl.engines.scripted import ScriptedEngine

    class StandIn(ScriptedEngine):  # the vllm engine's constructor, without vLLM
        def __init__(self, policy_set=None, dtype=None, **kwargs):
            super().__init__(reply_fn=lambda request, k: "####U", tokenizer=policy_set.tokenizer)
            self.dtype = f"vLLM's {dtype}"

    monkeypatch.setattr(vllm_engine, "import_vllm", lambda: None)  # as where vLLM is installed
    monkeypatch.setattr(vllm_engine, "VLLMEngine", StandIn)
    out = tmp_path / "eval.json"
    assert main(["eval", "--env", "plan_path", "--model", "tiny-random", "--engine", "vllm", "--dtype", "bfloat16",
                 "--n", "1", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["dtype"] == "vLLM's bfloat16"
