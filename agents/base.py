"""The agent interface and the loop that plays one episode with it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any


class Agent(ABC):
    """Acts for one or more roles of an environment."""

    def reset(self, seed: int | None = None) -> None:
        """Called at the start of every episode."""

    @abstractmethod
    def act(self, role: str, observation: dict[str, Any]) -> str:
        """The reply of `role` to `observation` (`{"messages": [...], "turn": k}`)."""

    def knows(self, role: str, observation: dict[str, Any]) -> bool:
        """False where this agent's reply to `observation` could only say it cannot answer (an oracle shown a
        problem it has no solution for); demonstrations leave such an episode out."""
        return True


@dataclass
class EpisodeResult:
    success: bool
    returns: dict[str, float]
    """Sum of each role's rewards over the episode."""
    steps: int
    turns: int
    parse_errors: dict[str, int] = field(default_factory=dict)
    renders: list[str] = field(default_factory=list)


def last_user_text(observation: dict[str, Any]) -> str:
    """The newest user message of an observation (where the task text lives)."""
    for message in reversed(observation["messages"]):
        if message["role"] == "user":
            return message["content"]
    return ""


def moves_program(moves: list[str]) -> str:
    """A tool reply whose one-line program prints `moves` as an action list (the oracles' short style)."""
    return "```python\nprint(\"[" + ", ".join(moves) + "]\")\n```"


def run_episode(env: Any, agent: Agent | dict[str, Agent], *, seed: int | None = None,
                split: str = "train", render: bool = False, max_steps: int = 10_000,
                instance: Any = None) -> EpisodeResult:
    """Play one episode of an AEC `env` with `agent` (one for all roles, or one per role); `instance`
    (a row of `env.dataset_instances()`) replaces the one `seed` and `split` would draw."""
    env.reset(seed=seed, options={"split": split, **({"instance": instance} if instance is not None else {})})
    agents = agent if isinstance(agent, dict) else {role: agent for role in env.possible_agents}
    for a in set(map(id, agents.values())):
        next(x for x in agents.values() if id(x) == a).reset(seed)
    returns = {role: 0.0 for role in env.possible_agents}
    errors = {role: 0 for role in env.possible_agents}
    renders = [env.render()] if render else []
    steps = 0
    for role in env.agent_iter(max_steps):
        observation, reward, terminated, truncated, info = env.last()
        returns[role] += float(reward)
        if terminated or truncated:
            env.step(None)
            continue
        reply = agents[role].act(role, observation)
        # A runaway reply (a served model's 32k tokens, say) is cut at the action space's length: past it, the
        # wrapped env's bounds check stops the episode; the env judges what is left, as any malformed reply.
        limit = getattr(env.action_space(role), "max_length", None)
        env.step(reply[:limit] if isinstance(reply, str) and limit is not None else reply)
        steps += 1
        errors[role] += env.infos[role].get("parse_error") is not None
        if render:
            renders.append(env.render())
    raw = env.unwrapped
    return EpisodeResult(bool(raw.success), returns, steps, raw.turn, errors, renders)
