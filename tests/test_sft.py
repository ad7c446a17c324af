"""`llm-marl sft` and `train --init-adapters` (issue 10, item 2): oracle demonstrations through the
environment's text interface, SFT that raises the likelihood of held-out oracle replies, and RL
that starts from the SFT adapters under any σ."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from agents.demonstrations import oracle_demonstrations
from llm_marl.cli import main
from llm_marl.config import ModelConfig
from llm_marl.policies import LoRAConfig, PolicySet
from llm_marl.sft import SFTConfig, build_examples, mean_nll, read_transcripts, reply_tokens, run_sft
from tests.support.math_data import math_dataset_without

TINY = {"height": 3, "width": 3, "wall_density": 0.1, "min_path_length": 2, "max_path_length": 3, "max_turns": 1}
TINY_ARGS = [f"--env-arg={k}={v}" for k, v in TINY.items()]


def test_oracle_demonstrations_are_the_replies_that_solve_the_task():
    records = list(oracle_demonstrations("plan_path", 3, env_kwargs=TINY, oracle_options={"program": "answer"}))
    assert [r["agent"] for r in records] == ["tool", "planner"] * 3
    assert all(r["reward"] == 1.0 and r["split"] == "train" for r in records)
    assert all(r["messages"][-1]["role"] == "assistant" and r["messages"][0]["role"] == "system" for r in records)
    assert records[0]["messages"][-1]["content"].startswith("```python\nprint(")


def test_noisy_teammates_make_the_oracle_show_recoveries():
    """With noise, some tool replies are the random agent's (never recorded), and the oracle planner then
    overrides the wrong proposal: a demonstration an all-oracle team never gives."""
    clean = list(oracle_demonstrations("plan_path", 24, env_kwargs=TINY, oracle_options={"program": "answer"}))
    noisy = list(oracle_demonstrations("plan_path", 24, env_kwargs=TINY, oracle_options={"program": "answer"}, noise=0.5))
    planner = lambda records: [r["messages"][-1]["content"] for r in records if r["agent"] == "planner"]  # noqa: E731
    assert not any(reply.startswith("Planning with BFS") for reply in planner(clean))
    assert any(reply.startswith("Planning with BFS") for reply in planner(noisy))
    assert len(noisy) < len(clean) and all(r["reward"] == 1.0 for r in noisy if r["agent"] == "tool")
    assert noisy == list(oracle_demonstrations("plan_path", 24, env_kwargs=TINY, oracle_options={"program": "answer"}, noise=0.5))


def _failing_episodes(monkeypatch, seeds):
    """The Plan-Path oracle raises in the episodes of `seeds` (a multi-line error, as a traceback's last frame can be)."""
    from agents.oracle.plan_path import PlanPathOracle

    act = PlanPathOracle.act

    def failing(self, role, observation):
        if self.seed in seeds:
            raise RuntimeError(f"no path parsed in seed {self.seed}\n  (second line)")
        return act(self, role, observation)

    monkeypatch.setattr(PlanPathOracle, "reset", lambda self, seed=None: setattr(self, "seed", seed), raising=False)
    monkeypatch.setattr(PlanPathOracle, "act", failing)


def test_an_episode_that_fails_is_left_out_with_one_warning_and_the_others_kept(monkeypatch):
    """One oracle that raised (or an environment error) in one episode lost every demonstration, with a traceback."""
    from llm_marl_envs.registry import make_raw

    kept = list(oracle_demonstrations("plan_path", 4, env_kwargs=TINY, oracle_options={"program": "answer"}))
    _failing_episodes(monkeypatch, {1})
    env_class = type(make_raw("plan_path", **TINY))
    reset = env_class.reset

    def env_failing(self, seed=None, options=None):
        if seed == 3:
            raise OSError("sandbox gone")
        return reset(self, seed=seed, options=options)

    monkeypatch.setattr(env_class, "reset", env_failing)
    left_out = {}
    with pytest.warns(UserWarning) as caught:
        records = list(oracle_demonstrations("plan_path", 4, env_kwargs=TINY, oracle_options={"program": "answer"},
                                             left_out=left_out))
    assert records == [r for r in kept if r["seed"] in (0, 2)]
    assert [str(w.message) for w in caught] == [
        "2 of 4 train episodes of plan_path left out of the demonstrations: they failed (seed 1: RuntimeError: no path "
        "parsed in seed 1; seed 3: OSError: sandbox gone)"]
    assert left_out == {1: "RuntimeError: no path parsed in seed 1", 3: "OSError: sandbox gone"}


def test_every_episode_failing_is_one_error(monkeypatch):
    _failing_episodes(monkeypatch, {0, 1})
    with pytest.raises(ValueError) as raised:
        list(oracle_demonstrations("plan_path", 2, env_kwargs=TINY, oracle_options={"program": "answer"}))
    assert str(raised.value) == ("no train episode of plan_path gave a demonstration (seeds 0..1): they failed (seed 0: "
                                 "RuntimeError: no path parsed in seed 0; seed 1: RuntimeError: no path parsed in seed 1)")


def test_sft_counts_the_episodes_left_out_in_its_summary(tmp_path, capsys, monkeypatch):
    _failing_episodes(monkeypatch, {1})
    with pytest.warns(UserWarning) as caught:
        assert main(["sft", "--env", "plan_path", *TINY_ARGS, "--oracle-arg", "program=answer", "--model", "tiny-random",
                     "--demos", "3", "--heldout-demos", "2", "--epochs", "1", "--lora-r", "4", "--lora-alpha", "8",
                     "--out-dir", str(tmp_path), "--run-name", "s"]) == 0
    assert [str(w.message) for w in caught if "left out" in str(w.message)] == [
        f"1 of {n} {split} episodes of plan_path left out of the demonstrations: they failed (seed 1: RuntimeError: no path "
        "parsed in seed 1)" for n, split in ((3, "train"), (2, "val"))]
    assert "sft: 4 examples from 2 of 3 oracle episodes" in capsys.readouterr().err
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["demo_episodes"] == {
        "train": {"episodes": 3, "left_out": 1, "no_answer": 0, "failed": {"1": "RuntimeError: no path parsed in seed 1"}},
        "val": {"episodes": 2, "left_out": 1, "no_answer": 0, "failed": {"1": "RuntimeError: no path parsed in seed 1"}}}
    # Every episode failing: one line, and no run directory.
    _failing_episodes(monkeypatch, {0, 1, 2})
    assert main(["sft", "--env", "plan_path", *TINY_ARGS, "--model", "tiny-random", "--demos", "3", "--heldout-demos", "0",
                 "--out-dir", str(tmp_path), "--run-name", "t"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "llm-marl: error: no train episode of plan_path gave a demonstration (seeds 0..2): they failed (seed 0: RuntimeError: "
        "no path parsed in seed 0; seed 1: RuntimeError: no path parsed in seed 1; seed 2: RuntimeError: no path parsed in seed 2)")
    assert not (tmp_path / "t").exists()


def test_transcript_errors_name_the_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n{not json\n')
    with pytest.raises(ValueError, match=r"t.jsonl:2: not a JSON object"):
        read_transcripts(path)
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    with pytest.raises(ValueError, match="no assistant message"):
        read_transcripts(path)
    # Once a bare "Cannot apply chat template to an empty conversation", naming no line, after the model loaded.
    path.write_text('{"messages": [{"role": "assistant", "content": "yo"}, {"role": "user", "content": "hi"}]}\n')
    with pytest.raises(ValueError, match="t.jsonl:1: the first message is an assistant reply, with no prompt before it"):
        read_transcripts(path)
    with pytest.raises(ValueError, match="no such file"):
        read_transcripts(tmp_path / "missing.jsonl")


def test_transcripts_are_read_as_the_dataset_loaders_read_rows(tmp_path):
    """A file with a byte-order mark (PowerShell's and Notepad's UTF-8) was 'not JSON (Unexpected UTF-8 BOM)', a JSON
    list of transcripts 'expected {"messages": ...}' of its first line, and a file not in UTF-8 the codec's words alone,
    naming no file: --data reads what the environments' dataset= options read."""
    record = {"messages": [{"role": "user", "content": "café"}, {"role": "assistant", "content": "yo"}], "agent": "planner"}
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + (json.dumps(record) + "\n").encode())
    listed = tmp_path / "listed.json"
    listed.write_text(json.dumps([record, record]))
    assert read_transcripts(bom) == [record] and read_transcripts(listed) == [record, record]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([record]), tmp_path / "t.parquet")
    assert read_transcripts(tmp_path / "t.parquet") == [record]
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(json.dumps(record, ensure_ascii=False).encode("latin-1") + b"\n")
    with pytest.raises(ValueError, match=r"latin.jsonl: not UTF-8 text \(byte \d+: invalid continuation byte\); save it as UTF-8"):
        read_transcripts(latin)
    listed.write_text(json.dumps([record, {"messages": []}]))
    with pytest.raises(ValueError, match=r"listed.json: item 1: expected"):
        read_transcripts(listed)


@pytest.mark.parametrize("policy", ["shared", "per-role"])
def test_an_agent_that_is_no_role_of_the_env_is_one_line_before_the_model_loads(tmp_path, capsys, monkeypatch, policy):
    """Once: a shared adapter took the replies of the 'boss' in silence, and per-role advice was to add 'boss=<adapter>'
    to --policy, which must map exactly the environment's roles."""
    monkeypatch.setattr(PolicySet, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("a model was loaded")))
    data = tmp_path / "t.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
                                "agent": "boss"}) + "\n")
    assert main(["sft", "--env", "plan_path", "--model", "tiny-random", "--data", str(data), "--policy", policy,
                 "--out-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == ("llm-marl: error: transcripts name agents ['boss'], which plan_path does not have (its roles: "
                                       'tool, planner): correct their "agent", or pass the --env whose roles replied\n')
    assert list(tmp_path.iterdir()) == [data]  # no run directory


def test_an_oracle_arg_for_another_env_names_the_flag(tmp_path, capsys, monkeypatch):
    """configs/main-sft.yaml with --env sokoban: Plan-Path's program=coords reached the Sokoban oracle, whose error
    named neither the flag nor the environment."""
    monkeypatch.setattr(PolicySet, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("a model was loaded")))
    assert main(["sft", "--env", "sokoban", "--oracle-arg", "program=coords", "--model", "tiny-random",
                 "--out-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == ("llm-marl: error: --oracle-arg (oracle_args) for sokoban: program must be one of "
                                       "search, answer, got 'coords'\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("data", [False, True])
def test_an_oracle_refusing_the_envs_problems_blames_them_not_the_oracle_arg(tmp_path, capsys, monkeypatch, data):
    """The MASS oracle refuses a dataset's questions whatever its options: with --oracle-arg corpus_seed=3 the error
    blamed that flag (and, without it, advised "another agent", which sft has no flag for)."""
    monkeypatch.setattr(PolicySet, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("a model was loaded")))
    own = ["--data", str(tmp_path / "mine.jsonl")] if data else []
    assert main(["sft", "--env", "mass", "--env-arg", "dataset=hotpotqa.jsonl", "--oracle-arg", "corpus_seed=3", *own,
                 "--model", "tiny-random", "--out-dir", str(tmp_path)]) == 2
    fix = "--heldout-demos 0" if data else "transcripts of your own with --data, and --heldout-demos 0"
    assert capsys.readouterr().err == (
        "llm-marl: error: no oracle demonstrations of these mass problems (--env-arg, or env_args in --config): the mass "
        "oracle plays only mini-wiki questions (it parses them with the generator's grammar) and cannot play "
        "dataset='hotpotqa.jsonl'; use another agent for MuSiQue/HotpotQA questions; for SFT on them, pass "
        f"{fix} (the held-out replies are the oracle's)\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("empty, flags, fix", [
    ("train", ["--demos", "2", "--heldout-demos", "0"], "transcripts of your own with --data (sft plays its --demos episodes"),
    ("val", ["--demos", "2", "--heldout-demos", "1"], "--heldout-demos 0 (sft plays its --heldout-demos episodes")])
def test_a_dataset_with_no_problems_in_a_demo_split_is_one_line_before_any_episode(tmp_path, capsys, monkeypatch, empty, flags, fix):
    """A dataset with no row in the split the demonstrations are played on failed every episode on its own, and the
    error repeated the environment's for each seed ("no train episode of math gave a demonstration (seeds 0..1): they
    failed (seed 0: ValueError: the dataset has no 'train' problems ...; seed 1: ..."). Now train's up-front check."""
    monkeypatch.setattr(PolicySet, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("a model was loaded")))
    data = math_dataset_without(empty, tmp_path)
    assert main(["sft", "--env", "math", "--env-arg", f"dataset={data}", *flags, "--model", "tiny-random",
                 "--out-dir", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err == (f"llm-marl: error: math's dataset has 5 rows, none of them in the {empty!r} split: use "
                                       f"a larger dataset, or pass {fix} on the {empty} split)\n")
    assert not (tmp_path / "runs").exists()


def test_an_env_given_by_its_pettingzoo_id_names_the_run_by_the_env(tmp_path):
    """Its '/' once made a folder llm_marl/ under --out-dir, holding PlanPath-v2__sft__0__<time>."""
    assert main(["sft", "--env", "llm_marl/PlanPath-v2", *TINY_ARGS, "--model", "tiny-random", "--demos", "1", "--heldout-demos", "0",
                 "--epochs", "1", "--lora-r", "4", "--lora-alpha", "8", "--out-dir", str(tmp_path)]) == 0
    [run] = tmp_path.iterdir()
    assert run.name.startswith("plan_path__sft__0__") and (run / "adapters").is_dir()


def test_a_run_name_taken_is_one_line_without_resume_advice(tmp_path, capsys):
    """sft has no --resume, which the error once advised (`llm-marl sft --resume` is an unrecognized argument)."""
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "notes.txt").write_text("mine")
    assert main(["sft", "--env", "plan_path", *TINY_ARGS, "--model", "tiny-random", "--demos", "1", "--heldout-demos", "0",
                 "--out-dir", str(tmp_path), "--run-name", "s"]) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == f"llm-marl: error: run directory {tmp_path / 's'} already exists; choose another --run-name"
    assert [p.name for p in (tmp_path / "s").iterdir()] == ["notes.txt"]


@pytest.fixture(scope="module")
def per_role() -> PolicySet:
    return PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role", seed=0)


def test_examples_target_the_reply_and_its_end_of_turn_token_and_follow_sigma(per_role):
    records = list(oracle_demonstrations("plan_path", 2, env_kwargs=TINY, oracle_options={"program": "answer"}))
    prompt_ids, target_ids = reply_tokens(per_role.tokenizer, records[1]["messages"])
    assert per_role.tokenizer.decode(target_ids) == records[1]["messages"][-1]["content"] + per_role.tokenizer.eos_token
    examples, skipped = build_examples(per_role, records)
    assert skipped == 0 and [e.adapter for e in examples] == ["tool", "planner"] * 2
    with pytest.raises(ValueError, match="has no 'agent'"):
        build_examples(per_role, [{"messages": records[0]["messages"]}])


def test_a_multi_turn_demonstration_teaches_each_oracle_reply_once_and_no_teammates_reply(per_role):
    """A Deep-Search agent's observation holds its earlier replies: every record re-taught them all (27 records of 8
    episodes were 99 targets), and with --demo-noise the random teammate's replies among them, which the
    demonstrations promise are never learned from. They carry weight 0: one target per record, its own reply."""
    records = list(oracle_demonstrations("deep_search", 3, env_kwargs={"mode": "single"}, noise=0.5))
    replies = {r["messages"][-1]["content"] for r in records}
    shown = [m["content"] for r in records for m in r["messages"][:-1] if m["role"] == "assistant"]
    assert shown and any(reply not in replies for reply in shown)  # the case: earlier replies, a teammate's among them
    policy = per_role  # the single agent is a planner
    examples, skipped = build_examples(policy, records)
    assert skipped == 0 and len(examples) == len(records)
    eos = policy.tokenizer.eos_token
    assert [policy.tokenizer.decode(e.target_ids) for e in examples] == [r["messages"][-1]["content"] + eos for r in records]
    # The prompt is the chat the role saw, as the engines render it (no weights).
    last = records[-1]["messages"]
    assert examples[-1].prompt_ids == reply_tokens(policy.tokenizer, [{"role": m["role"], "content": m["content"]} for m in last])[0]


def test_a_transcript_weight_is_zero_or_one(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "weight": 0}]}\n')
    with pytest.raises(ValueError, match=r"t.jsonl:1: no assistant message to learn from \(every one has weight 0\)"):
        read_transcripts(path)
    path.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "weight": 0.5}]}\n')
    with pytest.raises(ValueError, match="'weight' must be 0"):
        read_transcripts(path)


