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
    ("optim: {lr: abc}", "optim.lr must be a number, got 'abc'"),
    ("optim: {lr: [1]}", "optim.lr must be a number, got [1]"),
    ("run: {steps: true}", "run.steps must be a whole number, got True"),
    ("run: {steps: 1.5}", "run.steps must be a whole number, got 1.5"),
    ("run: {deterministic: 1}", "run.deterministic must be true or false, got 1"),
    ("run: {env_args: 3}", "run.env_args must be a mapping of options, got 3"),
    ("optim: {schedule: cosin}", "optim.schedule must be one of 'constant', 'linear', 'cosine', got 'cosin'"),
    ("algo: {K: four}", "algo.K must be a whole number, got 'four'"),
])
def test_a_mistake_in_the_file_is_one_line(tmp_path, capsys, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert main(["train", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("text,message", [
    ("algo: {k: 3}", "section 'algo' has no setting 'k'; it has K, alpha, loss_segment, reward"),
    ("run: {algo: matpo}\nalgo: {G: 3, K: 2}", "section 'algo' has no setting 'K'; it has G, acc_key,"),
    ("algo: 3", "section 'algo' must map settings to values"),
])
def test_a_mistake_in_the_algorithm_section_is_one_line(tmp_path, capsys, text, message):
    """The algorithm's section is checked once the algorithm is known: a misspelt setting was dropped (the run trained
    with K=4), and a section that is no mapping ended in "'int' object is not iterable"."""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert main(["train", "--config", str(path), "--model", "tiny-random", "--max-new-tokens", "4", "--steps", "1",
                 "--out-dir", str(tmp_path), "--no-progress", "--report-to", "none"]) == 2
    err = capsys.readouterr().err
    assert f"llm-marl: error: --config {path}: {message}" in err and err.count("\n") == 1


def test_a_run_directory_given_as_the_file_names_its_config_json(tmp_path, capsys):
    """It was 'no such file', of a folder that is there."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}")
    for command in ("train", "sft"):
        assert main([command, "--config", str(tmp_path / "run")]) == 2
        assert capsys.readouterr().err == (f"llm-marl: error: --config {tmp_path / 'run'} is a folder: pass its settings file, "
                                           f"--config {tmp_path / 'run' / 'config.json'}\n")


def test_a_folder_without_config_json_given_as_the_file_is_named_a_folder(tmp_path, capsys):
    """It was 'no such file', of a folder that is there."""
    for command in ("train", "sft"):
        assert main([command, "--config", str(tmp_path)]) == 2
        assert capsys.readouterr().err == f"llm-marl: error: --config {tmp_path} is a folder: pass a YAML or JSON settings file\n"


def test_sft_reads_a_config_file(tmp_path, capsys):
    path = tmp_path / "sft.yaml"
    path.write_text("sft: {demos: 0}\nmodel: {model: tiny-random}\n")
    assert main(["sft", "--config", str(path), "--env", "plan_path"]) == 2  # the file's demos=0 is validated
    assert "--demos must be >= 1" in capsys.readouterr().err


def test_numbers_yaml_reads_as_text_are_numbers(tmp_path):
    """PyYAML reads `1e-3` (an exponent without a dot) as a string; a quoted whole number is a number too."""
    from llm_marl.config import OptimConfig, RunConfig, read_config_file

    path = tmp_path / "c.yaml"
    path.write_text("optim: {lr: 1e-3, kl_beta: null}\nrun: {steps: '4', run_name: 2024}\n")
    assert yaml.safe_load(path.read_text())["optim"]["lr"] == "1e-3"
    data = read_config_file(path, {"optim": OptimConfig, "run": RunConfig})
    assert data == {"optim": {"lr": 1e-3, "kl_beta": None}, "run": {"steps": 4, "run_name": "2024"}}


def test_a_hand_edited_config_json_is_checked_on_resume(tmp_path, capsys):
    assert main(["train", *ARGS, "--steps", "1", "--out-dir", str(tmp_path), "--run-name", "r"]) == 0
    config = saved(tmp_path / "r")
    config["optim"]["lr"] = "fast"
    (tmp_path / "r" / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path / "r"), "--steps", "2"]) == 2
    assert capsys.readouterr().err.strip() == f"llm-marl: error: {tmp_path / 'r' / 'config.json'}: optim.lr must be a number, got 'fast'"
