"""DeepEval and Ragas metrics on HotpotQA tasks: BeeAI's two experiments, or any metric class of either library.

``extra_metrics`` (``-B extra_metrics=...``) names them:

- ``deepeval``: the DeepEval metrics of BeeAI's ``python/examples/evaluation/deepeval/experiment.py`` (commit
  28150efd), with its thresholds: ``ExactMatchMetric(threshold=1.0)``, ``AnswerRelevancyMetric``,
  ``ContextualRecallMetric``, ``FaithfulnessMetric`` (``threshold=0.7``), ``ToolCorrectnessMetric(include_reason=
  False)``, ``ArgumentCorrectnessMetric(threshold=0.7, include_reason=True)``. Its three custom metrics are ours
  already: ``answer_llm_judge``, ``facts_similarity``, ``tool_usage``.
- ``ragas``: the Ragas metrics of BeeAI's ``ragas/experiment.py``: ``ContextPrecision``, ``ContextRecall``,
  ``ExactMatch``, ``AnswerAccuracy``, ``ToolCallAccuracy`` (``ragas.metrics.collections``).
- ``deepeval:<Class>`` / ``ragas:<Class>``: any class of ``deepeval.metrics`` / ``ragas.metrics.collections``
  (``ragas.metrics`` for the older kind), with default arguments.

The test case is built as in those experiments: question, the solution's answer, the gold answer, the solution's
supporting sentences as retrieved contexts, the gold supporting sentences as reference contexts, the tool calls of
the solution's trajectory, and one expected ``context_lookup`` per distinct supporting title (BeeAI lists one
``Wikipedia`` call per supporting title; we count a title once, as ``tool_usage`` does).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from typing import Any

from runner.benchmarks.hotpotqa.data import HotpotRecord
from runner.benchmarks.hotpotqa.judges import predicted_sentences
from runner.benchmarks.hotpotqa.metrics import CONTEXT_LOOKUP, parse_prediction
from runner.core.errors import BenchmarkError
from runner.core.metric import MetricBase
from runner.core.solution import SolutionOutput
from runner.integrations.adapter import names_parameter
from runner.integrations.sample import EvalSample, read_solution
from runner.models import ChatModel

FRAMEWORKS = {
    "deepeval": ("deepeval.metrics", "runner.integrations.deepeval_adapter", "DeepEvalMetric"),
    "ragas": ("ragas.metrics.collections", "runner.integrations.ragas_adapter", "RagasMetric"),
}

BEEAI_SETS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "deepeval": [
        ("ExactMatchMetric", {"threshold": 1.0}),
        ("AnswerRelevancyMetric", {"threshold": 0.7}),
        ("ContextualRecallMetric", {"threshold": 0.7}),
        ("FaithfulnessMetric", {"threshold": 0.7}),
        ("ToolCorrectnessMetric", {"include_reason": False}),
        ("ArgumentCorrectnessMetric", {"threshold": 0.7, "include_reason": True}),
    ],
    "ragas": [("ContextPrecision", {}), ("ContextRecall", {}), ("ExactMatch", {}), ("AnswerAccuracy", {}),
              ("ToolCallAccuracy", {})],
}


@dataclass(frozen=True)
class ExtraMetric:
    """One library metric to add to every task: the adapter class and the metric class with its arguments."""

    adapter: Any
    metric: Any
    kwargs: dict[str, Any] = field(default_factory=dict)


def _load(framework: str, class_name: str) -> ExtraMetric:
    metrics_module, adapter_module, adapter_name = FRAMEWORKS[framework]
    try:
        adapter = getattr(importlib.import_module(adapter_module), adapter_name)
        module = importlib.import_module(metrics_module)
    except ModuleNotFoundError as exc:
        missing = f"{exc.name} is missing" if exc.name else str(exc)
        raise BenchmarkError(f"extra metrics {framework!r} need {framework} ({missing}): install the extra, "
                             f"pip install 'ray-bench-runner[{framework}]' (in a checkout: pip install -e "
                             f"'.[{framework}]')") from None
    metric = getattr(module, class_name, None)
    if metric is None and framework == "ragas":
        metric = getattr(importlib.import_module("ragas.metrics"), class_name, None)
    if metric is None:
        raise BenchmarkError(f"{framework} has no metric {class_name!r}; check the name after '{framework}:'")
    return ExtraMetric(adapter, metric)


def parse_extra_metrics(spec: str | list[str] | None, judge: ChatModel | None) -> list[ExtraMetric]:
    """The library metrics ``spec`` names (see the module docstring), imported and checked.

    Raises:
        BenchmarkError: an unknown name, a library that is not installed, or a metric that takes a judge model
            when there is none.
    """
    names = [part.strip() for part in (spec.split(",") if isinstance(spec, str) else spec or []) if part.strip()]
    extras: list[ExtraMetric] = []
    for name in names:
        framework, _, class_name = name.partition(":")
        if framework not in FRAMEWORKS:
            raise BenchmarkError(f"unknown extra metrics {name!r}; use deepeval, ragas, deepeval:<Class> or "
                                 "ragas:<Class>")
        chosen = [(class_name, {})] if class_name else BEEAI_SETS[framework]
        for metric_name, kwargs in chosen:
            extra = _load(framework, metric_name)
            extras.append(ExtraMetric(extra.adapter, extra.metric, kwargs))
    for extra in extras:
        if judge is None and names_parameter(extra.metric, extra.adapter.model_parameter):
            raise BenchmarkError(f"{extra.metric.__name__} is judged by a model: pass --judge-model (or --model, "
                                 "or set EVAL_CHAT_MODEL_NAME)")
    return extras


def hotpotqa_sample(record: HotpotRecord) -> EvalSample:
    """The task's side of a test case for ``record`` (see the module docstring); ``metadata`` carries BeeAI's
    ``expected_facts``, ``expected_tool_usage`` and ``supporting_titles``."""
    titles = record.distinct_titles
    return EvalSample(
        user_input=record.question,
        reference=record.answer,
        reference_contexts=list(record.supporting_sentences) or None,
        reference_tool_calls=[{"name": CONTEXT_LOOKUP, "arguments": {"title": title}} for title in titles],
        metadata={"expected_facts": list(record.supporting_sentences),
                  "expected_tool_usage": {CONTEXT_LOOKUP: len(titles)}, "supporting_titles": titles},
    )


def read_hotpotqa(record: HotpotRecord, solution: SolutionOutput) -> dict[str, Any]:
    """The solution's side: its answer (``""`` when it gave none, as BeeAI does), its supporting sentences
    (:func:`~runner.benchmarks.hotpotqa.judges.predicted_sentences`) and its tool calls."""
    fields = read_solution(solution)
    fields["response"] = parse_prediction(solution.output, record).answer or ""
    fields["retrieved_contexts"] = predicted_sentences(solution.output, record)
    return fields


def framework_metrics(extras: list[ExtraMetric], record: HotpotRecord, judge: ChatModel | None) -> list[MetricBase]:
    """The adapted library metrics for one record."""
    if not extras:
        return []
    sample = hotpotqa_sample(record)
    read = functools.partial(read_hotpotqa, record)
    return [extra.adapter(extra.metric, sample, judge=judge, read=read, **extra.kwargs) for extra in extras]
