"""The ``mock`` provider: the default policy, scripts, registered policies, determinism and usage."""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from runner.core.errors import ConfigError
from runner.core.usage import usage_scope
from runner.models import (
    DEFAULT_REPLY,
    ChatModel,
    ChatReply,
    ModelError,
    parse_json,
    register_mock_policy,
    schema_instance,
    tool_message,
)

TOOLS = [
    {"name": "search", "description": "Search titles.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer", "minimum": 1},
                                                     "mode": {"enum": ["fast", "exact"]}},
                    "required": ["query", "k", "mode"]}},
    {"name": "calculator", "description": "Evaluate arithmetic.",
     "parameters": {"type": "object", "properties": {"expression": {"type": "string", "minLength": 3}},
                    "required": ["expression"]}},
]


def chat(model: ChatModel, messages: Any, **options: Any) -> ChatReply:
    return asyncio.run(model.chat(messages, **options))


def test_the_default_policy_runs_one_tool_loop_then_answers() -> None:
    model = ChatModel.from_name("mock")
    first = chat(model, "find it", tools=TOOLS)
    call = first.tool_calls[0]
    assert (call.name, call.arguments, call.id) == ("search", {"query": "", "k": 1, "mode": "fast"}, "call_0_0")
    assert first.finish_reason == "tool_calls" and first.content is None
    second = chat(model, ["find it", first, tool_message(call.id, "no match")], tools=TOOLS)
    assert second.text == DEFAULT_REPLY and second.tool_calls == [] and second.finish_reason == "stop"


def test_the_default_policy_honours_tool_choice() -> None:
    model = ChatModel.from_name("mock")
    forced = chat(model, "compute", tools=TOOLS, tool_choice="calculator")
    assert forced.tool_calls[0].name == "calculator" and forced.tool_calls[0].arguments == {"expression": "xxx"}
    assert chat(model, "just talk", tools=TOOLS, tool_choice="none").text == DEFAULT_REPLY


class Answer(BaseModel):
    answer: str
    confidence: float = 0.5
    sources: list[str]


def test_the_default_policy_fills_a_requested_schema() -> None:
    model = ChatModel.from_name("mock")
    assert asyncio.run(model.chat_structured("answer", Answer)) == Answer(answer="", sources=[])
    assert chat(model, "json please", response_format="json").text == "{}"


def test_replies_depend_on_the_conversation_only() -> None:
    script = ["first", "second", "third"]
    model = ChatModel.from_name("mock", mock_policy=script)
    later = ["q", {"role": "assistant", "content": "first"}, "r"]
    # Asked out of order, from two instances: the same conversation always gets the same reply.
    assert chat(model, later).text == "second"
    assert chat(model, "q").text == "first"
    other = ChatModel.from_name("mock", mock_policy=script)
    assert chat(other, later).model_dump() == chat(model, later).model_dump()


def test_a_yaml_script_with_rules_and_replies(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "rules:\n"
        "  - match: 'Rate the answer'\n"
        "    scope: all\n"
        "    reply: '{\"score\": 1.0}'\n"
        "replies:\n"
        "  - tool_calls:\n"
        "      - name: search\n"
        "        arguments: {query: Scott Derrickson, k: 2, mode: exact}\n"
        "  - content: '{\"answer\": \"yes\"}'\n"
        "then: error\n",
        encoding="utf-8",
    )
    model = ChatModel.from_name(f"mock:{path}")
    assert model.name == f"mock:{path}"
    first = chat(model, "Same nationality?", tools=TOOLS)
    assert first.tool_calls[0].arguments == {"query": "Scott Derrickson", "k": 2, "mode": "exact"}
    conversation = ["Same nationality?", first, tool_message(first.tool_calls[0].id, "American")]
    assert parse_json(chat(model, conversation).text) == {"answer": "yes"}
    judge = [{"role": "system", "content": "Rate the answer from 0 to 1."}, {"role": "user", "content": "yes"}]
    assert parse_json(chat(model, judge).text) == {"score": 1.0}
    exhausted = [*conversation, {"role": "assistant", "content": "x"}, "more"]
    with pytest.raises(ModelError, match="no reply for assistant turn 3"):
        chat(model, exhausted)


