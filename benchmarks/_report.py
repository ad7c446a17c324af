"""Write one benchmark's section into benchmarks.md, leaving the other sections untouched.

Each script owns the block between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`; running it
again replaces that block, so the file only ever holds numbers the scripts produced.
"""

from __future__ import annotations

import platform
import re
import subprocess
from datetime import date
from pathlib import Path


def machine_line() -> str:
    from llm_marl.provenance import cpu_name

    cpu = cpu_name()
    try:
        import os

        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = None
    return f"{cpu}, {cores} cores, Python {platform.python_version()}, {date.today().isoformat()}"


def git_rev() -> str:
    """HEAD's short hash, and whether tracked files other than benchmarks.md differ from it (then
    the numbers are not that commit's)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", ".", ":!benchmarks.md"], check=False).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{rev} with uncommitted changes" if dirty else rev


def write_section(path: str | Path, name: str, title: str, command: str, body: str) -> None:
    """Replace (or append) the section `name` of the markdown file at `path`."""
    path = Path(path)
    text = path.read_text() if path.exists() else "# Benchmarks\n\nMeasured numbers only; each section names the command that produced it.\n"
    block = (
        f"<!-- bench:{name} -->\n## {title}\n\n"
        f"Command: `{command}`  \nMachine: {machine_line()}  \nCommit: {git_rev()}\n\n{body.strip()}\n"
        f"<!-- /bench:{name} -->"
    )
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)
