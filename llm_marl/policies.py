"""The policy set: one frozen base model plus M LoRA adapters, and the role->adapter map σ.

Role-sharing (M=1, `--policy shared`), role-specialized (M=N,
`--policy per-role`) or any grouping (`--policy "tool=a,planner=b"`) are one mechanism. AT-GRPO
Eq. 2 routes each role's samples to policy σ(i); the reference policy for the KL term is the base
model with adapters disabled (`PeftModel.disable_adapter()`), so no second model is held in memory.

Log-probs are those of softmax(logits / temperature) -- exactly what the engines sample from --
and only at response positions: only generated tokens are trained (MATPO).

    policy = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role")
    lp = policy.response_logprobs(prompt_ids, response_ids, adapter="tool", temperature=1.0, grad=True)
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

DEFAULT_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""Attention and MLP projections of Llama/Qwen2-style blocks; vLLM's LoRA path supports all of them."""
SHARED_ADAPTER = "shared"
_ADAPTER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
MANIFEST = "policy_set.json"
LOGIT_CHUNK_BYTES = 256 * 2**20
"""Float32 logits that `PolicySet.target_logprobs` holds at once where it can run its rows in chunks."""


class AdapterFolderError(ValueError):
    """A folder of saved adapters (--init-adapters, --adapters) that cannot be used; the message names the fix."""


class CheckpointingError(ValueError):
    """A model whose layers transformers cannot checkpoint, asked for `--gradient-checkpointing`."""


@dataclass(frozen=True)
class LoRAConfig:
    """LoRA hyper-parameters shared by every adapter of a policy set."""

    r: int = 16
    """Rank of the update B·A."""
    alpha: int = 32
    """Scale numerator: the update is (alpha / r)·B·A."""
    dropout: float = 0.0
    """Dropout on the LoRA input. Non-zero makes training-mode log-probs differ from sampling ones."""
    target_modules: tuple[str, ...] = DEFAULT_TARGET_MODULES
    """Linear layers that get an adapter (matched by name suffix)."""

    def __post_init__(self) -> None:
        if self.r < 1 or self.alpha <= 0:
            raise ValueError(f"LoRA needs r >= 1 and alpha > 0, got r={self.r}, alpha={self.alpha}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"LoRA dropout must be in [0, 1), got {self.dropout}")
        object.__setattr__(self, "target_modules", tuple(self.target_modules))

    def to_peft(self) -> Any:
        from peft import LoraConfig

        return LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
                          target_modules=list(self.target_modules), bias="none", task_type="CAUSAL_LM")


def parse_thinking(thinking: bool, thinking_roles: str, roles: Sequence[str]) -> bool | tuple[str, ...]:
    """`PolicySet.thinking` from `--thinking` and `--thinking-roles` ("reasoner,planner": those roles reason
    before they reply, the others reply at once); a ValueError naming the fix for an unknown role or both flags."""
    if not thinking_roles.strip():
        return bool(thinking)
    if thinking:
        raise ValueError("--thinking turns thinking on for every role and --thinking-roles for some: give one of them")
    named = tuple(dict.fromkeys(r.strip() for r in thinking_roles.split(",") if r.strip()))
    unknown = [r for r in named if r not in roles]
    if unknown:
        raise ValueError(f"--thinking-roles names {unknown}, which this environment does not have; its roles are {list(roles)}")
    return named


def saved_thinking(value: Any) -> bool | tuple[str, ...]:
    """`PolicySet.thinking` as `save` wrote it in policy_set.json (true/false, or a list of roles; absent: off)."""
    return tuple(value) if isinstance(value, list) else bool(value)


