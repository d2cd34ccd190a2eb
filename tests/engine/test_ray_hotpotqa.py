"""HotpotQA's agent, judge and DeepEval/Ragas adapter metrics on real Ray workers: the solution recipe and the tasks
(with their judge model and adapted metrics) travel to the actors, and every score equals the sequential run's."""

from __future__ import annotations

import json

from runner import FileEvaluatorStorage, GeneralEvaluator, WorkerSpec
from runner.benchmarks.hotpotqa import HotpotQABenchmark
from runner.registry import solution_spec
from runner.evaluators import RayEvaluator


async def test_the_hotpotqa_agent_scores_the_same_on_ray_as_sequentially(ray_session, shared_data, tmp_path):
    path = str(shared_data / "hotpotqa_dev_sample" / "hotpot_dev_distractor_v1_100.json")
    benchmark = HotpotQABenchmark(path, judge_model="mock", extra_metrics="deepeval:ExactMatchMetric,ragas:ExactMatch")
    spec = solution_spec("hotpotqa-agent", model="mock", benchmark=benchmark)
    summaries = {}
    for name, evaluator_class, options in (("sequential", GeneralEvaluator, {}),
                                           ("ray", RayEvaluator, {"worker": WorkerSpec(num_workers=2)})):
        evaluator = evaluator_class(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path / name)),
                                    limit=4, show=False, **options)
        summaries[name] = await evaluator.run(spec)
    sequential, ray = summaries["sequential"], summaries["ray"]
    assert ray.completed == 4 and ray.errors == 0
    for metric in ("joint_f1", "tool_usage", "answer_llm_judge", "facts_similarity", "deepeval_exact_match",
                   "ragas_exact_match"):
        assert ray.metrics[metric].mean == sequential.metrics[metric].mean, metric
    record = json.loads(next((tmp_path / "ray" / "records").glob("*/0.json")).read_text())
    assert record["worker"]["actor_id"] and record["usage"]["mock"]["calls"] == 5
    assert [step["name"] for step in record["trajectory"] if step["type"] == "tool_call"] == ["context_lookup"] * 3
