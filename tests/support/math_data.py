"""A small math dataset file with no row in one split, for the up-front checks of the commands that play it."""

from __future__ import annotations

import json
from pathlib import Path


def math_dataset_without(split: str, folder: Path, rows: int = 5) -> Path:
    """A GSM8K-style JSONL file of `rows` problems, none of which falls in `split` (splits go by the question's hash)."""
    from llm_marl_envs.core.instances import split_of
    from llm_marl_envs.math.datasets import load_dataset

    every = folder / "every.jsonl"
    every.write_text("".join(json.dumps({"question": f"What is {i} plus 2?", "answer": f"#### {i + 2}"}) + "\n" for i in range(40)))
    kept = [row for row, problem in zip(every.read_text().splitlines(), load_dataset(every)) if split_of(problem.key()) != split]
    assert len(kept) >= rows, f"40 questions left fewer than {rows} outside the {split!r} split"
    data = folder / "data.jsonl"
    data.write_text("".join(row + "\n" for row in kept[:rows]))
    return data
