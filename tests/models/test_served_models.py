"""The model layer's side of models served by the run: a served model's replica found through
:mod:`runner.core.served`, the fields ``transformers serve`` does not take left out, and a conversation over the
model's context answered with a stop reason. Against the scripted model server on loopback (it stands in for the
engines, which need a GPU, or a model load; tests/serving/test_replica.py talks to the real ``transformers serve``)."""

from __future__ import annotations

import asyncio
import pickle
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel
from structlog.testing import capture_logs

from runner.core import served
from runner.core.cache import cache_key
from runner.core.config import EMBEDDED_MODEL
from runner.core.served import SERVED_ENDPOINT, ServedEndpoint
from runner.models import ChatModel, ChatReply, ModelError, RetryPolicy, _context_check, _model_errors, _retry
from tests.support.http_proxy import ForwardProxy
from tests.support.model_server import ScriptedModelServer


@pytest.fixture
def table() -> Iterator[None]:
    """The served-model table, emptied after the test."""
    yield
    for name in served.published():
        served.withdraw(name)


def chat(model: ChatModel, text: str = "hello", **options: object) -> ChatReply:
    return model.chat_sync(text, **options)


def test_a_served_model_without_a_url_reaches_its_replica_under_the_replicas_name(
        model_server: ScriptedModelServer, table: None) -> None:
    model_server.models = ["qwen-0a1b2c3d"]
    model = ChatModel.from_name("vllm:Qwen/Qwen2.5-7B-Instruct")
    assert model.base_url == "http://localhost:8000/v1"  # today's meaning, until the run serves it
    served.publish(ServedEndpoint("vllm:Qwen/Qwen2.5-7B-Instruct", model_server.url, "qwen-0a1b2c3d"))
    reply = chat(model)
    assert reply.text and model_server.chat_requests[-1].model == "qwen-0a1b2c3d"
    assert model.name == "vllm:Qwen/Qwen2.5-7B-Instruct"  # usage, prices and limits keep the run's name
    assert model.endpoint.base_url == SERVED_ENDPOINT
    asyncio.run(model.check())  # /v1/models lists the replica's name
    served.withdraw("vllm:Qwen/Qwen2.5-7B-Instruct")
    assert model.base_url == "http://localhost:8000/v1"


def test_a_model_unpickled_in_a_worker_finds_the_workers_replica_and_follows_a_restart(
        model_server: ScriptedModelServer, table: None) -> None:
    judge = pickle.loads(pickle.dumps(ChatModel.from_name("transformers:smollm2-135m-instruct")))
    with ScriptedModelServer() as second:
        served.publish(ServedEndpoint("transformers:smollm2-135m-instruct", model_server.url, "/w/smollm2-1"))
        chat(judge)
        served.publish(ServedEndpoint("transformers:smollm2-135m-instruct", second.url, "/w/smollm2-2"))
        chat(judge)
        assert [request.model for request in second.chat_requests] == ["/w/smollm2-2"]
    assert [request.model for request in model_server.chat_requests] == ["/w/smollm2-1"]


class RestartingTable(dict):
    """The served table (``served._table``) holding ``first``, whose replica restarts as another, ``then``, right
    after the ``after``-th look anyone takes at it: a restart at any point of a call."""

    def __init__(self, first: ServedEndpoint, then: ServedEndpoint, after: int) -> None:
        super().__init__({first.model: first})
        self.then, self.after, self.looks = then, after, 0

    def get(self, key: str, default: object = None) -> object:
        found = super().get(key, default)
        self.looks += 1
        if self.looks == self.after:
            self[key] = self.then
        return found


