"""Every command the README shows, run as a user would."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from llm_marl.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_envs_lists_every_environment(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    assert "plan_path" in out and "llm_marl/PlanPath-v2" in out and "roles: tool, planner" in out
    assert main(["envs", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["plan_path"]["roles"] == ["tool", "planner"]


def test_play_oracle_renders_and_solves(capsys):
    assert main(["play", "--env", "plan_path", "--agent", "oracle", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["success"] is True
    assert "A" in out and "=== episode over: success ===" in out


@pytest.mark.parametrize("env,agent", [("plan_path", "random"), ("plan_path", "garbage"), ("sokoban", "garbage")])
def test_play_other_agents(capsys, env, agent):
    assert main(["play", "--env", env, "--agent", agent, "--seed", "3", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["agent"] == agent


@pytest.mark.parametrize(
    "argv,message",
    [
        (["play", "--env", "chess"], "unknown environment 'chess'; available"),  # nothing close: no suggestion
        (["play", "--env", "sokobna"], "unknown environment 'sokobna' (did you mean 'sokoban'?)"),
        (["play", "--env", "plan_path", "--env-arg", "widht=5"], "no option 'widht' (did you mean 'width'?)"),
        (["train", "--env", "plan_path", "--algo", "atgrpo"], "unknown algorithm 'atgrpo' (did you mean 'at-grpo'?)"),
        (["play", "--env", "plan_path", "--agent", "human"], "unknown agent"),
        (["play", "--env", "plan_path", "--env-arg", "height"], "KEY=VALUE"),
        (["play", "--env", "plan_path", "--env-arg", "height=1"], "at least 2x2"),
        (["play", "--env", "plan_path", "--env-arg", "colour=3"], "cannot build plan_path"),
    ],
)
def test_user_errors_name_the_fix(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_console_script_is_installed():
    exe = Path(sys.executable).with_name("llm-marl")
    out = subprocess.run([str(exe), "play", "--env", "plan_path", "--agent", "oracle", "--seed", "0", "--quiet"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1])["success"] is True


@pytest.mark.parametrize("argv", [["envs"], ["envs", "--json"], ["leaderboard", "--env", "plan_path", "--dry-run"],
                                  ["--version"]])  # one line, written when stdout is flushed
def test_a_closed_stdout_pipe_ends_quietly_with_status_141(argv):
    """`llm-marl envs | head -1` printed a BrokenPipeError traceback (exit 1), or "Exception ignored ... BrokenPipeError"
    (exit 120) when the pipe closed before the output was flushed at exit."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes
    try:
        proc = subprocess.run([sys.executable, "-m", "llm_marl.cli", *argv], cwd=ROOT, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")


def test_readme_main_job_command_runs():
    """`make demo` (the README's main job) on the already-installed venv."""
    assert "make demo" in README and "make test" in README
    venv = Path(sys.executable).parents[1]
    # -o: the venv running this test is already installed; never reinstall from inside a test.
    proc = subprocess.run(["make", "-s", "-o", f"{venv}/.installed", "demo", f"VENV={venv}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["success"] is True


def test_readme_python_example_runs():
    block = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    namespace = {"my_model": lambda messages: "I am not sure.\n#### [U]"}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["env"].unwrapped.turn == 4


@pytest.mark.slow
def test_make_train_runs_sft_then_rl_from_its_adapters(tmp_path):
    """`make train`'s plumbing (SFT, then RL from its run directory, evaluations before and after), on
    the tiny test model: CI runs it on the embedded model with a shorter budget."""
    assert "make train" in README
    venv = Path(sys.executable).parents[1]
    out_dir = shlex.quote(str(tmp_path)).replace("$", "$$")  # one shell word in a make variable, where $ is make's
    tiny = f"--model tiny-random --out-dir {out_dir}"
    proc = subprocess.run(["make", "-s", "-o", f"{venv}/.installed", "train", f"VENV={venv}",
                           f"SFT_ARGS={tiny} --demos 2 --epochs 1 --heldout-demos 0",
                           f"TRAIN_ARGS={tiny} --steps 1 --envs-per-step 1 --eval-episodes 1 --max-new-tokens 8 --no-progress"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (sft,) = tmp_path.glob("plan_path__sft__0__*")
    (rl,) = tmp_path.glob("plan_path__at-grpo__0__*")
    config = json.loads((rl / "config.json").read_text())
    assert config["model"]["init_adapters"] == str(sft) and config["run"]["steps"] == 1
    summary = json.loads((rl / "summary.json").read_text())
    assert summary["eval_before"]["episodes"] == summary["eval_after"]["episodes"] == 1
    assert f"adapters start from {sft}" in proc.stderr


def test_train_help_keeps_the_spellings_the_readme_uses(capsys):
    """The hand-written dataclass-to-argparse layer (llm_marl/config.py says why it is kept): one hyphenated
    spelling per flag, --x/--no-x booleans, repeatable --env-arg, the algorithm's loss defaults shown."""
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert "--deterministic, --no-deterministic" in out and "--progress, --no-progress" in out
    assert "--env-arg KEY=VALUE" in out and "--max-new-tokens MAX_NEW_TOKENS" in out
    assert not re.search(r"--[a-z]+_[a-z_]+", out), "an underscore spelling leaked into --help"
    assert "(default: 'token-mean')" in out  # at-grpo's loss_agg, not None
