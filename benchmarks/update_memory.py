"""The update's peak memory and time by `--micro-batch-size` and `--gradient-checkpointing`: one minibatch of long
replies, one optimiser step.

    python benchmarks/update_memory.py --model smollm2-135m --samples 8 --prompt 400 --reply 512 --micro 0 4 2 1 \
        --checkpointing off on --malloc default returning --write benchmarks.md
    python benchmarks/update_memory.py --device cuda --model PATH --samples 8 --prompt 2048 --reply 4096 \
        --micro 0 2 1 --checkpointing off on --write benchmarks.md  # on a GPU: its own section
    python benchmarks/update_memory.py --replies-per-prompt 4 --samples 8 --prompt 800 --reply 128 --micro 0 4 \
        --checkpointing off on --write benchmarks.md  # a decision's K candidates: their own section

Each row runs in its own subprocess: it loads the model (`--dtype auto`: bfloat16 on a GPU that has it),
builds `--samples` synthetic samples (random prompt and reply tokens, non-zero advantages; each prompt
answered by `--replies-per-prompt` of them, 1 by default), and takes one update (`trainer.update_policy`,
token-mean, one epoch, a minibatch holding every sample). Peak memory is over what the process held
just before the update (the model, the optimizer's state not yet allocated): activations, gradients
and AdamW's moments.

On a GPU it is the peak of the tensors allocated at once (`torch.cuda.max_memory_allocated`). On the
CPU it is the process's maximum resident set (`ru_maxrss`), which is more than the tensors alive at
once: glibc's malloc raises its mmap threshold as large blocks are freed, then serves them from its
heaps and keeps the freed memory. `--malloc returning` runs the workers with
`MALLOC_MMAP_THRESHOLD_=65536` (every large block its own mapping, returned when freed): their peak is
close to the tensors alive at once, at the cost of a page fault for every page of every new block.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def worker(model: str, samples: int, prompt: int, reply: int, micro: int, checkpointing: bool, device: str,
           replies_per_prompt: int = 1) -> dict[str, float]:
    import numpy as np
    import torch

    from llm_marl.config import OptimConfig
    from llm_marl.loss import LossConfig
    from llm_marl.policies import PolicySet
    from llm_marl.rollout import Sample
    from llm_marl.trainer import update_policy

    from llm_marl.models import resolve_device

    torch.set_num_threads(len(os.sched_getaffinity(0)))
    device = resolve_device(device)
    cuda = device.startswith("cuda")
    policy = PolicySet.from_pretrained(model, roles=["tool"], policy="shared", device=device, dtype="auto")
    rng = np.random.default_rng(0)
    vocab = policy.tokenizer.vocab_size
    prompts = [rng.integers(10, vocab, prompt).tolist() for _ in range(-(-samples // replies_per_prompt))]
    batch = [Sample(sample_id=i, task_id=f"t{i}", episode_id=f"t{i}", decision_id=i, candidate=0, role="tool", turn=0, step=0,
                    adapter="shared", messages=[], text="", prompt_ids=prompts[i // replies_per_prompt],
                    response_ids=rng.integers(10, vocab, reply).tolist(), old_logprobs=[-5.0] * reply,
                    advantage=float(rng.choice([-1.0, 1.0]))) for i in range(samples)]
    optim = OptimConfig(minibatch_size=samples, micro_batch_size=micro, gradient_checkpointing=checkpointing, kl_beta=0.0, ratio_level="token", loss_agg="token-mean")
    optimizers = {"shared": torch.optim.AdamW(policy.trainable_parameters("shared"), lr=1e-5)}
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device) / 2**20 if cuda else _rss_mib()
    start = time.perf_counter()
    update_policy(policy, optimizers, batch, optim, LossConfig(aggregation="token-mean"), 1.0, "sample", np.random.default_rng(0))
    if cuda:
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    if cuda:
        peak = torch.cuda.max_memory_allocated(device) / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"peak_over_mib": peak - before, "seconds": seconds}


def run_worker(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    """One row in a fresh process: `worker`'s result."""
    proc = subprocess.run([sys.executable, __file__, *argv], cwd=ROOT, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--samples", type=int, default=8, help="samples in the minibatch")
    ap.add_argument("--prompt", type=int, default=400, help="prompt tokens per sample")
    ap.add_argument("--reply", type=int, default=512, help="reply tokens per sample")
    ap.add_argument("--replies-per-prompt", type=int, default=1,
                    help="replies that share each prompt (a decision's K candidates; the update runs a shared prompt once)")
    ap.add_argument("--micro", type=int, nargs="+", default=[0, 4, 2, 1], help="micro-batch sizes (0: the whole minibatch)")
    ap.add_argument("--checkpointing", nargs="+", choices=["off", "on"], default=["off"],
                    help="run each size without and/or with --gradient-checkpointing")
    ap.add_argument("--malloc", nargs="+", choices=["default", "returning"], default=["default"],
                    help="glibc's malloc as it is, and/or returning every large block when freed (MALLOC_MMAP_THRESHOLD_=65536)")
    ap.add_argument("--device", default="cpu", help="where the model runs (llm-marl's --device); a GPU run writes its own section")
    ap.add_argument("--write", metavar="FILE", help="write the table into this benchmarks.md section")
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker-checkpointing", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.worker is not None:
        print(json.dumps(worker(args.model, args.samples, args.prompt, args.reply, args.worker, args.worker_checkpointing,
                                args.device, args.replies_per_prompt)))
        return
    from benchmarks.step_breakdown import gpu_name

    gpu = gpu_name(args.device)
    if gpu and args.malloc != ["default"]:
        ap.error("--malloc is about the CPU's resident set; a GPU run measures the tensors allocated (drop --malloc)")
    rows = [("" if gpu else "| malloc ") + "| --gradient-checkpointing | --micro-batch-size | passes | peak memory over the loaded model "
            "| update time |", "|---" * (5 if gpu else 6) + "|"]
    for malloc, checkpointing, micro in itertools.product(args.malloc, args.checkpointing, args.micro):  # a fresh worker each
        cmd = ["--worker", str(micro), "--model", args.model, "--samples", str(args.samples), "--prompt", str(args.prompt),
               "--reply", str(args.reply), "--device", args.device, "--replies-per-prompt", str(args.replies_per_prompt)] + (["--worker-checkpointing"] if checkpointing == "on" else [])
        env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
        env.update({"MALLOC_MMAP_THRESHOLD_": "65536"} if malloc == "returning" else {})
        result = run_worker(cmd, env)
        passes = 1 if micro == 0 else -(-args.samples // micro)
        rows.append(("" if gpu else f"| {malloc} ") + f"| {checkpointing} | {micro or 'off'} | {passes} | "
                    f"{result['peak_over_mib']:,.0f} MiB | {result['seconds']:.1f} s |")
    body = "\n".join(rows)
    print(body)
    if args.write:
        from benchmarks._report import write_section

        command = "python benchmarks/update_memory.py " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
        where = (f"on {gpu} (`--device {args.device}`, bfloat16 where the GPU has it; the peak of the tensors allocated)" if gpu
                 else "on the CPU (float32; the peak resident set)")
        shared = f" ({args.replies_per_prompt} replies to each prompt)" if args.replies_per_prompt > 1 else ""
        note = (f"One minibatch of {args.samples} samples of {args.prompt} prompt and {args.reply} reply tokens{shared} on "
                f"{args.model} {where}, LoRA r=16, one optimiser step; each row in a fresh process, measured once (a single "
                "run per row: the times are not medians).")
        name = "update-memory" + ("-shared-prompts" if shared else "") + ("-cuda" if gpu else "")
        title = ("Update memory by micro-batch size and gradient checkpointing" + (", replies sharing prompts" if shared else "")
                 + (" on a GPU" if gpu else ""))
        write_section(args.write, name, title, command, body + "\n\n" + note)


if __name__ == "__main__":
    main()
