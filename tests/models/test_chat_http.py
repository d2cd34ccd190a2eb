"""Chat calls through the real ``openai`` client against the scripted model server on loopback.

The server (``tests/support/model_server.py``) stands in for vLLM/OpenAI because no model can run here; everything
on the client side is the production code.
"""

from __future__ import annotations

import asyncio
import json
import pickle
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from runner.models import ChatModel, ChatReply, ModelError, RetryPolicy, StructuredOutputError, tool_message
from tests.support.model_server import ScriptedModelServer

LOOKUP = {
    "name": "lookup",
    "description": "Read a paragraph by its title.",
    "parameters": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
}


T = TypeVar("T")


def _model(server: ScriptedModelServer, name: str = "vllm:scripted", **kwargs: Any) -> ChatModel:
    return ChatModel.from_name(name, base_url=server.url, retry=RetryPolicy(max_attempts=1), **kwargs)


def using(model: ChatModel, use: Callable[[ChatModel], Awaitable[T]]) -> T:
    """Run ``use(model)`` in a fresh event loop, closing the model's connections in that loop afterwards."""

    async def main() -> T:
        async with model:
            return await use(model)

    return asyncio.run(main())


def test_a_tool_call_round_trip(model_server: ScriptedModelServer) -> None:
    model_server.set_policy([
        {"content": "Let me look.", "tool_calls": [{"name": "lookup", "arguments": {"title": "Scott Derrickson"}}]},
        "Yes, both are American.",
    ])

    async def episode(model: ChatModel) -> tuple[ChatReply, ChatReply]:
        messages: list[Any] = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "Same nationality?"}]
        first = await model.chat(messages, tools=[LOOKUP], temperature=0.0, max_tokens=64)
        call = first.tool_calls[0]
        messages += [first, tool_message(call.id, {"paragraph": "American director"}, name=call.name)]
        second = await model.chat(messages, tools=[LOOKUP])
        return first, second

    first, second = using(_model(model_server), episode)
    call = first.tool_calls[0]
    assert (call.name, call.arguments, json.loads(call.raw_arguments)) == (
        "lookup", {"title": "Scott Derrickson"}, {"title": "Scott Derrickson"})
    assert call.id == "call_0_0" and call.parse_error is None
    assert first.content == "Let me look." and first.finish_reason == "tool_calls"
    assert first.model == "scripted"
    # The scripted server counts words: 3 in the prompt; "Let me look." plus the 3 words of the raw arguments.
    assert first.usage.input_tokens == 3 and first.usage.output_tokens == 6
    assert second.text == "Yes, both are American." and second.finish_reason == "stop"

    sent_first, sent_second = (r.body for r in model_server.requests)
    assert sent_first["model"] == "scripted"
    assert sent_first["tools"] == [{"type": "function", "function": LOOKUP}]
    assert sent_first["temperature"] == 0.0 and sent_first["max_tokens"] == 64
    assert "tool_choice" not in sent_first
    assistant, tool = sent_second["messages"][2:4]
    assert assistant["tool_calls"] == [{"id": "call_0_0", "type": "function",
                                        "function": {"name": "lookup", "arguments": call.raw_arguments}}]
    assert tool == {"role": "tool", "tool_call_id": "call_0_0", "name": "lookup",
                    "content": '{"paragraph": "American director"}'}


def test_a_server_that_ignores_stop_gets_its_reply_cut_here(model_server: ScriptedModelServer) -> None:
    """``transformers serve`` with continuous batching ignores ``stop`` (6 of 6 answers ran past "\n"): the reply is
    what a server that applies it sends, the stop sequence left out; a reply without it is left whole."""
    model = "transformers:smollm2-135m-instruct"
    model_server.set_policy(["Paris\nQuestion: and then more"])
    cut = using(_model(model_server, model), lambda m: m.chat("Capital of France?", stop=["Question:", "\n"]))
    model_server.set_policy(["no stop sequence here"])
    whole = using(_model(model_server, model), lambda m: m.chat("Again?", stop="\n"))
    assert (cut.content, cut.finish_reason) == ("Paris", "stop")
    assert whole.content == "no stop sequence here"
    assert model_server.chat_requests[0].stop == ["Question:", "\n"]  # still sent, for servers that apply it


