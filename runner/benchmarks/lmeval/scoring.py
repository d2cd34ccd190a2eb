"""A document scored as lm-evaluation-harness scores it: the task's filter ensembles applied to the document's
responses, then ``Task.process_results`` once per filter, each value kept under lm-eval's key ``<metric>,<filter>``
(``exact_match,strict-match``, ``acc,none``), exactly as ``lm_eval/evaluator.py`` does for every document.

The filters run on one document's instances at a time; every filter lm-eval ships maps each document's responses
on their own (``take_first``, ``regex``, ``majority_vote``...), so this is lm-eval's whole-task pass document by
document. A metric that lm-eval aggregates with anything but ``mean`` (perplexities, BLEU, F1 in some tasks, pass@k
dicts) is a ``CORPUS`` metric here: its per-document value is kept for lm-eval's aggregation and never averaged.
"""

from __future__ import annotations

import io
import pickle
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from runner.core.metric import MetricBase, MetricError, MetricResult, MetricType
from runner.core.solution import SolutionOutput

HEAVY = ("dataset", "_training_docs", "_fewshot_docs", "_instances", "sampler", "task_docs")
"""Attributes of an lm-eval ``Task`` that scoring does not read: the data and the built requests. A task without them
pickles in about 2 KB."""


class TaskScorer:
    """The parts of one lm-eval ``Task`` that score documents (its configuration, filter ensembles, metric functions
    and ``process_results``), light enough to travel with every item to a Ray worker.

    It pickles without :data:`HEAVY` and through ``cloudpickle`` with the modules of the user's own task files (lm-eval
    loads an ``include_path``'s ``utils.py`` under its file path as module name, which no worker can import) taken by
    value, so a ``!function utils.process_results`` scores on any worker.

    Args:
        task: the driver's lm-eval ``Task`` (configured).
    """

    def __init__(self, task: Any) -> None:
        self.task = task
        self.name: str = task.task_name
        aggregation = task.aggregation()
        self.filters: list[str] = [ensemble.name for ensemble in getattr(task, "_filters", [])] or ["none"]
        self.metrics: list[str] = list(aggregation)
        self.corpus: set[str] = {name for name, function in aggregation.items() if not _is_mean(function)}

    def keys(self) -> list[tuple[str, str]]:
        """``(metric, filter)`` of every value a document gets, filters outer, as lm-eval's results order them."""
        return [(metric, filter_name) for filter_name in self.filters for metric in self.metrics]

    def score(self, doc: dict[str, Any], requests: list[dict[str, Any]], resps: list[list[Any]]
              ) -> dict[str, tuple[dict[str, Any], list[Any]]]:
        """lm-eval's scoring of one document: filter -> (``process_results``'s values, the filtered responses).

        Args:
            doc: the document.
            requests: its requests (``request_type``, ``arguments``, ``idx``, ``repeats``), sorted by ``idx``.
            resps: each request's responses (a list of ``repeats`` of them), as the model class returned them.

        Raises:
            ValueError: responses that do not match the requests.
            Exception: whatever the task's filters or ``process_results`` raise.
        """
        from lm_eval.api.instance import Instance

        if len(resps) != len(requests):
            raise ValueError(f"{len(resps)} responses for {len(requests)} requests")
        instances = []
        for request, answers in zip(requests, resps):
            instance = Instance(request_type=request["request_type"], doc=doc, arguments=request["arguments"],
                                idx=request["idx"], metadata=(self.name, request["doc_id"], request["repeats"]))
            instance.resps = list(answers)
            instances.append(instance)
        for ensemble in getattr(self.task, "_filters", []):
            ensemble.apply(instances)
        scored = {}
        for filter_name in instances[0].filtered_resps:
            filtered = [instance.filtered_resps[filter_name] for instance in instances]
            scored[filter_name] = (self.task.process_results(doc, filtered), filtered)
        return scored

    def __deepcopy__(self, memo: dict[int, Any]) -> TaskScorer:
        # Scoring reads the task and changes nothing in it: a repeat's copy of a task shares its scorer.
        return self

    def __getstate__(self) -> dict[str, Any]:
        import cloudpickle

        state = {key: value for key, value in self.task.__dict__.items() if key not in HEAVY}
        for module in _task_file_modules():
            cloudpickle.register_pickle_by_value(module)
        buffer = io.BytesIO()
        cloudpickle.Pickler(buffer).dump((type(self.task), state))
        return {"name": self.name, "filters": self.filters, "metrics": self.metrics, "corpus": self.corpus,
                "task": buffer.getvalue()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        cls, attributes = pickle.loads(state.pop("task"))
        task = cls.__new__(cls)
        task.__dict__.update(attributes)
        for heavy in HEAVY:
            task.__dict__.setdefault(heavy, None)
        self.__dict__.update(state)
        self.task = task


def _is_mean(function: Any) -> bool:
    from lm_eval.api.metrics import mean

    return function is mean


def _task_file_modules() -> list[Any]:
    """The modules lm-eval loaded from task files outside its package (named by their file path: ``/x/utils``)."""
    return [module for name, module in list(sys.modules.items()) if name.startswith("/") and module is not None]


def task_file_modules(tasks: Iterable[Any]) -> list[str]:
    """The names of the task files' modules (``/x/utils``: lm-eval names a module it loads from a task folder by its
    file path) whose functions the configurations of ``tasks`` (lm-eval ``Task`` s) use: ``!function`` prompts,
    filters, ``process_results``..., in order of first use."""
    found: dict[str, None] = {}
    for task in tasks:
        for function in _functions(getattr(task, "config", None), depth=0):
            module = getattr(function, "__module__", None)
            if isinstance(module, str) and module.startswith("/"):
                found[module] = None
    return list(found)


def _functions(value: Any, depth: int) -> Iterator[Any]:
    """The callables inside a task's configuration (a dataclass, mappings, lists), a few levels deep."""
    if depth > 6 or value is None or isinstance(value, (str, bytes, int, float, bool)):
        return
    if callable(value) and not isinstance(value, type):
        yield value
        return
    if hasattr(value, "__dataclass_fields__"):  # lm-eval's TaskConfig is a dataclass and a dict
        items: Iterable[Any] = (getattr(value, name, None) for name in value.__dataclass_fields__)
    elif isinstance(value, dict):
        items = value.values()
    elif isinstance(value, (list, tuple, set)):
        items = value
    else:
        return
    for item in items:
        yield from _functions(item, depth + 1)


class DocScore:
    """lm-eval's scores of one document, computed once per item and shared by its metrics (a task's metrics and
    this object are copied together for each repeat, so repeats never share one).

    Args:
        scorer: the document's task.
        doc: the document.
        requests: its requests, as the item's input holds them.
    """

    def __init__(self, scorer: TaskScorer, doc: dict[str, Any], requests: list[dict[str, Any]]) -> None:
        self.scorer = scorer
        self.doc = doc
        self.requests = requests
        self._scored: tuple[int, dict[str, tuple[dict[str, Any], list[Any]]]] | None = None
        self.missed = False

    def of(self, solution: SolutionOutput) -> dict[str, tuple[dict[str, Any], list[Any]]]:
        """The scores of ``solution``'s responses (computed on the first call for that output).

        A document whose model call failed (no responses: the item is an error record) is scored as lm-eval scores
        a generation that came back empty, when all its requests are generations: each response is lm-eval's
        placeholder for a missing answer (``LMEVAL_MODEL_NONE_ANSWER_PLACEHOLDER``, ``""`` by default, what its API
        models put in for a reply without content), so it counts as a miss in every figure, lm-eval's
        ``results.json`` included (lm-eval#3244: a failed document had dropped out of the denominator). A document
        with a log-likelihood request has no such answer (lm-eval would stop): it is left out, and the headline
        says how many were.

        Raises:
            MetricError: the solution has no responses and the document asks for log-likelihoods.
            Exception: whatever lm-eval's scoring raises.
        """
        if self._scored is not None and self._scored[0] == id(solution):
            return self._scored[1]
        resps = solution.output.get("resps") if isinstance(solution.output, dict) else None
        if not isinstance(resps, list):
            if any(request["request_type"] != "generate_until" for request in self.requests):
                raise NoResponses("the document has no responses to score (its model call failed; see the record's "
                                  "error), and lm-eval has no miss for a log-likelihood: it is left out")
            from lm_eval.models.api_models import LMEVAL_MODEL_NONE_ANSWER_PLACEHOLDER

            resps = [[LMEVAL_MODEL_NONE_ANSWER_PLACEHOLDER] * max(1, request.get("repeats") or 1)
                     for request in self.requests]
        self.missed = not isinstance(solution.output, dict) or "resps" not in solution.output
        scored = self.scorer.score(self.doc, self.requests, resps)
        self._scored = (id(solution), scored)
        return scored


class NoResponses(MetricError):
    """A document whose model call gave no responses: nothing for lm-eval to score."""

    code = "no_responses"


class NotScored(MetricError):
    """lm-eval's ``process_results`` gave no value for this metric on this document (lm-eval then leaves the
    document out of that metric's aggregate, as this run does)."""

    code = "not_scored"


class LMEvalMetric(MetricBase):
    """One of lm-eval's values of a document, ``<metric>,<filter>``: ``NUMERICAL`` when lm-eval averages it, else
    ``CORPUS`` (its aggregation is over the whole task). Its metadata holds the filter's responses
    (``filtered_resps``), as lm-eval's ``--log_samples`` files do.

    Args:
        metric: lm-eval's metric name (``exact_match``).
        filter_name: the filter ensemble (``strict-match``; ``none`` for a task without filters).
        score: the document's shared :class:`DocScore`.
        corpus: lm-eval aggregates it with something else than ``mean``.
    """

    def __init__(self, metric: str, filter_name: str, score: DocScore, corpus: bool) -> None:
        super().__init__(name=f"{metric},{filter_name}",
                         metric_type=MetricType.CORPUS if corpus else MetricType.NUMERICAL,
                         description=f"lm-eval's {metric} after the {filter_name} filter")
        self.metric, self.filter_name, self.score = metric, filter_name, score

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        values, filtered = self.score.of(solution).get(self.filter_name, (None, None))
        if values is None or self.metric not in values:
            raise NotScored(f"lm-eval's process_results gave no {self.metric} for this document after the "
                            f"{self.filter_name} filter")
        metadata: dict[str, Any] = {"filtered_resps": filtered}
        if self.score.missed:
            metadata["scored_as_miss"] = "the model call failed: scored as an empty generation, as lm-eval does"
        return MetricResult(name=self.name, result=values[self.metric], metadata=metadata)


def metrics_for(scorer: TaskScorer, doc: dict[str, Any], requests: list[dict[str, Any]]) -> list[MetricBase]:
    """The metrics of one document: one :class:`LMEvalMetric` per ``(metric, filter)``, sharing one
    :class:`DocScore`."""
    shared = DocScore(scorer, doc, requests)
    return [LMEvalMetric(metric, filter_name, shared, metric in scorer.corpus) for metric, filter_name in scorer.keys()]
