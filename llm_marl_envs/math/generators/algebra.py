"""Algebra: linear equations, quadratics with rational roots, linear systems, function values."""

from __future__ import annotations

from fractions import Fraction
from math import isqrt

import numpy as np

from .base import (Generator, Params, evaluate, fmt, fmt_set, fmt_tuple, linear_coefficients, nonzero,
                   python_expression, randint, signed_terms)


def solve_linear_system(matrix: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    """Gauss–Jordan elimination over Fractions; None if singular."""
    n = len(matrix)
    rows = [[Fraction(v) for v in row] + [Fraction(b)] for row, b in zip(matrix, rhs)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if rows[r][col] != 0), None)
        if pivot is None:
            return None
        rows[col], rows[pivot] = rows[pivot], rows[col]
        lead = rows[col][col]
        rows[col] = [v / lead for v in rows[col]]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col])]
    return [rows[r][n] for r in range(n)]


def _fraction_sqrt(value: Fraction) -> Fraction | None:
    if value < 0:
        return None
    num, den = isqrt(value.numerator), isqrt(value.denominator)
    if num * num != value.numerator or den * den != value.denominator:
        return None
    return Fraction(num, den)


def quadratic_coefficients(poly: str) -> tuple[Fraction, Fraction, Fraction]:
    """(a, b, c) of a polynomial of degree <= 2 in x, read by evaluating it at 0, 1 and -1."""
    c = evaluate(poly, {"x": Fraction(0)})
    plus = evaluate(poly, {"x": Fraction(1)})
    minus = evaluate(poly, {"x": Fraction(-1)})
    return (plus + minus) / 2 - c, (plus - minus) / 2, c


class LinearEquation(Generator):
    name = "linear_equation"
    topic = "algebra"
    templates = {"main": "Solve for x: {lhs} = {rhs}. Give an exact answer."}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        if difficulty == 1:
            a, x, b = nonzero(rng, -9, 9), randint(rng, -10, 10), nonzero(rng, -20, 20)
            while abs(a) == 1:
                a = nonzero(rng, -9, 9)
            return "main", {"lhs": signed_terms([(a, "x"), (b, "")]), "rhs": str(a * x + b)}
        if difficulty == 2:
            a, c = nonzero(rng, -9, 9), nonzero(rng, -9, 9)
            while c == a:
                c = nonzero(rng, -9, 9)
            x, b = randint(rng, -12, 12), randint(rng, -20, 20)
            d = a * x + b - c * x
            return "main", {"lhs": signed_terms([(a, "x"), (b, "")]), "rhs": signed_terms([(c, "x"), (d, "")])}
        a, b = randint(rng, 2, 9), nonzero(rng, -9, 9)
        c = nonzero(rng, -9, 9)
        while c == a:
            c = nonzero(rng, -9, 9)
        d = randint(rng, -30, 30)
        lhs = f"{a}(x {'+' if b > 0 else '-'} {abs(b)})"
        return "main", {"lhs": lhs, "rhs": signed_terms([(c, "x"), (d, "")])}

    def solve(self, variant: str, params: Params) -> str:
        (coef,), const = linear_coefficients(f"({params['lhs']}) - ({params['rhs']})", ["x"])
        return fmt(-const / coef)

    def program(self, variant: str, params: Params) -> str:
        return (
            "from fractions import Fraction\n\n\n"
            "def f(x):\n"
            f"    # {params['lhs']} = {params['rhs']}  rewritten as f(x) = lhs - rhs = 0\n"
            f"    return ({python_expression(params['lhs'])}) - ({python_expression(params['rhs'])})\n\n\n"
            "slope = f(Fraction(1)) - f(Fraction(0))\n"
            "print(-f(Fraction(0)) / slope)\n"
        )


class QuadraticEquation(Generator):
    name = "quadratic_equation"
    topic = "algebra"
    templates = {"main": "Find all real solutions x of the equation {poly} = 0. If there is more than one, list them separated by commas."}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        if difficulty == 1:
            p, q, r, s = 1, randint(rng, -9, 9), 1, randint(rng, -9, 9)
            k = 1
        elif difficulty == 2:
            p, q, r, s = 1, randint(rng, -9, 9), 1, randint(rng, -9, 9)
            k = nonzero(rng, -5, 5)
            while abs(k) == 1:
                k = nonzero(rng, -5, 5)
        else:
            p, r = randint(rng, 2, 5), randint(rng, 1, 5)
            q, s = nonzero(rng, -9, 9), nonzero(rng, -9, 9)
            k = 1
        # k (p x - q)(r x - s) = k (p r x^2 - (p s + q r) x + q s)
        a, b, c = k * p * r, -k * (p * s + q * r), k * q * s
        return "main", {"poly": signed_terms([(a, "x^2"), (b, "x"), (c, "")])}

    def solve(self, variant: str, params: Params) -> str:
        a, b, c = quadratic_coefficients(params["poly"])
        root = _fraction_sqrt(b * b - 4 * a * c)
        if root is None:
            raise ValueError(f"{params['poly']} has no rational roots")
        return fmt_set([(-b - root) / (2 * a), (-b + root) / (2 * a)])

    def program(self, variant: str, params: Params) -> str:
        a, b, c = quadratic_coefficients(params["poly"])
        return (
            "from fractions import Fraction\n"
            "from math import isqrt\n\n"
            f"# {params['poly']} = 0\n"
            f"a, b, c = {int(a)}, {int(b)}, {int(c)}\n"
            "disc = b * b - 4 * a * c\n"
            "root = isqrt(disc)\n"
            "assert root * root == disc, 'roots are not rational'\n"
            "roots = sorted({Fraction(-b - root, 2 * a), Fraction(-b + root, 2 * a)})\n"
            "print(', '.join(str(x) for x in roots))\n"
        )


