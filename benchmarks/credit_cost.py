"""Credit cost: extra generations per training step caused by counterfactual replays (issue 6).

    python benchmarks/credit_cost.py                       # print the tables
    python benchmarks/credit_cost.py --write benchmarks.md # and replace the "credit-cost" section there

Two measurements, each a few rollout steps of `--tasks` train instances with G parallel
trajectories per instance (the training step's sampling, without the update):

(a) SHARP (`--algo sharp`) on deep_search_v3 (default settings, mode "mas": a planner and up to 5
    workers) at credit sparsification p in {0, 0.5, 1}: one masked replay per evaluated worker.
(b) `--credit shapley` on MATPO's plan on mass_v4 (3 players: rewriter, reranker, answerer): the
    exact estimator (one replay per coalition other than the full one: 2^3 - 1 = 7 per episode)
    against Monte Carlo with M in {1, 2, 4} sampled permutations (the distinct prefix coalitions of
    the permutations), plus MATPO without replays; and the MC error |φ_MC - φ_exact|.

Policy: the scripted oracles (`agents/oracle`) served through a `ScriptedEngine`, so the planner
really delegates to workers (a tiny random model never does) and the counts are those of a
competent policy. Both oracles are pure functions of the observation (they keep no state across
calls and ignore `turn`), so one instance serves every interleaved branch and replay. They are
deterministic: the G trajectories of an instance are identical, and exact and MC replays see the
same coalition values, so the MC error below is the permutation sampling error alone.

The driver's counters (`Rollout.stats`): `completions` counts every generated reply, replays
included; ordinary = completions - counterfactual_completions. Fixed replies (the masked output of
an ablated agent) cost no generation and are counted apart.
"""

from __future__ import annotations

import argparse
import math
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from agents.oracle.deep_search import DeepSearchOracle  # noqa: E402
from agents.oracle.mass import MASSOracle  # noqa: E402
from llm_marl.algorithms import get  # noqa: E402
from llm_marl.credit.team import CreditConfig, episode_shapley, shapley_plan  # noqa: E402
from llm_marl.engines.base import SamplingParams  # noqa: E402
from llm_marl.engines.scripted import ScriptedEngine  # noqa: E402
from llm_marl.rollout.driver import make_tasks, rollout  # noqa: E402
from llm_marl.rollout.replay import players_of, replay_values  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=3, help="rollout steps per configuration (numbers are means over steps)")
    p.add_argument("--tasks", type=int, default=4, help="train instances per step")
    p.add_argument("--G", type=int, default=4, help="parallel trajectories per instance")
    p.add_argument("--sparsify", type=float, nargs="+", default=[0.0, 0.5, 1.0], help="SHARP sparsification p values")
    p.add_argument("--permutations", type=int, nargs="+", default=[1, 2, 4], help="Monte Carlo permutations M")
    p.add_argument("--seed", type=int, default=0, help="first task seed and sampling seed")
    p.add_argument("--write", metavar="PATH", help="write the report into this markdown file (section 'credit-cost')")
    return p.parse_args(argv)


def oracle_engine(oracle: Any) -> ScriptedEngine:
    """The oracle's reply to each request (the same for every sample index: it is deterministic)."""

    def reply(request, k: int) -> str:
        return oracle.act(request.tag.agent, {"messages": request.messages, "turn": request.tag.step})

    return ScriptedEngine(reply)


def steps_of(args: argparse.Namespace) -> list[range]:
    return [range(args.seed + s * args.tasks, args.seed + (s + 1) * args.tasks) for s in range(args.steps)]


def worker_credit(out: Any) -> float:
    """Mean SHARP credit acc(τ) - acc(τ without m) over the single-agent replays (nan without replays)."""
    values = replay_values(out)
    credits = [values[(eid, frozenset())] - v for (eid, absent), v in values.items() if len(absent) == 1]
    return statistics.mean(credits) if credits else float("nan")


