"""Combinatorics: binomial coefficients, committees, multiset arrangements, seating with
constraints, distributions (stars and bars), circular arrangements and derangements."""

from __future__ import annotations

from collections import Counter
from math import comb, factorial

import numpy as np

from .base import Generator, Params, randint

NAMES = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory", "Niaj",
         "Olivia", "Peggy", "Rupert", "Sybil", "Trent", "Victor", "Walter", "Yvonne"]


def derangements(n: int) -> int:
    d = [1, 0]
    for k in range(2, n + 1):
        d.append((k - 1) * (d[k - 1] + d[k - 2]))
    return d[n]


class Choose(Generator):
    name = "choose"
    topic = "combinatorics"
    templates = {
        "books": "In how many ways can {k} books be chosen from {n} different books?",
        "committee": ("A committee of {k} people is chosen from {m} men and {w} women. "
                      "How many different committees contain at least one man and at least one woman?"),
    }
    fields = {k: "\\d+" for k in ("k", "n", "m", "w")}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        if difficulty < 3:
            n = randint(rng, 4, 10) if difficulty == 1 else randint(rng, 11, 25)
            return "books", {"k": str(randint(rng, 2, n - 2)), "n": str(n)}
        m, w = randint(rng, 3, 9), randint(rng, 3, 9)
        return "committee", {"k": str(randint(rng, 3, min(6, m + w - 1))), "m": str(m), "w": str(w)}

    def solve(self, variant: str, params: Params) -> str:
        k = int(params["k"])
        if variant == "books":
            return str(comb(int(params["n"]), k))
        m, w = int(params["m"]), int(params["w"])
        return str(comb(m + w, k) - comb(m, k) - comb(w, k))

    def program(self, variant: str, params: Params) -> str:
        if variant == "books":
            return f"import math\n\nprint(math.comb({params['n']}, {params['k']}))\n"
        m, w, k = params["m"], params["w"], params["k"]
        return (
            "from itertools import combinations\n\n"
            f"people = ['M'] * {m} + ['W'] * {w}\n"
            f"count = sum(1 for group in combinations(range(len(people)), {k})\n"
            "            if {people[i] for i in group} == {'M', 'W'})\n"
            "print(count)\n"
        )


class Arrangements(Generator):
    name = "arrangements"
    topic = "combinatorics"
    templates = {"main": "How many distinct strings can be made by rearranging all the letters of {word}?"}
    fields = {"word": "[A-Z]+"}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        lo, hi = {1: (4, 5), 2: (6, 7), 3: (8, 10)}[difficulty]
        length = randint(rng, lo, hi)
        letters = [chr(ord("A") + int(i)) for i in rng.choice(26, size=randint(rng, 2, 4), replace=False)]
        while True:
            word = "".join(letters[int(i)] for i in rng.integers(len(letters), size=length))
            if len(set(word)) >= 2 and len(set(word)) < length:  # some letter repeats
                return "main", {"word": word}

    def solve(self, variant: str, params: Params) -> str:
        counts = Counter(params["word"])
        total = factorial(len(params["word"]))
        for c in counts.values():
            total //= factorial(c)
        return str(total)

    def program(self, variant: str, params: Params) -> str:
        return (
            "from collections import Counter\nfrom math import factorial\n\n"
            f"word = {params['word']!r}\n"
            "total = factorial(len(word))\n"
            "for count in Counter(word).values():\n"
            "    total //= factorial(count)\n"
            "print(total)\n"
        )


