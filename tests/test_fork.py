"""`fork()` shares what never changes and copies the rest: a fork and its parent are independent.

Each case plays real (oracle) and malformed replies on one side and checks that nothing the other
side exposes (observations, rewards, infos, transcript, rendering) moved.
"""

from __future__ import annotations

import copy
import inspect

import pytest

import llm_marl_envs
from agents.garbage import GarbageAgent
from agents.oracle import make_oracle

ENVS = ["plan_path", "sokoban", "sudoku", "math", "mass"]


def snapshot(env):
    raw = env.unwrapped
    return copy.deepcopy({
        "observations": {a: raw.observe(a) for a in raw.possible_agents},
        "selection": raw.agent_selection,
        "rewards": dict(raw.rewards),
        "cumulative": dict(raw._cumulative_rewards),
        "terminations": dict(raw.terminations),
        "truncations": dict(raw.truncations),
        "infos": raw.infos,
        "transcript": list(raw.transcript),
        "turn": raw.turn,
        "render": raw.render(),
    })


def done(env):
    return all(env.terminations[a] or env.truncations[a] for a in env.agents)


def play(env, agent, steps):
    """Up to `steps` live steps of `agent` (an Agent) on `env`."""
    for _ in range(steps):
        if done(env):
            return
        role = env.agent_selection
        env.step(agent.act(role, env.observe(role)))


@pytest.fixture(scope="module")
def sandbox():
    from llm_marl_envs.sandbox import Sandbox, SandboxLimits

    with Sandbox(SandboxLimits(wall_time_s=2.0, cpu_time_s=2.0, memory_mb=256)) as sb:
        yield sb


def make(name, sandbox):
    takes_sandbox = "sandbox" in inspect.signature(llm_marl_envs.registry.get(name).load().raw_env.__init__).parameters
    kwargs = {"sandbox": sandbox} if takes_sandbox else {}
    return llm_marl_envs.registry.make_raw(name, **kwargs)


@pytest.mark.parametrize("name", ENVS)
@pytest.mark.parametrize("side", ["fork", "parent"])
def test_stepping_one_side_never_changes_the_other(name, side, sandbox):
    env = make(name, sandbox)
    env.reset(seed=3, options={"split": "test"})
    play(env, GarbageAgent(0), 1)  # some history before the fork
    child = env.fork()
    assert snapshot(child) == snapshot(env), "a fork starts at the exact state of its parent"
    moved, still = (child, env) if side == "fork" else (env, child)
    before = snapshot(still)
    oracle = make_oracle(name)
    play(moved, oracle, 8)
    assert snapshot(moved) != before
    assert snapshot(still) == before


@pytest.mark.parametrize("name", ENVS)
def test_fork_and_parent_given_the_same_replies_stay_equal(name, sandbox):
    env = make(name, sandbox)
    env.reset(seed=4, options={"split": "test"})
    child = env.fork()
    grandchild = child.fork()
    oracle = make_oracle(name)
    while not done(env):
        role = env.agent_selection
        reply = oracle.act(role, env.observe(role))
        for e in (env, child, grandchild):
            e.step(reply)
        assert snapshot(child) == snapshot(env) == snapshot(grandchild)


@pytest.mark.parametrize("name", ENVS)
def test_mutating_a_forks_containers_never_reaches_the_parent(name, sandbox):
    env = make(name, sandbox)
    env.reset(seed=5, options={"split": "test"})
    play(env, make_oracle(name), 1)
    before = snapshot(env)
    child = env.fork()
    for info in child.infos.values():
        info["reward"] = 123.0
        for value in info.values():
            if isinstance(value, (dict, list)):
                value.clear()
    for table in (child.rewards, child._cumulative_rewards, child.terminations, child.truncations):
        table.clear()
    child.transcript.clear()
    child.agents.clear()
    if hasattr(child, "history"):
        child.history.clear()
    assert snapshot(env) == before


@pytest.mark.parametrize("name", ["plan_path", "sudoku"])
def test_unseeded_resets_draw_the_same_instances_with_or_without_forks(name, sandbox):
    """The seed generator is shared copy-on-write: each side draws what an unforked env would."""
    plain, forked = make(name, sandbox), make(name, sandbox)
    for e in (plain, forked):
        e.reset(seed=11)
    child = forked.fork()
    expected = []
    for _ in range(3):
        plain.reset()
        expected.append(plain.instance.key())
    child.reset()  # the fork draws first: the parent must not notice
    assert child.instance.key() == expected[0]
    got = []
    for _ in range(3):
        forked.reset()
        got.append(forked.instance.key())
    assert got == expected
    child.reset()
    assert child.instance.key() == expected[1]


def test_fork_shares_what_never_changes(sandbox):
    env = make("plan_path", sandbox)
    env.reset(seed=1)
    child = env.fork()
    for name in ("instance", "grid", "to_goal", "config", "observation_spaces", "action_spaces"):
        assert getattr(child, name) is getattr(env, name), name
    assert child._sandbox is env._sandbox
    assert child.infos is not env.infos and child.rewards is not env.rewards and child.history is not env.history


@pytest.mark.parametrize("how", ["core.base.fork(env)", "env.fork()"])
def test_wrapped_env_forks_through_the_wrappers(sandbox, how):
    env = llm_marl_envs.registry.make("plan_path", sandbox=sandbox)
    env.reset(seed=2)
    child = llm_marl_envs.core.base.fork(env) if how == "core.base.fork(env)" else env.fork()
    assert type(child) is type(env) and type(child.env) is type(env.env) and child.unwrapped is not env.unwrapped
    before = snapshot(env)
    play(child, make_oracle("plan_path"), 2)
    assert snapshot(env) == before
