"""`learning_curve.png` (llm_marl/plots.py), drawn from a run directory built by hand."""

from __future__ import annotations

import json

from llm_marl.plots import learning_curve


def test_a_run_name_with_dollar_signs_is_drawn_as_text(tmp_path):
    """matplotlib read `$...$` in the title (the run's name) as TeX, and a name such as `x$\\alpha^$y` made `savefig`
    raise at the end of a run whose steps had all finished."""
    run = tmp_path / "x$\\alpha^$y"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward/reward/planner": 0.5, "reward/success_rate": 0.0,
                                                           "signal/frac_groups_with_variance": 1.0}) + "\n" for s in (1, 2)))
    assert learning_curve(run).stat().st_size > 0
