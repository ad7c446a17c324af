"""benchmarks/update_memory.py: its rows, the workers' settings, and a GPU run's own section."""

from __future__ import annotations

import pytest

from benchmarks import update_memory


@pytest.mark.slow
def test_a_cpu_run_measures_every_row_in_its_own_worker(tmp_path):
    bench = tmp_path / "bench.md"
    update_memory.main(["--model", "tiny-random", "--samples", "2", "--prompt", "6", "--reply", "5", "--micro", "1",
                        "--checkpointing", "off", "on", "--malloc", "default", "returning", "--write", str(bench)])
    text = bench.read_text()
    assert "<!-- bench:update-memory -->" in text and "update-memory-cuda" not in text
    rows = [line for line in text.splitlines() if line.startswith("| default") or line.startswith("| returning")]
    assert [row.split(" | ")[:4] for row in rows] == [
        ["| default", "off", "1", "2"], ["| default", "on", "1", "2"], ["| returning", "off", "1", "2"], ["| returning", "on", "1", "2"]]
    assert "on the CPU (float32; the peak resident set)" in text and "replies to each prompt" not in text
    assert "--malloc default returning --write" in text  # the command that produced it


def test_the_workers_get_their_settings_and_a_gpu_run_writes_its_own_section(monkeypatch, tmp_path):
    calls = []

    def fake_worker(argv, env):
        calls.append((argv, env.get("MALLOC_MMAP_THRESHOLD_")))
        return {"peak_over_mib": 1024.0 * len(calls), "seconds": 1.5}

    monkeypatch.setattr(update_memory, "run_worker", fake_worker)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "4096")  # the user's own setting never reaches a `default` row
    bench = tmp_path / "bench.md"
    update_memory.main(["--micro", "2", "--malloc", "default", "returning", "--write", str(bench)])
    assert [(argv[argv.index("--worker") + 1], "--worker-checkpointing" in argv, threshold) for argv, threshold in calls] == [
        ("2", False, None), ("2", False, "65536")]
    assert all(argv[argv.index("--device") + 1] == "cpu" for argv, _ in calls)

    calls.clear()
    monkeypatch.setattr("benchmarks.step_breakdown.gpu_name", lambda device: "NVIDIA H200" if device == "cuda" else None)
    update_memory.main(["--device", "cuda", "--micro", "0", "--checkpointing", "off", "on", "--write", str(bench)])
    assert [("--worker-checkpointing" in argv, argv[argv.index("--device") + 1]) for argv, _ in calls] == [(False, "cuda"), (True, "cuda")]
    text = bench.read_text()
    assert "<!-- bench:update-memory -->" in text  # the CPU section is kept
    gpu = text[text.index("<!-- bench:update-memory-cuda -->"):]
    assert "on NVIDIA H200 (`--device cuda`" in gpu and "the peak of the tensors allocated" in gpu
    assert "| on | off | 1 | 2,048 MiB | 1.5 s |" in gpu and "| default" not in gpu
    with pytest.raises(SystemExit):
        update_memory.main(["--device", "cuda", "--malloc", "returning"])

    calls.clear()  # replies sharing prompts: the workers are told, and the table has its own section
    update_memory.main(["--device", "cpu", "--replies-per-prompt", "4", "--micro", "0", "--write", str(bench)])
    assert [argv[argv.index("--replies-per-prompt") + 1] for argv, _ in calls] == ["4"]
    shared = bench.read_text()[bench.read_text().index("<!-- bench:update-memory-shared-prompts -->"):]
    assert "(4 replies to each prompt)" in shared.split("<!-- /bench")[0]
