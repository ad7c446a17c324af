"""Each algorithm trains its paper's objective by default, whether the config comes from the CLI or
from Python (issue 11, finding 1): MATPO and GRPO average per rollout / per reply, MHGPO adds its KL
term, SHARP uses one trajectory-level ratio per agent."""

from __future__ import annotations

import json

import pytest
import torch

from llm_marl.algorithms import ALGORITHMS
from llm_marl.algorithms import get as get_algorithm
from llm_marl.config import OptimConfig, RunConfig
from llm_marl.loss import policy_loss
from llm_marl.rollout import Sample, collate
from llm_marl.trainer import TrainConfig

PAPER = {
    "grpo": {"kl_beta": 0.0, "ratio_level": "token", "loss_agg": "seq-mean"},
    "at-grpo": {"kl_beta": 0.0, "ratio_level": "token", "loss_agg": "token-mean"},
    "matpo": {"kl_beta": 0.0, "ratio_level": "token", "loss_agg": "seq-mean"},
    "mhgpo": {"kl_beta": 0.001, "ratio_level": "token", "loss_agg": "seq-mean"},
    "sharp": {"kl_beta": 0.0, "ratio_level": "sequence", "loss_agg": "seq-mean"},
}


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_a_config_built_in_python_gets_the_papers_loss_settings(algo):
    config = TrainConfig(run=RunConfig(algo=algo, env="deep_search" if algo == "sharp" else "plan_path"))
    assert {k: getattr(config.optim, k) for k in PAPER[algo]} == PAPER[algo]
    assert get_algorithm(algo).loss_defaults == PAPER[algo]


def test_an_explicit_setting_wins_over_the_papers():
    config = TrainConfig(run=RunConfig(algo="matpo"), optim=OptimConfig(loss_agg="token-mean", kl_beta=0.01))
    assert (config.optim.loss_agg, config.optim.kl_beta, config.optim.ratio_level) == ("token-mean", 0.01, "token")


def _sample(sid: int, episode: str, n: int, log_ratio: float, advantage: float) -> Sample:
    sample = Sample(sample_id=sid, task_id="q", episode_id=episode, decision_id=sid, candidate=0, role="planner", turn=0,
                    step=0, adapter="shared", messages=[], text="", prompt_ids=[1], response_ids=[5] * n,
                    old_logprobs=[-1.0] * n)
    sample.advantage = advantage
    sample._log_ratio = log_ratio  # type: ignore[attr-defined]
    return sample


def test_matpo_default_objective_is_j_matpo_and_token_mean_would_flip_its_sign():
    """Two rollouts of one query: τ_1 (advantage +a) has 40 tokens (planner 10 + worker 30) at ratio 0.9,
    τ_2 (advantage -a) has 5 tokens at ratio 1.1 (both inside the clip range).
    J_MATPO = 1/G Σ_i 1/|τ_i| Σ_t ρ_t·A_i = (0.9a - 1.1a)/2 < 0, while the token mean over the batch is
    (40·0.9a - 5·1.1a)/45 > 0: the two aggregations disagree in sign."""
    a = 2 ** -0.5
    samples = [_sample(0, "q/g0", 10, 0.9, a), _sample(1, "q/g0", 30, 0.9, a), _sample(2, "q/g1", 5, 1.1, -a)]
    config = TrainConfig(run=RunConfig(algo="matpo"))
    batch = collate(samples, segment=config.algo.loss_segment)
    old = batch["old_logprobs"]
    new = old + torch.log(torch.tensor([[s._log_ratio] for s in samples])) * batch["response_mask"]  # type: ignore[attr-defined]
    loss, _ = policy_loss(new, old, batch["advantages"], batch["response_mask"], config.loss, segment_ids=batch["segment_ids"])
    j_matpo = (0.9 * a + (-1.1 * a)) / 2
    assert float(loss) == pytest.approx(-j_matpo, rel=1e-5)
    token_mean = (40 * 0.9 * a - 5 * 1.1 * a) / 45
    assert j_matpo < 0 < token_mean


def test_grpo_default_averages_each_reply_then_the_replies():
    """GRPO: 1/G Σ_i 1/|o_i| Σ_t ρ·A_i; replies of 2 and 6 tokens at ratio 1 with advantages +1, -1 give 0,
    where a token mean would give (2 - 6)/8 = -0.5 (the long reply dominates)."""
    samples = [_sample(0, "q/g0", 2, 1.0, 1.0), _sample(1, "q/g1", 6, 1.0, -1.0)]
    config = TrainConfig(run=RunConfig(algo="grpo"))
    batch = collate(samples, segment=config.algo.loss_segment)
    loss, _ = policy_loss(batch["old_logprobs"], batch["old_logprobs"], batch["advantages"], batch["response_mask"], config.loss,
                          segment_ids=batch["segment_ids"])
    assert float(loss) == pytest.approx(0.0, abs=1e-7)


def test_the_cli_records_the_resolved_settings(tmp_path):
    from llm_marl.cli import build_parser
    from llm_marl.train_cli import cmd_train  # noqa: F401  (the parser wires it)

    argv = ["train", "--algo", "matpo", "--env", "plan_path", "--help"]
    parser = build_parser(argv)
    help_text = parser._subparsers._group_actions[0].choices["train"].format_help()  # type: ignore[union-attr]
    assert "(default: 'seq-mean')" in " ".join(help_text.split())
    saved = TrainConfig(run=RunConfig(algo="matpo")).to_dict()
    assert json.loads(json.dumps(saved))["optim"]["loss_agg"] == "seq-mean"


def test_dual_clip_reaches_the_loss_from_the_cli_and_from_python():
    """On by default at verl's c = 3 for every algorithm; `--dual-clip 0` is plain PPO-clip."""
    from llm_marl.cli import build_parser
    from llm_marl.config import from_args

    for algo in sorted(ALGORITHMS):
        assert TrainConfig(run=RunConfig(algo=algo, env="deep_search" if algo == "sharp" else "plan_path")).loss.dual_clip == 3.0
    assert TrainConfig(optim=OptimConfig(dual_clip=0.0)).loss.dual_clip == 0.0
    argv = ["train", "--env", "plan_path", "--dual-clip", "0"]
    args = build_parser(argv).parse_args(argv)
    assert TrainConfig(optim=from_args(OptimConfig, args)).loss.dual_clip == 0.0