def test_forcing_a_tool_and_malformed_arguments(model_server: ScriptedModelServer) -> None:
    """A forced call is constrained to its schema by an engine that honours ``tool_choice``: arguments that do not
    parse say that the engine ignored it (issue 37), not that the model erred; with ``tool_choice`` auto they stay
    the agent's ``parse_error`` (tests/models/test_asked.py)."""
    model_server.set_policy([{"tool_calls": [{"name": "lookup", "arguments": "{'title': broken"}]}])
    with pytest.raises(ModelError) as err:
        using(_model(model_server), lambda m: m.chat("look", tools=[LOOKUP], tool_choice="lookup"))
    assert model_server.requests[0].body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert err.value.error_code == "ignored_option"
    assert "choices[0].message.tool_calls[0].function.arguments holds a string that is not a JSON object " \
           "(\"{'title': broken\")" in str(err.value)


def test_openai_sends_max_completion_tokens_and_the_bearer_key(model_server: ScriptedModelServer) -> None:
    model = _model(model_server, "openai:gpt-test", api_key="sk-test", max_tokens=32)
    using(model, lambda m: m.chat("hi"))
    request = model_server.requests[0]
    assert request.body["max_completion_tokens"] == 32 and "max_tokens" not in request.body
    assert request.headers["authorization"] == "Bearer sk-test"


class Verdict(BaseModel):
    score: float
    reason: str


def test_structured_output_asks_for_the_schema_and_parses_fenced_json(model_server: ScriptedModelServer) -> None:
    model_server.set_policy(['Here you go:\n```json\n{"score": 0.75, "reason": "close"}\n```'])
    verdict = using(_model(model_server), lambda m: m.chat_structured("Rate it.", Verdict))
    assert verdict == Verdict(score=0.75, reason="close")
    response_format = model_server.requests[0].body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"]["required"] == ["score", "reason"]


def test_structured_output_repairs_once_then_fails_with_one_line(model_server: ScriptedModelServer) -> None:
    model_server.set_policy(['{"score": "high"}', '{"score": 1, "reason": "fixed"}'])
    assert using(_model(model_server), lambda m: m.chat_structured("Rate it.", Verdict)) == Verdict(score=1, reason="fixed")
    feedback = model_server.requests[1].body["messages"][-1]["content"]
    assert feedback.startswith("That reply is not valid:") and "score" in feedback

    model_server.set_policy(["no json here"])
    with pytest.raises(StructuredOutputError) as err:
        using(_model(model_server), lambda m: m.chat_structured("Rate it.", Verdict, mode="prompt", repair_attempts=1))
    assert "not a valid Verdict after 2 attempt(s)" in str(err.value) and "\n" not in str(err.value)
    prompt_request = model_server.requests[-1].body
    assert "response_format" not in prompt_request
    assert prompt_request["messages"][0]["role"] == "system" and "JSON schema" in prompt_request["messages"][0]["content"]


