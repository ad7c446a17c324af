"""Engines: registry, scripted, hf (the on-policy guarantee), and the OpenAI-compatible api engine."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch

from llm_marl.engines import ENGINES, Engine, GenerationRequest, SamplingParams, make_engine
from llm_marl.engines.api import APIEngine, APIError
from llm_marl.engines.hf import HFEngine, filter_logits
from llm_marl.engines.scripted import ScriptedEngine
from llm_marl.policies import LoRAConfig, PolicySet
from tests.support.drip import dripping_server


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny models run fastest on one thread; on a busy 2-core machine two threads spin-wait (~14x slower matmuls)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You are the planner."}, {"role": "user", "content": text}]


@pytest.fixture(scope="module")
def policy() -> PolicySet:
    ps = PolicySet.from_pretrained("tiny-random", roles=["tool", "planner"], policy="per-role", lora=LoRAConfig(r=4, alpha=8))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # distinct adapters (B starts at zero, i.e. equal to the base)
        for name, p in ps.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return ps


REQUESTS = [
    GenerationRequest(chat("Move to the goal."), adapter="tool", n=2, tag="a"),
    GenerationRequest(chat("Grid:\n#..@\n.$.G\nYour move?"), adapter="planner", n=3, tag="b"),
    GenerationRequest(chat("Base model, please."), adapter=None, n=1, tag="c"),
    GenerationRequest(chat("Another tool prompt that is a good deal longer than the others."), adapter="tool", n=1, tag="d"),
]


# ---------------------------------------------------------------------------------------- registry
def test_registry_builds_engines_and_rejects_unknown_names():
    assert set(ENGINES) == {"hf", "vllm", "api", "scripted"}
    engine = make_engine("scripted", lambda request, k: "hi")
    assert isinstance(engine, Engine)
    with pytest.raises(ValueError, match="unknown engine 'sglang'.*hf, vllm, api, scripted"):
        make_engine("sglang")


# ---------------------------------------------------------------------------------------- scripted
def test_scripted_engine_replies_and_records_calls():
    engine = ScriptedEngine(lambda request, k: f"{request.tag}{k}" if request.tag != "empty" else "")
    requests = [GenerationRequest(chat("x"), n=2, tag="q"), GenerationRequest(chat("y"), tag="empty")]
    out = engine.generate(requests, SamplingParams())
    assert [c.text for c in out[0].completions] == ["q0", "q1"]
    assert out[0].completions[0].token_ids == [ord("q"), ord("0")]
    assert out[0].completions[0].logprobs == [0.0, 0.0]
    assert out[1].completions[0].token_ids == [0]  # an empty reply still ends with one (EOS) token
    assert out[0].request is requests[0] and engine.calls == [requests]


def test_scripted_engine_with_a_tokenizer(policy):
    tok = policy.tokenizer
    engine = ScriptedEngine(lambda request, k: "#### U", tokenizer=tok)
    out = engine.generate([GenerationRequest(chat("x"))], SamplingParams())[0]
    assert tok.decode(out.completions[0].token_ids) == "#### U"
    assert tok.decode(out.prompt_ids).endswith("<|im_start|>assistant\n")
    assert len(out.completions[0].logprobs) == len(out.completions[0].token_ids)


# -------------------------------------------------------------------------------------------- hf
def _assert_on_policy(policy: PolicySet, results, temperature: float) -> None:
    """The engine's log-probs are the policy's own: recomputed by a forward pass they agree."""
    for result in results:
        for c in result.completions:
            assert len(c.token_ids) == len(c.logprobs) >= 1
            lp = policy.response_logprobs([result.prompt_ids], [c.token_ids], result.request.adapter, temperature)[0]
            torch.testing.assert_close(lp, torch.tensor(c.logprobs), atol=1e-4, rtol=0)


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_hf_logprobs_equal_recomputed_policy_logprobs(policy, temperature):
    engine = HFEngine(policy, max_batch_size=3)
    results = engine.generate(REQUESTS, SamplingParams(temperature=temperature, max_new_tokens=16, seed=1))
    assert [r.request.tag for r in results] == ["a", "b", "c", "d"]
    assert [len(r.completions) for r in results] == [2, 3, 1, 1]
    _assert_on_policy(policy, results, temperature)
    for r in results:  # the prompt is the chat template with the assistant header, tokens exactly
        text = policy.tokenizer.apply_chat_template(r.request.messages, add_generation_prompt=True, tokenize=False)
        assert r.prompt_ids == policy.tokenizer(text, add_special_tokens=False)["input_ids"]
        assert text.endswith("<|im_start|>assistant\n")


def test_hf_sampling_is_reproducible_and_samples_differ(policy):
    engine = HFEngine(policy)
    params = SamplingParams(temperature=1.0, max_new_tokens=12, seed=7)
    first = engine.generate(REQUESTS, params)
    again = engine.generate(REQUESTS, params)
    other = engine.generate(REQUESTS, SamplingParams(temperature=1.0, max_new_tokens=12, seed=8))
    ids = lambda results: [c.token_ids for r in results for c in r.completions]  # noqa: E731
    assert ids(first) == ids(again) and ids(first) != ids(other)
    assert len({tuple(c.token_ids) for c in first[1].completions}) == 3  # n samples of one prompt differ


def test_hf_greedy_is_deterministic_and_batch_size_independent(policy):
    params = SamplingParams(temperature=0.0, max_new_tokens=12)
    one = HFEngine(policy, max_batch_size=1).generate(REQUESTS, params)
    many = HFEngine(policy, max_batch_size=16).generate(REQUESTS, params)
    assert [c.token_ids for r in one for c in r.completions] == [c.token_ids for r in many for c in r.completions]
    assert one[0].completions[0].token_ids == one[0].completions[1].token_ids


def test_hf_stops_at_eos_and_hides_special_tokens(policy):
    """Bias the LM head towards EOS (in generation and in the recomputation alike)."""
    tok = policy.tokenizer
    head = policy.model.get_base_model().get_output_embeddings()
    bias = torch.zeros(len(tok))
    bias[tok.eos_token_id] = 8.0
    handle = head.register_forward_hook(lambda module, args, out: out + bias)
    try:
        results = HFEngine(policy).generate(REQUESTS, SamplingParams(temperature=1.0, max_new_tokens=64, seed=0))
        stopped = [c for r in results for c in r.completions if c.finish_reason == "stop"]
        assert len(stopped) >= 5
        for c in stopped:
            assert c.token_ids[-1] == tok.eos_token_id and tok.eos_token_id not in c.token_ids[:-1]
            assert "<|im_end|>" not in c.text and c.text == tok.decode(c.token_ids[:-1], skip_special_tokens=True)
        _assert_on_policy(policy, results, 1.0)
    finally:
        handle.remove()
    lengths = [c for r in results for c in r.completions if c.finish_reason == "length"]
    assert all(len(c.token_ids) == 64 for c in lengths)


def test_hf_restores_train_mode_and_records_no_grad(policy):
    policy.model.train()
    try:
        HFEngine(policy).generate(REQUESTS[:1], SamplingParams(temperature=1.0, max_new_tokens=4, seed=0))
        assert policy.model.training
        assert all(p.grad is None for p in policy.trainable_parameters("tool"))
    finally:
        policy.model.eval()


def test_top_k_one_is_greedy(policy):
    engine = make_engine("hf", policy)
    greedy = engine.generate(REQUESTS[:2], SamplingParams(temperature=0.0, max_new_tokens=8))
    top1 = engine.generate(REQUESTS[:2], SamplingParams(temperature=1.0, top_k=1, max_new_tokens=8, seed=3))
    assert [c.token_ids for r in greedy for c in r.completions] == [c.token_ids for r in top1 for c in r.completions]
    assert all(lp == pytest.approx(0.0, abs=1e-6) for r in top1 for c in r.completions for lp in c.logprobs)


def test_filter_logits_top_p_keeps_the_smallest_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = torch.isfinite(filter_logits(logits, top_k=-1, top_p=0.7))
    assert kept.tolist() == [[True, True, False, False]]
    kept = torch.isfinite(filter_logits(logits, top_k=3, top_p=1.0))
    assert kept.tolist() == [[True, True, True, False]]


# ------------------------------------------------------------------------------------------- api
class _ChatServer(BaseHTTPRequestHandler):
    """A fake OpenAI-compatible server that returns ONE choice per call, whatever `n` asks."""

    bodies: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append({**body, "auth": self.headers.get("Authorization")})
        if body["model"] == "slow":
            time.sleep(2)
        if body["model"] == "broken":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"model exploded")
            return
        if body["model"] == "strict" and "chat_template_kwargs" in body:  # as OpenAI's own API
            data = json.dumps({"error": {"message": "Unrecognized request argument supplied: chat_template_kwargs",
                                         "type": "invalid_request_error"}}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(data)
            return
        if body["model"] == "reasoning-o":  # as OpenAI's o-series and gpt-5
            if "max_tokens" in body:
                data = json.dumps({"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this "
                                             "model. Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                                             "param": "max_tokens", "code": "unsupported_parameter"}}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(data)
                return
            body["max_tokens"] = body["max_completion_tokens"]
        if body["model"] in _NOT_COMPLETIONS:
            ctype, data = _NOT_COMPLETIONS[body["model"]]
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.end_headers()
            self.wfile.write(data.encode())
            return
        refusal = _context_refusal(body)
        if refusal:
            data = json.dumps({"object": "error", "message": refusal, "type": "BadRequestError", "code": 400}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(data)
            return
        last = body["messages"][-1]["content"]
        message = {"role": "assistant", "content": f"echo {last} #{len(type(self).bodies)}"}
        if body["model"] == "thinker" and body.get("chat_template_kwargs", {}).get("enable_thinking") is not False:
            message["content"] = "<think>\nThe user said " + last + ".\n</think>\n\n" + message["content"]  # Qwen3's default
        if body["model"] == "parts":  # content parts, as Mistral's reasoning models answer
            message["content"] = [{"type": "thinking", "thinking": [{"type": "text", "text": "Hm."}]},
                                  {"type": "text", "text": message["content"]}]
        if body["model"] == "numeric":  # no text at all
            message["content"] = 5
        if body["model"] == "parsed":  # a server with a reasoning parser returns the reasoning apart
            message["reasoning_content"] = "The user said " + last + "."
        choice = {"index": 0, "message": message, "finish_reason": "length" if body["max_tokens"] < 5 else "stop"}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": "echo", "logprob": -0.5}, {"token": " x", "logprob": -1.25}]}
        data = json.dumps({"choices": [choice]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


_NOT_COMPLETIONS = {  # model: (content type, body) of a 200 answer that is no chat completion
    "html": ("text/html", "<html><body><h1>Sign in</h1></body></html>"),  # a proxy's login page
    "notjson": ("application/json", "upstream timed out"),
    "textchoices": ("application/json", json.dumps({"choices": ["hello"]})),
    "errorobject": ("application/json", json.dumps({"error": {"message": "upstream model overloaded"}})),  # as some gateways
}


def _context_refusal(body: dict) -> str | None:
    """Model "small" has a 24-token window, a prompt's tokens being its words, and refuses in vLLM's words what
    does not fit; model "terse" refuses every request without saying how long the window is (as llama.cpp)."""
    if body["model"] == "terse":
        return "the request exceeds the available context size, try increasing it"
    if body["model"] != "small":
        return None
    prompt, max_tokens = sum(len(m["content"].split()) for m in body["messages"]), body["max_tokens"]
    if prompt >= 24:
        return (f"This model's maximum context length is 24 tokens. However, your request has {prompt} input tokens. "
                "Please reduce the length of the input messages.")
    if prompt + max_tokens > 24:
        return (f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum context "
                f"length is 24 tokens and your request has {prompt} input tokens ({max_tokens} > 24 - {prompt}).")
    return None


@pytest.fixture
def server():
    _ChatServer.bodies = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _ChatServer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_api_engine_against_a_local_server(server):
    engine = make_engine("api", base_url=server, model="m", api_key="k", request_logprobs=True, max_concurrency=1)
    requests = [GenerationRequest(chat("hello"), n=3, tag=1), GenerationRequest(chat("bye"), tag=2)]
    results = engine.generate(requests, SamplingParams(temperature=0.5, max_new_tokens=32, seed=4))
    assert [len(r.completions) for r in results] == [3, 1]
    assert [c.text for c in results[0].completions] == ["echo hello #1", "echo hello #2", "echo hello #3"]
    c = results[1].completions[0]
    assert c.token_ids == [] and c.logprobs == [-0.5, -1.25] and c.finish_reason == "stop"
    first = _ChatServer.bodies[0]
    assert first["model"] == "m" and first["n"] == 3 and first["temperature"] == 0.5 and first["max_tokens"] == 32
    assert first["messages"] == requests[0].messages and first["auth"] == "Bearer k" and "top_k" not in first
    assert [b["n"] for b in _ChatServer.bodies[:3]] == [3, 2, 1]  # asked again for the missing samples
    short = engine.generate(requests[1:], SamplingParams(max_new_tokens=2))[0].completions[0]
    assert short.finish_reason == "length"


@pytest.mark.parametrize("model", ["thinker", "parsed"])
def test_api_engine_keeps_a_thinking_models_reasoning_apart(server, model):
    """The reply the environment reads is what follows the reasoning, whether the server leaves it in the content
    (Qwen3 behind a server without a reasoning parser) or returns it apart."""
    completion = APIEngine(server, model).generate([GenerationRequest(chat("hello"))], SamplingParams())[0].completions[0]
    assert completion.text == "echo hello #1" and completion.reasoning == "The user said hello."


@pytest.mark.parametrize("model, text", [("parts", "echo hello #1"), ("numeric", "")])
def test_api_engine_content_that_is_no_string(server, model, text):
    """Content parts are the reply their text parts make; other content is a malformed reply for the environment
    to penalise (both were once an AttributeError traceback)."""
    completion = APIEngine(server, model).generate([GenerationRequest(chat("hello"))], SamplingParams())[0].completions[0]
    assert (completion.text, completion.finish_reason) == (text, "stop")


@pytest.mark.parametrize("thinking, sent", [(None, None), (False, {"enable_thinking": False}), (True, {"enable_thinking": True})])
def test_api_engine_asks_the_server_for_thinking_only_when_told(server, thinking, sent):
    """`chat_template_kwargs` is an extension (vLLM, SGLang, llama.cpp): sent only when the user chose, so that
    servers without it are not sent an argument they refuse."""
    engine = APIEngine(server, "thinker", thinking=thinking)
    completion = engine.generate([GenerationRequest(chat("hello"))], SamplingParams(top_k=5))[0].completions[0]
    assert _ChatServer.bodies[0].get("chat_template_kwargs") == sent and _ChatServer.bodies[0]["top_k"] == 5
    assert completion.text == "echo hello #1" and bool(completion.reasoning) == (thinking is not False)


def test_api_engine_asks_for_thinking_role_by_role(server):
    engine = APIEngine(server, "thinker", thinking=("reasoner",))
    engine.generate([GenerationRequest(chat("a"), role="reasoner"), GenerationRequest(chat("b"), role="tool")],
                    SamplingParams())
    sent = {body["messages"][-1]["content"]: body.get("chat_template_kwargs") for body in _ChatServer.bodies}
    assert sent == {"a": {"enable_thinking": True}, "b": {"enable_thinking": False}}


def test_api_engine_a_model_that_takes_only_max_completion_tokens(server):
    """OpenAI's reasoning models refuse `max_tokens` (once an APIError naming a field no flag could change): the reply's
    length is sent as `max_completion_tokens` from then on, and to other servers as before."""
    engine = APIEngine(server, "reasoning-o", max_concurrency=1)
    for _ in range(2):
        reply = engine.generate([GenerationRequest(chat("x"))], SamplingParams(max_new_tokens=3))[0].completions[0]
        assert reply.finish_reason == "length"
    sent = [("max_tokens" in b, b.get("max_completion_tokens")) for b in _ChatServer.bodies]
    assert sent == [(True, None), (False, 3), (False, 3)]
    APIEngine(server, "m").generate([GenerationRequest(chat("x"))], SamplingParams(max_new_tokens=3))
    assert _ChatServer.bodies[-1]["max_tokens"] == 3 and "max_completion_tokens" not in _ChatServer.bodies[-1]


def test_api_engine_a_server_without_the_thinking_switch_names_the_fix(server):
    with pytest.raises(APIError, match="HTTP 400: .*chat_template_kwargs.*drop --thinking/--no-thinking"):
        APIEngine(server, "strict", thinking=False).generate([GenerationRequest(chat("x"))], SamplingParams())
    assert APIEngine(server, "strict").generate([GenerationRequest(chat("x"))], SamplingParams())[0].completions[0].text


def test_api_engine_errors_name_the_problem(server):
    with pytest.raises(ValueError, match="no LoRA adapters"):
        APIEngine(server, "m").generate([GenerationRequest(chat("x"), adapter="tool")], SamplingParams())
    with pytest.raises(APIError, match="HTTP 500: model exploded"):
        APIEngine(server, "broken").generate([GenerationRequest(chat("x"))], SamplingParams())
    with pytest.raises(APIError, match="cannot reach .* start the server or fix --base-url"):
        APIEngine("http://127.0.0.1:9/v1", "m", timeout_s=2).generate([GenerationRequest(chat("x"))], SamplingParams())


@pytest.mark.parametrize("model, message", [
    ("html", "did not answer an OpenAI chat completion: <html><body><h1>Sign in</h1></body></html>; --base-url must"),
    ("notjson", "did not answer an OpenAI chat completion: upstream timed out; --base-url must"),
    ("textchoices", 'did not answer an OpenAI chat completion: {"choices": ["hello"]}'),
    ("errorobject", 'returned no choices ({"error": {"message": "upstream model overloaded"}}); check that --model'),
])
def test_api_engine_an_answer_that_is_no_chat_completion(server, model, message):
    """An HTML page, a body that is no JSON, or JSON of another shape, answered with status 200: one APIError that shows
    what came (once an AttributeError or TypeError traceback, or a bare JSONDecodeError)."""
    with pytest.raises(APIError, match=re.escape(message)):
        APIEngine(server, model, max_retries=0).generate([GenerationRequest(chat("x"))], SamplingParams())


def test_api_engine_an_interrupt_or_an_error_ends_the_wait_at_once(server):
    """A Ctrl-C (or SIGTERM, raised as a KeyboardInterrupt) once waited for the request in flight and for the one
    started behind it, each up to --api-timeout times the tries, as did another request's error; now the wait ends
    at once and no request is started after it."""
    import _thread

    engine = APIEngine(server, "slow", max_concurrency=1)
    threading.Timer(0.3, _thread.interrupt_main).start()  # as a signal: handled by the main thread
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        engine.generate([GenerationRequest(chat("a")), GenerationRequest(chat("b"))], SamplingParams())
    assert time.monotonic() - started < 1.5 and len(_ChatServer.bodies) == 1
    _ChatServer.bodies = []
    with pytest.raises(APIError, match="HTTP 500"):
        APIEngine(server, "broken", max_concurrency=1, max_retries=0).generate([GenerationRequest(chat(w)) for w in "abc"],
                                                                               SamplingParams())
    assert len(_ChatServer.bodies) == 1


def test_api_engine_a_server_that_answers_a_byte_at_a_time_meets_the_deadline():
    """--api-timeout bounds each wait for a part of an answer: a server sending a byte every 0.1 s once held a
    request for ever with a 0.5 s timeout. --api-deadline bounds the request's whole time."""
    with dripping_server() as url:
        engine = APIEngine(url, "m", timeout_s=0.5, max_retries=0, deadline_s=0.8)
        started = time.monotonic()
        with pytest.raises(APIError, match=r"did not finish answering within 0.8 s, a request's whole time \(--api-deadline\)"):
            engine.generate([GenerationRequest(chat("x"))], SamplingParams())
        assert time.monotonic() - started < 1.5
    with pytest.raises(ValueError, match="--api-deadline must be a number of seconds > 0"):
        APIEngine("http://127.0.0.1:9/v1", "m", deadline_s=0)


