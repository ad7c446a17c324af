"""Problem records and loaders for real code benchmarks on disk (APPS, CodeContests, LiveCodeBench).

A `Problem` is a stdin/stdout task: a statement, public examples (shown to the agents and used as
the coder's smoke run), a reference solution (source text), and the source of its hidden tests:
either a seeded input generator (the shipped bank: each instance draws its own inputs and their
expected outputs come from running the reference) or a fixed list of tests (datasets).

Loaders read a JSON (a list, or an object holding one), JSONL or parquet file, a `save_to_disk`
folder, or a Hugging Face Hub id such as `deepmind/code_contests@test` (read by
`llm_marl_envs.core.rows`; the Hub is used only when no such file or folder exists here), in the
public formats. A parquet file or `datasets` export has the same columns; a column the table calls
a JSON string may also hold the decoded value (a parquet struct or list):

| format | statement | tests | reference |
|---|---|---|---|
| APPS | `question` | `input_output` (JSON string: `inputs`, `outputs`; `fn_name` = call-based, skipped); a file holding train and test rows (their ids repeat) needs a `split` field in each | first of `solutions` (JSON string list) that compiles (APPS has Python 2 ones) |
| CodeContests | `description` | `public_tests`, `private_tests`, `generated_tests` (`{input: [...], output: [...]}`); `time_limit` (`{seconds, nanos}`) and `memory_limit_bytes` are the problem's time and memory limits; a problem with an `input_file` or `output_file` (file I/O) is skipped | first Python 3 entry of `solutions` (`{language: [...], solution: [...]}`, language 3) that compiles |
| LiveCodeBench | `question_content` | `public_test_cases`, `private_test_cases` (JSON strings of `{input, output, testtype}`; `functional` = call-based, skipped) | none |

LiveCodeBench ships most private tests as base64(zlib(pickle(json string))). Pickle is never
loaded: the stream is decoded opcode by opcode (`pickletools.genops`, which executes nothing) and
accepted only if it holds a single string; anything else raises `DatasetFormatError`.

Every format keeps a problem's first `max_tests` (20) tests with distinct inputs: they all run at
each coder step, and some rows hold hundreds.

A dataset gives one expected output per test, not its judge's checker: outputs are compared token by
token, real numbers within 1e-6 (`runner.outputs_match`), and a problem whose statement accepts any of
several answers ("If there are multiple answers, print any of them") is skipped (`accepts_any_answer`),
as no comparison with one output can judge it. Where the statement accepts the answer in any case
("YES", "yes"), letters compare case-insensitively (`Problem.any_case`); where it states the error a real
answer may have ("absolute or relative error does not exceed 10^{-9}"), real numbers compare within that
(`Problem.real_tolerance`, `statement_tolerance`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import pickletools
import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..core.instances import SPLITS, split_of
from ..core.rows import read_rows
from ..core.text import compile_error

Format = Literal["auto", "apps", "codecontests", "livecodebench"]
FORMATS = ("apps", "codecontests", "livecodebench")
_MAX_DECOMPRESSED = 512 * 1024 * 1024
"""Largest decompressed LiveCodeBench test blob accepted (bytes): a guard against zlib bombs."""


class DatasetFormatError(ValueError):
    """A dataset file or record does not match the format it was loaded as."""


@dataclass(frozen=True)
class TestCase:
    """One stdin/stdout test: the program reads `input` and must print `output` (token compare, `runner.outputs_match`)."""

    __test__ = False  # not a pytest class
    input: str
    output: str


@dataclass(frozen=True, eq=False)
class Problem:
    id: str
    statement: str
    reference: str | None
    """A correct solution (Python source reading stdin); None when the dataset has none."""
    split: str = "train"
    difficulty: int | str = 1
    title: str = ""
    examples: tuple[TestCase, ...] = ()
    """Public examples: shown in the task (unless `examples_in_statement`) and used as the smoke run."""
    generate: Callable[[np.random.Generator], str] | None = None
    """Seeded input generator (bank problems). Hidden-test outputs come from running `reference`."""
    edge_inputs: tuple[str, ...] = ()
    """Inputs always among the hidden tests of a generated problem (boundaries the generator may miss)."""
    tests: tuple[TestCase, ...] = ()
    """Fixed hidden tests (dataset problems, or hand-made problems)."""
    source: str = "bank"
    examples_in_statement: bool = False
    """True when the statement text already shows the examples (datasets)."""
    time_limit_s: float | None = None
    """The dataset's time limit per test, seconds (CodeContests' `time_limit`); None when it gives none."""
    memory_limit_mb: int | None = None
    """The dataset's memory limit, MiB rounded up (CodeContests' `memory_limit_bytes`); None when it gives none."""
    any_case: bool = False
    """The statement accepts the answer's letters in any case ("YES", "yes"): outputs compare case-insensitively
    (`statement_accepts_any_case`)."""
    real_tolerance: float | None = None
    """The error the statement allows a real-number answer ("absolute or relative error does not exceed 10^{-9}",
    `statement_tolerance`); None when it states none: `runner.REAL_TOLERANCE`."""
    absolute_error: bool = False
    """The statement allows only absolute error (not relative) of a real-number answer."""

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"problem {self.id!r}: split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.generate is None and not self.tests:
            raise ValueError(f"problem {self.id!r} has neither an input generator nor fixed tests")
        if self.generate is not None and self.reference is None:
            raise ValueError(f"problem {self.id!r}: generated inputs need a reference solution to compute outputs")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise ValueError(f"problem {self.id!r}: time_limit_s must be > 0 seconds or None, got {self.time_limit_s!r}")
        if self.memory_limit_mb is not None and not self.memory_limit_mb > 0:
            raise ValueError(f"problem {self.id!r}: memory_limit_mb must be > 0 MiB or None, got {self.memory_limit_mb!r}")
        if self.real_tolerance is not None and not 0 < self.real_tolerance < 1:
            raise ValueError(f"problem {self.id!r}: real_tolerance must be in (0, 1) or None, got {self.real_tolerance!r}")

    # Problems are immutable and may hold functions: forks share them.
    def __deepcopy__(self, memo: dict) -> Problem:
        return self

    def __reduce_ex__(self, protocol: Any) -> Any:
        # The shipped bank's input generators are lambdas, which pickle cannot store: a bank problem is
        # pickled by its id and loads as the bank's problem (an environment pickled mid-episode).
        if self.source == "bank" and _bank_problem(self.id) is self:
            return _bank_problem, (self.id,)
        return super().__reduce_ex__(protocol)

    @property
    def key(self) -> str:
        return f"{self.source}:{self.id}"

    @property
    def judging(self) -> dict[str, Any]:
        """How this problem's outputs are compared: the keyword arguments of `runner.outputs_match` (plain data, which
        the mutation harness gets in its job)."""
        return {"any_case": self.any_case, "tolerance": self.real_tolerance, "absolute": self.absolute_error}

    @property
    def reference_hash(self) -> str:
        return hashlib.sha256((self.reference or "").encode()).hexdigest()[:16]

    def text(self) -> str:
        """The problem as the agents see it."""
        parts = [self.title] if self.title else []
        parts.append(self.statement.strip())
        if not self.examples_in_statement:
            for i, ex in enumerate(self.examples, 1):
                label = "Example" if len(self.examples) == 1 else f"Example {i}"
                parts.append(f"{label} input:\n{ex.input.rstrip()}\n{label} output:\n{ex.output.rstrip()}")
        return "\n\n".join(parts)


def _bank_problem(problem_id: str) -> Problem | None:
    from .bank import BY_ID  # noqa: PLC0415 (the bank imports this module)

    return BY_ID.get(problem_id)


def with_newline(text: str) -> str:
    return text if text.endswith("\n") or not text else text + "\n"


# ---------------------------------------------------------------------------------------------
# reading files


def read_records(source: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSON/JSONL/parquet file, a save_to_disk folder or a Hub id (`llm_marl_envs.core.rows`)."""
    return [row for _, row in _labelled_records(source)]


