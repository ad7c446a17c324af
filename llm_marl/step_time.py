"""Where a training step's wall time goes: `perf/<part>_s` in metrics.jsonl, parts that add up to `perf/step_s`.

| metric | what it times |
|---|---|
| `perf/generate_s` | the engine's `generate` calls of the rollout (one per wave) |
| `perf/env_s` | the environments: reset, observe, the plan's decisions, fork, step, `planned_calls` (tool waits excluded) |
| `perf/tool_s` | waits on tool runtimes: sandboxed programs and searches, the prefetched ones included |
| `perf/credit_s` | credit assignment and advantages (the algorithm's credit, `--credit shapley`'s Shapley values and judge) |
| `perf/update_s` | old log-probs recomputed (engines other than hf), the policy update, the DPO step, pushing adapters to the engine |
| `perf/other_s` | the rest: the driver's bookkeeping, building requests, step metrics |

Counterfactual replays (`--credit shapley`, SHARP) are played inside the rollout's waves, in the same
engine calls as the real episodes, so their time is in `generate_s`, `env_s` and `tool_s`, not in
`credit_s` (`rollout/counterfactual_completions` counts their share of the replies). With rollout
workers (`--rollout-workers`) the shards run side by side in other processes: the rollout's parts are
those the slowest shard measured (the one the step waited for), and the rest of the rollout (sending
the shards and their samples) is in `other_s`.
"""

from __future__ import annotations

from typing import Any

PARTS = ("generate", "env", "tool", "credit", "update", "other")
"""The parts of a step, in the order the log line shows them; metric `perf/<part>_s`."""


def step_time_metrics(step_s: float, rollout_timings: dict[str, float], credit_s: float, update_s: float) -> dict[str, float]:
    """`perf/<part>_s` of one step of `step_s` seconds; `other_s` is what the measured parts leave."""
    parts = {"generate": rollout_timings.get("generate_s", 0.0), "env": rollout_timings.get("env_s", 0.0),
             "tool": rollout_timings.get("tool_s", 0.0), "credit": credit_s, "update": update_s}
    parts["other"] = max(0.0, step_s - sum(parts.values()))
    return {f"perf/{part}_s": float(parts[part]) for part in PARTS}


def step_time_text(metrics: dict[str, Any]) -> str:
    """'generate 8.1, env 0.1, tool 0.3, credit 0.0, update 3.5, other 0.2' (seconds); '' when not logged."""
    if f"perf/{PARTS[0]}_s" not in metrics:
        return ""
    return ", ".join(f"{part} {metrics.get(f'perf/{part}_s', 0.0):.1f}" for part in PARTS)


def step_time_totals(history: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds per part summed over the logged steps (steps logged before the breakdown existed count in none)."""
    return {part: sum(float(m.get(f"perf/{part}_s", 0.0)) for m in history) for part in PARTS}