def test_sft_raises_the_likelihood_of_held_out_oracle_replies(tmp_path):
    config = SFTConfig(env="plan_path", env_args=TINY, epochs=3, lr=5e-3, batch_size=8, out_dir=str(tmp_path), run_name="s")
    model = ModelConfig(model="tiny-random", policy="per-role", lora_r=8, lora_alpha=16)
    train = list(oracle_demonstrations("plan_path", 12, env_kwargs=TINY, oracle_options={"program": "answer"}))
    heldout = list(oracle_demonstrations("plan_path", 4, split="val", env_kwargs=TINY, oracle_options={"program": "answer"}))
    run = run_sft(config, model, train, heldout, log=lambda *_: None)
    summary = json.loads((run.path / "summary.json").read_text())
    assert summary["optimizer_steps"] == {"planner": 6, "tool": 6}
    assert summary["nll_after"]["heldout_nll"] < summary["nll_before"]["heldout_nll"] - 0.5
    # The saved adapters reproduce the improvement when loaded by `train --init-adapters`.
    default_shape = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role", seed=1)
    with pytest.raises(ValueError, match="--lora-r 8 --lora-alpha 16"):  # r=16 here, 8 saved: the error says how to match
        default_shape.init_from(run.path)
    fresh_lora = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role",
                                           lora=LoRAConfig(r=8, alpha=16), seed=1)
    fresh_lora.init_from(run.path)
    examples, _ = build_examples(fresh_lora, heldout)
    assert mean_nll(fresh_lora, examples) == pytest.approx(summary["nll_after"]["heldout_nll"], abs=1e-4)


