"""The environment contract, checked for every registered environment and variant."""

from __future__ import annotations

import random
import time
import zlib

import numpy as np
import pytest
from pettingzoo.test import api_test, render_test, seed_test

import llm_marl_envs
from agents import run_episode
from agents.garbage import GarbageAgent
from agents.oracle import make_oracle
from agents.random_agent import RandomAgent
from llm_marl_envs.core.instances import SPLITS, _InstanceSeed, draw_instance, instance_hash, instance_rng, split_of

ENVS = sorted(llm_marl_envs.registry.available())
VARIANTS = {name: dict(llm_marl_envs.registry.get(name).variants) for name in ENVS}
CASES = [(name, variant) for name in ENVS for variant in VARIANTS[name]]


@pytest.fixture(scope="module")
def fast_sandbox():
    # Short limits: the garbage agent sends infinite loops and memory bombs.
    from llm_marl_envs.sandbox import Sandbox, SandboxLimits

    with Sandbox(SandboxLimits(wall_time_s=1.0, cpu_time_s=1.0, memory_mb=256)) as sandbox:
        yield sandbox


def make(name, mode="mas", **kw):
    """The env `name` in its variant `mode` (see EnvEntry.variants)."""
    return llm_marl_envs.registry.make(name, **VARIANTS[name][mode], **kw)


@pytest.mark.parametrize("name,mode", CASES)
def test_pettingzoo_api(name, mode):
    api_test(make(name, mode=mode), num_cycles=200)


@pytest.mark.parametrize("name,mode", CASES)
def test_pettingzoo_seed(name, mode):
    seed_test(lambda: make(name, mode=mode), num_cycles=50)


@pytest.mark.parametrize("name,mode", CASES)
def test_pettingzoo_render(name, mode):
    render_test(lambda render_mode=None: make(name, mode=mode, render_mode=render_mode))


@pytest.mark.parametrize("name", ENVS)
def test_registered_with_pettingzoo(name):
    import pettingzoo

    entry = llm_marl_envs.registry.get(name)
    env = pettingzoo.make("aec", entry.pz_id)
    env.reset(seed=1)
    assert env.unwrapped.metadata["name"] == entry.module
    assert tuple(env.possible_agents) == entry.roles


@pytest.mark.parametrize("name", ENVS)
def test_same_seed_same_instance_and_splits_disjoint(name):
    raw = llm_marl_envs.registry.make_raw(name)
    make_instance = raw._make_instance
    ns = raw.instance_namespace
    hashes = {}
    for split in SPLITS:
        keys = [draw_instance(ns, split, seed, make_instance).key() for seed in range(1000)]
        hashes[split] = {instance_hash(k) for k in keys}
        # Seeds are not all aliases of a few instances.
        assert len(hashes[split]) > 500, f"{split}: only {len(hashes[split])} distinct instances in 1000 seeds"
    assert not hashes["train"] & hashes["val"]
    assert not hashes["train"] & hashes["test"]
    assert not hashes["val"] & hashes["test"]
    a, b = make(name), make(name)
    a.reset(seed=7, options={"split": "test"})
    b.reset(seed=7, options={"split": "test"})
    assert a.unwrapped.instance.key() == b.unwrapped.instance.key()
    b.reset(seed=7, options={"split": "train"})
    assert a.unwrapped.instance.key() != b.unwrapped.instance.key()


@pytest.mark.parametrize("name,mode", CASES)
def test_oracle_solves_the_test_split(name, mode):
    entry = llm_marl_envs.registry.get(name)
    env = make(name, mode=mode)
    oracle = make_oracle(name)
    failures, slow = [], []
    for seed in range(200):
        result = run_episode(env, oracle, seed=seed, split="test")
        if not result.success:
            failures.append(seed)
        elif entry.oracle_turns is not None and result.turns != entry.oracle_turns:
            slow.append(seed)
    assert len(failures) <= (1 - entry.oracle_success) * 200, f"oracle failed on test seeds {failures[:10]}"
    assert not slow, f"oracle needed more than {entry.oracle_turns} turn(s) on seeds {slow[:10]}"


@pytest.mark.parametrize("name", ENVS)
def test_oracle_replies_always_parse(name):
    env = make(name)
    result = run_episode(env, make_oracle(name), seed=3, split="test")
    assert result.success
    assert sum(result.parse_errors.values()) == 0


@pytest.mark.parametrize("name,mode", CASES)
@pytest.mark.parametrize("agent_kind", ["random", "garbage"])
def test_random_and_garbage_agents_never_crash(name, mode, agent_kind, fast_sandbox):
    env = make(name, mode=mode, sandbox=fast_sandbox)
    for seed in range(3 if agent_kind == "garbage" else 10):
        agent = GarbageAgent(seed) if agent_kind == "garbage" else RandomAgent(name, seed)
        result = run_episode(env, agent, seed=seed, split="val")
        assert result.steps >= 1
        if agent_kind == "garbage":
            assert sum(result.parse_errors.values()) >= 1


