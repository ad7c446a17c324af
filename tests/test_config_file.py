"""`--config FILE` (issue 13, item 3): a run's saved config.json reproduces it, YAML works, flags override
the file, and a mistake in the file is one line naming it."""

from __future__ import annotations

import json

import pytest
import yaml

from llm_marl.cli import main

QUICK = {"height": 3, "width": 3, "wall_density": 0.1, "min_path_length": 2, "max_path_length": 3, "max_turns": 1}
ARGS = ["--algo", "at-grpo", "--env", "plan_path", *(f"--env-arg={k}={v}" for k, v in QUICK.items()), "--model", "tiny-random",
        "--K", "3", "--policy", "per-role", "--lr", "3e-4", "--max-new-tokens", "6", "--lora-r", "4", "--lora-alpha", "8",
        "--steps", "1", "--no-progress"]


def saved(folder) -> dict:
    config = json.loads((folder / "config.json").read_text())
    config["run"].pop("run_name")
    return config


@pytest.mark.slow
def test_a_saved_config_reproduces_the_run_and_flags_override_it(tmp_path, capsys):
    assert main(["train", *ARGS, "--out-dir", str(tmp_path), "--run-name", "first"]) == 0
    assert main(["train", "--config", str(tmp_path / "first" / "config.json"), "--run-name", "again"]) == 0
    assert saved(tmp_path / "again") == saved(tmp_path / "first")
    # The README's line: the same settings, another seed.
    assert main(["train", "--config", str(tmp_path / "first" / "config.json"), "--seed", "1", "--run-name", "seed1"]) == 0
    other = saved(tmp_path / "seed1")
    assert other["run"]["seed"] == 1 and {**other, "run": {**other["run"], "seed": 0}} == saved(tmp_path / "first")
    as_yaml = tmp_path / "run.yaml"
    as_yaml.write_text(yaml.safe_dump(saved(tmp_path / "first")))
    assert main(["train", "--config", str(as_yaml), "--run-name", "yaml", "--lr", "1e-3"]) == 0
    config = saved(tmp_path / "yaml")
    assert config["optim"]["lr"] == 1e-3 and config["algo"]["K"] == 3 and config["model"]["policy"] == "per-role"
    assert {**config, "optim": {**config["optim"], "lr": 3e-4}} == saved(tmp_path / "first")


@pytest.mark.parametrize("text,message", [
    ("run: {stepz: 3}", "section 'run' has no setting 'stepz'"),
    ("runn: {steps: 3}", "unknown section 'runn'"),
    ("run: [1, 2", "does not parse"),
])
def test_a_mistake_in_the_file_is_one_line(tmp_path, capsys, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert main(["train", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_sft_reads_a_config_file(tmp_path, capsys):
    path = tmp_path / "sft.yaml"
    path.write_text("sft: {demos: 0}\nmodel: {model: tiny-random}\n")
    assert main(["sft", "--config", str(path), "--env", "plan_path"]) == 2  # the file's demos=0 is validated
    assert "--demos must be >= 1" in capsys.readouterr().err
