"""RayEvaluator on a real local Ray: constructor forms, worker specs, faults, and equivalence with --sequential."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
from tests.engine import ray_solutions

from runner import FileEvaluatorStorage, GeneralEvaluator, RayEvaluator, ResultStore, SolutionSpec, WorkerSpec
from runner.solutions.calculator import calculator
from runner.benchmarks.toy import ToyBenchmark
from runner.core.errors import ConfigError

pytestmark = pytest.mark.usefixtures("ray_session")


def records(store: ResultStore) -> dict[tuple[str, int], Any]:
    """Every stored record by (task id, repeat)."""
    return {(r.task_id, r.repeat): r for r in store.iter_records()}


def test_seed_example_runs_on_ray(tmp_path: Path) -> None:
    """The seed's form: RayEvaluator(benchmark=..., solution_func=..., storage=..., max_workers=N); await run()."""
    evaluator = RayEvaluator(
        benchmark=ToyBenchmark(n_tasks=20),
        solution_func=ray_solutions.seed_solve,
        storage=FileEvaluatorStorage(str(tmp_path / "run")),
        max_workers=2,
        show=False,
    )
    summary = asyncio.run(evaluator.run())
    assert summary.score == 1.0
    assert summary.completed == 20
    stored = records(evaluator.storage)
    assert len(stored) == 20
    assert {r.worker["actor_id"] for r in stored.values()} <= {w["actor_id"] for w in evaluator.executor.workers}
    assert evaluator.executor.size == 2
    assert 1 <= len(evaluator.executor.workers) <= 2


def test_agentscope_v1_form_with_repeats(tmp_path: Path) -> None:
    """AgentScope v1's form: RayEvaluator(name, benchmark, n_repeat, storage, n_workers), then run(solution)."""
    evaluator = RayEvaluator("toy-v1", ToyBenchmark(n_tasks=6), 2, FileEvaluatorStorage(str(tmp_path / "run")), 1,
                             show=False)
    assert evaluator.worker.num_workers == 1
    summary = asyncio.run(evaluator.run(calculator))
    assert summary.completed == 12
    assert sorted(records(evaluator.storage)) == [(f"toy-{i:03d}", r) for i in range(6) for r in (0, 1)]
    assert evaluator.executor.size == 1
    assert len(evaluator.executor.workers) == 1


def test_worker_spec_reaches_ray(tmp_path: Path) -> None:
    """num_cpus, num_gpus, memory, custom resources and accelerator type are what Ray assigns to each actor."""
    evaluator = RayEvaluator(
        benchmark=ToyBenchmark(n_tasks=8),
        solution_func=calculator,
        storage=FileEvaluatorStorage(str(tmp_path / "run")),
        worker=WorkerSpec(num_workers=2, max_concurrency=3),
        num_cpus=0.5,
        num_gpus=0.5,
        memory="64MiB",
        resources={"custom": 1},
        accelerator_type="T4",
        show=False,
    )
    summary = asyncio.run(evaluator.run())
    assert summary.score == 1.0
    workers = evaluator.executor.workers
    assert evaluator.executor.size == 2
    assert 1 <= len(workers) <= 2
    for worker in workers:
        assigned = worker["resources"]
        assert assigned["CPU"] == 0.5
        assert assigned["GPU"] == 0.5
        assert assigned["custom"] == 1.0
        assert assigned["accelerator_type:T4"] == pytest.approx(0.001)
        assert assigned["memory"] == 64 * 1024**2
        assert worker["accelerators"] == {"GPU": ["0"]}


def test_default_pool_fills_the_cluster_for_the_spec(tmp_path: Path) -> None:
    """No worker count: as many actors as the node fits (1 GPU / 0.25 per worker = 4), never more than items."""
    evaluator = RayEvaluator(benchmark=ToyBenchmark(n_tasks=10), solution_func=calculator, num_cpus=0, num_gpus=0.25,
                             storage=FileEvaluatorStorage(str(tmp_path / "run")), show=False)
    asyncio.run(evaluator.run())
    assert evaluator.executor.size == 4


def test_spec_no_node_can_hold_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """A spec no node fits is refused before --force deletes anything; a finished run resumes without the check
    (nothing to run, so the executor does not start), and a fresh directory stays uncreated."""
    run = tmp_path / "run"
    asyncio.run(GeneralEvaluator(benchmark=ToyBenchmark(n_tasks=3), solution_func=calculator, show=False,
                                 storage=FileEvaluatorStorage(str(run))).run())
    finished = RayEvaluator(benchmark=ToyBenchmark(n_tasks=3), solution_func=calculator, num_gpus=2,
                            storage=FileEvaluatorStorage(str(run)), show=False)
    assert asyncio.run(finished.run()).completed == 3
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    forced = RayEvaluator(benchmark=ToyBenchmark(n_tasks=3), solution_func=calculator, num_gpus=2, force=True,
                          storage=FileEvaluatorStorage(str(run)), show=False)
    with pytest.raises(ConfigError, match="no node of the Ray cluster has the resources of one worker"):
        asyncio.run(forced.run())
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    fresh = RayEvaluator(benchmark=ToyBenchmark(n_tasks=2), solution_func=calculator, num_gpus=2,
                         storage=FileEvaluatorStorage(str(tmp_path / "fresh")), show=False)
    with pytest.raises(ConfigError, match="no node of the Ray cluster"):
        asyncio.run(fresh.run())
    assert not (tmp_path / "fresh").exists()


