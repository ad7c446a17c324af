"""Environment speed: forks, agent turns, observations, instance generation and a tree wave's tool
runs, this tree against an earlier commit side by side in one run (issue: Performance).

    python benchmarks/env_speed.py --base a42e279 --rounds 3 --write benchmarks.md

`--base REV` exports that commit's tree with `git archive` into a temporary folder; each round runs
one measuring subprocess on the base tree and one on this tree (alternating, so a load change hits
both), and every row reports the minimum and the median over the rounds of the per-call time (each
round's per-call time is the best of a few timed repeats), and ratios of both: this machine is
shared and has slow spells of tens of seconds, which raise the medians of whichever runs they hit
and leave the minimums alone. Only calls that both trees have are
timed: `make_raw`, `reset`, `observe`, `fork`, `step`, `draw_instance` and `rollout`.

Rows:
- `fork()` of an environment after one full turn (tool without code, planner move list).
- A trainer's agent turn: `observe` + `fork` + `step` of the planner's reply (the oracle's
  answer for that state; mode "planner", so no sandbox), as a tree sampler pays it per candidate.
  The `observe` repeats one state's: since the prompt cache of the tool-planner environments, that
  is a cache hit (the first `observe` of a new state builds the prompt and costs more), while a
  tree without the cache builds it every time.
- `observe`, repeated on one state (a cache hit where the tree caches prompts, see above).
- Instances per second, train split (and val split for Plan-Path, where split rejection costs most).
- A K=4 tree rollout of Plan-Path (tool + planner, 2 turns, 2 tasks) with a scripted engine, so the
  wall time is the environments' and the sandbox's: tool programs of a wave run one after the other
  (`prefetch=False`, and the base tree) or all at once (`prefetch=True`, 2 sandbox workers).

With `--peers PYTHON` (an interpreter of a scratch virtual environment outside the project where
reasoning-gym is installed from the package index), the same rounds also time reasoning-gym's
generators on the shared tasks (maze, mini_sudoku, sudoku, sokoban). With `--pettingllms SRC` too (a
checkout of github.com/pettingllms-ai/PettingLLMs), that interpreter imports its environment states
and times deepcopy (its fork), `text_observation`, a turn and generation. Its turn plays a solution of
its instance from the first state, like ours (a shortest move list found by breadth-first search over
its own `step`; Sudoku: the solution grid of our turn's puzzle), so both steps do a winning answer's
work. No peer code is copied into the project; the peers are only imported by that interpreter.
The scratch setup (outside the project; the numbers in benchmarks.md used reasoning-gym 0.1.25):

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install reasoning-gym
    git clone --depth 1 https://github.com/pettingllms-ai/PettingLLMs /tmp/peers_src
    python benchmarks/env_speed.py --base 6f3db78 --rounds 9 --peers /tmp/peers/bin/python --pettingllms /tmp/peers_src

For a machine that reaches no package index (benchmarks.md's 16-core sections), `benchmarks/device_carry.py`
builds what this script and its peers need there into one folder and prints the command that runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENVS = {"plan_path": "Plan-Path 10x10", "sudoku": "Sudoku 4x4", "sokoban": "Sokoban 6x6"}
GENERATION = [  # (row name, env, constructor kwargs, split, instances)
    ("Plan-Path 10x10, train", "plan_path", {}, "train", 300),
    ("Plan-Path 10x10, val", "plan_path", {}, "val", 150),
    ("Sudoku 4x4 unique, train", "sudoku", {}, "train", 200),
    ("Sudoku 9x9 unique, train", "sudoku", {"size": 9, "max_removals": 50}, "train", 10),
    ("Sokoban 6x6 one box, train", "sokoban", {}, "train", 150),
]
PEER_TASKS = {  # our generation row -> reasoning-gym dataset and config doing the same work
    "Plan-Path 10x10, train": ("maze", {"min_grid_size": 10, "max_grid_size": 10, "min_dist": 6, "max_dist": 18}),
    "Sudoku 4x4 unique, train": ("mini_sudoku", {}),
    "Sudoku 9x9 unique, train": ("sudoku", {"min_empty": 30, "max_empty": 50}),
    "Sokoban 6x6 one box, train": ("sokoban", {"min_w": 6, "max_w": 6, "min_h": 6, "max_h": 6, "min_boxes": 1, "max_boxes": 1}),
}
PEER_WORKER = """
import json, sys, time
import reasoning_gym
tasks, fast = json.loads(sys.argv[1]), sys.argv[2] == "1"
out = {}
for row, (name, config, count) in tasks.items():
    count = max(2, count // 5) if fast else count
    ds = reasoning_gym.create_dataset(name, seed=0, size=count, **config)
    start = time.perf_counter()
    for i in range(count):
        ds[i]  # items are generated on access, a pure function of (seed, index)
    out["gen/" + row] = (time.perf_counter() - start) / count * 1e6
print(json.dumps(out))
"""


# ---------------------------------------------------------------------------- worker (one tree, one round)
def _per_call_us(fn, number: int, repeat: int = 3) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def _turn_state(name: str, mode: str):
    from llm_marl_envs.registry import make_raw

    env = make_raw(name, mode=mode)
    env.reset(seed=1, options={"split": "test"})
    if mode == "mas":  # one full turn that does not end the episode: history, infos and a tool run in the state
        env.step("I will not write code this time.")
        env.step("#### [U]")
    return env


def worker(fast: bool) -> dict[str, float]:
    from llm_marl_envs.core.instances import draw_instance
    from llm_marl_envs.registry import make_raw

    from agents.oracle import make_oracle

    out: dict[str, float] = {}
    n = 50 if fast else 300
    for name in ENVS:
        env = _turn_state(name, "mas")
        out[f"fork/{name}"] = _per_call_us(env.fork, n)
        out[f"observe/{name}"] = _per_call_us(lambda: env.observe(env.agent_selection), n)
        single = _turn_state(name, "planner")
        reply = make_oracle(name).act("planner", single.observe("planner"))

        def turn():
            single.observe("planner")
            single.fork().step(reply)

        out[f"turn/{name}"] = _per_call_us(turn, n)
        answer, _ = single.parse_answer(reply.rsplit("####", 1)[-1].strip())
        out[f"turn_moves/{name}"] = len(answer) if isinstance(answer, list) else 0
    for row, name, kwargs, split, count in GENERATION:
        count = max(2, count // 5) if fast else count
        make = make_raw(name, **kwargs)._make_instance
        ns = make_raw(name, **kwargs).instance_namespace
        start = time.perf_counter()
        for seed in range(count):
            draw_instance(ns, split, seed, make)
        out[f"gen/{row}"] = (time.perf_counter() - start) / count * 1e6
    out.update(_rollout_times())
    return out


def _rollout_times() -> dict[str, float]:
    import inspect

    from llm_marl.engines.scripted import ScriptedEngine
    from llm_marl.rollout import make_tasks, rollout, tree
    from llm_marl_envs.sandbox import Sandbox

    def reply(req, k):
        if req.tag.agent == "tool":
            return f"```python\nimport time\nmoves = ['R', 'D'] * {k + 1}\nprint('[' + ', '.join(moves) + ']')\n```"
        return "#### [R, D]"

    out = {}
    with Sandbox(workers=2) as sandbox:
        sandbox.run("print(1)")  # start both workers' interpreters before timing
        sandbox.run_many([("print(1)", ""), ("print(2)", "")])
        variants = {"rollout/sequential": {}}
        if "prefetch" in inspect.signature(rollout).parameters:
            variants = {"rollout/sequential": {"prefetch": False}, "rollout/prefetched": {"prefetch": True}}
        for label, extra in variants.items():
            times = []
            # A rest, as between generation steps, so that a variant does not inherit the scheduler
            # state the one before left (its runs fork the sandbox's spares; see sandbox_speed.py).
            time.sleep(0.5)
            for _ in range(3):
                tasks = make_tasks("plan_path", seeds=[0, 1], env_kwargs={"max_turns": 2, "sandbox": sandbox})
                start = time.perf_counter()
                res = rollout(tasks, tree(K=4), ScriptedEngine(reply), sigma={"tool": "t", "planner": "p"}, **extra)
                times.append((time.perf_counter() - start) / res.stats["waves"] * 1e6)
            out[label] = min(times)
    return out


# ---------------------------------------------------------------------------- driver
def _run_worker(tree: Path, fast: bool) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(ROOT / "benchmarks" / "env_speed.py"), "--worker"] + (["--fast"] if fast else [])
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"worker on {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


PETTINGLLMS_WORKER = """
import collections, copy, json, re, sys, time, timeit
sys.path.insert(0, sys.argv[1])
from pettingllms.multi_agent_env.stateful.env_state import PlanPathGridEnvState, SokobanGridEnvState, SudukuEnvState
fast = sys.argv[2] == "1"
n = 50 if fast else 300
six = {"env": {"map_size": 6}}
def per_call(fn, number):
    return min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6
def moves(text):  # the reply's action list, as a trainer must parse it before step
    return re.findall(r"[UDLR]", text.rsplit("####", 1)[-1])
def grid(text):  # the reply's grid, as a trainer must parse it before step
    return json.loads(text.rsplit("####", 1)[-1])
def shortest_moves(state):  # breadth-first over the state's own dynamics: a solution of its instance
    queue, seen = collections.deque([(state, [])]), set()
    while queue:
        s, path = queue.popleft()
        for a in "UDLR":
            child = copy.deepcopy(s)
            child.step([a])
            key = child.text_observation()
            if key in seen or key == s.text_observation():
                continue
            if getattr(child, "done", False):
                return path + [a]
            seen.add(key)
            queue.append((child, path + [a]))
def solved_grid(rows):  # backtracking over the empty cells: the puzzle's solution
    g = [list(r) for r in rows]
    size, box = len(g), int(len(g) ** 0.5)
    def ok(r, c, v):
        return (v not in g[r] and all(g[i][c] != v for i in range(size)) and
                all(g[i][j] != v for i in range(r // box * box, r // box * box + box) for j in range(c // box * box, c // box * box + box)))
    def fill(k):
        if k == size * size:
            return True
        r, c = divmod(k, size)
        if g[r][c]:
            return fill(k + 1)
        for v in range(1, size + 1):
            if ok(r, c, v):
                g[r][c] = v
                if fill(k + 1):
                    return True
        g[r][c] = 0
        return False
    assert fill(0)
    return g
states = {
    "plan_path": (lambda: PlanPathGridEnvState(seed=1), moves),
    "sokoban": (lambda: SokobanGridEnvState(seed=1, config=six), moves),
    # Its seeded puzzles come from a file that does not ship and its built-in 4x4 puzzle has no
    # solution (two 4s in one box), so it gets our turn's puzzle: the same work on both sides.
    "sudoku": (lambda: SudukuEnvState(puzzle=json.loads(sys.argv[3]), size=4), grid),
}
out = {}
for name, (make, parse) in states.items():
    state = make()
    if name != "sudoku":
        state.step(["U"])  # one step taken, like our state after a turn
    out["fork/" + name] = per_call(lambda: copy.deepcopy(state), n)
    out["observe/" + name] = per_call(state.text_observation, n)
    # The turn: like ours, from the instance's start, the reply being a solution of the instance (the
    # oracle's answer), so the step does the whole work of a winning answer.
    state = make()
    if name == "sudoku":
        reply = "#### " + json.dumps(solved_grid(state.grid))
    else:
        if name == "plan_path":
            state.shortest_path()  # cached in the state, so no turn pays for it
        reply = "#### [" + ", ".join(shortest_moves(state)) + "]"
    check = copy.deepcopy(state)
    check.step(parse(reply))
    assert check.done, (name, reply)  # the reply solves the instance
    def turn():
        state.text_observation()
        child = copy.deepcopy(state)
        child.step(parse(reply))
    out["turn/" + name] = per_call(turn, n)
    out["turn_moves/" + name] = len(parse(reply)) if name != "sudoku" else 0
for row, make, count in (("Plan-Path 10x10, train", lambda s: PlanPathGridEnvState(seed=s), 300),
                         ("Sokoban 6x6 one box, train", lambda s: SokobanGridEnvState(seed=s, config=six), 150)):
    count = max(2, count // 5) if fast else count
    start = time.perf_counter()
    for seed in range(count):
        make(seed)
    out["gen/" + row] = (time.perf_counter() - start) / count * 1e6
print(json.dumps(out))
"""


def _run_pettingllms(python: str, src: str, fast: bool) -> dict[str, float]:
    puzzle = _turn_state("sudoku", "planner").clues  # the puzzle of our Sudoku turn
    proc = subprocess.run([python, "-c", PETTINGLLMS_WORKER, src, "1" if fast else "0", json.dumps(puzzle)], capture_output=True, text=True,
                          check=False, cwd=tempfile.gettempdir(), env={**os.environ, "OMP_NUM_THREADS": "1"})
    if proc.returncode != 0:
        raise RuntimeError(f"PettingLLMs worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _run_peer(python: str, fast: bool) -> dict[str, float]:
    counts = {row: count for row, *_, count in GENERATION}
    tasks = {row: (name, config, counts[row]) for row, (name, config) in PEER_TASKS.items()}
    proc = subprocess.run([python, "-c", PEER_WORKER, json.dumps(tasks), "1" if fast else "0"], capture_output=True,
                          text=True, check=False, cwd=tempfile.gettempdir(), env={**os.environ, "OMP_NUM_THREADS": "1"})
    if proc.returncode != 0:
        raise RuntimeError(f"reasoning-gym worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _fmt(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 10_000 else f"{us:.1f} µs"


def table(before: list[dict[str, float]], after: list[dict[str, float]], base: str,
          peers: list[dict[str, float]] | None = None, pettingllms: list[dict[str, float]] | None = None) -> str:
    def stat(runs, key):
        vals = [r[key] for r in runs if key in r]
        return (min(vals), statistics.median(vals)) if vals else None

    lines = [f"| work | base {base}: min / median | this tree: min / median | this / base: mins; medians |", "|---|---|---|---|"]

    def row(label, key_before, key_after=None, per="call"):
        b, a = stat(before, key_before), stat(after, key_after or key_before)
        if b is None or a is None:
            return
        lines.append(f"| {label} | {_fmt(b[0])} / {_fmt(b[1])} | {_fmt(a[0])} / {_fmt(a[1])} | {a[0] / b[0]:.2f}; {a[1] / b[1]:.2f} |")

    for name, label in ENVS.items():
        row(f"`fork()`, {label}", f"fork/{name}")
    for name, label in ENVS.items():
        row(f"agent turn (observe, repeated + fork + step), {label}", f"turn/{name}")
    for name, label in ENVS.items():
        row(f"observe, repeated on one state, {label}", f"observe/{name}")
    for label, *_ in GENERATION:
        row(f"one instance, {label}", f"gen/{label}")
    row("K=4 tree wave, Plan-Path with tool runs (per wave): sequential", "rollout/sequential")
    row("the same, tool runs of a wave prefetched at once (this tree) vs sequential (base)",
        "rollout/sequential", "rollout/prefetched")
    rates = []
    for label, *_ in GENERATION:
        a = stat(after, f"gen/{label}")
        b = stat(before, f"gen/{label}")
        if a and b:
            rates.append(f"{label}: {1e6 / b[1]:,.0f} -> {1e6 / a[1]:,.0f} instances/s")
    text = "\n".join(lines) + "\n\nInstances per second (medians): " + "; ".join(rates) + "."
    if peers:
        text += ("\n\nInstance generation against reasoning-gym (same rounds; items generated on access; a round's "
                 "rate is its instances over its time, the best round's and the median round's):\n\n"
                 "| our task | reasoning-gym task (config) | reasoning-gym instances/s: best / median | ours, base: median "
                 "| ours, this tree: best / median | this tree / reasoning-gym rate: best; median |\n|---|---|---|---|---|---|\n")
        for label, (name, config) in PEER_TASKS.items():
            p, a, b = stat(peers, f"gen/{label}"), stat(after, f"gen/{label}"), stat(before, f"gen/{label}")
            if p and a and b:
                cfg = ", ".join(f"{k}={v}" for k, v in config.items()) or "defaults"
                text += (f"| {label} | {name} ({cfg}) | {1e6 / p[0]:,.0f} / {1e6 / p[1]:,.0f} | {1e6 / b[1]:,.0f} "
                         f"| {1e6 / a[0]:,.0f} / {1e6 / a[1]:,.0f} | {p[0] / a[0]:.2f}; {p[1] / a[1]:.2f} |\n")
    if pettingllms:
        text += ("\n\nAgainst PettingLLMs' environment states (`stateful/env_state.py`; its fork is `copy.deepcopy`, "
                 "its observation `text_observation()`, its turn observation + deepcopy + parse of the reply + `step`):\n\n"
                 "| work | PettingLLMs min / median | ours, base median | ours, this tree min / median | this tree / PettingLLMs: "
                 "mins; medians |\n|---|---|---|---|---|\n")
        keys = [(f"`fork()` vs deepcopy, {ENVS[n]}", f"fork/{n}") for n in ENVS]
        keys += [(f"agent turn (observe, repeated + fork + step), {ENVS[n]}", f"turn/{n}") for n in ENVS]
        keys += [(f"observe, repeated on one state, {ENVS[n]}", f"observe/{n}") for n in ENVS]
        keys += [(f"one instance, {label}", f"gen/{label}") for label in ("Plan-Path 10x10, train", "Sokoban 6x6 one box, train")]
        for label, key in keys:
            p, a, b = stat(pettingllms, key), stat(after, key), stat(before, key)
            if p and a and b:
                text += (f"| {label} | {_fmt(p[0])} / {_fmt(p[1])} | {_fmt(b[1])} | {_fmt(a[0])} / {_fmt(a[1])} "
                         f"| {a[0] / p[0]:.2f}; {a[1] / p[1]:.2f} |\n")
        moves = [f"{ENVS[n]} {int(after[-1]['turn_moves/' + n])} (ours) and {int(pettingllms[-1]['turn_moves/' + n])} (PettingLLMs)"
                 for n in ("plan_path", "sokoban") if "turn_moves/" + n in after[-1]]
        if moves:
            text += "\nMoves in the turn's reply: " + "; ".join(moves) + ".\n"
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="a42e279", help="git revision to compare with (exported with git archive)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating measuring rounds per tree")
    ap.add_argument("--fast", action="store_true", help="fewer calls per row (a smoke run; numbers are noisy)")
    ap.add_argument("--write", metavar="FILE", help="write the table into this benchmarks.md section")
    ap.add_argument("--peers", metavar="PYTHON", help="an interpreter with reasoning-gym installed (a scratch venv "
                    "outside the project: python -m venv /tmp/peers && /tmp/peers/bin/pip install reasoning-gym)")
    ap.add_argument("--pettingllms", metavar="SRC", help="a PettingLLMs checkout (its `pettingllms/` package is imported "
                    "by the --peers interpreter; nothing of it is installed into the project)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        sys.path.insert(0, os.getcwd())
        print(json.dumps(worker(args.fast)))
        return
    sys.path.insert(0, str(ROOT))
    from benchmarks._base_tree import exported_tree

    with exported_tree(args.base, prefix="env-speed-base-") as tmp:
        load0 = os.getloadavg()[0]
        before, after, peers, pettingllms = [], [], [], []
        for _ in range(args.rounds):
            before.append(_run_worker(Path(tmp), args.fast))
            after.append(_run_worker(ROOT, args.fast))
            if args.peers:
                peers.append(_run_peer(args.peers, args.fast))
            if args.peers and args.pettingllms:
                pettingllms.append(_run_pettingllms(args.peers, args.pettingllms, args.fast))
        load1 = os.getloadavg()[0]
    body = table(before, after, args.base, peers, pettingllms)
    print(body)
    if args.write:
        sys.path.insert(0, str(ROOT))
        from benchmarks._report import write_section

        command = "python benchmarks/env_speed.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        note = (f"{args.rounds} alternating rounds per tree; per-call times (each round's best of 3 timed repeats). "
                f"1-minute load average {load0:.1f} before and {load1:.1f} after (the machine is shared: absolute "
                "numbers move with the load, the ratios much less). Sandbox: 2 warm workers; the tree rollout's engine "
                "is scripted, so its time is the environments' and the sandbox's. "
                + ("reasoning-gym: the `--peers` interpreter's version. " if args.peers else "")
                + ("PettingLLMs: the environment states of the checkout given by `--pettingllms` (Sudoku: our turn's "
                   "puzzle, as its seeded puzzles need a file that does not ship and its built-in 4x4 puzzle has no "
                   "solution). " if args.pettingllms else "PettingLLMs is not measured. ")
                + "Agent turns start from the instance's first state and step a reply that solves it: ours (mode "
                  "\"planner\") the oracle's answer, PettingLLMs' a shortest move list found by breadth-first search "
                  "over its own `step` (Sudoku: the solution grid), so both steps do a winning answer's whole work; the "
                  "move counts are in the table.")
        write_section(args.write, "env_speed", "Environment speed: fork, agent turn, generation, tool runs of a wave",
                      command, note + "\n\n" + body)


if __name__ == "__main__":
    main()
