"""Every reply shape OpenAI-compatible servers send, read through the real ``openai`` client.

The scripted server (``tests/support/model_server.py``) stands in for vLLM, SGLang, Ollama, LiteLLM, OpenRouter,
DeepSeek, Mistral and Anthropic-style gateways because no model can run here: it sends each body exactly as those
servers do (the shapes are taken from their documentation and bug reports, named beside each case), and everything
on our side of the connection is the production code.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runner.core.usage import usage_scope
from runner.models import ChatModel, ChatReply, RetryPolicy, ToolCall, Usage
from tests.support.model_server import ScriptedModelServer, completion

LOOKUP = {"name": "lookup", "parameters": {"type": "object", "properties": {"title": {"type": "string"}}}}
USAGE = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}


def _ask(server: ScriptedModelServer, messages: Any = "What is 2 + 2?", **options: Any) -> ChatReply:
    """One chat call of a ``vllm:scripted`` model at ``server`` (no retries), in a fresh event loop."""
    model = ChatModel.from_name("vllm:scripted", base_url=server.url, retry=RetryPolicy(max_attempts=1))

    async def call() -> ChatReply:
        async with model:
            return await model.chat(messages, **options)

    return asyncio.run(call())


def _reply_to(server: ScriptedModelServer, message: dict[str, Any], **fields: Any) -> ChatReply:
    server.answer(completion(message, **{"usage": USAGE, **fields}))
    return _ask(server)


THINKING = "2 plus 2 makes 4."

# (message as the server sends it, the answer's text, the reasoning kept)
CONTENT_SHAPES = {
    "string": ({"role": "assistant", "content": "4"}, "4", None),
    # Anthropic-style gateways, LiteLLM: thinking blocks with a signature, then text.
    "thinking-then-text-parts": (
        {"role": "assistant", "content": [{"type": "thinking", "thinking": THINKING, "signature": "c2ln"},
                                          {"type": "text", "text": "4"}]}, "4", THINKING),
    # Mistral's Magistral: the thinking chunk holds a list of text chunks.
    "magistral-thinking-chunks": (
        {"role": "assistant", "content": [{"type": "thinking", "thinking": [{"type": "text", "text": THINKING}]},
                                          {"type": "text", "text": "4"}]}, "4", THINKING),
    # OpenAI Responses items and Databricks: a reasoning part with a summary list.
    "reasoning-part-with-summary": (
        {"role": "assistant", "content": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": THINKING}]},
            {"type": "output_text", "text": "4", "annotations": []},
        ]}, "4", THINKING),
    "reasoning-part-with-text": (
        {"role": "assistant", "content": [{"type": "reasoning", "text": THINKING}, {"type": "text", "text": "4"}]},
        "4", THINKING),
    "output-text-part": ({"role": "assistant", "content": [{"type": "output_text", "text": "4"}]}, "4", None),
    # The Assistants API's text object, and gateways that put a part's text under "content".
    "text-value-object": (
        {"role": "assistant", "content": [{"type": "text", "text": {"value": "4", "annotations": []}}]}, "4", None),
    "text-under-content-key": ({"role": "assistant", "content": [{"type": "text", "content": "4"}]}, "4", None),
    "text-split-over-parts": (
        {"role": "assistant", "content": [{"type": "text", "text": "The answer is "}, {"type": "text", "text": "4"}]},
        "The answer is 4", None),
    "bare-string-parts": ({"role": "assistant", "content": ["4"]}, "4", None),
    "parts-without-type": ({"role": "assistant", "content": [{"text": "4"}]}, "4", None),
    "one-part-object": ({"role": "assistant", "content": {"type": "text", "text": "4"}}, "4", None),
    # Parts without text are skipped: images, Mistral's references, redacted or encrypted reasoning.
    "parts-without-text": (
        {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "data:,"}},
                                          {"type": "reference", "reference_ids": [1]},
                                          {"type": "redacted_thinking", "data": "ZW5j"},
                                          {"type": "text", "text": "4"}]}, "4", None),
    "only-thinking-parts": ({"role": "assistant", "content": [{"type": "thinking", "thinking": THINKING}]},
                            None, THINKING),
    # DeepSeek, SGLang, LiteLLM, vLLM before 0.11.
    "reasoning_content-field": ({"role": "assistant", "content": "4", "reasoning_content": THINKING}, "4", THINKING),
    # vLLM since 0.11, Ollama, Groq.
    "reasoning-field": ({"role": "assistant", "content": "4", "reasoning": THINKING}, "4", THINKING),
    # Ollama's gemma4 on /v1: all of it in "reasoning", the content empty.
    "empty-content-all-reasoning": ({"role": "assistant", "content": "", "reasoning": THINKING}, "", THINKING),
    # OpenRouter: the same text in "reasoning" and "reasoning_details" (kept once), encrypted details skipped.
    "openrouter-reasoning-details": (
        {"role": "assistant", "content": "4", "reasoning": THINKING,
         "reasoning_details": [{"type": "reasoning.text", "text": THINKING, "format": "anthropic-claude-v1"},
                               {"type": "reasoning.encrypted", "data": "ZW5j"}]}, "4", THINKING),
    "openrouter-details-only": (
        {"role": "assistant", "content": "4",
         "reasoning_details": [{"type": "reasoning.summary", "summary": THINKING}]}, "4", THINKING),
    # LiteLLM: reasoning_content and thinking_blocks with the same text.
    "litellm-thinking-blocks": (
        {"role": "assistant", "content": "4", "reasoning_content": THINKING,
         "thinking_blocks": [{"type": "thinking", "thinking": THINKING, "signature": "c2ln"}]}, "4", THINKING),
    "reasoning-as-parts-list": (
        {"role": "assistant", "content": "4", "reasoning": [{"type": "text", "text": THINKING}]}, "4", THINKING),
    "reasoning-as-object": ({"role": "assistant", "content": "4", "reasoning": {"text": THINKING}}, "4", THINKING),
    "ollama-thinking-field": ({"role": "assistant", "content": "4", "thinking": THINKING}, "4", THINKING),
    "reasoning-settings-object-is-not-reasoning": (
        {"role": "assistant", "content": "4", "reasoning": {"effort": "low"}}, "4", None),
    # DeepSeek-R1 or Qwen3 on vLLM without --reasoning-parser.
    "think-block-in-content": ({"role": "assistant", "content": f"<think>\n{THINKING}\n</think>\n\n4"}, "4", THINKING),
    "think-close-without-open": ({"role": "assistant", "content": f"{THINKING}\n</think>\n\n4"}, "4", THINKING),
    "think-never-closed": ({"role": "assistant", "content": f"<think>{THINKING}"}, "", THINKING),
    "empty-think-block": ({"role": "assistant", "content": "<think>\n\n</think>\n\n4"}, "4", None),
    "upper-case-think-tags": ({"role": "assistant", "content": f"<THINK>{THINKING}</THINK>4"}, "4", THINKING),
    "think-block-in-a-text-part": (
        {"role": "assistant", "content": [{"type": "text", "text": f"<think>{THINKING}</think>4"}]}, "4", THINKING),
    "reasoning-field-and-think-block": (
        {"role": "assistant", "content": "<think>checked twice</think>4", "reasoning_content": THINKING},
        "4", f"{THINKING}\n\nchecked twice"),
    "refusal-without-content": ({"role": "assistant", "content": None, "refusal": "I cannot help with that."},
                                "I cannot help with that.", None),
    "refusal-part": ({"role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot help with that."}]},
                     "I cannot help with that.", None),
}


@pytest.mark.parametrize("message, text, reasoning", CONTENT_SHAPES.values(), ids=CONTENT_SHAPES.keys())
def test_content_and_reasoning_shapes(model_server: ScriptedModelServer, message: dict[str, Any], text: str | None,
                                      reasoning: str | None) -> None:
    reply = _reply_to(model_server, message)
    assert (reply.content, reply.reasoning) == (text, reasoning)
    assert reply.usage == Usage(input_tokens=12, output_tokens=3)
    assert reply.to_message() == {"role": "assistant", "content": text}


def test_the_trajectory_form_keeps_the_reasoning_and_the_request_form_drops_it(
    model_server: ScriptedModelServer,
) -> None:
    reply = _reply_to(model_server, CONTENT_SHAPES["thinking-then-text-parts"][0])
    assert reply.to_message(reasoning=True) == {"role": "assistant", "content": "4", "reasoning": THINKING}
    model_server.answer(completion({"role": "assistant", "content": "8"}))
    _ask(model_server, ["What is 2 + 2?", reply, "Double it."])
    sent = model_server.requests[-1].body["messages"][1]
    assert sent == {"role": "assistant", "content": "4"}


def _call(name: str = "lookup", arguments: Any = '{"title": "Ed Wood"}', **fields: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}, **fields}


# (message, the calls read as (id, name, arguments, parse_error is None)); "<derived>" stands for a generated id.
TOOL_SHAPES = {
    "null-content-string-arguments": (
        {"role": "assistant", "content": None, "tool_calls": [_call(id="call_a")]},
        [("call_a", "lookup", {"title": "Ed Wood"}, True)]),
    # Ollama's native form and some gateways: arguments already parsed.
    "object-arguments": (
        {"role": "assistant", "content": "", "tool_calls": [_call(arguments={"title": "Ed Wood"}, id="call_a")]},
        [("call_a", "lookup", {"title": "Ed Wood"}, True)]),
    "arguments-encoded-twice": (
        {"role": "assistant", "content": None,
         "tool_calls": [_call(arguments='"{\\"title\\": \\"Ed Wood\\"}"', id="c")]},
        [("c", "lookup", {"title": "Ed Wood"}, True)]),
    "missing-arguments": ({"role": "assistant", "tool_calls": [_call(arguments=None, id="c")]},
                          [("c", "lookup", {}, True)]),
    "list-arguments": ({"role": "assistant", "tool_calls": [_call(arguments=["Ed Wood"], id="c")]},
                       [("c", "lookup", {}, False)]),
    "missing-ids": (
        {"role": "assistant", "content": None, "tool_calls": [_call(), _call(arguments='{"title": "Tim Burton"}')]},
        [("<derived>", "lookup", {"title": "Ed Wood"}, True), ("<derived>", "lookup", {"title": "Tim Burton"}, True)]),
    "empty-and-null-ids": (
        {"role": "assistant", "tool_calls": [_call(id=""), _call(id=None, arguments="{}")]},
        [("<derived>", "lookup", {"title": "Ed Wood"}, True), ("<derived>", "lookup", {}, True)]),
    "function-at-the-top-level": (
        {"role": "assistant", "tool_calls": [{"id": "c", "name": "lookup", "arguments": '{"title": "Ed Wood"}'}]},
        [("c", "lookup", {"title": "Ed Wood"}, True)]),
    "one-call-object": ({"role": "assistant", "tool_calls": _call(id="c")},
                        [("c", "lookup", {"title": "Ed Wood"}, True)]),
    "legacy-function-call": (
        {"role": "assistant", "content": None,
         "function_call": {"name": "lookup", "arguments": '{"title": "Ed Wood"}'}},
        [("<derived>", "lookup", {"title": "Ed Wood"}, True)]),
    # Anthropic-style gateways: text, then a tool_use block in the content.
    "tool-use-part": (
        {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "lookup",
                                           "input": {"title": "Ed Wood"}}]},
        [("toolu_1", "lookup", {"title": "Ed Wood"}, True)]),
    # The Responses API's function_call item.
    "function-call-part": (
        {"role": "assistant", "content": [{"type": "function_call", "call_id": "fc_1", "name": "lookup",
                                           "arguments": '{"title": "Ed Wood"}'}]},
        [("fc_1", "lookup", {"title": "Ed Wood"}, True)]),
}


@pytest.mark.parametrize("message, expected", TOOL_SHAPES.values(), ids=TOOL_SHAPES.keys())
def test_tool_call_shapes(model_server: ScriptedModelServer, message: dict[str, Any],
                          expected: list[tuple[str, str, dict[str, Any], bool]]) -> None:
    reply = _reply_to(model_server, message, finish_reason="tool_calls")

    def shown_id(call: ToolCall, wanted: str) -> str:
        derived = len(call.id) == 9 and call.id.isalnum()
        return "<derived>" if wanted == "<derived>" and derived else call.id

    calls = [(shown_id(call, want[0]), call.name, call.arguments, call.parse_error is None)
             for call, want in zip(reply.tool_calls, expected, strict=False)]
    assert len(reply.tool_calls) == len(expected) and calls == expected
    assert len({call.id for call in reply.tool_calls}) == len(reply.tool_calls)


def test_derived_ids_are_stable_and_differ_by_turn(model_server: ScriptedModelServer) -> None:
    message = {"role": "assistant", "content": None, "tool_calls": [_call()]}

    def first_id(conversation: list[Any]) -> str:
        model_server.answer(completion(message))
        return _ask(model_server, conversation, tools=[LOOKUP]).tool_calls[0].id

    opening = ["Who directed Ed Wood?"]
    again = first_id(opening)
    assert again == first_id(opening)
    assert len(again) == 9 and again.isalnum()  # the only id form Mistral's servers take back
    later = [*opening, {"role": "assistant", "content": "Let me check.", "tool_calls": []}, "Go on."]
    assert first_id(later) != again


def test_arguments_parse_error_is_kept_for_the_agent(model_server: ScriptedModelServer) -> None:
    reply = _reply_to(model_server, {"role": "assistant", "tool_calls": [_call(arguments="{'title': broken", id="c")]})
    call = reply.tool_calls[0]
    assert call == ToolCall(id="c", name="lookup", raw_arguments="{'title': broken", parse_error=call.parse_error)
    assert call.parse_error is not None and call.parse_error.startswith("arguments are not valid JSON")


# (usage as the server sends it, or "absent"; the counts read)
USAGE_SHAPES = {
    "openai-keys": (USAGE, (12, 3)),
    "anthropic-keys": ({"input_tokens": 12, "output_tokens": 3}, (12, 3)),
    "whole-floats": ({"prompt_tokens": 12.0, "completion_tokens": 3.0}, (12, 3)),
    "absent": ("absent", (None, None)),
    "null": (None, (None, None)),
    "empty-object": ({}, (None, None)),
    "only-the-prompt": ({"prompt_tokens": 12}, (12, None)),
    "null-counts": ({"prompt_tokens": None, "completion_tokens": None, "total_tokens": None}, (None, None)),
    "not-counts": ({"prompt_tokens": "12", "completion_tokens": -1}, (None, None)),
    "zero-is-a-count": ({"prompt_tokens": 0, "completion_tokens": 0}, (0, 0)),
}


@pytest.mark.parametrize("usage, counts", USAGE_SHAPES.values(), ids=USAGE_SHAPES.keys())
def test_usage_shapes_and_unknown_usage_is_recorded_as_unknown(model_server: ScriptedModelServer, usage: Any,
                                                               counts: tuple[int | None, int | None]) -> None:
    body = completion({"role": "assistant", "content": "4"})
    if usage != "absent":
        body["usage"] = usage
    model_server.answer(body)
    with usage_scope() as recorded:
        reply = _ask(model_server)
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == counts
    entry = recorded["vllm:scripted"].model_dump()
    known = None not in counts
    assert entry == {"input_tokens": counts[0] or 0, "output_tokens": counts[1] or 0, "calls": 1,
                     **({} if known else {"calls_without_usage": 1})}


def test_a_body_labelled_text_plain_that_is_a_completion_is_read(model_server: ScriptedModelServer) -> None:
    model_server.answer(completion({"role": "assistant", "content": "4"}), content_type="text/plain")
    assert _ask(model_server).content == "4"


def test_a_gzip_body_with_its_content_encoding_is_read(model_server: ScriptedModelServer) -> None:
    model_server.answer(completion({"role": "assistant", "content": "4"}), gzipped=True)
    assert _ask(model_server).content == "4"


def test_the_first_of_several_choices_is_the_reply(model_server: ScriptedModelServer) -> None:
    body = completion({"role": "assistant", "content": "4"})
    body["choices"].append({"index": 1, "message": {"role": "assistant", "content": "5"}, "finish_reason": "stop"})
    model_server.answer(body)
    reply = _ask(model_server)
    assert (reply.content, reply.finish_reason, reply.model) == ("4", "stop", "scripted")
