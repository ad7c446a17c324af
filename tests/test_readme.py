"""The README against the code: every command it shows parses with the real CLI and is run by a test or
by CI (.ci/run), and its tables (algorithms, loss defaults, environments, scores) and the files it
says a run writes are what the code has.

Other tests run the README's commands themselves (tests/test_cli.py and the files named in
`EXERCISED`); this file parses all of them without running them, keeps the list of where each one
runs, and runs the two that no other test runs (the first training line and the quick start's
`eval`) on the tiny test model."""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from llm_marl.algorithms import ALGORITHMS, get
from llm_marl.cli import build_parser, main, parse_env_args
from llm_marl.step_time import PARTS
from llm_marl_envs.registry import ENVS
from llm_marl_envs.registry import get as get_env

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()

# The flags that make the first training line (and the runs below) a seconds-long tiny-random run.
TINY = ["--model", "tiny-random", "--steps", "1", "--envs-per-step", "1", "--eval-episodes", "1", "--max-new-tokens", "8",
        "--no-progress"]


# ---------------------------------------------------------------------------- the README's commands
def _normal(command: str) -> str:
    return " ".join(command.split())


def readme_commands(text: str = README) -> list[str]:
    """Every command the README shows, normalised: the lines of ```bash blocks (continuations joined,
    comments dropped) and inline code that starts with `llm-marl` or `make` (it may wrap a line)."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line)
            if line.strip():
                found.append(_normal(line))
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for code in re.findall(r"`([^`]+)`", prose):
        if re.match(r"(llm-marl|make)\s+\S", code) and "\n\n" not in code:  # not a bare `make` or `llm-marl`
            found.append(_normal(code))
    return list(dict.fromkeys(found))


def _test(ref: str) -> tuple[str, str]:
    return ("test", ref)


NOT_RUN = "not run"
CLUSTER = "Not tested: GPUs, NCCL, vLLM engines inside actors on CUDA, multi-node clusters"
# Where each README command runs: ("test", "tests/FILE.py::FUNCTION") runs it (as written, plus a tiny
# model and budget where it trains), ("ci", TEXT) is a line of .ci/run that starts with TEXT, and
# (NOT_RUN, README TEXT) is a command these machines cannot run, with the README text that says so.
EXERCISED: dict[str, tuple[str, str]] = {
    # Quick start
    "make train": ("ci", "make train "),
    "make test": ("ci", "make test"),
    "make demo": _test("tests/test_cli.py::test_readme_main_job_command_runs"),
    "make install": ("ci", "make test"),  # `install` is the venv stamp, the first prerequisite of `make test`
    "llm-marl train --algo at-grpo --env plan_path": _test("tests/test_readme.py::test_run_directory_holds_what_the_readme_lists"),
    "llm-marl sft --config configs/main-sft.yaml": ("ci", "make train "),  # make train's first command
    "llm-marl train --config configs/main-train.yaml --init-adapters runs/<sft-run>": ("ci", "make train "),
    "llm-marl eval --env plan_path --n 5 --max-new-tokens 128 --adapters runs/<run>/adapters":
        _test("tests/test_readme.py::test_quick_start_eval_command_runs"),
    "llm-marl play --env plan_path --agent oracle --seed 0": _test("tests/test_cli.py::test_play_oracle_renders_and_solves"),
    # Training
    "llm-marl train --algo at-grpo --env plan_path --model Qwen/Qwen3-1.7B --engine vllm --policy per-role --steps 150 "
    "--envs-per-step 32 --max-new-tokens 4096 --env-arg height=10 --env-arg width=10":
        (NOT_RUN, "needs a GPU, vLLM and the Hugging Face Hub"),
    "llm-marl train --resume runs/<run>": _test("tests/test_training.py::test_sigkill_and_resume_equals_an_uninterrupted_run"),
    "llm-marl train --resume RUN_DIR": _test("tests/test_training.py::test_sigkill_and_resume_equals_an_uninterrupted_run"),
    "llm-marl train --config runs/<run>/config.json --seed 1":
        _test("tests/test_config_file.py::test_a_saved_config_reproduces_the_run_and_flags_override_it"),
    "llm-marl train --algo mhgpo --env mass --sampling rr": _test("tests/test_training_credit.py::test_readme_credit_commands_run_with_a_tiny_model"),
    "llm-marl train --algo sharp --env deep_search --sparsify-p 0.5":
        _test("tests/test_training_credit.py::test_readme_credit_commands_run_with_a_tiny_model"),
    "llm-marl train --algo mhgpo --env mass --credit shapley --shapley-estimator mc --dpo-beta 0.1":
        _test("tests/test_training_credit.py::test_readme_credit_commands_run_with_a_tiny_model"),
    "make test-vllm": ("ci", "make test-vllm"),
    "make test-sandbox-pythons": ("ci", "make test-sandbox-pythons"),
    "make test-sandbox-users": ("ci", "make test-sandbox-users"),
    "llm-marl train --algo at-grpo --help": _test("tests/test_training.py::test_train_user_errors"),
    "llm-marl --version": _test("tests/test_provenance.py::test_version_names_the_release_and_the_commit"),
    "llm-marl sft": _test("tests/test_sft.py::test_readme_warm_start_commands_run"),
    "llm-marl sft --env plan_path --demos 32 --oracle-arg program=answer --run-name my-sft":
        _test("tests/test_sft.py::test_readme_warm_start_commands_run"),
    "llm-marl train --algo at-grpo --env plan_path --init-adapters runs/my-sft --eval-episodes 32":
        _test("tests/test_sft.py::test_readme_warm_start_commands_run"),
    "llm-marl report runs/<run>": _test("tests/test_report.py::test_readme_report_command_writes_a_self_contained_page"),
    "llm-marl eval": _test("tests/test_training.py::test_eval_reports_success_and_rewards"),
    "llm-marl leaderboard --env mass --model tiny-random --steps 1 --n 4": _test("tests/test_leaderboard.py::test_readme_leaderboard_command"),
    # Multi-GPU and clusters
    "llm-marl train --algo at-grpo --env plan_path --model tiny-random --steps 1 --envs-per-step 2 --kl-beta 0.01 "
    "--rollout-workers 2 --trainer-ranks 2 --cpus-per-actor 0.25 --threads 1":
        _test("tests/test_distributed.py::test_readme_local_cluster_train_command_runs"),
    "ray start --head --port 6379": (NOT_RUN, CLUSTER),
    "ray start --address HEAD_IP:6379": (NOT_RUN, CLUSTER),
    "llm-marl train --algo at-grpo --env plan_path --model Qwen/Qwen3-1.7B --engine vllm --ray-address auto --engines 6 "
    "--gpus-per-engine 1 --rollout-workers 8 --cpus-per-actor 2 --trainer-ranks 2 --gpus-per-trainer-rank 1 --envs-per-step 64":
        (NOT_RUN, CLUSTER),
    # Environments
    "llm-marl envs": _test("tests/test_cli.py::test_envs_lists_every_environment"),
    "llm-marl play --env sokoban --agent garbage --seed 3": _test("tests/test_cli.py::test_play_other_agents"),
    "llm-marl play --env plan_path --env-arg mode=planner --agent api --base-url http://127.0.0.1:8000/v1 --model NAME":
        _test("tests/test_user_errors.py::test_readme_play_agent_api_command"),
    "llm-marl eval --engine api": _test("tests/test_user_errors.py::test_eval_engine_api_reads_the_key_from_the_environment"),
    "llm-marl eval --env math --env-arg dataset=gsm8k_test.parquet --env-arg mode=reasoner --split all --engine api "
    "--base-url http://127.0.0.1:8000/v1 --model NAME": _test("tests/test_dataset_sources.py::test_readme_eval_split_all_command"),
    "llm-marl play --env math --env-arg dataset=gsm8k_test.parquet --env-arg mode=reasoner --split all --agent api "
    "--base-url http://127.0.0.1:8000/v1 --model NAME": _test("tests/test_dataset_sources.py::test_readme_play_split_all_command"),
}


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def test_every_readme_command_is_run_by_a_test_or_by_ci():
    commands = readme_commands()
    assert len(commands) >= 20  # the extraction sees the README's commands
    missing = [c for c in commands if c not in EXERCISED]
    assert not missing, "README commands that no test or CI line runs (add one to EXERCISED with where it runs):\n" + \
        "\n".join(missing)
    stale = [c for c in EXERCISED if c not in commands]
    assert not stale, "EXERCISED lists commands the README no longer shows:\n" + "\n".join(stale)
    ci_lines = [line.strip() for line in CI.splitlines() if not line.lstrip().startswith("#")]
    for command, (kind, where) in EXERCISED.items():
        if kind == "test":
            path, function = where.split("::")
            assert function in _test_functions(ROOT / path), f"{command!r}: {where} does not exist"
        elif kind == "ci":
            assert any(line == where or line.startswith(where) for line in ci_lines), f"{command!r}: .ci/run has no line {where!r}"
        else:
            assert kind == NOT_RUN and where in _normal(README), f"{command!r}: the README must say it is not run here ({where!r})"


def test_the_extraction_joins_continuations_and_wrapped_inline_code():
    text = "```bash\nllm-marl train --algo grpo \\\n    --steps 3   # note\n```\nrun `llm-marl\nenvs` or `make demo`.\n"
    assert readme_commands(text) == ["llm-marl train --algo grpo --steps 3", "llm-marl envs", "make demo"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """The README's first training line as written, plus the tiny model and a one-step budget."""
    [line] = [c for c in readme_commands() if c == "llm-marl train --algo at-grpo --env plan_path"]
    out = tmp_path_factory.mktemp("runs")
    assert main(shlex.split(line)[1:] + TINY + ["--out-dir", str(out)]) == 0, line
    [run] = out.iterdir()
    return run


