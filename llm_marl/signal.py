"""No silent non-learning: what a training step learned from, said in words.

A group-relative advantage is zero for every member of a group whose rewards are all equal, and a
sample with advantage 0 (and no KL term) contributes no gradient. A step whose groups all lack reward
variance therefore trains nothing, and an adapter whose samples all have advantage 0 takes no
optimiser step. Both are easy to miss in a metrics file, so each step's messages say them, the
progress bar shows them, and the run's summary counts them.
"""

from __future__ import annotations

from typing import Any

from llm_marl.step_time import step_time_text


def groups_with_variance(metrics: dict[str, float]) -> tuple[int, int]:
    """(groups whose members' credits differ, all groups) of a step's `advantage/` metrics."""
    groups = int(metrics.get("advantage/groups", 0))
    dead = int(metrics.get("advantage/zero_std_groups", 0)) + int(metrics.get("advantage/singleton_groups", 0))
    return groups - dead, groups


def _role_rates(metrics: dict[str, float], key: str) -> dict[str, float]:
    prefix = f"reward/{key}/"
    return {k[len(prefix):]: v for k, v in metrics.items() if k.startswith(prefix)}


def signal_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """`signal/groups_with_variance` and its fraction of all groups, for metrics.jsonl and the plots."""
    varied, groups = groups_with_variance(metrics)
    return {"signal/groups_with_variance": float(varied), "signal/frac_groups_with_variance": varied / groups if groups else 0.0}


def idle_adapters(metrics: dict[str, float], adapters: list[str]) -> list[str]:
    """Adapters that took no optimiser step in the step these metrics describe."""
    return [a for a in adapters if not metrics.get(f"update/{a}/optimizer_steps", 0)]


def _failed_share(metrics: dict[str, float]) -> dict[str, float]:
    """Per role, the share of replies that could earn no credit: malformed, cut off, or none (no room)."""
    kinds = [_role_rates(metrics, key) for key in ("parse_error", "truncated", "context_overflow")]
    return {r: min(1.0, sum(k.get(r, 0.0) for k in kinds)) for r in set().union(*kinds)}


def _unusable_replies(metrics: dict[str, float]) -> str:
    """Why no reply of the step could earn credit ("" when some could): all cut off, or all malformed."""
    truncated, overflow = _role_rates(metrics, "truncated"), _role_rates(metrics, "context_overflow")
    if overflow and min(overflow.values()) >= 1.0:
        return "no prompt fit the model's context window"
    if truncated and min(truncated.values()) >= 1.0:
        return "every reply was cut off at --max-new-tokens"
    failed = _failed_share(metrics)
    if failed and min(failed.values()) >= 1.0:
        return "no reply followed the answer format"
    return ""


def _usable_share(metrics: dict[str, float]) -> float:
    """The smallest share, over the roles, of replies that were neither malformed nor cut off."""
    return 1.0 - max(_failed_share(metrics).values(), default=0.0)


