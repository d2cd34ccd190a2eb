"""A reply checked against its request (ggml-org/llama.cpp#27174's kind): an engine that ignores part of a request
answers without what it asked for, and the answer must not be scored as if it held it.

Each engine's answer to the same ``/completions`` request with ``echo`` and ``logprobs`` (lm-eval's log-likelihood
request) goes through the real client (the scripted server speaks each engine's shape, ``tests/benchmarks/lmeval/
engines.py``): vLLM's and SGLang's are read, the others are that request's ``ignored_option`` error naming the engine,
``echo`` and the field. On ``/chat/completions``: ``n`` choices, and a forced tool call whose arguments are JSON; a
call the model chose itself keeps broken arguments for the agent, as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runner.models import ChatModel, ModelError, RetryPolicy, post_json
from tests.benchmarks.lmeval.engines import HONOURS_ECHO, SHAPES, Completions
from tests.support.model_server import ScriptedModelServer, completion

PROMPT = list(range(100, 121))  # 21 token ids
ECHO = {"prompt": [PROMPT], "max_tokens": 1, "logprobs": 1, "echo": True, "temperature": 0, "seed": 1234}


def _post(server: ScriptedModelServer, path: str, payload: dict[str, Any], name: str = "vllm:scripted") -> Any:
    model = ChatModel.from_name(name, base_url=server.url,
                                retry=RetryPolicy(max_attempts=3, initial_delay=0, jitter=0))

    async def call() -> Any:
        async with model:
            return await post_json(model, path, payload)  # type: ignore[arg-type]

    return asyncio.run(call())


@pytest.mark.parametrize("engine", list(SHAPES))
def test_each_engines_answer_to_echo_is_read_or_refused_naming_the_engine(model_server, engine: str) -> None:
    completions = Completions(shape=engine)
    model_server.completions = completions
    if engine in HONOURS_ECHO:
        posted = _post(model_server, "completions", ECHO)
        assert len(posted.body["choices"][0]["logprobs"]["token_logprobs"]) == len(PROMPT) + 1
        assert (posted.usage.input_tokens, posted.usage.output_tokens) == (21, 1)
        return
    # transformers serve's replies carry no mark of it: it is named by its provider
    name = "transformers:scripted" if engine == "transformers serve" else "vllm:scripted"
    with pytest.raises(ModelError) as err:
        _post(model_server, "completions", ECHO, name)
    assert err.value.error_code == "ignored_option" and not err.value.retryable
    message = str(err.value)
    named = engine if engine != "an OpenAI-style server" else "an OpenAI-compatible server whose reply names no engine"
    assert message.startswith(f"{name} at {model_server.url}: the engine ({named}) ignores `echo`: POST "
                              "/completions: the request asked for the log-probability of each of the prompt's 21 "
                              "tokens with `echo`, and choices[0].logprobs"), message
    assert "use an engine that returns them for `echo` with `logprobs` (vLLM, SGLang" in message
    assert len(completions.bodies) == 1  # not retried


def test_the_issues_one_log_probability_for_a_21_token_prompt_is_named() -> None:
    """The issue's numbers: token_logprobs holds 1 value where 22 were due."""
    with ScriptedModelServer() as server:
        server.completions = Completions(shape="an OpenAI-style server")
        with pytest.raises(ModelError, match=r"choices\[0\]\.logprobs\.token_logprobs holds 1 value; the reply cannot "
                                             r"be scored"):
            _post(server, "completions", ECHO)


def test_a_batch_answered_with_fewer_choices_than_prompts_is_refused(model_server) -> None:
    model_server.completions = lambda body: {"object": "text_completion", "model": "scripted",
                                             "choices": [{"index": 0, "text": " a", "finish_reason": "stop"}],
                                             "usage": {"prompt_tokens": 6, "completion_tokens": 1}}
    with pytest.raises(ModelError, match=r"ignores `prompt`: POST /completions: the request asked for one choice for "
                                         r"each of its 2 prompts with `prompt`, and choices holds 1"):
        _post(model_server, "completions", {"prompt": [[1, 2, 3], [4, 5, 6]], "max_tokens": 4})


def test_completions_without_a_choice_are_no_choice(model_server) -> None:
    model_server.completions = lambda body: {"object": "text_completion", "choices": [],
                                             "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {
                                                 "hate": {"filtered": True, "severity": "high"}}}]}
    with pytest.raises(ModelError) as err:
        _post(model_server, "completions", {"prompt": "Hi", "max_tokens": 4})
    assert err.value.error_code == "no_choice" and "hate filtered (high)" in str(err.value)


def test_n_choices_asked_and_one_sent_is_refused_on_the_chat_path(model_server) -> None:
    """An engine that ignores ``n`` answers one choice (``transformers serve`` does; its provider leaves ``n`` out of
    the request): the chat call says so instead of reading the first choice as if the others were there."""
    model_server.answer(completion({"role": "assistant", "content": "4"}, system_fingerprint="3.3.4-native"))
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    with pytest.raises(ModelError) as err:
        model.chat_sync("What is 2 + 2?", temperature=1.0, extra_body={"n": 3})
    assert err.value.error_code == "ignored_option"
    assert "the engine (TGI) ignores `n`: POST /chat/completions: the request asked for 3 choices with `n`, and " \
           "choices holds 1" in str(err.value)


LOOKUP = {"name": "lookup", "description": "Read a page.",
          "parameters": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}}


def _call(arguments: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}]}


@pytest.mark.parametrize(("message", "found"), [
    ({"role": "assistant", "content": '<tool_call>{"name": "lookup"}</tool_call>'}, "holds no call"),
    (_call('{"title": "Ed Wood"'), "holds a string that is not a JSON object"),
], ids=["no-call", "broken-arguments"])
def test_a_forced_tool_call_that_is_missing_or_not_json_is_refused(model_server, message, found) -> None:
    """A forced call (``tool_choice`` a tool's name, or ``required``) is constrained to its schema by vLLM and
    OpenAI: an answer without it, or with arguments that do not parse, says that the engine ignored the forcing
    (Ollama's and transformers serve's servers ignore ``tool_choice``)."""
    model_server.answer(completion(message, system_fingerprint="fp_ollama"))
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    with pytest.raises(ModelError) as err:
        model.chat_sync("Who is Ed Wood?", tools=[LOOKUP], tool_choice="lookup")
    assert err.value.error_code == "ignored_option"
    assert "the engine (Ollama) ignores `tool_choice`" in str(err.value) and found in str(err.value)


def test_a_call_the_model_chose_keeps_its_broken_arguments_for_the_agent(model_server) -> None:
    """``tool_choice`` auto: broken JSON is the model's answer, which the agent shows the model (``parse_error``)."""
    model_server.answer(completion(_call('{"title": "Ed Wood"')))
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    reply = model.chat_sync("Who is Ed Wood?", tools=[LOOKUP])
    assert reply.tool_calls[0].parse_error is not None and reply.tool_calls[0].raw_arguments == '{"title": "Ed Wood"'


def test_a_forced_call_with_json_arguments_is_read(model_server) -> None:
    model_server.answer(completion(_call('{"title": "Ed Wood"}')))
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    reply = model.chat_sync("Who is Ed Wood?", tools=[LOOKUP], tool_choice="required")
    assert reply.tool_calls[0].arguments == {"title": "Ed Wood"}