def test_api_engine_a_request_the_context_window_cannot_hold(server):
    """As with the other engines, not an error: a prompt that fits is asked again with the room left in the window,
    one that does not fit gets empty replies that say so; other refusals stay errors."""
    engine = APIEngine(server, "small", max_concurrency=1)
    fits, long = GenerationRequest(chat("two words"), n=2), GenerationRequest(chat("word " * 30), n=2)
    results = engine.generate([fits, long], SamplingParams(max_new_tokens=64))
    room = 24 - sum(len(m["content"].split()) for m in fits.messages)
    assert [b["max_tokens"] for b in _ChatServer.bodies if b["messages"] == fits.messages] == [64, room, room]
    assert [c.text for c in results[0].completions] == ["echo two words #2", "echo two words #3"]
    assert [(c.text, c.finish_reason) for c in results[1].completions] == [("", "context")] * 2
    silent = APIEngine(server, "terse").generate([fits], SamplingParams())[0].completions
    assert [(c.text, c.finish_reason) for c in silent] == [("", "context")] * 2
    with pytest.raises(APIError, match="HTTP 500"):
        APIEngine(server, "broken").generate([long], SamplingParams())


@pytest.mark.parametrize("message, room", [
    # vLLM 0.32 (prompt too long, in tokens and in characters), earlier vLLM, OpenAI, SGLang
    ("This model's maximum context length is 64 tokens. However, your prompt contains at least 65 input tokens, which "
     "exceeds this limit even without any output tokens.", 0),
    ("This model's maximum context length is 64 tokens. However, your prompt contains 1195 characters (more than 832 "
     "characters, which is the upper bound for 64 input tokens).", 0),
    ("'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens "
     "and your request has 2778 input tokens (8000 > 4096 - 2778).", 1318),
    ("This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (8000 in the messages, "
     "1000 in the completion).", 192),
    ("This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.", 0),
    ("Requested token count exceeds the model's maximum context length of 4096 tokens. You requested a total of 5000 "
     "tokens: 4000 tokens from the input messages and 1000 tokens for the completion.", 96),
    ("The input (5000 tokens) is longer than the model's context length (4096 tokens).", 0),
    ("the request exceeds the available context size, try increasing it", 0),  # llama.cpp: no numbers
    ("max_tokens=100 cannot be greater than max_model_len=64. Please request fewer output tokens.", None),
    ("temperature must be non-negative", None),
])
def test_api_engine_reads_the_room_left_from_a_servers_refusal(message, room):
    from llm_marl.engines.api import _room_left

    assert _room_left(message) == room


