"""`TextAECEnv`: the PettingZoo AEC skeleton every llm-marl environment shares.

Agents are roles; an observation is the chat the role sees plus the turn index; an action is the
role's raw reply. A subclass supplies the task through five hooks (`_make_instance`, `_start`,
`_messages`, `_play`, `_render_state`); this class owns the PettingZoo bookkeeping (rewards,
cumulative rewards, terminations, truncations, infos, dead steps), seeding and splits, `fork()` and
rendering, so no environment re-implements them.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from pettingzoo import AECEnv

from .instances import Keyed, check_split, draw_instance
from .rewards import RewardBreakdown, zero_info
from .spaces import TextSpace, action_space, observation_space

MAX_STATE_CHARS = 1_000_000
"""Longest `state()` text: what one observation message holds, since the board is in the prompt too (a
300x300 Plan-Path grid renders to 90,000 characters; the default boards to a few hundred)."""

Message = dict[str, str]
_RENDER_TEXT_CAP = 2_000


MASKED = "[output masked]"
"""Text of a masked agent output in counterfactual replays."""


@dataclass
class Play:
    """What one agent's step did: its reward breakdown and where the episode goes next."""

    breakdown: RewardBreakdown
    next_agent: str | None
    """Who acts next; None ends the episode (success or turn budget exhausted)."""
    success: bool = False
    terminated: bool = False
    """The episode reached a terminal state of the task (e.g. the agents agreed) even without
    success. An ending with success or `terminated` is a termination; any other ending (the turn
    budget ran out) is a truncation."""
    parse_error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    """Extra, deterministic, JSON-friendly facts for `infos` (parsed action, execution status...)."""