def test_a_json_script_list_repeats_its_last_reply(tmp_path: Path) -> None:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(["one", {"content": "two", "usage": {"input_tokens": 7, "output_tokens": 3}}]))
    model = ChatModel.from_name(f"mock:{path}")
    history = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "one"},
               {"role": "user", "content": "b"}, {"role": "assistant", "content": "two"}, {"role": "user", "content": "c"}]
    reply = chat(model, history)
    assert reply.text == "two" and (reply.usage.input_tokens, reply.usage.output_tokens) == (7, 3)


def test_a_think_block_in_a_scripted_reply_is_reasoning_not_the_answer() -> None:
    model = ChatModel.from_name("mock", mock_policy=["<think>\n2 and 2 make 4\n</think>\n\n4", "done</think>5"])
    first = chat(model, "What is 2 + 2?")
    assert (first.content, first.reasoning) == ("4", "2 and 2 make 4")
    second = chat(model, ["What is 2 + 2?", first, "And 2 + 3?"])
    assert (second.content, second.reasoning) == ("5", "done")


def test_bad_scripts_and_unknown_policies_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        ChatModel.from_name(f"mock:{tmp_path / 'missing.yaml'}")
    bad = tmp_path / "bad.yaml"
    bad.write_text("replies:\n  - contnt: typo\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad.yaml'?: replies.0.*contnt"):
        ChatModel.from_name(f"mock:{bad}")
    with pytest.raises(ConfigError, match=r"unknown mock policy 'nosuch'; use mock:<one of .*default, echo"):
        ChatModel.from_name("mock:nosuch")


def test_registered_and_importable_policies() -> None:
    register_mock_policy("tests-yes", ["yes"])
    assert chat(ChatModel.from_name("mock:tests-yes"), "?").text == "yes"
    assert chat(ChatModel.from_name("mock:echo"), "say this").text == "say this"
    assert chat(ChatModel.from_name("mock:runner.models:echo_policy"), "via import").text == "via import"
    with pytest.raises(ConfigError, match="does not import"):
        ChatModel.from_name("mock:runner.models:no_such_policy")


def test_usage_is_recorded_per_item_under_the_models_name() -> None:
    model = ChatModel.from_name("mock:echo")

    async def two_calls() -> None:
        await model.chat("one two three")
        await model.chat("four five")

    with usage_scope() as usage:
        asyncio.run(two_calls())
    assert usage["mock:echo"].model_dump() == {"input_tokens": 5, "output_tokens": 5, "calls": 2}


def test_copies_of_a_model_are_the_model_and_it_pickles_for_ray_workers(tmp_path: Path) -> None:
    model = ChatModel.from_name("mock")
    assert copy.deepcopy({"judge": model})["judge"] is model
    script = tmp_path / "one.yaml"
    script.write_text("- scripted\n", encoding="utf-8")
    for name, question, answer in (("mock", "q", DEFAULT_REPLY), ("mock:echo", "q", "q"), (f"mock:{script}", "q", "scripted")):
        shipped = pickle.loads(pickle.dumps(ChatModel.from_name(name)))
        assert chat(shipped, question).text == answer


def test_chat_sync_works_inside_and_outside_an_event_loop() -> None:
    model = ChatModel.from_name("mock:echo")
    assert model.chat_sync("plain").text == "plain"

    async def from_a_loop() -> str:
        return model.chat_sync("nested").text

    assert asyncio.run(from_a_loop()) == "nested"


def test_schema_instance_follows_refs_and_unions() -> None:
    schema = {
        "type": "object",
        "properties": {"inner": {"$ref": "#/$defs/Inner"}, "maybe": {"anyOf": [{"type": "null"}, {"type": "integer"}]}},
        "required": ["inner", "maybe"],
        "$defs": {"Inner": {"type": "object", "properties": {"tags": {"type": "array", "minItems": 2,
                                                                      "items": {"type": "boolean"}}},
                            "required": ["tags"]}},
    }
    assert schema_instance(schema) == {"inner": {"tags": [False, False]}, "maybe": 0}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure!\n```json\n{"a": [1, 2]}\n```\nDone.', {"a": [1, 2]}),
        ('<think>maybe {"no": 0}</think>The verdict: {"score": 0.5} as asked', {"score": 0.5}),
        ("[1, 2]", [1, 2]),
    ],
)
def test_parse_json_finds_the_value_in_a_reply(text: str, value: Any) -> None:
    assert parse_json(text) == value


def test_parse_json_without_json_raises() -> None:
    with pytest.raises(ValueError, match="no JSON value"):
        parse_json("I cannot answer that.")
