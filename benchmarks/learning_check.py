"""Learning check: does AT-GRPO raise the reward on an easy configuration in a short run?

    python benchmarks/learning_check.py --steps 15 --write benchmarks.md

The easy configuration: Plan-Path on a 3x3 grid (paths of 2-3 moves, one turn), tool + planner
(mode "mas", one shared LoRA adapter), the tiny test model (tiny-random fine-tuned for a few hundred
steps on oracle replies: `tests/support/tiny_sft.py`, so that its replies are sometimes right).
The script reports the training curve (mean rewards and success rate of the sampled episodes per
step) and a greedy evaluation on 50 validation instances before and after training.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._report import write_section  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--envs-per-step", type=int, default=4)
    parser.add_argument("--K", type=int, default=4)
    parser.add_argument("--eval-n", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", metavar="PATH")
    args = parser.parse_args(argv)

    from llm_marl.config import ModelConfig, OptimConfig, RunConfig, SamplingConfig
    from llm_marl.engines import make_engine
    from llm_marl.engines.base import SamplingParams
    from llm_marl.evaluate import evaluate
    from llm_marl.train_cli import load_policy
    from llm_marl.trainer import TrainConfig, train
    from tests.support.tiny_sft import ENV_ARGS, tiny_planner

    model = str(tiny_planner())
    env_args = dict(ENV_ARGS, mode="mas")
    greedy = SamplingParams(temperature=0.0, max_new_tokens=40)

    def greedy_eval(adapters: Path | None) -> dict:
        policy = load_policy(model, ["tool", "planner"], adapters=adapters, seed=args.seed)
        engine = make_engine("hf", policy, seed=args.seed)
        return evaluate(engine, "plan_path", n=args.eval_n, split="val", env_kwargs=env_args,
                        sigma=policy if adapters is not None else None, sampling=greedy)

    before = greedy_eval(None)
    with tempfile.TemporaryDirectory() as out:
        config = TrainConfig(
            model=ModelConfig(model=model, policy="shared", lora_r=8, lora_alpha=16),
            sampling=SamplingConfig(temperature=1.0, max_new_tokens=40),
            optim=OptimConfig(lr=2e-3, minibatch_size=16),
            run=RunConfig(env="plan_path", env_args=env_args, algo="at-grpo", steps=args.steps,
                          envs_per_step=args.envs_per_step, seed=args.seed, out_dir=out, progress=False),
            algo={"K": args.K},
        )
        run = train(config, log=lambda *_: None)
        curve = run.metrics()
        after = greedy_eval(run.path / "adapters")

    lines = [
        f"AT-GRPO (K={args.K}, α=1, shared LoRA r=8, lr 2e-3) on Plan-Path 3x3 (`{env_args}`), "
        f"{args.envs_per_step} instances per step, {args.steps} steps, model: tiny-random fine-tuned on oracle replies "
        "(tests/support/tiny_sft.py). Sampled at temperature 1.",
        "",
        "| step | planner reward | tool reward | success rate (sampled) | groups with variance |",
        "|---:|---:|---:|---:|---:|",
    ]
    for m in curve:
        groups = m.get("advantage/groups", 0.0)
        varied = groups - m.get("advantage/zero_std_groups", 0.0)
        lines.append(f"| {m['step']} | {m.get('reward/reward/planner', 0.0):.3f} | {m.get('reward/reward/tool', 0.0):.3f} | "
                     f"{m['reward/success_rate']:.2f} | {varied:.0f} / {groups:.0f} |")
    lines += [
        "",
        f"Greedy evaluation on {args.eval_n} validation instances (temperature 0):",
        "",
        "| | success rate | planner return | tool return |",
        "|---|---:|---:|---:|",
        f"| before training | {before['success_rate']:.2f} | {before['mean_return'].get('planner', 0):.3f} | {before['mean_return'].get('tool', 0):.3f} |",
        f"| after training | {after['success_rate']:.2f} | {after['mean_return'].get('planner', 0):.3f} | {after['mean_return'].get('tool', 0):.3f} |",
    ]
    body = "\n".join(lines)
    print(body)
    if args.write:
        command = shlex.join(["python", "benchmarks/learning_check.py", *(sys.argv[1:] if argv is None else argv)])
        write_section(args.write, "learning-check", "Learning check: AT-GRPO on an easy Plan-Path configuration", command, body)


if __name__ == "__main__":
    main()
