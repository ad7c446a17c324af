"""MASS: rewriter -> retrieval -> reranker -> answerer, the multi-agent search system of MHGPO (MMOA-RAG design).

| | |
|---|---|
| Creation | `llm_marl_envs.mass_v4.env()` / `pettingzoo.make("aec", "llm_marl/MASS-v4")` |
| Agents | `rewriter`, `reranker`, `answerer` (mode "mas"); `answerer` alone with a search action (mode "single") |
| Turn order | rewriter, (retrieval by the environment), reranker, answerer: three steps; single: up to `max_single_turns` |
| Observation | `{"messages": [chat in OpenAI format], "turn": int}` |
| Action | the role's raw reply (`str`) |
| Parallel | no (each role reads the previous one's output) |

Papers: MHGPO (G. Chen et al., "Heterogeneous Group-Based Reinforcement Learning for LLM-based
Multi-Agent Systems": the three-agent system, its prompts (appendix
"Agent Prompts"), Eq. 4 reward back-propagation) and MMOA-RAG (Y. Chen et al. 2025,
arXiv:2501.15228: the output rules, the passage split and the penalties, which MHGPO follows).

Arguments: `mode` ("mas" | "single"), `hops` (2 | 3 | 4 | None = a uniform mix), `corpus_seed`
(the mini-wiki, default 0), `dataset` (a MuSiQue/HotpotQA file, folder or Hub id instead, see `search.loaders`), `backend` ("bm25" |
"live"), `transport` ("direct" default, "subprocess" = the MCP server, for real runs; see
`deep_search.env`), `runtime` (a `SearchRuntime` to share), `max_single_turns` (default 5),
`single_passages` (passages per search of the single agent, default 5), `reranker_penalty`
(default -1 as in MMOA-RAG; MHGPO's appendix states -0.5), `render_mode`, `sandbox` (ignored).
Questions: the mini-wiki (`llm_marl_envs.search.miniwiki`, fictional, offline) by default, drawn
per (split, seed); a dataset file's records are assigned to train/val/test by content hash like
generated questions (60/20/20), and `options={"instance": question}` plays a given record.

Workflow (mas). The rewriter writes up to 4 sub-questions; the environment retrieves 10 passages in
total, split across the sub-queries as 1:[10], 2:[5,5], 3:[4,3,3], 4:[3,3,2,2] (a passage already
taken by an earlier sub-query is skipped and the next one of that ranking used, so the 10 are
distinct); the reranker sees `Document0`...`Document9` (title and passage) and selects ids; the
answerer sees the selected passages (renumbered `Document 0`..., in the reranker's order) and answers.

Example observation (reranker, passages shortened):

    [{"role": "system", "content": "You are a helpful, respectful, and honest assistant. Your task is to identify
      and output the IDs ... Write them as Document0,Document4,... (comma-separated, each ID once)."},
     {"role": "user", "content": "Question is: In which city was the director of The Copper Compass born?\\n\\n
      Document0: {title: The Copper Compass, snippet: The Copper Compass is a 2012 western film ...}\\n...
      \\n\\nDo not output anything else."}]

Action grammar. Rewriter: `### Who directed The Copper Compass?; In which city was #1 born? ###`
(one sub-question per line is accepted too). Reranker: `Document0,Document4` (`Document 0, Document 4`
and bare ids `0,4` accepted). Answerer: the short answer (an `Answer:` prefix is stripped). Single agent (Search-R1
style): `<search> query </search>` (the top `single_passages` passages come back in
`<information>`) or `<answer> short answer </answer>`, which ends the episode.

Rewards (MMOA-RAG; MHGPO Eq. 4: R_k = R_shared + R_k^spe), λ = 1, penalties in `penalty`:

| term | who | value |
|---|---|---|
| R_shared | all three roles | token F1 of the answer against the answer and aliases (HotpotQA F1: a yes/no answer scores 1 or 0), delivered at the answerer's step |
| R_spe | rewriter | -0.5 if more than 4 sub-questions, more than 300 characters, none parsed, or one that cannot be searched |
| R_spe | reranker | -1 if malformed, an id out of range, an id repeated, or no id while passages were shown (`reranker_penalty`) |
| R_spe | answerer | -1 if more than 30 words |
| single | answerer | F1 + (-1 if over 30 words) at the answer; 0 for each search |

At its own step the rewriter and the reranker receive their penalty (team 0: the answer is not
known yet); at the answerer's step the shared F1 is delivered to all three (AEC rewards), and the
upstream roles' infos are updated to their final breakdown (team = F1, penalty = their own, reward
= F1 + penalty, their return for the episode). Everyone's infos get `em`, `f1`, `answer`, `gold`.

Infos record what each role consumed, so rewards can be back-propagated along it (MHGPO Eq. 4):
`consumed` = [{"agent", "turn", "reply_sha1"}] of the upstream outputs read, plus the content:
the reranker's `documents` (title, url, sub_query of each of the 10) and the answerer's
`selected` (ids and titles it read). The rewriter's infos hold its `sub_queries` (those searched)
and `unsearchable` (those refused).

Unsearchable sub-questions (MMOA-RAG's format penalty, extended; `mass.parse`): a sub-question
with only stop words ("what is the") or that is not valid query text (over 1,000 characters, lone
surrogates, control characters) would retrieve nothing. It is a malformed rewrite: -0.5, and it is
not searched; its passages go to the searchable sub-questions (the original question when none is
left), so the reranker is still shown 10 passages. When retrieval returns no passage at all (the
backend found or returned nothing), the reranker is told so and `None` (or an empty reply) is the
right selection, with no penalty; v0 penalised every reply of a reranker shown no passage.

Termination: the answer ends the episode (terminated when EM = 1, `success=True`; else truncated).
The single agent's last turn is final (the search result or format error before it says so; a
`<search>` there ends the episode without an answer); with `max_single_turns=1` its system prompt
offers no search.

Version history:
- v4: with `max_single_turns=1` the single agent's system prompt offers no search; v3 told it it
  could search "up to 0 searches" and how, on its only turn, where a search ended the episode with
  no answer (F1 0). A format error just before the final turn says the next turn is final, as a
  search result there does (v3 did not). Every other observation and reward is v3's.
- v3: the shared F1 follows HotpotQA's rule for yes/no answers: where the answer or the prediction is
  `yes`, `no` or `noanswer`, F1 is 1 when they are equal and 0 otherwise; in v2 the answer "yes no"
  earned F1 2/3 on every yes/no question (HotpotQA's comparison questions), and "yes, it is" 1/2.
- v2: the reranker's ids may be written with a space, `Document 0, Document 4` (as the answerer's
  documents are numbered); v1 split the reply at the space and penalised it -1 with nothing selected.
- v1: an unsearchable sub-question is penalised and not searched (v0: stop-word-only sub-queries
  took their share of the 10 passages and retrieved none, unpenalised); a reranker shown no
  passage is right to select none (v0: penalised whatever it wrote) and its prompt says so;
  reranker and rewriter errors list at most 5 problems.
- v0: initial release.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal


from ..core.base import Message, Play, TextAECEnv
from ..core.clock import tool_wait
from ..core.rewards import RewardBreakdown
from ..search.corpus import Question
from ..search.runtime import SearchRuntime
from ..search.source import QuestionSource, SearchSourced
from ..search.text import exact_match, token_f1
from ..search.tools import ToolResult
from . import prompts
from .parse import (PASSAGES, RERANKER_PENALTY, SPLITS, parse_answer, parse_rewrite, parse_selection,
                    parse_single)

Mode = Literal["mas", "single"]
LAMBDA = 1.0
"""The reward is the shared F1 plus penalties: no local convex mix."""
PASSAGE_CHARS = 1_000
"""Longest passage shown (mini-wiki pages are shorter and are shown whole)."""


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


class raw_env(SearchSourced, TextAECEnv):
    metadata = {"render_modes": ["human", "ansi"], "name": "mass_v4", "is_parallelizable": False}
    instance_namespace = "mass"

    def __init__(self, mode: Mode = "mas", hops: int | None = None, corpus_seed: int = 0, dataset: str | None = None,
                 backend: str = "bm25", transport: str = "direct", runtime: SearchRuntime | None = None,
                 max_single_turns: int = 5, single_passages: int = 5, reranker_penalty: float = RERANKER_PENALTY,
                 render_mode: str | None = None, sandbox: Any = None):
        if mode not in ("mas", "single"):
            raise ValueError(f"mode must be 'mas' or 'single', got {mode!r}")
        if not isinstance(max_single_turns, int) or max_single_turns < 1:
            raise ValueError(f"max_single_turns must be an int >= 1, got {max_single_turns!r}")
        if not isinstance(single_passages, int) or not 1 <= single_passages <= 20:
            raise ValueError(f"single_passages must be an int in [1, 20], got {single_passages!r}")
        if reranker_penalty > 0:
            raise ValueError(f"reranker_penalty is a penalty: use a value <= 0, got {reranker_penalty}")
        self.mode = mode
        self.max_single_turns = max_single_turns
        self.single_passages = single_passages
        self.reranker_penalty = float(reranker_penalty)
        self.source = QuestionSource(hops=hops, corpus_seed=corpus_seed, dataset=dataset, backend=backend,
                                     transport=transport, runtime=runtime, snippet_chars=PASSAGE_CHARS)
        roles = ("rewriter", "reranker", "answerer") if mode == "mas" else ("answerer",)
        super().__init__(roles, max_turns=3 if mode == "mas" else max_single_turns, render_mode=render_mode)

    # ------------------------------------------------------------------ episode state
    def _start(self) -> None:
        q: Question = self.instance
        self.chats: dict[str, list[Message]] = {a: [] for a in self.possible_agents}
        self.steps: dict[str, dict[str, Any]] = {}
        """Per role: its turn, reply hash, parsed output and penalty (what downstream roles consumed)."""
        self.documents: list[dict[str, str]] = []
        self.selected: list[int] = []
        self.retrieval_errors: list[dict[str, Any]] = []
        self.answer: str | None = None
        if self.mode == "mas":
            self.chats["rewriter"] = [{"role": "system", "content": prompts.REWRITER_SYSTEM},
                                      {"role": "user", "content": prompts.rewriter_user(q.question)}]
        else:
            self.single_searches: list[dict[str, Any]] = []
            self.chats["answerer"] = [
                {"role": "system", "content": prompts.single_system(self.max_single_turns, self.single_passages)},
                {"role": "user", "content": prompts.single_user(q.question)}]

    def _messages(self, agent: str) -> list[Message]:
        return [dict(m) for m in self.chats[agent]]

    def _render_state(self) -> str:
        q: Question = self.instance
        lines = [f"question ({q.n_hops} hops): {q.question}"]
        if "rewriter" in self.steps:
            lines.append(f"sub-queries: {list(self.steps['rewriter']['sub_queries'])}")
        if self.documents:
            lines.append("passages: " + ", ".join(f"{i}:{d['title']}" for i, d in enumerate(self.documents)))
        if "reranker" in self.steps:
            lines.append(f"selected: {self.selected}")
        if self.answer is not None:
            lines.append(f"answer {self.answer!r}; gold {q.answer!r}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ retrieval
    @staticmethod
    def _retrieval_calls(sub_queries: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
        return [("search", {"query": q, "k": min(20, n + PASSAGES)}) for q, n in zip(sub_queries, SPLITS[len(sub_queries)])]

    def _retrieve(self, sub_queries: tuple[str, ...]) -> list[dict[str, str]]:
        """10 distinct passages split across the sub-queries (MMOA-RAG: 1:[10], 2:[5,5], 3:[4,3,3], 4:[3,3,2,2])."""
        quota = SPLITS[len(sub_queries)]
        with tool_wait():
            results = self.runtime.call_many(self._retrieval_calls(sub_queries))
        taken: set[str] = set()
        out: list[dict[str, str]] = []
        for query, n, result in zip(sub_queries, quota, results):
            for hit in result.hits:
                if n == 0:
                    break
                if hit.url in taken:
                    continue
                taken.add(hit.url)
                out.append({"title": hit.title, "url": hit.url, "text": hit.snippet, "sub_query": query})
                n -= 1
        self.retrieval_errors = [r.to_json() for r in results if not r.ok]
        return out

    @staticmethod
    def _shown(docs: list[dict[str, str]]) -> list[tuple[str, str]]:
        return [(d["title"], d["text"]) for d in docs]

    def _consumed(self, *agents: str) -> list[dict[str, Any]]:
        return [{"agent": a, "turn": self.steps[a]["turn"], "reply_sha1": self.steps[a]["reply_sha1"]} for a in agents if a in self.steps]

    def masked_reply(self, agent: str) -> str:
        """Ablation baseline (Shapley "masked propagation"): the role passes nothing on. A masked rewriter
        writes no sub-question (retrieval falls back to the question itself), a masked reranker selects no
        passage, a masked answerer gives no answer."""
        return ""

    # ------------------------------------------------------------------ steps
    def planned_calls(self, agent: str, reply: str) -> list[tuple[Any, tuple[Any, ...]]]:
        """The searches this reply makes: the rewriter's retrieval, or the single agent's search."""
        if self.mode == "single":
            action = parse_single(reply)
            if action is None or action[0] != "search" or self.turn >= self.max_single_turns - 1:
                return []
            return [(self.runtime, ("search", {"query": action[1], "k": self.single_passages}))]
        if agent != "rewriter":
            return []
        return [(self.runtime, call) for call in self._retrieval_calls(parse_rewrite(reply, self.instance.question).sub_queries)]

    def _play(self, agent: str, reply: str) -> Play:
        turn = self.turn
        self.turn += 1
        self.chats[agent].append({"role": "assistant", "content": reply})
        if self.mode == "single":
            return self._single(reply, turn)
        if agent == "rewriter":
            return self._rewriter(reply, turn)
        if agent == "reranker":
            return self._reranker(reply, turn)
        return self._answerer(reply, turn)

    def _rewriter(self, reply: str, turn: int) -> Play:
        q: Question = self.instance
        rewrite = parse_rewrite(reply, q.question)
        self.documents = self._retrieve(rewrite.sub_queries)
        self.steps["rewriter"] = {"turn": turn, "reply_sha1": _sha1(reply), "sub_queries": list(rewrite.sub_queries),
                                  "written": rewrite.written, "penalty": rewrite.penalty}
        self.chats["reranker"] = [{"role": "system", "content": prompts.reranker_system(q.question)},
                                  {"role": "user", "content": prompts.reranker_user(q.question, self._shown(self.documents))}]
        details = {"sub_queries": list(rewrite.sub_queries), "written": rewrite.written,
                   "unsearchable": list(rewrite.unsearchable), "retrieval_errors": list(self.retrieval_errors)}
        return Play(RewardBreakdown(0.0, lam=LAMBDA, penalty=rewrite.penalty), next_agent="reranker",
                    parse_error=rewrite.error, details=details)

    def _reranker(self, reply: str, turn: int) -> Play:
        q: Question = self.instance
        selection = parse_selection(reply, len(self.documents))
        penalty = self.reranker_penalty if selection.error else 0.0
        self.selected = list(selection.ids)
        self.steps["reranker"] = {"turn": turn, "reply_sha1": _sha1(reply), "selected": list(selection.ids), "penalty": penalty}
        shown = [self.documents[i] for i in selection.ids]
        self.chats["answerer"] = [{"role": "system", "content": prompts.ANSWERER_SYSTEM},
                                  {"role": "user", "content": prompts.answerer_user(q.question, self._shown(shown))}]
        details = {"consumed": self._consumed("rewriter"), "selected": list(selection.ids),
                   "documents": [{k: d[k] for k in ("title", "url", "sub_query")} for d in self.documents]}
        return Play(RewardBreakdown(0.0, lam=LAMBDA, penalty=penalty), next_agent="answerer",
                    parse_error=selection.error, details=details)

    def _answerer(self, reply: str, turn: int) -> Play:
        q: Question = self.instance
        answer = parse_answer(reply)
        self.answer = answer.text
        em, f1 = exact_match(answer.text, q.golds), token_f1(answer.text, q.golds)
        scores = {"answer": answer.text, "gold": q.answer, "em": em, "f1": f1}
        # The shared reward reaches the upstream roles now (MHGPO Eq. 4 / MMOA-RAG shared F1).
        for role in ("rewriter", "reranker"):
            step = self.steps[role]
            self.rewards[role] = f1
            self.infos[role] = {**self.infos[role], **RewardBreakdown(f1, lam=LAMBDA, penalty=step["penalty"]).to_info(),
                                "delivered_reward": f1, **scores}
        details = {"consumed": self._consumed("reranker", "rewriter"),
                   "selected": [{"id": i, "title": self.documents[i]["title"]} for i in self.selected],
                   "words": answer.words, "qid": q.qid, "hops": q.n_hops, **scores}
        return Play(RewardBreakdown(f1, lam=LAMBDA, penalty=answer.penalty), next_agent=None, success=em >= 1.0,
                    parse_error=answer.error, details=details)

    def _single(self, reply: str, turn: int) -> Play:
        q: Question = self.instance
        final = turn >= self.max_single_turns - 1
        action = parse_single(reply)
        if action is not None and action[0] == "search" and not final:
            result: ToolResult = self.runtime.search(action[1], self.single_passages)
            docs = [(h.title, h.snippet) for h in result.hits] if result.ok else []
            self.single_searches.append({"turn": turn, "query": action[1], "status": result.status,
                                         "results": [h.title for h in result.hits]})
            text = prompts.information(docs, final=turn + 1 >= self.max_single_turns - 1)
            if not result.ok:
                text = f"<information>\n{result.render()}\n</information>"
            self.chats["answerer"].append({"role": "user", "content": text})
            return Play(RewardBreakdown(0.0, lam=LAMBDA), next_agent="answerer", details={"search": self.single_searches[-1]})
        if action is None and not final:
            error = "expected <search> query </search> or <answer> answer </answer>"
            self.chats["answerer"].append({"role": "user", "content": prompts.format_error(error, turn + 1 >= self.max_single_turns - 1)})
            return Play(RewardBreakdown(0.0, lam=LAMBDA), next_agent="answerer", parse_error=error)
        text = action[1] if action is not None and action[0] == "answer" else ""
        answer = parse_answer(text)
        self.answer = answer.text
        em, f1 = exact_match(answer.text, q.golds), token_f1(answer.text, q.golds)
        error = answer.error if action is not None and action[0] == "answer" else "no <answer> on the final turn"
        details = {"answer": answer.text, "gold": q.answer, "em": em, "f1": f1, "words": answer.words,
                   "searches": list(self.single_searches), "qid": q.qid, "hops": q.n_hops}
        return Play(RewardBreakdown(f1, lam=LAMBDA, penalty=answer.penalty), next_agent=None, success=em >= 1.0,
                    parse_error=error, details=details)
