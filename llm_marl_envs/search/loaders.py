"""Loaders for the published MuSiQue and HotpotQA files into `Corpus` records.

No dataset hub is reachable from CI and no PyPI package ships these datasets, so the files are
the user's (download them from the datasets' own pages). Formats:

- MuSiQue (`musique_ans_v1.0_{train,dev}.jsonl`): one JSON object per line with `id`,
  `question`, `answer`, `answer_aliases`, `paragraphs` (`idx`, `title`, `paragraph_text`,
  `is_supporting`) and `question_decomposition` (`question` with `#k` references, `answer`,
  `paragraph_support_idx`).
- HotpotQA (`hotpot_{train_v1.1,dev_distractor_v1}.json`): one JSON list of objects with `_id`,
  `question`, `answer`, `supporting_facts` ([title, sentence id] pairs) and `context`
  ([title, [sentences]] pairs).

The corpus is the union of every record's paragraphs (deduplicated by title and text); each
question keeps its supporting titles in hop order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .corpus import Corpus, Document, Hop, Question, doc_url

FORMATS = ("musique", "hotpotqa")


class _DocumentSet:
    """Deduplicated documents with unique URLs (a title may head several paragraphs)."""

    def __init__(self, source: str):
        self.source = source
        self.docs: list[Document] = []
        self._seen: dict[tuple[str, str], Document] = {}
        self._per_title: dict[str, int] = {}

    def add(self, title: str, text: str) -> Document:
        key = (title, text)
        if key in self._seen:
            return self._seen[key]
        n = self._per_title.get(title, 0)
        self._per_title[title] = n + 1
        url = doc_url(self.source, title) + (f"#{n + 1}" if n else "")
        doc = Document(title, text, url)
        self._seen[key] = doc
        self.docs.append(doc)
        return doc


def _records(path: Path) -> Iterator[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        yield from json.loads(text)
        return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not a JSON line ({e.msg}); expected MuSiQue JSONL or a HotpotQA JSON list") from e


def detect_format(path: str | Path) -> str:
    """"musique" or "hotpotqa", from the first record's keys."""
    first = next(iter(_records(Path(path))), None)
    if first is None:
        raise ValueError(f"{path}: no records")
    if "paragraphs" in first:
        return "musique"
    if "context" in first and "supporting_facts" in first:
        return "hotpotqa"
    raise ValueError(f"{path}: unknown format (keys {sorted(first)[:8]}); expected MuSiQue (paragraphs) or HotpotQA (context)")


def _resolve(question: str, answers: list[str]) -> str:
    return re.sub(r"#(\d+)", lambda m: answers[int(m.group(1)) - 1] if 0 < int(m.group(1)) <= len(answers) else m.group(0), question)


def _musique(records: Iterable[dict[str, Any]], docs: _DocumentSet, answerable_only: bool) -> list[Question]:
    questions = []
    for rec in records:
        if answerable_only and rec.get("answerable") is False:
            continue
        paragraphs = {p["idx"]: docs.add(p["title"], p["paragraph_text"]) for p in rec["paragraphs"]}
        answers: list[str] = []
        hops = []
        for step in rec.get("question_decomposition", []):
            support = paragraphs.get(step.get("paragraph_support_idx"))
            hops.append(Hop(step["question"], _resolve(step["question"], answers), step["answer"], support.title if support else ""))
            answers.append(step["answer"])
        supporting = tuple(h.support for h in hops if h.support) or tuple(
            paragraphs[p["idx"]].title for p in rec["paragraphs"] if p.get("is_supporting"))
        questions.append(Question(str(rec["id"]), rec["question"], rec["answer"], tuple(rec.get("answer_aliases", ())),
                                  tuple(hops), supporting, "musique"))
    return questions


def _hotpotqa(records: Iterable[dict[str, Any]], docs: _DocumentSet) -> list[Question]:
    questions = []
    for rec in records:
        for title, sents in rec["context"]:
            docs.add(title, "".join(sents).strip())
        supporting = tuple(dict.fromkeys(title for title, _ in rec.get("supporting_facts", [])))
        hops = tuple(Hop("", "", "", title) for title in supporting)
        questions.append(Question(str(rec["_id"]), rec["question"], rec["answer"], (), hops, supporting, "hotpotqa"))
    return questions


def load_dataset(path: str | Path, format: str | None = None, limit: int | None = None,
                 answerable_only: bool = True) -> Corpus:
    """Load a MuSiQue or HotpotQA file (format detected when None) as a `Corpus`.

    `limit` keeps the first N questions (and only their paragraphs). MuSiQue's unanswerable
    questions (the `full` variant) are skipped unless `answerable_only=False`.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(f"dataset file {str(path)!r} not found; download MuSiQue or HotpotQA from the dataset's "
                         "own page (no hub is reachable from here) or use the built-in mini-wiki corpus")
    fmt = format or detect_format(path)
    if fmt not in FORMATS:
        raise ValueError(f"unknown dataset format {fmt!r}; use one of {', '.join(FORMATS)}")
    records = _records(path)
    if limit is not None:
        records = (r for i, r in zip(range(int(limit)), records))
    docs = _DocumentSet(fmt)
    try:
        questions = _musique(records, docs, answerable_only) if fmt == "musique" else _hotpotqa(records, docs)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path}: a record is not in the {fmt} format ({type(e).__name__}: {e}); see "
                         "llm_marl_envs.search.loaders for the expected fields") from None
    spec = {"kind": fmt, "path": str(path.resolve()), "limit": limit, "answerable_only": answerable_only}
    return Corpus(fmt, tuple(docs.docs), tuple(questions), spec=spec)
