"""The AgentScope seed's "Creating Custom Benchmarks and Metrics" example, with only its import line changed,
run through both constructor forms of GeneralEvaluator."""

import json

import pytest

from runner import (
    BenchmarkBase,
    FileEvaluatorStorage,
    GeneralEvaluator,
    MetricBase,
    MetricResult,
    MetricType,
    SolutionOutput,
    Task,
)


class CheckEqual(MetricBase):
    def __init__(self, gt: float):
        super().__init__(
            name="exact-match",
            metric_type=MetricType.NUMERICAL,
            description="Check if output equals ground truth",
            categories=[],
        )
        self.gt = gt

    async def __call__(self, sol: SolutionOutput) -> MetricResult:
        is_correct = sol.output == self.gt
        return MetricResult(
            name=self.name,
            result=1.0 if is_correct else 0.0,
            message="correct" if is_correct else "incorrect",
        )


class ToyBenchmark(BenchmarkBase):
    def __init__(self):
        super().__init__(name="Toy", description="Demo benchmark")
        self.tasks = [
            Task(
                id="t1",
                input="What is 2+2?",
                ground_truth=4,
                metrics=[CheckEqual(4)],
                metadata={},
            ),
            Task(
                id="t2",
                input="What is 3*3?",
                ground_truth=9,
                metrics=[CheckEqual(9)],
                metadata={},
            ),
        ]

    def __iter__(self):
        yield from self.tasks


async def solve(task, pre_print_hook):
    """AgentScope's solution signature: (task, pre_print_hook); answers t1 right and t2 wrong."""
    return SolutionOutput(success=True, output=4, trajectory=[])


def sync_solve(task):
    return {"t1": 4, "t2": 9}[task.id]


async def test_seed_form_with_solution_func(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evaluator = GeneralEvaluator(benchmark=ToyBenchmark(), solution_func=solve, storage=FileEvaluatorStorage())
    summary = await evaluator.run()
    assert summary.metrics["exact-match"].mean == 0.5
    assert summary.completed == 2 and summary.n_tasks == 2
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("toy-")
    assert json.loads((run_dir / "summary.json").read_text())["metrics"]["exact-match"]["n"] == 2


async def test_agentscope_v1_form_with_repeats(tmp_path):
    evaluator = GeneralEvaluator(
        name="toy-eval", benchmark=ToyBenchmark(), n_repeat=2, storage=FileEvaluatorStorage(str(tmp_path)), n_workers=1
    )
    summary = await evaluator.run(sync_solve)
    assert summary.metrics["exact-match"].mean == 1.0
    assert summary.completed == 4 and summary.n_repeats == 2
    assert summary.pass_at_k["exact-match"] == {"1": 1.0, "2": 1.0}
    assert sorted(p.name for p in (tmp_path / "records" / "t1").iterdir()) == ["0.json", "1.json"]


async def test_rerun_on_the_same_storage_executes_nothing(tmp_path):
    calls = []

    def counted(task):
        calls.append(task.id)
        return 4

    for _ in range(2):
        evaluator = GeneralEvaluator(benchmark=ToyBenchmark(), storage=FileEvaluatorStorage(str(tmp_path)), show=False)
        await evaluator.run(counted)
    assert calls == ["t1", "t2"]
    assert evaluator.outcome.executed == 0 and evaluator.outcome.skipped == 2


async def test_no_solution_is_a_clear_error(tmp_path):
    from runner.core.errors import ConfigError

    with pytest.raises(ConfigError, match="no solution"):
        await GeneralEvaluator(benchmark=ToyBenchmark(), storage=FileEvaluatorStorage(str(tmp_path))).run()
