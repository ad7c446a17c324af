"""Loaders for question/answer datasets: a JSONL, JSON or parquet file, a `save_to_disk` folder, or a
Hugging Face Hub id such as `openai/gsm8k:main@test` (read by `llm_marl_envs.core.rows`; the Hub is
used only when no such file or folder exists here). A parquet file or a `datasets` export has the
same columns as the JSONL files.

Formats (column names are matched case-insensitively):

| format | fields | reference answer |
|---|---|---|
| `gsm8k` | `question`, `answer` ("... #### 72") | the number after `####` (thousands separators removed) |
| `math` (Hendrycks MATH, MATH-500) | `problem`, `solution`, `level` ("Level 3" or 3), `type`/`subject`, optional `answer`, `unique_id` | `answer` if present, else the last `\\boxed{}` of `solution` |
| `aime` | `problem`/`question`, `answer`, `id`/`problem_idx`, optional `year`, `url`, `solution` | `answer` (an integer, kept as text) |
| `polaris` (Polaris-Dataset-53K) | `problem`, `answer`, `difficulty` (pass rate such as "7/8") | `answer` |
| `jsonl` (generic) | `problem`/`question`, `answer` | `answer` (a `####` or `\\boxed{}` in it is extracted) |

For example `openai/gsm8k:main@test` is in the `gsm8k` format and `HuggingFaceH4/MATH-500@test` in
the `math` format.

`format="auto"` detects the format per record, in the order of the table. A malformed line, a
missing field or an empty answer raises ValueError naming the file, the line and the fix: records
are never skipped silently.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..core.rows import read_rows
from .problems import MathInstance
from .verify import extract_boxed, extract_gsm8k_answer

FORMATS = ("auto", "gsm8k", "math", "aime", "polaris", "jsonl")
_AIME_ID_KEYS = ("id", "problem_idx", "problem number", "year", "url")


def detect_format(record: Mapping[str, Any]) -> str | None:
    keys = {str(k).lower(): v for k, v in record.items()}
    has_question = "question" in keys or "problem" in keys
    if "question" in keys and isinstance(keys.get("answer"), str) and "####" in keys["answer"]:
        return "gsm8k"
    if "problem" in keys and "solution" in keys and any(k in keys for k in ("level", "type", "subject")):
        return "math"
    if has_question and "answer" in keys and any(k in keys for k in _AIME_ID_KEYS):
        return "aime"
    if "problem" in keys and "answer" in keys and "difficulty" in keys:
        return "polaris"
    if has_question and "answer" in keys:
        return "jsonl"
    if "problem" in keys and "solution" in keys:
        return "math"
    return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def _level(value: Any) -> int | None:
    text = _text(value)
    digits = "".join(ch for ch in text if ch.isdigit())
    return int(digits) if digits else None


def record_to_instance(record: Mapping[str, Any], format: str = "auto", where: str = "record") -> MathInstance:
    """One dataset record as a MathInstance (see the module docstring for the formats)."""
    if format not in FORMATS:
        raise ValueError(f"unknown dataset format {format!r}; use one of {', '.join(FORMATS)}")
    if not isinstance(record, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
    fmt = detect_format(record) if format == "auto" else format
    if fmt is None:
        raise ValueError(
            f"{where}: cannot tell the format from keys {sorted(record)}; a record needs question/problem and "
            "answer (or problem and solution); pass format= (the math environment's dataset_format=) one of "
            + ", ".join(FORMATS[1:])
        )
    keys = {str(k).lower(): v for k, v in record.items()}
    question = _text(keys.get("question") if fmt == "gsm8k" else keys.get("problem", keys.get("question")))
    if not question:
        raise ValueError(f"{where}: no question ({'question' if fmt == 'gsm8k' else 'problem or question'} field) for format {fmt!r}")
    difficulty: int | str | None = None
    generator = topic = uid = None
    metadata: dict[str, Any] = {}
    if fmt == "gsm8k":
        answer = extract_gsm8k_answer(_text(keys.get("answer"))) or ""
        metadata["solution"] = _text(keys.get("answer"))
        hint = "the answer field must end with '#### <number>'"
    elif fmt == "math":
        solution = _text(keys.get("solution"))
        answer = _text(keys.get("answer")) or (extract_boxed(solution) or "").strip()
        difficulty = _level(keys.get("level"))
        generator = _text(keys.get("type") or keys.get("subject")) or None
        topic = generator
        uid = _text(keys.get("unique_id")) or None
        metadata["solution"] = solution
        hint = "give an answer field or a solution with \\boxed{...}"
    else:
        raw = keys.get("answer")
        answer = _text(raw)
        if fmt == "jsonl" and "####" in answer:
            answer = extract_gsm8k_answer(answer) or ""
        elif fmt == "jsonl" and extract_boxed(answer):
            answer = (extract_boxed(answer) or "").strip()
        if fmt == "aime":
            uid = _text(next((keys[k] for k in ("id", "problem_idx") if k in keys), None)) or None
            metadata.update({k: keys[k] for k in ("year", "url", "problem number", "part", "solution") if k in keys})
        if fmt == "polaris":
            difficulty = _text(keys.get("difficulty")) or None
        hint = "the answer field must not be empty"
    if not answer:
        raise ValueError(f"{where}: no reference answer for format {fmt!r}: {hint}")
    return MathInstance(question=question, answer=answer, source=fmt, difficulty=difficulty, generator=generator,
                        topic=topic, uid=uid, metadata=metadata)


def load_dataset(source: str | os.PathLike[str], format: str = "auto", limit: int | None = None) -> list[MathInstance]:
    """Load math problems from a JSONL/JSON/parquet file, a save_to_disk folder or a Hub id
    (`llm_marl_envs.core.rows`). See the module docstring for the formats."""
    if format not in FORMATS:
        raise ValueError(f"unknown dataset format {format!r}; use one of {', '.join(FORMATS)}")
    instances = []
    for where, record in read_rows(source):
        instances.append(record_to_instance(record, format, where))
        if limit is not None and len(instances) >= limit:
            break
    if not instances:
        raise ValueError(f"{os.fspath(source)}: no problems found; the file is empty")
    return instances


__all__ = ["FORMATS", "detect_format", "load_dataset", "record_to_instance"]
