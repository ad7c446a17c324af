"""Shapley-PRM credit (llm_marl.credit) against hand-computed games, traces and losses."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from llm_marl.credit import (CallableJudge, ConstantJudge, InfoJudge, Message, PreferencePair, all_coalitions,
                             allocate, allocation_weights, conservation_gap, credit_ratio, dpo_loss, efficiency_gap,
                             exact_shapley, first_error, message_rewards, monte_carlo_shapley,
                             permutation_coalitions, sample_permutations)

# --- Shapley (Eq. 3, App. A.3) --------------------------------------------------------------------------------

# A 3-player game with v(∅) = 0 and distinct Shapley values. Eq. 3 weights for n = 3: |S| = 0 -> 1/3,
# |S| = 1 -> 1/6, |S| = 2 -> 1/3.
#   φ_a = 1/3·(1-0) + 1/6·(ab-b = 2) + 1/6·(ac-c = 3) + 1/3·(abc-bc = 3) = 2/6 + 2/6 + 3/6 + 6/6 = 13/6
#   φ_b = 1/3·(2-0) + 1/6·(ab-a = 3) + 1/6·(bc-c = 3) + 1/3·(abc-ac = 3) = 4/6 + 3/6 + 3/6 + 6/6 = 16/6
#   φ_c = 1/3·(0-0) + 1/6·(ac-a = 2) + 1/6·(bc-b = 1) + 1/3·(abc-ab = 2) = 0 + 2/6 + 1/6 + 4/6 = 7/6
# Σφ = 36/6 = 6 = v(abc) - v(∅).
GAME = {"": 0.0, "a": 1.0, "b": 2.0, "c": 0.0, "ab": 4.0, "ac": 3.0, "bc": 3.0, "abc": 6.0}
GAME_PHI = {"a": 13 / 6, "b": 16 / 6, "c": 7 / 6}


def table_value(table, calls=None):
    def v(S):
        if calls is not None:
            calls.append(S)
        return table["".join(sorted(S))]
    return v


def glove(S):
    """Glove game: left glove `l`, right gloves `r1`, `r2`; `d` owns nothing. A pair is worth 1."""
    return 1.0 if "l" in S and ({"r1", "r2"} & S) else 0.0


def close(a, b, tol=1e-12):
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], abs_tol=tol) for k in a)


def test_exact_shapley_hand_game_and_single_evaluation():
    calls = []
    phi = exact_shapley(["a", "b", "c"], table_value(GAME, calls))
    assert close(phi, GAME_PHI)
    assert len(calls) == 8 and len(set(calls)) == 8  # each coalition evaluated exactly once
    assert math.isclose(efficiency_gap(phi, GAME["abc"], GAME[""]), 0.0, abs_tol=1e-12)


def test_glove_game_symmetry_and_dummy():
    # Glove game with a dummy d: l is pivotal in the orderings where a right glove precedes it (2/3 of
    # them, as the dummy changes nothing); r1 is pivotal iff it directly follows l among {l, r1, r2}: 1/6.
    phi = exact_shapley(["l", "r1", "r2", "d"], glove)
    assert close(phi, {"l": 2 / 3, "r1": 1 / 6, "r2": 1 / 6, "d": 0.0})
    assert phi["r1"] == phi["r2"]  # symmetry
    assert phi["d"] == 0.0  # dummy
    assert math.isclose(sum(phi.values()), glove(frozenset(["l", "r1", "r2", "d"])) - glove(frozenset()))


def test_nonzero_empty_coalition_efficiency():
    # The baseline policy alone scores v(∅) = 0.2. n = 2: each order has probability 1/2.
    #   φ_a = 1/2·(0.5-0.2) + 1/2·(1.0-0.2) = 0.55;  φ_b = 1/2·(0.2-0.2) + 1/2·(1.0-0.5) = 0.25
    table = {"": 0.2, "a": 0.5, "b": 0.2, "ab": 1.0}
    phi = exact_shapley(["a", "b"], table_value(table))
    assert close(phi, {"a": 0.55, "b": 0.25})
    assert math.isclose(efficiency_gap(phi, 1.0, 0.2), 0.0, abs_tol=1e-12)
    assert math.isclose(efficiency_gap(phi, 1.0, 0.0), -0.2)  # the paper's Σφ = R_sys fails when v(∅) ≠ 0


def test_shapley_edge_cases():
    assert exact_shapley([], lambda S: 1.0) == {}
    assert close(exact_shapley(["a"], lambda S: 3.0 if S else 1.0), {"a": 2.0})
    with pytest.raises(ValueError, match="unique"):
        exact_shapley(["a", "b", "a"], lambda S: 0.0)
    assert all_coalitions(["b", "a", "c"]) == [frozenset(), frozenset("b"), frozenset("a"), frozenset("c"),
                                                frozenset("ba"), frozenset("bc"), frozenset("ac"), frozenset("bac")]


def test_monte_carlo_close_to_exact():
    perms = sample_permutations(["a", "b", "c"], 2000, np.random.default_rng(0))
    phi = monte_carlo_shapley(["a", "b", "c"], table_value(GAME), perms)
    assert all(abs(phi[i] - GAME_PHI[i]) < 0.05 for i in GAME_PHI)
    # Every permutation's marginals sum to v(N) - v(∅), so the estimate is efficient exactly.
    assert math.isclose(efficiency_gap(phi, GAME["abc"], GAME[""]), 0.0, abs_tol=1e-9)


def test_monte_carlo_over_all_permutations_is_exact():
    perms = list(itertools.permutations(["a", "b", "c"]))
    assert close(monte_carlo_shapley(["a", "b", "c"], table_value(GAME), perms), GAME_PHI)


def test_monte_carlo_coalition_count_and_cache():
    players = [f"p{k}" for k in range(6)]
    perms = sample_permutations(players, 1, np.random.default_rng(1))
    coalitions = permutation_coalitions(perms)
    assert len(coalitions) == len(players) + 1
    assert coalitions[0] == frozenset() and coalitions[-1] == frozenset(players)
    calls = []
    monte_carlo_shapley(players, lambda S: calls.append(S) or float(len(S)), perms * 3)
    assert sorted(calls, key=len) == coalitions  # repeated permutations cost nothing
    with pytest.raises(ValueError, match="permutation"):
        monte_carlo_shapley(["a", "b"], lambda S: 0.0, [("a", "c")])
    with pytest.raises(ValueError, match="M"):
        sample_permutations(["a"], 0, np.random.default_rng(0))


def test_credit_ratio():
    # Σφ = 2 + 1 - 1 = 2 -> α = (1, 0.5, -0.5): signed shares of the pool.
    assert close(credit_ratio({"a": 2.0, "b": 1.0, "c": -1.0}), {"a": 1.0, "b": 0.5, "c": -0.5})
    # A zero pool (e.g. a failed episode) has nothing to divide: all zeros, not ±inf.
    assert credit_ratio({"a": 1.0, "b": -1.0}) == {"a": 0.0, "b": 0.0}


# --- message-level rewards (Eq. 6-10) ---------------------------------------------------------------------------


def test_allocation_weights():
    assert allocation_weights([1, 0, -1, 1]) == [1 / 3, 0.0, 1 / 3, 1 / 3]
    assert allocation_weights([0, 0, 0, 0]) == [0.25] * 4  # uniform fallback (Eq. 8)
    with pytest.raises(ValueError, match="-1, 0 or"):
        allocation_weights([1, 2])
    with pytest.raises(ValueError, match="no messages"):
        allocation_weights([])


def test_allocate_literal_eq9_and_conserving():
    # Eq. 9 with φ = 3, labels (+1, 0, -1, +1): S = 3, ω = (1/3, 0, 1/3, 1/3), r = s·ω·φ = (1, 0, -1, 1).
    literal = allocate([1, 0, -1, 1], 3.0, conserve=False)
    assert literal == pytest.approx([1.0, 0.0, -1.0, 1.0])
    assert conservation_gap(literal, 3.0) == pytest.approx(-2.0)  # Σ = 1 ≠ φ = 3: Eq. 10 fails as written
    # Deviation 1: the residual 3 - 1 = 2 is shared equally, 0.5 per message; gaps between messages unchanged.
    assert allocate([1, 0, -1, 1], 3.0) == pytest.approx([1.5, 0.5, -0.5, 1.5])
    # All labels 0: literal Eq. 9 gives 0·ω·φ = 0; the conserving version is the uniform fallback φ/|T_i|.
    assert allocate([0, 0, 0], 3.0, conserve=False) == [0.0, 0.0, 0.0]
    assert allocate([0, 0, 0], 3.0) == pytest.approx([1.0, 1.0, 1.0])
    # Without counter-aligned labels Eq. 9 already conserves and Deviation 1 changes nothing.
    assert allocate([1, 0, 1], 3.0) == allocate([1, 0, 1], 3.0, conserve=False) == pytest.approx([1.5, 0.0, 1.5])


labels_lists = st.lists(st.sampled_from([-1, 0, 1]), min_size=1, max_size=12)
phis = st.floats(min_value=-10, max_value=10, allow_nan=False)


@given(labels=labels_lists, phi=phis)
def test_conserving_allocation_sums_to_phi(labels, phi):
    r = allocate(labels, phi)
    assert math.isclose(conservation_gap(r, phi), 0.0, abs_tol=1e-9)
    # Deviation 1 keeps Eq. 9's gap between any two messages.
    literal = allocate(labels, phi, conserve=False)
    assert all(math.isclose(r[t] - r[0], literal[t] - literal[0], abs_tol=1e-9) for t in range(len(r)))


@given(labels=labels_lists.filter(lambda ls: -1 not in ls and 1 in ls), phi=phis)
def test_literal_eq9_conserves_without_counter_aligned_labels(labels, phi):
    assert math.isclose(conservation_gap(allocate(labels, phi, conserve=False), phi), 0.0, abs_tol=1e-9)


@given(labels=st.lists(st.tuples(st.sampled_from("xyz"), st.sampled_from([-1, 0, 1])), min_size=1, max_size=20),
       phi=st.fixed_dictionaries({a: phis for a in "xyzw"}))
def test_message_rewards_conserve_per_agent_and_in_total(labels, phi):
    messages = [Message(agent=a, index=t, text="", info={"s": s}) for t, (a, s) in enumerate(labels)]
    credit = message_rewards(messages, phi, CallableJudge(lambda history, m: m.info["s"]))
    assert credit.labels == [s for _, s in labels]
    for agent in {a for a, _ in labels}:
        mine = [r for r, m in zip(credit.rewards, messages) if m.agent == agent]
        assert math.isclose(conservation_gap(mine, phi[agent]), 0.0, abs_tol=1e-9)
    assert credit.dropped.keys() == set(phi) - {a for a, _ in labels}
    assert math.isclose(sum(credit.rewards) + sum(credit.dropped.values()), sum(phi.values()), abs_tol=1e-9)


def test_harmful_agent_aligned_penalised_counter_aligned_rewarded():
    # φ = -1.5, labels (+1, +1, -1): literal Eq. 9 gives (-0.5, -0.5, +0.5); Deviation 1 adds
    # (-1.5 - (-0.5)) / 3 = -1/3 each: (-5/6, -5/6, +1/6). Signs match the paper's "harmful agent" bullet.
    for conserve, expected in ((False, [-0.5, -0.5, 0.5]), (True, [-5 / 6, -5 / 6, 1 / 6])):
        r = allocate([1, 1, -1], -1.5, conserve=conserve)
        assert r == pytest.approx(expected)
        assert r[0] < 0 < r[2]
    # Helpful agent: the mirror image.
    r = allocate([1, 1, -1], 1.5)
    assert r[0] > 0 > r[2]


def test_message_rewards_trace_order_history_and_dropped_credit():
    msgs = [Message("planner", 0, "plan"), Message("worker", 1, "oops", {"parse_error": True}),
            Message("planner", 2, "replan", {"local_reward": 1.0}), Message("worker", 3, "fix", {"local_reward": 0.5})]
    seen = []

    def judge(history, m):
        seen.append(len(history))
        assert list(history) == msgs[:m.index]  # H_{t-1}: the trace before the message
        return InfoJudge()(history, m)

    credit = message_rewards(msgs, {"planner": 2.0, "worker": 1.0, "critic": 0.5}, CallableJudge(judge),
                             conserve=False)
    assert seen == [0, 1, 2, 3]
    assert credit.labels == [1, -1, 1, 1]
    # planner: labels (+1, +1), φ = 2 -> 1, 1. worker: labels (-1, +1), S = 2, φ = 1 -> -0.5, +0.5.
    assert credit.rewards == pytest.approx([1.0, -0.5, 1.0, 0.5])
    assert credit.dropped == {"critic": 0.5}
    with pytest.raises(ValueError, match="worker"):
        message_rewards(msgs, {"planner": 1.0}, ConstantJudge())


@pytest.mark.parametrize("info, clean, label", [
    ({}, 1, 1), ({}, 0, 0), ({"parse_error": "bad move"}, 1, -1), ({"penalty": -0.1}, 1, -1),
    ({"penalty": -0.1, "local_reward": 1.0}, 1, -1), ({"local_reward": 0.5}, 0, 1), ({"local_reward": 0.0}, 0, 0),
    ({"parse_error": False, "penalty": 0.0}, 1, 1),
])
def test_info_judge_table(info, clean, label):
    assert InfoJudge(clean=clean)([], Message("a", 0, "", info)) == label


# --- first-error localization (Sec. 4.2) -------------------------------------------------------------------------


@pytest.mark.parametrize("T", [1, 2, 7, 64, 1000])
def test_first_error_finds_every_planted_error(T):
    budget = math.ceil(math.log2(T + 1))  # H_T is not checked first: no extra call
    for planted in range(1, T + 1):
        loc = first_error(T, lambda t, p=planted: t < p)  # H_t fails iff it holds message p
        assert loc.first_error == planted
        assert loc.judge_calls <= budget and len(set(loc.checked)) == len(loc.checked) == loc.judge_calls
        assert all(1 <= t <= T for t in loc.checked)
    clean = first_error(T, lambda t: True)
    assert clean.first_error is None and clean.judge_calls <= budget


def test_first_error_edge_cases():
    assert first_error(0, lambda t: pytest.fail("no prefix to judge")).first_error is None
    with pytest.raises(ValueError, match="T"):
        first_error(-1, lambda t: True)
    pair = PreferencePair(agent="worker", context=["m0"], chosen="fix", rejected="oops")
    assert pair.meta == {}


# --- DPO -----------------------------------------------------------------------------------------------------


def test_dpo_hand_computed_and_gradient_signs():
    # β = 0.1 and Δ = (π_c - r_c) - (π_r - r_r) = (-1 - -2) - (-3 - -2) = 2 -> z = 0.2, loss = log(1 + e^-0.2).
    pc = torch.tensor([-1.0], dtype=torch.float64, requires_grad=True)
    pr = torch.tensor([-3.0], dtype=torch.float64, requires_grad=True)
    rc, rr = torch.tensor([-2.0], dtype=torch.float64), torch.tensor([-2.0], dtype=torch.float64)
    loss, m = dpo_loss(pc, pr, rc, rr, beta=0.1)
    assert math.isclose(loss.item(), math.log1p(math.exp(-0.2)))
    assert m["dpo/margin"] == pytest.approx(0.2) and m["dpo/reward_accuracy"] == 1.0
    assert m["dpo/chosen_reward"] == pytest.approx(0.1) and m["dpo/rejected_reward"] == pytest.approx(-0.1)
    loss.backward()
    # Gradient descent raises log π(y+) and lowers log π(y-): dL/dπ_c = -β·σ(-z) < 0, dL/dπ_r = +β·σ(-z) > 0.
    s = 0.1 / (1 + math.exp(0.2))
    assert pc.grad.item() == pytest.approx(-s) and pr.grad.item() == pytest.approx(s)


def test_dpo_label_smoothing_and_mean_over_pairs():
    z = 0.2
    ref = torch.tensor([-2.0, -2.0])
    args = [torch.tensor([-1.0, -1.0]), torch.tensor([-3.0, 1.0]), ref, ref]
    # Pair 2: Δ = 1 - 3 = -2 -> z = -0.2, the rejected message is preferred (accuracy 1/2).
    loss, m = dpo_loss(*args, beta=0.1, label_smoothing=0.1)
    per_pair = [0.9 * math.log1p(math.exp(-zz)) + 0.1 * math.log1p(math.exp(zz)) for zz in (z, -z)]
    assert loss.item() == pytest.approx(sum(per_pair) / 2)
    assert m["dpo/reward_accuracy"] == 0.5 and m["dpo/margin"] == pytest.approx(0.0, abs=1e-6)


def test_dpo_rejects_bad_inputs():
    x = torch.zeros(2)
    with pytest.raises(ValueError, match="shape"):
        dpo_loss(x, torch.zeros(3), x, x)
    with pytest.raises(ValueError, match="beta"):
        dpo_loss(x, x, x, x, beta=0.0)