def test_init_from_maps_saved_adapters_onto_this_runs_sigma(tmp_path):
    saved = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role", seed=0)
    with torch.no_grad():
        for name, p in saved.model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01 if ".tool." in name else -0.02)
    saved.save(tmp_path / "per_role")
    # per-role SFT -> per-role RL: each adapter from its own.
    again = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role", seed=3)
    assert again.init_from(tmp_path / "per_role") == {"tool": "tool", "planner": "planner"}
    for adapter, value in (("tool", 0.01), ("planner", -0.02)):
        assert all(float(p.detach().mean()) == pytest.approx(value) for n, p in again.model.named_parameters() if f"lora_B.{adapter}." in n)
    # per-role SFT -> shared RL: one adapter serving roles trained apart is refused, with the fix.
    shared = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="shared", seed=3)
    with pytest.raises(ValueError, match="pass the --policy the adapters were trained with, --policy per-role$"):
        shared.init_from(tmp_path / "per_role")
    # shared SFT -> per-role RL: both roles start from the shared adapter.
    shared.save(tmp_path / "shared")
    split = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role", seed=3)
    assert split.init_from(tmp_path / "shared") == {"tool": "shared", "planner": "shared"}
    with pytest.raises(ValueError, match="no policy_set.json"):
        split.init_from(tmp_path)


