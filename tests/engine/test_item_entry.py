"""Both executors take every item through the one entry of its path, ``execute_one`` (engine/item/execute.py).

The sequential executor runs here as a run does; the Ray worker's actor class runs in this process too, without Ray
(only its runtime context is faked), so that a spy on the entry sees its calls. Each executor calls the entry once
per item, and both leave the same records, timings and workers aside: an executor that took a path of its own would
fail one or the other.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from runner import MetricBase, MetricType, SolutionOutput, Task
from runner.core.config import RunSettings
from runner.core.solution import SolutionSpec
from runner.engine.run_context import RunContext
from runner.engine.workload import WorkerSetup, Workload
from runner.engine.item import execute as execute_module
from runner.engine.plan import WorkItem
from runner.engine.progress import Progress
from runner.engine.sequential import SequentialExecutor
from runner.storage import ResultStore
from runner.traffic.control import TrafficControl

pytest.importorskip("ray")
from runner.engine.ray import worker as worker_module  # noqa: E402 - only where Ray is installed


class Exact(MetricBase):
    """1.0 when the output is the task's ground truth; raises on the task ``broken-metric``."""

    def __init__(self) -> None:
        super().__init__(name="exact", metric_type=MetricType.NUMERICAL)

    def __call__(self, solution: SolutionOutput) -> float:
        if solution.meta == {"task": "broken-metric"}:
            raise ValueError("metric bug")
        return float(solution.output == 4)


def solve(task: Task) -> SolutionOutput:
    """Every way an item can end: ok, a wrong answer, a raise, ``success=False``, a metric that raises."""
    if task.id == "raises":
        raise RuntimeError("solution bug")
    return SolutionOutput(success=task.id != "gives-up", output=4 if task.id != "wrong" else 5,
                          trajectory=[{"step": task.id}], meta={"task": task.id})


def items() -> list[WorkItem]:
    names = ["ok", "wrong", "raises", "gives-up", "broken-metric"]
    tasks = [Task(id=name, input=f"2+2 ({name})", ground_truth=4, metrics=[Exact()], tags={"category": name[0]})
             for name in names]
    return [WorkItem(task, repeat, index) for index, task in enumerate(tasks) for repeat in (0, 1)]


def spy_on_the_entry(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Replace ``execute_one`` wherever runner's modules hold it by a wrapper that notes each item it is called with,
    then calls it; the list of those items."""
    original, calls = execute_module.execute_one, []

    async def noted(item: WorkItem, site: Any, **options: Any) -> Any:
        calls.append((item.task.id, item.repeat))
        return await original(item, site, **options)

    holders = [module for name, module in sys.modules.items()
               if name.startswith("runner.") and vars(module).get("execute_one") is original]
    assert worker_module in holders and execute_module in holders
    for module in holders:
        monkeypatch.setattr(module, "execute_one", noted)
    return calls


async def through_sequential(store: ResultStore, settings: RunSettings) -> None:
    context = RunContext(None, SolutionSpec(solve), store, "sequential", settings)  # type: ignore[arg-type]
    executor = SequentialExecutor()
    await executor.start(WorkerSetup.single(context), TrafficControl(settings), None)
    progress = Progress(None, bar=False)
    try:
        await executor.execute(Workload.single(context, progress, items()))
    finally:
        progress.close()
        await executor.close()


class _Runtime:
    """What ``ray.get_runtime_context()`` tells an actor about itself."""

    def get_node_id(self) -> str:
        return "node-0"

    def get_actor_id(self) -> str:
        return "actor-0"


async def through_ray_worker(store: ResultStore, settings: RunSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module.ray, "get_runtime_context", _Runtime)
    context = RunContext(None, SolutionSpec(solve), store, "ray", settings)  # type: ignore[arg-type]
    worker = worker_module.EvalWorker(WorkerSetup.single(context), max_concurrency=2)
    acks, _ = await worker.run([(item, 1, False) for item in items()], 0)
    assert [(ack.task_id, ack.repeat, ack.written) for ack in acks] == [
        (item.task.id, item.repeat, True) for item in items()]


def comparable(store: ResultStore) -> dict[tuple[str, int], Any]:
    """The records by item, without what differs between two runs of one item: times, run id, worker, tracebacks
    (their frames say which thread called the solution)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: strip(part) for key, part in value.items() if key != "traceback"}
        if isinstance(value, list):
            return [strip(part) for part in value]
        return value

    volatile = {"run_id", "started_at", "finished_at", "timings", "worker", "write_id"}
    return {(record.task_id, record.repeat): strip(record.model_dump(mode="json", exclude=volatile))
            for record in store.iter_records()}


@pytest.mark.parametrize("limits", [{}, {"timeout": 30.0}], ids=["own-loop", "item-loop"])
async def test_both_executors_take_each_item_through_execute_one_once_and_record_it_alike(
        tmp_path, monkeypatch: pytest.MonkeyPatch, limits: dict[str, float]) -> None:
    """Without a time limit the sequential executor runs items in its own loop; with one, each on an item loop of
    its own. Either way, and on a Ray worker, each item enters ``execute_one`` once, and the records agree."""
    settings = RunSettings(**limits)
    calls = spy_on_the_entry(monkeypatch)
    expected = [(item.task.id, item.repeat) for item in items()]

    sequential = ResultStore(str(tmp_path / "sequential"))
    await through_sequential(sequential, settings)
    assert calls == expected
    calls.clear()
    ray_worker = ResultStore(str(tmp_path / "ray"))
    await through_ray_worker(ray_worker, settings, monkeypatch)
    assert sorted(calls) == sorted(expected)

    records = comparable(sequential)
    assert sorted(records) == sorted(expected)
    assert {key: record["status"] for key, record in records.items()} == {
        **{("ok", r): "ok" for r in (0, 1)}, **{("wrong", r): "ok" for r in (0, 1)},
        **{(name, r): "error" for name in ("raises", "gives-up", "broken-metric") for r in (0, 1)}}
    assert records == comparable(ray_worker)
