"""Loaders for MuSiQue and HotpotQA into `Corpus` records.

A dataset is a JSONL, JSON or parquet file, a `save_to_disk` folder, or a Hugging Face Hub id
(read by `llm_marl_envs.core.rows`; the Hub is used only when no such file or folder exists here,
so offline the files are the user's: download them from the datasets' own pages, or export them
with `datasets` where the Hub is reachable). Columns:

| format | id | question, answer | paragraphs | supporting facts |
|---|---|---|---|---|
| MuSiQue (`musique_ans_v1.0_{train,dev}.jsonl`) | `id` | `question`, `answer`, `answer_aliases` | `paragraphs`: list of `idx`, `title`, `paragraph_text`, `is_supporting` | `question_decomposition`: list of `question` (with `#k` references), `answer`, `paragraph_support_idx` |
| HotpotQA (`hotpot_{train_v1.1,dev_distractor_v1}.json`) | `_id` (or `id`) | `question`, `answer` | `context`: [title, [sentences]] pairs, or `{title: [...], sentences: [[...]]}` | `supporting_facts`: [title, sentence id] pairs, or `{title: [...], sent_id: [...]}` |

The second spelling of HotpotQA's columns is the Hub's (`hotpotqa/hotpot_qa`, config
`distractor`) and what its parquet and `datasets` exports hold; a MuSiQue export keeps the JSONL's
nested fields as they are. Unanswerable MuSiQue records (`answerable` false) are skipped by
default.

The corpus is the union of every record's paragraphs (deduplicated by title and text); each
question keeps its supporting titles in hop order.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..core.rows import canonical, read_rows
from .corpus import Corpus, Document, Hop, Question, doc_url

FORMATS = ("musique", "hotpotqa")


class _DocumentSet:
    """Deduplicated documents with unique URLs (a title may head several paragraphs, two titles may share a URL)."""

    def __init__(self, source: str):
        self.source = source
        self.docs: list[Document] = []
        self._seen: dict[tuple[str, str], Document] = {}
        self._per_url: dict[str, int] = {}
        """Documents so far per URL; by URL, not by title: "Foo_Bar" and "Foo Bar" share one (URLs write spaces as _)."""

    def add(self, title: str, text: str) -> Document:
        key = (title, text)
        if key in self._seen:
            return self._seen[key]
        url = doc_url(self.source, title)
        n = self._per_url.get(url, 0)
        self._per_url[url] = n + 1
        url += f"#{n + 1}" if n else ""
        doc = Document(title, text, url)
        self._seen[key] = doc
        self.docs.append(doc)
        return doc


def _records(source: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, record) pairs; the label (`file:line`, `file: item i`) names a record that is wrong."""
    for where, record in read_rows(source):
        if not isinstance(record, Mapping):
            raise ValueError(f"{where}: not a JSON object; expected MuSiQue or HotpotQA records")
        yield where, dict(record)


@contextlib.contextmanager
def _record(where: str, fmt: str) -> Iterator[None]:
    """A record missing a field, or holding one of the wrong shape, is a one-line error naming it."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ValueError(f"{where}: not in the {fmt} format ({type(e).__name__}: {e}); see "
                         "llm_marl_envs.search.loaders for the expected fields") from None


def _format_of(record: Mapping[str, Any], source: str) -> str:
    if "paragraphs" in record:
        return "musique"
    if "context" in record and "supporting_facts" in record:
        return "hotpotqa"
    raise ValueError(f"{source}: unknown format (keys {sorted(record)[:8]}); expected MuSiQue (paragraphs) or HotpotQA (context)")


def detect_format(path: str | Path) -> str:
    """"musique" or "hotpotqa", from the first record's keys."""
    first = next(_records(str(path)), None)
    if first is None:
        raise ValueError(f"{path}: no records")
    return _format_of(first[1], str(path))


def _pairs(value: Any, first: str, second: str) -> list[tuple[Any, Any]]:
    """HotpotQA's [a, b] pairs, from the JSON's list of pairs or the Hub's {first: [...], second: [...]}."""
    if isinstance(value, Mapping):
        return list(zip(value[first], value[second]))
    return [(a, b) for a, b in value]


def _resolve(question: str, answers: list[str]) -> str:
    return re.sub(r"#(\d+)", lambda m: answers[int(m.group(1)) - 1] if 0 < int(m.group(1)) <= len(answers) else m.group(0), question)


def _musique(records: Iterable[tuple[str, dict[str, Any]]], docs: _DocumentSet, answerable_only: bool) -> list[Question]:
    questions = []
    for where, rec in records:
        if answerable_only and rec.get("answerable") is False:
            continue
        with _record(where, "musique"):
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


def _hotpotqa(records: Iterable[tuple[str, dict[str, Any]]], docs: _DocumentSet) -> list[Question]:
    questions = []
    for where, rec in records:
        with _record(where, "hotpotqa"):
            for title, sents in _pairs(rec["context"], "title", "sentences"):
                docs.add(title, "".join(sents).strip())
            supporting = tuple(dict.fromkeys(title for title, _ in _pairs(rec.get("supporting_facts") or [], "title", "sent_id")))
            hops = tuple(Hop("", "", "", title) for title in supporting)
            qid = rec["_id"] if "_id" in rec else rec["id"]
            questions.append(Question(str(qid), rec["question"], rec["answer"], (), hops, supporting, "hotpotqa"))
    return questions


def load_dataset(path: str | Path, format: str | None = None, limit: int | None = None,
                 answerable_only: bool = True) -> Corpus:
    """Load MuSiQue or HotpotQA (format detected when None) as a `Corpus`, from a file, a
    save_to_disk folder or a Hub id (see the module docstring).

    `limit` keeps the first N questions (and only their paragraphs). MuSiQue's unanswerable
    questions (the `full` variant) are skipped unless `answerable_only=False`.
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown dataset format {format!r}; use one of {', '.join(FORMATS)}")
    source = canonical(path)  # the corpus spec rebuilds it from any working directory
    records = _records(source)
    first = next(records, None)
    if first is None:
        raise ValueError(f"{path}: no records")
    fmt = format or _format_of(first[1], str(path))
    records = itertools.chain([first], records)
    if limit is not None:
        records = itertools.islice(records, int(limit))
    docs = _DocumentSet(fmt)
    questions = _musique(records, docs, answerable_only) if fmt == "musique" else _hotpotqa(records, docs)
    spec = {"kind": fmt, "path": source, "limit": limit, "answerable_only": answerable_only}
    return Corpus(fmt, tuple(docs.docs), tuple(questions), spec=spec)