def parse_policy(spec: str, roles: Sequence[str] | None = None) -> dict[str, str]:
    """σ from a `--policy` string: `shared`, `per-role`, or an explicit `role=adapter,...` map.

    `roles` are the environment's roles; `per-role` needs them, and an explicit map must cover
    exactly them. `shared` with no roles gives {} (every role falls back to the shared adapter).
    """
    spec = spec.strip()
    roles = list(roles) if roles is not None else None
    if spec == "shared":
        return {role: SHARED_ADAPTER for role in roles or ()}
    if spec == "per-role":
        if not roles:
            raise ValueError("--policy per-role needs the environment's roles; pass roles=env.possible_agents")
        sigma = {role: role for role in roles}
    elif "=" in spec:
        sigma = {}
        for pair in spec.split(","):
            role, sep, adapter = (part.strip() for part in pair.partition("="))
            if not sep or not role or not adapter:
                raise ValueError(f"bad --policy entry {pair!r}: write role=adapter pairs separated by commas, e.g. 'tool=a,planner=b'")
            if role in sigma:
                raise ValueError(f"--policy maps role {role!r} twice; give each role one adapter")
            sigma[role] = adapter
        if roles is not None:
            missing, unknown = sorted(set(roles) - set(sigma)), sorted(set(sigma) - set(roles))
            if missing or unknown:
                raise ValueError(f"--policy {spec!r} must map exactly the roles {roles}: "
                                 f"missing {missing}, unknown {unknown}")
    else:
        raise ValueError(f"unknown --policy {spec!r}: use 'shared', 'per-role', or an explicit map like 'tool=a,planner=b'")
    for adapter in sigma.values():
        if not _ADAPTER_NAME.match(adapter):
            raise ValueError(f"adapter name {adapter!r} must be letters, digits, '_' or '-' (PEFT module keys cannot hold '.')")
    return sigma


def policy_flag(sigma: Mapping[str, str]) -> str:
    """The `--policy` value that gives σ (`parse_policy`'s inverse): shared, per-role or a role=adapter map."""
    if set(sigma.values()) <= {SHARED_ADAPTER}:
        return "shared"
    if all(role == adapter for role, adapter in sigma.items()):
        return "per-role"
    return ",".join(f"{role}={adapter}" for role, adapter in sigma.items())


def saved_set_folder(directory: str | Path) -> Path:
    """The folder `PolicySet.save` wrote: `directory` itself, or for a run directory its `adapters/`."""
    directory = Path(directory)
    return directory / "adapters" if (directory / "adapters" / MANIFEST).is_file() else directory


