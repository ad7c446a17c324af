"""MMOA-RAG's output rules for the three MASS roles, as pure parsers with their penalties.

| role | output | penalty (agent-specific reward R_spe) |
|---|---|---|
| rewriter | `### q1; q2; ... ###` (or one sub-question per line) | -0.5 if more than 4 sub-questions, more than 300 characters, none, or one that cannot be searched |
| reranker | `Document0,Document4,...` (`Document 0, Document 4` and bare ids `0,4` accepted) | -1 if malformed, an id out of range, or an id repeated (or none while there are documents) |
| answerer | a short answer | -1 if longer than 30 words |

A sub-question that cannot be searched (only stop words, such as "what is the"; or not valid
query text: over 1,000 characters, lone surrogates, control characters) retrieves nothing: it is a
malformed output of the rewriter, so it is penalised and not searched, and the passages go to the
searchable ones (the original question when none is left). When retrieval returns no passage at
all (the backend found nothing or failed), the reranker has nothing to select: an empty reply (or
`None`) is then the right output and earns no penalty, and any id is out of range.

Each parser returns what the next agent consumes plus the penalty and the error (None when the
output follows the rule); nothing here raises on model text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.text import first_tagged
from ..search.backends import ToolInputError, check_query
from ..search.text import tokenize

MAX_SUB_QUERIES = 4
MAX_REWRITE_CHARS = 300
MAX_ANSWER_WORDS = 30
REWRITER_PENALTY = -0.5
RERANKER_PENALTY = -1.0
ANSWERER_PENALTY = -1.0
PASSAGES = 10
SPLITS: dict[int, tuple[int, ...]] = {1: (10,), 2: (5, 5), 3: (4, 3, 3), 4: (3, 3, 2, 2)}
"""MMOA-RAG: the 10 retrieved passages are split across the sub-queries."""

_BLOCK = re.compile(r"###(.*?)(?:###|$)", re.S)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)]|<\s*query\d*\s*>|query\s*\d+\s*:)\s*", re.I)
_ID = re.compile(r"^(?:document)?(\d{1,4})$", re.I)
_SPACED_ID = re.compile(r"\b(document)\s+(?=\d)", re.I)
"""`Document 4` (the answerer's numbering, and common model output) is the id Document4: the space is
closed before the reply is split into ids at whitespace, commas and semicolons."""


@dataclass(frozen=True)
class Rewrite:
    sub_queries: tuple[str, ...]
    """The sub-queries used for retrieval: the searchable ones among the first 4 written (the
    original question when none is left)."""
    written: int
    """How many sub-queries the rewriter wrote."""
    penalty: float
    error: str | None
    unsearchable: tuple[str, ...] = ()
    """Sub-queries among the first 4 that were not searched (see the module docstring)."""


def unsearchable_reason(query: str) -> str | None:
    """Why `query` cannot be searched, or None when it can."""
    try:
        check_query(query)
    except ToolInputError as e:
        return str(e)
    if not tokenize(query):
        return "it has no searchable words (only stop words)"
    return None


def parse_rewrite(text: str, question: str) -> Rewrite:
    m = _BLOCK.search(text)
    if m:
        parts = m.group(1).split(";")
    else:
        parts = [line for line in text.splitlines()]
    queries = []
    for part in parts:
        q = _BULLET.sub("", part).strip().strip("<>").strip()
        if q:
            queries.append(q)
    errors = []
    if not queries:
        errors.append("no sub-questions found (expected ### q1; q2 ###); the original question was searched")
    if len(queries) > MAX_SUB_QUERIES:
        errors.append(f"{len(queries)} sub-questions (at most {MAX_SUB_QUERIES}); the first {MAX_SUB_QUERIES} were searched")
    if len(text.strip()) > MAX_REWRITE_CHARS:
        errors.append(f"{len(text.strip())} characters (at most {MAX_REWRITE_CHARS})")
    searched, unsearchable = [], []
    for i, query in enumerate(queries[:MAX_SUB_QUERIES], 1):
        reason = unsearchable_reason(query)
        if reason is None:
            searched.append(query)
        else:
            unsearchable.append(query)
            errors.append(f"sub-question {i} was not searched: {reason}")
    if queries and not searched:
        errors.append("no searchable sub-question; the original question was searched")
    used = tuple(searched) or (question,)
    return Rewrite(used, len(queries), REWRITER_PENALTY if errors else 0.0, _summary(errors), tuple(unsearchable))


@dataclass(frozen=True)
class Selection:
    ids: tuple[int, ...]
    """Valid, in-range ids in the reranker's order, each once (what the answerer reads)."""
    penalty: float
    error: str | None


_NONE = re.compile(r"[\s.,;:!'\"`()\[\]]*(?:none[\s.,;:!'\"`()\[\]]*)?", re.I)
"""An empty selection: nothing, or the word None."""


def parse_selection(text: str, n_documents: int) -> Selection:
    if n_documents == 0 and _NONE.fullmatch(text):
        return Selection((), 0.0, None)  # nothing was retrieved: selecting nothing is right
    tokens = [t for t in re.split(r"[\s,;]+", _SPACED_ID.sub(r"\1", text).strip()) if t]
    ids: list[int] = []
    errors = []
    for token in tokens:
        m = _ID.match(token.strip(".[]()'\"`"))
        if m is None:
            shown = token if len(token) <= 20 else token[:20] + "..."
            errors.append(f"unexpected text {shown!r}")
            break
        i = int(m.group(1))
        if i >= n_documents:
            shown = f"Document0-Document{n_documents - 1}" if n_documents else "no document was retrieved: reply None"
            errors.append(f"Document{i} is out of range ({shown})")
        elif i in ids:
            errors.append(f"Document{i} repeated")
        else:
            ids.append(i)
    if not tokens:
        errors.append("no document ids (expected e.g. Document0,Document4)")
    return Selection(tuple(ids), RERANKER_PENALTY if errors else 0.0, _summary(errors))


def _summary(errors: list[str], shown: int = 5) -> str | None:
    """The first few errors (a runaway reply repeats one id thousands of times)."""
    if not errors:
        return None
    more = f"; and {len(errors) - shown} more" if len(errors) > shown else ""
    return "; ".join(errors[:shown]) + more


@dataclass(frozen=True)
class Answer:
    text: str
    words: int
    penalty: float
    error: str | None


def parse_answer(text: str) -> Answer:
    answer = re.sub(r"^\s*(?:final\s+)?answer\s*[:：]\s*", "", text.strip(), flags=re.I).strip()
    words = len(answer.split())
    if words > MAX_ANSWER_WORDS:
        return Answer(answer, words, ANSWERER_PENALTY, f"answer has {words} words (at most {MAX_ANSWER_WORDS})")
    if not answer:
        return Answer(answer, 0, 0.0, "empty answer")
    return Answer(answer, words, 0.0, None)


def parse_single(text: str) -> tuple[str, str] | None:
    """Single agent (Search-R1 format): ("answer", text) or ("search", query); None when neither."""
    answer = first_tagged(text, "answer")
    if answer is not None:
        return "answer", answer.strip()
    search = first_tagged(text, "search")
    if search is not None and search.strip():
        return "search", search.strip()
    return None
