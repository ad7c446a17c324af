"""Answer extraction and the math checker (AT-GRPO appendix A.1.1).

The paper uses Hugging Face's Math-Verify "as a parsing/normalization front-end and then applies a
numeric comparator" NumEq_δ(a, b) = 1{|a − b| ≤ δ or |a − b| / max(1, |b|) ≤ δ}, δ = 1e-6.
`answers_match(pred, gold)` implements that in three stages, cheapest first:

1. exact text: the two answers are the same string after light normalisation;
2. a fast exact path for plain numbers, fractions, ordered tuples `(a, b)` and unordered lists or
   sets `a, b` / `{a, b}` (what generated problems and tool programs print): values are parsed into
   `fractions.Fraction` (decimals, also in Python's scientific notation, exactly), so no sympy is involved; when both sides parse here,
   this stage decides;
3. Math-Verify (`parse` + `verify`) on anything else (radicals, π, intervals, expressions,
   equations), then NumEq on the numeric values of the parsed expressions (a percentage `12.5\\%`
   both as 0.125 and as 12.5, the two readings Math-Verify's own check accepts).

Deviation (documented): NumEq is applied only when at least one side is inexact (contains a
decimal). Two exact values must be equal: the relative branch of NumEq would otherwise accept
1234567 for 1234568 (relative error 8e-7 < 1e-6). Consequences: 0.333 vs 1/3 fails, 0.3333333 vs
1/3 passes, 1/2 vs 0.5 passes.

Robustness: model output is untrusted. Nothing here raises on any input string: a failed or
timed-out check is "not equal". Math-Verify's own timeout uses `signal.alarm` and raises in
non-main threads, so its timeouts are disabled and this module runs the slow stage under its own
`setitimer` deadline instead (main thread only; it restores any outer timer, e.g. pytest-timeout's):
an answer that sympy cannot settle within it costs one deadline, `SLOW_CHECK_TIMEOUT_S`, and is "not equal".
Inputs known to make sympy compute for minutes (huge exponents, towers of powers, big factorials of
literals, very long answers) are refused before sympy sees them, in every thread. That list is not
exhaustive (`(10^{10})!`, `\\Gamma(10^{100})`, `\\binom{10^{10}}{10^{5}}`, `\\exp(\\exp(\\exp(9)))`,
`\\tan(\\tan(\\tan(\\tan(\\tan(1)))))` pass it and run past 10 s), so in other threads, where the
slow stage has no deadline, a check is not bounded: step the math environment in the main thread.
Results are memoised (LRU) per (pred, gold, δ).
"""

from __future__ import annotations

import functools
import logging
import re
import signal
import threading
import time
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, Iterator

DELTA = 1e-6
"""δ of NumEq (A.1.1 default)."""
SLOW_CHECK_TIMEOUT_S = 2.0
"""Deadline of one Math-Verify parse + verify (seconds, main thread only)."""
MAX_ANSWER_CHARS = 400
"""Longer answers are compared as text only (an answer is a value, not an essay)."""
MAX_DIGITS = 400
"""Numbers with more digits are refused (int parsing and sympy arithmetic get slow)."""

# ---------------------------------------------------------------------------------------------
# Extraction

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_FINAL_MARK = "####"
_FRACTION_REPR = re.compile(r"Fraction\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)")


_BOX_START = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])[ \t]*")
_BOX_TOKEN = re.compile(r"[^\s$]+")


def _closing_braces(text: str) -> dict[int, int]:
    """Position of each unescaped `{` -> its matching `}` (one linear pass; unmatched ones absent)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for i, ch in enumerate(text):
        if ch in "{}" and i > 0 and text[i - 1] == "\\":
            continue
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            pairs[stack.pop()] = i
    return pairs


def _boxed_spans(text: str) -> list[str]:
    """Contents of every `\\boxed{...}` / `\\fbox{...}` (nested braces matched) or `\\boxed x`,
    outermost boxes only, in order. Linear in the length of `text` (replies can be 64 KiB)."""
    if "\\boxed" not in text and "\\fbox" not in text:
        return []
    pairs = _closing_braces(text)
    found: list[str] = []
    covered = -1  # boxes inside an already found box are part of its content
    for m in _BOX_START.finditer(text):
        j = m.end()
        if m.start() <= covered or j >= len(text):
            continue
        if text[j] == "{":
            close = pairs.get(j)
            if close is None:  # unbalanced: no box here
                continue
            found.append(text[j + 1:close])
            covered = close
        elif j > m.start() + len(m.group(0).rstrip(" \t")):
            token = _BOX_TOKEN.match(text, j)  # `\boxed 5`: one token (no slice: linear in the reply)
            if token:
                found.append(token.group(0))
    return found


def extract_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` in `text` (nested braces kept), or None.

    >>> extract_boxed(r"so \\boxed{\\frac{1}{2}}.")
    '\\\\frac{1}{2}'
    """
    if not isinstance(text, str):
        return None
    spans = _boxed_spans(text)
    if not spans:
        return None
    inner = spans[-1].strip()
    # \boxed{\boxed{3}} -> 3 (only when the inner text is one whole box)
    for _ in range(4):
        whole = re.fullmatch(r"\\(?:boxed|fbox)\s*\{(.*)\}", inner, re.S)
        if whole is None or _boxed_spans(inner) != [whole.group(1)]:
            break
        inner = whole.group(1).strip()
    return inner