def read_manifest(folder: Path, flag: str) -> tuple[dict[str, Any], LoRAConfig]:
    """The manifest `PolicySet.save` wrote in `folder`, and its LoRA shape; AdapterFolderError naming `flag` and
    the fix when there is none or it is damaged."""
    path = folder / MANIFEST
    if not path.is_file():
        raise AdapterFolderError(f"{flag} {folder}: no {MANIFEST} there; pass a run directory or its adapters folder "
                                 "(written by `llm-marl sft` or `llm-marl train`), or a checkpoint's")
    try:
        saved = json.loads(path.read_text())
        lora = LoRAConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved["lora"].items()})
        dict(saved["sigma"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise AdapterFolderError(f"{flag} {path} is damaged ({type(exc).__name__}: {exc}); pass a checkpoint's adapters folder "
                                 "(RUN_DIR/checkpoints/step_N/adapters) instead") from None
    return saved, lora


def warm_start_sources(directory: str | Path, sigma: Mapping[str, str], lora: LoRAConfig, model_path: str | None = None,
                       adapters: Sequence[str] | None = None) -> tuple[Path, dict[str, str]]:
    """Where `PolicySet.init_from` starts each adapter: (the saved set's folder, {adapter: saved adapter}).

    `directory` is a run directory or its adapters folder; `adapters` default to σ's values. It reads
    only the saved manifest, so `train` refuses a bad --init-adapters before the model loads. Raises
    AdapterFolderError naming the fix when the folder holds no saved set, when a role has no saved adapter,
    when m's roles were trained as different adapters, or when the LoRA shape or the base model differ.
    """
    directory = saved_set_folder(directory)
    saved, saved_lora = read_manifest(directory, "--init-adapters")
    saved_sigma, saved_default = dict(saved["sigma"]), saved.get("default_adapter")
    if (saved_lora.r, saved_lora.alpha, set(saved_lora.target_modules)) != (lora.r, lora.alpha, set(lora.target_modules)):
        raise AdapterFolderError(f"--init-adapters {directory} holds LoRA r={saved_lora.r}, alpha={saved_lora.alpha} on "
                                 f"{list(saved_lora.target_modules)}; this run has r={lora.r}, alpha={lora.alpha}: "
                                 f"pass --lora-r {saved_lora.r} --lora-alpha {saved_lora.alpha}")
    base = saved.get("base_model")
    if base and model_path and Path(base).resolve() != Path(model_path).resolve():
        raise AdapterFolderError(f"--init-adapters {directory} were trained on {base}, this run loads {model_path}: "
                                 "pass the same --model")
    sources: dict[str, str] = {}
    for adapter in adapters if adapters is not None else dict.fromkeys(sigma.values()):
        roles = [r for r, a in sigma.items() if a == adapter] or list(saved_sigma) or ["*"]
        found = {saved_sigma.get(r, saved_default) for r in roles}
        if None in found:
            raise AdapterFolderError(f"--init-adapters {directory} has no adapter for role(s) "
                                     f"{[r for r in roles if saved_sigma.get(r, saved_default) is None]} (saved σ {saved_sigma})")
        if len(found) > 1:
            raise AdapterFolderError(f"adapter {adapter!r} serves roles {roles}, which {directory} trained as different adapters "
                                     f"{sorted(found)}: pass the --policy the adapters were trained with, --policy {policy_flag(saved_sigma)}")
        sources[adapter] = found.pop()
        if not (directory / sources[adapter] / "adapter_model.safetensors").is_file():
            raise AdapterFolderError(f"--init-adapters {directory} lists adapter {sources[adapter]!r} but has no "
                                     f"{sources[adapter]}/adapter_model.safetensors: pass a checkpoint's adapters folder instead")
    return directory, sources


def set_deterministic(enabled: bool = True, seed: int | None = None) -> None:
    """Deterministic torch kernels (and, with `seed`, a seeded torch RNG for dropout).

    A resumed run can only equal an uninterrupted one if every kernel is deterministic; on CUDA
    cuBLAS also needs a fixed workspace (set before its first use).
    """
    if enabled:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(enabled)
    torch.backends.cudnn.deterministic = enabled
    torch.backends.cudnn.benchmark = not enabled
    if seed is not None:
        torch.manual_seed(seed)


@dataclass
class PolicySet:
    """A PEFT model holding every adapter, its tokenizer, and σ.

    Build it with `from_pretrained` (or `build` from a loaded model). `model` is a `PeftModel`;
    its base weights are frozen, each adapter's LoRA weights are trained by their own optimizer.
    """

    model: Any
    tokenizer: Any
    sigma: dict[str, str]
    adapters: tuple[str, ...]
    lora: LoRAConfig = field(default_factory=LoRAConfig)
    default_adapter: str | None = None
    """Adapter of roles σ does not list (the shared adapter under `--policy shared`), else None."""
    model_path: str | None = None
    """Folder of the base model (what vLLM loads), when known."""
    thinking: bool | tuple[str, ...] = False
    """Whether prompts let a thinking model reason before it replies (`chat_prompt_ids`): for every role (True),
    none (False) or the roles named (`parse_thinking`); saved with the set. `thinks` reads it."""
    _checkpointing: bool = field(default=False, init=False, repr=False)
    """Inside `checkpointing()`: layers run again in the backward pass, so a shared prompt's KV cache must replay
    (`llm_marl.models.kv_replay`) and the LM head may run in chunks (`target_logprobs`)."""

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_pretrained(cls, model: str, roles: Sequence[str] | None = None, policy: str = "shared",
                        lora: LoRAConfig | None = None, dtype: torch.dtype | str = "float32",
                        device: str | None = None, seed: int = 0, thinking: bool | Sequence[str] = False) -> PolicySet:
        """Load `model` (see `llm_marl.models.resolve_model`) and attach one adapter per σ target."""
        from llm_marl.models import load_model_and_tokenizer, resolve_model

        path = resolve_model(model)
        base, tokenizer = load_model_and_tokenizer(path, dtype=dtype, device=device)
        return cls.build(base, tokenizer, parse_policy(policy, roles), lora=lora, seed=seed,
                         default_adapter=SHARED_ADAPTER if policy.strip() == "shared" else None, model_path=path,
                         thinking=thinking)

    @classmethod
    def build(cls, base: Any, tokenizer: Any, sigma: Mapping[str, str], lora: LoRAConfig | None = None, seed: int = 0,
              default_adapter: str | None = None, model_path: str | None = None,
              thinking: bool | Sequence[str] = False) -> PolicySet:
        """Wrap a loaded causal LM with PEFT: one LoRA adapter per distinct value of σ.

        LoRA A matrices are drawn under `seed` without touching the caller's global RNG (B starts
        at zero, so every adapter starts as the base model).
        """
        from peft import get_peft_model

        lora = lora or LoRAConfig()
        adapters = tuple(dict.fromkeys([*sigma.values(), *([default_adapter] if default_adapter else [])]))
        if not adapters:
            raise ValueError("the policy set needs at least one adapter: give roles or use --policy shared")
        for p in base.parameters():
            p.requires_grad_(False)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = get_peft_model(base, lora.to_peft(), adapter_name=adapters[0])
            for name in adapters[1:]:
                model.add_adapter(name, lora.to_peft())
        for name, p in model.named_parameters():
            p.requires_grad_(_adapter_of(name) is not None)
        # PEFT's new LoRA dropout modules start in training mode: RL updates would then drop activations that
        # sampling kept, and recompute log-probs other than the sampled ones. Eval mode everywhere; `sft` trains.
        model.eval()
        return cls(model=model, tokenizer=tokenizer, sigma=dict(sigma), adapters=adapters, lora=lora,
                   default_adapter=default_adapter, model_path=model_path or getattr(base, "name_or_path", None),
                   thinking=thinking if isinstance(thinking, bool) else tuple(thinking))

    def thinks(self, role: str | None) -> bool:
        """Whether `role`'s prompts let a thinking model reason before it replies (`thinking`)."""
        return role in self.thinking if isinstance(self.thinking, tuple) else bool(self.thinking)

    # ------------------------------------------------------------------ σ and adapters
    def adapter_for(self, role: str) -> str:
        """σ(role)."""
        adapter = self.sigma.get(role, self.default_adapter)
        if adapter is None:
            # --policy maps exactly the environment's roles: a role outside them met adapters of another environment
            raise ValueError(f"role {role!r} has no adapter: these adapters serve the roles {sorted(self.sigma)} (--policy "
                             f"{policy_flag(self.sigma)}); use adapters trained on an environment with role {role!r}, "
                             "or shared ones (--policy shared)")
        return adapter

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @contextlib.contextmanager
    def use(self, adapter: str | None) -> Iterator[Any]:
        """Run the model as policy `adapter` (None: the base model, adapters disabled)."""
        if adapter is None:
            with self.model.disable_adapter():
                yield self.model
            return
        if adapter not in self.adapters:
            raise ValueError(f"unknown adapter {adapter!r}; this policy set has {list(self.adapters)}")
        if self.model.active_adapter != adapter:
            self.model.set_adapter(adapter)
            # PEFT freezes inactive adapters on switch; keep every adapter trainable so that each
            # optimizer always sees its own parameters (only the active one gets gradients).
            for name, p in self.model.named_parameters():
                if _adapter_of(name) is not None:
                    p.requires_grad_(True)
        yield self.model

    @contextlib.contextmanager
    def checkpointing(self, enabled: bool = True) -> Iterator[None]:
        """Gradient checkpointing inside the block (`--gradient-checkpointing`): each decoder layer keeps only
        its input for the backward pass and runs again there, so a pass holds one layer's activations instead
        of every layer's (about one more forward pass of time), and the LM head's logits likewise, a chunk of
        tokens at a time (`target_logprobs`). Per block, so that sampling keeps its KV cache.

        transformers checkpoints a layer when its own train flag is set: only that flag is set here, so that
        attention and LoRA dropout keep their mode (off in RL updates). A checkpointed layer runs again with
        the KV cache it was given, so a prompt shared by several rows is run once only where the model's cache
        can be replayed (`llm_marl.models.kv_replay`); otherwise every row runs with its own prompt.
        """
        if not enabled:
            yield
            return
        from torch.utils.checkpoint import checkpoint

        layers = self.checkpoint_layers()
        saved = [(m.gradient_checkpointing, m.training, m.__dict__.get("_gradient_checkpointing_func")) for m in layers]
        for m in layers:
            m.gradient_checkpointing, m.training = True, True
            m._gradient_checkpointing_func = functools.partial(checkpoint, use_reentrant=False)
            m._can_checkpoint_with_cache = True  # the caches `response_logprobs` gives them replay (kv_replay)
        self._checkpointing = True
        try:
            yield
        finally:
            self._checkpointing = False
            for m, (on, training, func) in zip(layers, saved):
                m.gradient_checkpointing, m.training = on, training
                m.__dict__.pop("_can_checkpoint_with_cache", None)
                if func is None:
                    m.__dict__.pop("_gradient_checkpointing_func", None)
                else:
                    m._gradient_checkpointing_func = func

    def checkpoint_layers(self) -> list[torch.nn.Module]:
        """The decoder layers `checkpointing()` recomputes; a model without any is refused (a bad config: say so early)."""
        from transformers.modeling_layers import GradientCheckpointingLayer

        layers = [m for m in self.model.modules() if isinstance(m, GradientCheckpointingLayer)]
        if not layers:
            name = type(self.model.get_base_model()).__name__
            raise CheckpointingError(f"{name} has no layers transformers can checkpoint; run without --gradient-checkpointing")
        return layers

    def trainable_parameters(self, adapter: str) -> list[torch.nn.Parameter]:
        """The LoRA parameters of `adapter` only: one optimizer per adapter (AT-GRPO Eq. 3)."""
        if adapter not in self.adapters:
            raise ValueError(f"unknown adapter {adapter!r}; this policy set has {list(self.adapters)}")
        return [p for name, p in self.model.named_parameters() if _adapter_of(name) == adapter]

    # ------------------------------------------------------------------ log-probs
    def token_logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, response_mask: torch.Tensor,
                       adapter: str | None, temperature: float = 1.0, grad: bool = False) -> torch.Tensor:
        """log π(input_ids[b, t] | input_ids[b, :t]) at every position with response_mask 1, else 0. [B, L] float32.

        The distribution is softmax(logits / temperature) (temperature 0: softmax(logits), the
        greedy convention), as in the engines. Position ids come from the attention mask, so left-
        and right-padded batches agree. Only response positions go through the LM head, which keeps
        memory at (#response tokens × vocab) instead of (B × L × vocab).
        """
        input_ids = input_ids.to(self.device)
        attention_mask = attention_mask.to(self.device)
        select = response_mask.to(self.device).bool()
        if select[:, 0].any():
            raise ValueError("the first position cannot be a response token: it has no prefix to condition on")
        position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        with self.use(adapter) as model, torch.set_grad_enabled(grad):
            causal_lm = model.get_base_model()
            hidden = causal_lm.get_decoder()(input_ids=input_ids, attention_mask=attention_mask,
                                             position_ids=position_ids, use_cache=False).last_hidden_state
            target_mask = select[:, 1:]
            # Each position predicts the token one position later.
            logprobs = self.target_logprobs(hidden[:, :-1][target_mask], input_ids[:, 1:][target_mask], temperature)
            out = torch.zeros(input_ids.shape, dtype=torch.float32, device=self.device)
            out = out.masked_scatter(torch.nn.functional.pad(target_mask, (1, 0)), logprobs.float())
        return out

    def target_logprobs(self, hidden: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
        """log softmax(head(hidden) / T)[targets] for N final hidden states [N, H] and their next tokens [N].

        A row of logits is vocabulary-wide float32 (600 KB at Qwen3's 152k tokens: 8 replies of 4096 tokens
        hold 20 GB of them). Without gradient the rows run LOGIT_CHUNK_BYTES at a time; with it, under
        `checkpointing()`, each chunk keeps only its hidden states and its logits are computed again in the
        backward pass. Otherwise the backward pass needs every row's log-softmax, so they run at once.
        """
        def chunk(h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            return temperature_logprobs(self.head_logits(h), temperature).gather(-1, t.unsqueeze(-1)).squeeze(-1)

        grad = torch.is_grad_enabled() and hidden.requires_grad
        rows = max(1, LOGIT_CHUNK_BYTES // (4 * self.model.get_base_model().get_output_embeddings().weight.shape[0]))
        if hidden.shape[0] <= rows or (grad and not self._checkpointing):
            return chunk(hidden, targets)
        if not grad:
            return torch.cat([chunk(hidden[i:i + rows], targets[i:i + rows]) for i in range(0, hidden.shape[0], rows)])
        from torch.utils.checkpoint import checkpoint

        return torch.cat([checkpoint(chunk, hidden[i:i + rows], targets[i:i + rows], use_reentrant=False)
                          for i in range(0, hidden.shape[0], rows)])

    def head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM-head logits of final hidden states, with the model's logit soft-capping if it has one."""
        causal_lm = self.model.get_base_model()
        logits = causal_lm.get_output_embeddings()(hidden).float()
        cap = getattr(causal_lm.config, "final_logit_softcapping", None)
        return torch.tanh(logits / cap) * cap if cap else logits

    def response_logprobs(self, prompt_ids: Sequence[Sequence[int]], response_ids: torch.Tensor | Sequence[Sequence[int]],
                          adapter: str | None, temperature: float = 1.0, grad: bool = False,
                          response_mask: torch.Tensor | None = None, share_prompts: bool = True) -> torch.Tensor:
        """Log-probs [B, T] of each response token given its prompt, aligned with `response_ids`.

        The layout of `llm_marl.rollout.collate`: prompts as lists, responses right-padded [B, T]
        with `response_mask` (1 on generated tokens; other response tokens, e.g. tool output, are
        context only and get 0). Lists of response ids need no mask.

        With `share_prompts`, rows whose prompts are identical (the K candidates of one AT-GRPO
        decision, the G first replies of a GRPO group) run their prompt through the model once: its
        KV cache is computed once, with gradient, and expanded to the rows, so the backward pass also
        crosses the prompt once. The result equals the row-by-row computation up to float rounding.
        """
        if not torch.is_tensor(response_ids):
            rows = [list(r) for r in response_ids]
            width = max((len(r) for r in rows), default=0)
            response_mask = torch.tensor([[1.0] * len(r) + [0.0] * (width - len(r)) for r in rows]).reshape(len(rows), width)
            response_ids = torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.long).reshape(len(rows), width)
        elif response_mask is None:
            raise ValueError("a padded response_ids tensor needs its response_mask")
        B, T = response_ids.shape
        if len(prompt_ids) != B:
            raise ValueError(f"{len(prompt_ids)} prompts for {B} responses")
        mask = response_mask.bool().cpu()
        # Keep every response token up to the last generated one as context.
        ends = torch.where(mask.any(1), T - mask.flip(1).int().argmax(1), torch.zeros(B, dtype=torch.long))
        if share_prompts and len({tuple(p) for p in prompt_ids}) < B and (not self._checkpointing or self._replays_cache()):
            return self._shared_prompt_logprobs(prompt_ids, response_ids.cpu(), mask, ends, adapter, temperature, grad)
        starts = torch.tensor([len(p) for p in prompt_ids], dtype=torch.long)
        width = int((starts + ends).max()) if B else 0
        pad = self.tokenizer.pad_token_id or 0
        ids = torch.full((B, width), pad, dtype=torch.long)
        attn = torch.zeros((B, width), dtype=torch.long)
        resp = torch.zeros((B, width), dtype=torch.bool)
        for b in range(B):
            p, e = int(starts[b]), int(ends[b])
            ids[b, :p] = torch.tensor(list(prompt_ids[b]), dtype=torch.long)
            ids[b, p:p + e] = response_ids[b, :e].cpu()
            attn[b, :p + e] = 1
            resp[b, p:p + e] = mask[b, :e]
        full = self.token_logprobs(ids, attn, resp, adapter, temperature, grad)
        index = (starts.unsqueeze(1) + torch.arange(T)).clamp(max=max(width - 1, 0)).to(full.device)
        return full.gather(1, index) * mask.to(full.device)

    def _shared_prompt_logprobs(self, prompt_ids: Sequence[Sequence[int]], response_ids: torch.Tensor, mask: torch.Tensor,
                                ends: torch.Tensor, adapter: str | None, temperature: float, grad: bool) -> torch.Tensor:
        """`response_logprobs` with each distinct prompt run once (see there). Shapes: U distinct prompts,
        left-padded to P; B rows of responses [B, T] (right-padded, `ends` [B] = tokens kept as context)."""
        keys = [tuple(p) for p in prompt_ids]
        index = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        row = torch.tensor([index[k] for k in keys], dtype=torch.long)
        unique = list(index)
        P, B, T = max(len(u) for u in unique), *response_ids.shape
        pad = self.tokenizer.pad_token_id or 0
        prompt = torch.full((len(unique), P), pad, dtype=torch.long)
        prompt_attn = torch.zeros((len(unique), P), dtype=torch.long)
        for u, ids in enumerate(unique):  # left padding: every prompt ends at column P - 1
            prompt[u, P - len(ids):] = torch.tensor(ids, dtype=torch.long)
            prompt_attn[u, P - len(ids):] = 1
        width = max(int(ends.max()), 1)
        resp_attn = (torch.arange(width).unsqueeze(0) < ends.unsqueeze(1)).long()
        lengths = prompt_attn.sum(1)[row]
        device = self.device
        with self.use(adapter) as model, torch.set_grad_enabled(grad):
            decoder = model.get_base_model().get_decoder()
            replay = None
            if self._checkpointing:  # each layer runs again in the backward pass, with these caches
                from llm_marl.models.kv_replay import PrefixCache, PromptCache

                replay = PromptCache(model.get_base_model().config)
            # use_cache=False with a cache given: the layers still use it (and transformers does not warn that
            # checkpointed layers cannot cache).
            first = decoder(input_ids=prompt.to(device), attention_mask=prompt_attn.to(device),
                            position_ids=(prompt_attn.cumsum(-1) - 1).clamp(min=0).to(device), past_key_values=replay,
                            use_cache=replay is None)
            cache = first.past_key_values if replay is None else replay
            cache.batch_select_indices(row.to(device))  # one prompt's keys/values serve all its rows (a gather: grads add up)
            if replay is not None:
                cache = PrefixCache(cache)
            rest = decoder(input_ids=response_ids[:, :width].to(device),
                           attention_mask=torch.cat([prompt_attn[row], resp_attn], 1).to(device),
                           position_ids=(lengths.unsqueeze(1) + torch.arange(width)).to(device),
                           past_key_values=cache, use_cache=replay is None)
            # Response token j is predicted by the hidden state before it: the prompt's last for j = 0.
            before = torch.cat([first.last_hidden_state[row.to(device), -1:], rest.last_hidden_state[:, :-1]], 1)
            select = mask[:, :width].to(device)
            logprobs = self.target_logprobs(before[select], response_ids[:, :width].to(device)[select], temperature)
            out = torch.zeros((B, T), dtype=torch.float32, device=device)
            out[:, :width] = torch.zeros((B, width), dtype=torch.float32, device=device).masked_scatter(select, logprobs.float())
        return out

    def _replays_cache(self) -> bool:
        from llm_marl.models.kv_replay import replayable

        return replayable(self.model.get_base_model().config)

    def reference_logprobs(self, prompt_ids: Sequence[Sequence[int]], response_ids: torch.Tensor | Sequence[Sequence[int]],
                           temperature: float = 1.0, response_mask: torch.Tensor | None = None,
                           share_prompts: bool = True) -> torch.Tensor:
        """`response_logprobs` under the reference policy: the base model with adapters disabled, no grad."""
        return self.response_logprobs(prompt_ids, response_ids, None, temperature, grad=False, response_mask=response_mask,
                                      share_prompts=share_prompts)

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | Path, adapters: Sequence[str] | None = None) -> Path:
        """Write every adapter (or those named in `adapters`) in PEFT format (`<dir>/<adapter>/adapter_model.safetensors`
        + `adapter_config.json`, loadable by PEFT and by vLLM's `LoRARequest`) and σ in `policy_set.json`."""
        from peft.utils import get_peft_model_state_dict
        from safetensors.torch import save_file

        directory = Path(directory)
        for name in self.adapters if adapters is None else adapters:
            target = directory / name
            target.mkdir(parents=True, exist_ok=True)
            state = get_peft_model_state_dict(self.model, adapter_name=name)
            save_file({k: v.detach().cpu().contiguous() for k, v in state.items()}, target / "adapter_model.safetensors",
                      metadata={"format": "pt"})
            config = self.model.peft_config[name]
            config.base_model_name_or_path = self.model_path
            config.save_pretrained(target)
        manifest = {"adapters": list(self.adapters), "sigma": self.sigma, "default_adapter": self.default_adapter,
                    "lora": asdict(self.lora), "base_model": self.model_path,
                    "thinking": self.thinking if isinstance(self.thinking, bool) else list(self.thinking)}
        (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        return directory

    def load(self, directory: str | Path) -> None:
        """Load every adapter saved by `save` (adding adapters this set lacks) and adopt the saved σ."""
        from peft import LoraConfig

        directory = Path(directory)
        manifest_path = directory / MANIFEST
        if not manifest_path.is_file():
            raise FileNotFoundError(f"{manifest_path} not found: point at a folder written by PolicySet.save")
        manifest = json.loads(manifest_path.read_text())
        for name in manifest["adapters"]:
            if name not in self.model.peft_config:
                with torch.random.fork_rng(devices=[]):
                    self.model.add_adapter(name, LoraConfig.from_pretrained(str(directory / name)))
                self.model.train(self.model.training)  # the new adapter's dropout starts in training mode (see `build`)
            result = self._load_weights(name, directory / name)
            unexpected = [k for k in getattr(result, "unexpected_keys", []) if "lora_" in k]
            if unexpected:
                raise AdapterFolderError(f"adapter {name!r} in {directory} does not fit this model: unexpected {unexpected[:3]}")
        self.adapters = tuple(dict.fromkeys([*self.adapters, *manifest["adapters"]]))
        self.sigma = dict(manifest["sigma"])
        self.default_adapter = manifest.get("default_adapter")
        for name, p in self.model.named_parameters():
            p.requires_grad_(_adapter_of(name) is not None)

    def _load_weights(self, adapter: str, folder: Path) -> Any:
        """Set `adapter`'s LoRA weights from `folder`'s adapter_model.safetensors (PEFT saves keys without
        the adapter's name); AdapterFolderError when the file is missing or damaged. Returns PEFT's load result."""
        from peft.utils import set_peft_model_state_dict
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        path = folder / "adapter_model.safetensors"
        try:
            state = load_file(str(path), device=str(self.device))
        except (SafetensorError, OSError) as exc:
            raise AdapterFolderError(f"{path} cannot be read ({exc}); use a checkpoint's adapters folder "
                                     "(RUN_DIR/checkpoints/step_N/adapters) instead") from None
        return set_peft_model_state_dict(self.model, state, adapter_name=adapter)

    def init_from(self, directory: str | Path) -> dict[str, str]:
        """Start every adapter of this set from adapters saved by `save` (a warm start, e.g. SFT), keeping
        this set's σ: adapter m takes the saved adapter that served m's roles, so shared SFT adapters can
        start per-role RL and vice versa. Returns {adapter: the saved adapter it started from}.

        Raises AdapterFolderError naming the fix where `warm_start_sources` does, or when a saved adapter's
        weights do not fit this model.
        """
        directory, sources = warm_start_sources(directory, self.sigma, self.lora, self.model_path, self.adapters)
        for adapter, source in sources.items():
            result = self._load_weights(adapter, directory / source)
            missing = [k for k in getattr(result, "missing_keys", []) if f".{adapter}." in k and "lora_" in k]
            unexpected = [k for k in getattr(result, "unexpected_keys", []) if "lora_" in k]
            if missing or unexpected:
                raise AdapterFolderError(f"adapter {source!r} in {directory} does not fit this model: "
                                         f"missing {missing[:3]}, unexpected {unexpected[:3]}")
        for name, p in self.model.named_parameters():
            p.requires_grad_(_adapter_of(name) is not None)
        return sources

    def set_deterministic(self, enabled: bool = True, seed: int | None = None) -> None:
        """See `set_deterministic`."""
        set_deterministic(enabled, seed)


def adapter_tensors(policy: PolicySet) -> dict[str, dict[str, torch.Tensor]]:
    """Every adapter's LoRA weights as CPU tensors, keyed like a PEFT save ({adapter: {key: tensor}}): copies, never
    views of the live weights (`.cpu()` of a CPU tensor is the tensor itself), so they keep what was served."""
    from peft.utils import get_peft_model_state_dict

    return {name: {k: v.detach().to("cpu", copy=True).contiguous() for k, v in get_peft_model_state_dict(policy.model, adapter_name=name).items()}
            for name in policy.adapters}


def changed_adapters(now: Mapping[str, Mapping[str, torch.Tensor]], before: Mapping[str, Mapping[str, torch.Tensor]]) -> list[str]:
    """The adapters of `now` whose weights differ from `before`'s (or that `before` lacks): those an engine must load
    again. An adapter that took no optimiser step has the weights it was last served with."""
    return [name for name, weights in now.items()
            if name not in before or weights.keys() != before[name].keys()
            or not all(torch.equal(w, before[name][k]) for k, w in weights.items())]


def _adapter_of(param_name: str) -> str | None:
    """Adapter name of a LoRA parameter (`...q_proj.lora_A.<adapter>.weight`), else None."""
    parts = param_name.split(".")
    for i, part in enumerate(parts[:-1]):
        if part.startswith("lora_"):
            return parts[i + 1]
    return None


def temperature_logprobs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """log softmax(logits / T); T = 0 (greedy) uses the raw logits."""
    logits = logits.float()
    return torch.log_softmax(logits / temperature if temperature > 0 else logits, dim=-1)
