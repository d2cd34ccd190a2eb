"""The tool-calling loop of the built-in agents (``gaia-agent``, ``hotpotqa-agent``): native tool calling through
:mod:`runner.models`.

Loop: the model is called with the tools; each tool call is run and its result (or its error, including arguments
that are not valid JSON) is fed back; a reply without tool calls ends the loop when the agent's ``parse`` finds its
answer in the text (else the model is asked once more, with ``retry_prompt``). After ``max_turns`` calls with tools,
one last call without tools (``final_prompt``) must answer. Every assistant text and tool call lands in the
trajectory (:func:`runner.core.trajectory.tool_call_step`), where ``tool_usage`` counts the calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from runner.core.trajectory import tool_call_step
from runner.models import ChatModel, ChatReply, ToolCall, tool_message, user_message
from runner.solutions.tools import ToolError

A = TypeVar("A")

RunTool = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""``run_tool(name, arguments)``: the result of one tool call; raises :class:`ToolError` for an unknown tool or
arguments the tool refuses (the error is fed back to the model)."""


@dataclass
class LoopOutcome(Generic[A]):
    """How a loop ended.

    Attributes:
        answer: what ``parse`` found in the last reply (``None``: no answer, even after the last call).
        reply: the last reply.
        trajectory: the assistant's texts and every tool call (arguments, result, error), in order.
        turns: model calls made.
        stopped: ``answer`` (a reply without tool calls held the answer) or ``max_turns``.
    """

    answer: A | None = None
    reply: ChatReply | None = None
    trajectory: list[Any] = field(default_factory=list)
    turns: int = 0
    stopped: str = "answer"

    @property
    def meta(self) -> dict[str, Any]:
        """The solution output's ``meta``: ``turns``, ``stopped`` and the served ``model``."""
        return {"turns": self.turns, "stopped": self.stopped, "model": self.reply.model if self.reply else None}


async def run_tool_loop(model: ChatModel, messages: list[Any], tools: list[dict[str, Any]], run_tool: RunTool,
                        parse: Callable[[str | None], A | None], *, max_turns: int, retry_prompt: str,
                        final_prompt: str) -> LoopOutcome[A]:
    """Run the loop (see the module docstring) from ``messages`` (the system and user messages; the loop appends
    the conversation to it).

    Args:
        model: the chat model, called with ``tools`` (OpenAI-style definitions) but on the last call.
        run_tool: runs one call (see :data:`RunTool`).
        parse: the answer in a reply's text, or ``None``.
        max_turns: model calls with tools before the last call that must answer.
        retry_prompt: the user message after a reply without tool calls nor answer.
        final_prompt: the user message of the last call, once ``max_turns`` are spent.

    Raises:
        ModelError: the model failed for good (the task becomes an error record).
    """
    outcome: LoopOutcome[A] = LoopOutcome()
    while outcome.turns < max_turns and outcome.answer is None:
        reply = outcome.reply = await model.chat(messages, tools=tools)
        outcome.turns += 1
        messages.append(reply.to_message())
        _record_text(reply, outcome.trajectory)
        if not reply.tool_calls:
            outcome.answer = parse(reply.text)
            if outcome.answer is None:
                messages.append(user_message(retry_prompt))
            continue
        for call in reply.tool_calls:
            messages.append(await _run_call(call, run_tool, outcome.trajectory))
    if outcome.answer is None:
        outcome.stopped = "max_turns"
        reply = outcome.reply = await model.chat([*messages, user_message(final_prompt)])
        outcome.turns += 1
        _record_text(reply, outcome.trajectory)
        outcome.answer = parse(reply.text)
    return outcome


def _record_text(reply: ChatReply, trajectory: list[Any]) -> None:
    if reply.text:
        trajectory.append({"type": "message", "role": "assistant", "content": reply.text})


async def _run_call(call: ToolCall, run_tool: RunTool, trajectory: list[Any]) -> Any:
    """Run one tool call, record it in ``trajectory`` and return the tool message for the model."""
    arguments: dict[str, Any] = call.arguments
    result: Any = None
    error = call.parse_error
    if error is not None:
        arguments = {"raw_arguments": call.raw_arguments}
    else:
        try:
            result = await run_tool(call.name, call.arguments)
        except ToolError as exc:
            error = str(exc)
    trajectory.append(tool_call_step(call.name, arguments, result=result, error=error))
    return tool_message(call.id, result if error is None else {"error": error}, name=call.name)
