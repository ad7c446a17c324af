"""Datasets through `datasets` (issue 13 item 4): every loader reads a JSONL/JSON/parquet file, a
save_to_disk folder or a Hub id with the same records out; `eval --split all` (and `play --split all`)
plays every row; a
dataset too small for the split or --n says so. No test touches the network: the Hub is
monkeypatched, or offline."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

datasets = pytest.importorskip("datasets")
pq = pytest.importorskip("pyarrow.parquet")
import pyarrow as pa  # noqa: E402

from llm_marl.cli import main  # noqa: E402
from llm_marl.engines.scripted import ScriptedEngine  # noqa: E402
from llm_marl.evaluate import episode_tasks, evaluate  # noqa: E402
from llm_marl_envs.code.problems import load_problems  # noqa: E402
from llm_marl_envs.core import rows as rows_module  # noqa: E402
from llm_marl_envs.core.rows import DatasetNotFound, read_rows  # noqa: E402
from llm_marl_envs.math.datasets import load_dataset as load_math  # noqa: E402
from llm_marl_envs.search import load_corpus  # noqa: E402
from llm_marl_envs.search.loaders import load_dataset as load_search  # noqa: E402

from tests.test_cli import README  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def fresh_caches():
    rows_module._load_hub.cache_clear()
    rows_module._load_folder.cache_clear()
    yield
    rows_module._load_hub.cache_clear()
    rows_module._load_folder.cache_clear()


def json_rows(path: Path) -> list[dict]:
    return [record for _, record in read_rows(path)]


def uniform(records: list[dict]) -> list[dict]:
    """A column holding both numbers and text (the fixtures' "Level 2" and 3) as text, as a table stores it."""
    mixed = {k for k in {k for r in records for k in r} if len({type(r[k]) for r in records if r.get(k) is not None}) > 1}
    return [{k: str(v) if k in mixed and v is not None else v for k, v in r.items()} for r in records]


def export(records: list[dict], tmp_path: Path, name: str) -> dict[str, str]:
    """The same records as JSONL, a JSON list, parquet, a save_to_disk Dataset and one split of a DatasetDict."""
    out = {"jsonl": tmp_path / f"{name}.jsonl", "json": tmp_path / f"{name}.json", "parquet": tmp_path / f"{name}.parquet",
           "dataset": tmp_path / f"{name}_ds", "dict": tmp_path / f"{name}_dd"}
    out["jsonl"].write_text("".join(json.dumps(r) + "\n" for r in records))
    out["json"].write_text(json.dumps(records))
    columns = list(dict.fromkeys(k for r in records for k in r))  # from_pylist takes its columns from the first row
    table = [{k: r.get(k) for k in columns} for r in records]
    pq.write_table(pa.Table.from_pylist(table), out["parquet"])
    table = datasets.Dataset.from_list(table)
    table.save_to_disk(str(out["dataset"]))
    datasets.DatasetDict({"train": table.select([0]), "test": table}).save_to_disk(str(out["dict"]))
    sources = {k: str(v) for k, v in out.items()}
    sources["dict"] += "@test"
    return sources


# -------------------------------------------------------------------------------- the shared reader
def test_every_local_source_gives_the_same_records(tmp_path):
    records = [{"question": "q1", "answer": "1", "meta": {"tags": ["a", "b"], "level": 3}},
               {"question": "q2", "answer": "2", "meta": {"tags": [], "level": 1}}]
    for kind, source in export(records, tmp_path, "tiny").items():
        assert [r for _, r in read_rows(source)] == records, kind
    labels = [where for where, _ in read_rows(tmp_path / "tiny.parquet")]
    assert labels == [f"{tmp_path / 'tiny.parquet'}: row 0", f"{tmp_path / 'tiny.parquet'}: row 1"]


def test_a_tables_null_cells_read_as_missing_fields(tmp_path):
    pq.write_table(pa.Table.from_pylist([{"a": 1, "b": None}, {"a": None, "b": "x"}]), tmp_path / "t.parquet")
    assert json_rows(tmp_path / "t.parquet") == [{"a": 1}, {"b": "x"}]


def test_splits_of_a_folder_are_named_or_listed(tmp_path):
    sources = export([{"question": "q", "answer": "1"}], tmp_path, "s")
    folder = sources["dict"].removesuffix("@test")
    with pytest.raises(ValueError, match=re.escape(f"{folder} has several splits; pick one of train, test with {folder}@test")):
        list(read_rows(folder))
    with pytest.raises(ValueError, match="has no split 'dev'; pick one of train, test"):
        list(read_rows(folder + "@dev"))
    with pytest.raises(ValueError, match="without splits: drop '@test'"):
        list(read_rows(sources["dataset"] + "@test"))
    with pytest.raises(ValueError, match="is a file, which has no splits"):
        list(read_rows(sources["parquet"] + "@test"))
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="not one written by save_to_disk"):
        list(read_rows(tmp_path / "plain"))