@pytest.mark.slow
def test_cli_sft_then_train_init_adapters(tmp_path):
    data = tmp_path / "demos.jsonl"
    records = list(oracle_demonstrations("plan_path", 4, env_kwargs=TINY, oracle_options={"program": "answer"}))
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["sft", "--env", "plan_path", *TINY_ARGS, "--model", "tiny-random", "--data", str(data), "--heldout-demos", "0",
                 "--lora-r", "4", "--lora-alpha", "8", "--epochs", "1", "--out-dir", str(tmp_path), "--run-name", "sft"]) == 0
    sft = load_file(str(tmp_path / "sft" / "adapters" / "shared" / "adapter_model.safetensors"))
    assert any(float(t.abs().sum()) > 0 for k, t in sft.items() if "lora_B" in k)
    # A learning rate of 1e-12 leaves the adapters where they started: at the SFT weights.
    assert main(["train", "--algo", "at-grpo", "--env", "plan_path", *TINY_ARGS, "--model", "tiny-random", "--lora-r", "4",
                 "--lora-alpha", "8", "--init-adapters", str(tmp_path / "sft"), "--steps", "1", "--max-new-tokens", "8",
                 "--lr", "1e-12", "--out-dir", str(tmp_path), "--run-name", "rl", "--no-progress"]) == 0
    rl = load_file(str(tmp_path / "rl" / "adapters" / "shared" / "adapter_model.safetensors"))
    assert rl.keys() == sft.keys() and all(torch.allclose(rl[k], sft[k], atol=1e-8) for k in sft)
    config = json.loads((tmp_path / "rl" / "config.json").read_text())
    assert config["model"]["init_adapters"] == str(tmp_path / "sft")