def _labelled_records(source: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """(label for messages, row) of every row of `source`."""
    rows = []
    for where, row in read_rows(source):
        if not isinstance(row, dict):
            raise DatasetFormatError(f"{where}: every problem must be a JSON object, got {type(row).__name__}")
        rows.append((where, row))
    return rows


def detect_format(row: dict[str, Any]) -> str:
    if "question_content" in row:
        return "livecodebench"
    if "description" in row and ("public_tests" in row or "private_tests" in row):
        return "codecontests"
    if "question" in row and "input_output" in row:
        return "apps"
    raise DatasetFormatError(
        f"cannot tell the dataset format from the fields {sorted(row)[:12]}; pass format= (the code environment's "
        "dataset_format=) 'apps', 'codecontests' or 'livecodebench'"
    )


def _json_field(value: Any, what: str) -> Any:
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(f"{what} is not valid JSON ({exc.msg})") from None
    return value


def _text(value: Any, what: str) -> str:
    """A test input/output as text: APPS sometimes stores a list of lines (or a number)."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float)) for v in value):
        return "\n".join(str(v) for v in value) + "\n"
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        # else str() made a test of "None" (a table's null) or of a dict's repr
        raise DatasetFormatError(f"{what}: a test input or output must be text (or a list of lines), got {value!r:.80}")
    return with_newline(str(value))


def _first_that_compiles(solutions: Iterable[Any]) -> str | None:
    """The reference: the first of a row's solutions that Python 3 compiles (one that does not would make
    every tester test 'invalid' and the tester's mask 0)."""
    return next((s for s in solutions if isinstance(s, str) and compile_error(s) is None), None)


def _assign_split(key: str, split: str) -> str:
    return split_of(key) if split == "hash" else split


# ---------------------------------------------------------------------------------------------
# APPS


def _apps_id(row: dict[str, Any]) -> str:
    return str(row.get("problem_id", row.get("id", "")))


def problem_from_apps(row: dict[str, Any], split: str = "test", with_apps_split: bool = False,
                      max_tests: int = 20) -> Problem | None:
    """One APPS row; None for call-based problems (`fn_name`) or rows without tests.

    `with_apps_split`: the id is `SPLIT/ID` with the row's own `split` field (APPS numbers its train and
    test problems alike, so a file holding both needs it)."""
    pid = f"{row['split'].strip()}/{_apps_id(row)}" if with_apps_split else _apps_id(row)
    if "question" not in row:
        raise DatasetFormatError(f"APPS row {pid!r} has no 'question'")
    io = _json_field(row.get("input_output"), f"APPS row {pid!r}: input_output") or {}
    if not isinstance(io, dict):
        raise DatasetFormatError(f"APPS row {pid!r}: input_output must be an object with 'inputs' and 'outputs'")
    if io.get("fn_name"):
        return None
    inputs, outputs = io.get("inputs") or [], io.get("outputs") or []
    if len(inputs) != len(outputs):
        raise DatasetFormatError(f"APPS row {pid!r}: {len(inputs)} inputs but {len(outputs)} outputs")
    what = f"APPS row {pid!r}: input_output"
    # Some rows hold hundreds of tests, every one run at each coder step: keep the first max_tests distinct ones.
    tests = tuple(_dedupe(TestCase(_text(i, what), _text(o, what)) for i, o in zip(inputs, outputs))[:max_tests])
    if not tests:
        return None
    solutions = _json_field(row.get("solutions"), f"APPS row {pid!r}: solutions") or []
    # APPS lists Python 2 solutions too (`print x`).
    reference = _first_that_compiles(solutions)
    key = f"apps:{pid}"
    return Problem(
        id=pid, statement=str(row["question"]), reference=reference,
        split=_assign_split(key, split), difficulty=row.get("difficulty", "unknown"),
        examples=tests[:1], tests=tests, source="apps", examples_in_statement=True,
    )


# ---------------------------------------------------------------------------------------------
# CodeContests

CODECONTESTS_PYTHON3 = 3
"""`solutions.language` value of Python 3 in CodeContests (0 unknown, 1 Python 2, 2 C++, 3 Python 3, 4 Java)."""


def _cc_tests(block: Any, what: str) -> list[TestCase]:
    if not block:
        return []
    if not isinstance(block, dict) or not all(isinstance(block.get(k), (list, tuple)) for k in ("input", "output")):
        raise DatasetFormatError(f"{what} must be an object with 'input' and 'output' lists")
    if len(block["input"]) != len(block["output"]):
        raise DatasetFormatError(f"{what}: {len(block['input'])} inputs but {len(block['output'])} outputs")
    return [TestCase(_text(i, what), _text(o, what)) for i, o in zip(block["input"], block["output"])]


def _cc_time_limit(value: Any, what: str) -> float | None:
    """`time_limit` (`{seconds, nanos}`) in seconds; None when absent or zero (some rows give none)."""
    if value is None:
        return None
    parts = [value.get(k) or 0 for k in ("seconds", "nanos")] if isinstance(value, dict) else None  # a table's null is 0
    if parts is None or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in parts):
        raise DatasetFormatError(f"{what} must be an object with numbers 'seconds' and 'nanos', got {value!r}")
    seconds = parts[0] + parts[1] / 1e9
    return seconds if seconds > 0 else None


