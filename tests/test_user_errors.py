"""The OpenAI-compatible path through the CLI (a local server on 127.0.0.1) and through the LLM judges,
and the user mistakes of issue 13 item 6: each ends in ONE line naming the fix, with exit status 2,
before any model loads; a judge that fails returns an error string instead."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llm_marl.cli import main

from tests.support.math_data import math_dataset_without
from tests.test_cli import README


class _Server(BaseHTTPRequestHandler):
    """OpenAI-compatible `/v1/chat/completions`: every model answers as the plan_path oracle planner
    (from the prompt text alone), but model "say:WORD" answers WORD (a judge's label), "garbled" answers
    JSON that is no chat completion, "slow" waits 30 s first, and "fail-after:N" answers the first N
    requests, then HTTP 500 (0.3 s late, so that the answers before reach the client first). Any other path is a 404."""

    seen: list[dict] = []
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802 (http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with type(self).lock:
            type(self).seen.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
            count = len(type(self).seen)
        if self.path != "/v1/chat/completions":
            return self._send(404, {"error": {"message": "Not Found", "type": "not_found"}})
        if body["model"].startswith("fail-after:") and count > int(body["model"].split(":")[1]):
            time.sleep(0.3)
            return self._send(500, {"error": {"message": "the GPU fell over", "type": "server_error"}})
        if body["model"] == "slow":
            time.sleep(30)
        if body["model"] == "garbled":
            return self._send(200, {"object": "chat.completion", "choices": "none today"})
        from agents.oracle import make_oracle

        reply = (body["model"].removeprefix("say:") if body["model"].startswith("say:")
                 else make_oracle("plan_path").act("planner", {"messages": body["messages"], "turn": 0}))
        if body["model"] == "thinker" and body.get("chat_template_kwargs", {}).get("enable_thinking") is not False:
            reply = "<think>\nThe goal is down and to the right.\n</think>\n\n" + reply  # a Qwen3 that thinks
        self._send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}]})

    def _send(self, code: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the slow-server test)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Server.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_line_error(capsys, argv: list[str], *needles: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("llm-marl: error: ") and "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


PLANNER = ["--env", "plan_path", "--env-arg", "mode=planner"]


# -------------------------------------------------------------------------------- the served model
def test_play_agent_api_plays_an_episode_with_a_served_model(capsys, server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["play", *PLANNER, "--agent", "api", "--base-url", f"{server}/v1", "--model", "oracle",
                 "--api-key", "sk-flag", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["agent"] == "api" and summary["success"] is True and summary["turns"] >= 1
    assert "=== episode over: success ===" in out
    assert _Server.seen and all(s["auth"] == "Bearer sk-flag" and s["model"] == "oracle" for s in _Server.seen)
    assert _Server.seen[0]["messages"][-1]["role"] == "user"
    assert all(s["temperature"] == 0.0 and s["max_tokens"] == 256 for s in _Server.seen)  # greedy, 256 tokens


def test_play_agent_api_takes_the_sampling_flags(capsys, server):
    """--temperature and --max-new-tokens reach the server (the agent once sent greedy, 256 tokens, whatever was
    given), and bad values are one line."""
    assert main(["play", *PLANNER, "--agent", "api", "--base-url", f"{server}/v1", "--model", "oracle", "--quiet",
                 "--temperature", "0.7", "--max-new-tokens", "40"]) == 0
    assert _Server.seen and all(s["temperature"] == 0.7 and s["max_tokens"] == 40 for s in _Server.seen)
    one_line_error(capsys, ["play", *PLANNER, "--agent", "api", "--base-url", f"{server}/v1", "--model", "oracle",
                            "--max-new-tokens", "0"], "--max-new-tokens must be >= 1")


@pytest.mark.parametrize("flag, sent", [([], None), (["--thinking"], {"enable_thinking": True}),
                                        (["--no-thinking"], {"enable_thinking": False})])
@pytest.mark.parametrize("command", ["play", "eval"])
def test_a_thinking_model_behind_a_server(capsys, server, command, flag, sent, tmp_path):
    """It plays and is evaluated (its reasoning kept apart: tests/test_engines.py), and the thinking switch reaches
    the server only when given."""
    args = (["--agent", "api", "--seed", "0"] if command == "play"
            else ["--engine", "api", "--n", "1", "--out", str(tmp_path / "eval.json")])
    assert main([command, *PLANNER, *args, "--base-url", f"{server}/v1", "--model", "thinker", *flag]) == 0
    if command == "play":
        assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["success"] is True
    else:
        assert json.loads((tmp_path / "eval.json").read_text())["success_rate"] == 1.0
    assert _Server.seen and all(s.get("chat_template_kwargs") == sent for s in _Server.seen)


def test_openai_compatible_agent_plays_from_python(server):
    from agents import run_episode
    from agents.llm import OpenAICompatibleAgent
    from llm_marl_envs import registry

    agent = OpenAICompatibleAgent(f"{server}/v1", "oracle", api_key="k", timeout_s=5, max_retries=0)
    result = run_episode(registry.make("plan_path", mode="planner"), agent, seed=0, split="test")
    assert result.success and result.turns >= 1 and _Server.seen[0]["auth"] == "Bearer k"
    agent.engine.close()


def test_readme_play_agent_api_command(capsys, server):
    command = re.search(r"`(llm-marl play [^`]*--agent api[^`]*)`", README).group(1)
    argv = shlex.split(command.replace("http://127.0.0.1:8000", server))[1:]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["success"] is True
    assert _Server.seen[0]["model"] == "NAME"


def test_eval_engine_api_reads_the_key_from_the_environment(capsys, server, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    out = tmp_path / "eval.json"
    assert main(["eval", *PLANNER, "--engine", "api", "--base-url", f"{server}/v1", "--model", "oracle", "--n", "2",
                 "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["episodes"] == 2 and result["success_rate"] == 1.0 and result["engine"] == "api"
    assert {s["auth"] for s in _Server.seen} == {"Bearer sk-env"}
    assert all(s["temperature"] == 0.0 for s in _Server.seen)


def test_eval_an_api_error_late_keeps_the_episodes_that_ended(capsys, server, tmp_path):
    """A server that fails after its first answers once cost every episode played: eval ended in the error alone.
    Now the episodes that ended are scored, marked partial (how many of how many, and the error), on stdout and
    beside --out (never in it: a file there is the whole evaluation's), and eval still fails with one line."""
    out = tmp_path / "eval.json"
    argv = ["eval", *PLANNER, "--engine", "api", "--base-url", f"{server}/v1", "--n", "4", "--api-retries", "0", "--out", str(out)]
    err = one_line_error(capsys, [*argv, "--model", "fail-after:2"], "HTTP 500", "the GPU fell over",
                         f"the scores of the 2 of 4 episodes that ended before it are on stdout and in {tmp_path / 'eval.partial.json'}",
                         'marked "partial"')
    partial = json.loads((tmp_path / "eval.partial.json").read_text())
    assert not out.exists() and partial["episodes"] == 2 and partial["success_rate"] == 1.0 and partial["replies"] == 2
    assert partial["partial"]["episodes"] == 2 and partial["partial"]["of"] == 4 and "HTTP 500" in partial["partial"]["error"]
    assert partial["engine"] == "api" and partial["model"] == "fail-after:2" and "Traceback" not in err
    # The first answer already an error: nothing ended, nothing written, as before.
    one_line_error(capsys, [*argv, "--model", "fail-after:0"], "HTTP 500")
    assert json.loads((tmp_path / "eval.partial.json").read_text())["model"] == "fail-after:2"
    # Every answer given: the result as always, with no "partial".
    assert main([*argv, "--model", "oracle"]) == 0
    result = json.loads(out.read_text())
    assert "partial" not in result and result["episodes"] == 4 and result["replies"] == 4


# -------------------------------------------------------------------------------- api mistakes
def test_an_api_key_read_with_its_line_break_works(capsys, server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-file\r\n")  # as `$(cat key.txt)` leaves a key file written on Windows
    assert main(["play", *PLANNER, "--agent", "api", "--base-url", f"{server}/v1", "--model", "oracle", "--quiet"]) == 0
    assert {s["auth"] for s in _Server.seen} == {"Bearer sk-file"}


@pytest.mark.parametrize("command", ["play", "eval"])
@pytest.mark.parametrize("env, flag, where", [("sk-one\nsk-two", [], "the API key in $OPENAI_API_KEY has"),
                                              ("", ["--api-key", "sk-\u2026"], "the API key has")])
def test_an_api_key_no_header_can_carry(capsys, monkeypatch, command, env, flag, where):
    """Once "cannot reach URL (Illegal header value b'Bearer sk-...'); start the server or fix --base-url", which
    printed the key and blamed the server, or a bare "'ascii' codec can't encode character"."""
    monkeypatch.setenv("OPENAI_API_KEY", env)
    args = ["--agent", "api"] if command == "play" else ["--engine", "api", "--n", "1"]
    err = one_line_error(capsys, [command, *PLANNER, *args, "--base-url", f"http://127.0.0.1:{closed_port()}/v1", "--model", "m",
                                  "--api-retries", "0", *flag], where, "a character no HTTP header can carry")
    assert "sk-" not in err


@pytest.mark.parametrize("argv", [
    ["play", *PLANNER, "--agent", "api", "--base-url", "http://127.0.0.1:1/v1"],
    ["eval", *PLANNER, "--engine", "api", "--base-url", "http://127.0.0.1:1/v1"],
    ["eval", *PLANNER, "--engine", "api", "--model", "m"],
])
def test_api_needs_base_url_and_model(capsys, argv):
    one_line_error(capsys, argv, "needs --base-url", "--model")


@pytest.mark.parametrize("command", ["play", "eval"])
def test_unreachable_server(capsys, command):
    flag = ["--agent", "api"] if command == "play" else ["--engine", "api", "--n", "1"]
    one_line_error(capsys, [command, *PLANNER, *flag, "--base-url", f"http://127.0.0.1:{closed_port()}/v1", "--model", "m",
                            "--api-retries", "0"], "cannot reach", "start the server or fix --base-url")


@pytest.mark.parametrize("command", ["play", "eval"])
def test_server_answering_404(capsys, server, command):
    flag = ["--agent", "api"] if command == "play" else ["--engine", "api", "--n", "1"]
    one_line_error(capsys, [command, *PLANNER, *flag, "--base-url", f"{server}/v2", "--model", "oracle"],
                   "404", "--base-url must end in /v1")


def test_eval_engine_api_refuses_adapters(capsys, server, tmp_path):
    """The server's model was once scored, and the result said `"adapters": "RUN"`, as if it were the run's."""
    one_line_error(capsys, ["eval", *PLANNER, "--engine", "api", "--base-url", f"{server}/v1", "--model", "oracle", "--n", "1",
                            "--adapters", str(tmp_path)], "--engine api serves no LoRA adapters", "--engine hf or vllm")
    assert _Server.seen == []


@pytest.mark.parametrize("command", ["play", "eval"])
def test_server_answering_no_chat_completion(capsys, server, command):
    """Once an AttributeError traceback."""
    flag = ["--agent", "api"] if command == "play" else ["--engine", "api", "--n", "1"]
    one_line_error(capsys, [command, *PLANNER, *flag, "--base-url", f"{server}/v1", "--model", "garbled"],
                   "did not answer an OpenAI chat completion: ", '"choices": "none today"')


@pytest.mark.parametrize("command, retries, tries", [("play", 1, "2 tries"), ("eval", 1, "2 tries"), ("eval", 0, "1 try")])
def test_slow_server(capsys, server, command, retries, tries):
    flag = ["--agent", "api"] if command == "play" else ["--engine", "api", "--n", "1"]
    started = time.monotonic()
    one_line_error(capsys, [command, *PLANNER, *flag, "--base-url", f"{server}/v1", "--model", "slow", "--api-timeout", "0.5",
                            "--api-retries", str(retries)], f"did not answer within 0.5 s ({tries})", "--api-timeout")
    assert time.monotonic() - started < 20  # the server would take 30 s a request


@pytest.mark.parametrize("command", ["play", "eval"])
@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf"])
def test_a_timeout_that_is_no_number_of_seconds(capsys, command, timeout):
    """nan and inf once reached the socket layer: a traceback (play) or its bare ValueError (eval)."""
    flag = ["--agent", "api"] if command == "play" else ["--engine", "api", "--n", "1"]
    one_line_error(capsys, [command, *PLANNER, *flag, "--base-url", f"http://127.0.0.1:{closed_port()}/v1", "--model", "m",
                            "--api-timeout", timeout], "--api-timeout must be a number of seconds > 0")


@pytest.mark.parametrize("command", ["play", "eval"])
def test_a_negative_retry_count_is_refused(capsys, command):
    """--api-retries -1 was taken for 0 without a word."""
    flag = ["--agent", "api"] if command == "play" else ["--engine", "api", "--n", "1"]
    one_line_error(capsys, [command, *PLANNER, *flag, "--base-url", f"http://127.0.0.1:{closed_port()}/v1", "--model", "m",
                            "--api-retries", "-1"], "--api-retries must be a whole number >= 0, got -1")


# -------------------------------------------------------------------------------- the judges, same server
def judge_config(base_url: str, model: str, **kw):
    from llm_marl_envs.search.judge import JudgeConfig

    return JudgeConfig(base_url=base_url, model=model, **kw)


def test_judges_answer_through_the_openai_sdk(server, monkeypatch):
    from llm_marl.credit.llm_judge import LLMJudge
    from llm_marl.credit.message import Message
    from llm_marl_envs.search.judge import judge

    monkeypatch.setenv("JUDGE_KEY", "sk-judge")
    assert judge(judge_config(f"{server}/v1", "say:CORRECT", api_key_env="JUDGE_KEY"), "Q?", "gold", "pred") == (True, None)
    assert judge(judge_config(f"{server}/v1", "say:incorrect."), "Q?", "gold", "pred") == (False, None)
    seen = _Server.seen[0]
    assert seen["path"] == "/v1/chat/completions" and seen["auth"] == "Bearer sk-judge"
    assert seen["temperature"] == 0 and seen["max_tokens"] == 8 and "Ground-truth answer: gold" in seen["messages"][0]["content"]
    labeller = LLMJudge(judge_config(f"{server}/v1", "say:COUNTER"))
    assert labeller([Message("a", 0, "search")], Message("b", 1, "undo that")) == -1 and labeller.errors == []
    assert _Server.seen[-1]["max_tokens"] == 4


def test_judge_of_an_unreachable_server_is_an_error_string():
    from llm_marl.credit.llm_judge import LLMJudge
    from llm_marl.credit.message import Message
    from llm_marl_envs.search.judge import judge

    url = f"http://127.0.0.1:{closed_port()}/v1"
    verdict, error = judge(judge_config(url, "m", max_retries=0), "Q?", "gold", "pred")
    assert verdict is None and error.startswith(f"judge failed: cannot reach {url}/chat/completions")
    labeller = LLMJudge(judge_config(url, "m", max_retries=0))
    assert labeller([], Message("a", 0, "hi")) == 0 and labeller.errors[0].startswith("judge failed: cannot reach")


def test_judge_of_a_slow_server_times_out_with_an_error_string(server):
    from llm_marl_envs.search.judge import chat_completion

    started = time.monotonic()
    reply, error = chat_completion(judge_config(f"{server}/v1", "slow", timeout_s=0.5, max_retries=1), "Q?")
    assert reply is None and error == f"judge failed: {server}/v1/chat/completions did not answer within 0.5 s (2 tries)"
    assert time.monotonic() - started < 20  # the server would take 30 s a request


@pytest.mark.parametrize("base,model,message", [
    ("/v1", "garbled", "did not answer a chat completion"),
    ("/v2", "m", "answered HTTP 404"),
])
def test_judge_of_a_bad_reply_is_an_error_string(server, base, model, message):
    from llm_marl_envs.search.judge import chat_completion, judge

    reply, error = chat_completion(judge_config(f"{server}{base}", model, max_retries=0), "Q?")
    assert reply is None and error.startswith("judge failed: ") and message in error, error
    assert judge(judge_config(f"{server}/v1", "say:maybe?"), "Q?", "gold", "pred") == (
        None, "judge replied 'MAYBE?', expected CORRECT or INCORRECT")


def test_judge_without_openai_is_an_error_string(monkeypatch):
    import sys

    from llm_marl_envs.search.judge import chat_completion

    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` raises ImportError
    assert chat_completion(judge_config("http://127.0.0.1:9/v1", "m"), "Q?") == (
        None, "judge failed: the LLM judge needs the openai package: pip install openai")


def test_the_judge_module_imports_openai_only_when_it_calls():
    """The search MCP server loads llm_marl_envs.search without `openai`; the judge imports it lazily."""
    import subprocess
    import sys
    from pathlib import Path

    code = "import sys\nimport llm_marl_envs.search.judge\nprint('openai' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.split() == ["False"], out.stderr


# -------------------------------------------------------------------------------- before a model loads
@pytest.fixture
def no_model_loads(monkeypatch):
    from llm_marl.policies import PolicySet

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the mistake was reported")

    monkeypatch.setattr(PolicySet, "from_pretrained", classmethod(refuse))
    monkeypatch.setattr("llm_marl.trainer.train", refuse)


def vllm_importable() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(vllm_importable(), reason="vLLM is installed here: the missing-vLLM message cannot be shown")
@pytest.mark.parametrize("command", ["train", "eval"])
def test_engine_vllm_without_vllm(capsys, no_model_loads, command):
    one_line_error(capsys, [command, "--env", "plan_path", "--engine", "vllm", "--model", "tiny-random"],
                   "needs vLLM", "pip install 'llm-marl[vllm]'", "--engine hf")


@pytest.mark.parametrize("command", ["train", "eval"])
def test_policy_with_an_unknown_role(capsys, no_model_loads, command):
    one_line_error(capsys, [command, "--env", "plan_path", "--policy", "tool=a,boss=b", "--model", "tiny-random"],
                   "unknown ['boss']", "must map exactly the roles ['tool', 'planner']")


def _no_gpu() -> bool:
    import torch

    return not torch.cuda.is_available()


@pytest.mark.skipif(not _no_gpu(), reason="torch sees a GPU here: --device cuda is valid")
@pytest.mark.parametrize("command", ["train", "sft", "eval"])
def test_device_cuda_without_a_gpu(capsys, no_model_loads, command):
    one_line_error(capsys, [command, "--env", "plan_path", "--device", "cuda", "--model", "tiny-random"],
                   "--device cuda: torch sees 0 CUDA device(s)", "use --device cpu")


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
def test_a_model_cache_that_cannot_be_written(capsys, tmp_path, monkeypatch, command):
    """LLM_MARL_CACHE (or ~/.cache, in a read-only home) where no folder can be made: the built-in model's cache."""
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("LLM_MARL_CACHE", str(tmp_path / "a-file" / "cache"))
    one_line_error(capsys, [command, "--env", "plan_path", "--model", "tiny-random"],
                   f"cannot write the model cache at {tmp_path / 'a-file' / 'cache' / 'models'} (Not a directory)",
                   "set LLM_MARL_CACHE to a writable folder")


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
def test_a_base_model_without_a_chat_template(capsys, tmp_path, monkeypatch, command):
    """Refused in one line before its weights load, and `train` makes no run directory."""
    import transformers

    from llm_marl.models import resolve_model

    model = tmp_path / "base-model"
    shutil.copytree(resolve_model("tiny-random"), model)
    config = json.loads((model / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    (model / "chat_template.jinja").unlink(missing_ok=True)

    def refuse(*args, **kwargs):
        raise AssertionError("the weights were loaded before the mistake was reported")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    one_line_error(capsys, [command, "--env", "plan_path", "--model", str(model), "--out-dir", str(tmp_path / "runs")]
                   if command != "eval" else [command, "--env", "plan_path", "--model", str(model)],
                   f"the tokenizer of {model} has no chat template", "use an instruct/chat model")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
def test_a_model_folder_without_a_tokenizer(capsys, tmp_path, command):
    (tmp_path / "config.json").write_text("{}")
    one_line_error(capsys, [command, "--env", "plan_path", "--model", str(tmp_path)], f"cannot load the tokenizer of {tmp_path}: ")


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
def test_device_that_is_no_device(capsys, no_model_loads, command):
    one_line_error(capsys, [command, "--env", "plan_path", "--device", "gpu0", "--model", "tiny-random"],
                   "--device must be auto, cpu, cuda or cuda:N, got 'gpu0'")


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
def test_the_device_reaches_the_model(monkeypatch, command):
    """`--device` (default auto: cuda when torch sees a GPU, else cpu) is where each command loads its model."""
    import torch

    from llm_marl.policies import PolicySet

    seen = []

    class Stop(Exception):
        pass

    def record(cls, *args, **kwargs):
        seen.append(kwargs.get("device"))
        raise Stop  # before anything runs on the model

    monkeypatch.setattr(PolicySet, "from_pretrained", classmethod(record))
    auto = "cuda" if torch.cuda.is_available() else "cpu"
    for extra, expected in (([], auto), (["--device", "cpu"], "cpu")):
        with pytest.raises(Stop):
            main([command, "--env", "plan_path", "--model", "tiny-random", *extra])
        assert seen.pop() == expected


@pytest.mark.parametrize("argv", [
    ["play", "--env", "plan_path", "--env-arg", "height=abc"],
    ["play", "--env", "plan_path", "--env-arg", "height=3.5"],
    ["eval", "--env", "plan_path", "--env-arg", "height=abc", "--model", "tiny-random"],
    ["train", "--env", "plan_path", "--env-arg", "height=abc", "--model", "tiny-random"],
])
def test_non_numeric_env_arg(capsys, no_model_loads, argv):
    one_line_error(capsys, argv, "option height takes a whole number", "height=10")



@pytest.mark.parametrize("command", [["play"], ["eval", "--model", "tiny-random"],
                                     ["train", "--model", "tiny-random", "--eval-episodes", "0"]])
def test_a_configuration_without_instances(capsys, no_model_loads, tmp_path, command):
    """A 4x4 Sokoban room has a 2x2 floor, where no box can be pushed: the reset finds no level, and play
    once printed its ValueError as a traceback. eval made it one line after the model loaded, and train
    a traceback in step 1: both now reset one episode first. The fix is a larger room, which the message
    once left out (it named reverse_steps, which no env option sets). train makes no run directory."""
    one_line_error(capsys, [command[0], "--env", "sokoban", *command[1:], "--env-arg", "height=4", "--env-arg", "width=4",
                            "--env-arg", "inner_walls=0", *(["--out-dir", str(tmp_path / "runs")] if command[0] == "train" else [])],
                   "no Sokoban level satisfies", "loosen min/max_solution_moves", "enlarge the room (height, width)")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("empty, flags, fix", [
    ("train", [], " (--env-arg dataset=FILE; train plays its steps' episodes on the train split)"),
    ("test", ["--eval-episodes", "1"], " (--env-arg dataset=FILE), or pass --eval-episodes 0 (the held-out evaluation plays the test split)")])
def test_train_on_a_dataset_with_no_problems_in_a_split_it_plays_names_trains_fixes(capsys, no_model_loads, tmp_path, empty, flags, fix):
    """A math dataset file with no row in the train split got the environment's advice, 'use a larger dataset, another
    split, or options={'instance': ...}', flags train has none of (and no --eval-episodes 0 for an empty test split)."""
    data = math_dataset_without(empty, tmp_path)
    assert main(["train", "--env", "math", "--env-arg", f"dataset={data}", *flags, "--model", "tiny-random",
                 "--out-dir", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err == (f"llm-marl: error: math's dataset has 5 rows, none of them in the {empty!r} split: use "
                                       f"a larger dataset{fix}\n")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", [["play"], ["eval", "--model", "tiny-random"], ["train", "--model", "tiny-random"]])
def test_a_search_backend_that_cannot_run_here(capsys, no_model_loads, monkeypatch, command):
    """backend=live without network raises BackendUnavailable, whose message names the fix; as a plain
    RuntimeError it ended play, eval and train in a traceback."""
    from pathlib import Path

    import llm_marl_envs.search.live as live

    def offline(timeout, host):
        raise live._unavailable(f"cannot reach {host}:443 (no network in this test)")

    monkeypatch.setattr(live, "preflight", offline)
    dataset = Path(__file__).parent / "fixtures" / "search" / "hotpotqa_sample.json"
    one_line_error(capsys, [command[0], "--env", "mass", *command[1:], "--env-arg", "backend=live", "--env-arg", f"dataset={dataset}"],
                   "live web search is unavailable", "backend='bm25'")


@pytest.mark.parametrize("command", [["play"], ["eval", "--model", "tiny-random"]])
@pytest.mark.parametrize("pair", ["render_mode=human", "sandbox=5"])
def test_constructor_arguments_that_are_no_options(capsys, no_model_loads, command, pair):
    """render_mode once made play fail on two render modes ("got multiple values for keyword argument"), and
    sandbox=5 was taken, to fail in the first tool call (play: an AttributeError traceback)."""
    one_line_error(capsys, [command[0], "--env", "plan_path", *command[1:], "--env-arg", pair],
                   f"--env-arg {pair.split('=')[0]} is no environment option", "drop it")

@pytest.mark.parametrize("command", [["play", "--agent", "oracle"], ["eval", "--model", "tiny-random"], ["train", "--model", "tiny-random"],
                                     ["sft", "--model", "tiny-random"]])
def test_an_unknown_env_option_names_the_options(capsys, no_model_loads, command):
    one_line_error(capsys, [command[0], "--env", "mass", *command[1:], "--env-arg", "max_turns=1"],
                   "mass has no option 'max_turns' (did you mean 'max_single_turns'?); its options: mode, hops, corpus_seed,", "`llm-marl envs` lists them")


# -------------------------------------------------------------------------------- eval --adapters
@pytest.fixture(scope="module")
def tiny_adapters(tmp_path_factory):
    from llm_marl.models import resolve_model
    from llm_marl.policies import PolicySet

    folder = tmp_path_factory.mktemp("adapters")
    base = resolve_model("tiny-random")
    PolicySet.from_pretrained(base, roles=["planner"], policy="shared").save(folder)
    return folder, base


def test_eval_adapters_use_their_base_model_by_default(capsys, tiny_adapters, tmp_path):
    folder, base = tiny_adapters
    out = tmp_path / "eval.json"
    assert main(["eval", *PLANNER, "--adapters", str(folder), "--n", "1", "--max-new-tokens", "4", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["model"] == base and result["episodes"] == 1


def test_eval_adapters_of_a_run_directory_are_its_final_adapters(capsys, tiny_adapters, tmp_path):
    import shutil

    folder, base = tiny_adapters
    shutil.copytree(folder, tmp_path / "run" / "adapters")
    out = tmp_path / "eval.json"
    assert main(["eval", *PLANNER, "--adapters", str(tmp_path / "run"), "--n", "1", "--max-new-tokens", "4", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["adapters"] == str(tmp_path / "run" / "adapters") and result["model"] == base


def test_eval_adapters_from_another_base_model(capsys, tiny_adapters, tmp_path, no_model_loads):
    folder, base = tiny_adapters
    other = tmp_path / "other-model"
    other.mkdir()
    (other / "config.json").write_text("{}")
    one_line_error(capsys, ["eval", *PLANNER, "--adapters", str(folder), "--model", str(other)],
                   f"were trained on {base}", "drop --model")


def test_eval_vllm_with_adapters_of_a_rank_vllm_cannot_serve(capsys, tiny_adapters, tmp_path, no_model_loads, monkeypatch):
    """Adapters trained with --engine hf --lora-r 1024 once failed inside vLLM after the model loaded."""
    import shutil

    from llm_marl.policies import MANIFEST

    folder = shutil.copytree(tiny_adapters[0], tmp_path / "wide")
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["lora"]["r"] = 1024
    (folder / MANIFEST).write_text(json.dumps(manifest))
    monkeypatch.setattr("llm_marl.engines.vllm.import_vllm", lambda: None)  # as where vLLM is installed
    one_line_error(capsys, ["eval", *PLANNER, "--engine", "vllm", "--adapters", str(folder)],
                   f"--engine vllm serves LoRA ranks up to 512, got --adapters {folder} of LoRA rank 1024", "use --engine hf")


# -------------------------------------------------------------------------------- train --init-adapters
def _copy_adapters(folder, tmp_path):
    import shutil

    return shutil.copytree(folder, tmp_path / "warm")


def _other_model(tmp_path):
    other = tmp_path / "other-model"
    other.mkdir()
    (other / "config.json").write_text("{}")
    return ["--model", str(other)]


@pytest.mark.parametrize("mistake, flags, needles", [
    ("missing", [], ["no policy_set.json there", "pass a run directory or its adapters folder"]),
    ("damaged manifest", [], ["policy_set.json is damaged (JSONDecodeError", "checkpoints/step_N/adapters"]),
    ("lora shape", ["--lora-r", "4", "--lora-alpha", "8"], ["holds LoRA r=16, alpha=32", "pass --lora-r 16 --lora-alpha 32"]),
    ("base model", ["other-model"], ["were trained on", "pass the same --model"]),
    ("weights missing", [], ["has no shared/adapter_model.safetensors"]),
])
@pytest.mark.parametrize("command", ["train", "sft"])
def test_a_bad_init_adapters_is_refused_before_the_model_loads(capsys, tiny_adapters, tmp_path, no_model_loads,
                                                               mistake, flags, needles, command):
    warm = _copy_adapters(tiny_adapters[0], tmp_path)
    if mistake == "missing":
        warm = tmp_path / "no-such-run"
    elif mistake == "damaged manifest":
        (warm / "policy_set.json").write_text('{"adapters": ["shared"], ')
    elif mistake == "weights missing":
        (warm / "shared" / "adapter_model.safetensors").unlink()
    if flags == ["other-model"]:
        flags = _other_model(tmp_path)
    else:
        flags = [*flags, "--model", "tiny-random"]
    one_line_error(capsys, [command, *PLANNER, *flags, "--init-adapters", str(warm), "--out-dir", str(tmp_path / "runs")],
                   *needles)
    assert not (tmp_path / "runs").exists()


def test_train_with_damaged_init_adapter_weights(capsys, tiny_adapters, tmp_path):
    """Weights that cannot be read are found once the model has loaded (after its progress bar): one error line, and no run
    directory."""
    warm = _copy_adapters(tiny_adapters[0], tmp_path)
    (warm / "shared" / "adapter_model.safetensors").write_bytes(b"not a safetensors file")
    assert main(["train", *PLANNER, "--model", "tiny-random", "--init-adapters", str(warm), "--out-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith(f"llm-marl: error: {warm / 'shared' / 'adapter_model.safetensors'} cannot be read")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


# -------------------------------------------------------------------------------- values out of range
@pytest.mark.parametrize("flags, needle", [
    (["--steps", "0"], "--steps must be >= 1, got 0"),  # these three said "--steps and --envs-per-step must be >= 1"
    (["--envs-per-step", "-2"], "--envs-per-step must be >= 1, got -2"),
    (["--epochs", "0"], "--epochs must be >= 1, got 0"),
    (["--seed", "-1"], "--seed must be >= 0, got -1"),
    (["--lr", "nan"], "--lr must be > 0 and finite, got nan"),
    (["--lr", "inf"], "--lr must be > 0 and finite, got inf"),
    (["--weight-decay", "-1"], "--weight-decay must be >= 0 and finite"),
    (["--warmup-steps", "-1"], "--warmup-steps must be >= 0"),
    (["--grad-clip", "0"], "--grad-clip must be > 0 (inf: no clipping)"),
    (["--clip-eps", "-0.1"], "--clip-eps must be in [0, 1)"),
    (["--clip-eps-high", "-1"], "--clip-eps-high >= 0"),
    (["--dual-clip", "1"], "--dual-clip must be > 1 and finite (0 turns it off), got 1.0"),
    (["--dual-clip", "nan"], "--dual-clip must be > 1 and finite (0 turns it off), got nan"),
    (["--temperature", "nan"], "--temperature must be > 0 and finite"),
    (["--temperature", "inf"], "--temperature must be > 0 and finite"),
    (["--lora-alpha", "0"], "--lora-alpha must be > 0"),
    (["--lora-dropout", "1"], "--lora-dropout must be in [0, 1)"),
    (["--engine", "vllm", "--lora-r", "1024"], "--engine vllm serves LoRA ranks up to 512, got --lora-r 1024"),
    # Read per query in the first rollout: this one was a traceback in step 1, after the model loaded.
    (["--algo", "mhgpo", "--sampling", "rr", "--fork-probs", "0.5,0.2,0.3"], "--fork-probs has 3 values for 2 roles (tool, planner)"),
    # NaN and inf reached int() and Ray: tracebacks after the model loaded.
    (["--engines", "1", "--cpus-per-actor", "nan"], "--cpus-per-actor > 0, each a finite number"),
    (["--engines", "1", "--gpus-per-engine", "inf"], "--gpus-per-engine and --gpus-per-trainer-rank must be >= 0"),
    (["--engines", "1", "--remote-timeout-s", "inf"], "--remote-timeout-s must be > 0 and finite (seconds), got inf"),
    # NaN weights: a NaN credit stopped step 1 with a traceback, or every update's loss was NaN (each skipped, "lower --lr").
    (["--kl-beta", "nan"], "--kl-beta must be >= 0 and finite, got nan"),
    (["--dpo-beta", "inf"], "--dpo-beta must be >= 0 and finite, got inf"),
    (["--alpha", "nan"], "--alpha must be a finite number, got nan"),
    (["--algo", "matpo", "--fmt-weight", "nan"], "--acc-weight and --fmt-weight must be finite numbers, got 0.9 and nan"),
    (["--algo", "mhgpo", "--sampling", "rr", "--fork-probs=nan,0.5"], "--fork-probs must be non-negative and sum to 1"),
    (["--algo", "sharp", "--env", "deep_search", "--gamma", "nan"], "SHARP's weights must be finite numbers, got --alpha 0.9, "
     "--beta 0.9, --gamma nan, --planner-scale 1.0"),
])
def test_train_values_out_of_range(capsys, no_model_loads, flags, needle):
    """Each of these once ran (a zero --grad-clip trains nothing; an infinite temperature samples uniformly) or ended
    in a traceback from torch or numpy."""
    one_line_error(capsys, ["train", "--env", "plan_path", "--model", "tiny-random", *flags], needle)


@pytest.mark.parametrize("flags, needle", [
    (["--temperature", "nan"], "--temperature must be >= 0 and finite (0: greedy), got nan"),
    (["--temperature", "-1"], "--temperature must be >= 0 and finite"),
    (["--max-new-tokens", "0"], "--max-new-tokens must be >= 1"),
    (["--n", "0"], "--n must be >= 1, got 0"),  # was 'n must be', not the flag
])
def test_eval_values_out_of_range(capsys, no_model_loads, flags, needle):
    one_line_error(capsys, ["eval", "--env", "plan_path", "--model", "tiny-random", "--n", "1", *flags], needle)


@pytest.mark.parametrize("flags, needle", [
    # Each said "--epochs, --batch-size and --micro-batch-size must be >= 1, --lr > 0 and finite and --heldout-demos >= 0".
    (["--epochs", "0"], "--epochs must be >= 1, got 0"),
    (["--epochs", "-3"], "--epochs must be >= 1, got -3"),
    (["--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    (["--micro-batch-size", "0"], "--micro-batch-size must be >= 1, got 0"),
    (["--heldout-demos", "-1"], "--heldout-demos must be >= 0, got -1"),
    (["--lr", "nan"], "--lr must be > 0 and finite, got nan"),
])
def test_sft_values_out_of_range_name_the_flag_and_value(capsys, no_model_loads, tmp_path, flags, needle):
    one_line_error(capsys, ["sft", *PLANNER, "--model", "tiny-random", "--out-dir", str(tmp_path), *flags], needle)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", [["eval", "--model", "tiny-random"], ["play", "--agent", "oracle"]])
def test_a_negative_seed_is_refused_by_the_parser(capsys, command):
    with pytest.raises(SystemExit) as exit_:
        main([command[0], "--env", "plan_path", *command[1:], "--seed", "-1"])
    assert exit_.value.code == 2
    assert "argument --seed: must be a whole number >= 0, got '-1'" in capsys.readouterr().err


def test_eval_out_in_a_missing_folder_is_refused_before_the_model_loads(capsys, no_model_loads, tmp_path):
    one_line_error(capsys, ["eval", "--env", "plan_path", "--model", "tiny-random", "--out", str(tmp_path / "no" / "e.json")],
                   f"--out {tmp_path / 'no' / 'e.json'}: {tmp_path / 'no'} is not a folder; pass a file in a writable folder")
