"""Number theory: gcd/lcm, modular powers, divisor counts and sums, primes, congruences."""

from __future__ import annotations

from functools import reduce
from math import gcd

import numpy as np

from .base import Generator, Params, ordinal, randint

SMALL_PRIMES = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]


def lcm(a: int, b: int) -> int:
    return a * b // gcd(a, b)


def factorize(n: int) -> dict[int, int]:
    factors: dict[int, int] = {}
    p = 2
    while p * p <= n:
        while n % p == 0:
            factors[p] = factors.get(p, 0) + 1
            n //= p
        p += 1
    if n > 1:
        factors[n] = factors.get(n, 0) + 1
    return factors


def primes_up_to(n: int) -> list[int]:
    if n < 2:
        return []
    sieve = bytearray([1]) * (n + 1)
    sieve[0] = sieve[1] = 0
    for p in range(2, int(n**0.5) + 1):
        if sieve[p]:
            sieve[p * p::p] = bytearray(len(range(p * p, n + 1, p)))
    return [i for i, flag in enumerate(sieve) if flag]


def nth_prime(k: int) -> int:
    limit = 30
    while True:
        primes = primes_up_to(limit)
        if len(primes) >= k:
            return primes[k - 1]
        limit *= 2


class GcdLcm(Generator):
    name = "gcd_lcm"
    topic = "number_theory"
    templates = {
        "gcd2": "What is the greatest common divisor of {a} and {b}?",
        "lcm2": "What is the least common multiple of {a} and {b}?",
        "gcd3": "What is the greatest common divisor of {a}, {b} and {c}?",
        "lcm3": "What is the least common multiple of {a}, {b} and {c}?",
    }
    fields = {"a": "\\d+", "b": "\\d+", "c": "\\d+"}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        use_gcd = rng.random() < 0.5
        count = 3 if difficulty == 3 else 2
        if use_gcd:
            g_hi, m_hi = {1: (12, 9), 2: (50, 30), 3: (60, 40)}[difficulty]
            g = randint(rng, 2, g_hi)
            values = [g * randint(rng, 1 if difficulty == 1 else 2, m_hi) for _ in range(count)]
        else:
            lo, hi = {1: (2, 20), 2: (10, 100), 3: (2, 40)}[difficulty]
            values = [randint(rng, lo, hi) for _ in range(count)]
        variant = f"{'gcd' if use_gcd else 'lcm'}{count}"
        return variant, dict(zip("abc", map(str, values)))

    def solve(self, variant: str, params: Params) -> str:
        values = [int(params[k]) for k in "abc" if k in params]
        return str(reduce(gcd if variant.startswith("gcd") else lcm, values))

    def program(self, variant: str, params: Params) -> str:
        values = ", ".join(params[k] for k in "abc" if k in params)
        fn = "gcd" if variant.startswith("gcd") else "lcm"
        return f"import math\nfrom functools import reduce\n\nprint(reduce(math.{fn}, [{values}]))\n"


class ModularPower(Generator):
    name = "modular_power"
    topic = "number_theory"
    templates = {"main": "What is the remainder when {a}^{b} is divided by {m}?"}
    fields = {"a": "\\d+", "b": "\\d+", "m": "\\d+"}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        a_hi, b_lo, b_hi, m_hi = {1: (9, 2, 6, 20), 2: (20, 10, 99, 50), 3: (99, 100, 99_999, 1000)}[difficulty]
        return "main", {"a": str(randint(rng, 2, a_hi)), "b": str(randint(rng, b_lo, b_hi)), "m": str(randint(rng, 3, m_hi))}

    def solve(self, variant: str, params: Params) -> str:
        return str(pow(int(params["a"]), int(params["b"]), int(params["m"])))

    def program(self, variant: str, params: Params) -> str:
        return f"# fast modular exponentiation\nprint(pow({params['a']}, {params['b']}, {params['m']}))\n"


class Divisors(Generator):
    name = "divisors"
    topic = "number_theory"
    templates = {
        "count": "How many positive divisors does {n} have?",
        "sum": "What is the sum of all positive divisors of {n}?",
    }
    fields = {"n": "\\d+"}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        variant = "count" if rng.random() < 0.5 else "sum"
        if difficulty == 1:
            n = randint(rng, 2, 100)
        elif difficulty == 2:
            n = randint(rng, 100, 5000)
        else:
            while True:
                chosen = rng.choice(len(SMALL_PRIMES), size=randint(rng, 2, 4), replace=False)
                n = 1
                for i in chosen:
                    n *= SMALL_PRIMES[int(i)] ** randint(rng, 1, 4)
                if 1000 <= n <= 1_000_000:
                    break
        return variant, {"n": str(n)}

    def solve(self, variant: str, params: Params) -> str:
        factors = factorize(int(params["n"]))
        if variant == "count":
            return str(reduce(lambda acc, e: acc * (e + 1), factors.values(), 1))
        total = 1
        for p, e in factors.items():
            total *= (p ** (e + 1) - 1) // (p - 1)
        return str(total)

    def program(self, variant: str, params: Params) -> str:
        body = "len(divisors)" if variant == "count" else "sum(divisors)"
        return (
            f"n = {params['n']}\n"
            "divisors = set()\n"
            "d = 1\n"
            "while d * d <= n:\n"
            "    if n % d == 0:\n"
            "        divisors.update((d, n // d))\n"
            "    d += 1\n"
            f"print({body})\n"
        )