def extract_after_marker(text: str) -> str | None:
    """The first line after the last `####` (GSM8K and the paper's final-answer format)."""
    if not isinstance(text, str):
        return None
    idx = text.rfind(_FINAL_MARK)
    if idx < 0:
        return None
    rest = text[idx + len(_FINAL_MARK):].strip()
    line = rest.splitlines()[0].strip() if rest else ""
    return line or None


def extract_answer(text: str) -> tuple[str | None, str | None]:
    """The reasoner's final answer: the last `\\boxed{}`; else the line after the last `####`.

    Returns (answer, None) or (None, error). An empty box is an error.
    """
    if not isinstance(text, str):
        return None, "reply is not text"
    boxed = extract_boxed(text)
    if boxed is not None:
        answer = clean_answer(boxed)
        return (answer, None) if answer else (None, "empty \\boxed{} answer")
    after = extract_after_marker(text)
    if after is not None:
        answer = clean_answer(after)
        return (answer, None) if answer else (None, "empty final answer after ####")
    return None, "no final answer: expected \\boxed{...} or a final line '#### <answer>'"


def extract_printed_answer(stdout: str) -> str | None:
    """The tool program's answer: the last non-empty printed line (a `\\boxed{}` in it is unwrapped,
    `Fraction(1, 3)` reprs become `1/3`)."""
    if not isinstance(stdout, str):
        return None
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None
    line = lines[-1]
    boxed = extract_boxed(line)
    if boxed is not None:
        line = boxed
    answer = clean_answer(_FRACTION_REPR.sub(lambda m: f"{m.group(1)}/{m.group(2)}", line))
    return answer or None


def extract_gsm8k_answer(solution: str) -> str | None:
    """GSM8K's reference answer: the number after `####` (thousands separators removed)."""
    after = extract_after_marker(solution)
    if after is None:
        return None
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", after).strip() or None


_WRAPPERS = [("**", "**"), ("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")]


def clean_answer(answer: str) -> str:
    """Strip math delimiters, markdown bold (`#### **18**`, as chat models write a final line),
    `\\displaystyle`, a trailing period and surrounding whitespace."""
    s = answer.replace("\\displaystyle", "").replace("\u2212", "-").strip()
    for _ in range(4):
        before = s
        if s.endswith("."):
            s = s[:-1].rstrip()
        for left, right in _WRAPPERS:
            if len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right):
                s = s[len(left):len(s) - len(right)].strip()
        if s == before:
            break
    return s


# ---------------------------------------------------------------------------------------------
# NumEq and the fast exact path


def num_eq(a: float | Fraction | int, b: float | Fraction | int, delta: float = DELTA) -> bool:
    """NumEq_δ(a, b) = 1{|a − b| ≤ δ or |a − b| / max(1, |b|) ≤ δ} (AT-GRPO A.1.1), b the reference."""
    try:
        fa = Fraction(a) if not isinstance(a, Fraction) else a
        fb = Fraction(b) if not isinstance(b, Fraction) else b
    except (TypeError, ValueError, OverflowError):
        return False
    d = Fraction(delta)
    diff = abs(fa - fb)
    return diff <= d or diff <= d * max(Fraction(1), abs(fb))


class _Num:
    """A parsed number: its exact value and whether the text was exact (no decimal point)."""

    __slots__ = ("value", "exact")

    def __init__(self, value: Fraction, exact: bool):
        self.value = value
        self.exact = exact