@pytest.mark.parametrize("after", range(1, 9))
def test_a_restart_during_a_call_never_sends_one_replicas_name_to_the_other(
        model_server: ScriptedModelServer, table: None, monkeypatch: pytest.MonkeyPatch, after: int) -> None:
    """Issue 28: the model read the served table about five times per attempt (URL, name, limiter key...), so a
    replica restarted between two reads got the old replica's name (which it refuses). An attempt reads it once."""
    with ScriptedModelServer() as second:
        first = ServedEndpoint("vllm:m", model_server.url, "m-1")
        then = ServedEndpoint("vllm:m", second.url, "m-2")
        monkeypatch.setattr(served, "_table", RestartingTable(first, then, after))
        chat(ChatModel.from_name("vllm:m"))
        servers = {"first": model_server, "second": second}
        sent = [(label, request.model) for label, server in servers.items() for request in server.chat_requests]
    assert sent in ([("first", "m-1")], [("second", "m-2")])


def test_the_retry_of_a_failed_attempt_reaches_the_restarted_replica_under_its_name(
        model_server: ScriptedModelServer, table: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedModelServer() as second:
        served.publish(ServedEndpoint("vllm:m", model_server.url, "m-1"))
        model_server.fail(503)

        async def restart(seconds: float) -> None:  # the wait before the retry: the replica comes back elsewhere
            served.publish(ServedEndpoint("vllm:m", second.url, "m-2"))

        monkeypatch.setattr(_retry, "_sleep", restart)
        assert chat(ChatModel.from_name("vllm:m")).text
        assert [request.model for request in model_server.chat_requests] == ["m-1"]
        assert [request.model for request in second.chat_requests] == ["m-2"]


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch, model_server: ScriptedModelServer) -> Iterator[ForwardProxy]:
    """A cluster's egress proxy in this process's environment, in every spelling (``HTTP_PROXY``, ``https_proxy``,
    ``ALL_PROXY``...) and no ``NO_PROXY``; it forwards plain HTTP to the scripted server, as the way to a remote
    endpoint."""
    with ForwardProxy(upstream=model_server.url) as forward:
        for name, value in forward.environment().items():
            monkeypatch.setenv(name, value)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        yield forward


def test_a_served_replica_is_reached_directly_whatever_proxy_the_environment_names(
        model_server: ScriptedModelServer, proxy: ForwardProxy, table: None) -> None:
    """Issue 27: with HTTP_PROXY and no NO_PROXY, the run's own replica on loopback must not be asked through the
    proxy, which cannot reach it."""
    served.publish(ServedEndpoint("vllm:Qwen/Qwen2.5-7B-Instruct", model_server.url, "qwen-0a1b2c3d"))
    model_server.models = ["qwen-0a1b2c3d"]
    model = ChatModel.from_name("vllm:Qwen/Qwen2.5-7B-Instruct")
    assert chat(model).text
    asyncio.run(model.check())
    assert proxy.requests == []
    assert [request.path for request in model_server.requests] == ["/v1/chat/completions", "/v1/models"]


def test_a_remote_endpoint_still_goes_through_the_proxy(model_server: ScriptedModelServer, proxy: ForwardProxy,
                                                        table: None) -> None:
    """The neighbour: a URL the user gave is reached as the openai client and httpx do, through the proxy of the
    environment (the gateway's name is resolved by the proxy alone), loopback included."""
    remote = ChatModel.from_name("vllm:scripted", base_url="http://model-gateway.example:8000/v1")
    assert chat(remote).text
    local = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    assert chat(local).text
    assert proxy.requests[0].method == "POST"
    assert [request.target for request in proxy.requests] == [
        "http://model-gateway.example:8000/v1/chat/completions", f"{model_server.url}/chat/completions"]
    assert len(model_server.chat_requests) == 2


def test_a_model_given_a_url_ignores_the_table(model_server: ScriptedModelServer, table: None) -> None:
    served.publish(ServedEndpoint("vllm:scripted", "http://127.0.0.1:9/v1", "elsewhere"))
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    chat(model)
    assert model_server.chat_requests[-1].model == "scripted"


def test_replicas_of_one_model_share_its_cache_keys(model_server: ScriptedModelServer, table: None) -> None:
    model = ChatModel.from_name("vllm:m")
    keys = []
    for port, name in ((41000, "m-1"), (41001, "m-2")):
        served.publish(ServedEndpoint("vllm:m", f"http://127.0.0.1:{port}/v1", name))
        keys.append(cache_key(model.provider, model.endpoint.base_url, model.model, {"messages": []}))
    assert keys[0] == keys[1]


