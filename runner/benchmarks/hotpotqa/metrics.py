"""HotpotQA metrics: the official twelve, and BeeAI's rule-based exact match and tool usage.

What a solution returns (its ``output``) may be a dict, a JSON string of one, or a bare answer string. The dict
follows the BeeAI example's answer format, plus the official one's supporting facts:
``{"answer", "supporting_facts": [[title, sent_id]], "supporting_titles", "supporting_sentences", "tool_used",
"reasoning_explanation"}``. When ``supporting_facts`` is absent, supporting sentences are mapped to
``(title, sent_id)`` by exact (whitespace-stripped) match against the task's context; a sentence found nowhere
counts as a wrong fact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from runner.benchmarks.hotpotqa import official
from runner.benchmarks.hotpotqa.data import HotpotRecord
from runner.core.metric import MetricBase, MetricResult, MetricType
from runner.core.solution import SolutionOutput
from runner.core.trajectory import tool_usage

CONTEXT_LOOKUP = "context_lookup"
"""The name of the tool that stands in for Wikipedia: it reads paragraphs of the task's own context by title."""
WIKIPEDIA_PAGE = "wikipedia_page"
"""The name of the live tool that reads a Wikipedia article by title (:mod:`runner.solutions.web`, ``-S
tools=wikipedia``): BeeAI's agent reads its articles with such a tool, so ``tool_usage`` counts its calls as
:data:`CONTEXT_LOOKUP` calls."""

ANSWER_METRICS = ("em", "f1", "prec", "recall")
SP_METRICS = ("sp_em", "sp_f1", "sp_prec", "sp_recall", "joint_em", "joint_f1", "joint_prec", "joint_recall")


@dataclass(frozen=True)
class Prediction:
    """What a solution claimed: an answer (``None`` if missing) and supporting facts (``None`` if missing)."""

    answer: str | None
    supporting_facts: list[tuple[Any, Any]] | None
    supporting_sentences: list[str]


def parse_prediction(output: Any, record: HotpotRecord) -> Prediction:
    """Read a solution's output (dict, JSON string, or bare answer) into a :class:`Prediction`."""
    if isinstance(output, str):
        try:
            parsed = json.loads(output)
        except ValueError:
            parsed = None
        output = parsed if isinstance(parsed, dict) else {"answer": output}
    if not isinstance(output, dict):
        return Prediction(answer=None if output is None else str(output), supporting_facts=None,
                          supporting_sentences=[])
    answer = output.get("answer", output.get("final_answer"))
    sentences = [str(s) for s in output.get("supporting_sentences") or []]
    facts = output.get("supporting_facts")
    if facts is not None:
        facts = [tuple(fact) for fact in facts if isinstance(fact, (list, tuple)) and len(fact) == 2]
    elif sentences and record.context is not None:
        facts = [_locate(sentence, record) for sentence in sentences]
    return Prediction(answer=None if answer is None else str(answer), supporting_facts=facts,
                      supporting_sentences=sentences)


def _locate(sentence: str, record: HotpotRecord) -> tuple[Any, Any]:
    wanted = sentence.strip()
    for title, sentences in record.context or []:
        for index, candidate in enumerate(sentences):
            if candidate.strip() == wanted:
                return (title, index)
    return ("", wanted)


class OfficialMetric(MetricBase):
    """One of the official HotpotQA scores of a record (``em``, ``f1``, ``sp_f1``, ``joint_f1``...), as computed by
    ``hotpot_evaluate_v1.py`` (see :mod:`runner.benchmarks.hotpotqa.official`). A failed solution scores 0, as a
    missing prediction does there."""

    def __init__(self, name: str, record: HotpotRecord) -> None:
        super().__init__(name=name, metric_type=MetricType.NUMERICAL,
                         description=f"HotpotQA official {name} (hotpot_evaluate_v1.py)")
        self.record = record

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        prediction = parse_prediction(solution.output, self.record)
        scores = official.score_record(prediction.answer, prediction.supporting_facts, self.record.answer,
                                       self.record.supporting_facts)
        return MetricResult(name=self.name, result=getattr(scores, self.name))


class ExactMatch(MetricBase):
    """BeeAI's exact match (DeepEval's ``ExactMatchMetric``): 1.0 when the answer equals the gold answer after
    stripping surrounding whitespace, case-sensitive; else 0.0."""

    def __init__(self, record: HotpotRecord) -> None:
        super().__init__(name="exact_match", metric_type=MetricType.NUMERICAL,
                         description="answer equals the gold answer (stripped, case-sensitive)")
        self.record = record

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        answer = parse_prediction(solution.output, self.record).answer
        return MetricResult(name=self.name, result=float(answer is not None and
                                                         answer.strip() == self.record.answer.strip()))


def tool_usage_score(actual: dict[str, int], expected: dict[str, int]) -> float:
    """BeeAI's tool-usage score in [0, 1]: ``0.75 × (tools both used and expected) / (tools used or expected)`` plus
    ``0.25 × (share of expected tools called exactly the expected number of times)``; 1.0 when neither side has a
    tool. Source: beeai-framework ``python/examples/evaluation/deepeval/tool_usage_metric.py``."""
    names = set(actual) | set(expected)
    if not names:
        return 1.0
    existence = 0.75 * sum(1 for name in names if name in actual and name in expected) / len(names)
    counts = [1.0 if actual.get(name, 0) == times else 0.0 for name, times in expected.items()]
    return existence + (0.25 * sum(counts) / len(counts) if counts else 0.25)


class ToolUsage(MetricBase):
    """BeeAI's tool usage: the tools the solution's trajectory called (``final_answer`` left out) against the
    expected ones: one :data:`CONTEXT_LOOKUP` per distinct supporting title (BeeAI's ``wiki_times``). Reads of a live
    article (:data:`WIKIPEDIA_PAGE`) count as :data:`CONTEXT_LOOKUP` calls: both stand for BeeAI's Wikipedia tool."""

    def __init__(self, record: HotpotRecord) -> None:
        super().__init__(name="tool_usage", metric_type=MetricType.NUMERICAL,
                         description="expected tools called the expected number of times (BeeAI)")
        self.expected = {CONTEXT_LOOKUP: len(record.distinct_titles)} if record.supporting_titles else {}

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        actual = tool_usage(solution.trajectory)
        if WIKIPEDIA_PAGE in actual:
            actual = dict(actual)
            actual[CONTEXT_LOOKUP] = actual.get(CONTEXT_LOOKUP, 0) + actual.pop(WIKIPEDIA_PAGE)
        return MetricResult(name=self.name, result=tool_usage_score(actual, self.expected),
                            metadata={"actual": actual, "expected": self.expected})
