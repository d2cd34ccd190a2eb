"""The shape of tool calls in a solution's trajectory, shared by agents and the metrics that read them.

A tool call is recorded as the dict ``{"type": "tool_call", "name": str, "arguments": dict, "result": any,
"error": str | None}``; other trajectory entries (messages, notes) may have any JSON shape.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

TOOL_CALL = "tool_call"


def tool_call_step(name: str, arguments: dict[str, Any], result: Any = None, error: str | None = None) -> dict:
    """A trajectory entry for one tool call."""
    return {"type": TOOL_CALL, "name": name, "arguments": arguments, "result": result, "error": error}


def tool_calls(trajectory: Iterable[Any] | None) -> list[dict[str, Any]]:
    """The tool-call entries of ``trajectory``, in order."""
    return [step for step in trajectory or [] if isinstance(step, dict) and step.get("type") == TOOL_CALL]


def tool_usage(trajectory: Iterable[Any] | None, ignore: Iterable[str] = ("final_answer",)) -> dict[str, int]:
    """Tool name -> number of calls in ``trajectory`` (tools in ``ignore`` left out)."""
    skipped = set(ignore)
    return dict(Counter(step["name"] for step in tool_calls(trajectory) if step.get("name") not in skipped))
