"""MASS oracle: decomposes with the mini-wiki's ground truth, selects the gold passages, reads the answer.

- rewriter: parses the question with the generator's grammar and walks the generator's knowledge
  base (`miniwiki.build(config)`, the same seeded world the environment searches) to write the
  resolved sub-questions, `### Who directed X?; In which city was Y born? ###` (all sub-queries
  are retrieved at once, so they must already name the intermediate entities);
- reranker: selects the passages whose titles are the hops' subjects, in hop order;
- answerer: chains through the selected passages, reading each hop's fact (`extract_fact`).
- single agent (`<search>`/`<answer>`): searches each hop's resolved question in turn, reading the
  intermediate answers from the returned passages, then answers.

It never reads the environment's answer; corpus_seed must match the environment's (default 0).
It plays mini-wiki questions only: a MuSiQue/HotpotQA question (`dataset=`, or a record given as
`options={"instance": ...}`) is outside the grammar and the world, and the oracle refuses it with a
ValueError rather than answering "unknown" to every question.
"""

from __future__ import annotations

import re
from typing import Any

from llm_marl_envs.search.miniwiki import RELATIONS, MiniWikiConfig, build, extract_fact, parse_question

from ..base import Agent
from .deep_search import not_mini_wiki

_DOC = re.compile(r"^Document ?(?P<id>\d+): \{title: (?P<title>.*?), snippet: (?P<text>.*)\}$", re.M)
_QUESTION = re.compile(r"(?:Original question is|Question is:|Question:)\s*(?P<q>.+?\?)", re.S)
UNKNOWN = "unknown"
MAX_CHARS = 300


def documents(text: str) -> list[tuple[int, str, str]]:
    return [(int(m.group("id")), m.group("title"), m.group("text")) for m in _DOC.finditer(text)]


def chain(start: str, rels: list[str], docs: list[tuple[int, str, str]]) -> tuple[list[str], str | None]:
    """Read hop after hop from the passages: (subjects resolved so far, answer or None)."""
    pages = {title: text for _, title, text in docs}
    subject, subjects = start, []
    for rel in rels:
        subjects.append(subject)
        if subject not in pages:
            return subjects, None
        value = extract_fact(rel, pages[subject])
        if value is None:
            return subjects, None
        subject = value
    return subjects, subject


class MASSOracle(Agent):
    env_options = ("corpus_seed", "dataset")
    """Options of the environment the oracle must share (`make_oracle` takes them from the env's)."""

    def __init__(self, corpus_seed: int = 0, dataset: str | None = None):
        if dataset is not None:
            raise not_mini_wiki("mass", f"dataset={str(dataset)!r}")
        self.wiki = build(MiniWikiConfig(seed=corpus_seed))

    def _parsed(self, observation: dict[str, Any]) -> tuple[str, list[str]] | None:
        for m in observation["messages"]:
            if m["role"] == "user":
                q = _QUESTION.search(m["content"])
                if q:
                    question = " ".join(q.group("q").split())
                    parsed = parse_question(question)
                    if parsed is None:
                        raise not_mini_wiki("mass", f"the question {question[:80]!r}")
                    return parsed
        return None

    def _subjects(self, start: str, rels: list[str]) -> list[str]:
        """The hops' subjects, from the generator's ground truth."""
        entity = self.wiki.by_name.get(start)
        subjects = []
        for rel in rels:
            if entity is None:
                break
            subjects.append(entity.name)
            _, obj = self.wiki.value(entity.eid, rel)
            entity = self.wiki.entities[obj] if obj is not None else None
        return subjects

    def act(self, role: str, observation: dict[str, Any]) -> str:
        parsed = self._parsed(observation)
        system = observation["messages"][0]["content"] if observation["messages"] else ""
        if parsed is None:
            return {"rewriter": "### unknown ###", "reranker": "Document0"}.get(role, UNKNOWN)
        start, rels = parsed
        if role == "rewriter":
            subjects = self._subjects(start, rels)
            queries = [RELATIONS[r].question.format(s=s) for r, s in zip(rels, subjects)]
            text = "### " + "; ".join(queries) + " ###"
            if len(text) > MAX_CHARS:  # stay within MMOA-RAG's length rule: subject names alone
                text = "### " + "; ".join(subjects) + " ###"
            return text
        user = observation["messages"][-1]["content"]
        if role == "reranker":
            docs = documents(user)
            ids = [next(i for i, title, _ in docs if title == s) for s in self._subjects(start, rels)
                   if any(title == s for _, title, _ in docs)]
            return ",".join(f"Document{i}" for i in ids) or "Document0"
        if "<search>" in system:
            return self._single(start, rels, observation)
        _, answer = chain(start, rels, documents(user))
        return answer or UNKNOWN

    def _single(self, start: str, rels: list[str], observation: dict[str, Any]) -> str:
        seen = [d for m in observation["messages"] if m["role"] == "user" for d in documents(m["content"])]
        subjects, answer = chain(start, rels, seen)
        if answer is not None:
            return f"All hops are resolved.\n<answer> {answer} </answer>"
        hop = len(subjects) - 1
        query = RELATIONS[rels[hop]].question.format(s=subjects[-1])
        searched = sum(1 for m in observation["messages"] if m["role"] == "assistant" and query in m["content"])
        if searched:  # the page was not found by the question: search the name alone
            query = subjects[-1]
        return f"Hop {hop + 1}: I need to know: {query}\n<search> {query} </search>"
