"""Ragas metrics through our adapter and engine: rule-based ones (``ExactMatch``, and ``ToolCallAccuracy`` over the
agent's trajectory) on the real HotpotQA sample, and LLM-judged ones (``AnswerAccuracy``; the older
``ragas.metrics`` kind too) whose judge is the scripted OpenAI-compatible server (it stands in for a model, since
none runs here). Ragas' usage tracking is off."""

from __future__ import annotations

import json
import os

import pytest
from ragas.metrics.collections import AnswerAccuracy, ExactMatch
from ragas.metrics.collections.base import BaseMetric
from ragas.metrics.result import MetricResult as RagasResult

from runner import BenchmarkBase, FileEvaluatorStorage, GeneralEvaluator, SolutionOutput, Task
from runner.benchmarks.hotpotqa import HotpotQABenchmark
from runner.core.metric import JudgeScoreOutOfRange
from runner.registry import solution_spec
from runner.integrations import EvalSample, RagasLegacyJudge, RagasMetric
from runner.models import ChatModel


def test_importing_the_adapter_turns_ragas_tracking_off():
    assert os.environ["RAGAS_DO_NOT_TRACK"] == "true"


async def test_rule_based_metrics_through_the_engine_on_the_hotpotqa_sample(distractor_file, tmp_path):
    benchmark = HotpotQABenchmark(distractor_file, extra_metrics="ragas:ExactMatch,ragas:ToolCallAccuracy")
    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path / "ref")), show=False)
    summary = await evaluator.run(solution_spec("reference", benchmark=benchmark))
    assert summary.metrics["ragas_exact_match"].mean == 1.0 and summary.metrics["ragas_exact_match"].n == 103
    # the reference trajectory reads each supporting title once, as expected
    assert summary.metrics["ragas_tool_call_accuracy"].mean == 1.0

    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path / "mock")),
                                 limit=5, show=False)
    summary = await evaluator.run(solution_spec("hotpotqa-agent", model="mock", benchmark=benchmark))
    # the mock agent searches once and reads two (not always the right) titles
    assert summary.metrics["ragas_tool_call_accuracy"].mean < 1.0
    assert summary.metrics["ragas_exact_match"].mean == summary.metrics["exact_match"].mean


class _Capitals(BenchmarkBase):
    def __init__(self, judge):
        super().__init__(name="capitals")
        self.judge = judge

    def __iter__(self):
        for country, capital in (("France", "Paris"), ("Japan", "Tokyo")):
            sample = EvalSample(user_input=f"What is the capital of {country}?", reference=capital)
            yield Task(id=country, input=sample.user_input, ground_truth=capital,
                       metrics=[RagasMetric(AnswerAccuracy, sample, judge=self.judge),
                                RagasMetric(ExactMatch, sample)])


async def test_an_llm_judged_metric_is_judged_by_our_model_layer(model_server, tmp_path):
    model_server.set_policy(['{"rating": 2}'])
    judge = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    evaluator = GeneralEvaluator(benchmark=_Capitals(judge), storage=FileEvaluatorStorage(str(tmp_path)), show=False)
    summary = await evaluator.run(lambda task: "Paris")
    assert summary.metrics["ragas_answer_accuracy"].mean == 0.5      # both judges say 2 of 4
    assert summary.metrics["ragas_exact_match"].mean == 0.5
    assert summary.usage["vllm:scripted"]["calls"] == 4              # two judge prompts per task
    record = json.loads(next((tmp_path / "records").glob("*/0.json")).read_text())
    assert record["usage"]["vllm:scripted"]["calls"] == 2
    assert model_server.chat_requests[0].response_format["json_schema"]["name"] == "AnswerAccuracyOutput"


async def test_a_failing_ragas_judge_is_a_metric_error(model_server, tmp_path):
    model_server.set_policy(["no rating here"])
    judge = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    evaluator = GeneralEvaluator(benchmark=_Capitals(judge), storage=FileEvaluatorStorage(str(tmp_path)), limit=1,
                                 show=False)
    summary = await evaluator.run(lambda task: "Paris")
    assert summary.metrics["ragas_answer_accuracy"].errors == 1
    assert summary.metrics["ragas_exact_match"].mean == 1.0


async def test_the_older_kind_of_ragas_metric_with_the_legacy_judge(model_server):
    from ragas.metrics import AspectCritic

    model_server.set_policy(['{"reason": "it names the capital", "verdict": 1}'])
    judge = RagasLegacyJudge(ChatModel.from_name("vllm:scripted", base_url=model_server.url))
    sample = EvalSample(user_input="What is the capital of France?", reference="Paris")
    metric = RagasMetric(AspectCritic(name="answers", definition="Does it answer the question?", llm=judge), sample)
    result = await metric(SolutionOutput(output="Paris"))
    assert (result.name, result.result) == ("ragas_aspect_critic", 1.0)
    prompt = model_server.chat_requests[0].messages[-1]["content"]
    assert "Does it answer the question?" in prompt and "Paris" in prompt


class _LengthScore(BaseMetric):
    """A Ragas metric on the scale it declares: the answer's length, times ``factor``."""

    def __init__(self, allowed_values=(0.0, 1.0), factor=1.0):
        super().__init__(name="length_score", allowed_values=allowed_values)
        self.factor = factor

    async def ascore(self, response: str) -> RagasResult:
        return RagasResult(value=len(response) * self.factor)


async def test_a_value_outside_the_declared_range_is_an_error_of_the_metric():
    sample = EvalSample(user_input="What is the capital of France?", reference="Paris")
    paris = SolutionOutput(output="Paris")
    with pytest.raises(JudgeScoreOutOfRange, match=r"the judge's score 5 is outside the metric's range \[0, 1\]"):
        await RagasMetric(_LengthScore(), sample)(paris)
    assert (await RagasMetric(_LengthScore(allowed_values=(0, 10)), sample)(paris)).result == 5.0
    with pytest.raises(JudgeScoreOutOfRange, match=r"score -5 is outside the metric's range \[0, 10\]"):
        await RagasMetric(_LengthScore(allowed_values=(0, 10), factor=-1), sample)(paris)
    assert (await RagasMetric(_LengthScore(), sample, score_range=(0, 5))(paris)).result == 5.0