@pytest.mark.parametrize("held", ["GPU", "custom"])
def test_resources_another_job_holds_are_named_while_waiting_and_the_wait_is_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: str) -> None:
    """The cluster fits the spec on paper, but another job holds the resource now (the GPU; a neighbour: both units
    of a custom resource): the driver warns at sizing, says every WAIT_LOG_S what the workers wait for and what is
    free, and past --placement-timeout stops with one line (exit 2: nothing written). Once the holder lets go, the
    same run finishes."""
    import ray

    from runner.core.errors import ResourcesBusy
    from runner.engine.pool import pool as pool_module

    monkeypatch.setattr(pool_module, "WAIT_LOG_S", 0.5)
    wants = {"num_gpus": 1} if held == "GPU" else {"resources": {"custom": 2}}
    holder = ray.remote(**({"num_gpus": 1} if held == "GPU" else {"resources": {"custom": 2}}))(
        ray_solutions.Holder).remote()
    ray.get(holder.ready.remote())
    run = tmp_path / "run"

    def evaluator(bound: float = 2) -> RayEvaluator:
        return RayEvaluator(benchmark=ToyBenchmark(n_tasks=3), solution_func=calculator, placement_timeout=bound,
                            storage=FileEvaluatorStorage(str(run)), show=False, **wants)

    try:
        with structlog.testing.capture_logs() as logs, pytest.raises(ResourcesBusy) as stopped:
            asyncio.run(evaluator().run())
    finally:
        ray.kill(holder)
    amount = "GPU=1" if held == "GPU" else "custom=2"
    message = str(stopped.value)
    assert message.startswith(f"no Ray worker got the resources it asks for (CPU=1, {amount}) within "
                              "--placement-timeout 2 s; free now: CPU=") and f"{amount[:-1]}0" in message
    assert "nothing was written" in str(stopped.value) and not run.exists()
    [busy] = [entry for entry in logs if entry["event"] == "ray.resources_busy"]
    assert (busy["fit_total"], busy["fit_free_now"]) == (1, 0)
    waiting = [entry for entry in logs if entry["event"] == "pool.waiting"]
    assert len(waiting) >= 2 and waiting[0]["unplaced"] == 1 and amount in waiting[0]["detail"]
    name, total = amount.split("=")
    deadline = time.monotonic() + 30
    while ray.available_resources().get(name, 0) < float(total) and time.monotonic() < deadline:
        time.sleep(0.1)  # the killed holder's resources come back
    assert asyncio.run(evaluator(bound=120).run()).completed == 3


def test_memory_storage_is_refused_on_ray() -> None:
    """Workers are other processes: a memory:// store would lose every record, so the run refuses it."""
    evaluator = RayEvaluator(benchmark=ToyBenchmark(n_tasks=2), solution_func=calculator, show=False,
                             storage=ResultStore("memory://ray-refused"))
    with pytest.raises(ConfigError, match=r"memory://ray-refused.*--sequential, a path, or shared storage"):
        asyncio.run(evaluator.run())
    assert evaluator.storage.read_manifest() is None


def test_more_workers_than_the_cluster_fits_run_on_those_that_start(tmp_path: Path) -> None:
    """5 one-CPU workers on 2 CPUs: the run finishes on the workers Ray starts, with a ray.workers_pending warning."""
    evaluator = RayEvaluator(benchmark=ToyBenchmark(n_tasks=10), solution_func=calculator, max_workers=5,
                             storage=FileEvaluatorStorage(str(tmp_path / "run")), show=False)
    with structlog.testing.capture_logs() as logs:
        summary = asyncio.run(evaluator.run())
    assert summary.completed == 10
    assert sorted(records(evaluator.storage)) == [(f"toy-{i:03d}", 0) for i in range(10)]
    assert evaluator.executor.size == 5
    assert 1 <= len(evaluator.executor.workers) <= 2
    pending = [entry for entry in logs if entry["event"] == "ray.workers_pending"]
    assert [(entry["workers"], entry["fit_now"]) for entry in pending] == [(5, 2)]


