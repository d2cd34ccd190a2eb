"""Tool calls replayed in a conversation are sent back in the form that was read (vllm-project/vllm#19419's kind).

A model that writes blank arguments (``" "``, ``"\\n"``, ``""``, ``null``) gets them read as ``{}``; sending them back
verbatim made a strict server (vLLM decodes every earlier call's arguments in its chat template) answer 400, and the
items became errors. The scripted server stands in for the model server (no model runs here) with
``strict_tool_arguments`` on, refusing as vLLM does.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from runner import FileEvaluatorStorage, GeneralEvaluator
from runner.benchmarks.hotpotqa import HotpotQABenchmark
from runner.models import ChatModel, ChatRequest, MockReply, MockToolCall, RetryPolicy, ToolCall, tool_message
from runner.registry import solution_spec
from tests.support.model_server import ScriptedModelServer, completion

LOOKUP = {"name": "lookup", "parameters": {"type": "object", "properties": {"title": {"type": "string"}}}}


def _converse(server: ScriptedModelServer) -> tuple[ToolCall, Any]:
    """Ask once (the server's next answer is queued by the caller), answer the tool call, ask again; the call read
    and the reply to the second request."""
    model = ChatModel.from_name("vllm:scripted", base_url=server.url, retry=RetryPolicy(max_attempts=1))

    async def episode() -> tuple[ToolCall, Any]:
        async with model:
            messages: list[Any] = ["Who directed Ed Wood?"]
            first = await model.chat(messages, tools=[LOOKUP])
            call = first.tool_calls[0]
            messages += [first, tool_message(call.id, {"error": "no title given"})]
            return call, await model.chat(messages, tools=[LOOKUP])

    return asyncio.run(episode())


@pytest.mark.parametrize("arguments", [
    " ", "\n",                       # the inputs
    "", None, "\t \r\n",             # neighbours: empty, null, mixed whitespace
    '"{\\"title\\": \\"Ed Wood\\"}"',  # a neighbour: an object encoded twice, read as the object
    "{'title': broken",              # broken JSON: read as {} with a parse error
])
def test_a_strict_server_accepts_the_history_because_the_form_read_is_sent_back(model_server, arguments):
    model_server.strict_tool_arguments = True
    message = {"role": "assistant", "content": None,
               "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}]}
    model_server.answer(completion(message, finish_reason="tool_calls"))
    model_server.set_policy(["Ed Wood was directed by Tim Burton."])
    call, second = _converse(model_server)
    assert second.text == "Ed Wood was directed by Tim Burton."
    sent = model_server.requests[-1].body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == call.arguments
    assert call.raw_arguments == (arguments if arguments else "{}")    # the trajectory keeps what the model wrote
    if arguments is not None and arguments.strip() and "Ed Wood" in arguments:
        assert call.arguments == {"title": "Ed Wood"} and call.parse_error is None
    elif arguments is not None and "broken" in arguments:
        assert call.arguments == {} and call.parse_error is not None
    else:
        assert call.arguments == {} and call.parse_error is None and sent == "{}"


def test_arguments_that_are_a_json_object_are_sent_back_as_the_model_wrote_them():
    call = ToolCall.parse("c1", "lookup", '{"title":"Ed Wood"}')
    assert call.sent_arguments() == '{"title":"Ed Wood"}'
    assert ToolCall.parse("c1", "lookup", {"title": "Ed Wood"}).sent_arguments() == '{"title": "Ed Wood"}'


def test_a_history_built_by_hand_is_sent_in_the_form_read_too(model_server):
    """An agent that keeps the wire dicts itself (not ChatReply objects) replays blank or null arguments."""
    model_server.strict_tool_arguments = True
    history = [
        {"role": "user", "content": "Who directed Ed Wood?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "lookup", "arguments": " "}},
            {"id": "b", "type": "function", "function": {"name": "lookup", "arguments": None}},
            {"id": "c", "type": "function", "function": {"name": "lookup", "arguments": {"title": "Ed Wood"}}},
        ]},
        tool_message("a", "no title"), tool_message("b", "no title"), tool_message("c", "Tim Burton"),
    ]
    kept = json.dumps(history)
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url, retry=RetryPolicy(max_attempts=1))
    assert model.chat_sync(history, tools=[LOOKUP]).text
    sent = [call["function"]["arguments"] for call in model_server.requests[-1].body["messages"][1]["tool_calls"]]
    assert sent == ["{}", "{}", '{"title": "Ed Wood"}']
    assert json.dumps(history) == kept                                 # the caller's messages are not changed


def _blank_for_half(request: ChatRequest) -> MockReply:
    """The agent's model: a lookup with blank arguments for every second question (by its text), a lookup with a
    title for the others, then an answer."""
    if request.count("tool") == 0:
        question = str(request.messages[1]["content"])
        arguments = " " if len(question) % 2 else {"title": "Ed Wood"}
        return MockReply(tool_calls=[MockToolCall(name="context_lookup", arguments=arguments)])
    return MockReply(content='{"answer": "yes"}')


async def test_the_hotpotqa_agent_runs_every_item_against_a_strict_server(model_server, distractor_file, tmp_path):
    """The issue's setup: 8 items, about half of whose tool calls have blank arguments; before, those items became
    errors (HTTP 400 on their second request)."""
    model_server.strict_tool_arguments = True
    model_server.set_policy(_blank_for_half)
    benchmark = HotpotQABenchmark(distractor_file)
    spec = solution_spec("hotpotqa-agent", model="vllm:scripted", model_base_url=model_server.url,
                         benchmark=benchmark)
    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path)), limit=8,
                                 show=False)
    summary = await evaluator.run(spec)
    assert (summary.completed, summary.errors) == (8, 0)
    blank = [r for r in model_server.requests if r.body and any(
        call["function"]["arguments"] == "{}" for m in r.body["messages"] if m.get("role") == "assistant"
        for call in m.get("tool_calls") or [])]
    assert blank, "some items replayed blank arguments"
    records = [json.loads(p.read_text()) for p in tmp_path.glob("records/*/0.json")]
    errors = [step["error"] for r in records for step in r["trajectory"] if step.get("type") == "tool_call"]
    assert any(errors) and not all(errors)      # the blank calls failed as tool calls, and were fed back