@pytest.mark.slow
def test_readme_warm_start_commands_run(tmp_path, monkeypatch):
    """The README's `llm-marl sft` and `train --init-adapters` lines, as written plus a tiny model and budget."""
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = readme.split("### Warm start: SFT, then RL", 1)[1]
    sft_line = re.search(r"^llm-marl sft .*$", block, re.M).group(0)
    train_line = re.search(r"^llm-marl train .*--init-adapters.*$", block, re.M).group(0)
    monkeypatch.chdir(tmp_path)  # the lines use the default out-dir, runs/
    assert main(shlex.split(sft_line)[1:] + ["--model", "tiny-random", "--demos", "2", "--heldout-demos", "1", "--epochs", "1"]) == 0
    assert main(shlex.split(train_line)[1:] + ["--model", "tiny-random", "--steps", "1", "--eval-episodes", "2",
                                                "--max-new-tokens", "8", "--no-progress"]) == 0
    [run] = [p for p in (tmp_path / "runs").iterdir() if p.name.startswith("plan_path__at-grpo")]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["eval_before"]["episodes"] == summary["eval_after"]["episodes"] == 2
    assert (run / "learning_curve.png").stat().st_size > 0
    # benchmarks/learning_curve.py tabulates such a run (README: the main job's curve).
    from benchmarks.learning_curve import main as curve

    curve([str(run), "--write", "bench.md", "--figure", "figures/curve.png"])
    section = (tmp_path / "bench.md").read_text()
    assert "| 1 | " in section and "| before training | 2 | " in section and "| after training | 2 | " in section
    assert "![learning curve](figures/curve.png)" in section and (tmp_path / "figures" / "curve.png").stat().st_size > 0


