"""Math problem generators (answers recomputed independently: sympy, brute force) and dataset loaders."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
import sympy
from sympy.parsing.sympy_parser import convert_xor, implicit_multiplication_application, parse_expr, standard_transformations

from llm_marl_envs.core.instances import instance_rng
from llm_marl_envs.math.datasets import detect_format, load_dataset, record_to_instance
from llm_marl_envs.math.generators import DIFFICULTIES, GENERATORS, TOPICS
from llm_marl_envs.math.generators.base import evaluate, fmt_decimal, python_expression
from llm_marl_envs.math.problems import MathProblemConfig, generate, recognise
from llm_marl_envs.math.verify import answers_match

FIXTURES = Path(__file__).parent / "fixtures"
SEEDS_PER_LEVEL = 12
_TRANSFORMS = standard_transformations + (implicit_multiplication_application, convert_xor)
x, y, z = sympy.symbols("x y z")


def sym(text: str):
    """Our own generated text (trusted) as a sympy expression, through sympy's parser."""
    text = text.replace("×", "*").replace("÷", "/").replace("−", "-")
    return parse_expr(text, transformations=_TRANSFORMS, local_dict={"x": x, "y": y, "z": z})


def problems(name: str):
    for difficulty in DIFFICULTIES:
        for seed in range(SEEDS_PER_LEVEL):
            rng = instance_rng("math-test", "train", seed * 10 + difficulty)
            yield GENERATORS[name].make(rng, difficulty)


def as_fraction(answer: str) -> Fraction:
    return Fraction(answer)


def as_values(answer: str) -> list[Fraction]:
    return [Fraction(v) for v in answer.strip("()").split(", ")]


def ints(text: str) -> list[int]:
    return [int(v) for v in re.findall(r"-?\d+", text)]


# ------------------------------------------------------------------ independent recomputation


def check_integer_expression(p):
    expr = re.search(r"expression (.*)\. Give", p.question).group(1)
    assert sympy.Rational(sym(expr)) == as_fraction(p.answer)


def check_fraction_arithmetic(p):
    expr = re.search(r"Compute (.*) and write", p.question).group(1)
    assert sympy.Rational(sym(expr)) == as_fraction(p.answer)


def check_percent(p):
    nums = [Decimal(v) for v in re.findall(r"\d+(?:\.\d+)?", p.question)]
    if p.variant == "of":
        value = nums[0] * nums[1] / 100
    elif p.variant == "change":
        value = nums[0] * (100 + nums[1]) * (100 - nums[2]) / 10000
    else:
        value = nums[1] * 100 / (100 - nums[0])
    assert Decimal(str(Fraction(p.answer).numerator)) / Decimal(Fraction(p.answer).denominator) == value


def check_linear_equation(p):
    lhs, rhs = re.search(r"Solve for x: (.*) = (.*)\. Give", p.question).groups()
    assert sympy.solve(sympy.Eq(sym(lhs), sym(rhs)), x) == [sympy.Rational(p.answer)]


def check_quadratic_equation(p):
    poly = re.search(r"equation (.*) = 0\.", p.question).group(1)
    roots = sorted(sympy.solve(sym(poly), x))
    assert roots == sorted(sympy.Rational(str(v)) for v in as_values(p.answer))


def check_linear_system(p):
    eqs = re.search(r"equations (.*)\. Give", p.question).group(1).replace(" and ", ", ").split(", ")
    names = [x, y] if p.variant == "two" else [x, y, z]
    parsed = [sympy.Eq(sym(e.split("=")[0]), sym(e.split("=")[1])) for e in eqs]
    (solution,) = sympy.linsolve(parsed, names)
    assert list(solution) == [sympy.Rational(str(v)) for v in as_values(p.answer)]


def check_function_value(p):
    f = sym(re.search(r"f\(x\) = (.*?)(\.| and)", p.question).group(1))
    a = ints(p.question.split("What is")[1])[0]
    arg = sympy.Integer(a)
    if p.variant == "composite":
        g = sym(re.search(r"g\(x\) = (.*)\. What", p.question).group(1))
        arg = g.subs(x, arg)
    assert f.subs(x, arg) == sympy.Rational(p.answer)


def check_gcd_lcm(p):
    values = ints(p.question)
    fn = sympy.igcd if "greatest" in p.question else sympy.ilcm
    assert fn(*values) == int(p.answer)