def test_a_runaway_reply_is_judged_not_a_crash(fast_sandbox):
    """A reply longer than the action space allows (a served model's runaway output) once stopped `play` with the
    wrapped env's bounds assertion: the episode loop cuts it at the limit, and the env penalises it."""
    from llm_marl_envs.core.spaces import MAX_ACTION_CHARS

    class Runaway(RandomAgent):
        def act(self, role, observation):
            return "#### " + "[U, " * MAX_ACTION_CHARS

    env = make("plan_path", sandbox=fast_sandbox)
    result = run_episode(env, Runaway("plan_path", 0), seed=0, split="val")
    assert result.steps >= 1 and sum(result.parse_errors.values()) >= 1


# Replies built to make a parser slow or make it raise: unclosed openers by the thousand (a scan retried from
# each one is quadratic), deep nesting (recursive descent), long runs before a non-match (regex backtracking),
# numbers past Python's 4300-digit int() limit, lone surrogates, NUL bytes, combining marks. No code block: the
# sandbox's cost is not the parser's.
ADVERSARIAL = {
    "boxed openers": "\\boxed{" * 9000,
    "nested boxes": "\\boxed{" * 5000 + "1" + "}" * 5000,
    "fences": "```" * 20_000,
    "tag openers": "<search><answer><tool_call>{<use_mcp_tool>" * 1500,
    "braces": "{" * 30_000 + "}" * 30_000,
    "brackets": "#### " + "[" * 30_000,
    "list run": "#### [" + "U, " * 20_000,
    "comma digits": "1," * 30_000 + "x",
    "huge number": "#### " + "9" * 60_000,
    "huge boxed number": "\\boxed{-" + "9" * 60_000 + ".5}",
    "spaces": "#### " + " " * 60_000 + "x",
    "headings": "# " * 30_000,
    "test markers": "**Test Input:**\n" * 4000,
    "combining": "a" + "\u0301" * 60_000,
    "surrogates and NUL": "\udcff\ud800\x00\u202e" * 15_000,
}


@pytest.mark.parametrize("name,mode", CASES)
def test_adversarial_replies_are_judged_quickly(name, mode, fast_sandbox):
    """Every parser is linear in the reply and never raises: each of these (cut at the 64 KiB the action space
    allows) is judged as any malformed reply, in far less than the wall guard (a hang guard, not a benchmark:
    a step costs a few ms)."""
    from llm_marl_envs.core.spaces import MAX_ACTION_CHARS

    for label, reply in ADVERSARIAL.items():
        env = make(name, mode=mode, sandbox=fast_sandbox)
        env.reset(seed=0, options={"split": "val"})
        for role in env.agent_iter(2):
            if env.terminations[role] or env.truncations[role]:
                env.step(None)
                continue
            started = time.perf_counter()
            env.step(reply[:MAX_ACTION_CHARS])
            elapsed = time.perf_counter() - started
            assert elapsed < 5.0, f"{name}/{mode}: the {label!r} reply took {elapsed:.1f} s to judge"
            assert np.isfinite(env.rewards[role]), (name, mode, label)


@pytest.mark.parametrize("name", ENVS)
def test_fork_is_independent(name):
    env = llm_marl_envs.registry.make_raw(name)
    env.reset(seed=5)
    before = env.observe(env.agent_selection)
    child = env.fork()
    child.step("garbage reply")
    assert env.observe(env.agent_selection) == before
    assert child.agent_selection != env.agent_selection or child.transcript != env.transcript
    # The fork shares tool runtimes, not state.
    assert child._shared_runtimes() == env._shared_runtimes()


def test_instance_rng_is_default_rngs_generator_of_the_documented_seed_sequence():
    """instance_rng hands numpy the entropy as uint32 words and computes PCG64's seeding words itself
    (it is cheaper): every generator must be `default_rng(SeedSequence([crc32(name), split index, seed
    mod 2**48, attempt]))`'s, seeds of one and two words and attempts past 2**32 included, and spawn the
    same children."""
    draw = random.Random(0)
    for i in range(3000):
        name, split = draw.choice(["plan_path", "sudoku", "sokoban", "x"]), draw.choice(SPLITS)
        seed = draw.choice([draw.randrange(2000), draw.getrandbits(40), draw.getrandbits(70), -draw.randrange(1, 10**9), 0,
                            2**32 - 1, 2**32, 2**48 - 1, 2**48])
        attempt = draw.choice([0, 1, draw.randrange(2000), 2**32 - 1, 2**32 + 5, 2**70])
        entropy = [zlib.crc32(name.encode()), SPLITS.index(split), seed & (2**48 - 1), attempt]
        expected, got = np.random.default_rng(np.random.SeedSequence(entropy)), instance_rng(name, split, seed, attempt)
        assert got.bit_generator.state == expected.bit_generator.state, entropy
        if i < 50:
            # instance_rng computes PCG64's seeding words (4 uint64) itself; other requests are numpy's.
            mine, numpys = got.bit_generator.seed_seq, expected.bit_generator.seed_seq
            for n_words, dtype in ((4, np.uint64), (3, np.uint64), (4, np.uint32), (9, np.uint32)):
                assert mine.generate_state(n_words, dtype).tolist() == numpys.generate_state(n_words, dtype).tolist()
            assert [c.random() for c in got.spawn(2)] == [c.random() for c in expected.spawn(2)]
            assert got.random(3).tolist() == expected.random(3).tolist()
    # The written-out path assumes numpy's default pool of 4 words; another pool size is numpy's own.
    for pool_size in (4, 8):
        words = np.array([7, 1, 2**32 - 1, 5], dtype=np.uint32)
        ours, numpys = _InstanceSeed(words, pool_size=pool_size), np.random.SeedSequence(words, pool_size=pool_size)
        assert ours.generate_state(4, np.uint64).tolist() == numpys.generate_state(4, np.uint64).tolist()
    with pytest.raises(ValueError, match="attempt"):
        instance_rng("x", "train", 0, -1)
    with pytest.raises(ValueError):  # numpy refuses it too
        np.random.SeedSequence([0, 0, 0, -1])