def test_hf_a_prompt_longer_than_the_context_window_gets_no_reply(policy, monkeypatch):
    """Its row is left out of decoding (past the trained positions the model would write noise); the other rows
    of the batch sample as they would alone."""
    params = SamplingParams(temperature=0.0, max_new_tokens=6)
    short = GenerationRequest([{"role": "user", "content": "Move."}], adapter="tool", n=2)
    long = GenerationRequest([{"role": "user", "content": "word " * 60}], adapter="tool", n=2)
    alone = HFEngine(policy).generate([short], params)[0]
    monkeypatch.setattr(policy.model.config, "max_position_embeddings", 40)
    both = HFEngine(policy).generate([short, long], params)
    assert len(both[1].prompt_ids) >= 40 > len(both[0].prompt_ids)
    assert [(c.text, c.token_ids, c.logprobs, c.finish_reason) for c in both[1].completions] == [("", [], [], "context")] * 2
    assert [c.token_ids for c in both[0].completions] == [c.token_ids for c in alone.completions]


# (config, tokenizer's model_max_length, window): the windows vLLM 0.32 gives these configs (its ModelConfig's
# max_model_len), checked against vLLM itself in tests/test_vllm_engine.py.
_LINEAR = {"rope_type": "linear", "factor": 4.0}
CONTEXT_WINDOWS = [
    ({"max_position_embeddings": 4096}, 4096, 4096),
    ({"max_position_embeddings": 4096, "rope_scaling": _LINEAR}, 4096, 16384),  # the tokenizer's cap, then the factor
    ({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, None, 8192),
    ({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                        "original_max_position_embeddings": 1024}}, 4096, 4096),
    ({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 1024,
                                                        "rope_theta": 500000.0}}, None, 4096),
    ({"max_position_embeddings": 4096}, 1000, 1000),
    ({"n_positions": 512}, None, 512),  # GPT-2's key
    ({}, None, None),
]


