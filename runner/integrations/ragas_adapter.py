"""Any Ragas metric as one of ours, judged by a model of :mod:`runner.models`.

Needs ``pip install 'ray-bench-runner[ragas]'`` (ragas 0.4.x). Ragas' usage tracking is turned off on import
(``RAGAS_DO_NOT_TRACK``) unless the environment already says otherwise.

Both kinds of Ragas metric work:

- the current ones (``ragas.metrics.collections``, e.g. ``ExactMatch``, ``AnswerAccuracy``, ``ToolCallAccuracy``,
  and metrics made with ``@numeric_metric``): ``await metric.ascore(**fields)`` with the fields its ``ascore``
  names, taken from the :class:`~runner.integrations.sample.EvalSample`; an LLM-judged one gets a :class:`RagasJudge`
  (Ragas' ``InstructorBaseRagasLLM`` interface) as ``llm``;
- the older ones (``ragas.metrics.base.SingleTurnMetric`` / ``MultiTurnMetric``, deprecated by Ragas 0.4):
  ``await metric.single_turn_ascore(SingleTurnSample)`` (or ``multi_turn_ascore``), an LLM-judged one with a
  :class:`RagasLegacyJudge` (``BaseRagasLLM``) as ``llm``.

Example::

    from ragas.metrics.collections import AnswerAccuracy, ExactMatch
    from runner.integrations import EvalSample, RagasMetric

    sample = EvalSample(user_input="Who wrote Dune?", reference="Frank Herbert")
    metrics = [RagasMetric(ExactMatch, sample), RagasMetric(AnswerAccuracy, sample, judge=judge)]
"""

from __future__ import annotations

import inspect
import math
import os
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

try:
    from langchain_core.outputs import Generation, LLMResult
    from ragas.dataset_schema import MultiTurnSample, SingleTurnSample
    from ragas.llms.base import BaseRagasLLM, InstructorBaseRagasLLM
    from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
    from ragas.metrics.base import Metric as LegacyMetric
    from ragas.metrics.base import MultiTurnMetric, SingleTurnMetric
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(f"the Ragas adapter needs ragas ({exc}): pip install 'ray-bench-runner[ragas]'") from exc

from runner.core.metric import MetricResult
from runner.core.solution import SolutionOutput
from runner.integrations.adapter import AdapterMetric
from runner.integrations.sample import EvalSample
from runner.models import ChatModel, user_message


class RagasJudge(InstructorBaseRagasLLM):
    """A :class:`ChatModel` behind Ragas' structured-output LLM interface (``InstructorBaseRagasLLM``), as BeeAI's
    ``InstructorRagasLLM`` wraps its ``ChatModel``: ``agenerate(prompt, response_model)`` returns an instance of
    the pydantic ``response_model`` (:meth:`ChatModel.chat_structured`, at temperature 0).

    Args:
        model: the chat model, or its name (``provider:model``).
        base_url: the server, when ``model`` is a name.

    Raises (from calls):
        StructuredOutputError: no valid instance after the repair attempt; ModelError: the model failed for good.
    """

    def __init__(self, model: ChatModel | str, base_url: str | None = None) -> None:
        self.chat_model = ChatModel.from_name(model, base_url=base_url) if isinstance(model, str) else model

    @classmethod
    def from_name(cls, name: str, base_url: str | None = None) -> RagasJudge:
        """The judge for the model ``name`` (``provider:model``), as BeeAI's ``InstructorRagasLLM.from_name``.

        Raises:
            ConfigError: an unknown provider, or a required API key not set.
        """
        return cls(name, base_url=base_url)

    async def agenerate(self, prompt: str, response_model: type[Any]) -> Any:
        """An instance of ``response_model`` answering ``prompt``."""
        return await self.chat_model.chat_structured([user_message(prompt)], response_model, temperature=0.0)

    def generate(self, prompt: str, response_model: type[Any]) -> Any:
        """:meth:`agenerate` for synchronous code."""
        return self.chat_model.chat_structured_sync([user_message(prompt)], response_model, temperature=0.0)

    def __deepcopy__(self, memo: dict[int, Any]) -> RagasJudge:
        return self


class RagasLegacyJudge(BaseRagasLLM):
    """A :class:`ChatModel` behind the older Ragas LLM interface (``BaseRagasLLM``) that metrics of
    ``ragas.metrics`` (deprecated in Ragas 0.4) take as ``llm``: the prompt's text in, ``n`` completions out.

    Args:
        model: the chat model, or its name.
    """

    def __init__(self, model: ChatModel | str) -> None:
        super().__init__()
        self.chat_model = ChatModel.from_name(model) if isinstance(model, str) else model

    async def agenerate_text(self, prompt: Any, n: int = 1, temperature: float | None = 0.01,
                             stop: list[str] | None = None, callbacks: Any = None) -> LLMResult:
        """``n`` completions of ``prompt`` (a LangChain ``PromptValue``)."""
        text = prompt.to_string() if hasattr(prompt, "to_string") else str(prompt)
        replies = [await self.chat_model.chat([user_message(text)], temperature=temperature, stop=stop)
                   for _ in range(n)]
        return LLMResult(generations=[[Generation(text=reply.text) for reply in replies]])

    def generate_text(self, prompt: Any, n: int = 1, temperature: float = 0.01, stop: list[str] | None = None,
                      callbacks: Any = None) -> LLMResult:
        """:meth:`agenerate_text` for synchronous code."""
        return self.chat_model._run_sync(lambda: self.agenerate_text(prompt, n, temperature, stop, callbacks))

    def is_finished(self, response: LLMResult) -> bool:
        """Always true: a reply cut at the token limit is left for the metric's parser to judge."""
        return True

    def __deepcopy__(self, memo: dict[int, Any]) -> RagasLegacyJudge:
        return self