def step_messages(metrics: dict[str, float], adapters: list[str], hints: set[str], env: str = "ENV",
                  warm_started: bool = False, previous: dict[str, float] | None = None) -> list[str]:
    """Sentences about the step's learning signal (empty when every adapter learned something).

    `metrics` holds the step's `advantage/`, `update/<adapter>/` and `reward/` metrics; `hints` the
    advice already given in this run (each is given once); `warm_started`: the run started from
    `--init-adapters`, so the advice is a larger warm start rather than a first one; `previous`: the
    step before's metrics, when this run logged it.
    """
    messages = []
    varied, groups = groups_with_variance(metrics)
    if groups and not varied:
        why = _unusable_replies(metrics)
        messages.append(f"no learning signal: none of the {groups} groups had reward variance (every member of each group "
                        f"earned the same credit){': ' + why if why else ''}, so every advantage is 0")
        if "context window" in why:
            pass  # said below, with its own fix
        elif why and previous is not None and _usable_share(previous) >= 0.5 and _stepped(previous, adapters):
            # At least half the replies usable before the last update and none after it: that update, not the warm start
            # or chance, is the cause.
            if "collapse" not in hints:
                hints.add("collapse")
                messages.append(f"hint: in the step before, {_usable_share(previous):.0%} or more of every role's replies were "
                                "usable, and its update left none: it moved the policy too far; lower --lr and start again")
        elif why and "warm-start" not in hints:
            hints.add("warm-start")
            advice = ("the warm start (--init-adapters) is too small for this: give `llm-marl sft` more demonstrations "
                      "(--demos) or epochs (--epochs)" if warm_started else
                      f"warm-start the policy on demonstrations first: `llm-marl sft --env {env}`, then "
                      "`llm-marl train ... --init-adapters RUN_DIR/adapters`")
            messages.append(f"hint: {advice}" + ("; or raise --max-new-tokens" if "cut off" in why else ""))
    overflow = {r: v for r, v in _role_rates(metrics, "context_overflow").items() if v > 0}
    if overflow:
        shares = ", ".join(f"{role} {value:.0%}" for role, value in sorted(overflow.items()))
        messages.append(f"prompts longer than the model's context window got no reply (penalised as malformed): {shares}; "
                        "shorten the episodes (fewer turns, smaller instances) or use a model with a longer context")
    for adapter in adapters:
        skipped = int(metrics.get(f"update/{adapter}/skipped_nonfinite", 0) + metrics.get(f"dpo/{adapter}/skipped_nonfinite", 0))
        if skipped:
            messages.append(f"adapter {adapter!r}: {skipped} update(s) skipped because the gradient was not finite (NaN or "
                            "inf); its weights were kept. Lower --lr")
    for adapter in idle_adapters(metrics, adapters):
        samples = int(metrics.get(f"update/{adapter}/samples", 0))
        if metrics.get(f"update/{adapter}/skipped_nonfinite", 0):
            continue  # said above
        empty = int(metrics.get(f"update/{adapter}/skipped_empty", 0))
        reason = ("it got no samples" if not samples else f"all its {samples} samples had advantage 0" if not empty else
                  f"none of its {samples} samples had a reply token" if empty == samples else
                  f"its {samples} samples had advantage 0 ({samples - empty}) or no reply token ({empty})")
        messages.append(f"adapter {adapter!r} took no optimiser step: {reason}")
    return messages


def _stepped(metrics: dict[str, float], adapters: list[str]) -> bool:
    """Whether any adapter took an optimiser step in the step these metrics describe."""
    return len(idle_adapters(metrics, adapters)) < len(adapters)


def run_counts(history: list[dict[str, float]], adapters: list[str]) -> dict[str, object]:
    """The run summary's counts, from every logged step (so a resumed run counts its earlier steps too)."""
    return {
        "steps": len(history),
        "steps_without_signal": sum(1 for m in history if groups_with_variance(m)[1] and not groups_with_variance(m)[0]),
        "adapter_steps_without_update": {a: sum(1 for m in history if a in idle_adapters(m, [a])) for a in adapters},
    }


def postfix(metrics: dict[str, float]) -> dict[str, str]:
    """Short fields for the progress bar."""
    varied, groups = groups_with_variance(metrics)
    rewards = {k.rsplit("/", 1)[1]: v for k, v in metrics.items() if k.startswith("reward/reward/")}
    fields = {"success": f"{metrics.get('reward/success_rate', 0.0):.2f}"}
    fields.update({f"r_{role}": f"{value:.2f}" for role, value in sorted(rewards.items())})
    fields["signal"] = f"{varied}/{groups}" if varied else "NONE"
    return fields


def step_line(step: int, steps: int, metrics: dict[str, float]) -> str:
    """One log line per step with the key numbers (for logs that are not a terminal)."""
    fields = postfix(metrics)
    rewards = " ".join(f"{k[2:]} {v}" for k, v in fields.items() if k.startswith("r_"))
    parts = step_time_text(metrics)
    return (f"step {step}/{steps}: success {fields['success']}, reward {rewards}, groups with variance {fields['signal']}, "
            f"{metrics.get('perf/step_s', 0.0):.1f} s" + (f" ({parts})" if parts else ""))


def wave_progress(desc: str, total: int | None, enabled: bool) -> tuple[Any, Any]:
    """A transient progress bar inside a step (rollout waves, evaluation episodes) and the rollout
    callback that advances it: episodes finished, waves and replies so far. Off when `enabled` is False."""
    from tqdm import tqdm

    bar = tqdm(desc=desc, total=total, unit="episode", leave=False, disable=not enabled)

    def on_wave(counts: dict[str, int]) -> None:
        bar.n = counts["episodes"]
        bar.set_postfix(waves=counts["waves"], replies=counts["completions"], refresh=False)
        bar.refresh()

    return bar, on_wave
