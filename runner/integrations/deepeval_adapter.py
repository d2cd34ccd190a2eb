"""Any DeepEval metric as one of ours, judged by a model of :mod:`runner.models`.

Needs ``pip install 'ray-bench-runner[deepeval]'`` (deepeval 4.x). DeepEval's telemetry is opted out on import
(``DEEPEVAL_TELEMETRY_OPT_OUT``) unless the environment already says otherwise: a benchmark worker must not phone
home from every Ray actor.

Example::

    from deepeval.metrics import AnswerRelevancyMetric, ExactMatchMetric
    from runner.integrations import DeepEvalMetric, EvalSample
    from runner.models import ChatModel

    judge = ChatModel.from_name("vllm:Qwen/Qwen2.5-7B-Instruct")
    sample = EvalSample(user_input="Who wrote Dune?", reference="Frank Herbert")
    metrics = [DeepEvalMetric(ExactMatchMetric, sample),
               DeepEvalMetric(AnswerRelevancyMetric, sample, judge=judge, threshold=0.7)]
    task = Task(id="dune", input="Who wrote Dune?", metrics=metrics)
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
from typing import Any

from pydantic import BaseModel

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")

try:
    from deepeval.models import DeepEvalBaseLLM
    from deepeval.test_case import LLMTestCase, ToolCall
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        f"the DeepEval adapter needs deepeval ({exc}): pip install 'ray-bench-runner[deepeval]'"
    ) from exc

from runner.core.metric import MetricResult
from runner.core.solution import SolutionOutput
from runner.integrations.adapter import AdapterMetric
from runner.integrations.sample import EvalSample
from runner.models import ChatModel, user_message


class DeepEvalJudge(DeepEvalBaseLLM):
    """A :class:`ChatModel` behind DeepEval's model interface (``DeepEvalBaseLLM``), as BeeAI's ``DeepEvalLLM``
    wraps its ``ChatModel``.

    ``generate(prompt, schema=None)``: the reply text, or with a pydantic ``schema`` an instance of it
    (:meth:`ChatModel.chat_structured`, which DeepEval's metrics accept as they are). Calls run at temperature 0, as
    BeeAI's adapter does. Their tokens are recorded for the current item under the model's name.

    Args:
        model: the chat model, or its name (``provider:model``).
        base_url: the server, when ``model`` is a name.

    Raises (from calls):
        ModelError: the model failed for good after retries; StructuredOutputError: no valid ``schema`` instance.
    """

    def __init__(self, model: ChatModel | str, base_url: str | None = None) -> None:
        self.chat_model = ChatModel.from_name(model, base_url=base_url) if isinstance(model, str) else model
        super().__init__(self.chat_model.name)

    @classmethod
    def from_name(cls, name: str, base_url: str | None = None) -> DeepEvalJudge:
        """The judge for the model ``name`` (``provider:model``), as BeeAI's ``DeepEvalLLM.from_name``.

        Raises:
            ConfigError: an unknown provider, or a required API key not set.
        """
        return cls(name, base_url=base_url)

    def load_model(self, *args: Any, **kwargs: Any) -> ChatModel:
        """The wrapped chat model (nothing to load)."""
        return getattr(self, "chat_model", None)  # type: ignore[return-value]

    def generate(self, prompt: str, schema: type[BaseModel] | None = None, **_: Any) -> Any:
        """The reply to ``prompt`` (text, or a ``schema`` instance), for DeepEval's synchronous path."""
        if schema is not None:
            return self.chat_model.chat_structured_sync([user_message(prompt)], schema, temperature=0.0)
        return self.chat_model.chat_sync([user_message(prompt)], temperature=0.0).text

    async def a_generate(self, prompt: str, schema: type[BaseModel] | None = None, **_: Any) -> Any:
        """The reply to ``prompt`` (text, or a ``schema`` instance)."""
        if schema is not None:
            return await self.chat_model.chat_structured([user_message(prompt)], schema, temperature=0.0)
        return (await self.chat_model.chat([user_message(prompt)], temperature=0.0)).text

    def get_model_name(self, *args: Any, **kwargs: Any) -> str:
        """``provider:model``."""
        return self.chat_model.name

    def __reduce__(self) -> tuple[Any, ...]:
        return (DeepEvalJudge, (self.chat_model,))

    def __deepcopy__(self, memo: dict[int, Any]) -> DeepEvalJudge:
        return self


def _tool_calls(calls: list[dict[str, Any]]) -> list[ToolCall]:
    return [ToolCall(name=str(call.get("name")), input_parameters=call.get("arguments") or {},
                     output=call.get("result")) for call in calls]


def to_test_case(sample: EvalSample) -> LLMTestCase:
    """DeepEval's ``LLMTestCase`` of ``sample`` (field mapping: :mod:`runner.integrations.sample`)."""
    return LLMTestCase(
        input=sample.user_input,
        actual_output=sample.response,
        expected_output=sample.reference,
        retrieval_context=sample.retrieved_contexts,
        context=sample.reference_contexts,
        tools_called=_tool_calls(sample.tool_calls),
        expected_tools=_tool_calls(sample.reference_tool_calls),
        additional_metadata=sample.metadata or None,
    )


class DeepEvalMetric(AdapterMetric):
    """A DeepEval metric (any ``deepeval.metrics.BaseMetric`` on an ``LLMTestCase``) as one of our metrics.

    Each call builds the metric (see :class:`~runner.integrations.adapter.AdapterMetric`; the judge goes to its ``model``
    argument as a :class:`DeepEvalJudge`), builds the ``LLMTestCase`` and awaits ``a_measure`` (or runs ``measure``
    in a thread for a metric without async support). The result is DeepEval's ``score``; ``success``,
    ``threshold`` and ``reason`` go to the result's metadata.

    Raises (when called, so that the engine records a metric error):
        ValueError: DeepEval set the metric's ``error`` or gave no numeric score (e.g. a missing test-case field).
        JudgeScoreOutOfRange: a score outside ``score_range`` (default [0, 1], DeepEval's scale).
        ModelError: the judge failed for good.
    """

    prefix = "deepeval"
    model_parameter = "model"

    def wrap_judge(self, judge: ChatModel) -> DeepEvalJudge:
        """``judge`` as a :class:`DeepEvalJudge`."""
        return DeepEvalJudge(judge)

    async def __call__(self, solution: SolutionOutput) -> MetricResult:
        metric = self.build()
        case = to_test_case(self.sample_for(solution))
        takes_indicator = "_show_indicator" in inspect.signature(metric.a_measure).parameters
        options = {"_show_indicator": False} if takes_indicator else {}
        try:
            await metric.a_measure(case, **options)
        except NotImplementedError:
            await asyncio.to_thread(metric.measure, case, **options)
        score = getattr(metric, "score", None)
        error = getattr(metric, "error", None)
        if error:
            raise ValueError(f"DeepEval {type(metric).__name__}: {error}")
        if not isinstance(score, (int, float)) or isinstance(score, bool) or math.isnan(score):
            raise ValueError(f"DeepEval {type(metric).__name__} gave no score (got {score!r})")
        metadata = {key: getattr(metric, key, None) for key in ("success", "threshold", "reason")}
        return MetricResult(name=self.name, result=self.checked(float(score), metric, metadata), metadata=metadata)


DeepEvalLLM = DeepEvalJudge
"""BeeAI's name for :class:`DeepEvalJudge` (``beeai_framework.evaluation.adapters.DeepEvalLLM``): its page's
``DeepEvalLLM.from_name("openai:gpt-4o")`` and ``DeepEvalLLM(ChatModel.from_name(...))`` run as they are."""
