"""How far a run is: its manifest, one listing of its records, its lease and its ``progress.json``, read into one
:class:`RunStatus` that ``python -m runner status`` prints and a Python user gets from :func:`run_status`.

Example::

    from runner import run_status
    status = run_status("s3://evals/runs/toy")
    status.data["done"], status.data["expected"], status.data["driver"]
    print("\\n".join(status.lines))
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from runner.core.benchmark import BenchmarkBase
from runner.core.errors import ConfigError, RunnerError, one_line
from runner.registry import RUN_MODEL_ARGS, build_benchmark
from runner.report.scope import PlanScope, count_stored
from runner.report.summary import scope_notes
from runner.storage.lease import Lease, read_lease
from runner.storage.manifest import RunManifest
from runner.storage.store import PROGRESS_FILE, ResultStore


@dataclass(frozen=True)
class RunStatus:
    """A run's status.

    Args:
        data: JSON-ready fields: ``run_id``, ``benchmark``, ``storage``, ``done`` and ``expected`` items (the plan's
            record files), ``fraction``, ``complete``, ``outside_plan`` (record files the plan does not have),
            ``task_ids_checked``, ``duplicate_tasks``, ``summary`` (whether summary.json exists), ``updated_at``,
            ``driver`` (the lease's owner: host, pid, state...; ``None``: no driver holds the run), ``progress``
            (the driver's latest ``progress.json`` with ``age_s``, its age in seconds), ``stopped_by`` (``budget``
            when the run's budget stopped it with items left, else ``None``).
        lines: the same for people, one line each.
    """

    data: dict[str, Any]
    lines: list[str]

    @property
    def executing(self) -> bool:
        """Whether a driver holds the run and has not said it ended."""
        return self.data["driver"] is not None and (self.data.get("progress") or {}).get("state") != "ended"


def rebuild_benchmark(manifest: RunManifest) -> tuple[BenchmarkBase | None, str | None]:
    """The run's benchmark rebuilt from ``run.json``'s configuration, or ``None`` and why not (a run of the Python
    API names no built-in benchmark; its data may be missing here)."""
    config = manifest.config
    if not config.get("benchmark"):
        return None, "run.json names no benchmark"
    try:
        return build_benchmark(config["benchmark"], config.get("benchmark_args"), config.get("data_dir"),
                               run_models={name: config.get(name) for name in RUN_MODEL_ARGS}), None
    except RunnerError as exc:
        return None, str(exc)


def run_status(store: ResultStore | str, storage_options: dict[str, Any] | None = None,
               benchmarks: dict[str, tuple[BenchmarkBase | None, str | None]] | None = None) -> RunStatus:
    """The status of the run at ``store`` (a :class:`ResultStore`, or a URI with ``storage_options``).

    Counts the records of the current plan, as the report does (:mod:`runner.report.scope`): record files of task
    ids the run's benchmark does not have are left out when the benchmark can be rebuilt here from ``run.json``;
    records are read only when the run's limit was lowered below one an earlier run used, to tell the tasks past
    it. Says which driver owns the run (``lease.json``) and whether its lease is alive, what that driver last said
    (``progress.json``: rate, ETA, running means) and how long ago, and whether the budget stopped the run.

    Args:
        store: the run.
        storage_options: for a URI, the fsspec options of its filesystem.
        benchmarks: a cache of rebuilt benchmarks by run id, kept by a caller that asks again (``status --watch``).

    Raises:
        ConfigError: no run at that URI.
        StorageError: the store cannot be read.
    """
    if isinstance(store, str):
        store = ResultStore(store, storage_options or {})
    manifest = store.read_manifest()
    if manifest is None:
        raise ConfigError(f"no run at {store.uri} (no run.json); check the URI")
    benchmarks = benchmarks if benchmarks is not None else {}
    if manifest.run_id not in benchmarks:
        benchmarks[manifest.run_id] = rebuild_benchmark(manifest)
    benchmark, problem = benchmarks[manifest.run_id]
    scope = PlanScope.of(manifest, benchmark)
    stored = count_stored(store, scope)
    done = stored.done
    n_tasks = manifest.benchmark.n_tasks
    expected = (n_tasks - manifest.benchmark.duplicate_tasks) * manifest.n_repeats if n_tasks is not None else None
    complete = expected is not None and done >= expected
    has_summary = store.read_file("summary.json") is not None
    owner = read_lease(store)
    progress = read_progress(store)
    budget = ((progress or {}).get("spent") or {}) if progress is not None else {}
    stopped_by = "budget" if budget.get("reached") and not complete and owner is None else None
    data = {
        "run_id": manifest.run_id,
        "benchmark": manifest.benchmark.name,
        "storage": store.uri,
        "done": done,
        "expected": expected,
        "fraction": round(done / expected, 4) if expected else None,
        "complete": complete,
        "outside_plan": sum(stored.outside.values()),
        "task_ids_checked": scope.task_keys is not None,
        "duplicate_tasks": manifest.benchmark.duplicate_tasks,
        "summary": has_summary,
        "updated_at": manifest.updated_at,
        "driver": owner.describe() if owner is not None else None,
        "progress": progress,
        "stopped_by": stopped_by,
    }
    share = f" ({100 * done / expected:.1f}%)" if expected else ""
    state = "complete" if complete else "incomplete"
    lines = [f"{manifest.benchmark.name} run {manifest.run_id}: {done}/{expected if expected is not None else '?'} "
             f"items{share}, {state}; summary.json {'present' if has_summary else 'absent'} ({store.uri})",
             driver_line(owner)]
    if stopped_by == "budget":
        lines.append(f"stopped: the run's budget is spent ({budget.get('line') or 'see progress.json'}); the same "
                     "command with a larger --max-tokens / --max-cost resumes")
    if progress is not None:
        lines.append(progress_line(progress))
    notes = scope_notes(scope, stored.outside, manifest.benchmark.duplicate_tasks)
    if scope.task_keys is None and expected is not None and done > expected:
        why = problem or "its tasks cannot be read here"
        notes.append(f"{done - expected} more record files than items: some are of task ids the plan does not "
                     f"have, which cannot be told apart without the run's benchmark ({why})")
    lines += [f"note: {note}" for note in notes]
    return RunStatus(data, lines)


def read_progress(store: ResultStore) -> dict[str, Any] | None:
    """The run's ``progress.json`` with ``age_s`` (seconds since its driver wrote it), or ``None`` without one (or
    an unreadable one)."""
    data = store.read_file(PROGRESS_FILE)
    if data is None:
        return None
    try:
        progress = json.loads(data)
        written = datetime.fromisoformat(progress["updated_at"])
    except (ValueError, KeyError, TypeError):
        return None
    progress["age_s"] = round((datetime.now(timezone.utc) - written).total_seconds(), 1)
    return progress


def progress_line(progress: dict[str, Any]) -> str:
    """What the driver last said, in one line: counts, rate, ETA and the headline metric's running mean."""
    parts = [f"{progress.get('done')}/{progress.get('total') if progress.get('total') is not None else '?'} items "
             f"this invocation", f"errors {progress.get('errors', 0)}"]
    if progress.get("rate") is not None:
        parts.append(f"{progress['rate']:g} items/s")
    if progress.get("eta_s") is not None and progress.get("state") == "running":
        parts.append(f"ETA {progress['eta_s']:.0f} s")
    headline = progress.get("headline")
    metric = (progress.get("metrics") or {}).get(headline) if headline else None
    if metric:
        interval = metric.get("ci95")
        bounds = f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else ""
        parts.append(f"{headline} {metric['mean']:.3f}{bounds} (n {metric['n']})")
    return (f"progress ({progress.get('state', '?')}, written {progress['age_s']:.0f} s ago): " + ", ".join(parts))


def driver_line(owner: Lease | None) -> str:
    """Who drives the run, in one line: no driver, a live one, or one whose lease lapsed, with how the run goes on
    (:func:`runner.storage.lease.acquire`'s rules)."""
    if owner is None:
        return "driver: none (no driver holds the run)"
    state = owner.state()
    if state == "driver gone":
        return (f"driver: {owner.owner()}, its process is gone (killed); the same command on this host resumes "
                "(it takes the lease over)")
    if state == "alive":
        return (f"driver: {owner.owner()}, alive (last heartbeat {owner.heartbeat_at}, lease until "
                f"{owner.expires_at})")
    return (f"driver: {owner.owner()}, its lease expired at {owner.expires_at} (killed, or cut off from the "
            "storage); if it no longer runs, the same command with --take-over resumes")


def is_matrix(uri: str, storage_options: dict[str, Any] | None = None) -> bool:
    """Whether ``uri`` is an evaluation matrix's root (it holds ``matrix.json`` and no ``run.json``).

    Raises:
        StorageError: the store cannot be read.
    """
    from runner.storage.store import MATRIX_FILE

    store = ResultStore(uri, storage_options or {})
    return store.read_file(MATRIX_FILE) is not None and store.read_manifest() is None


def matrix_status(store: ResultStore | str, storage_options: dict[str, Any] | None = None,
                  benchmarks: dict[str, tuple[BenchmarkBase | None, str | None]] | None = None) -> RunStatus:
    """The status of the evaluation matrix at ``store``: each cell's progress (:func:`run_status` of its run),
    its status in ``matrix.json``, and the matrix's totals. ``data``: ``matrix_id``, ``storage``, ``done``,
    ``expected``, ``complete``, ``executing`` (a driver holds some cell), and ``cells`` (path -> the cell's
    status data, with ``status`` from ``matrix.json``).

    Raises:
        ConfigError: no matrix at that URI.
        StorageError: the store cannot be read.
    """
    from runner.storage.matrix_manifest import read_matrix

    if isinstance(store, str):
        store = ResultStore(store, storage_options or {})
    manifest = read_matrix(store)
    if manifest is None:
        raise ConfigError(f"no matrix at {store.uri} (no matrix.json); check the URI")
    cells: dict[str, Any] = {}
    lines = []
    done = expected = 0
    known = True
    driver = None
    for entry in manifest.cells:
        cell_store = store.child(entry.path)
        if cell_store.read_manifest() is None:
            cells[entry.path] = {"status": entry.status, "done": 0, "expected": None}
            lines.append(f"  {entry.path}: {entry.status}, not started")
            known = False
            continue
        status = run_status(cell_store, benchmarks=benchmarks)
        cells[entry.path] = {**status.data, "status": entry.status}
        if entry.status != "stale":  # a checkpoint's old weights: kept, out of the matrix's totals
            done += status.data["done"]
            if status.data["expected"] is None:
                known = False
            else:
                expected += status.data["expected"]
        driver = driver or status.data["driver"]
        stated = "executing" if status.executing else entry.status
        shown = f"{status.data['done']}/{status.data['expected'] if status.data['expected'] is not None else '?'}"
        note = f" ({one_line(entry.error, 120)})" if entry.error and entry.status != "done" else ""
        lines.append(f"  {entry.path}: {shown} items, {stated}{note}")
    complete = known and done >= expected and all(entry.status in ("done", "stale") for entry in manifest.cells)
    stale = sum(1 for entry in manifest.cells if entry.status == "stale")
    kept = f" (and {stale} stale, of weights since rewritten: not counted)" if stale else ""
    head = (f"matrix {manifest.matrix_id}: {len(manifest.cells) - stale} cells{kept}, "
            f"{done}/{expected if known else '?'} items, {'complete' if complete else 'incomplete'} ({store.uri})")
    data = {"matrix_id": manifest.matrix_id, "storage": store.uri, "done": done,
            "expected": expected if known else None, "complete": complete, "driver": driver, "cells": cells,
            "progress": {"state": "running" if driver else "ended"}}
    return RunStatus(data, [head, driver_line(None) if driver is None else "a driver runs the matrix", *lines])
