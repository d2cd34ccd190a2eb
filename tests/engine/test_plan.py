"""The plan: task positions, a bad task id stopped before it runs, duplicate task ids told from the plan itself (on
a first run as on a resume), never run."""

import pytest
from tests.support.solutions import IdsBenchmark

from runner.core.errors import BenchmarkError
from runner.engine.plan import Plan
from runner.storage.keys import encode_key


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
