"""One run from start to end: prepare the benchmark, take the run's lease, open or resume the run directory, plan,
execute, release the lease.

Both the sequential and the Ray executor plug in here; the report is built by the caller afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import functools
import itertools
import os
import re
import time
from collections.abc import Awaitable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from runner import registry
from runner._version import __version__
from runner.core.config import RunSettings, fingerprint
from runner.core.errors import BenchmarkError, BudgetExhausted, FingerprintMismatch, RunStopped, StorageError
from runner.core.secrets import redact
from runner.engine.run_context import RunContext
from runner.engine.lease_keeper import LeaseKeeper
from runner.engine.plan import Plan, WorkItem
from runner.engine import progress as progress_module
from runner.engine.progress import Progress
from runner.engine.request import RunRequest
from runner.traffic.control import TrafficControl
from runner.storage import lease
from runner.storage.manifest import BenchmarkInfo, RunManifest, describe_difference, new_run_id, utc_now
from runner.storage.probe import check_conditional_writes
from runner.storage.store import PROGRESS_FILE, ResultStore, runs_written

if TYPE_CHECKING:
    from runner.storage.compaction import Compactor


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

    async def start(self, context: RunContext, traffic: TrafficControl, expected_items: int | None) -> None:
        """Get ready to run ``expected_items`` items (``None``: unknown), or refuse: nothing is written yet. The
        items' model calls go through ``traffic`` (the run's :class:`~runner.traffic.control.TrafficControl`), whose
        state the executor may move elsewhere (:meth:`TrafficControl.use`: a Ray run's limiter actor).

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

    def details(self) -> dict[str, Any]:
        """What the progress log and ``progress.json`` show of the executor: ``replicas`` (``ready`` and
        ``starting``) when the run serves models; empty otherwise."""
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


def _prepare(request: RunRequest) -> None:
    """The checks of a run's inputs that need no storage: prepare the benchmark and bind the default run URI (the
    solution was checked when the request was built, :meth:`RunRequest.from_config`).

    Raises:
        BenchmarkError: from preparing the benchmark.
    """
    request.benchmark.prepare()
    request.store.bind_default(default_run_uri(request.benchmark.name))


def _check_run(request: RunRequest) -> _Opening:
    """Every read-only check of the run directory (under the run's lease); the manifest to write if they pass.

    Raises:
        FingerprintMismatch: the directory holds a run of another configuration (and ``force`` is off).
        StorageError: the store cannot be reached.
    """
    benchmark, store, settings = request.benchmark, request.store, request.settings
    fields = {**request.fingerprint_fields, "benchmark_version": benchmark.version}
    digest = fingerprint(fields)
    existing = store.read_manifest()
    if existing is not None and existing.fingerprint != digest and not settings.force:
        raise FingerprintMismatch(
            f"{store.uri} holds a run of another configuration "
            f"({describe_difference(existing.fingerprint_fields, redact(fields))}); "
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
    """Take the run's lease, open (or resume) the run and execute every item that has no record yet.

    The order keeps bad input from touching stored results: the executor's :meth:`Executor.preflight`, the run's
    models (:meth:`RunRequest.preflight`) and the checks that need no storage; the probe of the store's conditional writes
    (:func:`~runner.storage.probe.check_conditional_writes`) and the run's lease (:mod:`runner.storage.lease`: a
    second driver is refused here); every read-only check of the run directory (fingerprint, the listing of finished
    items); then, if there is work, the executor's :meth:`Executor.start` (an embedded Ray starts, the pool is sized,
    the solution is built, or the executor refuses); only then ``force`` deletes earlier records, ``rerun_failed``
    retires failed ones, ``run.json`` is written and items run. A refusal up to there releases the lease and leaves
    a new local run directory as it found it: absent.

    Args:
        request: what to run.
        executor: who runs it; default: ``request.executor``, else the one ``request.settings.executor`` names
            (:func:`make_executor`).

    Model traffic goes through the run's :class:`~runner.traffic.control.TrafficControl` (limits, budget, response
    cache); its final state is written to ``limits.json``.

    Raises:
        RunnerError: bad input, before anything is written (``LeaseHeld``: another driver owns the run;
            ``BenchmarkError``: among others, a benchmark that yields no tasks).
        RunStopped: a fault after writing started: the storage stayed down past ``storage_outage``
            (``StorageOutage``), another driver took the run over (``LeaseLost``), or the store failed otherwise;
            finished records stay, and the same command resumes.
        BudgetExhausted: the run's budget was reached with items left: no new item started, items in flight were
            written (the same request with a larger budget resumes). A run whose last item reaches it ends as usual.
    """
    settings, store = request.settings, request.store
    executor = executor or request.executor or make_executor(settings)
    executor.preflight()
    await asyncio.to_thread(request.preflight)  # the model layer's check runs an event loop of its own
    _prepare(request)
    store.outage_s = settings.storage_outage
    check_conditional_writes(store, settings.allow_overwriting_store)
    created = _new_folders(store.root) if store.is_local else []
    keeper = LeaseKeeper(store, lease.acquire(store, settings.lease_ttl, settings.take_over))
    keeper.start()
    try:
        return await _execute_owned(request, executor, keeper)
    finally:
        keeper.stop()
        # Removed only while empty (the run was refused before it wrote anything), deepest first, and only the
        # folders this run created (./runs of a default run directory included).
        for folder in created:
            with contextlib.suppress(OSError):
                os.rmdir(folder)


def _new_folders(path: str) -> list[str]:
    """The folders of ``path`` and its parents that do not exist yet, deepest first."""
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


@dataclass
class _Planned:
    """What a run will execute, decided before the executor starts: the plan, its gated items (``first`` taken
    from them, ``None`` when there is nothing to run), the items expected, those already done, the failed items
    to run again, and the run's traffic control."""

    plan: Plan
    items: Iterator[WorkItem]
    first: WorkItem | None
    expected: int | None
    already_done: int
    failed: set[tuple[str, int]]
    traffic: TrafficControl


def _plan_run(request: RunRequest, opening: _Opening) -> _Planned:
    """The run's plan: every item without a record (or with an error record, with ``rerun_failed``), gated by the
    run's traffic control (a spent budget hands out no item).

    Raises:
        BenchmarkError: the benchmark yields no task at all.
    """
    settings, store = request.settings, request.store
    done = set() if opening.clear else store.done_items()
    failed = store.failed_items() if settings.rerun_failed and done else set()
    resumable = done - failed
    # Records of tasks past a lowered limit are counted too (their positions are known only inside the records).
    already_done = sum(1 for _, repeat in resumable if repeat < settings.repeats)
    plan = Plan(request.benchmark, settings.repeats, settings.limit, resumable)
    traffic = TrafficControl.for_run(settings, store, kept=resumable)
    items = traffic.gate(iter(plan))
    first = next(items, None)
    if first is None and plan.exhausted and plan.n_tasks == 0:
        raise BenchmarkError(
            f"the benchmark {request.benchmark.name!r} yielded no tasks, so there is nothing to run; nothing was "
            "written; check its data and arguments (--data-dir, -B)")
    return _Planned(plan, items, first, plan.expected_items(), already_done, failed, traffic)


def _open_run(request: RunRequest, opening: _Opening, planned: _Planned, executor: Executor) -> None:
    """The run's first writes, once the executor has started: earlier records dropped (``force``), failed ones
    retired (``rerun_failed``), ``run.json`` written; then the ``run.start`` line."""
    store, log = request.store, structlog.get_logger("runner")
    if opening.clear:
        store.clear()
    if planned.failed:
        store.retire(planned.failed)
        log.info("run.rerun_failed", retired=len(planned.failed), detail="error and timeout records moved to retired/")
    store.write_manifest(opening.manifest)
    log.info("run.start", benchmark=request.benchmark.name, storage=store.uri, executor=executor.name,
             repeats=request.settings.repeats, already_done=planned.already_done, to_run=planned.expected)


def _progress(request: RunRequest, planned: _Planned, executor: Executor, run_id: str,
              compactor: Compactor | None) -> Progress:
    """The run's :class:`Progress`: counts, bar, heartbeat, ``progress.json``, and the compactor's feed."""
    return Progress(planned.expected, bar=request.progress_bar,
                    details=lambda: {**planned.traffic.progress_fields(), **executor.details()},
                    heartbeat_s=progress_module.HEARTBEAT_S,  # read here, so a test can shorten it
                    headline=request.benchmark.headline_metrics, run_id=run_id,
                    sink=functools.partial(request.store.write_file, PROGRESS_FILE),
                    file_s=progress_module.PROGRESS_FILE_S,
                    on_done=compactor.acknowledged if compactor is not None else None)


async def _execute_owned(request: RunRequest, executor: Executor, keeper: LeaseKeeper) -> RunOutcome:
    """The run, under the lease ``keeper`` renews (see :func:`execute_run`)."""
    opening = _check_run(request)
    manifest = opening.manifest
    keeper.bind_run(manifest.run_id)
    with structlog.contextvars.bound_contextvars(run_id=manifest.run_id):
        started = time.monotonic()
        planned = _plan_run(request, opening)
        first, traffic = planned.first, planned.traffic
        context = RunContext(request.benchmark, request.solution, request.store, manifest.run_id, request.settings,
                             traffic.cache, request.replicas, request.model_environment())
        if first is not None:
            await executor.start(context, traffic, planned.expected)
        try:
            keeper.check()
            _open_run(request, opening, planned, executor)
            compactor = _compactor(request, keeper)
            progress = _progress(request, planned, executor, manifest.run_id, compactor)
            try:
                if first is not None:
                    await _execute_while_owned(
                        executor.execute(itertools.chain([first], planned.items), context, progress), keeper)
            except BaseException:
                if compactor is not None:
                    await asyncio.to_thread(compactor.close)  # the next run's finish adopts what is left
                raise
            finally:
                progress.close()
        finally:
            if first is not None:
                await executor.close()
        if compactor is not None:
            await asyncio.to_thread(compactor.finish)
        traffic.write(request.store)
        _count_tasks(request.store, manifest, planned.plan)
        seconds = time.monotonic() - started
        _finished(planned, progress, seconds)
        return RunOutcome(manifest, progress.done, planned.plan.skipped, progress.errors, seconds)


def _count_tasks(store: ResultStore, manifest: RunManifest, plan: Plan) -> None:
    """Once the plan saw every task position (so it counted every duplicate task id), ``run.json``'s task counts
    are made its.

    Raises:
        RunStopped: ``run.json`` cannot be written (the same command resumes).
    """
    if not plan.exhausted:
        return
    counted = {"n_tasks": plan.n_tasks, "duplicate_tasks": plan.duplicate_tasks}
    if manifest.benchmark.model_dump(include=set(counted)) != counted:
        manifest.benchmark = manifest.benchmark.model_copy(update=counted)
        try:
            store.write_manifest(manifest)
        except StorageError as exc:
            raise _interrupted(exc) from None


def _finished(planned: _Planned, progress: Progress, seconds: float) -> None:
    """The run's last lines (nothing to do, records of another writer, ``run.finished``), and the stop of a run
    whose budget is spent.

    Raises:
        BudgetExhausted: the budget stopped the run before every item ran.
    """
    log, plan = structlog.get_logger("runner"), planned.plan
    if progress.done == 0 and plan.exhausted:
        log.info("run.nothing_to_do", detail="every item already has a record file; nothing was executed")
    if progress.duplicates:
        log.warning("run.records_of_another_writer", items=progress.duplicates,
                    detail="items whose record another writer had stored when their first attempt ended (kept "
                    "as they were): a process that writes to this storage without the run's lease")
    log.info("run.finished", executed=progress.done, errors=progress.errors,
             duplicate_tasks=plan.duplicate_tasks, written_by_another=progress.duplicates,
             seconds=round(seconds, 3))
    if planned.traffic.stopped and (progress.skipped or not plan.exhausted):
        done = planned.already_done + progress.done
        total = f" of {planned.already_done + planned.expected}" if planned.expected is not None else ""
        raise BudgetExhausted(f"the budget is spent: {planned.traffic.budget_line()}; {done}{total} items are done; "
                              "run the same command with a larger budget to resume")


def _compactor(request: RunRequest, keeper: LeaseKeeper) -> Compactor | None:
    """The run's compactor of result shards (:mod:`runner.storage.compaction`), or ``None``: ``--shards off``, or
    ``auto`` on a local disk or shared filesystem (where a record file costs next to nothing to list and read)."""
    store, mode = request.store, request.settings.shards
    if mode == "off" or (mode == "auto" and (store.is_local or store.is_process_local)):
        return None
    from runner.storage.compaction import Compactor  # pyarrow, loaded only by a run that writes shards

    return Compactor(store, headline=request.benchmark.headline_metrics, check=keeper.check)


async def _execute_while_owned(execution: Awaitable[None], keeper: LeaseKeeper) -> None:
    """Await ``execution``, cancelling it if ``keeper`` loses the lease (then raising ``LeaseLost``).

    Raises:
        LeaseLost: another driver took the run over.
        RunStopped: the store failed after writing started (a ``StorageError`` becomes one, exit status 3).
    """
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(execution)
    keeper.on_lost = lambda: loop.call_soon_threadsafe(task.cancel)
    if keeper.lost is not None:  # lost before on_lost was set: the keeper could not call it
        task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        if keeper.lost is None:
            raise
        raise keeper.lost from None
    except StorageError as exc:
        raise _interrupted(exc) from None
    finally:
        keeper.on_lost = None


def _interrupted(exc: StorageError) -> RunStopped:
    """A storage failure after the run started writing, as a fault (exit status 3) rather than bad input."""
    return RunStopped(f"{exc}; the run stopped after it started writing: the records written so far are kept, "
                      "and the same command resumes once this is fixed")


KEPT = "finished records are kept; run the same command again to resume"
"""What an interrupted run that had written records says of them."""


def runs_started() -> int:
    """How many runs this process has started writing (``run.json`` written): a command notes it before it runs,
    so that :func:`interrupted_line` looks only at the runs it started."""
    return len(runs_written())


def interrupted_line(word: str, since: int = 0) -> str:
    """What an interrupted run says is kept (``word``: ``interrupted`` or ``terminated``): nothing when it stopped
    before writing its ``run.json`` (the preflight, Ray's start), no record when no item had finished, else
    :data:`KEPT`. ``since``: :func:`runs_started` before the command ran (the runs it started writing come
    after)."""
    written = runs_written()[since:]
    if not written:
        return f"{word}: nothing was written; run the same command again"
    try:
        has_records = bool(written[-1].list_record_paths())
    except Exception:  # noqa: BLE001 - the line must be printed whatever the store does now
        has_records = True
    if not has_records:
        return f"{word}: no item had finished, so no record was written; run the same command again to start the run"
    return f"{word}: {KEPT}"
