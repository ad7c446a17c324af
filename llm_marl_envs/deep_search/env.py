"""Deep search: a planner delegates search subtasks to workers that search and browse over MCP (MATPO).

| | |
|---|---|
| Creation | `llm_marl_envs.deep_search_v3.env()` / `pettingzoo.make("aec", "llm_marl/DeepSearch-v3")` |
| Agents | `planner`, `worker_0` ... `worker_{W-1}` (mode "mas", W = `max_calls`); `planner` alone with the search tools (mode "single") |
| Turn order | planner; each valid `search_and_browse` call hands the turn to the next unused worker until it has written its summary; then the planner again |
| Observation | `{"messages": [chat in OpenAI format], "turn": int}` (turn = agent steps so far in the episode) |
| Action | the role's raw reply (`str`) |
| Parallel | no (the planner reads each worker's summary) |

Papers: MATPO (Mo et al., arXiv:2510.04678: prompts, `<use_mcp_tool>`
format, worker summary, reward) and SHARP (the same planner-worker
setting; per-worker credit by masking one worker, Eq. 11, which the records in `infos` support).

Arguments: `mode` ("mas" | "single"), `max_calls` (W, subtasks the planner may delegate; default 5;
the planner has W + 1 turns), `max_worker_turns` (M, tool calls per worker; default 5),
`max_single_turns` (turns of the single agent; default 12), `hops` (2 | 3 | 4 | None = a uniform
mix), `corpus_seed` (the mini-wiki, default 0), `dataset` (a MuSiQue/HotpotQA file, `save_to_disk`
folder or Hub id used instead of the mini-wiki, see `search.loaders`), `backend` ("bm25" offline default | "live": web search through ddgs,
pages read by a client that refuses non-public addresses, `search.webpage`), `transport` (how
tool calls reach the backend, below), `runtime` (a `SearchRuntime` to share instead), `judge`
(None, or a `JudgeConfig`/dict for an OpenAI-compatible LLM judge), `render_mode`, `sandbox`
(accepted for a uniform constructor and ignored: no code runs here).
`reset(seed, options={"split": "train"|"val"|"test", "instance": Question})`.
Questions: the mini-wiki (`llm_marl_envs.search.miniwiki`, fictional, offline) by default, drawn
per (split, seed); a dataset file's records are assigned to train/val/test by content hash like
generated questions (60/20/20), and `options={"instance": question}` plays a given record.

Search runtime and transport. Every environment asking for the same corpus and transport shares
one `SearchRuntime` per process, and forks share it too. `transport="subprocess"` runs the MCP
server (`llm_marl_envs.search.server`) as a child process with one persistent session: use it for
real runs (training, evaluation, the live backend), as MATPO/SHARP do. The default, `"direct"`,
calls the same tool code in-process without MCP: identical results and error messages, ~0.05 ms
instead of ~4-9 ms per call on a 2-core CPU, which keeps tests and 200-episode oracle checks
fast. `"inprocess"` runs the MCP server object in this process (for tests of the MCP layer).

Example observation (planner, first turn; system prompt shortened):

    [{"role": "system", "content": "In this environment you have access to a set of tools ... ## Server name:
      browsing_agent\\n### Tool name: search_and_browse ..."},
     {"role": "user", "content": "In which city was the director of The Copper Compass born?\\n\\nYou should follow
      the format instruction in the request strictly and wrap the final answer in \\\\boxed{}."}]

Action grammar. A tool call is a `<use_mcp_tool>` block (the first one in the reply is used):

    <use_mcp_tool>
    <server_name>browsing_agent</server_name>
    <tool_name>search_and_browse</tool_name>
    <arguments>
    {"subtask": "Who directed The Copper Compass?"}
    </arguments>
    </use_mcp_tool>

Workers call server `llm-marl-search`, tools `search` `{"query": str, "k": int (1-20, default 5)}`
and `fetch` `{"url": str}`. Arguments are checked before they leave the environment: a query has at
most 1,000 characters, a URL at most 2,048, and both must be text (no lone surrogates such as a
JSON `"\\ud800"` escape, no control characters); a call that breaks a rule is invalid and the
agent's (fmt 0), and the tool never sees it. A planner reply without a tool call is its final
answer: the content of the last `\\boxed{...}`, without LaTeX text wrappers (`\\boxed{\\text{Paris}}`
answers `Paris`, as do `\\textbf{}`, `\\mathrm{}`, `\\emph{}`...; the judge sees the same answer).
A worker reply without a tool call ends its tool phase; the worker is then asked for MATPO's summary (headings `## Conclusion`, `## Supporting
Information`, `## Observations`, `## Contribution to Main Task`) unless that reply already has all
four headings.
After M tool calls the summary is requested with the note that the worker ran out of calls. The
planner receives the summary (and only the summary) as the tool response.

Rewards (MATPO Sec. "Reward Function"): r = 0.9·acc + 0.1·fmt, i.e. `RewardBreakdown(team=acc,
terms={"fmt": fmt}, lam=0.9)`; the trainer reads acc (`team_reward`) and fmt (`local_reward`) from the
planner's final infos.

| term | who | value | coefficient |
|---|---|---|---|
| acc | planner, final step | normalised exact match of the boxed answer (LaTeX text wrappers such as `\\text{}` removed) against the answer and its aliases (when `judge` is set and exact match fails: the judge's verdict) | λ = 0.9 |
| fmt (mas) | planner, final step | 0.5·fmt_p + 0.5·fmt_w; fmt_p = valid planner calls / planner calls; fmt_w = mean over the workers that ran of valid calls / calls | 1 - λ = 0.1 |
| fmt (single) | planner, final step | valid tool calls / tool calls | 0.1 |
| fmt | intermediate planner step | 1 if this reply's call was valid, else 0 (team 0) | 0.1 |
| fmt | worker tool step | 1 if this call was valid, else 0 (team 0) | 0.1 |
| fmt | worker summary step | that worker's valid calls / calls (team 0) | 0.1 |

A call with no tool calls at all scores fmt 0 (SHARP Eq. 9: R_tool = 0 when T = 0), so a planner
that answers without delegating gets 0.9·acc, and acc is ~0 on the fictional corpus. A call is valid
when it parses, names the right server and tool, has valid arguments, and (workers) the tool did not
reject it (an unknown URL is invalid); a server crash or timeout is not the agent's fault and keeps
the call valid. Token F1, EM, acc, fmt_p, fmt_w and every call are in the planner's final infos.

Infos: each step's breakdown, `parse_error`, `turn`, `success`. A worker's summary step adds
`worker` = {agent, subtask, calls: [{tool, arguments, status, valid, error, results}], fmt, summary,
summary_valid, ran_out}; the planner's final step adds `answer`, `gold`, `em`, `f1`, `acc`,
`judge` ({correct, error}; None when no judge was asked), `fmt_p`, `fmt_w`, `planner_calls`, `workers` (all worker records, in call order) and `qid`.

Termination: the planner's final answer ends the episode (terminated when acc = 1, `success=True`;
else truncated). The planner's (W + 1)-th turn is always final: tools are no longer offered. The
single agent's last turn is final too (it is told so); with `max_single_turns=1` its only turn is,
and its system prompt offers no tools. A tool call on a final turn is an invalid call, not run.

Version history:
- v3: the judge is shown the answer's aliases with it (`Ground-truth answer: Kessling (also given as:
  Kessling town)`); in v2 it saw the answer alone, so a right answer given by an alias, which exact
  match accepts, could be judged wrong (acc 0). With `max_single_turns=1` the single agent's system
  prompt offers no tools (v2 offered the search tools on its only turn, where a call could not be
  followed by an answer and ended the episode without one). The judge is asked only about an answer
  exact match rejects (v2 asked it about every answer, and its INCORRECT overruled an exact match: acc 0
  for the gold answer itself). Every other configuration without a judge observes and earns what it did in v2.
- v2: the boxed answer's LaTeX text wrappers (`\\text{}`, `\\textbf{}`, `\\mathrm{}`, `\\emph{}`, ...) are
  removed before it is scored or judged; in v1 `\\boxed{\\text{Paris}}` scored acc 0 against the
  answer "Paris" (normalisation made it "textparis"), and a box holding only an empty wrapper was
  not an empty answer.
- v1: tool arguments are checked before they are sent (query and URL length limits; text only: a
  `\\ud800` escape in <arguments> makes the call invalid, for the planner's subtask too); in v0
  such calls could be valid, or (subprocess transport) crash the shared MCP session for every
  concurrent call without blaming anyone. A backend answer that is not a list of hits or a page
  is a server_error (v0: an exception out of `env.step`). With the live backend, `fetch` refuses
  non-http(s) URLs and hosts that resolve to loopback, private, link-local, multicast or reserved
  addresses, at every redirect hop (a tool_error: the agent's), and reads pages with its own
  guarded client (v0 fetched any URL through ddgs, 127.0.0.1 included).
- v0: initial release.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


from ..core.base import MASKED, Message, Play, TextAECEnv
from ..core.clock import tool_wait
from ..core.rewards import RewardBreakdown
from ..search.corpus import Question
from ..search.judge import JudgeConfig, judge
from ..search.runtime import SearchRuntime
from ..search.source import QuestionSource, SearchSourced
from ..search.text import exact_match, token_f1
from ..search.tools import SERVER_NAME, TOOL_SCHEMAS, ToolResult
from . import prompts
from .parse import ToolCall, extract_boxed, find_tool_call, missing_headings, unwrap_text_commands

LAMBDA = 0.9
"""MATPO: reward = 0.9·acc + 0.1·fmt."""
FMT = {"fmt": 1.0}
Mode = Literal["mas", "single"]
MAX_TOOL_RESPONSE_CHARS = 6_000
MAX_SUMMARY_CHARS = 4_000


@dataclass
class WorkerRun:
    """One `search_and_browse` call: the worker's fresh context and what it did."""

    agent: str
    subtask: str
    chat: list[Message] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    summarizing: bool = False
    ran_out: bool = False
    summary: str | None = None
    summary_valid: bool = False

    @property
    def fmt(self) -> float:
        """Valid calls / calls (0 without calls: SHARP Eq. 9)."""
        return sum(c["valid"] for c in self.calls) / len(self.calls) if self.calls else 0.0

    def record(self) -> dict[str, Any]:
        """JSON-friendly record for `infos` (everything but the chat)."""
        return {"agent": self.agent, "subtask": self.subtask, "calls": [dict(c) for c in self.calls], "fmt": self.fmt,
                "summary": self.summary, "summary_valid": self.summary_valid, "ran_out": self.ran_out}


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n[... truncated]"


