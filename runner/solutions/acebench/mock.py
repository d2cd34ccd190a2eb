"""``mock:acebench``: scripted replies that play a whole ACEBench run offline, in the official formats.

The policy reads which prompt it is answering from the system prompt's first line
(:func:`runner.solutions.acebench.prompts.prompt_kind`) and the functions from the end of a text-protocol prompt (or
the offered tools), as a model would. Its replies are well formed but not meant to be right:

- normal and preference: the first function with the smallest arguments its schema accepts
  (``[get_weather(city='')]``);
- special: the "limitations of the function" sentence (right on ``special_irrelevant`` only);
- agent, as the agent: the first function with the smallest arguments (as text, or as a tool call when tools are
  offered); after the execution results, ``finish conversation`` in multi-step, a question to the user in
  multi-turn;
- agent, as the simulated user: the instruction, then ``finish conversation``;
- any other prompt: the mock provider's default policy.

With ``--model mock`` the ``acebench`` solution uses this policy for both its models, so
``python -m runner --benchmark acebench --data-dir ../shared/data/acebench --model mock --sequential`` runs end to
end with no server. Deterministic: a reply depends only on the request.
"""

from __future__ import annotations

from typing import Any

from runner.solutions.acebench.prompts import functions_in, instruction_in, is_execution_message, prompt_kind
from runner.solutions.acebench.texts import FINISH
from runner.benchmarks.acebench.calls import format_calls
from runner.benchmarks.acebench.environment import tool_schema
from runner.models import ChatRequest, MockReply, MockToolCall, default_policy, schema_instance

IRRELEVANT = '["Due to the limitations of the function, I cannot solve this problem."]'
ANYTHING_ELSE = {"en": "Done. Is there anything else I can do for you?", "zh": "已完成。还有什么可以帮您？"}


def smallest_arguments(parameters: dict[str, Any]) -> dict[str, Any]:
    """The required arguments of a function, each at the smallest value its schema accepts."""
    value = schema_instance(parameters or {})
    return value if isinstance(value, dict) else {}


def _first_call(functions: list[dict[str, Any]]) -> str:
    if not functions:
        return "[]"
    schema = tool_schema(functions[0])["function"]
    return format_calls([(schema["name"], smallest_arguments(schema.get("parameters") or {}))])


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _after_results(request: ChatRequest) -> bool:
    last = request.last_message() or {}
    if last.get("role") == "tool":
        return True
    return last.get("role") == "user" and is_execution_message(_text(last))


def policy(request: ChatRequest) -> MockReply:
    """The ``mock:acebench`` reply to ``request`` (see the module docstring)."""
    first = request.messages[0]
    system = _text(first) if first.get("role") == "system" else ""
    found = prompt_kind(system)
    if found is None:
        return default_policy(request)
    kind, language = found
    if kind == "user_simulator":
        return MockReply(content=instruction_in(system) if request.count("assistant") == 0 else FINISH)
    if kind == "special":
        return MockReply(content=IRRELEVANT)
    if kind in ("normal", "preference"):
        return MockReply(content=_first_call(functions_in(system)))
    if _after_results(request):
        return MockReply(content=FINISH if kind == "multi_step" else ANYTHING_ELSE[language])
    if request.tools:
        tool = request.tools[0]["function"]
        return MockReply(tool_calls=[MockToolCall(name=tool["name"],
                                                  arguments=smallest_arguments(tool.get("parameters") or {}))])
    return MockReply(content=_first_call(functions_in(system)))
