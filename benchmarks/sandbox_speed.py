"""Sandbox speed: per-call latency of our Sandbox against PettingLLMs' fresh interpreter per
program, side by side in one run (issue: Performance).

    python benchmarks/sandbox_speed.py --base c25bd86~1 --rounds 15 --calls 100 --peers /tmp/peers/bin/python --pettingllms /tmp/peers_src --write benchmarks.md

Two programs: a trivial one (`print(1)`) and a small realistic one (a Plan-Path tool program: a
breadth-first search on a 10x10 grid that prints the move list). Each is run one call at a time
(sequential) and with 2 calls in flight, by:
- ours: `Sandbox(workers=2)` with every isolation layer this machine provides (the note lists
  them), warm: both workers are started before timing, so worker start-up is excluded;
- the reference: PettingLLMs' code runner (`_worker_docker` in
  `pettingllms/multi_agent_env/math/math_worker.py`, what its tool agents await): a temporary
  folder, the program written to `script.py`, `python script.py` started with
  `asyncio.create_subprocess_exec` (output to files, its own session, a copy of the environment),
  waited for, its output read back, the folder removed. With `--peers PYTHON --pettingllms SRC`,
  that interpreter imports the function from the checkout and awaits it (2 in flight: two at a
  time under a semaphore); where it cannot be imported (its module imports `ray` at the top, and
  some checkouts lack the file), the same steps are timed as written in its source, and the
  output says so. Its `python` is the `--peers` interpreter (a virtual environment, like its own
  `pettingllms_venv`);
- bare `python -I -S -c PROGRAM` (our interpreter, no site): the least any fresh interpreter costs;
- with `--base REV`, the Sandbox of that commit (its tree exported with `git archive`), timed like
  ours: how a change moved each row, side by side.
Ours and the base run in a subprocess each round, on their own tree (`--worker`).

Every timed phase (a runner's sequential calls, its calls 2 in flight) starts after REST_S seconds
of rest, as tool runs come in training (between generation steps): what one phase leaves behind
(processes the scheduler has placed on one core, a worker's spare child) does not carry into the
next. Rounds alternate the runners, so a load change hits all of them; each row gives the minimum and
the median over the rounds of the per-call time (sequential: a round's median call; 2 in flight:
a round's wall time divided by its calls) and the ratio of the medians. The load average is
printed before and after: the machine is shared, so absolute numbers move with it.
No peer code is copied into the project; the peers are only imported by the `--peers` interpreter.
The scratch setup (outside the project; the runner needs only the standard library, and a checkout
whose module imports `ray` at its top makes the script time the runner's steps as its source takes
them, as said above):

    python3 -m venv /tmp/peers
    git clone --depth 1 https://github.com/pettingllms-ai/PettingLLMs /tmp/peers_src
    python benchmarks/sandbox_speed.py --base c25bd86~1 --rounds 15 --calls 100 --peers /tmp/peers/bin/python --pettingllms /tmp/peers_src

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
import threading
import time
from contextlib import nullcontext
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # our package imports numpy: no spinning BLAS threads
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout: python benchmarks/...

from benchmarks._report import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BFS = '''from collections import deque
grid = ["S...#.....", ".##.#.###.", ".#..#...#.", ".#.###.#..", ".#.....#.#",
        ".####.##..", "......#..#", ".#.#.##.#.", ".#.#....#.", "...#.##..G"]
start = next((r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == "S")
goal = next((r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == "G")
moves = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
came = {start: None}
queue = deque([start])
while queue:
    cell = queue.popleft()
    if cell == goal:
        break
    for name, (dr, dc) in moves.items():
        r, c = cell[0] + dr, cell[1] + dc
        if 0 <= r < 10 and 0 <= c < 10 and grid[r][c] != "#" and (r, c) not in came:
            came[(r, c)] = (cell, name)
            queue.append((r, c))
path = []
while came[cell] is not None:
    cell, name = came[cell]
    path.append(name)
print("[" + ", ".join(reversed(path)) + "]")
'''
PROGRAMS = {"trivial (`print(1)`)": "print(1)", "Plan-Path tool program (BFS, 10x10)": BFS}
EXPECTED = {"print(1)": "1\n"}
REST_S = 0.5
"""Rest before every timed phase (see the module's docstring)."""

# The --peers interpreter runs this: PettingLLMs' runner imported from the checkout, or (when it
# cannot be) the same steps as its source takes them.
REFERENCE_WORKER = r'''
import asyncio, json, os, shutil, statistics, sys, tempfile, time
src, programs, calls, rest = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
how = "imported"
try:
    if not src:
        raise ImportError("no --pettingllms checkout given")
    sys.path.insert(0, src)
    from pettingllms.multi_agent_env.math.math_worker import _worker_docker as run
except ImportError as exc:
    how = "re-timed (" + (str(exc) or type(exc).__name__) + ")"

    async def run(script, timeout=40.0):
        # The steps of _worker_docker: a folder under ./tmp, script.py, output files, `python
        # script.py` in its own session with a copy of the environment, read back, folder removed.
        os.makedirs("tmp", exist_ok=True)
        tmpdir = os.path.abspath(tempfile.mkdtemp(prefix="pllm_exec_", dir="tmp"))
        script_path = os.path.join(tmpdir, "script.py")
        with open(script_path, "w", encoding="utf-8") as f:
            f.write(script)
        out_path, err_path = os.path.join(tmpdir, "stdout.txt"), os.path.join(tmpdir, "stderr.txt")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = await asyncio.create_subprocess_exec("python", script_path, stdout=out, stderr=err, cwd=tmpdir,
                                                        env=os.environ.copy(), start_new_session=True)
            await asyncio.wait_for(proc.wait(), timeout=timeout)
        with open(out_path, "rb") as f:
            stdout = f.read().decode(errors="replace")
        with open(err_path, "rb") as f:
            stderr = f.read().decode(errors="replace")
        shutil.rmtree(tmpdir, ignore_errors=True)
        return f"error: {stderr}\n\nSTDOUT:\n{stdout}" if stderr.strip() else stdout

async def sequential(code):
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        out = await run(code, 40.0)
        times.append(time.perf_counter() - start)
        assert not out.startswith(("error", "timeout")), out
    return statistics.median(times)

async def two_in_flight(code):
    gate = asyncio.Semaphore(2)
    async def one():
        async with gate:
            out = await run(code, 40.0)
            assert not out.startswith(("error", "timeout")), out
    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    return (time.perf_counter() - start) / calls

result = {"how": how}
for name, code in programs.items():
    time.sleep(rest)
    one_at_a_time = asyncio.run(sequential(code))
    time.sleep(rest)
    result[name] = {"sequential": one_at_a_time, "two": asyncio.run(two_in_flight(code))}
print(json.dumps(result))
'''


# ---------------------------------------------------------------------------- one round of each runner
def ours(sandbox, calls: int) -> dict:
    out = {}
    for name, code in PROGRAMS.items():
        times = []
        time.sleep(REST_S)
        for _ in range(calls):
            start = time.perf_counter()
            result = sandbox.run(code)
            times.append(time.perf_counter() - start)
            _check(result.ok and result.stdout == EXPECTED.get(code, result.stdout), result)
        time.sleep(REST_S)
        start = time.perf_counter()
        results = sandbox.run_many([(code, "")] * calls)
        two = (time.perf_counter() - start) / calls
        _check(all(r.ok for r in results), results[0])
        out[name] = {"sequential": statistics.median(times), "two": two}
    return out


def worker(calls: int) -> dict:
    """One round of `ours` with the Sandbox of the tree in the current directory (`--worker`)."""
    sys.path.insert(0, os.getcwd())
    from llm_marl_envs import sandbox as package

    with package.Sandbox(workers=2) as sandbox:
        sandbox.run_many([("print(1)", "")] * 2)  # start both workers: start-up is not timed
        return {"package": package.__file__, "layers": sandbox.isolation(), **ours(sandbox, calls)}


def on_tree(tree: Path, calls: int) -> dict:
    """A round of `worker` in a subprocess on `tree`; checks that it timed that tree's Sandbox."""
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", "--calls", str(calls)],
                          cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"worker on {tree} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if not Path(out.pop("package")).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"the worker on {tree} did not import that tree's sandbox")
    return out


def reference(python: str, src: str | None, calls: int) -> dict:
    """One round in the --peers interpreter, in a scratch folder (the runner writes under ./tmp),
    with that interpreter's folder first on PATH: its `python`."""
    with tempfile.TemporaryDirectory(prefix="sandbox-speed-") as cwd:
        env = {**os.environ, "PATH": str(Path(python).parent) + os.pathsep + os.environ.get("PATH", "")}
        proc = subprocess.run([python, "-c", REFERENCE_WORKER, src or "", json.dumps(PROGRAMS), str(calls), str(REST_S)],
                              capture_output=True, text=True, cwd=cwd, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"reference worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bare(calls: int) -> dict:
    """`python -I -S -c PROGRAM`, sequential and 2 in flight (two threads, each starting its own)."""
    def once(code: str) -> None:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, check=False)
        _check(proc.returncode == 0, proc)

    out = {}
    for name, code in PROGRAMS.items():
        times = []
        time.sleep(REST_S)
        for _ in range(calls):
            start = time.perf_counter()
            once(code)
            times.append(time.perf_counter() - start)
        time.sleep(REST_S)
        todo = iter(range(calls))
        lock = threading.Lock()

        def drain() -> None:
            while True:
                with lock:
                    if next(todo, None) is None:
                        return
                once(code)

        start = time.perf_counter()
        threads = [threading.Thread(target=drain) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out[name] = {"sequential": statistics.median(times), "two": (time.perf_counter() - start) / calls}
    return out


def _check(ok: bool, what: object) -> None:
    if not ok:
        raise RuntimeError(f"benchmark program failed: {what}")


# ---------------------------------------------------------------------------- table
def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def table(runs: dict[str, list[dict]], base: str | None = None) -> str:
    """One row per (program, mode): min / median over rounds per runner, and how many times faster
    ours is than the reference, a bare interpreter and (`base`) the base commit's Sandbox (medians)."""
    have_ref = bool(runs["reference"])
    runners = ["ours", *(["base"] if base else []), "reference", "bare"]
    titles = {"ours": "ours", "base": f"base {base}", "reference": "PettingLLMs runner", "bare": "bare `python -I -S -c`"}
    ratios = ["reference", "bare", *(["base"] if base else [])]
    head = "| program | calls in flight | " + " | ".join(f"{titles[r]}: min / median" for r in runners)
    head += " | " + " | ".join(f"{r} / ours" for r in ratios) + " |"
    lines = [head, "|---|---:|" + "---:|" * (len(runners) + len(ratios))]
    for name in PROGRAMS:
        for mode, label in (("sequential", "1"), ("two", "2")):
            cells = []
            medians = {}
            for runner in runners:
                values = [r[name][mode] for r in runs[runner]]
                if values:
                    medians[runner] = statistics.median(values)
                    cells.append(f"{_ms(min(values))} / {_ms(medians[runner])}")
                else:
                    cells.append("not measured")
            shown = [f"{medians[r] / medians['ours']:.1f}x" if r in medians else "-" for r in ratios]
            if have_ref:
                shown[0] = f"**{shown[0]}**"
            lines.append(f"| {name} | {label} | {' | '.join(cells)} | {' | '.join(shown)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of every runner")
    ap.add_argument("--calls", type=int, default=60, help="calls per program, mode and runner in a round")
    ap.add_argument("--base", metavar="REV", help="also time the Sandbox of this git revision (exported with git archive)")
    ap.add_argument("--peers", metavar="PYTHON", help="the interpreter of a scratch virtual environment outside the "
                    "project that runs PettingLLMs' runner (and is its `python`)")
    ap.add_argument("--pettingllms", metavar="SRC", help="a PettingLLMs checkout (github.com/pettingllms-ai/PettingLLMs); "
                    "its runner is imported by the --peers interpreter, nothing of it is installed into the project")
    ap.add_argument("--write", metavar="FILE", help="write the table into this markdown file's sandbox_speed section")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rounds < 1 or args.calls < 2:
        ap.error("--rounds must be >= 1 and --calls >= 2")
    if args.worker:
        print(json.dumps(worker(args.calls)))
        return
    from benchmarks._base_tree import exported_tree

    load0 = os.getloadavg()
    runs: dict[str, list[dict]] = {"ours": [], "base": [], "reference": [], "bare": []}
    how = None
    with exported_tree(args.base, prefix="sandbox-speed-base-") if args.base else nullcontext() as base_tree:
        for _ in range(args.rounds):
            runs["ours"].append(on_tree(ROOT, args.calls))
            layers = runs["ours"][-1].pop("layers")
            if args.base:
                runs["base"].append(on_tree(base_tree, args.calls))
                runs["base"][-1].pop("layers")
            if args.peers:
                ref = reference(args.peers, args.pettingllms, args.calls)
                how = ref.pop("how")
                runs["reference"].append(ref)
            runs["bare"].append(bare(args.calls))
    load1 = os.getloadavg()
    body = table(runs, args.base)
    on = ", ".join(k for k, v in layers.items() if v is True)
    off = ", ".join(k for k, v in layers.items() if v is False) or "none"
    note = (f"{args.rounds} alternating rounds of {args.calls} calls per program, mode and runner, each timed phase after "
            f"{REST_S} s of rest. Ours: 2 warm workers, "
            f"default limits, isolation layers on: {on} (user: {layers.get('user')}); off: {off}. "
            + (f"Base: the same calls on the Sandbox of {args.base}. " if args.base else "")
            + (f"Reference: PettingLLMs' runner `_worker_docker`, {how}, its `python` being `{args.peers}`. "
               if args.peers else "The reference was not measured (no `--peers`). ")
            + f"Load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load0)}; "
            f"after: {', '.join(f'{x:.2f}' for x in load1)}.")
    print(body + "\n\n" + note)
    if args.write:
        command = "python benchmarks/sandbox_speed.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        write_section(args.write, "sandbox_speed", "Sandbox speed: per-call latency against a fresh interpreter per program",
                      command, note + "\n\n" + body)


if __name__ == "__main__":
    main()
