"""`llm-marl leaderboard`: the README command runs every row (train, then eval of the trained adapters)
and writes the table; `--dry-run` lists the rows of every environment that has them."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from baselines import SEARCH_ENVS, SINGLE_AGENT_VARIANT, rows
from llm_marl.cli import main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_leaderboard_command(tmp_path, capsys):
    [line] = re.findall(r"^llm-marl leaderboard .*$", README, re.M)
    argv = shlex.split(line)[1:] + ["--max-new-tokens", "8", "--out-dir", str(tmp_path)]
    assert main(argv) == 0
    results = json.loads((tmp_path / "mass" / "leaderboard.json").read_text())
    assert [r["row"] for r in results] == [name for name, _ in rows("mass")]
    assert all(r["episodes"] == 4 and len(r["seeds"]) == 1 and r["success_rate"]["std"] == 0.0 for r in results)
    trained = [r for r in results if r["command"].startswith("llm-marl train")]
    assert len(trained) == 3 and all((tmp_path / "mass" / "seed0" / name / "adapters").is_dir()
                                     for name in ("mas-mhgpo-is", "mas-mhgpo-fof", "mas-mhgpo-rr"))
    table = (tmp_path / "mass" / "leaderboard.md").read_text()
    assert table.count("\n") == 2 + len(results) and "| MAS + MHGPO-RR |" in table
    assert (tmp_path / "mass" / "leaderboard.png").stat().st_size > 0


def test_seeds_and_a_shared_warm_start_per_variant(tmp_path):
    """Two seeds, each row warm-started by SFT on its variant's demonstrations (one SFT per variant and
    seed), trained rows starting from it; the table is mean ± std over the seeds."""
    argv = ["leaderboard", "--env", "plan_path", "--model", "tiny-random", "--steps", "1", "--n", "2", "--seeds", "0,1",
            "--warm-start-demos", "2", "--sft-arg=--epochs=1", "--sft-arg=--heldout-demos=0", "--train-arg=--lr=1e-3",
            "--max-new-tokens", "8", "--out-dir", str(tmp_path)]
    assert main(argv) == 0
    folder = tmp_path / "plan_path"
    for seed in (0, 1):
        assert sorted(p.name for p in (folder / f"seed{seed}").glob("sft-*")) == ["sft-planner", "sft-workflow"]
        config = json.loads((folder / f"seed{seed}" / "mas-at-grpo-per-role-policies" / "config.json").read_text())
        assert config["model"]["init_adapters"].endswith(f"seed{seed}/sft-workflow") and config["run"]["seed"] == seed
    results = json.loads((folder / "leaderboard.json").read_text())
    assert [len(r["seeds"]) for r in results] == [2] * 5
    assert "± " in (folder / "leaderboard.md").read_text()


@pytest.mark.parametrize("env", [*SINGLE_AGENT_VARIANT, *SEARCH_ENVS])
def test_dry_run_lists_the_rows(env, capsys):
    assert main(["leaderboard", "--env", env, "--dry-run"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == len(rows(env))


def test_unknown_env_is_a_clear_error(capsys):
    assert main(["leaderboard", "--env", "chess", "--dry-run"]) == 2
    assert "available" in capsys.readouterr().err


@pytest.mark.parametrize("extra, said", [
    (["--env-arg", "mode=planner"], "--env-arg mode: every row plays its own variant"),
    (["--train-arg=--algo=grpo"], "--train-arg=--algo=grpo: the leaderboard sets --algo of every row itself"),
    (["--train-arg=--policy", "--train-arg=shared"], "--train-arg=--policy: the leaderboard sets --policy of every row"),
    (["--train-arg=--env-arg=mode='planner'"], "the leaderboard sets --env-arg mode of every row itself"),
    (["--sft-arg=--run-name=x"], "--sft-arg=--run-name=x: the leaderboard sets --run-name of every row itself"),
    # argparse reads a unique prefix of a long option as the option: --alg is --algo, --env-a is --env-arg.
    (["--train-arg=--alg=grpo"], "--train-arg=--alg=grpo: the leaderboard sets --algo of every row itself"),
    (["--train-arg=--se", "--train-arg=3"], "--train-arg=--se: the leaderboard sets --seed of every row itself"),
    (["--train-arg=--env-a", "--train-arg=mode='planner'"], "the leaderboard sets --env-arg mode of every row itself"),
    (["--sft-arg=--run-n=x"], "--sft-arg=--run-n=x: the leaderboard sets --run-name of every row itself"),
    (["--train-arg=--m=x"], "--train-arg=--m=x: --m could be --max-new-tokens, --micro-batch-size, "),
    (["--env-arg", "height"], "--env-arg expects KEY=VALUE, got 'height'"),
])
def test_an_extra_argument_that_would_change_the_rows_is_refused(capsys, extra, said):
    """Given to every row after the row's own, --env-arg mode=planner made the "MAS" rows single-agent and the single-agent
    eval row play the workflow (argparse keeps the last), and --train-arg=--algo=grpo trained every row with GRPO: a table
    whose row names lie. A malformed --env-arg failed only in the first row's command. Refused before any row runs."""
    assert main(["leaderboard", "--env", "plan_path", "--dry-run", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err, err


def test_extra_arguments_that_leave_the_rows_as_named_are_taken(capsys):
    """Abbreviated or not, with the value in the next argument or after "=", options the rows do not set pass the check."""
    extra = ["--train-arg=--max-new=32", "--train-arg=--env-arg", "--train-arg=height=4", "--train-arg=--lr", "--train-arg=1e-4",
             "--sft-arg=--epo=1", "--env-arg", "width=4"]
    assert main(["leaderboard", "--env", "plan_path", "--dry-run", *extra]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == len(rows("plan_path"))


def test_a_killed_leaderboard_run_again_skips_finished_rows_and_resumes_training(tmp_path, capsys):
    """Run again with the same command, a leaderboard reuses every evaluated row and warm start, resumes a
    row whose training was cut short from its checkpoint, and refuses to mix in other settings."""
    argv = ["leaderboard", "--env", "plan_path", "--model", "tiny-random", "--steps", "1", "--n", "2", "--seeds", "0",
            "--warm-start-demos", "2", "--sft-arg=--epochs=1", "--sft-arg=--heldout-demos=0", "--max-new-tokens", "8",
            "--out-dir", str(tmp_path)]
    assert main(argv) == 0
    seed = tmp_path / "plan_path" / "seed0"
    first = json.loads((tmp_path / "plan_path" / "leaderboard.json").read_text())
    # A kill during the per-role row's training: no scores, no summary yet, its checkpoint kept.
    cut = "mas-at-grpo-per-role-policies"
    for path in (seed / f"{cut}.result.json", seed / f"{cut}.eval.json", seed / f"{cut}.train.json", seed / cut / "summary.json"):
        path.unlink()
    # A row kept before the format-errors column: its rate is read back from its evaluation file.
    assert all(0.0 <= r["format_errors"]["mean"] <= 1.0 for r in first)
    older = seed / "single-agent.result.json"
    older.write_text(json.dumps({k: v for k, v in json.loads(older.read_text()).items() if k != "format_error_rate"}))
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("done before, reusing") == 2 + 4  # two warm starts, four finished rows
    assert f"[seed 0: MAS + AT-GRPO, per-role policies, resuming] llm-marl train --resume {shlex.quote(str(seed / cut))}" in out
    assert "llm-marl sft" not in out and out.count("llm-marl train") == 1
    again = json.loads((tmp_path / "plan_path" / "leaderboard.json").read_text())
    assert [r["row"] for r in again] == [r["row"] for r in first]
    assert [r["success_rate"] for r in again[:-1]] == [r["success_rate"] for r in first[:-1]]
    assert [r["format_errors"] for r in again[:-1]] == [r["format_errors"] for r in first[:-1]]
    assert "| format errors |" in (tmp_path / "plan_path" / "leaderboard.md").read_text()
    assert again[-1]["resumed"] and "(resumed)" in (tmp_path / "plan_path" / "leaderboard.md").read_text()
    assert main([*argv[:-2], "--steps", "2", "--out-dir", str(tmp_path)]) == 2
    assert "holds rows run with other settings" in capsys.readouterr().err


def test_a_variant_alone_keeps_the_quick_configuration():
    """The single-agent rows pass only `mode`: they must play the quick tasks the workflow rows train on."""
    from llm_marl.config import QUICK_ENV_ARGS, quick_env_args

    quick = QUICK_ENV_ARGS["plan_path"]
    assert quick_env_args("plan_path", {"mode": "planner"}) == {**quick, "mode": "planner"}
    assert quick_env_args("plan_path", None) == quick
    assert quick_env_args("plan_path", {"height": 6, "mode": "planner"}) == {"height": 6, "mode": "planner"}
    assert quick_env_args("math", {"mode": "reasoner"}) == {"mode": "reasoner"}


def _scores(means, std=0.02):
    from benchmarks.leaderboard import ORDER

    names = [*ORDER[:3], "MAS + AT-GRPO, shared policy", "MAS + AT-GRPO, per-role policies"]
    return [{"row": n, "success_rate": {"mean": m, "std": std}} for n, m in zip(names, means)]


def test_the_benchmark_says_whether_the_papers_ordering_holds():
    from benchmarks.leaderboard import ordering

    assert ordering(_scores([0.1, 0.3, 0.3, 0.5, 0.6])).startswith("The papers' ordering holds here.")  # a tie is "<="
    text = ordering(_scores([0.1, 0.3, 0.4, 0.2, 0.35]))
    assert text.startswith("The papers' ordering does not hold here: MAS, prompt only < MAS + AT-GRPO, per-role policies.")
    assert "single agent + GRPO <= MAS, prompt only: holds (0.300 vs 0.400" in text
    assert "does not hold here: single agent < single agent + GRPO." in ordering(_scores([0.3, 0.31, 0.4, 0.5, 0.5]))


def test_the_leaderboard_benchmark_writes_table_chart_and_command(tmp_path):
    from benchmarks.leaderboard import main as bench

    bench(["--envs", "sokoban", "--model", "tiny-random", "--seeds", "0", "--steps", "1", "--n", "2", "--demos", "2",
           "--max-new-tokens", "8", "--out-dir", str(tmp_path / "out"), "--figures", str(tmp_path / "fig"),
           "--write", str(tmp_path / "b.md")])
    text = (tmp_path / "b.md").read_text()
    assert "`llm-marl leaderboard --env sokoban --model tiny-random" in text and "--env-arg=height=5" in text
    assert text.count("| MAS + AT-GRPO") == 2 and "The papers' ordering" in text
    assert (tmp_path / "fig" / "leaderboard_sokoban.png").stat().st_size > 0


def test_the_leaderboard_benchmark_takes_the_main_jobs_settings():
    from benchmarks.leaderboard import main_job_args

    sft, train = main_job_args("plan_path")
    assert "--oracle-arg=program=coords" in sft and "--lr=0.0007" in sft and "--epochs=2" in sft
    assert "--lr=2e-05" in train and "--temperature=0.5" in train and "--envs-per-step=4" in train
    assert [a for a in main_job_args("sokoban")[0] if a.startswith("--oracle-arg")] == ["--oracle-arg=program=answer"]


@pytest.mark.parametrize("flags, said", [
    (["--steps", "0"], "--steps must be >= 1, got 0"),
    (["--n", "0"], "--n must be >= 1, got 0"),
    (["--max-new-tokens", "0"], "--max-new-tokens must be >= 1, got 0"),
    (["--warm-start-demos", "-1"], "--warm-start-demos must be >= 0, got -1"),
    (["--seeds", "0,-1"], "--seeds takes whole numbers >= 0 like 0,1,2: must be a whole number >= 0, got '-1'"),
    (["--seeds", "0,a"], "--seeds takes whole numbers >= 0 like 0,1,2: must be a whole number >= 0, got 'a'"),
    # Once run: the second seed 0 reused the first one's rows, and the table said "2 seeds" with a std of 0.
    (["--seeds", "0,1,0"], "--seeds names seed 0 more than once; give distinct seeds, e.g. 0,1,2"),
])
def test_values_out_of_range_are_refused_before_any_row_runs(capsys, flags, said):
    assert main(["leaderboard", "--env", "plan_path", *flags, "--dry-run"]) == 2
    assert capsys.readouterr().err.strip() == f"llm-marl: error: {said}"


@pytest.mark.parametrize("env", ["plan_path_v2", "llm_marl/PlanPath-v2"])
def test_an_env_named_as_the_other_commands_take_it_runs_its_rows(capsys, env):
    """It was "no baseline rows for 'plan_path_v2'", a name train, eval and play take."""
    assert main(["leaderboard", "--env", env, "--dry-run"]) == 0
    assert "llm-marl train --env plan_path " in capsys.readouterr().out


def test_an_unknown_env_gets_the_error_the_other_commands_give(capsys):
    assert main(["leaderboard", "--env", "plan_pth", "--dry-run"]) == 2
    assert capsys.readouterr().err.strip() == ("llm-marl: error: unknown environment 'plan_pth' (did you mean 'plan_path'?); available: plan_path, sokoban, "
                                               "sudoku, code, math, deep_search, mass (see `llm-marl envs`)")


@pytest.mark.parametrize("code, said", [(130, "interrupted"), (143, "terminated (SIGTERM)")])
def test_a_stopped_row_stops_the_leaderboard_and_says_how_to_continue(tmp_path, capsys, monkeypatch, code, said):
    """A row's command that was stopped (Ctrl-C, SIGTERM) stops the table, instead of being reported as a failed row."""
    import llm_marl.cli

    real = llm_marl.cli.main
    monkeypatch.setattr(llm_marl.cli, "main", lambda argv=None: code if argv and argv[0] == "train" else real(argv))
    assert real(["leaderboard", "--env", "plan_path", "--model", "tiny-random", "--steps", "1", "--n", "1",
                 "--out-dir", str(tmp_path)]) == code
    out, err = capsys.readouterr()
    assert "the leaderboard stopped; run the same command again to continue (finished rows are reused)" in out
    assert err.strip().splitlines()[-1] == f"llm-marl: {said}" and "failed" not in err


def test_a_row_whose_stdout_pipe_closed_stops_the_leaderboard_quietly_with_status_141(tmp_path, capfd, monkeypatch):
    """A row's command that found its stdout (the table's) a closed pipe returns 141, as main does: the table stops
    quietly with that status, instead of 'seed 0: ... failed; its command: ...' and status 2."""
    import llm_marl.cli

    real = llm_marl.cli.main
    monkeypatch.setattr(llm_marl.cli, "main", lambda argv=None: 141 if argv and argv[0] == "train" else real(argv))
    assert real(["leaderboard", "--env", "plan_path", "--model", "tiny-random", "--steps", "1", "--n", "1",
                 "--out-dir", str(tmp_path)]) == 141
    err = capfd.readouterr().err  # the rows before, which evaluate the base model, say that it loads
    assert "llm-marl:" not in err and "failed" not in err and "Traceback" not in err


def test_vllm_missing_is_one_line_before_any_row_runs(tmp_path, capsys, monkeypatch):
    """It was the first sampling row's error, after the warm starts before it had run (minutes on a CPU, more on a GPU)."""
    import llm_marl.engines.vllm as vllm_engine

    def missing():
        raise ImportError("the vllm engine needs vLLM: pip install 'llm-marl[vllm]'")

    monkeypatch.setattr(vllm_engine, "import_vllm", missing)
    argv = ["leaderboard", "--env", "plan_path", "--engine", "vllm", "--warm-start-demos", "2", "--out-dir", str(tmp_path)]
    assert main([*argv, "--dry-run"]) == 0  # listing the rows needs no vLLM
    capsys.readouterr()
    assert main(argv) == 2
    assert capsys.readouterr().err == "llm-marl: error: the vllm engine needs vLLM: pip install 'llm-marl[vllm]'\n"
    assert list(tmp_path.iterdir()) == []