# Prose that names a subcommand and some of its flags, not a whole command: parsed with --env added.
MENTIONS = {"llm-marl eval", "llm-marl eval --engine api"}


def _placeholders(command: str, run: Path) -> str:
    """`command` with its run directory filled in, quoted for `shlex.split` (a path may hold spaces)."""
    return command.replace("runs/<run>", shlex.quote(str(run))).replace("RUN_DIR", shlex.quote(str(run)))


def _check_parses(command: str, run: Path) -> None:
    """Parse `command` with the CLI's own parser (train's flags depend on --algo, so the parser is
    built from the same argv as `llm-marl` does) and check the names it gives: env, env options, algorithm."""
    argv = shlex.split(_placeholders(command, run))[1:] + (["--env", "plan_path"] if command in MENTIONS else [])
    try:
        args = build_parser(argv).parse_args(argv)
    except SystemExit as exc:
        assert exc.code == 0 and ("--help" in argv or argv == ["--version"]), f"README command does not parse: {command}"
        return
    # argparse also takes a flag's prefix (`--sparsify` for `--sparsify-p`); the README spells flags out.
    exact = {s for action in _subparser(build_parser(argv), argv[0])._actions for s in action.option_strings}
    abbreviated = [a.split("=")[0] for a in argv if a.startswith("--") and a.split("=")[0] not in exact]
    assert not abbreviated, f"{command}: not a flag as written: {abbreviated}"
    if getattr(args, "env", None):
        entry = get_env(args.env)
        options = parse_env_args(getattr(args, "env_arg", None) or [])
        unknown = set(options) - set(entry.kwargs())
        assert not unknown, f"{command}: {entry.name} has no option {sorted(unknown)}"
    if args.command == "train" and getattr(args, "algo", None):
        assert args.algo in ALGORITHMS, f"{command}: unknown --algo {args.algo}"


