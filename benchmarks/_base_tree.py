"""A git revision's tree, exported to a temporary folder, for benchmarks that compare it with this one."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def exported_tree(rev: str, prefix: str = "base-tree-") -> Iterator[Path]:
    """`git archive REV` unpacked into a temporary folder (removed on exit)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)
