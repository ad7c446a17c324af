"""Seeded Plan-Path instances: random walls, start and goal, verified reachable by BFS."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import compress

import numpy as np

from ..core.records import fast_init
from .rules import Cell, Grid, shortest_length


@dataclass(frozen=True)
class PlanPathConfig:
    height: int = 10
    width: int = 10
    wall_density: float = 0.22
    """Probability that a cell is a wall (the reference used 22%)."""
    min_path_length: int = 6
    """Shortest start-goal path must be at least this many moves."""
    max_path_length: int | None = None

    def __post_init__(self) -> None:
        if self.height < 2 or self.width < 2:
            raise ValueError(f"grid must be at least 2x2, got {self.height}x{self.width}")
        if not 0.0 <= self.wall_density < 0.9:
            raise ValueError(f"wall_density must be in [0, 0.9), got {self.wall_density}")
        if self.min_path_length < 1:
            raise ValueError(f"min_path_length must be >= 1, got {self.min_path_length}")
        if self.min_path_length > self.height * self.width - 1:
            raise ValueError(f"min_path_length {self.min_path_length} cannot fit a {self.height}x{self.width} grid; lower it")
        if self.max_path_length is not None and self.max_path_length < self.min_path_length:
            raise ValueError("max_path_length must be >= min_path_length")


@fast_init
@dataclass(frozen=True)
class PlanPathInstance:
    grid: Grid
    start: Cell
    goal: Cell
    shortest_length: int

    def key(self) -> str:
        known = self.__dict__.get("_key")  # written by `generate`, from the wall mask it drew
        if known is not None:
            return known
        h, w = self.grid.height, self.grid.width
        stride = w + 1  # each row and its "/" separator
        cells = bytearray((b"." * w + b"/") * h)
        for r, c in self.grid.walls:
            if 0 <= r < h and 0 <= c < w:
                cells[r * stride + c] = 35  # "#"
        return _key(str(self.start), str(self.goal), cells[:-1])


def _key(start: str, goal: str, layout: bytes | bytearray) -> str:
    """`PlanPathInstance.key()` from the `str` of start and goal; `layout` is the grid's rows, "." open
    and "#" a wall, joined by "/"."""
    return f"{start}|{goal}|{layout.decode()}"


_LAYOUT_CHARS = bytes.maketrans(b"\x00\x01", b"#.")
"""Maps the bytes of an open-cell mask (False, True) to the key's characters (a wall, an open cell)."""
_BIT_CHARS = bytes.maketrans(b"\x00\x01", b"01")
"""Maps the bytes of an open-cell mask to binary digits: read last cell first, they are the bitset `int(..., 2)`."""
_WALL_FLAGS = bytes.maketrans(b"\x00\x01", b"\x01\x00")
"""Maps the bytes of an open-cell mask to a wall mask, for `itertools.compress`."""


MAX_TRIES = 10_000


@lru_cache(maxsize=16)
def _cells(height: int, width: int) -> tuple[Cell, ...]:
    """(row, column) of every flat cell index, row-major."""
    return tuple(divmod(i, width) for i in range(height * width))


@lru_cache(maxsize=16)
def _cell_texts(height: int, width: int) -> tuple[str, ...]:
    """`str` of every cell of `_cells`, as the key writes start and goal."""
    return tuple(map(str, _cells(height, width)))


def two_distinct(rng: np.random.Generator, n: int) -> tuple[int, int]:
    """`rng.choice(n, size=2, replace=False)` as Python ints, drawing exactly what it draws (Floyd's
    sampling of two indices, then the shuffle of the pair) with three scalar draws instead of numpy's
    array machinery (tests/test_plan_path_env.py checks it against numpy's)."""
    a, b = rng.integers(0, n - 1), rng.integers(0, n)
    if b == a:
        b = n - 1
    return (int(b), int(a)) if rng.integers(0, 2) == 0 else (int(a), int(b))


_M32 = 0xFFFFFFFF


class _PairDraws:
    """`two_distinct` on a PCG64 generator without numpy's per-call overhead (three `integers` calls a
    pair). Each `integers(0, k)` with k < 2**32 is Lemire's bounded method on 32-bit values, and PCG64
    hands those out as the low, then the high half of one 64-bit output, keeping the high half for the
    next 32-bit draw. This takes the 64-bit outputs from `random_raw` and keeps the high half itself, so
    it draws what `two_distinct` draws as long as numpy's own spare half is empty when it starts, as in
    every fresh generator (`draw_instance` gives each candidate one). The generator has then used the
    same 64-bit outputs as under `two_distinct`, but numpy's spare half stays empty: a high half it
    would keep for a later 32-bit draw is not there (tests/test_plan_path_env.py checks both)."""

    __slots__ = ("_raw", "_spare")

    def __init__(self, rng: np.random.Generator):
        self._raw = rng.bit_generator.random_raw
        self._spare = -1  # the high half of the last 64-bit output until it is handed out; -1: none

    def _below(self, k: int) -> int:
        """`rng.integers(0, k)`, 1 <= k < 2**32."""
        if k == 1:
            return 0  # numpy draws nothing for a range of one value
        while True:
            if self._spare < 0:
                raw = self._raw()
                value, self._spare = raw & _M32, raw >> 32
            else:
                value, self._spare = self._spare, -1
            m = value * k
            if m & _M32 >= (0x100000000 - k) % k:  # numpy's rejection threshold (no bias)
                return m >> 32

    def two_distinct(self, n: int) -> tuple[int, int]:
        a, b = self._below(n - 1), self._below(n)
        if b == a:
            b = n - 1
        return (b, a) if self._below(2) == 0 else (a, b)


def generate(rng: np.random.Generator, config: PlanPathConfig) -> PlanPathInstance:
    """One solvable instance from `rng`, a fresh generator (`draw_instance` gives one to each candidate)."""
    h, w = config.height, config.width
    # numpy's own draws where the 32-bit halves are not PCG64's (another bit generator)
    pair = _PairDraws(rng).two_distinct if type(rng.bit_generator) is np.random.PCG64 else partial(two_distinct, rng)
    cells, shortest, longest = _cells(h, w), config.min_path_length, config.max_path_length
    for _ in range(MAX_TRIES):
        open_cells = rng.random(h * w) >= config.wall_density  # the draws of rng.random((h, w)), flat
        free = open_cells.nonzero()[0]
        if len(free) < 2:
            continue
        i, j = pair(len(free))
        start, goal = int(free[i]), int(free[j])
        mask = open_cells.tobytes()  # one byte a cell, 1 where open
        # Bit k of the bitset is cell k: the mask as binary digits, last cell first.
        length = shortest_length(int(mask[::-1].translate(_BIT_CHARS), 2), h, w, start, goal)
        if length < shortest or (longest is not None and length > longest):
            continue  # -1 (no path) is shorter than any minimum
        walls = frozenset(compress(cells, mask.translate(_WALL_FLAGS)))
        instance = PlanPathInstance(Grid(h, w, walls), cells[start], cells[goal], length)
        # Its key, which `draw_instance` asks every candidate for, from the mask: one translate of the
        # mask's bytes instead of a pass over the walls. Written once, like the fields; `==`, `repr` and
        # `dataclasses.replace` (which builds the key again) do not see it.
        layout = b"/".join([mask[k:k + w] for k in range(0, h * w, w)]).translate(_LAYOUT_CHARS)
        texts = _cell_texts(h, w)
        instance.__dict__["_key"] = _key(texts[start], texts[goal], layout)
        return instance
    raise ValueError(f"no Plan-Path instance satisfies {config} in {MAX_TRIES} tries; lower wall_density or min_path_length")