def test_a_missing_local_path_never_asks_the_hub(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: pytest.fail("the Hub was asked"))
    for missing in [str(tmp_path / "gone.jsonl"), "data/gone.parquet", "./gsm8k", "a/b/c", "gone.json@test"]:
        with pytest.raises(DatasetNotFound, match="dataset file not found: .* does not exist"):
            read_rows(missing)


def test_a_hub_id_goes_to_load_dataset_with_its_config_and_split(monkeypatch):
    calls = []

    def fake_load_dataset(name, config=None, split=None):
        calls.append((name, config, split))
        return datasets.Dataset.from_list([{"question": "What is 2 + 3?", "answer": "2 + 3 = 5\n#### 5"}])

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    (problem,) = load_math("openai/gsm8k:main@test")
    assert calls == [("openai/gsm8k", "main", "test")]
    assert (problem.question, problem.answer, problem.source) == ("What is 2 + 3?", "5", "gsm8k")


def test_an_unreachable_hub_is_one_line_naming_the_fix(monkeypatch):
    def offline(name, config=None, split=None):
        raise ConnectionError(f"Couldn't reach '{name}' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    for load in (load_math, load_problems, load_search):
        with pytest.raises(ValueError) as err:
            load("openai/gsm8k:main@test")
        message = str(err.value)
        assert len(message.splitlines()) == 1
        assert "cannot reach the Hugging Face Hub to load 'openai/gsm8k:main'" in message
        assert "download it where the Hub is reachable" in message and "pass the local folder or file" in message
        rows_module._load_hub.cache_clear()


def test_offline_mode_of_the_real_datasets_package(tmp_path):
    """The real `datasets.load_dataset` with HF_HUB_OFFLINE=1 (it makes no network call) and an empty cache."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT)}
    code = ("from llm_marl_envs.math.datasets import load_dataset\n"
            "try:\n    load_dataset('openai/gsm8k:main@test')\nexcept ValueError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120).stdout.strip()
    assert len(out.splitlines()) == 1, out
    assert "cannot reach the Hugging Face Hub" in out and "download it where the Hub is reachable" in out


def test_other_hub_failures_say_what_to_check(monkeypatch):
    def missing(name, config=None, split=None):
        raise FileNotFoundError(f"Dataset '{name}' doesn't exist on the Hub or cannot be accessed.")

    monkeypatch.setattr(datasets, "load_dataset", missing)
    with pytest.raises(ValueError, match=r"cannot load 'someone/nothing' from the Hugging Face Hub .*check the id"):
        load_math("someone/nothing")


# -------------------------------------------------------------------------------- the three loader families
@pytest.mark.parametrize("fixture", ["math_gsm8k.jsonl", "math_math.jsonl", "math_polaris.jsonl"])
def test_math_loaders_read_every_source_alike(tmp_path, fixture):
    expected = load_math(FIXTURES / fixture)
    for kind, source in export(uniform(json_rows(FIXTURES / fixture)), tmp_path, "m").items():
        assert load_math(source) == expected, kind


def test_an_aime_table_with_absent_columns(tmp_path):
    """A table holds every column: null cells must not shadow the fields a row does have (AIME ids)."""
    records = [{"id": 60, "problem": "p1", "answer": 16, "problem_idx": None}, {"id": None, "problem": "p2", "answer": 4, "problem_idx": 3}]
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "aime.parquet")
    items = load_math(tmp_path / "aime.parquet")
    assert [(i.source, i.uid, i.answer) for i in items] == [("aime", "60", "16"), ("aime", "3", "4")]


@pytest.mark.parametrize("fixture", ["code_apps.jsonl", "code_codecontests.json", "code_livecodebench.jsonl"])
def test_code_loaders_read_every_source_alike(tmp_path, fixture):
    def summary(problems):
        return [(p.id, p.statement, p.reference, p.tests, p.examples, p.source, p.time_limit_s, p.memory_limit_mb, p.any_case) for p in problems]

    expected = summary(load_problems(FIXTURES / fixture))
    records = json_rows(FIXTURES / fixture)
    if fixture == "code_codecontests.json":
        records = records[:1]  # the second row's empty lists have no type a table can hold; it is skipped anyway
    for kind, source in export(records, tmp_path, "c").items():
        assert summary(load_problems(source)) == expected, kind


def _search_summary(corpus):
    return ([(q.qid, q.question, q.answer, q.aliases, q.hops, q.supporting) for q in corpus.questions],
            [(d.title, d.text, d.url) for d in corpus.documents])


def test_musique_reads_every_source_alike(tmp_path):
    expected = _search_summary(load_search(FIXTURES / "search" / "musique_sample.jsonl", answerable_only=False))
    for kind, source in export(json_rows(FIXTURES / "search" / "musique_sample.jsonl"), tmp_path, "mq").items():
        assert _search_summary(load_search(source, answerable_only=False)) == expected, kind


def test_hotpotqa_in_the_hubs_columns(tmp_path, monkeypatch):
    """The Hub's HotpotQA (`id`, `context` and `supporting_facts` as dicts of lists) loads like the JSON file."""
    expected = _search_summary(load_search(FIXTURES / "search" / "hotpotqa_sample.json"))
    hub = [{"id": r["_id"], "question": r["question"], "answer": r["answer"], "type": r.get("type", ""), "level": r.get("level", ""),
            "supporting_facts": {"title": [t for t, _ in r["supporting_facts"]], "sent_id": [i for _, i in r["supporting_facts"]]},
            "context": {"title": [t for t, _ in r["context"]], "sentences": [s for _, s in r["context"]]}}
           for r in json_rows(FIXTURES / "search" / "hotpotqa_sample.json")]
    for kind, source in export(hub, tmp_path, "hq").items():
        corpus = load_search(source)
        assert _search_summary(corpus) == expected, kind
    monkeypatch.chdir(tmp_path)
    corpus = load_search("hq_dd@test")
    assert corpus.spec["path"] == f"{tmp_path / 'hq_dd'}@test"  # absolute: the search backend rebuilds it from anywhere
    monkeypatch.chdir(ROOT)
    assert load_corpus(corpus.spec).corpus_hash == corpus.corpus_hash


def test_a_search_env_plays_a_parquet_dataset(tmp_path):
    from llm_marl_envs.registry import make_raw

    source = export(json_rows(FIXTURES / "search" / "musique_sample.jsonl"), tmp_path, "mq")["parquet"]
    env = make_raw("mass", dataset=source)
    questions = env.dataset_instances()
    assert [q.qid for q in questions] == ["2hop__1001_2002", "2hop__3003_4004"]
    env.reset(seed=0, options={"instance": questions[0]})
    assert env.instance.qid == "2hop__1001_2002"


@pytest.mark.parametrize("name", ["mass", "deep_search"])
def test_a_search_dataset_without_questions_in_a_split_says_so(name):
    """Both questions of the MuSiQue sample hash to 'test': a reset on 'train' once made 2,000 draws, all rejected,
    then advised to enlarge the grid."""
    from llm_marl_envs.registry import make_raw

    env = make_raw(name, dataset=str(FIXTURES / "search" / "musique_sample.jsonl"))
    with pytest.raises(ValueError, match=r"the dataset has no 'train' questions \(2 in all; .*another split"):
        env.reset(seed=0, options={"split": "train"})
    env.reset(seed=0, options={"split": "test"})
    assert env.instance.qid in ("2hop__1001_2002", "2hop__3003_4004")


@pytest.mark.parametrize("name,option,message", [("math", "dataset", "dataset must be a file, folder or Hub id"),
                                                 ("code", "problems", "problems must be None (the shipped bank), a dataset path")])
def test_a_dataset_option_that_is_a_number_names_what_it_takes(name, option, message):
    """`--env-arg dataset=123` reads as the number 123, which once ended in "'int' object is not iterable"."""
    from llm_marl_envs.registry import make_raw

    with pytest.raises(ValueError, match=re.escape(message)):
        make_raw(name, **{option: 123})


@pytest.mark.parametrize("name,option,extra", [("math", "dataset", {}), ("code", "problems", {}),
                                              ("code", "problems", {"dataset_format": "foo"}),
                                              ("code", "problems", {"dataset_split": "foo"})])
def test_a_dataset_in_no_known_format_names_the_envs_option(tmp_path, name, option, extra):
    """The loaders' advice named their own parameters (`pass format=...`, `split must be...`), which the
    environments do not take: `--env-arg format=apps` is an unknown option. It names the env's option too."""
    from llm_marl_envs.registry import make_raw

    path = tmp_path / "odd.jsonl"
    path.write_text('{"q": "x", "a": "1"}\n')
    wanted = "dataset_split" if "dataset_split" in extra else "dataset_format"
    with pytest.raises(ValueError, match=f"the {name} environment's {wanted}"):
        make_raw(name, **{option: str(path)}, **extra)


_ONE = {"question": "What is 1 plus 1?", "answer": "1 + 1 = 2\n#### 2"}


@pytest.mark.parametrize("name,text", [("bom.jsonl", json.dumps(_ONE) + "\n"), ("bom.json", json.dumps([_ONE]))])
def test_a_file_that_starts_with_a_byte_order_mark_is_read(tmp_path, name, text):
    """Files saved by Windows editors and exports start with a UTF-8 byte-order mark: a JSONL file failed on its
    first line ("Unexpected UTF-8 BOM"), and a JSON list was taken for JSONL."""
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert [p.answer for p in load_math(path)] == ["2"]


def test_a_file_that_is_not_utf8_names_itself_and_the_fix(tmp_path):
    """A Latin-1 file once ended in the codec's words alone ("'utf-8' codec can't decode byte 0xe9 ...")."""
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"question": "caf\xe9 1 plus 1?", "answer": "#### 2"}\n')
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: not UTF-8 text \(byte \d+: invalid continuation byte\); save it as UTF-8"):
        load_math(path)