def measure(env: str, plan_fn, oracle: Any, args: argparse.Namespace) -> tuple[dict[str, float], list[Any]]:
    """Mean per-step stats of `--steps` rollouts under a fresh plan; also the rollouts."""
    rows, outs = [], []
    for s, seeds in enumerate(steps_of(args)):
        tasks = make_tasks(env, seeds=seeds, split="train")
        sampling = SamplingParams(temperature=1.0, max_new_tokens=512, seed=args.seed + s)
        t = time.perf_counter()
        out = rollout(tasks, plan_fn(), oracle_engine(oracle), sigma=None, sampling=sampling)
        wall = time.perf_counter() - t
        st = out.stats
        real = out.real_episodes
        replays = [ep for ep in out.episodes if ep.counterfactual is not None]
        ordinary = st["completions"] - st["counterfactual_completions"]
        rows.append({
            "ordinary": ordinary, "cf": st["counterfactual_completions"], "fixed": st["counterfactual_fixed_replies"],
            "replays": st["counterfactual_episodes"], "waves": st["waves"], "wall": wall,
            "extra_pct": 100.0 * st["counterfactual_completions"] / ordinary if ordinary else 0.0,
            "episodes": len(real), "success": statistics.mean(ep.success for ep in real) if real else 0.0,
            "workers": statistics.mean(sum(r != "planner" for r in players_of(out, ep)) for ep in real) if real else 0.0,
            "real_steps": statistics.mean(ep.steps for ep in real) if real else 0.0,
            "replay_steps": statistics.mean(ep.steps for ep in replays) if replays else float("nan"),
            "worker_credit": worker_credit(out),
        })
        outs.append(out)
    return {k: nanmean([r[k] for r in rows]) for k in rows[0]}, outs