def test_the_coords_program_is_exact_and_falls_back_where_walls_block_it():
    from agents.oracle import make_oracle
    from agents.oracle.plan_path import straight_route

    assert straight_route(["A.", ".G"]) == ["D", "R"]
    assert straight_route(["A.", "#G"]) is None  # rows first runs into the wall
    oracle = make_oracle("plan_path", program="coords")
    task = lambda grid: {"messages": [{"role": "user", "content": "Grid (row 0 at the top):\n" + "\n".join(grid) + "\n\nrest"}]}  # noqa: E731
    assert "moves = " in oracle.act("tool", task(["A.", ".G"]))
    assert oracle.act("tool", task(["A.", "#G"])) == '```python\nprint("[R, D]")\n```'  # the one-line answer
    quick = {"height": 4, "width": 4, "wall_density": 0.15, "min_path_length": 2, "max_path_length": 4, "max_turns": 1}
    records = list(oracle_demonstrations("plan_path", 40, env_kwargs=quick, oracle_options={"program": "coords"}))
    assert all(r["reward"] == 1.0 for r in records)
    with pytest.raises(ValueError, match="program must be one of"):
        make_oracle("plan_path", program="magic")


def test_micro_batches_take_the_same_step_as_the_whole_batch(monkeypatch):
    """Gradient accumulation over micro-batches (less memory) is normalised by the whole minibatch's
    tokens, so the optimiser step equals one pass over the minibatch. Plain SGD makes the step
    proportional to the gradient (AdamW's first step only keeps its signs)."""
    from llm_marl.sft import supervised_finetune

    monkeypatch.setattr(torch.optim, "AdamW", lambda params, lr, weight_decay: torch.optim.SGD(params, lr=lr))

    records = list(oracle_demonstrations("plan_path", 2, env_kwargs=TINY, oracle_options={"program": "answer"}))
    flat = lambda policy: torch.cat([p.detach().flatten() for p in policy.trainable_parameters("shared")])  # noqa: E731
    weights = []
    for micro in (4, 1):
        policy = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="shared", seed=0)
        initial = flat(policy)
        examples, _ = build_examples(policy, records)
        assert len(examples) == 4
        supervised_finetune(policy, examples, epochs=1, batch_size=4, micro_batch_size=micro)
        weights.append(flat(policy))
        assert not torch.equal(weights[-1], initial)
    torch.testing.assert_close(weights[0], weights[1], rtol=1e-4, atol=1e-6)


