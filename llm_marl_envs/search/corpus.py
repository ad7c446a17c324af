"""The records every corpus produces: documents, multi-hop questions with decompositions, the corpus.

The mini-wiki generator and the MuSiQue/HotpotQA loaders all produce these, so environments,
retrieval backends and oracles never depend on where a question came from.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from urllib.parse import quote, unquote


def doc_url(source: str, title: str) -> str:
    """The URL a document is fetched by: `wiki://<source>/<Title_with_underscores>`."""
    return f"wiki://{source}/{quote(title.replace(' ', '_'), safe='_()-,')}"


def title_from_url(url: str) -> str | None:
    if not url.startswith("wiki://"):
        return None
    _, _, rest = url[len("wiki://"):].partition("/")
    return unquote(rest).replace("_", " ") if rest else None


@dataclass(frozen=True)
class Document:
    title: str
    text: str
    url: str

    def page(self) -> str:
        """What `fetch(url)` returns: the title line and the text."""
        return f"{self.title}\n\n{self.text}"


@dataclass(frozen=True)
class Hop:
    """One step of a question's decomposition (MuSiQue `question_decomposition`)."""

    question: str
    """The sub-question; `#k` refers to the answer of hop k (1-based), as in MuSiQue."""
    resolved: str
    """The sub-question with earlier answers substituted."""
    answer: str
    support: str
    """Title of the document that states this hop's fact (its gold document)."""
    relation: str = ""
    """The relation this hop follows (mini-wiki only; empty for loaded datasets)."""


@dataclass(frozen=True)
class Question:
    qid: str
    question: str
    answer: str
    aliases: tuple[str, ...] = ()
    hops: tuple[Hop, ...] = ()
    supporting: tuple[str, ...] = ()
    """Titles of the supporting documents, in hop order."""
    source: str = "mini-wiki"

    @property
    def golds(self) -> tuple[str, ...]:
        """The answer and its aliases (what EM/F1 compare against)."""
        return (self.answer, *self.aliases)

    @property
    def n_hops(self) -> int:
        return len(self.hops) or len(self.supporting)

    def key(self) -> str:
        """Canonical identity: assigns the question to exactly one split (core.instances)."""
        return f"{self.source}|{self.qid}|{self.question}|{self.answer}"

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Corpus:
    """Documents plus the questions asked over them. Immutable and shared, never copied."""

    name: str
    documents: tuple[Document, ...]
    questions: tuple[Question, ...] = ()
    spec: dict = field(default_factory=dict, compare=False)
    """How to rebuild this corpus in another process (`load_corpus(spec)`): JSON-friendly."""

    def __deepcopy__(self, memo: dict) -> Corpus:
        return self

    @cached_property
    def corpus_hash(self) -> str:
        """SHA-256 of every title and text, in order: the BM25 cache key."""
        h = hashlib.sha256()
        for d in self.documents:
            h.update(d.title.encode())
            h.update(b"\x00")
            h.update(d.text.encode())
            h.update(b"\x01")
        return h.hexdigest()

    @cached_property
    def by_url(self) -> dict[str, Document]:
        return {d.url: d for d in self.documents}

    @cached_property
    def by_title(self) -> dict[str, Document]:
        return {d.title: d for d in self.documents}

    def spec_json(self) -> str:
        return json.dumps(self.spec, sort_keys=True)