def check_modular_power(p):
    a, b, m = ints(p.question)
    value = 1
    for _ in range(b):
        value = value * a % m
    assert value == int(p.answer)


def check_divisors(p):
    (n,) = ints(p.question)
    expected = sympy.divisor_count(n) if p.variant == "count" else sympy.divisor_sigma(n)
    assert expected == int(p.answer)


def check_primes(p):
    if p.variant == "count":
        a, b = ints(p.question)
        assert sympy.primepi(b) - sympy.primepi(a - 1) == int(p.answer)
    else:
        assert sympy.prime(ints(p.question)[0]) == int(p.answer)


def check_congruence(p):
    values = ints(p.question)
    answer = int(p.answer)
    if p.variant == "linear":
        a, b, m = values
        assert next(v for v in range(1, m + 1) if (a * v - b) % m == 0) == answer
    else:
        r1, m1, r2, m2, r3, m3 = values
        assert next(n for n in itertools.count(1) if n % m1 == r1 and n % m2 == r2 and n % m3 == r3) == answer


def check_choose(p):
    if p.variant == "books":
        k, n = ints(p.question)
        assert sympy.binomial(n, k) == int(p.answer)
    else:
        k, m, w = ints(p.question)
        people = "M" * m + "W" * w
        count = sum(1 for c in itertools.combinations(range(m + w), k) if {people[i] for i in c} == {"M", "W"})
        assert count == int(p.answer)


def check_arrangements(p):
    word = re.search(r"letters of ([A-Z]+)\?", p.question).group(1)
    count = sum(1 for _ in sympy.utilities.iterables.multiset_permutations(word))
    assert count == int(p.answer)


def check_row_arrangements(p):
    n = ints(p.question)[0]
    tests = {
        "together": lambda r: abs(r.index(0) - r.index(1)) == 1,
        "apart": lambda r: abs(r.index(0) - r.index(1)) != 1,
        "left": lambda r: r.index(0) < r.index(1),
        "trio": lambda r: sorted(r.index(i) for i in range(3)) in ([k, k + 1, k + 2] for k in range(n)),
    }
    assert sum(1 for r in itertools.permutations(range(n)) if tests[p.variant](r)) == int(p.answer)


def check_distributions(p):
    values = ints(p.question)
    n, k = values[0], values[1]
    m = values[2] if p.variant == "least" else 0
    ways = [1] + [0] * n  # ways[t]: ways to hand out t candies to the children so far
    for _ in range(k):
        ways = [sum(ways[t - own] for own in range(m, t + 1)) for t in range(n + 1)]
    assert ways[n] == int(p.answer)


def check_permutation_counts(p):
    (n,) = ints(p.question.replace("1 to", ""))
    if p.variant == "circle":
        assert sympy.factorial(n - 1) == int(p.answer)
    else:
        assert sum(1 for q in itertools.permutations(range(n)) if all(q[i] != i for i in range(n))) == int(p.answer)


def check_dice(p):
    k, s = ints(p.question)[:2]
    rolls = list(itertools.product(range(1, 7), repeat=k))
    hits = sum(1 for r in rolls if (sum(r) == s if p.variant == "exact" else sum(r) >= s))
    assert Fraction(hits, len(rolls)) == as_fraction(p.answer)


def check_urn(p):
    r, b, k, j = ints(p.question)
    balls = "R" * r + "B" * b
    draws = list(itertools.combinations(range(r + b), k))
    hits = sum(1 for d in draws if (Counter(balls[i] for i in d)["R"] == j if p.variant == "exact"
                                    else Counter(balls[i] for i in d)["R"] >= j))
    assert Fraction(hits, len(draws)) == as_fraction(p.answer)


def check_coins(p):
    values = ints(p.question)
    n = values[0]
    flips = list(itertools.product((0, 1), repeat=n))
    test = {
        "exact": lambda f: sum(f) == values[1],
        "atleast": lambda f: sum(f) >= values[1],
        "norun": lambda f: "11" not in "".join(map(str, f)),
    }[p.variant]
    assert Fraction(sum(1 for f in flips if test(f)), len(flips)) == as_fraction(p.answer)


CHECKS = {name[len("check_"):]: fn for name, fn in globals().items() if name.startswith("check_")}


