"""A digest of the instances a generator draws, to pin "same seed, same instances" across rewrites."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from llm_marl_envs.core.instances import SPLITS, draw_instance


def instance_digest(namespace: str, make: Callable[[Any], Any], seeds: int) -> str:
    """The first 16 hex digits of sha256 over the keys of seeds 0..seeds-1 of every split, in order."""
    keys = [draw_instance(namespace, split, seed, make).key() for split in SPLITS for seed in range(seeds)]
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]