class LinearSystem(Generator):
    name = "linear_system"
    topic = "algebra"
    templates = {
        "two": "Solve the system of equations {e1} and {e2}. Give the answer as an ordered pair (x, y).",
        "three": "Solve the system of equations {e1}, {e2} and {e3}. Give the answer as an ordered triple (x, y, z).",
    }
    fields = {"e1": "[^,\\n]+?", "e2": "[^,\\n]+?", "e3": "[^,\\n]+?"}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        names = ["x", "y"] if difficulty < 3 else ["x", "y", "z"]
        coef, sol = {1: (5, 5), 2: (9, 10), 3: (5, 6)}[difficulty]
        n = len(names)
        while True:
            matrix = [[randint(rng, -coef, coef) for _ in names] for _ in names]
            if any(all(v == 0 for v in row) for row in matrix):
                continue
            if solve_linear_system([[Fraction(v) for v in row] for row in matrix], [Fraction(0)] * n) is None:
                continue
            x = [randint(rng, -sol, sol) for _ in names]
            eqs = [
                signed_terms([(row[j], names[j]) for j in range(n)]) + f" = {sum(row[j] * x[j] for j in range(n))}"
                for row in matrix
            ]
            params = {f"e{i + 1}": eq for i, eq in enumerate(eqs)}
            return ("two" if n == 2 else "three"), params

    @staticmethod
    def _system(variant: str, params: Params) -> tuple[list[str], list[list[Fraction]], list[Fraction]]:
        names = ["x", "y"] if variant == "two" else ["x", "y", "z"]
        matrix, rhs = [], []
        for i in range(len(names)):
            lhs, right = params[f"e{i + 1}"].split("=")
            coefs, const = linear_coefficients(f"({lhs}) - ({right})", names)
            matrix.append(coefs)
            rhs.append(-const)
        return names, matrix, rhs

    def solve(self, variant: str, params: Params) -> str:
        _, matrix, rhs = self._system(variant, params)
        solution = solve_linear_system(matrix, rhs)
        if solution is None:
            raise ValueError("singular system")
        return fmt_tuple(solution)

    def program(self, variant: str, params: Params) -> str:
        names, matrix, rhs = self._system(variant, params)
        equations = "\n".join(f"# {params[f'e{i + 1}']}" for i in range(len(names)))
        rows = ",\n    ".join("[" + ", ".join(str(int(v)) for v in row) + f", {int(b)}]" for row, b in zip(matrix, rhs))
        return (
            "from fractions import Fraction\n\n"
            f"{equations}\n"
            f"rows = [\n    {rows},\n]\n"
            "rows = [[Fraction(v) for v in row] for row in rows]\n"
            "n = len(rows)\n"
            "for col in range(n):\n"
            "    pivot = next(r for r in range(col, n) if rows[r][col] != 0)\n"
            "    rows[col], rows[pivot] = rows[pivot], rows[col]\n"
            "    lead = rows[col][col]\n"
            "    rows[col] = [v / lead for v in rows[col]]\n"
            "    for r in range(n):\n"
            "        if r != col:\n"
            "            factor = rows[r][col]\n"
            "            rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col])]\n"
            "print('(' + ', '.join(str(row[n]) for row in rows) + ')')\n"
        )


def _polynomial(rng: np.random.Generator, degree: int, bound: int) -> str:
    coefs = [nonzero(rng, -bound, bound)] + [randint(rng, -bound, bound) for _ in range(degree)]
    monos = ["x^3", "x^2", "x", ""][3 - degree:]
    return signed_terms(list(zip(coefs, monos)))


class FunctionValue(Generator):
    name = "function_value"
    topic = "algebra"
    templates = {
        "single": "Let f(x) = {f}. What is f({a})?",
        "composite": "Let f(x) = {f} and g(x) = {g}. What is f(g({a}))?",
    }
    fields = {"a": "-?\\d+"}

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        if difficulty == 1:
            return "single", {"f": _polynomial(rng, randint(rng, 1, 2), 6), "a": str(randint(rng, -5, 5))}
        if difficulty == 2:
            return "single", {"f": _polynomial(rng, 3, 4), "a": str(randint(rng, -4, 4))}
        return "composite", {"f": _polynomial(rng, 2, 5), "g": _polynomial(rng, 1, 5), "a": str(randint(rng, -5, 5))}

    def solve(self, variant: str, params: Params) -> str:
        x = Fraction(int(params["a"]))
        if variant == "composite":
            x = evaluate(params["g"], {"x": x})
        return fmt(evaluate(params["f"], {"x": x}))

    def program(self, variant: str, params: Params) -> str:
        lines = ["from fractions import Fraction", "", "", "def f(x):", f"    return {python_expression(params['f'])}", ""]
        call = f"f(Fraction({int(params['a'])}))"
        if variant == "composite":
            lines += ["", "def g(x):", f"    return {python_expression(params['g'])}", ""]
            call = f"f(g(Fraction({int(params['a'])})))"
        lines += ["", f"print({call})", ""]
        return "\n".join(lines)


GENERATORS = [LinearEquation(), QuadraticEquation(), LinearSystem(), FunctionValue()]
