"""Model names -> folders that `from_pretrained` (and vLLM) can load, fully offline.

A name is, in this order: a built-in (`smollm2-135m`, `tiny-random`: built once into the cache,
see `cache_root()`), an existing local folder, or a Hugging Face id that must already be in the
local HF cache. Hubs are unreachable on the target machines, so a missing id fails at once with
the fix instead of hanging on network retries.

    path = resolve_model("tiny-random")
    model, tokenizer = load_model_and_tokenizer("smollm2-135m")
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import smollm2, tiny_random
from .cache import CACHE_ENV, cache_root, cached_build

if TYPE_CHECKING:
    import torch

__all__ = ["BUILTINS", "CACHE_ENV", "ModelNotFoundError", "cache_root", "load_model_and_tokenizer", "resolve_model"]

BUILTINS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "smollm2-135m": (f"smollm2-135m-instruct-q4_1-v{smollm2.VERSION}", smollm2.build),
    "tiny-random": (f"tiny-random-qwen2-v{tiny_random.VERSION}", tiny_random.build),
}
"""name -> (cache key, builder)."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


class ModelNotFoundError(ValueError):
    """A model name that resolves to nothing loadable; the message names the fix."""


class NoChatTemplateError(ValueError):
    """The model's tokenizer has no chat template: the environments speak in chat messages."""


def load_tokenizer(path: str) -> Any:
    """The tokenizer of the model folder `path`, with a pad token; a tokenizer without a chat template is a
    `NoChatTemplateError` (a base model: every prompt is a chat)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as exc:  # transformers' messages run over several lines
        raise ModelNotFoundError(f"cannot load the tokenizer of {path}: {' '.join(str(exc).split())}") from None
    if not getattr(tokenizer, "chat_template", None):
        raise NoChatTemplateError(f"the tokenizer of {path} has no chat template (a base model?); the environments "
                                  "prompt in chat messages: use an instruct/chat model, or add a chat template to its "
                                  "tokenizer_config.json")
    if tokenizer.pad_token_id is None:  # padding is always masked, so any id works; EOS is customary
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def resolve_model(name: str) -> str:
    """A local folder holding the model `name` (built-in, folder, or cached Hugging Face id)."""
    if name in BUILTINS:
        key, build = BUILTINS[name]
        return str(cached_build(key, build))
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"folder {name!r} has no config.json: point --model at a Hugging Face model folder")
        return str(path)
    looks_local = name.startswith((".", "/", "~")) or name.count("/") > 1
    if looks_local or not _HUB_ID.match(name):
        raise ModelNotFoundError(f"no such model folder: {name!r}; built-ins are {', '.join(BUILTINS)}")
    return _from_hf_cache(name)


def _from_hf_cache(repo_id: str) -> str:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        # local_files_only: never touch the network (hubs are unreachable here; retries would hang).
        return snapshot_download(repo_id, local_files_only=True)
    except (LocalEntryNotFoundError, FileNotFoundError, OSError) as exc:
        raise ModelNotFoundError(
            f"model {repo_id!r} is not in the local Hugging Face cache and model hubs are unreachable from "
            f"this machine. Fix: download it where there is network (`hf download {repo_id}`) and copy the "
            f"cache (~/.cache/huggingface, or $HF_HOME) here, or pass a local folder, or use a built-in "
            f"({', '.join(BUILTINS)}). ({type(exc).__name__})"
        ) from None


def resolve_device(device: str = "auto") -> str:
    """The torch device the trainer's model runs on: `auto` is `cuda` when torch sees a GPU, else `cpu`;
    `cpu`, `cuda` and `cuda:N` are taken as given once checked (a GPU asked for must be there)."""
    import torch

    name = (device or "auto").strip().lower()
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return name
    if name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit()):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(name[5:]) if ":" in name else 0
        if index >= count:
            raise ValueError(f"--device {device}: torch sees {count} CUDA device(s) here (a CPU build of torch sees none); "
                             "use --device cpu, or --device auto to take a GPU only when there is one")
        return name
    raise ValueError(f"--device must be auto, cpu, cuda or cuda:N, got {device!r}")


def resolve_dtype(dtype: str, device: str) -> str:
    """The dtype of the base model's weights on `device`: `auto` is bfloat16 on a CUDA device that supports it
    (as vLLM serves a bfloat16 checkpoint, and as the papers train), else float32 (CPUs, older GPUs); any other
    torch dtype name as given (the command line offers float32 and bfloat16; tests use float64)."""
    import torch

    if dtype == "auto":
        return "bfloat16" if str(device).startswith("cuda") and torch.cuda.is_bf16_supported() else "float32"
    return dtype


def load_model_and_tokenizer(name: str, dtype: "torch.dtype | str" = "float32", device: str | None = None) -> tuple[Any, Any]:
    """(causal LM in eval mode, tokenizer with a pad token) for `name`, loaded offline.

    float32 by default (the CPU path); "auto" is `resolve_dtype`'s choice for `device` (bfloat16 on a GPU).
    LoRA adapters added by PEFT stay float32 over a bfloat16 base.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from .attention import use_gqa_attention

    path = resolve_model(name)
    if isinstance(dtype, str):
        dtype = getattr(torch, resolve_dtype(dtype, device or "cpu"))
    tokenizer = load_tokenizer(path)  # before the weights: a model without a chat template is refused at once
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    use_gqa_attention(model)
    if device is not None:
        model.to(device)
    model.eval()
    return model, tokenizer
