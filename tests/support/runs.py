"""Run directories written through the store API, for report and compare tests (no solution runs)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runner.core.record import ErrorInfo, MetricRecord, TaskRecord, Timings
from runner.storage import BenchmarkInfo, ResultStore, RunManifest


def make_record(
    task: str, repeat: int, metrics: dict[str, Any], category: str | None = None, **fields: Any,
) -> TaskRecord:
    """A record of (``task``, ``repeat``) with numerical ``metrics`` (name -> value; an exception instance stands for a
    metric that raised); ``fields`` override any other record field (``status``, ``input``, ``timings``...)."""
    records = [
        MetricRecord(name=name, error=ErrorInfo(type=type(value).__name__, message=str(value)))
        if isinstance(value, Exception) else MetricRecord(name=name, result=value)
        for name, value in metrics.items()
    ]
    data: dict[str, Any] = {
        "run_id": "r", "task_id": task, "repeat": repeat, "status": "ok", "metrics": records,
        "tags": {"category": category} if category else {},
        "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:01+00:00",
        "timings": Timings(solution_s=0.5, total_s=0.6),
    }
    data.update(fields)
    return TaskRecord(**data)


def write_run(
    uri: str,
    records: Iterable[TaskRecord],
    *,
    benchmark: str = "demo",
    version: str | None = "1",
    n_tasks: int | None = None,
    n_repeats: int = 1,
    solution: str = "a",
    model: str | None = None,
    fingerprint_extra: dict[str, Any] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> ResultStore:
    """Write a run manifest and ``records`` at ``uri``; returns its store."""
    store = ResultStore(uri, storage_options)
    fields = {"benchmark": benchmark, "benchmark_args": {}, "solution": solution, "solution_args": {}, "model": model,
              **(fingerprint_extra or {})}
    store.write_manifest(RunManifest(
        run_id=f"run-{solution}", fingerprint=repr(sorted(fields.items())), fingerprint_fields=fields,
        benchmark=BenchmarkInfo(name=benchmark, version=version, n_tasks=n_tasks), n_repeats=n_repeats,
        config={"benchmark": benchmark, "solution": solution, "model": model}, runner_version="0",
    ))
    for record in records:
        store.write_record(record)
    return store