class TextAECEnv(AECEnv):
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["human", "ansi"], "name": "text_env_v0", "is_parallelizable": False}
    instance_namespace: ClassVar[str] = "text_env"
    """Stable name mixed into instance seeds (kept across versions unless generation changes)."""
    fork_shared: ClassVar[tuple[str, ...]] = ("possible_agents", "observation_spaces", "action_spaces", "state_space",
                                              "instance", "max_turns", "render_mode", "split", "instance_seed", "turn",
                                              "success", "agent_selection", "_seed_rng_shared", "_last_scores",
                                              "_ended")
    """Attributes never changed in place (fixed for the episode or the env's life, or immutable values
    that a step replaces as a whole): `fork()` shares them instead of copying. A subclass adds its own
    (a grid, a BFS table...) by extending the tuple; whatever is not listed is deep-copied, so
    forgetting an entry costs time, never independence."""
    fork_shallow: ClassVar[tuple[str, ...]] = ("transcript", "agents", "rewards", "_cumulative_rewards", "terminations",
                                               "truncations")
    """Lists and dicts whose items are immutable (str, numbers, tuples of them, frozen records):
    `fork()` copies the container and shares the items."""
    has_global_state: ClassVar[bool] = False
    """True for the board environments, whose `state()` is the board every role plays on. The others'
    task state is the conversation (and a full view of it would hold the reference answer)."""
    delegating_role: str | None = None
    """The role that hands subtasks to the other roles and reads only their results (deep search's
    planner), or None. Algorithms that credit workers for their delegated output (SHARP) need one."""

    def __init__(self, roles: Sequence[str], *, max_turns: int, render_mode: str | None = None):
        super().__init__()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        if int(max_turns) < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.possible_agents = list(roles)
        self.max_turns = int(max_turns)
        self.render_mode = render_mode
        # One space object per agent, created once (api_test checks identity; seeding is per space).
        self.observation_spaces = {a: observation_space(self.max_turns) for a in self.possible_agents}
        self.action_spaces = {a: action_space() for a in self.possible_agents}
        if self.has_global_state:
            self.state_space = TextSpace(MAX_STATE_CHARS)
        self._seed_rng: np.random.Generator | None = None
        self._seed_rng_shared = False
        """True while `_seed_rng` may be held by a fork too: it is copied before it is first advanced."""
        self.instance: Keyed | None = None
        self.split = "train"
        self.turn = 0
        self.success = False
        self.transcript: list[tuple[str, int, str]] = []
        """(agent, turn, reply) of every step of the episode, for rendering and auditing."""
        self._last_scores: tuple[float, float, float, str | None] | None = None
        self._ended = False
        """The last step's (reward, team, local, parse error) and whether the episode is over, for `render()`:
        PettingZoo's dead steps delete each agent's infos and terminations, so after the `agent_iter()` loop
        they no longer tell."""

    # ------------------------------------------------------------------ hooks for subclasses
    def _make_instance(self, rng: np.random.Generator) -> Keyed:
        """Build one verified instance from `rng` (solvable; unique where it should be)."""
        raise NotImplementedError

    def _start(self) -> None:
        """Set up the per-episode state from `self.instance` (called by reset)."""
        raise NotImplementedError

    def _messages(self, agent: str) -> list[Message]:
        """The chat `agent` sees now. It must show the current state."""
        raise NotImplementedError

    def _play(self, agent: str, reply: str) -> Play:
        """Apply `agent`'s reply; never raise on malformed text (it earns the format penalty)."""
        raise NotImplementedError

    def _render_state(self) -> str:
        raise NotImplementedError

    def dataset_instances(self, split: str | None = None) -> list[Any] | None:
        """The fixed instances of an environment backed by a dataset (of one split, or all, in the
        dataset's order), each ready for `reset(options={"instance": ...})`; None when the instances
        are generated (there is no whole dataset to go through)."""
        return None

    def _shared_runtimes(self) -> list[Any]:
        """Tool runtimes (sandbox, search client) that forks share instead of copying."""
        return []

    def planned_calls(self, agent: str, reply: str) -> list[tuple[Any, tuple[Any, ...]]]:
        """The tool-runtime calls that `step(reply)` by `agent` would make now, as (runtime, job):
        a sandbox's (code, stdin) under its own limits, a search runtime's (tool, arguments); or as
        (runtime, job, options), the keyword arguments of `runtime.prefetched` that the call is made
        with (`{"limits": limits}` for a sandbox run under other limits). A driver may run the calls of
        many branches at once (`runtime.prefetched(jobs, **options)`) before stepping the branches one
        by one; a wrong guess only costs time. Default: none. Wrap the calls `step` makes in
        `core.clock.tool_wait()`, so that the trainer counts them as tool time."""
        return []

    # ------------------------------------------------------------------ counterfactual baselines
    def masked_reply(self, agent: str) -> str:
        """The reply that ablates `agent` in a counterfactual replay (SHARP Eq. 11, Shapley "masked"
        baseline): it passes nothing on. Environments whose roles must answer in a format override it."""
        return MASKED

    def noop_reply(self, agent: str) -> str:
        """The no-op baseline reply of `agent` (Shapley paper: a minimal policy); empty by default, which
        the environments score as a malformed action."""
        return ""

    # ------------------------------------------------------------------ PettingZoo API
    def observation_space(self, agent: str):
        return self.observation_spaces[agent]

    def action_space(self, agent: str):
        return self.action_spaces[agent]

    def state(self) -> str:
        """PettingZoo's global state (for centralised critics): the current board as text, the same for
        every role (`state_space` is a text space). Environments without a board raise PettingZoo's
        NotImplementedError: each role's `observe(agent)` is all there is."""
        if not self.has_global_state:
            raise NotImplementedError(f"{self.metadata['name']} has no global state beyond the agents' observations "
                                      "(its task state is the conversation); use observe(agent)")
        if self.instance is None:
            raise RuntimeError("call reset() before state()")
        return self._render_state()

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode.

        `seed` picks the instance: the same (seed, split) gives the same instance on any machine.
        Options: `split` ("train" | "val" | "test", default "train"); `instance` (a prebuilt
        instance, e.g. from a dataset loader, used instead of drawing one). Other keys are ignored.
        """
        options = dict(options or {})
        self.split = check_split(options.get("split", "train"))
        if seed is not None:
            self._seed_rng = np.random.default_rng(seed)
            instance_seed = int(seed)
        else:
            if self._seed_rng is None:
                self._seed_rng = np.random.default_rng()
            elif self._seed_rng_shared:
                # Copy-on-write: a fork and its parent share the generator until one of them draws.
                self._seed_rng = copy.deepcopy(self._seed_rng)
                self._seed_rng_shared = False
            instance_seed = int(self._seed_rng.integers(2**31))
        self.instance_seed = instance_seed
        given = options.get("instance")
        self.instance = given if given is not None else draw_instance(
            self.instance_namespace, self.split, instance_seed, self._make_instance
        )
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {**zero_info(), "turn": 0, "parse_error": None, "success": False} for a in self.agents}
        self.turn = 0
        self.success = False
        self.transcript = []
        self._last_scores = None
        self._ended = False
        self._start()
        self.agent_selection = self._first_agent()
        if self.render_mode == "human":
            self.render()

    def _first_agent(self) -> str:
        return self.possible_agents[0]

    def observe(self, agent: str) -> dict[str, Any]:
        return {"messages": self._messages(agent), "turn": min(self.turn, self.max_turns)}

    def step(self, action: str | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        reply = action if isinstance(action, str) else ("" if action is None else str(action))
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        turn = self.turn
        self.transcript.append((agent, turn, reply))
        play = self._play(agent, reply)
        info = play.breakdown.to_info()  # a new dict: completed in place
        self.rewards[agent] = info["reward"]
        info["turn"] = turn
        info["parse_error"] = play.parse_error
        info["success"] = False
        info.update(play.details)
        self.infos[agent] = info
        self._last_scores = (info["reward"], info["team_reward"], info["local_reward"], play.parse_error)
        if play.next_agent is None:
            self._ended = True
            self.success = bool(play.success)
            ended = self.terminations if (self.success or play.terminated) else self.truncations
            for a in self.agents:
                ended[a] = True
                self.infos[a]["success"] = self.success
            # The first role steps first through the dead steps, like any next turn.
            self.agent_selection = self.agents[0]
        else:
            self.agent_selection = play.next_agent
        self._accumulate_rewards()
        if self.render_mode == "human":
            self.render()

    def render(self) -> str | None:
        if self.instance is None:
            text = f"{self.metadata['name']}: call reset() first"
        else:
            lines = [f"{self.metadata['name']} | split={self.split} seed={self.instance_seed} | turn {self.turn}/{self.max_turns}", self._render_state()]
            if self.transcript:
                agent, turn, reply = self.transcript[-1]
                shown = reply if len(reply) <= _RENDER_TEXT_CAP else reply[:_RENDER_TEXT_CAP] + " [...]"
                lines.append(f"--- last reply ({agent}, turn {turn}) ---\n{shown}")
                if self._last_scores is not None:
                    reward, team, local, error = self._last_scores
                    lines.append(f"--- reward {reward:.3f} (team {team:.3f}, local {local:.3f})"
                                 + (f"; parse error: {error}" if error else ""))
            if self._ended:
                lines.append(f"=== episode over: {'success' if self.success else 'not solved'} ===")
            text = "\n".join(lines)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ forking
    def fork(self) -> TextAECEnv:
        """An independent copy at the exact current state; only tool runtimes are shared."""
        return self.__deepcopy__({})  # what `fork(self)` does, without `copy.deepcopy`'s dispatch

    def __deepcopy__(self, memo: dict[int, Any]) -> TextAECEnv:
        """Copy the per-episode state; share what never changes (`fork_shared`, the tool runtimes).

        Stepping or resetting the copy never changes the original, and the other way round. Shared
        are: the tool runtimes, the attributes named in `fork_shared` (the instance, the spaces with
        their sampling generators, a subclass's grids and tables), the items of the lists named in
        `fork_shallow` and, copy-on-write, the generator that draws instance seeds on `reset()`
        without a seed.
        """
        clone = object.__new__(type(self))
        memo[id(self)] = clone
        for runtime in self._shared_runtimes():
            memo.setdefault(id(runtime), runtime)
        state = self.__dict__.copy()  # everything shared; then copy what may change in place
        shallow, deep = _fork_plan(type(self), tuple(state))
        for name in shallow:
            value = state[name]
            cls = type(value)
            if cls is list or cls is dict:
                state[name] = memo[id(value)] = value.copy()
            elif cls not in _ATOMIC:
                state[name] = copy_state(value, memo)
        for name in deep:
            value = state[name]
            if type(value) not in _ATOMIC:
                state[name] = copy_state(value, memo)
        clone.__dict__ = state
        self._seed_rng_shared = clone._seed_rng_shared = self._seed_rng is not None
        return clone


@functools.lru_cache(maxsize=256)
def _fork_plan(cls: type, names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Which of an instance's attributes `names` fork copies: (the `fork_shallow` ones, the deep-copied
    ones); the others (`fork_shared`, and the seed generator, shared copy-on-write) are shared. Cached
    per class and attribute list, which the instances of a class nearly always share."""
    shared = {*cls.fork_shared, "_seed_rng"}
    copied = [name for name in names if name not in shared]
    return (tuple(n for n in copied if n in cls.fork_shallow), tuple(n for n in copied if n not in cls.fork_shallow))


def fork(env: Any) -> Any:
    """Fork `env`, raw or wrapped (wrappers are copied, the raw env by `TextAECEnv.__deepcopy__`)."""
    memo = {id(rt): rt for rt in env.unwrapped._shared_runtimes()}
    return copy.deepcopy(env, memo)


_ATOMIC = frozenset({str, int, float, bool, type(None), bytes, complex})


def copy_state(value: Any, memo: dict[int, Any]) -> Any:
    """`copy.deepcopy(value, memo)`, with a fast path for what episode state is made of.

    Atomic values are returned as they are; dicts, lists and tuples are copied here (aliases stay
    aliases through `memo`, dict keys are shared since they are hashable); anything else goes to
    `copy.deepcopy` with the same memo, so its own `__deepcopy__` (immutable records return
    themselves) decides.
    """
    cls = type(value)
    if cls in _ATOMIC:
        return value
    done = memo.get(id(value), memo)
    if done is not memo:
        return done
    if cls is dict:
        out: Any = value.copy()  # then replace the values that are not atomic by copies
        memo[id(value)] = out
        for k, v in value.items():
            if type(v) not in _ATOMIC:
                out[k] = copy_state(v, memo)
        return out
    if cls is list:
        out = []
        memo[id(value)] = out
        out.extend([v if type(v) in _ATOMIC else copy_state(v, memo) for v in value])
        return out
    if cls is tuple:
        for v in value:
            if type(v) not in _ATOMIC:
                break
        else:
            return value  # only atomic items: immutable all the way down
        items = tuple(v if type(v) in _ATOMIC else copy_state(v, memo) for v in value)
        out = value if all(a is b for a, b in zip(items, value)) else items
        memo[id(value)] = out
        return out
    return copy.deepcopy(value, memo)
