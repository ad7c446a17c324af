"""The math checker (Math-Verify + NumEq, AT-GRPO A.1.1) and answer extraction."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_marl_envs.math import verify
from llm_marl_envs.math.verify import (answers_match, extract_answer, extract_boxed, extract_gsm8k_answer,
                                       extract_printed_answer, num_eq)

# (prediction, reference, equal?)
EQUIVALENT = [
    ("0.5", "1/2"),
    ("1/2", "0.5"),
    ("\\frac{2}{4}", "0.5"),
    ("\\dfrac{1}{2}", "\\frac12"),
    ("-\\frac{3}{4}", "-0.75"),
    ("\\frac{-3}{4}", "-3/4"),
    ("sqrt(18)", "3\\sqrt{2}"),
    ("3\\sqrt{2}", "\\sqrt{18}"),
    ("4.2426406871", "3\\sqrt{2}"),  # NumEq: |a - b| <= 1e-6
    ("\\{2, 1\\}", "\\{1, 2\\}"),
    ("2, 3", "3, 2"),  # several answers: order does not matter
    ("3", "3, 3"),  # a double root written once
    ("(1, 2)", "(1, 2)"),
    ("(-3, 2, 1/2)", "(-3, 2, 0.5)"),
    ("x = -3, y = -2", "(-3, -2)"),
    ("[1, 3)", "[1,3)"),  # intervals
    ("(-\\infty, 2]", "(-\\infty,2]"),
    ("x = 3", "3"),
    ("1,000", "1000"),
    ("0.3333333", "1/3"),
    ("1234567.4", "1234567"),  # NumEq's relative branch, one side inexact
    ("x + 1", "1 + x"),
    ("\\pi", "3.14159265358979"),
    ("$\\frac{5}{6}$", "5/6"),
    ("\\left( 1, 2 \\right)", "(1,2)"),
    ("12.5", "12.5\\%"),  # a percentage: its number or its value, decimals too (NumEq failed on Math-Verify's 1/100)
    ("25.0", "25\\%"),
    ("0.125", "12.5\\%"),
    ("25.0\\%", "25"),
    ("1,234.5", "1234.5"),  # thousands separators in a decimal: one number (v1 read the set {1, 234.5})
    ("12,345.67", "12345.67"),
    ("1e-05", "0.00001"),  # Python's print of a float below 1e-4 or from 1e16 on (v1: never a number)
    ("1.0000000000000002e+20", "100000000000000000000"),
    ("2.5E3", "2500"),
]
DIFFERENT = [
    ("0.333", "1/3"),  # |0.333 - 1/3| = 3.3e-4 > 1e-6
    ("2", "3"),
    ("x", "x + 1"),
    ("(2, 1)", "(1, 2)"),  # tuples are ordered
    ("(1, 3)", "[1, 3)"),
    ("[1, 2]", "(1, 2)"),
    ("1234568", "1234567"),  # both exact: must be equal (deviation from NumEq's relative branch)
    ("4.2426", "3\\sqrt{2}"),
    ("2, 3", "(2, 3)"),  # a list of answers is not an ordered pair
    ("1e-05", "0.00002"),
    ("1, 2", "1, 2, 3"),
    ("", "1"),
    ("1/0", "0"),
    ("9^{9^{9}}", "1"),  # refused before sympy sees it
    ("10^{100000}", "1"),
    ("99999!", "1"),
    ("24.0", "25\\%"),
    ("2.5", "25\\%"),
    ("1,234.5", "1234"),
    ("1,23.5", "123.5"),
]


@pytest.mark.parametrize("pred,gold", EQUIVALENT)
def test_equivalent_answers_pass(pred, gold):
    assert answers_match(pred, gold)


@pytest.mark.parametrize("pred,gold", DIFFERENT)
def test_wrong_answers_do_not_pass(pred, gold):
    assert not answers_match(pred, gold)


def test_the_issue_cases():
    assert answers_match("1/2", "0.5") and answers_match("\\frac{2}{4}", "0.5") and answers_match("3\\sqrt{2}", "sqrt(18)")
    assert answers_match("\\{1,2\\}", "\\{2,1\\}") and not answers_match("(1,2)", "(2,1)")
    assert not answers_match("0.333", "1/3") and not answers_match("2", "3") and not answers_match("x+1", "x")


@pytest.mark.parametrize(
    "a,b,expected",
    [(1.0, 1.0 + 1e-7, True), (1.0, 1.000002, False), (1e7, 1e7 + 5, True), (1e7, 1e7 + 11, False), (0.0, 1e-6, True),
     (0.0, 2e-6, False)],
)
def test_num_eq_is_the_paper_comparator(a, b, expected):
    # |a - b| <= δ or |a - b| / max(1, |b|) <= δ, δ = 1e-6
    assert num_eq(a, b) is expected


@pytest.mark.parametrize(
    "text,answer",
    [
        ("so the answer is \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
        ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}"),
        ("\\boxed{\\boxed{3}}", "3"),
        ("first \\boxed{1}, finally \\boxed{2}", "2"),
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
        ("#### 42\ntrailing words", "42"),
        ("#### \\boxed{5}", "5"),
        ("#### $7$.", "7"),
        ("\\boxed 7", "7"),
        ("\\fbox{8}", "8"),
        ("$\\boxed{3} + 1$", "3"),
    ],
)
def test_extract_answer(text, answer):
    assert extract_answer(text) == (answer, None)


@pytest.mark.parametrize("text", ["", "no answer here", "\\boxed{}", "####", "#### ", "\\boxed{{", "\\boxed{unbalanced"])
def test_extract_answer_reports_missing_answers(text):
    answer, error = extract_answer(text)
    assert answer is None and error


def test_extract_boxed_keeps_nested_braces():
    assert extract_boxed("x \\boxed{\\frac{1}{2}} y") == "\\frac{1}{2}"
    assert extract_boxed("no box") is None


def test_printed_answer_is_the_last_line():
    assert extract_printed_answer("debug 1\n\n  7/8  \n\n") == "7/8"
    assert extract_printed_answer("(Fraction(1, 2), Fraction(-3, 4))\n") == "(1/2, -3/4)"
    assert extract_printed_answer("\\boxed{12}\n") == "12"
    assert extract_printed_answer("   \n") is None


def test_gsm8k_answer():
    assert extract_gsm8k_answer("5 + 7 = 12\n#### 1,200") == "1200"
    assert extract_gsm8k_answer("no marker") is None


def test_slow_check_has_a_deadline_and_restores_outer_timers(monkeypatch):
    verify._answers_match_cached.cache_clear()

    def hang(pred, gold, delta):
        time.sleep(5)
        return True

    monkeypatch.setattr(verify, "_slow_equal", hang)
    before = signal.getitimer(signal.ITIMER_REAL)[0]
    handler = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    assert not answers_match("\\sqrt{5}", "\\sqrt{7}", timeout_s=0.2)
    assert time.monotonic() - started < 2.0
    assert signal.getsignal(signal.SIGALRM) is handler
    after = signal.getitimer(signal.ITIMER_REAL)[0]
    if before:  # an outer timer (pytest-timeout) keeps running
        assert 0 < after <= before
    else:
        assert after == 0
    verify._answers_match_cached.cache_clear()


def test_checker_works_outside_the_main_thread():
    results = []
    thread = threading.Thread(target=lambda: results.append(answers_match("sqrt(18)", "3\\sqrt{2}")))
    thread.start()
    thread.join(30)
    assert results == [True]


def test_exceptions_inside_the_checker_mean_not_equal(monkeypatch):
    verify._answers_match_cached.cache_clear()

    def boom(pred, gold, delta):
        raise RuntimeError("sympy exploded")

    monkeypatch.setattr(verify, "_slow_equal", boom)
    assert not answers_match("\\sqrt{2}", "\\sqrt{3}")
    verify._answers_match_cached.cache_clear()


_TOKENS = list("0123456789+-*/^=.,()[]{}\\$# xyabc!%_") + ["\\frac", "\\sqrt", "\\boxed", "\\{", "####", "\\pi", "\\infty"]
_MATHY = st.lists(st.sampled_from(_TOKENS), max_size=25).map("".join)
_ANY = st.one_of(st.text(max_size=200), _MATHY)
_FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FUZZ
@given(_ANY)
def test_extractors_never_raise(text):
    answer, error = extract_answer(text)
    assert (answer is None) != (error is None)
    extract_printed_answer(text)
    extract_boxed(text)
    extract_gsm8k_answer(text)


@_FUZZ
@given(_ANY, st.sampled_from(["1/2", "3\\sqrt{2}", "(1, 2)", "2, 3", "x + 1", "[1, 3)"]))
def test_checker_never_raises_and_is_boolean(text, gold):
    assert answers_match(text, gold) in (True, False)
    assert answers_match(gold, text) in (True, False)


@_FUZZ
@given(st.fractions(max_denominator=1000))
def test_fraction_forms_agree(value):
    text = f"{value.numerator}/{value.denominator}"
    assert answers_match(f"\\frac{{{value.numerator}}}{{{value.denominator}}}", text)
    assert answers_match(str(value), text)
    assert not answers_match(str(value + 1), text)
