"""The clipped policy-gradient loss, as a pipeline of pure tensor functions.

    log-ratio (token or sequence level) -> clipped surrogate (dual clip where A < 0) -> + β·k3 KL to the reference
    -> aggregation (token-mean | seq-mean | seq-sum)

Shapes: B samples (rows), T response positions; `mask` [B, T] is 1 on generated tokens only
(prompt, tool output and padding are 0: MATPO trains only generated tokens). `segment_ids` [B]
optionally groups rows into units that share one normaliser or one sequence-level ratio: by
default each row is its own segment; MATPO passes its rollout index (tokens averaged over a
planner rollout and all its workers' replies, then over rollouts); SHARP passes (trajectory,
agent) to get one trajectory-level ratio per agent.

Gradient clipping, AdamW and the learning-rate schedule live in the trainer loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

RatioLevel = Literal["token", "sequence"]
Aggregation = Literal["token-mean", "seq-mean", "seq-sum"]
RATIO_MAX_LOGGED = float(torch.finfo(torch.float32).max)
"""The largest ratio `loss/ratio_max` and `loss/ratio_mean` count: a ratio that overflowed is counted as this, not inf."""


@dataclass(frozen=True)
class LossConfig:
    eps_low: float = 0.2
    """Clip range below 1: the ratio is clipped at 1 - eps_low (PPO/GRPO ε)."""
    eps_high: float = 0.2
    """Clip range above 1: the ratio is clipped at 1 + eps_high (DAPO's clip-higher uses 0.28)."""
    ratio_level: RatioLevel = "token"
    """"token": one ratio per token (GRPO, AT-GRPO, MATPO); "sequence": one ratio per segment,
    exp(Σ_t log π/π_old) over its tokens (trajectory-level ratio: SHARP Alg. 1)."""
    aggregation: Aggregation = "token-mean"
    """"token-mean": Σ loss / Σ tokens over the batch (DAPO); "seq-mean": mean over segments of each
    segment's token mean (GRPO; MATPO with episode segments); "seq-sum": mean over segments of the
    token sum (the literal log π(a|o) of AT-GRPO Eq. 3)."""
    beta: float = 0.0
    """Weight of the k3 KL penalty to the reference policy (0 disables it; no reference pass needed)."""
    dual_clip: float = 3.0
    """Dual-clip PPO's c (Ye et al. 2020; verl's clip_ratio_c, default 3): where A < 0 the loss is at most c·|A|, so a
    huge ratio cannot dominate its step (gradient 0 past ρ = c). 0 disables it (plain PPO-clip, unbounded in ρ)."""

    def __post_init__(self) -> None:
        if self.eps_low < 0 or self.eps_high < 0 or self.eps_low >= 1:
            raise ValueError(f"clip ranges must satisfy 0 <= eps_low < 1 and eps_high >= 0, got {self.eps_low}, {self.eps_high}")
        if self.ratio_level not in ("token", "sequence"):
            raise ValueError(f"ratio_level must be 'token' or 'sequence', got {self.ratio_level!r}")
        if self.aggregation not in ("token-mean", "seq-mean", "seq-sum"):
            raise ValueError(f"aggregation must be token-mean, seq-mean or seq-sum, got {self.aggregation!r}")
        if self.beta < 0:
            raise ValueError(f"beta must be >= 0, got {self.beta}")
        if not (self.dual_clip == 0 or 1 < self.dual_clip < math.inf):
            raise ValueError(f"dual_clip must be > 1 and finite (0 disables it), got {self.dual_clip}")


def _segments(mask: torch.Tensor, segment_ids: torch.Tensor | None) -> tuple[torch.Tensor, int]:
    """Dense segment index per row [B] and the number of segments."""
    B = mask.shape[0]
    if segment_ids is None:
        return torch.arange(B, device=mask.device), B
    seg = torch.as_tensor(segment_ids, device=mask.device).long().reshape(-1)
    if seg.numel() != B:
        raise ValueError(f"segment_ids has {seg.numel()} entries for {B} rows")
    _, dense = torch.unique(seg, return_inverse=True)
    return dense, int(dense.max()) + 1 if B else 0


def _segment_sum(values: torch.Tensor, mask: torch.Tensor, seg: torch.Tensor, S: int) -> torch.Tensor:
    """Σ over the masked tokens of each segment: [B, T] -> [S]."""
    per_row = (values * mask).sum(dim=1)
    return torch.zeros(S, dtype=per_row.dtype, device=per_row.device).index_add(0, seg, per_row)


def log_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor, mask: torch.Tensor, level: RatioLevel = "token",
              segment_ids: torch.Tensor | None = None) -> torch.Tensor:
    """log π_θ/π_old per token [B, T].

    `level="token"`: logprobs - old_logprobs. `level="sequence"`: the segment's summed log-ratio
    Σ_t (log π_θ - log π_old) over its masked tokens, broadcast to each of its tokens (so the
    surrogate below sees one ratio per segment). Masked positions are 0.
    """
    per_token = (logprobs - old_logprobs) * mask
    if level == "token":
        return per_token
    if level != "sequence":
        raise ValueError(f"level must be 'token' or 'sequence', got {level!r}")
    seg, S = _segments(mask, segment_ids)
    total = _segment_sum(logprobs - old_logprobs, mask, seg, S)
    return total[seg].unsqueeze(1).expand_as(mask) * mask


