"""`--credit shapley`: Shapley credit for any algorithm's rollouts, by replaying coalitions.

Paper: Shapley-PRM ("Shapley-based process rewards as training signals"), Sec. 4 and A.3.

    plan = shapley_plan(algorithm.sampling_plan(algo_config), credit_config)   # adds the replays
    out = rollout(tasks, plan, engine, sigma)
    assign_advantages(out, algorithm, algo_config, credit=partial(assign_shapley, config=credit_config))
    pairs = preference_pairs(out, credit_config)                                # failure route -> DPO

Success route. The players of an episode are the roles that acted in it. v(S) (Eq. 2) is the
terminal team reward of the episode replayed with the agents outside S replaced by the baseline
(`llm_marl.rollout.replay`): `--shapley-estimator exact` replays all 2^n - 1 proper coalitions,
`mc` the distinct coalitions of M sampled permutations (A.3). φ_i (Eq. 3) is then spread over the
agent's messages by a judge's signed labels (Eq. 6-10, `--credit-level message`), or given to each
of its replies as is (`agent`). A reply on several episodes (a prefix shared by forks) gets the mean.

Failure route. On an episode whose value is 0, a prefix judge (default: a prefix is still on track
while none of its messages broke the output rules) locates the first error by binary search (Sec.
4.2); the rejected reply y- is paired with a reply of the same role to the identical prompt from an
episode that did better (y+), and `--dpo-beta > 0` trains on these pairs with the DPO loss.

Groups: the algorithm's group key split by role, (key, agent): φ_i is agent i's reward (Eq. 5), so it
is normalised against the same agent's φ on the other rollouts of the query (MATPO's or GRPO's
query groups would otherwise rank one agent's share against another's). Deviations: the paper applies the success
route to successful episodes only, we give every episode its Shapley credit (on a failure the φ sum
to -v(∅), which still ranks the agents) and add the failure route on top.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from llm_marl.config import opt
from llm_marl.rollout import Episode, Rollout, Sample, SamplingPlan
from llm_marl.rollout.replay import Replays, episode_value, players_of, replay_values

from .localize import PreferencePair, first_error
from .message import ConstantJudge, InfoJudge, Message, message_rewards
from .shapley import all_coalitions, credit_ratio, exact_shapley, monte_carlo_shapley, permutation_coalitions, sample_permutations


@dataclass
class CreditConfig:
    credit: Literal["algo", "shapley"] = opt("algo", "credit signal: the algorithm's own, or Shapley values of coalitions replayed with a baseline (Shapley-PRM)")
    shapley_estimator: Literal["exact", "mc"] = opt("exact", "Shapley values over all 2^n coalitions, or Monte Carlo over sampled permutations (A.3)")
    shapley_permutations: int = opt(4, "Monte Carlo permutations M per episode")
    shapley_baseline: Literal["masked", "noop", "reference"] = opt("masked", "what absent agents emit in coalition replays: masked output, no-op, or the frozen reference model")
    credit_level: Literal["agent", "message"] = opt("message", "give each reply its agent's φ, or a share of it by the judge's signed labels (Eq. 6-10)")
    judge: Literal["info", "constant", "api"] = opt("info", "message judge: info (labels from the environment's parse errors and penalties), constant (+1), or api (an LLM at --judge-url)")
    judge_url: str = opt("", "OpenAI-compatible API root of the api judge, e.g. http://localhost:8000/v1")
    judge_model: str = opt("gpt-4o-mini", "model name the api judge requests")
    dpo_beta: float = opt(0.0, "failure route: DPO β on first-error preference pairs (0 = off)")

    def __post_init__(self) -> None:
        if self.shapley_permutations < 1:
            raise ValueError(f"--shapley-permutations must be >= 1, got {self.shapley_permutations}")
        if not 0 <= self.dpo_beta < math.inf:  # NaN too
            raise ValueError(f"--dpo-beta must be >= 0 and finite, got {self.dpo_beta}")
        if self.judge == "api" and not self.judge_url:
            raise ValueError("--judge api needs --judge-url (an OpenAI-compatible endpoint such as http://localhost:8000/v1)")

    @property
    def enabled(self) -> bool:
        return self.credit == "shapley"


def permutations(episode_id: str, players: list[str], config: CreditConfig) -> list[tuple[str, ...]]:
    """The MC permutations of an episode, seeded by its id (the plan and the credit agree, and a resume repeats them)."""
    rng = np.random.default_rng(zlib.crc32(episode_id.encode()))
    return sample_permutations(players, config.shapley_permutations, rng)


def coalitions(episode_id: str, players: list[str], config: CreditConfig) -> list[frozenset[str]]:
    if config.shapley_estimator == "exact":
        return all_coalitions(players)
    return permutation_coalitions(permutations(episode_id, players, config))


def shapley_plan(base: SamplingPlan, config: CreditConfig) -> SamplingPlan:
    """`base` plus one replay per coalition the estimator needs (absent = players outside it)."""

    def choose(episode_id: str, players: list[str]) -> list[frozenset[str]]:
        full = frozenset(players)
        return [full - s for s in coalitions(episode_id, players, config) if s != full]

    return Replays(base, choose, baseline=config.shapley_baseline)


def episode_shapley(rollout: Rollout, episode: Episode, config: CreditConfig,
                    values: dict[tuple[str, frozenset[str]], float]) -> dict[str, float]:
    """φ_i of each player of `episode` (Eq. 3 or A.3)."""
    players = players_of(rollout, episode)
    full = frozenset(players)

    def v(coalition: frozenset[str]) -> float:
        key = (episode.episode_id, full - coalition)
        if key not in values:
            raise ValueError(f"no replay of {episode.episode_id} without {sorted(full - coalition)}; "
                             f"the rollout must use shapley_plan with the same estimator")
        return values[key]

    if config.shapley_estimator == "exact":
        return exact_shapley(players, v)
    return monte_carlo_shapley(players, v, permutations(episode.episode_id, players, config))


def make_judge(config: CreditConfig) -> Any:
    if config.judge == "api":
        from llm_marl_envs.search.judge import JudgeConfig

        from .llm_judge import LLMJudge

        return LLMJudge(JudgeConfig(base_url=config.judge_url, model=config.judge_model))
    return InfoJudge() if config.judge == "info" else ConstantJudge()


def assign_shapley(rollout: Rollout, config: CreditConfig) -> dict[str, float]:
    """Set `credit` of every trainable reply from its episodes' Shapley values; returns metrics."""
    values = replay_values(rollout)
    per_sample: dict[int, list[float]] = {}
    phis: list[float] = []
    judge = make_judge(config)
    ratios: dict[str, list[float]] = {}
    for ep in rollout.real_episodes:
        phi = episode_shapley(rollout, ep, config, values)
        phis.extend(phi.values())
        for role, alpha in credit_ratio(phi).items():  # Eq. 4: each agent's signed share of the system value
            ratios.setdefault(role, []).append(alpha)
        samples = [rollout.samples[i] for i in ep.sample_ids]
        if config.credit_level == "agent":
            rewards = [phi[s.role] for s in samples]
        else:
            messages = [Message(agent=s.role, index=j, text=s.text, info=s.info) for j, s in enumerate(samples)]
            rewards = message_rewards(messages, phi, judge).rewards
        for s, r in zip(samples, rewards):
            per_sample.setdefault(s.sample_id, []).append(float(r))
    for s in rollout.samples:
        if not s.trainable:
            continue
        if s.sample_id not in per_sample:
            raise ValueError(f"reply {s.sample_id} ({s.role}, {s.episode_id}) lies on no played episode, so no coalition "
                             "replay scores it (e.g. at-grpo's losing tree candidates); --credit shapley works with "
                             "grpo, matpo and mhgpo")
        s.credit = float(np.mean(per_sample[s.sample_id]))
    replays = [ep for ep in rollout.episodes if ep.counterfactual is not None]
    out = {"credit/shapley_mean": float(np.mean(phis)) if phis else 0.0, "credit/replays": float(len(replays)),
           **{f"credit/ratio/{role}": float(np.mean(a)) for role, a in sorted(ratios.items())}}
    if hasattr(judge, "errors"):
        out.update({"credit/judge_calls": float(judge.calls), "credit/judge_errors": float(len(judge.errors))})
    return out


