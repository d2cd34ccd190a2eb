"""DeepEval metrics through our adapter and engine: a rule-based one (``ExactMatchMetric``) on the real HotpotQA
sample and on a task of our own, and an LLM-judged one (``AnswerRelevancyMetric``) whose judge is the scripted
OpenAI-compatible server (it stands in for a model, since none runs here). DeepEval's telemetry is off."""

from __future__ import annotations

import json
import os

import pytest
from deepeval.metrics import AnswerRelevancyMetric, ExactMatchMetric, GEval
from deepeval.test_case import SingleTurnParams

from runner import BenchmarkBase, FileEvaluatorStorage, GeneralEvaluator, SolutionOutput, Task
from runner.benchmarks.hotpotqa import HotpotQABenchmark
from runner.core.errors import BenchmarkError
from runner.registry import solution_spec
from runner.integrations import DeepEvalJudge, DeepEvalMetric, EvalSample
from runner.models import ChatModel, MockReply, MockRule, MockScript


def test_importing_the_adapter_opts_out_of_deepeval_telemetry():
    assert os.environ["DEEPEVAL_TELEMETRY_OPT_OUT"] == "1"


async def test_exact_match_through_the_engine_on_the_hotpotqa_sample(distractor_file, tmp_path):
    benchmark = HotpotQABenchmark(distractor_file, extra_metrics="deepeval:ExactMatchMetric")
    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path / "ref")), show=False)
    summary = await evaluator.run(solution_spec("reference", benchmark=benchmark))
    assert summary.metrics["deepeval_exact_match"].mean == 1.0 and summary.metrics["deepeval_exact_match"].n == 103

    def lower(task):
        return {"answer": task.ground_truth["answer"].lower()}

    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path / "low")),
                                 limit=10, show=False)
    summary = await evaluator.run(lower)
    # DeepEval's exact match is case-sensitive, like BeeAI's exact_match; the official EM is not
    assert summary.metrics["deepeval_exact_match"].mean == summary.metrics["exact_match"].mean
    assert summary.metrics["deepeval_exact_match"].mean < summary.metrics["em"].mean == 1.0


class _Capitals(BenchmarkBase):
    def __init__(self, metric_factory):
        super().__init__(name="capitals")
        self.metric_factory = metric_factory

    def __iter__(self):
        for country, capital in (("France", "Paris"), ("Japan", "Tokyo")):
            sample = EvalSample(user_input=f"What is the capital of {country}?", reference=capital)
            yield Task(id=country, input=sample.user_input, ground_truth=capital,
                       metrics=[self.metric_factory(sample)])


async def test_a_task_of_our_own_with_a_deepeval_metric_instance(tmp_path):
    benchmark = _Capitals(lambda sample: DeepEvalMetric(ExactMatchMetric(threshold=1.0), sample, name="em"))
    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path)), show=False)
    summary = await evaluator.run(lambda task: "Paris")
    assert summary.metrics["em"].mean == 0.5
    record = json.loads((tmp_path / "records").glob("*/0.json").__next__().read_text())
    assert record["metrics"][0]["metadata"]["threshold"] == 1.0


def _relevancy_script() -> MockScript:
    return MockScript(rules=[
        MockRule(match="generate a list of statements",
                 reply=MockReply(content=json.dumps({"statements": ["Paris is the capital.", "Paris has cafes."]}))),
        MockRule(match="verdict",
                 reply=MockReply(content=json.dumps({"verdicts": [{"verdict": "yes"}, {"verdict": "no"}]}))),
    ])