_INT = r"[+-]?\d+"
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?$")  # 1,234 and 1,234.50: one number, not a list
_DECIMAL = re.compile(r"^[+-]?(?:\d+\.\d*|\.\d+)$")
# How Python prints a float below 1e-4 or from 1e16 on (a tool's `print(x)`); the exponent's few digits keep the value small.
_SCIENTIFIC = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)[eE][+-]?\d{1,3}$")
_PLAIN_FRACTION = re.compile(rf"^({_INT})\s*/\s*({_INT})$")
_LATEX_FRACTION = re.compile(r"^([+-]?)\\[dt]?frac\s*\{\s*([+-]?\d+)\s*\}\s*\{\s*([+-]?\d+)\s*\}$")
_LATEX_FRACTION_SHORT = re.compile(r"^([+-]?)\\[dt]?frac\s*(\d)\s*(\d)$")
_VAR_PREFIX = re.compile(r"^[A-Za-z]\s*=\s*(?!=)")
_SPACING = re.compile(r"\\[,;:! ]|\\left|\\right|~")


def _digits_ok(s: str) -> bool:
    return len(re.sub(r"\D", "", s)) <= MAX_DIGITS


def _parse_number(s: str) -> _Num | None:
    s = s.strip().replace("−", "-")
    if not s or not _digits_ok(s):
        return None
    try:
        if re.fullmatch(_INT, s):
            return _Num(Fraction(int(s)), True)
        if _THOUSANDS.match(s):
            s = s.replace(",", "")
            if "." not in s:
                return _Num(Fraction(int(s)), True)
        if _DECIMAL.match(s) or _SCIENTIFIC.match(s):
            return _Num(Fraction(Decimal(s)), False)
        m = _PLAIN_FRACTION.match(s)
        if m:
            den = int(m.group(2))
            return _Num(Fraction(int(m.group(1)), den), True) if den else None
        m = _LATEX_FRACTION.match(s) or _LATEX_FRACTION_SHORT.match(s)
        if m:
            sign = -1 if m.group(1) == "-" else 1
            den = int(m.group(3))
            return _Num(sign * Fraction(int(m.group(2)), den), True) if den else None
    except (ValueError, ZeroDivisionError, InvalidOperation, OverflowError):
        return None
    return None


def _split_items(body: str) -> list[str] | None:
    """Split a comma-separated body at top level (not inside braces/parentheses)."""
    items, depth, current = [], 0, []
    for ch in body:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
            if depth < 0:
                return None
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    items.append("".join(current))
    items = [item.strip() for item in items]
    return items if all(items) else None


_ASSIGNMENT = re.compile(r"^([A-Za-z])\s*=\s*(.+)$")


def _parse_assignments(s: str) -> tuple[str, Any] | None:
    """`x = 1, y = 2` -> the tuple (1, 2) ordered by variable name; `x = 1, x = 2` -> the set {1, 2}."""
    items = _split_items(s) if "," in s else None
    if not items or len(items) < 2:
        return None
    pairs = [_ASSIGNMENT.match(item) for item in items]
    if not all(pairs):
        return None
    names = [m.group(1) for m in pairs]
    values = [_parse_number(m.group(2)) for m in pairs]
    if any(v is None for v in values):
        return None
    if len(set(names)) == 1:
        return "set", values
    if len(set(names)) != len(names):
        return None
    return "tuple", [v for _, v in sorted(zip(names, values), key=lambda nv: nv[0])]


def _parse_fast(s: str) -> tuple[str, Any] | None:
    """('num', _Num) | ('tuple', [_Num]) | ('set', [_Num]) for plain numeric answers, else None."""
    s = _SPACING.sub("", s).strip()
    if not s or len(s) > MAX_ANSWER_CHARS:
        return None
    assigned = _parse_assignments(s)
    if assigned is not None:
        return assigned
    s = _VAR_PREFIX.sub("", s, count=1).strip()
    num = _parse_number(s)
    if num is not None:
        return "num", num
    kind, body = None, None
    if s.startswith("(") and s.endswith(")"):
        kind, body = "tuple", s[1:-1]
    elif s.startswith("\\{") and s.endswith("\\}"):
        kind, body = "set", s[2:-2]
    elif s.startswith("{") and s.endswith("}"):
        kind, body = "set", s[1:-1]
    elif "," in s and not _THOUSANDS.match(s):
        kind, body = "set", s
    if kind is None:
        return None
    items = _split_items(body)
    if not items or (kind == "tuple" and len(items) < 2):
        return None
    nums = [_parse_number(item) for item in items]
    if any(n is None for n in nums):
        return None
    return kind, nums