class raw_env(SearchSourced, TextAECEnv):
    metadata = {"render_modes": ["human", "ansi"], "name": "deep_search_v3", "is_parallelizable": False}
    instance_namespace = "deep_search"

    def __init__(self, mode: Mode = "mas", max_calls: int = 5, max_worker_turns: int = 5, max_single_turns: int = 12,
                 hops: int | None = None, corpus_seed: int = 0, dataset: str | None = None, backend: str = "bm25",
                 transport: str = "direct", runtime: SearchRuntime | None = None, judge: JudgeConfig | dict | None = None,
                 render_mode: str | None = None, sandbox: Any = None):
        if mode not in ("mas", "single"):
            raise ValueError(f"mode must be 'mas' or 'single', got {mode!r}")
        for name, value in (("max_calls", max_calls), ("max_worker_turns", max_worker_turns), ("max_single_turns", max_single_turns)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        self.mode = mode
        self.max_calls = max_calls
        self.max_worker_turns = max_worker_turns
        self.max_single_turns = max_single_turns
        self.judge_config = JudgeConfig.from_any(judge)
        self.source = QuestionSource(hops=hops, corpus_seed=corpus_seed, dataset=dataset, backend=backend,
                                     transport=transport, runtime=runtime)
        if mode == "mas":
            self.delegating_role = "planner"
            roles = ("planner", *(f"worker_{i}" for i in range(max_calls)))
            budget = (max_calls + 1) + max_calls * (max_worker_turns + 1)
        else:
            roles, budget = ("planner",), max_single_turns
        super().__init__(roles, max_turns=budget, render_mode=render_mode)

    # ------------------------------------------------------------------ episode state
    def _start(self) -> None:
        q: Question = self.instance
        if self.mode == "mas":
            system = prompts.planner_system(self.max_calls)
        else:  # one turn only: it is the final one, where a tool's result could not be read
            system = prompts.single_system() if self.max_single_turns > 1 else prompts.answer_only_system()
        self.planner_chat: list[Message] = [{"role": "system", "content": system},
                                            {"role": "user", "content": prompts.question_message(q.question)}]
        self.planner_turns = 0
        self.planner_calls: list[dict[str, Any]] = []
        """MAS: search_and_browse attempts; single: search/fetch attempts."""
        self.workers: list[WorkerRun] = []
        self.answer: str | None = None

    def _messages(self, agent: str) -> list[Message]:
        if agent == "planner":
            return [dict(m) for m in self.planner_chat]
        i = int(agent.split("_")[1])
        return [dict(m) for m in self.workers[i].chat] if i < len(self.workers) else []

    def _render_state(self) -> str:
        q: Question = self.instance
        lines = [f"question ({q.n_hops} hops): {q.question}",
                 f"planner turns {self.planner_turns}, calls {len(self.planner_calls)}, workers run {len(self.workers)}"]
        for w in self.workers:
            lines.append(f"  {w.agent}: {w.subtask!r} -> {len(w.calls)} calls" + (", summary written" if w.summary is not None else ""))
        if self.answer is not None:
            lines.append(f"answer {self.answer!r}; gold {q.answer!r}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ steps
    def _play(self, agent: str, reply: str) -> Play:
        self.turn += 1
        if agent == "planner":
            return self._planner(reply) if self.mode == "mas" else self._single(reply)
        return self._worker(self.workers[int(agent.split("_")[1])], reply)

    def planned_calls(self, agent: str, reply: str) -> list[tuple[Any, tuple[Any, ...]]]:
        """The search or fetch call this reply makes (a worker's, or the single agent's), if valid."""
        if agent == "planner":
            if self.mode == "mas" or self.planner_turns >= self.max_single_turns - 1:
                return []
        elif self.workers[int(agent.split("_")[1])].summarizing:
            return []
        call = find_tool_call(reply)
        if call is None or call.error is not None or call.server != SERVER_NAME or call.tool not in TOOL_SCHEMAS:
            return []
        return [(self.runtime, (call.tool, call.arguments))]

    def _step_breakdown(self, valid: bool) -> RewardBreakdown:
        return RewardBreakdown(team=0.0, terms={"fmt": float(valid)}, coefficients=FMT, mask=1.0, lam=LAMBDA)

    def _planner(self, reply: str) -> Play:
        final_turn = self.planner_turns >= self.max_calls
        self.planner_turns += 1
        call = find_tool_call(reply)
        self.planner_chat.append({"role": "assistant", "content": reply})
        if call is None or final_turn:
            if call is not None:  # tools are no longer offered on the final turn
                self.planner_calls.append({**call.to_json(), "valid": False, "error": "tool call on the final turn"})
            return self._finish(reply)
        error = self._check_planner_call(call)
        self.planner_calls.append({**call.to_json(), "valid": error is None, "error": error})
        if error is not None:
            self.planner_chat.append({"role": "user", "content": f"Tool call error: {error}. Use the <use_mcp_tool> "
                                      f"format described in the system prompt.\n\n{self._budget_note()}"})
            return Play(self._step_breakdown(False), next_agent="planner", parse_error=error)
        run = WorkerRun(f"worker_{len(self.workers)}", call.arguments["subtask"].strip())
        run.chat = [{"role": "system", "content": prompts.worker_system(self.instance.question)},
                    {"role": "user", "content": prompts.subtask_message(run.subtask)}]
        self.workers.append(run)
        return Play(self._step_breakdown(True), next_agent=run.agent, details={"subtask": run.subtask})

    def _budget_note(self) -> str:
        """Subtask calls left = planner turns left before the final one (each call takes a turn)."""
        return prompts.calls_left_note(self.max_calls - self.planner_turns)

    @staticmethod
    def _check_planner_call(call: ToolCall) -> str | None:
        if call.error is not None:
            return call.error
        if call.server != prompts.PLANNER_SERVER:
            return f"unknown server {call.server!r}; use {prompts.PLANNER_SERVER}"
        if call.tool != prompts.PLANNER_TOOL:
            return f"unknown tool {call.tool!r}; use {prompts.PLANNER_TOOL}"
        subtask = call.arguments.get("subtask")
        if not isinstance(subtask, str) or not subtask.strip():
            return "arguments must be {\"subtask\": \"...\"} with a non-empty string"
        if set(call.arguments) != {"subtask"}:
            return f"unknown argument(s) {sorted(set(call.arguments) - {'subtask'})}; the only argument is subtask"
        return None

    def _search_call(self, call: ToolCall) -> tuple[dict[str, Any], ToolResult | None]:
        """Check and run a worker's (or the single agent's) search/fetch call; returns its record."""
        error = call.error
        if error is None and call.server != SERVER_NAME:
            error = f"unknown server {call.server!r}; use {SERVER_NAME}"
        if error is None and call.tool not in TOOL_SCHEMAS:
            error = f"unknown tool {call.tool!r}; use one of {', '.join(TOOL_SCHEMAS)}"
        if error is not None:
            return {**call.to_json(), "status": "parse_error", "valid": False, "error": error}, None
        with tool_wait():
            result = self.runtime.call(call.tool, call.arguments)
        record = {**result.to_json(), "server": call.server, "arguments": call.arguments,
                  "valid": result.status != "tool_error", "error": result.error or None}
        return record, result

    def _tool_response(self, record: dict[str, Any], result: ToolResult | None) -> str:
        if result is None:
            return f"Tool call error: {record['error']}. Use the <use_mcp_tool> format described in the system prompt."
        return _cap(result.render(), MAX_TOOL_RESPONSE_CHARS)

    def _worker(self, run: WorkerRun, reply: str) -> Play:
        run.chat.append({"role": "assistant", "content": reply})
        if run.summarizing:
            return self._deliver(run, reply)
        call = find_tool_call(reply)
        if call is None:
            if not missing_headings(reply):
                return self._deliver(run, reply)
            run.summarizing = True
            run.chat.append({"role": "user", "content": prompts.summary_request(self.instance.question, run.subtask, False)})
            return Play(RewardBreakdown(0.0, {"fmt": run.fmt}, FMT, mask=1.0, lam=LAMBDA), next_agent=run.agent)
        record, result = self._search_call(call)
        run.calls.append(record)
        response = self._tool_response(record, result)
        if len(run.calls) >= self.max_worker_turns:
            run.summarizing = run.ran_out = True
            response += "\n\n" + prompts.summary_request(self.instance.question, run.subtask, True)
        run.chat.append({"role": "user", "content": response})
        return Play(self._step_breakdown(record["valid"]), next_agent=run.agent,
                    parse_error=record["error"] if record["status"] == "parse_error" else None, details={"call": record})

    def _deliver(self, run: WorkerRun, reply: str) -> Play:
        """The worker's summary becomes the planner's tool response (the planner sees nothing else)."""
        missing = missing_headings(reply)
        run.summary, run.summary_valid = reply, not missing
        content = _cap(reply.strip() or "(the worker returned an empty summary)", MAX_SUMMARY_CHARS)
        self.planner_chat.append({"role": "user", "content": f"{content}\n\n{self._budget_note()}"})
        error = f"summary lacks heading(s): {', '.join(missing)}" if missing else None
        return Play(RewardBreakdown(0.0, {"fmt": run.fmt}, FMT, mask=1.0, lam=LAMBDA), next_agent="planner",
                    parse_error=error, details={"worker": run.record()})

    def _single(self, reply: str) -> Play:
        final_turn = self.planner_turns >= self.max_single_turns - 1
        self.planner_turns += 1
        self.planner_chat.append({"role": "assistant", "content": reply})
        call = find_tool_call(reply)
        if call is None or final_turn:
            if call is not None:
                self.planner_calls.append({**call.to_json(), "status": "parse_error", "valid": False,
                                           "error": "tool call on the final turn"})
            return self._finish(reply)
        record, result = self._search_call(call)
        self.planner_calls.append(record)
        response = self._tool_response(record, result)
        if self.planner_turns >= self.max_single_turns - 1:
            response += "\n\n" + prompts.final_turn_note()
        self.planner_chat.append({"role": "user", "content": response})
        return Play(self._step_breakdown(record["valid"]), next_agent="planner",
                    parse_error=record["error"] if record["status"] == "parse_error" else None, details={"call": record})

    def masked_reply(self, agent: str) -> str:
        """A worker's ablation (SHARP Eq. 11): a summary with MATPO's four headings and no content, so
        the worker's turn ends at once and the planner reads nothing from it."""
        if agent == "planner":
            return super().masked_reply(agent)
        return "\n\n".join(f"## {h}\n{MASKED}" for h in prompts.SUMMARY_HEADINGS)

    # ------------------------------------------------------------------ scoring
    def fmt_scores(self) -> tuple[float, float, float]:
        """(fmt, fmt_p, fmt_w): MATPO's format score and its planner / worker parts."""
        fmt_p = sum(c["valid"] for c in self.planner_calls) / len(self.planner_calls) if self.planner_calls else 0.0
        if self.mode == "single":
            return fmt_p, fmt_p, 0.0
        fmt_w = sum(w.fmt for w in self.workers) / len(self.workers) if self.workers else 0.0
        return 0.5 * fmt_p + 0.5 * fmt_w, fmt_p, fmt_w

    def _finish(self, reply: str) -> Play:
        q: Question = self.instance
        boxed = extract_boxed(reply)
        self.answer = unwrap_text_commands(boxed or "")  # \boxed{\text{Paris}} answers Paris
        em, f1 = exact_match(self.answer, q.golds), token_f1(self.answer, q.golds)
        acc, verdict = em, None
        if self.judge_config is not None and self.answer and not em:  # what exact match accepts is right: no judge overrules it
            ok, error = judge(self.judge_config, q.question, q.answer, self.answer, q.aliases)
            verdict = {"correct": ok, "error": error}
            if ok is not None:
                acc = float(ok)
        fmt, fmt_p, fmt_w = self.fmt_scores()
        details = {
            "answer": self.answer, "gold": q.answer, "em": em, "f1": f1, "acc": acc, "judge": verdict,
            "fmt_p": fmt_p, "fmt_w": fmt_w, "planner_calls": list(self.planner_calls),
            "workers": [w.record() for w in self.workers], "qid": q.qid, "hops": q.n_hops,
        }
        breakdown = RewardBreakdown(team=acc, terms={"fmt": fmt}, coefficients=FMT, mask=1.0, lam=LAMBDA)
        error = "no \\boxed{} answer" if boxed is None else "empty \\boxed{} answer" if not self.answer else None
        return Play(breakdown, next_agent=None, success=acc >= 1.0, parse_error=error, details=details)