# ---------------------------------------------------------------------------- failure route
def on_track(sample: Sample) -> bool:
    """Default prefix judge, per message: no parse error and no penalty (monotone over prefixes)."""
    return not sample.info.get("parse_error") and float(sample.info.get("penalty", 0.0)) >= 0.0


def preference_pairs(rollout: Rollout, judge: Any = on_track) -> tuple[list[PreferencePair], dict[str, float]]:
    """(H_{t*-1}, y+, y-) pairs from failed episodes (Sec. 4.2), with y+ a reply of the same role to the
    identical prompt from an episode of higher value whose reply the judge accepts."""
    values = {ep.episode_id: episode_value(rollout, ep) for ep in rollout.real_episodes}
    best_by_prompt: dict[tuple[str, str], tuple[float, Sample]] = {}
    for ep in rollout.real_episodes:
        for sid in ep.sample_ids:
            s = rollout.samples[sid]
            if s.trainable and judge(s):
                key = (s.role, repr(s.messages))
                if key not in best_by_prompt or values[ep.episode_id] > best_by_prompt[key][0]:
                    best_by_prompt[key] = (values[ep.episode_id], s)
    pairs, calls, failed = [], 0, 0
    for ep in rollout.real_episodes:
        if values[ep.episode_id] > 0:
            continue
        failed += 1
        path = [rollout.samples[i] for i in ep.sample_ids]
        found = first_error(len(path), lambda t: all(judge(s) for s in path[:t]))
        calls += found.judge_calls
        if found.first_error is None:
            continue
        rejected = path[found.first_error - 1]
        best = best_by_prompt.get((rejected.role, repr(rejected.messages)))
        if rejected.trainable and best is not None and best[0] > values[ep.episode_id]:
            pairs.append(PreferencePair(agent=rejected.role, context=rejected.messages, chosen=best[1], rejected=rejected,
                                        meta={"episode": ep.episode_id, "t": found.first_error}))
    return pairs, {"dpo/failed_episodes": float(failed), "dpo/pairs": float(len(pairs)), "dpo/judge_calls": float(calls)}
