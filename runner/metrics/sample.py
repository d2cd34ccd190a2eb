"""The library-neutral test case the DeepEval and Ragas adapters build, and the adapters' shared base.

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

import copy
import dataclasses
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.core.metric import MetricBase, MetricType
from runner.core.solution import SolutionOutput
from runner.core.trajectory import tool_calls
from runner.models import ChatModel


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


def snake_case(name: str) -> str:
    """``AnswerRelevancyMetric`` -> ``answer_relevancy`` (a trailing ``Metric`` dropped)."""
    name = re.sub(r"Metric$", "", name) or name
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def names_parameter(target: Any, parameter: str) -> bool:
    """Whether ``target`` (a class or function) names the parameter ``parameter`` (a ``**kwargs`` does not count:
    a metric that takes a judge says so by name)."""
    try:
        return parameter in inspect.signature(target).parameters
    except (TypeError, ValueError):
        return False


class AdapterMetric(MetricBase):
    """What the DeepEval and Ragas adapters share: building the library's metric and the sample per call.

    Args:
        metric: the library's metric as a class (built for every call with ``metric_kwargs`` plus the judge), or
            an instance (deep-copied for every call, since these metrics keep state from their last score).
            A class pickles by reference, so prefer it for Ray.
        sample: the task's side of the test case.
        name: the metric's name in records and reports; default ``<prefix>_<snake_case class name>``.
        judge: the judge model, given to a metric class whose constructor takes the library's model argument.
        read: the :data:`SampleReader` (default :func:`read_solution`).
        metric_kwargs: more constructor arguments for a metric class (e.g. ``threshold``).

    Raises:
        TypeError: ``metric_kwargs`` with a metric instance.
    """

    prefix = ""
    model_parameter = "model"

    def __init__(
        self,
        metric: Any,
        sample: EvalSample,
        *,
        name: str | None = None,
        judge: ChatModel | None = None,
        read: SampleReader | None = None,
        **metric_kwargs: Any,
    ) -> None:
        is_class = inspect.isclass(metric)
        if metric_kwargs and not is_class:
            raise TypeError("constructor arguments need a metric class, not an instance")
        label = metric.__name__ if is_class else type(metric).__name__
        super().__init__(name=name or f"{self.prefix}_{snake_case(label)}", metric_type=MetricType.NUMERICAL,
                         description=f"{self.prefix} {label}")
        self.metric = metric
        self.sample = sample
        self.judge = judge
        self.read = read or read_solution
        self.metric_kwargs = metric_kwargs

    def wrap_judge(self, judge: ChatModel) -> Any:
        """The library's model object around ``judge`` (adapters override)."""
        raise NotImplementedError

    def build(self) -> Any:
        """A fresh metric object for one call."""
        if not inspect.isclass(self.metric):
            return copy.deepcopy(self.metric)
        kwargs = dict(self.metric_kwargs)
        if self.judge is not None and self.model_parameter not in kwargs and names_parameter(self.metric,
                                                                                                self.model_parameter):
            kwargs[self.model_parameter] = self.wrap_judge(self.judge)
        return self.metric(**kwargs)

    def sample_for(self, solution: SolutionOutput) -> EvalSample:
        """The full test case: the task's side with the solution's side read in."""
        return dataclasses.replace(self.sample, **self.read(solution))