def _cc_memory_limit(value: Any, what: str) -> int | None:
    """`memory_limit_bytes` in MiB, rounded up; None when absent or zero (some rows give none)."""
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise DatasetFormatError(f"{what} must be a number of bytes, got {value!r:.80}")
    return math.ceil(value / 2**20) or None


def problem_from_codecontests(row: dict[str, Any], split: str = "test", max_tests: int = 20) -> Problem | None:
    name = str(row.get("name", ""))
    if "description" not in row:
        raise DatasetFormatError(f"CodeContests row {name!r} has no 'description'")
    if row.get("input_file") or row.get("output_file"):
        return None  # the statement reads or writes named files (input.txt): its tests are not stdin/stdout runs
    public = _cc_tests(row.get("public_tests"), f"CodeContests {name!r}: public_tests")
    hidden: list[TestCase] = []
    for part in ("private_tests", "generated_tests"):
        hidden += _cc_tests(row.get(part), f"CodeContests {name!r}: {part}")
    tests = _dedupe(public + hidden)[:max_tests]
    if not tests:
        return None
    sols = row.get("solutions") or {}
    # Some entries marked Python 3 are Python 2 (`print x`) or do not parse.
    reference = _first_that_compiles(code for lang, code in zip(sols.get("language", []), sols.get("solution", []))
                                     if lang == CODECONTESTS_PYTHON3) if isinstance(sols, dict) else None
    key = f"codecontests:{name}"
    return Problem(
        id=name, statement=str(row["description"]), reference=reference, split=_assign_split(key, split),
        difficulty=row.get("difficulty", "unknown"), examples=tuple(public[:2]) or tests[:1], tests=tuple(tests),
        source="codecontests", examples_in_statement=True,
        time_limit_s=_cc_time_limit(row.get("time_limit"), f"CodeContests {name!r}: time_limit"),
        memory_limit_mb=_cc_memory_limit(row.get("memory_limit_bytes"), f"CodeContests {name!r}: memory_limit_bytes"),
    )