class RowArrangements(Generator):
    name = "row_arrangements"
    topic = "combinatorics"
    templates = {
        "together": "In how many ways can {n} people stand in a row if two particular people, {a} and {b}, must stand next to each other?",
        "apart": "In how many ways can {n} people stand in a row if two particular people, {a} and {b}, must not stand next to each other?",
        "left": "In how many ways can {n} people stand in a row if one particular person, {a}, must stand somewhere to the left of another particular person, {b}?",
        "trio": "In how many ways can {n} people stand in a row if three particular people, {a}, {b} and {c}, must stand together in a block?",
    }
    fields = {"n": "\\d+", "a": "[A-Z][a-z]+", "b": "[A-Z][a-z]+", "c": "[A-Z][a-z]+"}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        variants, lo, hi = {1: (("together", "apart"), 4, 5), 2: (("together", "apart", "left"), 5, 7),
                            3: (("apart", "left", "trio"), 6, 8)}[difficulty]
        variant = variants[int(rng.integers(len(variants)))]
        names = [NAMES[int(i)] for i in rng.choice(len(NAMES), size=3, replace=False)]
        params = {"n": str(randint(rng, lo, hi)), "a": names[0], "b": names[1]}
        if variant == "trio":
            params["c"] = names[2]
        return variant, params

    def solve(self, variant: str, params: Params) -> str:
        n = int(params["n"])
        together = 2 * factorial(n - 1)
        return str({"together": together, "apart": factorial(n) - together, "left": factorial(n) // 2,
                    "trio": factorial(3) * factorial(n - 2)}[variant])

    def program(self, variant: str, params: Params) -> str:
        test = {
            "together": "abs(row.index(0) - row.index(1)) == 1",
            "apart": "abs(row.index(0) - row.index(1)) != 1",
            "left": "row.index(0) < row.index(1)",
            "trio": "max(row.index(p) for p in (0, 1, 2)) - min(row.index(p) for p in (0, 1, 2)) == 2",
        }[variant]
        return (
            "from itertools import permutations\n\n"
            f"# people 0 and 1{' and 2' if variant == 'trio' else ''} are the particular ones\n"
            f"print(sum(1 for row in permutations(range({params['n']})) if {test}))\n"
        )


class Distributions(Generator):
    name = "distributions"
    topic = "combinatorics"
    templates = {
        "any": "In how many ways can {n} identical candies be given to {k} children if a child may receive no candy?",
        "least": "In how many ways can {n} identical candies be given to {k} children if every child must receive at least {m} of them?",
    }
    fields = {"n": "\\d+", "k": "\\d+", "m": "\\d+"}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        if difficulty == 1:
            return "any", {"n": str(randint(rng, 3, 10)), "k": str(randint(rng, 2, 4))}
        k = randint(rng, 2, 4) if difficulty == 2 else randint(rng, 3, 5)
        m = 1 if difficulty == 2 else randint(rng, 2, 3)
        n = randint(rng, k * m, k * m + (12 if difficulty == 2 else 20))
        return "least", {"n": str(n), "k": str(k), "m": str(m)}

    def solve(self, variant: str, params: Params) -> str:
        n, k, m = int(params["n"]), int(params["k"]), int(params.get("m", 0))
        free = n - k * m
        return str(comb(free + k - 1, k - 1) if free >= 0 else 0)

    def program(self, variant: str, params: Params) -> str:
        m = params.get("m", "0")
        return (
            "from functools import lru_cache\n\n\n"
            "@lru_cache(maxsize=None)\n"
            "def ways(candies, children):\n"
            "    # number of ways to give `candies` to `children`, each at least the minimum\n"
            "    if children == 0:\n"
            "        return 1 if candies == 0 else 0\n"
            f"    return sum(ways(candies - own, children - 1) for own in range({m}, candies + 1))\n\n\n"
            f"print(ways({params['n']}, {params['k']}))\n"
        )


class PermutationCounts(Generator):
    name = "permutation_counts"
    topic = "combinatorics"
    templates = {
        "circle": "In how many ways can {n} people sit around a round table if seatings that differ only by a rotation are considered the same?",
        "derangement": "In how many ways can the numbers 1 to {n} be arranged in a row so that no number i is in position i?",
    }
    fields = {"n": "\\d+"}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        if difficulty == 1:
            return "circle", {"n": str(randint(rng, 4, 6))}
        if difficulty == 2:
            if rng.random() < 0.5:
                return "circle", {"n": str(randint(rng, 7, 10))}
            return "derangement", {"n": str(randint(rng, 3, 5))}
        return "derangement", {"n": str(randint(rng, 6, 8))}

    def solve(self, variant: str, params: Params) -> str:
        n = int(params["n"])
        return str(factorial(n - 1) if variant == "circle" else derangements(n))

    def program(self, variant: str, params: Params) -> str:
        if variant == "circle":
            return f"import math\n\n# fix one person's seat, arrange the others\nprint(math.factorial({params['n']} - 1))\n"
        return (
            "from itertools import permutations\n\n"
            f"n = {params['n']}\n"
            "print(sum(1 for p in permutations(range(n)) if all(p[i] != i for i in range(n))))\n"
        )


GENERATORS = [Choose(), Arrangements(), RowArrangements(), Distributions(), PermutationCounts()]
