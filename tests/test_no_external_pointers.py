"""The product stands on its own: no file a user's clone holds points at notes that exist only in the
developers' workspace (their design notes, pitfall lists or paper copies). Docstrings and errors
state the fact itself, or cite the paper by title and arXiv id."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Built from pieces so this file does not match itself.
POINTERS = re.compile("|".join(re.escape(p) for p in [
    "../" + "shared", "shared/" + "papers", "shared/" + "notes", "pitfalls" + ".md", "pitfalls" + " #",
    "DESIGN" + ".md", "scale-out" + ".md", "style" + ".md"]))


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = [ROOT / name for name in out.splitlines()]
    return [f for f in files if f.suffix in {".py", ".md", ".yaml", ".toml", ".txt", ".json", ""} and f.is_file()]


def test_no_file_points_at_developer_notes():
    files = tracked_text_files()
    assert any(f.name == "README.md" for f in files)  # the scan sees the repository
    hits = [f"{f.relative_to(ROOT)}:{n}: {line.strip()}"
            for f in files for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1)
            if POINTERS.search(line)]
    assert not hits, "\n".join(hits)


def test_the_pattern_catches_a_pointer():
    assert POINTERS.search("see ../" + "shared/" + "notes/pitfalls" + ".md")
    assert POINTERS.search("(pitfalls" + " #3)")
    assert not POINTERS.search("update/shared/samples")
