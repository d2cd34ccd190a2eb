"""One run from start to end: prepare the benchmark, open or resume the run directory, plan, execute.

Both the sequential and the Ray executor plug in here; the report is built by the caller afterwards.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from runner._version import __version__
from runner.core.benchmark import BenchmarkBase
from runner.core.config import fingerprint
from runner.core.errors import FingerprintMismatch
from runner.engine.context import RunContext
from runner.engine.plan import Plan, WorkItem
from runner.engine.progress import Progress
from runner.engine.solution import SolutionSpec
from runner.storage.manifest import BenchmarkInfo, RunManifest, describe_difference, new_run_id, utc_now
from runner.storage.store import ResultStore


class Executor(Protocol):
    """Runs a stream of work items through ``execute_one`` with what ``context`` holds, and feeds ``progress`` one
    acknowledgement per item.

    :func:`execute_run` calls :meth:`start` only when there is work, before anything is written, then (once the run
    directory is opened) :meth:`execute`, and :meth:`close` in every case after a successful :meth:`start`.
    """

    name: str

    async def start(self, context: RunContext, expected_items: int | None) -> None:
        """Get ready to run ``expected_items`` items (``None``: unknown), or refuse: nothing is written yet.

        Raises:
            RunnerError: what this executor cannot run (one line naming the way out).
        """
        ...

    async def execute(
        self,
        items: Iterable[WorkItem],
        context: RunContext,
        progress: Progress,
    ) -> None: ...

    async def close(self) -> None:
        """Release what :meth:`start` took (a Ray this executor started, ...)."""
        ...


@dataclass
class RunRequest:
    """What to run.

    Args:
        benchmark: the benchmark.
        solution: the solution recipe.
        store: the run's store (a default URI is bound if it has none).
        repeats: repeats per task (>= 1).
        limit: only the first ``limit`` tasks.
        timeout: seconds per solution call, or ``None``.
        retry_errors: extra tries when the solution raises.
        force: delete previous records of this run directory first.
        rerun_errors: run again the items whose record is an error or a timeout (their records move to
            ``retired/``).
        fingerprint_fields: what identifies the configuration (see :meth:`RunConfig.fingerprint_fields`).
        config: the configuration to keep in ``run.json`` (never storage options).
        progress_bar: draw a bar (``None``: when stderr is a terminal).
    """

    benchmark: BenchmarkBase
    solution: SolutionSpec
    store: ResultStore
    repeats: int = 1
    limit: int | None = None
    timeout: float | None = None
    retry_errors: int = 0
    force: bool = False
    rerun_errors: bool = False
    fingerprint_fields: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    progress_bar: bool | None = None


@dataclass
class RunOutcome:
    """What a run did: ``executed`` items now, ``skipped`` because they had records, ``errors`` among the executed,
    ``seconds`` of wall time, and the manifest."""

    manifest: RunManifest
    executed: int
    skipped: int
    errors: int
    seconds: float


def default_run_uri(benchmark_name: str) -> str:
    """``./runs/<benchmark>-<UTC timestamp>``, the benchmark name made path-safe."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", benchmark_name).strip("-").lower() or "run"
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"./runs/{slug}-{stamp}"


@dataclass
class _Opening:
    """A run directory checked, not yet touched: the manifest to write and whether earlier records are dropped."""

    manifest: RunManifest
    clear: bool