class Primes(Generator):
    name = "primes"
    topic = "number_theory"
    templates = {
        "count": "How many prime numbers are there between {a} and {b}, inclusive?",
        "nth": "What is the {k} prime number?",
    }
    fields = {"a": "\\d+", "b": "\\d+", "k": "\\d+(?:st|nd|rd|th)"}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        if rng.random() < 0.5:
            a_hi, width = {1: (30, 40), 2: (300, 200), 3: (5000, 3000)}[difficulty]
            a = randint(rng, 1, a_hi)
            return "count", {"a": str(a), "b": str(a + randint(rng, 10, width))}
        lo, hi = {1: (1, 15), 2: (16, 100), 3: (101, 1000)}[difficulty]
        return "nth", {"k": ordinal(randint(rng, lo, hi))}

    def solve(self, variant: str, params: Params) -> str:
        if variant == "count":
            a, b = int(params["a"]), int(params["b"])
            return str(sum(1 for p in primes_up_to(b) if p >= a))
        return str(nth_prime(int(params["k"].rstrip("stndrh"))))

    def program(self, variant: str, params: Params) -> str:
        is_prime = (
            "def is_prime(n):\n"
            "    if n < 2:\n"
            "        return False\n"
            "    d = 2\n"
            "    while d * d <= n:\n"
            "        if n % d == 0:\n"
            "            return False\n"
            "        d += 1\n"
            "    return True\n\n\n"
        )
        if variant == "count":
            return is_prime + f"print(sum(1 for n in range({params['a']}, {params['b']} + 1) if is_prime(n)))\n"
        k = int(params["k"].rstrip("stndrh"))
        return is_prime + f"count, n = 0, 1\nwhile count < {k}:\n    n += 1\n    if is_prime(n):\n        count += 1\nprint(n)\n"


class Congruence(Generator):
    name = "congruence"
    topic = "number_theory"
    templates = {
        "linear": "What is the smallest positive integer x such that {a}x ≡ {b} (mod {m})?",
        "crt": ("What is the smallest positive integer that leaves a remainder of {r1} when divided by {m1}, "
                "a remainder of {r2} when divided by {m2}, and a remainder of {r3} when divided by {m3}?"),
    }
    fields = {k: "\\d+" for k in ("a", "b", "m", "r1", "r2", "r3", "m1", "m2", "m3")}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        if difficulty < 3:
            lo, hi = (5, 20) if difficulty == 1 else (20, 200)
            m = randint(rng, lo, hi)
            a = randint(rng, 2, m - 1)
            while gcd(a, m) != 1:
                a = randint(rng, 2, m - 1)
            return "linear", {"a": str(a), "b": str(randint(rng, 1, m - 1)), "m": str(m)}
        while True:
            moduli = [randint(rng, 3, 20) for _ in range(3)]
            if all(gcd(x, y) == 1 for i, x in enumerate(moduli) for y in moduli[i + 1:]):
                break
        params = {f"m{i + 1}": str(m) for i, m in enumerate(moduli)}
        params.update({f"r{i + 1}": str(randint(rng, 1, m - 1)) for i, m in enumerate(moduli)})
        return "crt", params

    def solve(self, variant: str, params: Params) -> str:
        if variant == "linear":
            a, b, m = int(params["a"]), int(params["b"]), int(params["m"])
            x = (b * pow(a, -1, m)) % m
            return str(x or m)
        x, modulus = 0, 1
        for i in (1, 2, 3):
            r, m = int(params[f"r{i}"]), int(params[f"m{i}"])
            # x + modulus * t ≡ r (mod m)
            t = ((r - x) * pow(modulus, -1, m)) % m
            x, modulus = x + modulus * t, modulus * m
        return str(x % modulus or modulus)

    def program(self, variant: str, params: Params) -> str:
        if variant == "linear":
            a, b, m = params["a"], params["b"], params["m"]
            return f"# try every residue\nprint(next(x for x in range(1, {m} + 1) if ({a} * x - {b}) % {m} == 0))\n"
        conds = " and ".join(f"n % {params[f'm{i}']} == {params[f'r{i}']}" for i in (1, 2, 3))
        return f"n = 1\nwhile not ({conds}):\n    n += 1\nprint(n)\n"


GENERATORS = [GcdLcm(), ModularPower(), Divisors(), Primes(), Congruence()]
