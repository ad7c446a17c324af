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
a reference solution, say) is left out whole: a demonstration of the oracle's refusal would teach it. So is
an episode that fails (the oracle or the environment raises): the other episodes' demonstrations are kept.
One warning counts the episodes left out, naming each failed one's seed and error; `left_out` (a dict given
by the caller) receives the seed of each with its reason. No demonstration from any episode is a ValueError.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from .oracle import make_oracle


def oracle_demonstrations(env_name: str, episodes: int, *, split: str = "train", seed: int = 0,
                          env_kwargs: Mapping[str, Any] | None = None, oracle_options: Mapping[str, Any] | None = None,
                          noise: float = 0.0, left_out: dict[int, str] | None = None) -> Iterator[dict[str, Any]]:
    """Play instances seed..seed+episodes-1 of `split` with the oracle (each reply the random agent's
    with probability `noise`); yield one transcript per oracle reply. Each episode left out is added to
    `left_out`, when given, as seed -> reason: `NO_ANSWER`, or the error it failed with (one line)."""
    from llm_marl_envs.registry import make_raw

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if not 0.0 <= noise < 1.0:
        raise ValueError(f"noise must be in [0, 1), got {noise}")
    oracle = make_oracle(env_name, env_kwargs, **dict(oracle_options or {}))
    env = make_raw(env_name, **dict(env_kwargs or {}))
    unknown, failed = [], {}  # episodes left out: the oracle has no answer to their problem; they raised (seed -> error)
    for instance in range(seed, seed + episodes):
        try:
            records = _episode(env, oracle, env_name, split, seed, instance, noise)
        except Exception as exc:  # noqa: BLE001 -- one episode's failure (the oracle's or the env's) costs that episode only
            failed[instance] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
            continue
        if records is None:
            unknown.append(instance)
            continue
        yield from records
    if left_out is not None:
        left_out.update({**dict.fromkeys(unknown, NO_ANSWER), **failed})
    why = []
    if unknown:
        why.append(f"{len(unknown)} the oracle has no answer to (a demonstration of its refusal would teach it)"
                   if failed else "the oracle has no answer to their problems (a demonstration of its refusal would teach it)")
    if failed:
        shown = "; ".join(f"seed {s}: {error}" for s, error in list(failed.items())[:5])
        more = f"; and {len(failed) - 5} more" if len(failed) > 5 else ""
        why.append(f"{len(failed)} failed ({shown}{more})" if unknown else f"they failed ({shown}{more})")
    if len(unknown) == episodes:
        raise ValueError(f"the {env_name} oracle has no answer to the problem of any of the {episodes} {split} episodes "
                         f"(seeds {seed}..{seed + episodes - 1}); use a problem set with solutions, or another agent")
    if len(unknown) + len(failed) == episodes:
        raise ValueError(f"no {split} episode of {env_name} gave a demonstration (seeds {seed}..{seed + episodes - 1}): "
                         f"{'; '.join(why)}")
    if why:
        warnings.warn(f"{len(unknown) + len(failed)} of {episodes} {split} episodes of {env_name} left out of the "
                      f"demonstrations: {'; '.join(why)}", stacklevel=2)


NO_ANSWER = "the oracle has no answer to its problem"
"""The reason `oracle_demonstrations` gives in `left_out` for an episode whose problem the oracle does not know."""


def _episode(env: Any, oracle: Any, env_name: str, split: str, seed: int, instance: int,
             noise: float) -> list[dict[str, Any]] | None:
    """The transcripts of one episode's oracle replies; None where the oracle has no answer to its problem."""
    import numpy as np

    from .random_agent import RandomAgent

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
            return None
        reply = oracle.act(role, observation)
        env.step(reply)
        shown = [dict(m, weight=0) if m["role"] == "assistant" else m for m in observation["messages"]]
        records.append({"agent": role, "messages": [*shown, {"role": "assistant", "content": reply}],
                        "env": env_name, "split": split, "seed": instance, "turn": int(observation.get("turn", 0)),
                        "reward": float(env.rewards.get(role, 0.0))})
    return records
