"""Answer scoring and retrieval text helpers: SQuAD-style normalisation, EM, token F1, tokens, snippets.

Exact match and F1 follow the HotpotQA/MuSiQue evaluation scripts (lower-case, drop punctuation,
drop the articles a/an/the, collapse whitespace); a prediction is scored against the answer and
each alias and the best score is kept. As in HotpotQA's script, F1 gives no partial credit where
the prediction or the answer is `yes`, `no` or `noanswer`: they score 1 when equal, else 0.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_YES_NO = frozenset(("yes", "no", "noanswer"))
"""Answers HotpotQA's F1 scores as all or nothing (else "yes no" scores 2/3 on every yes/no question)."""

STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have he her his how in is it its of on or "
    "she that the their they this to was were what when where which who whom whose why with".split()
)
"""Query/document words BM25 ignores (question words carry no evidence in a corpus)."""


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer or alias, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in golds if normalize_answer(g)))


def _f1(prediction: str, gold: str) -> float:
    pred_text, gold_text = normalize_answer(prediction), normalize_answer(gold)
    if (pred_text in _YES_NO or gold_text in _YES_NO) and pred_text != gold_text:
        return 0.0
    pred, ref = pred_text.split(), gold_text.split()
    if not pred or not ref:
        return float(pred == ref)
    common = Counter(pred) & Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: Iterable[str]) -> float:
    """Best token-level F1 of the prediction against the answer and its aliases (HotpotQA eval)."""
    return max((_f1(prediction, g) for g in golds), default=0.0)


def tokenize(text: str) -> list[str]:
    """BM25 tokens: lower-cased word characters without stopwords."""
    return [t for t in _WORD.findall(text.lower()) if t not in STOPWORDS]


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def snippet(text: str, query: str, max_chars: int = 240) -> str:
    """The whole passage when it fits in `max_chars`; else a query-focused extract: the sentence
    sharing most query tokens, then the sentences after it. Ties go to the earlier sentence."""
    if len(text) <= max_chars:
        return text
    sents = sentences(text)
    if not sents:
        return ""
    q = set(tokenize(query))
    scores = [len(q & set(tokenize(s))) for s in sents]
    best = max(range(len(sents)), key=lambda i: (scores[i], -i))
    out = sents[best]
    for extra in sents[best + 1:]:
        if len(out) + 1 + len(extra) > max_chars:
            break
        out += " " + extra
    return out if len(out) <= max_chars else out[: max_chars - 3].rstrip() + "..."