# -------------------------------------------------------------------------------- eval --split all
SEVEN = [{"question": f"What is {i} plus {i}?", "answer": f"{i} + {i} = {2 * i}\n#### {2 * i}"} for i in range(1, 8)]


def _answer(request, k) -> str:
    a, b = re.search(r"What is (\d+) plus (\d+)\?", request.messages[-1]["content"]).groups()
    return f"#### \\boxed{{{int(a) + int(b)}}}"


@pytest.fixture
def seven(tmp_path) -> Path:
    path = tmp_path / "seven.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in SEVEN))
    return path


def test_split_all_plays_every_row_once(seven):
    engine = ScriptedEngine(_answer)
    result = evaluate(engine, "math", split="all", env_kwargs={"dataset": str(seven), "mode": "reasoner"})
    assert result["episodes"] == 7 and result["success_rate"] == 1.0 and result["split"] == "all"
    asked = [re.search(r"What is \d+ plus \d+\?", r.messages[-1]["content"]).group(0) for call in engine.calls for r in call]
    assert sorted(asked) == sorted(r["question"] for r in SEVEN)



@pytest.mark.parametrize("alias", ["math_v2", "llm_marl/Math-v2"])
def test_a_result_names_the_env_and_not_the_alias_given(seven, alias):
    """`eval --env llm_marl/Math-v2` once wrote "env": "llm_marl/Math-v2" where play and train write "math"."""
    result = evaluate(ScriptedEngine(_answer), alias, split="all", env_kwargs={"dataset": str(seven), "mode": "reasoner"})
    assert result["env"] == "math" and result["episodes"] == 7

