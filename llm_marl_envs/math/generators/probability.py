"""Probability with exact fractions: dice sums, drawing without replacement, coin flips."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np

from .base import Generator, Params, fmt, randint

LOWEST_TERMS = "Give the answer as a fraction in lowest terms."


def dice_sum_counts(k: int) -> dict[int, int]:
    counts = {0: 1}
    for _ in range(k):
        nxt: dict[int, int] = {}
        for total, ways in counts.items():
            for face in range(1, 7):
                nxt[total + face] = nxt.get(total + face, 0) + ways
        counts = nxt
    return counts


class Dice(Generator):
    name = "dice"
    topic = "probability"
    templates = {
        "exact": "{k} fair six-sided dice are rolled. What is the probability that the sum of the numbers shown is {s}? " + LOWEST_TERMS,
        "atleast": "{k} fair six-sided dice are rolled. What is the probability that the sum of the numbers shown is at least {s}? " + LOWEST_TERMS,
    }
    fields = {"k": "\\d+", "s": "\\d+"}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        options = {1: [("exact", 2)], 2: [("atleast", 2), ("exact", 3)], 3: [("atleast", 3), ("exact", 4)]}[difficulty]
        variant, k = options[int(rng.integers(len(options)))]
        s = randint(rng, k + 1, 6 * k) if variant == "atleast" else randint(rng, k, 6 * k)
        return variant, {"k": str(k), "s": str(s)}

    def solve(self, variant: str, params: Params) -> str:
        k, s = int(params["k"]), int(params["s"])
        counts = dice_sum_counts(k)
        hits = sum(w for t, w in counts.items() if (t == s if variant == "exact" else t >= s))
        return fmt(Fraction(hits, 6**k))

    def program(self, variant: str, params: Params) -> str:
        test = "==" if variant == "exact" else ">="
        return (
            "from fractions import Fraction\nfrom itertools import product\n\n"
            f"k, s = {params['k']}, {params['s']}\n"
            "rolls = list(product(range(1, 7), repeat=k))\n"
            f"print(Fraction(sum(1 for r in rolls if sum(r) {test} s), len(rolls)))\n"
        )


class Urn(Generator):
    name = "urn"
    topic = "probability"
    templates = {
        "exact": ("A bag contains {r} red balls and {b} blue balls. {k} balls are drawn at random without replacement. "
                  "What is the probability that exactly {j} of them are red? " + LOWEST_TERMS),
        "atleast": ("A bag contains {r} red balls and {b} blue balls. {k} balls are drawn at random without replacement. "
                    "What is the probability that at least {j} of them are red? " + LOWEST_TERMS),
    }
    fields = {k: "\\d+" for k in ("r", "b", "k", "j")}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        k = {1: 2, 2: 3, 3: 4}[difficulty]
        variant = "exact" if difficulty < 3 or rng.random() < 0.3 else "atleast"
        r, b = randint(rng, 2, 4 + 2 * difficulty), randint(rng, 2, 4 + 2 * difficulty)
        j = randint(rng, max(1, k - b), min(k, r))
        return variant, {"r": str(r), "b": str(b), "k": str(k), "j": str(j)}

    def solve(self, variant: str, params: Params) -> str:
        r, b, k, j = (int(params[x]) for x in ("r", "b", "k", "j"))
        reds = [j] if variant == "exact" else range(j, k + 1)
        hits = sum(comb(r, x) * comb(b, k - x) for x in reds)
        return fmt(Fraction(hits, comb(r + b, k)))

    def program(self, variant: str, params: Params) -> str:
        test = "==" if variant == "exact" else ">="
        return (
            "from fractions import Fraction\nfrom itertools import combinations\n\n"
            f"balls = ['red'] * {params['r']} + ['blue'] * {params['b']}\n"
            f"draws = list(combinations(range(len(balls)), {params['k']}))\n"
            f"hits = sum(1 for d in draws if sum(balls[i] == 'red' for i in d) {test} {params['j']})\n"
            "print(Fraction(hits, len(draws)))\n"
        )


def _no_two_heads(n: int) -> int:
    end_tail, end_head = 1, 1  # sequences of length 1
    for _ in range(n - 1):
        end_tail, end_head = end_tail + end_head, end_tail
    return end_tail + end_head


class Coins(Generator):
    name = "coins"
    topic = "probability"
    templates = {
        "exact": "A fair coin is flipped {n} times. What is the probability of getting exactly {k} heads? " + LOWEST_TERMS,
        "atleast": "A fair coin is flipped {n} times. What is the probability of getting at least {k} heads? " + LOWEST_TERMS,
        "norun": "A fair coin is flipped {n} times. What is the probability that no two consecutive flips are both heads? " + LOWEST_TERMS,
    }
    fields = {"n": "\\d+", "k": "\\d+"}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        if difficulty == 1:
            n = randint(rng, 2, 6)
            return "exact", {"n": str(n), "k": str(randint(rng, 0, n))}
        if difficulty == 2:
            n = randint(rng, 4, 10)
            return "atleast", {"n": str(n), "k": str(randint(rng, 1, n))}
        if rng.random() < 0.5:
            n = randint(rng, 10, 16)
            return "atleast", {"n": str(n), "k": str(randint(rng, 1, n))}
        return "norun", {"n": str(randint(rng, 4, 14))}

    def solve(self, variant: str, params: Params) -> str:
        n = int(params["n"])
        if variant == "norun":
            return fmt(Fraction(_no_two_heads(n), 2**n))
        k = int(params["k"])
        hits = comb(n, k) if variant == "exact" else sum(comb(n, x) for x in range(k, n + 1))
        return fmt(Fraction(hits, 2**n))

    def program(self, variant: str, params: Params) -> str:
        test = {
            "exact": f"sum(f) == {params.get('k')}",
            "atleast": f"sum(f) >= {params.get('k')}",
            "norun": "all(not (f[i] and f[i + 1]) for i in range(len(f) - 1))",
        }[variant]
        return (
            "from fractions import Fraction\nfrom itertools import product\n\n"
            f"flips = list(product((0, 1), repeat={params['n']}))  # 1 = heads\n"
            f"print(Fraction(sum(1 for f in flips if {test}), len(flips)))\n"
        )


GENERATORS = [Dice(), Urn(), Coins()]
