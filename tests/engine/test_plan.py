"""The plan: task positions, a bad task id stopped before it runs, duplicate task ids told from the plan itself (on
a first run as on a resume), never run; what is left to run, as a resume's ``run.start`` line says it."""

import asyncio

import pytest
import structlog
from tests.support.solutions import IdsBenchmark

from runner.benchmarks.toy import ToyBenchmark
from runner.core.errors import BenchmarkError
from runner.engine.plan import Plan
from runner.evaluators import GeneralEvaluator
from runner.storage.keys import encode_key
from runner.storage.store import ResultStore


def test_items_carry_the_task_position_within_the_limit():
    plan = Plan(IdsBenchmark("a,b,c,d"), repeats=2, limit=3)
    assert [(i.task.id, i.repeat, i.index) for i in plan] == [
        ("a", 0, 0), ("a", 1, 0), ("b", 0, 1), ("b", 1, 1), ("c", 0, 2), ("c", 1, 2)]
    assert plan.n_tasks == 3 and plan.exhausted


def test_an_empty_task_id_stops_the_plan_with_its_position():
    plan = iter(Plan(IdsBenchmark("a,b,,c"), repeats=1))
    assert [next(plan).task.id, next(plan).task.id] == ["a", "b"]
    with pytest.raises(BenchmarkError, match=r"^task at position 2 \(0-based\) of benchmark 'ids': a task needs a "
                                             r"non-empty id; fix the benchmark and rerun to resume"):
        next(plan)


@pytest.mark.parametrize("done", [set(), {(encode_key("a"), 0), (encode_key("b"), 0)}], ids=["first run", "resume"])
def test_a_duplicate_task_id_is_counted_by_the_plan_and_not_run(done):
    plan = Plan(IdsBenchmark("a,b,a,c,b"), repeats=2, done=done)
    planned = [(i.task.id, i.repeat, i.index) for i in plan]
    first_run = [("a", 0, 0), ("a", 1, 0), ("b", 0, 1), ("b", 1, 1)]
    assert planned == [item for item in first_run if (encode_key(item[0]), item[1]) not in done] + [
        ("c", 0, 3), ("c", 1, 3)]
    assert (plan.n_tasks, plan.duplicate_tasks, plan.skipped) == (5, 2, len(done))


def test_a_resume_says_what_is_left_to_run(tmp_path):
    """Issue 37: a resume logged ``already_done 10, to_run 14`` and ran 4 (the plan counted the finished items after
    it had passed them, and so forgot them)."""
    def run(limit: int) -> list[dict]:
        evaluator = GeneralEvaluator(benchmark=ToyBenchmark(n_tasks=7), n_repeat=2, storage=str(tmp_path / "run"),
                                     solution_func=lambda task: 0, limit=limit, show=False)
        with structlog.testing.capture_logs() as logs:
            asyncio.run(evaluator.run())
        return [entry for entry in logs if entry["event"] == "run.start"]

    assert [(line["already_done"], line["to_run"]) for line in run(5)] == [(0, 10)]
    assert [(line["already_done"], line["to_run"]) for line in run(7)] == [(10, 4)]
    assert len(list(ResultStore(str(tmp_path / "run")).iter_records())) == 14