def clipped_surrogate(log_ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float = 0.2,
                      eps_high: float = 0.2, dual_clip: float = 3.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO-clip loss  -min(ρ·A, clip(ρ, 1-eps_low, 1+eps_high)·A),  ρ = exp(log_ratio).

    With `dual_clip` c > 1 (dual-clip PPO, Ye et al. 2020), where A < 0 the loss is min(that, -c·A): bounded at c·|A|,
    where plain PPO-clip keeps ρ·|A| for any ρ > 1 + eps_high. 0: plain PPO-clip.
    `log_ratio` [B, T]; `advantages` [B] (broadcast over tokens) or [B, T]. Returns
    (loss [B, T], clipped [B, T] bool: where a clipped branch is active, so the gradient is 0).
    """
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    # Where A >= 0 a ratio past 1 + eps_high is clipped (A > 0) or weightless (A = 0), and with dual clip where A < 0 a
    # ratio past c is bounded: a constant loss, gradient 0. Capping its log there keeps exp finite: a sequence-level
    # log-ratio summed over a long trajectory can pass exp's range (88 nats in float32), and inf·0 made the loss or the
    # whole step's gradient NaN. The capped ratio is still past the bound, so the loss is unchanged.
    cap_negative = math.log(dual_clip) + 1.0 if dual_clip else math.inf
    cap = torch.where(adv >= 0, math.log1p(eps_high) + 1.0, cap_negative).to(log_ratio.dtype)
    ratio = torch.exp(log_ratio.clamp(max=cap))
    unclipped = -ratio * adv
    clipped = -torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    loss = torch.maximum(unclipped, clipped)
    active = ((ratio > 1.0 + eps_high) & (adv > 0)) | ((ratio < 1.0 - eps_low) & (adv < 0))
    if dual_clip:
        loss = torch.where(adv < 0, torch.minimum(loss, -dual_clip * adv), loss)
        active = active | ((ratio > dual_clip) & (adv < 0))
    return loss, active


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(π_θ || π_ref) per token [B, T]: e^{Δ} - Δ - 1, Δ = log π_ref - log π_θ.

    Non-negative; its gradient in log π_θ is 1 - e^{Δ}, which pushes log π_θ toward log π_ref.
    """
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: Aggregation = "token-mean",
              segment_ids: torch.Tensor | None = None, normalizer: float | None = None) -> torch.Tensor:
    """Reduce a per-token loss [B, T] to a scalar.

    token-mean: Σ loss·mask / Σ mask. seq-mean: (1/S) Σ_s (Σ_{t∈s} loss / |s|). seq-sum:
    (1/S) Σ_s Σ_{t∈s} loss. S counts segments with at least one token. `normalizer` replaces the
    denominator (Σ mask, or S) when a batch is split into micro-batches that must share the
    full batch's normaliser.
    """
    if mode == "token-mean":
        denom = mask.sum() if normalizer is None else torch.as_tensor(normalizer, dtype=per_token.dtype)
        return (per_token * mask).sum() / denom.clamp(min=1e-8)
    if mode not in ("seq-mean", "seq-sum"):
        raise ValueError(f"aggregation must be token-mean, seq-mean or seq-sum, got {mode!r}")
    seg, S = _segments(mask, segment_ids)
    sums = _segment_sum(per_token, mask, seg, S)
    counts = _segment_sum(torch.ones_like(per_token), mask, seg, S)
    present = counts > 0
    per_segment = sums / counts.clamp(min=1) if mode == "seq-mean" else sums
    denom = present.sum().to(per_token.dtype) if normalizer is None else torch.as_tensor(normalizer, dtype=per_token.dtype)
    return (per_segment * present).sum() / denom.clamp(min=1e-8)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax(logits) per position: [B, T, V] -> [B, T]."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                config: LossConfig = LossConfig(), ref_logprobs: torch.Tensor | None = None,
                segment_ids: torch.Tensor | None = None, entropy: torch.Tensor | None = None,
                normalizer: float | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """The full loss for one batch.

    logprobs [B, T] (with grad), old_logprobs [B, T], advantages [B] or [B, T], mask [B, T],
    ref_logprobs [B, T] (needed when beta > 0), segment_ids [B], entropy [B, T] (metric only).
    Returns (scalar loss, metrics): `loss/policy`, `loss/kl_ref`, `loss/clip_frac`,
    `loss/approx_kl` (k3 estimate of KL(π_old || π_θ)), `loss/ratio_mean`, `loss/ratio_max`, `loss/entropy`.
    """
    mask = mask.to(logprobs.dtype)
    lr = log_ratio(logprobs, old_logprobs, mask, config.ratio_level, segment_ids)
    surrogate, clipped = clipped_surrogate(lr, advantages.to(logprobs.dtype), config.eps_low, config.eps_high, config.dual_clip)
    agg = lambda x: aggregate(x, mask, config.aggregation, segment_ids, normalizer)  # noqa: E731
    pg = agg(surrogate)
    loss = pg
    metrics: dict[str, float] = {}
    if config.beta > 0:
        if ref_logprobs is None:
            raise ValueError("beta > 0 needs ref_logprobs (the base model with adapters disabled)")
        kl = agg(kl_k3(logprobs, ref_logprobs))
        loss = loss + config.beta * kl
        metrics["loss/kl_ref"] = float(kl.detach())
    with torch.no_grad():
        n = mask.sum().clamp(min=1)
        ratio = torch.exp(lr)
        metrics["loss/policy"] = float(pg.detach())
        metrics["loss/clip_frac"] = float((clipped.to(mask.dtype) * mask).sum() / n)
        # KL(π_old || π_θ) from samples of π_old: (ρ - 1) - log ρ per token (CleanRL's approx_kl).
        metrics["loss/approx_kl"] = float((kl_k3(old_logprobs, logprobs.detach()) * mask).sum() / n)
        # A ratio past exp's range (a sequence-level log-ratio over 88 nats in float32) is logged as float32's largest
        # value, not inf: it still reads as an overflow, stays a number on the plots, and the ranks' max (taken in
        # float32) stays finite. Metric only: the loss caps its own ratio (clipped_surrogate).
        # Capped in float64 (bfloat16 cannot hold the cap), and their mean summed there: n tokens at the cap would
        # overflow a float32 sum. The mean is at most the cap, and so are update.py's token-weighted sums of it over
        # micro-batches and ranks (weights that add up to 1, taken in float64): a float32 number everywhere.
        capped, weights = ratio.double().clamp(max=RATIO_MAX_LOGGED), mask.double()
        metrics["loss/ratio_mean"] = float((capped * weights).sum() / weights.sum().clamp(min=1))
        metrics["loss/ratio_max"] = float(capped.masked_fill(mask == 0, float("-inf")).max()) if mask.any() else 1.0
        if entropy is not None:
            metrics["loss/entropy"] = float((entropy.detach() * mask).sum() / n)
    return loss, metrics
