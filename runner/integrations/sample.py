"""The library-neutral test case the DeepEval and Ragas adapters build, and the default reader of a solution's side.

Field names are Ragas' (``SingleTurnSample``); the DeepEval adapter maps them onto ``LLMTestCase``:

==========================  ======================  ==========================================================
EvalSample                  DeepEval LLMTestCase    meaning
==========================  ======================  ==========================================================
``user_input``              ``input``               the question
``response``                ``actual_output``       the solution's answer
``reference``               ``expected_output``     the gold answer
``retrieved_contexts``      ``retrieval_context``   the passages the solution relied on
``reference_contexts``      ``context``             the gold passages
``tool_calls``              ``tools_called``        the tool calls in the solution's trajectory
``reference_tool_calls``    ``expected_tools``      the tool calls a correct solution makes
==========================  ======================  ==========================================================
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.core.solution import SolutionOutput
from runner.core.trajectory import tool_calls


@dataclass
class EvalSample:
    """One test case, in the words of both libraries (see the module docstring).

    Args:
        user_input: the question.
        response: the solution's answer (``None`` until read from a solution).
        reference: the gold answer.
        retrieved_contexts: passages the solution cited or retrieved.
        reference_contexts: gold passages.
        tool_calls: ``{"name", "arguments", "result"}`` for each tool call of the solution, in order.
        reference_tool_calls: ``{"name", "arguments"}`` for each expected tool call.
        metadata: anything else (DeepEval's ``additional_metadata``).
    """

    user_input: str
    response: str | None = None
    reference: str | None = None
    retrieved_contexts: list[str] | None = None
    reference_contexts: list[str] | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    reference_tool_calls: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


SampleReader = Callable[[SolutionOutput], dict[str, Any]]
"""Reads the solution's side of a sample: a function from the solution's output to :class:`EvalSample` fields
(``response``, ``retrieved_contexts``, ``tool_calls``...). It must pickle (a module-level function or a
``functools.partial`` of one) to reach Ray workers."""

_ANSWER_KEYS = ("answer", "response", "final_answer", "output")
_CONTEXT_KEYS = ("retrieved_contexts", "supporting_sentences", "contexts")


def read_solution(solution: SolutionOutput) -> dict[str, Any]:
    """The default :data:`SampleReader`.

    ``response``: a string output as it is; from a dict output its ``answer`` (or ``response``, ``final_answer``,
    ``output``), else the dict as JSON. ``retrieved_contexts``: a dict output's ``retrieved_contexts`` (or
    ``supporting_sentences``, ``contexts``). ``tool_calls``: the tool-call steps of the trajectory
    (:mod:`runner.core.trajectory`).
    """
    output = solution.output
    response: str | None
    contexts: list[str] | None = None
    if output is None or isinstance(output, str):
        response = output
    elif isinstance(output, dict):
        answer = next((output[key] for key in _ANSWER_KEYS if output.get(key) is not None), None)
        response = str(answer) if answer is not None else json.dumps(output, ensure_ascii=False, default=str)
        found = next((output[key] for key in _CONTEXT_KEYS if isinstance(output.get(key), list)), None)
        contexts = [str(item) for item in found] if found is not None else None
    else:
        response = json.dumps(output, ensure_ascii=False, default=str)
    calls = [{"name": step.get("name"), "arguments": step.get("arguments") or {}, "result": step.get("result")}
             for step in tool_calls(solution.trajectory)]
    return {"response": response, "retrieved_contexts": contexts, "tool_calls": calls}