class Answer(BaseModel):
    answer: str


def test_transformers_serve_gets_only_the_fields_it_takes(model_server: ScriptedModelServer) -> None:
    model_server.set_policy(['{"answer": "Paris"}'])
    model = ChatModel.from_name("transformers:smollm2-135m-instruct", base_url=model_server.url)
    result = model.chat_structured_sync("Capital of France?", Answer, max_tokens=20,
                                        extra_body={"n": 2, "top_k": 5})
    assert result.answer == "Paris"
    body = model_server.requests[-1].body
    assert {"response_format", "n", "tool_choice", "max_completion_tokens"}.isdisjoint(body)
    assert body["max_tokens"] == 20 and body["top_k"] == 5
    assert "JSON" in body["messages"][0]["content"]  # the schema goes in the prompt instead


def _vllm(message: str) -> dict[str, object]:
    """vLLM's ErrorResponse (vllm/entrypoints/openai/protocol.py), as its OpenAI server sends it."""
    return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}


def _sglang(message: str) -> dict[str, object]:
    """SGLang's ErrorResponse (python/sglang/srt/entrypoints/openai/protocol.py), at the top level."""
    return {"object": "error", "message": message, "type": "BadRequest", "param": None, "code": 400}


RECORDED: list[tuple[str, int, object]] = [
    # (the engine of CONTEXT_REFUSALS, the status, the body that engine sends)
    ("vLLM, OpenAI", 400, _vllm("This model's maximum context length is 4096 tokens. However, you requested 5000 "
                                "tokens (4900 in the messages, 100 in the completion). Please reduce the length of "
                                "the messages or completion.")),
    ("vLLM, OpenAI", 400, _vllm("This model's maximum context length is 32768 tokens. However, your request has "
                                "40000 input tokens. Please reduce the length of the input messages.")),
    ("vLLM, OpenAI", 400, {"error": {"message": "This model's maximum context length is 4097 tokens. However, your "
                                                "messages resulted in 4294 tokens. Please reduce the length of the "
                                                "messages.", "type": "invalid_request_error", "param": "messages",
                                     "code": "context_length_exceeded"}}),
    ("vLLM (V1 engine)", 400, _vllm("The decoder prompt (length 9000) is longer than the maximum model length of "
                                    "8192. Make sure that `max_model_len` is no smaller than the number of text "
                                    "tokens.")),
    ("vLLM (V1 engine)", 400, _vllm("The decoder prompt (length 8192) plus the number of requested output tokens "
                                    "(at least 1) is longer than the maximum model length of 8192. Make sure that "
                                    "`max_model_len` is no smaller than the number of text tokens (prompt + "
                                    "requested output tokens).")),
    # Xinference serving vLLM: the engine's ValueError as FastAPI's HTTPException(500, detail=str(e))
    # (xinference/api/restful_api.py, create_chat_completion; xorbitsai/inference#3785).
    ("vLLM (V1 engine)", 500, {"detail": "[address=0.0.0.0:37421, pid=4242] The decoder prompt (length 9000) is "
                                         "longer than the maximum model length of 8192. Make sure that "
                                         "`max_model_len` is no smaller than the number of text tokens."}),
    ("vLLM (V0 engine)", 400, {"object": "error", "message": "The prompt (total length 9000) is too long to fit "
                               "into the model (context length 8192). Make sure that `max_model_len` is no smaller "
                               "than the number of text tokens plus multimodal tokens.", "type": "BadRequestError",
                               "param": None, "code": 400}),
    ("SGLang", 400, _sglang("The input (9000 tokens) is longer than the model's context length (8192 tokens).")),
    ("SGLang", 400, _sglang("Requested token count exceeds the model's maximum context length of 8192 tokens. You "
                            "requested a total of 9100 tokens: 9000 tokens from the input messages and 100 tokens "
                            "for the completion. Please reduce the number of tokens in the input messages or the "
                            "completion to fit within the limit.")),
    ("TGI", 422, {"error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8192. Given: 9000 "
                           "`inputs` tokens and 100 `max_new_tokens`", "error_type": "validation"}),
    ("TGI", 422, {"error": "Input validation error: `inputs` must have less than 8191 tokens. Given: 9000",
                  "error_type": "validation"}),
    ("llama.cpp server", 400, {"error": {"code": 400, "message": "request (9000 tokens) exceeds the available "
                                         "context size (8192 tokens), try increasing it",
                                         "type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 8192}}),
    ("llama.cpp server", 400, {"error": {"code": 400, "message": "input (9000 tokens) is larger than the max context "
                                         "size (8192 tokens). skipping", "type": "exceed_context_size_error"}}),
    # Ollama's /v1 error (openai/openai.go, NewError).
    ("Ollama", 400, {"error": {"message": "the prompt is longer than the context length currently available to the "
                                          "model; shorten the prompt, adjust the context length in settings, or use a "
                                          "model with a longer context length", "type": "invalid_request_error",
                               "param": None, "code": None}}),
    ("Ollama", 400, {"error": {"message": "the input length exceeds the context length",
                               "type": "invalid_request_error", "param": None, "code": None}}),
    ("OpenAI", 400, {"error": {"type": "invalid_request_error", "code": "context_length_exceeded",
                               "message": "Your input exceeds the context window of this model. Please adjust your "
                                          "input and try again.", "param": "input"}}),
    ("OpenRouter", 400, {"error": {"message": "This endpoint's maximum context length is 8192 tokens. However, you "
                                              "requested about 12000 tokens (10000 of text input, 2000 in the "
                                              "output). Please reduce the length of either one, or use the "
                                              "\"middle-out\" transform to compress your prompt automatically.",
                                   "code": 400}}),
    ("DashScope", 400, {"error": {"code": "InvalidParameter", "param": None, "message": "Range of input length "
                                  "should be [1, 30720]", "type": "InvalidParameter"},
                        "id": "0a6dd2aa-dfc9-496d-a290-7436a7112533",
                        "request_id": "0a6dd2aa-dfc9-496d-a290-7436a7112533"}),
    ("Anthropic (through a gateway)", 400, {"type": "error", "error": {
        "type": "invalid_request_error", "message": "prompt is too long: 208656 tokens > 200000 maximum"}}),
    ("Gemini (through a gateway)", 400, [{"error": {
        "code": 400, "message": "The input token count (1200293) exceeds the maximum number of tokens allowed "
                                "(1048576).", "status": "INVALID_ARGUMENT"}}]),
    # LiteLLM's proxy passing a provider's refusal on as a 500 (a gateway's error, whatever the upstream said).
    ("LiteLLM", 500, {"error": {"message": "litellm.ContextWindowExceededError: litellm.BadRequestError: "
                                           "OpenAIException - context window exceeded", "type": None, "param": None,
                                "code": "500"}}),
]


def _message(body: object) -> str:
    found = _model_errors.error_message(body)
    assert found is not None
    return found


def test_every_refusal_of_the_table_has_a_recorded_body_that_its_phrase_matches() -> None:
    for refusal in _model_errors.CONTEXT_REFUSALS:
        bodies = [body for engine, _, body in RECORDED if engine == refusal.engine]
        assert any(re.search(refusal.phrase, _message(body), re.IGNORECASE) for body in bodies), refusal
        assert refusal.source
    engines = {refusal.engine for refusal in _model_errors.CONTEXT_REFUSALS}
    assert {engine for engine, _, _ in RECORDED} == engines


@pytest.mark.parametrize(("engine", "status", "body"), RECORDED,
                         ids=[f"{engine}-{status}-{index}" for index, (engine, status, _) in enumerate(RECORDED)])
def test_a_conversation_over_the_context_is_an_empty_reply_with_that_stop_reason(
        model_server: ScriptedModelServer, engine: str, status: int, body: object) -> None:
    """Whatever the engine, the status (TGI's 422, Xinference's 500) and the body's shape: the item's answer, sent
    once."""
    model_server.answer(body, status=status, times=None)
    with capture_logs() as logs:
        reply = chat(ChatModel.from_name("vllm:scripted", base_url=model_server.url))
    assert reply.finish_reason == "context_length_exceeded" and reply.text == ""
    assert len(model_server.chat_requests) == 1  # not retried
    [refused] = [log for log in logs if log["event"] == "model.context_length_exceeded"]
    assert refused["detail"].startswith(f"vllm:scripted at {model_server.url}: HTTP {status}: ")
    assert _message(body)[:40] in refused["detail"]


def test_a_context_refusal_in_an_error_body_with_status_200_is_the_same_reply(model_server: ScriptedModelServer) -> None:
    model_server.answer({"error": {"message": "request (9000 tokens) exceeds the available context size (8192 "
                                              "tokens), try increasing it", "code": 400}}, times=None)
    reply = chat(ChatModel.from_name("vllm:scripted", base_url=model_server.url))
    assert reply.finish_reason == "context_length_exceeded" and len(model_server.chat_requests) == 1


@pytest.mark.parametrize(("status", "body", "sent"), [
    # A server error that names no context: retried, then an error (the neighbour of Xinference's 500).
    (500, {"detail": "[address=0.0.0.0:37421, pid=4242] CUDA error: an illegal memory access was encountered"}, 3),
    # vLLM's 400 about the context that is no refusal of the conversation: an error, sent once.
    (400, _vllm("truncate_prompt_tokens value is greater than max_model_len. Please, select a smaller truncation "
                "size."), 1),
    # A code of another kind on llama.cpp's server.
    (400, {"error": {"code": 400, "message": "invalid argument: n_probs", "type": "invalid_request_error"}}, 1),
])
def test_other_errors_stay_errors(model_server: ScriptedModelServer, status: int, body: object, sent: int) -> None:
    model_server.answer(body, status=status, times=None)
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url,
                                retry=RetryPolicy(max_attempts=3, initial_delay=0, jitter=0))
    with pytest.raises(ModelError) as failed:
        chat(model)
    assert failed.value.error_code != "context_length_exceeded" and f"HTTP {status}" in str(failed.value)
    assert len(model_server.chat_requests) == sent


def test_a_replica_that_does_not_check_the_context_gets_no_request_over_it(
        model_server: ScriptedModelServer, table: None, embedded_dir: Path) -> None:
    """``transformers serve`` hangs on a prompt over the context, so its replica is published with its tokenizer and
    the model layer counts the prompt with the model's own chat template before sending (vLLM's rule: prompt plus
    ``max_tokens`` over the context is refused)."""
    served.publish(ServedEndpoint(EMBEDDED_MODEL, model_server.url, str(embedded_dir), tokenizer=str(embedded_dir)))
    model = ChatModel.from_name(EMBEDDED_MODEL)
    assert _context_check.context_tokens(str(embedded_dir)) == 8192  # SmolLM2's max_position_embeddings
    text = "word " * 4000
    prompt = _context_check.prompt_tokens(str(embedded_dir), [{"role": "user", "content": text}])
    assert prompt is not None and 4000 < prompt < 4100
    with capture_logs() as logs:
        fits = chat(model, text, max_tokens=8192 - prompt)
        over = chat(model, text, max_tokens=8192 - prompt + 1)
        far_over = chat(model, "word " * 9000, max_tokens=16)
    assert fits.finish_reason != "context_length_exceeded"
    assert len(model_server.chat_requests) == 1  # only the request that fits was sent
    for reply in (over, far_over):
        assert reply.finish_reason == "context_length_exceeded" and reply.text == ""
    [first, _] = [log for log in logs if log["event"] == "model.context_length_exceeded"]
    assert f"maximum context length is 8192 tokens; the request has {prompt} in its prompt" in first["detail"]


def test_a_replica_that_checks_the_context_itself_is_sent_everything(
        model_server: ScriptedModelServer, table: None) -> None:
    served.publish(ServedEndpoint("vllm:m", model_server.url, "m-1"))
    chat(ChatModel.from_name("vllm:m"), "word " * 9000, max_tokens=16)
    assert len(model_server.chat_requests) == 1


@pytest.fixture
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The delays between retries are not slept."""
    from runner.models import _retry

    async def record(seconds: float) -> None:
        return None

    monkeypatch.setattr(_retry, "_sleep", record)


def test_a_timeout_against_the_runs_own_replica_is_retried_once_and_counted(
        model_server: ScriptedModelServer, table: None, no_waits: None) -> None:
    """Issue 27: "did not finish answering within 300 s (each of 5 attempts)" after 15 minutes, while the replica
    ran every abandoned generation. Against a replica the run serves, a timeout is retried once whatever the policy
    says, each abandoned request is closed (the server sees it go), and the item's usage counts both."""
    from runner.core.usage import usage_scope
    from runner.models import ModelError, RetryPolicy

    served.publish(ServedEndpoint("vllm:m", model_server.url, "m-1"))
    model_server.stall(30, times=2)
    model = ChatModel.from_name("vllm:m", timeout=0.5, retry=RetryPolicy(max_attempts=5))
    with usage_scope() as usage, capture_logs() as logs, pytest.raises(ModelError) as failed:
        chat(model)
    assert len(model_server.chat_requests) == 2
    assert [(log["attempt"], log["attempts"]) for log in logs if log["event"] == "model.retry"] == [(1, 2)]
    assert model_server.wait_for_disconnects(2)
    assert usage["vllm:m"].timeouts == 2
    assert str(failed.value) == (
        f"vllm:m: the server at {model_server.url} did not finish answering within 0.5 s (each of 2 attempts), the "
        "model timeout of one request; its replica, served by this run, is overloaded or its answers are long (each "
        "request was cancelled there); lower --concurrency, set max_tokens (-S max_tokens=N), or raise the model "
        "timeout")
    model_server.stall(30, times=1)  # a timeout then an answer: the retry answers, the timeout still counted
    with usage_scope() as usage:
        assert chat(model).text
    assert usage["vllm:m"].timeouts == 1 and usage["vllm:m"].calls == 1


@pytest.mark.parametrize("policy", [["The capital of France is Paris, a city of two million people."],
                                    [{"tool_calls": [{"name": "lookup", "arguments": {"title": "Paris", "n": 2}},
                                                     {"name": "lookup", "arguments": {"title": "Lyon"}}]}]])
def test_a_replica_that_cancels_only_streams_is_sent_streamed_calls_with_the_same_replies(
        model_server: ScriptedModelServer, table: None, policy: list) -> None:
    """``transformers serve`` stops generating for a client that went away only when its answer is streamed: its
    replica's calls stream, and the reply (text, tool calls, usage, finish reason) is the one a plain answer gives."""
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    served.publish(ServedEndpoint(EMBEDDED_MODEL, model_server.url, "/w/smollm2-1", stream=True))
    model_server.set_policy(policy)
    streamed = chat(ChatModel.from_name(EMBEDDED_MODEL), "Capital of France?", tools=tools)
    assert model_server.requests[-1].body["stream"] is True
    assert model_server.requests[-1].body["stream_options"] == {"include_usage": True}  # 5.25 sends usage only then
    with ScriptedModelServer(policy) as plain:
        direct = chat(ChatModel.from_name("vllm:scripted", base_url=plain.url), "Capital of France?", tools=tools)
        assert "stream" not in plain.requests[-1].body
    assert (streamed.text, streamed.finish_reason, streamed.usage) == (direct.text, direct.finish_reason, direct.usage)
    assert [(c.id, c.name, c.arguments) for c in streamed.tool_calls] == [
        (c.id, c.name, c.arguments) for c in direct.tool_calls]
    assert streamed.usage.output_tokens > 0 and (streamed.text or len(streamed.tool_calls) == 2)


def test_a_streamed_call_abandoned_mid_answer_closes_its_stream(
        model_server: ScriptedModelServer, table: None) -> None:
    """The abandoned stream is what makes ``transformers serve`` cancel: the server sees the client leave while it
    is still sending the events."""
    from runner.models import ModelError, RetryPolicy

    served.publish(ServedEndpoint(EMBEDDED_MODEL, model_server.url, "/w/smollm2-1", stream=True))
    model_server.drip(0.05)
    model = ChatModel.from_name(EMBEDDED_MODEL, timeout=1, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ModelError, match="did not finish answering within 1 s"):
        chat(model)
    assert model_server.wait_for_disconnects(1)


def test_an_event_stream_that_is_not_the_apis_is_a_protocol_error(
        model_server: ScriptedModelServer, table: None) -> None:
    from runner.models import ModelProtocolError

    served.publish(ServedEndpoint(EMBEDDED_MODEL, model_server.url, "/w/smollm2-1", stream=True))
    model_server.answer(b"data: <html>busy</html>\n\n", content_type="text/event-stream")
    with pytest.raises(ModelProtocolError, match="a stream event that is not JSON"):
        chat(ChatModel.from_name(EMBEDDED_MODEL))
    model_server.answer(b'data: {"error": "CB generation failed"}\n\n', content_type="text/event-stream")
    with pytest.raises(Exception, match="CB generation failed"):
        chat(ChatModel.from_name(EMBEDDED_MODEL))


def test_a_served_model_gets_its_engines_output_limit_unless_the_call_sets_one(
        model_server: ScriptedModelServer, table: None) -> None:
    served.publish(ServedEndpoint("vllm:m", model_server.url, "m-1", max_tokens=4096))
    model = ChatModel.from_name("vllm:m")
    chat(model)
    chat(model, max_tokens=16)
    chat(ChatModel.from_name("vllm:m", max_tokens=32))
    assert [request.max_tokens for request in model_server.chat_requests] == [4096, 16, 32]
    chat(ChatModel.from_name("vllm:scripted", base_url=model_server.url))  # not served: the server's own default
    assert model_server.chat_requests[-1].max_tokens is None


def test_an_output_limit_that_does_not_fit_beside_the_prompt_gives_way_to_the_room_left(
        model_server: ScriptedModelServer, table: None) -> None:
    """SGLang and vLLM refuse a prompt plus ``max_tokens`` over the context; without the limit chosen by the runner
    they give the answer the room left, which is less than that limit: the call is sent again without it."""
    served.publish(ServedEndpoint("sglang:m", model_server.url, "m-1", max_tokens=4096))
    model_server.fail(400, message="Requested token count exceeds the model's maximum context length of 8192 tokens. "
                                   "You requested a total of 10000 tokens: 5904 tokens from the input messages and "
                                   "4096 tokens for the completion.")
    reply = chat(ChatModel.from_name("sglang:m"), "word " * 5000)
    assert reply.text and reply.finish_reason == "stop"
    assert [request.max_tokens for request in model_server.chat_requests] == [4096, None]
    model_server.fail(400, message="Requested token count exceeds the model's maximum context length of 8192 tokens.")
    assert chat(ChatModel.from_name("sglang:m"), "again", max_tokens=4096).finish_reason == "context_length_exceeded"
    assert len(model_server.chat_requests) == 3  # the caller's own limit is not dropped


def test_a_replica_whose_context_is_counted_gets_the_limit_or_the_room_the_prompt_leaves(
        model_server: ScriptedModelServer, table: None, embedded_dir: Path) -> None:
    served.publish(ServedEndpoint(EMBEDDED_MODEL, model_server.url, str(embedded_dir), tokenizer=str(embedded_dir),
                                  max_tokens=1024))
    model = ChatModel.from_name(EMBEDDED_MODEL)
    text = "word " * 7500
    prompt = _context_check.prompt_tokens(str(embedded_dir), [{"role": "user", "content": text}])
    chat(model, "Capital of France?")
    chat(model, text)
    assert [request.max_tokens for request in model_server.chat_requests] == [1024, 8192 - prompt]
