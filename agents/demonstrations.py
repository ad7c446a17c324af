"""Demonstrations for supervised warm starts: episodes played by an environment's scripted oracle,
recorded through the environment's own text interface as chat transcripts.

    records = list(oracle_demonstrations("plan_path", episodes=32, env_kwargs={"height": 4, "width": 4}))
    # {"agent": "tool", "messages": [system, user, {"role": "assistant", "content": reply}], "env": ..., ...}

Each record is one reply: the observation the role saw, then the oracle's reply as the assistant
message, in the JSONL format `llm-marl sft --data` reads (TRL's conversational format plus `agent`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .oracle import make_oracle


def oracle_demonstrations(env_name: str, episodes: int, *, split: str = "train", seed: int = 0,
                          env_kwargs: Mapping[str, Any] | None = None,
                          oracle_options: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Play instances seed..seed+episodes-1 of `split` with the oracle; yield one transcript per reply."""
    from llm_marl_envs.registry import make_raw

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    oracle = make_oracle(env_name, **dict(oracle_options or {}))
    env = make_raw(env_name, **dict(env_kwargs or {}))
    for instance in range(seed, seed + episodes):
        env.reset(seed=instance, options={"split": split})
        oracle.reset(instance)
        for role in env.agent_iter(10_000):
            if env.terminations[role] or env.truncations[role]:
                env.step(None)
                continue
            observation = env.observe(role)
            reply = oracle.act(role, observation)
            env.step(reply)
            yield {"agent": role, "messages": [*observation["messages"], {"role": "assistant", "content": reply}],
                   "env": env_name, "split": split, "seed": instance, "turn": int(observation.get("turn", 0)),
                   "reward": float(env.rewards.get(role, 0.0))}
