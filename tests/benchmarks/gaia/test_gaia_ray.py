"""GAIA on real Ray workers: the tasks (with their attachments) and the agent's recipe travel to the actors, the
Python tool runs there, and every score and answer equals the sequential run's."""

from __future__ import annotations

import json

from runner import FileEvaluatorStorage, GeneralEvaluator, WorkerSpec
from runner.benchmarks.gaia import GAIABenchmark
from runner.evaluators import RayEvaluator
from runner.registry import solution_spec
from tests.support.gaia_sample import MOCK_ACCURACY, MOCK_ANSWERS


async def test_the_gaia_agent_scores_the_same_on_ray_as_sequentially(ray_session, gaia_root, tmp_path):
    benchmark = GAIABenchmark(str(gaia_root))
    spec = solution_spec("gaia-agent", model="mock", benchmark=benchmark)
    summaries = {}
    for name, evaluator_class, options in (("sequential", GeneralEvaluator, {}),
                                           ("ray", RayEvaluator, {"worker": WorkerSpec(num_workers=2)})):
        evaluator = evaluator_class(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path / name)),
                                    show=False, **options)
        summaries[name] = await evaluator.run(spec)
    sequential, ray = summaries["sequential"], summaries["ray"]
    assert ray.completed == 6 and ray.errors == 0
    assert ray.score == sequential.score == MOCK_ACCURACY["overall"]
    assert ray.by_category == sequential.by_category
    lines = [json.loads(line) for line in (tmp_path / "ray" / "submission.jsonl").read_text().splitlines()]
    assert {line["task_id"]: line["model_answer"] for line in lines} == MOCK_ANSWERS
    record = json.loads((tmp_path / "ray" / "records" / "l2-sales" / "0.json").read_text())
    assert record["worker"]["actor_id"]
    assert [step["name"] for step in record["trajectory"] if step["type"] == "tool_call"] == ["read_file", "python"]
