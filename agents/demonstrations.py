"""Demonstrations for supervised warm starts: episodes played by an environment's scripted oracle,
recorded through the environment's own text interface as chat transcripts.

    records = list(oracle_demonstrations("plan_path", episodes=32, env_kwargs={"height": 4, "width": 4}))
    # {"agent": "tool", "messages": [system, user, {"role": "assistant", "content": reply}], "env": ..., ...}

Each record is one reply: the observation the role saw, then the oracle's reply as the assistant
message, in the JSONL format `llm-marl sft --data` reads (TRL's conversational format plus `agent`).
Where the observation holds the role's earlier replies (Deep-Search's and MASS's multi-turn chats),
they carry `"weight": 0` (OpenAI's fine-tuning format: not a target): each reply is learned once,
from the record that ends with it, and a random teammate's reply is never learned from.

With `noise` > 0, each reply is the random agent's instead, with that probability, and is not
recorded: the oracle's later replies then show how to recover from a teammate's mistake (a Plan-Path
planner overriding a wrong proposal), which an all-oracle team never shows.

An episode whose problem the oracle has no answer to (`Agent.knows` is False: a dataset problem without
a reference solution, say) is left out whole, with a warning that counts them: a demonstration of the
oracle's refusal would teach it. An oracle that knows none of the episodes is a ValueError.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from .oracle import make_oracle


def oracle_demonstrations(env_name: str, episodes: int, *, split: str = "train", seed: int = 0,
                          env_kwargs: Mapping[str, Any] | None = None, oracle_options: Mapping[str, Any] | None = None,
                          noise: float = 0.0) -> Iterator[dict[str, Any]]:
    """Play instances seed..seed+episodes-1 of `split` with the oracle (each reply the random agent's
    with probability `noise`); yield one transcript per oracle reply."""
    import numpy as np

    from llm_marl_envs.registry import make_raw

    from .random_agent import RandomAgent

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if not 0.0 <= noise < 1.0:
        raise ValueError(f"noise must be in [0, 1), got {noise}")
    oracle = make_oracle(env_name, env_kwargs, **dict(oracle_options or {}))
    env = make_raw(env_name, **dict(env_kwargs or {}))
    unknown = 0  # episodes left out: the oracle has no answer to their problem
    for instance in range(seed, seed + episodes):
        env.reset(seed=instance, options={"split": split})
        oracle.reset(instance)
        rng = np.random.default_rng([seed, instance])
        teammate = RandomAgent(env_name, int(rng.integers(2**31)))
        records = []
        for role in env.agent_iter(10_000):
            if env.terminations[role] or env.truncations[role]:
                env.step(None)
                continue
            observation = env.observe(role)
            if noise and rng.random() < noise:
                env.step(teammate.act(role, observation))
                continue
            if not oracle.knows(role, observation):
                unknown += 1
                records = []
                break
            reply = oracle.act(role, observation)
            env.step(reply)
            shown = [dict(m, weight=0) if m["role"] == "assistant" else m for m in observation["messages"]]
            records.append({"agent": role, "messages": [*shown, {"role": "assistant", "content": reply}],
                            "env": env_name, "split": split, "seed": instance, "turn": int(observation.get("turn", 0)),
                            "reward": float(env.rewards.get(role, 0.0))})
        yield from records
    if unknown == episodes:
        raise ValueError(f"the {env_name} oracle has no answer to the problem of any of the {episodes} {split} episodes "
                         f"(seeds {seed}..{seed + episodes - 1}); use a problem set with solutions, or another agent")
    if unknown:
        warnings.warn(f"{unknown} of {episodes} {split} episodes of {env_name} left out of the demonstrations: the oracle "
                      "has no answer to their problems (a demonstration of its refusal would teach it)", stacklevel=2)
