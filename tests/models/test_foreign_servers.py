"""Servers that are not the OpenAI API, and replies that cannot be read: one line naming the model, the URL and what
came back, as a :class:`ModelProtocolError` that is never retried.

The scripted server (``tests/support/model_server.py``) stands in for the web page, the proxy or the other API,
sending the exact bytes; the requests go through the real ``openai`` client.
"""

from __future__ import annotations

import asyncio
import gzip
import pickle
from typing import Any

import pytest

from runner.models import ChatModel, ChatReply, ModelError, ModelProtocolError, RetryPolicy
from tests.support.model_server import ScriptedModelServer, completion

PAGE = "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body>It works.</body></html>"

OLLAMA_NATIVE = {"model": "llama3.1", "created_at": "2025-01-01T00:00:00Z",
                 "message": {"role": "assistant", "content": "4"}, "done": True, "done_reason": "stop"}


def _model(server: ScriptedModelServer, base_url: str | None = None, attempts: int = 3) -> ChatModel:
    # Three attempts, no waiting: a retried error would show as more than one request.
    return ChatModel.from_name("vllm:scripted", base_url=base_url or server.url,
                               retry=RetryPolicy(max_attempts=attempts, initial_delay=0, jitter=0))


def _chat(model: ChatModel) -> ChatReply:
    async def call() -> ChatReply:
        async with model:
            return await model.chat("What is 2 + 2?")

    return asyncio.run(call())


def _check(model: ChatModel) -> None:
    async def call() -> None:
        async with model:
            await model.check()

    asyncio.run(call())