def _check_run(request: RunRequest) -> _Opening:
    """Every read-only check of the run directory and its inputs; the manifest to write if they pass.

    Raises:
        BenchmarkError, ConfigError: from preparing the benchmark or checking the solution.
        FingerprintMismatch: the directory holds a run of another configuration (and ``force`` is off).
        StorageError: the store cannot be reached.
    """
    benchmark, store = request.benchmark, request.store
    benchmark.prepare()
    request.solution.check()
    store.bind_default(default_run_uri(benchmark.name))
    fields = {**request.fingerprint_fields, "benchmark_version": benchmark.version}
    digest = fingerprint(fields)
    existing = store.read_manifest()
    if existing is not None and existing.fingerprint != digest and not request.force:
        raise FingerprintMismatch(
            f"{store.uri} holds a run of another configuration "
            f"({describe_difference(existing.fingerprint_fields, fields)}); "
            "use another --storage, or --force to delete its records and start over"
        )
    size = benchmark.size()
    n_tasks = min(size, request.limit) if size is not None and request.limit is not None else size
    resumed = existing is not None and not request.force
    widest = request.limit
    if resumed and request.limit is not None:
        previous = existing.benchmark.widest_limit
        widest = None if previous is None else max(previous, request.limit)
    info = BenchmarkInfo(name=benchmark.name, version=benchmark.version, n_tasks=n_tasks, limit=request.limit,
                         widest_limit=widest)
    if resumed:
        manifest = existing.model_copy(
            update={
                "updated_at": utc_now(),
                "benchmark": info,
                "n_repeats": request.repeats,
                "config": request.config,
                "runner_version": __version__,
            }
        )
        return _Opening(manifest, clear=False)
    manifest = RunManifest(
        run_id=new_run_id(),
        fingerprint=digest,
        fingerprint_fields=fields,
        benchmark=info,
        n_repeats=request.repeats,
        config=request.config,
        runner_version=__version__,
    )
    return _Opening(manifest, clear=request.force)


async def execute_run(request: RunRequest, executor: Executor) -> RunOutcome:
    """Open (or resume) the run and execute every item that has no record yet.

    The order keeps bad input from touching stored results: first every read-only check (benchmark, solution,
    fingerprint, the listing of finished items); then, if there is work, the executor's :meth:`Executor.start`
    (an embedded Ray starts, the pool is sized, the solution is built, or the executor refuses); only then
    ``force`` deletes earlier records, ``rerun_errors`` retires failed ones, ``run.json`` is written and items run.

    Raises:
        RunnerError: bad input, before anything is written.
        StorageError: a record cannot be written mid-run (finished records stay; rerun to resume).
    """
    opening = _check_run(request)
    manifest, store = opening.manifest, request.store
    log = structlog.get_logger("runner")
    with structlog.contextvars.bound_contextvars(run_id=manifest.run_id):
        started = time.monotonic()
        done = set() if opening.clear else store.done_items()
        failed = store.failed_items() if request.rerun_errors and done else set()
        resumable = done - failed
        # Counted before the plan, which drops each pair from the set as it skips it; records of tasks past a
        # lowered limit are counted too (their positions are known only inside the records).
        already_done = sum(1 for _, repeat in resumable if repeat < request.repeats)
        plan = Plan(request.benchmark, request.repeats, request.limit, resumable)
        expected = plan.expected_items()
        items = iter(plan)
        first = next(items, None)
        context = RunContext(request.benchmark, request.solution, store, manifest.run_id, request.timeout,
                             request.retry_errors)
        if first is not None:
            await executor.start(context, expected)
        try:
            if opening.clear:
                store.clear()
            if failed:
                store.retire(failed)
                log.info("run.rerun_errors", retired=len(failed),
                         detail="error and timeout records moved to retired/")
            store.write_manifest(manifest)
            log.info(
                "run.start",
                benchmark=request.benchmark.name,
                storage=store.uri,
                executor=executor.name,
                repeats=request.repeats,
                already_done=already_done,
                to_run=expected,
            )
            progress = Progress(expected, bar=request.progress_bar)
            try:
                if first is not None:
                    await executor.execute(itertools.chain([first], items), context, progress)
            finally:
                progress.close()
        finally:
            if first is not None:
                await executor.close()
        if plan.exhausted:
            # Every duplicate position's items were planned and refused (see Plan), so this pass counted them all.
            counted = {"n_tasks": plan.n_tasks, "duplicate_tasks": progress.duplicates // request.repeats}
            if manifest.benchmark.model_dump(include=set(counted)) != counted:
                manifest.benchmark = manifest.benchmark.model_copy(update=counted)
                store.write_manifest(manifest)
        seconds = time.monotonic() - started
        if progress.done == 0:
            log.info("run.nothing_to_do", detail="every item already has a record; nothing was executed")
        if progress.duplicates:
            log.warning("run.duplicates", items=progress.duplicates,
                        detail="items whose record was already written when their first attempt ended: duplicate "
                        "task ids in the benchmark, or another driver writing to this storage; each (task id, "
                        "repeat) keeps one record")
        log.info("run.finished", executed=progress.done, errors=progress.errors, duplicates=progress.duplicates,
                 seconds=round(seconds, 3))
        return RunOutcome(manifest, progress.done, plan.skipped, progress.errors, seconds)
