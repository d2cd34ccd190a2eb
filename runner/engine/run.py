"""One run from start to end: open its run directory (:class:`~runner.engine.run_directory.RunDirectory`: prepare
the benchmark, take the run's lease, check and list what is done, plan), start the executor, execute, close.

Both the sequential and the Ray executor plug in here; the report is built by the caller afterwards.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from runner import registry
from runner.core.config import RunSettings
from runner.core.errors import StorageError
from runner.engine.lease_keeper import LeaseKeeper
from runner.engine.request import RunRequest
from runner.engine.run_directory import RunDirectory, budget_stop, interrupted
from runner.engine.workload import WorkerSetup, Workload
from runner.storage.manifest import RunManifest
from runner.storage.store import runs_written
from runner.traffic.control import TrafficControl

__all__ = ["Executor", "KEPT", "RunOutcome", "execute_run", "execute_while_owned",
           "interrupted_line", "make_executor", "runs_started"]


class Executor(Protocol):
    """Runs a :class:`~runner.engine.workload.Workload` (a run's items, or a matrix's cells) through ``execute_one``
    and feeds each cell's progress one acknowledgement per item.

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

    async def start(self, setup: WorkerSetup, traffic: TrafficControl, expected_items: int | None) -> None:
        """Get ready to run ``expected_items`` items (``None``: unknown), or refuse: nothing is written yet. Every
        worker gets ``setup`` (the cells it runs from its start, its pinned replicas). The items' model calls go
        through ``traffic`` (the run's :class:`~runner.traffic.control.TrafficControl`), whose state the executor may
        move elsewhere (:meth:`TrafficControl.use`: a Ray run's limiter actor).

        Raises:
            RunnerError: what this executor cannot run (one line naming the way out).
        """
        ...

    async def execute(self, work: Workload) -> None:
        """Run every item of ``work`` (and, while it is open, of the cells added to it)."""
        ...

    async def close(self) -> None:
        """Release what :meth:`start` took (a Ray this executor started, ...)."""
        ...

    def details(self) -> dict[str, Any]:
        """What the progress log and ``progress.json`` show of the executor: ``replicas`` (``ready`` and
        ``starting``) when the run serves models; empty otherwise."""
        ...

    @property
    def loads(self) -> list[dict[str, Any]]:
        """Every model load its workers made for a workload's placed models (empty for a run alone)."""
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


async def execute_run(request: RunRequest, executor: Executor | None = None) -> RunOutcome:
    """Take the run's lease, open (or resume) the run and execute every item that has no record yet.

    The order keeps bad input from touching stored results: the executor's :meth:`Executor.preflight`, the run's
    models (:meth:`RunRequest.preflight`) and the checks that need no storage; the probe of the store's conditional
    writes (:func:`~runner.storage.probe.check_conditional_writes`) and the run's lease (:mod:`runner.storage.lease`: a
    second driver is refused here); every read-only check of the run directory (fingerprint, the listing of finished
    items); then, if there is work, the executor's :meth:`Executor.start` (an embedded Ray starts, the pool is sized,
    the solution is built, or the executor refuses); only then ``force`` deletes earlier records, ``rerun_failed``
    retires failed ones, ``run.json`` is written and items run. A refusal up to there releases the lease and leaves
    a new local run directory as it found it: absent. The run directory's part is
    :class:`~runner.engine.run_directory.RunDirectory`'s.

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
    settings = request.settings
    executor = executor or request.executor or make_executor(settings)
    executor.preflight()
    await asyncio.to_thread(request.preflight)  # the model layer's check runs an event loop of its own
    directory = RunDirectory(request)
    with directory.owned():
        return await _execute_owned(directory, executor)


async def _execute_owned(directory: RunDirectory, executor: Executor) -> RunOutcome:
    """The run, under the lease its directory holds (see :func:`execute_run`)."""
    request = directory.request
    manifest = directory.check()
    with structlog.contextvars.bound_contextvars(run_id=manifest.run_id):
        traffic = TrafficControl.for_run(request.settings, request.store, kept=directory.list_done())
        planned = directory.plan(traffic)
        context = directory.context(traffic)
        if planned.first is not None:
            await executor.start(WorkerSetup.single(context), traffic, planned.expected)
        try:
            progress = directory.begin(executor, traffic)
            try:
                if planned.first is not None:
                    assert directory.keeper is not None
                    work = Workload.single(context, progress, planned.remaining())
                    await execute_while_owned(executor.execute(work), directory.keeper)
            except BaseException:
                await directory.abandon()
                raise
            finally:
                directory.end_progress()
        finally:
            if planned.first is not None:
                await executor.close()
        await directory.finish(traffic)
        directory.finished_lines()
        if traffic.stopped and directory.stopped_by_budget:
            raise budget_stop(traffic, directory.items_line())
        seconds = time.monotonic() - directory.started
        return RunOutcome(manifest, progress.done, planned.plan.skipped, progress.errors, seconds)


async def execute_while_owned(execution: Awaitable[None], *keepers: LeaseKeeper) -> None:
    """Await ``execution``, cancelling it if one of ``keepers`` loses its lease (then raising ``LeaseLost``): a
    run's one keeper, or a matrix's, one per cell.

    Raises:
        LeaseLost: another driver took a run over.
        RunStopped: the store failed after writing started (a ``StorageError`` becomes one, exit status 3).
    """
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(execution)
    for keeper in keepers:
        keeper.on_lost = lambda: loop.call_soon_threadsafe(task.cancel)
        if keeper.lost is not None:  # lost before on_lost was set: the keeper could not call it
            task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        lost = next((keeper.lost for keeper in keepers if keeper.lost is not None), None)
        if lost is None:
            raise
        raise lost from None
    except StorageError as exc:
        raise interrupted(exc) from None
    finally:
        for keeper in keepers:
            keeper.on_lost = None


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