def test_every_generator_has_an_independent_check():
    assert set(CHECKS) == set(GENERATORS)
    assert set(TOPICS) == {"arithmetic", "algebra", "number_theory", "combinatorics", "probability"}


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_answers_match_an_independent_recomputation(name):
    levels = set()
    for problem in problems(name):
        CHECKS[name](problem)
        levels.add(problem.difficulty)
    assert levels == set(DIFFICULTIES)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_same_seed_same_problem(name):
    for difficulty in DIFFICULTIES:
        a = GENERATORS[name].make(instance_rng("m", "test", 5), difficulty)
        b = GENERATORS[name].make(instance_rng("m", "test", 5), difficulty)
        assert a == b


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_question_text_is_recognised_by_its_generator_only(name):
    for problem in problems(name):
        found = recognise(f"Problem:\n{problem.question}\n\nrules follow")
        assert found is not None and found.generator.name == name and found.variant == problem.variant
        assert found.params == dict(problem.params)
        assert found.answer() == problem.answer
        others = [g for g in GENERATORS.values() if g.name != name and g.match(problem.question)]
        assert not others, f"{problem.question!r} also matches {[g.name for g in others]}"


def test_tool_programs_print_the_answer():
    from llm_marl_envs.sandbox import default_sandbox
    from llm_marl_envs.math.verify import extract_printed_answer

    sandbox = default_sandbox()
    jobs, expected = [], []
    for name, generator in GENERATORS.items():
        for difficulty in DIFFICULTIES:
            problem = generator.make(instance_rng("math-prog", "train", difficulty), difficulty)
            jobs.append((generator.program(problem.variant, dict(problem.params)), ""))
            expected.append((name, problem))
    for (name, problem), result in zip(expected, sandbox.run_many(jobs)):
        assert result.ok, (name, result.stderr[-500:])
        assert extract_printed_answer(result.stdout) == problem.answer, (name, problem.question, result.stdout)


def test_generate_respects_the_config_and_records_metadata():
    config = MathProblemConfig(difficulty=2, topics=("probability",))
    for seed in range(30):
        inst = generate(instance_rng("math", "train", seed), config)
        assert inst.difficulty == 2 and inst.topic == "probability" and inst.generator in TOPICS["probability"]
        assert inst.source == "generated" and inst.metadata["variant"] in GENERATORS[inst.generator].templates
        assert inst.key() == inst.question
    only = MathProblemConfig(generators=("gcd_lcm",))
    assert {generate(instance_rng("math", "val", s), only).generator for s in range(10)} == {"gcd_lcm"}
    mixed = {generate(instance_rng("math", "val", s)).difficulty for s in range(60)}
    assert mixed == set(DIFFICULTIES)


@pytest.mark.parametrize(
    "kwargs,fix",
    [({"difficulty": 4}, "difficulty must be one of"), ({"topics": ("geometry",)}, "unknown topics"),
     ({"generators": ("nope",)}, "unknown generators"), ({"topics": ("algebra",), "generators": ("dice",)}, "widen")],
)
def test_bad_problem_config_names_the_fix(kwargs, fix):
    with pytest.raises(ValueError, match=fix):
        MathProblemConfig(**kwargs)


def test_evaluator_and_python_translation():
    assert evaluate("3(x - 4) + 2x", {"x": Fraction(5)}) == 13
    assert evaluate("2^3^2") == 512 and evaluate("-2^2") == -4 and evaluate("(1/2) ÷ (3/4)") == Fraction(2, 3)
    code = python_expression("3x^2 - 2(x + 1)")
    assert code == "Fraction(3) * x ** Fraction(2) - Fraction(2) * ( x + Fraction(1) )"
    assert fmt_decimal(Fraction(2187, 20)) == "109.35" and fmt_decimal(Fraction(-1, 8)) == "-0.125"
    assert fmt_decimal(Fraction(1, 3)) == "1/3" and fmt_decimal(Fraction(52)) == "52"


# ------------------------------------------------------------------ dataset loaders


def test_gsm8k_loader():
    items = load_dataset(FIXTURES / "math_gsm8k.jsonl")
    assert [i.answer for i in items] == ["26", "2460", "8"]  # thousands separator removed; blank line skipped
    assert all(i.source == "gsm8k" for i in items)
    assert items[0].question.startswith("Mia has 3 boxes") and "<<3*12=36>>" in items[0].metadata["solution"]


