"""Seeded instances with disjoint train/val/test splits.

An instance is a pure function of (environment name, split, seed): its generator gets a fresh
`numpy.random.Generator` from `SeedSequence([name, split, seed, attempt])`, never the global RNG
and never `seed + idx` (which makes nearby seeds of two splits collide).

Disjointness is enforced by content, not only by seed: every instance has a canonical `key()`
string, and its SHA-256 assigns it to exactly one split bucket. A draw whose key falls in another
split's bucket is rejected and redrawn with the next `attempt`. So the same puzzle can never be in
two splits, even when a small configuration (4x4 Sudoku) makes identical puzzles likely.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from typing import Protocol, TypeVar

import numpy as np

SPLITS: tuple[str, ...] = ("train", "val", "test")
# Buckets of sha256(key) % 10 owned by each split: 60% / 20% / 20%.
_SPLIT_BUCKETS: dict[str, frozenset[int]] = {
    "train": frozenset(range(0, 6)),
    "val": frozenset({6, 7}),
    "test": frozenset({8, 9}),
}
_SPLIT_IDS = {name: i for i, name in enumerate(SPLITS)}
_SPLIT_OF_BUCKET = tuple(next(name for name, buckets in _SPLIT_BUCKETS.items() if b in buckets) for b in range(10))
MAX_ATTEMPTS = 2_000


class Keyed(Protocol):
    def key(self) -> str: ...


T = TypeVar("T", bound=Keyed)


def check_split(split: str) -> str:
    if split not in _SPLIT_IDS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    return split


def instance_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def split_of(key: str) -> str:
    """The split an instance with this canonical key belongs to."""
    # The first 8 hex digits of `instance_hash(key)`, read from the digest's first 4 bytes.
    return _SPLIT_OF_BUCKET[int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % 10]


_M32 = 0xFFFFFFFF


def _words(n: int) -> list[int]:
    """The uint32 words of a non-negative int as numpy's SeedSequence splits it, low word first."""
    return [n] if n <= _M32 else [n & _M32, *_words(n >> 32)]


# numpy's SeedSequence.generate_state constants (INIT_B, MULT_B): the hash multiplier before and after each of 8 words.
_STATE_BEFORE = tuple(0x8B51F9DD * 0x58F38DED**i & _M32 for i in range(8))
_STATE_AFTER = tuple(0x8B51F9DD * 0x58F38DED ** (i + 1) & _M32 for i in range(8))


class _InstanceSeed(np.random.SeedSequence):
    """numpy's SeedSequence, with the one call PCG64 makes, `generate_state(4, np.uint64)`, done on
    Python ints (numpy's generic version loops over numpy scalars, a large part of a new generator's
    cost). The same words by numpy's algorithm: word i of 8 is pool word i mod 4 hashed with the i-th
    multipliers, two uint32 words to a uint64, low word first. Any other call is numpy's own."""

    def generate_state(self, n_words, dtype=np.uint32):
        if n_words != 4 or dtype is not np.uint64 or self.pool_size != 4:
            return super().generate_state(n_words, dtype)
        # Written out word by word: a loop over the 8 words costs about a third more, on every candidate.
        w0, w1, w2, w3 = self.pool.tolist()
        b0, b1, b2, b3, b4, b5, b6, b7 = _STATE_BEFORE
        a0, a1, a2, a3, a4, a5, a6, a7 = _STATE_AFTER
        h0, h1, h2, h3 = (w0 ^ b0) * a0 & _M32, (w1 ^ b1) * a1 & _M32, (w2 ^ b2) * a2 & _M32, (w3 ^ b3) * a3 & _M32
        h4, h5, h6, h7 = (w0 ^ b4) * a4 & _M32, (w1 ^ b5) * a5 & _M32, (w2 ^ b6) * a6 & _M32, (w3 ^ b7) * a7 & _M32
        return np.array([h0 ^ h0 >> 16 | (h1 ^ h1 >> 16) << 32, h2 ^ h2 >> 16 | (h3 ^ h3 >> 16) << 32,
                         h4 ^ h4 >> 16 | (h5 ^ h5 >> 16) << 32, h6 ^ h6 >> 16 | (h7 ^ h7 >> 16) << 32], dtype=np.uint64)


def instance_rng(env_name: str, split: str, seed: int, attempt: int = 0) -> np.random.Generator:
    """The generator of `np.random.default_rng(SeedSequence([crc32(env_name), split index, seed mod 2**48,
    attempt]))`: the same stream, made without numpy's per-int conversion of that list in Python and
    with PCG64's seeding words from `_InstanceSeed`."""
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    return _rng(_entropy(env_name, split, seed), int(attempt))


def _entropy(env_name: str, split: str, seed: int) -> list[int]:
    """The uint32 words numpy makes of [crc32(env_name), split index, seed mod 2**48] (each int low
    word first; 0 is one word): given them as an array, SeedSequence skips its per-int conversion in
    Python and pools the same entropy."""
    return [zlib.crc32(env_name.encode()), _SPLIT_IDS[check_split(split)], *_words(int(seed) & 0xFFFFFFFFFFFF)]


def _rng(entropy: list[int], attempt: int) -> np.random.Generator:
    """`instance_rng` of the candidate `attempt` (>= 0) from `_entropy`'s words."""
    words = np.array([*entropy, *_words(attempt)], dtype=np.uint32)
    return np.random.Generator(np.random.PCG64(_InstanceSeed(words)))


def draw_instance(env_name: str, split: str, seed: int, make: Callable[[np.random.Generator], T]) -> T:
    """Deterministically draw the instance of `split` for `seed`.

    `make(rng)` builds one candidate (already verified solvable by the caller's generator);
    candidates whose key belongs to another split are rejected.
    """
    entropy = _entropy(env_name, split, seed)
    for attempt in range(MAX_ATTEMPTS):
        candidate = make(_rng(entropy, attempt))
        if split_of(candidate.key()) == split:
            return candidate
    raise ValueError(
        f"{env_name}: no {split!r} instance found in {MAX_ATTEMPTS} draws for seed {seed}; the "
        "configuration has too few distinct instances: enlarge the grid or loosen its constraints"
    )
