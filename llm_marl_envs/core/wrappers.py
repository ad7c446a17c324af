"""`env()` = raw_env + PettingZoo's standard checks, for every llm-marl environment."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pettingzoo.utils import wrappers


def make_env_fn(raw_env: Callable[..., Any]) -> Callable[..., Any]:
    """Build `env(**kwargs)`: out-of-bounds and call-order checks around `raw_env(**kwargs)`.

    Every string is inside the action space (core.spaces.TextSpace), so the out-of-bounds check
    never rejects malformed model output; only non-strings and runaway lengths are flagged.
    """

    def env(**kwargs: Any) -> Any:
        wrapped = raw_env(**kwargs)
        wrapped = wrappers.AssertOutOfBoundsWrapper(wrapped)
        return wrappers.OrderEnforcingWrapper(wrapped)

    env.__doc__ = raw_env.__doc__
    return env