def test_every_readme_command_parses(run_dir, capsys):
    llm_marl = [c for c in readme_commands() if c.startswith("llm-marl ")]
    assert len(llm_marl) >= 15
    failures = []
    for command in llm_marl:
        try:
            _check_parses(command, run_dir)
        except (AssertionError, ValueError) as exc:
            failures.append(f"{command}\n    {exc}\n    {capsys.readouterr().err.strip().splitlines()[-1:]}")
    capsys.readouterr()
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("broken", [
    "llm-marl train --algo at-grpo --env plan_path --no-such-flag 1",  # an unknown flag
    "llm-marl train --algo mhgpo --env mass --sampling sometimes",  # a bad choice
    "llm-marl train --algo at-grpo --env plan_path --sampling rr",  # another algorithm's flag
    "llm-marl train --algo ppo --env plan_path",  # an algorithm that does not exist
    "llm-marl play --env chess",  # an environment that does not exist
    "llm-marl eval --env plan_path --env-arg colour=3",  # an option the environment does not take
    "llm-marl serve --env plan_path",  # a subcommand that does not exist
    "llm-marl train --algo sharp --env deep_search --sparsify 0.5",  # a prefix argparse would take
])
def test_a_wrong_command_fails_the_parse_check(broken, tmp_path):
    with pytest.raises((AssertionError, ValueError)):
        _check_parses(broken, tmp_path)