def test_a_minibatch_with_a_nonfinite_gradient_takes_no_step():
    from llm_marl.sft import supervised_finetune

    records = list(oracle_demonstrations("plan_path", 2, env_kwargs=TINY, oracle_options={"program": "answer"}))
    policy = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="shared", seed=0)
    examples, _ = build_examples(policy, records)
    real, calls, seen = policy.response_logprobs, [], []

    def first_overflows(*args, **kwargs):
        calls.append(1)
        out = real(*args, **kwargs)
        return out * float("nan") if len(calls) == 1 else out

    policy.response_logprobs = first_overflows
    steps = supervised_finetune(policy, examples, epochs=1, batch_size=2, micro_batch_size=2, on_step=seen.append)
    assert steps == {"shared": 1} and [m["skipped_nonfinite"] for m in seen] == [True, False]
    assert seen[0]["grad_norm"] is None and seen[1]["grad_norm"] > 0
    assert all(torch.isfinite(p).all() for p in policy.trainable_parameters("shared"))


@pytest.mark.slow
def test_resume_needs_the_warm_start_only_without_a_checkpoint(tmp_path, capsys):
    """A checkpoint holds the adapters, so a run resumes after its --init-adapters folder was deleted; without
    one the run starts from the warm start again, and a deleted one is one error line."""
    import shutil

    PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="shared", lora=LoRAConfig(r=4, alpha=8)).save(tmp_path / "warm")
    argv = ["train", "--algo", "at-grpo", "--env", "plan_path", *TINY_ARGS, "--model", "tiny-random", "--lora-r", "4", "--lora-alpha", "8",
            "--max-new-tokens", "8", "--out-dir", str(tmp_path), "--no-progress"]
    assert main([*argv, "--init-adapters", str(tmp_path / "warm"), "--steps", "1", "--run-name", "rl"]) == 0
    shutil.rmtree(tmp_path / "warm")
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path / "rl"), "--steps", "2"]) == 0
    assert "resuming" in capsys.readouterr().err
    assert [m["step"] for m in map(json.loads, (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines())] == [1, 2]
    shutil.rmtree(tmp_path / "rl" / "checkpoints")  # as if killed before its first checkpoint
    assert main(["train", "--resume", str(tmp_path / "rl"), "--steps", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-2].startswith("no checkpoint in") and err[-1].startswith(f"llm-marl: error: --init-adapters {tmp_path / 'warm'}: no policy_set.json")


def test_sft_on_a_full_disk_is_one_line_and_leaves_no_run_directory(tmp_path, capsys, monkeypatch):
    import errno

    from llm_marl.runs import RunDir

    def full(self, step, metrics):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RunDir, "log_metrics", full)
    assert main(["sft", "--env", "plan_path", *TINY_ARGS, "--model", "tiny-random", "--demos", "2", "--heldout-demos", "0",
                 "--out-dir", str(tmp_path), "--run-name", "s"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"llm-marl: error: no space left where {tmp_path / 's'} was (OSError: [Errno 28] No space left on device); "
                   f"{tmp_path / 's'} was removed: free some space and start it again")
    assert not (tmp_path / "s").exists()