def test_worker_deaths_solution_errors_and_timeouts(tmp_path: Path) -> None:
    """Workers killed by the solution (os._exit) are replaced and their items retried with the attempt counted;
    an item that kills every worker becomes a WorkerDied record after max_attempts; a solution exception is an error
    record at once (executed once); a timeout is a timeout record. Exactly one record per item."""
    log = tmp_path / "executions.txt"
    evaluator = RayEvaluator(
        benchmark=ToyBenchmark(n_tasks=12),
        solution_func=SolutionSpec(ray_solutions.faulty, {"log": str(log)}),
        storage=FileEvaluatorStorage(str(tmp_path / "run")),
        max_workers=2,
        max_attempts=3,
        timeout=1.0,
        show=False,
    )
    summary = asyncio.run(evaluator.run())
    stored = records(evaluator.storage)
    assert sorted(stored) == [(f"toy-{i:03d}", 0) for i in range(12)]
    status = {task_id: r.status for (task_id, _), r in stored.items()}
    assert status == {
        **{f"toy-{i:03d}": "ok" for i in range(12)},
        "toy-003": "error",
        "toy-005": "error",
        "toy-007": "timeout",
    }
    for index in (0, 4, 8):
        assert stored[(f"toy-{index:03d}", 0)].attempt >= 2
    died = stored[("toy-005", 0)]
    assert (died.attempt, died.error.type) == (3, "WorkerDied")
    assert stored[("toy-003", 0)].error.type == "ValueError"
    lines = [line.split() for line in log.read_text().splitlines()]
    executions = Counter(task_id for task_id, _, _ in lines)
    # Its exception is an error record at once: it is never retried for raising (each attempt ran at most once). A
    # later attempt exists only when a crashing item killed its worker before it ran, or before its record was
    # written (record writes overlap the next solution call).
    attempts_of_3 = [int(a) for task_id, _, a in lines if task_id == "toy-003"]
    assert len(attempts_of_3) == len(set(attempts_of_3)) and max(attempts_of_3) == stored[("toy-003", 0)].attempt
    # Retries run alone, so attempts 2 and 3 of task 5 surely ran; attempt 1 may have been lost unstarted, queued
    # behind another crashing item.
    assert {int(a) for task_id, _, a in lines if task_id == "toy-005"} >= {2, 3}
    assert executions["toy-005"] <= 3
    # Every execution that called os._exit is one dead worker the executor saw and replaced.
    kills = [1 for task_id, _, a in lines if task_id == "toy-005" or (task_id in ("toy-000", "toy-004", "toy-008")
                                                                      and a == "1")]
    assert evaluator.executor.deaths == len(kills)
    assert summary.errors == 3


def test_solution_retries_retry_on_a_pristine_task(tmp_path: Path) -> None:
    """With solution_retries, a solution that raises once per task succeeds on its retry, which gets an unchanged
    task."""
    evaluator = RayEvaluator(benchmark=ToyBenchmark(n_tasks=6), solution_func=SolutionSpec(ray_solutions.flaky),
                             storage=FileEvaluatorStorage(str(tmp_path / "run")), max_workers=1, solution_retries=1,
                             show=False)
    summary = asyncio.run(evaluator.run())
    assert summary.score == 1.0
    assert {r.status for r in records(evaluator.storage).values()} == {"ok"}


def test_sequential_and_ray_give_the_same_records_and_summary(tmp_path: Path) -> None:
    """For a deterministic solution the records (task positions included) and summary.json agree, timings, run ids
    and workers aside."""
    benchmark = ToyBenchmark(n_tasks=25)
    sequential = GeneralEvaluator(benchmark=benchmark, n_repeat=2, solution_func=calculator, show=False,
                                  storage=FileEvaluatorStorage(str(tmp_path / "sequential")))
    distributed = RayEvaluator(benchmark=benchmark, n_repeat=2, solution_func=calculator, show=False, max_workers=2,
                               storage=FileEvaluatorStorage(str(tmp_path / "ray")))
    asyncio.run(sequential.run())
    asyncio.run(distributed.run())

    def comparable(store: ResultStore) -> dict[tuple[str, int], dict[str, Any]]:
        volatile = {"run_id", "started_at", "finished_at", "timings", "worker", "write_id"}
        return {key: r.model_dump(exclude=volatile) for key, r in records(store).items()}

    assert len(comparable(sequential.storage)) == 50
    # each record knows its task's position in the benchmark, carried through the Ray worker as through --sequential
    assert {key: r.task_index for key, r in records(distributed.storage).items()} == {
        (f"toy-{i:03d}", repeat): i for i in range(25) for repeat in (0, 1)}
    assert comparable(sequential.storage) == comparable(distributed.storage)

    def summary(path: Path) -> dict[str, Any]:
        data = json.loads((path / "summary.json").read_text())
        timing = {"run_id", "duration_s", "item_seconds", "latency", "latency_by_category"}
        return {k: v for k, v in data.items() if k not in timing}

    assert summary(tmp_path / "sequential") == summary(tmp_path / "ray")
