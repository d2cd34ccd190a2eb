"""One run from start to end: prepare the benchmark, open or resume the run directory, plan, execute.

Both the sequential and the Ray executor plug in here; the report is built by the caller afterwards.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import structlog

from runner import registry
from runner._version import __version__
from runner.core.config import RunSettings, fingerprint
from runner.core.errors import FingerprintMismatch
from runner.engine.context import RunContext
from runner.engine.plan import Plan, WorkItem
from runner.engine import progress as progress_module
from runner.engine.progress import Progress
from runner.engine.request import RunRequest
from runner.storage.manifest import BenchmarkInfo, RunManifest, describe_difference, new_run_id, utc_now


class Executor(Protocol):
    """Runs a stream of work items through ``execute_one`` with what ``context`` holds, and feeds ``progress`` one
    acknowledgement per item.

    Executors are chosen by name from :data:`runner.registry.EXECUTORS` and built with :meth:`from_settings`.
    :func:`execute_run` calls :meth:`preflight` first, :meth:`start` only when there is work, before anything is
    written, then (once the run directory is opened) :meth:`execute`, and :meth:`close` in every case after a
    successful :meth:`start`.
    """

    name: str

    @classmethod
    def from_settings(cls, settings: RunSettings) -> Executor:
        """The executor of a run with ``settings`` (its worker spec, cluster address...)."""
        ...

    def preflight(self) -> None:
        """Check in seconds, starting nothing, what can be checked before the benchmark is prepared (a cluster
        address that does not answer...).

        Raises:
            RunnerError: one line naming the way out.
        """
        ...

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


def make_executor(settings: RunSettings) -> Executor:
    """The executor named by ``settings.executor``, built from the settings.

    Raises:
        ConfigError: an unknown executor name.
    """
    return registry.executor_class(settings.executor).from_settings(settings)


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
    benchmark, store, settings = request.benchmark, request.store, request.settings
    benchmark.prepare()
    request.solution.check()
    store.bind_default(default_run_uri(benchmark.name))
    fields = {**request.fingerprint_fields, "benchmark_version": benchmark.version}
    digest = fingerprint(fields)
    existing = store.read_manifest()
    if existing is not None and existing.fingerprint != digest and not settings.force:
        raise FingerprintMismatch(
            f"{store.uri} holds a run of another configuration "
            f"({describe_difference(existing.fingerprint_fields, fields)}); "
            "use another --storage, or --force to delete its records and start over"
        )
    size = benchmark.size()
    n_tasks = min(size, settings.limit) if size is not None and settings.limit is not None else size
    resumed = existing is not None and not settings.force
    widest = settings.limit
    if resumed and settings.limit is not None:
        previous = existing.benchmark.widest_limit
        widest = None if previous is None else max(previous, settings.limit)
    info = BenchmarkInfo(name=benchmark.name, version=benchmark.version, n_tasks=n_tasks, limit=settings.limit,
                         widest_limit=widest)
    if resumed:
        manifest = existing.model_copy(
            update={
                "updated_at": utc_now(),
                "benchmark": info,
                "n_repeats": settings.repeats,
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
        n_repeats=settings.repeats,
        config=request.config,
        runner_version=__version__,
    )
    return _Opening(manifest, clear=settings.force)


async def execute_run(request: RunRequest, executor: Executor | None = None) -> RunOutcome:
    """Open (or resume) the run and execute every item that has no record yet.

    The order keeps bad input from touching stored results: the executor's :meth:`Executor.preflight`, then every
    read-only check (benchmark, solution, fingerprint, the listing of finished items); then, if there is work, the
    executor's :meth:`Executor.start` (an embedded Ray starts, the pool is sized, the solution is built, or the
    executor refuses); only then ``force`` deletes earlier records, ``rerun_failed`` retires failed ones,
    ``run.json`` is written and items run.

    Args:
        request: what to run.
        executor: who runs it; default: the one ``request.settings.executor`` names (:func:`make_executor`).

    Raises:
        RunnerError: bad input, before anything is written.
        StorageError: a record cannot be written mid-run (finished records stay; rerun to resume).
    """
    settings = request.settings
    executor = executor if executor is not None else make_executor(settings)
    executor.preflight()
    opening = _check_run(request)
    manifest, store = opening.manifest, request.store
    log = structlog.get_logger("runner")
    with structlog.contextvars.bound_contextvars(run_id=manifest.run_id):
        started = time.monotonic()
        done = set() if opening.clear else store.done_items()
        failed = store.failed_items() if settings.rerun_failed and done else set()
        resumable = done - failed
        # Records of tasks past a lowered limit are counted too (their positions are known only inside the records).
        already_done = sum(1 for _, repeat in resumable if repeat < settings.repeats)
        plan = Plan(request.benchmark, settings.repeats, settings.limit, resumable)
        expected = plan.expected_items()
        items = iter(plan)
        first = next(items, None)
        context = RunContext(request.benchmark, request.solution, store, manifest.run_id, settings)
        if first is not None:
            await executor.start(context, expected)
        try:
            if opening.clear:
                store.clear()
            if failed:
                store.retire(failed)
                log.info("run.rerun_failed", retired=len(failed),
                         detail="error and timeout records moved to retired/")
            store.write_manifest(manifest)
            log.info(
                "run.start",
                benchmark=request.benchmark.name,
                storage=store.uri,
                executor=executor.name,
                repeats=settings.repeats,
                already_done=already_done,
                to_run=expected,
            )
            progress = Progress(expected, bar=request.progress_bar, heartbeat_s=progress_module.HEARTBEAT_S)
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
            counted = {"n_tasks": plan.n_tasks, "duplicate_tasks": progress.duplicates // settings.repeats}
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