def test_a_keys_split_is_its_hash_bucket():
    """split_of reads the digest's bytes; the buckets are sha256(key) % 10 of the first 8 hex digits."""
    owner = {b: name for name, bs in (("train", range(6)), ("val", (6, 7)), ("test", (8, 9))) for b in bs}
    for i in range(3000):
        key = f"key {i} " + "#." * (i % 17)
        assert split_of(key) == owner[int(instance_hash(key)[:8], 16) % 10]


@pytest.mark.parametrize("name", ENVS)
def test_an_env_pickled_mid_episode_plays_on(name):
    """pickle (an env sent to another process, or saved mid-episode) once failed on every environment whose
    tool runtimes were made (sandbox, run cache, search runtime: their locks) or whose problems hold
    lambdas (Code's bank): the runtimes travel as their settings, the shared ones load as the process's."""
    import pickle

    from llm_marl_envs.sandbox import default_sandbox

    env = make(name)
    env.reset(seed=5, options={"split": "val"})
    env.step("```python\nprint(1)\n```")
    if hasattr(env.unwrapped, "sandbox"):  # the property makes the tool envs' sandbox if no step has yet
        assert env.unwrapped.sandbox is default_sandbox()
    loaded = pickle.loads(pickle.dumps(env))
    assert loaded.agent_selection == env.agent_selection
    assert loaded.observe(loaded.agent_selection) == env.observe(env.agent_selection)
    # The process-wide sandbox and search runtime load as themselves; a run cache or question source as a copy.
    for mine, theirs in zip(env.unwrapped._shared_runtimes(), loaded.unwrapped._shared_runtimes(), strict=True):
        assert type(theirs) is type(mine)
        assert (theirs is mine) == (type(mine).__name__ in ("Sandbox", "SearchRuntime")), mine
    for e in (env, loaded):
        dead = e.terminations[e.agent_selection] or e.truncations[e.agent_selection]
        e.step(None if dead else "garbage reply")
    assert loaded.observe(loaded.agent_selection) == env.observe(env.agent_selection)
    assert loaded.rewards == env.rewards and loaded.unwrapped.transcript == env.unwrapped.transcript



def test_envs_pickled_one_by_one_with_their_own_sandbox_load_sharing_one(fast_sandbox):
    """A sandbox other than the default loads as one sandbox per process and settings, not one pool per env."""
    import pickle

    blobs = []
    for seed in (1, 2):
        env = make("plan_path", sandbox=fast_sandbox)
        env.reset(seed=seed)
        blobs.append(pickle.dumps(env))
    first, second = (pickle.loads(b).unwrapped.sandbox for b in blobs)
    assert first is second and first is not fast_sandbox
    assert (first.limits, first.n_workers) == (fast_sandbox.limits, fast_sandbox.n_workers)


@pytest.mark.parametrize("name", ENVS)
def test_render_after_the_agent_loop_shows_the_outcome(name):
    """PettingZoo's dead steps remove each agent's rewards, terminations and infos, so `env.render()` after the
    `agent_iter()` loop once dropped the last step's reward line and the "episode over" line: the frame
    of a finished episode looked unfinished. It shows them as at the last dead step."""
    env = make(name, render_mode="ansi")
    oracle = make_oracle(name)
    env.reset(seed=1, options={"split": "test"})
    oracle.reset(1)
    at_dead_step = None
    for agent in env.agent_iter():
        observation, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            at_dead_step = at_dead_step or env.render()
            env.step(None)
        else:
            env.step(oracle.act(agent, observation))
    assert not env.agents
    assert "=== episode over:" in at_dead_step and "--- reward " in at_dead_step
    assert env.render() == at_dead_step
