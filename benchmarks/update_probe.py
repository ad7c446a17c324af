"""One RL update from a warm start, at several learning rates: how far does it move the log-probability
of the replies it rewards (advantage > 0) and of those it penalises (advantage < 0)?

    python benchmarks/update_probe.py --init-adapters runs/<sft run> --lrs 2e-4 2e-5 5e-6 --write benchmarks.md

One rollout is sampled from the warm-started adapters with the main job's RL settings
(`configs/main-train.yaml`: its first step's tasks, temperature and token limit). Then, for each
learning rate, the adapters are reset to the warm start, a fresh AdamW takes one update on that same
batch (the trainer's `update_policy`, without the schedule's warm-up), and every reply's summed
log-probability is measured again. A useful step raises the rewarded replies and lowers the penalised
ones; a step that lowers both has overshot, whatever the sign of the correlation.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import write_section  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    from llm_marl.advantage import AdvantageConfig
    from llm_marl.algorithms import assign_advantages
    from llm_marl.engines.base import SamplingParams
    from llm_marl.policies import LoRAConfig, PolicySet
    from llm_marl.rollout import make_tasks, rollout
    from llm_marl.threads import set_threads
    from llm_marl.train_cli import _read_train_config
    from llm_marl.trainer import TrainConfig, build_engine, step_seeds, update_policy
    from llm_marl_envs.registry import make_raw

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--init-adapters", required=True, help="the warm start: an `llm-marl sft` run directory")
    parser.add_argument("--config", default=str(ROOT / "configs" / "main-train.yaml"))
    parser.add_argument("--lrs", type=float, nargs="+", default=[2e-4, 2e-5, 5e-6])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", metavar="PATH", help="write the section into this markdown file")
    args = parser.parse_args(argv)

    data = _read_train_config(args.config)
    config = TrainConfig.from_dict({k: data.get(k, {}) for k in ("model", "sampling", "optim", "run", "algo")})
    set_threads(config.run.threads)
    torch.manual_seed(args.seed)
    env_kwargs = config.env_kwargs()
    tasks = make_tasks(config.run.env, step_seeds(args.seed, 1, config.run.envs_per_step), split="train", env_kwargs=env_kwargs)
    roles = list(make_raw(config.run.env, **env_kwargs).possible_agents)
    lora = LoRAConfig(r=config.model.lora_r, alpha=config.model.lora_alpha, dropout=config.model.lora_dropout)
    policy = PolicySet.from_pretrained(config.model.model, roles=roles, policy=config.model.policy, lora=lora, seed=args.seed)
    policy.init_from(args.init_adapters)
    engine = build_engine(config, policy)
    temperature = config.sampling.temperature
    sampling = SamplingParams(temperature=temperature, max_new_tokens=config.sampling.max_new_tokens,
                              seed=step_seeds(args.seed + 1, 1, 1)[0])
    out = rollout(tasks, config.algorithm.sampling_plan(config.algo), engine, sigma=policy, sampling=sampling)
    assign_advantages(out, config.algorithm, config.algo, AdvantageConfig())
    trained = [s for s in out.samples if s.response_ids and s.advantage != 0]
    advantage = np.array([s.advantage for s in trained])
    if not len(trained) or not (advantage > 0).any() or not (advantage < 0).any():
        raise SystemExit("the rollout has no replies with both signs of advantage; try another --seed")

    def logprobs() -> np.ndarray:
        with torch.no_grad():
            return np.array([float(policy.response_logprobs([s.prompt_ids], [s.response_ids], s.adapter, temperature).sum())
                             for s in trained])

    before = logprobs()
    rows = []
    for lr in args.lrs:
        policy.init_from(args.init_adapters)
        optimizers = {a: torch.optim.AdamW(policy.trainable_parameters(a), lr=lr, weight_decay=config.optim.weight_decay)
                      for a in policy.adapters}
        update_policy(policy, optimizers, out.samples, config.optim, config.loss, temperature,
                      getattr(config.algo, "loss_segment", "sample"), np.random.default_rng(args.seed))
        delta = logprobs() - before
        rows.append((lr, delta[advantage > 0].mean(), delta[advantage < 0].mean(), np.corrcoef(delta, advantage)[0, 1]))
        print(f"lr {lr:g}: Δ log-prob advantage>0 {rows[-1][1]:+.2f}, advantage<0 {rows[-1][2]:+.2f}, corr {rows[-1][3]:.2f}", flush=True)

    body = (f"One update on one rollout of {len(tasks)} tasks ({len(trained)} replies with nonzero advantage: "
            f"{int((advantage > 0).sum())} positive, {int((advantage < 0).sum())} negative), sampled at temperature "
            f"{temperature:g} from the warm start `{Path(args.init_adapters).name}`; Δ is each reply's summed log-probability "
            "after the update minus before, in nats. A useful step raises the rewarded replies and lowers the penalised "
            "ones; a step that lowers both has overshot, however well Δ correlates with the advantage.\n\n"
            "| lr | mean Δ, advantage > 0 | mean Δ, advantage < 0 | corr(Δ, advantage) |\n|---:|---:|---:|---:|\n"
            + "\n".join(f"| {lr:g} | {up:+.2f} | {down:+.2f} | {corr:.2f} |" for lr, up, down, corr in rows))
    print(body)
    if args.write:
        write_section(args.write, "update_probe", "One update from the warm start: how far each learning rate moves the replies",
                      f"python benchmarks/update_probe.py --init-adapters <sft run> --lrs {' '.join(f'{lr:g}' for lr in args.lrs)} "
                      "--write benchmarks.md", body)


if __name__ == "__main__":
    main()
