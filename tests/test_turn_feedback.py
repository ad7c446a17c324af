"""The tool-planner environments write a turn's feedback when a later prompt first reads it."""

from __future__ import annotations

import copy
import pickle

import pytest

from agents.oracle import make_oracle
from llm_marl_envs.core.tool_planner import history_text
from llm_marl_envs.registry import make_raw

ANSWERS = {  # an answer with an illegal move or a conflict, so the feedback's longer branches run
    "plan_path": "#### [L, L, L, L, L, L, L]",
    "sokoban": "#### [L, L, U, R, D, D]",
    "sudoku": "#### [[1, 1, 4], [1, 2, 4]]",
}


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_feedback_is_written_once_when_first_read(name, monkeypatch):
    module = __import__(f"llm_marl_envs.{name}.env", fromlist=["planner_feedback"])
    calls = []
    real = module.planner_feedback
    monkeypatch.setattr(module, "planner_feedback", lambda *args: calls.append(args) or real(*args))
    env = make_raw(name, mode="planner")
    env.reset(seed=3, options={"split": "test"})
    env.step(ANSWERS[name])
    assert calls == []  # stepping wrote nothing
    text = env.history[-1].feedback
    assert len(calls) == 1 and text == real(*calls[0])
    assert env.history[-1].feedback is text and len(calls) == 1  # read again: the same text, not rewritten
    assert f"- Result: {text}" in env.observe("planner")["messages"][-1]["content"]


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_feedback_describes_the_turn_it_was_made_in(name):
    """The writer holds the turn's values, not the environment: later turns and forks do not change it."""
    env = make_raw(name, mode="planner")
    env.reset(seed=3, options={"split": "test"})
    env.step(ANSWERS[name])
    eager = make_raw(name, mode="planner")
    eager.reset(seed=3, options={"split": "test"})
    eager.step(ANSWERS[name])
    expected = eager.history[-1].feedback  # read at once
    child = env.fork()
    oracle = make_oracle(name)
    for e in (env, child):
        while not (all(e.terminations.values()) or all(e.truncations.values())):
            e.step(oracle.act("planner", e.observe("planner")))
    assert env.history[0].feedback == child.history[0].feedback == expected
    assert history_text(pickle.loads(pickle.dumps(env.history))) == history_text(env.history)
    assert copy.deepcopy(env.history)[0] is env.history[0]  # immutable record: shared, not copied
