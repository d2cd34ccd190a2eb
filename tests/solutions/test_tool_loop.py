"""The agents' shared tool loop (runner.solutions.tool_loop): tool results and errors fed back, a retry for a reply
without an answer, and the last call without tools once max_turns are spent."""

from __future__ import annotations

from typing import Any

from runner.models import ChatReply, ToolCall
from runner.solutions.tool_loop import run_tool_loop
from runner.solutions.tools import ToolError


class Scripted:
    """A chat model that plays ``replies`` in order and keeps what it was sent."""

    def __init__(self, *replies: ChatReply) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[Any], Any]] = []

    async def chat(self, messages: list[Any], tools: Any = None) -> ChatReply:
        self.calls.append((list(messages), tools))
        return self.replies.pop(0)


async def _tool(name: str, arguments: dict[str, Any]) -> Any:
    if name != "add":
        raise ToolError(f"there is no tool {name!r}")
    return arguments["a"] + arguments["b"]


def _parse(text: str | None) -> str | None:
    return text.split("ANSWER:")[1].strip() if text and "ANSWER:" in text else None


async def test_results_and_errors_are_fed_back_and_a_reply_without_answer_is_retried():
    model = Scripted(
        ChatReply(content="let me add", tool_calls=[ToolCall(id="1", name="add", arguments={"a": 1, "b": 2}),
                                                    ToolCall(id="2", name="nope"),
                                                    ToolCall(id="3", name="add", raw_arguments="{", parse_error="bad")]),
        ChatReply(content="three, I think"),
        ChatReply(content="ANSWER: 3", model="served"),
    )
    messages: list[Any] = [{"role": "user", "content": "1+2?"}]
    outcome = await run_tool_loop(model, messages, [{"name": "add"}], _tool, _parse, max_turns=5,
                                  retry_prompt="RETRY", final_prompt="FINAL")
    assert outcome.answer == "3" and outcome.meta == {"turns": 3, "stopped": "answer", "model": "served"}
    steps = [(s.get("name"), s.get("result"), s.get("error")) for s in outcome.trajectory if s["type"] == "tool_call"]
    assert steps == [("add", 3, None), ("nope", None, "there is no tool 'nope'"), ("add", None, "bad")]
    assert [s["content"] for s in outcome.trajectory if s["type"] == "message"] == [
        "let me add", "three, I think", "ANSWER: 3"]
    assert model.calls[2][0][-1]["content"] == "RETRY" and all(tools for _, tools in model.calls)


async def test_the_last_call_has_no_tools_once_max_turns_are_spent():
    model = Scripted(ChatReply(tool_calls=[ToolCall(id="1", name="add", arguments={"a": 1, "b": 1})]),
                     ChatReply(content="no idea"))
    outcome = await run_tool_loop(model, [], [{"name": "add"}], _tool, _parse, max_turns=1, retry_prompt="RETRY",
                                  final_prompt="FINAL")
    assert outcome.answer is None and outcome.reply.content == "no idea"
    assert outcome.meta["turns"] == 2 and outcome.meta["stopped"] == "max_turns"
    last_messages, last_tools = model.calls[-1]
    assert last_messages[-1]["content"] == "FINAL" and last_tools is None