def test_split_all_reaches_code_and_search_datasets(tmp_path):
    code = episode_tasks("code", None, "all", env_kwargs={"problems": str(FIXTURES / "code_apps.jsonl")})
    assert [t.options["instance"].problem.id for t in code] == ["4001", "4003"]
    search = episode_tasks("deep_search", None, "all", env_kwargs={"dataset": str(FIXTURES / "search" / "musique_sample.jsonl")})
    assert [t.options["instance"].qid for t in search] == ["2hop__1001_2002", "2hop__3003_4004"]


def test_a_named_split_of_a_dataset_plays_distinct_rows(seven):
    from llm_marl_envs.core.instances import split_of

    train = [r["question"] for r in SEVEN if split_of(" ".join(r["question"].split())) == "train"]
    tasks = episode_tasks("math", None, "train", env_kwargs={"dataset": str(seven)})
    assert sorted(t.options["instance"].question for t in tasks) == sorted(train)


def test_a_dataset_too_small_says_so(seven):
    kwargs = {"dataset": str(seven)}
    with pytest.raises(ValueError, match=r"math's dataset has 7 rows, and --n asks for 8 episodes: pass --n 7 or less"):
        episode_tasks("math", 8, "all", env_kwargs=kwargs)
    with pytest.raises(ValueError, match=r"math's dataset has 7 rows, \d of them in the 'test' split, and --n asks for 50 "
                                         r"episodes: pass --n \d or less, --split all \(every row once\)"):
        episode_tasks("math", 50, "test", env_kwargs=kwargs)


