"""Arithmetic: order of operations on integers, fraction arithmetic, percentages."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .base import (SHOW_DECIMAL, ExpressionError, Generator, Params, evaluate, fmt, fmt_decimal,
                   python_expression, randint)

_PREC = {"+": 1, "-": 1, "×": 2, "÷": 2, "^": 3}


@dataclass
class _Node:
    op: str | None = None
    left: _Node | None = None
    right: _Node | None = None
    leaf: Fraction | None = None


def _tree(rng: np.random.Generator, n_ops: int, ops: str, leaf) -> _Node:
    if n_ops == 0:
        return _Node(leaf=leaf(rng))
    op = ops[int(rng.integers(len(ops)))]
    while op == "^" and n_ops > 1:  # a power spends one operation: only where both sides are leaves
        op = ops[int(rng.integers(len(ops)))]
    if op == "^":  # small base, exponent 2 or 3
        return _Node("^", _Node(leaf=Fraction(randint(rng, 2, 6))), _Node(leaf=Fraction(randint(rng, 2, 3))))
    left_ops = int(rng.integers(n_ops))
    return _Node(op, _tree(rng, left_ops, ops, leaf), _tree(rng, n_ops - 1 - left_ops, ops, leaf))


def _render(node: _Node, parent: str | None = None, side: str = "l") -> str:
    if node.op is None:
        value = node.leaf
        text = str(value)
        if value.denominator != 1 and parent in ("×", "÷", "^"):
            text = f"({text})"
        return text
    text = f"{_render(node.left, node.op, 'l')} {node.op} {_render(node.right, node.op, 'r')}"
    if node.op == "^":
        text = text.replace(" ^ ", "^")
    if parent is not None:
        pp, p = _PREC[parent], _PREC[node.op]
        if p < pp or (p == pp and side == "r" and parent in ("-", "÷")) or (parent == "^"):
            text = f"({text})"
    return text


class _ExpressionGenerator(Generator):
    def _expression(self, rng: np.random.Generator, difficulty: int) -> str:
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        while True:
            expr = self._expression(rng, difficulty)
            try:
                evaluate(expr)
            except ExpressionError:  # division by zero somewhere: draw again
                continue
            return "main", {"expr": expr}

    def solve(self, variant: str, params: Params) -> str:
        return fmt(evaluate(params["expr"]))

    def program(self, variant: str, params: Params) -> str:
        return (
            "from fractions import Fraction\n\n"
            f"# {params['expr']}\n"
            f"value = {python_expression(params['expr'])}\n"
            "print(value)\n"
        )


class IntegerExpression(_ExpressionGenerator):
    name = "integer_expression"
    topic = "arithmetic"
    templates = {"main": "Compute the value of the expression {expr}. Give an exact answer (a fraction in lowest terms if it is not an integer)."}

    def _expression(self, rng: np.random.Generator, difficulty: int) -> str:
        n_ops, ops, top = {1: (2, "+-×", 12), 2: (3, "+-×÷", 20), 3: (4, "+-×÷^", 30)}[difficulty]
        return _render(_tree(rng, n_ops, ops, lambda r: Fraction(randint(r, 1, top))))


class FractionArithmetic(_ExpressionGenerator):
    name = "fraction_arithmetic"
    topic = "arithmetic"
    templates = {"main": "Compute {expr} and write the result as a fraction in lowest terms."}

    def _expression(self, rng: np.random.Generator, difficulty: int) -> str:
        n_ops, ops, den = {1: (1, "+-", 9), 2: (2, "+-×", 12), 3: (3, "+-×÷", 15)}[difficulty]

        def leaf(r: np.random.Generator) -> Fraction:
            while True:
                d = randint(r, 2, den)
                n = randint(r, 1, 2 * d if difficulty == 3 else d - 1)
                if Fraction(n, d).denominator == d:
                    return Fraction(n, d)

        return _render(_tree(rng, n_ops, ops, leaf))


class Percent(Generator):
    name = "percent"
    topic = "arithmetic"
    templates = {
        "of": "What is {p}% of {n}?",
        "change": "A price of {n} dollars is increased by {a}% and then decreased by {b}%. What is the new price in dollars?",
        "reverse": "After a {a}% discount, a jacket costs {q} dollars. What was the price in dollars before the discount?",
    }

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        if difficulty == 1:
            return "of", {"p": str(randint(rng, 1, 20) * 5), "n": str(randint(rng, 2, 60) * 10)}
        if difficulty == 2:
            return "change", {"n": str(randint(rng, 20, 400)), "a": str(randint(rng, 1, 12) * 5), "b": str(randint(rng, 1, 12) * 5)}
        a = randint(rng, 1, 18) * 5
        price = randint(rng, 20, 400)
        return "reverse", {"a": str(a), "q": fmt_decimal(Fraction(price) * (100 - a) / 100)}

    def solve(self, variant: str, params: Params) -> str:
        f = {k: Fraction(v) for k, v in params.items()}
        if variant == "of":
            value = f["p"] * f["n"] / 100
        elif variant == "change":
            value = f["n"] * (100 + f["a"]) / 100 * (100 - f["b"]) / 100
        else:
            value = f["q"] / ((100 - f["a"]) / 100)
        return fmt_decimal(value)

    def program(self, variant: str, params: Params) -> str:
        values = "\n".join(f"{k} = Fraction({v!r})" for k, v in sorted(params.items()))
        formula = {
            "of": "p * n / 100",
            "change": "n * (100 + a) / 100 * (100 - b) / 100",
            "reverse": "q / ((100 - a) / Fraction(100))",
        }[variant]
        return f"{SHOW_DECIMAL}\n{values}\nprint(show({formula}))\n"


GENERATORS = [IntegerExpression(), FractionArithmetic(), Percent()]
