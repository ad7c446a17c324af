"""Things that act in an environment: scripted oracles, random and garbage agents, LLM agents.

Every agent answers `act(role, observation) -> str` from the observation text alone, exactly as a
model would; nothing here reads environment internals.
"""

from .base import Agent, EpisodeResult, run_episode

__all__ = ["Agent", "EpisodeResult", "run_episode"]
