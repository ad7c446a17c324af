"""The generator interface and the helpers the problem families share.

A generator is one family of verifiable problems. It draws parameters from a
`numpy.random.Generator` at a difficulty (1 easy, 2 medium, 3 hard), renders them into a question
from a template, and computes the exact answer by construction (`fractions.Fraction`, integers,
never floats). Templates are single lines whose fields are plain text, so a question can be parsed
back into its parameters (`Generator.match`): the scripted oracle solves a question that way, with
the generator's own solver, and writes the generator's stdlib program for the tool role.

Parameters are always strings (exactly the text shown in the question), so `solve(variant, params)`
sees the same values whether they come from the sampler or from parsing the question.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np

Params = dict[str, str]
DIFFICULTIES = (1, 2, 3)


# ---------------------------------------------------------------------------------------------
# Formatting


def fmt(value: Fraction | int) -> str:
    """Canonical exact number: `7`, `-3/4` (the `str` of a `Fraction`)."""
    return str(Fraction(value))


def fmt_decimal(value: Fraction) -> str:
    """A terminating fraction as an exact decimal (`109.35`); otherwise `p/q`."""
    value = Fraction(value)
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    if den != 1:
        return fmt(value)
    places = max(twos, fives)
    if places == 0:
        return str(value.numerator)
    scaled = value * 10**places
    sign = "-" if scaled < 0 else ""
    digits = str(abs(scaled.numerator)).rjust(places + 1, "0")
    return f"{sign}{digits[:-places]}.{digits[-places:]}".rstrip("0").rstrip(".")


def fmt_set(values: Sequence[Fraction]) -> str:
    """Several answers: distinct values in increasing order, separated by commas."""
    return ", ".join(fmt(v) for v in sorted(set(Fraction(v) for v in values)))


def fmt_tuple(values: Sequence[Fraction]) -> str:
    return "(" + ", ".join(fmt(v) for v in values) + ")"


def signed_terms(terms: Sequence[tuple[int, str]]) -> str:
    """Render Σ c·m as `3x^2 - x + 5` (c an int, m a monomial text; '' for the constant)."""
    out: list[str] = []
    for coef, mono in terms:
        if coef == 0:
            continue
        mag = abs(coef)
        body = (str(mag) if mag != 1 or not mono else "") + mono
        if not out:
            out.append(("-" if coef < 0 else "") + body)
        else:
            out.append((" - " if coef < 0 else " + ") + body)
    return "".join(out) or "0"


def ordinal(n: int) -> str:
    if 10 <= n % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# ---------------------------------------------------------------------------------------------
# A small exact evaluator for the generated text (never `eval`)

_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|([a-z])|(\*\*|[-+*/^()×÷·−]))")


class ExpressionError(ValueError):
    pass


def evaluate(text: str, variables: dict[str, Fraction] | None = None) -> Fraction:
    """Evaluate `text` exactly: + − × ÷ * / ^ **, parentheses, unary minus, implicit products
    (`3x`, `2(x + 1)`, `x(x - 1)`), single-letter variables. Used on generated questions only."""
    variables = variables or {}
    tokens: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ExpressionError(f"cannot read {text[pos:pos + 10]!r}")
        tok = m.group(1) or m.group(2) or m.group(3)
        tokens.append({"×": "*", "·": "*", "÷": "/", "−": "-", "**": "^"}.get(tok, tok))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    parser = _Parser(tokens, variables)
    value = parser.expr()
    if parser.i != len(tokens):
        raise ExpressionError(f"unexpected {tokens[parser.i]!r}")
    return value


class _Parser:
    def __init__(self, tokens: list[str], variables: dict[str, Fraction]):
        self.t, self.i, self.v = tokens, 0, variables

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise ExpressionError("unexpected end")
        self.i += 1
        return tok

    def expr(self) -> Fraction:
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self) -> Fraction:
        value = self.unary()
        while True:
            tok = self.peek()
            if tok in ("*", "/"):
                self.take()
                rhs = self.unary()
                if tok == "/":
                    if rhs == 0:
                        raise ExpressionError("division by zero")
                    value = value / rhs
                else:
                    value = value * rhs
            elif tok is not None and (tok == "(" or tok.isalpha() or tok[0].isdigit()):
                value = value * self.power()  # implicit product
            else:
                return value

    def unary(self) -> Fraction:
        if self.peek() == "-":
            self.take()
            return -self.unary()
        if self.peek() == "+":
            self.take()
            return self.unary()
        return self.power()

    def power(self) -> Fraction:
        base = self.atom()
        if self.peek() == "^":
            self.take()
            exponent = self.unary()
            if exponent.denominator != 1 or abs(exponent) > 64:
                raise ExpressionError("exponent must be an integer of at most 64")
            if base == 0 and exponent < 0:
                raise ExpressionError("division by zero")
            return base ** int(exponent)
        return base

    def atom(self) -> Fraction:
        tok = self.take()
        if tok == "(":
            value = self.expr()
            if self.take() != ")":
                raise ExpressionError("missing )")
            return value
        if tok[0].isdigit():
            return Fraction(tok)
        if tok.isalpha():
            if tok not in self.v:
                raise ExpressionError(f"unknown variable {tok!r}")
            return self.v[tok]
        raise ExpressionError(f"unexpected {tok!r}")


def linear_coefficients(text: str, names: Sequence[str]) -> tuple[list[Fraction], Fraction]:
    """Coefficients and constant of a linear expression in `names`, by evaluating at 0 and e_i."""
    zero = {n: Fraction(0) for n in names}
    constant = evaluate(text, zero)
    coefs = [evaluate(text, {**zero, n: Fraction(1)}) - constant for n in names]
    return coefs, constant


def python_expression(text: str) -> str:
    """The generated math text as a Python expression over Fractions (for tool programs)."""
    out: list[str] = []
    prev = ""
    for m in _TOKEN.finditer(text):
        tok = m.group(1) or m.group(2) or m.group(3)
        tok = {"×": "*", "·": "*", "÷": "/", "−": "-", "^": "**"}.get(tok, tok)
        starts_operand = tok == "(" or tok[0].isalnum()
        ends_operand = prev == ")" or (prev[:1].isalnum())
        if starts_operand and ends_operand:
            out.append("*")
        if m.group(1):
            out.append(f"Fraction({tok!r})" if "." in tok else f"Fraction({tok})")
        else:
            out.append(tok)
        prev = tok if not m.group(1) else "0"
    return " ".join(out)


# ---------------------------------------------------------------------------------------------
# Generators


_ANY_TEXT = "[^\\n]+?"


@dataclass(frozen=True)
class Problem:
    generator: str
    topic: str
    variant: str
    params: tuple[tuple[str, str], ...]
    question: str
    answer: str
    difficulty: int


class Generator:
    """One problem family. Subclasses set `name`, `topic`, `templates` and implement the rest."""

    name: str = ""
    topic: str = ""
    templates: dict[str, str] = {}
    """variant -> single-line template with `{field}` placeholders (each field used once)."""
    fields: dict[str, str] = {}
    """Regex of a field when the default (any text on the line, shortest match) is ambiguous."""

    def sample(self, rng: np.random.Generator, difficulty: int) -> tuple[str, Params]:
        """Draw (variant, params) at `difficulty` (1..3)."""
        raise NotImplementedError

    def solve(self, variant: str, params: Params) -> str:
        """The canonical exact answer, computed from the parameters."""
        raise NotImplementedError

    def program(self, variant: str, params: Params) -> str:
        """A standard-library Python program that computes and prints the answer."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared machinery
    def make(self, rng: np.random.Generator, difficulty: int) -> Problem:
        variant, params = self.sample(rng, difficulty)
        question = self.templates[variant].format(**params)
        return Problem(self.name, self.topic, variant, tuple(sorted(params.items())), question,
                       self.solve(variant, params), difficulty)

    @cached_property
    def patterns(self) -> dict[str, re.Pattern[str]]:
        out = {}
        for variant, template in self.templates.items():
            parts = []
            for literal, field, _, _ in string.Formatter().parse(template):
                parts.append(re.escape(literal))
                if field is not None:
                    parts.append(f"(?P<{field}>{self.fields.get(field, _ANY_TEXT)})")
            out[variant] = re.compile("^" + "".join(parts) + "$", re.M)
        return out

    def match(self, text: str) -> tuple[str, Params] | None:
        """Find a question of this family in `text` (on a line of its own)."""
        for variant, pattern in self.patterns.items():
            m = pattern.search(text)
            if m:
                return variant, dict(m.groupdict())
        return None


def randint(rng: np.random.Generator, low: int, high: int) -> int:
    """Uniform integer in [low, high] (inclusive)."""
    return int(rng.integers(low, high + 1))


def nonzero(rng: np.random.Generator, low: int, high: int) -> int:
    while True:
        value = randint(rng, low, high)
        if value != 0:
            return value


SHOW_DECIMAL = """from decimal import Decimal, getcontext
from fractions import Fraction


def show(value):
    # exact decimal when the fraction terminates, else p/q
    value = Fraction(value)
    den = value.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    if den != 1:
        return str(value)
    getcontext().prec = 60
    text = format(Decimal(value.numerator) / Decimal(value.denominator), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
"""
"""Prelude of tool programs whose answers are printed as exact decimals (money, percentages)."""
