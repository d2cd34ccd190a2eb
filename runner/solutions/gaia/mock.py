"""The ``mock:gaia`` reply policy: a deterministic episode of the GAIA baseline agent, so that ``--model mock`` runs
the benchmark end to end with no model server (in CI, in a demo, to check a cluster). Its answers are well-formed,
not good: it exercises every local tool.

Turns (the conversation alone decides, as for every mock policy):

1. no tool result yet: ``read_file`` of the attached file when the question has one; else ``calculator`` of the
   question's arithmetic expression when it has one; else the answer;
2. after reading a file whose text has numbers (reader marks such as ``## page 1`` left out): ``python`` printing
   their sum;
3. then ``FINAL ANSWER:`` with the last line ``python`` printed, else the calculator's result, else the file text's
   last word, else ``unknown``.

Any other conversation gets the default policy's reply.
"""

from __future__ import annotations

import json
import re
from typing import Any

from runner.models import ChatRequest, MockReply, MockToolCall, default_policy

AGENT_MARKER = "You are a general AI assistant."
ATTACHED = "Attached file:"
_EXPRESSION = re.compile(r"[\d(][\d\s.+\-*/()]*[\d)]")
_OPERATOR = re.compile(r"\d\s*[-+*/]\s*[\d(]")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def content_text(message: dict[str, Any]) -> str:
    """A message's text (``""`` for no text content)."""
    content = message.get("content")
    return content if isinstance(content, str) else ""


def arithmetic(question: str) -> str | None:
    """The longest arithmetic expression in ``question`` (``12 * (3 + 4)``), or ``None``."""
    found = [match.group().strip() for match in _EXPRESSION.finditer(question)]
    candidates = [text for text in found if _OPERATOR.search(text) and text.count("(") == text.count(")")]
    return max(candidates, key=len) if candidates else None


def numbers(text: str) -> list[str]:
    """The numbers of a file's text, reader marks (lines starting ``## ``) left out."""
    lines = [line for line in text.splitlines() if not line.startswith("## ")]
    return _NUMBER.findall("\n".join(lines))


def _results(request: ChatRequest) -> list[dict[str, Any]]:
    found = []
    for message in request.messages:
        if message.get("role") != "tool":
            continue
        try:
            value = json.loads(content_text(message))
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def policy(request: ChatRequest) -> MockReply:
    """The ``mock:gaia`` policy (see the module docstring)."""
    if AGENT_MARKER not in content_text(request.last_message("system") or {}):
        return default_policy(request)
    question = content_text(next((m for m in request.messages if m.get("role") == "user"), {}))
    results = _results(request)
    files = [r for r in results if isinstance(r.get("text"), str) and "reader" in r]
    printed = [r for r in results if "stdout" in r]
    computed = [r for r in results if "result" in r]
    can_call = bool(request.tools) and request.tool_choice != "none"
    if can_call and not results:
        if ATTACHED in question:
            return MockReply(tool_calls=[MockToolCall(name="read_file", arguments={})])
        expression = arithmetic(question.split(ATTACHED)[0])
        if expression is not None:
            return MockReply(tool_calls=[MockToolCall(name="calculator", arguments={"expression": expression})])
    if can_call and files and not printed:
        values = numbers(files[-1]["text"])
        if values:
            code = f"print(sum([{', '.join(values)}]))"
            return MockReply(tool_calls=[MockToolCall(name="python", arguments={"code": code})])
    answer = "unknown"
    lines = [line for line in printed[-1]["stdout"].splitlines() if line.strip()] if printed else []
    if lines:
        answer = lines[-1].strip()
    elif computed:
        answer = str(computed[-1]["result"])
    elif files and files[-1]["text"].split():
        answer = files[-1]["text"].split()[-1]
    return MockReply(content=f"I used the tools (scripted by the mock:gaia policy).\nFINAL ANSWER: {answer}")