def test_make_targets_exist():
    targets = set(re.findall(r"^([\w.-]+):", MAKEFILE, re.M))
    named = [c.split()[1] for c in readme_commands() if c.startswith("make ")]
    assert named and not [t for t in named if t not in targets], (named, sorted(targets))


def _subparser(parser, command: str):
    return next(a for a in parser._actions if a.dest == "command").choices[command]


def _cli_flags() -> set[str]:
    flags = set()
    for argv in [["train", "--algo", a] for a in ALGORITHMS] + [[c] for c in ("envs", "play", "sft", "eval", "leaderboard", "report")]:
        flags |= {s for action in _subparser(build_parser(argv), argv[0])._actions for s in action.option_strings}
    return flags


def test_every_flag_the_prose_names_exists():
    """`--flag` in the README's text (not only in its commands) is a flag of some subcommand."""
    named = set(re.findall(r"`(--[a-z][\w-]*)", README))
    assert len(named) > 20
    missing = named - _cli_flags()
    assert not missing, sorted(missing)


def test_paths_modules_and_extras_exist():
    """Files and folders, `llm_marl...` modules and `pip install` extras the README names."""
    code = re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", README, flags=re.S))
    paths = [c for c in code if re.fullmatch(r"(tests|benchmarks|configs|agents|baselines|llm_marl\w*)/[\w./]*|[\w-]+\.md", c)]
    assert "benchmarks/sandbox_escapes.py" in paths and "benchmarks.md" in paths
    outputs = {"leaderboard.md"}  # written by `llm-marl leaderboard`, not shipped
    assert not [p for p in paths if p not in outputs and not (ROOT / p).exists()], paths
    import importlib

    modules = [c for c in code if re.fullmatch(r"llm_marl(_envs)?(\.\w+)*", c)]
    assert len(modules) >= 5
    for name in modules:
        importlib.import_module(name)
    extras = re.findall(r"'(?:llm-marl|\.)\[([\w-]+)\]'", README)
    pyproject = (ROOT / "pyproject.toml").read_text()
    declared = set(re.findall(r"^([\w-]+) = \[", pyproject.split("[project.optional-dependencies]")[1].split("\n[")[0], re.M))
    assert extras and set(extras) <= declared, (extras, declared)


# ---------------------------------------------------------------------------- the tables
def table(header: str) -> list[list[str]]:
    """The body rows of the README table whose header row starts with `header`, as stripped cells."""
    lines = README.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows


def _code(cell: str) -> str:
    return re.match(r"`([^`]+)`", cell).group(1)


def test_algorithm_table_lists_every_algorithm():
    rows = table("| `--algo` | paper |")
    assert [_code(r[0]) for r in rows] == list(ALGORITHMS)
    for row in rows:
        for arxiv in re.findall(r"arXiv:\d{4}\.\d{4,5}", row[1]):
            assert arxiv in ALGORITHMS[_code(row[0])].paper, row


def test_loss_table_is_each_algorithms_loss_defaults():
    rows = table("| `--algo` | ratio |")
    assert [_code(r[0]) for r in rows] == list(ALGORITHMS)
    for algo, ratio, agg, kl, _source in rows:
        algo = algo.strip("`")
        stated = {"ratio_level": ratio.split()[0], "loss_agg": _code(agg), "kl_beta": float(kl)}
        assert stated == get(algo).loss_defaults, algo


