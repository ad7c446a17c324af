"""Where a search environment's questions and its search runtime come from (shared by forks)."""

from __future__ import annotations

import numbers
from collections import Counter
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from ..core.instances import split_of
from .corpus import Corpus, Question
from .miniwiki import MAX_HOPS, MIN_HOPS, MiniWiki, MiniWikiConfig, build
from .runtime import TRANSPORTS, SearchRuntime, shared_runtime

BACKENDS = ("bm25", "live")


@lru_cache(maxsize=4)
def _dataset(path: str) -> Corpus:
    from .loaders import load_dataset  # noqa: PLC0415

    return load_dataset(path)


class QuestionSource:
    """Questions (mini-wiki or a MuSiQue/HotpotQA file) plus the runtime that searches their corpus.

    Immutable after construction; `fork()` shares it (it is one of the env's shared runtimes).
    """

    def __init__(self, *, hops: int | None = None, corpus_seed: int = 0, dataset: str | None = None,
                 backend: str = "bm25", transport: str = "direct", runtime: SearchRuntime | None = None,
                 snippet_chars: int = 240):
        if hops is not None and not (isinstance(hops, int) and MIN_HOPS <= hops <= MAX_HOPS):
            raise ValueError(f"hops must be an int between {MIN_HOPS} and {MAX_HOPS}, or None for a mix; got {hops!r}")
        if backend not in BACKENDS:
            raise ValueError(f"unknown search backend {backend!r}; use 'bm25' (offline, default) or 'live' (ddgs)")
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown search transport {transport!r}; use one of {', '.join(TRANSPORTS)}")
        if runtime is not None and not isinstance(runtime, SearchRuntime):
            raise ValueError(f"runtime must be a SearchRuntime to share (or None), got {type(runtime).__name__}; "
                             "transport= and backend= choose how a new one searches")
        if isinstance(corpus_seed, bool) or not isinstance(corpus_seed, numbers.Integral) or corpus_seed < 0:
            raise ValueError(f"corpus_seed must be an int >= 0, got {corpus_seed!r}")
        if backend == "live" and dataset is None:
            raise ValueError("the live backend searches the real web, where the fictional mini-wiki does not exist: "
                             "pass dataset=<MuSiQue or HotpotQA file> with backend='live', or use backend='bm25'")
        self.hops = hops
        self.wiki: MiniWiki | None = None
        if dataset is None:
            self.wiki = build(MiniWikiConfig(seed=int(corpus_seed)))
            self.corpus = self.wiki.corpus
            self.questions: tuple[Question, ...] = ()
        else:
            self.corpus = _dataset(str(dataset))
            self.questions = tuple(q for q in self.corpus.questions if hops is None or q.n_hops == hops)
            if not self.questions:
                raise ValueError(f"{dataset}: no questions" + (f" with {hops} hops" if hops else ""))
        spec: dict[str, Any] = ({"backend": "bm25", "corpus": self.corpus.spec, "snippet_chars": int(snippet_chars)}
                                if backend == "bm25" else {"backend": "live"})
        self.runtime = runtime if runtime is not None else shared_runtime(spec, transport)

    def __deepcopy__(self, memo: dict) -> QuestionSource:
        return self

    @cached_property
    def split_sizes(self) -> Counter[str]:
        """How many of the dataset's questions each split holds (by content hash, as `draw` is filtered)."""
        return Counter(split_of(q.key()) for q in self.questions)

    def draw(self, rng: np.random.Generator) -> Question:
        if self.wiki is not None:
            return self.wiki.sample_question(rng, self.hops)
        return self.questions[int(rng.integers(len(self.questions)))]


class SearchSourced:
    """Mixin for environments whose questions and search tools come from `self.source`
    (deep_search, mass): forks share the source and its search runtime (one MCP session)."""

    source: QuestionSource

    @property
    def runtime(self) -> Any:
        return self.source.runtime

    def _shared_runtimes(self) -> list[Any]:
        return [self.source, self.source.runtime]

    def _make_instance(self, rng: np.random.Generator) -> Any:
        source = self.source
        if source.wiki is None and not source.split_sizes[self.split]:
            # Else every draw is rejected for its split: 2,000 of them, then advice about grids that does not apply.
            raise ValueError(f"the dataset has no {self.split!r} questions ({len(source.questions)} in all; splits are assigned "
                             "by the hash of each question): use a larger dataset, another split, or options={'instance': ...}")
        return source.draw(rng)

    def dataset_instances(self, split: str | None = None) -> list[Question] | None:
        """The dataset's questions (of one split, by content hash, or all, in file order); None for the mini-wiki."""
        if self.source.wiki is not None:
            return None
        return [q for q in self.source.questions if split is None or split_of(q.key()) == split]