async def test_an_llm_judged_metric_is_judged_by_our_model_layer(model_server, tmp_path):
    model_server.set_policy(_relevancy_script())
    judge = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    benchmark = _Capitals(lambda sample: DeepEvalMetric(AnswerRelevancyMetric, sample, judge=judge,
                                                        threshold=0.7, include_reason=False))
    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path)), show=False)
    summary = await evaluator.run(lambda task: "Paris is the capital. Paris has cafes.")
    metric = summary.metrics["deepeval_answer_relevancy"]
    assert metric.mean == 0.5 and metric.n == 2                       # one relevant statement of two
    assert summary.usage["vllm:scripted"]["calls"] == 4              # statements + verdicts, per task
    record = json.loads(next((tmp_path / "records").glob("*/0.json")).read_text())
    assert record["metrics"][0]["metadata"]["success"] is False
    assert record["usage"]["vllm:scripted"]["calls"] == 2
    schemas = [request.response_format["json_schema"]["name"] for request in model_server.chat_requests]
    assert schemas[:2] == ["Statements", "Verdicts"]


async def test_a_judge_without_a_score_is_a_metric_error(model_server, tmp_path):
    model_server.set_policy(["not json at all"])
    judge = DeepEvalJudge("vllm:scripted", base_url=model_server.url)
    benchmark = _Capitals(lambda sample: DeepEvalMetric(AnswerRelevancyMetric(model=judge, include_reason=False),
                                                        sample))
    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path)), limit=1,
                                 show=False)
    summary = await evaluator.run(lambda task: "Paris")
    assert summary.metrics["deepeval_answer_relevancy"].errors == 1
    record = json.loads(next((tmp_path / "records").glob("*/0.json")).read_text())
    assert record["metrics"][0]["error"]["type"] == "StructuredOutputError"


def _geval(judge):
    return GEval(name="correctness", model=DeepEvalJudge(judge), evaluation_steps=["Compare it to the reference."],
                 evaluation_params=[SingleTurnParams.ACTUAL_OUTPUT, SingleTurnParams.EXPECTED_OUTPUT])


async def test_a_judge_on_another_scale_is_an_error_of_the_metric_never_a_score_above_one(model_server, tmp_path):
    """G-Eval asks its judge for 0 to 10 and divides by 10: a judge that answers 80 (of 100) gave 8.0."""
    model_server.set_policy([json.dumps({"reason": "matches the reference", "score": 80})])
    judge = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    benchmark = _Capitals(lambda sample: DeepEvalMetric(_geval(judge), sample, name="correctness"))
    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path)), show=False)
    summary = await evaluator.run(lambda task: task.ground_truth)
    metric = summary.metrics["correctness"]
    assert (metric.mean, metric.n, metric.unusable["judge_score_out_of_range"]) == (None, 0, 2)
    record = json.loads(next((tmp_path / "records").glob("*/0.json")).read_text())
    entry = record["metrics"][0]
    assert entry["error"]["code"] == "judge_score_out_of_range"
    assert "the judge's score 8 is outside the metric's range [0, 1]" in entry["error"]["message"]
    assert entry["metadata"]["library_metric"] == "GEval" and entry["metadata"]["reason"] == "matches the reference"

    model_server.set_policy([json.dumps({"reason": "matches the reference", "score": 8})])
    fine = await DeepEvalMetric(_geval(judge), EvalSample(user_input="Capital of France?", reference="Paris"))(
        SolutionOutput(output="Paris"))
    assert fine.result == pytest.approx(0.8)


def test_the_beeai_deepeval_set_needs_a_judge(distractor_file):
    with pytest.raises(BenchmarkError, match="AnswerRelevancyMetric is judged by a model"):
        HotpotQABenchmark(distractor_file, extra_metrics="deepeval")
    with pytest.raises(BenchmarkError, match="deepeval has no metric 'Nope'"):
        HotpotQABenchmark(distractor_file, extra_metrics="deepeval:Nope")
    names = {m.name for m in next(iter(HotpotQABenchmark(distractor_file, judge_model="mock",
                                                         extra_metrics="deepeval"))).metrics}
    assert {"deepeval_exact_match", "deepeval_answer_relevancy", "deepeval_contextual_recall",
            "deepeval_faithfulness", "deepeval_tool_correctness", "deepeval_argument_correctness"} <= names