def test_generated_envs_refuse_split_all():
    with pytest.raises(ValueError, match="plan_path generates its instances, so --split all has no whole dataset"):
        episode_tasks("plan_path", None, "all")
    assert len(episode_tasks("plan_path", None, "test")) == 50  # n unset: the former default


def _one_line_error(capsys, argv, *needles):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("llm-marl: error: "), err
    for needle in needles:
        assert needle in err, err


def test_cli_errors_come_before_any_model_loads(capsys, seven, monkeypatch):
    import llm_marl.train_cli as train_cli

    monkeypatch.setattr(train_cli, "_eval_engine", lambda *a: pytest.fail("an engine was built"))
    _one_line_error(capsys, ["eval", "--env", "plan_path", "--split", "all"], "plan_path generates its instances", "--n")
    _one_line_error(capsys, ["eval", "--env", "math", "--env-arg", f"dataset={seven}", "--split", "all", "--n", "9"],
                    "math's dataset has 7 rows", "--n asks for 9 episodes")
    _one_line_error(capsys, ["eval", "--env", "math", "--env-arg", f"dataset={seven}@test"], "which has no splits")



@pytest.mark.parametrize("name,option,fixture", [("mass", "dataset", "search/musique_sample.jsonl"),
                                                 ("code", "problems", "code_apps.jsonl")])
def test_play_on_a_split_the_dataset_leaves_empty(capsys, name, option, fixture):
    """Both fixtures hold no 'train' rows (MuSiQue's hash to 'test', a code file is all in its dataset_split):
    `play --split train` once ended in the reset's traceback."""
    _one_line_error(capsys, ["play", "--env", name, "--env-arg", f"{option}={FIXTURES / fixture}", "--split", "train"],
                    f"{name}'s dataset has 2 rows, none of them in the 'train' split", "--split all")