def test_half_of_a_surrogate_pair_from_a_server_or_a_tool_is_u_fffd_and_the_conversation_goes_on(
        model_server: ScriptedModelServer) -> None:
    """A reply of ``"\\ud835<number>"`` (valid JSON, half of a pair: inspect_ai PR #2316), in the text, the
    reasoning and a tool call's arguments (as the model wrote them, and without an id: it is derived from them); a
    tool's result with such text sent back; and a judge's structured reply holding one. httpx refused to send the
    next request (``surrogates not allowed``); each lone half is U+FFFD now, and the conversation goes on."""
    lone = json.loads('"\\ud835"')
    model_server.answer({"id": "c", "object": "chat.completion", "created": 0, "model": "scripted", "choices": [{
        "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": lone + "7", "reasoning_content": "bold " + lone,
            "tool_calls": [{"type": "function", "function": {"name": "lookup", "arguments": '{"title": "\\ud835"}'}}],
        }}]})
    model_server.set_policy(lambda request: "done" if request.count("tool") else
                            '{"score": 1, "reason": "bold \\ud835 zero"}')

    async def talk(model: ChatModel) -> tuple[ChatReply, ChatReply, Verdict]:
        first = await model.chat("What is 7?", tools=[LOOKUP])
        call = first.tool_calls[0]
        second = await model.chat(["What is 7?", first, tool_message(call.id, {"found": lone})], tools=[LOOKUP])
        return first, second, await model.chat_structured("Rate it.", Verdict)

    first, second, verdict = using(_model(model_server), talk)
    assert (first.content, first.reasoning) == ("\ufffd7", "bold \ufffd")
    assert (first.tool_calls[0].arguments, first.tool_calls[0].raw_arguments) == (
        {"title": "\ufffd"}, '{"title": "\\ud835"}')
    assert second.content == "done" and verdict == Verdict(score=1, reason="bold \ufffd zero")
    sent = model_server.requests[1].body["messages"]
    assert json.loads(sent[2]["content"]) == {"found": "\ufffd"}
    assert sent[1]["tool_calls"][0]["id"] == first.tool_calls[0].id


def test_dashscope_asks_for_a_json_object_with_the_schema_in_the_prompt(model_server: ScriptedModelServer) -> None:
    model_server.set_policy(['{"score": 0.5, "reason": "half"}'])
    model = _model(model_server, "dashscope:qwen-plus", api_key="k")
    assert model.chat_structured_sync("Rate it.", Verdict) == Verdict(score=0.5, reason="half")
    body = model_server.requests[0].body
    assert body["response_format"] == {"type": "json_object"}
    assert "JSON schema" in body["messages"][0]["content"] and '"score"' in body["messages"][0]["content"]


def test_check_passes_for_a_served_model_and_a_server_without_a_model_list(model_server: ScriptedModelServer) -> None:
    using(_model(model_server), lambda m: m.check())
    model_server.list_models = False
    using(_model(model_server), lambda m: m.check())
    assert [r.path for r in model_server.requests] == ["/v1/models", "/v1/models"]


def test_check_refuses_a_model_vllm_does_not_serve(model_server: ScriptedModelServer) -> None:
    model_server.models = ["Qwen/Qwen2.5-7B-Instruct"]
    with pytest.raises(ModelError, match=r"does not serve model 'scripted'; it serves: Qwen/Qwen2.5-7B-Instruct"):
        using(_model(model_server), lambda m: m.check())


def test_ollama_latest_tag_counts_as_served(model_server: ScriptedModelServer) -> None:
    model_server.models = ["llama3.1:latest"]
    using(_model(model_server, "ollama:llama3.1"), lambda m: m.check())


def test_a_rejected_key_names_the_variable(model_server: ScriptedModelServer) -> None:
    model_server.fail(401, message="invalid api key")
    with pytest.raises(ModelError) as err:
        using(_model(model_server, "dashscope:qwen-plus", api_key="bad"), lambda m: m.chat("hi"))
    assert err.value.status == 401
    assert "HTTP 401: invalid api key; check the API key (or set DASHSCOPE_API_KEY)" in str(err.value)


def test_a_used_model_pickles_and_works_in_the_copy(model_server: ScriptedModelServer) -> None:
    model = _model(model_server)
    using(model, lambda m: m.chat("hi"))
    copy = pickle.loads(pickle.dumps(model))
    assert copy.name == "vllm:scripted"
    assert using(copy, lambda m: m.chat("again")).text == "Default reply from the mock model."