def _nums_equal(pred: _Num, gold: _Num, delta: float) -> bool:
    if pred.exact and gold.exact:
        return pred.value == gold.value
    return num_eq(pred.value, gold.value, delta)


def _fast_equal(pred: tuple[str, Any], gold: tuple[str, Any], delta: float) -> bool:
    (pk, pv), (gk, gv) = pred, gold
    if pk == "num" and gk == "num":
        return _nums_equal(pv, gv, delta)
    # A single value and a one-element list (a double root) are the same answer.
    if pk == "num" and gk == "set":
        pk, pv = "set", [pv]
    if gk == "num" and pk == "set":
        gk, gv = "set", [gv]
    if pk != gk:
        return False
    if pk == "tuple":
        return len(pv) == len(gv) and all(_nums_equal(p, g, delta) for p, g in zip(pv, gv))
    # Sets: duplicates collapse; every element must be matched by one on the other side.
    pv, gv = _dedup(pv, delta), _dedup(gv, delta)
    if len(pv) != len(gv):
        return False
    unmatched = list(gv)
    for p in pv:
        hit = next((i for i, g in enumerate(unmatched) if _nums_equal(p, g, delta)), None)
        if hit is None:
            return False
        unmatched.pop(hit)
    return True


def _dedup(values: list[_Num], delta: float) -> list[_Num]:
    out: list[_Num] = []
    for v in values:
        if not any(_nums_equal(v, o, delta) for o in out):
            out.append(v)
    return out


# ---------------------------------------------------------------------------------------------
# Math-Verify stage


class _Deadline(BaseException):
    """Raised by the SIGALRM handler; a BaseException so sympy's `except Exception` cannot eat it."""


@contextmanager
def _deadline(seconds: float | None) -> Iterator[None]:
    usable = (
        seconds is not None and seconds > 0 and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return
    outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)
    if outer_delay and outer_delay <= seconds:
        yield  # an outer timer fires first; leave it in charge
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Deadline()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay:
            left = max(outer_delay - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)


# Inputs sympy may take minutes on (C-level big-integer work cannot be interrupted by a signal).
_COSTLY = [
    re.compile(r"(\^|\*\*)\s*\{?\s*\(?\s*[+-]?\d{4,}"),  # exponent with 4+ digits
    re.compile(r"(\^|\*\*)\s*\{[^{}]*(\^|\*\*)"),  # tower a^{b^c}
    re.compile(r"(\^|\*\*)\s*\(?[\w.]+\)?\s*(\^|\*\*)"),  # tower a^b^c
    re.compile(r"\d{4,}\s*!"),  # big factorial
    re.compile(r"!\s*!"),
]


def _too_costly(s: str) -> bool:
    return len(s) > MAX_ANSWER_CHARS or not _digits_ok(s) or any(p.search(s) for p in _COSTLY)


class _DropTimeoutWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


@functools.lru_cache(maxsize=1)
def _math_verify() -> Any:
    import math_verify  # noqa: PLC0415 (heavy: sympy; imported on first slow check only)

    for name in ("math_verify.parser", "math_verify.grader"):
        logging.getLogger(name).addFilter(_DropTimeoutWarning())
    return math_verify


_PY_SQRT = re.compile(r"(?<![\\A-Za-z])sqrt\s*\(")


def latexify(answer: str) -> str:
    """Python-style `sqrt(2)`, `**` and `pi` as LaTeX (Math-Verify mangles several `sqrt(` in one answer)."""
    out, i = [], 0
    for m in _PY_SQRT.finditer(answer):
        if m.start() < i:
            continue
        depth, j = 1, m.end()
        while j < len(answer) and depth:
            depth += {"(": 1, ")": -1}.get(answer[j], 0)
            j += 1
        if depth:
            break
        out.append(answer[i:m.start()] + "\\sqrt{" + latexify(answer[m.end():j - 1]) + "}")
        i = j
    out.append(answer[i:])
    text = "".join(out).replace("**", "^")
    return re.sub(r"(?<![\\A-Za-z])pi(?![A-Za-z])", r"\\pi", text)


@functools.lru_cache(maxsize=4096)
def _mv_parse(answer: str) -> list[Any]:
    """Math-Verify's parse of one answer (cached: a reference answer is parsed once per process;
    sympy objects are immutable; an interrupted parse raises and is not cached)."""
    mv = _math_verify()
    config = [mv.LatexExtractionConfig(boxed_match_priority=0)]
    return mv.parse("\\boxed{" + latexify(answer) + "}", extraction_config=config, parsing_timeout=None)