# (body, its Content-Type, extra answer() options, words the shape must hold, words the fix must hold)
BODIES = {
    "html-page": (PAGE, "text/html; charset=utf-8", {}, "text/html: an HTML page titled 'Welcome to nginx!'",
                  "check that --model-base-url is the root of an OpenAI-compatible API"),
    "html-without-content-type": (PAGE, None, {}, "no Content-Type: an HTML page titled", "OpenAI-compatible"),
    "text-plain": ("OK", "text/plain", {}, "text/plain: text that is not JSON, 'OK'", "OpenAI-compatible"),
    "empty-body": ("", "application/json", {}, "an empty body (application/json)", "OpenAI-compatible"),
    "truncated-json": ('{"id": "chatcmpl-1", "choices": [', "application/json", {},
                       "application/json: text that is not JSON, '{\"id\"", "OpenAI-compatible"),
    "gzip-without-content-encoding": (gzip.compress(b'{"choices": []}'), "application/json", {},
                                      "gzip-compressed bytes without 'Content-Encoding: gzip'", "without that proxy"),
    "binary": (b"\xff\xfe\x00\x01garbage", "application/octet-stream", {},
               "application/octet-stream: 11 bytes of binary data", "OpenAI-compatible"),
    "broken-gzip-stream": (b"not gzip at all", "application/json", {"headers": {"Content-Encoding": "gzip"}},
                           "a body that does not decode as its Content-Encoding says", "garbles the body"),
    "event-stream": ('data: {"choices": [{"delta": {"content": "4"}}]}\n\ndata: [DONE]\n\n', "text/event-stream",
                     {}, "text/event-stream: a stream of server-sent events", "turn streaming off"),
    "fastapi-not-found": ({"detail": "Not Found"}, "application/json", {},
                          "JSON without 'choices', a web framework's error: {\"detail\": \"Not Found\"}",
                          "the server has no such endpoint"),
    "ollama-native-chat": (OLLAMA_NATIVE, "application/json", {}, "an Ollama-native /api/chat reply",
                           "http://<host>:11434/v1"),
    "anthropic-messages": ({"id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                            "content": [{"type": "text", "text": "4"}]}, "application/json", {},
                           "an Anthropic Messages API reply", "OpenAI-compatible /v1 endpoint"),
    "gemini-native": ({"candidates": [{"content": {"parts": [{"text": "4"}]}}]}, "application/json", {},
                      "a Gemini generateContent reply", "v1beta/openai"),
    "no-choices": ({"id": "chatcmpl-1", "object": "chat.completion"}, "application/json", {},
                   "JSON without 'choices': {\"id\": \"chatcmpl-1\"", "OpenAI-compatible"),
    "choices-an-object": ({"choices": {"message": {"content": "4"}}}, "application/json", {},
                          "'choices' is an object", "OpenAI-compatible"),
    "text-completion": ({"choices": [{"index": 0, "text": "4", "finish_reason": "stop"}]}, "application/json", {},
                        "a text completion (choices[0] has 'text', no 'message')", "/completions API"),
    "json-list": ([{"generated_text": "4"}], "application/json", {}, "JSON a list, not an object",
                  "OpenAI-compatible"),
    "content-an-unknown-object": (completion({"role": "assistant", "content": {"answer": "4", "score": 1}}),
                                  "application/json", {}, "content is a dict with keys answer, score",
                                  "OpenAI-compatible"),
    "content-a-number": (completion({"role": "assistant", "content": 4}), "application/json", {},
                         "content is an int", "OpenAI-compatible"),
    "content-part-a-number": (completion({"role": "assistant", "content": ["The answer is ", 4]}),
                              "application/json", {}, "content part 1 is an int", "OpenAI-compatible"),
    "content-part-of-unknown-type-with-text": (
        completion({"role": "assistant", "content": [{"type": "answer_candidate", "text": "4"}]}),
        "application/json", {}, "content part 0 has type 'answer_candidate' and text (keys: type, text)",
        "neither the answer nor reasoning"),
    "tool-calls-a-string": (completion({"role": "assistant", "tool_calls": "lookup(title='Ed Wood')"}),
                            "application/json", {}, "tool_calls is a str", "OpenAI-compatible"),
    "tool-call-without-a-name": (
        completion({"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}),
        "application/json", {}, "tool call 0 has no function name (keys: id, function)", "OpenAI-compatible"),
    "message-a-string": ({"choices": [{"index": 0, "message": "4"}]}, "application/json", {},
                         "choices[0] has no message object (keys: index, message)", "OpenAI-compatible"),
}


@pytest.mark.parametrize("body, content_type, options, shape, fix", BODIES.values(), ids=BODIES.keys())
def test_an_unreadable_chat_answer_is_one_protocol_error_not_retried(
    model_server: ScriptedModelServer, body: Any, content_type: str | None, options: dict[str, Any], shape: str,
    fix: str,
) -> None:
    model_server.answer(body, content_type=content_type, **options)
    with pytest.raises(ModelProtocolError) as err:
        _chat(_model(model_server))
    message = str(err.value)
    assert message.startswith(f"vllm:scripted at {model_server.url}: POST /chat/completions answered ")
    assert shape in message and shape in err.value.shape
    assert fix in message and "\n" not in message
    assert err.value.url == f"{model_server.url}/chat/completions" and err.value.model == "vllm:scripted"
    assert err.value.protocol_error and not err.value.retryable
    assert len(model_server.chat_requests) == 1


def test_an_html_page_at_a_url_without_v1_asks_for_v1(model_server: ScriptedModelServer) -> None:
    root = model_server.url.removesuffix("/v1")
    model_server.answer(PAGE, content_type="text/html")
    with pytest.raises(ModelProtocolError) as err:
        _chat(_model(model_server, base_url=root))
    assert str(err.value) == (
        f"vllm:scripted at {root}: POST /chat/completions answered text/html: an HTML page titled "
        f"'Welcome to nginx!', not the OpenAI API; is the URL missing /v1? (e.g. --model-base-url {root}/v1)"
    )


def test_a_protocol_error_pickles_with_its_fields(model_server: ScriptedModelServer) -> None:
    model_server.answer(PAGE, content_type="text/html")
    with pytest.raises(ModelProtocolError) as err:
        _chat(_model(model_server))
    copy = pickle.loads(pickle.dumps(err.value))
    assert (str(copy), copy.url, copy.shape, copy.model, copy.status) == (
        str(err.value), err.value.url, err.value.shape, "vllm:scripted", 200)
    assert isinstance(copy, ModelError) and copy.protocol_error and copy.error_code == "protocol_error"
    assert not ModelError("x").protocol_error


def test_an_error_body_with_status_200_is_a_model_error_retried_by_its_code(model_server: ScriptedModelServer) -> None:
    # OpenRouter passes an upstream failure on with status 200 and an error object.
    model_server.answer({"error": {"message": "Provider returned error", "code": 502}})
    model_server.answer(completion({"role": "assistant", "content": "4"}))
    assert _chat(_model(model_server)).content == "4"
    assert len(model_server.chat_requests) == 2

    model_server.answer({"error": {"message": "context too long", "code": 400}}, times=3)
    with pytest.raises(ModelError) as err:
        _chat(_model(model_server))
    assert str(err.value) == (f"vllm:scripted at {model_server.url}: the server answered HTTP 200 with an error 400: "
                              "context too long")
    assert err.value.status == 400 and not err.value.protocol_error
    assert len(model_server.chat_requests) == 3


def test_an_error_in_the_choice_is_a_model_error(model_server: ScriptedModelServer) -> None:
    model_server.answer({"choices": [{"index": 0, "error": {"message": "upstream timed out", "code": 504},
                                      "finish_reason": "error"}]}, times=3)
    with pytest.raises(ModelError, match=r"HTTP 200 with an error 504: upstream timed out$") as err:
        _chat(_model(model_server))
    assert not err.value.protocol_error
    assert len(model_server.chat_requests) == 3  # 504 is retried, up to the three attempts


def test_an_html_error_page_with_an_error_status_keeps_the_status_handling(model_server: ScriptedModelServer) -> None:
    model_server.answer("<html><title>502 Bad Gateway</title></html>", status=502, content_type="text/html")
    model_server.answer(completion({"role": "assistant", "content": "4"}))
    assert _chat(_model(model_server)).content == "4"  # a gateway's 502 page is retried like any 502


# Pre-flight: GET /models. (body, Content-Type, status, the error's class or None when the check passes, words)
MODEL_LISTS = {
    "html-page": (PAGE, "text/html", 200, ModelProtocolError, "GET /models answered text/html: an HTML page titled"),
    "text-plain": ("OK", "text/plain", 200, ModelProtocolError, "GET /models answered text/plain: text that is not"),
    "empty-body": ("", "application/json", 200, ModelProtocolError, "GET /models answered an empty body"),
    "fastapi-not-found": ({"detail": "Not Found"}, "application/json", 200, ModelProtocolError,
                          "a web framework's error"),
    "error-object": ({"error": {"message": "invalid api key", "code": 401}}, "application/json", 200, ModelError,
                     "GET /models answered HTTP 200 with an error: invalid api key"),
    "list-of-another-shape": ({"models": [{"name": "scripted"}]}, "application/json", 200, None, ""),
    "no-models-route-404": ({"detail": "Not Found"}, "application/json", 404, None, ""),
    "html-404": (PAGE, "text/html", 404, ModelProtocolError,
                 "GET /models answered HTTP 404 text/html: an HTML page titled 'Welcome to nginx!', not the OpenAI"),
    "html-501-python-http-server": ("<!DOCTYPE HTML>\n<html><head><title>Error response</title></head></html>",
                                    "text/html;charset=utf-8", 501, ModelProtocolError,
                                    "GET /models answered HTTP 501 text/html: an HTML page titled 'Error response'"),
    "text-404-of-a-server-without-models": ("404 page not found", "text/plain", 404, None, ""),
    "method-not-allowed": ("", "text/plain", 405, None, ""),
    "not-implemented": ({"error": {"message": "not implemented"}}, "application/json", 501, None, ""),
}


@pytest.mark.parametrize("body, content_type, status, error, words", MODEL_LISTS.values(), ids=MODEL_LISTS.keys())
def test_preflight_reads_what_models_answers(model_server: ScriptedModelServer, body: Any, content_type: str,
                                             status: int, error: type[ModelError] | None, words: str) -> None:
    model_server.answer(body, endpoint="models", content_type=content_type, status=status)
    if error is None:
        _check(_model(model_server))
        return
    with pytest.raises(error) as err:
        _check(_model(model_server))
    assert type(err.value) is error
    message = str(err.value)
    assert message.startswith(f"vllm:scripted at {model_server.url}: ") and words in message and "\n" not in message


def test_preflight_of_a_web_page_without_v1_names_the_url_to_try(model_server: ScriptedModelServer) -> None:
    root = model_server.url.removesuffix("/v1")
    model_server.answer(PAGE, endpoint="models", content_type="text/html")
    with pytest.raises(ModelProtocolError) as err:
        _check(_model(model_server, base_url=root))
    assert str(err.value) == (
        f"vllm:scripted at {root}: GET /models answered text/html: an HTML page titled 'Welcome to nginx!', not the "
        f"OpenAI API; is the URL missing /v1? (e.g. --model-base-url {root}/v1)"
    )
    assert [request.path for request in model_server.requests] == ["/models"]


@pytest.mark.parametrize("status, fix", [
    (502, "the server failed all 3 attempts; check the server's logs"),
    (503, "the server stayed unavailable for all 3 attempts; check the server, lower the request rate"),
])
def test_an_html_error_page_is_described_not_quoted(model_server: ScriptedModelServer, status: int, fix: str) -> None:
    page = f"<html><head><title>{status} Error</title></head><body>{'x' * 5000}</body></html>"
    model_server.answer(page, status=status, content_type="text/html", times=3)
    with pytest.raises(ModelError) as err:
        _chat(_model(model_server))
    assert str(err.value).startswith(
        f"vllm:scripted at {model_server.url}: HTTP {status}: text/html: an HTML page titled '{status} Error'; {fix}")
    assert err.value.status == status and not err.value.protocol_error
    assert len(model_server.chat_requests) == 3


# A route the server does not have: a web server's page, a proxy's text or nothing, where the API answers JSON.
MISSING_ROUTES = {
    "html-404": (404, "<html><head><title>Not Found</title></head></html>", "text/html",
                 "HTTP 404 text/html: an HTML page titled 'Not Found'"),
    "html-405": (405, "<html><head><title>Method Not Allowed</title></head></html>", "text/html",
                 "HTTP 405 text/html: an HTML page titled 'Method Not Allowed'"),
    "python-http-server-501": (501, "<!DOCTYPE HTML>\n<html><head><title>Error response</title></head></html>",
                               "text/html;charset=utf-8", "HTTP 501 text/html: an HTML page titled 'Error response'"),
    "go-text-404": (404, "404 page not found", "text/plain", "HTTP 404 text/plain: text that is not JSON"),
    "empty-405": (405, "", None, "HTTP 405 an empty body"),
}


@pytest.mark.parametrize("status, body, content_type, shape", MISSING_ROUTES.values(), ids=MISSING_ROUTES.keys())
def test_a_chat_route_the_server_lacks_is_a_protocol_error_not_retried(
    model_server: ScriptedModelServer, status: int, body: str, content_type: str | None, shape: str,
) -> None:
    model_server.answer(body, status=status, content_type=content_type, times=3)
    with pytest.raises(ModelProtocolError) as err:
        _chat(_model(model_server))
    assert str(err.value) == (f"vllm:scripted at {model_server.url}: POST /chat/completions answered {shape}"
                              + str(err.value).split(shape, 1)[1])
    assert ", not the OpenAI API; check that --model-base-url is the root of an OpenAI-compatible API" in str(err.value)
    assert err.value.status == status and err.value.protocol_error and not err.value.retryable
    assert len(model_server.chat_requests) == 1


def test_an_unknown_models_json_404_keeps_its_advice(model_server: ScriptedModelServer) -> None:
    model_server.answer({"error": {"message": "The model `nope` does not exist.", "code": 404}}, status=404,
                        times=3)
    with pytest.raises(ModelError) as err:
        _chat(_model(model_server))
    assert str(err.value) == (f"vllm:scripted at {model_server.url}: HTTP 404: The model `nope` does not exist.; "
                              "check the model name and the base URL (it should end with /v1); "
                              "'python -m runner list' shows the providers")
    assert not err.value.protocol_error and len(model_server.chat_requests) == 1