def nanmean(xs: list[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.mean(xs) if xs else float("nan")


def fmt(x: float, spec: str) -> str:
    return "-" if math.isnan(x) else format(x, spec)


def sharp_table(args: argparse.Namespace) -> str:
    sharp = get("sharp")
    oracle = DeepSearchOracle()
    lines = ["| p | ordinary completions | counterfactual completions | cf fixed replies | replay episodes | "
             "extra generations | waves | workers / trajectory | replays / trajectory | agent steps: real / replay | "
             "mean worker credit | success | rollout s |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in args.sparsify:
        config = sharp.config_cls(G=args.G, sparsify_p=p)
        m, _ = measure("deep_search", lambda: sharp.sampling_plan(config), oracle, args)
        lines.append(f"| {p:g} | {m['ordinary']:.1f} | {m['cf']:.1f} | {m['fixed']:.1f} | {m['replays']:.1f} | "
                     f"{m['extra_pct']:.1f}% | {m['waves']:.1f} | {m['workers']:.2f} | {m['replays'] / m['episodes']:.2f} | "
                     f"{m['real_steps']:.1f} / {fmt(m['replay_steps'], '.1f')} | {fmt(m['worker_credit'], '.3f')} | "
                     f"{m['success']:.2f} | {m['wall']:.2f} |")
    return "\n".join(lines)


def shapley_table(args: argparse.Namespace) -> str:
    matpo = get("matpo")
    base_config = matpo.config_cls(G=args.G)
    oracle = MASSOracle()
    configs: list[tuple[str, CreditConfig | None]] = [("matpo, no replays", None),
                                                      ("exact", CreditConfig(credit="shapley", shapley_estimator="exact"))]
    configs += [(f"mc, M={M}", CreditConfig(credit="shapley", shapley_estimator="mc", shapley_permutations=M))
                for M in args.permutations]
    lines = ["| estimator | ordinary completions | counterfactual completions | cf fixed replies | replay episodes | "
             "extra generations | waves | coalitions replayed / episode | mean abs φ error vs exact | rollout s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    exact_phi: dict[str, dict[str, float]] = {}
    scale = "-"
    for label, cc in configs:
        if cc is None:
            plan_fn = lambda: matpo.sampling_plan(base_config)  # noqa: E731
        else:
            plan_fn = lambda cc=cc: shapley_plan(matpo.sampling_plan(base_config), cc)  # noqa: E731
        m, outs = measure("mass", plan_fn, oracle, args)
        err = "-"
        if cc is not None:
            phis: dict[str, dict[str, float]] = {}
            for out in outs:
                values = replay_values(out)
                for ep in out.real_episodes:
                    phis[ep.episode_id] = episode_shapley(out, ep, cc, values)
            if cc.shapley_estimator == "exact":
                exact_phi = phis
                err = "0 (reference)"
                agents = list(next(iter(phis.values()))) if phis else []
                scale = ", ".join(f"{a} {statistics.mean(phi[a] for phi in phis.values() if a in phi):.3f}" for a in agents)
            else:
                diffs = [abs(phi[a] - exact_phi[eid][a]) for eid, phi in phis.items() for a in phi]
                err = f"{statistics.mean(diffs):.4f}"
        lines.append(f"| {label} | {m['ordinary']:.1f} | {m['cf']:.1f} | {m['fixed']:.1f} | {m['replays']:.1f} | "
                     f"{m['extra_pct']:.1f}% | {m['waves']:.1f} | {m['replays'] / m['episodes']:.2f} | {err} | {m['wall']:.2f} |")
    lines += ["", f"Mean exact φ per agent (for scale): {scale}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    t = time.perf_counter()
    a = sharp_table(args)
    b = shapley_table(args)
    total = time.perf_counter() - t
    per_step = f"{args.tasks} train instances x G={args.G} trajectories"
    body = (
        "Extra generations per training step caused by counterfactual replays (issue 6). Policy: the scripted "
        "oracles (`agents/oracle`) served through a `ScriptedEngine`, so the planner really delegates to workers "
        "and every replay regenerates what a competent policy would; a tiny random model never delegates, so it "
        "would show no replays. The oracles are deterministic, so the G trajectories of an instance coincide and "
        "exact and Monte Carlo replays see the same coalition values. "
        f"Each row: mean per step over {args.steps} steps of {per_step} (seeds {args.seed}..{args.seed + args.steps * args.tasks - 1}, "
        "train split). Ordinary completions = generated replies of the G real trajectories; counterfactual "
        "completions = replies regenerated by replays (extra generations = counterfactual / ordinary); cf fixed "
        "replies = masked outputs of the ablated agents (no generation); waves = engine calls of the rollout, "
        "replays share them with the lines still running. Rollout seconds are the scripted engine and environment "
        "cost only (no model), so they measure the driver's overhead, not generation time.\n\n"
        f"(a) SHARP on deep_search_v3 (defaults: mode mas, up to 5 workers, mixed 2-4 hops), G={args.G}, masked "
        "baseline, sparsification p = probability that a worker gets a replay (p = 0 is MATPO's cost). A replay "
        "starts just before the masked worker's first turn and regenerates everything after it; the oracle planner, "
        "reading a summary with no conclusion, delegates the same hop again to the next unused worker, so a replay "
        "is longer than its original and recovers the answer (worker credit 0). A policy that gives up instead "
        "would make replays shorter and cheaper.\n\n" + a + "\n\n"
        f"(b) `--credit shapley` on MATPO's plan (G={args.G}) on mass_v4 (3 players), masked baseline; exact replays "
        "the 2^3 - 1 = 7 coalitions other than the full one (the empty coalition included), Monte Carlo the distinct "
        "prefix coalitions of M permutations (seeded by the episode id). The φ error is the mean over episodes and "
        "agents of |φ_MC - φ_exact| on the same episodes (team reward F1 in [0, 1]):\n\n" + b + "\n\n"
        f"Total script time {total:.1f} s."
    )
    print(body)
    if args.write:
        from benchmarks._report import write_section

        command = shlex.join(["python", "benchmarks/credit_cost.py", *(sys.argv[1:] if argv is None else argv)])
        write_section(args.write, "credit-cost", "Credit cost: extra generations of counterfactual replays (SHARP, Shapley)",
                      command, body)
        print(f"wrote section 'credit-cost' of {args.write}")


if __name__ == "__main__":
    main()
