"""Learning curves of a run, as a PNG next to its `metrics.jsonl`.

    learning_curve(run_dir)            # -> run_dir/learning_curve.png

Three panels over training steps: the mean step reward of each role (what training maximises), the
success rate of the sampled episodes, and the fraction of advantage groups with reward variance (the
steps that could teach anything). The held-out greedy evaluation before and after training, when the
run has one, is drawn as markers at step 0 and at the last step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILENAME = "learning_curve.png"


def learning_curve(run_dir: str | Path, history: list[dict[str, Any]] | None = None, path: str | Path | None = None) -> Path:
    """Draw the run's curves; returns the PNG's path."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    from llm_marl.runs import RunDir

    run_dir = Path(run_dir)
    history = RunDir(run_dir).metrics() if history is None else history
    evals = {key: json.loads((run_dir / f"{key}.json").read_text()) for key in ("eval_before", "eval_after")
             if (run_dir / f"{key}.json").exists()}
    steps = [m["step"] for m in history]
    roles = sorted({k.rsplit("/", 1)[1] for m in history for k in m if k.startswith("reward/reward/")})
    fig, axes = plt.subplots(1, 3, figsize=(15, 5), constrained_layout=True)
    reward_ax, success_ax, signal_ax = axes
    colors = {role: f"C{i}" for i, role in enumerate(roles)}
    for role in roles:
        reward_ax.plot(steps, [m.get(f"reward/reward/{role}", float("nan")) for m in history], marker=".", color=colors[role],
                       label=f"{role} (sampled)")
    success_ax.plot(steps, [m.get("reward/success_rate", float("nan")) for m in history], marker=".", color="C0", label="sampled")
    signal_ax.plot(steps, [m.get("signal/frac_groups_with_variance", float("nan")) for m in history], marker=".", color="C0")
    last = steps[-1] if steps else 1
    for key, x, marker in (("eval_before", 0, "s"), ("eval_after", last, "D")):
        if key in evals:
            label = f"held-out, {key.removeprefix('eval_')} (greedy)"
            for role in roles:
                reward_ax.scatter([x], [evals[key]["mean_reward"].get(role, float("nan"))], marker=marker, color=colors[role],
                                  edgecolor="black", zorder=3, label=f"{role} {label}")
            success_ax.scatter([x], [evals[key]["success_rate"]], marker=marker, color="C1", edgecolor="black", zorder=3, label=label)
    reward_ax.set(title="mean step reward per role", xlabel="step", ylabel="reward")
    success_ax.set(title="success rate", xlabel="step", ylim=(-0.05, 1.05))
    signal_ax.set(title="groups with reward variance", xlabel="step", ylabel="fraction of groups", ylim=(-0.05, 1.05))
    # Below the axes: inside, a legend hides the held-out markers at step 0.
    for ax in (reward_ax, success_ax):
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    fig.suptitle(run_dir.name, fontsize=9, parse_math=False)  # a name is text: `$...$` in one is no TeX to typeset
    out = Path(path) if path is not None else run_dir / FILENAME
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