def _dedupe(tests: Iterable[TestCase]) -> list[TestCase]:
    seen, out = set(), []
    for t in tests:
        if t.input not in seen:
            seen.add(t.input)
            out.append(t)
    return out


# ---------------------------------------------------------------------------------------------
# LiveCodeBench


def decode_pickled_string(blob: bytes) -> str:
    """The string inside a pickle stream, read opcode by opcode without unpickling.

    Only a protocol header, framing, one unicode string, memo bookkeeping and STOP are accepted;
    any other opcode (globals, reductions, containers) raises DatasetFormatError.
    """
    allowed_frame = {"PROTO", "FRAME", "MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "STOP"}
    strings = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"}
    value: str | None = None
    try:
        for opcode, arg, _ in pickletools.genops(blob):
            if opcode.name in strings and value is None:
                value = arg
            elif opcode.name not in allowed_frame:
                raise DatasetFormatError(
                    f"LiveCodeBench test blob holds a pickle opcode {opcode.name}: only a pickled JSON string is "
                    "accepted (llm-marl never unpickles data); re-export the tests as plain JSON"
                )
    except DatasetFormatError:
        raise
    except Exception as exc:  # malformed stream: genops raises ValueError and friends
        raise DatasetFormatError(f"LiveCodeBench test blob is not a valid pickle stream ({exc})") from None
    if value is None:
        raise DatasetFormatError("LiveCodeBench test blob holds no string")
    return value


def decode_lcb_tests(value: Any, what: str) -> list[dict[str, Any]]:
    """LiveCodeBench `public_test_cases` / `private_test_cases`: plain JSON, or base64+zlib+pickle."""
    cases = _decode_lcb(value, what)
    # Each case is read as case["input"], case["output"]: anything else is the file's error, not a KeyError.
    if not isinstance(cases, list) or not all(isinstance(c, dict) and "input" in c and "output" in c for c in cases):
        raise DatasetFormatError(f"{what} must be a list of objects with 'input' and 'output'")
    return cases


def _decode_lcb(value: Any, what: str) -> Any:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return value
    if not isinstance(value, str):
        raise DatasetFormatError(f"{what} must be a JSON string or a list")
    if value.lstrip().startswith("["):
        return _json_field(value, what) or []
    try:
        compressed = base64.b64decode(value.encode(), validate=False)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(compressed, _MAX_DECOMPRESSED)
        if inflater.unconsumed_tail:
            raise DatasetFormatError(f"{what}: decompressed tests exceed {_MAX_DECOMPRESSED} bytes")
    except (ValueError, zlib.error) as exc:
        raise DatasetFormatError(f"{what} is neither JSON nor base64+zlib data ({exc})") from None
    if raw.lstrip().startswith(b"["):
        return _json_field(raw.decode("utf-8"), what) or []
    return _json_field(decode_pickled_string(raw), what) or []


def problem_from_livecodebench(row: dict[str, Any], split: str = "test", max_tests: int = 20) -> Problem | None:
    qid = str(row.get("question_id", row.get("question_title", "")))
    if "question_content" not in row:
        raise DatasetFormatError(f"LiveCodeBench row {qid!r} has no 'question_content'")
    public = decode_lcb_tests(row.get("public_test_cases"), f"LiveCodeBench {qid!r}: public_test_cases")
    private = decode_lcb_tests(row.get("private_test_cases"), f"LiveCodeBench {qid!r}: private_test_cases")
    cases = public + private
    if any(c.get("testtype", "stdin") != "stdin" for c in cases):
        return None  # call-based (LeetCode) problems need a function harness
    what = f"LiveCodeBench {qid!r}: test cases"
    tests = _dedupe(TestCase(_text(c["input"], what), _text(c["output"], what)) for c in cases)[:max_tests]
    if not tests:
        return None
    examples = tuple(TestCase(_text(c["input"], what), _text(c["output"], what)) for c in public[:2]) or tuple(tests[:1])
    key = f"livecodebench:{qid}"
    return Problem(
        id=qid, statement=str(row["question_content"]), reference=None, split=_assign_split(key, split),
        difficulty=row.get("difficulty", "unknown"), title=str(row.get("question_title", "")), examples=examples,
        tests=tuple(tests), source="livecodebench", examples_in_statement=True,
    )


# ---------------------------------------------------------------------------------------------


@dataclass
class LoadReport:
    loaded: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    """Rows skipped, per format."""
    any_answer: int = 0
    """Of the skipped, problems whose statement accepts any of several answers (`accepts_any_answer`)."""


def _in_a_line(pattern: str) -> re.Pattern:
    """`pattern` (case-insensitive) with each space matching the blanks between two words of one line: a statement's
    section header ("Output") and its next line are not one phrase."""
    return re.compile(pattern.replace(" ", r"[^\S\n]+"), re.IGNORECASE)


_ANY_ANSWER = _in_a_line(
    # "If there are multiple answers, print any of them", "If several solutions exist, any of them will be accepted"
    r"\b(?:multiple|several|many|more than one) (?:\w+ ){0,2}?(?:answers?|solutions?)\b[^.!?\n]{0,80}?\bany\b"
    # "print any such permutation", "output any of them", "print any."
    r"|\b(?:print|output|write|find|choose|give|display) any(?:[.,;)]|$| one | (?:of them|such|valid|correct|possible|suitable|optimal)\b)"
    # "any of them is accepted", "any correct answer will be considered correct"
    r"|\bany (?:of them|one|valid|correct|possible|suitable|optimal) (?:\w+ ){0,2}?(?:(?:will be|is|are) )?(?:accepted|considered correct|allowed)\b"
    r"|\bany (?:valid|correct|suitable|acceptable) (?:answer|solution|output)\b")


def accepts_any_answer(statement: str) -> bool:
    """Whether the statement accepts any of several valid answers ("If there are multiple answers, print any of
    them"). Such a problem's judge is a checker that no dataset ships (CodeContests, APPS and LiveCodeBench give
    one expected output per test), so comparing with that output fails correct programs: the loader skips it."""
    return _ANY_ANSWER.search(statement) is not None


_ANY_CASE = _in_a_line(
    # "You can output the answer in any case (upper or lower)", "print each letter in any case", "case-insensitive"
    r"\b(?:print|output|write)\b[^.!?\n]{0,80}?\bin any (?:letter )?(?:case|register)\b|\bcase(?:-| )insensitive\b")


def statement_accepts_any_case(statement: str) -> bool:
    """Whether the statement accepts the answer's letters in any case ("You can output YES and NO in any case"),
    which Codeforces' checkers allow and one expected output ("YES") does not tell."""
    return _ANY_CASE.search(statement) is not None


# A statement's tolerance for real answers, e.g. "Your answer is considered correct if its absolute or relative
# error does not exceed 10^{-6}". Read: a power of ten with a negative exponent of 1 to 12, written 10^{-6},
# 10^-6, 10^(-6), 10 - 6 (the datasets' rendering of a lost superscript), 1e-6, optionally with a mantissa
# (2.5 \cdot 10^{-6}, 5e-5), that follows the word error, precision, tolerance or accuracy within one sentence
# of one line. Only absolute error is meant where that sentence names absolute and not relative error. Not read:
# a plain decimal (0.000001), words, digit counts ("six digits after the decimal point"), a number before the
# word, or an exponent out of range ("within 10-20 seconds" has no such word anyway): those get REAL_TOLERANCE.
_TOLERANCE = _in_a_line(
    r"[^.!?\n]*\b(?:errors?|precision|tolerance|accuracy)\b[^.!?\n]{0,80}?(?<![\w.])\$*"
    r"(?:(?P<mantissa>\d+(?:\.\d+)?)[^\S\n]*(?:\\cdot|\\times|[·⋅*×x])[^\S\n]*)?"
    r"(?:10[^\S\n]*(?:\^|\*\*)?[^\S\n]*[{(]?[^\S\n]*[-−–][^\S\n]*(?P<power>\d{1,2})(?!\d|\.\d)"
    r"|(?P<e_mantissa>\d+(?:\.\d+)?)[eE][-−](?P<e_power>\d{1,2})(?!\d|\.\d))")


def statement_tolerance(statement: str) -> tuple[float, bool] | None:
    """The error a statement allows a real-number answer, and whether only absolute error is meant; None when it
    states none clearly (see `_TOLERANCE`). The first such sentence counts."""
    for found in _TOLERANCE.finditer(statement):
        power = int(found["power"] or found["e_power"])
        mantissa = float(found["mantissa"] or found["e_mantissa"] or 1)
        tolerance = mantissa * 10.0 ** -power
        if 1 <= power <= 12 and 0 < tolerance < 1:
            sentence = found[0].lower()
            return tolerance, "absolute" in sentence and "relative" not in sentence
    return None


def load_problems(path: str | Path, format: Format = "auto", split: str = "test", max_tests: int = 20,
                  report: LoadReport | None = None) -> list[Problem]:
    """Stdin/stdout problems of an APPS, CodeContests or LiveCodeBench dataset (a file, a save_to_disk
    folder or a Hub id, see `read_records`).

    `split`: the split every problem of the file belongs to ("train" | "val" | "test"), or "hash"
    to spread them by the hash of their id (60/20/20). A problem keeps its first `max_tests` tests with
    distinct inputs (in the row's order: CodeContests' and LiveCodeBench's public tests first).
    Call-based problems, problems without tests and problems that accept any of several answers
    (`accepts_any_answer`: no checker ships) are skipped and counted in `report.skipped`. A
    problem that appears twice is an error, except APPS ids repeated by a file holding APPS's train
    and test problems, which each row's `split` field then tells apart (ids `train/0`, `test/0`).
    """
    if split not in (*SPLITS, "hash"):
        raise ValueError(f"split (the code environment's dataset_split) must be one of {', '.join(SPLITS)} or 'hash', got {split!r}")
    if format not in ("auto", *FORMATS):
        raise ValueError(f"format (the code environment's dataset_format) must be 'auto' or one of {', '.join(FORMATS)}, "
                         f"got {format!r}")
    rows = _labelled_records(path)
    formats = [detect_format(row) if format == "auto" else format for _, row in rows]
    try:
        problems, skipped = _problems_of(rows, formats, split, max_tests, with_apps_split=False)
    except _Repeated as repeated:
        if repeated.format != "apps":
            raise DatasetFormatError(f"{repeated.first} and {repeated.where} are both problem {repeated.id!r} ({repeated.format}): "
                                     "each problem must appear once in a file; drop the repeated row") from None
        # APPS numbers the problems of its train and test splits alike (0-4999 each), so a file holding both
        # repeats ids; its records do not say which split they came from unless the file adds a `split` field.
        apps = [(where, row) for (where, row), fmt in zip(rows, formats) if fmt == "apps"]
        unlabelled = next((w for w, r in apps if not (isinstance(r.get("split"), str) and r["split"].strip())), None)
        if unlabelled is not None:
            raise DatasetFormatError(
                f"{repeated.first} and {repeated.where} are both APPS problem {repeated.id}: APPS numbers its train and "
                "test problems alike (0-4999 each), so this file mixes its splits; load one split's file (e.g. "
                f"codeparrot/apps@test), or give every row a 'split' field ('train' or 'test'; {unlabelled} has none) "
                "and the ids become 'train/0', 'test/0', ...") from None
        try:
            problems, skipped = _problems_of(rows, formats, split, max_tests, with_apps_split=True)
        except _Repeated as again:
            raise DatasetFormatError(f"{again.first} and {again.where} are both APPS problem {again.id!r} (split/id): "
                                     "each problem must appear once in a file; drop the repeated row") from None
    report = report if report is not None else LoadReport()
    kept = []
    for problem in problems:
        if accepts_any_answer(problem.statement):
            skipped[problem.source] = skipped.get(problem.source, 0) + 1
            report.any_answer += 1
        else:
            tolerance, absolute = statement_tolerance(problem.statement) or (None, False)
            kept.append(replace(problem, any_case=statement_accepts_any_case(problem.statement), real_tolerance=tolerance,
                                absolute_error=absolute))
    problems = kept
    for fmt, count in skipped.items():
        report.skipped[fmt] = report.skipped.get(fmt, 0) + count
    report.loaded = len(problems)
    if not problems:
        raise DatasetFormatError(f"{path}: no stdin/stdout problem with tests found ({report.skipped} skipped; "
                                 f"{report.any_answer} of them accept any of several answers, which needs a checker)")
    return problems


class _Repeated(Exception):
    """Two rows of a file are the same problem (same source and id)."""

    def __init__(self, first: str, where: str, pid: str, format: str):
        super().__init__(pid)
        self.first, self.where, self.id, self.format = first, where, pid, format


def _problems_of(rows: list[tuple[str, dict[str, Any]]], formats: list[str], split: str, max_tests: int,
                 with_apps_split: bool) -> tuple[list[Problem], dict[str, int]]:
    """The problems of a file's rows and the count of skipped rows per format; _Repeated at a repeated problem."""
    problems: list[Problem] = []
    skipped: dict[str, int] = {}
    wheres: dict[str, str] = {}
    for (where, row), fmt in zip(rows, formats):
        if fmt == "apps":
            problem = problem_from_apps(row, split, with_apps_split, max_tests)
        elif fmt == "codecontests":
            problem = problem_from_codecontests(row, split, max_tests)
        else:
            problem = problem_from_livecodebench(row, split, max_tests)
        if problem is None:
            skipped[fmt] = skipped.get(fmt, 0) + 1
            continue
        if problem.key in wheres:
            raise _Repeated(wheres[problem.key], where, problem.id, fmt)
        wheres[problem.key] = where
        problems.append(problem)
    return problems, skipped


def check_unique(problems: Sequence[Problem]) -> None:
    seen: set[str] = set()
    for p in problems:
        if p.key in seen:
            hint = (" (APPS numbers its train and test problems alike: load_problems reads a file holding both when each "
                    "row has a 'split' field)") if p.source == "apps" else ""
            raise ValueError(f"two problems share the key {p.key!r} (source:id): give each problem its own id, e.g. "
                             f"dataclasses.replace(problem, id=...){hint}")
        seen.add(p.key)
