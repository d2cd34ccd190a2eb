"""``mock:bfcl``: scripted replies that play a whole BFCL run offline, in BFCL's formats.

The policy answers as a model would, from what it is shown: in prompting mode the functions listed at the end of
BFCL's system prompt, in native mode the offered tools. Its replies are well formed but not meant to be right:

- a user's request: the first function with the required arguments at the smallest values their schema accepts
  (``[get_weather(city='')]``, or that call as a tool call);
- after the results of its calls (a tool message, or prompting mode's results message): a sentence with no call,
  which ends the turn;
- any other conversation: the mock provider's default policy.

With ``--model mock`` the ``bfcl`` solution uses this policy, so
``python -m runner --benchmark bfcl --data-dir ../shared/data/bfcl --model mock --sequential`` runs end to end with no
server. Deterministic: a reply depends only on the request.
"""

from __future__ import annotations

import json
from typing import Any

from runner.models import ChatRequest, MockReply, MockToolCall, content_text, default_policy, schema_instance
from runner.solutions.bfcl.prompts import AVAILABLE_TOOLS, PERSONA, convert_to_tool

DONE = "I have done what the functions allow."
_MARKER = AVAILABLE_TOOLS.split("{functions}")[0]


def _functions_in(system: str) -> list[dict[str, Any]]:
    """The function docs listed at the end of BFCL's system prompt (``[]`` when they do not parse)."""
    _, _, listed = system.rpartition(_MARKER)
    try:
        functions, _ = json.JSONDecoder().raw_decode(listed.strip())
    except ValueError:
        return []
    return functions if isinstance(functions, list) else []


def _smallest(tool: dict[str, Any]) -> dict[str, Any]:
    value = schema_instance(tool["function"].get("parameters") or {})
    return value if isinstance(value, dict) else {}


def _after_results(request: ChatRequest) -> bool:
    last = request.last_message() or {}
    if last.get("role") == "tool":
        return True
    return last.get("role") == "user" and content_text(last).startswith("[{'role': 'tool'")


def policy(request: ChatRequest) -> MockReply:
    """The ``mock:bfcl`` reply to ``request`` (see the module docstring)."""
    if request.tools:
        if _after_results(request):
            return MockReply(content=DONE)
        tool = request.tools[0]
        return MockReply(tool_calls=[MockToolCall(name=tool["function"]["name"], arguments=_smallest(tool))])
    first = request.messages[0]
    system = content_text(first) if first.get("role") == "system" else ""
    if not system.startswith(PERSONA):
        return default_policy(request)
    if _after_results(request):
        return MockReply(content=DONE)
    functions = _functions_in(system)
    if not functions:
        return MockReply(content=DONE)
    try:
        tool = convert_to_tool(functions[:1])[0]
    except (KeyError, TypeError, AttributeError):
        return MockReply(content=f"[{functions[0].get('name', 'f')}()]")
    arguments = ", ".join(f"{key}={value!r}" for key, value in _smallest(tool).items())
    return MockReply(content=f"[{functions[0]['name']}({arguments})]")
