"""The clipped surrogate's gradients against the hand-derived policy-gradient direction."""

from __future__ import annotations

import math

import pytest
import torch

from llm_marl.loss import (LossConfig, aggregate, clipped_surrogate, entropy_from_logits, kl_k3, log_ratio,
                           policy_loss)

B, T, V = 3, 4, 5
LENGTHS = [4, 2, 3]
ADV = torch.tensor([1.0, -0.5, 2.0])


def batch():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(B, T, V, generator=g, dtype=torch.float64).requires_grad_()
    ids = torch.randint(0, V, (B, T), generator=g)
    mask = torch.tensor([[1.0 if t < n else 0.0 for t in range(T)] for n in LENGTHS], dtype=torch.float64)
    return logits, ids, mask


def token_logprobs(logits, ids):
    return torch.log_softmax(logits, dim=-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def score_direction(logits, ids):
    """d log π(y_t) / d logits_t = onehot(y_t) - softmax(logits_t): [B, T, V]."""
    return torch.nn.functional.one_hot(ids, V).double() - torch.softmax(logits.detach(), dim=-1)


@pytest.mark.parametrize(
    "aggregation,weight",
    [
        # d loss / d logp_{b,t} = -A_b · m_bt · weight_b  (ratio = 1, nothing clipped)
        ("token-mean", lambda b: 1.0 / sum(LENGTHS)),
        ("seq-mean", lambda b: 1.0 / (B * LENGTHS[b])),
        ("seq-sum", lambda b: 1.0 / B),
    ],
)
def test_surrogate_gradient_is_the_policy_gradient(aggregation, weight):
    logits, ids, mask = batch()
    logp = token_logprobs(logits, ids)
    loss, metrics = policy_loss(logp, logp.detach(), ADV.double(), mask, LossConfig(aggregation=aggregation))
    loss.backward()
    expected = torch.zeros(B, T, V, dtype=torch.float64)
    direction = score_direction(logits, ids)
    for b in range(B):
        expected[b] = -ADV[b] * weight(b) * mask[b].unsqueeze(-1) * direction[b]
    assert torch.allclose(logits.grad, expected, atol=1e-12)
    assert metrics["loss/clip_frac"] == 0.0 and metrics["loss/approx_kl"] == pytest.approx(0.0)
    assert metrics["loss/ratio_mean"] == pytest.approx(1.0)
    # At ratio 1 the loss value is the advantage-weighted normaliser itself.
    assert loss.item() == pytest.approx(-sum(ADV[b].item() * LENGTHS[b] * weight(b) for b in range(B)))


def test_gradient_step_raises_positive_and_lowers_negative_advantage_tokens():
    logits, ids, mask = batch()
    logp = token_logprobs(logits, ids)
    loss, _ = policy_loss(logp, logp.detach(), ADV.double(), mask, LossConfig(aggregation="seq-mean"))
    loss.backward()
    with torch.no_grad():
        new = token_logprobs(logits - 1e-3 * logits.grad, ids)
    change = ((new - logp.detach()) * mask).sum(dim=1)
    assert change[0] > 0 and change[1] < 0 and change[2] > 0


def test_segments_share_one_normaliser():
    """MATPO: rows 0 and 1 are one rollout; its tokens are averaged together, then over rollouts."""
    logits, ids, mask = batch()
    logp = token_logprobs(logits, ids)
    seg = torch.tensor([7, 7, 3])
    loss, _ = policy_loss(logp, logp.detach(), ADV.double(), mask, LossConfig(aggregation="seq-mean"), segment_ids=seg)
    loss.backward()
    per_row = torch.tensor([1 / (2 * 6), 1 / (2 * 6), 1 / (2 * 3)], dtype=torch.float64)
    expected = -(ADV.double() * per_row).view(B, 1, 1) * mask.unsqueeze(-1) * score_direction(logits, ids)
    assert torch.allclose(logits.grad, expected, atol=1e-12)


def test_clipping_zeroes_the_gradient_outside_the_trust_region():
    logp = torch.zeros(3, 2, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(3, 2, dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0, -1.0], dtype=torch.float64)
    # ratios: row 0 (A>0) e^0.5 and e^0.1; row 1 (A<0) e^-0.5 and e^-0.1; row 2 (A<0) e^0.5 and e^0.1
    old = -torch.tensor([[0.5, 0.1], [-0.5, -0.1], [0.5, 0.1]], dtype=torch.float64)
    cfg = LossConfig(eps_low=0.2, eps_high=0.2, aggregation="token-mean")
    loss, metrics = policy_loss(logp, old, adv, mask, cfg)
    loss.backward()
    ratio = torch.exp(logp.detach() - old)
    expected = -adv.unsqueeze(1) * ratio / 6
    expected[0, 0] = 0.0  # ratio 1.65 > 1.2 with A > 0: clipped
    expected[1, 0] = 0.0  # ratio 0.61 < 0.8 with A < 0: clipped
    # row 2, token 0: ratio 1.65 with A < 0 keeps the (pessimistic) unclipped term and its gradient
    assert torch.allclose(logp.grad, expected, atol=1e-12)
    assert logp.grad[2, 0] > 0
    assert metrics["loss/clip_frac"] == pytest.approx(2 / 6)


def test_clip_higher_is_asymmetric():
    lr = torch.full((1, 1), math.log(1.25), dtype=torch.float64)
    adv = torch.tensor([1.0], dtype=torch.float64)
    assert clipped_surrogate(lr, adv, 0.2, 0.2)[1].item() is True
    assert clipped_surrogate(lr, adv, 0.2, 0.28)[1].item() is False


def test_sequence_level_ratio_and_clipping():
    logp = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
    adv = torch.tensor([1.0, 1.0], dtype=torch.float64)
    cfg = LossConfig(ratio_level="sequence", aggregation="seq-mean")
    # row 0: ratio 1 -> dL/dlogp_t = -A/S for each token; row 1: Σ log ratio = 0.3 > log 1.2 -> clipped
    old = torch.tensor([[0.0, 0.0, 0.0], [-0.1, -0.2, 5.0]], dtype=torch.float64)
    lr = log_ratio(logp.detach(), old, mask, "sequence")
    assert lr[1, :2].tolist() == pytest.approx([0.3, 0.3]) and lr[1, 2] == 0
    loss, _ = policy_loss(logp, old, adv, mask, cfg)
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([-0.5, -0.5, -0.5])
    assert logp.grad[1].tolist() == pytest.approx([0.0, 0.0, 0.0])


@pytest.mark.parametrize("advantage, beta", [(1.0, 0.0), (0.0, 0.04)])
def test_a_clipped_segment_with_a_huge_sequence_ratio_keeps_the_gradient_finite(advantage, beta):
    """A trajectory's summed log-ratio past exp's range (100 nats over a long reply) with A >= 0 is clipped or
    weightless: its loss is finite and its gradient 0, and it must not make the rest of the step NaN."""
    cfg = LossConfig(ratio_level="sequence", aggregation="seq-mean", beta=beta)
    mask = torch.ones(2, 4)
    adv = torch.tensor([advantage, -0.5])

    def grad(shift):
        logp = torch.full((2, 4), -1.0, requires_grad=True)
        old = torch.full((2, 4), -1.0)
        old[0] -= shift / 4  # segment 0's log-ratio sums to `shift`
        loss, _ = policy_loss(logp, old, adv, mask, cfg, ref_logprobs=torch.full((2, 4), -1.0))
        loss.backward()
        return float(loss.detach()), logp.grad

    loss, huge = grad(100.0)
    expected_loss, expected = grad(5.0)  # clipped (or weightless) too, within exp's range
    assert math.isfinite(loss) and loss == pytest.approx(expected_loss)
    torch.testing.assert_close(huge, expected)


def test_dual_clip_bounds_a_negative_advantage_at_c_times_its_size():
    """Dual-clip PPO (Ye et al. 2020): with A < 0, ρ = 10 > c = 3 gives loss c·|A| and no gradient, where plain
    PPO-clip gives ρ·|A| = 5 and the gradient ρ·|A|; a ratio in (1 + eps, c) keeps plain PPO-clip's loss and gradient."""
    adv = torch.tensor([-0.5, -0.5], dtype=torch.float64)
    ratios = [10.0, 2.0]
    lr = torch.log(torch.tensor([[r] for r in ratios], dtype=torch.float64)).requires_grad_()
    loss, active = clipped_surrogate(lr, adv, 0.2, 0.2, dual_clip=3.0)
    loss.sum().backward()
    assert loss[:, 0].tolist() == pytest.approx([3.0 * 0.5, 2.0 * 0.5])
    assert lr.grad[:, 0].tolist() == pytest.approx([0.0, 2.0 * 0.5])  # d(ρ·|A|)/d log ρ = ρ·|A|
    assert active[:, 0].tolist() == [True, False]  # the dual-clipped token has gradient 0: it counts in clip_frac
    plain = lr.detach().clone().requires_grad_()
    loss, active = clipped_surrogate(plain, adv, 0.2, 0.2, dual_clip=0.0)
    loss.sum().backward()
    assert loss[:, 0].tolist() == pytest.approx([10.0 * 0.5, 2.0 * 0.5])
    assert plain.grad[:, 0].tolist() == pytest.approx([10.0 * 0.5, 2.0 * 0.5])
    assert not active.any()


def test_dual_clip_is_on_by_default_and_counted_in_the_clip_fraction():
    logp = torch.zeros(1, 2, dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[-math.log(10.0), -math.log(2.0)]], dtype=torch.float64)  # token ratios 10 and 2
    loss, metrics = policy_loss(logp, old, torch.tensor([-1.0], dtype=torch.float64), torch.ones(1, 2, dtype=torch.float64))
    loss.backward()
    assert LossConfig().dual_clip == 3.0
    assert loss.item() == pytest.approx((3.0 + 2.0) / 2)
    assert logp.grad[0].tolist() == pytest.approx([0.0, 2.0 / 2])
    assert metrics["loss/clip_frac"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="dual_clip must be > 1"):
        LossConfig(dual_clip=1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_negative_advantage_with_a_huge_sequence_ratio_gives_a_finite_loss_and_gradient(dtype):
    """A trajectory's summed log-ratio of 200 nats (past exp's range in float32) with A < 0: dual clip bounds its loss at
    c·|A| with gradient 0, where plain PPO-clip's loss was inf and the step's gradient not finite; the other segment's
    gradient is kept."""
    cfg = LossConfig(ratio_level="sequence", aggregation="seq-mean")
    mask = torch.ones(2, 4, dtype=dtype)
    adv = torch.tensor([-0.5, 1.0], dtype=dtype)
    logp = torch.full((2, 4), -1.0, dtype=dtype, requires_grad=True)
    old = torch.full((2, 4), -1.0, dtype=dtype)
    old[0] -= 200.0 / 4  # segment 0's log-ratio sums to 200
    loss, metrics = policy_loss(logp, old, adv, mask, cfg)
    loss.backward()
    assert math.isfinite(loss.item()) and loss.item() == pytest.approx((3.0 * 0.5 - 1.0) / 2)
    assert torch.isfinite(logp.grad).all()
    assert logp.grad[0].tolist() == [0.0] * 4
    assert logp.grad[1].tolist() == pytest.approx([-0.5] * 4)  # ratio 1: -A/S for each of its tokens
    assert metrics["loss/clip_frac"] == pytest.approx(0.5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ratio_max_of_an_overflowing_ratio_is_the_largest_float32_not_inf(dtype):
    """A sequence-level log-ratio of 1000 nats (past exp's range in float32 and float64) logged loss/ratio_max inf;
    now float32's largest value, and the loss is what it was. A ratio in range is logged as it is."""
    cfg = LossConfig(ratio_level="sequence", aggregation="seq-mean")
    mask = torch.ones(2, 4, dtype=dtype)
    adv = torch.tensor([-0.5, 1.0], dtype=dtype)
    logp = torch.full((2, 4), -1.0, dtype=dtype)
    old = torch.full((2, 4), -1.0, dtype=dtype)
    old[0] -= 1000.0 / 4  # segment 0's log-ratio sums to 1000
    loss, metrics = policy_loss(logp, old, adv, mask, cfg)
    assert metrics["loss/ratio_max"] == float(torch.finfo(torch.float32).max)
    assert loss.item() == pytest.approx((3.0 * 0.5 - 1.0) / 2)  # dual clip bounds segment 0 at c·|A|
    old[0] = -1.0 - math.log(5.0) / 4  # a ratio of 5
    assert policy_loss(logp, old, adv, mask, cfg)[1]["loss/ratio_max"] == pytest.approx(5.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ratio_mean_of_overflowing_ratios_is_finite_and_the_loss_unchanged(dtype):
    """Token ratios past exp's range logged loss/ratio_mean inf (null in metrics.jsonl); so would a float32 sum of
    ratios capped at float32's largest value. Each ratio now counts as at most that value, summed in float64, so the
    mean is at most it; the loss and its gradient are the clipped surrogate's, as before."""
    from llm_marl.loss import RATIO_MAX_LOGGED

    cfg = LossConfig(ratio_level="token", aggregation="token-mean")
    mask = torch.ones(2, 4, dtype=dtype)
    adv = torch.tensor([-0.5, 1.0], dtype=dtype)
    old = torch.full((2, 4), -1.0, dtype=dtype)
    for overflowing, mean in ((8, RATIO_MAX_LOGGED), (1, (RATIO_MAX_LOGGED + 7.0) / 8)):
        start = torch.full((2, 4), -1.0, dtype=dtype)
        start.view(-1)[:overflowing] += 1000.0
        logp = start.clone().requires_grad_(True)
        loss, metrics = policy_loss(logp, old, adv, mask, cfg)
        loss.backward()
        assert metrics["loss/ratio_mean"] == pytest.approx(mean, rel=1e-12)
        assert metrics["loss/ratio_max"] == RATIO_MAX_LOGGED
        reference = start.clone().requires_grad_(True)
        surrogate, _ = clipped_surrogate(log_ratio(reference, old, mask, "token"), adv, cfg.eps_low, cfg.eps_high, cfg.dual_clip)
        expected = aggregate(surrogate, mask, "token-mean")
        expected.backward()
        assert loss.item() == expected.item() and torch.equal(logp.grad, reference.grad)


def test_k3_kl_is_nonnegative_and_pulls_toward_the_reference():
    logp = torch.tensor([[0.0, -1.0, -2.0]], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([[-0.3, -1.0, -1.5]], dtype=torch.float64)
    kl = kl_k3(logp, ref)
    assert (kl >= 0).all() and kl[0, 1] == 0
    mask = torch.ones_like(ref)
    adv = torch.zeros(1, dtype=torch.float64)
    loss, metrics = policy_loss(logp, logp.detach(), adv, mask, LossConfig(beta=0.1), ref_logprobs=ref)
    loss.backward()
    # Above the reference -> positive gradient (descent lowers it); below -> negative; equal -> 0.
    assert logp.grad[0, 0] > 0 and logp.grad[0, 1] == 0 and logp.grad[0, 2] < 0
    assert logp.grad[0, 0] == pytest.approx(0.1 * (1 - math.exp(-0.3)) / 3)
    assert metrics["loss/kl_ref"] > 0
    with pytest.raises(ValueError, match="ref_logprobs"):
        policy_loss(logp, logp.detach(), adv, mask, LossConfig(beta=0.1))


def test_micro_batches_with_the_full_normaliser_add_up():
    logits, ids, mask = batch()
    logp = token_logprobs(logits, ids).detach()
    old = logp + 0.05
    full = aggregate(clipped_surrogate(log_ratio(logp, old, mask), ADV.double())[0], mask, "token-mean")
    parts = sum(
        aggregate(clipped_surrogate(log_ratio(logp[s], old[s], mask[s]), ADV.double()[s])[0], mask[s], "token-mean",
                  normalizer=float(mask.sum()))
        for s in (slice(0, 1), slice(1, 3)))
    assert parts.item() == pytest.approx(full.item())
    full = aggregate(logp, mask, "seq-mean")
    parts = sum(aggregate(logp[s], mask[s], "seq-mean", normalizer=3.0) for s in (slice(0, 2), slice(2, 3)))
    assert parts.item() == pytest.approx(full.item())


def test_entropy_metric_and_config_errors():
    logits = torch.zeros(1, 2, 4)
    assert entropy_from_logits(logits)[0].tolist() == pytest.approx([math.log(4)] * 2)
    logp = torch.zeros(1, 2)
    _, metrics = policy_loss(logp, logp, torch.zeros(1), torch.ones(1, 2), entropy=entropy_from_logits(logits))
    assert metrics["loss/entropy"] == pytest.approx(math.log(4))
    with pytest.raises(ValueError, match="aggregation"):
        LossConfig(aggregation="mean")
    with pytest.raises(ValueError, match="ratio_level"):
        LossConfig(ratio_level="trajectory")