def test_math_loader():
    items = load_dataset(FIXTURES / "math_math.jsonl")
    assert [i.answer for i in items] == ["\\frac{5}{6}", "\\sqrt{2}, -\\sqrt{2}", "15", "1024"]
    assert [i.difficulty for i in items] == [1, 2, 2, None]
    assert items[0].generator == "Prealgebra" and items[2].generator == "Counting & Probability"
    assert items[2].uid == "test/counting_and_probability/1.json"
    assert answers_match("5/6", items[0].answer) and answers_match("-sqrt(2), sqrt(2)", items[1].answer)


def test_aime_loader_accepts_the_common_spellings():
    items = load_dataset(FIXTURES / "math_aime.jsonl")
    assert [i.source for i in items] == ["aime"] * 3
    assert [i.answer for i in items] == ["16", "4", "9"]
    assert [i.uid for i in items] == ["60", "2024-I-2", "3"]
    assert items[0].metadata["year"] == "2024" and answers_match("016", items[0].answer)


def test_polaris_loader():
    items = load_dataset(FIXTURES / "math_polaris.jsonl", format="polaris")
    assert [(i.answer, i.difficulty) for i in items] == [("10", "8/8"), ("720", "5/8")]


def test_loader_limit_json_list_and_generic(tmp_path):
    assert len(load_dataset(FIXTURES / "math_gsm8k.jsonl", limit=2)) == 2
    listing = tmp_path / "list.json"
    listing.write_text('[{"question": "1 + 1?", "answer": "\\\\boxed{2}"}, {"problem": "2 + 2?", "answer": 4}]')
    items = load_dataset(listing)
    assert [(i.source, i.answer) for i in items] == [("jsonl", "2"), ("jsonl", "4")]


def test_format_detection():
    assert detect_format({"question": "q", "answer": "x #### 3"}) == "gsm8k"
    assert detect_format({"problem": "p", "solution": "\\boxed{1}", "level": "Level 1", "type": "Algebra"}) == "math"
    assert detect_format({"Problem": "p", "Answer": 3, "ID": "2024-I-1"}) == "aime"
    assert detect_format({"problem": "p", "answer": "3", "difficulty": "1/8"}) == "polaris"
    assert detect_format({"question": "q", "answer": "3"}) == "jsonl"
    assert detect_format({"text": "t"}) is None


@pytest.mark.parametrize(
    "content,format,fix",
    [
        ('{"question": "q", "answer": "no marker"}\n', "gsm8k", "####"),
        ('{"problem": "p", "solution": "no box", "level": "Level 1", "type": "Algebra"}\n', "auto", "boxed"),
        ('{"problem": "p", "answer": ""}\n', "auto", "must not be empty"),
        ('{"answer": "3"}\n', "polaris", "no question"),
        ('{"text": "t"}\n', "auto", "cannot tell the format"),
        ("not json\n", "auto", ":1: not a JSON object"),
        ("\n\n", "auto", "empty"),
    ],
)
def test_loader_errors_name_the_line_and_the_fix(tmp_path, content, format, fix):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=re.escape(fix)):
        load_dataset(path, format=format)


def test_loader_rejects_missing_files_and_unknown_formats(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        load_dataset(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="unknown dataset format"):
        load_dataset(FIXTURES / "math_gsm8k.jsonl", format="csv")
    with pytest.raises(ValueError, match="JSON object"):
        record_to_instance(["not", "a", "dict"])  # type: ignore[arg-type]


def test_generated_instances_are_numerous_and_split_by_content():
    from llm_marl_envs.core.instances import split_of

    keys = {generate(instance_rng("math", "train", s)).key() for s in range(300)}
    assert len(keys) > 280
    assert {split_of(k) for k in keys} == {"train", "val", "test"}


@pytest.mark.parametrize("option", ["topics", "generators"])
def test_a_topic_or_generator_that_is_no_name_is_reported_as_unknown(option):
    """`--env-arg topics=5` reads as the number 5, which once ended in "'int' object is not iterable"."""
    from llm_marl_envs.registry import make_raw

    with pytest.raises(ValueError, match=rf"unknown {option} \[5\]; choose from"):
        make_raw("math", **{option: 5})
