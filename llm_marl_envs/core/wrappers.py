"""`env()` = raw_env + PettingZoo's standard checks, for every llm-marl environment."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pettingzoo.utils import wrappers
from pettingzoo.utils.conversions import aec_to_parallel_wrapper

from .base import fork


class OrderEnforcingWrapper(wrappers.OrderEnforcingWrapper):
    """PettingZoo's call-order check, whose `fork()` copies the wrappers with the env: an attribute it lacks
    is looked up on the env it wraps, so `fork()` reached the raw env's, which copies the raw env alone."""

    def fork(self) -> OrderEnforcingWrapper:
        return fork(self)


def make_env_fn(raw_env: Callable[..., Any]) -> Callable[..., Any]:
    """Build `env(**kwargs)`: out-of-bounds and call-order checks around `raw_env(**kwargs)`.

    Every string is inside the action space (core.spaces.TextSpace), so the out-of-bounds check
    never rejects malformed model output; only non-strings and runaway lengths are flagged.
    """

    def env(**kwargs: Any) -> Any:
        wrapped = raw_env(**kwargs)
        wrapped = wrappers.AssertOutOfBoundsWrapper(wrapped)
        return OrderEnforcingWrapper(wrapped)

    env.__doc__ = raw_env.__doc__
    return env


class ParallelWrapper(aec_to_parallel_wrapper):
    """PettingZoo's AEC-to-parallel conversion, with the `fork()` every environment offers (its wrapper has none)."""

    def fork(self) -> ParallelWrapper:
        return fork(self)


def make_parallel_env_fn(env_fn: Callable[..., Any]) -> Callable[..., Any]:
    """Build `parallel_env(**kwargs)` from `env` (PettingZoo's `parallel_wrapper_fn`, with `ParallelWrapper`)."""

    def parallel_env(**kwargs: Any) -> ParallelWrapper:
        return ParallelWrapper(env_fn(**kwargs))

    parallel_env.__doc__ = env_fn.__doc__
    return parallel_env
