"""Sigmoid DPO loss on the failure route's preference pairs (Rafailov et al. 2023, arXiv:2305.18290; Sec. 4.2).

    z = β · [(log π(y+|x) - log π_ref(y+|x)) - (log π(y-|x) - log π_ref(y-|x))]
    loss = mean_pairs[ -(1 - ε) · log σ(z) - ε · log σ(-z) ]      (ε = label_smoothing, conservative DPO)

Inputs are summed sequence log-probs of the chosen (y+) and rejected (y-) message per pair, shape
[P]; reference log-probs carry no gradient. Metrics (namespace `dpo/`): `loss`, `reward_accuracy`
(fraction of pairs whose implicit reward β·(log π - log π_ref) is higher for y+), `margin` (mean z),
`chosen_reward` and `rejected_reward` (mean implicit rewards).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def dpo_loss(policy_chosen_logps: torch.Tensor, policy_rejected_logps: torch.Tensor,
             ref_chosen_logps: torch.Tensor, ref_rejected_logps: torch.Tensor, beta: float = 0.1,
             label_smoothing: float = 0.0) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean sigmoid DPO loss over P pairs (all inputs [P]) and its metrics; pushes y+ up and y- down."""
    shapes = {t.shape for t in (policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps)}
    if len(shapes) != 1 or policy_chosen_logps.dim() != 1 or policy_chosen_logps.numel() == 0:
        raise ValueError(f"log-probs must all have the same non-empty shape [P] (one summed log-prob per pair), "
                         f"got {[tuple(s) for s in shapes]}")
    if beta <= 0:
        raise ValueError(f"beta must be > 0 (it scales the implicit reward), got {beta}")
    if not 0 <= label_smoothing < 0.5:
        raise ValueError(f"label_smoothing must be in [0, 0.5), got {label_smoothing}")
    chosen_reward = beta * (policy_chosen_logps - ref_chosen_logps.detach())
    rejected_reward = beta * (policy_rejected_logps - ref_rejected_logps.detach())
    z = chosen_reward - rejected_reward
    loss = (-(1 - label_smoothing) * F.logsigmoid(z) - label_smoothing * F.logsigmoid(-z)).mean()
    metrics = {
        "dpo/loss": loss.item(),
        "dpo/reward_accuracy": (chosen_reward > rejected_reward).float().mean().item(),
        "dpo/margin": z.mean().item(),
        "dpo/chosen_reward": chosen_reward.mean().item(),
        "dpo/rejected_reward": rejected_reward.mean().item(),
    }
    return loss, metrics