def _sympy_value(expr: Any) -> tuple[Fraction, bool] | None:
    """(value, exact) of a parsed expression that is a finite real number, else None."""
    import sympy  # noqa: PLC0415

    if not isinstance(expr, sympy.Basic) or not getattr(expr, "is_number", False):
        return None
    if expr.has(sympy.zoo, sympy.oo, sympy.nan, -sympy.oo):
        return None
    value = sympy.N(expr, 30)
    if not value.is_real:
        if abs(sympy.im(value)) > 1e-25:
            return None
        value = sympy.re(value)
    try:
        exact = not expr.has(sympy.Float)
        return Fraction(str(sympy.Float(value, 30))), exact
    except (TypeError, ValueError):
        return None


def _readings(expr: Any) -> list[Any]:
    """The values a parsed answer stands for. Math-Verify parses `25\\%` as 25·UnevaluatedExpr(1/100), which
    sympy.N leaves unevaluated, and its verify accepts both 1/4 and 25 for it: NumEq takes both too."""
    import sympy  # noqa: PLC0415

    if not isinstance(expr, sympy.Basic) or not expr.has(sympy.UnevaluatedExpr):
        return [expr]
    return [expr.doit(), expr.replace(lambda e: isinstance(e, sympy.UnevaluatedExpr), lambda e: sympy.Integer(1))]


def _slow_equal(pred: str, gold: str, delta: float) -> bool:
    gold_parsed = _mv_parse(gold)
    pred_parsed = _mv_parse(pred)
    if not gold_parsed or not pred_parsed:
        return False
    mv = _math_verify()
    if mv.verify(gold_parsed, pred_parsed, timeout_seconds=None):
        return True
    # NumEq on the numeric values (A.1.1: Math-Verify front-end, numeric comparator after it). Two exact
    # values are not compared: Math-Verify's symbolic check already said "different".
    preds = [v for v in map(_sympy_value, _readings(pred_parsed[0])) if v is not None]
    golds = [v for v in map(_sympy_value, _readings(gold_parsed[0])) if v is not None]
    return any(not (p_exact and g_exact) and num_eq(p, g, delta) for p, p_exact in preds for g, g_exact in golds)


# ---------------------------------------------------------------------------------------------
# The checker


def normalize_text(answer: str) -> str:
    """Whitespace-free text form used for the exact-text stage."""
    return re.sub(r"\s+", "", clean_answer(answer)).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")


def answers_match(pred: str | None, gold: str | None, *, delta: float = DELTA,
                  timeout_s: float | None = SLOW_CHECK_TIMEOUT_S) -> bool:
    """CheckFinal_{MathVerifier + NumEq}: is `pred` equivalent to the reference `gold`?

    Never raises; anything that cannot be checked is "not equal". See the module docstring.
    """
    if not isinstance(pred, str) or not isinstance(gold, str):
        return False
    try:
        if len(pred) + len(gold) <= 4 * MAX_ANSWER_CHARS:
            return _answers_match_cached(pred, gold, float(delta), timeout_s)
        return _answers_match(pred, gold, float(delta), timeout_s)
    except BaseException as exc:  # noqa: BLE001 (a checker must never take an episode down)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return False


def _answers_match(pred: str, gold: str, delta: float, timeout_s: float | None) -> bool:
    p, g = normalize_text(pred), normalize_text(gold)
    if not p or not g:
        return False
    if p == g:
        return True
    fast_p, fast_g = _parse_fast(clean_answer(pred)), _parse_fast(clean_answer(gold))
    if fast_p is not None and fast_g is not None:
        return _fast_equal(fast_p, fast_g, delta)
    cp, cg = clean_answer(pred), clean_answer(gold)
    if _too_costly(cp) or _too_costly(cg):
        return False
    try:
        with _deadline(timeout_s):
            return _slow_equal(cp, cg, delta)
    except _Deadline:
        return False
    except RecursionError:
        return False
    except Exception:  # noqa: BLE001 (sympy/latex2sympy raise many types on odd input)
        return False


_answers_match_cached = functools.lru_cache(maxsize=16_384)(_answers_match)


__all__ = [
    "DELTA", "answers_match", "clean_answer", "extract_after_marker", "extract_answer", "extract_boxed",
    "extract_gsm8k_answer", "extract_printed_answer", "latexify", "normalize_text", "num_eq",
]