def _messages(sample: EvalSample) -> list[Any]:
    """The conversation Ragas' tool metrics read: the question, one AI turn per tool call, each call's result."""
    messages: list[Any] = [HumanMessage(content=sample.user_input)]
    for call in sample.tool_calls:
        messages.append(AIMessage(content="", tool_calls=[ToolCall(name=str(call.get("name")),
                                                                   args=call.get("arguments") or {})]))
        result = call.get("result")
        messages.append(ToolMessage(content=result if isinstance(result, str) else str(result)))
    if sample.response is not None:
        messages.append(AIMessage(content=sample.response))
    return messages


def _reference_calls(sample: EvalSample) -> list[ToolCall]:
    return [ToolCall(name=str(call.get("name")), args=call.get("arguments") or {})
            for call in sample.reference_tool_calls]


def ascore_arguments(metric: Any, sample: EvalSample) -> dict[str, Any]:
    """The keyword arguments for ``metric.ascore``: each parameter it names, from the sample field of that name
    (``user_input`` as the conversation when the parameter's type is a list of messages,
    ``reference_tool_calls`` as Ragas ``ToolCall`` objects).

    Raises:
        ValueError: a required parameter the sample cannot fill.
    """
    arguments: dict[str, Any] = {}
    for name, parameter in inspect.signature(metric.ascore).parameters.items():
        if parameter.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
            continue
        if name == "user_input" and "Message" in str(parameter.annotation):
            value: Any = _messages(sample)
        elif name == "reference_tool_calls":
            value = _reference_calls(sample)
        else:
            value = getattr(sample, name, None)
        if value is None:
            if parameter.default is inspect.Parameter.empty:
                raise ValueError(f"Ragas {type(metric).__name__} needs {name!r}, which this sample has not")
            continue
        arguments[name] = value
    return arguments


def _legacy_sample(metric: Any, sample: EvalSample) -> SingleTurnSample | MultiTurnSample:
    if isinstance(metric, MultiTurnMetric) and not isinstance(metric, SingleTurnMetric):
        return MultiTurnSample(user_input=_messages(sample), reference=sample.reference,
                               reference_tool_calls=_reference_calls(sample) or None)
    return SingleTurnSample(user_input=sample.user_input, response=sample.response, reference=sample.reference,
                            retrieved_contexts=sample.retrieved_contexts,
                            reference_contexts=sample.reference_contexts)


class RagasMetric(AdapterMetric):
    """A Ragas metric (either kind, see the module docstring) as one of our metrics.

    Each call builds the metric (see :class:`~runner.integrations.adapter.AdapterMetric`; the judge goes to its ``llm``
    argument), scores the sample and returns Ragas' value; its ``reason``, when there is one, goes to the result's
    metadata.

    Raises (when called, so that the engine records a metric error):
        ValueError: a field the metric needs is missing, or Ragas gave no numeric value (``None`` or NaN, which is
            how Ragas reports a judge that failed).
        JudgeScoreOutOfRange: a value outside ``score_range`` (default: the metric's ``allowed_values``).
        ModelError: the judge failed for good.
    """

    prefix = "ragas"
    model_parameter = "llm"

    def wrap_judge(self, judge: ChatModel) -> Any:
        """``judge`` as the LLM interface the metric's kind takes."""
        legacy = inspect.isclass(self.metric) and issubclass(self.metric, LegacyMetric)
        return RagasLegacyJudge(judge) if legacy else RagasJudge(judge)

    async def __call__(self, solution: SolutionOutput) -> MetricResult:
        metric = self.build()
        sample = self.sample_for(solution)
        reason = None
        if isinstance(metric, LegacyMetric):
            legacy = _legacy_sample(metric, sample)
            if isinstance(legacy, MultiTurnSample):
                value: Any = await metric.multi_turn_ascore(legacy)
            else:
                value = await metric.single_turn_ascore(legacy)
        else:
            result = await metric.ascore(**ascore_arguments(metric, sample))
            value, reason = getattr(result, "value", result), getattr(result, "reason", None)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
            raise ValueError(f"Ragas {type(metric).__name__} gave no numeric value (got {value!r})")
        metadata = {"reason": reason} if reason else None
        return MetricResult(name=self.name, result=self.checked(float(value), metric, metadata), metadata=metadata)


InstructorRagasLLM = RagasJudge
"""BeeAI's name for :class:`RagasJudge` (``beeai_framework.evaluation.adapters.InstructorRagasLLM``): its page's
``InstructorRagasLLM.from_name("openai:gpt-4o")`` and ``InstructorRagasLLM(ChatModel.from_name(...))`` run as they
are."""