def test_environment_table_is_the_registry():
    rows = table("| env | PettingZoo id |")
    entries = list(ENVS.values())
    assert [_code(r[0]) for r in rows] == [e.module for e in entries]
    for row, entry in zip(rows, entries):
        assert _code(row[1]) == entry.pz_id
        roles = []
        for role in row[2].split(","):
            span = re.fullmatch(r"(\w+?)(\d+)\.\.\1(\d+)", role.strip())  # worker_0..worker_4
            roles += [f"{span[1]}{i}" for i in range(int(span[2]), int(span[3]) + 1)] if span else [role.strip()]
        assert tuple(roles) == entry.roles, entry.name
        modes = [kw["mode"] for name, kw in entry.variants if name != "mas"]
        assert re.findall(r'mode="(\w+)"', row[5]) == modes, entry.name
        grid = re.search(r"(\d+)×(\d+)", row[3])
        if grid:  # the default board size
            defaults = entry.kwargs()
            size = (defaults["size"],) * 2 if "size" in defaults else (defaults["height"], defaults["width"])
            assert (int(grid[1]), int(grid[2])) == size, entry.name


def test_scores_table_is_what_evaluate_reports(run_dir):
    """Every field of the Scores table is in an evaluation's output (a per-role dict where it says
    `[role]`), and every score the evaluation reports is in the table."""
    result = json.loads((run_dir / "eval_before.json").read_text())
    fields = [f for row in table("| field | meaning |") for f in re.findall(r"`([\w\[\]]+)`", row[0])]
    for field in fields:
        name = field.removesuffix("[role]")
        assert name in result, field
        assert isinstance(result[name], dict) == field.endswith("[role]"), field
    # Not scores: what was evaluated, how much of it and how long it took.
    bookkeeping = {"env", "split", "episodes", "replies", "mean_turns", "cut_episodes", "seconds", "settings"}
    assert set(result) - bookkeeping == {f.removesuffix("[role]") for f in fields}


# ---------------------------------------------------------------------------- what a run writes
def _section(title: str) -> str:
    return README.split(title, 1)[1].split("\n#", 1)[0]


def test_run_directory_holds_what_the_readme_lists(run_dir):
    """The files and folders the README names for a run (quick start and "What a run reports") are
    what the first training line writes, and it writes nothing the README does not name."""
    text = _section("## Quick start") + _section("### What a run reports")
    named = set(re.findall(r"`(\w*\.(?:json|jsonl|png|lock)|\w+/)`", text))
    assert {"config.json", "metrics.jsonl", "summary.json", "learning_curve.png", "trajectories/"} <= named
    written = {p.name + ("/" if p.is_dir() else "") for p in run_dir.iterdir()}
    events = {n for n in written if n.startswith("events.out.tfevents.")}  # the TensorBoard event files
    assert events and "TensorBoard event files" in text
    assert named == written - events
    assert {"steps_without_signal", "adapter_steps_without_update", "eval_before", "eval_after"} <= set(
        json.loads((run_dir / "summary.json").read_text()))
    reply = json.loads((run_dir / "trajectories" / "step_000001.jsonl").read_text().splitlines()[0])
    assert {"reward", "credit", "group_key", "advantage", "truncated"} <= set(reply)
    metrics = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert {"reward/truncated/tool", "reward/parse_error/planner"} <= set(metrics)
    # The step-time parts the README names are those the trainer logs; each is >= 0 and they add up to the step.
    parts = [f"perf/{part}_s" for part in PARTS]
    assert [k for k in re.findall(r"`(perf/\w+_s)`", text) if k != "perf/step_s"] == parts
    assert all(metrics[k] >= 0 for k in parts)
    assert abs(sum(metrics[k] for k in parts) - metrics["perf/step_s"]) <= 1e-6 + 1e-3 * metrics["perf/step_s"]
    assert set(json.loads((run_dir / "summary.json").read_text())["step_time_s"]) == set(PARTS)
    assert (run_dir / "adapters" / "shared" / "adapter_model.safetensors").is_file()  # PEFT format


def test_quick_start_eval_command_runs(run_dir):
    """The quick start's `eval` line as written, on the adapters of the tiny run above. A process of
    its own, as a user runs it: the CLI makes idle OpenMP threads sleep only if torch is not loaded yet."""
    [command] = [c for c in readme_commands() if c.startswith("llm-marl eval --env plan_path ")]
    argv = shlex.split(_placeholders(command, run_dir))
    proc = subprocess.run([str(Path(sys.executable).with_name(argv[0])), *argv[1:]], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["episodes"] == 5 and result["adapters"] == f"{run_dir}/adapters"
