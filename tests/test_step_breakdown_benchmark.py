"""benchmarks/step_breakdown.py's bookkeeping, with a stand-in for the `llm-marl` commands (no model runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import step_breakdown
from llm_marl.step_time import PARTS


@pytest.fixture
def fake_cli(monkeypatch):
    calls = []

    def cli(*args: str) -> dict:
        calls.append(args)
        out = Path(args[args.index("--out-dir") + 1]) / args[args.index("--run-name") + 1]
        out.mkdir(parents=True)
        if args[0] == "train":
            row = {f"perf/{part}_s": 0.5 for part in PARTS} | {"perf/step_s": 0.5 * len(PARTS), "perf/generated_tokens": 10}
            (out / "metrics.jsonl").write_text(json.dumps(row) + "\n")
        return {"run_dir": str(out)}

    monkeypatch.setattr(step_breakdown, "cli", cli)
    return calls


@pytest.mark.parametrize("gpu", [None, "NVIDIA H100 80GB HBM3"])
def test_the_device_reaches_both_commands_and_a_gpu_run_has_its_own_section(fake_cli, monkeypatch, tmp_path, gpu):
    monkeypatch.setattr(step_breakdown, "gpu_name", lambda device: gpu)
    bench = tmp_path / "bench.md"
    bench.write_text("# Benchmarks\n\n<!-- bench:step_breakdown -->\n## old CPU section\n<!-- /bench:step_breakdown -->\n")
    step_breakdown.main(["--steps", "1", "--device", "cuda" if gpu else "cpu", "--write", str(bench)])
    assert [call[0] for call in fake_cli] == ["sft", "train"]
    assert all(call[call.index("--device") + 1] == ("cuda" if gpu else "cpu") for call in fake_cli)
    text = bench.read_text()
    if gpu:
        assert "## old CPU section" in text and "<!-- bench:step_breakdown_cuda -->" in text
        assert f"On a GPU: {gpu} (`--device cuda`" in text and "--device cuda --write" in text
    else:
        assert "## old CPU section" not in text and "step_breakdown_cuda" not in text
        assert "On a GPU" not in text and "--device cpu --write" in text


def test_no_gpu_name_on_the_cpu():
    assert step_breakdown.gpu_name("cpu") is None