@pytest.mark.parametrize("fields, tokenizer_max, window", CONTEXT_WINDOWS)
def test_hf_context_window_is_derived_as_vllm_derives_it(fields, tokenizer_max, window):
    """Until 2026-11 the hf engine read max_position_embeddings alone: a model with linear or dynamic RoPE scaling got
    a window `factor` times smaller than vLLM's, so the two engines cut different prompts."""
    from types import SimpleNamespace

    from transformers import PretrainedConfig

    from llm_marl.engines.hf import context_window

    config = PretrainedConfig(**fields)
    assert context_window(config, SimpleNamespace(model_max_length=tokenizer_max)) == window


def test_hf_context_window_with_a_rope_per_layer_type():
    from types import SimpleNamespace

    from llm_marl.engines.hf import context_window

    nested = {"full_attention": _LINEAR, "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    assert context_window(SimpleNamespace(max_position_embeddings=100, rope_parameters=nested)) == 400
    gemma3 = SimpleNamespace(model_type="gemma3_text", max_position_embeddings=100, rope_parameters=nested)
    assert context_window(gemma3) == 100  # its config gives the scaled length


def test_hf_a_prompt_past_the_positions_fits_a_window_widened_by_rope_scaling(policy, monkeypatch):
    params = SamplingParams(temperature=0.0, max_new_tokens=4)
    long = GenerationRequest([{"role": "user", "content": "word " * 60}], adapter="tool")
    monkeypatch.setattr(policy.model.config, "max_position_embeddings", 40)
    assert HFEngine(policy).generate([long], params)[0].completions[0].finish_reason == "context"
    monkeypatch.setattr(policy.model.config, "rope_parameters", _LINEAR)
    assert len(HFEngine(policy).generate([long], params)[0].completions[0].token_ids) == 4


def test_hf_a_reply_ends_where_the_context_window_is_full(policy, monkeypatch):
    """As vLLM ends it ("length"), instead of decoding past the positions the model was trained on."""
    params = SamplingParams(temperature=0.0, max_new_tokens=12)
    request = GenerationRequest([{"role": "user", "content": "Move."}], adapter="tool")
    free = HFEngine(policy).generate([request], params)[0]
    assert len(free.completions[0].token_ids) == 12  # tiny-random does not stop by itself here
    monkeypatch.setattr(policy.model.config, "max_position_embeddings", len(free.prompt_ids) + 5)
    capped = HFEngine(policy).generate([request], params)[0].completions[0]
    assert capped.token_ids == free.completions[0].token_ids[:5] and capped.finish_reason == "length"
    assert capped.logprobs == pytest.approx(free.completions[0].logprobs[:5])


# ---------------------------------------------------------------------------- vllm adapter sync (a stand-in for vLLM)
class FakeLLM:
    """Just what `VLLMEngine` calls of `vllm.LLM` outside `generate`: the LoRA ids it holds, the prefix-cache resets."""

    def __init__(self, tokenizer, **kwargs):
        self.tokenizer, self.resets, self.loras = tokenizer, 0, set()
        self.llm_engine = self

    def get_tokenizer(self):
        return self.tokenizer

    def remove_lora(self, lora_id):
        self.loras.discard(lora_id)

    def list_loras(self):
        return self.loras

    def reset_prefix_cache(self):
        self.resets += 1


def fake_vllm(monkeypatch, tokenizer):
    import sys
    import types

    class LoRARequest:
        def __init__(self, lora_name, lora_int_id, lora_path):
            self.lora_name, self.lora_int_id, self.lora_path = lora_name, lora_int_id, lora_path
            llm.loras.add(lora_int_id)  # vLLM registers an id on its first use; here at once

    llm = None

    def make_llm(**kwargs):
        nonlocal llm
        llm = FakeLLM(tokenizer, **kwargs)
        return llm

    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    vllm = types.ModuleType("vllm")
    vllm.LLM = make_llm
    for name, module in {"vllm": vllm, "vllm.lora": types.ModuleType("vllm.lora"), "vllm.lora.request": request}.items():
        monkeypatch.setitem(sys.modules, name, module)


def test_vllm_sync_registers_only_the_adapters_whose_weights_changed(policy, monkeypatch):
    """sync_adapters registered every adapter under a new id and reset the prefix cache on every call, also when no
    weights had changed (a step that took no optimiser step) and for a role whose adapter had not."""
    from llm_marl.engines.vllm import VLLMEngine

    fake_vllm(monkeypatch, policy.tokenizer)
    engine = VLLMEngine(policy_set=policy, grouped_lora=False)
    try:
        first = {name: r.lora_int_id for name, r in engine._lora_requests.items()}
        resets = engine.llm.resets
        engine.sync_adapters()  # nothing changed
        assert {name: r.lora_int_id for name, r in engine._lora_requests.items()} == first and engine.llm.resets == resets
        with torch.no_grad():
            for p in policy.trainable_parameters("planner"):
                p.add_(0.01)
        engine.sync_adapters()
        now = {name: r.lora_int_id for name, r in engine._lora_requests.items()}
        assert now["tool"] == first["tool"] and now["planner"] != first["planner"] and engine.llm.resets == resets + 1
        assert engine.loaded_lora_ids() == set(now.values())  # the planner's old id was removed
        for request in engine._lora_requests.values():  # the folders vLLM may read again are kept
            assert (Path(request.lora_path) / "adapter_model.safetensors").is_file()
        assert len(list(engine._adapter_root.iterdir())) == 2  # the others were removed
    finally:
        with torch.no_grad():
            for p in policy.trainable_parameters("planner"):
                p.sub_(0.01)
        engine.close()
