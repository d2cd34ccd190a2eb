"""What the DeepEval and Ragas adapters share: naming, building the library's metric for each call (with the
judge), and building the test case from the task's side and the solution's."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import re
from typing import Any

from runner.core.metric import JudgeScoreOutOfRange, MetricBase, MetricType
from runner.core.solution import SolutionOutput
from runner.integrations.sample import EvalSample, SampleReader, read_solution
from runner.models import ChatModel


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
        score_range: the scores the metric gives, inclusive; default: the range the library's metric declares
            (Ragas' ``allowed_values``), else [0, 1], the scale of DeepEval's and Ragas' metrics. A score outside it
            (a judge on another scale: G-Eval's judge answering 80 where 0 to 10 was asked for gives 8.0) is an
            error of the metric, ``judge_score_out_of_range``, never clamped.
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
        score_range: tuple[float, float] | None = None,
        **metric_kwargs: Any,
    ) -> None:
        is_class = inspect.isclass(metric)
        if metric_kwargs and not is_class:
            raise TypeError("constructor arguments need a metric class, not an instance")
        label = metric.__name__ if is_class else type(metric).__name__
        super().__init__(name=name or f"{self.prefix}_{snake_case(label)}", metric_type=MetricType.NUMERICAL,
                         description=f"{self.prefix} {label}")
        self.metric = metric
        self.label = label
        self.sample = sample
        self.judge = judge
        self.read = read or read_solution
        self.score_range = score_range
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

    def checked(self, score: float, metric: Any, metadata: dict[str, Any] | None) -> float:
        """``score`` of the library's ``metric`` if it is inside the range (:attr:`score_range`, else the one
        ``metric`` declares, else [0, 1]).

        Raises:
            JudgeScoreOutOfRange: it is not (the error keeps ``metadata``, e.g. the library's reason).
        """
        declared = getattr(metric, "allowed_values", None)
        if not (isinstance(declared, tuple) and len(declared) == 2
                and all(isinstance(bound, (int, float)) for bound in declared)):
            declared = None
        low, high = self.score_range or declared or (0.0, 1.0)
        if not low <= score <= high:
            raise JudgeScoreOutOfRange(score, low, high, {"library_metric": self.label, **(metadata or {})})
        return score

    def sample_for(self, solution: SolutionOutput) -> EvalSample:
        """The full test case: the task's side with the solution's side read in."""
        return dataclasses.replace(self.sample, **self.read(solution))