def test_readme_eval_split_all_command(capsys, tmp_path, monkeypatch):
    """The README's `eval --split all` command, on a parquet file of seven rows; the served model is
    replaced by a scripted engine that answers every question."""
    import llm_marl.train_cli as train_cli

    command = re.search(r"`(llm-marl eval [^`]*--split all[^`]*)`", README).group(1)
    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.Table.from_pylist(SEVEN), tmp_path / "gsm8k_test.parquet")
    monkeypatch.setattr(train_cli, "_eval_engine", lambda *a: (ScriptedEngine(_answer), None))
    assert main(shlex.split(command)[1:]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["episodes"] == 7 and result["success_rate"] == 1.0


# -------------------------------------------------------------------------------- play --split all
class _Answerer:
    """A scripted agent that answers every SEVEN question (the `api` agent of the README's line)."""

    def reset(self, seed=None):
        pass

    def act(self, role, observation):
        a, b = re.search(r"What is (\d+) plus (\d+)\?", observation["messages"][-1]["content"]).groups()
        return f"#### \\boxed{{{int(a) + int(b)}}}"


def _play_lines(capsys) -> tuple[str, list[dict]]:
    out = capsys.readouterr().out
    return out, [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_play_split_all_plays_every_row_once(capsys, seven, monkeypatch):
    import llm_marl.cli as cli

    monkeypatch.setattr(cli, "make_agent", lambda *a: _Answerer())
    assert main(["play", "--env", "math", "--env-arg", f"dataset={seven}", "--env-arg", "mode=reasoner", "--split", "all"]) == 0
    out, lines = _play_lines(capsys)
    *episodes, totals = lines
    assert totals == {"env": "math", "agent": "oracle", "split": "all", "episodes": 7, "successes": 7}
    assert [e["row"] for e in episodes] == list(range(7)) and all(e["success"] for e in episodes)
    tasks = episode_tasks("math", None, "all", env_kwargs={"dataset": str(seven)})
    assert [(e["seed"], e["split"]) for e in episodes] == [(t.seed, t.options["split"]) for t in tasks]  # eval's episodes
    assert set(re.findall(r"What is \d+ plus \d+\?", out)) == {r["question"] for r in SEVEN}  # every row rendered


def test_play_named_split_still_plays_one_episode(capsys, seven, monkeypatch):
    import llm_marl.cli as cli

    monkeypatch.setattr(cli, "make_agent", lambda *a: _Answerer())
    assert main(["play", "--env", "math", "--env-arg", f"dataset={seven}", "--split", "train", "--seed", "2", "--quiet"]) == 0
    _, lines = _play_lines(capsys)
    assert len(lines) == 1 and lines[0]["split"] == "train" and lines[0]["seed"] == 2 and "row" not in lines[0]


def test_play_split_all_errors_are_eval_s_and_come_before_the_agent(capsys, monkeypatch):
    import llm_marl.cli as cli

    monkeypatch.setattr(cli, "make_agent", lambda *a: pytest.fail("an agent was built"))
    _one_line_error(capsys, ["play", "--env", "plan_path", "--split", "all"], "plan_path generates its instances",
                    "use --split train, val or test (a dataset option such as math's dataset=FILE")
    assert main(["play", "--env", "plan_path", "--split", "all"]) == 2
    assert "--n" not in capsys.readouterr().err  # play has no --n


def test_readme_play_split_all_command(capsys, tmp_path, monkeypatch):
    """The README's `play --split all` command, on a parquet file of seven rows; the served model is
    replaced by a scripted engine that answers every question (the api agent runs on it)."""
    import llm_marl.cli as cli

    command = re.search(r"`(llm-marl play [^`]*--split all[^`]*)`", README).group(1)
    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.Table.from_pylist(SEVEN), tmp_path / "gsm8k_test.parquet")
    monkeypatch.setattr(cli, "make_api_engine", lambda *a: ScriptedEngine(_answer))
    assert main(shlex.split(command)[1:]) == 0
    assert _play_lines(capsys)[1][-1] == {"env": "math", "agent": "api", "split": "all", "episodes": 7, "successes": 7}


def test_readme_export_snippet_matches_the_reader(tmp_path, monkeypatch):
    """The README's export lines, with the Hub replaced by a local table of the same columns."""
    block = re.search(r"```python\n(import datasets\n.*?)```", README, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: datasets.Dataset.from_list(SEVEN))
    exec(compile(block, "README.md", "exec"), {})
    assert len(load_math("gsm8k_test.parquet")) == len(load_math("gsm8k_test")) == 7


def test_json_sources_import_neither_datasets_nor_pyarrow():
    """The environments work without the datasets extra: only tables, folders and Hub ids import it."""
    code = ("import sys\nfrom llm_marl_envs.registry import make_raw\n"
            f"env = make_raw('math', dataset={str(FIXTURES / 'math_gsm8k.jsonl')!r})\n"
            "print(len(env.dataset_instances()), 'datasets' in sys.modules, 'pyarrow' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.split() == ["3", "False", "False"], out.stderr


def test_train_checks_its_held_out_episodes_before_starting(capsys, seven, tmp_path):
    _one_line_error(capsys, ["train", "--env", "math", "--env-arg", f"dataset={seven}", "--eval-episodes", "50",
                             "--out-dir", str(tmp_path / "runs")], "math's dataset has 7 rows",
                    "--eval-episodes asks for 50 episodes: pass --eval-episodes")
    assert not (tmp_path / "runs").exists()
